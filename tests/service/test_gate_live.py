"""The gate's steps reach the studio run they publish for: as live events on the run's live
topic (published by the fan-out in log order, once, event id = log position) and as log-dock
lines of source ``gate``; the stored feed follows, a rebuild gives the same bytes and
re-publishes nothing. A thread tied to no studio run shows nowhere; a step stored before
the steps named their run reads as it did."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from api.studio.feed import FeedReads
from domain.gate import events as gate
from domain.gate.commands import GateRequest
from domain.gate.thread import own_run_id, thread_key_id
from projections.engine.rebuild import rebuild
from projections.engine.runner import NotificationSource
from projections.studio.feed import MAX_LIMIT
from projections.studio.live_channel import LiveMessage
from projections.studio.log_dock import live_event, live_run_id
from projections.studio.time_travel import EventSelector, TimeTravel
from tests.helpers import DEMO_LIKE
from tests.jobs_support import service
from workers.bootstrap import Container, read_projectors

TENANT = "default"
STEPS = [
    "run_started", "publication_planned", "branch_committed", "pull_request_published",
    "check_run_recorded", "check_run_recorded", "check_run_recorded", "comment_posted",
    "evidence_recorded", "promotion_decided", "run_completed",
]


class RecordingBroker:
    """The broker port, keeping what the fan-out publishes (acknowledged at once)."""

    on_reconnected = None

    def __init__(self) -> None:
        self.published: list[LiveMessage] = []

    async def publish(self, messages: Sequence[LiveMessage]) -> None:
        self.published.extend(messages)


def fan_out(container: Container, broker: RecordingBroker) -> None:
    async def drain() -> None:
        while await container.fanout.pass_once(broker):  # type: ignore[arg-type]
            pass

    asyncio.run(drain())


def project(container: Container) -> None:
    while container.runner.run_once():
        pass


def dumps(container: Container) -> dict[str, Any]:
    return {p.name: container.store.dump(p.name) for p in read_projectors()}


def feed(container: Container, run_id: str) -> dict[str, Any]:
    reads = FeedReads(container.store, TimeTravel(EventSelector(container.event_store)), container.event_store.max_position)
    return msgspec.json.decode(reads.feed(TENANT, "acme", run_id, MAX_LIMIT))


def steps_of(container: Container, thread_key: str) -> list[int]:
    """Positions of the thread's stored steps (its opening is no step)."""
    envs = NotificationSource(container.event_store).read(1, 100_000)
    thread_id = thread_key_id(TENANT, thread_key)
    return [e.position for e in envs if e.originator_id == thread_id and e.kind != "GateThread.Opened"]


def test_a_gate_run_for_a_studio_run_is_live_on_its_topic_and_in_its_log_dock(database_url: str, tmp_path: Path) -> None:
    with service(database_url, tmp_path, projection_page_size=4) as container:
        container.projects.create_project(tenant=TENANT, request=DEMO_LIKE, created_by="op@example.com")
        run, _ = container.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug="acme", launched_by="op")
        broker = RecordingBroker()
        fan_out(container, broker)
        project(container)
        before = feed(container, run.run_id)
        assert before["delivery"]["status"] == "none"

        record = container.gate.run_thread(GateRequest(tenant=TENANT, thread_key=run.run_id, actor="op", agent_key="backend"))
        lonely = container.gate.run_thread(GateRequest(tenant=TENANT, thread_key="lonely-thread", actor="op", dry_run=True))
        assert record["status"] == "published" and lonely["run_id"] == own_run_id(TENANT, "lonely-thread")
        tied = steps_of(container, run.run_id)
        assert len(tied) == len(STEPS) and steps_of(container, "lonely-thread")

        published_before = len(broker.published)
        fan_out(container, broker)
        fresh = broker.published[published_before:]
        # Every step of the tied gate run, on the run's topic, in log order, id = position.
        assert [m.event_id for m in fresh] == tied
        assert all(m.seq == m.event_id for m in fresh)
        assert {m.subject for m in fresh} == {f"{container.settings.live_subject_prefix}.tenant.{TENANT}.run.{run.run_id}"}
        items = [json.loads(m.data) for m in fresh]
        assert [i["event_name"] for i in items] == STEPS
        assert {(i["event_kind"], i["run_id"], i["agent_id"]) for i in items} == {("gate", run.run_id, "")}
        assert [i["event_id"] for i in items] == [str(p) for p in tied]
        # The published pull request by its repository and head, not its address on the VCS host (it goes nowhere).
        assert record["publication"]["head_sha"][:12] in items[3]["summary"]
        assert not [i["summary"] for i in items if record["pr_url"] in i["summary"] or "vcs.squadops.local" in i["summary"]]
        # The lonely thread published for no studio run: nothing of it went out.
        assert not any(own_run_id(TENANT, "lonely-thread") in m.subject for m in broker.published)
        fan_out(container, broker)
        assert len(broker.published) == published_before + len(tied)  # once: nothing again

        project(container)
        shown = feed(container, run.run_id)
        assert shown["delivery"]["status"] == "delivered" and shown["delivery"]["pr_url"] == record["pr_url"]
        gate_live = [e for e in shown["live_events"] if e["event_kind"] == "gate"]
        assert [e["event_id"] for e in gate_live] == [str(p) for p in reversed(tied)]  # newest first
        assert gate_live == list(reversed(items))  # the dock and the channel say the same
        lines = [entry for entry in shown["runtime_logs"] if entry["source"] == "gate"]
        assert [entry["event_id"] for entry in lines] == [str(p) for p in reversed(tied)]
        assert {entry["level"] for entry in lines} == {"info"}  # every check passed, promoted
        assert any(record["publication"]["head_sha"][:12] in entry["message"] for entry in lines)
        assert not [entry for entry in lines if "vcs.squadops.local" in entry["message"]]
        assert shown["event_count"] == before["event_count"] + len(tied)
        position = container.event_store.max_position()
        reads = FeedReads(container.store, TimeTravel(EventSelector(container.event_store)), container.event_store.max_position)
        past, _ = reads.feed_at(TENANT, "acme", run.run_id, MAX_LIMIT, position=position)
        assert msgspec.json.decode(past) == shown  # time travel folds the same gate steps

        live = dumps(container)
        rebuild(container.store, NotificationSource(container.event_store), read_projectors(), page_size=3)
        assert dumps(container) == live
        fan_out(container, broker)
        assert len(broker.published) == published_before + len(tied)  # a rebuild re-fires nothing


def test_a_failed_gate_step_is_an_error_line_of_the_run(sqlite_url: str, tmp_path: Path) -> None:
    with service(sqlite_url, tmp_path) as container:
        container.projects.create_project(tenant=TENANT, request=DEMO_LIKE, created_by="op@example.com")
        run, _ = container.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug="acme", launched_by="op")
        thread = container.gate._apply(TENANT, run.run_id, lambda t: t.start_run(
            run_id=run.run_id, project_slug="acme", repo="acme/api", repository_key="backend", repository_type="delivery",
            agent_key="backend", engine_key="e", runner_kind="local_git", scenario_key="", proposal_id="", proposal_key="",
            notes="", publish=True, dry_run=False, actor="op", transport_actor="gate", pr_submission_policy="",
            pr_submission_pipeline="", pr_submission_actor_agent_key="", at="2026-01-01T00:00:00Z",
        ))[0]
        container.gate._apply(TENANT, run.run_id, lambda t: t.fail(attempt=1, step="commit", error_message="disk full", at="2026-01-01T00:00:01Z"))
        assert thread.run_of(1) == run.run_id
        project(container)
        shown = feed(container, run.run_id)
        failed = next(e for e in shown["runtime_logs"] if e["source"] == "gate" and e["current_signal"] == "gate:failed")
        assert failed["level"] == "error" and "disk full" in failed["message"] and failed["warning"]
        assert shown["live_events"][0]["event_name"] == "run_failed"


def test_a_step_stored_before_steps_named_their_run_reads_as_it_did(tmp_path: Path) -> None:
    """An old PublicationPlanned (no ``run_id``) loads, folds the same record and belongs
    to no run: not a live event, no log line, as before."""
    db = tmp_path / "old.db"
    with service(f"sqlite:///{db}", tmp_path) as container:
        container.projects.create_project(tenant=TENANT, request=DEMO_LIKE, created_by="op@example.com")
        run, _ = container.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug="acme", launched_by="op")
        record = container.gate.run_thread(GateRequest(tenant=TENANT, thread_key=run.run_id, actor="op", dry_run=True))
    thread_id = thread_key_id(TENANT, run.run_id)
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT rowid, state FROM stored_events WHERE originator_id = ? AND topic LIKE '%PublicationPlanned'", (thread_id,)
        ).fetchall()
        assert len(rows) == 1
        state = json.loads(rows[0][1])
        assert state.pop("run_id") == run.run_id
        conn.execute("UPDATE stored_events SET state = ? WHERE rowid = ?", (json.dumps(state).encode(), rows[0][0]))
    with service(f"sqlite:///{db}", tmp_path) as container:
        thread = container.event_store.repository.get(thread_id)
        assert thread.record(1) == {**record, "context": thread.record(1)["context"]}
        env = next(e for e in NotificationSource(container.event_store).read(1, 1000) if e.kind.endswith("PublicationPlanned"))
        assert isinstance(env.event, gate.PublicationPlanned) and env.event.run_id == ""
        assert live_event(env) is None and live_run_id(env) == ""  # the log dock leaves it no line
        project(container)
        lines = [e["event_name"] for e in feed(container, run.run_id)["live_events"] if e["event_kind"] == "gate"]
        assert "publication_planned" not in lines and lines[-1] == "run_started"
