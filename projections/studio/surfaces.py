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
from domain.studio.session import live_status_after
from projections.engine.docs import Docs, Projector, folds_with, handles, tenant_scoped
from projections.engine.envelope import Envelope
from projections.engine.stamps import stamp

log = structlog.get_logger("squadops.projections.surfaces")

SOURCE_MODES = ("oci", "github_array", "bundle", "none")
REVIEWER_ROLES = frozenset({"role_tester", "role_curator", "role_reviewer"})
CHANGE_REQUESTS = frozenset({"changes_requested", "needs_changes", "request_changes"})
ACCEPTANCES = frozenset({"success", "accepted", "approved"})
ENDED = ("completed", "cleaned_up")


surfaces_doc_key = tenant_scoped("surfaces")


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
#
# A fold is ``(state, out, e, env, doc)``: the surface's private state, its feed shape, the
# event, its envelope and the run's document; each event class's handler names the folds of
# the surfaces it moves.

Fold = Callable[[dict[str, Any], dict[str, Any], Any, Envelope, dict[str, Any]], None]
Change = Callable[..., Any]


def _delivery(change: Change | None = None) -> Fold:
    """Delivery: the sessions' statuses, ``change(state, out, e)``, then its status."""

    def fold(state: dict[str, Any], out: dict[str, Any], e: Any, env: Envelope, doc: dict[str, Any]) -> None:
        track(state, env)
        if change is not None:
            change(state, out, e)
        out["status"] = "delivered" if state["prs"] else ("blocker" if any_blocked(state) else "none")

    return fold


def _pull_request(state: dict[str, Any], out: dict[str, Any], pr: Any) -> None:
    """An agent's pull request, or the gate's publication of one. ``pr_number`` names its page
    in the project (``/projects/<slug>/pulls/<n>``): an agent's is the project's number (older
    events: the plane's); a publication keeps the page of the pull request it published."""
    state["prs"] += 1
    if isinstance(pr, ev.PullRequestOpened):
        number = pr.page_number
    else:
        number = out["pr_number"] or pr.pr_number
    out.update(pr_url=pr.pr_url, pr_owner=pr.pr_owner, pr_repo=pr.pr_repo, pr_number=int(number or 0))


def _preview(state: dict[str, Any], out: dict[str, Any], e: ev.PreviewShared) -> None:
    out["preview_url"] = str(e.preview.get("url") or e.preview.get("domain_url") or "")


def _closer(closer_state: str) -> Change:
    def change(state: dict[str, Any], out: dict[str, Any], e: Any) -> None:
        out["closer_state"] = closer_state

    return change


def fold_source_ref(state: dict[str, Any], out: dict[str, Any], e: ev.RunLaunched, env: Envelope, doc: dict[str, Any]) -> None:
    raw = e.source_ref or {}
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


def fold_proposal(state: dict[str, Any], out: dict[str, Any], e: ev.RunLaunched, env: Envelope, doc: dict[str, Any]) -> None:
    raw = e.proposal or {}
    proposal_id = str(raw.get("proposal_id", "") or "")
    out.update(
        proposal_id=proposal_id,
        work_kind=str(raw.get("work_kind", "") or ""),
        boundary=str(raw.get("boundary", "") or ""),
        bound=bool(proposal_id),
    )


QUEUE_STATE = {"ready": "idle", "scheduled": "queued", "running": "running", "completed": "idle", "cleaned_up": "idle"}


def _queue(change: Change | None = None) -> Fold:
    """Queue: the sessions' statuses, ``change(state, out, e, env, doc)``, then its state."""

    def fold(state: dict[str, Any], out: dict[str, Any], e: Any, env: Envelope, doc: dict[str, Any]) -> None:
        track(state, env)
        if change is not None:
            change(state, out, e, env, doc)
        status = state["status"]
        queue_state = QUEUE_STATE.get(status, "unknown")
        if status == "running" and any_blocked(state):
            queue_state = "blocked"
        out["state"] = queue_state

    return fold


def _run_status(status: str) -> Change:
    def change(state: dict[str, Any], out: dict[str, Any], e: Any, env: Envelope, doc: dict[str, Any]) -> None:
        state["status"] = status

    return change


def _execution_requested(state: dict[str, Any], out: dict[str, Any], e: ev.ExecutionRequested, env: Envelope, doc: dict[str, Any]) -> None:
    if not e.follow_up:
        state["status"] = "scheduled"
        out["queued_at"] = e.requested_at


def _tick(state: dict[str, Any], out: dict[str, Any], e: ev.TickRecorded, env: Envelope, doc: dict[str, Any]) -> None:
    doc["heartbeat_at"] = max(doc["heartbeat_at"], e.at or env.at)


def fold_lineage(state: dict[str, Any], out: dict[str, Any], e: ev.ToolCalled, env: Envelope, doc: dict[str, Any]) -> None:
    if e.tool_name.startswith("mcp__catalog__"):
        out["projected"] = True


def _feedback(change: Change) -> Fold:
    """Delivery feedback: ``change(state, e, env)``, then the quality it adds up to."""

    def fold(state: dict[str, Any], out: dict[str, Any], e: Any, env: Envelope, doc: dict[str, Any]) -> None:
        change(state, e, env)
        changes, accepts = state["changes"], state["accepts"]
        out["quality"] = "needs_changes" if changes else ("good" if accepts else "unknown")
        out["accepted"] = bool(accepts) and not changes
        out["notes_count"] = state["notes"]

    return fold


def _role_noted(state: dict[str, Any], e: ev.SessionOpened, env: Envelope) -> None:
    state["roles"][env.agent_id] = e.role_key


def _review(state: dict[str, Any], e: ev.SessionCompleted, env: Envelope) -> None:
    if state["roles"].get(env.agent_id) not in REVIEWER_ROLES:
        return
    result = e.result or {}
    verdict = str(result.get("review") or result.get("subtype") or "")
    if result.get("is_error") or verdict in CHANGE_REQUESTS:
        state["changes"] += 1
        state["notes"] += 1
    elif verdict in ACCEPTANCES:
        state["accepts"] += 1
        state["notes"] += 1


def _followup(state: dict[str, Any], e: ev.TaskCardChanged, env: Envelope) -> None:
    if e.action == "followup_created":
        state["changes"] += 1
        state["notes"] += 1


def _note(state: dict[str, Any], e: ev.MessageDelivered, env: Envelope) -> None:
    if e.channel in ("mailbox", "thread"):
        state["notes"] += 1


def _evidence(change: Callable[[dict[str, Any], dict[str, Any], Any, Envelope], str]) -> Fold:
    """Evidence: ``change(state, out, e, env)`` answers a proof ("" for none), kept once;
    then the proof count and scope."""

    def fold(state: dict[str, Any], out: dict[str, Any], e: Any, env: Envelope, doc: dict[str, Any]) -> None:
        proof = change(state, out, e, env)
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

    return fold


def evidence_assembly(state: dict[str, Any], out: dict[str, Any], e: ev.RunLaunched, env: Envelope, doc: dict[str, Any]) -> None:
    """The project's assembly repositories (their pull requests are orchestration)."""
    state["assembly"] = sorted(
        {"assembly"}
        | {
            str(b.get("repository_key", ""))
            for b in (e.project_facts or {}).get("repository_bindings", [])
            if isinstance(b, dict) and b.get("repository_type") == "assembly"
        }
    )


def evidence_agent(state: dict[str, Any], out: dict[str, Any], e: ev.SessionOpened, env: Envelope, doc: dict[str, Any]) -> None:
    state["agents"][env.agent_id] = {"role_key": e.role_key, "suit_id": str((e.suit or {}).get("suit_id", "") or "")}


def _gate_evidence(state: dict[str, Any], out: dict[str, Any], e: gate.EvidenceRecorded, env: Envelope) -> str:
    """The gate's publication of the run's proposal."""
    if e.scope == "implementation" and e.repository_key not in state["assembly"]:
        return "pr:" + (e.pr_url or e.evidence_url or "")
    state["orchestration"] = True
    return ""


def _agent_pull_request(state: dict[str, Any], out: dict[str, Any], e: ev.PullRequestOpened, env: Envelope) -> str:
    if e.repository_key in state["assembly"]:
        state["orchestration"] = True
        return ""
    return "pr:" + (e.pr_url or f"{e.pr_owner}/{e.pr_repo}#{e.pr_number}")


def _session_proof(state: dict[str, Any], out: dict[str, Any], e: ev.SessionCompleted, env: Envelope) -> str:
    agent = state["agents"].get(env.agent_id, {})
    result = e.result or {}
    if agent.get("role_key") == "role_compactor" and not result.get("is_error"):
        out["has_chronicle"] = True
    if agent.get("role_key") == "role_tester" and not result.get("is_error"):
        return "suit:" + (agent.get("suit_id") or env.agent_id)
    return ""


SURFACES = ("delivery", "source_ref", "proposal", "queue", "lineage", "delivery_feedback", "evidence")
# The folds of the events that move only the sessions' statuses (and the times).
STATUS_FOLDS: dict[str, Fold] = {"delivery": _delivery(), "queue": _queue()}
TIMES_ONLY: dict[str, Fold] = {}  # the folds of the events that move only the times
LAUNCH_FOLDS: dict[str, Fold] = {
    "source_ref": fold_source_ref,
    "proposal": fold_proposal,
    "queue": _queue(_run_status("ready")),
    "evidence": evidence_assembly,
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
        "fold": {name: initial_state(name) for name in SURFACES},
    }
    for name, default in DEFAULTS.items():
        doc[name] = default()
    doc["delivery"]["status"] = "none"
    return doc


class SurfacesProjector(Projector):
    name = "surfaces"

    @handles(ev.RunLaunched)
    def run_launched(self, e: ev.RunLaunched, env: Envelope, docs: Docs) -> None:
        self.fold(e, env, docs, LAUNCH_FOLDS, new_doc(env))

    # -- run events -------------------------------------------------------------------------
    execution_requested = handles(ev.ExecutionRequested)(folds_with({"queue": _queue(_execution_requested)}))
    execution_started = handles(ev.ExecutionStarted)(folds_with({"queue": _queue(_run_status("running"))}))
    tick_recorded = handles(ev.TickRecorded)(folds_with({"queue": _queue(_tick)}))
    preview_shared = handles(ev.PreviewShared)(folds_with({"delivery": _delivery(_preview)}))
    run_completed = handles(ev.RunCompleted)(
        folds_with({"delivery": _delivery(_closer("completed")), "queue": _queue(_run_status("completed"))})
    )
    run_cleaned_up = handles(ev.RunCleanedUp)(
        folds_with({"delivery": _delivery(_closer("cleaned_up")), "queue": _queue(_run_status("cleaned_up"))})
    )
    run_session_opened = handles(ev.RunSessionOpened)(folds_with(TIMES_ONLY))
    handoff_recorded = handles(ev.HandoffRecorded)(folds_with(TIMES_ONLY))
    control_recorded = handles(ev.ControlRecorded)(folds_with(TIMES_ONLY))
    process_assigned = handles(ev.ProcessAssigned)(folds_with(TIMES_ONLY))

    # -- session events ---------------------------------------------------------------------
    session_opened = handles(ev.SessionOpened)(
        folds_with({**STATUS_FOLDS, "delivery_feedback": _feedback(_role_noted), "evidence": evidence_agent})
    )
    tool_called = handles(ev.ToolCalled)(folds_with({**STATUS_FOLDS, "lineage": fold_lineage}))
    session_completed = handles(ev.SessionCompleted)(
        folds_with({**STATUS_FOLDS, "delivery_feedback": _feedback(_review), "evidence": _evidence(_session_proof)})
    )
    pull_request_opened = handles(ev.PullRequestOpened)(
        folds_with({"delivery": _delivery(_pull_request), "evidence": _evidence(_agent_pull_request)})
    )
    task_card_changed = handles(ev.TaskCardChanged)(folds_with({"delivery_feedback": _feedback(_followup)}))
    message_delivered = handles(ev.MessageDelivered)(folds_with({"delivery_feedback": _feedback(_note)}))
    # Events that move only the sessions' statuses.
    process_started = handles(ev.ProcessStarted)(folds_with(STATUS_FOLDS))
    blocked = handles(ev.Blocked)(folds_with(STATUS_FOLDS))
    unblocked = handles(ev.Unblocked)(folds_with(STATUS_FOLDS))
    stopped = handles(ev.Stopped)(folds_with(STATUS_FOLDS))
    paused = handles(ev.Paused)(folds_with(STATUS_FOLDS))
    resumed = handles(ev.Resumed)(folds_with(STATUS_FOLDS))
    process_restarted = handles(ev.ProcessRestarted)(folds_with(STATUS_FOLDS))
    workspace_restarted = handles(ev.WorkspaceRestarted)(folds_with(STATUS_FOLDS))
    # Events that move only the times.
    controller_action_observed = handles(ev.ControllerActionObserved)(folds_with(TIMES_ONLY))
    tool_call_failed = handles(ev.ToolCallFailed)(folds_with(TIMES_ONLY))
    model_reported = handles(ev.ModelReported)(folds_with(TIMES_ONLY))
    assistant_message = handles(ev.AssistantMessage)(folds_with(TIMES_ONLY))
    runner_output = handles(ev.RunnerOutput)(folds_with(TIMES_ONLY))
    handed_off = handles(ev.HandedOff)(folds_with(TIMES_ONLY))
    control_applied = handles(ev.ControlApplied)(folds_with(TIMES_ONLY))
    request_queued = handles(ev.RequestQueued)(folds_with(TIMES_ONLY))
    start_failed = handles(ev.StartFailed)(folds_with(TIMES_ONLY))
    self_healed = handles(ev.SelfHealed)(folds_with(TIMES_ONLY))
    process_switched = handles(ev.ProcessSwitched)(folds_with(TIMES_ONLY))

    # -- the gate's steps of the run (they name it in ``run_id``) ----------------------------
    pull_request_published = handles(gate.PullRequestPublished)(folds_with({"delivery": _delivery(_pull_request)}))
    evidence_recorded = handles(gate.EvidenceRecorded)(folds_with({"evidence": _evidence(_gate_evidence)}))
    gate_step = handles(*(c for c in gate.EVENTS if c not in (gate.PullRequestPublished, gate.EvidenceRecorded)))(
        folds_with(TIMES_ONLY)
    )

    def fold(
        self, e: Any, env: Envelope, docs: Docs, folds: dict[str, Fold], launched: dict[str, Any] | None = None
    ) -> None:
        """Each of ``folds`` (surface -> its fold) on the event's run's document."""
        key = surfaces_doc_key(env.tenant, env.run_id or gate.run_of(e))
        doc = launched
        if doc is None:
            doc = docs.get(key)
            if doc is None:
                return
            doc["latest_activity_at"] = max(doc["latest_activity_at"], stamp(env))
        state = doc["fold"]
        for surface, fold in folds.items():
            if surface in doc["broken"]:
                continue
            try:
                fold(state[surface], doc[surface], e, env, doc)
            except Exception as exc:  # one malformed event breaks one surface, not the feed
                reason = f"{type(exc).__name__}: {exc} (event {env.position} {env.kind})"
                doc["broken"][surface] = reason
                doc[surface] = DEFAULTS[surface]()
                state[surface] = {}
                log.warning("surface_fold_failed", run_id=env.run_id, surface=surface, reason=reason)
        docs.put(key, doc, partition=f"surfaces/{env.tenant}")
