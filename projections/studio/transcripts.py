"""Transcripts read model: each agent session's stream, entry by entry, for its page.

One row per session event worth reading (partition ``transcript/<tenant>/<run_id>/<agent_id>``,
sorted by log position): assistant messages, tool calls with what they were called with,
failed calls with their reason, each call with its result as the event kept it (its first
bytes, whole size, whether cut), handoffs with their target, messages delivered to the
agent (comments, replies), blockers, runner output, the process's start and end. The
session's head row (``transcript/<tenant>/<run_id>/<agent_id>``) holds what its metrics line
shows beside the counts of its entries: the model, and the cost, duration and turns the CLI
reported when the session ended; it is written only when that changes, so an event costs
the projector one row. Texts are kept whole: the page folds the long ones.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from typing import Any

from domain.studio import events as ev
from projections.engine.docs import Docs, Projector, decode, handles
from projections.engine.envelope import Envelope
from projections.engine.store import DocStore

NAME = "transcripts"


def transcript_partition(tenant: str, run_id: str, agent_id: str) -> str:
    return f"transcript/{tenant}/{run_id}/{agent_id}"


def transcript_head_key(tenant: str, run_id: str, agent_id: str) -> str:
    return f"transcript/{tenant}/{run_id}/{agent_id}"


def entry_key(tenant: str, run_id: str, agent_id: str, position: int) -> str:
    return f"{transcript_partition(tenant, run_id, agent_id)}/{position:012d}"


def _entry(kind: str, text: str = "", **fields: Any) -> dict[str, Any]:
    return {
        "kind": kind, "text": text, "tool_name": "", "input": "", "failed": False, "target_agent_id": "",
        "result": "", "result_size": 0, "result_truncated": False, **fields,
    }


def _result(e: ev.ToolCalled | ev.ToolCallFailed) -> dict[str, Any]:
    """What the call answered, as its event kept it (its first bytes, whole size, whether cut)."""
    return {"result": e.result, "result_size": e.result_size, "result_truncated": e.result_truncated}


METRIC_FIELDS = ("total_cost_usd", "duration_ms", "num_turns")
COUNTED = {"entries": None, "messages": "message", "tool_calls": "tool", "handoffs": "handoff"}


def new_head(env: Envelope) -> dict[str, Any]:
    return {"run_id": env.run_id, "agent_id": env.agent_id, "session_id": env.session_id, "model": "", "result": {}, "position": 0}


def _session_event(make: Callable[[dict[str, Any], Any], dict[str, Any] | None]) -> Callable[..., None]:
    """The handler of a session event: ``make(head, e)`` answers the event's entry (or None:
    the event is no entry) and may change what the head shows of it. The head is stored only
    when it changes (an entry is a row of its own, written once): most events write one row."""

    @functools.wraps(make)
    def handler(self: TranscriptsProjector, e: Any, env: Envelope, docs: Docs) -> None:
        if not env.agent_id or not env.run_id:
            return
        tenant, run_id, agent_id = env.tenant, env.run_id, env.agent_id
        key = transcript_head_key(tenant, run_id, agent_id)
        stored = docs.get(key)
        head = dict(stored) if stored is not None else new_head(env)
        entry = make(head, e)
        if entry is not None:
            entry |= {"position": env.position, "at": env.at}
            partition = transcript_partition(tenant, run_id, agent_id)
            docs.put(entry_key(tenant, run_id, agent_id, env.position), entry, partition=partition, sort_key=f"{env.position:012d}")
        head["session_id"] = env.session_id or head["session_id"]
        if head != stored:
            head["position"] = env.position
            docs.put(key, head)

    return handler


def read_transcript(store: DocStore, tenant: str, run_id: str, agent_id: str, limit: int) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """The session's head and its first ``limit`` entries, oldest first (None: no session).
    The head's metrics count the entries; its ``position`` is the newest event the page
    shows (its live channel resumes after it)."""
    raw = store.get(NAME, transcript_head_key(tenant, run_id, agent_id))
    if raw is None:
        return None
    head = decode(raw)
    entries = [decode(row.body) for row in store.scan(NAME, partition=transcript_partition(tenant, run_id, agent_id), limit=limit)]
    kinds = Counter(entry["kind"] for entry in entries)
    head |= {metric: len(entries) if kind is None else kinds[kind] for metric, kind in COUNTED.items()}
    head["failed_calls"] = sum(entry["kind"] == "tool" and entry["failed"] for entry in entries)
    head["position"] = max(head["position"], entries[-1]["position"] if entries else 0)
    return head, entries


def _no_entry(head: dict[str, Any], e: Any) -> None:
    """The event is no entry of the transcript."""


class TranscriptsProjector(Projector):
    name = NAME

    # -- events that are an entry -----------------------------------------------------------

    @handles(ev.AssistantMessage)
    @_session_event
    def assistant_message(head: dict[str, Any], e: ev.AssistantMessage) -> dict[str, Any] | None:
        return _entry("message", e.text)

    @handles(ev.ToolCalled)
    @_session_event
    def tool_called(head: dict[str, Any], e: ev.ToolCalled) -> dict[str, Any] | None:
        return _entry("tool", e.summary, tool_name=e.tool_name, input=e.route, **_result(e))

    @handles(ev.ToolCallFailed)
    @_session_event
    def tool_call_failed(head: dict[str, Any], e: ev.ToolCallFailed) -> dict[str, Any] | None:
        return _entry("tool", e.reason, tool_name=e.tool_name, input=e.summary, failed=True, **_result(e))

    @handles(ev.ControllerActionObserved)
    @_session_event
    def controller_action_observed(head: dict[str, Any], e: ev.ControllerActionObserved) -> dict[str, Any] | None:
        return _entry("controller", e.summary, tool_name=e.action, input=e.evidence_label)

    @handles(ev.HandedOff)
    @_session_event
    def handed_off(head: dict[str, Any], e: ev.HandedOff) -> dict[str, Any] | None:
        return _entry("handoff", e.reason, target_agent_id=e.target_agent_id)

    @handles(ev.MessageDelivered)
    @_session_event
    def message_delivered(head: dict[str, Any], e: ev.MessageDelivered) -> dict[str, Any] | None:
        return _entry("mailbox", e.message, input=f"{e.channel} from {e.actor}")

    @handles(ev.Blocked)
    @_session_event
    def blocked(head: dict[str, Any], e: ev.Blocked) -> dict[str, Any] | None:
        return _entry("blocker", f"{e.code}: {e.message}", failed=True)

    @handles(ev.Unblocked)
    @_session_event
    def unblocked(head: dict[str, Any], e: ev.Unblocked) -> dict[str, Any] | None:
        return _entry("blocker", f"{e.code} cleared: {e.resolution}")

    @handles(ev.RunnerOutput)
    @_session_event
    def runner_output(head: dict[str, Any], e: ev.RunnerOutput) -> dict[str, Any] | None:
        return _entry("output", e.text, input=f"{e.stream} {e.level}", failed=e.level == "error")

    @handles(ev.PullRequestOpened)
    @_session_event
    def pull_request_opened(head: dict[str, Any], e: ev.PullRequestOpened) -> dict[str, Any] | None:
        return _entry("delivery", f"pull request #{e.page_number} on {e.repository_key}")

    @handles(ev.StartFailed)
    @_session_event
    def start_failed(head: dict[str, Any], e: ev.StartFailed) -> dict[str, Any] | None:
        return _entry("session", f"start failed: {e.error}", failed=True)

    @handles(ev.Stopped)
    @_session_event
    def stopped(head: dict[str, Any], e: ev.Stopped) -> dict[str, Any] | None:
        return _entry("session", f"stopped: {e.reason}")

    @handles(ev.ProcessStarted)
    @_session_event
    def process_started(head: dict[str, Any], e: ev.ProcessStarted) -> dict[str, Any] | None:
        if e.model_ran:
            head["model"] = e.model_ran
        return _entry("session", f"process started (attempt {e.attempt})")

    @handles(ev.ModelReported)
    @_session_event
    def model_reported(head: dict[str, Any], e: ev.ModelReported) -> dict[str, Any] | None:
        head["model"] = e.model
        return _entry("session", f"model {e.model}")

    @handles(ev.SessionCompleted)
    @_session_event
    def session_completed(head: dict[str, Any], e: ev.SessionCompleted) -> dict[str, Any] | None:
        result = e.result or {}
        head["result"] = {k: result.get(k) for k in METRIC_FIELDS if result.get(k) is not None}
        return _entry("session", str(result.get("result", "session completed")))

    # -- events that are no entry (the head moves to their position) ------------------------
    session_opened = handles(ev.SessionOpened)(_session_event(_no_entry))
    control_applied = handles(ev.ControlApplied)(_session_event(_no_entry))
    paused = handles(ev.Paused)(_session_event(_no_entry))
    request_queued = handles(ev.RequestQueued)(_session_event(_no_entry))
    resumed = handles(ev.Resumed)(_session_event(_no_entry))
    process_restarted = handles(ev.ProcessRestarted)(_session_event(_no_entry))
    self_healed = handles(ev.SelfHealed)(_session_event(_no_entry))
    workspace_restarted = handles(ev.WorkspaceRestarted)(_session_event(_no_entry))
    process_switched = handles(ev.ProcessSwitched)(_session_event(_no_entry))
    task_card_changed = handles(ev.TaskCardChanged)(_session_event(_no_entry))
