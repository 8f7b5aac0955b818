"""The one place request bodies are decoded: anything undecodable is a 422, never a 500.

Litestar decodes a JSON body with msgspec, which raises ``RecursionError`` for deep
nesting and ``UnicodeDecodeError`` for invalid UTF-8 inside strings; neither is a
``DecodeError``, so both used to escape as 500s. ``JsonRequest`` (the app's request
class) refuses them, and every other malformed body, with the C3 validation body.

Nesting is bounded well below the interpreter's recursion limit: a body nested just
under it would decode here, then fail to encode or decode again later (in the event
store, a projector, a replay) where no request can be refused any more.

A decoded body is then checked strictly against the type its handler declares
(``data: JSONBody[T]``): Litestar converts it leniently (``strict=False``, which suits
query strings), so ``"dry_run": 0`` would pass as ``false`` and ``"1"`` as a number. JSON
says what a value is: a body whose values are not of the documented types is a 422.
"""

from __future__ import annotations

import weakref
from typing import Any

import anyio.to_thread
import msgspec
from litestar import Request
from litestar.exceptions import SerializationException
from litestar.serialization import decode_json
from litestar.types import Empty

from api.errors import RequestInvalid, body_invalid

MAX_BODY_DEPTH = 64
# The largest body an endpoint takes unless it names its own limit (``request_max_body_size``
# on the handler): more is a 413 ``body_too_large``, refused from Content-Length before a
# byte of it is read.
MAX_BODY_BYTES = 1 << 20
# Bodies above this are decoded and checked in a worker thread, never on the event loop
# (eight 1 MiB bodies decoded there would hold up every other request meanwhile).
OFF_LOOP_BYTES = 64 << 10
_CONTAINERS = (dict, list)


def nesting_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests objects/arrays deeper than ``limit`` levels (iteratively)."""
    level = [value] if type(value) in _CONTAINERS else []
    for _ in range(limit):
        children: list[Any] = []
        for node in level:
            children.extend(node.values() if type(node) is dict else node)
        level = [child for child in children if type(child) in _CONTAINERS]
        if not level:
            return False
    return bool(level)


def undecodable(message: str) -> RequestInvalid:
    return RequestInvalid(["body"], f"Body is not valid JSON: {message}", "json_invalid")


def check_depth(raw: bytes, value: Any, limit: int = MAX_BODY_DEPTH) -> None:
    """Raises the 422 when ``value`` (decoded from ``raw``) nests deeper than ``limit``."""
    # Fewer brackets than the limit cannot nest deeper: skip the walk for ordinary bodies.
    if raw.count(b"[") + raw.count(b"{") > limit and nesting_exceeds(value, limit):
        raise undecodable(f"it nests deeper than {limit} levels")


class JsonRequest(Request[Any, Any, Any]):
    """The app's request class: ``json()`` answers a 422 for any body it cannot decode;
    a large body is decoded off the event loop (``OFF_LOOP_BYTES``)."""

    async def json(self) -> Any:
        if self._json is not Empty:
            return self._json
        if self._connection_state.json is not Empty:
            self._json = self._connection_state.json
            return self._json
        raw = await self.body()
        handler = self.scope.get("route_handler")
        decoders = self.route_handler.resolve_type_decoders()
        if len(raw) > OFF_LOOP_BYTES:
            value = await anyio.to_thread.run_sync(decode_checked, raw, handler, decoders)
        else:
            value = decode_checked(raw, handler, decoders)
        self._json = self._connection_state.json = value
        return value


def decode_checked(raw: bytes, handler: Any, decoders: Any = None) -> Any:
    """The JSON value of ``raw``, checked (depth, the handler's declared type): 422s otherwise."""
    try:
        value = decode_json(raw or b"null", type_decoders=decoders)
    except RecursionError:
        raise undecodable(f"it nests deeper than {MAX_BODY_DEPTH} levels") from None
    except UnicodeDecodeError as exc:
        raise undecodable(f"invalid UTF-8 ({exc.reason})") from None
    except SerializationException as exc:
        raise undecodable(str(exc)) from None
    check_depth(raw, value)
    declared = _declared_body(handler)
    if declared is not None:
        try:
            msgspec.convert(_integral(value), declared, strict=True, str_keys=True)
        except msgspec.ValidationError as exc:
            raise body_invalid(str(exc), value) from None
    return value


def _integral(value: Any) -> Any:
    """``value`` with integral floats as ints: JSON's ``30.0`` is the integer 30 (JSON
    Schema agrees), and an int stays acceptable where a float is declared."""
    if type(value) is float:
        return int(value) if value.is_integer() else value
    if type(value) is dict:
        return {k: _integral(v) for k, v in value.items()}
    if type(value) is list:
        return [_integral(v) for v in value]
    return value


# Keyed by the handler object itself (weakly): an id() could be reused by another app's
# handler once the first is collected, and then a body would be checked against the
# wrong type.
_DECLARED: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _declared_body(handler: Any) -> Any:
    """The type a handler's ``data`` declares (``None``: no body, or any JSON)."""
    if handler is None:
        return None
    try:
        return _DECLARED[handler]
    except KeyError:
        pass
    field = getattr(handler, "parsed_fn_signature", None)
    data = field.parameters.get("data") if field is not None else None
    declared = getattr(data, "annotation", None)
    _DECLARED[handler] = found = None if declared in (None, Any) else declared
    return found
