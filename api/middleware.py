"""Request context: tenant and request id bound to every log line; one line per request.

C19: until the answer starts, the request's waits for pooled database connections share
one budget (a streamed body, such as the live channel's, is not bound by it).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import structlog
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from api.auth import TENANT_HEADER
from projections.engine.unavailable import set_wait_budget

log = structlog.get_logger("squadops.http")
_TENANT = TENANT_HEADER.lower().encode()


def request_context(app: ASGIApp) -> ASGIApp:
    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500}
        tenant = "default"
        for name, value in scope.get("headers", []):
            if name == _TENANT:
                tenant = value.decode("latin-1")[:128]
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(request_id=uuid.uuid4().hex[:12], tenant=tenant)
        state = getattr(scope.get("app"), "state", None)
        set_wait_budget(getattr(state, "database_wait_budget", None))

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                set_wait_budget(None)
            await send(message)

        try:
            await app(scope, receive, sending)
        finally:
            elapsed = time.perf_counter() - started
            observe: Any = scope.get("app")
            recorder = getattr(getattr(observe, "state", None), "http_observer", None)
            route = scope.get("path_template") or scope.get("path", "")
            if recorder is not None:
                recorder(scope.get("method", ""), route, status["code"], elapsed)
            log.info(
                "request",
                method=scope.get("method"),
                path=scope.get("path"),
                status=status["code"],
                duration_ms=round(elapsed * 1000, 2),
            )

    return middleware
