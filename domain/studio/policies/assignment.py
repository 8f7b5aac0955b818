"""Agent process assignments (``assign-processes``): parsing and target resolution.

An assignment reads ``target:provider:model:effort:speed``; empty parts keep what the
session runs (a new provider without a model gets that provider's model-proxy alias).
The target is an agent id, a role key such as ``role_tester``, or the group alias
``testers``. Later assignments win over earlier ones for the same agent, so a group can
be assigned first and one member refined after it. Each assignment is also recorded on
the run, and a session opened later for its target (by a handoff, say) takes it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from domain.shared.ids import is_valid_id
from domain.studio.process import EFFORTS, SPEEDS, TESTER_ROLES

TESTERS = "testers"


class AssignmentError(ValueError):
    """An assignment that cannot be parsed or names no session of the run."""


@dataclass(frozen=True)
class Assignment:
    target: str
    provider: str = ""
    model: str = ""
    effort: str = ""
    speed: str = ""

    def as_dict(self) -> dict[str, str]:
        return {
            "target": self.target,
            "provider": self.provider,
            "model": self.model,
            "effort": self.effort,
            "speed": self.speed,
        }


@dataclass(frozen=True)
class Seat:
    """One session as the resolver sees it."""

    agent_id: str
    role_key: str
    live: bool


def parse_assignment(text: str) -> Assignment:
    parts = [p.strip() for p in text.split(":")]
    if len(parts) > 5:
        raise AssignmentError(f"{text!r}: expected target:provider:model:effort:speed")
    parts += [""] * (5 - len(parts))
    target, provider, model, effort, speed = parts
    if not target or not is_valid_id(target):
        raise AssignmentError(f"{text!r}: the target must be an agent id, a role key or {TESTERS!r}")
    if provider and not is_valid_id(provider.replace(".", "_")):
        raise AssignmentError(f"{text!r}: provider {provider!r} is not a provider name")
    if effort not in EFFORTS:
        raise AssignmentError(f"{text!r}: effort must be one of {', '.join(e for e in EFFORTS if e)}")
    if speed not in SPEEDS:
        raise AssignmentError(f"{text!r}: speed must be one of {', '.join(s for s in SPEEDS if s)}")
    if not (provider or model or effort or speed):
        raise AssignmentError(f"{text!r}: names no provider, model, effort or speed")
    return Assignment(target, provider, model, effort, speed)


def names(target: str, agent_id: str, role_key: str) -> bool:
    """Whether ``target`` (an agent id, a role key or ``testers``) names this agent."""
    return target in (agent_id, role_key) or (target == TESTERS and role_key in TESTER_ROLES)


def later_assignments(records: Sequence[Mapping[str, str]], agent_id: str, role_key: str) -> list[Assignment]:
    """The run-level assignments a session opened now for ``agent_id`` takes, oldest first:
    of each ``assign-processes`` (one ``control_id``) the last that names it, as there."""
    chosen: dict[str, Assignment] = {}
    for record in records:
        if names(record.get("target", ""), agent_id, role_key):
            chosen.pop(record.get("control_id", ""), None)  # (keeps the calls in their order)
            chosen[record.get("control_id", "")] = Assignment(
                record.get("target", ""), record.get("provider", ""), record.get("model", ""),
                record.get("effort", ""), record.get("speed", ""),
            )
    return list(chosen.values())


def resolve_target(target: str, seats: Sequence[Seat], joinable: Collection[str] = ()) -> list[str]:
    """Agent ids of the live sessions ``target`` names (an error when it names none, unless
    it names agents that may still join the run: ``joinable`` agent ids and role keys)."""
    if target == TESTERS:
        chosen = [s for s in seats if s.role_key in TESTER_ROLES]
    elif any(s.agent_id == target for s in seats):
        chosen = [s for s in seats if s.agent_id == target]
        if not chosen[0].live:
            raise AssignmentError(f"agent {target!r} has ended; its process cannot be switched")
    else:
        chosen = [s for s in seats if s.role_key == target]
    live = [s.agent_id for s in chosen if s.live]
    if not live and not (target == TESTERS or target in joinable):
        raise AssignmentError(f"{target!r} names no live session of this run, nor an agent that may join it")
    return live


def plan(
    assignments: Sequence[Assignment], seats: Sequence[Seat], joinable: Collection[str] = ()
) -> dict[str, Assignment]:
    """agent id -> the assignment that applies to it (the last one naming it wins)."""
    chosen: dict[str, Assignment] = {}
    for assignment in assignments:
        for agent_id in resolve_target(assignment.target, seats, joinable):
            chosen[agent_id] = assignment
    return chosen
