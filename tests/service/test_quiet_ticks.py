"""A tick that changes nothing appends nothing: a blocked or idle run costs no events.

What a person reading ``GET …/runs/{id}/reports`` gets instead of one report per tick:
one report per tick that changed something. A report's state holds from its ``tick``
until the next report; the latest report is the run's state now, so its ``tick`` and
``at`` say since when nothing has changed. The report that ends a quiet stretch says how
long it was: ``quiet_ticks`` ticks changed nothing before it, so consecutive reports
cover every tick (``next.tick == tick + next.quiet_ticks + 1``). No events stand in for
the quiet ticks; the ticker counts them itself (a restarted ticker counts anew, so
``quiet_ticks`` is a lower bound after a restart).

The policies, the plane and the watcher still look at a quiet run every time: the tick
clock advances over quiet ticks (the simulator's stall detection counts them), and the
first tick that changes something is recorded at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from litestar.testing import TestClient

from api.app import create_app
from domain.shared.clock import iso
from domain.studio.commands.recovery import CredentialPolicy, recovery_policies
from domain.studio.control import ControlIntent
from domain.studio.policies.credentials import CREDENTIALS_INVALID, CredentialCheck
from tests.conftest import ADMIN
from tests.events import named
from tests.helpers import DEMO_LIKE
from tests.service.recovery_support import TENANT, Squad
from workers.bootstrap import Container, wire_services
from workers.planes.simulator import FaultRates, SimulatorPlane
from workers.ticker import Ticker
from workers.watcher import EventStoreProjectAssets, Watcher

QUIET = 50


class Keys:
    """The sandbox key status endpoint (a port the project owns): refuses until fixed."""

    def __init__(self) -> None:
        self.status = 401

    def check_credentials(self, run: Any, session: Any) -> CredentialCheck:
        return CredentialCheck(profile_resolved=True, key_status=self.status)


def tick(app: Any, plane: Any, run_id: str, policies: list[Any], times: int = 1) -> list[Any]:
    return [app.studio.ticks.tick_runs(plane, tick=[(TENANT, run_id)], policies=policies) for _ in range(times)]


def blocked_run(app: Any, plane: Any, policies: list[Any]) -> str:
    """A running run whose every agent is blocked on refused credentials."""
    run, _ = app.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug="acme", launched_by="op")
    app.studio.runs.request_execution(tenant=TENANT, run_id=run.run_id, requested_by="op")
    app.studio.ticks.tick_runs(plane, start=[(TENANT, run.run_id)], policies=policies)
    sessions = app.studio.runs.all_sessions(app.studio.runs.get_run(TENANT, run.run_id))
    assert {s.blocker_code for s in sessions} == {CREDENTIALS_INVALID} and len(sessions) == 2
    # The workspace the curator's start reserved gets its first live probe (then one per
    # PROBE_SECONDS of the clock): workspace housekeeping, not the run's ticks.
    app.studio.ticks.tick_runs(plane, tick=[(TENANT, run.run_id)], policies=policies)
    return run.run_id


def tick_reports(app: Any, run_id: str) -> list[dict[str, Any]]:
    run = app.studio.runs.get_run(TENANT, run_id)
    return [{"tick": e.tick, **e.report} for e in app.event_store.events.get(run.id) if named(e) == "TickRecorded"]


def test_a_blocked_run_appends_nothing_until_someone_intervenes() -> None:
    keys = Keys()
    squad = Squad(FaultRates.none(), [CredentialPolicy(keys)], clock=lambda: "2026-01-02T03:04:05.000000Z")
    run_id = blocked_run(squad.app, squad.plane, squad.policies)
    before = squad.app.event_store.max_position()
    last = tick_reports(squad.app, run_id)[-1]

    outcomes = tick(squad.app, squad.plane, run_id, squad.policies, QUIET)

    assert squad.app.event_store.max_position() == before  # fifty ticks, no event
    assert sum(o.quiet for o in outcomes) == QUIET and sum(o.events for o in outcomes) == 0
    assert last["status"] == "blocked"
    assert [b["blocker_code"] for b in last["blockers"]] == [CREDENTIALS_INVALID] * 2

    # The operator rotates the key and restarts the planner's workspace (the wall's
    # recommended action): the very next tick records.
    keys.status = 200
    squad.app.studio.control.control_session(
        tenant=TENANT, run_id=run_id, agent_id="planner", intent=ControlIntent(verb="restart_workspace"), actor="op"
    )
    tick(squad.app, squad.plane, run_id, squad.policies)
    after = tick_reports(squad.app, run_id)[-1]
    assert after["quiet_ticks"] == QUIET + 1 and after["tick"] == last["tick"] + QUIET + 2
    assert after["live_status_counts"] != last["live_status_counts"]

    # The plane takes the planner on from there: the run moves again.
    squad.tick(run_id, lambda: squad.status(run_id, "planner") == "working")


def test_the_tick_clock_counts_quiet_ticks_so_reports_cover_every_tick() -> None:
    squad = Squad(FaultRates())  # the built-in plane's default faults: stalls, losses, walls
    squad.policies = recovery_policies(credentials=squad.plane)
    runs = [squad.launch() for _ in range(4)]
    calls = 150
    for run_id in runs:
        squad.tick(run_id, limit=calls)
    quiet_seen = 0
    for run_id in runs:
        run = squad.app.studio.runs.get_run(TENANT, run_id)
        reports = tick_reports(squad.app, run_id)
        assert reports[0]["tick"] == 1
        for previous, report in zip(reports, reports[1:], strict=False):
            assert report["tick"] == previous["tick"] + report["quiet_ticks"] + 1
        quiet_seen += sum(r["quiet_ticks"] for r in reports)
        if run.status == "running":
            # Every call was a tick: recorded, or quiet and counted since the last record.
            stretch = squad.app.studio.ticks.holdings.quiet_since(run)
            assert run.tick + (stretch.count if stretch else 0) == calls + 1
    assert quiet_seen > 0


def test_a_ticker_ticks_a_quiet_run_once_per_interval(container: Container) -> None:
    container.projects.create_project(tenant=TENANT, request=DEMO_LIKE, created_by="op")
    keys = Keys()
    long_ago = wire_services(container.event_store, clock=lambda: iso(datetime.now(UTC) - timedelta(hours=2)))
    run_id = blocked_run(long_ago, container.plane, [CredentialPolicy(keys)])  # its last tick was long ago
    app = container
    container.runner.run_once()
    ticker = Ticker(app.studio.ticks, container.store, container.plane, tick_seconds=3600, policies=[CredentialPolicy(keys)])
    first = ticker.run_once()
    again = [ticker.run_once() for _ in range(5)]
    assert first.runs_ticked == 1 and first.quiet == 1
    assert sum(o.runs_ticked for o in again) == 0  # the next tick is due in an hour
    assert app.studio.runs.get_run(TENANT, run_id).tick == 1


@pytest.fixture
def quiet_http(container: Container) -> Iterator[tuple[TestClient, Container]]:
    with TestClient(create_app(container, workers=())) as client:  # the test drives the workers
        client.headers.update(ADMIN)
        yield client, container


def caught_up(container: Container) -> None:
    while container.runner.run_once():
        pass


def test_the_reports_endpoint_shows_since_when_a_run_is_stuck_and_for_how_many_ticks(
    quiet_http: tuple[TestClient, Container],
) -> None:
    http, container = quiet_http
    app, plane = container, SimulatorPlane(faults=FaultRates.none())
    app.projects.create_project(tenant=TENANT, request=DEMO_LIKE, created_by="op")
    keys = Keys()
    policies: list[Any] = [CredentialPolicy(keys)]
    run_id = blocked_run(app, plane, policies)
    tick(app, plane, run_id, policies, QUIET)
    caught_up(container)
    reports = http.get(f"/v1/admin/studio/runs/{run_id}/reports").json()
    assert len(reports) == 1  # one report for the tick that blocked it, none for fifty quiet ones
    stuck = reports[-1]
    assert stuck["status"] == "blocked" and stuck["tick"] == 1 and stuck["at"]
    assert {b["blocker_code"] for b in stuck["blockers"]} == {CREDENTIALS_INVALID}

    # The watcher still looks at the quiet run and shows its walls, appending nothing.
    before = app.event_store.max_position()
    views = Watcher(app.studio, container.store, EventStoreProjectAssets(app.projects)).watch_once()
    walls = {w["agent_id"]: w["recommended_action"] for v in views if v.run_id == run_id for w in v.walls}
    assert walls == {"curator": "restart_workspace", "planner": "restart_workspace"}
    assert app.event_store.max_position() == before

    keys.status = 200
    app.studio.control.control_run(tenant=TENANT, run_id=run_id, intent=ControlIntent(verb="replay_blockers"), actor="op")
    tick(app, plane, run_id, policies)
    caught_up(container)
    reports = http.get(f"/v1/admin/studio/runs/{run_id}/reports").json()
    assert [(r["tick"], r["quiet_ticks"]) for r in reports] == [(1, 0), (QUIET + 3, QUIET + 1)]
    assert reports[-1]["status"] != "blocked"

