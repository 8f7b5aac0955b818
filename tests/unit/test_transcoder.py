"""The event store's msgspec transcoder round-trips every event and reads old ones."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest
from eventsourcing.application import Application
from eventsourcing.persistence import JSONTranscoder

from domain.shared.event_store import EventStore
from tests.unit.test_simulator import PROJECT
from workers.bootstrap import Services, wire_services
from workers.eventstore.transcoder import MsgspecTranscoder
from workers.planes.simulator import SimulatorPlane


def memory_app(transcoder: str) -> Services:
    return wire_services(
        EventStore(
            {
                "PERSISTENCE_MODULE": "eventsourcing.sqlite",
                "SQLITE_DBNAME": ":memory:",
                "ORIGINATOR_ID_TYPE": "text",
                "TRANSCODER_TOPIC": transcoder,
            }
        )
    )


def test_every_event_of_a_simulated_run_round_trips() -> None:
    app = memory_app("workers.eventstore.transcoder:MsgspecTranscoder")
    app.projects.create_project(tenant="default", request=PROJECT, created_by="op@example.com")
    run, _ = app.studio.runs.launch_run(tenant="default", template_id="delivery-core", project_slug="acme", launched_by="op")
    app.studio.runs.request_execution(tenant="default", run_id=run.run_id, requested_by="op")
    plane = SimulatorPlane()
    app.studio.ticks.tick_runs(plane, start=[("default", run.run_id)])
    for _ in range(60):
        app.studio.ticks.tick_runs(plane, tick=[("default", run.run_id)])
    kinds = set()
    ticks = 0
    for note in app.event_store.recorder.select_notifications(start=1, limit=100_000):
        event = app.event_store.mapper.to_domain_event(note)
        again = app.event_store.mapper.to_stored_event(event)
        assert again.state == note.state and again.topic == note.topic
        assert isinstance(event.timestamp, datetime)
        kinds.add(note.topic)
        ticks += note.topic.endswith("Run.TickRecorded") and note.originator_id == run.id
    assert len(kinds) >= 10
    assert app.event_store.repository.get(run.id).tick == ticks


def test_events_written_by_the_library_transcoder_read_the_same() -> None:
    library = JSONTranscoder()
    Application().register_transcodings(library)
    state = {"timestamp": datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC), "run_id": "run-1", "report": {"n": [1, 2.5]}}
    ours = MsgspecTranscoder()
    assert ours.decode(library.encode(state)) == state
    assert library.decode(ours.encode(state)) == state


@pytest.mark.parametrize("value", [uuid4(), datetime.now(UTC), b"raw", {1, 2}])
def test_non_json_payloads_are_refused(value: object) -> None:
    with pytest.raises(TypeError):
        MsgspecTranscoder().encode({"timestamp": datetime.now(UTC), "field": value})
