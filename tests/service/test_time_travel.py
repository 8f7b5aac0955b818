"""Time travel: the feed at a past position equals the live feed captured at that position."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest

from api.studio.feed import FeedReads
from projections.studio.time_travel import EventSelector, RunNotYet, TimeTravel, parse_moment
from tests.conftest import settings_for
from tests.feed_scenarios import TENANT, apply_all, launch
from workers.bootstrap import Container, build

CHUNKS = [
    [("advance", 0, 11, 4, "backend", (0.4, 1200, 3, "success")), ("join", "backend", 0)],
    [("advance", 2, 5, 6, "backend", (0.3, 900, 2, "success")), ("block", 1, "sandbox_missing")],
    [("verb", 1, "comment_agent"), ("advance", 2, 77, 8, "backend", (1.25, 5000, 9, "success"))],
    [("verb", 0, "switch_agent_process"), ("run", "preview"), ("advance", 0, 3, 10, "frontend", (0.2, 10, 1, "error"))],
]


@pytest.fixture
def world(database_url: str) -> Iterator[Container]:
    # No interval: every pass the test drives ticks the run. With one (even 1 ms), a pass
    # that follows a quiet tick within it skips the run as just ticked, and the passes here
    # come that fast: the run would tick every other pass, too few for the mirror to fill.
    container = build(settings_for(database_url, tick_seconds=0.0))
    yield container
    container.close()


def settle(container: Container) -> None:
    while container.runner.run_once():
        pass


def test_feed_at_each_past_position_equals_the_live_feed_then(world: Container) -> None:
    app = world
    reads = FeedReads(world.store, TimeTravel(EventSelector(app.event_store)), app.event_store.max_position)
    scenario = launch(app, {"project_key": "acme", "proposal_id": "p-1"})
    captured: list[tuple[int, bytes]] = []

    def capture() -> None:
        settle(world)
        captured.append((app.event_store.max_position(), reads.feed(TENANT, "acme", scenario.run_id, 200)))

    capture()
    for chunk in CHUNKS:
        apply_all(scenario, chunk)
        capture()
    # the simulator adds workspace leases (the mirror) and more sessions: six passes at least,
    # and until a workspace is in the mirror (the run's draws decide at which pass)
    app.studio.runs.request_execution(tenant=TENANT, run_id=scenario.run_id, requested_by="op@example.com")

    def mirrored() -> int:
        return max(msgspec.json.decode(body)["execution_workspace_mirror"]["workspace_count"] for _, body in captured)

    for passes in range(1, 31):
        settle(world)
        world.ticker.run_once()
        capture()
        if passes >= 6 and mirrored() >= 1:
            break
    assert len({body for _, body in captured}) > 5  # the feed really changed along the way
    assert mirrored() >= 1
    for position, live in captured:
        past, answered = reads.feed_at(TENANT, "acme", scenario.run_id, 200, position=position)
        assert answered == position
        assert past == live, f"time travel differs from the live feed at position {position}"
    # a position between two captures answers the earlier state when nothing of the run happened
    first_position, first_feed = captured[0]
    noise = app.projects.create_project(tenant=TENANT, request={"project_key": "other"}, created_by="op@example.com")
    assert noise is not None
    past, _ = reads.feed_at(TENANT, "acme", scenario.run_id, 200, position=first_position)
    assert past == first_feed


def test_as_of_a_timestamp_and_before_the_run(world: Container) -> None:
    app = world
    travel = TimeTravel(EventSelector(app.event_store))
    before_launch = app.event_store.max_position()
    scenario = launch(app, {"project_key": "acme"})
    apply_all(scenario, CHUNKS[0])
    events = travel.run_events(TENANT, scenario.run_id, "acme", app.event_store.max_position())
    middle = events[len(events) // 2]
    by_time, position = travel.feed(TENANT, scenario.run_id, "acme", moment=middle.at, limit=50)
    assert position == max(e.position for e in events if e.at <= middle.at)
    by_position, _ = travel.feed(TENANT, scenario.run_id, "acme", position=position, limit=50)
    assert by_time == by_position
    with pytest.raises(RunNotYet):
        travel.feed(TENANT, scenario.run_id, "acme", position=max(before_launch, 1), limit=50)
    with pytest.raises(RunNotYet):
        travel.feed(TENANT, scenario.run_id, "acme", moment="2000-01-01T00:00:00.000000Z", limit=50)
    # only this run's events (and its project's leases) are selected
    assert {e.run_id for e in events} == {scenario.run_id}


def test_parse_moment_normalises_iso_timestamps() -> None:
    assert parse_moment("2026-01-02T03:04:05Z") == "2026-01-02T03:04:05.000000Z"
    assert parse_moment("2026-01-02T04:04:05.5+01:00") == "2026-01-02T03:04:05.500000Z"
    with pytest.raises(ValueError):
        parse_moment("2026-01-02T03:04:05")
    with pytest.raises(ValueError):
        parse_moment("yesterday")
