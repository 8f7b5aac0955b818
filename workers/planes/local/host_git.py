"""git on the host, as the local plane runs it: in repositories and worktrees whose
metadata its sandboxed agents may write, so with none of their hooks, filters' drivers,
fsmonitor, signing programs or submodules, and without the service's own repository
variables."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from workers.adapters.local_git import git_environment

GIT_TIMEOUT = 120
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "squadops",
    "GIT_AUTHOR_EMAIL": "squadops@squadops.local",
    "GIT_COMMITTER_NAME": "squadops",
    "GIT_COMMITTER_EMAIL": "squadops@squadops.local",
}


# The plane runs git on the host in repositories whose metadata its sandboxed agents may write
# (hooks, configuration): none of their hooks, no fsmonitor command, no signing program and
# no submodule (whose own configuration an agent writes) runs here.
HOST_SAFE = (
    "-c", f"core.hooksPath={os.devnull}", "-c", "core.fsmonitor=false", "-c", "commit.gpgSign=false",
    "-c", "diff.ignoreSubmodules=all", "-c", "submodule.recurse=false", "-c", "status.submoduleSummary=false",
)


class WorktreeError(Exception):
    """A git command of the plane failed (the session's sources could not be materialized)."""


def git(
    *args: str, cwd: Path | None = None, stdin: str = "", identity: str = "", raw: bool = False,
    env: dict[str, str] | None = None,
) -> str:
    env = {**git_environment(os.environ), **GIT_IDENTITY, "GIT_TERMINAL_PROMPT": "0", **(env or {})}
    if identity:
        env.update(GIT_AUTHOR_NAME=identity, GIT_AUTHOR_EMAIL=identity,
                   GIT_COMMITTER_NAME=identity, GIT_COMMITTER_EMAIL=identity)
    try:
        done = subprocess.run(
            ["git", *HOST_SAFE, *args], cwd=cwd, env=env, input=stdin, capture_output=True, text=True,
            timeout=GIT_TIMEOUT, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorktreeError(f"git {args[0]} failed: {exc}") from exc
    if done.returncode != 0:
        raise WorktreeError(f"git {' '.join(args[:2])} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout if raw else done.stdout.strip()


def small_text(path: Path, limit: int = 4096) -> str:
    """A small regular file's text, read without following a link or waiting on a FIFO (an
    agent writes these files): "" for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return file.read(limit).decode(errors="replace")


def plumbing(argv: list[str], data: bytes, env: dict[str, str] | None = None) -> bytes:
    """A git plumbing command fed ``data`` on stdin; its stdout (bytes)."""
    what = next((a for a in argv[1:] if a in ("pack-objects", "index-pack")), argv[0])
    try:
        done = subprocess.run(argv, input=data, capture_output=True, timeout=GIT_TIMEOUT, check=False,
                              env={**git_environment(os.environ), **(env or {})})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorktreeError(f"git {what} failed: {exc}") from exc
    if done.returncode != 0:
        raise WorktreeError(f"git {what} failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout
