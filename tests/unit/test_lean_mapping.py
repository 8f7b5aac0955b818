"""The lean mapper and event store (workers/eventstore/mapping.py) store and answer what
the library's ``Mapper`` and ``EventStore`` do: the same stored events, byte for byte,
and the same recordings."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime
from typing import Any

import pytest
from eventsourcing.domain import Aggregate as LibraryAggregate
from eventsourcing.persistence import (
    DatetimeAsISO,
    IntegrityError,
    JSONTranscoder,
    Mapper,
    Notification,
    Recording,
    StoredEvent,
)
from eventsourcing.persistence import EventStore as LibraryEventStore
from eventsourcing.popo import POPOApplicationRecorder
from eventsourcing.utils import get_topic
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.shared.event_store import EventStore
from tests.helpers import DEMO_LIKE
from tests.unit.test_transcoder import json_values
from workers.bootstrap import Services, wire_services
from workers.eventstore.mapping import LeanEventStore, LeanMapper
from workers.eventstore.transcoder import EventPayloadError, MsgspecTranscoder
from workers.planes.simulator import SimulatorPlane

LEAN = {
    "PERSISTENCE_MODULE": "workers.eventstore.sqlite:CheckpointedSQLiteFactory",
    "SQLITE_DBNAME": ":memory:",
    "ORIGINATOR_ID_TYPE": "text",
    "TRANSCODER_TOPIC": "workers.eventstore.transcoder:MsgspecTranscoder",
    "MAPPER_TOPIC": "workers.eventstore.mapping:LeanMapper",
}
NOW = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def simulated_log() -> tuple[Services, list[Notification]]:
    app = wire_services(EventStore(LEAN))
    app.projects.create_project(tenant="default", request=DEMO_LIKE, created_by="op@example.com")
    refs = []
    for _ in range(3):
        run, _ = app.studio.runs.launch_run(tenant="default", template_id="delivery-core", project_slug="acme", launched_by="op")
        app.studio.runs.request_execution(tenant="default", run_id=run.run_id, requested_by="op")
        refs.append(("default", run.run_id))
    plane = SimulatorPlane(activity=0.9)
    app.studio.ticks.tick_runs(plane, start=refs)
    for _ in range(40):
        app.studio.ticks.tick_runs(plane, tick=refs)
    return app, list(app.event_store.recorder.select_notifications(start=1, limit=100_000))


def test_the_service_saves_through_the_lean_mapper_and_event_store() -> None:
    app, _ = simulated_log()
    assert type(app.event_store.mapper) is LeanMapper
    assert type(app.event_store.events) is LeanEventStore


def test_every_event_of_simulated_runs_maps_to_the_library_mappers_stored_event() -> None:
    app, notes = simulated_log()
    lean, library = app.event_store.mapper, Mapper(transcoder=MsgspecTranscoder())
    topics = set()
    for note in notes:
        event = library.to_domain_event(note)
        ours, theirs = lean.to_stored_event(event), library.to_stored_event(event)
        assert type(ours) is StoredEvent and ours == theirs and vars(ours) == vars(theirs)
        assert ours.state == note.state  # and the very bytes the save stored
        topics.add(note.topic)
    assert len(topics) >= 10


class Counter(LibraryAggregate):
    class Counted(LibraryAggregate.Event):
        by: int
        report: dict[str, Any]

    class Renamed(LibraryAggregate.Event):
        class_version = 2
        name: str

    def count(self, by: int, report: dict[str, Any]) -> None:
        self.trigger_event(self.Counted, by=by, report=report)

    def rename(self, name: str) -> None:
        self.trigger_event(self.Renamed, name=name)


def counter_events(reports: list[dict[str, Any]]) -> list[Any]:
    counter = Counter()
    for i, report in enumerate(reports):
        counter.count(by=i, report=report)
    counter.rename(name="twice")
    return counter.collect_events()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=8).filter(lambda k: k not in ("_type_", "_data_")), json_values, max_size=4), max_size=4))
def test_lean_and_library_mappers_agree_on_any_json_payload(reports: list[dict[str, Any]]) -> None:
    events = counter_events(reports)
    lean, library = LeanMapper(transcoder=MsgspecTranscoder()), Mapper(transcoder=MsgspecTranscoder())
    for event in events:
        before = dict(vars(event))
        assert lean.to_stored_event(event) == library.to_stored_event(event)
        assert vars(event) == before  # the event itself is left as it was
    assert b'"class_version":2' in lean.to_stored_event(events[-1]).state


def test_a_payload_the_library_would_change_is_refused_by_the_lean_mapper_too() -> None:
    event = counter_events([{"since": NOW}])[1]
    with pytest.raises(EventPayloadError):
        LeanMapper(transcoder=MsgspecTranscoder()).to_stored_event(event)


@pytest.mark.parametrize("transcoder", [JSONTranscoder, MsgspecTranscoder])
def test_with_a_compressor_or_another_transcoder_the_library_path_is_taken(transcoder: type) -> None:
    def make(cls: type[Mapper[Any]], compressed: bool) -> Mapper[Any]:
        coder = transcoder()
        if isinstance(coder, JSONTranscoder):
            coder.register(DatetimeAsISO())
        return cls(transcoder=coder, compressor=Zlib() if compressed else None)

    for event in counter_events([{"a": [1, 2.5]}]):
        for compressed in (False, True):
            assert make(LeanMapper, compressed).to_stored_event(event) == make(Mapper, compressed).to_stored_event(event)


class Zlib:
    def compress(self, data: bytes) -> bytes:
        return zlib.compress(data)

    def decompress(self, data: bytes) -> bytes:
        return zlib.decompress(data)


def test_the_lean_event_store_records_and_answers_what_the_librarys_does() -> None:
    events = counter_events([{"a": 1}, {"b": [True, None]}, {}])
    lean = LeanEventStore(LeanMapper(transcoder=MsgspecTranscoder()), POPOApplicationRecorder())
    library = LibraryEventStore(Mapper(transcoder=MsgspecTranscoder()), POPOApplicationRecorder())
    ours, theirs = lean.put(events), library.put(events)
    assert ours == theirs and [vars(r.notification) for r in ours] == [vars(r.notification) for r in theirs]
    assert all(type(r) is Recording and type(r.notification) is Notification for r in ours)
    assert [r.notification.id for r in ours] == [1, 2, 3, 4, 5]
    assert ours[0].domain_event is events[0] and ours[0].notification.topic == get_topic(Counter.Created)
    stored = list(lean.recorder.select_notifications(start=1, limit=10))
    assert stored == list(library.recorder.select_notifications(start=1, limit=10))
    with pytest.raises(IntegrityError):
        lean.put(events[:1])
    assert lean.put([]) == library.put([]) == []
