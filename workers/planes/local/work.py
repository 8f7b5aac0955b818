"""What becomes of an agent's work on the local plane (C23): what it left uncommitted is
committed onto ``squad/<run_id>/<agent_id>`` (as ``<role>@<domain>``) before its worktree
ends, is switched or restarted, and a pull request names the commit it proposes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import structlog

from domain.shared import ports
from domain.studio.agent_stream import excerpt
from domain.studio.brief import branch_name
from workers.planes.local.worktrees import WorktreeError, Worktrees

log = structlog.get_logger("squadops.local_plane")
FALLBACK_AUTHOR = "squadops@squadops.local"


@dataclass(frozen=True)
class Author:
    """Whose work a worktree holds, and where the session was."""

    agent_id: str
    identity: str
    run_id: str
    session_id: str = ""
    step: str = ""

    def message(self, why: str) -> str:
        lines = [f"squadops: work {self.agent_id} left uncommitted ({why or 'process ended'})", "",
                 f"Run: {self.run_id}"]
        if self.session_id:
            lines.append(f"Session: {self.session_id}")
        lines.append(f"Step: {self.step or 'unknown'}")
        return "\n".join(lines) + "\n"


def _log(agent_id: str, level: str, text: str) -> ports.RunnerOutput:
    return ports.RunnerOutput(agent_id=agent_id, stream="exit", level=level, text=text)


def keep(worktrees: Worktrees, worktree: Path, author: Author, why: str) -> list[ports.Step]:
    """Commits what the agent left uncommitted; a log line says what happened."""
    if not worktree.exists():
        return []
    try:
        commit = worktrees.preserve(worktree, author.identity or FALLBACK_AUTHOR, author.message(why))
    except WorktreeError as exc:
        log.warning("local_work_not_committed", run_id=author.run_id, agent_id=author.agent_id, error=str(exc))
        return [_log(author.agent_id, "error", "the work left in the worktree could not be committed "
                                               f"(it stays in place): {excerpt(str(exc), 300)}")]
    if not commit:
        return []
    return [_log(author.agent_id, "info", f"committed the work left uncommitted as {commit[:12]} on "
                                          f"{branch_name(author.run_id, author.agent_id)} ({why or 'process ended'})")]


def recorded_author(data_dir: Path, tenant: str, run_id: str, agent_id: str) -> str:
    """The commit author a launch recorded beside the agent's configuration."""
    marker = data_dir.resolve() / "agents" / tenant / run_id / agent_id / "author"
    try:
        return marker.read_text().strip() or FALLBACK_AUTHOR
    except OSError:
        return FALLBACK_AUTHOR


def keep_run(worktrees: Worktrees, data_dir: Path, tenant: str, run_id: str, authors: dict[str, str]) -> None:
    """Every worktree of an ended run gets what it holds committed (its processes have ended)."""
    folder = worktrees.run_dir(tenant, run_id)
    for path in sorted(p for p in folder.iterdir() if p.is_dir()) if folder.exists() else []:
        identity = authors.get(path.name) or recorded_author(data_dir, tenant, run_id, path.name)
        for step in keep(worktrees, path, Author(path.name, identity, run_id, step="run ended"), "run ended"):
            log.info("local_work_kept", run_id=run_id, agent_id=path.name, note=getattr(step, "text", ""))


def name_heads(worktrees: Worktrees, run: Any, steps: list[ports.Step]) -> list[ports.Step]:
    """A pull request the squad's server granted names the commit it proposes and the paths it
    changes, read from the agent's branch now; a branch that changes nothing (the agent reset
    it since) opens no pull request."""
    named: list[ports.Step] = []
    for step in steps:
        if isinstance(step, ports.OpenPullRequest) and not step.head_sha:
            changes = worktrees.changes(run, step.agent_id)
            if changes is None or not changes.paths:
                named.append(ports.RunnerOutput(agent_id=step.agent_id, stream="stdout", level="warn",
                                                text="the pull request was not recorded: its branch has no "
                                                     "change against its base"))
                continue
            step = msgspec.structs.replace(step, head_sha=changes.head_sha, changed_paths=changes.paths)
        named.append(step)
    return named
