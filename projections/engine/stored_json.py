"""Reading stored event JSON, as the library's transcoder may have written it."""

from __future__ import annotations

import json
from typing import Any

import msgspec


def load_json(data: bytes, decode: Any = msgspec.json.decode) -> Any:
    """Stored JSON, including the bare NaN/Infinity tokens Python's ``json`` writes."""
    try:
        return decode(data)
    except msgspec.ValidationError:
        raise
    except msgspec.DecodeError:
        return json.loads(data)
