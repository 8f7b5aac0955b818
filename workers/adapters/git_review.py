"""What a pull request changed, read from its lane's repository with git itself.

The lane's repository is writable by its (sandboxed) agents, configuration included: git
runs here with no external diff, no textconv filter and no signature check, so nothing the
repository configures runs a command.

The commit a pull request proposes (its ``head_sha``, recorded when the agent opened it)
lives in the lane's repository (``Worktrees.repository_for``: the binding's mirror, or the
lane's own repository under the data directory). Its base is where it left the lane's
default branch (``git merge-base``). Commits come from ``git log base..head``; the diff from
``git diff base head``, parsed per file into hunks and numbered lines. Text is returned as
git gives it (decoded as UTF-8, undecodable bytes replaced): escaping is the page's.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

from domain.shared.errors import Unavailable
from workers.adapters.local_git import git_environment

SHA = re.compile(r"[0-9a-f]{40}")
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
STATUS = {"A": "added", "M": "modified", "D": "deleted", "R": "renamed", "C": "copied", "T": "modified"}
TIMEOUT = 30.0
LOG_FORMAT = "%H%x00%an%x00%ae%x00%aI%x00%s%x00%b%x1e"
# Unchanged lines read around each change: the page shows three of them next to it and folds
# the rest (api.web.diff_view), so a reader can unfold the code around a change. With git's
# default three nothing would be left to fold: the lines between two changes further apart
# than six would simply be missing.
CONTEXT_LINES = 20


def _git(repo: Path, *args: str) -> bytes:
    env = {**git_environment(os.environ), "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_TERMINAL_PROMPT": "0"}
    try:
        done = subprocess.run(
            ["git", "--git-dir", str(repo), "-c", "core.quotePath=false", *args],
            env=env, capture_output=True, timeout=TIMEOUT, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"git {args[0]} could not run: {exc}", code="vcs_unavailable") from None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise Unavailable(f"git {args[0]} failed: {message[0] if message else done.returncode}", code="vcs_unavailable")
    return done.stdout


def commits(repo: Path, base: str, head: str) -> list[dict[str, Any]]:
    out = _git(repo, "log", f"--format={LOG_FORMAT}", "--no-color", "--no-show-signature", f"{base}..{head}").decode(errors="replace")
    found = []
    for record in out.split("\x1e"):
        fields = record.strip("\n").split("\x00")
        if len(fields) < 6 or not SHA.fullmatch(fields[0]):
            continue
        sha, name, email, when, subject, body = fields[:6]
        found.append({"sha": sha, "short_sha": sha[:12], "author_name": name, "author_email": email,
                      "authored_at": when, "subject": subject, "body": body.strip()})
    return found


def changed_files(repo: Path, base: str, head: str) -> list[tuple[str, str, str]]:
    """(status, old path, path) of each changed file, in git's order."""
    raw = _git(repo, "diff", "--name-status", "-z", "-M", "--no-color", base, head).decode(errors="replace")
    parts = raw.split("\0")
    files, i = [], 0
    while i < len(parts) and parts[i]:
        status = parts[i][0]
        if status in "RC":
            files.append((status, parts[i + 1], parts[i + 2]))
            i += 3
        else:
            files.append((status, parts[i + 1], parts[i + 1]))
            i += 2
    return files


def parse_patch(lines: list[str]) -> tuple[list[dict[str, Any]], bool]:
    """One file's patch lines (after its ``diff --git`` line) as hunks; and whether it is binary."""
    hunks: list[dict[str, Any]] = []
    binary = False
    old_no = new_no = 0
    current: list[dict[str, Any]] | None = None
    for line in lines:
        match = HUNK.match(line)
        if match:
            old_start, old_lines, new_start, new_lines = (int(g) if g is not None else 1 for g in match.groups())
            current = []
            hunks.append({"header": line, "old_start": old_start, "old_lines": old_lines, "new_start": new_start,
                          "new_lines": new_lines, "lines": current})
            old_no, new_no = old_start, new_start
        elif current is None:
            binary = binary or line.startswith("Binary files ")
        elif line.startswith("+"):
            current.append({"kind": "add", "old_no": None, "new_no": new_no, "text": line[1:]})
            new_no += 1
        elif line.startswith("-"):
            current.append({"kind": "del", "old_no": old_no, "new_no": None, "text": line[1:]})
            old_no += 1
        elif line.startswith(" "):
            current.append({"kind": "context", "old_no": old_no, "new_no": new_no, "text": line[1:]})
            old_no += 1
            new_no += 1
        # "\ No newline at end of file" and the like: no line of either side
    return hunks, binary


def file_diffs(repo: Path, base: str, head: str) -> list[dict[str, Any]]:
    """Each changed file with its hunks (``git diff``, CONTEXT_LINES of context, renames found)."""
    names = changed_files(repo, base, head)
    patch = _git(repo, "diff", "-M", "--no-color", "--no-ext-diff", "--no-textconv", f"--unified={CONTEXT_LINES}", base, head).decode(errors="replace")
    chunks: list[list[str]] = []
    for line in patch.split("\n"):
        if line.startswith("diff --git "):
            chunks.append([])
        elif chunks:
            chunks[-1].append(line)
    files = []
    for (status, old_path, path), chunk in zip(names, chunks, strict=False):
        hunks, binary = parse_patch(chunk)
        files.append({
            "path": path, "old_path": old_path, "status": STATUS.get(status, "modified"), "binary": binary,
            "additions": sum(1 for h in hunks for x in h["lines"] if x["kind"] == "add"),
            "deletions": sum(1 for h in hunks for x in h["lines"] if x["kind"] == "del"),
            "hunks": hunks,
        })
    return files


class GitReviews:
    """Pull requests' commits and diffs from the execution plane's lane repositories."""

    def __init__(self, worktrees: Any) -> None:
        self.worktrees = worktrees  # ``workers.planes.local.worktrees.Worktrees``

    def pull_changes(self, run: Any, agent_id: str, head_sha: str) -> dict[str, Any]:
        """``{base_sha, head_sha, commits, files}`` of the agent's proposed commit."""
        if not SHA.fullmatch(head_sha):
            raise Unavailable("The pull request names no commit to review.", code="vcs_unavailable")
        try:
            repo = self.worktrees.repository_for(run, agent_id)
        except Exception as exc:  # the plane's WorktreeError: no repository to read
            raise Unavailable(f"The pull request's repository cannot be found: {exc}", code="vcs_unavailable") from None
        if not (repo.path / "HEAD").exists():
            raise Unavailable("The pull request's repository is not on this server.", code="vcs_unavailable")
        base = _git(repo.path, "merge-base", f"refs/heads/{repo.default_branch}", head_sha).decode().strip()
        return {"base_sha": base, "head_sha": head_sha, "commits": commits(repo.path, base, head_sha),
                "files": file_diffs(repo.path, base, head_sha)}
