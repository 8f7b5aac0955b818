"""Errors §9: a zero-output first-tool block points to the execution plane."""

from __future__ import annotations

from dataclasses import dataclass

from domain.studio.policies.diagnosis import SUSPECT, zero_output_first_tool_block


@dataclass
class S:
    agent_id: str
    live_status: str = "blocked"
    blocker_code: str = "agent_first_tool_required"
    llm_session_id: str = "llm-1"
    tool_call_count: int = 0
    ended: bool = False


def test_every_live_agent_stuck_without_output_points_to_the_execution_plane() -> None:
    found = zero_output_first_tool_block([S("planner"), S("curator"), S("old", ended=True, live_status="stopped")])
    assert found["suspect"] == SUSPECT and found["agents"] == ["curator", "planner"]


def test_any_output_or_other_wall_is_not_that_pattern() -> None:
    assert zero_output_first_tool_block([S("planner"), S("curator", tool_call_count=3)]) == {}
    assert zero_output_first_tool_block([S("planner"), S("curator", blocker_code="sandbox_missing")]) == {}
    assert zero_output_first_tool_block([S("planner"), S("curator", live_status="working", blocker_code="")]) == {}
    assert zero_output_first_tool_block([S("planner", llm_session_id="")]) == {}
    assert zero_output_first_tool_block([]) == {}
