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
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.cli_support import SQUADOPS, cli_env, serving_demo, squadops
from tests.helpers import eventually
from tests.infra import free_port

OWNER = ("--as", "operator@squadops.local", "--groups", "")  # the demo's owner, as a plain user
STRANGER = ("--as", "stranger@example.com", "--groups", "/org/sales")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[dict[str, str]]:
    with serving_demo(
        tmp_path,
        SQUADOPS_CONTROLLER_PORT=str(free_port()),
        SQUADOPS_CONTROLLER_INTERVAL_SECONDS="0.2",
        SQUADOPS_MODEL_PROXY_CLIENT_KEY="proxy-client-key-0123456789abcdef-0123",
    ) as env:
        yield env


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
    env = cli_env(
        tmp_path,
        SQUADOPS_CONTROLLER_PORT=str(port),
        SQUADOPS_CONTROLLER_INTERVAL_SECONDS="0.2",
        SQUADOPS_MODEL_PROXY_CLIENT_KEY="proxy-client-key-0123456789abcdef-0123",
    )
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
