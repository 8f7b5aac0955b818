"""The watch command's pieces: the SSE parser and applying live events to session state."""

from __future__ import annotations

import msgspec

from workers.live_watch import SseEvent, SseParser, apply_event


def item(name: str, agent_id: str = "planner", **fields: str) -> dict:
    return {
        "event_id": "1", "run_id": "r", "agent_id": agent_id, "session_id": "", "event_kind": "",
        "event_name": name, "route": "", "tool_name": "", "summary": "", "pixel_state": "",
        "target_agent_id": "", "thread_id": "", "task_card_id": "", "created_at": "", **fields,
    }


def state() -> dict:
    session = {
        "agent_id": "planner", "role_key": "role_planner", "agent_nickname": "nick", "session_id": "s",
        "llm_session_id": "", "live_status": "ready", "current_step": "session_warming",
        "blocker_code": "", "tool_call_count": 0,
    }
    return {"run_id": "r", "status": "ready", "sessions": [session]}


def test_parser_splits_events_and_comments_across_chunk_boundaries() -> None:
    parser = SseParser()
    data = msgspec.json.encode({"event_id": "5"}).decode()
    stream = f"retry: 2000\n: subscribed\n\nid: 5\nevent: tool\ndata: {data}\n\n: heartbeat\n\n".encode()
    out = []
    for n in range(0, len(stream), 7):
        out.extend(parser.feed(stream[n : n + 7]))
    assert out == ["subscribed", SseEvent(id="5", event="tool", data=data), "heartbeat"]


def test_events_move_the_run_and_its_sessions() -> None:
    s = state()
    assert apply_event(s, item("execution_requested", agent_id=""))
    assert s["status"] == "scheduled"
    assert apply_event(s, item("execution_started", agent_id=""))
    assert apply_event(s, item("process_started"))
    assert s["sessions"][0]["live_status"] == "waiting_first_tool"
    assert apply_event(s, item("tool_called", tool_name="grep", summary="grep (first tool): look"))
    assert s["sessions"][0]["live_status"] == "working" and s["sessions"][0]["tool_call_count"] == 1
    assert apply_event(s, item("blocked", summary="sandbox_missing: gone"))
    assert s["status"] == "blocked" and s["sessions"][0]["blocker_code"] == "sandbox_missing"
    assert apply_event(s, item("stopped"))
    assert s["status"] == "running" and s["sessions"][0]["blocker_code"] == ""
    assert apply_event(s, item("cleaned_up", agent_id=""))
    assert s["status"] == "cleaned_up"


def test_events_the_item_cannot_express_ask_for_a_fresh_state() -> None:
    s = state()
    assert not apply_event(s, item("opened", agent_id="tester"))
    assert not apply_event(s, item("tool_called", agent_id="tester"))
    assert not apply_event(s, item("unblocked"))
