"""The gate over HTTP: a real commit in a local bare repository, a recorded pull request,
and the run's feed showing it delivered."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from tests.conftest import ADMIN
from tests.helpers import DEMO_LIKE
from tests.jobs_support import http, service

GATE = "/v1/admin/gate"
IDENTITY = "Squadops Gate <gate-app@apps.example.com>"


@pytest.fixture
def setup(database_url: str, tmp_path: Path) -> Iterator[tuple[TestClient, Path]]:
    with service(database_url, tmp_path, gate_app_identity=IDENTITY) as container, http(container, ADMIN, ("projector",)) as c:
        yield c, tmp_path / "vcs" / "default"  # the default tenant's own repositories


def git(bare: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(bare), *args], capture_output=True, text=True, check=True).stdout.strip()


def launch(client: TestClient, project: dict[str, Any]) -> tuple[str, str]:
    created = client.post("/v1/project-factory/projects", json=project)
    assert created.status_code == 201, created.text
    run = client.post("/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": project["project_key"]})
    assert run.status_code == 201, run.text
    return run.json()["run_id"], run.headers["X-Squadops-Position"]


def feed(client: TestClient, slug: str, run_id: str, position: str) -> dict[str, Any]:
    answer = client.get(
        "/control-plane/studio/observability-feed",
        params={"project_slug": slug, "run_id": run_id},
        headers={"X-Squadops-Min-Position": position},
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_gate_run_commits_publishes_and_the_feed_shows_it_delivered(setup: tuple[TestClient, Path]) -> None:
    client, vcs = setup
    run_id, _ = launch(client, {**DEMO_LIKE, "proposal_id": "proposal-acme"})
    answer = client.post(
        f"{GATE}/threads/{run_id}/run",
        json={"agent_key": "backend", "provider_key": "codex", "scenario_key": "studio-feed-delivery", "notes": "slice 1"},
    )
    assert answer.status_code == 200, answer.text
    record = answer.json()
    assert (record["status"], record["run_id"], record["repo"], record["proposal_id"]) == ("published", run_id, "acme/api", "proposal-acme")
    publication = record["publication"]
    assert publication["transport_actor"] == IDENTITY and publication["mode"] == "pull_request"
    assert publication["pr_submission_actor_agent_key"] == "backend" and publication["pr_submission_pipeline"] == "gate"

    bare = vcs / "acme" / "api.git"
    head = git(bare, "rev-parse", f"refs/heads/{record['branch_name']}")
    assert head == publication["head_sha"] and len(head) == 40
    assert git(bare, "log", "-1", "--format=%an <%ae>|%cn <%ce>", head) == f"{IDENTITY}|{IDENTITY}"
    assert git(bare, "diff-tree", "--no-commit-id", "--name-only", "-r", head).split() == publication["committed_paths"]
    pack = json.loads(git(bare, "show", f"{head}:{record['artifact_path']}"))
    assert (pack["thread_key"], pack["run_id"], pack["scenario"]["scenario_key"]) == (run_id, run_id, "studio-feed-delivery")
    merge = git(bare, "rev-parse", "refs/pull/1/merge")
    assert merge == record["merge_sha"] and record["github_ref"] == "refs/pull/1/merge"
    assert git(bare, "log", "-1", "--format=%P", merge).split() == [git(bare, "rev-parse", "refs/heads/main"), head]

    pull = json.loads((bare / "squadops" / "pulls" / "1.json").read_text())
    assert pull["author"] == IDENTITY and pull["labels"] == publication["labels"]
    assert "agent:backend" in pull["labels"] and "evidence:implementation" in pull["labels"]
    assert [c["id"] for c in pull["check_runs"]] == publication["check_run_ids"]
    assert {c["name"]: c["conclusion"] for c in pull["check_runs"]} == {
        "squadops-gate/evidence": "success", "squadops-gate/scope": "success", "squadops-gate/run": "success",
    }
    assert pull["comments"][0]["body"] == publication["summary_comment"] and publication["comment_url"]
    assert record["promotion_decision"] == "promote" and record["pr_url"] == pull["url"]

    shown = feed(client, "acme", run_id, answer.headers["X-Squadops-Position"])
    assert shown["delivery"]["status"] == "delivered"
    assert (shown["delivery"]["pr_url"], shown["delivery"]["pr_owner"], shown["delivery"]["pr_repo"], shown["delivery"]["pr_number"]) == (
        record["pr_url"], "acme", "api", 1,
    )
    assert shown["evidence"]["proof_count"] == 1 and shown["evidence"]["scope"] == "implementation"
    position = answer.headers["X-Squadops-Position"]
    back_then = client.get(
        "/control-plane/studio/observability-feed",
        params={"project_slug": "acme", "run_id": run_id, "as_of_event": position},
    )
    assert back_then.json() == feed(client, "acme", run_id, position)  # time travel sees the gate too

    runs = client.get(f"{GATE}/threads/{run_id}/runs", headers={"X-Squadops-Min-Position": answer.headers["X-Squadops-Position"]})
    assert runs.json()["items"] == [record]  # the read model folds the same record


def test_a_thread_named_by_its_proposal_finds_the_run_and_assembly_only_is_no_implementation_evidence(
    setup: tuple[TestClient, Path],
) -> None:
    client, vcs = setup
    assembly_only = {
        "project_key": "orch",
        "proposal_id": "proposal-orch",
        "repository_bindings": [{"repository_key": "assembly", "vcs_repo_slug": "orch/assembly", "repository_type": "assembly"}],
    }
    run_id, position = launch(client, assembly_only)
    answer = client.post(f"{GATE}/threads/proposal-orch/run", json={}, headers={"X-Squadops-Min-Position": position})
    record = answer.json()
    assert (answer.status_code, record["run_id"], record["repo"]) == (200, run_id, "orch/assembly")
    assert record["evidence_scope"] == "orchestration" and record["promotion_decision"] == "hold"
    assert git(vcs / "orch" / "assembly.git", "rev-parse", "refs/pull/1/head") == record["publication"]["head_sha"]
    shown = feed(client, "orch", run_id, answer.headers["X-Squadops-Position"])
    assert shown["delivery"]["status"] == "delivered" and shown["delivery"]["pr_repo"] == "assembly"
    assert shown["evidence"]["proof_count"] == 0 and shown["evidence"]["scope"] == "orchestration"


def test_dry_run_writes_nothing_and_publish_false_commits_only_the_branch(setup: tuple[TestClient, Path]) -> None:
    client, vcs = setup
    dry = client.post(f"{GATE}/threads/lonely-thread/run", json={"dry_run": True}).json()
    assert dry["status"] == "dry_run" and dry["publication"]["mode"] == "dry_run" and dry["promotion_decision"] == "hold"
    assert dry["repo"] == "squadops/gate-default" and not (vcs / "squadops").exists()
    branch = client.post(f"{GATE}/threads/lonely-thread/run", json={"publish": False}).json()
    assert (branch["status"], branch["attempt"], branch["pr_url"]) == ("committed", 2, "")
    bare = vcs / "squadops" / "gate-default.git"
    assert git(bare, "rev-parse", f"refs/heads/{branch['branch_name']}") == branch["publication"]["head_sha"]
    assert git(bare, "for-each-ref", "refs/pull") == ""


def test_gate_errors(setup: tuple[TestClient, Path]) -> None:
    client, _ = setup
    found = client.get(f"{GATE}/scenarios/portal-dashboard-smoke")
    assert found.status_code == 200 and found.json()["probe_steps"][0]["action"] == "goto"
    assert found.json()["requires_browser_driver"] is True and "agent_prompt_template" in found.json()
    missing = client.get(f"{GATE}/scenarios/no-such-scenario")
    assert missing.status_code == 404 and missing.json()["code"] == "scenario_not_found"
    unknown = client.post(f"{GATE}/threads/t-1/run", json={"scenario_key": "no-such-scenario"})
    assert unknown.status_code == 404 and unknown.json()["code"] == "scenario_not_found"
    assert client.post(f"{GATE}/threads/bad%20key/run", json={}).status_code == 422
    # A thread key names its branches: one git would read as an option is refused, not a 503.
    dash = client.post(f"{GATE}/threads/-/run", json={})
    assert dash.status_code == 422 and dash.json()["detail"][0]["loc"] == ["path", "thread_key"]
    # So does the tenant (another tenant's branches name it), from the body or the header.
    assert client.post(f"{GATE}/threads/t-1/run", json={"tenant_id": "-"}).json()["detail"][0]["loc"] == ["body", "tenant_id"]
    dashed = client.post(f"{GATE}/threads/t-1/run", json={}, headers={"X-Squadops-Tenant-Id": "-t"})
    assert dashed.status_code == 422 and dashed.json()["detail"][0]["loc"] == ["header", "X-Squadops-Tenant-Id"]
    assert client.post(f"{GATE}/threads/t-1/run", json={"publish": "yes"}).json()["detail"][0]["loc"] == ["body", "publish"]
    person = {"x-edge-claim-email": "dev@example.com", "x-edge-claim-groups": "/org/dev"}
    assert client.post(f"{GATE}/threads/t-1/run", json={}, headers=person).status_code == 403
    assert client.get(f"{GATE}/scenarios/portal-dashboard-smoke", headers={"x-edge-claim-email": ""}).status_code == 401


@pytest.mark.parametrize(
    ("body", "headers", "loc", "type_"),
    [
        ({"tenant_id": ""}, {}, ["body", "tenant_id"], "string_length"),
        ({"tenant_id": "a b"}, {}, ["body", "tenant_id"], "string_pattern_mismatch"),
        ({"tenant_id": "acme"}, {"X-Squadops-Tenant-Id": "other"}, ["body", "tenant_id"], "value_error"),
        ({"agent_key": "back end"}, {}, ["body", "agent_key"], "string_pattern_mismatch"),
        ({"provider_key": "x" * 129}, {}, ["body", "provider_key"], "string_length"),
        ({"scenario_key": "no/such"}, {}, ["body", "scenario_key"], "string_pattern_mismatch"),
        ({"notes": "n" * 4001}, {}, ["body", "notes"], "string_length"),
        ({"dry_run": "no"}, {}, ["body", "dry_run"], "type_error"),
        ([], {}, ["body"], "type_error"),
    ],
)
def test_every_gate_field_rule_is_a_422_that_changes_nothing(
    setup: tuple[TestClient, Path], body: Any, headers: dict[str, str], loc: list[str], type_: str
) -> None:
    client, vcs = setup
    answer = client.post(f"{GATE}/threads/t-rules/run", json=body, headers=headers)
    assert answer.status_code == 422, answer.text
    [item] = answer.json()["detail"]
    assert (item["loc"], item["type"]) == (loc, type_)
    assert client.get(f"{GATE}/threads/t-rules/runs").json() == {"items": []} and not vcs.exists()


def test_a_failing_vcs_is_a_503_and_the_run_records_where_it_failed(sqlite_url: str, tmp_path: Path) -> None:
    (tmp_path / "vcs").write_text("a file where the repositories should be")
    with service(sqlite_url, tmp_path) as container, http(container, ADMIN) as client:
        answer = client.post(f"{GATE}/threads/t-9/run", json={})
        assert answer.status_code == 503 and answer.json()["code"] == "vcs_unavailable"
        while container.runner.run_once():
            pass
        [failed] = client.get(f"{GATE}/threads/t-9/runs").json()["items"]
        assert failed["status"] == "failed" and failed["error_message"].startswith("commit: ")


def test_concurrent_runs_of_one_thread_get_their_own_attempt_branch_and_pull_request(setup: tuple[TestClient, Path]) -> None:
    from concurrent.futures import ThreadPoolExecutor

    client, vcs = setup
    with ThreadPoolExecutor(max_workers=3) as pool:
        records = [a.json() for a in pool.map(lambda _: client.post(f"{GATE}/threads/busy/run", json={}), range(3))]
    assert sorted(r["attempt"] for r in records) == [1, 2, 3]
    assert sorted(int(r["pr_url"].rsplit("/", 1)[1]) for r in records) == [1, 2, 3]
    bare = vcs / "squadops" / "gate-default.git"
    heads = {r["branch_name"]: git(bare, "rev-parse", f"refs/heads/{r['branch_name']}") for r in records}
    assert len(set(heads.values())) == 3 and all(heads[r["branch_name"]] == r["publication"]["head_sha"] for r in records)


def test_threads_of_two_tenants_with_one_key_publish_each_to_its_own_default_repository(
    setup: tuple[TestClient, Path],
) -> None:
    # Two tenants' thread "t-1": the gate's default repository is the service's own, per
    # tenant, so each publishes into its own and neither reaches the other's.
    client, vcs = setup
    first = client.post(f"{GATE}/threads/t-1/run", json={})
    other = client.post(f"{GATE}/threads/t-1/run", json={}, headers={"X-Squadops-Tenant-Id": "acme"})
    assert (first.status_code, other.status_code) == (200, 200), other.text
    a, b = first.json(), other.json()
    assert (a["repo"], b["repo"]) == ("squadops/gate-default", "squadops/gate-default")
    assert (a["branch_name"], b["branch_name"]) == ("squadops/gate/t-1/run-1", "squadops/gate/acme/t-1/run-1")
    mine, theirs = vcs / "squadops" / "gate-default.git", vcs.parent / "acme" / "squadops" / "gate-default.git"
    assert git(theirs, "rev-parse", f"refs/heads/{b['branch_name']}") == b["publication"]["head_sha"]
    assert git(mine, "rev-parse", f"refs/heads/{a['branch_name']}") == a["publication"]["head_sha"]
    assert subprocess.run(["git", "--git-dir", str(mine), "rev-parse", "--verify", "--quiet", f"refs/heads/{b['branch_name']}"],
                          capture_output=True, check=False).returncode != 0
    assert a["pr_url"] != b["pr_url"]
