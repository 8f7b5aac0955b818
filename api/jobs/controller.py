"""Jobs, sync checkpoints and identity links under ``/v1`` (spec: Jobs, sync, identity).

Enqueue answers 202 with the queued job; the same ``idempotency_key`` with the same request
200 with that job, with another request 409 ``idempotency_key_reused`` (C18). A principal
or an ``x-api-key`` from ``SQUADOPS_API_KEYS`` may call; neither is a 401 (C2).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

import msgspec
from litestar import Response, Router, get
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import JSONBody, PathParameter, QueryParameter

from api.auth import EdgeJwt
from api.context import part
from api.errors import RequestInvalid
from api.jobs.auth import JobCaller, job_caller_dependency
from api.jobs.dto import (
    AccessSyncIn,
    IdentityLinkIn,
    IdentityLinkState,
    JobOut,
    NodePowerIn,
    NodePowerJobOut,
    SyncCheckpoint,
    SyncCheckpointList,
    WizardTryIn,
    job_out,
    node_power_out,
)
from api.jobs.reads import JobReads
from api.openapi import answers, refined_body
from api.read_your_writes import command
from domain.jobs.commands import JobCommands
from domain.jobs.identity import LinkFacts, subject_id
from domain.jobs.job import ACCESS_SYNC, NODE_POWER_SLEEP, NODE_POWER_WAKE, WIZARD_TRY
from domain.jobs.policies import may_act_for
from domain.shared.errors import Forbidden
from domain.shared.ids import ID_PATTERN, is_valid_id

JobCallerDep = NamedDependency[JobCaller]
IdPath = Annotated[str, PathParameter(pattern=ID_PATTERN)]
Name = Annotated[str | None, QueryParameter(required=False, min_length=1, max_length=320)]
# Two queries are read under other names (``email`` is the edge claim header of the caller
# dependency, ``scope`` a name Litestar reserves); their rules are checked here, so a 422
# names them as the client sent them.
EmailQuery = Annotated[
    str | None, QueryParameter(name="email", required=False, schema_extra={"minLength": 1, "maxLength": 320})
]
ScopeQuery = Annotated[
    str, QueryParameter(name="scope", description="the checkpoint's scope", schema_extra={"pattern": ID_PATTERN})
]


# Enqueue answers 202, or 200 with the job the same idempotency_key queued (C18).
ENQUEUE = answers(401, 403, 404, 409, 422, also=(200,))
_ID = {"type": "string", "minLength": 1, "maxLength": 128, "pattern": ID_PATTERN}
_SHORT = {"type": "string", "maxLength": 200}
# The struct's rules on nested items and keys, which the generated schema leaves out.
ACCESS_SYNC_BODY = refined_body(
    "AccessSyncIn",
    required_connectors={"items": _ID},
    preflight_ssot={"propertyNames": _ID, "additionalProperties": {"type": "object", "additionalProperties": _SHORT, "propertyNames": _SHORT}},
)


def identity_link_body(components: Any) -> dict[str, Any]:
    """A link (``linked``, the default) names the provider_user_id; an unlink need not."""
    _, build = refined_body("IdentityLinkIn", attributes={"additionalProperties": _SHORT, "propertyNames": _SHORT, "maxProperties": 100})
    body = build(components)
    # Exclusive cases, each naming ``linked``: a schema-valid body fits exactly one.
    body["oneOf"] = [
        {"required": ["linked"], "properties": {"linked": {"const": False}}},
        {"required": ["provider_user_id"], "properties": {"linked": {"const": True}, "provider_user_id": {"minLength": 1}}},
    ]
    return body


def checked_query(name: str, value: str, ok: bool, rule: str, type_: str) -> str:
    if not ok:
        raise RequestInvalid(["query", name], f"{name} must {rule}", type_, value)
    return value


def job_commands(state: State) -> JobCommands:
    return part(state, "jobs")


def job_reads(state: State) -> JobReads:
    return part(state, "job_reads")


def enqueue(
    state: State,
    caller: JobCaller,
    data: msgspec.Struct,
    *,
    job_type: str,
    provider_kind: str,
    proposal_id: str | None,
    answer: Callable[[Any], Any],
) -> Response[Any]:
    """Queues the job (202), or answers the one the same key queued (200)."""
    tenant = caller.tenant_of(getattr(data, "tenant_id", None))
    caller.authorise(state, tenant, enqueue=True)
    job, created = job_commands(state).enqueue(
        tenant=tenant,
        job_type=job_type,
        provider_kind=provider_kind,
        proposal_id=proposal_id,
        request=msgspec.to_builtins(data),
        requested_by=caller.requested_by,
    )
    return Response(answer(job), status_code=202 if created else 200)


@command(
    "/jobs/sync/access",
    status_code=202,
    summary="Enqueue an access sync",
    opt=answers(401, 403, 404, 409, 422, also=(200,), body=ACCESS_SYNC_BODY),
)
def access_sync(data: JSONBody[AccessSyncIn], state: State, caller: JobCallerDep) -> Response[JobOut]:
    return enqueue(
        state, caller, data, job_type=ACCESS_SYNC, provider_kind=data.provider_kind or "access",
        proposal_id=data.proposal_id, answer=job_out,
    )


@command("/wizard/try", status_code=202, summary="Enqueue a wizard try", opt=ENQUEUE)
def wizard_try(data: JSONBody[WizardTryIn], state: State, caller: JobCallerDep) -> Response[JobOut]:
    return enqueue(
        state, caller, data, job_type=WIZARD_TRY, provider_kind=data.provider, proposal_id=data.proposal_id,
        answer=job_out,
    )


@command("/jobs/node-power/sleep", status_code=202, summary="Enqueue a node power sleep", opt=ENQUEUE)
def node_power_sleep(data: JSONBody[NodePowerIn], state: State, caller: JobCallerDep) -> Response[NodePowerJobOut]:
    return enqueue(
        state, caller, data, job_type=NODE_POWER_SLEEP, provider_kind="power_device",
        proposal_id=data.proposal_id, answer=node_power_out,
    )


@command(
    "/jobs/node-power/wake",
    status_code=202,
    summary="Enqueue a node power wake (wake-on-LAN)",
    opt=ENQUEUE,
)
def node_power_wake(data: JSONBody[NodePowerIn], state: State, caller: JobCallerDep) -> Response[NodePowerJobOut]:
    return enqueue(
        state, caller, data, job_type=NODE_POWER_WAKE, provider_kind="power_device",
        proposal_id=data.proposal_id, answer=node_power_out,
    )


@get("/jobs/{job_id:str}", sync_to_thread=True, summary="Follow a job")
def get_job(job_id: IdPath, state: State, caller: JobCallerDep) -> JobOut:
    caller.authorise(state, caller.tenant, enqueue=False)
    return job_reads(state).job(caller.tenant, job_id)


@get("/sync/checkpoints", sync_to_thread=True, summary="Sync checkpoints of the tenant")
def list_checkpoints(state: State, caller: JobCallerDep) -> SyncCheckpointList:
    caller.authorise(state, caller.tenant, enqueue=False)
    return SyncCheckpointList(items=job_reads(state).checkpoints(caller.tenant))


@get("/sync/checkpoints/{connector_id:str}", sync_to_thread=True, summary="One sync checkpoint")
def get_checkpoint(
    connector_id: IdPath,
    state: State,
    caller: JobCallerDep,
    checkpoint_scope: ScopeQuery,
) -> SyncCheckpoint:
    scope = checked_query("scope", checkpoint_scope, is_valid_id(checkpoint_scope), f"match {ID_PATTERN}", "string_pattern_mismatch")
    caller.authorise(state, caller.tenant, enqueue=False)
    return job_reads(state).checkpoint(caller.tenant, connector_id, scope)


@get("/identity/links/{provider:str}", sync_to_thread=True, summary="Identity link state")
def get_identity_link(
    provider: IdPath,
    state: State,
    caller: JobCallerDep,
    user_id: Name = None,
    username: Name = None,
    email_query: EmailQuery = None,
) -> IdentityLinkState:
    if email_query is not None:
        checked_query("email", email_query, 0 < len(email_query) <= 320, "be 1 to 320 characters", "string_length")
    named = {k: v for k, v in (("user_id", user_id), ("username", username), ("email", email_query)) if v}
    return job_reads(state).link_state(caller.tenant, provider, caller, named)


@command(
    "/identity/links/{provider:str}",
    status_code=200,
    summary="Link (or unlink) an identity",
    opt=answers(401, 403, 404, 409, 422, body=("IdentityLinkIn", identity_link_body)),
)
def post_identity_link(
    provider: IdPath, data: JSONBody[IdentityLinkIn], state: State, caller: JobCallerDep
) -> IdentityLinkState:
    subject = (data.subject_key or "").strip().lower()
    own = caller.principal.subject_key if caller.principal is not None else ""
    if not subject:
        if not own:
            raise RequestInvalid(["body", "subject_key"], "An API key caller names the subject_key", "missing")
        subject = own
    if not may_act_for(own_subject=own, privileged=caller.privileged, subject=subject):
        raise Forbidden(
            "Only super_admin or an API key bound to this tenant may link another subject.", code="identity_link_forbidden"
        )
    if data.linked and not data.provider_user_id:
        raise RequestInvalid(["body", "provider_user_id"], "A link needs the provider_user_id", "missing")
    facts = LinkFacts.of(subject, data)
    if not caller.privileged and data.linked:
        job_reads(state).check_claims(caller.tenant, subject, facts)
    link = job_commands(state).link_identity(
        tenant=caller.tenant, provider=provider, facts=facts, linked=data.linked, source=f"api:{caller.requested_by}"
    )
    if link is None:
        state_ = IdentityLinkState(
            subject_id=subject_id(caller.tenant, subject), subject_key=subject, user_id=facts.user_id, username=facts.username, email=facts.email,
            provider=provider, linked=False, provider_user_id="", provider_username="", attributes={},
        )
    else:
        state_ = IdentityLinkState(
            subject_id=link.subject_id, subject_key=link.subject_key, user_id=link.user_id, username=link.username,
            email=link.email, provider=provider, linked=link.linked,
            provider_user_id=link.provider_user_id if link.linked else "",
            provider_username=link.provider_username if link.linked else "",
            attributes=dict(link.attributes) if link.linked else {},
        )
    return state_


def jobs_router(edge: EdgeJwt, api_keys: Sequence[str]) -> Router:
    return Router(
        path="/v1",
        route_handlers=[
            access_sync, wizard_try, node_power_sleep, node_power_wake, get_job,
            list_checkpoints, get_checkpoint, get_identity_link, post_identity_link,
        ],
        dependencies=job_caller_dependency(edge, api_keys),
        tags=["jobs"],
    )
