"""Transcripts read model: each agent session's stream, entry by entry, for its page.

One row per session event worth reading (partition ``transcript/<tenant>/<run_id>/<agent_id>``,
sorted by log position): assistant messages, tool calls with what they were called with,
failed calls with their reason, handoffs with their target, messages delivered to the
agent (comments, replies), blockers, runner output, the process's start and end. The
session's head row (``transcript/<tenant>/<run_id>/<agent_id>``) holds its metrics line:
counts as the events record them, and the cost, duration and turns the CLI reported when
the session ended. Texts are kept whole: the page folds the long ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain.studio import events as ev
from projections.engine.by_type import ByType
from projections.engine.docs import Docs, Projector
from projections.engine.envelope import Envelope


def transcript_partition(tenant: str, run_id: str, agent_id: str) -> str:
    return f"transcript/{tenant}/{run_id}/{agent_id}"


def transcript_head_key(tenant: str, run_id: str, agent_id: str) -> str:
    return f"transcript/{tenant}/{run_id}/{agent_id}"


def entry_key(tenant: str, run_id: str, agent_id: str, position: int) -> str:
    return f"{transcript_partition(tenant, run_id, agent_id)}/{position:012d}"


def _entry(kind: str, text: str = "", **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "text": text, "tool_name": "", "input": "", "failed": False, "target_agent_id": "", **fields}


# An entry by the event's class (``projections.engine.by_type``); events not named here are no entry.
ENTRIES: ByType[Callable[[Any], dict[str, Any]]] = ByType(
    {
        ev.AssistantMessage: lambda e: _entry("message", e.text),
        ev.ToolCalled: lambda e: _entry("tool", e.summary, tool_name=e.tool_name, input=e.route),
        ev.ToolCallFailed: lambda e: _entry("tool", e.reason, tool_name=e.tool_name, input=e.summary, failed=True),
        ev.ControllerActionObserved: lambda e: _entry("controller", e.summary, tool_name=e.action, input=e.evidence_label),
        ev.HandedOff: lambda e: _entry("handoff", e.reason, target_agent_id=e.target_agent_id),
        ev.MessageDelivered: lambda e: _entry("mailbox", e.message, input=f"{e.channel} from {e.actor}"),
        ev.Blocked: lambda e: _entry("blocker", f"{e.code}: {e.message}", failed=True),
        ev.Unblocked: lambda e: _entry("blocker", f"{e.code} cleared: {e.resolution}"),
        ev.RunnerOutput: lambda e: _entry("output", e.text, input=f"{e.stream} {e.level}", failed=e.level == "error"),
        ev.PullRequestOpened: lambda e: _entry("delivery", f"pull request #{e.pr_number} on {e.repository_key}"),
        ev.ProcessStarted: lambda e: _entry("session", f"process started (attempt {e.attempt})"),
        ev.StartFailed: lambda e: _entry("session", f"start failed: {e.error}", failed=True),
        ev.ModelReported: lambda e: _entry("session", f"model {e.model}"),
        ev.SessionCompleted: lambda e: _entry("session", str((e.result or {}).get("result", "session completed"))),
        ev.Stopped: lambda e: _entry("session", f"stopped: {e.reason}"),
    }
)
METRIC_FIELDS = ("total_cost_usd", "duration_ms", "num_turns")


def new_head(env: Envelope) -> dict[str, Any]:
    return {
        "run_id": env.run_id, "agent_id": env.agent_id, "session_id": env.session_id, "entries": 0,
        "messages": 0, "tool_calls": 0, "failed_calls": 0, "handoffs": 0, "model": "", "result": {}, "position": 0,
    }


class TranscriptsProjector(Projector):
    name = "transcripts"
    topics = frozenset(ev.kind_of(cls) for cls in ev.SESSION_EVENTS)

    def apply(self, env: Envelope, docs: Docs) -> None:
        if not env.agent_id or not env.run_id:
            return
        tenant, run_id, agent_id = env.tenant, env.run_id, env.agent_id
        key = transcript_head_key(tenant, run_id, agent_id)
        head = docs.get(key) or new_head(env)
        e = env.event
        make = ENTRIES.get(e)
        if make is not None:
            entry = make(e) | {"position": env.position, "at": env.at}
            partition = transcript_partition(tenant, run_id, agent_id)
            docs.put(entry_key(tenant, run_id, agent_id, env.position), entry, partition=partition, sort_key=f"{env.position:012d}")
            head["entries"] += 1
            head["messages"] += entry["kind"] == "message"
            head["tool_calls"] += entry["kind"] == "tool"
            head["failed_calls"] += entry["kind"] == "tool" and entry["failed"]
            head["handoffs"] += entry["kind"] == "handoff"
        if isinstance(e, ev.ModelReported):
            head["model"] = e.model
        elif isinstance(e, ev.ProcessStarted) and e.model_ran:
            head["model"] = e.model_ran
        elif isinstance(e, ev.SessionCompleted):
            head["result"] = {k: (e.result or {}).get(k) for k in METRIC_FIELDS if (e.result or {}).get(k) is not None}
        head["session_id"] = env.session_id or head["session_id"]
        head["position"] = env.position  # the page's live channel resumes after it
        docs.put(key, head)
