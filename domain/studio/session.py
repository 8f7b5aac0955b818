"""The AgentSession aggregate: one agent's session in a run (one aggregate per agent), and
the session state machine.

``after(state, event_type, event)`` is pure: the aggregate applies it in its ``@event``
methods, and every read model that shows a session's status folds its stored events through
it, so they agree with the aggregate by construction
(``tests/unit/test_session_state_property.py`` checks it over generated histories). The
verbs that decide the events are ``domain.studio.session_decisions``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, NamedTuple

from eventsourcing.domain import event

from domain.shared.base import Aggregate, stored_topic
from domain.shared.errors import Conflict
from domain.shared.ids import session_key
from domain.studio import events as ev
from domain.studio.events import (  # noqa: F401  (the statuses are read from here too)
    BLOCKED,
    COMPLETED,
    LIVE_STATUSES,
    PAUSED,
    READY,
    STOPPED,
    TERMINAL,
    WAITING_FIRST_TOOL,
    WORKING,
)
from domain.studio.policies.first_tool import FIRST_TOOL_REQUIRED
from domain.studio.session_decisions import SessionDecisions

# -- the session state machine, written once: a session's status after one of its events ----


class SessionState(NamedTuple):
    """What every reader of a session's status shows."""

    live_status: str = READY
    current_step: str = "session_warming"
    blocker_code: str = ""


OPENED = SessionState()

# One step per event class that moves a session (an event of any other class leaves it as it
# is); a step reads the event's fields as attributes.
_STEPS: dict[type, Callable[[SessionState, Any], SessionState]] = {
    ev.SessionOpened: lambda state, e: OPENED,
    ev.ProcessStarted: lambda state, e: SessionState(WAITING_FIRST_TOOL, "waiting_first_tool", state[2]),
    ev.ToolCalled: lambda state, e: SessionState(
        WORKING if e.first else state[0], f"tool:{e.tool_name}", state[2]
    ),
    ev.Blocked: lambda state, e: SessionState(BLOCKED, f"blocked:{e.code}", e.code),
    ev.Unblocked: lambda state, e: SessionState(e.resume_status, e.resume_status, ""),
    ev.HandedOff: lambda state, e: SessionState(state[0], f"handoff:{e.target_agent_id}", state[2]),
    ev.PullRequestOpened: lambda state, e: SessionState(state[0], "pull_request_opened", state[2]),
    ev.Paused: lambda state, e: SessionState(PAUSED, "paused", state[2]),
    ev.Resumed: lambda state, e: SessionState(e.live_status, e.current_step, state[2]),
    ev.ProcessRestarted: lambda state, e: SessionState(READY, e.current_step, ""),
    ev.WorkspaceRestarted: lambda state, e: SessionState(READY, "workspace_restarting", ""),
    ev.SessionCompleted: lambda state, e: SessionState(COMPLETED, "session_completed", state[2]),
    ev.Stopped: lambda state, e: SessionState(STOPPED, "stopped", ""),
}


@functools.cache
def _step(event_type: type) -> Callable[[SessionState, Any], SessionState] | None:
    """The step of ``event_type`` or of the event class it subclasses (the library reads a
    stored event back as its aggregate's subclass of the declared class)."""
    return next((_STEPS[base] for base in event_type.__mro__ if base in _STEPS), None)


def after(state: SessionState, event_type: type, event: object) -> SessionState:
    """The session's state after an event of ``event_type`` (of ``domain.studio.events``)."""
    step = _step(event_type)
    return state if step is None else step(state, event)


def after_event(state: SessionState, event: object) -> SessionState:
    """The session's state after ``event``, as read back from the log."""
    return after(state, type(event), event)


def moves_status(event: object) -> bool:
    """Whether ``event`` may move a session's status, step or blocker (an event of a class ``_STEPS`` names)."""
    return _step(type(event)) is not None


def live_status_after(live_status: str, event: object) -> str:
    """Only the status (it depends on nothing but the status before and the event)."""
    return after_event(SessionState(live_status, "", ""), event).live_status


class SessionEnded(Conflict):
    code = "session_ended"


class AgentSession(SessionDecisions, Aggregate):
    """An agent's session: process, first-tool contract, tools, blockers, result."""

    @staticmethod
    def create_id(tenant: str, run_id: str, session_id: str, agent_id: str) -> str:
        return session_key(tenant, run_id, session_id, agent_id)

    @event(ev.SessionOpened)
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
        self.failed_tool_call_count = 0
        self.model_ran = ""
        self.controller_action_count = 0
        self.handoffs_sent: list[str] = []
        self.pull_requests = 0
        self.pull_request_head: dict[str, Any] = {}  # the last pull request's head commit and paths
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

    # -- what each event changes (the commands that decide them: domain.studio.session_decisions)

    @event(ev.ProcessStarted)
    def _process_started(
        self,
        llm_session_id: str,
        skill_ids: list[str],
        mcp_server_ids: list[str],
        workspace_name: str,
        attempt: int,
        at: str,
        tick: int,
        model_ran: str = "",
        confinement: dict[str, Any] | None = None,
    ) -> None:
        self.llm_session_id = llm_session_id
        self.workspace_name = workspace_name
        self.process_attempt = attempt
        self.model_ran = model_ran
        self._move(ev.ProcessStarted)
        self.status_tick = tick

    @event(ev.ControllerActionObserved)
    def _controller_action_observed(
        self, action: str, summary: str, evidence_label: str, at: str
    ) -> None:
        self.controller_action_count += 1
        if action == "agent_mailbox":
            self.mailbox_count = 0
            self.mailbox = []

    @event(ev.ToolCalled)
    def _tool_called(
        self, tool_name: str, route: str, summary: str, first: bool, at: str, tick: int,
        result: str = "", result_size: int = 0, result_truncated: bool = False,
    ) -> None:
        self.tool_call_count += 1
        self._move(ev.ToolCalled, tool_name=tool_name, first=first)
        if first:
            self.status_tick = tick
            # The first tool answered the probe: a later stall gets a fresh budget.
            self.policy_attempts.pop(FIRST_TOOL_REQUIRED, None)

    @event(ev.ToolCallFailed)
    def _tool_call_failed(
        self, tool_name: str, route: str, summary: str, reason: str, at: str, tick: int,
        result: str = "", result_size: int = 0, result_truncated: bool = False,
    ) -> None:
        self.failed_tool_call_count += 1

    @event(ev.ModelReported)
    def _model_reported(self, model: str, at: str) -> None:
        self.model_ran = model

    @event(ev.AssistantMessage)
    def _assistant_message(self, text: str, at: str) -> None:
        pass

    @event(ev.RunnerOutput)
    def _runner_output(self, stream: str, level: str, text: str, at: str) -> None:
        pass

    @event(ev.Blocked)
    def _blocked(
        self, code: str, message: str, evidence: dict[str, Any], at: str, tick: int
    ) -> None:
        if self.live_status != BLOCKED:
            self.status_before_block = self.live_status
        self._move(ev.Blocked, code=code)
        self.blocker_message = message
        self.blocker_evidence = dict(evidence)
        self.status_tick = tick

    @event(ev.Unblocked)
    def _unblocked(
        self, code: str, resolution: str, actor: str, resume_status: str, at: str, tick: int
    ) -> None:
        self._move(ev.Unblocked, resume_status=resume_status)
        self.status_tick = tick
        self._forget_wall()

    @event(ev.HandedOff)
    def _handed_off(
        self, target_agent_id: str, target_session_id: str, reason: str, thread_id: str, at: str
    ) -> None:
        self.handoffs_sent.append(target_agent_id)
        self._move(ev.HandedOff, target_agent_id=target_agent_id)

    @event(ev.PullRequestOpened)
    def _pull_request_opened(
        self, pr_url: str, pr_owner: str, pr_repo: str, pr_number: int, repository_key: str, at: str,
        head_sha: str = "", changed_paths: list[str] | None = None, project_number: int = 0, title: str = "",
    ) -> None:
        self.pull_requests += 1
        self.pull_request_head = {"repository_key": repository_key, "head_sha": head_sha,
                                  "changed_paths": list(changed_paths or [])}
        self._move(ev.PullRequestOpened)

    @event(ev.ControlApplied)
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

    @event(ev.Paused)
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
        self._move(ev.Paused)
        self.controller_state = "paused"

    @event(ev.RequestQueued)
    def _request_queued(self, message: str, wake_target: str, actor: str, control_id: str, at: str) -> None:
        self.queued_requests += 1

    @event(ev.Resumed)
    def _resumed(
        self, actor: str, control_id: str, wake_target: str, live_status: str, current_step: str, at: str
    ) -> None:
        self._move(ev.Resumed, live_status=live_status, current_step=current_step)
        self.controller_state = "active"

    @event(ev.MessageDelivered)
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

    @event(ev.ProcessRestarted)
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
        self._move(ev.ProcessRestarted, current_step=current_step)
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

    def _move(self, event_type: type[Aggregate.Event], **fields: Any) -> None:
        """Status, step and blocker after an event of ``event_type`` with ``fields`` (the
        method's own arguments), by the one state machine the read models fold too."""
        self.live_status, self.current_step, self.blocker_code = after(
            SessionState(self.live_status, self.current_step, self.blocker_code), event_type, SimpleNamespace(**fields)
        )

    def _forget_wall(self) -> None:
        self.blocker_message = ""
        self.blocker_evidence = {}

    @event(ev.StartFailed)
    def _start_failed(self, workspace_name: str, provider_workspace_id: str, error: str, at: str) -> None:
        self.workspace_name = workspace_name

    @event(ev.SelfHealed)
    def _self_healed(self, signal: str, self_heal_status: str, cleared: dict[str, str], at: str) -> None:
        self.workspace_name = ""
        self.self_heal_count += 1

    @event(ev.WorkspaceRestarted)
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
        self._move(ev.WorkspaceRestarted)
        self.llm_session_id = ""
        self.controller_state = "active"

    @event(ev.ProcessSwitched)
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

    @event(ev.TaskCardChanged)
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

    @event(ev.SessionCompleted)
    def _completed(self, result: dict[str, Any], at: str) -> None:
        self._move(ev.SessionCompleted)
        self.result = result

    @event(ev.Stopped)
    def _stopped(self, actor: str, reason: str, at: str, control_id: str = "") -> None:
        self._move(ev.Stopped)
        self._forget_wall()

stored_topic(AgentSession, "domain.session:AgentSession")  # its module has moved since the log began
