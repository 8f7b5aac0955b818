"""What a newcomer does: serve the embedded default with the demo, then drive it by CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cli_support import serving_demo, squadops
from tests.helpers import eventually


@pytest.fixture
def served(tmp_path: Path) -> Iterator[dict[str, str]]:
    with serving_demo(tmp_path) as env:
        yield env


def cli(env: dict[str, str], *args: str) -> str:
    return squadops(env, *args).stdout


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
