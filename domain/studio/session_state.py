"""The session state machine, written once: a session's status after one of its events.

``after(state, event)`` is pure. The AgentSession aggregate applies it in every ``@event``
method, and every read model that shows a session's status folds its stored events
through it, so they agree with the aggregate by construction
(``tests/unit/test_session_state_property.py`` checks it over generated histories).
"""

from __future__ import annotations

from typing import NamedTuple

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

# Events that move a session's status, step or blocker; the others leave it as it is.
STATUS_EVENTS: tuple[type[ev.StudioEvent], ...] = (
    ev.SessionOpened, ev.ProcessStarted, ev.ToolCalled, ev.Blocked, ev.Unblocked, ev.HandedOff,
    ev.PullRequestOpened, ev.Paused, ev.Resumed, ev.ProcessRestarted, ev.WorkspaceRestarted,
    ev.SessionCompleted, ev.Stopped,
)


def after(state: SessionState, event: object) -> SessionState:
    """The session's state after ``event`` (an event of ``domain.studio.events``)."""
    live, step, blocker = state
    match event:
        case ev.SessionOpened():
            return OPENED
        case ev.ProcessStarted():
            return SessionState(WAITING_FIRST_TOOL, "waiting_first_tool", blocker)
        case ev.ToolCalled(tool_name=tool, first=first):
            return SessionState(WORKING if first else live, f"tool:{tool}", blocker)
        case ev.Blocked(code=code):
            return SessionState(BLOCKED, f"blocked:{code}", code)
        case ev.Unblocked(resume_status=resume):
            return SessionState(resume, resume, "")
        case ev.HandedOff(target_agent_id=target):
            return SessionState(live, f"handoff:{target}", blocker)
        case ev.PullRequestOpened():
            return SessionState(live, "pull_request_opened", blocker)
        case ev.Paused():
            return SessionState(PAUSED, "paused", blocker)
        case ev.Resumed(live_status=resume, current_step=resumed_step):
            return SessionState(resume, resumed_step, blocker)
        case ev.ProcessRestarted(current_step=restart_step):
            return SessionState(READY, restart_step, "")
        case ev.WorkspaceRestarted():
            return SessionState(READY, "workspace_restarting", "")
        case ev.SessionCompleted():
            return SessionState(COMPLETED, "session_completed", blocker)
        case ev.Stopped():
            return SessionState(STOPPED, "stopped", "")
    return state


def live_status_after(live_status: str, event: object) -> str:
    """Only the status (it depends on nothing but the status before and the event)."""
    return after(SessionState(live_status, "", ""), event).live_status
