"""The live channel over HTTP (C9): ``/control-plane/studio/live`` (SSE) and ``/live/ws``.

Both answer the run's live events (``live_events[]`` items plus ``event_id`` and
``run_id``) in order, resuming after ``Last-Event-ID`` (or ``last_event_id``) without gap
or duplicate. Reading a run's channel needs a principal who is super_admin or a
participant of the run's project (C2), in the request's tenant (C1), for as long as the
stream stays open (``api.live.reauthorise``).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec
import structlog
from litestar import Router, WebSocket, get, websocket
from litestar.connection import ASGIConnection
from litestar.datastructures import State
from litestar.exceptions import WebSocketDisconnect
from litestar.params import HeaderParameter, QueryParameter
from litestar.response import Stream

from api.access import READ, Access, access_guard, check, guarded, run_project
from api.auth import (
    ASSERTION_HEADER,
    EMAIL_HEADER,
    GROUPS_HEADER,
    TENANT_HEADER,
    Principal,
    edge_jwt,
    provide_tenant,
    resolve_principal_async,
)
from api.context import Caller, CallerDep, ServiceParts, caller_dependency, part
from api.errors import STATUS_BY_ERROR, ApiError, RequestInvalid
from api.live.hub import LiveHub, log_replay, sse_frame
from api.live.reauthorise import Refusal, access_check, until_refused
from api.openapi import answers
from domain.shared.errors import DomainError
from domain.shared.ids import END
from projections.engine.runner import NotificationSource
from projections.engine.unavailable import unavailable
from projections.studio.live_channel import TOPIC_ROOT, parse_topic

log = structlog.get_logger("squadops.api.live")

TOPIC_FORM = f"{TOPIC_ROOT}:tenant:<tenant>:run:<run_id>"
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
RECONNECT_MS = 1000
# The last frame of a stream ended by a stopping process: no id, so the client resumes
# after the last event it got (``Last-Event-ID``), from another instance.
RECONNECT_FRAME = b'retry: %d\nevent: reconnect\ndata: {"reason":"server_stopping","retry_ms":%d}\n\n' % (
    RECONNECT_MS,
    RECONNECT_MS,
)
WS_SERVICE_RESTART = 1012

TOPIC_PATTERN = rf"^{TOPIC_ROOT}:tenant:[A-Za-z0-9_-]{{1,128}}:run:[A-Za-z0-9_-]{{1,128}}{END}"
EVENT_ID_PATTERN = rf"^[0-9]{{0,18}}{END}"  # empty: from the start
_EVENT_ID = re.compile(r"[0-9]{1,18}")

Topic = Annotated[
    str, QueryParameter(pattern=TOPIC_PATTERN, description=f"the run's live channel topic, {TOPIC_FORM}")
]
# Documented here, checked by ``resume_point`` (which names them in ``loc`` as sent).
_EVENT_ID_DOC: dict[str, Any] = {"description": "resume after this event id", "schema_extra": {"pattern": EVENT_ID_PATTERN}}
LastEventIdQuery = Annotated[str | None, QueryParameter(name="last_event_id", required=False, **_EVENT_ID_DOC)]
LastEventIdHeader = Annotated[str | None, HeaderParameter(name="last-event-id", required=False, **_EVENT_ID_DOC)]


def topic_run(topic: str | None, tenant: str) -> str:
    """The run id ``topic`` names in ``tenant``: 422 when it is no topic, 403 in another tenant."""
    if topic is None:
        raise RequestInvalid(["query", "topic"], "Field required", "missing")
    parsed = parse_topic(topic)
    if parsed is None:
        raise RequestInvalid(
            ["query", "topic"], f"topic must be {TOPIC_FORM}", "string_pattern_mismatch", topic
        )
    topic_tenant, run_id = parsed
    if topic_tenant != tenant:
        raise ApiError(403, "The topic belongs to another tenant than the request's.", "tenant_mismatch")
    return run_id


def topic_project(state: State, connection: ASGIConnection, caller: Caller) -> str | None:
    """The access guard's locator for the SSE channel: the project of the topic's run.

    ``Last-Event-ID`` is checked first (its 422 came before the topic's run); a missing or
    malformed topic is left to the parameter check (422)."""
    headers, query = connection.headers, connection.query_params
    resume_point(headers.get("last-event-id"), query.get("last_event_id"))
    topic = query.get("topic")
    if topic is None or parse_topic(topic) is None:
        return None
    return run_project(state, caller.tenant, topic_run(topic, caller.tenant))


def authorize(state: State, topic: str | None, principal: Principal, tenant: str) -> str:
    """The run id of ``topic`` if ``principal`` may read it in ``tenant`` (the WebSocket)."""
    run_id = topic_run(topic, tenant)
    check(state, principal, tenant, run_project(state, tenant, run_id))
    return run_id


def resume_point(header: str | None, query: str | None) -> int | None:
    """The event id to resume after: the header (set by reconnecting browsers) wins."""
    for value, loc in ((header, ["header", "Last-Event-ID"]), (query, ["query", "last_event_id"])):
        if not value:
            continue
        if not _EVENT_ID.fullmatch(value):
            raise RequestInvalid(loc, "must be an event id (up to 18 digits 0-9)", "int_parsing", value)
        return int(value)
    return None


def refused_frame(refusal: Refusal) -> bytes:
    """The last frame of a stream whose principal lost access (or whose assertion expired)."""
    data = msgspec.json.encode(
        {"reason": refusal.code, "status": refusal.status, "detail": refusal.detail, "retry_ms": RECONNECT_MS}
    )
    return b"retry: %d\nevent: reconnect\ndata: %s\n\n" % (RECONNECT_MS, data)


async def sse_frames(
    hub: LiveHub, tenant: str, run_id: str, after: int | None, heartbeat: float, access: StreamAccess | None = None
) -> AsyncIterator[bytes]:
    subscribed = False
    events = hub.events(tenant, run_id, after, heartbeat)
    if access is not None:
        events = until_refused(events, access.refused, expires_at=access.expires_at)
    async for batch in events:
        if isinstance(batch, Refusal):
            yield refused_frame(batch)
            return
        if batch is None:
            yield b": heartbeat\n\n"
            continue
        frames = b"".join(sse_frame(m.event_id, m.data) for m in batch)
        if not subscribed:
            subscribed = True
            frames = b"retry: 2000\n: subscribed\n\n" + frames
        yield frames
    yield RECONNECT_FRAME  # the hub drained: this process stops


@dataclass(frozen=True)
class StreamAccess:
    """What an open stream asks again (``api.live.reauthorise``)."""

    refused: Any
    expires_at: float | None


def stream_access(state: State, principal: Principal, tenant: str, run_id: str) -> StreamAccess:
    return StreamAccess(access_check(state, principal, tenant, run_id), principal.expires_at)


@get(
    "/live",
    summary="Live run events (Server-Sent Events)",
    media_type="text/event-stream",
    guards=[access_guard],  # not the WebSocket's: it refuses with its own close codes
    opt=guarded(Access(READ, topic_project, locate_always=True), **answers(401, 403, 404, 422)),
)
async def live_sse(
    state: State,
    caller: CallerDep,
    topic: Topic,
    last_event_id: LastEventIdQuery = None,
    last_event_id_header: LastEventIdHeader = None,
) -> Stream:
    tenant = caller.tenant
    hub, heartbeat = part(state, "hub"), part(state, "heartbeat")
    after = resume_point(last_event_id_header, last_event_id)
    run_id = topic_run(topic, tenant)  # the access guard found the run and decided who may read it
    structlog.contextvars.bind_contextvars(run_id=run_id)
    log.info("live_subscribed", transport="sse", after=after)
    access = stream_access(state, caller.principal, tenant, run_id)
    return Stream(
        sse_frames(hub, tenant, run_id, after, heartbeat, access), media_type="text/event-stream", headers=SSE_HEADERS
    )


def error_answer(exc: Exception) -> tuple[int, dict[str, Any]]:
    """The HTTP status and C3 body an error would have had (sent over the WebSocket)."""
    if isinstance(exc, RequestInvalid):
        return 422, {"detail": exc.items}
    if isinstance(exc, ApiError):
        return exc.status, {"detail": exc.detail, "code": exc.code}
    exc = unavailable(exc) or exc  # C19: the database cannot be reached (503)
    if isinstance(exc, DomainError):
        status = next((s for kind, s in STATUS_BY_ERROR if isinstance(exc, kind)), 400)
        return status, {"detail": exc.message, "code": exc.code}
    raise exc


async def _until_closed(socket: WebSocket) -> None:
    with contextlib.suppress(WebSocketDisconnect):
        while True:
            await socket.receive_data(mode="text")


async def _send_events(
    socket: WebSocket, hub: LiveHub, tenant: str, run_id: str, after: int | None, heartbeat: float, access: StreamAccess
) -> Refusal | None:
    events = until_refused(hub.events(tenant, run_id, after, heartbeat), access.refused, expires_at=access.expires_at)
    async for batch in events:
        if isinstance(batch, Refusal):
            return batch
        for message in batch or ():
            await socket.send_data(message.data.decode(), mode="text")
    return None


@websocket("/live/ws")
async def live_ws(socket: WebSocket, state: State) -> None:
    """The same events as the SSE endpoint, one JSON text message each.

    Refusals are sent as the HTTP error body would be, then the socket closes with code
    4000 + the HTTP status (4401, 4403, 4404, 4422).
    """
    headers, query = socket.headers, socket.query_params
    hub, heartbeat, edge = part(state, "hub"), part(state, "heartbeat"), part(state, "edge_jwt")
    try:
        principal = await resolve_principal_async(
            headers.get(EMAIL_HEADER), headers.get(GROUPS_HEADER), headers.get(ASSERTION_HEADER), edge
        )
        tenant = provide_tenant(query.get("tenant_id"), headers.get(TENANT_HEADER))
        after = resume_point(headers.get("last-event-id"), query.get("last_event_id"))
        run_id = await asyncio.to_thread(authorize, state, query.get("topic"), principal, tenant)
    except Exception as exc:
        status, body = error_answer(exc)
        await socket.accept()
        await socket.send_json(body)
        await socket.close(code=4000 + status, reason=str(body.get("code", "request_invalid")))
        return
    await socket.accept()
    log.info("live_subscribed", transport="websocket", run_id=run_id, after=after)
    access = stream_access(state, principal, tenant, run_id)
    sender = asyncio.create_task(_send_events(socket, hub, tenant, run_id, after, heartbeat, access))
    closed = asyncio.create_task(_until_closed(socket))
    done, pending = await asyncio.wait({sender, closed}, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    for task in pending:
        with contextlib.suppress(asyncio.CancelledError, WebSocketDisconnect):
            await task
    refusal = None
    for task in done:
        with contextlib.suppress(WebSocketDisconnect):
            refusal = task.result() if task is sender else refusal
    if refusal is not None:  # access lost, or the assertion expired, while open
        with contextlib.suppress(Exception):
            await socket.send_json({"detail": refusal.detail, "code": refusal.code})
            await socket.close(code=4000 + refusal.status, reason=refusal.code)
        return
    if hub.draining and sender in done:  # the process stops: "service restart", come back
        with contextlib.suppress(Exception):
            await socket.close(code=WS_SERVICE_RESTART, reason="server_stopping")


@dataclass
class LiveChannel:
    """The live channel's HTTP side: its router and the hub that starts with the app."""

    router: Router
    hub: LiveHub

    async def start(self) -> None:
        await self.hub.start()

    async def stop(self) -> None:
        await self.hub.stop()


def live_channel(container: ServiceParts) -> LiveChannel:
    settings = container.settings
    hub = LiveHub(
        container.live_broker(),
        log_replay(NotificationSource(container.event_store), settings.live_subject_prefix),
        container.fanout.position,
        subject_prefix=settings.live_subject_prefix,
    )

    router = Router(
        path="/control-plane/studio",
        route_handlers=[live_sse, live_ws],
        dependencies=caller_dependency(edge_jwt(settings), admin=False),
        tags=["live"],
    )
    return LiveChannel(router=router, hub=hub)
