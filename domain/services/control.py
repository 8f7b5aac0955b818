"""Control commands: operator verbs on a run or on one agent session (C8).

Every verb is recorded as an event with its actor, reason and causation id (the control
id; effects a run verb causes on sessions name the run's control as their cause), and its
effect is the events the action table of the spec gives. One save per verb.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from domain.control import ControlIntent, check_intent
from domain.errors import Conflict, NotFound
from domain.ids import lease_key, new_id
from domain.lease import WorkspaceLease
from domain.policies.fresh_workspace import fresh_workspace_cause
from domain.policies.walls import clears, wall_for
from domain.process import ProcessAssignment, resolve_switch
from domain.run import Run
from domain.services.recovery import recreate_once
from domain.services.runs import derived_id
from domain.session import BLOCKED, PAUSED, AgentSession

if TYPE_CHECKING:
    from domain.application import SquadOps

Loader = Callable[[str], Any]


@dataclass(frozen=True)
class ControlOutcome:
    control_id: str
    run_id: str
    session_id: str
    verb: str
    status: str = "accepted"


class ControlCommands:
    # -- entry points -------------------------------------------------------------------------

    def control_run(
        self: SquadOps, *, tenant: str, run_id: str, intent: ControlIntent, actor: str
    ) -> ControlOutcome:
        check_intent(intent, level="run")
        control_id = new_id("ctl")

        def command() -> ControlOutcome:
            run = self.get_run(tenant, run_id)
            run._require_open()
            at = self.now()
            load = self._one_copy_loader()
            changed: list[Any] = [run]
            run.record_control(
                control_id=control_id,
                verb=intent.verb,
                actor=actor,
                reason=intent.reason,
                causation_id=control_id,
                params=intent.params(),
            )
            if intent.verb == "cleanup_run":
                changed.extend(
                    self.end_run(run, actor=actor, reason=intent.reason, control_id=control_id, at=at)
                )
            elif intent.verb == "replay_blockers":
                changed.extend(self._replay_blockers(run, control_id, actor, intent.reason, at, load))
            elif intent.verb == "retry_prompt":
                changed.extend(self._retry_run(run, intent, control_id, actor, at, load))
            elif intent.verb == "verify_wave":
                changed.extend(self._verify_wave(run, control_id, actor, at))
            self.save(*unique(changed))
            return ControlOutcome(control_id, run.run_id, "", intent.verb)

        return self.retrying(command)

    def control_session(
        self: SquadOps,
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
            run = self.get_run(tenant, run_id)
            run._require_open()
            session = self.get_session(run, session_id) if session_id else self.agent_session(run, agent_id)
            session._require_live()
            at = self.now()
            self._record_verb(session, intent.verb, control_id, actor, intent, at)
            changed = self._session_verb(run, session, intent, control_id, actor, at, self._one_copy_loader())
            self.save(*unique([run, session, *changed]))
            return ControlOutcome(control_id, run.run_id, session.session_id, intent.verb)

        return self.retrying(command)

    def _one_copy_loader(self: SquadOps) -> Loader:
        """Loads each aggregate once per command, so two effects on one lease share a copy."""
        loaded: dict[str, Any] = {}

        def load(aggregate_id: str) -> Any:
            if aggregate_id not in loaded:
                loaded[aggregate_id] = self.get_or_none(aggregate_id)
            return loaded[aggregate_id]

        return load

    # -- session verbs --------------------------------------------------------------------------

    def _record_verb(
        self: SquadOps,
        session: AgentSession,
        verb: str,
        control_id: str,
        actor: str,
        intent: ControlIntent,
        at: str,
        causation_id: str = "",
    ) -> None:
        session.record_control(
            control_id=control_id,
            verb=verb,
            actor=actor,
            reason=intent.reason,
            causation_id=causation_id or control_id,
            params=intent.params(),
            at=at,
        )

    def _session_verb(
        self: SquadOps,
        run: Run,
        session: AgentSession,
        intent: ControlIntent,
        control_id: str,
        actor: str,
        at: str,
        load: Loader | None = None,
    ) -> list[Any]:
        """The effect of a session verb (the action table); answers the other aggregates changed."""
        load = load or self._one_copy_loader()
        verb = intent.verb
        blocked_here = session.live_status == BLOCKED and clears(verb, session.blocker_code)
        if verb == "pause_session":
            session.pause(actor=actor, control_id=control_id, at=at)
        elif verb == "queue_request":
            session.queue_request(
                message=intent.message, wake_target=intent.wake_target, actor=actor, control_id=control_id, at=at
            )
        elif verb == "stop_session":
            session.stop(actor=actor, reason=intent.reason or "stopped by operator", at=at, control_id=control_id)
            lease = self.give_back_slot(run, session, "session_stopped", at, load)
            return [lease] if lease is not None else []
        elif verb == "intervene":
            session.deliver_message(
                channel="controller", message=intent.message, thread_id="", actor=actor, control_id=control_id, at=at
            )
            if blocked_here:
                session.unblock(resolution="controller intervention", actor=actor, at=at, resume_status="working")
        elif verb == "retry_prompt":
            if blocked_here:
                session.restart_process(reason="retry_prompt", actor=actor, control_id=control_id, at=at)
            else:
                session.queue_request(
                    message=intent.message or "retry the current prompt",
                    wake_target="",
                    actor=actor,
                    control_id=control_id,
                    at=at,
                )
        elif verb == "comment_agent":
            session.deliver_message(
                channel="mailbox", message=intent.message, thread_id="", actor=actor, control_id=control_id, at=at
            )
        elif verb == "reply_thread":
            session.deliver_message(
                channel="thread",
                message=intent.message,
                thread_id=intent.thread_id,
                actor=actor,
                control_id=control_id,
                at=at,
            )
        elif verb in ("nudge_agent", "yolo_loop_break"):
            if blocked_here:
                session.unblock(resolution=verb, actor=actor, at=at)
            elif verb == "nudge_agent" and session.live_status != BLOCKED:
                # Wakes a stalled agent: a request aimed at itself (a paused one resumes).
                session.queue_request(
                    message=intent.message or "nudge",
                    wake_target=session.agent_id,
                    actor=actor,
                    control_id=control_id,
                    at=at,
                )
        elif verb == "restart_workspace":
            return self._restart_workspace(run, session, intent, control_id, actor, at, load)
        elif verb in ("create_task_card", "create_followup_task", "resolve_task_card"):
            self._task_card(session, intent, control_id, actor, at)
        elif verb == "switch_agent_process":
            return [self._switch_process(run, session, intent, control_id, actor, at)]
        elif verb == "handoff_agent":
            return self._operator_handoff(run, session, intent, actor, at)
        return []

    def _restart_workspace(
        self: SquadOps,
        run: Run,
        session: AgentSession,
        intent: ControlIntent,
        control_id: str,
        actor: str,
        at: str,
        load: Loader,
    ) -> list[Any]:
        """Restarts the session's workspace: a missing sandbox is recreated once through the
        shared registry; a fresh workspace only for the fresh-workspace policy's causes."""
        cause = fresh_workspace_cause(session.blocker_code, session.blocker_evidence)
        reason = intent.reason or session.blocker_code or "operator restart"
        workspace_name = session.workspace_for_recovery()
        changed: list[Any] = []
        recreated = False
        if workspace_name and cause:
            lease = self.give_back_slot(run, session, "fresh_workspace", at, load)
            changed += [lease] if lease is not None else []
        elif workspace_name:
            lease = load(lease_key(run.tenant, run.project_slug, workspace_name))
            if isinstance(lease, WorkspaceLease):
                recreated = recreate_once(run, lease, session.blocker_code or reason, at)
                changed.append(lease)
        session.restart_workspace(
            reason=reason,
            actor=actor,
            control_id=control_id,
            at=at,
            recreated=recreated,
            fresh_workspace=bool(cause),
        )
        return [a for a in changed if a.pending_events]

    def _task_card(
        self: SquadOps, session: AgentSession, intent: ControlIntent, control_id: str, actor: str, at: str
    ) -> None:
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
            actor=actor,
            control_id=control_id,
            at=at,
        )

    def _switch_process(
        self: SquadOps,
        run: Run,
        session: AgentSession,
        intent: ControlIntent,
        control_id: str,
        actor: str,
        at: str,
        assignment: dict[str, str] | None = None,
        source: str = "operator",
    ) -> Run:
        """A takeover handoff is recorded first; the replacement starts at the next turn."""
        current = ProcessAssignment(**session.process)
        new = resolve_switch(
            current,
            self.aliases,
            provider=intent.provider,
            model=intent.model,
            effort=intent.effort,
            speed=intent.speed,
        )
        handoff_id = derived_id("hof", run.run_id, run.handoff_count, session.agent_id, control_id)
        run.record_handoff(
            handoff_id=handoff_id,
            from_agent_id=session.agent_id,
            to_agent_id=session.agent_id,
            to_session_id=session.session_id,
            kind="process_takeover",
            reason=intent.reason or f"switch to {new.provider}/{new.model}",
            actor=actor,
        )
        session.switch_process(
            process=new.as_dict(),
            takeover_handoff_id=handoff_id,
            actor=actor,
            control_id=control_id,
            reason=intent.reason,
            at=at,
            assignment=assignment
            or {
                "target": session.agent_id,
                "provider": intent.provider,
                "model": intent.model,
                "effort": intent.effort,
                "speed": intent.speed,
            },
            source=source,
        )
        return run

    def _operator_handoff(
        self: SquadOps, run: Run, session: AgentSession, intent: ControlIntent, actor: str, at: str
    ) -> list[Any]:
        """Routes work to another agent, creating its session when it has none."""
        template = self.templates.get(run.template_id)
        target_id = intent.target_agent_id
        changed: list[Any] = [run]
        if target_id == session.agent_id:
            raise Conflict("An agent cannot hand off to itself.", code="handoff_to_self")
        if target_id in run.sessions:
            target = self.agent_session(run, target_id)
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
            target = self.open_session(
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

    def _replay_blockers(
        self: SquadOps, run: Run, control_id: str, actor: str, reason: str, at: str, load: Loader
    ) -> list[Any]:
        """Dispatches each blocked session's recommended verb (the control-line rule)."""
        replayed: list[Any] = []
        for session in self.live_sessions(run):
            if session.live_status != BLOCKED:
                continue
            verb = wall_for(session.blocker_code).recommended_action
            intent = ControlIntent(verb=verb, reason=reason or "replay_blockers", message="replay blockers")
            self._record_verb(session, verb, new_id("ctl"), actor, intent, at, causation_id=control_id)
            replayed.append(session)
            replayed.extend(self._session_verb(run, session, intent, control_id, actor, at, load))
        return replayed

    def _retry_run(
        self: SquadOps, run: Run, intent: ControlIntent, control_id: str, actor: str, at: str, load: Loader
    ) -> list[Any]:
        """``retry_prompt`` on every live session it applies to: a stale process blocked on its
        first tool restarts, an agent at work gets the prompt again; paused agents and other
        walls are left alone (their own verbs clear them)."""
        retried: list[Any] = []
        for session in self.live_sessions(run):
            if session.live_status == PAUSED:
                continue
            if session.live_status == BLOCKED and not clears("retry_prompt", session.blocker_code):
                continue
            self._record_verb(session, "retry_prompt", new_id("ctl"), actor, intent, at, causation_id=control_id)
            retried.append(session)
            retried.extend(self._session_verb(run, session, intent, control_id, actor, at, load))
        return retried

    def _verify_wave(
        self: SquadOps, run: Run, control_id: str, actor: str, at: str
    ) -> list[AgentSession]:
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
            tester = self.open_session(
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
                actor=actor,
            )
            opened.append(tester)
        return opened


def unique(aggregates: list[Any]) -> list[Any]:
    """Each aggregate once, in first-seen order (one save per verb)."""
    return list({id(a): a for a in aggregates}.values())
