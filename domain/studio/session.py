"""The AgentSession aggregate: one agent's session in a run (one aggregate per agent)."""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import event

from domain.shared.base import Aggregate, keep_stored_topics
from domain.shared.errors import Conflict, Invalid, NotFound
from domain.shared.ids import session_key
from domain.studio.policies.blockers import SANDBOX_MISSING
from domain.studio.policies.first_tool import (
    FIRST_TOOL_REQUIRED,
    NOT_REQUIRED_TOOL_LABEL,
    counts_as_first_tool,
    is_controller_action,
)
from domain.studio.policies.self_heal import cleared_identity, self_heal_status

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
        # What an agent process is briefed with when it starts (mission, goal, mailbox).
        self.title = title
        self.mission_brief = mission_brief
        self.next_goal = next_goal
        self.mailbox: list[str] = []
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
        self.status_before_pause = READY
        self.controller_intervention_count = 0
        self.queued_requests = 0
        self.open_task_cards: dict[str, str] = {}
        self.task_card_count = 0
        self.switch_pending = False
        self.workspace_restarts = 0
        self.last_restart_reason = ""
        self.blocker_message = ""
        self.blocker_evidence: dict[str, Any] = {}
        # Automatic (policy) restarts by reason; bounded by the recovery policies.
        self.policy_attempts: dict[str, int] = {}
        self.workspace_generation = 0
        self.process_assignment: dict[str, str] = {}
        self.process_switch_status = ""
        self.self_heal_count = 0

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
        if action == "agent_mailbox":
            self.mailbox_count = 0
            self.mailbox = []

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
            # The first tool answered the probe: a later stall gets a fresh budget.
            self.policy_attempts.pop(FIRST_TOOL_REQUIRED, None)
        self.current_step = f"tool:{tool_name}"

    def say(self, text: str, at: str) -> None:
        self._require_live()
        self._assistant_message(text=text, at=at)

    @event("AssistantMessage")
    def _assistant_message(self, text: str, at: str) -> None:
        pass

    def record_runner_output(self, *, stream: str, level: str, text: str, at: str) -> None:
        """An excerpt of what the agent's process wrote or how it ended (kept after the end too)."""
        if level not in ("info", "warn", "error"):
            raise Invalid(f"Unknown log level {level!r}.")
        self._runner_output(stream=stream, level=level, text=text, at=at)

    @event("RunnerOutput")
    def _runner_output(self, stream: str, level: str, text: str, at: str) -> None:
        pass

    # -- blockers -----------------------------------------------------------------------

    def block(
        self, *, code: str, message: str, evidence: dict[str, Any], at: str, tick: int = 0
    ) -> None:
        self._require_live()
        if not code:
            raise Invalid("A blocker needs a code.")
        if self.live_status == PAUSED:
            # A paused agent does nothing, so nothing new can stop it; it keeps any old wall.
            raise Conflict(f"Session {self.session_id} is paused.", code="session_paused")
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
        self.blocker_message = message
        self.blocker_evidence = dict(evidence)
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
        self._forget_wall()

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

    # -- control (operator verbs) ---------------------------------------------------------

    def record_control(
        self,
        *,
        control_id: str,
        verb: str,
        actor: str,
        reason: str,
        causation_id: str,
        params: dict[str, Any],
        at: str,
    ) -> None:
        """Every verb applied to the session is recorded with actor, reason and causation."""
        self._require_live()
        self._control_applied(
            control_id=control_id,
            verb=verb,
            actor=actor,
            reason=reason,
            causation_id=causation_id,
            params=params,
            at=at,
        )

    @event("ControlApplied")
    def _control_applied(
        self,
        control_id: str,
        verb: str,
        actor: str,
        reason: str,
        causation_id: str,
        params: dict[str, Any],
        at: str,
    ) -> None:
        pass

    def pause(self, *, actor: str, control_id: str, at: str) -> None:
        self._require_live()
        if self.live_status == PAUSED:
            raise Conflict(f"Session {self.session_id} is already paused.", code="session_paused")
        self._paused(
            actor=actor,
            control_id=control_id,
            previous_status=self.live_status,
            at=at,
            live_status=PAUSED,
            current_step="paused",
        )

    @event("Paused")
    def _paused(
        self,
        actor: str,
        control_id: str,
        previous_status: str,
        at: str,
        live_status: str = PAUSED,
        current_step: str = "paused",
    ) -> None:
        self.status_before_pause = previous_status
        self.live_status = PAUSED
        self.controller_state = "paused"
        self.current_step = "paused"

    def queue_request(self, *, message: str, wake_target: str, actor: str, control_id: str, at: str) -> None:
        """Queues the next request; with a wake target a paused session resumes."""
        self._require_live()
        self._request_queued(message=message, wake_target=wake_target, actor=actor, control_id=control_id, at=at)
        if wake_target and (self.live_status == PAUSED or self.controller_state != "active"):
            resume = self.status_before_pause if self.live_status == PAUSED else self.live_status
            self._resumed(
                actor=actor,
                control_id=control_id,
                wake_target=wake_target,
                live_status=resume,
                current_step=resume,
                at=at,
            )

    @event("RequestQueued")
    def _request_queued(self, message: str, wake_target: str, actor: str, control_id: str, at: str) -> None:
        self.queued_requests += 1

    @event("Resumed")
    def _resumed(
        self, actor: str, control_id: str, wake_target: str, live_status: str, current_step: str, at: str
    ) -> None:
        self.live_status = live_status
        self.controller_state = "active"
        self.current_step = current_step

    def deliver_message(
        self, *, channel: str, message: str, thread_id: str, actor: str, control_id: str, at: str
    ) -> None:
        """A message to the agent: its mailbox, a thread, or the controller's steer."""
        self._require_live()
        if channel not in ("mailbox", "thread", "controller"):
            raise Invalid(f"Unknown message channel {channel!r}.")
        self._message_delivered(
            channel=channel, message=message, thread_id=thread_id, actor=actor, control_id=control_id, at=at
        )

    @event("MessageDelivered")
    def _message_delivered(
        self, channel: str, message: str, thread_id: str, actor: str, control_id: str, at: str
    ) -> None:
        if channel == "mailbox":
            self.mailbox_count += 1
            self.mailbox.append(message)
        elif channel == "thread":
            self.active_thread_id = thread_id
        else:
            self.controller_intervention_count += 1

    def restart_process(
        self, *, reason: str, actor: str, control_id: str, at: str, fresh_workspace: bool = False, tick: int = 0
    ) -> None:
        """Restarts only this agent's process, in the same assigned workspace by default.

        The session goes back to ``ready``; the plane starts the process there again and
        the first-tool contract is probed anew.
        """
        self._require_live()
        self._process_restarted(
            reason=reason,
            actor=actor,
            control_id=control_id,
            workspace_name=self.workspace_name,
            fresh_workspace=fresh_workspace,
            previous_llm_session_id=self.llm_session_id,
            cleared_blocker=self.blocker_code,
            at=at,
            tick=tick,
            live_status=READY,
            current_step="process_restarting",
            llm_session_id="",
        )

    @event("ProcessRestarted")
    def _process_restarted(
        self,
        reason: str,
        actor: str,
        control_id: str,
        workspace_name: str,
        fresh_workspace: bool,
        previous_llm_session_id: str,
        cleared_blocker: str,
        at: str,
        tick: int,
        live_status: str = READY,
        current_step: str = "process_restarting",
        llm_session_id: str = "",
    ) -> None:
        self.live_status = READY
        self.current_step = current_step
        self.blocker_code = ""
        self.llm_session_id = ""
        self.switch_pending = False
        self.controller_state = "active"
        self.status_tick = tick
        self.last_restart_reason = reason
        self._forget_wall()
        if actor == "policy":
            self.policy_attempts[reason] = self.policy_attempts.get(reason, 0) + 1
        if self.process_switch_status == "pending":
            self.process_switch_status = "applied"
        if fresh_workspace:
            # A fresh workspace is a new checkout in a new workspace of the registry.
            self.workspace_name = ""
            self.workspace_generation += 1

    def _forget_wall(self) -> None:
        self.blocker_message = ""
        self.blocker_evidence = {}

    # -- recovery (policies) ------------------------------------------------------------

    def workspace_for_recovery(self) -> str:
        """The workspace the session is bound to, or the one its failed start named."""
        return self.workspace_name or str(self.blocker_evidence.get("workspace_name", ""))

    @property
    def self_heal_status(self) -> str:
        return self_heal_status(self.blocker_evidence)

    def fail_start(
        self,
        *,
        workspace_name: str,
        provider_workspace_id: str,
        error: str,
        message: str,
        at: str,
        tick: int = 0,
    ) -> None:
        """The start call failed: the session is bound to the workspace it was started in,
        and blocked as a missing provider binding (``sandbox_missing``)."""
        self._require_live()
        if self.live_status != READY:
            raise Conflict(f"Session {self.session_id} is {self.live_status}; no start to fail.")
        self._start_failed(
            workspace_name=workspace_name, provider_workspace_id=provider_workspace_id, error=error, at=at
        )
        self.block(
            code=SANDBOX_MISSING,
            message=message,
            evidence={
                "start_error": error,
                "workspace_name": workspace_name,
                "provider_workspace_id": provider_workspace_id,
                "runner_signal": "no such container",
            },
            at=at,
            tick=tick,
        )

    @event("StartFailed")
    def _start_failed(self, workspace_name: str, provider_workspace_id: str, error: str, at: str) -> None:
        self.workspace_name = workspace_name

    def self_heal(self, *, signal: str, at: str, tick: int = 0) -> dict[str, str]:
        """Clears the stale workspace identity and requeues a fresh launch; answers what it cleared."""
        self._require_live()
        if self.live_status != BLOCKED:
            raise Conflict(f"Session {self.session_id} is not blocked; nothing to heal.")
        evidence = self.blocker_evidence
        cleared = cleared_identity(
            {
                "workspace_name": self.workspace_for_recovery(),
                "provider_workspace_id": evidence.get("provider_workspace_id", ""),
                "llm_session_id": self.llm_session_id,
                "runner_pid": evidence.get("runner_pid", ""),
            }
        )
        previous_llm_session_id, blocker = self.llm_session_id, self.blocker_code
        self._self_healed(signal=signal, self_heal_status=self.self_heal_status, cleared=cleared, at=at)
        self._process_restarted(
            reason="self_heal",
            actor="policy",
            control_id="",
            workspace_name="",
            fresh_workspace=False,
            previous_llm_session_id=previous_llm_session_id,
            cleared_blocker=blocker,
            at=at,
            tick=tick,
            live_status=READY,
            current_step="self_heal_requeued",
            llm_session_id="",
        )
        return cleared

    @event("SelfHealed")
    def _self_healed(self, signal: str, self_heal_status: str, cleared: dict[str, str], at: str) -> None:
        self.workspace_name = ""
        self.self_heal_count += 1

    def restart_workspace(
        self,
        *,
        reason: str,
        actor: str,
        control_id: str,
        at: str,
        recreated: bool,
        fresh_workspace: bool = False,
        tick: int = 0,
    ) -> None:
        """Restarts (or recreates once) the session's sandbox workspace; the process follows.

        ``fresh_workspace`` only for the causes of the fresh-workspace policy; the process
        restart is its own event so every reader of session state sees the session ready.
        """
        self._require_live()
        previous_llm_session_id, blocker = self.llm_session_id, self.blocker_code
        workspace_name = self.workspace_for_recovery()
        self._workspace_restarted(
            reason=reason,
            actor=actor,
            control_id=control_id,
            workspace_name=workspace_name,
            recreated=recreated,
            cleared_blocker=blocker,
            at=at,
        )
        self._process_restarted(
            reason=reason,
            actor=actor,
            control_id=control_id,
            workspace_name=workspace_name,
            fresh_workspace=fresh_workspace,
            previous_llm_session_id=previous_llm_session_id,
            cleared_blocker=blocker,
            at=at,
            tick=tick,
            live_status=READY,
            current_step="workspace_restarting",
            llm_session_id="",
        )

    @event("WorkspaceRestarted")
    def _workspace_restarted(
        self,
        reason: str,
        actor: str,
        control_id: str,
        workspace_name: str,
        recreated: bool,
        cleared_blocker: str,
        at: str,
    ) -> None:
        self.workspace_restarts += 1
        self.last_restart_reason = reason
        self.live_status = READY
        self.current_step = "workspace_restarting"
        self.blocker_code = ""
        self.llm_session_id = ""
        self.controller_state = "active"

    def switch_process(
        self,
        *,
        process: dict[str, str],
        takeover_handoff_id: str,
        actor: str,
        control_id: str,
        reason: str,
        at: str,
        assignment: dict[str, str] | None = None,
        source: str = "operator",
    ) -> None:
        """Repoints the agent to another provider/model from its next turn, worktree kept.

        ``assignment`` is what was asked (``agent_process_assignment``: target and the
        given provider/model/effort/speed); the ``agent_process_switch_*`` fields say
        where the switch came from and whether the replacement is still to start.
        """
        self._require_live()
        if process == self.process:
            raise Conflict("The session already runs that process.", code="process_unchanged")
        self._process_switched(
            previous=dict(self.process),
            process=dict(process),
            takeover_handoff_id=takeover_handoff_id,
            worktree=self.workspace_name,
            actor=actor,
            control_id=control_id,
            reason=reason,
            at=at,
            agent_process_assignment=dict(assignment or {"target": self.agent_id}),
            agent_process_switch_status="applied" if self.live_status == READY else "pending",
            agent_process_switch_source=source,
            agent_process_switch_target=self.agent_id,
        )

    @event("ProcessSwitched")
    def _process_switched(
        self,
        previous: dict[str, str],
        process: dict[str, str],
        takeover_handoff_id: str,
        worktree: str,
        actor: str,
        control_id: str,
        reason: str,
        at: str,
        agent_process_assignment: dict[str, str] | None = None,
        agent_process_switch_status: str = "",
        agent_process_switch_source: str = "",
        agent_process_switch_target: str = "",
    ) -> None:
        self.process = dict(process)
        self.switch_pending = self.live_status not in (READY,)
        self.process_assignment = dict(agent_process_assignment or {})
        self.process_switch_status = agent_process_switch_status

    def change_task_card(
        self,
        *,
        action: str,
        task_card_id: str,
        title: str,
        parent_task_card_id: str,
        actor: str,
        control_id: str,
        at: str,
    ) -> None:
        self._require_live()
        if action == "resolved" and task_card_id not in self.open_task_cards:
            raise NotFound(f"No open task card {task_card_id!r} on this session.", code="task_card_not_found")
        if action == "followup_created" and parent_task_card_id and parent_task_card_id not in self.open_task_cards:
            raise NotFound(f"No open task card {parent_task_card_id!r} to follow up.", code="task_card_not_found")
        if action != "resolved" and task_card_id in self.open_task_cards:
            raise Conflict(f"Task card {task_card_id!r} exists already.", code="task_card_exists")
        self._task_card_changed(
            action=action,
            task_card_id=task_card_id,
            title=title,
            parent_task_card_id=parent_task_card_id,
            actor=actor,
            control_id=control_id,
            at=at,
        )

    @event("TaskCardChanged")
    def _task_card_changed(
        self,
        action: str,
        task_card_id: str,
        title: str,
        parent_task_card_id: str,
        actor: str,
        control_id: str,
        at: str,
    ) -> None:
        if action == "resolved":
            self.open_task_cards.pop(task_card_id, None)
        else:
            self.open_task_cards[task_card_id] = title
            self.task_card_count += 1

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
        self._forget_wall()


keep_stored_topics(AgentSession, "domain.session")
