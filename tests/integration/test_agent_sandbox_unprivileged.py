"""The agent sandbox as an unprivileged user (issue 25: root and unprivileged on Debian 12).

The command line the plane builds (``sandbox.bwrap_argv``) runs a probe as ``nobody``
(through ``setpriv`` when the tests run as root, as themselves otherwise), with the plane's
forwarder in front of one allowed address: the probe reaches that address, writes its
worktree, and finds the hidden folder absent, the root read-only, another local port
refused and itself alone in its PID namespace.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from workers.planes.local import sandbox
from workers.planes.local.forward import Forwarder

NOBODY = 65534
PROBE = """
import json, os, socket, urllib.request
seen = {"allowed": urllib.request.urlopen("http://127.0.0.1:%(allowed)d/").status}
for name, port in (("other", %(other)d),):
    try:
        socket.create_connection(("127.0.0.1", port), 2)
        seen[name] = "connected"
    except OSError as exc:
        seen[name] = type(exc).__name__
try:
    seen["hidden"] = open(%(hidden)r).read()
except OSError as exc:
    seen["hidden"] = type(exc).__name__
try:
    seen["shadow"] = open("/etc/shadow").read()
except OSError as exc:
    seen["shadow"] = type(exc).__name__
try:
    open("/etc/squadops-probe", "w")
    seen["root"] = "written"
except OSError as exc:
    seen["root"] = exc.strerror
open("work.txt", "w").write("done")
seen["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
seen["uid"] = os.getuid()
print(json.dumps(seen))
"""


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder an unprivileged user can reach (pytest's own is private to its user)."""
    folder = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="squadops-sandbox-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_an_unprivileged_user_is_confined_the_same(base: Path) -> None:
    worktree, hidden = base / "worktree", base / "hidden"
    worktree.mkdir()
    hidden.mkdir()
    (hidden / "secret.txt").write_text("secret")
    as_root = os.getuid() == 0
    if as_root:
        os.chown(worktree, NOBODY, NOBODY)

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    allowed = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=allowed.serve_forever, daemon=True).start()
    other = socket.create_server(("127.0.0.1", 0))
    forwarder = Forwarder()
    sockets = Forwarder.folder()
    try:
        points = sandbox.endpoints([("mcp", f"http://127.0.0.1:{allowed.server_address[1]}")])
        forwarder.open(sockets, points)
        if as_root:  # the service runs as that user: its sockets are that user's
            for path in (sockets, *sockets.iterdir()):
                os.chown(path, NOBODY, NOBODY)
        probe = PROBE % {"allowed": points[0].inside_port, "other": other.getsockname()[1],
                         "hidden": str(hidden / "secret.txt")}
        argv = sandbox.bwrap_argv(sandbox.SandboxConfig(hidden=(hidden,)), ["/usr/bin/python3", "-c", probe],
                                  cwd=worktree, writable=[worktree], points=points, sockets=sockets)
        prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if as_root else []
        done = subprocess.run(prefix + argv, env={"PATH": sandbox.SANDBOX_PATH}, capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert seen["allowed"] == 204  # the one address, through the forwarder
        assert seen["other"] == "ConnectionRefusedError"
        assert seen["hidden"] == "FileNotFoundError"
        assert seen["root"] == "Read-only file system"
        # The machine's password hashes are not the agent's to read (/dev/null on a nodev mount).
        assert seen["shadow"] == "PermissionError"
        assert seen["uid"] == (NOBODY if as_root else os.getuid())
        assert max(seen["pids"]) < 20  # its own PID namespace: bwrap's init, sh, socat, the probe
        assert (worktree / "work.txt").read_text() == "done"
    finally:
        forwarder.close_all()
        allowed.shutdown()
        other.close()
