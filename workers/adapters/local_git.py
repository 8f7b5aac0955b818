"""The built-in vcs adapter: one local bare git repository per repository, via the git CLI.

It is the one local-git adapter behind both vcs ports: the project factory's provisioning
(``domain.projects.provisioning.VcsPort.create_repository``: a new repository with its
default branch and an initial commit of the starter files) and the gate's publication
(``domain.gate.ports.Vcs``). Repositories belong to a tenant: both address
``<root>/<tenant>/<owner>/<name>.git`` (``for_tenant``), so the gate publishes into the very
repository the factory provisioned for a binding of the same tenant, and no tenant names,
takes or reaches another's. Every part of the path is an identifier and the path stays
under the root (``workers.paths.inside``); git gets ``--`` before paths and refs.

``<root>/<tenant>/<owner>/<name>.git`` is also created on first publication (an empty initial
commit on the base branch) when the factory did not provision it. A branch is committed in a temporary clone and pushed; a pull request is kept the
way hosted vcs keep it: ``refs/pull/<n>/head`` and a test merge at ``refs/pull/<n>/merge``
(``git merge-tree``), with its title, body, labels, comments and check runs in
``<repo>.git/squadops/pulls/<n>.json``. Numbers and ids are given out under a file lock,
so several processes may publish to one repository at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from domain.gate.policies import valid_repo
from domain.gate.ports import Comment, Commit, PullRequest, VcsError
from domain.projects.sources import GIT_ALLOW_PROTOCOL, Repository, SourcePolicy
from domain.shared.ids import is_valid_branch, is_valid_id
from domain.shared.ports import BranchChanges
from workers.adapters.git_sources import SourceMirrors, resolve_host
from workers.paths import OutsideRoot, inside

_EMAIL = re.compile(r"^(?P<name>.+?)\s*<(?P<email>[^<>@\s]+@[^<>\s]+)>$")
_SLUG = re.compile(r"[^a-z0-9]+")
_SHA = re.compile(r"[0-9a-f]{40}")
T = TypeVar("T")
# What would point git at another repository, object store, configuration or namespace than
# the one its command line names (``git rev-parse --local-env-vars`` and their kin): never
# taken from the service's environment (``GIT_ALTERNATE_OBJECT_DIRECTORIES`` would lend a
# mirror another tenant's objects, ``GIT_DIR`` would redirect every command).
REPOSITORY_VARIABLES = frozenset({
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE",
    "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_PREFIX", "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_SHALLOW_FILE", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_QUARANTINE_PATH", "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_CONFIG_SYSTEM", "GIT_ATTR_SOURCE",
})


def git_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without ``REPOSITORY_VARIABLES`` (nor ``GIT_CONFIG_KEY_<n>``/``_VALUE_<n>``)."""
    return {name: value for name, value in environ.items()
            if name not in REPOSITORY_VARIABLES and not name.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))}


def identity(author: str) -> tuple[str, str]:
    """``(name, email)`` of an author given as ``Name <email>`` or as a bare name."""
    match = _EMAIL.match(author.strip())
    if match:
        return match.group("name"), match.group("email")
    name = author.strip() or "squadops-gate"
    return name, f"{_SLUG.sub('-', name.lower()).strip('-') or 'gate'}@apps.squadops.local"


def vcs_errors(method: Callable[..., T]) -> Callable[..., T]:
    """The local files of a repository failing (disk full, permissions) is the vcs failing."""

    @functools.wraps(method)
    def guarded(*args: Any, **kwargs: Any) -> T:
        try:
            return method(*args, **kwargs)
        except OSError as exc:
            raise VcsError(f"{method.__name__}: {exc}") from None

    return guarded


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class LocalGitVcs(SourceMirrors):
    """Bare repositories under ``root``; pull request URLs under ``base_url``."""

    kind = "local_git"

    def __init__(
        self, root: str | Path, base_url: str, *, timeout: float = 30.0, source_policy: SourcePolicy | None = None
    ) -> None:
        self.root = Path(root)
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        # The sources bindings may bring (``workers.builders.source_policy``); by default any
        # local path outside these repositories, and public hosts only.
        self.source_policy = source_policy or SourcePolicy(resolve=resolve_host, forbidden_roots=(self.root,))

    def for_tenant(self, tenant: str) -> LocalGitVcs:
        """The tenant's own repositories: ``<root>/<tenant>/…``; their URLs name the tenant
        (but for ``default``, whose URLs stay ``<base_url>/<owner>/<name>``)."""
        if not is_valid_id(tenant):
            raise VcsError(f"{tenant!r} is not a tenant id")
        base_url = self.base_url if tenant == "default" else f"{self.base_url}/{tenant}"
        return LocalGitVcs(self.root / tenant, base_url, timeout=self.timeout, source_policy=self.source_policy)

    # -- plumbing ---------------------------------------------------------------------------

    def bare(self, repo: str) -> Path:
        if not valid_repo(repo):
            raise VcsError(f"{repo!r} is not an owner/name repository")
        owner, name = repo.split("/")
        try:
            return inside(self.root, owner, name, suffix=".git")
        except OutsideRoot as exc:
            raise VcsError(str(exc)) from None

    def git(self, *args: str, cwd: Path | None = None, author: str = "", data: bytes | None = None) -> bytes:
        done = self.run_git(*args, cwd=cwd, author=author, data=data)
        if done.returncode != 0:
            raise VcsError(f"git {args[0]} failed: {done.stderr.decode(errors='replace').strip()[:500]}")
        return done.stdout

    def run_git(
        self, *args: str, cwd: Path | None = None, author: str = "", data: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        """git with no user or system configuration, no hooks, no prompt, no repository named
        by the environment (``git_environment``), and only the transports a source may use
        (``domain.projects.sources``); its exit status is the caller's."""
        env = {
            **git_environment(os.environ),
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ALLOW_PROTOCOL": GIT_ALLOW_PROTOCOL,
        }
        if author:
            name, email = identity(author)
            env.update(GIT_AUTHOR_NAME=name, GIT_AUTHOR_EMAIL=email, GIT_COMMITTER_NAME=name, GIT_COMMITTER_EMAIL=email)
        command = ["git", "-c", "commit.gpgsign=false", "-c", "core.hooksPath=" + os.devnull, *args]
        try:
            return subprocess.run(
                command, cwd=cwd, env=env, input=data, capture_output=True, timeout=self.timeout, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise VcsError(f"git {args[0]} could not run: {exc}") from None

    @contextlib.contextmanager
    def locked(self, repo: str) -> Iterator[Path]:
        """The repository's directory, held under its lock file (across processes)."""
        bare = self.bare(repo)
        bare.parent.mkdir(parents=True, exist_ok=True)
        with open(bare.parent / f".{bare.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield bare
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def rev(self, bare: Path, ref: str) -> str:
        return self.git("--git-dir", str(bare), "rev-parse", "--verify", "--quiet", ref).decode().strip()

    def ensure(self, repo: str, base_branch: str, author: str) -> Path:
        """The bare repository, created with an initial commit on ``base_branch`` if new."""
        if not is_valid_branch(base_branch):
            raise VcsError(f"{base_branch!r} is not a branch name")
        with self.locked(repo) as bare:
            if not (bare / "HEAD").exists():
                self.git("init", "--quiet", "--bare", f"--initial-branch={base_branch}", "--", str(bare))
            try:
                self.rev(bare, f"refs/heads/{base_branch}")
            except VcsError:
                tree = self.git("--git-dir", str(bare), "mktree", data=b"").decode().strip()
                commit = self.git(
                    "--git-dir", str(bare), "commit-tree", tree, "-m", f"Initial commit of {repo}", author=author
                ).decode().strip()
                self.git("--git-dir", str(bare), "update-ref", f"refs/heads/{base_branch}", commit, "0" * 40)
            return bare

    def repo_url(self, repo: str) -> str:
        return f"{self.base_url}/{repo}"

    # -- the provisioning port --------------------------------------------------------------

    @vcs_errors
    def create_repository(
        self, *, tenant: str, project_slug: str, repo_slug: str, default_branch: str, private: bool,
        files: Mapping[str, str],
    ) -> Repository:
        """A new bare repository with ``default_branch`` holding one commit of ``files``
        (flat starter files) in the tenant's own storage; its URL is the hosting URL
        (``<base_url>/<owner>/<name>``), never the server's path."""
        if not is_valid_branch(default_branch):
            raise VcsError(f"{default_branch!r} is not a branch name")
        for name in files:
            if "/" in name or name in ("", ".", "..", ".git") or "\n" in name or "\t" in name:
                raise VcsError(f"not a starter file name: {name!r}")
        scoped = self.for_tenant(tenant)
        with scoped.locked(repo_slug) as bare:
            if (bare / "HEAD").exists():
                raise VcsError(f"repository {repo_slug!r} already exists")
            scoped.git("init", "--quiet", "--bare", f"--initial-branch={default_branch}", "--", str(bare))
            git_dir = ("--git-dir", str(bare))
            entries = []
            for name in sorted(files):
                blob = scoped.git(*git_dir, "hash-object", "-w", "--stdin", data=files[name].encode()).decode().strip()
                entries.append(f"100644 blob {blob}\t{name}")
            tree = self.git(*git_dir, "mktree", data=("\n".join(entries) + "\n").encode()).decode().strip()
            commit = self.git(
                *git_dir, "commit-tree", tree, "-m", f"Start {project_slug}", author="squadops <squadops@localhost>"
            ).decode().strip()
            self.git(*git_dir, "update-ref", f"refs/heads/{default_branch}", commit, "0" * 40)
        return Repository(url=scoped.repo_url(repo_slug), node_id=commit)

    # -- the gate's port --------------------------------------------------------------------

    @vcs_errors
    def commit_branch(
        self, repo: str, *, base_branch: str, branch_name: str, files: Mapping[str, bytes], message: str, author: str,
        source: BranchChanges | None = None,
    ) -> Commit:
        if not is_valid_branch(branch_name) or not is_valid_branch(base_branch):
            raise VcsError(f"{branch_name!r} or {base_branch!r} is not a branch name")
        bare = self.ensure(repo, base_branch, author)
        with tempfile.TemporaryDirectory(prefix="squadops-gate-") as tmp:
            work = Path(tmp) / "work"
            self.git("clone", "--quiet", "--no-tags", "--single-branch", "--branch", base_branch, "--", str(bare), str(work))
            self.git("checkout", "--quiet", "-b", branch_name, "--", cwd=work)
            if source is not None:
                self._apply_source(work, source)
            for path, content in files.items():
                relative = PurePosixPath(path)
                if relative.is_absolute() or ".." in relative.parts or relative.parts[:1] == (".git",):
                    raise VcsError(f"{path!r} is not a path inside the repository")
                target = work / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
            self.git("add", "--", *files, cwd=work)
            self.git("commit", "--quiet", "-m", message, cwd=work, author=author)
            self.git("push", "--quiet", "origin", f"HEAD:refs/heads/{branch_name}", cwd=work)
            head = self.git("rev-parse", "HEAD", cwd=work).decode().strip()
            base = self.git("rev-parse", f"origin/{base_branch}", cwd=work).decode().strip()
        return Commit(branch_name=branch_name, base_sha=base, head_sha=head)

    def _apply_source(self, work: Path, source: BranchChanges) -> None:
        """The changes an agent's branch made to its base, applied to the clone's index (the
        agent's lane repository and this one need not share history)."""
        if not is_valid_branch(source.branch) or not all(_SHA.fullmatch(s) for s in (source.base_sha, source.head_sha)):
            raise VcsError(f"{source.branch!r} is not an agent branch with its commits")
        self.git("fetch", "--quiet", "--no-tags", "--", source.repository, f"refs/heads/{source.branch}", cwd=work)
        diff = self.git("diff", "--binary", "--no-renames", source.base_sha, source.head_sha, "--", cwd=work)
        if not diff.strip():
            raise VcsError(f"the agent's branch {source.branch} changes nothing against its base")
        try:
            self.git("apply", "--index", "--whitespace=nowarn", "-", cwd=work, data=diff)
        except VcsError as exc:
            raise VcsError(f"the agent's branch {source.branch} does not apply on the base: {exc}") from None

    @vcs_errors
    def read_file(self, repo: str, sha: str, path: str) -> bytes | None:
        try:
            return self.git("--git-dir", str(self.bare(repo)), "cat-file", "blob", f"{sha}:{path}")
        except VcsError:
            return None

    @vcs_errors
    def open_pull_request(
        self, repo: str, *, branch_name: str, base_branch: str, title: str, body: str, labels: list[str], author: str
    ) -> PullRequest:
        with self.locked(repo) as bare:
            git_dir = ("--git-dir", str(bare))
            head = self.rev(bare, f"refs/heads/{branch_name}")
            base = self.rev(bare, f"refs/heads/{base_branch}")
            number = self._next_id(bare, "pull")
            self.git(*git_dir, "update-ref", f"refs/pull/{number}/head", head)
            merge = ""
            try:
                tree = self.git(*git_dir, "merge-tree", "--write-tree", base, head).decode().split()[0]
                message = f"Merge {head} into {base}"
                merge = self.git(*git_dir, "commit-tree", tree, "-p", base, "-p", head, "-m", message, author=author)
                merge = merge.decode().strip()
                self.git(*git_dir, "update-ref", f"refs/pull/{number}/merge", merge)
            except VcsError:  # the branches conflict: no test merge, as hosted vcs say
                merge = ""
            owner, name = repo.split("/")
            url = f"{self.repo_url(repo)}/pull/{number}"
            record = {
                "number": number, "url": url, "title": title, "body": body, "labels": list(labels),
                "author": author, "head": branch_name, "base": base_branch, "head_sha": head,
                "base_sha": base, "merge_sha": merge, "mergeable": bool(merge), "state": "open",
                "created_at": _now(), "comments": [], "check_runs": [],
            }
            self._write_pull(bare, number, record)
        return PullRequest(
            number=number, url=url, owner=owner, name=name, head_sha=head, merge_sha=merge,
            ref=f"refs/pull/{number}/merge" if merge else f"refs/pull/{number}/head",
        )

    @vcs_errors
    def comment(self, repo: str, number: int, *, body: str, author: str) -> Comment:
        with self.locked(repo) as bare:
            record = self._read_pull(bare, number)
            comment_id = self._next_id(bare, "comment")
            url = f"{record['url']}#issuecomment-{comment_id}"
            record["comments"].append({"id": comment_id, "url": url, "body": body, "author": author, "created_at": _now()})
            self._write_pull(bare, number, record)
        return Comment(id=comment_id, url=url)

    @vcs_errors
    def check_run(
        self, repo: str, number: int, *, head_sha: str, name: str, conclusion: str, summary: str, author: str
    ) -> int:
        with self.locked(repo) as bare:
            record = self._read_pull(bare, number)
            check_id = self._next_id(bare, "check_run")
            record["check_runs"].append(
                {
                    "id": check_id, "name": name, "head_sha": head_sha, "status": "completed",
                    "conclusion": conclusion, "summary": summary, "app": author, "completed_at": _now(),
                }
            )
            self._write_pull(bare, number, record)
        return check_id

    # -- records (called under the lock) ----------------------------------------------------

    def pull(self, repo: str, number: int) -> dict[str, Any]:
        """A pull request's record (what a hosted vcs would answer for it)."""
        return self._read_pull(self.bare(repo), number)

    @staticmethod
    def _meta(bare: Path) -> Path:
        meta = bare / "squadops"
        (meta / "pulls").mkdir(parents=True, exist_ok=True)
        return meta

    def _next_id(self, bare: Path, kind: str) -> int:
        path = self._meta(bare) / "ids.json"
        ids = json.loads(path.read_text()) if path.exists() else {}
        ids[kind] = int(ids.get(kind, 0)) + 1
        self._replace(path, json.dumps(ids, sort_keys=True).encode())
        return ids[kind]

    def _read_pull(self, bare: Path, number: int) -> dict[str, Any]:
        path = self._meta(bare) / "pulls" / f"{number}.json"
        if not path.exists():
            raise VcsError(f"no pull request {number}")
        return json.loads(path.read_text())

    def _write_pull(self, bare: Path, number: int, record: dict[str, Any]) -> None:
        self._replace(self._meta(bare) / "pulls" / f"{number}.json", json.dumps(record, indent=2, sort_keys=True).encode())

    @staticmethod
    def _replace(path: Path, content: bytes) -> None:
        temporary = path.with_suffix(path.suffix + ".tmp")
        temporary.write_bytes(content)
        os.replace(temporary, path)
