"""The gate run record (spec: Other records / gate run), folded from a thread's events.

One pure fold serves the GateThread aggregate (the POST answer) and the gate runs read
model, so the command's answer and what a later read serves are the same record.
"""

from __future__ import annotations

from typing import Any

from domain.gate.events import (
    BranchCommitted,
    BranchPushed,
    CheckRunRecorded,
    CommentPosted,
    EvidenceRecorded,
    PromotionDecided,
    PublicationPlanned,
    PullRequestPublished,
    RunCompleted,
    RunFailed,
    RunStarted,
)

RUNNING = "running"


def new_record(thread_key: str, started: RunStarted) -> dict[str, Any]:
    return {
        "thread_key": thread_key,
        "run_id": started.run_id,
        "repo": started.repo,
        "agent_key": started.agent_key,
        "engine_key": started.engine_key,
        "scenario_key": started.scenario_key,
        "status": RUNNING,
        "runner_kind": started.runner_kind,
        "github_ref": "",
        "merge_sha": "",
        "branch_name": "",
        "proposal_id": started.proposal_id,
        "proposal_key": started.proposal_key,
        "pr_url": "",
        "evidence_url": "",
        "artifact_path": "",
        "promotion_decision": "",
        "affected_dataset_keys": [],
        "resolved_catalog_dataset_urns": [],
        "publication": None,
        "attempt": started.attempt,
        "project_slug": started.project_slug,
        "repository_key": started.repository_key,
        "evidence_scope": "",
        "error_message": "",
        "started_at": started.at,
        "updated_at": started.at,
        # What the publication repeats from the start (not part of the answer itself).
        "context": {
            "transport_actor": started.transport_actor,
            "pr_submission_policy": started.pr_submission_policy,
            "pr_submission_pipeline": started.pr_submission_pipeline,
            "pr_submission_actor_agent_key": started.pr_submission_actor_agent_key,
        },
    }


def _publication(record: dict[str, Any], planned: PublicationPlanned) -> dict[str, Any]:
    context = record["context"]
    return {
        "mode": planned.mode,
        "transport_actor": context["transport_actor"],
        "repo": record["repo"],
        "proposal_id": record["proposal_id"],
        "proposal_key": record["proposal_key"],
        "branch_name": planned.branch_name,
        "head_sha": "",
        "pr_title": planned.pr_title,
        "pr_body": planned.pr_body,
        "labels": list(planned.labels),
        "summary_comment": "",
        "check_run_names": list(planned.check_run_names),
        "pr_url": "",
        "comment_url": "",
        "check_run_ids": [],
        "committed_paths": list(planned.committed_paths),
        "pr_submission_policy": context["pr_submission_policy"],
        "pr_submission_pipeline": context["pr_submission_pipeline"],
        "pr_submission_actor_agent_key": context["pr_submission_actor_agent_key"],
        "affected_dataset_keys": [],
        "resolved_catalog_dataset_urns": [],
    }


def fold(records: dict[str, dict[str, Any]], thread_key: str, event_type: type, event: Any) -> None:
    """Applies one event of a thread, of ``event_type``, to its run records (keyed by
    attempt, as a string)."""
    if issubclass(event_type, RunStarted):
        records[str(event.attempt)] = new_record(thread_key, event)
        return
    attempt = getattr(event, "attempt", None)
    record = records.get(str(attempt))
    if record is None:
        return
    record["updated_at"] = max(record["updated_at"], str(getattr(event, "at", "")))
    publication = record["publication"]
    if issubclass(event_type, PublicationPlanned):
        record["branch_name"] = event.branch_name
        record["artifact_path"] = event.artifact_path
        record["publication"] = _publication(record, event)
    elif issubclass(event_type, BranchCommitted):
        record["branch_name"] = event.branch_name
        if publication is not None:
            publication["head_sha"] = event.head_sha
            publication["committed_paths"] = list(event.committed_paths)
    elif issubclass(event_type, PullRequestPublished):
        record.update(pr_url=event.pr_url, merge_sha=event.merge_sha, github_ref=event.github_ref)
        if publication is not None:
            publication.update(pr_url=event.pr_url, head_sha=event.head_sha)
    elif issubclass(event_type, BranchPushed):
        if publication is not None:
            publication["push"] = {
                "status": event.status, "origin": event.origin, "branch": event.branch_name,
                "head_sha": event.head_sha, "error": event.error,
            }
    elif issubclass(event_type, CheckRunRecorded):
        if publication is not None:
            publication["check_run_ids"].append(event.check_run_id)
    elif issubclass(event_type, CommentPosted):
        if publication is not None:
            publication.update(summary_comment=event.body, comment_url=event.comment_url)
    elif issubclass(event_type, EvidenceRecorded):
        record.update(evidence_url=event.evidence_url, artifact_path=event.artifact_path, evidence_scope=event.scope)
    elif issubclass(event_type, PromotionDecided):
        record["promotion_decision"] = event.decision
    elif issubclass(event_type, RunCompleted):
        record["status"] = event.status
    elif issubclass(event_type, RunFailed):
        record["status"] = "failed"
        record["error_message"] = f"{event.step}: {event.error_message}"


def answer(record: dict[str, Any]) -> dict[str, Any]:
    """The record as the API answers it (without the start's private context)."""
    return {k: v for k, v in record.items() if k != "context"}
