"""What a page on another origin must not make a browser do to the service (C2, issue 22).

A browser sends the edge's cookies with any request a page makes, from any origin; so:

- a request with a body declares ``application/json`` (else 415 ``unsupported_media_type``):
  a form or a ``text/plain`` post, which any page may send without a CORS preflight, is
  refused before anything reads it;
- a state-changing request (any method but GET, HEAD, OPTIONS, and a GET whose route names
  ``CHANGES_STATE`` in its ``opt``, such as the workspace launch) or a WebSocket upgrade
  that carries ``Origin`` must come from the service's own origin (``SQUADOPS_BASE_URL``; for a
  loopback base URL, any loopback name with its port; and whatever loopback address and
  port the request itself was sent to, which no DNS-rebound name can be) or one of
  ``SQUADOPS_ALLOWED_ORIGINS`` (else 403 ``origin_not_allowed``; a WebSocket is accepted,
  sent that body, and closed with 4403, as the live channel refuses). Without ``Origin``,
  one that a browser marks ``Sec-Fetch-Site: cross-site`` (a link or an image on another
  site) is refused alike; any other comes from no browser page: its credentials decide.

The MCP endpoint (``/mcp``) keeps its own rules (``api.mcp.controller``): its callers
authenticate with an agent's bearer token, which no browser adds by itself, it answers
JSON-RPC errors, and it refuses origins other than this machine's and the service's.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

import msgspec
from litestar.types import ASGIApp, Receive, Scope, Send

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
JSON_MEDIA_TYPE = "application/json"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
OWN_RULES_PATHS = ("/mcp",)
CHANGES_STATE = "changes_state"  # a route's ``opt`` key: this GET changes state


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a URL (lower case, the default port left out); ``""``
    when it is no http(s) URL."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return ""
    if parts.scheme not in ("http", "https", "ws", "wss") or not parts.hostname:
        return ""
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    default = {"http": 80, "https": 443, "ws": 80, "wss": 443}[parts.scheme]
    return f"{parts.scheme}://{host}" + (f":{port}" if port and port != default else "")


def own_origins(base_url: str, allowed: Iterable[str] = ()) -> frozenset[str]:
    """The origins whose pages may send commands: the service's own and the allowed ones."""
    found = {origin_of(base_url), *(origin_of(o) for o in allowed)}
    parts = urlsplit(base_url)
    if parts.hostname in ("127.0.0.1", "localhost", "::1"):
        port = f":{parts.port}" if parts.port else ""
        found |= {f"{parts.scheme}://{name}{port}" for name in LOOPBACK_NAMES}
    return frozenset(found - {""})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


def has_body(scope: Scope) -> bool:
    length = _header(scope, b"content-length")
    if length is not None:
        return length.strip() not in ("", "0")
    return _header(scope, b"transfer-encoding") is not None


def declares_json(scope: Scope) -> bool:
    media_type = (_header(scope, b"content-type") or "").partition(";")[0].strip().lower()
    return media_type == JSON_MEDIA_TYPE


def _loopback_self(scope: Scope, origin: str) -> bool:
    """Whether ``origin`` is the loopback address (and port) this request was sent to."""
    host = _header(scope, b"host") or ""
    scheme = {"ws": "http", "wss": "https"}.get(scope.get("scheme", "http"), scope.get("scheme", "http"))
    own = origin_of(f"{scheme}://{host}")
    return bool(own) and urlsplit(own).hostname in ("127.0.0.1", "localhost", "::1") and origin_of(origin) == own


def refusal(scope: Scope, origins: frozenset[str]) -> tuple[int, str, str] | None:
    """``(status, detail, code)`` when the request breaks a rule above, else None."""
    path = scope.get("path", "")
    if any(path == p or path.startswith(p + "/") for p in OWN_RULES_PATHS):
        return None
    if scope["type"] == "http" and has_body(scope) and not declares_json(scope):
        return 415, "A request body must be sent as application/json.", "unsupported_media_type"
    handler = scope.get("route_handler")
    changes = (
        scope["type"] == "websocket"
        or scope.get("method", "GET") not in SAFE_METHODS
        or bool(getattr(handler, "opt", {}).get(CHANGES_STATE))
    )
    if not changes:
        return None
    origin = _header(scope, b"origin")
    if origin is not None and origin_of(origin) not in origins and not _loopback_self(scope, origin):
        return 403, f"Requests from the origin {origin[:200]!r} are not accepted.", "origin_not_allowed"
    if origin is None and _header(scope, b"sec-fetch-site") == "cross-site":
        return 403, "Requests from another site's pages are not accepted.", "origin_not_allowed"
    return None


async def send_refusal(scope: Scope, receive: Receive, send: Send, status: int, detail: str, code: str) -> None:
    body = msgspec.json.encode({"detail": detail, "code": code})
    if scope["type"] == "websocket":
        if (await receive())["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": body.decode()})
        await send({"type": "websocket.close", "code": 4000 + status, "reason": code})
        return
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def browser_rules(base_url: str, allowed_origins: Iterable[str] = ()) -> object:
    """The middleware applying the rules above (a Litestar ``middleware`` entry)."""
    origins = own_origins(base_url, allowed_origins)

    def wrap(app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] in ("http", "websocket"):
                refused = refusal(scope, origins)
                if refused is not None:
                    await send_refusal(scope, receive, send, *refused)
                    return
            await app(scope, receive, send)

        return middleware

    return wrap
