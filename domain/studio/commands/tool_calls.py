"""What the squad's MCP server does for an agent: check a tool call against the run as it
stands, and answer what will be recorded.

The call's effect is recorded from the agent's own stream (``domain.studio.agent_tools``),
once the CLI reports the successful result, so a refused call records nothing and a
granted one is recorded once; the answer names the ids that recording uses (they are
derived, not drawn), so an agent can refer to them at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from domain.shared import ports
from domain.shared.agent_tokens import AgentIdentity
from domain.shared.errors import Conflict, Forbidden, Invalid
from domain.shared.ids import derived_id
from domain.studio import agent_tools
from domain.studio.brief import branch_name
from domain.studio.commands.runs import RunCommands


@dataclass(eq=False)
class AgentToolCalls:
    """The command object behind ``/mcp`` tools/call."""

    runs: RunCommands
    branches: ports.WorkBranches | None = None  # the plane's worktree branches: a pull request needs a change

    def tools(self) -> list[dict[str, Any]]:
        return [
            {"name": name, "description": description, "inputSchema": schema}
            for name, (description, schema) in agent_tools.TOOLS.items()
        ]

    def call(self, caller: AgentIdentity, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The answer to a call; raises a ``DomainError`` when the squad refuses it."""
        args = agent_tools.check_arguments(tool, arguments)
        app = self.runs
        run = app.get_run(caller.tenant, caller.run_id)
        run._require_open()
        session = app.get_session(run, caller.session_id)
        if session.agent_id != caller.agent_id:
            raise Forbidden("The token names another agent of this session.", code="agent_mismatch")
        session._require_live()
        if tool in (agent_tools.HANDOFF, agent_tools.COMMENT):
            return self._to_agent(run, session, tool, args)
        if tool == agent_tools.OPEN_PULL_REQUEST:
            # No check of the session's step here: the call can reach the server before the
            # plane has read the agent's earlier lines; the recording checks it in order.
            target = agent_tools.pull_request_target(
                run.project_facts, run.project_slug, run.tenant, run.run_id, session.agent_id,
                session.pull_requests + 1, args["repository_key"],
            )
            changes = self._changes(run, session.agent_id)
            # No number: the project numbers its pull requests when the call is recorded (the
            # plane's own number is no number people see), so the agent is told where to look.
            pulls = f"/projects/{run.project_slug}/pulls"
            return {
                "accepted": True,
                "repository_key": target.repository_key,
                "head_branch": changes.branch,
                "head_sha": changes.head_sha,
                "changed_paths": list(changes.paths),
                "title": args["title"],
                "pull_requests": pulls,
                "note": f"The pull request takes project {run.project_slug}'s next number when the squad "
                        f"records this call; people review it from {pulls}.",
            }
        return {
            "accepted": True,
            "agent_id": session.agent_id,
            "live_status": session.live_status,
            "status": args["status"],
            "summary": args["summary"],
        }

    def _changes(self, run: Any, agent_id: str) -> ports.BranchChanges:
        """The agent's branch, refused when it proposes nothing (no empty pull requests)."""
        branch = branch_name(run.run_id, agent_id)
        changes = self.branches.changes(run, agent_id) if self.branches is not None else None
        if changes is None:
            raise Conflict(f"Your branch {branch} does not exist on this plane: there is nothing to propose.",
                           code="empty_pull_request")
        if not changes.paths:
            hint = (f" {len(changes.uncommitted)} file(s) in your worktree are not committed "
                    f"({', '.join(changes.uncommitted[:5])}): commit them, then open the pull request."
                    if changes.uncommitted else " Commit your work on it first.")
            raise Conflict(f"Your branch {branch} has no change against its base ({changes.base_sha[:12]}): "
                           f"there is nothing to propose.{hint}", code="empty_pull_request")
        return changes

    def _to_agent(self, run: Any, session: Any, tool: str, args: dict[str, str]) -> dict[str, Any]:
        target_id = args["target_agent_id"]
        if target_id == session.agent_id:
            raise Invalid("An agent cannot address itself.", code="handoff_to_self")
        answer: dict[str, Any] = {"accepted": True, "target_agent_id": target_id}
        if target_id in run.sessions:
            target = self.runs.agent_session(run, target_id)
            if target.ended:
                raise Conflict(f"Agent {target_id} has ended ({target.live_status}).", code="target_session_ended")
            answer.update(target_session_id=target.session_id, target_live_status=target.live_status)
        elif tool == agent_tools.COMMENT:
            raise Invalid(f"Agent {target_id} has no session in this run to comment to.", code="unknown_target_agent")
        else:
            spec_id, _ = agent_tools.handoff_spec(run.project_facts, target_id)
            template = self.runs.templates.get(run.template_id)
            if template is None or template.spec(spec_id) is None:
                raise Invalid(
                    f"Template {run.template_id} has no agent {target_id!r} to hand off to.",
                    code="unknown_target_agent",
                )
            # The session the handoff opens has a derived id (see ``open_session``).
            answer.update(target_session_id=derived_id("ses", run.run_id, target_id), target_live_status="joining")
        if tool == agent_tools.HANDOFF:
            answer["thread_id"] = derived_id("thr", run.run_id, session.agent_id, target_id)
        return answer


def deliver_comment(sessions: Mapping[str, Any], source: Any, step: Any, at: str) -> None:
    """A ``ports.Comment``: the message lands in the target agent's mailbox."""
    target = sessions.get(step.target_agent_id)
    if source.ended or target is None or target is source:
        raise Invalid(f"No other agent {step.target_agent_id} to comment to.", code="unknown_agent")
    target.deliver_message(
        channel="mailbox", message=step.message, thread_id="", actor=f"agent:{source.agent_id}",
        control_id="", at=at,
    )
