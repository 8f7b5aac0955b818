"""Operator control verbs over HTTP: every verb's effect, levels, ended runs, auth (C2, C8)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from litestar.testing import TestClient

from domain.studio.control import RUN_VERBS, SESSION_VERBS
from tests.conftest import admin_api
from tests.events import named
from tests.integration.control_support import (
    OPERATOR,
    PLANE,
    STUDIO,
    TENANT,
    accepted,
    admin_verb,
    block,
    create_project,
    events,
    launch,
    run_verb,
    session_verb,
    sessions,
)
from workers.bootstrap import Container


@pytest.fixture
def served(database_url: str) -> Iterator[tuple[TestClient, Container]]:
    """The API with its read models kept current; no ticker, so runs move only by verbs."""
    with admin_api(database_url) as served:
        yield served


@pytest.fixture
def sqlite_served(sqlite_url: str) -> Iterator[tuple[TestClient, Container]]:
    with admin_api(sqlite_url) as served:
        yield served


def log_position(http: TestClient) -> int:
    return http.get("/healthz").json()["log_position"]


def test_every_session_verb_has_its_effect(served: tuple[TestClient, Container]) -> None:
    http, container = served
    create_project(http)
    run_id = launch(http)
    sid = {a: s["session_id"] for a, s in sessions(http, run_id).items()}
    planner, curator = sid["planner"], sid["curator"]
    app = container

    def verb(session_id: str, body: dict) -> str:
        return accepted(session_verb(http, run_id, session_id, body), run_id, body["verb"], session_id)

    # pause / resume
    verb(planner, {"verb": "pause_session", "reason": "lunch"})
    assert sessions(http, run_id)["planner"]["live_status"] == "paused"
    verb(planner, {"verb": "queue_request", "message": "after lunch"})
    assert sessions(http, run_id)["planner"]["live_status"] == "paused"  # queued, not woken
    verb(planner, {"verb": "queue_request", "wake_target": "planner"})
    assert sessions(http, run_id)["planner"]["live_status"] == "ready"
    assert app.studio.runs.agent_session(app.studio.runs.get_run(TENANT, run_id), "planner").queued_requests == 2

    # messages: mailbox, thread, controller steer
    verb(planner, {"verb": "comment_agent", "message": "look at issue 7"})
    verb(planner, {"verb": "reply_thread", "thread_id": "thr-7", "message": "yes, that one"})
    verb(planner, {"verb": "intervene", "message": "split the backend slice"})
    delivered = [(e.channel, e.thread_id) for e in events(container, run_id, "planner", "MessageDelivered")]
    assert delivered == [("mailbox", ""), ("thread", "thr-7"), ("controller", "")]
    planner_now = app.studio.runs.agent_session(app.studio.runs.get_run(TENANT, run_id), "planner")
    assert planner_now.mailbox_count == 1 and planner_now.active_thread_id == "thr-7"
    assert planner_now.controller_intervention_count == 1

    # dispatch and wake on an agent at no wall: the prompt is queued again
    verb(planner, {"verb": "retry_prompt"})
    verb(planner, {"verb": "nudge_agent"})
    verb(planner, {"verb": "yolo_loop_break"})
    assert len(events(container, run_id, "planner", "RequestQueued")) == 4

    # task cards
    card = "card-1"
    verb(planner, {"verb": "create_task_card", "task_card_id": card, "title": "Write lane issues"})
    verb(planner, {"verb": "create_followup_task", "task_card_id": card, "title": "Check the contract lane"})
    verb(planner, {"verb": "resolve_task_card", "task_card_id": card})
    changes = [(e.action, e.task_card_id == card, e.parent_task_card_id) for e in events(container, run_id, "planner", "TaskCardChanged")]
    assert changes == [("created", True, ""), ("followup_created", False, card), ("resolved", True, "")]
    missing = session_verb(http, run_id, planner, {"verb": "resolve_task_card", "task_card_id": card})
    assert missing.status_code == 404 and missing.json()["code"] == "task_card_not_found"

    # repoint: a takeover handoff first, worktree kept, effective from the next turn
    verb(curator, {"verb": "switch_agent_process", "provider": "claude-code-cli", "effort": "high"})
    record = {s["agent_id"]: s for s in http.get(f"{STUDIO}/runs/{run_id}").json()["sessions"]}
    assert (record["curator"]["agent_provider"], record["curator"]["agent_model"], record["curator"]["agent_effort"]) == (
        "claude-code-cli",
        "model-proxy claude-code-cli alias",
        "high",
    )
    switched = events(container, run_id, "curator", "ProcessSwitched")[0]
    trail = http.get(f"{STUDIO}/runs/{run_id}/handoff-trail").json()["handoffs"]
    takeover = [h for h in trail if h["kind"] == "process_takeover"]
    assert [h["handoff_id"] for h in takeover] == [switched.takeover_handoff_id]
    assert takeover[0]["from_agent_id"] == takeover[0]["to_agent_id"] == "curator" and takeover[0]["actor"] == OPERATOR
    assert switched.agent_process_switch_source == "operator" and switched.agent_process_assignment["provider"] == "claude-code-cli"
    again = session_verb(http, run_id, curator, {"verb": "switch_agent_process", "provider": "claude-code-cli"})
    assert again.status_code == 409 and again.json()["code"] == "process_unchanged"

    # handoff: the target session is created when needed
    verb(planner, {"verb": "handoff_agent", "target_agent_id": "backend", "message": "take the API slice"})
    assert "backend" in sessions(http, run_id)
    handoff = http.get(f"{STUDIO}/runs/{run_id}/handoff-trail").json()["handoffs"][-1]
    assert (handoff["from_agent_id"], handoff["to_agent_id"], handoff["kind"], handoff["actor"]) == (
        "planner", "backend", "operator", OPERATOR
    )
    assert session_verb(http, run_id, planner, {"verb": "handoff_agent", "target_agent_id": "planner"}).json()["code"] == "handoff_to_self"
    unknown = session_verb(http, run_id, planner, {"verb": "handoff_agent", "target_agent_id": "nobody"})
    assert unknown.status_code == 404 and unknown.json()["code"] == "unknown_target_agent"

    # restart the workspace of an agent behind a sandbox wall
    block(container, run_id, "planner", "sandbox_missing")
    verb(planner, {"verb": "restart_workspace"})
    after = sessions(http, run_id)["planner"]
    assert (after["live_status"], after["blocker_code"], after["llm_session_id"]) == ("ready", "", "")

    # stop ends only the stopped agent; an ended session takes no verb
    backend = sessions(http, run_id)["backend"]["session_id"]
    verb(backend, {"verb": "stop_session", "reason": "not needed"})
    state = sessions(http, run_id)
    assert state["backend"]["live_status"] == "stopped" and state["planner"]["live_status"] == "ready"
    ended = session_verb(http, run_id, backend, {"verb": "nudge_agent"})
    assert ended.status_code == 409 and ended.json()["code"] == "session_ended"

    # every verb is an event with its actor, reason and causation id
    applied = events(container, run_id, "planner", "ControlApplied")
    assert {e.actor for e in applied} == {OPERATOR}
    assert all(e.causation_id == e.control_id for e in applied)
    assert applied[0].verb == "pause_session" and applied[0].reason == "lunch"


def test_run_verbs_and_the_end_of_a_run(served: tuple[TestClient, Container]) -> None:
    http, container = served
    create_project(http)
    run_id = launch(http)
    app = container

    control_id = accepted(run_verb(http, run_id, {"verb": "verify_wave"}), run_id, "verify_wave")
    state = sessions(http, run_id)
    assert {"tester-admin", "tester-guest"} <= set(state)
    gate = [h for h in http.get(f"{STUDIO}/runs/{run_id}/handoff-trail").json()["handoffs"] if h["kind"] == "proof_gate"]
    assert {h["to_agent_id"] for h in gate} == {"tester-admin", "tester-guest"}
    assert http.get(f"{STUDIO}/runs/{run_id}").json()["control_count"] == 1
    recorded = [e for e in app.event_store.events.get(app.studio.runs.get_run(TENANT, run_id).id) if named(e) == "ControlRecorded"]
    assert (recorded[0].control_id, recorded[0].actor, recorded[0].causation_id) == (control_id, OPERATOR, control_id)

    # retry_prompt at the run level restarts stale processes and prompts the others again
    block(container, run_id, "planner", "agent_first_tool_required")
    retry = accepted(run_verb(http, run_id, {"verb": "retry_prompt"}), run_id, "retry_prompt")
    state = sessions(http, run_id)
    assert (state["planner"]["live_status"], state["planner"]["blocker_code"]) == ("ready", "")
    assert [e.causation_id for e in events(container, run_id, "curator", "ControlApplied")] == [retry]
    assert len(events(container, run_id, "curator", "RequestQueued")) == 1

    # replay_blockers dispatches each wall's recommended verb
    block(container, run_id, "curator", "sandbox_missing")
    block(container, run_id, "tester-admin", "agent_yolo_loop_detected")
    block(container, run_id, "tester-guest", "project_assets_lookup_failed")
    replay = accepted(run_verb(http, run_id, {"verb": "replay_blockers"}), run_id, "replay_blockers")
    state = sessions(http, run_id)
    assert {state[a]["blocker_code"] for a in ("curator", "tester-admin", "tester-guest")} == {""}
    replayed = {a: events(container, run_id, a, "ControlApplied")[-1] for a in ("curator", "tester-admin", "tester-guest")}
    assert {a: e.verb for a, e in replayed.items()} == {
        "curator": "restart_workspace",
        "tester-admin": "yolo_loop_break",
        "tester-guest": "nudge_agent",
    }
    assert {e.causation_id for e in replayed.values()} == {replay}

    # cancel: the whole run ends, and then takes no verb on any path
    accepted(run_verb(http, run_id, {"verb": "cleanup_run", "reason": "cancelled"}), run_id, "cleanup_run")
    state = sessions(http, run_id)
    assert {s["live_status"] for s in state.values()} == {"stopped"}
    assert http.get(f"{STUDIO}/runs/{run_id}/session-state").json()["status"] == "cleaned_up"
    before = log_position(http)
    planner = state["planner"]["session_id"]
    for verb in sorted(RUN_VERBS):
        for answer in (run_verb(http, run_id, {"verb": verb}), admin_verb(http, run_id, {"verb": verb})):
            assert answer.status_code == 409 and answer.json()["code"] == "run_ended", answer.text
    for verb in ("pause_session", "nudge_agent", "stop_session", "restart_workspace"):
        answer = session_verb(http, run_id, planner, {"verb": verb})
        assert answer.status_code == 409 and answer.json()["code"] == "run_ended"
        answer = admin_verb(http, run_id, {"verb": verb, "target_agent_id": "planner"})
        assert answer.status_code == 409 and answer.json()["code"] == "run_ended"
    assert log_position(http) == before


def test_wrong_level_unknown_missing_and_malformed_are_422_and_store_nothing(
    sqlite_served: tuple[TestClient, Container],
) -> None:
    http, _ = sqlite_served
    create_project(http)
    run_id = launch(http)
    planner = sessions(http, run_id)["planner"]["session_id"]
    before = log_position(http)

    def detail(answer) -> dict:  # type: ignore[no-untyped-def]
        assert answer.status_code == 422, answer.text
        (item,) = answer.json()["detail"]
        assert set(item) == {"loc", "msg", "type", "input", "ctx"}
        return item

    for verb in sorted(SESSION_VERBS - RUN_VERBS):
        item = detail(run_verb(http, run_id, {"verb": verb}))
        assert item["loc"] == ["body", "verb"] and item["input"] == verb
    for verb in sorted(RUN_VERBS - SESSION_VERBS):
        assert detail(session_verb(http, run_id, planner, {"verb": verb}))["loc"] == ["body", "verb"]
    for path in (f"{PLANE}/runs/{run_id}/control", f"{PLANE}/runs/{run_id}/sessions/{planner}/control", f"{STUDIO}/runs/{run_id}/control"):
        item = detail(http.post(path, json={"verb": "dance"}))
        assert (item["loc"], item["type"]) == (["body", "verb"], "enum")
        item = detail(http.post(path, json={"message": "no verb"}))
        assert (item["loc"], item["type"]) == (["body", "verb"], "missing")
    missing = {
        "intervene": "message",
        "comment_agent": "message",
        "reply_thread": "thread_id",
        "handoff_agent": "target_agent_id",
        "create_task_card": "title",
        "create_followup_task": "title",
        "resolve_task_card": "task_card_id",
        "switch_agent_process": "provider",
    }
    for verb, field in missing.items():
        item = detail(session_verb(http, run_id, planner, {"verb": verb}))
        assert (item["loc"], item["type"]) == (["body", field], "missing"), verb
    malformed = [
        ({"verb": "handoff_agent", "target_agent_id": "a b"}, "target_agent_id"),
        ({"verb": "reply_thread", "thread_id": "t/1", "message": "x"}, "thread_id"),
        ({"verb": "switch_agent_process", "effort": "max"}, "effort"),
        ({"verb": "switch_agent_process", "speed": "warp"}, "speed"),
        ({"verb": "intervene", "message": "x" * 20_001}, "message"),
        ({"verb": "pause_session", "reason": "r" * 2_001}, "reason"),
        ({"verb": 7}, "verb"),
    ]
    for body, field in malformed:
        assert detail(session_verb(http, run_id, planner, body))["loc"] == ["body", field], body
    assert http.post(f"{PLANE}/runs/{run_id}/sessions/bad%20id/control", json={"verb": "nudge_agent"}).status_code == 422
    assert log_position(http) == before

    gone = session_verb(http, run_id, "ses-missing", {"verb": "nudge_agent"})
    assert gone.status_code == 404 and gone.json()["code"] == "session_not_found"
    assert run_verb(http, "run-missing", {"verb": "verify_wave"}).json()["code"] == "run_not_found"
    assert http.post(f"/v1/studio/runs/{run_id}/control", json={"verb": "verify_wave"}).status_code == 404


def test_the_admin_path_takes_run_verbs_and_aimed_session_verbs(sqlite_served: tuple[TestClient, Container]) -> None:
    http, container = sqlite_served
    create_project(http)
    run_id = launch(http)
    sid = {a: s["session_id"] for a, s in sessions(http, run_id).items()}

    accepted(admin_verb(http, run_id, {"verb": "verify_wave"}), run_id, "verify_wave")
    accepted(admin_verb(http, run_id, {"verb": "pause_session", "target_agent_id": "curator"}), run_id, "pause_session", sid["curator"])
    assert sessions(http, run_id)["curator"]["live_status"] == "paused"
    accepted(admin_verb(http, run_id, {"verb": "retry_prompt"}), run_id, "retry_prompt")  # run level without a target
    accepted(
        admin_verb(http, run_id, {"verb": "retry_prompt", "target_agent_id": "planner"}), run_id, "retry_prompt", sid["planner"]
    )
    accepted(
        admin_verb(http, run_id, {"verb": "handoff_agent", "agent_id": "planner", "target_agent_id": "frontend"}),
        run_id,
        "handoff_agent",
        sid["planner"],
    )
    last = http.get(f"{STUDIO}/runs/{run_id}/handoff-trail").json()["handoffs"][-1]
    assert (last["from_agent_id"], last["to_agent_id"]) == ("planner", "frontend")

    def loc(answer) -> list:  # type: ignore[no-untyped-def]
        assert answer.status_code == 422, answer.text
        return answer.json()["detail"][0]["loc"]

    assert loc(admin_verb(http, run_id, {"verb": "handoff_agent", "target_agent_id": "frontend"})) == ["body", "agent_id"]
    assert loc(admin_verb(http, run_id, {"verb": "pause_session"})) == ["body", "target_agent_id"]
    assert loc(admin_verb(http, run_id, {"verb": "verify_wave", "target_agent_id": "planner"})) == ["body", "target_agent_id"]
    assert loc(admin_verb(http, run_id, {"verb": "intervene", "target_agent_id": "planner"})) == ["body", "message"]
    unknown = admin_verb(http, run_id, {"verb": "nudge_agent", "target_agent_id": "compactor"})
    assert unknown.status_code == 404 and unknown.json()["code"] == "session_not_found"

    paths = http.get("/openapi.json").json()["paths"]
    for path in (
        f"{PLANE}/runs/{{run_id}}/control",
        f"{PLANE}/runs/{{run_id}}/sessions/{{session_id}}/control",
        f"{STUDIO}/runs/{{run_id}}/control",
    ):
        assert "post" in paths[path], path


def test_control_needs_super_admin_or_the_projects_owner_or_maintainer(sqlite_served: tuple[TestClient, Container]) -> None:
    http, _ = sqlite_served
    people = {
        "owner": "Owner@Example.com",
        "maintainer": "maint@example.com",
        "contributor": "contrib@example.com",
        "viewer": "viewer@example.com",
    }
    create_project(
        http,
        {
            "project_key": "acme",
            "project_assembly": {"agentSquadSuitTesterRoles": ["admin"]},
            "participants": [{"subject_key": key, "project_role": role} for role, key in people.items()],
        },
    )
    run_id = launch(http)
    planner = sessions(http, run_id)["planner"]["session_id"]

    def as_(email: str, groups: str = "") -> dict:
        return {"x-edge-claim-email": email, "x-edge-claim-groups": groups}

    for role in ("contributor", "viewer"):
        refused = session_verb(http, run_id, planner, {"verb": "nudge_agent"}, headers=as_(people[role]))
        assert refused.status_code == 403 and refused.json()["code"] == "control_role_required", role
    assert run_verb(http, run_id, {"verb": "verify_wave"}, headers=as_("stranger@example.com")).status_code == 403
    anonymous = session_verb(http, run_id, planner, {"verb": "nudge_agent"}, headers=as_(""))
    assert anonymous.status_code == 401 and anonymous.json()["code"] == "unauthenticated"

    for role in ("owner", "maintainer"):
        answer = session_verb(http, run_id, planner, {"verb": "nudge_agent"}, headers=as_(people[role]))
        accepted(answer, run_id, "nudge_agent", planner)
    accepted(run_verb(http, run_id, {"verb": "verify_wave"}, headers=as_("maint@example.com")), run_id, "verify_wave")
    accepted(session_verb(http, run_id, planner, {"verb": "nudge_agent"}), run_id, "nudge_agent", planner)  # super_admin

    # The admin path is for super_admin only, whatever the project role.
    admin = admin_verb(http, run_id, {"verb": "verify_wave"}, headers=as_("maint@example.com"))
    assert admin.status_code == 403 and admin.json()["code"] == "super_admin_required"
    assert admin_verb(http, run_id, {"verb": "verify_wave"}, headers=as_("")).status_code == 401
