"""The built-in execution plane: a deterministic squad simulator (seeded per run).

It plays what sandboxed agent CLIs do: start processes, make tool calls, hand off to
delivery lanes and to one tester per actor suit, open pull requests, and finish with a
final result reporting cost, duration and turns. It also misbehaves the way real planes
do, so the recovery policies have real cases: a process that never makes its first tool
call (``agent_first_tool_required``), a sandbox that disappears (``sandbox_missing``, or a toolbox
that cannot be observed, sometimes flagged ``pending_reprovision`` by the workspace registry), a
corrupt checkout (``workspace_checkout_corrupt``, the fresh-workspace case) and a start call that
returns container-creation corruption (a missing provider binding).

Every decision draws from ``Draws(f"{seed}:{tick}:{agent}")`` (BLAKE2b of that key): the
same run state at the same tick gives the same steps, on every machine.
"""

from __future__ import annotations

import functools
import hashlib
import struct
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from domain.shared import ports
from domain.studio.policies.credentials import CredentialCheck
from domain.studio.squad import role_name
from workers.planes.local.worktrees import Worktrees

FIRST_TOOL_STALL_RATE = 0.12
SANDBOX_LOSS_RATE = 0.06
MISSING_PR_RATE = 0.05
STALL_DETECTION_TICKS = 3

TOOLS = {
    "coordination": ("Read", "Grep", "TodoWrite", "mcp__board__create_issue", "mcp__vcs__read_file"),
    "delivery": ("Read", "Edit", "Write", "Bash", "Grep", "mcp__vcs__push_branch"),
    "proof": (
        "mcp__browser__navigate",
        "mcp__browser__click",
        "mcp__browser__screenshot",
        "mcp__errors__list_issues",
    ),
    "compaction": ("Read", "Write", "mcp__vcs__commit_file", "mcp__errors__list_issues"),
}
BUDGETS = {"coordination": (5, 9), "delivery": (6, 12), "proof": (4, 7), "compaction": (3, 5)}
PHASES = {"coordination": "intake", "delivery": "delivery", "proof": "proof", "compaction": "compaction"}
TOOLBOX_OBSERVE_SHARE = 0.3
PENDING_REPROVISION_SHARE = 0.5
CHECKOUT_CORRUPTION_RATE = 0.03
START_CORRUPTION_RATE = 0.03


@dataclass(frozen=True)
class FaultRates:
    """How often the simulated plane misbehaves (each draw is a fact of the run, not of a tick)."""

    first_tool_stall: float = FIRST_TOOL_STALL_RATE
    sandbox_loss: float = SANDBOX_LOSS_RATE
    toolbox_observe_share: float = TOOLBOX_OBSERVE_SHARE
    pending_reprovision_share: float = PENDING_REPROVISION_SHARE
    missing_pr: float = MISSING_PR_RATE
    checkout_corruption: float = CHECKOUT_CORRUPTION_RATE
    start_corruption: float = START_CORRUPTION_RATE

    @classmethod
    def none(cls, **rates: float) -> FaultRates:
        """No faults except the ones named."""
        return cls(**{f.name: 0.0 for f in fields(cls)} | rates)


class Faults:
    """The plane's faults as pure predicates of (seed, agent, attempt, ...)."""

    def __init__(self, rates: FaultRates | None = None) -> None:
        self.rates = rates or FaultRates()

    def stalls_first_tool(self, seed: int, agent: str, attempt: int) -> bool:
        return _unit(seed, agent, attempt, "stall") < self.rates.first_tool_stall

    def loses_sandbox(self, seed: int, agent: str, attempt: int) -> bool:
        return _unit(seed, agent, attempt, "sandbox") < self.rates.sandbox_loss

    def sandbox_signal(self, seed: int, agent: str, attempt: int) -> str:
        observe = _unit(seed, agent, attempt, "observe") < self.rates.toolbox_observe_share
        return "sandbox_toolbox_observe_failed" if observe else "sandbox_missing"

    def pending_reprovision(self, seed: int, agent: str, attempt: int) -> bool:
        return _unit(seed, agent, attempt, "reprovision") < self.rates.pending_reprovision_share

    def skips_pr(self, seed: int, agent: str) -> bool:
        return _unit(seed, agent, "missing_pr") < self.rates.missing_pr

    def corrupt_checkout(self, seed: int, agent: str, attempt: int, generation: int) -> bool:
        # A fresh workspace is a fresh checkout: only the first one can be corrupt.
        return generation == 0 and _unit(seed, agent, attempt, "checkout") < self.rates.checkout_corruption

    def corrupt_container(self, seed: int, agent: str, attempt: int, workspace_restarts: int) -> bool:
        return _unit(seed, agent, attempt, workspace_restarts, "create") < self.rates.start_corruption


@functools.lru_cache(maxsize=1 << 16)
def _unit(*parts: object) -> float:
    """A stable number in [0, 1) for a fact of the run (not of the tick); the same facts
    are asked for at every tick, so answers are remembered (a pure function)."""
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


# The statuses in which a session plays (``_session_steps`` answers [] in any other).
_PLAYING = frozenset({"ready", "waiting_first_tool", "working"})


def _agent_id(session: Any) -> str:
    return session.agent_id


def _kind(session: Any) -> str:
    groups = session.workload_groups
    if "delivery" in groups:
        return "delivery"
    if "proof" in groups:
        return "proof"
    if "compaction" in groups:
        return "compaction"
    return "coordination"


class Draws:
    """Uniform draws in [0, 1) for one key: each 64-bit word of ``blake2b(f"{key}#{block}")``
    gives one (its top 53 bits, as ``random.random`` takes them), eight a block.

    Seeding a Mersenne Twister per session and tick cost more than the session's whole
    plan; one hash answers a tick's few draws, and a session that decides without a draw
    hashes nothing.
    """

    __slots__ = ("_key", "_block", "_units")

    def __init__(self, key: str) -> None:
        self._key = key
        self._block = 0
        self._units: list[float] = []

    def random(self) -> float:
        units = self._units
        if not units:
            digest = hashlib.blake2b(f"{self._key}#{self._block}".encode()).digest()
            self._block += 1
            units.extend([(word >> 11) * _UNIT for word in reversed(_WORDS.unpack(digest))])
        return units.pop()

    def choice(self, seq: Sequence[Any]) -> Any:
        return seq[int(self.random() * len(seq))]


_WORDS = struct.Struct("<8Q")
_UNIT = 2.0**-53


class SimulatorPlane:
    """Deterministic simulator of a sandbox execution plane."""

    name = "simulator"

    def __init__(
        self, *, activity: float = 0.45, faults: FaultRates | None = None, data_dir: Path | None = None,
        agent_domain: str = "agents.squadops.local", vcs_root: Path | None = None, review_calls: int = 0,
    ) -> None:
        self.activity = activity
        self.faults = Faults(faults)
        self.agent_domain = agent_domain
        self._data_dir = data_dir
        self._vcs_root = vcs_root
        self.review_calls = review_calls  # a lane's tool calls after its pull request, awaiting review
        self._worktrees: Worktrees | None = None

    @property
    def worktrees(self) -> Worktrees:
        """The lanes' repositories (under the data dir; a private temporary one when none is given)."""
        if self._worktrees is None:
            data_dir = self._data_dir or Path(tempfile.mkdtemp(prefix="squadops-simulator-"))
            self._worktrees = Worktrees(data_dir, self._vcs_root)
        return self._worktrees

    def changes(self, run: Any, agent_id: str) -> ports.BranchChanges | None:
        """The lane's branch against its base (``ports.WorkBranches``)."""
        return self.worktrees.changes(run, agent_id)

    def plan_tick(self, run: Any, sessions: Sequence[Any], tick: int) -> list[ports.Step]:
        steps: list[ports.Step] = []
        if sessions and all(s.ended for s in sessions):
            return [ports.CompleteRun(summary={"sessions": len(sessions)})]
        by_agent = {s.agent_id: s for s in sessions}
        for session in sorted(sessions, key=_agent_id):
            if session.live_status not in _PLAYING:
                continue  # ended, blocked or paused: no step, no draw (so no generator to seed)
            rng = Draws(f"{run.seed}:{tick}:{session.agent_id}")
            steps.extend(self._session_steps(run, session, by_agent, tick, rng))
        return steps

    # -- one session -------------------------------------------------------------------

    def _session_steps(
        self, run: Any, s: Any, by_agent: dict[str, Any], tick: int, rng: Draws
    ) -> list[ports.Step]:
        agent = s.agent_id
        if s.live_status == "ready":
            if rng.random() < 0.7:
                # A restarted process starts again in its assigned workspace.
                workspace = s.workspace_name or self.workspace_for(run, s)
                restarts = getattr(s, "workspace_restarts", 0)
                if self.faults.corrupt_container(run.seed, agent, s.process_attempt, restarts):
                    return [
                        ports.StartFailed(
                            agent_id=agent,
                            workspace_name=workspace,
                            error="container creation corruption: overlay layer checksum mismatch",
                            message="The sandbox start call returned container-creation corruption.",
                        )
                    ]
                return [
                    ports.StartProcess(
                        agent_id=agent,
                        llm_session_id=self._llm_session_id(run, s),
                        workspace_name=workspace,
                    )
                ]
            return []
        if s.switch_pending and s.live_status in ("working", "waiting_first_tool"):
            # A process switch takes effect at the next turn: the replacement starts now.
            return [ports.RestartProcess(agent_id=agent, reason="process_switch")]
        if s.live_status == "waiting_first_tool":
            return self._first_tool(run, s, tick, rng)
        if s.live_status != "working":
            return []
        kind = _kind(s)
        low, high = BUDGETS[kind]
        budget = low + int(_unit(run.seed, agent, "budget") * (high - low + 1))
        if s.tool_call_count == max(2, budget // 2) and self.faults.loses_sandbox(run.seed, agent, s.process_attempt):
            return [self._sandbox_loss(run, s)]
        if s.mailbox_count and rng.random() < 0.5:
            return [ports.ControllerAction(agent_id=agent, action="agent_mailbox", summary="read the mailbox")]
        if kind == "coordination" and s.tool_call_count >= 2:
            handoff = next(self._owed_handoffs(run, s, by_agent, kind), None)
            if handoff is not None:
                return [handoff]
        if kind == "coordination" and self._waits_for_squad(run, s, by_agent):
            if rng.random() < self.activity / 3:
                return [self._tool(s, kind, rng, "watching the squad")]
            return []
        if s.tool_call_count < budget:
            if rng.random() >= self.activity:
                return []
            steps: list[ports.Step] = [self._tool(s, kind, rng)]
            if rng.random() < 0.3:
                steps.append(ports.Say(agent_id=agent, text=self._message(s, kind, rng)))
            return steps
        if kind == "delivery" and s.pull_requests == 0:
            skips_pr = self.faults.skips_pr(run.seed, agent)
            # After an operator intervention the lane opens its pull request.
            if not skips_pr or s.controller_intervention_count:
                return [self._pull_request(run, s)]
        if kind == "delivery" and s.pull_requests and s.tool_call_count < budget + self.review_calls:
            return [self._tool(s, kind, rng, "waiting for review")] if rng.random() < self.activity else []
        return [ports.Finish(agent_id=agent, result=self._result(run, s, budget, tick))]

    def _first_tool(self, run: Any, s: Any, tick: int, rng: Draws) -> list[ports.Step]:
        stalls = self.faults.stalls_first_tool(run.seed, s.agent_id, s.process_attempt)
        generation = getattr(s, "workspace_generation", 0)
        if not stalls and self.faults.corrupt_checkout(run.seed, s.agent_id, s.process_attempt, generation):
            return [
                ports.Block(
                    agent_id=s.agent_id,
                    code="workspace_checkout_corrupt",
                    message="The workspace checkout is corrupt (object store fails its integrity check).",
                    evidence={"workspace_name": s.workspace_name, "fresh_workspace_cause": "corrupt_checkout"},
                )
            ]
        if stalls:
            if tick - s.status_tick >= STALL_DETECTION_TICKS:
                return [
                    ports.Block(
                        agent_id=s.agent_id,
                        code="agent_first_tool_required",
                        message="Process started but made no required first tool call.",
                        evidence={
                            "llm_session_id": s.llm_session_id,
                            "process_attempt": s.process_attempt,
                            "ticks_waited": tick - s.status_tick,
                        },
                    )
                ]
            if rng.random() < 0.5:
                return [ports.ControllerAction(agent_id=s.agent_id, action="agent_mailbox")]
            return []
        steps: list[ports.Step] = []
        if rng.random() < 0.35:
            action = rng.choice(("dispatch_slot_prompt", "acquire_execution_slot"))
            steps.append(ports.ControllerAction(agent_id=s.agent_id, action=action))
        if rng.random() < 0.8:
            kind = _kind(s)
            steps.append(self._tool(s, kind, rng, "first tool"))
        return steps

    # -- squad shape -------------------------------------------------------------------

    def _owed_handoffs(self, run: Any, s: Any, by_agent: dict[str, Any], kind: str) -> Iterator[ports.Handoff]:
        """The handoffs this agent still owes, in a fixed order (made as they are asked for:
        a tick hands off the first only)."""
        if kind != "coordination":
            return
        facts = run.project_facts
        owed = False
        if "lanes" in s.workload_groups:
            for lane in facts.get("delivery_lanes", []):
                if lane not in s.handoffs_sent and lane not in by_agent:
                    owed = True
                    yield ports.Handoff(
                        agent_id=s.agent_id,
                        target_agent_id=lane,
                        spec_agent_id=lane,
                        kind="delivery_lane",
                        reason=f"Deliver the {lane} slice of: {run.work_scope}",
                    )
        if "suits" in s.workload_groups:
            for suit in facts.get("suits", []):
                target = f"tester-{suit['suit_id']}"
                if target not in s.handoffs_sent and target not in by_agent:
                    owed = True
                    yield ports.Handoff(
                        agent_id=s.agent_id,
                        target_agent_id=target,
                        spec_agent_id="tester",
                        kind="suit_proof",
                        reason=f"Prove the slice as actor suit {suit['suit_id']}",
                        suit=suit,
                    )
        # Compaction once the planners and every lane and tester (everyone else) are done.
        if (
            not owed
            and "compaction_trigger" in s.workload_groups
            and "compactor" not in by_agent
            and all(o.ended for a, o in by_agent.items() if a != s.agent_id)
        ):
            yield ports.Handoff(
                agent_id=s.agent_id,
                target_agent_id="compactor",
                spec_agent_id="compactor",
                kind="compaction",
                reason="Compact the run into the chronicle and handoff state",
            )

    def _waits_for_squad(self, run: Any, s: Any, by_agent: dict[str, Any]) -> bool:
        """The curator keeps the evidence pack open until lanes and proofs are done."""
        if "compaction_trigger" not in s.workload_groups:
            return False
        if "compactor" in by_agent:
            return False
        return any(not o.ended for a, o in by_agent.items() if a != s.agent_id)

    # -- what agents produce ------------------------------------------------------------

    def _tool(self, s: Any, kind: str, rng: Draws, summary: str = "") -> ports.CallTool:
        tool = rng.choice(TOOLS[kind])
        phase = PHASES[kind]
        target = s.suit.get("suit_id") if s.suit else s.agent_id
        return ports.CallTool(
            agent_id=s.agent_id,
            tool_name=tool,
            route=f"{phase}/{target}",
            summary=summary or f"{tool} during {phase}",
            result=_tool_result(tool, phase, target),
        )

    def _message(self, s: Any, kind: str, rng: Draws) -> str:
        notes = {
            "coordination": ("Lane issues drafted.", "Source references mapped.", "Waiting on lane reports."),
            "delivery": ("Tests pass locally.", "Refactored the handler.", "Pushed the branch."),
            "proof": ("Route renders as the suit.", "Screenshot captured.", "No console errors."),
            "compaction": ("Chronicle drafted.", "Handoff state written."),
        }
        return rng.choice(notes[kind])

    def _pull_request(self, run: Any, s: Any) -> ports.OpenPullRequest:
        bindings = {b["repository_key"]: b for b in run.project_facts.get("repository_bindings", [])}
        binding = bindings.get(s.agent_id, {})
        slug = binding.get("vcs_repo_slug") or f"{run.project_slug}-{s.agent_id}"
        owner, _, repo = slug.rpartition("/")
        number = 100 + int(_unit(run.seed, s.agent_id, "pr") * 900)
        # A lane opens no empty pull request: it commits its (small, deterministic) change first.
        path = f"squad/{s.agent_id}.md"
        note = f"# {s.agent_id}\n\nRun {run.run_id}: the {s.agent_id} slice of {run.project_slug}.\n"
        author = f"{role_name(s.role_key)}@{self.agent_domain}"
        title = f"{s.agent_id}: the {run.project_slug} slice"
        changes = self.worktrees.commit_files(
            run, s.agent_id, {path: note}, f"{title}\n\nRun: {run.run_id}\n",
            author, when=run.started_at or "2000-01-01T00:00:00Z",
        )
        return ports.OpenPullRequest(
            agent_id=s.agent_id,
            repository_key=s.agent_id,
            pr_owner=owner or run.tenant,
            pr_repo=repo,
            pr_number=number,
            head_sha=changes.head_sha if changes else "",
            changed_paths=changes.paths if changes else (),
            title=title,
        )

    def _result(self, run: Any, s: Any, budget: int, tick: int) -> dict[str, Any]:
        """A final result shaped like an agent CLI's JSON ``result`` message."""
        turns = s.tool_call_count + 1 + int(_unit(run.seed, s.agent_id, "turns") * 4)
        cost = round(0.015 * turns + 0.1 * _unit(run.seed, s.agent_id, "cost"), 4)
        duration = 1000 * (tick - s.status_tick) + int(_unit(run.seed, s.agent_id, "ms") * 900)
        return {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "total_cost_usd": cost,
            "duration_ms": duration,
            "num_turns": turns,
            "result": f"{s.alias} finished after {s.tool_call_count} tool calls.",
            "session_id": s.llm_session_id,
        }

    def _sandbox_loss(self, run: Any, s: Any) -> ports.Block:
        signal = self.faults.sandbox_signal(run.seed, s.agent_id, s.process_attempt)
        evidence: dict[str, Any] = {"workspace_name": s.workspace_name, "runner_signal": signal}
        if self.faults.pending_reprovision(run.seed, s.agent_id, s.process_attempt):
            # The workspace registry noticed too and flagged the workspace for reprovision.
            evidence["execution_workspace_self_heal_status"] = "pending_reprovision"
        if signal == "sandbox_missing":
            return ports.Block(
                agent_id=s.agent_id,
                code="sandbox_missing",
                message="The sandbox behind this session is gone (no such container).",
                evidence=evidence,
            )
        return ports.Block(
            agent_id=s.agent_id,
            code="sandbox_toolbox_observe_failed",
            message="The sandbox toolbox did not answer its observe call.",
            evidence=evidence,
        )

    def workspace_for(self, run: Any, s: Any) -> str:
        """The project's shared workspace; a fresh workspace is a new one of the registry."""
        generation = getattr(s, "workspace_generation", 0)
        if generation:
            return f"ws-{run.project_slug}-fresh-{s.agent_id}-{generation}"
        return f"ws-{run.project_slug}-shared"

    def check_credentials(self, run: Any, session: Any) -> CredentialCheck:
        """The simulated sandbox plane resolves the studio profile and accepts its key."""
        return CredentialCheck(profile_resolved=True, key_status=200, session_credential_ref="")

    def probe_workspace(self, lease: Any) -> str:
        """The simulated sandbox plane's live view of a workspace it hosts."""
        return {"ready": "connected", "suspended": "stopped", "missing": "missing"}.get(lease.status, "pending")

    def _llm_session_id(self, run: Any, s: Any) -> str:
        digest = hashlib.sha256(f"{run.seed}|{s.agent_id}|{s.process_attempt + 1}".encode()).hexdigest()
        return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _tool_result(tool: str, phase: str, target: str) -> str:
    """What a simulated tool answers, from the call alone (no draw): a read returns a file
    of numbered lines (long enough to fold on the transcript page), a shell its output."""
    if tool in ("Read", "mcp__vcs__read_file"):
        return "\n".join(f"{n:>4}\t{phase} notes for {target}, line {n}" for n in range(1, 41))
    if tool == "Bash":
        return f"$ make test\n12 passed in 0.4 s ({phase}/{target})"
    if tool == "Grep":
        return f"squad/{target}.md:3: {phase}"
    return f"{tool}: ok ({phase}/{target})"
