"""First-tool policy: which calls satisfy the required first tool of a session.

Controller actions move a session's slot or mailbox; they are not delivery work and must
never be counted as the required first tool (``first_tool_not_required_tool``).
"""

from __future__ import annotations

CONTROLLER_ACTIONS = frozenset(
    {
        "dispatch_slot_prompt",
        "agent_mailbox",
        "acquire_execution_slot",
        "hud_report",
        "hud_intent_report",
        "hud_route_report",
        "hud_proof_report",
        "hud_live_report",
        "hud_recover_report",
        # The squad's own HUD report tool, as an agent CLI names it.
        "mcp__squadops__report",
    }
)
NOT_REQUIRED_TOOL_LABEL = "first_tool_not_required_tool"
FIRST_TOOL_REQUIRED = "agent_first_tool_required"


def is_controller_action(name: str) -> bool:
    return name in CONTROLLER_ACTIONS or name.startswith("hud_")


def counts_as_first_tool(name: str) -> bool:
    """A delivery tool call: anything named that is not a controller action."""
    return bool(name) and not is_controller_action(name)
