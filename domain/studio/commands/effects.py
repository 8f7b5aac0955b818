"""Session effects shared by the control verbs and ``assign-processes``: recording a verb
on a session, and switching a session's agent process."""

from __future__ import annotations

from domain.shared.ids import derived_id
from domain.studio.control import ControlIntent
from domain.studio.run import Run
from domain.studio.session import AgentSession
from domain.studio.squad import Assignment, ModelProxyAliases, ProcessAssignment


def record_verb(
    session: AgentSession,
    verb: str,
    control_id: str,
    actor: str,
    intent: ControlIntent,
    at: str,
    causation_id: str = "",
) -> None:
    """Records the verb on the session, with its actor, reason and cause."""
    session.record_control(
        control_id=control_id,
        verb=verb,
        actor=actor,
        reason=intent.reason,
        causation_id=causation_id or control_id,
        params=intent.params(),
        at=at,
    )


def switch_process(
    run: Run,
    session: AgentSession,
    intent: ControlIntent,
    control_id: str,
    actor: str,
    at: str,
    aliases: ModelProxyAliases,
    assignment: dict[str, str] | None = None,
    source: str = "operator",
) -> Run:
    """A takeover handoff is recorded first; the replacement starts at the next turn."""
    asked = Assignment(session.agent_id, intent.provider, intent.model, intent.effort, intent.speed)
    new = asked.applied_to(ProcessAssignment(**session.process), aliases)
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
        assignment=assignment or asked.as_dict(),
        source=source,
    )
    return run
