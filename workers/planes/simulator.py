"""The built-in execution plane: a deterministic squad simulator (seeded per run).

It plays what sandboxed agent CLIs do: start processes, make tool calls, hand off to
delivery lanes and to one tester per actor suit, open pull requests, and finish with a
final result reporting cost, duration and turns. It also misbehaves the way real planes
do, so the recovery policies have real cases: a process that never makes its first tool
call (``agent_first_tool_required``) and a sandbox that disappears (``sandbox_missing``).

Every decision draws from ``Random(f"{seed}:{tick}:{agent}")``: the same run state at the
same tick gives the same steps, on every machine.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Any

from domain import ports

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


def _unit(*parts: object) -> float:
    """A stable number in [0, 1) for a fact of the run (not of the tick)."""
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _kind(session: Any) -> str:
    for kind in ("delivery", "proof", "compaction", "coordination"):
        if kind in session.workload_groups:
            return kind
    return "coordination"


class SimulatorPlane:
    """Deterministic simulator of a sandbox execution plane."""

    name = "simulator"

    def __init__(self, *, activity: float = 0.45) -> None:
        self.activity = activity

    def plan_tick(self, run: Any, sessions: Sequence[Any], tick: int) -> list[ports.Step]:
        steps: list[ports.Step] = []
        if sessions and all(s.ended for s in sessions):
            return [ports.CompleteRun(summary={"sessions": len(sessions)})]
        by_agent = {s.agent_id: s for s in sessions}
        for session in sorted(sessions, key=lambda s: s.agent_id):
            if session.ended:
                continue
            rng = random.Random(f"{run.seed}:{tick}:{session.agent_id}")
            steps.extend(self._session_steps(run, session, by_agent, tick, rng))
        return steps

    # -- one session -------------------------------------------------------------------

    def _session_steps(
        self, run: Any, s: Any, by_agent: dict[str, Any], tick: int, rng: random.Random
    ) -> list[ports.Step]:
        agent = s.agent_id
        if s.live_status == "ready":
            if rng.random() < 0.7:
                return [
                    ports.StartProcess(
                        agent_id=agent,
                        llm_session_id=self._llm_session_id(run, s),
                        # A restarted process starts again in its assigned workspace.
                        workspace_name=s.workspace_name or f"ws-{run.project_slug}-shared",
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
        loses_sandbox = _unit(run.seed, agent, s.process_attempt, "sandbox") < SANDBOX_LOSS_RATE
        if loses_sandbox and s.tool_call_count == max(2, budget // 2):
            return [
                ports.Block(
                    agent_id=agent,
                    code="sandbox_missing",
                    message="The sandbox behind this session is gone (no such container).",
                    evidence={"workspace_name": s.workspace_name, "runner_signal": "sandbox_missing"},
                )
            ]
        if s.mailbox_count and rng.random() < 0.5:
            return [ports.ControllerAction(agent_id=agent, action="agent_mailbox", summary="read the mailbox")]
        handoffs = self._handoffs(run, s, by_agent, kind)
        if handoffs and s.tool_call_count >= 2:
            return [handoffs[0]]
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
            skips_pr = _unit(run.seed, agent, "missing_pr") < MISSING_PR_RATE
            # After an operator intervention the lane opens its pull request.
            if not skips_pr or s.controller_intervention_count:
                return [self._pull_request(run, s)]
        return [ports.Finish(agent_id=agent, result=self._result(run, s, budget, tick))]

    def _first_tool(self, run: Any, s: Any, tick: int, rng: random.Random) -> list[ports.Step]:
        stalls = _unit(run.seed, s.agent_id, s.process_attempt, "stall") < FIRST_TOOL_STALL_RATE
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

    def _handoffs(self, run: Any, s: Any, by_agent: dict[str, Any], kind: str) -> list[ports.Handoff]:
        """The handoffs this agent still owes, in a fixed order."""
        if kind != "coordination":
            return []
        facts = run.project_facts
        owed: list[ports.Handoff] = []
        if "lanes" in s.workload_groups:
            for lane in facts.get("delivery_lanes", []):
                if lane not in s.handoffs_sent and lane not in by_agent:
                    owed.append(
                        ports.Handoff(
                            agent_id=s.agent_id,
                            target_agent_id=lane,
                            spec_agent_id=lane,
                            kind="delivery_lane",
                            reason=f"Deliver the {lane} slice of: {run.work_scope}",
                        )
                    )
        if "suits" in s.workload_groups:
            for suit in facts.get("suits", []):
                target = f"tester-{suit['suit_id']}"
                if target not in s.handoffs_sent and target not in by_agent:
                    owed.append(
                        ports.Handoff(
                            agent_id=s.agent_id,
                            target_agent_id=target,
                            spec_agent_id="tester",
                            kind="suit_proof",
                            reason=f"Prove the slice as actor suit {suit['suit_id']}",
                            suit=suit,
                        )
                    )
        if "compaction_trigger" in s.workload_groups and "compactor" not in by_agent:
            others = [
                o for a, o in by_agent.items() if a != s.agent_id and _kind(o) != "coordination"
            ]
            planner_done = all(o.ended for a, o in by_agent.items() if _kind(o) == "coordination" and a != s.agent_id)
            if not owed and planner_done and all(o.ended for o in others):
                owed.append(
                    ports.Handoff(
                        agent_id=s.agent_id,
                        target_agent_id="compactor",
                        spec_agent_id="compactor",
                        kind="compaction",
                        reason="Compact the run into the chronicle and handoff state",
                    )
                )
        return owed

    def _waits_for_squad(self, run: Any, s: Any, by_agent: dict[str, Any]) -> bool:
        """The curator keeps the evidence pack open until lanes and proofs are done."""
        if "compaction_trigger" not in s.workload_groups:
            return False
        if "compactor" in by_agent:
            return False
        return any(not o.ended for a, o in by_agent.items() if a != s.agent_id)

    # -- what agents produce ------------------------------------------------------------

    def _tool(self, s: Any, kind: str, rng: random.Random, summary: str = "") -> ports.CallTool:
        tool = rng.choice(TOOLS[kind])
        phase = PHASES[kind]
        target = s.suit.get("suit_id") if s.suit else s.agent_id
        return ports.CallTool(
            agent_id=s.agent_id,
            tool_name=tool,
            route=f"{phase}/{target}",
            summary=summary or f"{tool} during {phase}",
        )

    def _message(self, s: Any, kind: str, rng: random.Random) -> str:
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
        return ports.OpenPullRequest(
            agent_id=s.agent_id,
            repository_key=s.agent_id,
            pr_owner=owner or run.tenant,
            pr_repo=repo,
            pr_number=number,
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

    def probe_workspace(self, lease: Any) -> str:
        """The simulated sandbox plane's live view of a workspace it hosts."""
        return {"ready": "connected", "suspended": "stopped", "missing": "missing"}.get(lease.status, "pending")

    def _llm_session_id(self, run: Any, s: Any) -> str:
        digest = hashlib.sha256(f"{run.seed}|{s.agent_id}|{s.process_attempt + 1}".encode()).hexdigest()
        return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
