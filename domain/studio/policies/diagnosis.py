"""Diagnosis of a zero-output first-tool block (Errors §9).

Blocked agents that all wait on ``agent_first_tool_required`` with a stable
``llm_session_id`` and no tool output at all point to the execution plane (nodes not
Ready, storage volumes faulted, sandbox core pods not Running), not to gateway
authentication or session resume. Pure: it reads session facts, nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

SUSPECT = "execution_plane"
REASON = (
    "Every live agent is blocked on agent_first_tool_required with a stable llm_session_id "
    "and no tool output: check the execution plane (nodes not Ready, storage volumes faulted, "
    "sandbox core pods not Running), not gateway authentication or session resume."
)


def zero_output_first_tool_block(sessions: Iterable[Any]) -> dict[str, Any]:
    """``{suspect, reason, agents}`` when the run shows the pattern, else ``{}``."""
    live = [s for s in sessions if not s.ended]
    if not live:
        return {}
    stuck = [
        s
        for s in live
        if s.live_status == "blocked"
        and s.blocker_code == "agent_first_tool_required"
        and s.llm_session_id
        and s.tool_call_count == 0
    ]
    if len(stuck) != len(live):
        return {}
    return {"suspect": SUSPECT, "reason": REASON, "agents": sorted(s.agent_id for s in stuck)}
