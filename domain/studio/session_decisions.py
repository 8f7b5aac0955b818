"""AgentSession's decisions: each verb checks the session's state and records what it decided.

The aggregate (``domain.studio.session``) holds the state and the ``@event`` methods that
change it; this mixin holds the verbs callers use. The commands that load, decide and save
sessions live in ``domain.studio.commands``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from domain.shared.errors import Conflict, Invalid, NotFound
from domain.studio.events import BLOCKED, COMPLETED, PAUSED, READY, WAITING_FIRST_TOOL, WORKING
from domain.studio.policies.blockers import SANDBOX_MISSING
from domain.studio.policies.first_tool import (
    NOT_REQUIRED_TOOL_LABEL,
    counts_as_first_tool,
    is_controller_action,
)
from domain.studio.policies.self_heal import cleared_identity, self_heal_status
from domain.studio.tool_results import kept


def _result(result: str) -> dict[str, Any]:
    """A tool call's result as its event records it (nothing when it answered nothing)."""
    if not result:
        return {}
    text, size, truncated = kept(result)
    return {"result": text, "result_size": size, "result_truncated": truncated}


class SessionDecisions:
    """The verbs of an agent's session, mixed into ``AgentSession`` (whose state and
    ``@event`` methods they use)."""

    live_status: str
    blocker_code: str
    blocker_evidence: dict[str, Any]
    workspace_name: str
    llm_session_id: str
    session_id: str
    model_ran: str

    def start_process(
        self,
        *,
        llm_session_id: str,
        skill_ids: list[str],
        mcp_server_ids: list[str],
        workspace_name: str,
        at: str,
        tick: int = 0,
        model_ran: str = "",
        confinement: dict[str, Any] | None = None,
    ) -> None:
        """The agent process started: skills and tool servers are resolved only now;
        ``model_ran`` is the model its CLI says it runs (or the one it was configured with)."""
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
            model_ran=model_ran,
            **({"confinement": confinement} if confinement else {}),
        )

    def observe_controller_action(self, action: str, summary: str, at: str) -> None:
        """A controller action touched the session; it never satisfies the first tool."""
        self._require_live()
        label = NOT_REQUIRED_TOOL_LABEL if self.live_status == WAITING_FIRST_TOOL else ""
        self._controller_action_observed(action=action, summary=summary, evidence_label=label, at=at)

    def call_tool(
        self, *, tool_name: str, route: str, summary: str, at: str, tick: int = 0, result: str = ""
    ) -> None:
        """A tool call and what it answered (its first bytes kept: ``tool_results.kept``)."""
        self._require_live()
        if is_controller_action(tool_name):
            self.observe_controller_action(tool_name, summary, at)
            return
        if self.live_status not in (WAITING_FIRST_TOOL, WORKING):
            raise Conflict(f"Session {self.session_id} is {self.live_status}; it cannot call tools.")
        first = self.live_status == WAITING_FIRST_TOOL and counts_as_first_tool(tool_name)
        self._tool_called(
            tool_name=tool_name, route=route, summary=summary, first=first, at=at, tick=tick, **_result(result)
        )

    def fail_tool_call(
        self, *, tool_name: str, reason: str, route: str = "", summary: str = "", at: str, tick: int = 0,
        result: str = "",
    ) -> None:
        """A denied or failed tool call: counted apart, it never moves the session's status
        (so it never satisfies the first-tool contract)."""
        self._require_live()
        if not tool_name:
            raise Invalid("A failed tool call names its tool.")
        self._tool_call_failed(
            tool_name=tool_name, route=route, summary=summary, reason=reason, at=at, tick=tick, **_result(result)
        )

    def report_model(self, model: str, at: str) -> None:
        """The agent CLI named the model that runs (recorded when it changes)."""
        self._require_live()
        if model and model != self.model_ran:
            self._model_reported(model=model, at=at)

    def say(self, text: str, at: str) -> None:
        self._require_live()
        self._assistant_message(text=text, at=at)

    def record_runner_output(self, *, stream: str, level: str, text: str, at: str) -> None:
        """An excerpt of what the agent's process wrote or how it ended (kept after the end too)."""
        if level not in ("info", "warn", "error"):
            raise Invalid(f"Unknown log level {level!r}.")
        self._runner_output(stream=stream, level=level, text=text, at=at)

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

    def hand_off(self, **handoff: Any) -> None:
        """Hands the work to another agent (the fields of ``HandedOff``)."""
        self._require_live()
        self._handed_off(**handoff)

    def check_pull_request(self, *, head_sha: str, changed_paths: Sequence[str]) -> None:
        """Raises unless the session may open this pull request now (before it is numbered)."""
        self._require_live()
        if self.live_status != WORKING:
            raise Conflict(f"Session {self.session_id} is {self.live_status}; it cannot open a PR.")
        if not head_sha or not changed_paths:
            raise Conflict(f"Session {self.session_id} proposes no change: there are no empty pull requests.",
                           code="empty_pull_request")

    def open_pull_request(self, *, head_sha: str = "", changed_paths: Sequence[str] = (), **pr: Any) -> None:
        """A pull request of the agent's change (the fields of ``PullRequestOpened``, the
        project's number among them)."""
        self.check_pull_request(head_sha=head_sha, changed_paths=changed_paths)
        self._pull_request_opened(head_sha=head_sha, changed_paths=sorted(changed_paths), **pr)

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

    def stop(self, **stop: Any) -> None:
        """Stops the session (``Stopped``: actor, reason, at, control_id)."""
        self._require_live()
        self._stopped(**stop)

    def record_control(self, **control: Any) -> None:
        """Every verb applied to the session is recorded with actor, reason and causation
        (the fields of ``ControlApplied``)."""
        self._require_live()
        self._control_applied(**control)

    def pause(self, **by: str) -> None:
        """Pauses the agent (``by``: the verb's actor, control_id and at)."""
        self._require_live()
        if self.live_status == PAUSED:
            raise Conflict(f"Session {self.session_id} is already paused.", code="session_paused")
        self._paused(previous_status=self.live_status, **by)

    def queue_request(self, *, message: str, wake_target: str, **by: str) -> None:
        """Queues the next request; with a wake target a paused session resumes (``by``: the
        verb's actor, control_id and at)."""
        self._require_live()
        self._request_queued(message=message, wake_target=wake_target, **by)
        if wake_target and (self.live_status == PAUSED or self.controller_state != "active"):
            resume = self.status_before_pause if self.live_status == PAUSED else self.live_status
            self._resumed(wake_target=wake_target, live_status=resume, current_step=resume, **by)

    def deliver_message(self, *, channel: str, **message: Any) -> None:
        """A message to the agent (``MessageDelivered``): its mailbox, a thread, or the
        controller's steer."""
        self._require_live()
        if channel not in ("mailbox", "thread", "controller"):
            raise Invalid(f"Unknown message channel {channel!r}.")
        self._message_delivered(channel=channel, **message)

    def reopen(self, *, reason: str, actor: str, control_id: str, at: str, tick: int = 0) -> None:
        """A completed agent works again (a review comment on its pull request): back to
        ``ready``, so the plane starts its process anew with its brief and mailbox."""
        if self.live_status != COMPLETED:
            raise Conflict(f"Session {self.session_id} is {self.live_status}, not completed.", code="not_completed")
        self._process_restarted(fresh_workspace=False, tick=tick, **self._restart_of(self.workspace_name), reason=reason,
                                actor=actor, control_id=control_id, at=at, current_step=f"reopened:{reason}")

    def restart_process(self, *, fresh_workspace: bool = False, tick: int = 0, **by: str) -> None:
        """Restarts only this agent's process, in the same assigned workspace by default
        (``by``: reason, actor, control_id and at).

        The session goes back to ``ready``; the plane starts the process there again and
        the first-tool contract is probed anew.
        """
        self._require_live()
        self._process_restarted(fresh_workspace=fresh_workspace, tick=tick, **self._restart_of(self.workspace_name), **by)

    def _restart_of(self, workspace_name: str) -> dict[str, str]:
        """What a process restart records it leaves: the workspace it restarts in, the LLM
        session and the blocker it clears."""
        return {
            "workspace_name": workspace_name, "previous_llm_session_id": self.llm_session_id,
            "cleared_blocker": self.blocker_code,
        }

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
        restart = self._restart_of("")
        self._self_healed(signal=signal, self_heal_status=self.self_heal_status, cleared=cleared, at=at)
        self._process_restarted(
            reason="self_heal", actor="policy", control_id="", at=at, tick=tick, fresh_workspace=False,
            current_step="self_heal_requeued", **restart,
        )
        return cleared

    def restart_workspace(self, *, recreated: bool, fresh_workspace: bool = False, tick: int = 0, **by: str) -> None:
        """Restarts (or recreates once) the session's sandbox workspace; the process follows
        (``by``: reason, actor, control_id and at).

        ``fresh_workspace`` only for the causes of the fresh-workspace policy; the process
        restart is its own event so every reader of session state sees the session ready.
        """
        self._require_live()
        restart = self._restart_of(self.workspace_for_recovery())
        self._workspace_restarted(
            recreated=recreated, workspace_name=restart["workspace_name"], cleared_blocker=restart["cleared_blocker"],
            **by,
        )
        self._process_restarted(
            fresh_workspace=fresh_workspace, tick=tick, current_step="workspace_restarting", **restart, **by
        )

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

    def change_task_card(self, *, action: str, task_card_id: str, parent_task_card_id: str, **card: Any) -> None:
        """Opens, follows up or resolves a task card (``TaskCardChanged``)."""
        self._require_live()
        if action == "resolved" and task_card_id not in self.open_task_cards:
            raise NotFound(f"No open task card {task_card_id!r} on this session.", code="task_card_not_found")
        if action == "followup_created" and parent_task_card_id and parent_task_card_id not in self.open_task_cards:
            raise NotFound(f"No open task card {parent_task_card_id!r} to follow up.", code="task_card_not_found")
        if action != "resolved" and task_card_id in self.open_task_cards:
            raise Conflict(f"Task card {task_card_id!r} exists already.", code="task_card_exists")
        self._task_card_changed(
            action=action, task_card_id=task_card_id, parent_task_card_id=parent_task_card_id, **card
        )
