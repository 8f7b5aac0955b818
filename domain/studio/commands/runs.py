"""Studio run commands: launch, execute, preview, cleanup, replay; and the opener of agent
sessions (a run's launch pair, handoffs, the proof gate and operators)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any

import msgspec

from domain.projects.project import ProjectCommands, source_ref
from domain.shared.errors import (
    Invalid,
    project_not_found,
    run_not_found,
    session_not_found,
    template_not_found,
)
from domain.shared.event_store import EventStore
from domain.shared.ids import derived_id, is_valid_id, new_id, run_key, session_key
from domain.studio.commands.leases import LeaseCommands
from domain.studio.run import Run
from domain.studio.session import AgentSession
from domain.studio.squad import (
    AgentSpec,
    ModelProxyAliases,
    RosterAgent,
    Template,
    TemplateCatalog,
    default_assignment,
    later_assignments,
    roster_agent,
)


def run_seed(run_id: str) -> int:
    return int(hashlib.sha256(run_id.encode()).hexdigest()[:8], 16)


@dataclass(eq=False, kw_only=True)
class SessionOpener:
    """Opens sessions with the service's agent identities and model-proxy aliases."""

    agent_domain: str
    aliases: ModelProxyAliases

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
            assignment = later.applied_to(assignment, self.aliases)
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


@dataclass(eq=False)
class RunCommands:
    """Runs and their sessions: loading, launch, execute, preview, cleanup and replay."""

    store: EventStore
    projects: ProjectCommands
    leases: LeaseCommands
    opener: SessionOpener
    _: KW_ONLY
    templates: TemplateCatalog
    clock: Callable[[], str]

    # -- loading ---------------------------------------------------------------------------

    def get_run(self, tenant: str, run_id: str) -> Run:
        run = self.store.get_or_none(run_key(tenant, run_id)) if is_valid_id(run_id) else None
        if run is None:
            raise run_not_found(run_id)
        return run

    def get_session(self, run: Run, session_id: str) -> AgentSession:
        agent_id = next((agent for agent, sid in run.sessions.items() if sid == session_id), None)
        if agent_id is None:
            raise session_not_found(session_id)
        return self._session(run, agent_id, session_id)

    def agent_session(self, run: Run, agent_id: str) -> AgentSession:
        session_id = run.sessions.get(agent_id)
        if session_id is None:
            raise session_not_found(agent_id)
        return self._session(run, agent_id, session_id)

    def live_sessions(self, run: Run) -> list[AgentSession]:
        return [s for s in self.all_sessions(run) if not s.ended]

    def all_sessions(self, run: Run) -> list[AgentSession]:
        return [self._session(run, agent_id, sid) for agent_id, sid in run.sessions.items()]

    def _session(self, run: Run, agent_id: str, session_id: str) -> AgentSession:
        return self.store.repository.get(session_key(run.tenant, run.run_id, session_id, agent_id))

    # -- launch ----------------------------------------------------------------------------

    def launch_run(
        self,
        *,
        tenant: str,
        template_id: str,
        project_slug: str,
        agent_process_kind: str = "",
        work_scope: str = "",
        next_goal: str = "",
        launched_by: str,
        source_run_id: str = "",
    ) -> tuple[Run, list[AgentSession]]:
        """Creates the run with its intake pair (the template's default agents)."""
        template = self.templates.get(template_id)
        if template is None:
            raise template_not_found(template_id)
        project = self.projects.get_project(tenant, project_slug)
        if project is None:
            raise project_not_found(project_slug)
        specs = [template.spec(agent_id) for agent_id in template.default_agent_ids]
        if any(spec is None for spec in specs):
            raise Invalid(f"Template {template_id} names a default agent it does not define.")
        run_id = new_id("run")
        request = project.request
        roster = [
            msgspec.structs.asdict(self.opener.identity(run_id, spec.agent_id, spec.role_key))
            for spec in specs
            if spec is not None
        ]
        proposal_id = str(request.get("proposal_id") or "")
        run = Run(
            tenant=tenant,
            run_id=run_id,
            project_slug=project.project_slug,
            template_id=template.template_id,
            agent_process_kind=agent_process_kind or template.agent_process_kind,
            work_scope=work_scope or template.work_scope,
            next_goal=next_goal or (specs[0].next_goal if specs[0] else ""),
            roster=roster,
            source_ref=source_ref(request),
            proposal={
                "proposal_id": proposal_id,
                "work_kind": agent_process_kind or template.agent_process_kind,
                "boundary": template.handoff_scope,
            },
            seed=run_seed(run_id),
            launched_by=launched_by,
            source_run_id=source_run_id,
            project_facts=project.run_facts(),
        )
        self.projects.fetch_sources(project, run_id)  # the repositories a binding brings, fetched again
        sessions = [
            self.opener.open_session(run, template, spec, joined_via={"kind": "launch", "from_agent_id": ""})
            for spec in specs
            if spec is not None
        ]
        self.store.save(run, *sessions)
        return run, sessions

    # -- execute ---------------------------------------------------------------------------

    def request_execution(
        self, *, tenant: str, run_id: str, requested_by: str
    ) -> tuple[Run, str, bool]:
        """Puts the run in the execution queue; answers (run, requested_at, follow_up)."""

        def command() -> tuple[Run, str, bool]:
            run = self.get_run(tenant, run_id)
            requested_at = self.clock()
            follow_up = run.request_execution(requested_at, requested_by)
            self.store.save(run)
            return run, requested_at, follow_up

        return self.store.retrying(command)

    # -- preview ---------------------------------------------------------------------------

    def share_preview(
        self, *, tenant: str, run_id: str, fields: dict[str, Any]
    ) -> tuple[dict[str, Any], str]:
        """Upserts the run's single shared live preview; answers (preview, updated_at)."""

        def command() -> tuple[dict[str, Any], str]:
            run = self.get_run(tenant, run_id)
            preview = dict(getattr(run, "preview", {}) or {})
            preview.update({k: v for k, v in fields.items() if v is not None})
            updated_at = self.clock()
            run.share_preview(preview, updated_at)
            self.store.save(run)
            return preview, updated_at

        return self.store.retrying(command)

    # -- cleanup / replay ---------------------------------------------------------------------

    def cleanup_run(
        self,
        *,
        tenant: str,
        run_id: str,
        actor: str,
        reason: str = "",
        control_id: str = "",
    ) -> tuple[Run, int]:
        """Stops every live session and ends the run; answers (run, sessions stopped)."""

        def command() -> tuple[Run, int]:
            run = self.get_run(tenant, run_id)
            run._require_open()
            at = self.clock()
            changed = self.end_run(run, actor=actor, reason=reason, control_id=control_id, at=at)
            self.store.save(run, *changed)
            return run, sum(1 for a in changed if isinstance(a, AgentSession))

        return self.store.retrying(command)

    def end_run(
        self, run: Run, *, actor: str, reason: str, control_id: str, at: str
    ) -> list[Any]:
        """Stops every live session, gives back their slots and ends the run (not saved)."""
        changed: list[Any] = []
        leases: dict[str, Any] = {}
        for session in self.live_sessions(run):
            session.stop(actor=actor, reason=reason or "run cleaned up", at=at, control_id=control_id)
            changed.append(session)
            lease = self.leases.give_back_slot(run, session, "run_cleaned_up", at, lambda k: leases.get(k) or self.store.get_or_none(k))
            if lease is not None:
                leases[lease.id] = lease
        run.clean_up(at=at, actor=actor, reason=reason, control_id=control_id)
        return changed + list(leases.values())

    def replay_run(
        self, *, tenant: str, run_id: str, launched_by: str
    ) -> tuple[Run, list[AgentSession]]:
        """Launches a new run with the same inputs; the new run names its source."""
        source = self.get_run(tenant, run_id)
        return self.launch_run(
            tenant=tenant,
            template_id=source.template_id,
            project_slug=source.project_slug,
            agent_process_kind=source.agent_process_kind,
            work_scope=source.work_scope,
            next_goal=source.next_goal,
            launched_by=launched_by,
            source_run_id=source.run_id,
        )
