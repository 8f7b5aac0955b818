"""The event store's msgspec transcoder round-trips every event and reads old ones."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from uuid import uuid4

import pytest
from eventsourcing.application import Application
from eventsourcing.persistence import JSONTranscoder, Mapper, Notification
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.shared.event_store import EventStore
from projections.engine.envelope import envelope, event_time, stored_time
from tests.helpers import DEMO_LIKE
from workers.bootstrap import Services, wire_services
from workers.eventstore.transcoder import EventPayloadError, MsgspecTranscoder
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
    app.projects.create_project(tenant="default", request=DEMO_LIKE, created_by="op@example.com")
    run, _ = app.studio.runs.launch_run(tenant="default", template_id="delivery-core", project_slug="acme", launched_by="op")
    app.studio.runs.request_execution(tenant="default", run_id=run.run_id, requested_by="op")
    plane = SimulatorPlane()
    app.studio.ticks.tick_runs(plane, start=[("default", run.run_id)])
    for _ in range(60):
        app.studio.ticks.tick_runs(plane, tick=[("default", run.run_id)])
    kinds = set()
    ticks = []
    for note in app.event_store.recorder.select_notifications(start=1, limit=100_000):
        event = app.event_store.mapper.to_domain_event(note)
        again = app.event_store.mapper.to_stored_event(event)
        assert again.state == note.state and again.topic == note.topic
        assert isinstance(event.timestamp, datetime)
        kinds.add(note.topic)
        if note.topic.endswith("Run.TickRecorded") and note.originator_id == run.id:
            ticks.append(event.tick)
    assert len(kinds) >= 10
    assert app.event_store.repository.get(run.id).tick == ticks[-1]


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


# -- what the transcoder refuses, and what it reads back exactly as the library does ----

LIBRARY = JSONTranscoder()
Application().register_transcodings(LIBRARY)
NOW = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)


class Shade(StrEnum):
    RED = "red"


class Name(str):
    pass


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=6))
def test_json_payloads_are_written_with_the_library_bytes_and_read_back_equal(payload: dict) -> None:
    payload = {key: value for key, value in payload.items() if key not in ("_type_", "_data_")}
    state = {"timestamp": NOW, **payload}
    ours = MsgspecTranscoder()
    data = ours.encode(state)
    assert data == LIBRARY.encode(state)
    assert ours.decode(data) == state == LIBRARY.decode(data)


@pytest.mark.parametrize("number", [1e16, -2.5e-7, 1e-5, 5e-324, 1.7976931348623157e308])
def test_floats_in_exponent_form_keep_the_library_bytes(number: float) -> None:
    state = {"top": number, "nested": {"list": [number, 0.5]}}
    assert MsgspecTranscoder().encode(state) == LIBRARY.encode(state)
    assert MsgspecTranscoder().decode(LIBRARY.encode(state)) == state


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("where", ["top", "dict", "list"])
def test_nan_and_infinity_are_refused_at_every_depth(number: float, where: str) -> None:
    payload = {"top": {"x": number}, "dict": {"a": {"b": number}}, "list": {"a": [1, [number]]}}[where]
    with pytest.raises(EventPayloadError, match="not a JSON number"):
        MsgspecTranscoder().encode({"timestamp": NOW, "report": payload})


@pytest.mark.parametrize(
    "value",
    [NOW, uuid4(), Decimal("1.10"), (1, 2), {1, 2}, frozenset(), b"raw", Shade.RED, Name("x"), 2j, object()],
    ids=lambda v: type(v).__name__,
)
def test_non_json_values_are_refused_at_every_depth_and_the_error_names_where(value: object) -> None:
    state = {"timestamp": NOW, "report": {"agents": [{"ok": True}, {"since": value}]}}
    with pytest.raises(EventPayloadError) as refused:
        MsgspecTranscoder().encode(state)
    assert refused.value.path == ("report", "agents", 1, "since")
    assert "['report']['agents'][1]['since']" in str(refused.value)
    assert isinstance(refused.value, TypeError)


def test_non_string_keys_and_the_library_type_tag_are_refused() -> None:
    ours = MsgspecTranscoder()
    with pytest.raises(EventPayloadError, match="not a string"):
        ours.encode({"counts": {1: "one"}})
    with pytest.raises(EventPayloadError, match="typed value"):
        ours.encode({"report": {"_type_": "uuid_hex", "_data_": uuid4().hex}})


@pytest.mark.parametrize("top", [[1, 2], ("a",), "text", 3, None], ids=repr)
def test_only_a_mapping_is_accepted_at_the_top(top: object) -> None:
    with pytest.raises(EventPayloadError, match="must be a mapping"):
        MsgspecTranscoder().encode(top)
    with pytest.raises(EventPayloadError, match="not a mapping"):
        MsgspecTranscoder().decode(LIBRARY.encode(top))


def test_the_callers_mapping_is_never_changed() -> None:
    state = {"timestamp": NOW, "big": 1e20, "nested": {"tiny": [1e-9]}}
    before = repr(state)
    MsgspecTranscoder().encode(state)
    assert repr(state) == before


def test_events_the_library_wrote_with_nan_read_back() -> None:
    state = {"timestamp": NOW, "score": math.nan, "report": {"limits": [math.inf, -math.inf]}}
    written = LIBRARY.encode(state)
    assert b"NaN" in written
    read = MsgspecTranscoder().decode(written)
    assert math.isnan(read["score"]) and read["report"]["limits"] == [math.inf, -math.inf]
    assert read["timestamp"] == NOW
    tick = LIBRARY.encode({"timestamp": NOW, "tick": 1, "at": "x", "report": {"score": math.nan}})
    note = Notification(id=7, originator_id="run:default:r1", originator_version=3, topic="domain.run:Run.TickRecorded", state=tick)
    seen = envelope(note, Mapper(transcoder=MsgspecTranscoder()))
    assert math.isnan(seen.event.report["score"]) and seen.at == "2026-01-02T03:04:05.000006Z"


def test_typed_values_the_library_wrote_read_back_as_the_library_reads_them() -> None:
    state = {"timestamp": NOW, "ids": [uuid4()], "price": {"amount": Decimal("1.10"), "at": NOW}}
    written = LIBRARY.encode(state)
    assert MsgspecTranscoder().decode(written) == LIBRARY.decode(written) == state
    unknown = b'{"timestamp":{"_type_":"datetime_iso","_data_":"2026-01-02T03:04:05+00:00"},"v":{"_type_":"money","_data_":1}}'
    with pytest.raises(TypeError, match="'money' is not deserializable"):
        MsgspecTranscoder().decode(unknown)


@settings(max_examples=300, deadline=None)
@given(
    moment=st.datetimes(timezones=st.sampled_from([UTC, None]) | st.timezones()),
    form=st.sampled_from(["isoformat", "microseconds", "space"]),
)
def test_an_events_time_read_off_its_stored_text_is_the_one_formatted_from_its_datetime(moment: datetime, form: str) -> None:
    text = {
        "isoformat": moment.isoformat(),
        "microseconds": moment.isoformat(timespec="microseconds"),
        "space": moment.isoformat(sep=" "),
    }[form]
    state, stamp = MsgspecTranscoder().decode_stamped(LIBRARY.encode({"timestamp": datetime.fromisoformat(text)}))
    assert stamp == datetime.fromisoformat(text).isoformat() and state["timestamp"] == datetime.fromisoformat(text)
    quick = stored_time(text)
    assert quick is None or quick == event_time(datetime.fromisoformat(text))
    if form == "microseconds" and moment.utcoffset() is not None and not moment.utcoffset():
        assert quick is not None  # the stored form: read off the text
