"""JSON-RPC 2.0 messages of the MCP streamable HTTP transport, as msgspec Structs."""

from __future__ import annotations

from typing import Any

import msgspec

JSONRPC = "2.0"
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# Newest first: an unknown version asked at initialize is answered with the newest.
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
# Without an MCP-Protocol-Version header a server assumes this one (2025-06-18 transport).
ASSUMED_VERSION = "2025-03-26"

RequestId = int | str


class Message(msgspec.Struct, kw_only=True):
    """One incoming JSON-RPC message: a request (with ``id``), a notification or a response."""

    jsonrpc: str
    method: str = ""
    id: RequestId | None | msgspec.UnsetType = msgspec.UNSET
    params: dict[str, Any] = {}
    result: Any = msgspec.UNSET
    error: Any = msgspec.UNSET

    @property
    def is_request(self) -> bool:
        return bool(self.method) and self.id is not msgspec.UNSET and self.id is not None


class RpcError(msgspec.Struct, omit_defaults=True):
    code: int
    message: str
    data: Any = msgspec.UNSET


class Response(msgspec.Struct, omit_defaults=True):
    """Exactly one of ``result`` and ``error``; ``jsonrpc`` always (no default, never omitted)."""

    jsonrpc: str
    id: RequestId | None
    result: Any = msgspec.UNSET
    error: RpcError | msgspec.UnsetType = msgspec.UNSET


def success(request_id: RequestId | None, result: Any) -> Response:
    return Response(jsonrpc=JSONRPC, id=request_id, result=result)


class ToolCall(msgspec.Struct, kw_only=True):
    """``tools/call`` params."""

    name: str
    arguments: dict[str, Any] = {}


class TextContent(msgspec.Struct):
    text: str
    type: str = "text"


class ToolResult(msgspec.Struct, omit_defaults=True, rename="camel"):
    content: list[TextContent]
    is_error: bool
    structured_content: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET


def failure(request_id: RequestId | None, code: int, message: str) -> Response:
    return Response(jsonrpc=JSONRPC, id=request_id, error=RpcError(code=code, message=message))
