"""Execution steps applied to a run's aggregates: what each step of a plane or a recovery
policy changes, through the aggregates' guards (a rejected step raises DomainError)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from domain.projects.pull_numbers import NumbersTaken, PullNumbers, pull_numbers_key
from domain.shared import ports
from domain.shared.clock import shift
from domain.shared.errors import DomainError
from domain.shared.ids import derived_id
from domain.studio.commands.effects import switch_process
from domain.studio.commands.holdings import Holdings
from domain.studio.commands.leases import LeaseCommands, recreate_once
from domain.studio.commands.runs import SessionOpener
from domain.studio.commands.tool_calls import deliver_comment
from domain.studio.control import ControlIntent
from domain.studio.lease import SUSPEND_AFTER_SECONDS
from domain.studio.run import Run
from domain.studio.session import READY, TERMINAL, AgentSession

ERROR_TRACKING_ROLES = frozenset({"role_tester", "role_compactor"})
ERROR_TRACKING_SERVER = "errors"
VCS_BASE_URL = "https://vcs.squadops.local"
PROVIDER_FALLBACK = "provider_fallback"


def loadout(role_key: str, skill_ids: Sequence[str], mcp_server_ids: Sequence[str]) -> tuple[list[str], list[str]]:
    """Skills and tool servers resolved at session launch (never in the roster snapshot)."""
    servers = list(dict.fromkeys(mcp_server_ids))
    if role_key in ERROR_TRACKING_ROLES and ERROR_TRACKING_SERVER not in servers:
        servers.append(ERROR_TRACKING_SERVER)
    return list(dict.fromkeys(skill_ids)), servers


class StepEffects:
    """Applies one execution step to the ticker's held copies of a run's aggregates."""

    def __init__(self, holdings: Holdings, leases: LeaseCommands, opener: SessionOpener) -> None:
        self.holdings = holdings
        self.leases = leases
        self.opener = opener
        self.taken: NumbersTaken | None = None  # wired by the workers (the pulls read model)

    def apply(
        self,
        run: Run,
        template: Any,
        sessions: dict[str, AgentSession],
        step: ports.Step,
        at: str,
        tick: int,
        touched: dict[str, Any],
        plane: Any = None,
    ) -> None:
        """Applies ``step`` to its session and the leases it touches (added to ``touched``)."""
        session = sessions.get(step.agent_id)
        if session is None:
            raise DomainError(f"No session for agent {step.agent_id}.", code="unknown_agent")
        # (the commonest steps first: each class pattern is an isinstance through msgspec's
        # metaclass, and the step classes are disjoint, so the order decides nothing else)
        match step:
            case ports.CallTool():
                session.call_tool(
                    tool_name=step.tool_name, route=step.route, summary=step.summary, at=at, tick=tick,
                    result=step.result,
                )
            case ports.Say():
                session.say(step.text, at)
            case ports.FailToolCall():
                session.fail_tool_call(
                    tool_name=step.tool_name, reason=step.reason, route=step.route, summary=step.summary,
                    at=at, tick=tick, result=step.result,
                )
            case ports.ReportModel():
                session.report_model(step.model, at)
            case ports.ControllerAction():
                session.observe_controller_action(step.action, step.summary, at)
            case ports.StartProcess():
                skills, servers = loadout(
                    session.role_key, session.spec_skill_ids, session.spec_mcp_server_ids
                )
                lease = self.leases.lease(run, step.workspace_name, at, self.holdings.get_or_none)
                self.holdings.add_new(lease)
                self.leases.take_slot(run, session, lease, at)
                touched[lease.id] = lease
                session.start_process(
                    llm_session_id=step.llm_session_id,
                    skill_ids=skills,
                    mcp_server_ids=servers,
                    workspace_name=step.workspace_name,
                    at=at,
                    tick=tick,
                    model_ran=step.model_ran,
                    confinement=step.confinement,
                )
            case ports.RestartProcess():
                if session.ended:
                    raise DomainError("A finished session cannot restart.", code="session_ended")
                probe = getattr(plane, "probe_workspace", None)
                if step.probe_workspace and session.workspace_name and probe is not None:
                    lease = self.leases.lease(run, session.workspace_name, at, self.holdings.get_or_none)
                    self.holdings.add_new(lease)
                    lease.record_probe(live_status=probe(lease), at=at)
                    touched[lease.id] = lease
                if step.fresh_workspace:
                    # The old workspace keeps no slot for a session that moves to a fresh one.
                    lease = self.leases.give_back_slot(run, session, "fresh_workspace", at, self.holdings.get_or_none)
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
                lease = self.leases.lease(run, step.workspace_name, at, self.holdings.get_or_none)
                self.holdings.add_new(lease)
                old_provider_id = lease.provider_workspace_id
                if lease.status != "missing":
                    # The session row points at the old provider id: a slot binding that a
                    # recreation keeps as stale and the next start revives.
                    self.leases.take_slot(run, session, lease, at)
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
                    lease = self.leases.lease(run, workspace_name, at, self.holdings.get_or_none)
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
                    lease = self.leases.lease(run, workspace_name, at, self.holdings.get_or_none)
                    self.holdings.add_new(lease)
                    lease.release_slot(
                        session_id=session.session_id,
                        reason="self_heal",
                        at=at,
                        suspend_after_at=shift(at, SUSPEND_AFTER_SECONDS),
                    )
                    recreate_once(run, lease, f"self_heal:{step.signal}", at)
                    touched[lease.id] = lease
            case ports.Block():
                session.block(
                    code=step.code, message=step.message, evidence=dict(step.evidence), at=at, tick=tick
                )
                # A runner losing its sandbox is that session's signal; only a failed start
                # (StartFailed) says the shared workspace's provider binding is gone.
            case ports.Handoff():
                self._hand_off(run, template, sessions, session, step, at)
            case ports.OpenPullRequest():
                self._open_pull_request(run, session, step, at, touched)
            case ports.Comment():
                deliver_comment(sessions, session, step, at)
            case ports.SwitchProvider():
                self._fall_back(run, session, step, at)
            case ports.RunnerOutput():
                session.record_runner_output(stream=step.stream, level=step.level, text=step.text, at=at)
            case ports.Finish():
                if session.finish(result=dict(step.result), at=at, tick=tick):
                    lease = self.leases.give_back_slot(
                        run, session, "session_completed", at, self.holdings.get_or_none
                    )
                    if lease is not None:
                        touched[lease.id] = lease
            case _:
                raise DomainError(f"Unknown step {step!r}.", code="unknown_step")

    def _open_pull_request(
        self, run: Run, session: AgentSession, step: ports.OpenPullRequest, at: str, touched: dict[str, Any]
    ) -> None:
        """The session's pull request, numbered in its project in the same save (a number is
        allocated only for a pull request the session may open)."""
        session.check_pull_request(head_sha=step.head_sha, changed_paths=step.changed_paths)
        numbers = self._numbers(run)
        number = numbers.allocate(run_id=run.run_id, agent_id=session.agent_id, session_id=session.session_id, at=at)
        touched[numbers.id] = numbers
        session.open_pull_request(
            pr_url=f"{VCS_BASE_URL}/{step.pr_owner}/{step.pr_repo}/pull/{step.pr_number}", pr_owner=step.pr_owner,
            pr_repo=step.pr_repo, pr_number=step.pr_number, repository_key=step.repository_key, at=at,
            head_sha=step.head_sha, changed_paths=step.changed_paths, project_number=number, title=step.title,
        )

    def _numbers(self, run: Run) -> PullNumbers:
        """The run's project's numbering, started (after the numbers its pages hold) on first use."""
        numbers = self.holdings.get_or_none(pull_numbers_key(run.tenant, run.project_slug))
        if numbers is None:
            after = self.taken.highest(run.tenant, run.project_slug) if self.taken is not None else 0
            numbers = PullNumbers(tenant=run.tenant, project_slug=run.project_slug, after=after)
            self.holdings.add_new(numbers)
        return numbers

    def _fall_back(self, run: Run, session: AgentSession, step: ports.SwitchProvider, at: str) -> None:
        """A provider with no CLI here: the session switches to the fallback provider before
        its process starts (a visible assignment: the switch and its takeover are recorded)."""
        if session.live_status != READY:
            raise DomainError("Only a starting session falls back to another provider.", code="not_starting")
        intent = ControlIntent(verb="switch_agent_process", provider=step.provider, reason=step.reason)
        control_id = derived_id("ctl", run.run_id, session.agent_id, "provider_fallback", session.process_attempt,
                                session.process.get("provider", ""))
        switch_process(
            run, session, intent, control_id, "policy", at, self.opener.aliases,
            assignment={"target": session.agent_id, "provider": step.provider, "model": "", "effort": "", "speed": ""},
            source=PROVIDER_FALLBACK,
        )

    def _hand_off(
        self,
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
            target = self.opener.open_session(
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
