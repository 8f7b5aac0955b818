"""Several read-model documents, and the newest rows of a few partitions, in one round trip.

A feed read needs a handful of documents from different read models and the newest items
of the run's log dock; on PostgreSQL they all come back from one prepared ``UNION ALL``
query instead of one query each. A read model whose table is missing (or a query that
fails) answers None (or no rows) for its part only; but a database that cannot be reached
fails the whole lookup (C19: 503, never a false "not found").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import structlog

from projections.engine.store import DocStore, table_name
from projections.engine.unavailable import unavailable

log = structlog.get_logger("squadops.lookups")


class Newest(NamedTuple):
    """The newest ``limit`` rows of ``partition`` of read model ``name``, by sort key."""

    name: str
    partition: str
    limit: int


def fetch(
    store: DocStore, docs: Mapping[str, tuple[str, str]], scans: Mapping[str, Newest] | None = None
) -> tuple[dict[str, bytes | None], dict[str, list[bytes]]]:
    """``part -> (read model, key)`` and ``part -> Newest`` in; bodies (newest first) out."""
    scans = scans or {}
    if store.dialect == "postgres" and len(docs) + len(scans) > 1:
        try:
            return _union(store, docs, scans)
        except Exception as exc:  # one bad table must not cost the others: ask one by one
            if unavailable(exc) is not None:  # no part can be answered: fail the lookup
                raise
            log.warning("lookup_union_failed", error=repr(exc))
    found: dict[str, bytes | None] = {}
    for part, (name, key) in docs.items():
        try:
            found[part] = store.get(name, key)
        except Exception as exc:
            if unavailable(exc) is not None:  # no part can be answered: fail the lookup
                raise
            log.warning("lookup_failed", read_model=name, error=repr(exc))
            found[part] = None
    rows: dict[str, list[bytes]] = {}
    for part, scan in scans.items():
        try:
            rows[part] = [r.body for r in store.scan(scan.name, partition=scan.partition, limit=scan.limit, descending=True)]
        except Exception as exc:
            if unavailable(exc) is not None:  # no part can be answered: fail the lookup
                raise
            log.warning("lookup_failed", read_model=scan.name, error=repr(exc))
            rows[part] = []
    return found, rows


def _union(
    store: DocStore, docs: Mapping[str, tuple[str, str]], scans: Mapping[str, Newest]
) -> tuple[dict[str, bytes | None], dict[str, list[bytes]]]:
    parts = list(docs) + list(scans)
    selects, params = [], []
    for index, part in enumerate(parts):
        if part in docs:
            name, key = docs[part]
            selects.append(f"SELECT {index} AS i, s, v FROM {table_name(name)} WHERE k = %s")
            params.append(key)
        else:
            scan = scans[part]
            selects.append(
                f"(SELECT {index} AS i, s, v FROM {table_name(scan.name)} WHERE p = %s ORDER BY s DESC LIMIT %s)"
            )
            params += [scan.partition, scan.limit]
    sql = " UNION ALL ".join(selects)
    result = store.reading(lambda conn: conn.execute(sql, params, prepare=True).fetchall())  # type: ignore[attr-defined]
    found: dict[str, bytes | None] = dict.fromkeys(docs)
    listed: dict[str, list[tuple[str, bytes]]] = {part: [] for part in scans}
    for index, sort, body in result:
        part = parts[index]
        if part in found:
            found[part] = bytes(body)
        else:
            listed[part].append((sort, bytes(body)))
    return found, {part: [body for _, body in sorted(items, reverse=True)] for part, items in listed.items()}
