"""``squadops assign-processes``: process assignments on a run's existing sessions."""

from __future__ import annotations

import json

import pytest
from litestar.testing import TestClient

from api.app import create_app
from domain.studio.control import ControlIntent
from domain.studio.squad import Assignment
from tests.conftest import ADMIN, settings_for
from tests.events import named
from tests.helpers import DEMO_LIKE
from workers.bootstrap import build
from workers.cli import main
from workers.planes.simulator import FaultRates, SimulatorPlane

TENANT = "default"


@pytest.fixture
def env(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("SQUADOPS_DATABASE_URL", sqlite_url)
    monkeypatch.setenv("SQUADOPS_LOG_LEVEL", "warning")
    monkeypatch.setenv("SQUADOPS_MODEL_PROXY_ALIASES", "claude-code-cli=proxy claude default")
    return sqlite_url


def squad_at_work(url: str) -> str:
    """A run whose planner works in its workspace and whose testers joined by the proof gate (and
    wait, paused, so that they are still there to switch)."""
    container = build(settings_for(url))
    app = container
    try:
        app.projects.create_project(tenant=TENANT, request=DEMO_LIKE, created_by="owner@example.com")
        run, _ = app.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug="acme", launched_by="op")
        app.studio.control.control_run(tenant=TENANT, run_id=run.run_id, intent=ControlIntent(verb="verify_wave"), actor="op")
        # The testers hold until the planner works: a tester proves its suit in 4-7 tool calls
        # and, in a run whose planner is slow to its first tool, was done (ended, so not
        # switched) before the planner worked (seed of run-9669f99f0e9c8255).
        for tester in ("tester-admin", "tester-guest"):
            app.studio.control.control_session(
                tenant=TENANT, run_id=run.run_id, agent_id=tester, intent=ControlIntent(verb="pause_session"), actor="op"
            )
        app.studio.runs.request_execution(tenant=TENANT, run_id=run.run_id, requested_by="op")
        plane = SimulatorPlane(faults=FaultRates.none())
        app.studio.ticks.tick_runs(plane, start=[(TENANT, run.run_id)])
        for _ in range(100):  # until the planner works (the testers joined, paused)
            current = app.studio.runs.get_run(TENANT, run.run_id)
            live = {s.agent_id: s.live_status for s in app.studio.runs.all_sessions(current) if not s.ended}
            if live.get("planner") == "working" and {"tester-admin", "tester-guest"} <= set(live):
                break
            app.studio.ticks.tick_runs(plane, tick=[(TENANT, run.run_id)])
        else:
            raise AssertionError(f"the squad did not get to work: {live}")
        return run.run_id
    finally:
        container.close()


def lines(text: str) -> dict[str, dict]:
    return {entry["agent_id"]: entry for entry in map(json.loads, text.strip().splitlines())}


def test_assignments_switch_existing_sessions_keeping_worktrees_after_a_takeover_handoff(env: str, capsys) -> None:  # type: ignore[no-untyped-def]
    run_id = squad_at_work(env)
    code = main(
        [
            "assign-processes", run_id,
            "--assignment", "testers:claude-code-cli:::",
            "--assignment", "tester-guest:codex::high:fast",
            "--assignment", "planner:::low:",
        ]
    )
    assert code == 0
    out = lines(capsys.readouterr().out)
    assert set(out) == {"planner", "tester-admin", "tester-guest"}
    assert out["tester-admin"]["process"] == {
        "provider": "claude-code-cli", "model": "proxy claude default", "effort": "medium", "speed": "standard"
    }  # no model given: the provider's alias from the one settings table
    assert out["tester-guest"]["process"] == {
        "provider": "codex", "model": "model-proxy codex alias", "effort": "high", "speed": "fast"
    }
    assert out["planner"]["process"]["effort"] == "low" and out["planner"]["previous"]["effort"] == "medium"
    assert out["planner"]["agent_process_switch_status"] == "pending"
    assert out["planner"]["worktree"] == "ws-acme-shared"

    container = build(settings_for(env))
    app = container
    try:
        run = app.studio.runs.get_run(TENANT, run_id)
        planner = app.studio.runs.agent_session(run, "planner")
        switched = [e for e in app.event_store.events.get(planner.id) if named(e) == "ProcessSwitched"][0]
        assert switched.agent_process_assignment == {"target": "planner", "provider": "", "model": "", "effort": "low", "speed": ""}
        assert (switched.agent_process_switch_source, switched.agent_process_switch_status) == ("assign_processes", "pending")
        assert switched.worktree == "ws-acme-shared"
        notes = app.event_store.recorder.select_notifications(start=1, limit=100_000)
        position = {(n.originator_id, n.topic.rpartition(".")[2], n.originator_version): n.id for n in notes}
        takeover = next(
            e for e in app.event_store.events.get(run.id)
            if named(e) == "HandoffRecorded" and e.handoff_id == switched.takeover_handoff_id
        )
        assert takeover.kind == "process_takeover" and takeover.to_agent_id == "planner"
        assert position[(run.id, "HandoffRecorded", takeover.originator_version)] < position[
            (planner.id, "ProcessSwitched", switched.originator_version)
        ]  # the takeover handoff is recorded first
        recorded = [e for e in app.event_store.events.get(run.id) if named(e) == "ControlRecorded"][-1]
        assert recorded.verb == "assign_processes" and len(recorded.params["assignments"]) == 3

        # The replacement starts at the next turn, in the same workspace.
        plane = SimulatorPlane(faults=FaultRates.none())
        for _ in range(50):
            planner = app.studio.runs.agent_session(app.studio.runs.get_run(TENANT, run_id), "planner")
            if planner.process_switch_status == "applied" and planner.live_status == "working":
                break
            app.studio.ticks.tick_runs(plane, tick=[(TENANT, run_id)])
        assert planner.process_switch_status == "applied" and planner.process_attempt == 2
        assert planner.workspace_name == "ws-acme-shared" and planner.process["effort"] == "low"
    finally:
        container.close()

    assert main(["assign-processes", run_id, "--assignment", "planner:::low:"]) == 0
    assert lines(capsys.readouterr().out)["planner"]["status"] == "unchanged"


def test_unknown_targets_and_malformed_assignments_change_nothing(env: str, capsys) -> None:  # type: ignore[no-untyped-def]
    run_id = squad_at_work(env)
    container = build(settings_for(env))
    before = container.event_store.max_position()
    container.close()
    assert main(["assign-processes", run_id, "--assignment", "planner:codex", "--assignment", "nobody:codex"]) == 2
    assert "nobody" in capsys.readouterr().err
    assert main(["assign-processes", run_id, "--assignment", "planner:codex::extreme:"]) == 2
    assert main(["assign-processes", "run-missing", "--assignment", "planner:codex"]) == 1
    container = build(settings_for(env))
    try:
        assert container.event_store.max_position() == before
        container.studio.runs.cleanup_run(tenant=TENANT, run_id=run_id, actor="op")
    finally:
        container.close()
    assert main(["assign-processes", run_id, "--assignment", "planner:codex"]) == 1
    assert "run_ended" in capsys.readouterr().err


def test_an_assignment_made_before_a_handoff_applies_to_the_session_the_handoff_opens(env: str, capsys) -> None:  # type: ignore[no-untyped-def]
    container = build(settings_for(env))
    app = container
    try:
        app.projects.create_project(tenant=TENANT, request=DEMO_LIKE, created_by="owner@example.com")
        run, _ = app.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug="acme", launched_by="op")
        run_id = run.run_id
        # No backend, compactor or tester session yet: each target names agents that may still join.
        results = app.studio.assignments.assign_processes(
            tenant=TENANT, run_id=run_id, actor="op",
            assignments=[Assignment("role_backend", "claude-code-cli"), Assignment("testers", "codex", "", "high"),
                         Assignment("tester-admin", "", "", "low")],
        )
        assert results == []  # no existing session switched
        assigned = [e for e in app.event_store.events.get(run.id) if named(e) == "ProcessAssigned"]
        assert [(e.target, e.provider, e.source) for e in assigned] == [
            ("role_backend", "claude-code-cli", "assign_processes"), ("testers", "codex", "assign_processes"),
            ("tester-admin", "", "assign_processes"),
        ]
        # The proof gate opens the testers; the planner's handoff opens the backend lane.
        app.studio.control.control_run(tenant=TENANT, run_id=run_id, intent=ControlIntent(verb="verify_wave"), actor="op")
        app.studio.runs.request_execution(tenant=TENANT, run_id=run_id, requested_by="op")
        plane = SimulatorPlane(faults=FaultRates.none())
        app.studio.ticks.tick_runs(plane, start=[(TENANT, run_id)])
        for _ in range(200):
            if "backend" in app.studio.runs.get_run(TENANT, run_id).sessions:
                break
            app.studio.ticks.tick_runs(plane, tick=[(TENANT, run_id)])
        current = app.studio.runs.get_run(TENANT, run_id)
        backend = app.studio.runs.agent_session(current, "backend")
        assert backend.joined_via["kind"] != "launch"
        assert backend.process == {
            "provider": "claude-code-cli", "model": "model-proxy claude-code-cli alias", "effort": "medium",
            "speed": "standard",
        }
        admin = app.studio.runs.agent_session(current, "tester-admin")
        guest = app.studio.runs.agent_session(current, "tester-guest")
        # Of one assign-processes call the last naming an agent wins, as for existing sessions.
        assert admin.process == {"provider": "antigravity", "model": "model-proxy antigravity alias",
                                 "effort": "low", "speed": "standard"}
        assert guest.process == {"provider": "codex", "model": "model-proxy codex alias", "effort": "high",
                                 "speed": "standard"}
        planner = app.studio.runs.agent_session(current, "planner")
        assert planner.process["provider"] == "codex"  # a launch session the targets do not name keeps its default

        # The HTTP answer: the run record shows each session's assigned process.
        with TestClient(create_app(container, workers=())) as http:
            http.headers.update(ADMIN)
            while container.runner.run_once():
                pass
            record = http.get(f"/v1/admin/studio/runs/{run_id}")
            assert record.status_code == 200, record.text
            by_agent = {s["agent_id"]: s for s in record.json()["sessions"]}
            assert (by_agent["backend"]["agent_provider"], by_agent["backend"]["agent_model"]) == (
                "claude-code-cli", "model-proxy claude-code-cli alias")
            assert by_agent["tester-guest"]["agent_effort"] == "high"
            dock = http.get("/control-plane/studio/observability-feed", params={"project_slug": "acme", "run_id": run_id})
            assert dock.status_code == 200, dock.text
            lines = [log["message"] for log in dock.json()["runtime_logs"]]
            assert any("Process assignment role_backend -> claude-code-cli" in line for line in lines)
    finally:
        container.close()


def test_switch_agent_process_aimed_at_a_role_or_group_reaches_live_and_later_sessions(env: str) -> None:
    container = build(settings_for(env))
    app = container
    try:
        app.projects.create_project(tenant=TENANT, request=DEMO_LIKE, created_by="owner@example.com")
        with TestClient(create_app(container, workers=())) as http:
            http.headers.update(ADMIN)
            run_id = http.post("/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": "acme"}).json()["run_id"]
            control = f"/v1/admin/studio/runs/{run_id}/control"
            # A group with no session yet: recorded on the run, no session touched.
            answer = http.post(control, json={"verb": "switch_agent_process", "target_agent_id": "testers",
                                              "provider": "claude-code-cli", "reason": "testers on claude"})
            assert answer.status_code == 202, answer.text
            assert answer.json()["session_id"] == "" and answer.json()["verb"] == "switch_agent_process"
            # A role with a live session: it switches now (and the run keeps the assignment).
            answer = http.post(control, json={"verb": "switch_agent_process", "target_agent_id": "role_planner",
                                              "effort": "high"})
            assert answer.status_code == 202, answer.text
            # A target that names nothing of this run is 404, and changes nothing.
            before = app.event_store.max_position()
            answer = http.post(control, json={"verb": "switch_agent_process", "target_agent_id": "nobody", "effort": "low"})
            assert answer.status_code == 404 and app.event_store.max_position() == before
            assert http.post(control, json={"verb": "verify_wave"}).status_code == 202
            while container.runner.run_once():
                pass
            by_agent = {s["agent_id"]: s for s in http.get(f"/v1/admin/studio/runs/{run_id}").json()["sessions"]}
        assert by_agent["planner"]["agent_effort"] == "high" and by_agent["curator"]["agent_effort"] == "medium"
        testers = {a: s for a, s in by_agent.items() if a.startswith("tester-")}
        assert testers and {s["agent_provider"] for s in testers.values()} == {"claude-code-cli"}
        run = app.studio.runs.get_run(TENANT, run_id)
        planner = app.studio.runs.agent_session(run, "planner")
        switched = [e for e in app.event_store.events.get(planner.id) if named(e) == "ProcessSwitched"]
        assert [(e.agent_process_switch_source, e.process["effort"]) for e in switched] == [("switch_agent_process", "high")]
        assert [(a["target"]) for a in run.process_assignments] == ["testers", "role_planner"]
    finally:
        container.close()
