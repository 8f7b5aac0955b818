"""One mapping from errors to HTTP answers (C3).

Malformed input -> 422 with the spec's validation body ``{detail: [{loc, msg, type,
input, ctx}]}``; every other error -> ``{"detail": "<sentence>", "code": "<code>"}``.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
import structlog
from litestar import Request, Response
from litestar.exceptions import (
    HTTPException,
    MethodNotAllowedException,
    NotAuthorizedException,
    NotFoundException,
    PermissionDeniedException,
    ValidationException,
)
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from domain.shared.errors import Conflict, DomainError, Forbidden, Invalid, NotFound, Unavailable
from projections.engine.unavailable import RETRY_AFTER_SECONDS, unavailable

log = structlog.get_logger("squadops.api")

_PATH = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_SEGMENT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")
_MISSING = re.compile(r"Object missing required field `(?P<field>[^`]+)`")

STATUS_BY_ERROR: tuple[tuple[type[DomainError], int], ...] = (
    (NotFound, 404),
    (Conflict, 409),
    (Invalid, 400),
    (Forbidden, 403),
    (Unavailable, 503),
)


class ApiError(Exception):
    """An HTTP error with the C3 body."""

    def __init__(self, status: int, detail: str, code: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.code = code


class RequestInvalid(Exception):
    """Malformed input found by a handler (422 with the spec's body)."""

    def __init__(self, loc: list[Any], msg: str, type_: str = "value_error", input_: Any = None, ctx: dict[str, Any] | None = None) -> None:
        super().__init__(msg)
        self.items = [validation_item(loc, msg, type_, input_, ctx)]


def validation_item(loc: list[Any], msg: str, type_: str, input_: Any = None, ctx: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"loc": loc, "msg": msg, "type": type_, "input": input_, "ctx": ctx or {}}


def _type_of(message: str) -> str:
    if message.startswith("Object missing required field"):
        return "missing"
    if message.startswith("Expected `") and "got" in message:
        return "type_error"
    if "matching regex" in message:
        return "string_pattern_mismatch"
    if "length" in message:
        return "string_length"
    if ">=" in message or "<=" in message or ">" in message or "<" in message:
        return "range_error"
    if message.startswith("Invalid enum value"):
        return "enum"
    if "unknown field" in message.lower():
        return "extra_forbidden"
    return "value_error"


def _loc(source: str, key: str, cause_message: str) -> tuple[list[Any], str]:
    """``(loc, message)`` from a Litestar/msgspec validation failure."""
    loc: list[Any] = [source]
    message = cause_message
    match = _PATH.search(cause_message)
    if match:
        message = cause_message[: match.start()]
        path = match.group("path")
        segments = [m.group(1) if m.group(1) is not None else int(m.group(2)) for m in _SEGMENT.finditer(path)]
        if source == "body" and segments[:1] == ["data"]:
            segments = segments[1:]
        loc.extend(segments)
    elif key and key != "data":
        loc.append(key)
    missing = _MISSING.match(message)
    if missing:
        loc.append(missing.group("field"))
    return loc, message


def validation_response(items: list[dict[str, Any]]) -> Response[Any]:
    return Response({"detail": items}, status_code=422)


def _input_at(request: Request[Any, Any, Any], loc: list[Any]) -> Any:
    """The offending input value, read back from the request where it can be."""
    try:
        if loc[0] == "body":
            raw = request._connection_state.body
            value: Any = msgspec.json.decode(raw) if isinstance(raw, bytes) and raw else None
            for part in loc[1:]:
                value = value[part]
            return value
        if loc[0] == "query" and len(loc) > 1:
            return request.query_params.get(str(loc[1]))
        if loc[0] == "path" and len(loc) > 1:
            return request.path_params.get(str(loc[1]))
        if loc[0] == "header" and len(loc) > 1:
            return request.headers.get(str(loc[1]))
    except (KeyError, IndexError, TypeError, msgspec.DecodeError, AttributeError):
        return None
    return None


_MISSING_PARAMETER = re.compile(r"Missing required (?P<source>\w+) parameter '(?P<name>[^']+)'")


def _source(raw: Any) -> str:
    """``query``/``path``/``header``/``cookie``/``body`` (Litestar may hand an enum)."""
    value = getattr(raw, "value", raw)
    return str(value or "body").lower()


def handle_validation(request: Request[Any, Any, Any], exc: ValidationException) -> Response[Any]:
    extra = exc.extra if isinstance(exc.extra, list) else []
    missing = _MISSING_PARAMETER.match(str(exc.detail))
    if missing and not extra:
        loc = [missing.group("source"), missing.group("name")]
        return validation_response([validation_item(loc, f"Missing required {loc[0]} parameter {loc[1]!r}", "missing")])
    cause = str(exc.__cause__) if exc.__cause__ is not None else ""
    items = []
    for entry in extra or [{}]:
        source = _source(entry.get("source"))
        key = str(entry.get("key") or "")
        message = str(entry.get("message") or exc.detail)
        detail = cause if cause and len(extra) <= 1 else message
        loc, msg = _loc(source, key, detail)
        type_ = _type_of(msg)
        value = None if type_ == "missing" else _input_at(request, loc)
        items.append(validation_item(loc, msg, type_, value))
    return validation_response(items)


def body_invalid(message: str, body: Any) -> RequestInvalid:
    """The 422 for a decoded ``body`` that does not fit its type (a msgspec message)."""
    loc, msg = _loc("body", "", message)
    type_ = _type_of(msg)
    value = body
    try:
        for part in loc[1:]:
            value = value[part]
    except (KeyError, IndexError, TypeError):
        value = None
    return RequestInvalid(loc, msg, type_, None if type_ == "missing" else value)


def handle_request_invalid(request: Request[Any, Any, Any], exc: RequestInvalid) -> Response[Any]:
    return validation_response(exc.items)


def error_body(status: int, detail: str, code: str) -> Response[Any]:
    return Response({"detail": detail, "code": code}, status_code=status)


def handle_api_error(request: Request[Any, Any, Any], exc: ApiError) -> Response[Any]:
    return error_body(exc.status, exc.detail, exc.code)


def handle_domain_error(request: Request[Any, Any, Any], exc: DomainError) -> Response[Any]:
    if isinstance(exc, Unavailable):  # C19: clients come back after Retry-After
        response = error_body(503, exc.message, exc.code)
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    for kind, status in STATUS_BY_ERROR:
        if isinstance(exc, kind):
            return error_body(status, exc.message, exc.code)
    return error_body(400, exc.message, exc.code)


def handle_http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    status = exc.status_code
    if status == 400 and ("JSON is malformed" in str(exc.detail) or "truncated" in str(exc.detail)):
        return validation_response(
            [validation_item(["body"], f"Body is not valid JSON: {exc.detail}", "json_invalid")]
        )
    if isinstance(exc, NotFoundException):
        code = "not_found"
        detail = "No such path." if exc.detail in ("Not Found", "") else exc.detail
    elif isinstance(exc, MethodNotAllowedException):
        code, detail = "method_not_allowed", "This method is not allowed on this path."
    elif isinstance(exc, NotAuthorizedException):
        code, detail = "unauthenticated", exc.detail
    elif isinstance(exc, PermissionDeniedException):
        code, detail = "forbidden", exc.detail
    elif status == 413:
        limit = request.route_handler.resolve_request_max_body_size()
        code, detail = "body_too_large", f"The request body is larger than this endpoint accepts ({limit} bytes)."
    elif status == 400:
        # Litestar answers some malformed input (bad headers, bad encodings) with 400.
        return validation_response([validation_item(["body"], str(exc.detail), "value_error")])
    else:
        code, detail = "http_error", str(exc.detail)
    headers = getattr(exc, "headers", None)
    response = error_body(status, detail, code)
    if headers:
        response.headers.update(headers)
    return response


def handle_unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    if isinstance(exc, msgspec.ValidationError):
        loc, msg = _loc("body", "", str(exc))
        return validation_response([validation_item(loc, msg, _type_of(msg))])
    outage = unavailable(exc)  # C19: the database or broker cannot be reached
    if outage is not None:
        log.warning("store_unavailable", path=request.url.path, error=repr(exc))
        return handle_domain_error(request, outage)
    log.exception("unhandled_error", path=request.url.path, error=repr(exc))
    return error_body(
        HTTP_500_INTERNAL_SERVER_ERROR, "The service failed to answer; it was logged.", "internal_error"
    )


EXCEPTION_HANDLERS: dict[Any, Any] = {
    ValidationException: handle_validation,
    RequestInvalid: handle_request_invalid,
    ApiError: handle_api_error,
    DomainError: handle_domain_error,
    HTTPException: handle_http_error,
    Exception: handle_unexpected,
}
