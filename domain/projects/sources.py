"""Existing repositories a binding brings (``source_repository_url``): which ones git may read.

A source is an absolute local path or a ``file://``, ``https://``, ``http://`` or ``git://``
URL. Everything else is refused before git runs: git's other transports (``ext::`` runs a
command, ``fd::``), ``ssh`` (it would read with the service's own keys), scp-like
``host:path``, anything starting with ``-`` (read as an option), control characters and
whitespace. A local path must not lead into the service's own data (the caller of
``source_problem`` names those roots): another tenant's repositories, the event store, the
agents' worktrees. The adapter runs git with ``GIT_ALLOW_PROTOCOL`` set to the same list and
``--`` before the URL, so a redirect or a submodule cannot reach another transport.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

SCHEMES = ("https", "http", "git", "file")
GIT_ALLOW_PROTOCOL = ":".join(SCHEMES)
MAX_LENGTH = 2048
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


class SourceError(Exception):
    """Git could not read the source (its error's first line), or the source is refused."""


def local_path(url: str) -> Path | None:
    """The local path a source names (a path or a ``file://`` URL), else None."""
    if url.startswith("/"):
        return Path(url)
    if url.startswith("file://"):
        parts = urlsplit(url)
        return Path(parts.path) if parts.netloc in ("", "localhost") else None
    return None


def source_problem(url: str, forbidden_roots: Iterable[Path] = ()) -> str | None:
    """Why ``url`` may not be a binding's source (one sentence), or None when git may read it."""
    if not url or len(url) > MAX_LENGTH:
        return f"source_repository_url must hold 1 to {MAX_LENGTH} characters"
    if " " in url or not url.isprintable():  # (C0 and C1 controls, separators, unassigned)
        return "source_repository_url must not hold whitespace or control characters"
    if url.startswith("-"):
        return "source_repository_url must not start with '-'"
    if "::" in url.split("/", 1)[0]:
        return "git's transport::address form is refused; give a path or an https, http, git or file URL"
    scheme = _SCHEME.match(url)
    if scheme is None and not url.startswith("/"):
        return "source_repository_url must be an absolute path or an https, http, git or file URL"
    if scheme is not None and scheme.group(1).lower() not in SCHEMES:
        return f"the {scheme.group(1)!r} protocol is refused; use https, http, git or file"
    if scheme is not None and scheme.group(1).lower() != "file":
        host = urlsplit(url).hostname or ""
        if not host or host.startswith("-"):
            return "source_repository_url must name a host"
        return None
    path = local_path(url)
    if path is None:
        return "a file URL must name a local path (file:///…)"
    if ".." in path.parts:
        return "source_repository_url must not hold '..'"
    real = Path(os.path.realpath(path))
    for root in forbidden_roots:
        base = Path(os.path.realpath(root))
        if real == base or base in real.parents:
            return "source_repository_url must not lead into the service's own data"
    return None


def redact(url: str) -> str:
    """The URL without its user information (a token in ``https://user:token@host`` stays secret)."""
    if local_path(url) is not None or _SCHEME.match(url) is None:
        return url
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


@dataclass(frozen=True)
class Fetched:
    """A mirror brought up to date: its default branch's commit now."""

    head_sha: str


@dataclass(frozen=True)
class Repository:
    url: str
    node_id: str  # the initial commit (or the adapter's repository id)


@dataclass(frozen=True)
class Pushed:
    """A branch sent back to the origin (``status`` ``pushed``), or why not (``not_writable``)."""

    status: str
    origin: str  # redacted
    branch: str
    head_sha: str
    error: str = ""


class MirrorPort(Protocol):
    """Bare mirrors of existing repositories, in the tenant's storage."""

    def mirror_repository(self, *, tenant: str, repo_slug: str, url: str, default_branch: str) -> Repository:
        """Clones ``url`` bare as the binding's repository (its URL and default branch's commit)."""
        ...

    def fetch(self, *, tenant: str, repo_slug: str, default_branch: str) -> Fetched:
        """Fetches the origin's ``default_branch`` into the mirror again."""
        ...


@dataclass(frozen=True)
class SourceCheck:
    """The check a create request's sources pass before anything is recorded: the policy
    (``source_problem`` over the service's own roots), then git reading the source."""

    probe: Callable[[str, str], None]  # (url, default branch): raises SourceError
    forbidden_roots: tuple[Path, ...] = ()

    def __call__(self, url: str, default_branch: str) -> None:
        problem = source_problem(url, self.forbidden_roots)
        if problem is not None:
            raise SourceError(problem)
        self.probe(url, default_branch)
