"""The AgentSession aggregate: one agent's session in a run (one aggregate per agent)."""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import event

from domain.base import Aggregate
from domain.errors import Conflict, Invalid
from domain.ids import session_key
from domain.policies.first_tool import (
    NOT_REQUIRED_TOOL_LABEL,
    counts_as_first_tool,
    is_controller_action,
)

READY = "ready"
WAITING_FIRST_TOOL = "waiting_first_tool"
WORKING = "working"
BLOCKED = "blocked"
PAUSED = "paused"
COMPLETED = "session_completed"
STOPPED = "stopped"
TERMINAL = frozenset({COMPLETED, STOPPED})
LIVE_STATUSES = (READY, WAITING_FIRST_TOOL, WORKING, BLOCKED, PAUSED, COMPLETED, STOPPED)


class SessionEnded(Conflict):
    code = "session_ended"


class AgentSession(Aggregate):
    """An agent's session: process, first-tool contract, tools, blockers, result."""

    @staticmethod
    def create_id(tenant: str, run_id: str, session_id: str, agent_id: str) -> str:
        return session_key(tenant, run_id, session_id, agent_id)

    @event("Opened")
    def __init__(
        self,
        *,
        tenant: str,
        run_id: str,
        session_id: str,
        agent_id: str,
        role_key: str,
        alias: str,
        title: str,
        agent_nickname: str,
        template_id: str,
        agent_process_kind: str,
        agent_tier: str,
        agent_pack: str,
        execution_profile: str,
        workload_groups: list[str],
        subject_key: str,
        user_principal_name: str,
        process: dict[str, str],
        mission_brief: str,
        next_goal: str,
        scenario_phase: str,
        handoff_target: str,
        joined_via: dict[str, str],
        suit: dict[str, Any],
        spec_skill_ids: list[str],
        spec_mcp_server_ids: list[str],
        pr_required: bool,
    ) -> None:
        self.tenant = tenant
        self.run_id = run_id
        self.session_id = session_id
        self.agent_id = agent_id
        self.role_key = role_key
        self.alias = alias
        self.agent_nickname = agent_nickname
        self.workload_groups = workload_groups
        self.process = dict(process)
        self.joined_via = joined_via
        self.suit = suit
        self.spec_skill_ids = spec_skill_ids
        self.spec_mcp_server_ids = spec_mcp_server_ids
        self.pr_required = pr_required
        self.live_status = READY
        self.status_before_block = READY
        self.current_step = "session_warming"
        self.blocker_code = ""
        self.llm_session_id = ""
        self.workspace_name = ""
        self.process_attempt = 0
        self.tool_call_count = 0
        self.controller_action_count = 0
        self.handoffs_sent: list[str] = []
        self.pull_requests = 0
        self.mailbox_count = 0
        self.active_thread_id = ""
        self.controller_state = "active"
        self.status_tick = 0
        self.result: dict[str, Any] = {}

    # -- guards -----------------------------------------------------------------------

    @property
    def ended(self) -> bool:
        return self.live_status in TERMINAL

    def _require_live(self) -> None:
        if self.ended:
            raise SessionEnded(f"Session {self.session_id} has ended ({self.live_status}).")

    def has_group(self, group: str) -> bool:
        return group in self.workload_groups

    # -- process ------------------------------------------------------------------------

    def start_process(
        self,
        *,
        llm_session_id: str,
        skill_ids: list[str],
        mcp_server_ids: list[str],
        workspace_name: str,
        at: str,
        tick: int = 0,
    ) -> None:
        """The agent process started: skills and tool servers are resolved only now."""
        self._require_live()
        if self.live_status != READY:
            raise Conflict(f"Session {self.session_id} is {self.live_status}, not ready.")
        self._process_started(
            llm_session_id=llm_session_id,
            skill_ids=skill_ids,
            mcp_server_ids=mcp_server_ids,
            workspace_name=workspace_name,
            attempt=self.process_attempt + 1,
            at=at,
            tick=tick,
        )

    @event("ProcessStarted")
    def _process_started(
        self,
        llm_session_id: str,
        skill_ids: list[str],
        mcp_server_ids: list[str],
        workspace_name: str,
        attempt: int,
        at: str,
        tick: int,
    ) -> None:
        self.llm_session_id = llm_session_id
        self.workspace_name = workspace_name
        self.process_attempt = attempt
        self.live_status = WAITING_FIRST_TOOL
        self.current_step = "waiting_first_tool"
        self.status_tick = tick

    def observe_controller_action(self, action: str, summary: str, at: str) -> None:
        """A controller action touched the session; it never satisfies the first tool."""
        self._require_live()
        label = NOT_REQUIRED_TOOL_LABEL if self.live_status == WAITING_FIRST_TOOL else ""
        self._controller_action_observed(action=action, summary=summary, evidence_label=label, at=at)

    @event("ControllerActionObserved")
    def _controller_action_observed(
        self, action: str, summary: str, evidence_label: str, at: str
    ) -> None:
        self.controller_action_count += 1

    def call_tool(
        self, *, tool_name: str, route: str, summary: str, at: str, tick: int = 0
    ) -> None:
        self._require_live()
        if is_controller_action(tool_name):
            self.observe_controller_action(tool_name, summary, at)
            return
        if self.live_status not in (WAITING_FIRST_TOOL, WORKING):
            raise Conflict(f"Session {self.session_id} is {self.live_status}; it cannot call tools.")
        first = self.live_status == WAITING_FIRST_TOOL and counts_as_first_tool(tool_name)
        self._tool_called(
            tool_name=tool_name, route=route, summary=summary, first=first, at=at, tick=tick
        )

    @event("ToolCalled")
    def _tool_called(
        self, tool_name: str, route: str, summary: str, first: bool, at: str, tick: int
    ) -> None:
        self.tool_call_count += 1
        if first:
            self.live_status = WORKING
            self.status_tick = tick
        self.current_step = f"tool:{tool_name}"

    def say(self, text: str, at: str) -> None:
        self._require_live()
        self._assistant_message(text=text, at=at)

    @event("AssistantMessage")
    def _assistant_message(self, text: str, at: str) -> None:
        pass

    # -- blockers -----------------------------------------------------------------------

    def block(
        self, *, code: str, message: str, evidence: dict[str, Any], at: str, tick: int = 0
    ) -> None:
        self._require_live()
        if not code:
            raise Invalid("A blocker needs a code.")
        if self.live_status == BLOCKED and self.blocker_code == code:
            return
        self._blocked(code=code, message=message, evidence=evidence, at=at, tick=tick)

    @event("Blocked")
    def _blocked(
        self, code: str, message: str, evidence: dict[str, Any], at: str, tick: int
    ) -> None:
        if self.live_status != BLOCKED:
            self.status_before_block = self.live_status
        self.live_status = BLOCKED
        self.blocker_code = code
        self.current_step = f"blocked:{code}"
        self.status_tick = tick

    def unblock(
        self, *, resolution: str, actor: str, at: str, resume_status: str = "", tick: int = 0
    ) -> None:
        self._require_live()
        if self.live_status != BLOCKED:
            raise Conflict(f"Session {self.session_id} is not blocked.")
        self._unblocked(
            code=self.blocker_code,
            resolution=resolution,
            actor=actor,
            resume_status=resume_status or self.status_before_block,
            at=at,
            tick=tick,
        )

    @event("Unblocked")
    def _unblocked(
        self, code: str, resolution: str, actor: str, resume_status: str, at: str, tick: int
    ) -> None:
        self.live_status = resume_status
        self.blocker_code = ""
        self.current_step = resume_status
        self.status_tick = tick

    # -- collaboration ----------------------------------------------------------------------

    def hand_off(
        self, *, target_agent_id: str, target_session_id: str, reason: str, thread_id: str, at: str
    ) -> None:
        self._require_live()
        self._handed_off(
            target_agent_id=target_agent_id,
            target_session_id=target_session_id,
            reason=reason,
            thread_id=thread_id,
            at=at,
        )

    @event("HandedOff")
    def _handed_off(
        self, target_agent_id: str, target_session_id: str, reason: str, thread_id: str, at: str
    ) -> None:
        self.handoffs_sent.append(target_agent_id)
        self.current_step = f"handoff:{target_agent_id}"

    def open_pull_request(
        self, *, pr_url: str, pr_owner: str, pr_repo: str, pr_number: int, repository_key: str, at: str
    ) -> None:
        self._require_live()
        if self.live_status != WORKING:
            raise Conflict(f"Session {self.session_id} is {self.live_status}; it cannot open a PR.")
        self._pull_request_opened(
            pr_url=pr_url,
            pr_owner=pr_owner,
            pr_repo=pr_repo,
            pr_number=pr_number,
            repository_key=repository_key,
            at=at,
        )

    @event("PullRequestOpened")
    def _pull_request_opened(
        self, pr_url: str, pr_owner: str, pr_repo: str, pr_number: int, repository_key: str, at: str
    ) -> None:
        self.pull_requests += 1
        self.current_step = "pull_request_opened"

    # -- end -------------------------------------------------------------------------------

    def finish(self, *, result: dict[str, Any], at: str, tick: int = 0) -> bool:
        """Ends the session with the agent's final result; returns False when blocked.

        A delivery lane may not complete without a pull request: that is the blocker
        ``project_delivery_completion_requires_pr``, not a completion.
        """
        self._require_live()
        if self.live_status != WORKING:
            raise Conflict(f"Session {self.session_id} is {self.live_status}; it cannot finish.")
        if self.pr_required and self.pull_requests == 0:
            self.block(
                code="project_delivery_completion_requires_pr",
                message="Delivery lane tried to complete without opening a pull request.",
                evidence={"tool_call_count": self.tool_call_count},
                at=at,
                tick=tick,
            )
            return False
        self._completed(result=result, at=at)
        return True

    @event("Completed")
    def _completed(self, result: dict[str, Any], at: str) -> None:
        self.live_status = COMPLETED
        self.current_step = "session_completed"
        self.result = result

    def stop(self, *, actor: str, reason: str, at: str, control_id: str = "") -> None:
        self._require_live()
        self._stopped(actor=actor, reason=reason, control_id=control_id, at=at)

    @event("Stopped")
    def _stopped(self, actor: str, reason: str, control_id: str, at: str) -> None:
        self.live_status = STOPPED
        self.current_step = "stopped"
        self.blocker_code = ""
