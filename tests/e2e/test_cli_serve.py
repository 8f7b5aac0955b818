"""What a newcomer does: serve the embedded default with the demo, then drive it by CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import eventually
from tests.infra import free_port

SQUADOPS = str(Path(sys.executable).with_name("squadops"))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[dict[str, str]]:
    port = free_port()
    env = {
        **os.environ,
        "SQUADOPS_DATABASE_URL": f"sqlite:///{tmp_path / 'squadops.db'}",
        "SQUADOPS_DATA_DIR": str(tmp_path / "data"),
        "SQUADOPS_TICK_SECONDS": "0.05",
        "SQUADOPS_LOG_LEVEL": "warning",
        "SQUADOPS_BASE_URL": f"http://127.0.0.1:{port}",
        "SQUADOPS_CONTROLLER_PORT": "0",  # any free port: 8001 may be taken by `make run`
    }
    env.pop("SQUADOPS_NATS_URL", None)
    process = subprocess.Popen(
        [SQUADOPS, "serve", "--demo", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
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


def cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([SQUADOPS, *args], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_serve_with_demo_then_launch_execute_and_show_by_cli(served: dict[str, str]) -> None:
    run_id = cli(served, "runs", "launch", "--execute").strip()
    assert run_id.startswith("run-")

    def joined() -> dict | None:
        record = json.loads(cli(served, "runs", "show", run_id))
        agents = {s["agent_id"] for s in record["sessions"]}
        return record if len(agents) > 2 else None

    record = eventually(joined, timeout=60, interval=0.5)
    assert record["project_slug"] == "demo" and record["execution_status"] in ("running", "completed")
    assert record["tick"] > 0
