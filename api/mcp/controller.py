"""``/mcp``: the squad's MCP server over the streamable HTTP transport (JSON-RPC 2.0).

Agent processes of the local plane reach it with the config the plane gave them; each
request carries ``Authorization: Bearer <agent token>`` naming the calling agent session.
POST carries one JSON-RPC message (or, for 2025-03-26 clients, a batch): a request is
answered with ``application/json``, notifications and responses with 202 and no body. The
server offers no server-initiated stream and no session ids, so GET and DELETE are 405.
Methods: ``initialize``, ``ping``, ``tools/list``, ``tools/call``. A refused tool call is a
tool result with ``isError`` (the agent reads why), an unknown tool a JSON-RPC error.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import anyio
import msgspec
from litestar import Request, Router, delete, get, post
from litestar.datastructures import State
from litestar.response import Response as HttpResponse

from api.context import part
from api.mcp import dto
from domain.shared import agent_tokens
from domain.shared.errors import DomainError

SERVER_INFO = {"name": "squadops", "title": "squadops squad tools", "version": "0.1.0"}
INSTRUCTIONS = (
    "Tools of your agent squad: hand work to another agent, comment into an agent's mailbox, "
    "open your lane's pull request, and report to the HUD."
)
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
JSON = "application/json"

_encoder = msgspec.json.Encoder()


def _http(status: int, body: Any = None, headers: dict[str, str] | None = None) -> HttpResponse[Any]:
    content = b"" if body is None else _encoder.encode(body)
    return HttpResponse(content=content, status_code=status, media_type=JSON, headers=headers or {})


def _origin_allowed(origin: str, base_url: str) -> bool:
    """DNS-rebinding guard: a browser origin must be this machine or the service itself."""
    host = urlsplit(origin).hostname or ""
    return host in LOCAL_HOSTS or host == (urlsplit(base_url).hostname or "")


@post("/", include_in_schema=False, status_code=200)
async def mcp_post(request: Request[Any, Any, Any]) -> HttpResponse[Any]:
    state = request.app.state
    headers = request.headers
    origin = headers.get("origin")
    if origin and not _origin_allowed(origin, str(part(state, "base_url"))):
        return _http(403, dto.failure(None, dto.INVALID_REQUEST, "Origin not allowed."))
    accept = headers.get("accept", "")
    if accept and not any(kind in accept for kind in (JSON, "text/event-stream", "*/*")):
        return _http(406, dto.failure(None, dto.INVALID_REQUEST, "Accept must allow application/json."))
    version = headers.get("mcp-protocol-version")
    if version is not None and version not in dto.PROTOCOL_VERSIONS:
        return _http(400, dto.failure(None, dto.INVALID_REQUEST, f"Unsupported MCP-Protocol-Version {version!r}."))
    caller = _caller(request)
    if caller is None:
        return _http(
            401, dto.failure(None, dto.INVALID_REQUEST, "An agent token (Authorization: Bearer) is required."),
            {"WWW-Authenticate": 'Bearer realm="squadops-mcp"'},
        )
    body = await request.body()
    # The squad tools read the event store (blocking I/O): a worker thread answers.
    return await anyio.to_thread.run_sync(_answer, state, caller, body)


def _caller(request: Request[Any, Any, Any]) -> agent_tokens.AgentIdentity | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        return None
    identity = agent_tokens.verify(str(part(request.app.state, "mcp_token_key") or ""), token.strip())
    named = request.headers.get("x-squadops-agent")
    if identity is not None and named and named != f"{identity.tenant}/{identity.run_id}/{identity.agent_id}":
        return None
    return identity


def _answer(state: State, caller: agent_tokens.AgentIdentity, body: bytes) -> HttpResponse[Any]:
    try:
        payload = json.loads(body) if body else None
    except ValueError as exc:
        return _http(400, dto.failure(None, dto.PARSE_ERROR, f"Parse error: {exc.msg}."))
    batch = isinstance(payload, list)
    messages = payload if batch else [payload]
    if batch and not messages:
        return _http(400, dto.failure(None, dto.INVALID_REQUEST, "An empty batch is not a JSON-RPC message."))
    answers = []
    for item in messages:
        answer = _one(state, caller, item)
        if answer is not None:
            answers.append(answer)
    if not answers:
        return _http(202)
    return _http(200, answers if batch else answers[0])


def _one(state: State, caller: agent_tokens.AgentIdentity, item: Any) -> dto.Response | None:
    request_id = item.get("id") if isinstance(item, dict) and isinstance(item.get("id"), (int, str)) else None
    try:
        message = msgspec.convert(item, dto.Message)
    except msgspec.ValidationError as exc:
        return dto.failure(request_id, dto.INVALID_REQUEST, f"Invalid request: {exc}.")
    if message.jsonrpc != dto.JSONRPC:
        return dto.failure(request_id, dto.INVALID_REQUEST, "jsonrpc must be \"2.0\".")
    if not message.is_request:
        return None  # a notification (notifications/initialized, cancelled ...) or a response
    try:
        return dto.success(request_id, _dispatch(state, caller, message))
    except _RpcFailure as exc:
        return dto.failure(request_id, exc.code, exc.message)


class _RpcFailure(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _dispatch(state: State, caller: agent_tokens.AgentIdentity, message: dto.Message) -> Any:
    tools = part(state, "agent_tools")
    if tools is None:
        raise _RpcFailure(dto.INTERNAL_ERROR, "This service has no squad tools.")
    if message.method == "initialize":
        asked = str(message.params.get("protocolVersion", ""))
        version = asked if asked in dto.PROTOCOL_VERSIONS else dto.PROTOCOL_VERSIONS[0]
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": SERVER_INFO,
            "instructions": INSTRUCTIONS,
        }
    if message.method == "ping":
        return {}
    if message.method == "tools/list":
        return {"tools": tools.tools()}
    if message.method == "tools/call":
        try:
            call = msgspec.convert(message.params, dto.ToolCall)
        except msgspec.ValidationError as exc:
            raise _RpcFailure(dto.INVALID_PARAMS, f"Invalid tools/call params: {exc}.") from None
        if call.name not in {tool["name"] for tool in tools.tools()}:
            raise _RpcFailure(dto.INVALID_PARAMS, f"Unknown tool: {call.name}")
        try:
            answer = tools.call(caller, call.name, call.arguments)
        except DomainError as exc:
            return dto.ToolResult(content=[dto.TextContent(f"{exc.code}: {exc.message}")], is_error=True)
        return dto.ToolResult(
            content=[dto.TextContent(json.dumps(answer, sort_keys=True))], is_error=False, structured_content=answer
        )
    raise _RpcFailure(dto.METHOD_NOT_FOUND, f"Method not found: {message.method}")


@get("/", include_in_schema=False, status_code=405)
async def mcp_get() -> HttpResponse[Any]:
    return HttpResponse(content=b"", status_code=405, headers={"Allow": "POST"})


@delete("/", include_in_schema=False, status_code=405)
async def mcp_delete() -> HttpResponse[Any]:
    return HttpResponse(content=b"", status_code=405, headers={"Allow": "POST"})


def mcp_router() -> Router:
    return Router(path="/mcp", route_handlers=[mcp_post, mcp_get, mcp_delete])
