"""The gate's event contracts: what a GateThread (``gth:<tenant>:<thread_key>``) stores.

One Struct per stored kind, tagged by that kind, with exactly the fields the aggregate's
``@event`` method records. Every step of a gate run is one event naming its ``attempt``;
``run_id`` names the studio run a thread publishes for, so the run's feed can show it.

Every step of a run names it (``run_id`` on each step event). The steps other than the
start, the pull request and the evidence learnt it later: their ``run_id`` has a default,
so a step stored before reads with ``run_id`` "" (it names no run, as it did then).
"""

from __future__ import annotations

from domain.shared.base import Aggregate


class ThreadOpened(Aggregate.Created):
    TOPIC = "domain.gate.thread:GateThread.Opened"
    tenant: str
    thread_key: str
    at: str


class RunStarted(Aggregate.Event):
    TOPIC = "domain.gate.thread:GateThread.RunStarted"
    attempt: int
    run_id: str
    project_slug: str
    repo: str
    repository_key: str
    repository_type: str
    agent_key: str
    engine_key: str
    runner_kind: str
    scenario_key: str
    proposal_id: str
    proposal_key: str
    notes: str
    publish: bool
    dry_run: bool
    actor: str
    transport_actor: str
    pr_submission_policy: str
    pr_submission_pipeline: str
    pr_submission_actor_agent_key: str
    at: str


class PublicationPlanned(Aggregate.Event):
    """What the run publishes (branch, paths, title, body, labels, checks), before any write."""

    TOPIC = "domain.gate.thread:GateThread.PublicationPlanned"
    attempt: int
    mode: str
    branch_name: str
    base_branch: str
    committed_paths: list[str]
    pr_title: str
    pr_body: str
    labels: list[str]
    check_run_names: list[str]
    artifact_path: str
    at: str
    run_id: str = ""  # stored since the steps name their run (before: "")


class BranchCommitted(Aggregate.Event):
    TOPIC = "domain.gate.thread:GateThread.BranchCommitted"
    attempt: int
    branch_name: str
    base_sha: str
    head_sha: str
    committed_paths: list[str]
    at: str
    run_id: str = ""  # stored since the steps name their run (before: "")


class PullRequestPublished(Aggregate.Event):
    TOPIC = "domain.gate.thread:GateThread.PullRequestPublished"
    attempt: int
    run_id: str
    repo: str
    repository_key: str
    pr_number: int
    pr_url: str
    pr_owner: str
    pr_repo: str
    head_sha: str
    merge_sha: str
    github_ref: str
    author: str
    at: str


class CheckRunRecorded(Aggregate.Event):
    TOPIC = "domain.gate.thread:GateThread.CheckRunRecorded"
    attempt: int
    check_run_id: int
    name: str
    conclusion: str
    summary: str
    at: str
    run_id: str = ""  # stored since the steps name their run (before: "")


class CommentPosted(Aggregate.Event):
    TOPIC = "domain.gate.thread:GateThread.CommentPosted"
    attempt: int
    comment_id: int
    comment_url: str
    body: str
    at: str
    run_id: str = ""  # stored since the steps name their run (before: "")


class EvidenceRecorded(Aggregate.Event):
    """The run's evidence: ``scope`` is ``implementation`` unless only the assembly
    repository was touched (``orchestration``: not implementation evidence)."""

    TOPIC = "domain.gate.thread:GateThread.EvidenceRecorded"
    attempt: int
    run_id: str
    repo: str
    repository_key: str
    repository_type: str
    scope: str
    evidence_url: str
    artifact_path: str
    pr_url: str
    at: str


class BranchPushed(Aggregate.Event):
    """The published branch sent back to the origin the repository mirrors (``pushed``), or
    why it was not (``not_writable``, git's first line in ``error``)."""

    TOPIC = "domain.gate.thread:GateThread.BranchPushed"
    attempt: int
    run_id: str
    origin: str
    branch_name: str
    head_sha: str
    status: str
    error: str
    at: str


class PromotionDecided(Aggregate.Event):
    TOPIC = "domain.gate.thread:GateThread.PromotionDecided"
    attempt: int
    decision: str
    reasons: list[str]
    at: str
    run_id: str = ""  # stored since the steps name their run (before: "")


class RunCompleted(Aggregate.Event):
    TOPIC = "domain.gate.thread:GateThread.RunCompleted"
    attempt: int
    status: str
    at: str
    run_id: str = ""  # stored since the steps name their run (before: "")


class RunFailed(Aggregate.Event):
    TOPIC = "domain.gate.thread:GateThread.RunFailed"
    attempt: int
    step: str
    error_message: str
    at: str
    run_id: str = ""  # stored since the steps name their run (before: "")


EVENTS: tuple[type[Aggregate.Event], ...] = (
    ThreadOpened, RunStarted, PublicationPlanned, BranchCommitted, PullRequestPublished,
    CheckRunRecorded, CommentPosted, EvidenceRecorded, PromotionDecided, RunCompleted, RunFailed, BranchPushed,
)


def kind_of(event_type: type[Aggregate.Event]) -> str:
    return str(event_type.TOPIC).rpartition(":")[2]  # type: ignore[attr-defined]


BY_KIND: dict[str, type[Aggregate.Event]] = {kind_of(e): e for e in EVENTS}


def run_of(event: object) -> str:
    """The run a gate event publishes for ("" for events that name none)."""
    if isinstance(event, EVENTS) and not isinstance(event, ThreadOpened):
        return str(getattr(event, "run_id", "") or "")
    return ""
