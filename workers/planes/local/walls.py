"""The local plane's walls, worded as what really happened: how a process exited and after
how long, which call it still awaits, which provider has no CLI here (or the fallback
provider that takes the session instead)."""

from __future__ import annotations

import time
from typing import Any

from domain.shared import ports
from domain.studio.agent_stream import excerpt
from domain.studio.policies.blockers import AGENT_CLI_MISSING, AGENT_PROCESS_EXITED
from domain.studio.policies.first_tool import FIRST_TOOL_REQUIRED
from workers.planes.local.launch import LocalConfig
from workers.planes.local.process import AgentProcess

STALE_SIGNAL = "detached runner process not alive"


def alive_for(process: AgentProcess) -> float:
    """Seconds from the process's start until now (it has exited, or is still running)."""
    return time.monotonic() - process.started_at


def first_tool_block(
    s: Any, llm_session_id: str, process: AgentProcess, *, waited: float, window: float, finished: bool,
    awaited_call: str,
) -> ports.Block:
    """``agent_first_tool_required``: it exited without one, or none came within the window
    (the window it was given: doubled while a call awaited its result)."""
    failed = s.failed_tool_call_count
    tried = f" ({failed} tool call(s) failed or were denied)" if failed else ""
    if finished:
        what = (f"exited with code {process.exit_code} after {round(alive_for(process), 1):g} s"
                " without a required first tool call")
    elif awaited_call:
        what = f"made no required first tool call within {window:g} s: its call of {awaited_call} has had no result"
    else:
        what = f"made no required first tool call within {window:g} s"
    return ports.Block(
        agent_id=s.agent_id, code=FIRST_TOOL_REQUIRED,
        message=f"Process started (llm session {llm_session_id}) but {what}{tried}.",
        evidence={
            "llm_session_id": llm_session_id, "process_attempt": s.process_attempt,
            "seconds_waited": round(waited, 3), "runner_pid": process.pid,
            "runner_alive": not process.finished, "exit_code": process.exit_code if finished else None,
            "failed_tool_calls": failed,
        },
    )


def exited_block(s: Any, process: AgentProcess | None, why: str) -> ports.Block:
    """``agent_process_exited``: why, how it exited and after how long."""
    code = process.exit_code if process else None
    evidence: dict[str, Any] = {"runner_signal": STALE_SIGNAL, "llm_session_id": s.llm_session_id,
                                "workspace_name": s.workspace_name}
    ran = ""
    if process is not None:
        evidence.update(runner_pid=process.pid, exit_code=code, stderr_tail=excerpt(process.stderr_tail(), 400))
        if process.finished:
            ran = f" after {round(alive_for(process), 1):g} s"
            evidence["seconds_alive"] = round(alive_for(process), 3)
    return ports.Block(
        agent_id=s.agent_id, code=AGENT_PROCESS_EXITED,
        message=f"The agent process of {s.agent_id} is not alive: {why}"
                + (f" (exited with code {code}{ran})." if code is not None else ".")
                + " Retry the prompt to start it again in the same worktree.",
        evidence=evidence,
    )


def missing_cli(config: LocalConfig, s: Any, message: str) -> ports.Step:
    """No CLI for the session's provider here: the configured fallback provider takes the
    session (a recorded switch), else the wall names the provider and the way out."""
    provider = str((s.process or {}).get("provider", ""))
    fallback = config.provider_fallback
    if fallback and fallback != provider and not config.command:
        return ports.SwitchProvider(
            agent_id=s.agent_id, provider=fallback,
            reason=f"no {provider or 'provider'} CLI on this machine; SQUADOPS_LOCAL_PROVIDER_FALLBACK={fallback}",
        )
    advice = "" if config.command else (
        " Switch the agent's process (switch_agent_process) to a provider whose CLI is installed."
    )
    return ports.Block(
        agent_id=s.agent_id, code=AGENT_CLI_MISSING,
        message=f"Provider {provider or '(none)'} has no agent CLI on this machine: {message}{advice}",
        evidence={"provider": provider, "command_override": bool(config.command), "provider_fallback": fallback},
    )
