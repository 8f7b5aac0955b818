"""Pixel agents: the display state of a session, its tempo phase and progress bucket.

Pure rules over a session's facts (never the clock):
- ``blocked``: a wall stops the agent; ``resolved``: the session ended by a stop or clean-up;
- ``idle``: nothing to do yet, and the default display of a completed session;
- ``moving``: the last thing the agent did was a tool call (live tool progress);
- ``awaiting_reply``: it handed off or asked and waits for the answer;
- ``in_conversation``: a message thread is open with another agent or the operator;
- ``waiting``: started but not yet at work (first tool pending) or paused;
- ``active``: working otherwise.
"""

from __future__ import annotations

PIXEL_STATES = ("idle", "active", "in_conversation", "waiting", "awaiting_reply", "moving", "blocked", "resolved")
TEMPO_PHASES = ("waiting_first_tool", "prompt_dispatching", "agent_running", "delivery_evidence_seen", "terminal")
PROGRESS_BUCKETS = ("active", "waiting", "blocked", "moving", "idle", "completed")

# What a session did last, as the pixel reads it (``last_activity``).
ACTIVITIES = ("", "tool", "handoff", "message", "say", "controller")

_BUCKET = {
    "active": "active",
    "in_conversation": "active",
    "waiting": "waiting",
    "awaiting_reply": "waiting",
    "blocked": "blocked",
    "moving": "moving",
    "idle": "idle",
    "resolved": "completed",
}

# A blocked or paused session keeps the tempo of the state it was stopped in.
_INTERRUPTED = ("blocked", "paused")


def pixel_state(live_status: str, last_activity: str = "", in_thread: bool = False) -> str:
    """The pixel state of a session.

    ``last_activity`` is what the session did last: ``tool``, ``handoff``, ``message``
    (a message delivered to it), ``say`` (it spoke), ``controller`` or ``""``;
    ``in_thread`` is true while a message thread is open.
    """
    if live_status == "blocked":
        return "blocked"
    if live_status == "stopped":
        return "resolved"
    if live_status in ("session_completed", "ready"):
        return "idle"
    if live_status in ("waiting_first_tool", "paused"):
        return "waiting"
    if last_activity == "tool":
        return "moving"
    if last_activity == "handoff":
        return "awaiting_reply"
    if in_thread or last_activity == "message":
        return "in_conversation"
    return "active"


def tempo_phase(
    live_status: str,
    controller_actions: int = 0,
    delivery_evidence: bool = False,
    interrupted_from: str = "",
) -> str:
    """Where the session is in its tempo.

    ``controller_actions`` counts controller actions since the process started (a prompt
    being dispatched); ``delivery_evidence`` is true once the agent opened a pull request;
    ``interrupted_from`` is the status a blocked or paused session was in when stopped.
    """
    if live_status in ("session_completed", "stopped"):
        return "terminal"
    if live_status in _INTERRUPTED and interrupted_from and interrupted_from not in _INTERRUPTED:
        live_status = interrupted_from
    if live_status in ("ready", "waiting_first_tool"):
        return "prompt_dispatching" if controller_actions else "waiting_first_tool"
    if delivery_evidence:
        return "delivery_evidence_seen"
    return "agent_running"


def progress_bucket(pixel: str, live_status: str) -> str:
    """Each agent in exactly one bucket; a completed session counts as completed, not idle."""
    if live_status in ("session_completed", "stopped"):
        return "completed"
    return _BUCKET.get(pixel, "idle")
