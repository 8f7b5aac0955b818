"""The one log follower on both stores: contiguous pages, the gap policy, wake-ups, resuming."""

from __future__ import annotations

import threading
from typing import Any

from projections.engine.envelope import Envelope
from projections.engine.follower import LogFollower, LogHeader, NotificationSource, header
from tests.conftest import settings_for
from tests.helpers import DEMO_LIKE, burn_a_position, drive_runs, log_positions
from workers.bootstrap import Container, build


def follower_for(container: Container, **kw: Any) -> LogFollower[Envelope]:
    return LogFollower(NotificationSource(container.event_store), **kw)


class Hiding:
    """The store's log with some positions not visible yet: transactions still in flight.

    ``in_flight`` is what the store would answer when asked whether an append may still
    fill a gap; a hidden position that is ``committed`` shows up again.
    """

    def __init__(self, source: NotificationSource, hidden: set[int]) -> None:
        self.source = source
        self.hidden = hidden
        self.in_flight = True

    def read(self, start: int, limit: int, stop: int | None = None) -> list[Envelope]:
        return [e for e in self.source.read(start, limit + len(self.hidden), stop) if e.position not in self.hidden][
            :limit
        ]

    def max_position(self) -> int:
        return self.source.max_position()

    def insert_in_flight(self) -> bool:
        return self.in_flight


def test_pages_are_contiguous_and_cover_the_log_once(container: Container) -> None:
    drive_runs(container, runs=2, ticks=6)
    expected = log_positions(container)
    follower = follower_for(container, page_size=7)
    seen: list[int] = []
    while page := follower.next_page():
        positions = [e.position for e in page]
        assert len(positions) <= 7
        assert positions == list(range(positions[0], positions[0] + len(positions)))
        assert positions[0] == (seen[-1] + 1 if seen else 1)
        seen.extend(positions)
    assert seen == expected and follower.position == expected[-1] == follower.head()
    assert follower.next_page() == []  # nothing new: the position stays


def test_a_page_stops_at_stop_and_reads_headers_only(container: Container) -> None:
    drive_runs(container, runs=1, ticks=4)
    envs = NotificationSource(container.event_store).read(1, 10**9)
    follower: LogFollower[LogHeader] = LogFollower(
        NotificationSource(container.event_store, decode=header), page_size=1000
    )
    page = follower.next_page(stop=envs[4].position)
    assert page == [LogHeader(e.position, e.originator_id, e.version) for e in envs[:5]]
    assert follower.position == envs[4].position


def test_resumes_from_a_stored_position(container: Container) -> None:
    drive_runs(container, runs=1, ticks=4)
    expected = log_positions(container)
    container.store.ensure("tracked")
    assert container.store.commit("tracked", 0, expected[9], [], [])
    follower = follower_for(container, page_size=1000)
    follower.seek(container.store.position("tracked"))
    page = follower.next_page()
    assert [e.position for e in page] == expected[10:]


def hidden_gap(container: Container) -> tuple[list[int], list[float], Hiding, LogFollower[Envelope]]:
    """A log whose sixth position is not visible yet (an append in flight), and a follower of
    it on a clock the test moves (``now[0]``)."""
    drive_runs(container, runs=1, ticks=4)
    expected = log_positions(container)
    now = [0.0]
    source = Hiding(NotificationSource(container.event_store), {expected[5]})
    follower = LogFollower(source, page_size=1000, gap_timeout=5.0, clock=lambda: now[0])
    return expected, now, source, follower


def test_a_gap_is_waited_for_while_an_append_may_fill_it(container: Container) -> None:
    expected, now, source, follower = hidden_gap(container)
    assert [e.position for e in follower.next_page()] == expected[:5]  # up to the gap, not past it
    assert follower.next_page() == []  # in flight: wait
    now[0] = 4.9
    assert follower.next_page() == []
    source.hidden.clear()  # it committed: no gap after all
    assert [e.position for e in follower.next_page()] == expected[5:]
    assert follower.gaps_accepted == 0


def test_a_gap_is_accepted_after_the_timeout_and_nothing_else_is_skipped(container: Container) -> None:
    expected, now, source, follower = hidden_gap(container)
    follower.next_page()  # the gap is first seen here, behind the page
    now[0] = 3.0
    assert follower.next_page() == []
    now[0] = 5.0  # counted from when it was first seen, not from when the follower reached it
    assert [e.position for e in follower.next_page()] == expected[6:]
    assert follower.gaps_accepted == 1


def test_a_gap_no_append_can_fill_is_accepted_at_once(container: Container) -> None:
    drive_runs(container, runs=1, ticks=4)
    expected = log_positions(container)
    source = Hiding(NotificationSource(container.event_store), {expected[5]})
    source.in_flight = False  # a rolled-back insert: nothing will ever fill it
    follower = LogFollower(source, page_size=1000, gap_timeout=60.0, clock=lambda: 0.0)
    follower.next_page()
    assert [e.position for e in follower.next_page()] == expected[6:]
    assert follower.gaps_accepted == 1


def test_a_gap_is_waited_for_while_the_store_cannot_tell(container: Container) -> None:
    drive_runs(container, runs=1, ticks=4)
    expected = log_positions(container)

    class Unsure(Hiding):
        def insert_in_flight(self) -> bool:
            raise ConnectionError("the database went away")

    now = [0.0]
    follower = LogFollower(
        Unsure(NotificationSource(container.event_store), {expected[5]}),
        page_size=1000, gap_timeout=5.0, clock=lambda: now[0],
    )
    follower.next_page()
    assert follower.next_page() == []
    now[0] = 6.0
    assert [e.position for e in follower.next_page()] == expected[6:]


def test_an_append_in_this_process_wakes_a_waiting_follower(container: Container) -> None:
    follower = follower_for(container)
    container.event_store.add_listener(follower.wake)
    woken: list[bool] = []
    waiter = threading.Thread(target=lambda: woken.append(follower.wait(60.0)))
    waiter.start()
    container.projects.create_project(tenant="default", request=DEMO_LIKE, created_by="op@example.com")
    waiter.join(timeout=60.0)
    assert woken == [True]  # woken by the append, not by the timeout
    assert follower.next_page()


def test_subscribers_are_told_of_every_wake_up(container: Container) -> None:
    follower = follower_for(container)
    container.event_store.add_listener(follower.wake)
    told: list[int] = []
    unsubscribe = follower.subscribe(lambda: told.append(1))
    container.projects.create_project(tenant="default", request=DEMO_LIKE, created_by="op@example.com")
    assert told == [1]
    unsubscribe()
    drive_runs(container, runs=1, ticks=1)
    assert told == [1]


def test_a_rolled_back_append_on_postgres_is_a_gap_accepted_at_once(pg_url: str) -> None:
    """A version conflict burns a position; the store says no append is in flight."""
    container = build(settings_for(pg_url))
    try:
        burn_a_position(container)
        expected = log_positions(container)
        follower = follower_for(container, page_size=1000, gap_timeout=3600.0)
        seen: list[int] = []
        for _ in range(10):
            seen.extend(e.position for e in follower.next_page())
        assert seen == expected and follower.gaps_accepted >= 1
    finally:
        container.close()


def test_a_gap_on_postgres_waits_while_an_append_holds_the_log(pg_url: str) -> None:
    """While another transaction holds the events table's lock (an append in flight), a
    gap is not accepted before the timeout; once the lock is gone, it is."""
    import psycopg
    container = build(settings_for(pg_url))
    try:
        before = burn_a_position(container)
        expected = log_positions(container)
        now = [0.0]
        follower = follower_for(container, page_size=1000, gap_timeout=5.0, clock=lambda: now[0])
        assert [e.position for e in follower.next_page()] == before
        table = container.event_store.recorder.events_table_name
        with psycopg.connect(pg_url) as holder:
            holder.execute(f'LOCK TABLE "{table}" IN EXCLUSIVE MODE')  # an append in flight
            assert follower.next_page() == []
            now[0] = 4.0
            assert follower.next_page() == []
            now[0] = 5.0  # the timeout: accepted even while the lock is held
            assert [e.position for e in follower.next_page()] == expected[len(before):]
            holder.rollback()
        assert follower.gaps_accepted == 1
    finally:
        container.close()


def test_postgres_notify_from_another_process_wakes_a_listening_follower(pg_url: str) -> None:
    reader = build(settings_for(pg_url))
    writer = build(settings_for(pg_url))
    try:
        follower = follower_for(reader)  # not a listener of the writer's event store
        follower.listen(pg_url, reader.event_store.recorder.channel_name)
        woken = False
        for _ in range(50):  # until LISTEN is established, an append may go unheard
            drive_runs(writer, runs=1, ticks=1)
            if follower.wait(0.5):
                woken = True
                break
        assert woken
        follower.stop_listening()
        assert follower.next_page()
    finally:
        reader.close()
        writer.close()


def test_the_tickers_holdings_follow_the_log_and_drop_a_copy_changed_elsewhere(container: Container) -> None:
    [run_id] = drive_runs(container, runs=1, ticks=3)
    holdings = container.studio.ticks.holdings
    run = container.studio.runs.get_run("default", run_id)
    assert run.id in holdings.aggregates and holdings.position == container.event_store.max_position()
    container.studio.runs.share_preview(tenant="default", run_id=run_id, fields={"note": "from elsewhere"})
    holdings.refresh()
    assert run.id not in holdings.aggregates
    assert holdings.position == container.event_store.max_position()


def test_the_tickers_holdings_do_not_read_past_a_gap_still_in_flight(container: Container) -> None:
    from domain.studio.commands.holdings import Holdings

    [run_id] = drive_runs(container, runs=1, ticks=3)
    source = Hiding(NotificationSource(container.event_store, decode=header), set())
    holdings = Holdings(container.event_store, LogFollower(source, gap_timeout=3600.0))
    run = container.event_store.repository.get(container.studio.runs.get_run("default", run_id).id)
    holdings.adopt([run])
    holdings.log.seek(container.event_store.max_position())
    container.studio.runs.share_preview(tenant="default", run_id=run_id, fields={"note": "one"})
    container.studio.runs.share_preview(tenant="default", run_id=run_id, fields={"note": "two"})
    first = container.event_store.max_position() - 1
    source.hidden.add(first)  # not committed yet, as far as the holdings can see
    holdings.refresh()
    assert holdings.position == first - 1 and run.id in holdings.aggregates
    source.hidden.clear()  # it committed
    holdings.refresh()
    assert holdings.position == first + 1 and run.id not in holdings.aggregates
