"""What the tests with the real agent CLIs share: the CLIs from npm on ``PATH`` (``make clis``
installs them into ``.clis/``), a data dir outside ``/tmp`` (Codex refuses to set up its
sandbox helpers under a temporary folder), and the service on a real port with the local
plane running whatever ``claude``/``codex`` are on ``PATH``."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.integration.local_support import PROJECT, STUDIO, Served, served

ROOT = Path(__file__).resolve().parents[2]
CLI_BIN = ROOT / ".clis" / "node_modules" / ".bin"


def cli_path() -> str:
    """``PATH`` with the project's pinned CLIs first; fails loudly when they are not installed."""
    for name in ("claude", "codex"):
        assert (CLI_BIN / name).exists(), f"{CLI_BIN / name} is missing: run `make clis` (make test does)"
    return f"{CLI_BIN}{os.pathsep}{os.environ.get('PATH', '')}"


@contextlib.contextmanager
def agent_data_dir() -> Iterator[Path]:
    """A data dir under the checkout's ``var/`` (ignored by git), removed afterwards."""
    folder = ROOT / "var" / "test-agents" / uuid.uuid4().hex[:12]
    folder.mkdir(parents=True)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def real_squad(database_url: str, models_url: str, **changes: Any) -> Iterator[Served]:
    """The service whose local plane runs the real ``claude`` and ``codex`` against ``models_url``
    (an explicit model endpoint); with ``models_url`` empty, through the service's own model
    proxy (whose upstreams ``changes`` may name)."""
    old_path = os.environ.get("PATH", "")
    os.environ["PATH"] = cli_path()
    endpoint = {"model_proxy_base_url": models_url, "model_proxy_token": "scripted-model-token"} if models_url else {}
    try:
        with agent_data_dir() as data, served(
            database_url, data, {}, local_agent_command="", local_first_tool_seconds=90.0, local_stop_grace_seconds=3.0,
            **endpoint, **changes,
        ) as svc:
            yield svc
    finally:
        os.environ["PATH"] = old_path


def launch(svc: Served, assignments: dict[str, str] | None = None) -> str:
    """Launches a delivery-core run, points its agents at their CLIs, then executes it."""
    answer = svc.http.post(f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": PROJECT["project_key"],
                                                   "work_scope": "Orders: an API and its plan."})
    assert answer.status_code == 201, answer.text
    run_id = answer.json()["run_id"]
    if assignments:
        from domain.studio.squad import parse_assignment

        svc.container.studio.assignments.assign_processes(
            tenant="default", run_id=run_id, actor="operator@squadops.local", reason="real CLIs",
            assignments=[parse_assignment(f"{target}:{provider}") for target, provider in assignments.items()],
        )
    assert svc.http.post(f"{STUDIO}/runs/{run_id}/execute").status_code == 202
    return run_id


def show(repository: Path, ref: str, path: str) -> str:
    """A file as ``ref`` holds it ("" when it does not)."""
    done = subprocess.run(["git", "-C", str(repository), "show", f"{ref}:{path}"], capture_output=True, text=True,
                          check=False)
    return done.stdout if done.returncode == 0 else ""


def git(repository: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repository), *args], capture_output=True, text=True,
                          check=True).stdout.strip()
