"""Gate runs read model: every run of every gate thread, as the gate run record.

``gate-run/<tenant>/<thread_key>/<attempt>`` in partition ``gate-runs/<tenant>/<thread_key>``
(sorted by attempt), folded with the same ``domain.gate.record.fold`` as the aggregate, so
a read answers what the run's POST answered.
"""

from __future__ import annotations

from typing import Any

from domain.gate.events import EVENTS, RunStarted, ThreadOpened
from domain.gate.record import fold
from projections.engine.docs import Docs, Projector, handles
from projections.engine.envelope import Envelope


def gate_run_doc_key(tenant: str, thread_key: str, attempt: int) -> str:
    return f"gate-run/{tenant}/{thread_key}/{attempt}"


def gate_runs_partition(tenant: str, thread_key: str) -> str:
    return f"gate-runs/{tenant}/{thread_key}"


class GateRunsProjector(Projector):
    name = "gate_runs"

    @handles(*(e for e in EVENTS if e is not ThreadOpened))
    def run_step(self, event: Any, env: Envelope, docs: Docs) -> None:
        """A step of one gate run (its start too): the run's record by the gate's own fold."""
        _, tenant, thread_key = env.originator_id.split(":", 2)
        attempt = int(event.attempt)  # type: ignore[attr-defined]
        key = gate_run_doc_key(tenant, thread_key, attempt)
        records: dict[str, dict[str, Any]] = {}
        if not isinstance(event, RunStarted):
            found = docs.get(key)
            if found is None:
                return
            records[str(attempt)] = found
        fold(records, thread_key, type(event), event)
        docs.put(key, records[str(attempt)], partition=gate_runs_partition(tenant, thread_key), sort_key=f"{attempt:010d}")
