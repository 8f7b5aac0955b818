"""What a commit tells readers that keep copies of read-model documents (PostgreSQL NOTIFY).

A projector marked ``announced`` has every commit of its rows say, on ``CHANNEL`` and in
the same transaction (so only once it is committed, and in commit order), which keys it
changed and the position it moved to. A reader that listens can then keep copies of
those documents in memory and know exactly when one stops being current (see
``projections.engine.copies``).

One notification is one entry, ``[name, position, keys]``: ``keys`` None means "every
document of ``name``" (a blue/green swap). The keys of one change are split over entries
that fit PostgreSQL's payload bound; only the last carries the position (the others 0),
so a reader never counts a position reached before all its keys were dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

CHANNEL = "squadops_read_models"
PAYLOAD_BYTES = 7000  # PostgreSQL's bound is 8000 bytes


class Entry(msgspec.Struct, array_like=True, frozen=True):
    name: str
    position: int
    keys: list[str] | None


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(Entry).decode


def entries(name: str, position: int, keys: Sequence[str] | None) -> list[str]:
    """The payloads announcing one change (``keys`` None: every document of ``name``)."""
    if keys is None:
        return [_encode(Entry(name, position, None)).decode()]
    budget = PAYLOAD_BYTES - len(name) - 40
    chunks: list[list[str]] = [[]]
    size = 0
    for key in keys:
        cost = len(key.encode()) * 2 + 3  # JSON escaping at worst doubles it
        if cost > budget:  # cannot be named in one payload: drop every copy instead
            return [_encode(Entry(name, position, None)).decode()]
        if size + cost > budget:
            chunks.append([])
            size = 0
        chunks[-1].append(key)
        size += cost
    last = len(chunks) - 1
    return [_encode(Entry(name, position if i == last else 0, chunk)).decode() for i, chunk in enumerate(chunks)]


def read(payload: str) -> Entry | None:
    """The entry a payload holds; None for one this version cannot read."""
    try:
        return _decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
