"""The Run aggregate: one studio run of a squad, from launch to its end."""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import event

from domain.shared.base import Aggregate, stored_topic
from domain.shared.errors import Conflict
from domain.shared.ids import run_key
from domain.studio.events import (
    ControlRecorded,
    ExecutionRequested,
    ExecutionStarted,
    HandoffRecorded,
    PreviewShared,
    ProcessAssigned,
    RunCleanedUp,
    RunCompleted,
    RunLaunched,
    RunSessionOpened,
    TickRecorded,
)

READY = "ready"
SCHEDULED = "scheduled"
RUNNING = "running"
COMPLETED = "completed"
CLEANED_UP = "cleaned_up"
ENDED = frozenset({COMPLETED, CLEANED_UP})
STATUSES = (READY, SCHEDULED, RUNNING, COMPLETED, CLEANED_UP)
# What a tick report says about the run; the rest counts what that one tick did.
REPORT_STATE = ("status", "session_count", "live_status_counts", "blockers", "plane", "diagnosis")


class RunEnded(Conflict):
    code = "run_ended"


class Run(Aggregate):
    """A run: its launch inputs, its sessions by agent, its execution and tick reports.

    Sessions are separate aggregates (one per agent) so agents of a run do not contend;
    the run keeps only the index agent_id -> session_id and the handoff trail.
    """

    @staticmethod
    def create_id(tenant: str, run_id: str) -> str:
        return run_key(tenant, run_id)

    @event(RunLaunched)
    def __init__(
        self,
        *,
        tenant: str,
        run_id: str,
        project_slug: str,
        template_id: str,
        agent_process_kind: str,
        work_scope: str,
        next_goal: str,
        roster: list[dict[str, Any]],
        source_ref: dict[str, Any],
        proposal: dict[str, Any],
        seed: int,
        launched_by: str,
        source_run_id: str = "",
        project_facts: dict[str, Any] | None = None,
    ) -> None:
        self.tenant = tenant
        self.run_id = run_id
        self.project_slug = project_slug
        self.template_id = template_id
        self.agent_process_kind = agent_process_kind
        self.work_scope = work_scope
        self.next_goal = next_goal
        self.roster = roster
        self.source_ref = source_ref
        self.proposal = proposal
        self.seed = seed
        self.launched_by = launched_by
        self.source_run_id = source_run_id
        self.project_facts = project_facts or {}
        self.status = READY
        self.sessions: dict[str, str] = {}
        self.tick = 0
        self.queue_requested_at = ""
        self.started_at = ""
        self.last_tick_at = ""
        self.last_report: dict[str, Any] = {}
        self.handoff_count = 0
        self.verification_waves = 0
        self.preview: dict[str, Any] = {}
        # Run-level process assignments, in order: sessions opened later for their target take them.
        self.process_assignments: list[dict[str, str]] = []

    # -- guards -----------------------------------------------------------------------

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    def _require_open(self) -> None:
        if self.ended:
            raise RunEnded(f"Run {self.run_id} has ended ({self.status}).")

    # -- sessions ----------------------------------------------------------------------

    def open_session(self, agent_id: str, session_id: str, role_key: str, via: str) -> None:
        self._require_open()
        if agent_id in self.sessions:
            raise Conflict(f"Agent {agent_id} already has a session in run {self.run_id}.")
        self._session_opened(agent_id=agent_id, session_id=session_id, role_key=role_key, via=via)

    @event(RunSessionOpened)
    def _session_opened(self, agent_id: str, session_id: str, role_key: str, via: str) -> None:
        self.sessions[agent_id] = session_id

    # -- execution queue ---------------------------------------------------------------

    def request_execution(self, requested_at: str, requested_by: str) -> bool:
        """Schedules the run; a kick on a scheduled or running run is a follow-up.

        A follow-up keeps the original queue position (FIFO by the first unserved
        ``requested_at``), so newer kicks never starve older scheduled runs.
        """
        self._require_open()
        follow_up = self.status in (SCHEDULED, RUNNING)
        self._execution_requested(
            requested_at=requested_at, requested_by=requested_by, follow_up=follow_up
        )
        return follow_up

    @event(ExecutionRequested)
    def _execution_requested(self, requested_at: str, requested_by: str, follow_up: bool) -> None:
        if not follow_up:
            self.status = SCHEDULED
            self.queue_requested_at = requested_at

    def start_execution(self, started_at: str) -> None:
        if self.status != SCHEDULED:
            raise Conflict(f"Run {self.run_id} is {self.status}, not scheduled.")
        self._execution_started(started_at=started_at)

    @event(ExecutionStarted)
    def _execution_started(self, started_at: str) -> None:
        self.status = RUNNING
        self.started_at = started_at

    def record_tick(self, tick: int, at: str, report: dict[str, Any]) -> None:
        """Records a tick that changed something; ``report["quiet_ticks"]`` counts the
        ticks before it that changed nothing (and were not recorded)."""
        if self.status != RUNNING:
            raise Conflict(f"Run {self.run_id} is {self.status}; only running runs tick.")
        quiet = report.get("quiet_ticks", 0)
        if not isinstance(quiet, int) or quiet < 0 or tick != self.tick + quiet + 1:
            raise Conflict(
                f"Tick {tick} out of order; run {self.run_id} is at {self.tick} "
                f"with {quiet!r} quiet ticks since."
            )
        self._tick_recorded(tick=tick, at=at, report=report)

    def reports_same(self, report: dict[str, Any]) -> bool:
        """Whether ``report`` says what the last recorded one says (its tallies aside)."""
        last = self.last_report
        return bool(last) and all(last.get(k) == report.get(k) for k in REPORT_STATE)

    @event(TickRecorded)
    def _tick_recorded(self, tick: int, at: str, report: dict[str, Any]) -> None:
        self.tick = tick
        self.last_tick_at = at
        self.last_report = report

    # -- handoffs, preview -------------------------------------------------------------

    def record_handoff(self, **handoff: Any) -> None:
        """Records a handoff between two of the run's agents (the fields of ``HandoffRecorded``)."""
        self._require_open()
        self._handoff_recorded(**handoff)

    @event(HandoffRecorded)
    def _handoff_recorded(
        self,
        handoff_id: str,
        from_agent_id: str,
        to_agent_id: str,
        to_session_id: str,
        kind: str,
        reason: str,
        thread_id: str = "",
        actor: str = "",
    ) -> None:
        self.handoff_count += 1

    def share_preview(self, preview: dict[str, Any], updated_at: str) -> None:
        self._preview_shared(preview=preview, updated_at=updated_at)

    @event(PreviewShared)
    def _preview_shared(self, preview: dict[str, Any], updated_at: str) -> None:
        self.preview = preview

    # -- control (run-level verbs) -----------------------------------------------------

    def record_control(self, **control: Any) -> None:
        """Records a run-level verb with its actor, reason and cause (``ControlRecorded``)."""
        self._require_open()
        self._control_recorded(**control)

    @event(ControlRecorded)
    def _control_recorded(
        self,
        control_id: str,
        verb: str,
        actor: str,
        reason: str,
        causation_id: str,
        params: dict[str, Any],
    ) -> None:
        if verb == "verify_wave":
            self.verification_waves += 1

    # -- process assignments -------------------------------------------------------------

    def assign_process(self, **assignment: Any) -> None:
        """Records an assignment (``ProcessAssigned``) for its ``target`` (agent id, role key or
        group) that sessions opened later in the run take instead of their role's default."""
        self._require_open()
        self._process_assigned(**assignment)

    @event(ProcessAssigned)
    def _process_assigned(
        self,
        target: str,
        provider: str,
        model: str,
        effort: str,
        speed: str,
        actor: str,
        control_id: str,
        source: str,
        at: str,
    ) -> None:
        self.process_assignments.append({
            "target": target, "provider": provider, "model": model, "effort": effort, "speed": speed,
            "control_id": control_id,
        })

    # -- end ---------------------------------------------------------------------------

    def complete(self, at: str, summary: dict[str, Any]) -> None:
        self._require_open()
        self._completed(at=at, summary=summary)

    @event(RunCompleted)
    def _completed(self, at: str, summary: dict[str, Any]) -> None:
        self.status = COMPLETED

    def clean_up(self, *, at: str, actor: str, reason: str, control_id: str = "") -> None:
        self._require_open()
        self._cleaned_up(at=at, actor=actor, reason=reason, control_id=control_id)

    @event(RunCleanedUp)
    def _cleaned_up(self, at: str, actor: str, reason: str, control_id: str) -> None:
        self.status = CLEANED_UP


stored_topic(Run, "domain.run:Run")  # its module has moved since the log began
