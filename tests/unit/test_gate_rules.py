"""The gate's pure rules, its scenarios as shipped, and its run record."""

from __future__ import annotations

import msgspec
import pytest

from domain.gate.policies import (
    CHECK_EVIDENCE,
    Check,
    choose_binding,
    evidence_check,
    evidence_scope,
    promotion,
    publication_mode,
    run_check,
    valid_repo,
)
from domain.gate.scenarios import shipped_scenarios
from domain.gate.thread import GateThread
from domain.shared.errors import NotFound
from domain.shared.ids import is_valid_id

BINDINGS = [
    {"repository_key": "assembly", "vcs_repo_slug": "acme/assembly", "repository_type": "assembly"},
    {"repository_key": "backend", "vcs_repo_slug": "acme/api", "repository_type": "application"},
    {"repository_key": "frontend", "vcs_repo_slug": "acme/web", "repository_type": "application"},
]


def test_a_proposal_goes_to_the_agents_lane_else_the_first_lane_else_the_assembly() -> None:
    assert choose_binding(BINDINGS, "frontend")["vcs_repo_slug"] == "acme/web"
    assert choose_binding(BINDINGS, "planner")["vcs_repo_slug"] == "acme/api"
    assert choose_binding(BINDINGS[:1], "backend")["vcs_repo_slug"] == "acme/assembly"
    assert choose_binding([{"repository_key": "x", "vcs_repo_slug": "../etc"}], "") is None
    assert not valid_repo("a/b/c") and not valid_repo("a/..") and valid_repo("acme/api-v2")
    # Identifiers only (C12): no dot, no trailing newline (a ``$`` would have let it through).
    assert not valid_repo("acme/api.v2") and not valid_repo("acme/api\n") and not valid_repo("acme/\x00")


def test_only_the_assembly_repository_is_orchestration() -> None:
    assert evidence_scope("assembly", "") == evidence_scope("", "assembly") == "orchestration"
    assert evidence_scope("application", "backend") == "implementation"
    assert [publication_mode(dry_run=d, publish=p) for d, p in [(True, True), (False, False), (False, True)]] == [
        "dry_run", "preview", "pull_request",
    ]


def test_promotion_needs_a_published_run_whose_checks_all_succeed() -> None:
    ok, neutral, bad = Check("a", "success", "fine"), Check("b", "neutral", "unsure"), Check("c", "failure", "broken")
    assert promotion(published=True, checks=[ok, ok])[0] == "promote"
    assert promotion(published=True, checks=[ok, neutral])[0] == "hold"
    assert promotion(published=False, checks=[ok])[0] == "hold"
    assert promotion(published=True, checks=[ok, neutral, bad]) == ("reject", ["c: broken"])
    assert promotion(published=True, checks=[])[0] == "hold"


def test_the_evidence_check_reads_what_was_committed() -> None:
    expected = {"thread_key": "t", "attempt": 1}
    assert evidence_check(None, expected).conclusion == "failure"
    assert evidence_check(b"not json", expected).conclusion == "failure"
    assert evidence_check(b'{"thread_key": "t", "attempt": 2}', expected).conclusion == "failure"
    check = evidence_check(msgspec.json.encode({"thread_key": "t", "attempt": 1, "more": True}), expected)
    assert (check.name, check.conclusion) == (CHECK_EVIDENCE, "success")


def test_the_run_check_fails_on_a_blocked_agent() -> None:
    run = {"run_id": "r", "status": "running", "sessions": [{"agent_id": "planner", "live_status": "working"}]}
    assert run_check(run).conclusion == "success"
    run["sessions"].append({"agent_id": "tester", "live_status": "blocked"})
    assert run_check(run).conclusion == "failure" and "tester" in run_check(run).summary
    assert run_check(None).conclusion == "neutral"


def test_scenarios_ship_as_data_files_with_probe_steps() -> None:
    catalog = shipped_scenarios()
    assert len(catalog.scenario_keys()) >= 3
    for key in catalog.scenario_keys():
        scenario = catalog.require(key)
        assert is_valid_id(key) and scenario.title and scenario.probe_steps
        assert all(step.action for step in scenario.probe_steps)
    with pytest.raises(NotFound) as missing:
        catalog.require("no-such-scenario")
    assert missing.value.code == "scenario_not_found"


def test_the_run_record_follows_its_steps_and_ends_once() -> None:
    thread = GateThread(tenant="default", thread_key="t", at="2026-01-01T00:00:00.000000Z")
    at = "2026-01-01T00:00:01.000000Z"
    attempt = thread.start_run(
        run_id="run-1", project_slug="acme", repo="acme/api", repository_key="backend",
        repository_type="application", agent_key="backend", engine_key="codex", runner_kind="local_git",
        scenario_key="", proposal_id="p", proposal_key="p", notes="", publish=True, dry_run=False,
        actor="op@example.com", transport_actor="gate[bot]", pr_submission_policy="selective-agent-pr",
        pr_submission_pipeline="gate", pr_submission_actor_agent_key="backend", at=at,
    )
    assert attempt == 1 and thread.record(1)["status"] == "running"
    thread.plan(
        attempt=1, mode="pull_request", branch_name="b", base_branch="main", committed_paths=["x"], pr_title="t",
        pr_body="b", labels=["l"], check_run_names=["c"], artifact_path="x", at=at,
    )
    thread.publish(
        attempt=1, run_id="run-1", repo="acme/api", repository_key="backend", pr_number=3, pr_url="u",
        pr_owner="acme", pr_repo="api", head_sha="h" * 40, merge_sha="m" * 40, github_ref="refs/pull/3/merge",
        author="gate[bot]", at=at,
    )
    thread.check_run(attempt=1, check_run_id=7, name="c", conclusion="success", summary="s", at=at)
    thread.complete(attempt=1, status="published", at=at)
    record = thread.record(1)
    assert (record["status"], record["pr_url"], record["merge_sha"]) == ("published", "u", "m" * 40)
    publication = record["publication"]
    assert publication["transport_actor"] == "gate[bot]" and publication["check_run_ids"] == [7]
    assert publication["pr_submission_actor_agent_key"] == "backend" and publication["head_sha"] == "h" * 40
    with pytest.raises(Exception, match="ended"):
        thread.fail(attempt=1, step="x", error_message="late", at=at)
