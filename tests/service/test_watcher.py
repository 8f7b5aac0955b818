"""The operator projection watcher: where project context comes from, bounded lookups,
structured lookup blockers, and strict observation."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from domain.shared.ports import ProjectAssetsError
from domain.studio.policies.blockers import PROJECT_ASSETS_LOOKUP_FAILED, lookup_error
from tests.conftest import settings_for
from tests.helpers import DEMO_LIKE, eventually
from workers.bootstrap import Container, build
from workers.cli import main
from workers.planes.simulator import FaultRates, SimulatorPlane
from workers.watcher import (
    EventStoreProjectAssets,
    ObservationFailed,
    Watcher,
    bounded,
    load_project_assets,
)

TENANT = "default"
BARE = {"project_key": "bare"}  # a project that recorded no assets in its runs


class Assets:
    """A project-assets adapter the test steers (a port the project owns)."""

    def __init__(self, *, delay: float = 0.0, error: ProjectAssetsError | None = None, answer: dict | None = None) -> None:
        self.delay = delay
        self.error = error
        self.answer = answer or {}
        self.calls = 0
        self.released = threading.Event()

    def fetch(self, tenant: str, project_slug: str) -> dict[str, Any]:
        self.calls += 1
        if self.delay:
            self.released.wait(self.delay)  # a controller that hangs until released
        if self.error is not None:
            raise self.error
        return self.answer


@pytest.fixture
def service(sqlite_url: str) -> Container:
    container = build(settings_for(sqlite_url))
    for project in (DEMO_LIKE, BARE):
        container.projects.create_project(tenant=TENANT, request=project, created_by="owner@example.com")
    yield container
    container.close()


def running(container: Container, slug: str) -> str:
    app = container
    run, _ = app.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug=slug, launched_by="op")
    app.studio.runs.request_execution(tenant=TENANT, run_id=run.run_id, requested_by="op")
    app.studio.ticks.tick_runs(SimulatorPlane(faults=FaultRates.none()), start=[(TENANT, run.run_id)])
    while container.runner.run_once():
        pass  # the queue read model lists the running run
    return run.run_id


def blockers(container: Container, run_id: str) -> dict[str, Any]:
    run = container.studio.runs.get_run(TENANT, run_id)
    return {s.agent_id: s for s in container.studio.runs.all_sessions(run) if s.blocker_code}


def test_session_state_gives_the_context_and_no_lookup_is_made(service: Container) -> None:
    run_id = running(service, "acme")
    assets = Assets(error=ProjectAssetsError("transport", "must not be called"))
    (view,) = Watcher(service.studio, service.store, assets, timeout_seconds=1).watch_once()
    assert view.context_source == "session_state" and assets.calls == 0
    assert {b["repository_key"] for b in view.context["repository_bindings"]} == {"assembly", "backend", "frontend"}
    assert [s["suit_id"] for s in view.context["suits"]] == ["admin", "guest"]
    assert blockers(service, run_id) == {}


def test_explicit_project_assets_json_wins_and_no_lookup_is_made(service: Container, tmp_path: Path) -> None:
    path = tmp_path / "assets.json"
    path.write_text(json.dumps({"projectSlug": "bare", "sourceRefRepos": ["bare/design"], "repositoryBindings": []}))
    running(service, "bare")
    assets = Assets(error=ProjectAssetsError("transport", "must not be called"))
    watcher = Watcher(service.studio, service.store, assets, timeout_seconds=1, explicit_assets=load_project_assets(path))
    (view,) = watcher.watch_once()
    assert view.context_source == "project_assets_json" and assets.calls == 0
    assert view.context["source_ref_repos"][0]["slug"] == "bare/design"


def test_without_context_one_lookup_is_made_through_the_built_in_adapter(service: Container) -> None:
    run_id = running(service, "bare")
    watcher = Watcher(service.studio, service.store, EventStoreProjectAssets(service.projects), timeout_seconds=1)
    view = watcher.observe(TENANT, run_id)
    assert view.context_source == "project_assets_lookup" and watcher.lookups == 1
    assert view.lookup_error == "" and blockers(service, run_id) == {}


def test_a_slow_lookup_is_cut_at_the_timeout_and_becomes_a_structured_blocker(service: Container) -> None:
    run_id = running(service, "bare")
    slow = Assets(delay=30)
    watcher = Watcher(service.studio, service.store, slow, timeout_seconds=0.3)
    began = time.monotonic()
    view = watcher.observe(TENANT, run_id)
    elapsed = time.monotonic() - began
    slow.released.set()
    assert elapsed < 5, elapsed  # bounded by the controller timeout, not by the controller
    assert slow.calls == 1 and "0.3 s" in view.lookup_error
    walls = blockers(service, run_id)
    assert set(walls) == {"planner", "curator"} == set(view.newly_blocked)
    for session in walls.values():
        assert session.blocker_code == PROJECT_ASSETS_LOOKUP_FAILED
        assert lookup_error(session.blocker_evidence) == view.lookup_error
    assert {w["recommended_action"] for w in view.walls} == {"nudge_agent"}
    # The next pass does not put a second wall on the same agents.
    assert watcher.observe(TENANT, run_id).newly_blocked == []


@pytest.mark.parametrize("kind", ["transport", "credential"])
def test_strict_observation_fails_loudly_on_transport_and_credential_errors(service: Container, kind: str) -> None:
    run_id = running(service, "bare")
    failing = Assets(error=ProjectAssetsError(kind, "401 from the assets endpoint"))
    with pytest.raises(ObservationFailed):
        Watcher(service.studio, service.store, failing, timeout_seconds=1, strict=True).observe(TENANT, run_id)
    assert blockers(service, run_id) == {}
    # Without the strict flag the same failure is a blocker with its reason.
    view = Watcher(service.studio, service.store, failing, timeout_seconds=1).observe(TENANT, run_id)
    assert kind in view.lookup_error and set(view.newly_blocked) == {"planner", "curator"}


def test_a_watcher_loop_stops_on_a_strict_failure(service: Container) -> None:
    running(service, "bare")
    failing = Assets(error=ProjectAssetsError("proxy", "502 from the proxy"))
    watcher = Watcher(service.studio, service.store, failing, timeout_seconds=0.5, interval_seconds=1, strict=True)
    watcher.start()
    try:
        eventually(lambda: not watcher.running, timeout=10)
    finally:
        watcher.stop()
    assert isinstance(watcher.failure, ObservationFailed)


def test_the_controller_timeout_must_stay_below_the_monitor_cadence(service: Container) -> None:
    with pytest.raises(ValueError):
        Watcher(service.studio, service.store, Assets(), timeout_seconds=30, interval_seconds=30)
    with pytest.raises(TimeoutError):
        bounded(lambda: threading.Event().wait(5), 0.05)
    assert bounded(lambda: 7, 1) == 7


def test_worker_watcher_once_prints_the_operator_projection(sqlite_url: str, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    container = build(settings_for(sqlite_url))
    container.projects.create_project(tenant=TENANT, request=DEMO_LIKE, created_by="owner@example.com")
    run_id = running(container, "acme")
    container.close()
    monkeypatch.setenv("SQUADOPS_DATABASE_URL", sqlite_url)
    monkeypatch.setenv("SQUADOPS_LOG_LEVEL", "warning")
    assert main(["worker", "watcher", "--once", "--controller-timeout-seconds", "5"]) == 0
    views = json.loads(capsys.readouterr().out)
    assert [(v["run_id"], v["context_source"]) for v in views] == [(run_id, "session_state")]
    assert main(["worker", "watcher", "--once", "--controller-timeout-seconds", "30"]) == 2
    assert main(["worker", "watcher", "--once", "--project-assets", "/nonexistent/assets.json"]) == 2


def test_the_watcher_runs_in_process_when_named(service: Container) -> None:
    assert service.watcher is not None and not service.watcher.running
    service.start(("watcher",))
    try:
        assert service.watcher.running and "watcher" in service.started
    finally:
        service.stop()
    assert not service.watcher.running
