"""Many documents, and the newest keys of many partitions, in one round trip.

A derived read model (the stored feed) composes the documents of every run a batch
touched: instead of a few queries per run, it asks for all of them at once. On
PostgreSQL one ``UNION ALL`` query answers the documents by key (``k = ANY``) and, per
partition, the keys and sort keys of its newest rows (a ``LATERAL`` index scan each, no
bodies: the caller usually holds them in memory). Elsewhere (SQLite, in process) each
read model and partition is asked on its own.

As with ``projections.engine.lookups``: a read model whose table is missing (or a query
that fails) answers nothing for its part only; a database that cannot be reached fails
the whole read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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


NewestKeys = dict[tuple[str, str], list[tuple[str, str, bytes | None]]]  # (model, partition) -> [(sort key, key, body)], newest first


def read_many(
    store: DocStore, docs: Mapping[str, Iterable[str]], partitions: Mapping[str, Iterable[str]], limit: int
) -> tuple[dict[tuple[str, str], bytes], NewestKeys]:
    """``model -> keys`` and ``model -> partitions`` in; the bodies found by (model, key),
    and each partition's newest ``limit`` rows as (sort key, key, body or None: not read)."""
    docs = {name: sorted(set(keys)) for name, keys in docs.items()}
    partitions = {name: sorted(set(ps)) for name, ps in partitions.items()}
    docs = {name: keys for name, keys in docs.items() if keys}
    partitions = {name: ps for name, ps in partitions.items() if ps}
    if not docs and not partitions:
        return {}, {}
    if store.dialect == "postgres":
        try:
            return _union(store, docs, partitions, limit)
        except Exception as exc:  # one bad table must not cost the others: ask one by one
            if unavailable(exc) is not None:
                raise
            log.warning("bulk_union_failed", error=repr(exc))
    found: dict[tuple[str, str], bytes] = {}
    for name, keys in docs.items():
        try:
            found.update(((name, k), body) for k, body in store.get_many(name, keys).items())
        except Exception as exc:
            if unavailable(exc) is not None:
                raise
            log.warning("lookup_failed", read_model=name, error=repr(exc))
    newest: NewestKeys = {}
    for name, names_partitions in partitions.items():
        for partition in names_partitions:
            try:
                rows = store.scan(name, partition=partition, limit=limit, descending=True)
            except Exception as exc:
                if unavailable(exc) is not None:
                    raise
                log.warning("lookup_failed", read_model=name, error=repr(exc))
                rows = []
            newest[(name, partition)] = [(r.sort_key, r.key, r.body) for r in rows]
    return found, newest


def _union(
    store: DocStore, docs: dict[str, list[str]], partitions: dict[str, list[str]], limit: int
) -> tuple[dict[tuple[str, str], bytes], NewestKeys]:
    names: list[str] = []
    selects: list[str] = []
    params: list[object] = []
    for name, keys in docs.items():
        selects.append(
            f"SELECT {len(names)} AS i, k, '' AS p, '' AS s, v FROM {table_name(name)} WHERE k = ANY(%s::text[])"
        )
        names.append(name)
        params.append(keys)
    for name, ps in partitions.items():
        selects.append(
            f"SELECT {len(names)}, x.k, q.p, x.s, NULL::bytea FROM unnest(%s::text[]) AS q(p) CROSS JOIN LATERAL "
            f'(SELECT k, s FROM {table_name(name)} t WHERE t.p = q.p COLLATE "C" ORDER BY s DESC LIMIT %s) x'
        )
        names.append(name)
        params += [ps, limit]
    sql = " UNION ALL ".join(selects)
    result = store.reading(lambda conn: conn.execute(sql, params).fetchall())  # type: ignore[attr-defined]
    found: dict[tuple[str, str], bytes] = {}
    newest: NewestKeys = {(name, p): [] for name, ps in partitions.items() for p in ps}
    for index, key, p, sort, body in result:
        name = names[index]
        if index < len(docs):
            found[(name, key)] = bytes(body)
        else:
            newest[(name, p)].append((sort, key, None))
    for rows in newest.values():
        rows.sort(reverse=True)
    return found, newest
