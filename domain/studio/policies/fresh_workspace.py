"""Fresh-workspace policy: a fresh workspace only for the three causes that need one.

A fresh workspace (a new checkout in a new workspace of the project's registry) is used
only for a source materialization failure, a corrupt checkout, or a runtime-memory
checkpoint found missing after terminal cleanup. Resetting the agent session (a process
restart, a workspace restart, a stop) is never a synonym for a fresh workspace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from domain.shared.metadata import pick
from domain.studio.policies.blockers import (
    CHECKOUT_CORRUPT,
    CHECKPOINT_MISSING,
    SOURCE_MATERIALIZATION_FAILED,
)

CAUSES: dict[str, str] = {
    SOURCE_MATERIALIZATION_FAILED: "source_materialization_failure",
    CHECKOUT_CORRUPT: "corrupt_checkout",
    CHECKPOINT_MISSING: "missing_runtime_memory_checkpoint",
}
MAX_AUTOMATIC_FRESH = 1

NOTHING = "nothing"
FRESH_WORKSPACE = "fresh_workspace"
LEAVE_TO_OPERATOR = "leave_to_operator"


def fresh_workspace_cause(blocker_code: str, evidence: Mapping[str, Any] | None = None) -> str:
    """The cause that justifies a fresh workspace for this blocker, or "" for none.

    A missing runtime-memory checkpoint counts only after terminal cleanup: before it,
    the checkpoint may still be written and the same workspace is the right place.
    """
    cause = CAUSES.get(blocker_code, "")
    if blocker_code == CHECKPOINT_MISSING and not pick(evidence, "after_terminal_cleanup", False):
        return ""
    return cause


def decide(
    live_status: str,
    blocker_code: str,
    evidence: Mapping[str, Any] | None,
    automatic_fresh: int,
    *,
    max_fresh: int = MAX_AUTOMATIC_FRESH,
) -> str:
    """``fresh_workspace`` for a justified cause while the budget lasts, then the operator."""
    if live_status != "blocked" or not fresh_workspace_cause(blocker_code, evidence):
        return NOTHING
    if automatic_fresh >= max_fresh:
        return LEAVE_TO_OPERATOR
    return FRESH_WORKSPACE
