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
a changed setting now refuses is neither fetched nor pushed to. Git then follows no HTTP
redirect (``http.followRedirects=false``: a public URL cannot send it into the internal
network), and an http(s) host name is pinned to the addresses the policy checked
(``http.curloptResolve``), so git does not resolve it again. A ``git://`` host is resolved
again by git itself (no such option): DNS rebinding between the check and git's connection
stays open there.
"""

from __future__ import annotations

import shutil
import socket
from typing import Any

from domain.gate.ports import VcsError
from domain.projects.sources import (
    Fetched,
    Pushed,
    Repository,
    SourceError,
    SourcePolicy,
    local_path,
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


def source_options(policy: SourcePolicy, url: str) -> list[str]:
    """git's ``-c`` options to read or push to ``url``, once the policy admits it (else
    SourceError): no HTTP redirect followed, an http(s) name pinned to its checked addresses."""
    admitted = policy.admit(url)
    options = ["-c", "http.followRedirects=false"]
    if admitted.addresses:
        pinned = ",".join(f"[{a}]" if ":" in a else a for a in admitted.addresses)
        options += ["-c", f"http.curloptResolve={admitted.host}:{admitted.port}:{pinned}"]
    return options


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
        done = self.run_git(*options, "--git-dir", str(bare), "push", "--quiet", "origin", f"refs/heads/{branch}:refs/heads/{branch}")
        if done.returncode != 0:
            return Pushed("not_writable", redact(origin), branch, head, first_line(done.stderr))
        return Pushed("pushed", redact(origin), branch, head)
