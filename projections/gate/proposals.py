"""Proposals read model: which studio run holds a proposal (the latest launched).

``proposal/<tenant>/<proposal_id>`` -> ``{run_id, project_slug, launched_at}``. The gate
finds a thread's run through it when the thread is named by its proposal id.
"""

from __future__ import annotations

import msgspec

from domain.shared.ids import is_valid_id
from domain.studio import events as ev
from projections.engine.docs import Docs, Projector, handles
from projections.engine.envelope import Envelope
from projections.engine.store import DocStore

NAME = "gate_proposals"


def proposal_doc_key(tenant: str, proposal_id: str) -> str:
    return f"proposal/{tenant}/{proposal_id}"


class ProposalsProjector(Projector):
    name = NAME

    @handles(ev.RunLaunched)
    def run_launched(self, launched: ev.RunLaunched, env: Envelope, docs: Docs) -> None:
        proposal_id = str((launched.proposal or {}).get("proposal_id") or "")
        if not proposal_id:
            return
        doc = {"run_id": env.run_id, "project_slug": launched.project_slug, "launched_at": env.at}
        docs.put(proposal_doc_key(env.tenant, proposal_id), doc, partition=f"proposals/{env.tenant}", sort_key=proposal_id)


class _Proposal(msgspec.Struct):
    run_id: str = ""


_decode = msgspec.json.Decoder(_Proposal).decode


class ProposalIndex:
    """The gate's ``ProposalRuns`` port over this read model."""

    def __init__(self, store: DocStore) -> None:
        self.store = store

    def latest_run(self, tenant: str, proposal_id: str) -> str | None:
        if not is_valid_id(proposal_id):
            return None
        raw = self.store.get(NAME, proposal_doc_key(tenant, proposal_id))
        return _decode(raw).run_id or None if raw is not None else None
