"""Small helpers shared by the tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from workers.bootstrap import Services
    from workers.planes.simulator import FaultRates

T = TypeVar("T")

DEMO_LIKE = {
    "project_key": "acme",
    "display_name": "Acme shop",
    "repository_bindings": [
        {"repository_key": "assembly", "vcs_repo_slug": "acme/assembly", "repository_type": "assembly"},
        {"repository_key": "backend", "vcs_repo_slug": "acme/api"},
        {"repository_key": "frontend", "vcs_repo_slug": "acme/web"},
    ],
    "project_assembly": {"agentSquadSuitTesterRoles": ["admin", "guest"]},
}


def eventually(probe: Callable[[], T | None], timeout: float = 20.0, interval: float = 0.05) -> T:
    """Polls ``probe`` until it answers something truthy (what a client of the API does)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)  # the poll interval of this bounded wait
    raise AssertionError(f"condition not met within {timeout}s; last answer: {last!r}")


def drive_runs(
    app: Services, *, runs: int, ticks: int, project: dict[str, Any] | None = None, faults: FaultRates | None = None
) -> list[str]:
    """Launches and executes ``runs`` runs of the project, then ticks them with the simulator
    (its default fault rates unless ``faults`` are given: ``FaultRates.none()`` for a test whose
    subject is not the faults, since a run's seeded faults may wall its whole squad)."""
    from workers.planes.simulator import SimulatorPlane

    request = project or DEMO_LIKE
    slug = str(request["project_key"])
    if app.projects.get_project("default", slug) is None:
        app.projects.create_project(tenant="default", request=request, created_by="op@example.com")
    plane = SimulatorPlane(faults=faults)
    ids = []
    for _ in range(runs):
        run, _ = app.studio.runs.launch_run(tenant="default", template_id="delivery-core", project_slug=slug, launched_by="op")
        app.studio.runs.request_execution(tenant="default", run_id=run.run_id, requested_by="op")
        ids.append(run.run_id)
    app.studio.ticks.tick_runs(plane, start=[("default", r) for r in ids])
    for _ in range(ticks):
        app.studio.ticks.tick_runs(plane, tick=[("default", r) for r in ids])
    return ids


def log_positions(app: Services) -> list[int]:
    """Every position of the notification log, in order."""
    from projections.engine.follower import NotificationSource

    return [e.position for e in NotificationSource(app.event_store).read(1, 10**9)]


def burn_a_position(app: Services) -> list[int]:
    """A version conflict burns a log position: a stale copy of a run fails to save between
    two appends. Answers the log's positions before the conflict."""
    import pytest
    from eventsourcing.persistence import RecordConflictError

    app.projects.create_project(tenant="default", request=DEMO_LIKE, created_by="op@example.com")
    run, _ = app.studio.runs.launch_run(tenant="default", template_id="delivery-core", project_slug="acme", launched_by="op")
    stale = app.event_store.repository.get(run.id)
    app.studio.runs.request_execution(tenant="default", run_id=run.run_id, requested_by="op")
    before = log_positions(app)
    stale.share_preview({"note": "from a stale copy"}, "2026-01-01T00:00:00.000000Z")
    with pytest.raises(RecordConflictError):
        app.event_store.save(stale)
    app.studio.runs.share_preview(tenant="default", run_id=run.run_id, fields={"note": "after the gap"})
    after = log_positions(app)
    assert after != list(range(1, len(after) + 1)), "the conflict burned no position"
    return before

