"""A per-principal limit on commands (``SQUADOPS_RATE_LIMIT_PER_MINUTE``, issue 22).

Every command (POST, PUT, PATCH, DELETE) takes one token from its principal's bucket,
which holds a minute's worth and refills evenly; an empty bucket answers 429
``rate_limited`` with ``Retry-After`` (whole seconds until a token is back) and the C3 body.

The principal is who the request says it is: the edge email claim (as ``identity_key``
folds it), else a hash of its bearer token or ``x-api-key``, else its address. A claim
is only charged when it holds: a request answered 401 (a forged or missing assertion) has
its token given back, so nobody can spend another's commands by naming them.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable

import msgspec
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from api.auth import EMAIL_HEADER, identity_key

COMMAND_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_EMAIL = EMAIL_HEADER.encode()
_KEEP = 10_000  # buckets kept before the full ones are dropped


class Buckets:
    """Token buckets by principal: ``per_minute`` tokens, refilled evenly over a minute."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.clock = clock
        self._lock = threading.Lock()
        self._held: dict[str, tuple[float, float]] = {}  # principal -> (tokens, when)

    def _level(self, key: str, now: float) -> float:
        tokens, when = self._held.get(key, (self.capacity, now))
        return min(self.capacity, tokens + (now - when) * self.rate)

    def take(self, key: str) -> float:
        """0 when a token was taken; else the seconds until one is back."""
        with self._lock:
            now = self.clock()
            level = self._level(key, now)
            if level < 1.0:
                self._held[key] = (level, now)
                return (1.0 - level) / self.rate
            self._held[key] = (level - 1.0, now)
            if len(self._held) > _KEEP:
                self._drop_full(now)
            return 0.0

    def give_back(self, key: str) -> None:
        with self._lock:
            now = self.clock()
            self._held[key] = (min(self.capacity, self._level(key, now) + 1.0), now)

    def _drop_full(self, now: float) -> None:
        for key in [k for k in self._held if self._level(k, now) >= self.capacity]:
            del self._held[key]


def principal_of(scope: Scope) -> str:
    """The key a request is counted under (see the module text)."""
    headers = dict(scope.get("headers", ()))
    email = headers.get(_EMAIL, b"").decode("latin-1").strip()
    if email:
        return "edge:" + identity_key(email)
    auth = headers.get(b"authorization") or headers.get(b"x-api-key")
    if auth:
        return "token:" + hashlib.sha256(auth).hexdigest()[:32]
    client = scope.get("client") or ("", 0)
    return f"address:{client[0]}"


def command_rate_limit(per_minute: int) -> Callable[[ASGIApp], ASGIApp]:
    """The middleware (a Litestar ``middleware`` entry); 0: no limit."""
    buckets = Buckets(per_minute) if per_minute > 0 else None

    def wrap(app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if buckets is None or scope["type"] != "http" or scope.get("method") not in COMMAND_METHODS:
                await app(scope, receive, send)
                return
            key = principal_of(scope)
            wait = buckets.take(key)
            if wait:
                await _refuse(send, per_minute, wait)
                return
            status = {"code": 0}

            async def sending(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status["code"] = message["status"]
                await send(message)

            try:
                await app(scope, receive, sending)
            finally:
                if status["code"] == 401:  # the claim did not hold: not this principal's command
                    buckets.give_back(key)

        return middleware

    return wrap


async def _refuse(send: Send, per_minute: int, wait: float) -> None:
    body = msgspec.json.encode(
        {"detail": f"Too many commands: at most {per_minute} a minute for one principal.", "code": "rate_limited"}
    )
    await send(
        {
            "type": "http.response.start",
            "status": 429,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(max(1, math.ceil(wait))).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
