"""The session state machine, written once: a session's status after one of its events.

``after(state, event)`` is pure. The AgentSession aggregate applies it in every ``@event``
method, and every read model that shows a session's status folds its stored events
through it, so they agree with the aggregate by construction
(``tests/unit/test_session_state_property.py`` checks it over generated histories).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

from domain.shared.base import Aggregate
from domain.studio import events as ev

READY = "ready"
WAITING_FIRST_TOOL = "waiting_first_tool"
WORKING = "working"
BLOCKED = "blocked"
PAUSED = "paused"
COMPLETED = "session_completed"
STOPPED = "stopped"
TERMINAL = frozenset({COMPLETED, STOPPED})
LIVE_STATUSES = (READY, WAITING_FIRST_TOOL, WORKING, BLOCKED, PAUSED, COMPLETED, STOPPED)


class SessionState(NamedTuple):
    """What every reader of a session's status shows."""

    live_status: str = READY
    current_step: str = "session_warming"
    blocker_code: str = ""


OPENED = SessionState()

# One step per event class that moves a session (an event of any other class leaves it as it
# is); a step reads the event's fields as attributes.
_STEPS: dict[type, Callable[[SessionState, Any], SessionState]] = (
    {
        ev.SessionOpened: lambda state, e: OPENED,
        ev.ProcessStarted: lambda state, e: SessionState(WAITING_FIRST_TOOL, "waiting_first_tool", state[2]),
        ev.ToolCalled: lambda state, e: SessionState(
            WORKING if e.first else state[0], f"tool:{e.tool_name}", state[2]
        ),
        ev.Blocked: lambda state, e: SessionState(BLOCKED, f"blocked:{e.code}", e.code),
        ev.Unblocked: lambda state, e: SessionState(e.resume_status, e.resume_status, ""),
        ev.HandedOff: lambda state, e: SessionState(state[0], f"handoff:{e.target_agent_id}", state[2]),
        ev.PullRequestOpened: lambda state, e: SessionState(state[0], "pull_request_opened", state[2]),
        ev.Paused: lambda state, e: SessionState(PAUSED, "paused", state[2]),
        ev.Resumed: lambda state, e: SessionState(e.live_status, e.current_step, state[2]),
        ev.ProcessRestarted: lambda state, e: SessionState(READY, e.current_step, ""),
        ev.WorkspaceRestarted: lambda state, e: SessionState(READY, "workspace_restarting", ""),
        ev.SessionCompleted: lambda state, e: SessionState(COMPLETED, "session_completed", state[2]),
        ev.Stopped: lambda state, e: SessionState(STOPPED, "stopped", ""),
    }
)

# Events that move a session's status, step or blocker; the others leave it as it is.
STATUS_EVENTS: tuple[type[Aggregate.Event], ...] = tuple(_STEPS)


@functools.cache
def _step(event_type: type) -> Callable[[SessionState, Any], SessionState] | None:
    """The step of ``event_type`` or of the event class it subclasses (the library reads a
    stored event back as its aggregate's subclass of the declared class)."""
    return next((_STEPS[base] for base in event_type.__mro__ if base in _STEPS), None)


def after(state: SessionState, event_type: type, event: object) -> SessionState:
    """The session's state after an event of ``event_type`` (of ``domain.studio.events``)."""
    step = _step(event_type)
    return state if step is None else step(state, event)


def after_event(state: SessionState, event: object) -> SessionState:
    """The session's state after ``event``, as read back from the log."""
    return after(state, type(event), event)


def moves_status(event: object) -> bool:
    """Whether ``event`` may move a session's status, step or blocker (``STATUS_EVENTS``)."""
    return _step(type(event)) is not None


def live_status_after(live_status: str, event: object) -> str:
    """Only the status (it depends on nothing but the status before and the event)."""
    return after_event(SessionState(live_status, "", ""), event).live_status
