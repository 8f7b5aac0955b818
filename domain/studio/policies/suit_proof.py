"""Suit proof: every reusable actor suit of the project gets a tester handoff.

Planner and curator spawn a tester handoff for each suit declared in
``agentSquadSuitTesterRoles``. The curator (the agent carrying the ``suits`` workload)
does it in the course of its work; a suit is *missing* its handoff when no tester session
proves it and no live agent is left that carries the ``suits`` workload. The planner (or
another live coordination agent) then spawns the missing handoff.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

SUITS_GROUP = "suits"
COORDINATION_GROUP = "coordination"


@dataclass(frozen=True)
class Member:
    """What the policy needs to know of one session of the run."""

    agent_id: str
    workload_groups: tuple[str, ...]
    live: bool
    suit_id: str = ""


def tester_agent_id(suit_id: str) -> str:
    return f"tester-{suit_id}"


def proven_suits(members: Iterable[Member]) -> set[str]:
    """Suits that have a tester session (in any wave), whatever its state."""
    proven = set()
    for m in members:
        if m.suit_id:
            proven.add(m.suit_id)
        elif m.agent_id.startswith("tester-"):
            proven.add(m.agent_id.removeprefix("tester-"))
    return proven


def missing_suit_handoffs(
    suits: Sequence[Mapping[str, str]], members: Sequence[Member], handed_off: Iterable[str] = ()
) -> list[Mapping[str, str]]:
    """Suits whose tester handoff is missing and that no live suit carrier will spawn."""
    if any(m.live and SUITS_GROUP in m.workload_groups for m in members):
        return []
    done = proven_suits(members) | {t.removeprefix("tester-") for t in handed_off if t.startswith("tester-")}
    return [suit for suit in suits if suit.get("suit_id") and suit["suit_id"] not in done]


def spawner(members: Sequence[Member]) -> str:
    """The live coordination agent that spawns missing handoffs (the planner first)."""
    live = [m for m in members if m.live and COORDINATION_GROUP in m.workload_groups]
    live.sort(key=lambda m: (m.agent_id != "planner", m.agent_id))
    return live[0].agent_id if live else ""
