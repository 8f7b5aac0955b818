"""Opening agent sessions: a run's launch pair, handoffs, the proof gate and operators."""

from __future__ import annotations

from domain.shared.ids import derived_id
from domain.studio.policies.assignment import later_assignments
from domain.studio.process import ModelProxyAliases, default_assignment, resolve_switch
from domain.studio.roster import RosterAgent, roster_agent
from domain.studio.run import Run
from domain.studio.session import AgentSession
from domain.studio.templates import AgentSpec, Template


class SessionOpener:
    """Opens sessions with the service's agent identities and model-proxy aliases."""

    def __init__(self, *, agent_domain: str, aliases: ModelProxyAliases) -> None:
        self.agent_domain = agent_domain
        self.aliases = aliases

    def identity(self, run_id: str, agent_id: str, role_key: str) -> RosterAgent:
        """The agent's roster identity in this run (C6)."""
        return roster_agent(run_id, agent_id, role_key, self.agent_domain)

    def open_session(
        self,
        run: Run,
        template: Template,
        spec: AgentSpec,
        *,
        joined_via: dict[str, str],
        agent_id: str = "",
        suit: dict[str, str] | None = None,
    ) -> AgentSession:
        """A new session for ``spec`` in ``run`` (not saved; the caller saves it)."""
        agent_id = agent_id or spec.agent_id
        identity = self.identity(run.run_id, agent_id, spec.role_key)
        session_id = derived_id("ses", run.run_id, agent_id)
        assignment = default_assignment(spec.role_key, self.aliases, spec.provider)
        # Run-level assignments made for this agent, its role or its group win over the default.
        for later in later_assignments(run.process_assignments, agent_id, spec.role_key):
            assignment = resolve_switch(
                assignment, self.aliases, provider=later.provider, model=later.model,
                effort=later.effort, speed=later.speed,
            )
        title = spec.title if not suit else f"{spec.title}: {suit.get('title', '')}"
        run.open_session(agent_id, session_id, spec.role_key, joined_via.get("kind", ""))
        return AgentSession(
            tenant=run.tenant,
            run_id=run.run_id,
            session_id=session_id,
            agent_id=agent_id,
            role_key=spec.role_key,
            alias=spec.alias,
            title=title,
            agent_nickname=identity.agent_nickname,
            template_id=template.template_id,
            agent_process_kind=spec.agent_process_kind or template.agent_process_kind,
            agent_tier=spec.agent_tier,
            agent_pack=spec.agent_pack,
            execution_profile=spec.execution_profile,
            workload_groups=list(spec.workload_groups),
            subject_key=identity.subject_key,
            user_principal_name=identity.user_principal_name,
            process=assignment.as_dict(),
            mission_brief=spec.mission_brief,
            next_goal=spec.next_goal,
            scenario_phase=spec.scenario_phase,
            handoff_target=spec.handoff_target,
            joined_via=joined_via,
            suit=dict(suit or {}),
            spec_skill_ids=list(spec.skill_ids),
            spec_mcp_server_ids=list(spec.mcp_server_ids),
            pr_required=spec.pr_submission_allowed and "delivery" in spec.workload_groups,
        )
