"""The transcripts read model: a session event costs the projector one row (its entry); the
head row is written only when what it shows changes, and the page's metrics count the
entries as the events recorded them."""

from __future__ import annotations

from pathlib import Path

from domain.shared.event_store import EventStore
from domain.shared.ids import session_key
from projections.engine.docs import MemoryDocs
from projections.engine.runner import NotificationSource
from projections.engine.store import SqliteDocStore
from projections.studio.transcripts import (
    TranscriptsProjector,
    read_transcript,
    transcript_head_key,
)
from tests.feed_scenarios import TENANT, launch
from tests.helpers import DEMO_LIKE
from workers.bootstrap import wire_services


def test_a_message_writes_its_entry_only_and_the_metrics_count_the_entries(tmp_path: Path) -> None:
    app = wire_services(EventStore({"PERSISTENCE_MODULE": "eventsourcing.popo"}))
    scenario = launch(app, DEMO_LIKE)
    agent_id, sid = next(iter(scenario.run().sessions.items()))
    session = app.event_store.repository.get(session_key(TENANT, scenario.run_id, sid, agent_id))
    projector, docs = TranscriptsProjector(), MemoryDocs()
    source = NotificationSource(app.event_store)
    for env in source.read(1, 1_000_000):
        if projector.wants(env):
            projector.apply(env, docs)
    docs.take_changes()
    head_key = transcript_head_key(TENANT, scenario.run_id, agent_id)
    assert docs.get(head_key) is not None

    start = app.event_store.max_position()
    for n in range(3):
        session.say(f"line {n}", app.clock())
    app.event_store.save(session)
    for env in source.read(start + 1, 1_000):
        projector.apply(env, docs)
    upserts, deletes = docs.take_changes()
    assert [row.key for row in upserts if row.key == head_key] == [] and not deletes
    assert len(upserts) == 3  # one entry per message, the head unchanged

    store = SqliteDocStore(tmp_path / "rm.db")
    store.ensure("transcripts")
    assert store.commit("transcripts", 0, app.event_store.max_position(), list(docs.rows()), [])
    head, entries = read_transcript(store, TENANT, scenario.run_id, agent_id, 100)  # type: ignore[misc]
    assert head["messages"] == sum(e["kind"] == "message" for e in entries) >= 3
    assert head["entries"] == len(entries) and head["position"] == entries[-1]["position"] == app.event_store.max_position()
    assert [e["text"] for e in entries[-3:]] == ["line 0", "line 1", "line 2"]
    assert read_transcript(store, TENANT, scenario.run_id, "nobody", 100) is None
    store.close()
