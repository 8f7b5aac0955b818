"""Project metadata read the same in camelCase and snake_case.

Casing must never be read as missing ownership or missing source references, so every
reader of project metadata goes through ``pick``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_CAMEL_BOUNDARY = re.compile(r"(?<!^)(?=[A-Z])")


def snake(name: str) -> str:
    return _CAMEL_BOUNDARY.sub("_", name).lower()


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def pick(meta: Mapping[str, Any] | None, name: str, default: Any = None) -> Any:
    """The value under ``name`` in either casing (snake_case wins when both are set)."""
    if not meta:
        return default
    snake_name, camel_name = snake(name), camel(snake(name))
    if snake_name in meta and meta[snake_name] is not None:
        return meta[snake_name]
    if camel_name in meta and meta[camel_name] is not None:
        return meta[camel_name]
    return default


def normalise_keys(value: Any) -> Any:
    """A copy of ``value`` with every mapping key in snake_case."""
    if isinstance(value, Mapping):
        return {snake(str(k)): normalise_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise_keys(v) for v in value]
    return value
