"""Model usage read models: what the metered model traffic cost, per agent, run, project and employee.

Folded from ``ModelUsage.Recorded`` only (the proxy's records): a rebuild refolds the
records as they were priced and re-sends nothing. Documents (``usage/<level>/<tenant>/…``):

- ``usage/run/<tenant>/<run_id>``: the run's totals and, under ``agents``, each agent's;
- ``usage/project/<tenant>/<project_slug>`` and ``usage/employee/<tenant>/<employee>``:
  totals, with ``by_model`` per upstream model.

- ``usage/record/<tenant>/<run_id>/<request id>``: one row per request of a run, in partition
  ``usage-records/<tenant>/<run_id>`` sorted by log position: which records time travel
  reads from the event log to show a run's cost as it was (``record_ids``).

Totals: ``requests``, ``tokens_in`` (cached included), ``cached_tokens``, ``tokens_out``,
``cost_usd``, ``partial_requests`` (streams cut or abandoned: their delivered part) and
``unpriced_requests`` (an upstream model with no price: cost 0).
"""

from __future__ import annotations

from typing import Any

import msgspec

from domain.workspaces import events as ev
from domain.workspaces.usage import ModelUsage
from projections.engine.docs import Docs, Projector
from projections.engine.envelope import Envelope

TABLE = "model_usage"
COUNTS = ("requests", "tokens_in", "cached_tokens", "tokens_out", "partial_requests", "unpriced_requests")


def run_key(tenant: str, run_id: str) -> str:
    return f"usage/run/{tenant}/{run_id}"


def project_key(tenant: str, project_slug: str) -> str:
    return f"usage/project/{tenant}/{project_slug}"


def employee_key(tenant: str, employee: str) -> str:
    return f"usage/employee/{tenant}/{employee.lower()}"


def records_partition(tenant: str, run_id: str) -> str:
    return f"usage-records/{tenant}/{run_id}"


def position_key(position: int) -> str:
    return f"{position:015d}"


def record_ids(store: Any, tenant: str, run_id: str, upto: int, page: int = 1000) -> list[str]:
    """The ids of the usage records of a run at log positions up to ``upto`` (as far as this
    read model has read the log)."""
    ids: list[str] = []
    after = ""
    while True:
        rows = store.scan(TABLE, partition=records_partition(tenant, run_id), after=after,
                          before=position_key(upto + 1), limit=page)
        ids.extend(msgspec.json.decode(row.body)["id"] for row in rows)
        if len(rows) < page:
            return ids
        after = rows[-1].sort_key


def empty_totals() -> dict[str, Any]:
    return {**dict.fromkeys(COUNTS, 0), "cost_usd": 0.0}


def add(totals: dict[str, Any], e: ev.UsageRecorded) -> None:
    totals["requests"] += e.requests
    totals["tokens_in"] += e.tokens_in
    totals["cached_tokens"] += e.cached_tokens
    totals["tokens_out"] += e.tokens_out
    totals["partial_requests"] += int(e.partial)
    totals["unpriced_requests"] += int(not e.priced)
    # Rounded at every step: the same records in the same order give the same bytes.
    totals["cost_usd"] = round(totals["cost_usd"] + e.cost_usd, 9)


class UsageProjector(Projector):
    name = TABLE
    topics = frozenset(ev.USAGE_EVENTS)

    def apply(self, env: Envelope, docs: Docs) -> None:
        e = env.event
        if not isinstance(e, ev.UsageRecorded):
            return
        if e.run_id:
            key = run_key(e.tenant, e.run_id)
            doc = docs.get(key) or {"tenant_id": e.tenant, "run_id": e.run_id, "project_slug": e.project_slug,
                                    "totals": empty_totals(), "agents": {}, "updated_at": ""}
            add(doc["totals"], e)
            agent = doc["agents"].setdefault(e.agent_id, {"agent_id": e.agent_id, "sessions": [], **empty_totals()})
            add(agent, e)
            if e.session_id not in agent["sessions"]:
                agent["sessions"].append(e.session_id)
            doc["updated_at"] = e.at
            docs.put(key, doc, partition=f"usage-runs/{e.tenant}")
            docs.put(f"usage/record/{e.tenant}/{e.run_id}/{e.request_id}",
                     {"id": ModelUsage.create_id(e.tenant, e.request_id)},
                     partition=records_partition(e.tenant, e.run_id), sort_key=position_key(env.position))
        for key, fields in (
            (project_key(e.tenant, e.project_slug), {"project_slug": e.project_slug}) if e.project_slug else (None, {}),
            (employee_key(e.tenant, e.employee), {"employee": e.employee}) if e.employee else (None, {}),
        ):
            if key is None:
                continue
            doc = docs.get(key) or {"tenant_id": e.tenant, **fields, "totals": empty_totals(), "by_model": {},
                                    "updated_at": ""}
            add(doc["totals"], e)
            add(doc["by_model"].setdefault(e.upstream_model or "unknown", empty_totals()), e)
            doc["updated_at"] = e.at
            docs.put(key, doc)
