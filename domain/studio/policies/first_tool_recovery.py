"""First-tool recovery: what to do with a session blocked by ``agent_first_tool_required``.

Only the stale agent process is restarted, in the same assigned workspace, and probed
there; a fresh workspace is never this policy's answer (see ``fresh_workspace``).
Automatic restarts are bounded; after that the wall stays up for the operator, whose
recommended verb (``retry_prompt``) restarts the process once more. Restarts made by the
operator and controller actions never count toward the automatic budget, and controller
actions never satisfy the first tool (``first_tool.counts_as_first_tool``).
"""

from __future__ import annotations

from domain.studio.policies.first_tool import FIRST_TOOL_REQUIRED

MAX_AUTOMATIC_RESTARTS = 2

NOTHING = "nothing"
RESTART_SAME_WORKSPACE = "restart_same_workspace"
LEAVE_TO_OPERATOR = "leave_to_operator"


def decide(
    live_status: str,
    blocker_code: str,
    automatic_restarts: int,
    *,
    max_restarts: int = MAX_AUTOMATIC_RESTARTS,
) -> str:
    """``restart_same_workspace`` while the automatic budget lasts, then ``leave_to_operator``."""
    if live_status != "blocked" or blocker_code != FIRST_TOOL_REQUIRED:
        return NOTHING
    if automatic_restarts >= max_restarts:
        return LEAVE_TO_OPERATOR
    return RESTART_SAME_WORKSPACE
