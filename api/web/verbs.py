"""The control verbs as the pages offer them: in an operator's order, with labels.

The verb sets and the fields each verb needs come from ``domain.studio.control``, the
table the control endpoints check against, so a page never offers what they refuse.
"""

from __future__ import annotations

from typing import Any

from domain.studio.control import REQUIRED

# The action table of the spec, most used first.
SESSION_ORDER = (
    "pause_session",
    "queue_request",
    "nudge_agent",
    "intervene",
    "retry_prompt",
    "comment_agent",
    "reply_thread",
    "handoff_agent",
    "switch_agent_process",
    "restart_workspace",
    "yolo_loop_break",
    "create_task_card",
    "create_followup_task",
    "resolve_task_card",
    "stop_session",
)
RUN_ORDER = ("verify_wave", "replay_blockers", "retry_prompt", "cleanup_run")

LABELS = {
    "pause_session": "Pause",
    "queue_request": "Resume (queue request)",
    "nudge_agent": "Nudge",
    "intervene": "Intervene",
    "retry_prompt": "Retry prompt",
    "comment_agent": "Comment (mailbox)",
    "reply_thread": "Reply in thread",
    "handoff_agent": "Hand off",
    "switch_agent_process": "Switch process",
    "restart_workspace": "Restart workspace",
    "yolo_loop_break": "Break loop",
    "create_task_card": "Create task card",
    "create_followup_task": "Create follow-up task",
    "resolve_task_card": "Resolve task card",
    "stop_session": "Stop",
    "verify_wave": "Verify wave",
    "replay_blockers": "Replay blockers",
    "cleanup_run": "Clean up run",
}
# The optional fields each verb reads besides ``reason`` (recorded with every verb); the
# page sends only these, so text typed for one verb never rides along with another.
USES = {
    "pause_session": (),
    "queue_request": ("message", "wake_target"),
    "nudge_agent": ("message",),
    "intervene": ("message",),
    "retry_prompt": ("message",),
    "comment_agent": ("message",),
    "reply_thread": ("thread_id", "message"),
    "handoff_agent": ("target_agent_id", "thread_id", "message"),
    "switch_agent_process": ("provider", "model", "effort", "speed"),
    "restart_workspace": (),
    "yolo_loop_break": (),
    "create_task_card": ("title", "task_card_id"),
    "create_followup_task": ("title", "task_card_id"),
    "resolve_task_card": ("task_card_id",),
    "stop_session": (),
    "verify_wave": (),
    "replay_blockers": (),
    "cleanup_run": (),
}
# Verbs that end something: the page asks for a second click.
CONFIRM = ("stop_session", "cleanup_run")
# switch_agent_process needs at least one of these.
SWITCH_FIELDS = ("provider", "model", "effort", "speed")


def verb_config() -> dict[str, Any]:
    """What the office page needs to offer the verbs and fill their bodies."""
    return {
        "session": list(SESSION_ORDER),
        "run": list(RUN_ORDER),
        "labels": LABELS,
        "required": {verb: list(fields) for verb, fields in REQUIRED.items()},
        "uses": {verb: [*fields, "reason"] for verb, fields in USES.items()},
        "one_of": {"switch_agent_process": list(SWITCH_FIELDS)},
        "confirm": list(CONFIRM),
    }

