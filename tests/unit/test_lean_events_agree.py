"""Property tests: whatever the domain records, the lean ``@event`` methods
(domain/shared/base.py) store the very events the library's decorator stores.

The same generated operations (and the same simulated ticks) run twice with the same ids
and the same clock: once as the aggregates are, once with every lean method swapped back
for the library's decorator. The two logs must hold the same events in the same order:
ids, versions, topics and each event's stored state field for field, in the same order,
byte for byte but for the ``timestamp`` the library takes from the wall clock.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any
from unittest import mock

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.shared.base import Aggregate
from domain.shared.clock import iso
from domain.shared.event_store import EventStore
from tests.feed_scenarios import OPERATIONS, apply_all, launch, project_requests
from tests.helpers import drive_runs
from workers.bootstrap import Services, wire_services

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MEMORY = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": ":memory:", "ORIGINATOR_ID_TYPE": "text"}
START = datetime(2026, 1, 1, tzinfo=UTC)


def aggregate_classes() -> Iterator[type[Aggregate]]:
    pending: list[type[Aggregate]] = [Aggregate]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        yield cls


@contextlib.contextmanager
def library_path() -> Iterator[int]:
    """Every lean method swapped back for the library's decorator while inside."""
    swapped = []
    for cls in aggregate_classes():
        for name, value in list(vars(cls).items()):
            decorator = getattr(value, "event_decorator", None)
            if decorator is not None:
                swapped.append((cls, name, value))
                setattr(cls, name, decorator)
    try:
        yield len(swapped)
    finally:
        for cls, name, value in swapped:
            setattr(cls, name, value)


def recorded(seed: int, scenario: Callable[[Services], None]) -> list[tuple[Any, ...]]:
    """The stored log of ``scenario``, with ids and clock that depend on ``seed`` only."""
    counter = itertools.count()
    ticks = itertools.count()

    def token_hex(nbytes: int = 32) -> str:
        return hashlib.sha256(f"{seed}:{next(counter)}".encode()).hexdigest()[: 2 * nbytes]

    def clock() -> str:
        return iso(START + timedelta(milliseconds=next(ticks)))

    with mock.patch("domain.shared.ids.secrets", SimpleNamespace(token_hex=token_hex)):
        app = wire_services(EventStore(MEMORY), clock=clock)
        scenario(app)
    log = []
    for note in app.event_store.recorder.select_notifications(start=1, limit=10_000_000):
        state = msgspec.json.decode(note.state)
        stamp = state.pop("timestamp")  # the wall clock's: its kind and zone only
        zone = (stamp["_type_"], stamp["_data_"][-6:])
        log.append((note.originator_id, note.originator_version, note.topic, msgspec.json.encode(state), zone))
    app.event_store.close()
    return log


def assert_same_logs(seed: int, scenario: Callable[[Services], None]) -> None:
    lean = recorded(seed, scenario)
    with library_path() as swapped:
        library = recorded(seed, scenario)
    assert swapped > 20  # the lean methods were in place, and were swapped out
    assert len(lean) == len(library)
    for mine, theirs in zip(lean, library, strict=True):
        assert mine == theirs


@FAST
@given(
    seed=st.integers(0, 2**32),
    request=project_requests(),
    operations=st.lists(OPERATIONS, min_size=4, max_size=40),
)
def test_any_operations_store_the_same_events_on_both_paths(
    seed: int, request: dict[str, Any], operations: list[tuple[Any, ...]]
) -> None:
    def scenario(app: Services) -> None:
        apply_all(launch(app, request), operations)

    assert_same_logs(seed, scenario)


@FAST
@given(seed=st.integers(0, 2**32), runs=st.integers(1, 3), ticks=st.integers(0, 40))
def test_simulated_ticks_store_the_same_events_on_both_paths(seed: int, runs: int, ticks: int) -> None:
    def scenario(app: Services) -> None:
        drive_runs(app, runs=runs, ticks=ticks)

    assert_same_logs(seed, scenario)
