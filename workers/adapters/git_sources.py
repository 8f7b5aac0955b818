"""Bringing an existing repository (``domain.projects.sources``): the local git adapter's mirrors.

A binding with a ``source_repository_url`` gets, as its repository, a bare clone of that
origin at the very place a new repository would be (``<root>/<tenant>/<owner>/<name>.git``),
so the gate publishes into it and the lanes' worktrees come from it. Its default branch is
fetched again from the origin before each run; a published branch is pushed back to the
origin when the origin takes it. Git reads the source through ``--`` (never as an option)
with only the allowed transports (``GIT_ALLOW_PROTOCOL``, set by ``LocalGitVcs.run_git``);
a local source goes through git's transport (``--no-local``), not hard links.

Every read of an origin and every push to it (the probe, the clone, the fetch before a run,
the push-back) first passes the operator's source policy (``SourcePolicy.admit``): a source
a changed setting now refuses is neither fetched nor pushed to. A local source passes it
again for every place git would read it from (``git_reads``): the repository git picks
for the path, the directory a ``.git`` file names, ``commondir``, the object stores
``objects/info/alternates`` adds (recursively) and whatever a symlink inside these leads
to, so a repository under an allowed root cannot hand git another tenant's mirror.
Git then follows no HTTP redirect (``http.followRedirects=false``: a public URL cannot send
it into the internal network, and the dumb HTTP client follows no ``http-alternates``
either), and a host name is pinned to the addresses the policy checked, so git does not
resolve it again: http(s) through ``http.curloptResolve``, ``git://`` through
``url.<the URL with that address>.insteadOf`` (the stored origin keeps the name). What
stays open: a local repository changed between the check and git's read of it.

A push to a local origin runs ``git receive-pack`` in that repository, as the service's user
and under the repository's own configuration, which whoever can write under the root
controls (and git passes the pusher's ``-c`` settings no further than its own process). So
the push names its own ``receive-pack`` command (``RECEIVE_PACK``) whose ``-c`` settings
outrank the origin's: no hook runs (the team's ``post-receive`` neither: an origin that must
run hooks on push is served over http(s) or git://), no alternate-refs command, no fsmonitor,
no checkout into a working tree, no garbage collection. Reading a local origin runs
``upload-pack``, which git keeps safe in an untrusted repository (its command hook is read
from the user's and system configuration only).
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from domain.gate.ports import VcsError
from domain.projects.sources import (
    Fetched,
    Pushed,
    Repository,
    SourceError,
    SourcePolicy,
    local_path,
    local_source,
    redact,
)
from domain.shared.ids import is_valid_branch


def first_line(stderr: bytes) -> str:
    """The line of git's error output that says what went wrong (its first ``fatal:`` or
    ``error:`` line, else its first line)."""
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal:", "error:", "remote: error", "!")):
            return line[:300]
    return (lines[0] if lines else "git failed")[:300]


def resolve_host(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to (the standard library's resolver); [] when none."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return sorted({str(info[4][0]) for info in infos})


# Where git looks for the repository a local path names, in its order (``enter_repo``).
GIT_DIR_SUFFIXES = ("/.git", "", ".git/.git", ".git")
MAX_ENTRIES = 100_000  # files and directories looked at for one source, all stores together
MAX_FILE = 1 << 16  # a .git file, commondir or alternates file


def _real(path: str) -> str:
    return os.path.realpath(path)


def _small_text(path: str, what: str, signature: bytes = b"") -> str | None:
    """The text of the regular file at ``path`` that starts with ``signature`` (None: no such
    file there); never blocks on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = file.read(MAX_FILE + 1)
    if not data.startswith(signature):
        return None
    if len(data) > MAX_FILE or b"\0" in data:
        raise SourceError(f"source_repository_url's {what} must be a small text file")
    return os.fsdecode(data)


def git_reads(spelled: str) -> Iterator[tuple[str, str]]:
    """Every place git may read the local source ``spelled`` from (as git is handed it), as
    (what leads there, its real path): each of ``<it>/.git``, ``<it>``, ``<it>.git/.git``
    and ``<it>.git`` git may pick (a file, or a directory holding ``HEAD``), the directory a
    ``.git`` file names (relative to the file's directory), its ``commondir`` (relative to
    it), the object stores its alternates add, recursively (relative to the store naming
    them), and the target of every symlink inside these. SourceError for what cannot be
    judged: a quoted alternates entry, a binary or huge file, more than ``MAX_ENTRIES``."""
    budget, walked = [MAX_ENTRIES], set[str]()

    def symlinks(top: str) -> Iterator[tuple[str, str]]:
        """The targets of the symlinks under ``top``; a linked directory is walked in turn."""
        folders = [top]
        while folders:
            folder = folders.pop()
            try:
                with os.scandir(folder) as listing:
                    entries = list(listing)
            except OSError:
                continue
            budget[0] -= len(entries)
            if budget[0] < 0:
                raise SourceError("source_repository_url's repository holds too many files to check")
            for entry in entries:
                if entry.is_symlink():
                    target = _real(entry.path)
                    yield "symlinks", target
                    if os.path.isdir(target) and target not in walked:
                        walked.add(target)
                        folders.append(target)
                elif entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)

    def stores(objects: str, seen: set[str]) -> Iterator[tuple[str, str]]:
        for line in (_small_text(os.path.join(objects, "info", "alternates"), "alternates") or "").split("\n"):
            if not line or line.startswith("#"):
                continue
            if line.startswith('"'):
                raise SourceError("source_repository_url's alternates must not hold quoted paths")
            store = _real(os.path.join(objects, line))
            yield "alternates", store
            if store not in seen:
                seen.add(store)
                if store not in walked:
                    walked.add(store)
                    yield from symlinks(store)
                yield from stores(store, seen)

    def git_dir(path: str) -> Iterator[tuple[str, str]]:
        common = path
        named = _small_text(os.path.join(path, "commondir"), "commondir")
        if named is not None:
            common = _real(os.path.join(path, named.rstrip("\r\n")))
            yield "commondir", common
        for top in dict.fromkeys((path, common)):
            if top not in walked:
                walked.add(top)
                yield from symlinks(top)
        objects = _real(os.path.join(common, "objects"))
        yield from stores(objects, {objects})

    base = spelled.rstrip("/") or "/"
    for suffix in GIT_DIR_SUFFIXES:
        candidate = base + suffix
        try:
            mode = os.stat(candidate).st_mode
        except OSError:
            continue
        if stat.S_ISREG(mode):
            yield "repository", _real(candidate)
            text = _small_text(candidate, ".git file", b"gitdir: ")  # (else not read as one: a bundle, …)
            if text is not None:
                target = _real(os.path.join(os.path.dirname(candidate), text[8:].rstrip("\r\n")))
                yield ".git file", target
                yield from git_dir(target)
        elif stat.S_ISDIR(mode) and os.path.lexists(os.path.join(candidate, "HEAD")):
            yield "repository", _real(candidate)
            yield from git_dir(_real(candidate))


def pinned_git_url(url: str, address: str) -> tuple[str, str]:
    """``(base, prefix)`` for ``url.<base>.insteadOf=<prefix>``: ``prefix`` the ``git://`` URL
    up to the end of its host and port, ``base`` the same with the host replaced by
    ``address`` (the port kept; user information, which git:// does not use, dropped)."""
    parts = urlsplit(url)
    prefix = url[: url.index("://") + 3 + len(parts.netloc)]
    host = f"[{address}]" if ":" in address else address
    return url[: url.index("://")] + "://" + host + (f":{parts.port}" if parts.port else ""), prefix


def source_options(policy: SourcePolicy, url: str) -> list[str]:
    """git's ``-c`` options to read or push to ``url``, once the policy admits it and every
    place git would read a local one from (else SourceError): no HTTP redirect followed, a
    host name pinned to an address it was checked at (http(s): all of them; git: one, IPv4
    first)."""
    admitted = policy.admit(url)
    spelled = local_source(url)
    if spelled is not None:
        for what, place in git_reads(spelled):
            problem = policy.place_problem(place, f"source_repository_url's {what}")
            if problem is not None:
                raise SourceError(problem)
    options = ["-c", "http.followRedirects=false"]
    if admitted.addresses and url.lower().startswith("git://"):
        address = min(admitted.addresses, key=lambda a: ":" in a)
        base, prefix = pinned_git_url(url, address)
        options += ["-c", f"url.{base}.insteadOf={prefix}"]
    elif admitted.addresses:
        pinned = ",".join(f"[{a}]" if ":" in a else a for a in admitted.addresses)
        options += ["-c", f"http.curloptResolve={admitted.host}:{admitted.port}:{pinned}"]
    return options


# The receive-pack a push to a local origin runs there (see the module): each setting that
# could make it run a command the origin's configuration names, overridden.
RECEIVE_PACK = " ".join([
    "git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.alternateRefsCommand=true",
    "-c", "receive.denyCurrentBranch=refuse", "-c", "receive.denyDeleteCurrent=refuse", "-c", "receive.autogc=false",
    "-c", "gc.auto=0", "receive-pack",
])


class SourceMirrors:
    """Mirror, fetch and push-back for ``LocalGitVcs`` (whose ``run_git``, paths and
    ``source_policy`` it uses)."""

    def _source_args(self: Any, url: str) -> list[str]:
        return ["--no-local"] if local_path(url) is not None else []

    def probe(self: Any, url: str, default_branch: str = "") -> None:
        """Raises SourceError unless the policy admits ``url`` and git can read it (and it has
        ``default_branch``)."""
        options = source_options(self.source_policy, url)
        ref = [f"refs/heads/{default_branch}"] if default_branch else []
        done = self.run_git(*options, "ls-remote", "--heads", "--", url, *ref)
        if done.returncode != 0:
            raise SourceError(first_line(done.stderr))
        if default_branch and not done.stdout.strip():
            raise SourceError(f"the repository has no branch {default_branch!r}")

    def mirror_repository(self: Any, *, tenant: str, repo_slug: str, url: str, default_branch: str) -> Repository:
        """A bare clone of ``url`` as the tenant's repository ``repo_slug`` (its hosting URL, and
        the commit of its default branch)."""
        if not is_valid_branch(default_branch):
            raise VcsError(f"{default_branch!r} is not a branch name")
        scoped = self.for_tenant(tenant)
        with scoped.locked(repo_slug) as bare:
            if bare.exists():
                raise VcsError(f"repository {repo_slug!r} already exists")
            options = source_options(self.source_policy, url)
            done = scoped.run_git(*options, "clone", "--bare", "--quiet", *self._source_args(url), "--", url, str(bare))
            if done.returncode != 0:
                shutil.rmtree(bare, ignore_errors=True)
                raise SourceError(first_line(done.stderr))
            try:
                return Repository(url=scoped.repo_url(repo_slug), node_id=scoped.rev(bare, f"refs/heads/{default_branch}"))
            except VcsError:
                shutil.rmtree(bare, ignore_errors=True)
                raise SourceError(f"the repository has no branch {default_branch!r}") from None

    def origin(self: Any, repo: str) -> str:
        """The origin a repository mirrors ("" for one the service created)."""
        done = self.run_git("--git-dir", str(self.bare(repo)), "config", "--get", "remote.origin.url")
        return done.stdout.decode().strip() if done.returncode == 0 else ""

    def fetch(self: Any, *, tenant: str, repo_slug: str, default_branch: str) -> Fetched:
        """The origin's ``default_branch`` fetched into the mirror again (forced: the origin is
        the truth for it); the lanes' own branches are left alone. An origin the policy refuses
        now (a setting changed since it was brought) is not fetched: SourceError says why."""
        if not is_valid_branch(default_branch):
            raise VcsError(f"{default_branch!r} is not a branch name")
        scoped = self.for_tenant(tenant)
        with scoped.locked(repo_slug) as bare:
            ref = f"refs/heads/{default_branch}"
            options = source_options(self.source_policy, scoped.origin(repo_slug))
            done = scoped.run_git(*options, "--git-dir", str(bare), "fetch", "--quiet", "--no-tags", "origin", f"+{ref}:{ref}")
            if done.returncode != 0:
                raise SourceError(first_line(done.stderr))
            return Fetched(head_sha=scoped.rev(bare, ref))

    def push_upstream(self: Any, repo: str, branch: str) -> Pushed | None:
        """``branch`` pushed to the origin the repository mirrors (None: it mirrors none)."""
        if not is_valid_branch(branch):
            raise VcsError(f"{branch!r} is not a branch name")
        origin = self.origin(repo)
        if not origin:
            return None
        bare = self.bare(repo)
        head = self.rev(bare, f"refs/heads/{branch}")
        try:
            options = source_options(self.source_policy, origin)
        except SourceError as exc:  # an origin the policy refuses now is not pushed to
            return Pushed("not_writable", redact(origin), branch, head, str(exc))
        receive = [f"--receive-pack={RECEIVE_PACK}"] if local_path(origin) is not None else []
        done = self.run_git(*options, "--git-dir", str(bare), "push", "--quiet", *receive, "origin",
                            f"refs/heads/{branch}:refs/heads/{branch}")
        if done.returncode != 0:
            return Pushed("not_writable", redact(origin), branch, head, first_line(done.stderr))
        return Pushed("pushed", redact(origin), branch, head)
