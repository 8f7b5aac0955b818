"""The built-in VCS adapter: a real local bare git repository per binding, under the data
directory (``<data_dir>/vcs/<tenant>/<owner>/<name>.git``), with ``default_branch`` and an
initial commit of the starter files, written with git's plumbing (no work tree)."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

from domain.projects.provisioning import Repository

_PART = re.compile(r"[^A-Za-z0-9._-]+")
AUTHOR = {"GIT_AUTHOR_NAME": "squadops", "GIT_AUTHOR_EMAIL": "squadops@localhost",
          "GIT_COMMITTER_NAME": "squadops", "GIT_COMMITTER_EMAIL": "squadops@localhost"}


class VcsError(RuntimeError):
    pass


def _safe(part: str) -> str:
    clean = _PART.sub("-", part).strip(".-")
    if not clean:
        raise VcsError(f"not a usable repository name part: {part!r}")
    return clean


class LocalBareGitVcs:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path_of(self, tenant: str, repo_slug: str) -> Path:
        parts = [_safe(p) for p in repo_slug.split("/") if p]
        if not parts:
            raise VcsError("a repository needs a slug")
        parts[-1] = parts[-1].removesuffix(".git") + ".git"
        return self.root / _safe(tenant) / Path(*parts)

    def _git(self, repo: Path, *args: str, stdin: str | None = None) -> str:
        env = {**os.environ, **AUTHOR, "GIT_DIR": str(repo)}
        done = subprocess.run(
            ["git", *args], input=stdin, capture_output=True, text=True, env=env, timeout=30, check=False
        )
        if done.returncode != 0:
            raise VcsError(f"git {args[0]} failed: {done.stderr.strip()[:300]}")
        return done.stdout.strip()

    def create_repository(
        self, *, tenant: str, project_slug: str, repo_slug: str, default_branch: str, private: bool,
        files: Mapping[str, str],
    ) -> Repository:
        path = self.path_of(tenant, repo_slug)
        if path.exists():
            raise VcsError(f"repository {repo_slug!r} already exists")
        path.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["git", "init", "--bare", "--quiet", f"--initial-branch={default_branch}", str(path)],
            capture_output=True, text=True, timeout=30, check=False,
        )
        if done.returncode != 0:
            raise VcsError(f"git init failed: {done.stderr.strip()[:300]}")
        entries = []
        for name in sorted(files):
            blob = self._git(path, "hash-object", "-w", "--stdin", stdin=files[name])
            if "/" in name or name in ("", ".", "..", ".git") or "\n" in name or "\t" in name:
                raise VcsError(f"not a starter file name: {name!r}")
            entries.append(f"100644 blob {blob}\t{name}")
        tree = self._git(path, "mktree", stdin="\n".join(entries) + "\n")
        commit = self._git(path, "commit-tree", tree, "-m", f"Start {project_slug}")
        self._git(path, "update-ref", f"refs/heads/{default_branch}", commit)
        return Repository(url=path.resolve().as_uri(), node_id=commit)
