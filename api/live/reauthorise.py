"""Open live streams stay authorised (issue 22): access is decided again while they run.

A stream's principal is checked when it opens (the access guard, or the WebSocket's own
``authorize``) and then every ``RECHECK_SECONDS`` while it stays open, and at the moment
its edge assertion expires. The first check that fails ends the stream, well within 5 s
of the principal losing access (removed from the project) or of its assertion's ``exp``:

- SSE: a last ``event: reconnect`` frame naming the reason (``{"reason": <code>,
  "status": <HTTP status>, "retry_ms": …}``); a client that reconnects is asked again,
  and answered 401/403 unless it has a fresh assertion or its access back;
- WebSocket: the C3 body of the refusal, then close code 4000 + its status (4401, 4403),
  as when it is refused at open.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from litestar.datastructures import State

from api.access import check, run_project
from api.auth import Principal
from api.errors import STATUS_BY_ERROR, ApiError
from domain.portal.relations import graph_grants
from domain.shared.access import may_read
from domain.shared.errors import DomainError
from projections.engine.copies import NotInMemory

RECHECK_SECONDS = 2.0
T = TypeVar("T")


@dataclass(frozen=True)
class Refusal:
    """Why a stream ends: the HTTP status and C3 body a new request would be answered."""

    status: int
    detail: str
    code: str


def refusal_of(exc: Exception) -> Refusal | None:
    if isinstance(exc, ApiError):
        return Refusal(exc.status, exc.detail, exc.code)
    if isinstance(exc, DomainError):
        status = next((s for kind, s in STATUS_BY_ERROR if isinstance(exc, kind)), 400)
        return Refusal(status, exc.message, exc.code)
    return None


def access_check(state: State, principal: Principal, tenant: str, run_id: str) -> Callable[[], Awaitable[Refusal | None]]:
    """The check a stream of ``run_id`` repeats: the assertion unexpired, the run's project
    still readable by ``principal``. The API's copies of the permission tuples answer an
    allowed principal in the event loop; otherwise the permission graph decides, in a
    worker thread (as the access guard does, ``api.access``)."""
    project: list[str] = []  # the run's project, looked up once: a run never moves

    def decide() -> Refusal | None:
        try:
            if not project:
                project.append(run_project(state, tenant, run_id))
            check(state, principal, tenant, project[0])
        except (ApiError, DomainError) as exc:
            return refusal_of(exc)
        return None

    def allowed_in_memory() -> bool:
        memory = state.get("permission_memory")
        if memory is None or not project:
            return False
        try:
            return may_read(principal, graph_grants(memory(0), tenant, project[0]))
        except NotInMemory:
            return False

    async def refused() -> Refusal | None:
        if principal.expires_at is not None and time.time() >= principal.expires_at:
            return Refusal(401, "The edge assertion has expired.", "edge_assertion_expired")
        if principal.is_super_admin or allowed_in_memory():
            return None
        return await asyncio.to_thread(decide)

    return refused


async def until_refused(
    items: AsyncIterator[T],
    refused: Callable[[], Awaitable[Refusal | None]],
    *,
    expires_at: float | None = None,
    every: float = RECHECK_SECONDS,
) -> AsyncIterator[T | Refusal]:
    """``items`` as they come, until ``refused`` answers a refusal (asked every ``every``
    seconds and at ``expires_at``): then that refusal, last."""
    pending: asyncio.Future[T] | None = None
    due = time.monotonic() + every
    try:
        while True:
            now = time.monotonic()
            if expires_at is not None:  # the wall clock's expiry on the monotonic clock
                due = min(due, now + max(0.0, expires_at - time.time()))
            if now >= due:
                refusal = await refused()
                if refusal is not None:
                    yield refusal
                    return
                due = time.monotonic() + every
                continue
            if pending is None:
                pending = asyncio.ensure_future(items.__anext__())
            done, _ = await asyncio.wait({pending}, timeout=due - now)
            if not done:
                continue
            task, pending = pending, None
            try:
                item = task.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending
        aclose = getattr(items, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()
