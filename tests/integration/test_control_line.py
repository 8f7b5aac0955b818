"""The control-line rule over HTTP: read a blocked pixel's wall, dispatch its recommended verb,
and the agent is unblocked or restarted, then makes progress again.

Blockers the simulator produces are driven by the simulator (a run is picked whose seed
makes the fault happen); the others are put up through the domain, or (the assets lookup)
through the watcher itself. Automatic recovery is off, so only the operator's verb acts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from litestar.testing import TestClient

from domain.shared.ports import ProjectAssetsError
from domain.studio.commands.runs import run_seed
from domain.studio.policies.walls import RECOMMENDED
from tests.conftest import admin_api
from tests.events import named
from tests.helpers import eventually
from tests.integration.control_support import (
    PLANE,
    STUDIO,
    TENANT,
    accepted,
    block,
    create_project,
    launch,
    session_verb,
    sessions,
)
from workers.bootstrap import Container
from workers.planes.simulator import FaultRates, Faults, SimulatorPlane
from workers.watcher import Watcher

# The walls each loop below follows; together they must be the whole control-line table.
SIMULATED_WALLS = {
    "agent_first_tool_required",
    "sandbox_missing",
    "sandbox_toolbox_observe_failed",
    "project_delivery_completion_requires_pr",
    "workspace_checkout_corrupt",
}
DOMAIN_WALLS = [
    ("sandbox_api_credentials_not_configured", {"profile_resolved": False}, False),
    ("sandbox_api_credentials_invalid", {"profile_resolved": True, "key_status": 401}, False),
    ("agent_yolo_loop_detected", {}, True),
    ("workspace_source_materialization_failed", {}, True),
    ("runtime_memory_checkpoint_missing", {"after_terminal_cleanup": True}, True),
    # The local plane's walls (raised by real processes in tests/integration/test_local_plane_http.py).
    ("agent_cli_missing", {"provider": "codex"}, False),
    ("agent_process_exited", {"exit_code": 3, "runner_signal": "detached runner process not alive"}, True),
    ("agent_permission_denied", {"denied_tools": ["Write", "Bash"], "denial_count": 2}, True),
    # Raised at launch when bubblewrap cannot start (tests/service/test_local_plane.py raises it for real).
    ("agent_sandbox_unavailable", {"sandbox": "bwrap", "reason": "bwrap is not installed"}, False),
]
WATCHER_WALLS = {"project_assets_lookup_failed"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, Container]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('control-line') / 'squadops.db'}"
    with admin_api(url, workers=("projector", "ticker"), auto_recovery=False) as (client, container):
        create_project(client)
        create_project(client, {"project_key": "bare"})  # no assets recorded: the watcher must look them up
        yield client, container


def start(http: TestClient, container: Container, faults: FaultRates, wanted: Callable[[Faults, int], bool], slug: str = "acme") -> str:
    """Launches runs until one whose seed makes the simulator produce the wanted fault; executes it."""
    container.ticker.plane = SimulatorPlane(faults=faults)
    chosen = Faults(faults)
    for _ in range(300):
        run_id = launch(http, slug)
        if wanted(chosen, run_seed(run_id)):
            assert http.post(f"{STUDIO}/runs/{run_id}/execute").status_code == 202
            return run_id
    raise AssertionError("no run had the wanted fault")


def pixel(http: TestClient, run_id: str, agent_id: str, slug: str = "acme") -> dict[str, Any]:
    feed = http.get(f"{PLANE}/observability-feed", params={"project_slug": slug, "run_id": run_id})
    assert feed.status_code == 200, feed.text
    return next((p for p in feed.json()["pixel_agents"] if p["agent_id"] == agent_id), {})


def walled(http: TestClient, run_id: str, agent_id: str, code: str, slug: str = "acme") -> dict[str, Any]:
    def seen() -> dict[str, Any] | None:
        p = pixel(http, run_id, agent_id, slug)
        return p if p.get("pixel_state") == "blocked" and p["wall"]["code"] == code else None

    return eventually(seen, timeout=30)


def follow_the_control_line(http: TestClient, run_id: str, agent_id: str, code: str, slug: str = "acme") -> dict[str, Any]:
    """Reads the wall, dispatches its recommended verb, waits for progress; answers the session."""
    p = walled(http, run_id, agent_id, code, slug)
    before = sessions(http, run_id)[agent_id]
    assert p["wall"]["message"] and p["wall"]["recommended_action"] == RECOMMENDED[code]
    verb = p["wall"]["recommended_action"]
    body = {"verb": verb, "reason": f"control line for {code}"}
    if verb == "intervene":
        body["message"] = "open the pull request, then finish"
    if verb == "switch_agent_process":  # to a provider whose CLI runs here
        body["provider"] = "claude-code-cli"
    accepted(session_verb(http, run_id, p["session_id"], body), run_id, verb, p["session_id"])
    cleared = sessions(http, run_id)[agent_id]
    assert cleared["blocker_code"] != code or cleared["live_status"] != "blocked"

    def progressed() -> dict[str, Any] | None:
        now = sessions(http, run_id)[agent_id]
        if now["live_status"] == "blocked":
            return None
        restarted = now["llm_session_id"] not in ("", before["llm_session_id"])
        worked = now["tool_call_count"] > before["tool_call_count"]
        return now if restarted or worked or now["live_status"] == "session_completed" else None

    return eventually(progressed, timeout=30)


def working(http: TestClient, run_id: str, agent_id: str) -> None:
    eventually(lambda: sessions(http, run_id)[agent_id]["live_status"] == "working", timeout=30)


def only(**rates: float) -> FaultRates:
    return FaultRates.none(**rates)


# -- blockers the simulator produces ------------------------------------------------------------------


def test_a_stale_first_tool_is_cleared_by_retry_prompt(served: tuple[TestClient, Container]) -> None:
    http, container = served
    run_id = start(http, container, only(first_tool_stall=0.5),
                   lambda f, s: f.stalls_first_tool(s, "planner", 1) and not f.stalls_first_tool(s, "planner", 2))
    after = follow_the_control_line(http, run_id, "planner", "agent_first_tool_required")
    assert after["llm_session_id"]


@pytest.mark.parametrize("signal", ["sandbox_missing", "sandbox_toolbox_observe_failed"])
def test_a_lost_sandbox_is_cleared_by_restart_workspace(served: tuple[TestClient, Container], signal: str) -> None:
    http, container = served
    share = 1.0 if signal == "sandbox_toolbox_observe_failed" else 0.0
    run_id = start(http, container, only(sandbox_loss=0.5, toolbox_observe_share=share),
                   lambda f, s: f.loses_sandbox(s, "planner", 1) and not f.loses_sandbox(s, "planner", 2))
    follow_the_control_line(http, run_id, "planner", signal)


def test_container_creation_corruption_is_cleared_by_restart_workspace(served: tuple[TestClient, Container]) -> None:
    http, container = served
    run_id = start(http, container, only(start_corruption=0.5),
                   lambda f, s: f.corrupt_container(s, "planner", 0, 0) and not f.corrupt_container(s, "planner", 0, 1))
    follow_the_control_line(http, run_id, "planner", "sandbox_missing")
    recreated = [e for e in container.event_store.events.get(f"wsl:{TENANT}:acme:ws-acme-shared") if named(e) == "Recreated"]
    assert recreated  # the missing provider binding was recreated through the registry


def test_a_lane_without_a_pull_request_is_cleared_by_intervene(served: tuple[TestClient, Container]) -> None:
    http, container = served
    run_id = start(http, container, only(missing_pr=0.5), lambda f, s: f.skips_pr(s, "backend"))
    follow_the_control_line(http, run_id, "backend", "project_delivery_completion_requires_pr")
    done = eventually(lambda: sessions(http, run_id)["backend"]["live_status"] == "session_completed", timeout=30)
    assert done
    run = container.studio.runs.get_run(TENANT, run_id)
    assert container.studio.runs.agent_session(run, "backend").pull_requests == 1


def test_a_corrupt_checkout_is_cleared_by_a_fresh_workspace(served: tuple[TestClient, Container]) -> None:
    http, container = served
    run_id = start(http, container, only(checkout_corruption=0.5), lambda f, s: f.corrupt_checkout(s, "planner", 1, 0))
    follow_the_control_line(http, run_id, "planner", "workspace_checkout_corrupt")
    planner = container.studio.runs.agent_session(container.studio.runs.get_run(TENANT, run_id), "planner")
    assert planner.workspace_name == "ws-acme-fresh-planner-1"


# -- blockers put up through the domain -------------------------------------------------------------


@pytest.mark.parametrize(("code", "evidence", "at_work"), DOMAIN_WALLS)
def test_walls_put_up_by_the_domain_are_cleared_by_their_verb(
    served: tuple[TestClient, Container], code: str, evidence: dict, at_work: bool
) -> None:
    http, container = served
    run_id = start(http, container, only(), lambda f, s: True)
    if at_work:
        working(http, run_id, "curator")
    block(container, run_id, "curator", code, evidence, start=False)
    follow_the_control_line(http, run_id, "curator", code)


class SlowAssets:
    """A project-assets adapter that answers too late (a port the project owns)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def fetch(self, tenant: str, project_slug: str) -> dict[str, Any]:
        time.sleep(self.seconds)  # the slow controller the timeout must bound
        raise ProjectAssetsError("transport", "never answered")


def test_a_failed_assets_lookup_is_cleared_by_nudge_agent(served: tuple[TestClient, Container]) -> None:
    http, container = served
    run_id = start(http, container, only(), lambda f, s: True, slug="bare")
    working(http, run_id, "curator")
    watcher = Watcher(container.studio, container.store, SlowAssets(2.0), timeout_seconds=0.2, interval_seconds=30)
    view = watcher.observe(TENANT, run_id)
    assert "curator" in view.newly_blocked and "0.2 s" in view.lookup_error
    follow_the_control_line(http, run_id, "curator", "project_assets_lookup_failed", slug="bare")


def test_the_loops_cover_the_whole_control_line_table() -> None:
    covered = SIMULATED_WALLS | {code for code, _, _ in DOMAIN_WALLS} | WATCHER_WALLS
    assert covered == set(RECOMMENDED), sorted(set(RECOMMENDED) ^ covered)
