"""Live channel names (C9) and the published form of a live event."""

from __future__ import annotations

import msgspec

from api.live.hub import sse_frame
from projections.engine.envelope import Envelope
from projections.studio.live_channel import live_message, parse_topic, subject_for, topic_for
from tests.events import envelope_of


def env(position: int, originator: str, kind: str, data: dict | None = None) -> Envelope:
    return envelope_of(position, originator, kind, "2026-01-02T03:04:05.000006Z", **(data or {}))


def test_topic_is_the_colon_form_and_the_subject_the_dotted_one() -> None:
    assert topic_for("acme", "run-1") == "portal_live_events:tenant:acme:run:run-1"
    assert parse_topic("portal_live_events:tenant:acme:run:run-1") == ("acme", "run-1")
    assert subject_for("portal_live_events", "acme", "run-1") == "portal_live_events.tenant.acme.run.run-1"


def test_malformed_topics_do_not_parse() -> None:
    for bad in (
        "",
        "portal_live_events:tenant:acme",
        "portal_live_events:tenant:acme:run:",
        "portal_live_events:tenant:ac.me:run:run-1",
        "portal_live_events:tenant:acme:run:run-1:extra",
        "other:tenant:acme:run:run-1",
        "portal_live_events.tenant.acme.run.run-1",
        "portal_live_events:tenant:acme:run:run 1",
    ):
        assert parse_topic(bad) is None, bad


def test_a_session_event_is_published_on_its_run_subject_with_its_event_id() -> None:
    message = live_message(
        env(42, "ses:acme:run-1:ses-9:planner", "AgentSession.ToolCalled", {"tool_name": "grep", "summary": "look"}),
        "pfx",
    )
    assert message is not None
    assert message.event_id == 42 and message.subject == "pfx.tenant.acme.run.run-1"
    item = msgspec.json.decode(message.data)
    assert item["event_id"] == "42" and item["run_id"] == "run-1" and item["agent_id"] == "planner"
    assert item["event_kind"] == "tool" and item["event_name"] == "tool_called"
    assert set(item) >= {
        "event_kind", "event_name", "route", "tool_name", "summary", "pixel_state",
        "target_agent_id", "thread_id", "task_card_id", "created_at",
    }


def test_ticks_and_project_events_are_not_published() -> None:
    assert live_message(env(1, "run:acme:run-1", "Run.TickRecorded", {"tick": 1}), "pfx") is None
    assert live_message(env(2, "prj:acme:shop", "Project.Created"), "pfx") is None


def test_sse_frame_carries_id_kind_and_the_json_item() -> None:
    message = live_message(env(7, "run:acme:run-1", "Run.Launched", {"template_id": "t", "project_slug": "s"}), "p")
    assert message is not None
    frame = sse_frame(message.event_id, message.data)
    lines = frame.decode().split("\n")
    assert lines[0] == "id: 7" and lines[1] == "event: run"
    assert msgspec.json.decode(lines[2].removeprefix("data: "))["event_id"] == "7"
    assert frame.endswith(b"\n\n")


def test_a_gate_step_is_published_on_the_studio_run_it_names_and_only_then() -> None:
    from domain.gate.thread import own_run_id

    check = {"attempt": 1, "check_run_id": 3, "name": "squadops-gate/scope", "conclusion": "failure", "summary": "assembly only"}
    message = live_message(env(9, "gth:acme:run-1", "GateThread.CheckRunRecorded", {**check, "run_id": "run-1"}), "pfx")
    assert message is not None and (message.event_id, message.subject) == (9, "pfx.tenant.acme.run.run-1")
    item = msgspec.json.decode(message.data)
    assert (item["event_id"], item["run_id"], item["agent_id"], item["event_kind"]) == ("9", "run-1", "", "gate")
    assert item["event_name"] == "check_run_recorded" and "squadops-gate/scope: failure" in item["summary"]
    # Stored before the steps named their run, the thread's opening, a thread of no studio run.
    assert live_message(env(10, "gth:acme:run-1", "GateThread.CheckRunRecorded", check), "pfx") is None
    assert live_message(env(11, "gth:acme:run-1", "GateThread.Opened", {"tenant": "acme", "thread_key": "run-1"}), "pfx") is None
    lonely = {**check, "run_id": own_run_id("acme", "lonely")}
    assert live_message(env(12, "gth:acme:lonely", "GateThread.CheckRunRecorded", lonely), "pfx") is None
