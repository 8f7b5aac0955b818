"""The local plane in the service layer: ticks driven by hand, real subprocesses and git.

What cannot run becomes the session's wall (never a crash of the ticker), the existing
recovery policies handle the plane's blockers, and at most ``local_max_processes`` agent
processes run at once while the others wait their turn.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from domain.shared import ports
from domain.studio.commands.recovery import recovery_policies
from domain.studio.control import ControlIntent
from domain.studio.policies.walls import wall_for
from tests.conftest import settings_for
from tests.events import named
from tests.helpers import eventually
from tests.integration.local_support import PROJECT, SANDBOX_PYTHON, STANDIN
from workers.bootstrap import Container, build
from workers.planes.local import LocalConfig, LocalPlane

TENANT = "default"


@pytest.fixture
def local(sqlite_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Container]:
    changes: dict[str, Any] = {"execution_plane": "local", "data_dir": str(tmp_path / "data")}
    changes.update(getattr(request, "param", {}))
    container = build(settings_for(sqlite_url, **changes))
    container.projects.create_project(tenant=TENANT, request=PROJECT, created_by="op@example.com")
    yield container
    container.close()


def standin_config(config: LocalConfig, plan: Path) -> LocalConfig:
    """The plane running the stand-in CLI (the machine's Python; the sandbox shows it and its plan)."""
    return dataclasses.replace(config, command=f"{SANDBOX_PYTHON} {STANDIN} --plan {plan}", sandbox=dataclasses.replace(
        config.sandbox, read_only=(STANDIN.parent, plan)))


def standin(local: Container, tmp_path: Path, plan: dict[str, Any], **config: Any) -> LocalPlane:
    """The plane running the stand-in CLI with ``plan`` (as a command override)."""
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    plane = local.plane
    assert isinstance(plane, LocalPlane)
    plane.config = dataclasses.replace(standin_config(plane.config, plan_file), **config)
    return plane


def start_run(container: Container) -> str:
    app = container
    run, _ = app.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug="acme", launched_by="op")
    app.studio.runs.request_execution(tenant=TENANT, run_id=run.run_id, requested_by="op")
    app.studio.ticks.tick_runs(container.plane, start=[(TENANT, run.run_id)])
    return run.run_id


def tick(container: Container, run_id: str) -> None:
    """One pass of the ticker over the run."""
    plane = container.plane
    container.studio.ticks.tick_runs(plane, tick=[(TENANT, run_id)], policies=recovery_policies(credentials=plane))
    plane.after_pass()


def session(container: Container, run_id: str, agent_id: str) -> Any:
    app = container
    return app.studio.runs.agent_session(app.studio.runs.get_run(TENANT, run_id), agent_id)


def until(container: Container, run_id: str, probe: Any, timeout: float = 20.0) -> Any:
    def step() -> Any:
        tick(container, run_id)
        return probe()

    return eventually(step, timeout=timeout, interval=0.02)


def events(container: Container, run_id: str, agent_id: str, name: str) -> list[Any]:
    s = session(container, run_id, agent_id)
    return [e for e in container.event_store.events.get(s.id) if named(e) == name]


@pytest.mark.parametrize("local", [{"local_agent_command": "/nonexistent/agent-cli --json"}], indirect=True)
def test_a_cli_that_cannot_run_is_the_sessions_wall(local: Container) -> None:
    run_id = start_run(local)
    planner = until(local, run_id, lambda: (s := session(local, run_id, "planner")).live_status == "blocked" and s)
    assert planner.blocker_code == "agent_cli_missing"
    assert "'/nonexistent/agent-cli' cannot be run" in planner.blocker_message
    assert "SQUADOPS_LOCAL_AGENT_COMMAND" in planner.blocker_message

    # Without an override, a provider with no known CLI is a wall too (a tester runs on antigravity).
    plane = local.plane
    assert isinstance(plane, LocalPlane)
    plane.config = dataclasses.replace(plane.config, command="")
    local.studio.control.control_session(tenant=TENANT, run_id=run_id, agent_id="planner", actor="op",
                              intent=ControlIntent(verb="handoff_agent", target_agent_id="tester-admin"))
    tester = until(local, run_id, lambda: (s := session(local, run_id, "tester-admin")).live_status == "blocked" and s)
    assert tester.blocker_code == "agent_cli_missing"
    assert "No local agent CLI is known for provider 'antigravity'" in tester.blocker_message


def test_a_worktree_that_cannot_be_made_goes_to_the_fresh_workspace_policy(local: Container) -> None:
    lanes = Path(local.settings.data_dir) / "repos" / TENANT / "acme"
    lanes.mkdir(parents=True)
    (lanes / "assembly.git").write_text("not a repository")  # git cannot create the lane repository here
    run_id = start_run(local)
    until(local, run_id, lambda: len(events(local, run_id, "planner", "Blocked")) >= 2)
    planner = session(local, run_id, "planner")
    assert planner.blocker_code == "workspace_source_materialization_failed"
    restarts = events(local, run_id, "planner", "ProcessRestarted")
    assert [(r.reason, r.fresh_workspace) for r in restarts] == [("workspace_source_materialization_failed", True)]
    assert planner.workspace_generation == 1  # the policy's one fresh workspace was used; the operator has it now


@pytest.mark.parametrize("local", [{"local_agent_command": ""}], indirect=True)
def test_a_sandbox_that_cannot_start_is_the_sessions_wall_never_a_bare_run(local: Container, tmp_path: Path) -> None:
    plane = standin(local, tmp_path, {"planner": [{"format": "claude", "steps": [["tool", "Read", {}], ["hang", 120]]}]})
    config = plane.config
    plane.config = dataclasses.replace(config, sandbox=dataclasses.replace(config.sandbox, bwrap=str(tmp_path / "no-bwrap")))
    run_id = start_run(local)
    planner = until(local, run_id, lambda: (s := session(local, run_id, "planner")).live_status == "blocked" and s)
    assert planner.blocker_code == "agent_sandbox_unavailable"
    assert "bubblewrap is not installed" in planner.blocker_message
    assert "SQUADOPS_AGENT_SANDBOX=none" in planner.blocker_message
    assert plane.process_of(planner.id) is None and plane.pool.live_count() == 0  # nothing ran unconfined
    wall = wall_for(planner.blocker_code, planner.blocker_message)  # what the feed and the office show
    assert (wall.message, wall.recommended_action) == (planner.blocker_message, "retry_prompt")

    # Once bubblewrap is there, the wall's verb starts the agent, confined.
    plane.config = config
    local.studio.control.control_session(tenant=TENANT, run_id=run_id, agent_id="planner", actor="op",
                                         intent=ControlIntent(verb="retry_prompt", reason="bwrap installed"))
    until(local, run_id, lambda: session(local, run_id, "planner").live_status == "working")
    started = events(local, run_id, "planner", "ProcessStarted")
    assert started[-1].confinement["kind"] == "bwrap"


@pytest.mark.parametrize("local", [{"local_max_processes": 1, "local_agent_command": ""}], indirect=True)
def test_at_most_the_bound_runs_and_the_rest_wait_in_order(local: Container, tmp_path: Path) -> None:
    plane = standin(local, tmp_path, {
        "curator": [{"format": "claude", "steps": [["tool", "Read", {}], ["hang", 120]]}],
        "planner": [{"format": "claude", "steps": [["tool", "Read", {}], ["hang", 120]]}],
    })
    run_id = start_run(local)
    # The curator asked first (agents are visited in order): it runs, the planner waits.
    until(local, run_id, lambda: session(local, run_id, "curator").live_status == "working")
    for _ in range(5):
        tick(local, run_id)
    assert session(local, run_id, "planner").live_status == "ready"
    assert plane.pool.live_count() == 1 and plane.pool.position(session(local, run_id, "planner").id) == 0
    waiting = [e.text for e in events(local, run_id, "planner", "RunnerOutput")]
    assert waiting == ["waiting for a process slot (0 ahead; at most 1 agent processes run at once)"]

    local.studio.control.control_session(tenant=TENANT, run_id=run_id, agent_id="curator", actor="op",
                              intent=ControlIntent(verb="stop_session", reason="make room"))
    until(local, run_id, lambda: session(local, run_id, "planner").live_status == "working")
    assert plane.pool.live_count() == 1



@pytest.mark.parametrize("local", [{"local_agent_command": ""}], indirect=True)
def test_a_tick_whose_save_failed_is_planned_again_with_what_the_process_wrote(local: Container, tmp_path: Path) -> None:
    plane = standin(local, tmp_path, {"curator": [{"format": "claude", "session": "cur-1", "steps": [
        ["tool", "Grep", {"pattern": "TODO"}], ["text", "found two"], ["hang", 120]]}]})
    run_id = start_run(local)
    app = local

    def launched() -> bool:  # no tick once its process runs: what it writes waits for the plan below
        if plane.process_of(session(local, run_id, "curator").id) is not None:
            return True
        tick(local, run_id)
        return False

    eventually(launched, interval=0.02)
    transcript = Path(local.settings.data_dir) / "agents" / TENANT / run_id / "curator" / "attempt-1.jsonl"
    eventually(lambda: transcript.exists() and len(transcript.read_text().splitlines()) >= 4)

    # Plan the next tick twice without saving it (what a save that hit a concurrent write does).
    run = app.studio.runs.get_run(TENANT, run_id)
    sessions = app.studio.runs.all_sessions(run)
    quiet = app.studio.ticks.holdings.quiet_since(run)  # ticks that changed nothing are not recorded
    next_tick = run.tick + (quiet.count if quiet else 0) + 1
    first = [s for s in plane.plan_tick(run, sessions, next_tick) if s.agent_id == "curator"]
    assert [type(s).__name__ for s in first if not isinstance(s, ports.RunnerOutput)] == ["StartProcess", "CallTool", "Say"]
    # No service answers on its MCP URL here: the CLI said so, and that is a runtime log.
    assert "MCP server squadops did not connect (failed)." in [s.text for s in first if isinstance(s, ports.RunnerOutput)]
    again = [s for s in plane.plan_tick(run, sessions, next_tick) if s.agent_id == "curator"]
    assert again == first

    # The ticker's next tick is that same tick: nothing the process wrote was lost.
    tick(local, run_id)
    curator = session(local, run_id, "curator")
    assert (curator.llm_session_id, curator.tool_call_count, curator.live_status) == ("cur-1", 1, "working")


@pytest.mark.parametrize("local", [{"local_agent_command": ""}], indirect=True)
def test_after_a_restart_the_plane_owns_up_to_lost_processes_and_sweeps_old_worktrees(local: Container, tmp_path: Path) -> None:
    plane = standin(local, tmp_path, {"curator": [{"format": "claude", "steps": [["tool", "Grep", {}], ["hang", 120]]}]})
    run_id = start_run(local)
    until(local, run_id, lambda: session(local, run_id, "curator").live_status == "working")
    tree = plane.worktrees.path_for(TENANT, run_id, "curator")
    process = plane.process_of(session(local, run_id, "curator").id)
    assert process is not None and tree.exists()

    local.close_plane()  # the service goes down: its processes end, the worktrees stay
    assert process.finished and tree.exists()
    local.plane = LocalPlane(plane.config, load_run=plane.load_run, sweep_seconds=0)  # and comes back up
    until(local, run_id, lambda: session(local, run_id, "curator").live_status == "blocked")
    curator = session(local, run_id, "curator")
    assert curator.blocker_code == "agent_process_exited"
    assert "no agent process runs for this session on this machine" in curator.blocker_message

    local.close_plane()
    local.studio.runs.cleanup_run(tenant=TENANT, run_id=run_id, actor="op")  # cleaned up while the plane was down
    assert tree.exists()
    after = LocalPlane(plane.config, load_run=plane.load_run, sweep_seconds=0)  # it never ticked this run
    after.after_pass()
    assert not tree.exists() and not plane.worktrees.run_dir(TENANT, run_id).exists()


@pytest.mark.parametrize("local", [{"local_agent_command": ""}], indirect=True)
def test_denied_calls_are_counted_apart_never_the_first_tool_and_raise_the_permission_wall(
    local: Container, tmp_path: Path
) -> None:
    standin(local, tmp_path, {"curator": [{"format": "claude", "steps": [
        ["denied", "Write", {"file_path": "notes.md", "content": "x"}],
        ["fail", "Read", {"file_path": "missing.md"}, "File does not exist."],
        ["denied", "Bash", {"command": "git commit -am notes"}],
        ["text", "I could not write the file."], ["result", {"num_turns": 4}],
    ]}], "planner": [{"format": "codex", "steps": [
        ["denied", "apply_patch", {"changes": [{"path": "a.py", "kind": "add"}]}],
        ["tool", "shell", {"command": "ls"}], ["result", {}],
    ]}]})
    run_id = start_run(local)
    curator = until(local, run_id, lambda: (s := session(local, run_id, "curator")).live_status == "blocked" and s)
    assert curator.blocker_code == "agent_permission_denied"
    assert (curator.tool_call_count, curator.failed_tool_call_count) == (0, 3)
    assert "Write, Bash" in curator.blocker_message and "retry_prompt" in curator.blocker_message
    assert not events(local, run_id, "curator", "ToolCalled")  # nothing satisfied the first tool
    failed = events(local, run_id, "curator", "ToolCallFailed")
    assert [(e.tool_name, e.route) for e in failed] == [("Write", "notes.md"), ("Read", "missing.md"), ("Bash", "")]
    assert "haven't granted" in failed[0].reason and failed[1].reason == "File does not exist."
    assert not events(local, run_id, "curator", "Completed")
    # The model the CLI ran, beside the assigned alias (the command override runs another model).
    assert curator.model_ran == "standin-model" and curator.process["model"] != "standin-model"

    # Codex: the rejected patch is a denial; the shell call that worked is the first tool.
    planner = until(local, run_id, lambda: (s := session(local, run_id, "planner")).live_status == "blocked" and s)
    assert planner.blocker_code == "agent_permission_denied" and "apply_patch" in planner.blocker_message
    assert (planner.tool_call_count, planner.failed_tool_call_count) == (1, 1)
    assert planner.model_ran == ""  # Codex names no model and the override was given none
    assert planner.blocker_evidence["result"]["usage"]["output_tokens"] == 340


@pytest.mark.parametrize("local", [{"local_agent_command": "", "local_first_tool_seconds": 1.0}], indirect=True)
def test_a_failed_call_leaves_the_first_tool_owed_and_the_wall_says_what_happened(local: Container, tmp_path: Path) -> None:
    standin(local, tmp_path, {
        "curator": [{"format": "claude", "steps": [["fail", "Read", {"file_path": "x"}, "no such file"], ["hang", 120]]}],
        "planner": [{"format": "claude", "steps": [["exit", 1]]}],
        "backend": [{"format": "claude", "steps": [["pending", "Bash", {"command": "make build"}], ["hang", 120]]}],
    })
    run_id = start_run(local)
    curator = until(local, run_id, lambda: (s := session(local, run_id, "curator")).live_status == "blocked" and s)
    assert curator.blocker_code == "agent_first_tool_required"
    assert (curator.tool_call_count, curator.failed_tool_call_count) == (0, 1)
    assert "no required first tool call within 1 s (1 tool call(s) failed or were denied)" in curator.blocker_message
    planner = until(local, run_id, lambda: (s := session(local, run_id, "planner")).live_status == "blocked" and s)
    assert planner.blocker_code == "agent_first_tool_required"
    assert "exited with code 1 after " in planner.blocker_message and "within" not in planner.blocker_message
    assert planner.blocker_evidence["exit_code"] == 1

    # A call awaiting its result holds the wall back for one more window, no longer.
    local.studio.control.control_session(tenant=TENANT, run_id=run_id, agent_id="curator", actor="op",
                                         intent=ControlIntent(verb="handoff_agent", target_agent_id="backend"))
    backend = until(local, run_id, lambda: (s := session(local, run_id, "backend")).live_status == "blocked" and s)
    assert backend.blocker_code == "agent_first_tool_required" and backend.blocker_evidence["seconds_waited"] >= 2.0
    assert "within 2 s: its call of Bash has had no result" in backend.blocker_message


@pytest.mark.parametrize("local", [{"local_agent_command": ""}], indirect=True)
def test_a_provider_with_no_cli_here_is_walled_with_a_switch_or_falls_back(
    local: Container, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ``claude`` on PATH is the stand-in (as the real CLI would be, given the plane's arguments).
    plan_file = tmp_path / "plan.json"
    works = [{"format": "claude", "steps": [["tool", "Read", {"file_path": "README.md"}], ["hang", 120]]}]
    plan_file.write_text(json.dumps({"tester-admin": works, "tester-guest": works}))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text(f'#!/bin/sh\nexec {SANDBOX_PYTHON} {STANDIN} --plan {plan_file} "$@"\n')
    (bin_dir / "claude").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    plane = local.plane
    assert isinstance(plane, LocalPlane)
    # The sandbox shows the stand-in, its plan and this ``claude`` (read-only), as it would the real CLI.
    plane.config = dataclasses.replace(plane.config, sandbox=dataclasses.replace(
        plane.config.sandbox, read_only=(STANDIN.parent, plan_file, bin_dir)))
    run_id = start_run(local)
    local.studio.control.control_session(tenant=TENANT, run_id=run_id, agent_id="planner", actor="op",
                                         intent=ControlIntent(verb="handoff_agent", target_agent_id="tester-admin"))
    tester = until(local, run_id, lambda: (s := session(local, run_id, "tester-admin")).live_status == "blocked" and s)
    assert tester.blocker_code == "agent_cli_missing"
    assert "Provider antigravity has no agent CLI" in tester.blocker_message
    assert wall_for(tester.blocker_code, tester.blocker_message).recommended_action == "switch_agent_process"
    # The wall's verb takes it down: the new assignment starts at once, in the same worktree.
    local.studio.control.control_session(tenant=TENANT, run_id=run_id, agent_id="tester-admin", actor="op",
                                         intent=ControlIntent(verb="switch_agent_process", provider="claude-code-cli"))
    tester = until(local, run_id, lambda: (s := session(local, run_id, "tester-admin")).live_status == "working" and s)
    assert tester.process["provider"] == "claude-code-cli" and tester.tool_call_count == 1

    # With a fallback provider configured, the switch is made by the plane and recorded.
    plane.config = dataclasses.replace(plane.config, provider_fallback="claude-code-cli")
    local.studio.control.control_session(tenant=TENANT, run_id=run_id, agent_id="planner", actor="op",
                                         intent=ControlIntent(verb="handoff_agent", target_agent_id="tester-guest"))
    guest = until(local, run_id, lambda: (s := session(local, run_id, "tester-guest")).live_status == "working" and s)
    switched = events(local, run_id, "tester-guest", "ProcessSwitched")
    assert [(e.previous["provider"], e.process["provider"], e.agent_process_switch_source) for e in switched] == [
        ("antigravity", "claude-code-cli", "provider_fallback")]
    assert "SQUADOPS_LOCAL_PROVIDER_FALLBACK=claude-code-cli" in switched[0].reason
    assert not events(local, run_id, "tester-guest", "Blocked") and guest.process_attempt == 1
