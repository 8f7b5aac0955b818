"""A msgspec transcoder for the event store, byte-compatible with the library's JSON one.

Event payloads in this service are JSON values by design (times are ISO strings); the
only typed value is the event's own top-level ``timestamp``, stored in the library's
``{"_type_": "datetime_iso", "_data_": ...}`` form so events written by either
transcoder read the same. A stored event lives forever, so anything that would not
read back as the value written is refused at encode time, at every depth, with
:class:`EventPayloadError`:

- a top level that is not a mapping (the mapper always hands over one);
- values of any type but ``dict`` (string keys), ``list``, ``str``, ``int``, ``bool``,
  ``None`` and finite ``float``: a datetime, UUID or Decimal would come back a string,
  a tuple or set a list, a subclass (an Enum, a ``str`` subclass) its base type;
- NaN and ±Infinity (msgspec writes them as ``null``, the library as bare ``NaN``,
  which is not JSON);
- a mapping shaped ``{"_type_": …, "_data_": …}``, which the library's transcoder would
  read back as a typed value.

Valid values are written with the library's exact bytes: msgspec and ``json`` agree on
everything but the exponent form of floats (``1e16`` against ``1e+16``), so such rare
floats are written with Python's ``repr`` through ``msgspec.Raw``.

Decoding reads whatever the library's transcoder wrote, as it would read it: bare
``NaN``/``Infinity`` tokens (which strict JSON parsers refuse) and, at any depth, the
library's default typed forms (datetime, UUID, Decimal); a typed form it would not know
raises its ``TranscodingNotRegisteredError`` instead of reading back as a plain dict.
Events this service writes carry one typed form, the timestamp, so the common case
costs one substring count over the bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import msgspec
from eventsourcing.persistence import Transcoder, TranscodingNotRegisteredError

from projections.engine.stored_json import load_json


class EventPayloadError(TypeError, ValueError):
    """An event payload holds a value the event store would not read back unchanged."""

    def __init__(self, reason: str, path: tuple[str | int, ...] = ()) -> None:
        self.reason = reason
        self.path = path
        super().__init__(reason)

    def at(self, key: str | int) -> EventPayloadError:
        """The same refusal one level further out (paths are built while unwinding)."""
        return EventPayloadError(self.reason, (key, *self.path))

    def __str__(self) -> str:
        where = "".join(f"[{k!r}]" for k in self.path) or "the top level"
        return f"event payload refused at {where}: {self.reason}"


_PLAIN = frozenset({str, int, bool, type(None)})
# Python's repr (and so the library's bytes) uses an exponent outside this range.
_LOW, _HIGH = 1e-4, 1e16


def _refused(value: Any) -> EventPayloadError:
    name = type(value).__name__
    if type(value) is float:
        return EventPayloadError(f"{value!r} is not a JSON number")
    if isinstance(value, (str, int, float, dict, list)):
        return EventPayloadError(f"{name} is a subclass of a JSON type and would read back as its base type")
    return EventPayloadError(f"{name} is not a JSON value")


def _float(value: float) -> Any:
    if value - value != 0.0:  # NaN or ±Infinity
        raise _refused(value)
    if value and not _LOW <= abs(value) < _HIGH:
        return msgspec.Raw(repr(value).encode())
    return value


def _checked_dict(value: dict[Any, Any]) -> dict[Any, Any]:
    """``value`` itself when it is JSON as the library writes it, else a faithful copy.

    A copy is made only around floats that need the library's exponent form; anything
    that cannot be stored faithfully raises :class:`EventPayloadError`. Plain values
    cost one type check; only containers recurse.
    """
    out = _checked_items(value, _string_keyed(value), dict)
    if len(value) == 2 and "_type_" in value and "_data_" in value:
        raise EventPayloadError("a {'_type_', '_data_'} mapping reads back as a typed value")
    return out


def _string_keyed(value: dict[Any, Any]) -> Iterator[tuple[str, Any]]:
    for key, item in value.items():
        if type(key) is not str:
            raise EventPayloadError(f"key {key!r} is not a string (JSON would make it one)")
        yield key, item


def _checked_list(value: list[Any]) -> list[Any]:
    return _checked_items(value, enumerate(value), list)


def _checked_items(value: Any, items: Iterable[tuple[Any, Any]], copy: Callable[[Any], Any]) -> Any:
    """``value`` (a dict or a list, its ``items`` as (key or index, item)) checked item by
    item; copied with ``copy`` at the first item that must change."""
    out = value
    for at, item in items:
        if type(item) in _PLAIN:
            continue
        try:
            checked = _checked(item)
        except EventPayloadError as e:
            raise e.at(at) from None
        if checked is not item:
            if out is value:
                out = copy(value)
            out[at] = checked
    return out


def _checked(item: Any) -> Any:
    """A container or float as ``_checked_dict`` answers for its values."""
    kind = type(item)
    if kind is dict:
        return _checked_dict(item)
    if kind is list:
        return _checked_list(item)
    if kind is float:
        return _float(item)
    raise _refused(item)


class MsgspecTranscoder(Transcoder):
    """Encodes event state as the library's ``JSONTranscoder`` does, refusing what it would change."""

    def __init__(self) -> None:
        self._encode = msgspec.json.Encoder().encode
        self._decode = msgspec.json.Decoder().decode

    def encode(self, obj: Any) -> bytes:
        if type(obj) is not dict:
            if not isinstance(obj, Mapping):
                raise EventPayloadError(f"the top level must be a mapping, got {type(obj).__name__}")
            obj = dict(obj)
        timestamp = obj.get("timestamp")
        if type(timestamp) is not datetime:
            return self._encode(_checked_dict(obj))
        return self.encode_owned(dict(obj))  # the caller's mapping is never changed

    def encode_owned(self, obj: dict[str, Any]) -> bytes:
        """``encode`` of a dict the caller hands over (it may be changed): one copy less."""
        timestamp = obj.get("timestamp")
        if type(timestamp) is not datetime:
            return self._encode(_checked_dict(obj))
        obj["timestamp"] = None
        state = _checked_dict(obj)
        state["timestamp"] = {"_type_": "datetime_iso", "_data_": timestamp.isoformat()}
        return self._encode(state)

    def decode(self, data: bytes) -> Any:
        return self.decode_stamped(data)[0]

    def decode_stamped(self, data: bytes) -> tuple[Any, str | None]:
        """``decode``, and the event's timestamp as it was stored (the text the datetime was
        read from), or None when it is not the one typed value of the payload."""
        state = load_json(data, self._decode)
        timestamp = state.get("timestamp") if type(state) is dict else None
        stamp = None
        if (
            type(timestamp) is dict
            and len(timestamp) == 2
            and timestamp.get("_type_") == "datetime_iso"
            and data.count(_TAG) == 1
        ):
            stamp = timestamp["_data_"]
            state["timestamp"] = datetime.fromisoformat(stamp)
        elif _TAG in data:
            state = _revived(state)
        if type(state) is not dict:
            raise EventPayloadError(f"stored state is a {type(state).__name__}, not a mapping")
        return state, stamp


_TAG = b'"_type_"'
# The transcodings the library's Application registers by default.
_REVIVERS = {"datetime_iso": datetime.fromisoformat, "uuid_hex": UUID, "decimal_str": Decimal}


def _revived(value: Any) -> Any:
    """``value`` with the library's typed forms read back as the library reads them."""
    if type(value) is list:
        for i, item in enumerate(value):
            if type(item) in (dict, list):
                value[i] = _revived(item)
        return value
    if type(value) is not dict:
        return value
    for key, item in value.items():
        if type(item) in (dict, list):
            value[key] = _revived(item)
    if len(value) == 2 and "_type_" in value and "_data_" in value:
        name = value["_type_"]
        revive = _REVIVERS.get(name) if type(name) is str else None
        if revive is None:
            raise TranscodingNotRegisteredError(
                f"Data serialized with name '{name}' is not deserializable. "
                "Please register a custom transcoding for this type."
            )
        return revive(value["_data_"])
    return value
