"""Tick commands: advance running runs one tick through an execution plane.

What one tick changes (the run's report, every session step, new sessions) is saved in
one save; the ticker groups the ticks of many runs into one save as well, and falls back
to one save per run only when a concurrent command touched one of them.

A tick that changes nothing (no step took effect and the report would say what the last
one says) appends nothing: a blocked or idle run costs no events. The policies and the
plane still look at it every tick; the next tick that changes something is recorded
with the tick number after the quiet ones and their count (``quiet_ticks``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from eventsourcing.persistence import RecordConflictError

from domain.shared import ports
from domain.shared.clock import shift
from domain.shared.errors import DomainError
from domain.shared.event_store import EventStore
from domain.shared.ids import run_key, session_key
from domain.shared.loading import unique
from domain.studio.commands.holdings import Holdings
from domain.studio.commands.leases import LeaseCommands
from domain.studio.commands.runs import SessionOpener
from domain.studio.commands.steps import StepEffects
from domain.studio.lease import SUSPEND_AFTER_SECONDS, WorkspaceLease
from domain.studio.policies.diagnosis import zero_output_first_tool_block
from domain.studio.run import RUNNING, SCHEDULED, Run
from domain.studio.session import BLOCKED, COMPLETED, STOPPED, AgentSession
from domain.studio.squad import TemplateCatalog

PROBE_SECONDS = 30


@dataclass(slots=True)
class TickOutcome:
    """What one pass of the ticker did, for logs and metrics."""

    runs_ticked: int = 0
    runs_started: int = 0
    runs_completed: int = 0
    events: int = 0
    quiet: int = 0  # ticks that changed nothing, so appended nothing
    conflicts: int = 0
    rejected_steps: int = 0
    run_ids: list[str] = field(default_factory=list)

    def add(self, other: TickOutcome) -> None:
        self.runs_ticked += other.runs_ticked
        self.runs_started += other.runs_started
        self.runs_completed += other.runs_completed
        self.events += other.events
        self.quiet += other.quiet
        self.conflicts += other.conflicts
        self.rejected_steps += other.rejected_steps
        self.run_ids.extend(other.run_ids)


def session_counts(sessions: Iterable[AgentSession]) -> dict[str, int]:
    """Sessions by live status (only the statuses present)."""
    counts: dict[str, int] = {}
    for s in sessions:
        counts[s.live_status] = counts.get(s.live_status, 0) + 1
    return counts


class TickCommands:
    """Starts and ticks runs through an execution plane, on the ticker's held copies."""

    def __init__(
        self,
        store: EventStore,
        leases: LeaseCommands,
        opener: SessionOpener,
        *,
        templates: TemplateCatalog,
        clock: Callable[[], str],
        log: ports.LogFollower,
    ) -> None:
        self.store = store
        self.templates = templates
        self.clock = clock
        self.holdings = Holdings(store, log)
        self.steps = StepEffects(self.holdings, leases, opener)

    def tick_runs(
        self,
        plane: ports.ExecutionPlane,
        *,
        tick: Sequence[tuple[str, str]] = (),
        start: Sequence[tuple[str, str]] = (),
        policies: Sequence[Any] = (),
        fresh_after: str = "",
    ) -> TickOutcome:
        """Starts ``start`` runs and ticks them with the running ``tick`` runs, in one save.

        A run whose last tick is later than ``fresh_after`` was just ticked (by another
        ticker, or before a retry) and is left for the next pass.
        """
        refs = [(ref, False) for ref in tick] + [(ref, True) for ref in start]
        if not refs:
            return TickOutcome()
        holdings = self.holdings
        with holdings.lock:
            holdings.refresh()
            holdings.batch = {}
            outcome = TickOutcome()
            changed: list[Any] = []
            for (tenant, run_id), starting in refs:
                try:
                    aggregates, one = self._tick_one(
                        plane, tenant, run_id, starting, policies, fresh_after
                    )
                except DomainError:
                    continue
                changed.extend(aggregates)
                outcome.add(one)
            changed.extend(self._housekeep_leases(plane))
            changed = unique(changed)
            try:
                if changed:
                    holdings.skip_own(self.store.save(*changed))
                self._release_ended(changed)
                return outcome
            except BaseException as exc:  # not stored (or not known): the copies are ahead of the log
                holdings.drop(changed)
                holdings.drop(holdings.batch.values())
                if not isinstance(exc, RecordConflictError):
                    raise  # e.g. the database went away: saving from them would skip versions
            # A concurrent command touched one of the runs: tick each run on its own.
            outcome = TickOutcome(conflicts=1)
            for (tenant, run_id), starting in refs:
                outcome.add(
                    self._tick_alone(plane, tenant, run_id, starting, policies, fresh_after)
                )
            return outcome

    def _housekeep_leases(self, plane: ports.ExecutionPlane) -> list[Any]:
        """Suspends workspaces idle past their window; probes busy ones now and then."""
        at = self.clock()
        changed = []
        probe = getattr(plane, "probe_workspace", None)
        for lease in list(self.holdings.aggregates.values()):
            # (a class check by identity: ``isinstance`` on an ABC, over every held copy, costs)
            if type(lease) is not WorkspaceLease or lease.pending_events:
                continue
            if lease.status == "ready" and not lease.slots and lease.idle_since:
                if shift(lease.idle_since, SUSPEND_AFTER_SECONDS) <= at:
                    lease.suspend(at=at)
            elif (
                probe is not None
                and lease.slots
                and (not lease.last_verified_at or shift(lease.last_verified_at, PROBE_SECONDS) <= at)
            ):
                lease.record_probe(live_status=probe(lease), at=at)
            if lease.pending_events:
                self.holdings.batch[lease.id] = lease
                changed.append(lease)
        return changed

    def _release_ended(self, changed: Sequence[Any]) -> None:
        """Keeps what was saved; a run that ended no longer ticks: forget its copies."""
        self.holdings.adopt(changed)
        runs = [a for a in changed if type(a) is Run]
        self.holdings.forget_quiet(a.id for a in runs)  # a recorded tick ends the stretch
        ended = {(a.tenant, a.run_id) for a in runs if a.ended}
        if ended:
            self.holdings.note_ended(a.id for a in runs if a.ended)
            # (the run id first: a plain string lookup rules out nearly every held copy)
            run_ids = {run_id for _, run_id in ended}
            self.holdings.drop(
                [
                    a
                    for a in self.holdings.aggregates.values()
                    if getattr(a, "run_id", None) in run_ids and (a.tenant, a.run_id) in ended
                ]
            )

    def _tick_alone(
        self,
        plane: ports.ExecutionPlane,
        tenant: str,
        run_id: str,
        starting: bool,
        policies: Sequence[Any],
        fresh_after: str,
    ) -> TickOutcome:
        def command() -> TickOutcome:
            self.holdings.batch = {}
            try:
                aggregates, one = self._tick_one(
                    plane, tenant, run_id, starting, policies, fresh_after
                )
                if aggregates:
                    self.store.save(*aggregates)
            except Exception:
                self.holdings.drop(self.holdings.batch.values())
                raise
            self._release_ended(aggregates)
            return one

        try:
            return self.store.retrying(command)
        except DomainError:
            return TickOutcome()

    def _tick_one(
        self,
        plane: ports.ExecutionPlane,
        tenant: str,
        run_id: str,
        starting: bool,
        policies: Sequence[Any],
        fresh_after: str = "",
    ) -> tuple[list[Any], TickOutcome]:
        key = run_key(tenant, run_id)
        if key in self.holdings.ended:  # it did nothing but load the run and see it ended
            return [], TickOutcome()
        run = self.holdings.get(key)
        outcome = TickOutcome()
        at = self.clock()
        quiet = self.holdings.quiet_since(run)
        if fresh_after and max(run.last_tick_at, quiet.last_at if quiet else "") > fresh_after:
            return [], outcome
        if starting and run.status == SCHEDULED:
            run.start_execution(at)
            outcome.runs_started = 1
        if run.status != RUNNING:
            self.holdings.forget_quiet([run.id])
            if run.ended and not run.pending_events:
                self.holdings.note_ended([run.id])
                self.holdings.drop([run])
            return ([run] if run.pending_events else []), outcome
        get = self.holdings.get
        sessions = {
            agent_id: get(session_key(tenant, run_id, session_id, agent_id))
            for agent_id, session_id in run.sessions.items()
        }
        quiet_ticks = quiet.count if quiet is not None else 0
        tick = run.tick + quiet_ticks + 1
        template = self.templates.get(run.template_id)
        steps: list[ports.Step] = []
        members = list(sessions.values())
        for policy in policies:
            steps.extend(policy.plan(run, list(members), tick))
        steps.extend(plane.plan_tick(run, members, tick))
        tallies: dict[str, int] = {}  # applied steps by kind, and "rejected"
        touched: dict[str, Any] = {}
        complete: ports.CompleteRun | None = None
        apply = self.steps.apply
        for step in steps:
            if isinstance(step, ports.CompleteRun):
                complete = step
                continue
            try:
                apply(run, template, sessions, step, at, tick, touched, plane)
            except DomainError:
                tallies["rejected"] = tallies.get("rejected", 0) + 1
            else:
                tag = step.__struct_config__.tag
                tallies[tag] = tallies.get(tag, 0) + 1
        counts = session_counts(sessions.values())
        ended = counts.get(COMPLETED, 0) + counts.get(STOPPED, 0)
        completing = complete is not None and ended == len(sessions)
        blockers = sorted(
            (s.agent_id, s.blocker_code) for s in sessions.values() if s.live_status == BLOCKED
        )
        status = "completed" if completing else ("blocked" if blockers else RUNNING)
        report = {
            "tick": tick,
            "status": status,
            "at": at,
            "session_count": len(sessions),
            "live_status_counts": dict(sorted(counts.items())),
            "tool_calls": tallies.get("call_tool", 0),
            "handoffs": tallies.get("handoff", 0),
            "pull_requests": tallies.get("open_pull_request", 0),
            "completed_sessions": tallies.get("finish", 0),
            "rejected_steps": tallies.get("rejected", 0),
            "blockers": [{"agent_id": a, "blocker_code": c} for a, c in blockers],
            "plane": plane.name,
            "diagnosis": zero_output_first_tool_block(sessions.values()),
        }
        changed: list[Any] = [s for s in sessions.values() if s.pending_events]
        changed += [lease for lease in touched.values() if lease.pending_events]
        outcome.runs_ticked = 1
        if not changed and not run.pending_events and not completing and run.reports_same(report):
            self.holdings.note_quiet(run, at)
            outcome.quiet = 1
            outcome.rejected_steps = tallies.get("rejected", 0)
            return [], outcome
        report["quiet_ticks"] = quiet_ticks
        run.record_tick(tick, at, report)
        if completing and complete is not None:
            run.complete(at, {**complete.summary, "ticks": tick})
            outcome.runs_completed = 1
        changed.insert(0, run)
        outcome.rejected_steps = tallies.get("rejected", 0)
        outcome.events = sum(len(a.pending_events) for a in changed)
        outcome.run_ids.append(run_id)
        return changed, outcome
