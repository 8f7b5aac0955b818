"""Control commands: operator verbs on a run or on one agent session (C8).

Every verb is recorded as an event with its actor, reason and causation id (the control
id; effects a run verb causes on sessions name the run's control as their cause), and its
effect is the events the action table of the spec gives. One save per verb.

The verbs' effects are dispatched through ``RUN_EFFECTS`` and ``SESSION_EFFECTS`` at the
end of this module: one handler per verb of ``domain.studio.control``'s verb sets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any

from domain.shared.errors import Conflict, Invalid, NotFound, session_not_found
from domain.shared.event_store import EventStore
from domain.shared.ids import derived_id, lease_key, new_id
from domain.shared.loading import Loader, one_copy, unique
from domain.studio.commands.assignments import joinable, switch_sessions
from domain.studio.commands.effects import record_verb, switch_process
from domain.studio.commands.leases import LeaseCommands, recreate_once
from domain.studio.commands.runs import RunCommands, SessionOpener
from domain.studio.control import ControlIntent, check_intent
from domain.studio.lease import WorkspaceLease
from domain.studio.policies.fresh_workspace import fresh_workspace_cause
from domain.studio.policies.walls import clears, wall_for
from domain.studio.run import Run
from domain.studio.session import BLOCKED, PAUSED, AgentSession
from domain.studio.squad import (
    TESTERS,
    Assignment,
    AssignmentError,
    ModelProxyAliases,
    Seat,
    TemplateCatalog,
    plan,
)

SWITCH = "switch_agent_process"


@dataclass(frozen=True)
class ControlOutcome:
    control_id: str
    run_id: str
    session_id: str
    verb: str
    status: str = "accepted"


@dataclass(frozen=True)
class Applied:
    """One verb being applied: what was asked, by whom, when, and the command's loader."""

    intent: ControlIntent
    control_id: str
    actor: str
    at: str
    load: Loader

    @property
    def verb(self) -> str:
        return self.intent.verb

    @property
    def by(self) -> dict[str, str]:
        """Who applied the verb and when, as each event it records names them."""
        return {"actor": self.actor, "control_id": self.control_id, "at": self.at}


@dataclass(eq=False)
class ControlCommands:
    """Operator verbs: records each and applies its effect through the verb tables."""

    store: EventStore
    runs: RunCommands
    leases: LeaseCommands
    opener: SessionOpener
    _: KW_ONLY
    templates: TemplateCatalog
    aliases: ModelProxyAliases
    clock: Callable[[], str]

    # -- entry points -------------------------------------------------------------------------

    def control_run(self, *, tenant: str, run_id: str, intent: ControlIntent, actor: str) -> ControlOutcome:
        check_intent(intent, level="run")
        control_id = new_id("ctl")

        def command() -> ControlOutcome:
            run = self.runs.get_run(tenant, run_id)
            run._require_open()
            applied = Applied(intent, control_id, actor, self.clock(), one_copy(self.store.get_or_none))
            run.record_control(
                control_id=control_id,
                verb=intent.verb,
                actor=actor,
                reason=intent.reason,
                causation_id=control_id,
                params=intent.params(),
            )
            changed = RUN_EFFECTS[intent.verb](self, run, applied)
            self.store.save(*unique([run, *changed]))
            return ControlOutcome(control_id, run.run_id, "", intent.verb)

        return self.store.retrying(command)

    def control_session(
        self,
        *,
        tenant: str,
        run_id: str,
        session_id: str = "",
        agent_id: str = "",
        intent: ControlIntent,
        actor: str,
    ) -> ControlOutcome:
        check_intent(intent, level="session")
        control_id = new_id("ctl")

        def command() -> ControlOutcome:
            run = self.runs.get_run(tenant, run_id)
            run._require_open()
            if intent.verb == SWITCH and not session_id and agent_id not in run.sessions:
                return self._switch_group(run, agent_id, intent, control_id, actor)
            session = (
                self.runs.get_session(run, session_id) if session_id else self.runs.agent_session(run, agent_id)
            )
            session._require_live()
            applied = Applied(intent, control_id, actor, self.clock(), one_copy(self.store.get_or_none))
            record_verb(session, intent.verb, control_id, actor, intent, applied.at)
            changed = self.session_effect(run, session, applied)
            self.store.save(*unique([run, session, *changed]))
            return ControlOutcome(control_id, run.run_id, session.session_id, intent.verb)

        return self.store.retrying(command)

    def _switch_group(self, run: Run, target: str, intent: ControlIntent, control_id: str, actor: str) -> ControlOutcome:
        """``switch_agent_process`` aimed at a role key, ``testers``, or an agent not joined yet:
        the run records the assignment (sessions opened later take it) and every live session
        it names switches now, as ``assign-processes`` does."""
        allowed = joinable(run, self.templates.get(run.template_id))
        if target != TESTERS and target not in allowed:
            raise session_not_found(target)
        sessions = {s.agent_id: s for s in self.runs.all_sessions(run)}
        seats = [Seat(agent_id=a, role_key=s.role_key, live=not s.ended) for a, s in sessions.items()]
        assignment = Assignment(target, intent.provider, intent.model, intent.effort, intent.speed)
        try:
            chosen = plan([assignment], seats, allowed)
        except AssignmentError as exc:
            raise Invalid(str(exc), code="invalid_target") from None
        at = self.clock()
        run.record_control(control_id=control_id, verb=intent.verb, actor=actor, reason=intent.reason,
                           causation_id=control_id, params=intent.params())
        run.assign_process(**assignment.as_dict(), actor=actor, control_id=control_id, source=SWITCH, at=at)
        changed, _ = switch_sessions(
            run, sessions, chosen, control_id=control_id, actor=actor, at=at, aliases=self.aliases, source=SWITCH,
            reason=lambda a: intent.reason or f"switch_agent_process {a.target}",
        )
        self.store.save(run, *changed)
        return ControlOutcome(control_id, run.run_id, "", intent.verb)

    def session_effect(self, run: Run, session: AgentSession, applied: Applied) -> list[Any]:
        """The effect of a session verb (the action table); answers the other aggregates changed."""
        return SESSION_EFFECTS[applied.verb](self, run, session, applied)

    # -- session verbs --------------------------------------------------------------------------

    def _pause(self, run: Run, session: AgentSession, a: Applied) -> list[Any]:
        session.pause(**a.by)
        return []

    def _queue_request(self, run: Run, session: AgentSession, a: Applied) -> list[Any]:
        session.queue_request(message=a.intent.message, wake_target=a.intent.wake_target, **a.by)
        return []

    def _stop(self, run: Run, session: AgentSession, a: Applied) -> list[Any]:
        session.stop(reason=a.intent.reason or "stopped by operator", **a.by)
        lease = self.leases.give_back_slot(run, session, "session_stopped", a.at, a.load)
        return [lease] if lease is not None else []

    def _intervene(self, run: Run, session: AgentSession, a: Applied) -> list[Any]:
        blocked_here = session.live_status == BLOCKED and clears(a.verb, session.blocker_code)
        session.deliver_message(channel="controller", message=a.intent.message, thread_id="", **a.by)
        if blocked_here:
            session.unblock(resolution="controller intervention", actor=a.actor, at=a.at, resume_status="working")
        return []

    def _retry_prompt(self, run: Run, session: AgentSession, a: Applied) -> list[Any]:
        if session.live_status == BLOCKED and clears(a.verb, session.blocker_code):
            session.restart_process(reason="retry_prompt", **a.by)
        else:
            session.queue_request(
                message=a.intent.message or "retry the current prompt",
                wake_target="",
                **a.by,
            )
        return []

    def _comment(self, run: Run, session: AgentSession, a: Applied) -> list[Any]:
        session.deliver_message(channel="mailbox", message=a.intent.message, thread_id="", **a.by)
        return []

    def _reply_thread(self, run: Run, session: AgentSession, a: Applied) -> list[Any]:
        session.deliver_message(
            channel="thread",
            message=a.intent.message,
            thread_id=a.intent.thread_id,
            **a.by,
        )
        return []

    def _unblock_or_nudge(self, run: Run, session: AgentSession, a: Applied) -> list[Any]:
        """``nudge_agent`` and ``yolo_loop_break`` clear their walls; a nudge also wakes."""
        if session.live_status == BLOCKED and clears(a.verb, session.blocker_code):
            session.unblock(resolution=a.verb, actor=a.actor, at=a.at)
        elif a.verb == "nudge_agent" and session.live_status != BLOCKED:
            # Wakes a stalled agent: a request aimed at itself (a paused one resumes).
            session.queue_request(message=a.intent.message or "nudge", wake_target=session.agent_id, **a.by)
        return []

    def _restart_workspace(self, run: Run, session: AgentSession, a: Applied) -> list[Any]:
        """Restarts the session's workspace: a missing sandbox is recreated once through the
        shared registry; a fresh workspace only for the fresh-workspace policy's causes."""
        cause = fresh_workspace_cause(session.blocker_code, session.blocker_evidence)
        reason = a.intent.reason or session.blocker_code or "operator restart"
        workspace_name = session.workspace_for_recovery()
        changed: list[Any] = []
        recreated = False
        if workspace_name and cause:
            lease = self.leases.give_back_slot(run, session, "fresh_workspace", a.at, a.load)
            changed += [lease] if lease is not None else []
        elif workspace_name:
            lease = a.load(lease_key(run.tenant, run.project_slug, workspace_name))
            if isinstance(lease, WorkspaceLease):
                recreated = recreate_once(run, lease, session.blocker_code or reason, a.at)
                changed.append(lease)
        session.restart_workspace(reason=reason, recreated=recreated, fresh_workspace=bool(cause), **a.by)
        return [lease for lease in changed if lease.pending_events]

    def _task_card(self, run: Run, session: AgentSession, a: Applied) -> list[Any]:
        intent = a.intent
        if intent.verb == "resolve_task_card":
            card, parent, action = intent.task_card_id, "", "resolved"
        elif intent.verb == "create_followup_task":
            card = derived_id("card", session.session_id, session.task_card_count + 1)
            parent, action = intent.task_card_id, "followup_created"
        else:
            card = intent.task_card_id or derived_id("card", session.session_id, session.task_card_count + 1)
            parent, action = "", "created"
        session.change_task_card(
            action=action,
            task_card_id=card,
            title=intent.title,
            parent_task_card_id=parent,
            **a.by,
        )
        return []

    def _switch_process(self, run: Run, session: AgentSession, a: Applied) -> list[Any]:
        blocked_here = session.live_status == BLOCKED and clears(a.verb, session.blocker_code)
        changed = switch_process(run, session, a.intent, a.control_id, a.actor, a.at, self.aliases)
        if blocked_here:
            # A provider with no CLI here: the new assignment starts at once, in the same worktree.
            session.restart_process(reason="process_switch", **a.by)
        return [changed]

    def _operator_handoff(self, run: Run, session: AgentSession, a: Applied) -> list[Any]:
        """Routes work to another agent, creating its session when it has none."""
        intent, actor, at = a.intent, a.actor, a.at
        template = self.templates.get(run.template_id)
        target_id = intent.target_agent_id
        changed: list[Any] = [run]
        if target_id == session.agent_id:
            raise Conflict("An agent cannot hand off to itself.", code="handoff_to_self")
        if target_id in run.sessions:
            target = self.runs.agent_session(run, target_id)
            if target.ended:
                raise Conflict(
                    f"Agent {target_id} has ended ({target.live_status}); no work can be routed to it.",
                    code="target_session_ended",
                )
        else:
            spec_id, suit = target_id, None
            if target_id.startswith("tester-"):
                spec_id = "tester"
                suit_id = target_id.removeprefix("tester-")
                suit = next((s for s in run.project_facts.get("suits", []) if s["suit_id"] == suit_id), None)
                suit = suit or {"suit_id": suit_id, "role_key": "role_tester", "title": suit_id}
            spec = template.spec(spec_id) if template else None
            if spec is None:
                raise NotFound(
                    f"Template {run.template_id} has no agent {target_id!r} to hand off to.",
                    code="unknown_target_agent",
                )
            target = self.opener.open_session(
                run,
                template,
                spec,
                joined_via={"kind": "operator", "from_agent_id": session.agent_id, "reason": intent.reason},
                agent_id=target_id,
                suit=suit,
            )
        changed.append(target)
        thread_id = intent.thread_id or derived_id("thr", run.run_id, session.agent_id, target.agent_id)
        session.hand_off(
            target_agent_id=target.agent_id,
            target_session_id=target.session_id,
            reason=intent.reason or intent.message or "operator handoff",
            thread_id=thread_id,
            at=at,
        )
        run.record_handoff(
            handoff_id=derived_id("hof", run.run_id, run.handoff_count, session.agent_id, target.agent_id),
            from_agent_id=session.agent_id,
            to_agent_id=target.agent_id,
            to_session_id=target.session_id,
            kind="operator",
            reason=intent.reason or intent.message or "operator handoff",
            thread_id=thread_id,
            actor=actor,
        )
        return changed

    # -- run verbs ------------------------------------------------------------------------------

    def _cleanup_run(self, run: Run, a: Applied) -> list[Any]:
        return self.runs.end_run(run, reason=a.intent.reason, **a.by)

    def _replay_blockers(self, run: Run, a: Applied) -> list[Any]:
        """Dispatches each blocked session's recommended verb (the control-line rule)."""
        replayed: list[Any] = []
        for session in self.runs.live_sessions(run):
            if session.live_status != BLOCKED:
                continue
            verb = wall_for(session.blocker_code).recommended_action
            intent = ControlIntent(verb=verb, reason=a.intent.reason or "replay_blockers", message="replay blockers")
            record_verb(session, verb, new_id("ctl"), a.actor, intent, a.at, causation_id=a.control_id)
            replayed.append(session)
            replayed.extend(self.session_effect(run, session, Applied(intent, a.control_id, a.actor, a.at, a.load)))
        return replayed

    def _retry_run(self, run: Run, a: Applied) -> list[Any]:
        """``retry_prompt`` on every live session it applies to: a stale process blocked on its
        first tool restarts, an agent at work gets the prompt again; paused agents and other
        walls are left alone (their own verbs clear them)."""
        retried: list[Any] = []
        for session in self.runs.live_sessions(run):
            if session.live_status == PAUSED:
                continue
            if session.live_status == BLOCKED and not clears("retry_prompt", session.blocker_code):
                continue
            record_verb(session, "retry_prompt", new_id("ctl"), a.actor, a.intent, a.at, causation_id=a.control_id)
            retried.append(session)
            retried.extend(self.session_effect(run, session, a))
        return retried

    def _verify_wave(self, run: Run, a: Applied) -> list[Any]:
        """Starts the proof gate: a tester session per actor suit for this wave."""
        template = self.templates.get(run.template_id)
        spec = template.spec("tester") if template else None
        if spec is None:
            return []
        wave = run.verification_waves
        opened = []
        source = "curator" if "curator" in run.sessions else ""
        for suit in run.project_facts.get("suits", []):
            agent_id = f"tester-{suit['suit_id']}"
            if agent_id in run.sessions:
                agent_id = f"{agent_id}-w{wave}"
                if agent_id in run.sessions:
                    continue
            tester = self.opener.open_session(
                run,
                template,
                spec,
                joined_via={"kind": "proof_gate", "from_agent_id": source, "reason": f"verify wave {wave}"},
                agent_id=agent_id,
                suit=suit,
            )
            run.record_handoff(
                handoff_id=derived_id("hof", run.run_id, run.handoff_count, source, agent_id),
                from_agent_id=source,
                to_agent_id=agent_id,
                to_session_id=tester.session_id,
                kind="proof_gate",
                reason=f"verify wave {wave}: prove as {suit['suit_id']}",
                actor=a.actor,
            )
            opened.append(tester)
        return opened


RunEffect = Callable[[ControlCommands, Run, Applied], list[Any]]
SessionEffect = Callable[[ControlCommands, Run, AgentSession, Applied], list[Any]]

# The verb tables: each verb of RUN_VERBS and SESSION_VERBS and the handler of its effect.
RUN_EFFECTS: dict[str, RunEffect] = {
    "cleanup_run": ControlCommands._cleanup_run,
    "replay_blockers": ControlCommands._replay_blockers,
    "retry_prompt": ControlCommands._retry_run,
    "verify_wave": ControlCommands._verify_wave,
}
SESSION_EFFECTS: dict[str, SessionEffect] = {
    "pause_session": ControlCommands._pause,
    "queue_request": ControlCommands._queue_request,
    "stop_session": ControlCommands._stop,
    "intervene": ControlCommands._intervene,
    "retry_prompt": ControlCommands._retry_prompt,
    "comment_agent": ControlCommands._comment,
    "reply_thread": ControlCommands._reply_thread,
    "nudge_agent": ControlCommands._unblock_or_nudge,
    "yolo_loop_break": ControlCommands._unblock_or_nudge,
    "restart_workspace": ControlCommands._restart_workspace,
    "create_task_card": ControlCommands._task_card,
    "create_followup_task": ControlCommands._task_card,
    "resolve_task_card": ControlCommands._task_card,
    "switch_agent_process": ControlCommands._switch_process,
    "handoff_agent": ControlCommands._operator_handoff,
}
