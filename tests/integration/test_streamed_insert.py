"""A large save is inserted while it is still being mapped (``insert_mapped``, pipeline
mode, chunk by chunk) and records exactly what one statement would: the same rows in
the same order with consecutive ids, nothing on a conflict or a refused payload, and
exactly once when the connection dies under it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from eventsourcing.persistence import (
    InfrastructureFactory,
    IntegrityError,
    OperationalError,
    StoredEvent,
)
from eventsourcing.utils import Environment

from domain.shared.event_store import EventStore
from tests import infra
from workers.bootstrap import eventsourcing_env
from workers.eventstore import recorder as recorders
from workers.eventstore.recorder import STREAM_CHUNK, TypedArrayApplicationRecorder
from workers.eventstore.transcoder import EventPayloadError
from workers.settings import Settings

pytestmark = pytest.mark.pg

COUNT = 4 * STREAM_CHUNK + 7  # several full chunks and a short last one


@pytest.fixture
def database(pg_admin_url: str) -> Iterator[tuple[str, TypedArrayApplicationRecorder]]:
    with infra.fresh_database(pg_admin_url) as url:
        env = Environment(EventStore.name, eventsourcing_env(Settings(database_url=url)))
        factory = InfrastructureFactory.construct(env)
        recorder = factory.application_recorder()
        assert type(recorder) is TypedArrayApplicationRecorder
        try:
            yield url, recorder
        finally:
            factory.close()


def events(count: int = COUNT, prefix: str = "agg") -> list[StoredEvent]:
    return [
        StoredEvent(
            originator_id=f"{prefix}-{i % 9}",
            originator_version=i // 9 + 1,
            topic="tests.streamed:Happened",
            state=f'{{"n":{i},"pad":"{"x" * (i % 50)}"}}'.encode(),
        )
        for i in range(count)
    ]


def rows(recorder: TypedArrayApplicationRecorder) -> list[tuple[Any, ...]]:
    return [
        (n.id, n.originator_id, n.originator_version, n.topic, n.state)
        for n in recorder.select_notifications(start=1, limit=10_000)
    ]


def test_a_streamed_save_records_the_rows_in_order_with_consecutive_ids(database: Any) -> None:
    _, recorder = database
    recorder.insert_events(events(3, prefix="before"))
    given = events()
    stored, ids = recorder.insert_mapped(given, lambda e: e)
    assert stored == given
    assert ids == list(range(4, 4 + COUNT))
    assert rows(recorder)[3:] == [
        (i, e.originator_id, e.originator_version, e.topic, e.state) for i, e in zip(ids, given, strict=True)
    ]


def test_a_conflict_in_a_later_chunk_records_nothing(database: Any) -> None:
    _, recorder = database
    given = events()
    taken = given[3 * STREAM_CHUNK + 2]  # in the fourth statement
    recorder.insert_events([taken])
    with pytest.raises(IntegrityError):
        recorder.insert_mapped(given, lambda e: e)
    assert [r[1:3] for r in rows(recorder)] == [(taken.originator_id, taken.originator_version)]
    # The connection went back to the pool usable: the next save goes through.
    stored, ids = recorder.insert_mapped(events(prefix="next"), lambda e: e)
    assert len(ids) == COUNT == len(stored)


def test_a_payload_refused_while_streaming_records_nothing(database: Any) -> None:
    _, recorder = database

    def refusing(event: StoredEvent) -> StoredEvent:
        if event.state.startswith(b'{"n":150,'):
            raise EventPayloadError("a float that JSON cannot hold")
        return event

    with pytest.raises(EventPayloadError):
        recorder.insert_mapped(events(), refusing)
    assert rows(recorder) == []


def killing_the_inserter(url: str, at: int) -> Callable[[StoredEvent], StoredEvent]:
    """A mapping that, at item ``at``, terminates the backend holding the table lock."""
    seen = [0]

    def to_stored(event: StoredEvent) -> StoredEvent:
        seen[0] += 1
        if seen[0] == at:
            with psycopg.connect(url, autocommit=True) as admin:
                killed = admin.execute(
                    "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND state <> 'idle'"
                ).fetchall()
            assert killed == [(True,)]
        return event

    return to_stored


def test_a_connection_killed_before_commit_is_replaced_and_records_once(
    database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, recorder = database
    again: list[int] = []
    insert = TypedArrayApplicationRecorder._insert

    def counted(self: Any, stored_events: Any, **kwargs: Any) -> Any:
        again.append(len(stored_events))
        return insert(self, stored_events, **kwargs)

    monkeypatch.setattr(TypedArrayApplicationRecorder, "_insert", counted)
    given = events()
    stored, ids = recorder.insert_mapped(given, killing_the_inserter(url, at=2 * STREAM_CHUNK + 5))
    assert again == [COUNT]  # the whole save, once more, on a fresh connection
    assert stored == given
    recorded = rows(recorder)
    assert [r[1:] for r in recorded] == [(e.originator_id, e.originator_version, e.topic, e.state) for e in given]
    assert ids == [r[0] for r in recorded]


def test_a_connection_lost_during_commit_is_asked_and_not_inserted_again(
    database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, recorder = database
    streamed = TypedArrayApplicationRecorder._stream

    def committed_then_lost(self: Any, *args: Any) -> list[int]:
        streamed(self, *args)  # really committed; the answer is lost on the way back
        error = OperationalError("server closed the connection unexpectedly")
        error.__cause__ = psycopg.OperationalError("server closed the connection unexpectedly")
        raise recorders._Lost(error, committing=True)

    monkeypatch.setattr(TypedArrayApplicationRecorder, "_stream", committed_then_lost)
    given = events()
    stored, ids = recorder.insert_mapped(given, lambda e: e)
    recorded = rows(recorder)
    assert len(recorded) == COUNT  # once, not twice
    assert ids == [r[0] for r in recorded] and stored == given


@pytest.mark.parametrize(("start", "limit", "stop"), [(1, 10_000, 10_000), (5, 7, 9), (30, 100, COUNT + 50), (1, 4, None)])
def test_pages_of_the_log_are_the_notifications_the_library_selects(database: Any, start: int, limit: int, stop: int | None) -> None:
    _, recorder = database
    recorder.insert_events(events())
    library = recorders._Library.select_notifications.__wrapped__(recorder, start, limit, stop)
    read = recorder.select_notifications(start=start, limit=limit, stop=stop)
    assert read == library and [vars(n) for n in read] == [vars(n) for n in library] and read
