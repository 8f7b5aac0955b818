"""Recovery policies as the ticker runs them: pure decisions turned into execution steps.

Each policy object answers ``plan(run, sessions, tick) -> list[Step]`` (a ``SessionPolicy``
by its ``step`` for each live session on its own); the ticker applies
those steps before the plane's, through the aggregates' guards (a rejected step is
counted, never fatal). The decisions themselves live in ``domain.studio.policies``; these
adapters only read session facts and name the step.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from domain.shared import ports
from domain.studio.policies import (
    first_tool_recovery,
    fresh_workspace,
    sandbox_start,
    self_heal,
    suit_proof,
)
from domain.studio.policies.credentials import credential_blocker, message_for
from domain.studio.policies.first_tool import FIRST_TOOL_REQUIRED

SANDBOX_START_RECOVERY = "sandbox_start_recovery"
MAX_SELF_HEALS = 2


class SessionPolicy(ABC):
    """A policy that looks at each live session of the run on its own: at most one step a session."""

    name = ""

    def plan(self, run: Any, sessions: Sequence[Any], tick: int) -> list[ports.Step]:
        steps = (self.step(run, s) for s in sessions if not s.ended)
        return [step for step in steps if step is not None]

    @abstractmethod
    def step(self, run: Any, s: Any) -> ports.Step | None:
        """The step this policy takes for the live session ``s`` (None: none)."""


class FirstToolPolicy(SessionPolicy):
    """Restarts only the stale process, in its assigned workspace, probed there."""

    name = "first_tool"

    def __init__(self, max_restarts: int = first_tool_recovery.MAX_AUTOMATIC_RESTARTS) -> None:
        self.max_restarts = max_restarts

    def step(self, run: Any, s: Any) -> ports.Step | None:
        decision = first_tool_recovery.decide(
            s.live_status,
            s.blocker_code,
            s.policy_attempts.get(FIRST_TOOL_REQUIRED, 0),
            max_restarts=self.max_restarts,
        )
        if decision != first_tool_recovery.RESTART_SAME_WORKSPACE:
            return None
        return ports.RestartProcess(agent_id=s.agent_id, reason=FIRST_TOOL_REQUIRED, probe_workspace=True)


class FreshWorkspacePolicy(SessionPolicy):
    """A fresh workspace for a failed materialization, a corrupt checkout or a lost checkpoint."""

    name = "fresh_workspace"

    def __init__(self, max_fresh: int = fresh_workspace.MAX_AUTOMATIC_FRESH) -> None:
        self.max_fresh = max_fresh

    def step(self, run: Any, s: Any) -> ports.Step | None:
        used = sum(s.policy_attempts.get(code, 0) for code in fresh_workspace.CAUSES)
        decision = fresh_workspace.decide(
            s.live_status, s.blocker_code, s.blocker_evidence, used, max_fresh=self.max_fresh
        )
        if decision != fresh_workspace.FRESH_WORKSPACE:
            return None
        return ports.RestartProcess(agent_id=s.agent_id, reason=s.blocker_code, fresh_workspace=True)


class SandboxStartPolicy(SessionPolicy):
    """Container-creation corruption on start: recreate once through the shared registry."""

    name = "sandbox_start"

    def step(self, run: Any, s: Any) -> ports.Step | None:
        used = s.policy_attempts.get(SANDBOX_START_RECOVERY, 0)
        decision = sandbox_start.decide(s.live_status, s.blocker_code, s.blocker_evidence, used)
        if decision != sandbox_start.RECREATE_ONCE:
            return None
        return ports.RecreateWorkspace(agent_id=s.agent_id, reason=SANDBOX_START_RECOVERY)


class SelfHealPolicy(SessionPolicy):
    """``pending_reprovision`` plus a stale runner signal: clear identity, requeue a launch."""

    name = "self_heal"

    def __init__(self, max_heals: int = MAX_SELF_HEALS) -> None:
        self.max_heals = max_heals

    def step(self, run: Any, s: Any) -> ports.Step | None:
        if s.live_status != "blocked" or s.self_heal_count >= self.max_heals:
            return None
        texts = self_heal.signal_texts(s.blocker_code, s.blocker_message, s.blocker_evidence)
        signal = self_heal.stale_runner_signal(texts)
        if self_heal.decide(s.self_heal_status, signal) != self_heal.REQUEUE_FRESH_LAUNCH:
            return None
        return ports.SelfHeal(agent_id=s.agent_id, signal=signal)


class CredentialPolicy(SessionPolicy):
    """Checks sandbox API credentials as a session launches; blocks with what they prove."""

    name = "credentials"

    def __init__(self, probe: ports.CredentialProbe) -> None:
        self.probe = probe

    def step(self, run: Any, s: Any) -> ports.Step | None:
        if s.live_status != "ready":
            return None
        check = self.probe.check_credentials(run, s)
        code = credential_blocker(check)
        if not code:
            return None
        return ports.Block(agent_id=s.agent_id, code=code, message=message_for(code, check), evidence=check.evidence())


class SuitProofPolicy:
    """Spawns the tester handoff of every actor suit that would otherwise go unproven."""

    name = "suit_proof"

    def plan(self, run: Any, sessions: Sequence[Any], tick: int) -> list[ports.Step]:
        suits = run.project_facts.get("suits", [])
        if not suits:
            return []
        members = [
            suit_proof.Member(
                agent_id=s.agent_id,
                workload_groups=tuple(s.workload_groups),
                live=not s.ended,
                suit_id=str((s.suit or {}).get("suit_id", "")),
            )
            for s in sessions
        ]
        sent = [target for s in sessions for target in s.handoffs_sent]
        missing = suit_proof.missing_suit_handoffs(suits, members, sent)
        working = [m for m in members if any(s.agent_id == m.agent_id and s.live_status == "working" for s in sessions)]
        source = suit_proof.spawner(working)
        if not missing or not source:
            return []
        return [
            ports.Handoff(
                agent_id=source,
                target_agent_id=suit_proof.tester_agent_id(suit["suit_id"]),
                spec_agent_id="tester",
                kind="suit_proof",
                reason=f"Prove the slice as actor suit {suit['suit_id']} (its tester handoff was missing)",
                suit=dict(suit),
            )
            for suit in missing
        ]


def recovery_policies(credentials: ports.CredentialProbe | None = None) -> list[Any]:
    """The ticker's policies, in the order their steps apply."""
    policies: list[Any] = [CredentialPolicy(credentials)] if credentials is not None else []
    policies += [
        SandboxStartPolicy(),
        SelfHealPolicy(),
        FreshWorkspacePolicy(),
        FirstToolPolicy(),
        SuitProofPolicy(),
    ]
    return policies
