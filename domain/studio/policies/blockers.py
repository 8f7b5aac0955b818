"""Session blocker codes (Errors §4) and the facts each one carries.

A blocker is a session's wall: a raw code, a message, and structured evidence. The codes
here are the ones the service raises itself; the set of wall codes stays open (an
unknown code is still a wall, shown with the default recommended verb).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from domain.studio.policies.first_tool import FIRST_TOOL_REQUIRED, NOT_REQUIRED_TOOL_LABEL

PROJECT_ASSETS_LOOKUP_FAILED = "project_assets_lookup_failed"
COMPLETION_REQUIRES_PR = "project_delivery_completion_requires_pr"
SANDBOX_TOOLBOX_OBSERVE_FAILED = "sandbox_toolbox_observe_failed"
SANDBOX_MISSING = "sandbox_missing"
CREDENTIALS_NOT_CONFIGURED = "sandbox_api_credentials_not_configured"
CREDENTIALS_INVALID = "sandbox_api_credentials_invalid"
YOLO_LOOP_DETECTED = "agent_yolo_loop_detected"
# The three causes that justify a fresh workspace (see ``fresh_workspace``).
SOURCE_MATERIALIZATION_FAILED = "workspace_source_materialization_failed"
CHECKOUT_CORRUPT = "workspace_checkout_corrupt"
CHECKPOINT_MISSING = "runtime_memory_checkpoint_missing"
# The local execution plane's own walls.
AGENT_CLI_MISSING = "agent_cli_missing"
AGENT_PROCESS_EXITED = "agent_process_exited"
AGENT_PERMISSION_DENIED = "agent_permission_denied"
AGENT_SANDBOX_UNAVAILABLE = "agent_sandbox_unavailable"

BLOCKERS: dict[str, str] = {
    FIRST_TOOL_REQUIRED: "Process started (llm_session_id set) but the required first tool call was not made.",
    PROJECT_ASSETS_LOOKUP_FAILED: "The project assets lookup was slow or failed; source_refs.lookup_error has the reason.",
    COMPLETION_REQUIRES_PR: "A delivery lane tried to complete without opening a pull request.",
    SANDBOX_TOOLBOX_OBSERVE_FAILED: "The sandbox toolbox could not be observed.",
    SANDBOX_MISSING: "The sandbox behind the session is gone (or its start found no provider binding).",
    CREDENTIALS_NOT_CONFIGURED: "The studio credential profile cannot resolve sandbox API credentials.",
    CREDENTIALS_INVALID: "The sandbox key status endpoint answered 401 or 403.",
    YOLO_LOOP_DETECTED: "The agent repeats the same action in a loop.",
    SOURCE_MATERIALIZATION_FAILED: "The workspace could not materialize the project's sources.",
    CHECKOUT_CORRUPT: "The workspace checkout is corrupt.",
    CHECKPOINT_MISSING: "The runtime-memory checkpoint is missing after terminal cleanup.",
    AGENT_CLI_MISSING: "The agent CLI of the session's provider cannot be run on this machine.",
    AGENT_PROCESS_EXITED: "The agent process ended without reporting a result.",
    AGENT_PERMISSION_DENIED: "The agent CLI denied tool calls the work needed (its permission denials).",
    AGENT_SANDBOX_UNAVAILABLE: "The agent sandbox (bubblewrap) cannot start on this machine; the agent is never run bare.",
}

# Evidence labels are not blockers: they mark an event, never stop an agent.
EVIDENCE_LABELS = frozenset({NOT_REQUIRED_TOOL_LABEL})


def lookup_failed_evidence(reason: str, *, kind: str = "", source: str = "") -> dict[str, Any]:
    """The structured evidence of ``project_assets_lookup_failed``."""
    return {"source_refs": {"lookup_error": reason}, "lookup_failure_kind": kind, "lookup_source": source}


def lookup_error(evidence: Mapping[str, Any] | None) -> str:
    """``source_refs.lookup_error`` of a blocker's evidence ("" when absent)."""
    refs = (evidence or {}).get("source_refs")
    return str(refs.get("lookup_error", "")) if isinstance(refs, Mapping) else ""
