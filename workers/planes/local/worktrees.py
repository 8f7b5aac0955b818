"""Git worktrees of the local plane: one per agent session, under the data directory.

Each session works in ``<data>/worktrees/<tenant>/<run_id>/<agent_id>`` on branch
``squad/<run_id>/<agent_id>``. Its commits are the plane's to bring into the lane's
repository, where reviews and publishing read them. Which repository that is, is
``repository_for``'s one decision: the binding's ``vcs_repo_url`` when the project has one
(cloned bare once into the data directory), else a local bare repository the plane creates
for the lane with an initial commit.

The worktree belongs to a repository of the agent's own
(``<data>/agent-repos/<tenant>/<run_id>/<agent_id>.git``) that borrows the lane's objects
(``objects/info/alternates``): the sandbox lets the agent write that repository (``git
commit`` must work) and only read the lane's objects, so no agent can move, delete or
rewrite another agent's branch or objects, of its run or of another run of the project. The
plane brings the agent's branch (and whatever other refs it made) into the lane repository
whenever it reads the branch (``changes``), keeps uncommitted work (``preserve``) or removes
the worktree (``remove``): objects by ``pack-objects``/``index-pack``, refs by ``update-ref``,
an earlier head the agent rewrote kept under ``refs/squadops/kept/``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from domain.shared import ports
from domain.shared.ids import is_valid_branch, is_valid_id
from domain.studio.agent_tools import lane_binding
from domain.studio.brief import branch_name
from workers.adapters.local_git import git_environment
from workers.paths import OutsideRoot, inside
from workers.planes.local import agent_repos
from workers.planes.local.host_git import GIT_IDENTITY, WorktreeError, git, plumbing, small_text
from workers.planes.local.sandbox import SandboxConfig

log = structlog.get_logger("squadops.local_plane")


@dataclass(frozen=True)
class Repository:
    key: str
    path: Path
    origin: str
    default_branch: str
    # The origin is the binding's mirror (the service's own, out of the agents' reach): its
    # default branch is brought in again whenever the lane's repository is used.
    refresh: bool = False


def holds_repository(path: Path) -> bool:
    """Whether a repository of its own lies inside the worktree (a ``.git`` below its top): the
    plane's git does not look into one (no submodule is run), so what is uncommitted in it is
    not seen, and the worktree is kept rather than removed with it."""
    for folder, dirs, files in os.walk(path):
        if folder != str(path) and (".git" in dirs or ".git" in files):
            return True
        dirs[:] = [d for d in dirs if d != ".git"]
    return False


class Worktrees:
    """Creates, recreates and removes the sessions' worktrees."""

    def __init__(self, data_dir: Path, vcs_root: Path | None = None, confine: SandboxConfig | None = None) -> None:
        self.root = data_dir.resolve()
        self.vcs_root = (vcs_root or data_dir / "vcs").resolve()  # the bindings' repositories (``LocalGitVcs``)
        self.confine = confine  # the agents' sandbox, where the plane reads what an agent's repository holds
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
        pack = plumbing(["git", "--git-dir", repo.origin, "pack-objects", "--revs", "--stdout", "--quiet"], revs.encode())
        plumbing(["git", "-c", f"core.hooksPath={os.devnull}", "--git-dir", str(repo.path), "index-pack", "--stdin",
              "--fix-thin"], pack)
        git("-c", f"core.hooksPath={os.devnull}", "--git-dir", str(repo.path), "update-ref", ref, head)

    # -- worktrees ----------------------------------------------------------------------

    def ensure(self, run: Any, agent_id: str) -> Path:
        """The session's worktree, created (with its branch) when it is not there. A worktree
        of the lane repository itself (made before agents had repositories of their own, when
        the sandbox let every agent of the project write the lane) is moved onto one: what it
        holds is committed onto its branch, and a fresh checkout of that branch takes its place."""
        path = self.path_for(run.tenant, run.run_id, agent_id)
        located = self._located(path)
        if located is not None and not self._is_own(located[0]):
            return self.recreate(run, agent_id, message="squadops: work kept before moving to the agent's own repository")
        with self._lock:
            repo = self.repository_for(run, agent_id)
            self.ensure_repository(repo)
            path = self.path_for(run.tenant, run.run_id, agent_id)
            if (path / ".git").exists():
                return path
            if path.exists():
                shutil.rmtree(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            branch = branch_name(run.run_id, agent_id)
            own = self.own_repository(run.tenant, run.run_id, agent_id)
            if (own / "HEAD").exists():  # left without its worktree: its refs into the lane, then afresh
                self._retire(own, repo.path, run.run_id, agent_id)
            agent_repos.make(own, repo.path, repo.default_branch, branch)
            git("worktree", "add", "--", str(path), branch, cwd=own, env=agent_repos.git_env(own))
            return path

    def _retire(self, own: Path, lane: Path, run_id: str, agent_id: str) -> None:
        """An agent's repository that no worktree uses any more: brought into the lane and
        removed, or, when it cannot be brought whole, moved under ``<data>/kept/`` (never
        deleted with what only it holds)."""
        try:
            agent_repos.bring_back(own, lane, run_id, agent_id, self.confine)
        except WorktreeError as exc:
            kept = self.root / "kept" / own.relative_to(self.root)
            n = 0
            while kept.exists():
                n += 1
                kept = kept.with_name(f"{own.name.removesuffix('.git')}-{n}.git")
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(own), str(kept))
            log.warning("local_agent_repository_kept", run_id=run_id, agent_id=agent_id, kept=str(kept), error=str(exc))
            return
        shutil.rmtree(own)

    def own_repository(self, tenant: str, run_id: str, agent_id: str) -> Path:
        """The agent's own repository (its worktree's; see the module doc)."""
        return self._inside("agent-repos", tenant, run_id, agent_id, suffix=".git")

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
                    git("worktree", "prune", cwd=repo, env=self._repository_env(repo))
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
            self._bring_back_worktree(path)
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
                self._bring_back_worktree(path)  # everything of the agent's is in the lane first
            except WorktreeError:
                return False
            # Not ``git worktree remove``: its own check runs git in the worktree through the
            # folder's ``commondir``, which the agent could write. Clean, the files go, and
            # prune drops the folder of a worktree that is gone.
            shutil.rmtree(path)
            git("worktree", "prune", cwd=repo, env=self._repository_env(repo))
            if self._is_own(repo) and not any((repo / "worktrees").glob("*")):
                shutil.rmtree(repo)  # (its refs are in the lane now)
                agent_repos.record(repo).unlink(missing_ok=True)
            return True

    def remove_run(self, tenant: str, run_id: str) -> tuple[list[Path], list[Path]]:
        """Removes every worktree of the run that is wholly in refs; answers (removed, kept)."""
        folder = self.run_dir(tenant, run_id)
        paths = sorted(p for p in folder.iterdir() if p.is_dir()) if folder.exists() else []
        removed = [p for p in paths if self.remove(p)]
        kept = [p for p in paths if p not in removed]
        if not kept:
            shutil.rmtree(folder, ignore_errors=True)
            own = self._inside("agent-repos", tenant, run_id)
            if own.is_dir() and not any(own.glob("*.git/worktrees/*")):
                shutil.rmtree(own, ignore_errors=True)
        return removed, kept

    def changes(self, run: Any, agent_id: str) -> ports.BranchChanges | None:
        """What the agent's branch changed against its lane's default branch (None: no branch)."""
        repo = self.repository_for(run, agent_id)
        branch = branch_name(run.run_id, agent_id)
        if not (repo.path / "HEAD").exists():
            return None
        with self._lock:
            own = self.own_repository(run.tenant, run.run_id, agent_id)
            if (own / "HEAD").exists():
                try:
                    agent_repos.bring_back(own, repo.path, run.run_id, agent_id, self.confine)
                except WorktreeError as exc:  # the lane keeps what it had; the agent's repository stays
                    log.warning("local_branch_not_brought_back", run_id=run.run_id, agent_id=agent_id, error=str(exc))
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
        ``worktrees/`` or ``kept/``): the agent's own repository (``agent-repos/``; a worktree
        the plane made before those, one of the tenant's lane repositories), never wherever the
        worktree's ``.git`` file points. The agent writes that file and its folder's
        ``commondir`` (both in reach of its sandbox): they would hand the plane's git, on the
        host, a configuration of the agent's (a filter, a signing program) or hand the next
        sandbox a writable folder anywhere. The folder is found among the repository's
        ``worktrees/*`` by the worktree it names (git's own ``gitdir`` record)."""
        real = path.resolve()
        try:
            rel = real.relative_to(self.root)
        except ValueError:
            return None
        if len(rel.parts) != 4 or rel.parts[0] not in ("worktrees", "kept") or not (real / ".git").is_file():
            return None
        if not all(is_valid_id(part) for part in rel.parts[1:]):
            return None
        marker = str(real / ".git")  # as git records it (the real path)
        own = self.root / "agent-repos" / rel.parts[1] / rel.parts[2] / f"{rel.parts[3]}.git"
        lanes = self.root / "repos" / rel.parts[1]

        def places() -> Iterator[Path]:  # the agent's repository, then (only if not there) the lanes
            if rel.parts[0] == "worktrees" and own.is_dir() and not own.is_symlink():
                yield own / "worktrees"
            if lanes.is_dir():
                yield from sorted(lanes.glob("*/*.git/worktrees"))

        for place in places():
            found = []
            for admin in sorted(place.glob("*")):
                record = admin / "gitdir"
                if place.is_symlink() or admin.is_symlink() or admin.parent.parent.is_symlink() or not record.is_file():
                    continue
                with contextlib.suppress(OSError):
                    if small_text(record).strip() == marker:
                        found.append(admin)
            if found:
                with contextlib.suppress(OSError):  # two claim it (a record rewritten): the one .git names
                    named = Path(small_text(Path(marker)).strip().removeprefix("gitdir:").strip())
                    found.sort(key=lambda admin: admin != named)
                return found[0].parent.parent, found[0]
        return None

    def _is_own(self, repository: Path) -> bool:
        return repository.parent.parent.parent == self.root / "agent-repos"

    def _repository_env(self, repository: Path) -> dict[str, str] | None:
        """An agent's repository named outright (``agent_repos.git_env``); a lane's as found."""
        return agent_repos.git_env(repository) if self._is_own(repository) else None

    def lent_objects(self, path: Path) -> list[Path]:
        """The lane's object store that the worktree's own repository borrows (read-only to the
        agent; nothing for a worktree of a lane repository itself)."""
        located = self._located(path)
        if located is None or not self._is_own(located[0]):
            return []
        lane = agent_repos.lane_of(located[0], self.root / "repos")
        return [] if lane is None else [lane / "objects"]

    def _bring_back_worktree(self, path: Path) -> None:
        """The worktree's own repository brought into its lane (see ``agent_repos``): its
        branch and its other refs. (A worktree of the lane repository itself has nothing to
        bring.) The caller holds the lock."""
        located = self._located(path)
        if located is None or not self._is_own(located[0]):
            return
        own = located[0]
        lane = agent_repos.lane_of(own, self.root / "repos")
        if lane is None:
            raise WorktreeError(f"{own} borrows from no lane repository of this plane")
        agent_repos.bring_back(own, lane, own.parent.name, own.name.removesuffix(".git"), self.confine)

    def _git_env(self, path: Path) -> dict[str, str]:
        """git's repository, folder and work tree for the worktree at ``path``, named outright
        (see ``_located``); WorktreeError when it belongs to no lane repository of the plane's."""
        located = self._located(path)
        if located is None:
            raise WorktreeError(f"{path} is no worktree of a lane repository")
        repo, admin = located
        self._repository_env(repo)  # (a ``commondir`` at the top of an agent's repository goes)
        # git's ref store follows the folder's ``commondir`` file even where GIT_COMMON_DIR
        # names the repository (files-backend reads the file): it is put back as git wrote it,
        # replaced (never written through, it may be a link), so refs land in the repository.
        commondir = admin / "commondir"
        if small_text(commondir) != "../..\n":
            fresh = admin / f"commondir.{os.getpid()}.{threading.get_ident()}"
            fresh.write_text("../..\n")
            os.replace(fresh, commondir)
        return {"GIT_DIR": str(admin), "GIT_COMMON_DIR": str(repo), "GIT_WORK_TREE": str(path)}
