"""Several read-model documents in one round trip.

A read needs a handful of documents from different read models (a project and its stored
feed, a run's board row); on PostgreSQL they all come back from one prepared ``UNION ALL``
query instead of one query each. A read model whose table is missing (or a query that
fails) answers None for its part only; but a database that cannot be reached fails the
whole lookup (C19: 503, never a false "not found").
"""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from projections.engine.store import DocStore, table_name
from projections.engine.unavailable import unavailable

log = structlog.get_logger("squadops.lookups")


def fetch(store: DocStore, docs: Mapping[str, tuple[str, str]]) -> dict[str, bytes | None]:
    """``part -> (read model, key)`` in; each part's body (None: no such document) out."""
    if store.dialect == "postgres" and len(docs) > 1:
        try:
            return _union(store, docs)
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
    return found


def _union(store: DocStore, docs: Mapping[str, tuple[str, str]]) -> dict[str, bytes | None]:
    parts = list(docs)
    selects, params = [], []
    for index, part in enumerate(parts):
        name, key = docs[part]
        selects.append(f"SELECT {index} AS i, v FROM {table_name(name)} WHERE k = %s")
        params.append(key)
    sql = " UNION ALL ".join(selects)
    result = store.reading(lambda conn: conn.execute(sql, params, prepare=True).fetchall())  # type: ignore[attr-defined]
    found: dict[str, bytes | None] = dict.fromkeys(parts)
    for index, body in result:
        found[parts[index]] = bytes(body)
    return found
