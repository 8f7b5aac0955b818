"""The agent sandbox of the local plane: every agent CLI runs under bubblewrap (issue 25).

What a sandboxed agent sees (``bwrap_argv`` builds it):

- the machine's root, read-only; its own ``/proc`` (own PID namespace), a minimal ``/dev``
  and a private ``/tmp``;
- writable: its worktree, that worktree's git metadata (the lane repository and the
  worktree's folder in it, so that ``git commit`` works) and its private config folders
  (``home``, ``claude``, ``codex``, ``tmp`` of its agent folder); its CLI settings and MCP
  config are read-only on top of them;
- the pinned CLIs of the checkout (``.clis/node_modules``) read-only at ``/run/squadops/clis/node_modules`` (``/run`` is the
  sandbox's own tmpfs, so the mount point can be made on the read-only root);
- invisible (an empty read-only tmpfs over them, never mounted from the host): the data dir
  (the event store, other worktrees, other agents' folders and transcripts), the service's
  checkout, the homes (``/root``, ``/home``), ``/run`` (the database's Unix socket),
  ``/var/tmp`` and the machine's own secrets (``/etc/shadow``, ``/etc/ssh``, …);
- network: its own namespace with loopback only. The service's MCP address and the model
  endpoint are reached through a forwarder: the plane listens on one Unix socket per
  address (``forward.Forwarder``, bound read-only at ``/run/squadops/net``), and inside,
  ``socat`` listens on ``127.0.0.1:<port>`` and carries each connection to its socket.
  The agent's URLs point at those loopback ports (a host name resolves to 127.0.0.1
  through a private ``/etc/hosts``, so TLS names still match).

The process tree stays in the plane's process group (bwrap, its init, socat and the CLI), so
SIGSTOP/SIGCONT/SIGTERM/SIGKILL to the group reach all of it; ``--die-with-parent`` ends
the sandbox when bwrap is killed. There is no controlling terminal (the group is a new
session of the plane's), which is what ``--new-session`` would otherwise guard against.
"""

from __future__ import annotations

import ipaddress
import os
import shlex
import shutil
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

BWRAP = "bwrap"
NONE = "none"
KINDS = (BWRAP, NONE)
CLIS_AT = Path("/run/squadops/clis/node_modules")  # named node_modules: node resolves packages by it
SOCKETS_AT = Path("/run/squadops/net")
SANDBOX_PATH = f"{CLIS_AT}/.bin:/usr/local/bin:/usr/bin:/bin"
# Always hidden (tmpfs over them): homes, runtime sockets, shared scratch space.
HIDDEN_ALWAYS = (Path("/root"), Path("/home"), Path("/run"), Path("/var/tmp"))
# The machine's own secrets on the read-only root (readable when the service runs as root,
# the owner): unreadable in the sandbox (a file is /dev/null on a nodev mount, which cannot be
# opened; a folder is an empty tmpfs).
MACHINE_SECRETS = (Path("/etc/shadow"), Path("/etc/gshadow"), Path("/etc/ssh"), Path("/etc/ssl/private"))
FIRST_SPARE_PORT = 20000
# Never hidden, whatever a setting says (a data dir of "/" would hide the system).
ESSENTIAL = (Path("/usr"), Path("/etc"), Path("/bin"), Path("/lib"), Path("/lib64"), Path("/proc"), Path("/dev"))


class SandboxUnavailable(Exception):
    """The sandbox cannot start on this machine (the session is blocked, never run bare)."""


@dataclass(frozen=True)
class SandboxConfig:
    """The sandbox settings (``SQUADOPS_AGENT_SANDBOX*``) and the host paths it must hide."""

    kind: str = BWRAP
    bwrap: str = "/usr/bin/bwrap"
    socat: str = "/usr/bin/socat"
    hidden: tuple[Path, ...] = ()  # the data dir, the checkout, the event store's folder
    read_only: tuple[Path, ...] = ()  # extra host paths an agent may read (same path inside)
    clis: Path | None = None  # the checkout's .clis/node_modules

    @property
    def enabled(self) -> bool:
        return self.kind == BWRAP


@dataclass(frozen=True)
class Endpoint:
    """One TCP address an agent may reach, and where it reaches it inside the sandbox."""

    name: str  # "mcp" or "model"
    host: str
    port: int
    inside_port: int
    url: str  # the URL as the service knows it
    inside_url: str  # the URL as the agent uses it

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Confinement:
    """How one agent process is confined, as the feed and the session record show it."""

    kind: str
    writable: tuple[str, ...] = ()
    reachable: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "writable_paths": list(self.writable), "reachable_addresses": list(self.reachable)}


@dataclass(frozen=True)
class Plan:
    """A launch's sandbox: its confinement, the forwarder sockets' folder and addresses."""

    confinement: Confinement
    endpoints: tuple[Endpoint, ...] = ()
    sockets: Path | None = None
    command: tuple[str, ...] = ()  # the CLI's own command line, as run inside


# -- addresses ------------------------------------------------------------------------------


def _host_port(url: str) -> tuple[str, int, str]:
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return host, port, parts.scheme


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def endpoints(urls: Sequence[tuple[str, str]]) -> tuple[Endpoint, ...]:
    """The allowed addresses of ``(name, url)`` pairs (one endpoint per distinct address).

    Inside, an address keeps its port when it is 1024 or above (an unprivileged sandbox
    cannot listen below), else it gets a spare one; an IP literal becomes 127.0.0.1 and a
    host name stays (``/etc/hosts`` points it at 127.0.0.1), so certificates still match.
    """
    found: list[Endpoint] = []
    used: set[int] = set()
    spare = FIRST_SPARE_PORT
    for name, url in urls:
        if not url:
            continue
        host, port, _ = _host_port(url)
        same = next((e for e in found if (e.host, e.port) == (host, port)), None)
        inside = same.inside_port if same else port
        if same is None and (inside < 1024 or inside in used):
            while spare in used:
                spare += 1
            inside = spare
        used.add(inside)
        found.append(Endpoint(name, host, port, inside, url, inside_url(url, inside)))
    return tuple(found)


def distinct(points: Sequence[Endpoint]) -> tuple[Endpoint, ...]:
    """One endpoint per address (the MCP server and the model endpoint may be one service)."""
    seen: dict[str, Endpoint] = {}
    for point in points:
        seen.setdefault(point.address, point)
    return tuple(seen.values())


def inside_url(url: str, inside_port: int) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    shown = "127.0.0.1" if is_ip(host) else host
    return urlunsplit((parts.scheme, f"{shown}:{inside_port}", parts.path, parts.query, parts.fragment))


def hosts_file(points: Sequence[Endpoint]) -> str:
    """The sandbox's ``/etc/hosts``: loopback, and each allowed host name on it."""
    names = sorted({e.host for e in points if not is_ip(e.host) and e.host != "localhost"})
    lines = ["127.0.0.1 localhost", "::1 localhost"] + [f"127.0.0.1 {name}" for name in names]
    return "\n".join(lines) + "\n"


# -- the command line -------------------------------------------------------------------------


def entry_script(points: Sequence[Endpoint], socat: str) -> str:
    """The sandbox's first process: one ``socat`` per allowed address, listening on loopback
    before the CLI starts (it waits on the kernel's listening-socket table), then the CLI in
    its place (``exec``), so the CLI's exit code is the sandbox's."""
    lines = ["set -e"]
    for index, point in enumerate(points):
        lines.append(
            f"{shlex.quote(socat)} TCP-LISTEN:{point.inside_port},bind=127.0.0.1,reuseaddr,fork "
            f"UNIX-CONNECT:{SOCKETS_AT}/{index}.sock </dev/null & pid{index}=$!"
        )
    for index, point in enumerate(points):
        pattern = f"0100007F:{point.inside_port:04X} 00000000:0000 0A"
        lines.append(
            f"until grep -q '{pattern}' /proc/net/tcp; do kill -0 $pid{index} 2>/dev/null || "
            f"{{ echo 'squadops sandbox: the forwarder to {point.name} did not start' >&2; exit 97; }}; done"
        )
    lines.append('exec "$@"')
    return "\n".join(lines)


def _under(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def bwrap_argv(
    config: SandboxConfig,
    command: Sequence[str],
    *,
    cwd: Path,
    writable: Sequence[Path],
    read_only_files: Sequence[Path] = (),
    points: Sequence[Endpoint] = (),
    sockets: Path | None = None,
    hosts: Path | None = None,
) -> list[str]:
    """The full ``bwrap`` command line running ``command`` confined (see the module doc).

    Mount order matters: the read-only root, then tmpfs over every hidden path, then the
    read-only and writable binds on top (bwrap makes their mount points inside the tmpfs),
    then the settings files read-only over the writable folders, then each hidden tmpfs
    remounted read-only.
    """
    hidden = sorted({*HIDDEN_ALWAYS, *(p.resolve() for p in config.hidden)}, key=lambda p: len(p.parts))
    hidden = [p for p in hidden if not any(_under(essential, [p]) for essential in ESSENTIAL)]
    # A hidden path inside another hidden one is covered already.
    hidden = [p for p in hidden if not _under(p, [q for q in hidden if q != p])]
    argv = [
        config.bwrap, "--unshare-all", "--die-with-parent",
        "--ro-bind", "/", "/",
        "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
    ]
    hidden += [p for p in MACHINE_SECRETS if p.is_dir()]
    for path in hidden:
        if path.exists() and path != Path("/tmp") and Path("/tmp") not in path.parents:
            argv += ["--tmpfs", str(path)]
    for path in MACHINE_SECRETS:
        if path.is_file():
            argv += ["--ro-bind", "/dev/null", str(path)]
    if config.clis is not None and config.clis.exists():
        argv += ["--ro-bind", str(config.clis), str(CLIS_AT)]
    for path in config.read_only:
        if path.exists():
            argv += ["--ro-bind", str(path), str(path)]
    for path in writable:
        argv += ["--bind", str(path), str(path)]
    for path in read_only_files:
        argv += ["--ro-bind", str(path), str(path)]
    if sockets is not None:
        argv += ["--ro-bind", str(sockets), str(SOCKETS_AT)]
    if hosts is not None:
        argv += ["--ro-bind", str(hosts), "/etc/hosts"]
    for path in hidden:
        if path.exists() and path != Path("/tmp") and Path("/tmp") not in path.parents:
            argv += ["--remount-ro", str(path)]
    argv += ["--chdir", str(cwd)]
    if points:
        argv += ["--", "/bin/sh", "-c", entry_script(points, config.socat), "squadops-sandbox", *command]
    else:
        argv += ["--", *command]
    return argv


def sandbox_env(env: dict[str, str]) -> dict[str, str]:
    """The environment inside: the launch's allow-list, with the sandbox's own ``PATH``."""
    return {**env, "PATH": SANDBOX_PATH}


def resolve_program(config: SandboxConfig, program: str, path: str) -> str:
    """The program as the sandbox sees it: the pinned CLIs under ``/run/squadops/clis``, anything
    else at its own path, which must then be visible (raises ``SandboxUnavailable``)."""
    found = program if "/" in program else shutil.which(program, path=path)
    if not found:
        return program  # the plane reports the missing CLI the usual way
    located = Path(os.path.abspath(found))
    if config.clis is not None:
        clis = config.clis.absolute()
        if clis in located.parents:
            return str(CLIS_AT / located.relative_to(clis))
        real = config.clis.resolve()
        if real in located.parents:
            return str(CLIS_AT / located.relative_to(real))
    hidden = [*HIDDEN_ALWAYS, *(p.resolve() for p in config.hidden), Path("/tmp")]
    visible = [p.resolve() for p in config.read_only]
    if _under(located.resolve(), hidden) and not _under(located.resolve(), visible):
        raise SandboxUnavailable(
            f"The agent CLI {found} lives in a folder the sandbox hides ({located.parent}); install it "
            "outside the homes, the data dir and the checkout, or name its folder in "
            "SQUADOPS_AGENT_SANDBOX_READ_ONLY."
        )
    return str(located)


# -- can it start here? ------------------------------------------------------------------------

_probed: set[tuple[str, str]] = set()
_probe_lock = threading.Lock()


def unavailable(config: SandboxConfig, forwarding: bool = True) -> str:
    """Why bubblewrap cannot confine an agent on this machine ("" when it can; once it could,
    it is not asked again)."""
    key = (config.bwrap, config.socat if forwarding else "")
    with _probe_lock:
        if key in _probed:
            return ""
        why = _probe(config, forwarding)
        if not why:  # (a failure is asked again: the machine may be fixed before the next retry)
            _probed.add(key)
        return why


def _probe(config: SandboxConfig, forwarding: bool) -> str:
    if not Path(config.bwrap).exists():
        return (f"bubblewrap is not installed ({config.bwrap} is missing): install Debian's bubblewrap "
                "(make run does), or set SQUADOPS_AGENT_SANDBOX=none outside production.")
    if forwarding and not Path(config.socat).exists():
        return (f"socat is not installed ({config.socat} is missing): the sandbox needs it to reach the MCP "
                "server and the model endpoint; install Debian's socat (make run does).")
    try:
        done = subprocess.run(
            [config.bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc",
             "--dev", "/dev", "--", "/bin/true"],
            capture_output=True, text=True, timeout=20, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not be run: {exc}"
    if done.returncode != 0:
        why = done.stderr.strip() or f"exit code {done.returncode}"
        return (f"bubblewrap cannot create its namespaces here: {why}. Enable unprivileged user "
                "namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces>0) or run "
                "the service where they are allowed.")
    return ""
