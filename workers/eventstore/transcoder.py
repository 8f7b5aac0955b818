"""A msgspec transcoder for the event store, byte-compatible with the library's JSON one.

Event payloads in this service are JSON primitives by design (times are ISO strings);
the only typed value is the event's own ``timestamp``, stored in the library's
``{"_type_": "datetime_iso", "_data_": ...}`` form so events written by either
transcoder read the same. Anything else that is not a JSON primitive is refused at
encode time rather than silently changed.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import msgspec
from eventsourcing.persistence import Transcoder

_TYPED = (datetime, UUID, Decimal, bytes, set, frozenset)


def _refuse(obj: Any) -> Any:
    raise TypeError(f"event payloads hold JSON primitives only, got {type(obj).__name__}")


class MsgspecTranscoder(Transcoder):
    def __init__(self) -> None:
        self._encode = msgspec.json.Encoder(enc_hook=_refuse).encode
        self._decode = msgspec.json.Decoder().decode

    def encode(self, obj: Any) -> bytes:
        state = dict(obj)
        for key, value in state.items():
            if isinstance(value, _TYPED) and key != "timestamp":
                _refuse(value)
        timestamp = state.get("timestamp")
        if isinstance(timestamp, datetime):
            state["timestamp"] = {"_type_": "datetime_iso", "_data_": timestamp.isoformat()}
        return self._encode(state)

    def decode(self, data: bytes) -> Any:
        state = self._decode(data)
        timestamp = state.get("timestamp") if isinstance(state, dict) else None
        if isinstance(timestamp, dict) and timestamp.get("_type_") == "datetime_iso":
            state["timestamp"] = datetime.fromisoformat(timestamp["_data_"])
        return state
