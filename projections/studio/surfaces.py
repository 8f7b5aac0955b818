"""Run surfaces read model: the feed's run-level surfaces, one document per run.

``surfaces/<tenant>/<run_id>`` holds ``delivery``, ``source_ref``, ``proposal``, ``queue``,
``lineage``, ``delivery_feedback``, ``evidence`` and ``latest_activity_at``, already in the
feed's shape. Each surface folds on its own (its private state under ``fold.<surface>``,
which the feed skips):
a fold that raises leaves that one surface at its empty-typed default, marked in
``broken`` with the reason, and the other surfaces keep folding.

Rules:
- delivery: a pull request gives ``delivered``; else a blocked session gives ``blocker``;
  else ``none`` (``unknown`` only before the run is known). Fields of the latest PR.
- source_ref: mode by priority oci > github_array > bundle > none; ``github_array`` and
  ``oci`` are shared to the HUD at run creation (the launch event carries the reference).
- proposal: ``bound`` when the run holds a proposal id.
- queue: ready/ended -> idle, scheduled -> queued, running -> running (blocked when an
  agent is); ``heartbeat_age_seconds`` is the age of the last tick (``heartbeat_at``) at
  the run's latest recorded activity (never the clock), -1 before any tick; the feed
  composes it from those two stored times.
- lineage: enrichment only (a catalog tool call projects it); ``impact_node_count`` -1
  while no impact projection was recorded.
- delivery_feedback: a reviewer's change request wins over acceptance.
- evidence: proofs de-duplicated by key (a lane pull request's URL, a suit proven by a
  tester); a pull request on the assembly repository is orchestration, not a proof.
- the gate's publication of the run's proposal (``GateThread`` events naming the run)
  counts as the run's pull request and, off the assembly repository, as its evidence.
- freshness: ``latest_activity_at`` = max of event and session timestamps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from domain.gate import events as gate
from domain.studio import events as ev
from domain.studio.session_state import live_status_after
from projections.engine.by_type import ByType
from projections.engine.docs import Docs, Projector
from projections.engine.envelope import Envelope
from projections.engine.stamps import stamp

log = structlog.get_logger("squadops.projections.surfaces")

SOURCE_MODES = ("oci", "github_array", "bundle", "none")
REVIEWER_ROLES = frozenset({"role_tester", "role_curator", "role_reviewer"})
CHANGE_REQUESTS = frozenset({"changes_requested", "needs_changes", "request_changes"})
ACCEPTANCES = frozenset({"success", "accepted", "approved"})
ENDED = ("completed", "cleaned_up")


def surfaces_doc_key(tenant: str, run_id: str) -> str:
    return f"surfaces/{tenant}/{run_id}"


# -- empty-typed defaults ------------------------------------------------------------------------


def default_delivery() -> dict[str, Any]:
    return {
        "status": "unknown",
        "pr_url": "",
        "pr_owner": "",
        "pr_repo": "",
        "pr_number": 0,
        "preview_url": "",
        "share_token": "",
        "closer_state": "",
    }


def default_source_ref() -> dict[str, Any]:
    return {"repos": [], "mode": "none", "oci_version": "", "hud_shared": False}


def default_proposal() -> dict[str, Any]:
    return {"proposal_id": "", "work_kind": "", "boundary": "", "bound": False}


def default_queue() -> dict[str, Any]:
    return {"state": "unknown", "queued_at": "", "heartbeat_age_seconds": -1}


def default_lineage() -> dict[str, Any]:
    return {"projected": False, "impact_node_count": -1, "catalog_url": ""}


def default_feedback() -> dict[str, Any]:
    return {"quality": "unknown", "accepted": False, "notes_count": 0}


def default_evidence() -> dict[str, Any]:
    return {"proof_count": 0, "has_chronicle": False, "scope": ""}


DEFAULTS: dict[str, Callable[[], dict[str, Any]]] = {
    "delivery": default_delivery,
    "source_ref": default_source_ref,
    "proposal": default_proposal,
    "queue": default_queue,
    "lineage": default_lineage,
    "delivery_feedback": default_feedback,
    "evidence": default_evidence,
}


# -- session status, as each surface tracks it (by the one state machine) -----------------------


def track(state: dict[str, Any], env: Envelope) -> None:
    if env.aggregate_type == "AgentSession" and (env.name == "Opened" or env.agent_id in state["statuses"]):
        state["statuses"][env.agent_id] = live_status_after(state["statuses"].get(env.agent_id, "ready"), env.event)


def any_blocked(state: dict[str, Any]) -> bool:
    return "blocked" in state["statuses"].values()


# -- one fold per surface ------------------------------------------------------------------------


def _pull_request(state: dict[str, Any], out: dict[str, Any], pr: Any) -> None:
    state["prs"] += 1
    out.update(pr_url=pr.pr_url, pr_owner=pr.pr_owner, pr_repo=pr.pr_repo, pr_number=int(pr.pr_number or 0))


def _preview(state: dict[str, Any], out: dict[str, Any], e: ev.PreviewShared) -> None:
    out["preview_url"] = str(e.preview.get("url") or e.preview.get("domain_url") or "")


# What moves the delivery surface besides session status, by event class (one lookup).
DELIVERY_CHANGES: ByType[Callable[[dict[str, Any], dict[str, Any], Any], None]] = ByType(
    {
        ev.PullRequestOpened: _pull_request,
        gate.PullRequestPublished: _pull_request,
        ev.PreviewShared: _preview,
        ev.RunCompleted: lambda state, out, e: out.__setitem__("closer_state", "completed"),
        ev.RunCleanedUp: lambda state, out, e: out.__setitem__("closer_state", "cleaned_up"),
    }
)


def fold_delivery(state: dict[str, Any], out: dict[str, Any], env: Envelope, doc: dict[str, Any]) -> None:
    track(state, env)
    change = DELIVERY_CHANGES.get(env.event)
    if change is not None:
        change(state, out, env.event)
    out["status"] = "delivered" if state["prs"] else ("blocker" if any_blocked(state) else "none")


def fold_source_ref(state: dict[str, Any], out: dict[str, Any], env: Envelope, doc: dict[str, Any]) -> None:
    launched = env.event
    if not isinstance(launched, ev.RunLaunched):
        return
    raw = launched.source_ref or {}
    repos = [
        {
            "slug": str(r.get("slug", "")),
            "branch": str(r.get("branch", "")),
            "default_branch": str(r.get("default_branch", "")),
        }
        for r in raw.get("repos", [])
        if isinstance(r, dict) and r.get("slug")
    ]
    oci_version = str(raw.get("oci_version", "") or "")
    mode = raw.get("mode")
    if mode not in SOURCE_MODES:
        mode = "oci" if oci_version else ("github_array" if repos else "none")
    out.update(repos=repos, mode=mode, oci_version=oci_version, hud_shared=mode in ("oci", "github_array"))


def fold_proposal(state: dict[str, Any], out: dict[str, Any], env: Envelope, doc: dict[str, Any]) -> None:
    launched = env.event
    if not isinstance(launched, ev.RunLaunched):
        return
    raw = launched.proposal or {}
    proposal_id = str(raw.get("proposal_id", "") or "")
    out.update(
        proposal_id=proposal_id,
        work_kind=str(raw.get("work_kind", "") or ""),
        boundary=str(raw.get("boundary", "") or ""),
        bound=bool(proposal_id),
    )


QUEUE_STATE = {"ready": "idle", "scheduled": "queued", "running": "running", "completed": "idle", "cleaned_up": "idle"}


def fold_queue(state: dict[str, Any], out: dict[str, Any], env: Envelope, doc: dict[str, Any]) -> None:
    track(state, env)
    if env.aggregate_type == "Run":  # the others move only the sessions' statuses
        match env.event:
            case ev.RunLaunched():
                state["status"] = "ready"
            case ev.ExecutionRequested(follow_up=False, requested_at=requested_at):
                state["status"] = "scheduled"
                out["queued_at"] = requested_at
            case ev.ExecutionStarted():
                state["status"] = "running"
            case ev.TickRecorded(at=at):
                doc["heartbeat_at"] = max(doc["heartbeat_at"], at or env.at)
            case ev.RunCompleted():
                state["status"] = "completed"
            case ev.RunCleanedUp():
                state["status"] = "cleaned_up"
    status = state["status"]
    queue_state = QUEUE_STATE.get(status, "unknown")
    if status == "running" and any_blocked(state):
        queue_state = "blocked"
    out["state"] = queue_state


def fold_lineage(state: dict[str, Any], out: dict[str, Any], env: Envelope, doc: dict[str, Any]) -> None:
    match env.event:
        case ev.ToolCalled(tool_name=tool) if tool.startswith("mcp__catalog__"):
            out["projected"] = True


def fold_feedback(state: dict[str, Any], out: dict[str, Any], env: Envelope, doc: dict[str, Any]) -> None:
    match env.event:
        case ev.SessionOpened(role_key=role_key):
            state["roles"][env.agent_id] = role_key
        case ev.SessionCompleted(result=result) if state["roles"].get(env.agent_id) in REVIEWER_ROLES:
            result = result or {}
            verdict = str(result.get("review") or result.get("subtype") or "")
            if result.get("is_error") or verdict in CHANGE_REQUESTS:
                state["changes"] += 1
                state["notes"] += 1
            elif verdict in ACCEPTANCES:
                state["accepts"] += 1
                state["notes"] += 1
        case ev.TaskCardChanged(action="followup_created"):
            state["changes"] += 1
            state["notes"] += 1
        case ev.MessageDelivered(channel="mailbox" | "thread"):
            state["notes"] += 1
    changes, accepts = state["changes"], state["accepts"]
    out["quality"] = "needs_changes" if changes else ("good" if accepts else "unknown")
    out["accepted"] = bool(accepts) and not changes
    out["notes_count"] = state["notes"]


def fold_evidence(state: dict[str, Any], out: dict[str, Any], env: Envelope, doc: dict[str, Any]) -> None:
    proof = ""
    match env.event:
        case ev.RunLaunched(project_facts=facts):
            state["assembly"] = sorted(
                {"assembly"}
                | {
                    str(b.get("repository_key", ""))
                    for b in (facts or {}).get("repository_bindings", [])
                    if isinstance(b, dict) and b.get("repository_type") == "assembly"
                }
            )
            return
        case ev.SessionOpened(role_key=role_key, suit=suit):
            state["agents"][env.agent_id] = {"role_key": role_key, "suit_id": str((suit or {}).get("suit_id", "") or "")}
            return
        case gate.EvidenceRecorded() as recorded:  # the gate's publication of the run's proposal
            if recorded.scope == "implementation" and recorded.repository_key not in state["assembly"]:
                proof = "pr:" + (recorded.pr_url or recorded.evidence_url or "")
            else:
                state["orchestration"] = True
        case ev.PullRequestOpened() as pr:
            if pr.repository_key in state["assembly"]:
                state["orchestration"] = True
            else:
                proof = "pr:" + (pr.pr_url or f"{pr.pr_owner}/{pr.pr_repo}#{pr.pr_number}")
        case ev.SessionCompleted(result=result):
            agent = state["agents"].get(env.agent_id, {})
            result = result or {}
            if agent.get("role_key") == "role_compactor" and not result.get("is_error"):
                out["has_chronicle"] = True
            if agent.get("role_key") == "role_tester" and not result.get("is_error"):
                proof = "suit:" + (agent.get("suit_id") or env.agent_id)
    if proof and proof not in state["proofs"]:
        state["proofs"].append(proof)
        state["proofs"].sort()
    out["proof_count"] = len(state["proofs"])
    if any(p.startswith("pr:") for p in state["proofs"]):
        out["scope"] = "implementation"
    elif state["proofs"]:
        out["scope"] = "suit_proof"
    elif state["orchestration"]:
        out["scope"] = "orchestration"


STATUS_KINDS = frozenset(
    "AgentSession." + name
    for name in (
        "Opened", "ProcessStarted", "ToolCalled", "Blocked", "Unblocked", "Completed", "Stopped",
        "Paused", "Resumed", "ProcessRestarted", "WorkspaceRestarted",
    )
)
RUN_END = frozenset({"Run.Completed", "Run.CleanedUp"})
# Pull requests of a run: an agent's, or the gate's publication of the run's proposal.
PULL_REQUESTS = frozenset({"AgentSession.PullRequestOpened", "GateThread.PullRequestPublished"})
# The event kinds each surface reads; the others leave it as it is.
INTERESTS: dict[str, frozenset[str]] = {
    "delivery": STATUS_KINDS | RUN_END | PULL_REQUESTS | {"Run.PreviewShared"},
    "source_ref": frozenset({"Run.Launched"}),
    "proposal": frozenset({"Run.Launched"}),
    "queue": STATUS_KINDS | RUN_END | {"Run.Launched", "Run.ExecutionRequested", "Run.ExecutionStarted", "Run.TickRecorded"},
    "lineage": frozenset({"AgentSession.ToolCalled"}),
    "delivery_feedback": frozenset(
        {"AgentSession.Opened", "AgentSession.Completed", "AgentSession.TaskCardChanged", "AgentSession.MessageDelivered"}
    ),
    "evidence": frozenset(
        {"Run.Launched", "AgentSession.Opened", "AgentSession.PullRequestOpened", "AgentSession.Completed",
         "GateThread.EvidenceRecorded"}
    ),
}

FOLDS: dict[str, Callable[[dict[str, Any], dict[str, Any], Envelope, dict[str, Any]], None]] = {
    "delivery": fold_delivery,
    "source_ref": fold_source_ref,
    "proposal": fold_proposal,
    "queue": fold_queue,
    "lineage": fold_lineage,
    "delivery_feedback": fold_feedback,
    "evidence": fold_evidence,
}


DISPATCH: dict[str, tuple[str, ...]] = {
    kind: tuple(surface for surface in FOLDS if kind in INTERESTS[surface])
    for kind in frozenset().union(*INTERESTS.values())
}


def initial_state(surface: str) -> dict[str, Any]:
    if surface == "delivery":
        return {"statuses": {}, "prs": 0}
    if surface == "queue":
        return {"statuses": {}, "status": ""}
    if surface == "delivery_feedback":
        return {"roles": {}, "accepts": 0, "changes": 0, "notes": 0}
    if surface == "evidence":
        return {"agents": {}, "assembly": ["assembly"], "proofs": [], "orchestration": False}
    return {}


def new_doc(env: Envelope) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "run_id": env.run_id,
        "tenant_id": env.tenant,
        "project_slug": env.event.project_slug,
        "latest_activity_at": stamp(env),
        "heartbeat_at": "",
        "broken": {},
        "fold": {name: initial_state(name) for name in FOLDS},
    }
    for name, default in DEFAULTS.items():
        doc[name] = default()
    doc["delivery"]["status"] = "none"
    return doc


class SurfacesProjector(Projector):
    name = "surfaces"
    # Every run and session event: kinds added later still move the times and counts.
    # Gate thread events name the run they publish for in ``run_id``.
    prefixes = ("Run.", "AgentSession.", "GateThread.")

    def wants(self, env: Envelope) -> bool:
        return env.kind.startswith(self.prefixes)

    def apply(self, env: Envelope, docs: Docs) -> None:
        key = surfaces_doc_key(env.tenant, env.run_id or gate.run_of(env.event))
        if isinstance(env.event, ev.RunLaunched):
            doc: dict[str, Any] | None = new_doc(env)
        else:
            doc = docs.get(key)
            if doc is None:
                return
            doc["latest_activity_at"] = max(doc["latest_activity_at"], stamp(env))
        assert doc is not None
        state = doc["fold"]
        for surface in DISPATCH.get(env.kind, ()):
            if surface in doc["broken"]:
                continue
            try:
                FOLDS[surface](state[surface], doc[surface], env, doc)
            except Exception as exc:  # one malformed event breaks one surface, not the feed
                reason = f"{type(exc).__name__}: {exc} (event {env.position} {env.kind})"
                doc["broken"][surface] = reason
                doc[surface] = DEFAULTS[surface]()
                state[surface] = {}
                log.warning("surface_fold_failed", run_id=env.run_id, surface=surface, reason=reason)
        docs.put(key, doc, partition=f"surfaces/{env.tenant}")
