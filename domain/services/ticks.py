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

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eventsourcing.persistence import RecordConflictError

from domain import ports
from domain.clock import shift
from domain.errors import DomainError, NotFound
from domain.ids import run_key, session_key
from domain.lease import SUSPEND_AFTER_SECONDS, WorkspaceLease
from domain.policies.diagnosis import zero_output_first_tool_block
from domain.run import RUNNING, SCHEDULED, Run
from domain.services.holdings import Holdings
from domain.services.recovery import recreate_once
from domain.services.runs import derived_id
from domain.session import BLOCKED, COMPLETED, STOPPED, TERMINAL, AgentSession

if TYPE_CHECKING:
    from domain.application import SquadOps

ERROR_TRACKING_ROLES = frozenset({"role_tester", "role_compactor"})
ERROR_TRACKING_SERVER = "errors"
VCS_BASE_URL = "https://vcs.squadops.local"
PROBE_SECONDS = 30


@dataclass
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


def loadout(role_key: str, skill_ids: Sequence[str], mcp_server_ids: Sequence[str]) -> tuple[list[str], list[str]]:
    """Skills and tool servers resolved at session launch (never in the roster snapshot)."""
    servers = list(dict.fromkeys(mcp_server_ids))
    if role_key in ERROR_TRACKING_ROLES and ERROR_TRACKING_SERVER not in servers:
        servers.append(ERROR_TRACKING_SERVER)
    return list(dict.fromkeys(skill_ids)), servers


def session_counts(sessions: Iterable[AgentSession]) -> Counter[str]:
    return Counter(s.live_status for s in sessions)


class TickCommands:
    def tick_runs(
        self: SquadOps,
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
            holdings.refresh(self)
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
            changed = list({id(a): a for a in changed}.values())
            try:
                if changed:
                    holdings.skip_own(self.save(*changed))
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

    def _housekeep_leases(self: SquadOps, plane: ports.ExecutionPlane) -> list[Any]:
        """Suspends workspaces idle past their window; probes busy ones now and then."""
        at = self.now()
        changed = []
        probe = getattr(plane, "probe_workspace", None)
        for lease in list(self.holdings.aggregates.values()):
            if not isinstance(lease, WorkspaceLease) or lease.pending_events:
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

    def _held_or_none(self: SquadOps, aggregate_id: str) -> Any:
        try:
            return self.holdings.get(self, aggregate_id)
        except NotFound:
            return None

    @property
    def holdings(self: SquadOps) -> Holdings:
        held = self.__dict__.get("_holdings")
        if held is None:
            held = self.__dict__["_holdings"] = Holdings()
        return held

    def _release_ended(self: SquadOps, changed: Sequence[Any]) -> None:
        """Keeps what was saved; a run that ended no longer ticks: forget its copies."""
        self.holdings.adopt(changed)
        runs = [a for a in changed if isinstance(a, Run)]
        self.holdings.forget_quiet(a.id for a in runs)  # a recorded tick ends the stretch
        ended = {(a.tenant, a.run_id) for a in runs if a.ended}
        if ended:
            self.holdings.drop(
                a
                for a in list(self.holdings.aggregates.values())
                if (a.tenant, getattr(a, "run_id", None)) in ended
            )

    def _tick_alone(
        self: SquadOps,
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
                    self.save(*aggregates)
            except Exception:
                self.holdings.drop(self.holdings.batch.values())
                raise
            self._release_ended(aggregates)
            return one

        try:
            return self.retrying(command)
        except DomainError:
            return TickOutcome()

    def _tick_one(
        self: SquadOps,
        plane: ports.ExecutionPlane,
        tenant: str,
        run_id: str,
        starting: bool,
        policies: Sequence[Any],
        fresh_after: str = "",
    ) -> tuple[list[Any], TickOutcome]:
        run = self.holdings.get(self, run_key(tenant, run_id))
        outcome = TickOutcome()
        at = self.now()
        quiet = self.holdings.quiet_since(run)
        if fresh_after and max(run.last_tick_at, quiet.last_at if quiet else "") > fresh_after:
            return [], outcome
        if starting and run.status == SCHEDULED:
            run.start_execution(at)
            outcome.runs_started = 1
        if run.status != RUNNING:
            self.holdings.forget_quiet([run.id])
            return ([run] if run.pending_events else []), outcome
        sessions = {
            agent_id: self.holdings.get(self, session_key(tenant, run_id, session_id, agent_id))
            for agent_id, session_id in run.sessions.items()
        }
        quiet_ticks = quiet.count if quiet is not None else 0
        tick = run.tick + quiet_ticks + 1
        template = self.templates.get(run.template_id)
        steps: list[ports.Step] = []
        for policy in policies:
            steps.extend(policy.plan(run, list(sessions.values()), tick))
        steps.extend(plane.plan_tick(run, list(sessions.values()), tick))
        tallies: Counter[str] = Counter()
        touched: dict[str, Any] = {}
        complete: ports.CompleteRun | None = None
        for step in steps:
            if isinstance(step, ports.CompleteRun):
                complete = step
                continue
            try:
                self._apply_step(run, template, sessions, step, at, tick, touched, plane)
                tallies[step.__struct_config__.tag] += 1
            except DomainError:
                tallies["rejected"] += 1
        counts = session_counts(sessions.values())
        ended = counts[COMPLETED] + counts[STOPPED]
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
            "tool_calls": tallies["call_tool"],
            "handoffs": tallies["handoff"],
            "pull_requests": tallies["open_pull_request"],
            "completed_sessions": tallies["finish"],
            "rejected_steps": tallies["rejected"],
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
            outcome.rejected_steps = tallies["rejected"]
            return [], outcome
        report["quiet_ticks"] = quiet_ticks
        run.record_tick(tick, at, report)
        if completing and complete is not None:
            run.complete(at, {**complete.summary, "ticks": tick})
            outcome.runs_completed = 1
        changed.insert(0, run)
        outcome.rejected_steps = tallies["rejected"]
        outcome.events = sum(len(a.pending_events) for a in changed)
        outcome.run_ids.append(run_id)
        return changed, outcome

    def _apply_step(
        self: SquadOps,
        run: Run,
        template: Any,
        sessions: dict[str, AgentSession],
        step: ports.Step,
        at: str,
        tick: int,
        touched: dict[str, Any],
        plane: Any = None,
    ) -> None:
        session = sessions.get(step.agent_id)
        if session is None:
            raise DomainError(f"No session for agent {step.agent_id}.", code="unknown_agent")
        match step:
            case ports.StartProcess():
                skills, servers = loadout(
                    session.role_key, session.spec_skill_ids, session.spec_mcp_server_ids
                )
                lease = self.lease(run, step.workspace_name, at, self._held_or_none)
                self.holdings.add_new(lease)
                self.take_slot(run, session, lease, at)
                touched[lease.id] = lease
                session.start_process(
                    llm_session_id=step.llm_session_id,
                    skill_ids=skills,
                    mcp_server_ids=servers,
                    workspace_name=step.workspace_name,
                    at=at,
                    tick=tick,
                )
            case ports.RestartProcess():
                if session.ended:
                    raise DomainError("A finished session cannot restart.", code="session_ended")
                probe = getattr(plane, "probe_workspace", None)
                if step.probe_workspace and session.workspace_name and probe is not None:
                    lease = self.lease(run, session.workspace_name, at, self._held_or_none)
                    self.holdings.add_new(lease)
                    lease.record_probe(live_status=probe(lease), at=at)
                    touched[lease.id] = lease
                if step.fresh_workspace:
                    # The old workspace keeps no slot for a session that moves to a fresh one.
                    lease = self.give_back_slot(run, session, "fresh_workspace", at, self._held_or_none)
                    if lease is not None:
                        touched[lease.id] = lease
                session.restart_process(
                    reason=step.reason,
                    actor="policy",
                    control_id="",
                    at=at,
                    fresh_workspace=step.fresh_workspace,
                    tick=tick,
                )
            case ports.StartFailed():
                if session.live_status != "ready":
                    raise DomainError("Only a starting session can fail its start.", code="not_starting")
                lease = self.lease(run, step.workspace_name, at, self._held_or_none)
                self.holdings.add_new(lease)
                old_provider_id = lease.provider_workspace_id
                if lease.status != "missing":
                    # The session row points at the old provider id: a slot binding that a
                    # recreation keeps as stale and the next start revives.
                    self.take_slot(run, session, lease, at)
                    lease.mark_missing(reason=step.error, at=at)
                    touched[lease.id] = lease
                session.fail_start(
                    workspace_name=step.workspace_name,
                    provider_workspace_id=old_provider_id,
                    error=step.error,
                    message=step.message or f"The sandbox start failed: {step.error}.",
                    at=at,
                    tick=tick,
                )
            case ports.RecreateWorkspace():
                workspace_name = session.workspace_for_recovery()
                recreated = False
                if workspace_name:
                    lease = self.lease(run, workspace_name, at, self._held_or_none)
                    self.holdings.add_new(lease)
                    recreated = recreate_once(run, lease, step.reason, at)
                    touched[lease.id] = lease
                session.restart_workspace(
                    reason=step.reason, actor="policy", control_id="", at=at, recreated=recreated, tick=tick
                )
            case ports.SelfHeal():
                workspace_name = session.workspace_for_recovery()
                session.self_heal(signal=step.signal, at=at, tick=tick)
                if workspace_name:
                    lease = self.lease(run, workspace_name, at, self._held_or_none)
                    self.holdings.add_new(lease)
                    lease.release_slot(
                        session_id=session.session_id,
                        reason="self_heal",
                        at=at,
                        suspend_after_at=shift(at, SUSPEND_AFTER_SECONDS),
                    )
                    recreate_once(run, lease, f"self_heal:{step.signal}", at)
                    touched[lease.id] = lease
            case ports.ControllerAction():
                session.observe_controller_action(step.action, step.summary, at)
            case ports.CallTool():
                session.call_tool(
                    tool_name=step.tool_name, route=step.route, summary=step.summary, at=at, tick=tick
                )
            case ports.Say():
                session.say(step.text, at)
            case ports.Block():
                session.block(
                    code=step.code, message=step.message, evidence=dict(step.evidence), at=at, tick=tick
                )
                # A runner losing its sandbox is that session's signal; only a failed start
                # (StartFailed) says the shared workspace's provider binding is gone.
            case ports.Handoff():
                self._hand_off(run, template, sessions, session, step, at)
            case ports.OpenPullRequest():
                session.open_pull_request(
                    pr_url=f"{VCS_BASE_URL}/{step.pr_owner}/{step.pr_repo}/pull/{step.pr_number}",
                    pr_owner=step.pr_owner,
                    pr_repo=step.pr_repo,
                    pr_number=step.pr_number,
                    repository_key=step.repository_key,
                    at=at,
                )
            case ports.Finish():
                if session.finish(result=dict(step.result), at=at, tick=tick):
                    lease = self.give_back_slot(run, session, "session_completed", at, self._held_or_none)
                    if lease is not None:
                        touched[lease.id] = lease
            case _:
                raise DomainError(f"Unknown step {step!r}.", code="unknown_step")

    def _hand_off(
        self: SquadOps,
        run: Run,
        template: Any,
        sessions: dict[str, AgentSession],
        source: AgentSession,
        step: ports.Handoff,
        at: str,
    ) -> None:
        """Routes work to another agent, creating its session when it has none yet."""
        if source.live_status in TERMINAL:
            raise DomainError("A finished session cannot hand off.", code="session_ended")
        target = sessions.get(step.target_agent_id)
        if target is None:
            spec = template.spec(step.spec_agent_id) if template else None
            if spec is None:
                raise DomainError(f"Template has no agent {step.spec_agent_id}.", code="unknown_agent")
            target = self.open_session(
                run,
                template,
                spec,
                joined_via={"kind": step.kind, "from_agent_id": source.agent_id, "reason": step.reason},
                agent_id=step.target_agent_id,
                suit=dict(step.suit) or None,
            )
            sessions[target.agent_id] = target
        thread_id = derived_id("thr", run.run_id, source.agent_id, target.agent_id)
        handoff_id = derived_id("hof", run.run_id, run.handoff_count, source.agent_id, target.agent_id)
        source.hand_off(
            target_agent_id=target.agent_id,
            target_session_id=target.session_id,
            reason=step.reason,
            thread_id=thread_id,
            at=at,
        )
        run.record_handoff(
            handoff_id=handoff_id,
            from_agent_id=source.agent_id,
            to_agent_id=target.agent_id,
            to_session_id=target.session_id,
            kind=step.kind,
            reason=step.reason,
            thread_id=thread_id,
        )
