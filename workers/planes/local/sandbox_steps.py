"""What the agent sandbox adds to the local plane's steps: how each process is confined, on
its start, and the wall of a sandbox that cannot start (never a bare run instead)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from domain.shared import ports
from domain.studio.agent_stream import excerpt
from domain.studio.policies.blockers import AGENT_SANDBOX_UNAVAILABLE


def confined(steps: list[ports.Step], confinements: Mapping[str, dict[str, Any]]) -> list[ports.Step]:
    """Each ``StartProcess`` carries its process's confinement (the session record and the
    feed's armory show it)."""
    return [
        msgspec.structs.replace(step, confinement=confinements[step.agent_id])
        if isinstance(step, ports.StartProcess) and not step.confinement and step.agent_id in confinements else step
        for step in steps
    ]


def unavailable_block(agent_id: str, kind: str, why: str) -> ports.Block:
    """``agent_sandbox_unavailable``: the session waits behind a wall that says why."""
    return ports.Block(
        agent_id=agent_id, code=AGENT_SANDBOX_UNAVAILABLE,
        message=f"The agent sandbox cannot start, so the agent was not run: {why}",
        evidence={"sandbox": kind, "reason": excerpt(why, 400)},
    )
