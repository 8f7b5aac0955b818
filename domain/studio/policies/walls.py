"""Walls: what stops a blocked agent, and the one verb that takes it down.

The control-line rule: an operator reads ``wall.message`` and dispatches
``wall.recommended_action``; that verb, applied to the blocked session, clears the
blocker. ``RECOMMENDED`` is the single table both the feed and the control plane use.
"""

from __future__ import annotations

from dataclasses import dataclass

RECOMMENDED: dict[str, str] = {
    "agent_first_tool_required": "retry_prompt",
    "sandbox_missing": "restart_workspace",
    "sandbox_toolbox_observe_failed": "restart_workspace",
    "sandbox_api_credentials_not_configured": "restart_workspace",
    "sandbox_api_credentials_invalid": "restart_workspace",
    "project_delivery_completion_requires_pr": "intervene",
    "project_assets_lookup_failed": "nudge_agent",
    "agent_yolo_loop_detected": "yolo_loop_break",
    "workspace_source_materialization_failed": "restart_workspace",
    "workspace_checkout_corrupt": "restart_workspace",
    "runtime_memory_checkpoint_missing": "restart_workspace",
    # Local plane: a provider with no CLI on this machine is switched to one that has one;
    # a process that ended without a result, or whose CLI denied the calls its work needed,
    # starts again in the same worktree (``retry_prompt``).
    "agent_cli_missing": "switch_agent_process",
    "agent_process_exited": "retry_prompt",
    "agent_permission_denied": "retry_prompt",
    # The sandbox cannot start (bubblewrap missing, no user namespaces): the wall says why;
    # once the machine is fixed, ``retry_prompt`` starts the process, confined.
    "agent_sandbox_unavailable": "retry_prompt",
}

# Walls whose message is the blocker's own (it names the provider, the tools denied ...).
DETAILED = frozenset({"agent_cli_missing", "agent_permission_denied", "agent_process_exited"})

MESSAGES: dict[str, str] = {
    "agent_first_tool_required": (
        "The process started but never made its required first tool call; restart only "
        "this process in the same workspace and probe there. If every agent is stuck like "
        "this with no tool output, look at the execution plane (nodes, storage, sandbox core "
        "pods), not at gateway authentication or session resume."
    ),
    "sandbox_missing": "The sandbox behind this session is gone; recreate it through the shared workspace registry.",
    "sandbox_toolbox_observe_failed": "The sandbox toolbox could not be observed; restart the workspace.",
    "sandbox_api_credentials_not_configured": (
        "The studio credential profile cannot resolve sandbox credentials; configure them, then restart the workspace."
    ),
    "sandbox_api_credentials_invalid": (
        "The sandbox key status endpoint answered 401/403; rotate the key, then restart the workspace."
    ),
    "project_delivery_completion_requires_pr": (
        "A delivery lane cannot complete without a pull request; intervene and ask for the pull request."
    ),
    "project_assets_lookup_failed": "The project assets lookup was slow or failed; nudge the agent to look again.",
    "agent_yolo_loop_detected": "The agent repeats the same action in a loop; break the loop.",
    "workspace_source_materialization_failed": (
        "The workspace could not materialize the project's sources; restart the workspace (a fresh one)."
    ),
    "workspace_checkout_corrupt": "The workspace checkout is corrupt; restart the workspace (a fresh one).",
    "runtime_memory_checkpoint_missing": (
        "The runtime-memory checkpoint is missing; restart the workspace (a fresh one after terminal cleanup)."
    ),
    # (said only when the blocker's own message is not at hand: it names the provider or tools)
    "agent_cli_missing": (
        "The session's provider has no agent CLI on this machine; switch the agent's process to one that has."
    ),
    "agent_permission_denied": (
        "The agent CLI denied tool calls the work needed; allow them (or switch the process), then retry the prompt."
    ),
    "agent_process_exited": "The agent process ended without a result; retry the prompt in the same worktree.",
}


@dataclass(frozen=True)
class Wall:
    code: str
    message: str
    recommended_action: str


def wall_for(blocker_code: str, detail: str = "") -> Wall:
    """The wall of a blocked session; an empty code is no wall (empty recommended action)."""
    if not blocker_code:
        return Wall("", "", "")
    action = RECOMMENDED.get(blocker_code, "nudge_agent")
    if blocker_code in DETAILED and detail:
        return Wall(blocker_code, detail, action)
    message = MESSAGES.get(blocker_code, detail or f"Blocked by {blocker_code}.")
    return Wall(blocker_code, message, action)


def clears(verb: str, blocker_code: str) -> bool:
    """Whether dispatching ``verb`` on a session blocked by ``blocker_code`` clears it."""
    return bool(blocker_code) and RECOMMENDED.get(blocker_code, "nudge_agent") == verb
