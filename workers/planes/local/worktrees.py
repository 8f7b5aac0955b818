"""Git worktrees of the local plane: one per agent session, under the data directory.

Each session works in ``<data>/worktrees/<tenant>/<run_id>/<agent_id>`` on branch
``squad/<run_id>/<agent_id>`` of its lane's repository. Which repository that is, is
``repository_for``'s one decision: the binding's ``vcs_repo_url`` when the project has one
(cloned bare once into the data directory), else a local bare repository the plane creates
for the lane with an initial commit.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from domain.shared.ids import is_valid_branch, is_valid_id
from domain.studio.agent_tools import lane_binding
from domain.studio.brief import branch_name
from workers.paths import OutsideRoot, inside

GIT_TIMEOUT = 120
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "squadops",
    "GIT_AUTHOR_EMAIL": "squadops@squadops.local",
    "GIT_COMMITTER_NAME": "squadops",
    "GIT_COMMITTER_EMAIL": "squadops@squadops.local",
}


class WorktreeError(Exception):
    """A git command of the plane failed (the session's sources could not be materialized)."""


@dataclass(frozen=True)
class Repository:
    key: str
    path: Path
    origin: str
    default_branch: str


def git(*args: str, cwd: Path | None = None, stdin: str = "") -> str:
    env = {**os.environ, **GIT_IDENTITY, "GIT_TERMINAL_PROMPT": "0"}
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, env=env, input=stdin, capture_output=True, text=True,
            timeout=GIT_TIMEOUT, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorktreeError(f"git {args[0]} failed: {exc}") from exc
    if done.returncode != 0:
        raise WorktreeError(f"git {' '.join(args[:2])} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


class Worktrees:
    """Creates, recreates and removes the sessions' worktrees."""

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir.resolve()
        self._lock = threading.Lock()

    def repository_for(self, run: Any, agent_id: str) -> Repository:
        """The repository of the agent's lane (the assembly repository for coordination roles)."""
        binding = lane_binding(run.project_facts, agent_id)
        key = str(binding.get("repository_key") or "assembly")
        branch = str(binding.get("default_branch") or "main")
        if not is_valid_branch(branch):
            raise WorktreeError(f"{branch!r} is not a branch name")
        path = self._inside("repos", run.tenant, run.project_slug, key, suffix=".git")
        return Repository(key, path, str(binding.get("vcs_repo_url") or ""), branch)

    def path_for(self, tenant: str, run_id: str, agent_id: str) -> Path:
        return self._inside("worktrees", tenant, run_id, agent_id)

    def run_dir(self, tenant: str, run_id: str) -> Path:
        return self._inside("worktrees", tenant, run_id)

    def _inside(self, *parts: str, suffix: str = "") -> Path:
        """Identifier-named parts under the data directory, never a path outside it."""
        try:
            return inside(self.root, *parts, suffix=suffix)
        except OutsideRoot as exc:
            raise WorktreeError(str(exc)) from None

    # -- repositories -------------------------------------------------------------------

    def ensure_repository(self, repo: Repository) -> None:
        if (repo.path / "HEAD").exists():
            return
        repo.path.parent.mkdir(parents=True, exist_ok=True)
        if repo.origin:
            git("clone", "--bare", "--", repo.origin, str(repo.path))
            return
        git("init", "--bare", f"--initial-branch={repo.default_branch}", "--", str(repo.path))
        tree = git("hash-object", "-t", "tree", "-w", "--stdin", cwd=repo.path)
        commit = git("commit-tree", tree, "-m", f"squadops: start of the {repo.key} lane", cwd=repo.path)
        git("update-ref", f"refs/heads/{repo.default_branch}", commit, cwd=repo.path)

    # -- worktrees ----------------------------------------------------------------------

    def ensure(self, run: Any, agent_id: str) -> Path:
        """The session's worktree, created (with its branch) when it is not there."""
        with self._lock:
            repo = self.repository_for(run, agent_id)
            self.ensure_repository(repo)
            path = self.path_for(run.tenant, run.run_id, agent_id)
            if (path / ".git").exists():
                return path
            if path.exists():
                shutil.rmtree(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            git("worktree", "prune", cwd=repo.path)
            branch = branch_name(run.run_id, agent_id)
            exists = subprocess.run(
                ["git", "show-ref", "--verify", "--quiet", f"refs/heads/{branch}"], cwd=repo.path, check=False
            ).returncode == 0
            if exists:
                git("worktree", "add", "--", str(path), branch, cwd=repo.path)
            else:
                git("worktree", "add", "-b", branch, "--", str(path), repo.default_branch, cwd=repo.path)
            return path

    def recreate(self, run: Any, agent_id: str) -> Path:
        """A fresh checkout of the session's branch (what it committed survives)."""
        self.remove(self.path_for(run.tenant, run.run_id, agent_id))
        return self.ensure(run, agent_id)

    def remove(self, path: Path) -> None:
        with self._lock:
            repo = self._repository_of(path)
            if repo is not None and repo.exists():
                with contextlib.suppress(WorktreeError):
                    git("worktree", "remove", "--force", str(path), cwd=repo)
            if path.exists():
                shutil.rmtree(path, ignore_errors=True)
            if repo is not None and repo.exists():
                git("worktree", "prune", cwd=repo)

    def remove_run(self, tenant: str, run_id: str) -> list[Path]:
        """Removes every worktree of the run; answers the paths removed."""
        folder = self.run_dir(tenant, run_id)
        removed = sorted(p for p in folder.iterdir() if p.is_dir()) if folder.exists() else []
        for path in removed:
            self.remove(path)
        shutil.rmtree(folder, ignore_errors=True)
        return removed

    def runs_on_disk(self) -> list[tuple[str, str]]:
        """``(tenant, run_id)`` of every run that has a worktree folder here."""
        root = self.root / "worktrees"
        if not root.exists():
            return []
        return sorted(
            (t.name, r.name) for t in root.iterdir() if t.is_dir() and is_valid_id(t.name)
            for r in t.iterdir() if r.is_dir() and is_valid_id(r.name)
        )

    def is_worktree(self, path: Path) -> bool:
        return (path / ".git").is_file() and self._repository_of(path) is not None

    @staticmethod
    def _repository_of(path: Path) -> Path | None:
        """The repository a worktree belongs to, read from its ``.git`` file."""
        marker = path / ".git"
        if not marker.is_file():
            return None
        text = marker.read_text().strip()
        if not text.startswith("gitdir:"):
            return None
        admin = Path(text.removeprefix("gitdir:").strip())
        return admin.parent.parent if admin.parent.name == "worktrees" else None
