"""The terminal tests' service: ``squadops serve --demo`` (what ``make run`` starts) on the
embedded default database in a folder of the test's, and the CLI run against it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.helpers import eventually
from tests.infra import free_port

SQUADOPS = str(Path(sys.executable).with_name("squadops"))


def cli_env(folder: Path, **variables: str) -> dict[str, str]:
    """This process's environment for a ``squadops`` command on an embedded database in
    ``folder``, plus ``variables``; no NATS, no edge key, no Novu (the embedded defaults)."""
    env = {
        **os.environ,
        "SQUADOPS_DATABASE_URL": f"sqlite:///{folder / 'squadops.db'}",
        "SQUADOPS_DATA_DIR": str(folder / "data"),
        "SQUADOPS_LOG_LEVEL": "warning",
        "SQUADOPS_CONTROLLER_PORT": "0",  # any free port: 8001 may be taken by `make run`
        **variables,
    }
    for name in ("SQUADOPS_NATS_URL", "SQUADOPS_EDGE_JWT_KEY", "SQUADOPS_NOVU_API_URL"):
        env.pop(name, None)
    return env


@contextmanager
def serving_demo(folder: Path, **variables: str) -> Iterator[dict[str, str]]:
    """``squadops serve --demo`` on a free port until the block ends; answers its environment
    (``SQUADOPS_BASE_URL`` its address), once it is healthy."""
    port = free_port()
    env = cli_env(folder, SQUADOPS_TICK_SECONDS="0.05", SQUADOPS_BASE_URL=f"http://127.0.0.1:{port}", **variables)
    process = subprocess.Popen(
        [SQUADOPS, "serve", "--demo", "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        eventually(lambda: _healthy(env["SQUADOPS_BASE_URL"]), timeout=30, interval=0.1)
        yield env
    finally:
        process.terminate()
        process.wait(timeout=15)


def _healthy(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=1).json()["status"] == "ok"
    except httpx.HTTPError:
        return False


def squadops(env: dict[str, str], *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    """Runs the CLI; it must exit ``code``."""
    done = subprocess.run([SQUADOPS, *args], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    return done
