"""Operator control verbs over HTTP (C8).

- ``POST /control-plane/studio/runs/{run_id}/control``: run-level verbs;
- ``POST /control-plane/studio/runs/{run_id}/sessions/{session_id}/control``: session verbs;
- ``POST /v1/admin/studio/runs/{run_id}/control``: the same body, run verbs or a session
  verb aimed by ``target_agent_id`` (super_admin only).
Control verbs need super_admin or the project's owner/maintainer (C2). The effect is an
event recorded with the edge principal as actor; the answer is 202 with the control id.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import structlog
from litestar import Router
from litestar.datastructures import State
from litestar.params import JSONBody

from api.access import CONTROL, Access, access_guard, guarded, run_in_path
from api.auth import EdgeJwt
from api.context import Caller, CallerDep, caller_dependency, studio_commands
from api.errors import RequestInvalid
from api.openapi import answers, link
from api.read_your_writes import command
from api.studio.control_dto import (
    AdminControlRequest,
    ControlAccepted,
    ControlRequest,
    control_body_schema,
)
from api.studio.runs_dto import RunId, SessionId
from domain.studio.commands import StudioCommands
from domain.studio.commands.control import ControlOutcome
from domain.studio.control import (
    ALL_VERBS,
    RUN_VERBS,
    SESSION_VERBS,
    ControlIntent,
    InvalidControl,
    check_intent,
)

log = structlog.get_logger("squadops.api.control")


ACCEPTED_LINKS = {
    "GetRun": link("get_run", run_id="$response.body#/run_id"),
    "GetSessionState": link("session_state", run_id="$response.body#/run_id"),
}


STEER_RUN = Access(CONTROL, run_in_path("run_id"))  # C2: owner or maintainer of the run's project


def control_answers(schema_name: str, level: str) -> dict:
    return answers(
        401, 403, 404, 409, 422, links=ACCEPTED_LINKS, body=(schema_name, partial(control_body_schema, level=level))
    )


def invalid(field: str, message: str, value: object, type_: str = "value_error", ctx: dict | None = None) -> RequestInvalid:
    return RequestInvalid(["body", field], message, type_, value, ctx)


def checked(intent: ControlIntent, level: str) -> ControlIntent:
    """The intent, or 422 naming the field: unknown verb, wrong level, missing field."""
    try:
        check_intent(intent, level=level)
    except InvalidControl as exc:
        if exc.field != "verb":
            raise invalid(exc.field, exc.message, None, "missing") from None
        allowed = sorted(RUN_VERBS if level == "run" else SESSION_VERBS)
        type_ = "enum" if intent.verb not in ALL_VERBS else "value_error"
        raise invalid("verb", exc.message, intent.verb, type_, {"level": level, "allowed": allowed}) from None
    return intent


def accepted(outcome: ControlOutcome, command: str) -> ControlAccepted:
    structlog.contextvars.bind_contextvars(run_id=outcome.run_id, control_id=outcome.control_id)
    log.info(command, verb=outcome.verb, session_id=outcome.session_id)
    return ControlAccepted(
        control_id=outcome.control_id,
        run_id=outcome.run_id,
        session_id=outcome.session_id,
        verb=outcome.verb,
        status=outcome.status,
    )


def run_control(studio: StudioCommands, caller: Caller, run_id: str, intent: ControlIntent) -> ControlAccepted:
    outcome = studio.control.control_run(tenant=caller.tenant, run_id=run_id, intent=intent, actor=caller.subject_key)
    return accepted(outcome, "run_control")


def session_control(
    studio: StudioCommands, caller: Caller, run_id: str, intent: ControlIntent, *, session_id: str = "", agent_id: str = ""
) -> ControlAccepted:
    outcome = studio.control.control_session(
        tenant=caller.tenant,
        run_id=run_id,
        session_id=session_id,
        agent_id=agent_id,
        intent=intent,
        actor=caller.subject_key,
    )
    return accepted(outcome, "session_control")


def control_command(path: str, summary: str, opt: dict[str, Any]) -> Any:
    """A control verb's route: it answers 202 with its log position, the ticker woken to act on it."""
    return command(path, status_code=202, wakes_ticker=True, summary=summary, opt=opt)


# -- control plane ----------------------------------------------------------------------------


@control_command(
    "/runs/{run_id:str}/control", "Run-level control verb", guarded(STEER_RUN, **control_answers("RunControlRequest", "run"))
)
def control_run(run_id: RunId, data: JSONBody[ControlRequest], state: State, caller: CallerDep) -> ControlAccepted:
    intent = checked(data.intent(), "run")  # who may steer the run's project: the access guard decided
    return run_control(studio_commands(state), caller, run_id, intent)


@control_command(
    "/runs/{run_id:str}/sessions/{session_id:str}/control",
    "Session-level control verb",
    guarded(STEER_RUN, **control_answers("SessionControlRequest", "session")),
)
def control_session(
    run_id: RunId,
    session_id: SessionId,
    data: JSONBody[ControlRequest],
    state: State,
    caller: CallerDep,
) -> ControlAccepted:
    intent = checked(data.intent(), "session")  # who may steer the run's project: the access guard decided
    return session_control(studio_commands(state), caller, run_id, intent, session_id=session_id)


# -- admin path -------------------------------------------------------------------------------


@control_command("/runs/{run_id:str}/control", "Control verb (admin)", control_answers("AdminControlRequestBody", "admin"))
def admin_control(
    run_id: RunId,
    data: JSONBody[AdminControlRequest],
    state: State,
    caller: CallerDep,
) -> ControlAccepted:
    """A run verb, or a session verb aimed by ``target_agent_id`` (``agent_id`` for handoffs)."""
    studio, intent = studio_commands(state), data.intent()
    verb, agent_id = intent.verb, data.agent_id or ""
    if verb == "handoff_agent":
        if not agent_id:
            message = "handoff_agent through the admin path needs agent_id (the source agent)"
            raise invalid("agent_id", message, None, "missing")
        return session_control(studio, caller, run_id, checked(intent, "session"), agent_id=agent_id)
    aim = agent_id or intent.target_agent_id
    if verb in RUN_VERBS and not aim:
        return run_control(studio, caller, run_id, checked(intent, "run"))
    if verb in SESSION_VERBS:
        if not aim:
            raise invalid("target_agent_id", f"Session verb {verb!r} needs target_agent_id", None, "missing")
        return session_control(studio, caller, run_id, checked(intent, "session"), agent_id=aim)
    if verb in RUN_VERBS:
        field = "agent_id" if agent_id else "target_agent_id"
        raise invalid(field, f"Run-level verb {verb!r} aims at no agent", aim)
    raise invalid("verb", f"Unknown verb {verb!r}.", verb, "enum", {"allowed": sorted(ALL_VERBS)})


def control_routers(edge: EdgeJwt) -> list[Router]:
    """The control-plane router and the admin control route, for the app factory."""
    return [
        Router(
            path="/control-plane/studio",
            route_handlers=[control_run, control_session],
            dependencies=caller_dependency(edge, admin=False),
            guards=[access_guard],
            tags=["control-plane"],
        ),
        Router(
            path="/v1/admin/studio",
            route_handlers=[admin_control],
            dependencies=caller_dependency(edge, admin=True),
            tags=["studio"],
        ),
    ]
