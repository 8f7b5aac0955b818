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


# -- session status, as each surface tracks it ---------------------------------------------------


def next_status(current: str, env: Envelope) -> str:
    """A session's ``live_status`` after one of its events (mirrors the aggregate)."""
    name, d = env.name, env.data
    if name == "Opened" or name in ("ProcessRestarted", "WorkspaceRestarted"):
        return "ready"
    if name == "ProcessStarted":
        return "waiting_first_tool"
    if name == "ToolCalled" and d.get("first"):
        return "working"
    if name == "Blocked":
        return "blocked"
    if name == "Unblocked":
        return str(d.get("resume_status", "working"))
    if name == "Completed":
        return "session_completed"
    if name == "Stopped":
        return "stopped"
    if name == "Paused":
        return "paused"
    if name == "Resumed":
        return str(d.get("live_status", current))
    return current


def track(state: dict[str, Any], env: Envelope) -> None:
    if env.aggregate_type == "AgentSession" and (env.name == "Opened" or env.agent_id in state["statuses"]):
        state["statuses"][env.agent_id] = next_status(state["statuses"].get(env.agent_id, "ready"), env)


def any_blocked(state: dict[str, Any]) -> bool:
    return any(s == "blocked" for s in state["statuses"].values())


# -- one fold per surface ------------------------------------------------------------------------


def fold_delivery(state: dict[str, Any], out: dict[str, Any], env: Envelope, doc: dict[str, Any]) -> None:
    track(state, env)
    d, kind = env.data, env.kind
    if kind in PULL_REQUESTS:
        state["prs"] += 1
        out.update(
            pr_url=str(d.get("pr_url", "")),
            pr_owner=str(d.get("pr_owner", "")),
            pr_repo=str(d.get("pr_repo", "")),
            pr_number=int(d.get("pr_number", 0) or 0),
        )
    elif kind == "Run.PreviewShared":
        preview = d.get("preview") or {}
        out["preview_url"] = str(preview.get("url") or preview.get("domain_url") or "")
    elif kind in ("Run.Completed", "Run.CleanedUp"):
        out["closer_state"] = "completed" if kind == "Run.Completed" else "cleaned_up"
    out["status"] = "delivered" if state["prs"] else ("blocker" if any_blocked(state) else "none")


def fold_source_ref(state: dict[str, Any], out: dict[str, Any], env: Envelope, doc: dict[str, Any]) -> None:
    if env.kind != "Run.Launched":
        return
    raw = env.data.get("source_ref") or {}
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
    if env.kind != "Run.Launched":
        return
    raw = env.data.get("proposal") or {}
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
    d, kind = env.data, env.kind
    if kind == "Run.Launched":
        state["status"] = "ready"
    elif kind == "Run.ExecutionRequested" and not d.get("follow_up"):
        state["status"] = "scheduled"
        out["queued_at"] = str(d.get("requested_at", ""))
    elif kind == "Run.ExecutionStarted":
        state["status"] = "running"
    elif kind == "Run.TickRecorded":
        doc["heartbeat_at"] = max(doc["heartbeat_at"], str(d.get("at", "") or env.at))
    elif kind in ("Run.Completed", "Run.CleanedUp"):
        state["status"] = "completed" if kind == "Run.Completed" else "cleaned_up"
    status = state["status"]
    queue_state = QUEUE_STATE.get(status, "unknown")
    if status == "running" and any_blocked(state):
        queue_state = "blocked"
    out["state"] = queue_state


def fold_lineage(state: dict[str, Any], out: dict[str, Any], env: Envelope, doc: dict[str, Any]) -> None:
    if env.kind == "AgentSession.ToolCalled" and str(env.data.get("tool_name", "")).startswith("mcp__catalog__"):
        out["projected"] = True


def fold_feedback(state: dict[str, Any], out: dict[str, Any], env: Envelope, doc: dict[str, Any]) -> None:
    d, kind = env.data, env.kind
    if kind == "AgentSession.Opened":
        state["roles"][env.agent_id] = str(d.get("role_key", ""))
    elif kind == "AgentSession.Completed" and state["roles"].get(env.agent_id) in REVIEWER_ROLES:
        result = d.get("result") or {}
        verdict = str(result.get("review") or result.get("subtype") or "")
        if result.get("is_error") or verdict in CHANGE_REQUESTS:
            state["changes"] += 1
            state["notes"] += 1
        elif verdict in ACCEPTANCES:
            state["accepts"] += 1
            state["notes"] += 1
    elif kind == "AgentSession.TaskCardChanged" and d.get("action") == "followup_created":
        state["changes"] += 1
        state["notes"] += 1
    elif kind == "AgentSession.MessageDelivered" and d.get("channel") in ("mailbox", "thread"):
        state["notes"] += 1
    changes, accepts = state["changes"], state["accepts"]
    out["quality"] = "needs_changes" if changes else ("good" if accepts else "unknown")
    out["accepted"] = bool(accepts) and not changes
    out["notes_count"] = state["notes"]


def fold_evidence(state: dict[str, Any], out: dict[str, Any], env: Envelope, doc: dict[str, Any]) -> None:
    d, kind = env.data, env.kind
    if kind == "Run.Launched":
        facts = d.get("project_facts") or {}
        state["assembly"] = sorted(
            {"assembly"}
            | {
                str(b.get("repository_key", ""))
                for b in facts.get("repository_bindings", [])
                if isinstance(b, dict) and b.get("repository_type") == "assembly"
            }
        )
        return
    if kind == "AgentSession.Opened":
        suit = d.get("suit") or {}
        state["agents"][env.agent_id] = {
            "role_key": str(d.get("role_key", "")),
            "suit_id": str(suit.get("suit_id", "") or ""),
        }
        return
    proof = ""
    if kind == "GateThread.EvidenceRecorded":  # the gate's publication of the run's proposal
        if d.get("scope") == "implementation" and str(d.get("repository_key", "")) not in state["assembly"]:
            proof = "pr:" + str(d.get("pr_url") or d.get("evidence_url") or "")
        else:
            state["orchestration"] = True
    elif kind == "AgentSession.PullRequestOpened":
        if str(d.get("repository_key", "")) in state["assembly"]:
            state["orchestration"] = True
        else:
            proof = "pr:" + str(d.get("pr_url") or f"{d.get('pr_owner', '')}/{d.get('pr_repo', '')}#{d.get('pr_number', '')}")
    elif kind == "AgentSession.Completed":
        agent = state["agents"].get(env.agent_id, {})
        result = d.get("result") or {}
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
        "project_slug": str(env.data.get("project_slug", "")),
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
        key = surfaces_doc_key(env.tenant, env.run_id or str(env.data.get("run_id") or ""))
        if env.kind == "Run.Launched":
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
        docs.put(key, doc, p=f"surfaces/{env.tenant}")
