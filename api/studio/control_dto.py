"""Bodies of the control endpoints (C8): the control intent and its 202 answer."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec

from domain.shared.ids import END
from domain.studio.control import REQUIRED, RUN_VERBS, SESSION_VERBS, SWITCH_FIELDS, ControlIntent

# Optional ids (C12): absent, null or "" mean "not given"; anything else is an opaque id.
OptionalId = Annotated[str, msgspec.Meta(pattern=rf"^[A-Za-z0-9_-]{{0,128}}{END}", description="opaque id [A-Za-z0-9_-]")] | None
Verb = Annotated[str, msgspec.Meta(min_length=1, max_length=64, description="a control verb of the spec")]
Message = Annotated[str, msgspec.Meta(max_length=20_000)] | None
Provider = Annotated[str, msgspec.Meta(pattern=rf"^[A-Za-z0-9_.-]{{0,64}}{END}")] | None
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


# -- the request body schema, per level (OpenAPI) ---------------------------------------------
# A struct cannot say which verbs a path takes or which fields each verb needs, so the
# OpenAPI document states it with one ``oneOf`` branch per verb, built from the same
# tables ``domain.control.check_intent`` (and ``api.control.admin_control``) enforce.

_GIVEN: dict[str, Any] = {"type": "string", "minLength": 1}  # absent, null and "" mean "not given"
_NOT_GIVEN: dict[str, Any] = {"enum": [None, ""]}


def _given(*fields: str) -> dict[str, Any]:
    return {"required": list(fields), "properties": {f: _GIVEN for f in fields}}


def _verb(verb: str, *, needs: tuple[str, ...] = (), absent: tuple[str, ...] = (), rules: list[Any] | None = None) -> dict[str, Any]:
    branch: dict[str, Any] = {
        "properties": {"verb": {"const": verb}, **{f: _GIVEN for f in needs}, **{f: _NOT_GIVEN for f in absent}},
        "required": ["verb", *needs],
    }
    if verb == "switch_agent_process":
        rules = [*(rules or []), {"anyOf": [_given(f) for f in SWITCH_FIELDS]}]
    if rules:
        branch["allOf"] = rules
    return branch


def _branches(level: str) -> list[dict[str, Any]]:
    if level == "run":
        return [_verb(v, needs=REQUIRED.get(v, ())) for v in sorted(RUN_VERBS)]
    if level == "session":
        return [_verb(v, needs=REQUIRED.get(v, ())) for v in sorted(SESSION_VERBS)]
    # The admin path: a run verb aims at no agent; a session verb is aimed by agent_id or
    # target_agent_id; handoff_agent names its source in agent_id (target_agent_id is the
    # handoff's target); retry_prompt is either.
    aimed = {"anyOf": [_given("agent_id"), _given("target_agent_id")]}
    branches = []
    for verb in sorted(RUN_VERBS | SESSION_VERBS):
        needs = REQUIRED.get(verb, ())
        if verb in RUN_VERBS and verb in SESSION_VERBS:
            branches.append(_verb(verb, needs=needs))
        elif verb in RUN_VERBS:
            branches.append(_verb(verb, absent=("agent_id", "target_agent_id")))
        elif verb == "handoff_agent":
            branches.append(_verb(verb, needs=("agent_id", *needs)))
        else:
            branches.append(_verb(verb, needs=needs, rules=[aimed]))
    return branches


def control_body_schema(components: Mapping[str, Any], *, level: str) -> dict[str, Any]:
    """The control body at ``level`` (``run``, ``session`` or ``admin``): the struct's
    schema plus one ``oneOf`` branch per verb allowed there."""
    base = copy.deepcopy(components["AdminControlRequest" if level == "admin" else "ControlRequest"])
    base["oneOf"] = _branches(level)
    base["properties"]["verb"]["description"] = "one of the verbs below (C8)"
    base.pop("title", None)
    return base
