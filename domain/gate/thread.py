"""The GateThread aggregate: a thread's gate runs, each step of each run one event.

A run is numbered (``attempt``) when it starts; its steps are recorded as they happen
(planned, branch committed, pull request published, check runs, summary comment,
evidence, promotion decision) and it ends completed or failed. The record of each run is
folded from these events by ``domain.gate.record.fold``.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from eventsourcing.domain import event

from domain.gate import events as ev
from domain.gate.record import fold
from domain.shared.base import Aggregate
from domain.shared.errors import Conflict
from domain.shared.ids import derived_id


def thread_key_id(tenant: str, thread_key: str) -> str:
    return f"gth:{tenant}:{thread_key}"


def own_run_id(tenant: str, thread_key: str) -> str:
    """The run id a thread tied to no studio run publishes under (C18: the default repo)."""
    return derived_id("gate", tenant, thread_key)


def studio_run_of(originator_id: str, event: object) -> str:
    """The studio run a stored gate event belongs to: the run it names, unless that is the
    thread's own run id (a thread tied to no studio run), or "" when it names none."""
    run_id = ev.run_of(event)
    _, tenant, thread_key = (originator_id.split(":", 2) + ["", ""])[:3]
    return "" if not run_id or run_id == own_run_id(tenant, thread_key) else run_id


class GateThread(Aggregate):
    """One gate thread of a tenant and the records of its runs."""

    @staticmethod
    def create_id(tenant: str, thread_key: str) -> str:
        return thread_key_id(tenant, thread_key)

    @event(ev.ThreadOpened)
    def __init__(self, *, tenant: str, thread_key: str, at: str) -> None:
        self.tenant = tenant
        self.thread_key = thread_key
        self.attempts = 0
        self.runs: dict[str, dict[str, Any]] = {}
        self.ended: set[int] = set()

    def _fold(self, event_type: type[Aggregate.Event], arguments: dict[str, Any]) -> None:
        """The run records after an event of ``event_type`` with the recording method's own
        ``arguments`` (its ``locals()``), by the fold the read model uses too."""
        fields = {name: value for name, value in arguments.items() if name != "self"}
        fold(self.runs, self.thread_key, event_type, SimpleNamespace(**fields))

    def record(self, attempt: int) -> dict[str, Any]:
        return self.runs[str(attempt)]

    def run_of(self, attempt: int) -> str:
        """The run that gate run ``attempt`` publishes for; each of its steps names it."""
        return str(self.runs[str(attempt)]["run_id"])

    def _require_open(self, attempt: int) -> None:
        if str(attempt) not in self.runs:
            raise Conflict(f"Gate thread {self.thread_key} has no run {attempt}.")
        if attempt in self.ended:
            raise Conflict(f"Gate run {attempt} of thread {self.thread_key} has ended.")

    def _step(self, record: Callable[..., None], fields: dict[str, Any]) -> None:
        """Records a step of the open run ``fields["attempt"]``, naming the run it publishes
        for (unless the step names it itself)."""
        self._require_open(fields["attempt"])
        record(**{"run_id": self.run_of(fields["attempt"]), **fields})

    # -- start ------------------------------------------------------------------------------

    def start_run(self, **fields: Any) -> int:
        """Starts the next run; answers its attempt number. ``fields`` are RunStarted's."""
        attempt = self.attempts + 1
        self._run_started(attempt=attempt, **fields)
        return attempt

    @event(ev.RunStarted)
    def _run_started(
        self, attempt: int, run_id: str, project_slug: str, repo: str, repository_key: str,
        repository_type: str, agent_key: str, engine_key: str, runner_kind: str, scenario_key: str,
        proposal_id: str, proposal_key: str, notes: str, publish: bool, dry_run: bool, actor: str,
        transport_actor: str, pr_submission_policy: str, pr_submission_pipeline: str,
        pr_submission_actor_agent_key: str, at: str,
    ) -> None:
        self.attempts = attempt
        self._fold(ev.RunStarted, locals())

    # -- steps ------------------------------------------------------------------------------

    def plan(self, **fields: Any) -> None:
        self._step(self._publication_planned, fields)

    @event(ev.PublicationPlanned)
    def _publication_planned(
        self, attempt: int, mode: str, branch_name: str, base_branch: str, committed_paths: list[str],
        pr_title: str, pr_body: str, labels: list[str], check_run_names: list[str], artifact_path: str, at: str,
        run_id: str = "",
    ) -> None:
        self._fold(ev.PublicationPlanned, locals())

    def commit(self, **fields: Any) -> None:
        self._step(self._branch_committed, fields)

    @event(ev.BranchCommitted)
    def _branch_committed(
        self, attempt: int, branch_name: str, base_sha: str, head_sha: str, committed_paths: list[str], at: str,
        run_id: str = "",
    ) -> None:
        self._fold(ev.BranchCommitted, locals())

    def publish(self, **fields: Any) -> None:
        self._step(self._pull_request_published, fields)

    @event(ev.PullRequestPublished)
    def _pull_request_published(
        self, attempt: int, run_id: str, repo: str, repository_key: str, pr_number: int, pr_url: str,
        pr_owner: str, pr_repo: str, head_sha: str, merge_sha: str, github_ref: str, author: str, at: str,
    ) -> None:
        self._fold(ev.PullRequestPublished, locals())

    def pushed(self, **fields: Any) -> None:
        self._step(self._branch_pushed, fields)

    @event(ev.BranchPushed)
    def _branch_pushed(
        self, attempt: int, run_id: str, origin: str, branch_name: str, head_sha: str, status: str, error: str,
        at: str,
    ) -> None:
        self._fold(ev.BranchPushed, locals())

    def check_run(self, **fields: Any) -> None:
        self._step(self._check_run_recorded, fields)

    @event(ev.CheckRunRecorded)
    def _check_run_recorded(
        self, attempt: int, check_run_id: int, name: str, conclusion: str, summary: str, at: str, run_id: str = ""
    ) -> None:
        self._fold(ev.CheckRunRecorded, locals())

    def comment(self, **fields: Any) -> None:
        self._step(self._comment_posted, fields)

    @event(ev.CommentPosted)
    def _comment_posted(
        self, attempt: int, comment_id: int, comment_url: str, body: str, at: str, run_id: str = ""
    ) -> None:
        self._fold(ev.CommentPosted, locals())

    def evidence(self, **fields: Any) -> None:
        self._step(self._evidence_recorded, fields)

    @event(ev.EvidenceRecorded)
    def _evidence_recorded(
        self, attempt: int, run_id: str, repo: str, repository_key: str, repository_type: str, scope: str,
        evidence_url: str, artifact_path: str, pr_url: str, at: str,
    ) -> None:
        self._fold(ev.EvidenceRecorded, locals())

    def decide(self, **fields: Any) -> None:
        self._step(self._promotion_decided, fields)

    @event(ev.PromotionDecided)
    def _promotion_decided(self, attempt: int, decision: str, reasons: list[str], at: str, run_id: str = "") -> None:
        self._fold(ev.PromotionDecided, locals())

    # -- ends -------------------------------------------------------------------------------

    def complete(self, *, attempt: int, status: str, at: str) -> None:
        self._step(self._run_completed, {"attempt": attempt, "status": status, "at": at})

    @event(ev.RunCompleted)
    def _run_completed(self, attempt: int, status: str, at: str, run_id: str = "") -> None:
        self.ended.add(attempt)
        self._fold(ev.RunCompleted, locals())

    def fail(self, *, attempt: int, step: str, error_message: str, at: str) -> None:
        self._step(self._run_failed, {"attempt": attempt, "step": step, "error_message": error_message, "at": at})

    @event(ev.RunFailed)
    def _run_failed(self, attempt: int, step: str, error_message: str, at: str, run_id: str = "") -> None:
        self.ended.add(attempt)
        self._fold(ev.RunFailed, locals())
