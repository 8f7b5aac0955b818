"""``squadops assign-processes``: process assignments on a run's existing sessions."""

from __future__ import annotations

import json

import pytest

from domain.studio.control import ControlIntent
from tests.conftest import settings_for
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
    """A run whose planner works in its workspace and whose testers joined by the proof gate."""
    container = build(settings_for(url))
    app = container
    try:
        app.projects.create_project(tenant=TENANT, request=DEMO_LIKE, created_by="owner@example.com")
        run, _ = app.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug="acme", launched_by="op")
        app.studio.control.control_run(tenant=TENANT, run_id=run.run_id, intent=ControlIntent(verb="verify_wave"), actor="op")
        app.studio.runs.request_execution(tenant=TENANT, run_id=run.run_id, requested_by="op")
        plane = SimulatorPlane(faults=FaultRates.none())
        app.studio.ticks.tick_runs(plane, start=[(TENANT, run.run_id)])
        for _ in range(100):
            if app.studio.runs.agent_session(app.studio.runs.get_run(TENANT, run.run_id), "planner").live_status == "working":
                break
            app.studio.ticks.tick_runs(plane, tick=[(TENANT, run.run_id)])
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
        switched = [e for e in app.event_store.events.get(planner.id) if type(e).__name__ == "ProcessSwitched"][0]
        assert switched.agent_process_assignment == {"target": "planner", "provider": "", "model": "", "effort": "low", "speed": ""}
        assert (switched.agent_process_switch_source, switched.agent_process_switch_status) == ("assign_processes", "pending")
        assert switched.worktree == "ws-acme-shared"
        notes = app.event_store.recorder.select_notifications(start=1, limit=100_000)
        position = {(n.originator_id, n.topic.rpartition(".")[2], n.originator_version): n.id for n in notes}
        takeover = next(
            e for e in app.event_store.events.get(run.id)
            if type(e).__name__ == "HandoffRecorded" and e.handoff_id == switched.takeover_handoff_id
        )
        assert takeover.kind == "process_takeover" and takeover.to_agent_id == "planner"
        assert position[(run.id, "HandoffRecorded", takeover.originator_version)] < position[
            (planner.id, "ProcessSwitched", switched.originator_version)
        ]  # the takeover handoff is recorded first
        recorded = [e for e in app.event_store.events.get(run.id) if type(e).__name__ == "ControlRecorded"][-1]
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
    assert main(["assign-processes", run_id, "--assignment", "planner:codex", "--assignment", "compactor:codex"]) == 2
    assert "compactor" in capsys.readouterr().err
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
