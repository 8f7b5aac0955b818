"""The ticker remembers runs it saw end: ticking one again appends nothing and loads nothing."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from eventsourcing.persistence import OperationalError

from domain.shared.event_store import EventStore
from domain.shared.ids import run_key
from domain.studio.commands.holdings import ENDED_KEPT, Holdings
from domain.studio.run import Run
from tests.helpers import drive_runs
from workers.bootstrap import Services, wire_services
from workers.planes.simulator import FaultRates, SimulatorPlane

MEMORY = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": ":memory:", "ORIGINATOR_ID_TYPE": "text"}


def until_some_end(app: Services) -> tuple[list[str], list[str]]:
    """Runs ticked until at least one has ended (the simulator finishes every squad)."""
    ids = drive_runs(app, runs=3, ticks=0)
    plane = SimulatorPlane(activity=0.9, faults=FaultRates.none())  # no wall: every squad finishes
    for _ in range(400):
        app.studio.ticks.tick_runs(plane, tick=[("default", r) for r in ids])
        ended = [r for r in ids if app.studio.runs.get_run("default", r).ended]
        if ended:
            return ids, ended
    raise AssertionError("no run ended in 400 ticks")


def test_an_ended_run_ticks_to_nothing_without_being_loaded() -> None:
    app = wire_services(EventStore(MEMORY))
    _, ended = until_some_end(app)
    holdings = app.studio.ticks.holdings
    keys = {run_key("default", r) for r in ended}
    assert keys <= set(holdings.ended) and not keys & set(holdings.aggregates)
    position = app.event_store.max_position()
    loads: list[str] = []
    original = app.event_store.get_or_none
    app.event_store.get_or_none = lambda i: loads.append(i) or original(i)  # type: ignore[method-assign]
    outcome = app.studio.ticks.tick_runs(SimulatorPlane(), tick=[("default", r) for r in ended])
    assert (outcome.events, outcome.runs_ticked) == (0, 0)
    assert app.event_store.max_position() == position and not loads


def test_a_fresh_ticker_loads_an_ended_run_once_then_remembers_it() -> None:
    app = wire_services(EventStore(MEMORY))
    _, ended = until_some_end(app)
    ticks = app.studio.ticks
    ticks.holdings = Holdings(app.event_store, ticks.holdings.log)
    ticks.steps.holdings = ticks.holdings
    outcome = ticks.tick_runs(SimulatorPlane(), tick=[("default", r) for r in ended])
    assert outcome.events == 0
    assert {run_key("default", r) for r in ended} <= set(ticks.holdings.ended)


def test_the_memory_of_ended_runs_is_bounded() -> None:
    holdings = Holdings(None, None)  # type: ignore[arg-type]
    holdings.note_ended(f"run:t:{i}" for i in range(ENDED_KEPT + 10))
    assert len(holdings.ended) == ENDED_KEPT
    assert "run:t:0" not in holdings.ended and f"run:t:{ENDED_KEPT + 9}" in holdings.ended


def test_a_run_whose_completing_save_fails_is_not_remembered_ended_and_completes_once() -> None:
    """A failed save leaves the ticker as if the pass never happened: the run it would have
    completed is neither remembered as ended nor held as completed, and a later pass
    completes it, once, with no hole in any aggregate's versions."""
    app = wire_services(EventStore(MEMORY))
    ids = drive_runs(app, runs=3, ticks=0)
    refs = [("default", r) for r in ids]
    plane = SimulatorPlane(activity=0.9, faults=FaultRates.none())
    holdings = app.studio.ticks.holdings
    record = app.event_store._record
    failed: list[str] = []

    def failing_once(processing_event: Any) -> Any:
        completing = [a.id for a in processing_event.aggregates.values() if type(a) is Run and a.ended]
        if completing and not failed:
            failed.extend(completing)
            raise OperationalError("injected: the database went away")
        return record(processing_event)

    app.event_store._record = failing_once  # type: ignore[method-assign]
    for _ in range(400):
        try:
            app.studio.ticks.tick_runs(plane, tick=refs)
        except OperationalError:
            assert not set(failed) & set(holdings.ended)
            assert not any(getattr(holdings.aggregates.get(k), "ended", False) for k in failed)
        if failed and all(r in holdings.ended for r in failed):
            break
    else:
        raise AssertionError("no failed completion was completed again in 400 ticks")
    completions: Counter[str] = Counter()
    versions: dict[str, list[int]] = defaultdict(list)
    for note in app.event_store.recorder.select_notifications(start=1, limit=1_000_000):
        versions[note.originator_id].append(note.originator_version)
        if note.topic.endswith(":Run.Completed"):
            completions[note.originator_id] += 1
    assert all(completions[k] == 1 for k in failed)
    assert all(v == list(range(1, len(v) + 1)) for v in versions.values())
