"""Bodies of the control endpoints (C8): the control intent and its 202 answer."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from domain.studio.control import ControlIntent

# Optional ids (C12): absent, null or "" mean "not given"; anything else is an opaque id.
OptionalId = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{0,128}$", description="opaque id [A-Za-z0-9_-]")] | None
Verb = Annotated[str, msgspec.Meta(min_length=1, max_length=64, description="a control verb of the spec")]
Message = Annotated[str, msgspec.Meta(max_length=20_000)] | None
Provider = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.-]{0,64}$")] | None
Model = Annotated[str, msgspec.Meta(max_length=200)] | None
Effort = Literal["", "low", "medium", "high"] | None
Speed = Literal["", "standard", "fast"] | None
Title = Annotated[str, msgspec.Meta(max_length=500)] | None
Reason = Annotated[str, msgspec.Meta(max_length=2_000)] | None


class ControlRequest(msgspec.Struct, kw_only=True):
    """``{verb, message?, target_agent_id?, thread_id?, wake_target?, provider?, model?,
    effort?, speed?, task_card_id?, title?, reason?}``."""

    verb: Verb
    message: Message = None
    target_agent_id: OptionalId = None
    thread_id: OptionalId = None
    wake_target: OptionalId = None
    provider: Provider = None
    model: Model = None
    effort: Effort = None
    speed: Speed = None
    task_card_id: OptionalId = None
    title: Title = None
    reason: Reason = None

    def intent(self) -> ControlIntent:
        return ControlIntent(
            verb=self.verb,
            message=self.message or "",
            target_agent_id=self.target_agent_id or "",
            thread_id=self.thread_id or "",
            wake_target=self.wake_target or "",
            provider=self.provider or "",
            model=self.model or "",
            effort=self.effort or "",
            speed=self.speed or "",
            task_card_id=self.task_card_id or "",
            title=self.title or "",
            reason=self.reason or "",
        )


class AdminControlRequest(ControlRequest, kw_only=True):
    """The admin path's body: a session verb is aimed by ``target_agent_id``; for
    ``handoff_agent`` (whose ``target_agent_id`` is the handoff target) ``agent_id`` names
    the source session's agent."""

    agent_id: OptionalId = None


class ControlAccepted(msgspec.Struct, kw_only=True):
    control_id: str
    run_id: str
    session_id: str
    verb: str
    status: str = "accepted"
