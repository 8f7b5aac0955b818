"""What the log keeps of a tool call's result: its first bytes, its whole size, and whether
it was cut (a command's output or a file's text can be megabytes; the log must not grow
without bound). Pure."""

from __future__ import annotations

from typing import NamedTuple

KEPT_BYTES = 4096


class KeptResult(NamedTuple):
    text: str  # the result's first KEPT_BYTES bytes (UTF-8), cut on a character boundary
    size: int  # the whole result's size in bytes
    truncated: bool


def kept(result: str, limit: int = KEPT_BYTES) -> KeptResult:
    raw = result.encode("utf-8", "replace")
    if len(raw) <= limit:
        return KeptResult(result, len(raw), False)
    return KeptResult(raw[:limit].decode("utf-8", "ignore"), len(raw), True)
