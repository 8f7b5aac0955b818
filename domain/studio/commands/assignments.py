"""``assign-processes``: agent process assignments applied to a run's existing sessions,
and recorded on the run for the sessions opened later (``Run.ProcessAssigned``).

Each resolved session goes through the ``switch_agent_process`` effect: the takeover
handoff is recorded first, the worktree is kept, and the switch event carries the
``agent_process_assignment`` and ``agent_process_switch_*`` metadata. The whole
assignment is one save (all sessions or none) and one run-level control record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

from domain.shared.event_store import EventStore
from domain.shared.ids import new_id
from domain.studio.commands.effects import record_verb, switch_process
from domain.studio.commands.runs import RunCommands
from domain.studio.control import ControlIntent
from domain.studio.policies.walls import clears
from domain.studio.run import Run
from domain.studio.session import BLOCKED, AgentSession
from domain.studio.squad import (
    Assignment,
    ModelProxyAliases,
    ProcessAssignment,
    Seat,
    Template,
    plan,
)

VERB = "switch_agent_process"
SOURCE = "assign_processes"


def joinable(run: Any, template: Template | None) -> set[str]:
    """The agent ids and role keys a session may still be opened for in ``run``: its
    template's agents, their roles, and ``tester-<suit>`` for each actor suit of the project."""
    specs = template.agent_specs if template else []
    suits = [str(s.get("suit_id", "")) for s in run.project_facts.get("suits", []) if isinstance(s, dict)]
    return (
        {spec.agent_id for spec in specs} | {spec.role_key for spec in specs}
        | {f"tester-{suit}" for suit in suits if suit}
    )


def switch_sessions(
    run: Run,
    sessions: Mapping[str, AgentSession],
    chosen: Mapping[str, Assignment],
    *,
    control_id: str,
    actor: str,
    at: str,
    aliases: ModelProxyAliases,
    source: str,
    reason: Callable[[Assignment], str],
) -> tuple[list[AgentSession], list[dict[str, Any]]]:
    """Switches each chosen session through the ``switch_agent_process`` effect (a session
    already running that process is left ``unchanged``); answers the sessions changed and
    one entry per agent. A session walled by a verb the switch clears starts again at once."""
    changed: list[AgentSession] = []
    results = []
    for agent_id in sorted(chosen):
        assignment, session = chosen[agent_id], sessions[agent_id]
        intent = ControlIntent(
            verb=VERB, provider=assignment.provider, model=assignment.model, effort=assignment.effort,
            speed=assignment.speed, reason=reason(assignment),
        )
        target = assignment.applied_to(ProcessAssignment(**session.process), aliases)
        entry = {"agent_id": agent_id, "session_id": session.session_id, "previous": dict(session.process)}
        if target.as_dict() == session.process:
            results.append({**entry, "status": "unchanged", "process": dict(session.process)})
            continue
        session_control = new_id("ctl")
        blocked_here = session.live_status == BLOCKED and clears(VERB, session.blocker_code)
        record_verb(session, VERB, session_control, actor, intent, at, causation_id=control_id)
        switch_process(run, session, intent, session_control, actor, at, aliases, assignment=assignment.as_dict(),
                       source=source)
        if blocked_here:
            session.restart_process(reason="process_switch", actor=actor, control_id=session_control, at=at)
        changed.append(session)
        results.append(
            {
                **entry,
                "status": "switched",
                "process": dict(session.process),
                "agent_process_switch_status": session.process_switch_status,
                "worktree": session.workspace_name,
            }
        )
    return changed, results


@dataclass(eq=False)
class AssignmentCommands:
    """Agent process assignments for a run's existing sessions."""

    store: EventStore
    runs: RunCommands
    _: KW_ONLY
    aliases: ModelProxyAliases
    clock: Callable[[], str]

    def assign_processes(
        self,
        *,
        tenant: str,
        run_id: str,
        assignments: Sequence[Assignment],
        actor: str,
        reason: str = "",
    ) -> list[dict[str, Any]]:
        """Applies the assignments; answers one entry per resolved agent (switched or unchanged)."""

        def command() -> list[dict[str, Any]]:
            control_id = new_id("ctl")
            run = self.runs.get_run(tenant, run_id)
            run._require_open()
            sessions = {s.agent_id: s for s in self.runs.all_sessions(run)}
            seats = [Seat(agent_id=a, role_key=s.role_key, live=not s.ended) for a, s in sessions.items()]
            chosen = plan(assignments, seats, joinable(run, self.runs.templates.get(run.template_id)))
            at = self.clock()
            run.record_control(
                control_id=control_id,
                verb=SOURCE,
                actor=actor,
                reason=reason,
                causation_id=control_id,
                params={"assignments": [a.as_dict() for a in assignments]},
            )
            for assignment in assignments:  # for the sessions opened later in the run
                run.assign_process(**assignment.as_dict(), actor=actor, control_id=control_id, source=SOURCE, at=at)
            changed, results = switch_sessions(
                run, sessions, chosen, control_id=control_id, actor=actor, at=at, aliases=self.aliases,
                source=SOURCE, reason=lambda a: reason or f"assign-processes {a.target}",
            )
            self.store.save(run, *changed)
            return results

        return self.store.retrying(command)
