"""``squadops runs watch``: a run's session state, kept current from its live channel.

One session-state fetch gives the first picture; live events (SSE) update it, and each
state goes to a view (``workers.watch_view`` draws it as a table). An event
whose effect the live item cannot express (an agent joins, a pause, an unblock) fetches
the state once more. The stream resumes with ``Last-Event-ID`` after a dropped connection.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import msgspec

from projections.studio.live_channel import topic_for

LIVE_PATH = "/control-plane/studio/live"
ENDED = ("completed", "cleaned_up")
SUBSCRIBED = "subscribed"


class SseEvent(msgspec.Struct):
    id: str = ""
    event: str = ""
    data: str = ""

    def json(self) -> Any:
        return msgspec.json.decode(self.data)


class SseParser:
    """Server-Sent Events from byte chunks; comment lines (``: text``) come back as str."""

    def __init__(self) -> None:
        self._current = SseEvent()
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[SseEvent | str]:
        self._buffer += chunk
        out: list[SseEvent | str] = []
        while b"\n" in self._buffer:
            raw, self._buffer = self._buffer.split(b"\n", 1)
            line = raw.decode().rstrip("\r")
            if not line:
                if self._current.data or self._current.id:
                    out.append(self._current)
                self._current = SseEvent()
            elif line.startswith(":"):
                out.append(line[1:].strip())
            else:
                name, _, value = line.partition(":")
                if name in ("id", "event", "data"):
                    setattr(self._current, name, value[1:] if value.startswith(" ") else value)
        return out


def apply_event(state: dict[str, Any], item: dict[str, Any]) -> bool:
    """Applies one live event to a session-state document; False when a re-fetch is needed."""
    name, agent_id = item["event_name"], item["agent_id"]
    if not agent_id:  # run events
        if name in ENDED:
            state["status"] = name
        elif name == "execution_started":
            state["status"] = "running"
        elif name == "execution_requested" and state["status"] == "ready":
            state["status"] = "scheduled"
        return True
    if name == "handoff_recorded":
        return True  # the handing-off session reports it too
    session = next((s for s in state["sessions"] if s["agent_id"] == agent_id), None)
    if session is None or name in ("opened", "unblocked", "paused", "resumed", "process_restarted"):
        return False
    if name == "process_started":
        session.update(live_status="waiting_first_tool", current_step="waiting_first_tool")
    elif name == "tool_called":
        session["tool_call_count"] += 1
        session["current_step"] = f"tool:{item['tool_name']}"
        if "(first tool)" in item["summary"]:
            session["live_status"] = "working"
    elif name == "blocked":
        code = item["summary"].partition(":")[0]
        session.update(live_status="blocked", blocker_code=code, current_step=f"blocked:{code}")
    elif name == "handed_off":
        session["current_step"] = f"handoff:{item['target_agent_id']}"
    elif name == "pull_request_opened":
        session["current_step"] = "pull_request_opened"
    elif name == "completed":
        session.update(live_status="session_completed", current_step="session_completed")
    elif name == "stopped":
        session.update(live_status="stopped", current_step="stopped", blocker_code="")
    if state["status"] in ("running", "blocked"):
        blocked = any(s["live_status"] == "blocked" for s in state["sessions"])
        state["status"] = "blocked" if blocked else "running"
    return True


def watch_live(
    http: httpx.Client,
    run_id: str,
    show: Callable[[dict[str, Any]], object],
    *,
    tenant: str = "default",
    retry_seconds: float = 1.0,
) -> int:
    """Hands the run's state to ``show`` whenever it may have changed, until the run ends."""
    state_path = f"/v1/admin/studio/runs/{run_id}/session-state"

    def fetch() -> dict[str, Any]:
        answer = http.get(state_path)
        if answer.status_code >= 400:
            raise SystemExit(f"error {answer.status_code}: {answer.text}")
        return answer.json()

    state: dict[str, Any] | None = None
    last_id = ""

    def redraw() -> bool:
        """Shows the state (the run's last picture once it ended); answers whether it ended."""
        nonlocal state
        assert state is not None
        if state["status"] in ENDED:
            state = final(state)
        show(state)
        return state["status"] in ENDED

    def final(ended: dict[str, Any]) -> dict[str, Any]:
        """The run ended: its last picture from the read model, once that has caught up."""
        for _ in range(50):
            fetched = fetch()
            if fetched["status"] in ENDED:
                return fetched
            time.sleep(0.05)
        return ended

    while True:
        headers = {"Last-Event-ID": last_id} if last_id else {}
        try:
            with http.stream(
                "GET", LIVE_PATH, params={"topic": topic_for(tenant, run_id)}, headers=headers,
                timeout=httpx.Timeout(30.0, read=120.0),
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    raise SystemExit(f"error {response.status_code}: {response.text}")
                parser = SseParser()
                for chunk in response.iter_raw():
                    for item in parser.feed(chunk):
                        if item == SUBSCRIBED and (state is None or not last_id):
                            state = fetch()  # subscribed first, so nothing after it is missed
                            if redraw():
                                return 0
                        elif isinstance(item, SseEvent) and state is not None:
                            last_id = item.id or last_id
                            if not apply_event(state, msgspec.json.decode(item.data)):
                                state = fetch()
                            if redraw():
                                return 0
        except httpx.TransportError:
            time.sleep(retry_seconds)  # resume after the last event seen
