"""The library's mapper and event store, doing the same with less work an event.

A ticker pass saves hundreds of events in one save, and per event the library's
``Mapper`` copies the event's fields, the transcoder copies them again, and each
``StoredEvent``, ``Notification`` and ``Recording`` goes through a frozen dataclass
``__init__`` (one ``object.__setattr__`` a field): together several µs an event.

``LeanMapper`` makes the one copy and lets the transcoder finish it in place (when the
transcoder is this service's and there is neither compressor nor cipher; otherwise the
library's path). ``LeanEventStore`` fills the same frozen objects directly, and hands a
large save to a recorder that inserts while it maps (``insert_mapped``) when it has one. Same rows,
same bytes, same recordings (``tests/unit/test_lean_mapping.py`` checks them against the
library's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import (
    EventStore,
    Mapper,
    MapperDeserialisationError,
    Notification,
    Recording,
    StoredEvent,
)
from eventsourcing.utils import get_topic, resolve_topic

from workers.eventstore.transcoder import MsgspecTranscoder

_new = object.__new__
# A save of more events than this is streamed where the recorder can (a ticker pass is);
# a command's few events go in one statement.
STREAM_FROM = 64


def stored_event(originator_id: Any, originator_version: int, topic: str, state: bytes) -> StoredEvent:
    """A ``StoredEvent`` equal to the one its ``__init__`` makes."""
    stored = _new(StoredEvent)
    stored.__dict__.update(
        originator_id=originator_id, originator_version=originator_version, topic=topic, state=state
    )
    return stored


class LeanMapper(Mapper[Any]):
    """The library's mapper, with one copy of an event's fields on the way to bytes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        transcoder = self.transcoder
        self._encode_owned = (
            transcoder.encode_owned
            if type(transcoder) is MsgspecTranscoder and self.compressor is None and self.cipher is None
            else None
        )
        self._classes: dict[type, tuple[str, int]] = {}
        self._decode = transcoder.decode_stamped if self._encode_owned is not None else None
        self._topics: dict[str, tuple[type, int]] = {}

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        encode = self._encode_owned
        if encode is None:
            return super().to_stored_event(domain_event)
        cls = type(domain_event)
        known = self._classes.get(cls)
        if known is None:
            known = self._classes[cls] = (get_topic(cls), getattr(cls, "class_version", 1))
        topic, class_version = known
        state = dict(vars(domain_event))
        originator_id = state.pop("originator_id")
        originator_version = state.pop("originator_version")
        if class_version > 1:
            state["class_version"] = class_version
        return stored_event(originator_id, originator_version, topic, encode(state))

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        """The library's ``to_domain_event`` with the event's class looked up once per topic
        (ids are strings here: the library's id conversion is the identity)."""
        return self.to_domain_event_stamped(stored_event)[0]

    def to_domain_event_stamped(self, stored_event: StoredEvent) -> tuple[Any, str | None]:
        """``to_domain_event``, and its timestamp as stored (the transcoder's
        ``decode_stamped``): a reader that shows the time as text need not format it again."""
        decode = self._decode
        if decode is None or type(stored_event.originator_id) is not str:
            return super().to_domain_event(stored_event), None
        topic = stored_event.topic
        known = self._topics.get(topic)
        if known is None:
            cls = resolve_topic(topic)
            known = self._topics[topic] = (cls, getattr(cls, "class_version", 1))
        cls, class_version = known
        try:
            state, stamp = decode(stored_event.state)
        except Exception as e:
            msg = (
                f"Failed to deserialise state of stored event with topic '{topic}', originator_id "
                f"'{stored_event.originator_id}' and originator_version {stored_event.originator_version}: {e}"
            )
            raise MapperDeserialisationError(msg) from e
        state["originator_id"] = stored_event.originator_id
        state["originator_version"] = stored_event.originator_version
        from_version = state.pop("class_version", 1)
        while from_version < class_version:
            getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(state)
            from_version += 1
        domain_event = _new(cls)
        object.__setattr__(domain_event, "__dict__", state)
        return domain_event, stamp


class LeanEventStore(EventStore[Any]):
    """The library's event store, filling its frozen recordings directly."""

    def put(self, domain_events: Sequence[Any], **kwargs: Any) -> list[Recording[Any]]:
        streamed = getattr(self.recorder, "insert_mapped", None)
        if streamed is not None and len(domain_events) > STREAM_FROM:
            # mapped while the database inserts what was mapped before (workers/eventstore/recorder.py)
            stored_events, notification_ids = streamed(domain_events, self.mapper.to_stored_event, **kwargs)
        else:
            stored_events = list(map(self.mapper.to_stored_event, domain_events))
            notification_ids = self.recorder.insert_events(stored_events, **kwargs)
        if not notification_ids:
            return []
        assert len(notification_ids) == len(stored_events)
        recordings = []
        append = recordings.append
        for domain_event, stored, notification_id in zip(domain_events, stored_events, notification_ids, strict=True):
            notification = _new(Notification)
            notification.__dict__.update(stored.__dict__, id=notification_id)
            recording = _new(Recording)
            recording.__dict__.update(domain_event=domain_event, notification=notification)
            append(recording)
        return recordings


class LeanStores:
    """Mixed into a persistence factory: its event stores are ``LeanEventStore``s."""

    def event_store(self, mapper: Mapper[Any] | None = None, recorder: Any = None) -> EventStore[Any]:
        return LeanEventStore(
            mapper=mapper or self.mapper(),  # type: ignore[attr-defined]
            recorder=recorder or self.application_recorder(),  # type: ignore[attr-defined]
        )
