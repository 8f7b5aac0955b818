"""Issues 10 and 11 as a person meets them in a terminal: ``squadops serve --demo`` (what
``make run`` starts, with every worker in-process: the notifier and the workspace controller
on its own port among them), then the CLI.

- the permission graph explains who reaches the demo project, and by which tuples;
- a developer workspace goes pending -> ready under the in-process controller, is released
  to suspended, and relaunching resumes it; a stranger gets the graph's 403;
- the controller's own ``/healthz`` answers its loop fields;
- a run's delivery reaches the project owner's inbox through the notifier worker.
"""

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
OWNER = ("--as", "operator@squadops.local", "--groups", "")  # the demo's owner, as a plain user
STRANGER = ("--as", "stranger@example.com", "--groups", "/org/sales")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[dict[str, str]]:
    port, controller_port = free_port(), free_port()
    env = {
        **os.environ,
        "SQUADOPS_DATABASE_URL": f"sqlite:///{tmp_path / 'squadops.db'}",
        "SQUADOPS_DATA_DIR": str(tmp_path / "data"),
        "SQUADOPS_TICK_SECONDS": "0.05",
        "SQUADOPS_LOG_LEVEL": "warning",
        "SQUADOPS_BASE_URL": f"http://127.0.0.1:{port}",
        "SQUADOPS_CONTROLLER_PORT": str(controller_port),
        "SQUADOPS_CONTROLLER_INTERVAL_SECONDS": "0.2",
        "SQUADOPS_MODEL_PROXY_CLIENT_KEY": "proxy-client-key-0123456789abcdef-0123",
    }
    for name in ("SQUADOPS_NATS_URL", "SQUADOPS_EDGE_JWT_KEY", "SQUADOPS_NOVU_API_URL"):
        env.pop(name, None)
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
    done = subprocess.run([SQUADOPS, *args], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    return done


def out(env: dict[str, str], *args: str) -> dict:
    return json.loads(squadops(env, *args).stdout)


def test_graph_workspace_controller_and_notifications_from_a_terminal(served: dict[str, str]) -> None:
    env = served
    # The graph's explain view: the owner's own tuple grants maintainer by nesting.
    check = out(env, "portal", "check", "project:demo", "--relation", "maintainer", *OWNER)
    assert check["allowed"] is True
    assert [s["kind"] for s in check["path"]] == ["tuple", "implied"]
    assert check["path"][0] == {**check["path"][0], "object": "project:demo", "relation": "owner",
                                "subject": "user:operator@squadops.local"}
    denied = json.loads(squadops(env, "portal", "check", "project:demo", *STRANGER, code=3).stdout)
    assert denied["allowed"] is False and denied["path"] == []

    # The controller, in-process on its own port, answers every field of its health.
    health = out(env, "workspace", "health")
    assert {"reconcile_enabled", "reconcile_interval_seconds", "reconcile_in_progress", "last_reconcile_started_at",
            "last_reconcile_at", "last_reconcile_error", "last_reconcile", "pending_sample_scopes",
            "release_sample_scopes", "provisioning_sample_scopes"} <= set(health)
    assert health["reconcile_enabled"] is True and health["reconcile_interval_seconds"] == 0.2

    # A workspace: launched pending, made ready by the controller, released, resumed.
    launched = out(env, "workspace", "launch", "--project", "demo", *OWNER)
    scope = launched["workspace_scope"]
    assert launched["status"] == "pending" and launched["namespace"].startswith("fops-dev-default-demo-operator-")

    def status_is(wanted: str) -> dict | None:
        items = out(env, "workspace", "list", *OWNER)["items"]
        return items[0] if items and items[0]["status"] == wanted else None

    ready = eventually(lambda: status_is("ready"), timeout=30, interval=0.3)
    assert ready["workspace_scope"] == scope and ready["last_error"] == ""
    provider = squadops(env, "workspace", "provider", scope, *OWNER).stdout
    assert "kubernetes" in provider and "proxy-client-key-0123456789abcdef-0123" not in provider
    assert squadops(env, "workspace", "release", scope, *OWNER).stdout.count('"release_requested"') == 1
    eventually(lambda: status_is("suspended"), timeout=30, interval=0.3)
    resumed = out(env, "workspace", "launch", "--project", "demo", *OWNER)
    assert (resumed["workspace_scope"], resumed["status"], resumed["resume_estimate_seconds"]) == (scope, "pending", 90)
    refused = squadops(env, "workspace", "launch", "--project", "demo", *STRANGER, code=1)
    assert "dev_workspace_project_access_denied" in refused.stderr
    assert out(env, "workspace", "list", *STRANGER)["items"] == []
    assert out(env, "workspace", "health")["last_reconcile_error"] == ""

    # A run's delivery notifies the project's owner through the notifier worker.
    run_id = squadops(env, "runs", "launch", "--execute").stdout.strip()

    def notified() -> dict | None:
        inbox = out(env, "portal", "inbox", *OWNER)
        mine = [n for n in inbox["notifications"] if run_id in n["title"]]
        return inbox if mine else None

    inbox = eventually(notified, timeout=90, interval=0.5)
    assert inbox["unread_count"] >= 1
    assert {n["kind"] for n in inbox["notifications"]} <= {"blocker", "delivery", "review"}
    assert out(env, "portal", "inbox", *STRANGER)["notifications"] == []


def test_the_controller_runs_as_its_own_worker_with_its_own_healthz(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "SQUADOPS_DATABASE_URL": f"sqlite:///{tmp_path / 'squadops.db'}",
        "SQUADOPS_DATA_DIR": str(tmp_path / "data"),
        "SQUADOPS_LOG_LEVEL": "warning",
        "SQUADOPS_CONTROLLER_PORT": str(port),
        "SQUADOPS_CONTROLLER_INTERVAL_SECONDS": "0.2",
        "SQUADOPS_MODEL_PROXY_CLIENT_KEY": "proxy-client-key-0123456789abcdef-0123",
    }
    env.pop("SQUADOPS_NATS_URL", None)
    worker = subprocess.Popen([SQUADOPS, "worker", "workspace-controller"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def reconciled() -> dict | None:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).json()
            except httpx.HTTPError:
                return None
            return health if health["last_reconcile_at"] else None

        health = eventually(reconciled, timeout=30, interval=0.2)
        assert health["last_reconcile_error"] == "" and health["last_reconcile"]["errored"] == 0
        assert httpx.get(f"http://127.0.0.1:{port}/other", timeout=1).status_code == 404
        done = squadops(env, "workspace", "health", "--url", f"http://127.0.0.1:{port}")
        assert json.loads(done.stdout)["reconcile_enabled"] is True
    finally:
        worker.terminate()
        assert worker.wait(timeout=15) == 0
