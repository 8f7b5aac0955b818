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
import stat
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from domain.shared import ports
from domain.shared.ids import is_valid_branch, is_valid_id
from domain.studio.agent_tools import lane_binding
from domain.studio.brief import branch_name
from workers.adapters.local_git import git_environment
from workers.paths import OutsideRoot, inside

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


@dataclass(frozen=True)
class Repository:
    key: str
    path: Path
    origin: str
    default_branch: str
    # The origin is the binding's mirror (the service's own, out of the agents' reach): its
    # default branch is brought in again whenever the lane's repository is used.
    refresh: bool = False


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


def holds_repository(path: Path) -> bool:
    """Whether a repository of its own lies inside the worktree (a ``.git`` below its top): the
    plane's git does not look into one (no submodule is run), so what is uncommitted in it is
    not seen, and the worktree is kept rather than removed with it."""
    for folder, dirs, files in os.walk(path):
        if folder != str(path) and (".git" in dirs or ".git" in files):
            return True
        dirs[:] = [d for d in dirs if d != ".git"]
    return False


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


def _run(argv: list[str], data: bytes) -> bytes:
    """A git plumbing command fed ``data`` on stdin; its stdout (bytes)."""
    what = next((a for a in argv[1:] if a in ("pack-objects", "index-pack")), argv[0])
    try:
        done = subprocess.run(argv, input=data, capture_output=True, timeout=GIT_TIMEOUT, check=False,
                              env=git_environment(os.environ))
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorktreeError(f"git {what} failed: {exc}") from exc
    if done.returncode != 0:
        raise WorktreeError(f"git {what} failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


class Worktrees:
    """Creates, recreates and removes the sessions' worktrees."""

    def __init__(self, data_dir: Path, vcs_root: Path | None = None) -> None:
        self.root = data_dir.resolve()
        self.vcs_root = (vcs_root or data_dir / "vcs").resolve()  # the bindings' repositories (``LocalGitVcs``)
        self._lock = threading.Lock()

    def repository_for(self, run: Any, agent_id: str) -> Repository:
        """The repository of the agent's lane (the assembly repository for coordination roles):
        for a binding that brings an existing repository, its mirror itself."""
        binding = lane_binding(run.project_facts, agent_id)
        key = str(binding.get("repository_key") or "assembly")
        branch = str(binding.get("default_branch") or "main")
        if not is_valid_branch(branch):
            raise WorktreeError(f"{branch!r} is not a branch name")
        path = self._inside("repos", run.tenant, run.project_slug, key, suffix=".git")
        if binding.get("source") == "mirror":
            owner, _, name = str(binding.get("vcs_repo_slug") or "").partition("/")
            try:
                mirror = inside(self.vcs_root, run.tenant, owner, name, suffix=".git")
            except OutsideRoot as exc:
                raise WorktreeError(str(exc)) from None
            return Repository(key, path, str(mirror), branch, refresh=True)
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

    def ensure_repository(self, repo: Repository, when: str = "") -> None:
        """The lane's repository: a bare clone of its origin, or a new one whose first commit is
        empty (dated ``when`` when given, so that the same lane starts from the same commit)."""
        if (repo.path / "HEAD").exists():
            if repo.refresh:
                self._refresh(repo)
            return
        repo.path.parent.mkdir(parents=True, exist_ok=True)
        if repo.origin:
            git("clone", "--bare", "--", repo.origin, str(repo.path))
            return
        git("init", "--bare", f"--initial-branch={repo.default_branch}", "--", str(repo.path))
        tree = git("hash-object", "-t", "tree", "-w", "--stdin", cwd=repo.path)
        dates = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when} if when else {}
        commit = git("commit-tree", tree, "-m", f"squadops: start of the {repo.key} lane", cwd=repo.path, env=dates)
        git("update-ref", f"refs/heads/{repo.default_branch}", commit, cwd=repo.path)

    @staticmethod
    def _refresh(repo: Repository) -> None:
        """The mirror's default branch brought into the lane's repository as a pack of the
        objects it lacks and a ref update. No transport and no hook: the lane repository's
        configuration and hooks are the agents' to write (a sandboxed agent's git metadata is
        writable), so the service runs nothing they could name (fetch and push would: an
        ``insteadOf`` rewrite, a receive-pack hook)."""
        ref = f"refs/heads/{repo.default_branch}"
        head = git("--git-dir", repo.origin, "rev-parse", "--verify", "--quiet", ref)
        have = Worktrees._rev(repo.path, ref)
        if head == have:
            return
        revs = f"{head}\n" + (f"^{have}\n" if have and Worktrees._rev(Path(repo.origin), have) else "")
        pack = _run(["git", "--git-dir", repo.origin, "pack-objects", "--revs", "--stdout", "--quiet"], revs.encode())
        _run(["git", "-c", f"core.hooksPath={os.devnull}", "--git-dir", str(repo.path), "index-pack", "--stdin",
              "--fix-thin"], pack)
        git("-c", f"core.hooksPath={os.devnull}", "--git-dir", str(repo.path), "update-ref", ref, head)

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
                ["git", "show-ref", "--verify", "--quiet", f"refs/heads/{branch}"], cwd=repo.path, check=False,
                env=git_environment(os.environ),
            ).returncode == 0
            if exists:
                git("worktree", "add", "--", str(path), branch, cwd=repo.path)
            else:
                git("worktree", "add", "-b", branch, "--", str(path), repo.default_branch, cwd=repo.path)
            return path

    def recreate(self, run: Any, agent_id: str, author: str = "", message: str = "") -> Path:
        """A fresh checkout of the session's branch. What the agent left uncommitted is
        committed onto its branch first; a worktree that cannot be kept whole stays."""
        path = self.path_for(run.tenant, run.run_id, agent_id)
        if path.exists():
            with contextlib.suppress(WorktreeError):
                self.preserve(path, author or GIT_IDENTITY["GIT_AUTHOR_EMAIL"],
                              message or "squadops: work kept before a fresh checkout")
            if not self.remove(path):
                self.set_aside(path)
        return self.ensure(run, agent_id)

    def set_aside(self, path: Path) -> Path:
        """Moves a worktree that cannot be committed whole (a broken checkout, say) out of the
        way, under ``<data>/kept/``, instead of deleting what it holds."""
        with self._lock:
            rel = path.relative_to(self.root / "worktrees")
            target = self.root / "kept" / rel
            n = 0
            while target.exists():
                n += 1
                target = self.root / "kept" / rel.parent / f"{rel.name}-{n}"
            target.parent.mkdir(parents=True, exist_ok=True)
            repo = self._repository_of(path)
            shutil.move(str(path), str(target))
            if repo is not None and repo.exists():
                with contextlib.suppress(WorktreeError):
                    git("worktree", "prune", cwd=repo)
            return target

    def preserve(self, path: Path, author: str, message: str) -> str:
        """Commits what is uncommitted in the worktree onto its branch, as ``author``; answers
        the new commit ("" when there was nothing to commit). A detached HEAD is kept under
        ``refs/squadops/kept/`` so no commit of the agent's is left in no ref."""
        if not (path / ".git").exists():
            return ""
        with self._lock:
            env = self._git_env(path)
            commit = ""
            if git("status", "--porcelain", "--untracked-files=all", cwd=path, env=env):
                git("add", "--all", "--", ".", cwd=path, env=env)
                if git("diff", "--cached", "--name-only", cwd=path, env=env):
                    git("commit", "--no-verify", "--quiet", "-m", message, cwd=path, identity=author, env=env)
                    commit = git("rev-parse", "HEAD", cwd=path, env=env)
            try:
                git("symbolic-ref", "-q", "HEAD", cwd=path, env=env)
            except WorktreeError:  # a detached HEAD
                head = git("rev-parse", "HEAD", cwd=path, env=env)
                git("update-ref", f"refs/squadops/kept/{path.parent.name}/{path.name}/{head}", head, cwd=path, env=env)
            return commit

    def is_clean(self, path: Path) -> bool:
        return not git("status", "--porcelain", "--untracked-files=all", cwd=path, env=self._git_env(path))

    def remove(self, path: Path) -> bool:
        """Removes a worktree once everything in it is in a ref (False: it stays, with the
        work it holds). A folder that is no git worktree holds nothing of an agent's."""
        with self._lock:
            if not path.exists():
                return True
            repo = self._repository_of(path)
            if repo is None:
                if (path / ".git").exists():
                    return False  # its repository is gone: the files here are the only copy
                shutil.rmtree(path, ignore_errors=True)
                return True
            if not repo.exists():
                return False
            try:
                if not self.is_clean(path) or holds_repository(path):
                    return False
            except WorktreeError:
                return False
            # Not ``git worktree remove``: its own check runs git in the worktree through the
            # folder's ``commondir``, which the agent could write. Clean, the files go, and
            # prune drops the folder of a worktree that is gone.
            shutil.rmtree(path)
            git("worktree", "prune", cwd=repo)
            return True

    def remove_run(self, tenant: str, run_id: str) -> tuple[list[Path], list[Path]]:
        """Removes every worktree of the run that is wholly in refs; answers (removed, kept)."""
        folder = self.run_dir(tenant, run_id)
        paths = sorted(p for p in folder.iterdir() if p.is_dir()) if folder.exists() else []
        removed = [p for p in paths if self.remove(p)]
        kept = [p for p in paths if p not in removed]
        if not kept:
            shutil.rmtree(folder, ignore_errors=True)
        return removed, kept

    def changes(self, run: Any, agent_id: str) -> ports.BranchChanges | None:
        """What the agent's branch changed against its lane's default branch (None: no branch)."""
        repo = self.repository_for(run, agent_id)
        branch = branch_name(run.run_id, agent_id)
        if not (repo.path / "HEAD").exists():
            return None
        with self._lock:
            try:
                head = git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", cwd=repo.path)
                base = git("merge-base", f"refs/heads/{repo.default_branch}", head, cwd=repo.path)
                paths = git("diff", "--name-only", "-z", base, head, "--", cwd=repo.path, raw=True)
            except WorktreeError:
                return None
            path = self.path_for(run.tenant, run.run_id, agent_id)
            uncommitted = ""
            if (path / ".git").exists():
                with contextlib.suppress(WorktreeError):
                    uncommitted = git("status", "--porcelain", "-z", "--untracked-files=all", cwd=path, raw=True,
                                      env=self._git_env(path))
        return ports.BranchChanges(
            branch=branch, base_sha=base, head_sha=head, repository=str(repo.path),
            paths=tuple(p for p in paths.split("\0") if p),
            uncommitted=tuple(entry[3:] for entry in uncommitted.split("\0") if len(entry) > 3),
        )

    def commit_files(
        self, run: Any, agent_id: str, files: dict[str, str], message: str, author: str, when: str = "",
    ) -> ports.BranchChanges | None:
        """Commits ``files`` onto the agent's branch straight in its lane's repository (no
        checkout: git's plumbing on a private index), once: a branch whose tree already holds
        them is left as it is. ``when`` (ISO time) makes the commit's dates, and so its id,
        deterministic."""
        repo = self.repository_for(run, agent_id)
        branch = f"refs/heads/{branch_name(run.run_id, agent_id)}"
        with self._lock:
            self.ensure_repository(repo, when)
            parent = self._rev(repo.path, branch) or self._rev(repo.path, f"refs/heads/{repo.default_branch}")
            index = repo.path / f"squadops-index-{os.getpid()}-{threading.get_ident()}"
            env = {"GIT_INDEX_FILE": str(index)}
            if when:
                env.update(GIT_AUTHOR_DATE=when, GIT_COMMITTER_DATE=when)
            try:
                git("read-tree", parent, cwd=repo.path, env=env)
                for path, content in sorted(files.items()):
                    blob = git("hash-object", "-w", "--stdin", cwd=repo.path, stdin=content)
                    git("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", cwd=repo.path, env=env)
                tree = git("write-tree", cwd=repo.path, env=env)
            finally:
                index.unlink(missing_ok=True)
            if tree != git("rev-parse", f"{parent}^{{tree}}", cwd=repo.path):
                commit = git("commit-tree", tree, "-p", parent, "-m", message, cwd=repo.path, identity=author, env=env)
                git("update-ref", branch, commit, cwd=repo.path)
        return self.changes(run, agent_id)

    @staticmethod
    def _rev(repository: Path, ref: str) -> str:
        done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", ref], cwd=repository, capture_output=True,
                              text=True, check=False, env=git_environment(os.environ))
        return done.stdout.strip() if done.returncode == 0 else ""

    def git_dirs(self, path: Path) -> list[Path]:
        """The git metadata a commit in the worktree writes: the repository it belongs to (objects,
        refs) and the worktree's own folder in it (index, HEAD). Codex's sandbox keeps a
        worktree's git folder read-only unless it is a writable root by itself."""
        located = self._located(path)
        return [] if located is None else list(located)
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
        return self._located(path) is not None

    def _repository_of(self, path: Path) -> Path | None:
        located = self._located(path)
        return None if located is None else located[0]

    def _located(self, path: Path) -> tuple[Path, Path] | None:
        """(repository, the worktree's folder in it) of the worktree at ``path`` (under
        ``worktrees/`` or ``kept/``): one of the plane's own lane repositories of the worktree's
        tenant, never wherever the worktree's ``.git`` file points. The agent writes that file
        and its folder's ``commondir`` (both in reach of its sandbox): they would hand the
        plane's git, on the host, a configuration of the agent's (a filter, a signing program)
        or hand the next sandbox a writable folder anywhere. The folder is found among the lane
        repositories' ``worktrees/*`` by the worktree it names (git's own ``gitdir`` record)."""
        real = path.resolve()
        try:
            rel = real.relative_to(self.root)
        except ValueError:
            return None
        if len(rel.parts) != 4 or rel.parts[0] not in ("worktrees", "kept") or not (real / ".git").is_file():
            return None
        marker = str(real / ".git")  # as git records it (the real path)
        repos = self.root / "repos" / rel.parts[1]
        found = []
        for admin in sorted(repos.glob("*/*.git/worktrees/*")) if repos.is_dir() else []:
            record = admin / "gitdir"
            if admin.is_symlink() or admin.parent.parent.is_symlink() or not record.is_file():
                continue
            with contextlib.suppress(OSError):
                if small_text(record).strip() == marker:
                    found.append(admin)
        if not found:
            return None
        with contextlib.suppress(OSError):  # two claim it (a record rewritten): the one .git names
            named = Path(small_text(Path(marker)).strip().removeprefix("gitdir:").strip())
            found.sort(key=lambda admin: admin != named)
        return found[0].parent.parent, found[0]

    def _git_env(self, path: Path) -> dict[str, str]:
        """git's repository, folder and work tree for the worktree at ``path``, named outright
        (see ``_located``); WorktreeError when it belongs to no lane repository of the plane's."""
        located = self._located(path)
        if located is None:
            raise WorktreeError(f"{path} is no worktree of a lane repository")
        repo, admin = located
        # git's ref store follows the folder's ``commondir`` file even where GIT_COMMON_DIR
        # names the repository (files-backend reads the file): it is put back as git wrote it,
        # replaced (never written through, it may be a link), so refs land in the repository.
        commondir = admin / "commondir"
        if small_text(commondir) != "../..\n":
            fresh = admin / f"commondir.{os.getpid()}.{threading.get_ident()}"
            fresh.write_text("../..\n")
            os.replace(fresh, commondir)
        return {"GIT_DIR": str(admin), "GIT_COMMON_DIR": str(repo), "GIT_WORK_TREE": str(path)}
