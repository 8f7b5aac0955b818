"""Control verbs reach the agent's real process on the local plane (SQLite), and nothing an
agent wrote is lost (C23).

pause/resume stop and continue it (the kernel shows ``T`` while stopped), restart_workspace
gives it a fresh checkout of its branch, switch_agent_process ends it and starts the new
assignment in the same worktree, stop_session ends only that agent, cleanup_run ends every
process and removes the run's worktrees. Before each of restart_workspace,
switch_agent_process, stop_session and cleanup_run, what the agent left uncommitted is
committed onto ``squad/<run_id>/<agent_id>`` as ``<role>@<domain>``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.helpers import eventually
from tests.integration.local_support import gone, process_group, served, worktree_list
from workers.planes.local.process import process_state

PLAN = {
    "planner": [
        {"format": "claude", "steps": [
            ["tool", "Read", {"file_path": "README.md"}],
            ["commit", "plan.md", "# lanes\n"],
            ["scratch", "notes.txt", "draft, never committed\n"],
            ["hang", 120],
        ]},
        {"format": "claude", "steps": [["tool", "Read", {"file_path": "plan.md"}],
                                       ["scratch", "switch.txt", "written before the switch\n"], ["hang", 120]]},
        {"format": "claude", "steps": [["tool", "Read", {"file_path": "plan.md"}],
                                       ["scratch", "late.txt", "written before the cleanup\n"], ["hang", 120]]},
    ],
    "curator": [{"format": "codex", "steps": [["tool", "shell", {"command": "ls"}],
                                              ["scratch", "map.md", "half a map\n"], ["hang", 120]]}],
}


def git(repository: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repository), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def on_branch(repository: Path, run_id: str, agent_id: str, path: str) -> str:
    """The file as the agent's branch holds it ("" when it does not)."""
    done = subprocess.run(["git", "-C", str(repository), "show", f"squad/{run_id}/{agent_id}:{path}"],
                          capture_output=True, text=True, check=False)
    return done.stdout if done.returncode == 0 else ""


def test_verbs_signal_the_agent_process(sqlite_url: str, tmp_path: Path) -> None:
    with served(sqlite_url, tmp_path / "data", PLAN) as svc:
        run_id = svc.launch()
        svc.wait_status(run_id, "planner", "working")
        svc.wait_status(run_id, "curator", "working")
        planner = svc.sessions(run_id)["planner"]["session_id"]
        curator = svc.sessions(run_id)["curator"]["session_id"]
        pid = svc.pid(run_id, "planner")
        tree = svc.worktree(run_id, "planner")
        eventually(lambda: (tree / "notes.txt").exists())
        own = svc.own_repository(run_id, "planner")
        assert worktree_list(own) == [str(own.resolve()), str(tree.resolve())]
        assert worktree_list(svc.repository("assembly")) == [str(svc.repository("assembly").resolve())]

        # It runs in the agent sandbox (issue 25): bwrap, its init and the CLI in one process group.
        assert svc.sessions(run_id)["planner"]["confinement"]["kind"] == "bwrap"
        group = process_group(pid)
        assert pid in group and len(group) >= 3, group
        cli = [p for p in group if "standin_agent.py" in Path(f"/proc/{p}/cmdline").read_text()]
        assert cli, group

        # pause: SIGSTOP, the kernel shows every process of the sandbox stopped, the CLI inside
        # too; resume: SIGCONT.
        svc.verb(run_id, planner, {"verb": "pause_session", "reason": "look at it"})
        eventually(lambda: all(process_state(p) == "T" for p in group))
        svc.verb(run_id, planner, {"verb": "queue_request", "wake_target": "planner", "message": "go on"})
        eventually(lambda: all(process_state(p) in ("S", "R") for p in group))

        # restart_workspace: the process ends (the whole sandbox), the worktree is checked out
        # afresh from its branch.
        svc.verb(run_id, planner, {"verb": "restart_workspace", "reason": "dirty checkout"})
        eventually(lambda: gone(pid) and not any(Path(f"/proc/{p}").exists() for p in cli))
        second = svc.pid(run_id, "planner", other_than=pid)
        svc.wait_status(run_id, "planner", "working")
        assert (tree / "plan.md").read_text() == "# lanes\n"  # committed work survives
        # ... and so does the uncommitted file: committed onto the branch first, as the agent.
        assert (tree / "notes.txt").read_text() == "draft, never committed\n"
        repository = svc.repository("assembly")
        kept = git(repository, "log", "-1", "--format=%ae%n%B", f"squad/{run_id}/planner")
        assert kept.startswith("planner@agents.squadops.local\n")
        assert f"Run: {run_id}" in kept and f"Session: {planner}" in kept and "Step: " in kept
        assert sorted(p.name for p in (tree / ".standin").glob("brief-*")) == ["brief-2.txt"]

        # switch_agent_process: after the takeover handoff the process ends; the new one
        # starts in the same worktree, briefed as the taker-over.
        svc.verb(run_id, planner, {"verb": "switch_agent_process", "provider": "claude-code-cli",
                                   "model": "sonnet-squad", "reason": "needs a stronger model"})
        eventually(lambda: gone(second))
        third = svc.pid(run_id, "planner", other_than=second)
        eventually(lambda: (tree / ".standin" / "brief-3.txt").exists())
        brief = (tree / ".standin" / "brief-3.txt").read_text()
        assert "## Takeover" in brief and "claude-code-cli/sonnet-squad" in brief
        assert (tree / ".standin" / "brief-2.txt").exists()  # same worktree, not a fresh one
        assert on_branch(repository, run_id, "planner", "switch.txt") == "written before the switch\n"
        trail = svc.http.get(f"/v1/admin/studio/runs/{run_id}/handoff-trail").json()
        assert "process_takeover" in str(trail)

        # stop_session ends only the curator's process.
        curator_pid = svc.pid(run_id, "curator")
        svc.verb(run_id, curator, {"verb": "stop_session", "reason": "not needed"})
        eventually(lambda: gone(curator_pid))
        assert not gone(third)
        eventually(lambda: on_branch(repository, run_id, "curator", "map.md") == "half a map\n")

        # cleanup_run: every process ends and the run's worktrees are removed.
        answer = svc.http.post(f"/control-plane/studio/runs/{run_id}/control", json={"verb": "cleanup_run"})
        assert answer.status_code == 202, answer.text
        eventually(lambda: gone(third))
        eventually(lambda: not tree.exists() and not svc.worktree(run_id, "curator").exists())
        eventually(lambda: not own.exists())  # then its repository goes (its refs are in the lane)
        assert on_branch(repository, run_id, "planner", "late.txt") == "written before the cleanup\n"
        assert on_branch(repository, run_id, "planner", "notes.txt") == "draft, never committed\n"
