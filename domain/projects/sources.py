"""Existing repositories a binding brings (``source_repository_url``): which ones git may read.

A source is an absolute local path or a ``file://``, ``https://``, ``http://`` or ``git://``
URL. Everything else is refused before git runs: git's other transports (``ext::`` runs a
command, ``fd::``), ``ssh`` (it would read with the service's own keys), scp-like
``host:path``, anything starting with ``-`` (read as an option), control characters and
whitespace. A local path must not lead into the service's own data (the caller of
``source_problem`` names those roots): another tenant's repositories, the event store, the
agents' worktrees; and, when the operator names them (``SQUADOPS_SOURCE_LOCAL_ROOTS``), it
must lie under one of the directories a source may come from (after symlinks are resolved).
The same rule holds for every place git reads the repository from (``place_problem``): the
adapter finds them as git does (a ``.git`` file, ``commondir``, alternates, symlinks inside),
so a repository under a root cannot hand git another tenant's objects.
A network source's host must be, and resolve only to, public addresses (``SourcePolicy``):
loopback, private, link-local, unspecified and reserved ones (the cloud metadata address
among them) are refused unless the operator allows them (``SQUADOPS_SOURCE_PRIVATE_HOSTS``),
so a tenant cannot make the service probe its own network. The adapter runs git with
``GIT_ALLOW_PROTOCOL`` set to the same list and ``--`` before the URL, so a redirect or a
submodule cannot reach another transport, with HTTP redirects refused and a host name
(http, https or git) pinned to the addresses checked here (``Admitted.addresses``)."""

from __future__ import annotations

import ipaddress
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


def local_source(url: str) -> str | None:
    """The local path a source names (a path or a ``file://`` URL) spelled as git is handed it,
    else None. Not normalized: git tries ``<it>/.git``, ``<it>``, ``<it>.git/.git`` and
    ``<it>.git`` on this very string (``/a/b/.`` leads to ``/a/b/..git``)."""
    if url.startswith("/"):
        return url
    if url.startswith("file://"):
        parts = urlsplit(url)
        return parts.path if parts.netloc in ("", "localhost") else None
    return None


def local_path(url: str) -> Path | None:
    """The local path a source names (a path or a ``file://`` URL), else None."""
    spelled = local_source(url)
    return None if spelled is None else Path(spelled)


LOCAL_ROOTS_SETTING = "SQUADOPS_SOURCE_LOCAL_ROOTS"
PRIVATE_HOSTS_SETTING = "SQUADOPS_SOURCE_PRIVATE_HOSTS"
# A host name as a source may spell it: ASCII labels (an IDN in its xn-- form), no percent
# escapes, backslashes or other characters parsers read differently.
_HOST_NAME = re.compile(r"^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$")
_NETLOC = re.compile(r"^[A-Za-z0-9._~!$&'()*+,;=:%@\[\]-]+$")
_IPV4_PART = re.compile(r"^(0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*)$")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
DEFAULT_PORTS = {"http": 80, "https": 443, "git": 9418}
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def ipv4_literal(host: str) -> ipaddress.IPv4Address | None:
    """The address ``host`` names when read as an IPv4 number the way ``inet_aton`` and
    libcurl read one (``127.1``, ``0x7f.0.0.1``, ``0177.0.0.1``, ``2130706433``), else None."""
    parts = host.removesuffix(".").split(".")
    if not 1 <= len(parts) <= 4 or not all(_IPV4_PART.match(part) for part in parts):
        return None
    values = [int(part[2:] or "0", 16) if part[:2].lower() == "0x" else int(part, 8 if part.startswith("0") else 10)
              for part in parts]
    last_bytes = 5 - len(parts)
    if any(value > 255 for value in values[:-1]) or values[-1] >= 256 ** last_bytes:
        return None
    number = 0
    for value in values[:-1]:
        number = number << 8 | value
    return ipaddress.IPv4Address(number << 8 * last_bytes | values[-1])


def is_internal(address: Address) -> bool:
    """Whether ``address`` is anything but a public unicast one: loopback, private (RFC 1918,
    unique-local, carrier-grade NAT), link-local (169.254.0.0/16, the cloud metadata address,
    fe80::/10), site-local, unspecified, reserved or multicast; an IPv6 address that carries
    an IPv4 one (mapped, compatible, 6to4, NAT64) is judged by that one too."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and (int(address) >> 32 == 0 or address in _NAT64):
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None and is_internal(embedded):
            return True
        if address.is_site_local:
            return True
    return (not address.is_global or address.is_private or address.is_loopback or address.is_link_local
            or address.is_unspecified or address.is_reserved or address.is_multicast)


def parse_address(text: str) -> Address | None:
    try:
        return ipaddress.ip_address(text.partition("%")[0])
    except ValueError:
        return None


def source_problem(
    url: str, forbidden_roots: Iterable[Path] = (), local_roots: Iterable[Path] | None = None
) -> str | None:
    """Why ``url`` may not be a binding's source (one sentence), or None when git may read it.
    ``local_roots``: None, any local path outside ``forbidden_roots``; else a local path must
    lie under one of them (none: no local path is a source)."""
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
        try:
            host = urlsplit(url).hostname or ""
        except ValueError:  # an unbalanced '[' or ']'
            return "source_repository_url's host is no host name or IP address"
        if not host or host.startswith("-"):
            return "source_repository_url must name a host"
        return None  # its host: SourcePolicy.admit
    if scheme is not None and "%" in url:  # git decodes them, so the path checked would not be the one read
        return "a file URL must not hold percent escapes; give the path as it is"
    if scheme is not None and ("?" in url or "#" in url):  # git reads them as part of the path
        return "a file URL must not hold '?' or '#'; give the path as it is"
    path = local_path(url)
    if path is None:
        return "a file URL must name a local path (file:///…)"
    if ".." in path.parts:
        return "source_repository_url must not hold '..'"
    return place_problem(path, forbidden_roots, local_roots)


def place_problem(
    path: Path | str, forbidden_roots: Iterable[Path] = (), local_roots: Iterable[Path] | None = None,
    what: str = "source_repository_url",
) -> str | None:
    """Why git may not read a local source at ``path`` (``what`` leads there: the source
    itself, or its ``.git`` file, ``commondir``, alternates or symlinks), or None. Judged
    once symlinks are resolved: never inside ``forbidden_roots``, and under one of
    ``local_roots`` unless that is None."""
    real = Path(os.path.realpath(path))
    for root in forbidden_roots:
        base = Path(os.path.realpath(root))
        if real == base or base in real.parents:
            return f"{what} must not lead into the service's own data"
    if local_roots is None:
        return None
    roots = [Path(os.path.realpath(root)) for root in local_roots]
    if not roots:
        return f"local sources are refused here: {LOCAL_ROOTS_SETTING} names no directory a source may lie under"
    if not any(real == root or root in real.parents for root in roots):
        return f"{what} must lie under a directory {LOCAL_ROOTS_SETTING} names"
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


Resolver = Callable[[str, int], Iterable[str]]  # (host, port) -> its addresses ([] when it has none)


@dataclass(frozen=True)
class Admitted:
    """A source the policy lets git read: for an http, https or git URL naming a host, that
    host and port and the addresses it was checked at, which git must connect to (not
    resolve again)."""

    url: str
    host: str = ""
    port: int = 0
    addresses: tuple[str, ...] = ()


@dataclass(frozen=True)
class SourcePolicy:
    """The operator's rules for sources: the service's own data (never a source), the
    directories a local source may lie under (None: anywhere else), whether a network
    source may be an internal address, and how a host name is resolved (the adapter's)."""

    resolve: Resolver
    forbidden_roots: tuple[Path, ...] = ()
    local_roots: tuple[Path, ...] | None = None
    private_hosts: bool = False

    def admit(self, url: str) -> Admitted:
        """``url`` admitted as a source, or SourceError saying why not (never git's output)."""
        problem = source_problem(url, self.forbidden_roots, self.local_roots)
        if problem is not None:
            raise SourceError(problem)
        scheme = _SCHEME.match(url)
        if scheme is None or scheme.group(1).lower() == "file":
            return Admitted(url)
        return self._admit_host(url, scheme.group(1).lower())

    def place_problem(self, path: Path | str, what: str) -> str | None:
        """Why git may not read a local source's repository at ``path``, reached through
        ``what`` (its ``.git`` file, ``commondir``, alternates, …), or None."""
        return place_problem(path, self.forbidden_roots, self.local_roots, what)

    def problem(self, url: str) -> str | None:
        try:
            self.admit(url)
        except SourceError as exc:
            return str(exc)
        return None

    def _admit_host(self, url: str, scheme: str) -> Admitted:
        parts = urlsplit(url)
        internal = (f"source_repository_url must name a public host: loopback, private, link-local and "
                    f"unspecified addresses (and names resolving to one) are refused unless the operator "
                    f"sets {PRIVATE_HOSTS_SETTING}=1")
        if not _NETLOC.match(parts.netloc) or parts.netloc.count("@") > 1:
            return self._refuse("source_repository_url's host part holds characters a host cannot")
        try:
            port = parts.port or DEFAULT_PORTS[scheme]
        except ValueError:
            return self._refuse("source_repository_url must name a port from 1 to 65535")
        host = parts.hostname or ""
        literal: Address | None = ipv4_literal(host)
        if ":" in host:
            literal = parse_address(host)
            if literal is None:
                return self._refuse("source_repository_url's host is no IPv6 address")
        elif literal is None and not _HOST_NAME.match(host):
            return self._refuse("source_repository_url's host must be a name of ASCII letters, digits, '-' and '.' "
                                "(an IDN in its xn-- form) or an IP address")
        if literal is not None:
            return self._refuse(internal) if is_internal(literal) and not self.private_hosts else Admitted(url)
        addresses = [parse_address(a) for a in self.resolve(host, port)]
        if not self.private_hosts and (not addresses or any(a is None or is_internal(a) for a in addresses)):
            return self._refuse(internal)  # (a name that does not resolve is not told apart from an internal one)
        if not addresses or None in addresses:
            return self._refuse("source_repository_url's host does not resolve")
        return Admitted(url, host, port, tuple(sorted({str(a) for a in addresses if a is not None})))

    @staticmethod
    def _refuse(why: str) -> Admitted:
        raise SourceError(why)


@dataclass(frozen=True)
class SourceCheck:
    """The check a create request's sources pass before anything is recorded: the policy,
    then git reading the source (the probe admits it again, and reads what it admitted)."""

    probe: Callable[[str, str], None]  # (url, default branch): raises SourceError
    policy: SourcePolicy

    def __call__(self, url: str, default_branch: str) -> None:
        self.policy.admit(url)
        self.probe(url, default_branch)
