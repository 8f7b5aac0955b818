"""Operator control verbs (C8): which verbs exist at which level, and their intents."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from domain.shared.errors import Invalid

RUN_VERBS = frozenset({"replay_blockers", "cleanup_run", "verify_wave", "retry_prompt"})
SESSION_VERBS = frozenset(
    {
        "intervene",
        "queue_request",
        "retry_prompt",
        "handoff_agent",
        "comment_agent",
        "reply_thread",
        "nudge_agent",
        "pause_session",
        "stop_session",
        "restart_workspace",
        "create_task_card",
        "create_followup_task",
        "resolve_task_card",
        "switch_agent_process",
        "yolo_loop_break",
    }
)
ALL_VERBS = RUN_VERBS | SESSION_VERBS


class InvalidControl(Invalid):
    """A control intent that is malformed for its verb (answered 422, naming the field)."""

    code = "invalid_control"

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ControlIntent:
    verb: str
    message: str = ""
    target_agent_id: str = ""
    thread_id: str = ""
    wake_target: str = ""
    provider: str = ""
    model: str = ""
    effort: str = ""
    speed: str = ""
    task_card_id: str = ""
    title: str = ""
    reason: str = ""

    def params(self) -> dict[str, str]:
        """The intent's given fields, as recorded with the control event."""
        return {k: v for k, v in asdict(self).items() if v and k != "verb"}


REQUIRED: dict[str, tuple[str, ...]] = {
    "intervene": ("message",),
    "handoff_agent": ("target_agent_id",),
    "comment_agent": ("message",),
    "reply_thread": ("thread_id", "message"),
    "create_task_card": ("title",),
    "create_followup_task": ("title",),
    "resolve_task_card": ("task_card_id",),
}


# switch_agent_process needs at least one of these.
SWITCH_FIELDS = ("provider", "model", "effort", "speed")


def check_intent(intent: ControlIntent, *, level: str) -> None:
    """Raises InvalidControl for an unknown verb, a verb at the wrong level, or a missing field."""
    if intent.verb not in ALL_VERBS:
        raise InvalidControl(f"Unknown verb {intent.verb!r}.", field="verb")
    allowed = RUN_VERBS if level == "run" else SESSION_VERBS
    if intent.verb not in allowed:
        raise InvalidControl(f"Verb {intent.verb!r} is not allowed at the {level} level.", field="verb")
    for name in REQUIRED.get(intent.verb, ()):
        if not getattr(intent, name):
            raise InvalidControl(f"Verb {intent.verb!r} needs {name}.", field=name)
    if intent.verb == "switch_agent_process" and not any(getattr(intent, f) for f in SWITCH_FIELDS):
        raise InvalidControl(
            "switch_agent_process needs at least one of provider, model, effort, speed.", field="provider"
        )
