"""The cost of the agent sandbox: bubblewrap against no sandbox, side by side in one run.

1. Start latency of an agent process: from the plane's spawn (``AgentProcess``, with the
   forwarder's sockets opened for a sandboxed one) to the first line the process prints.
   Measured for a trivial program (the sandbox's own cost: namespaces, mounts, the
   ``socat`` forwarders listening before the program runs) and for the real Claude Code
   from npm (its ``system/init`` line, printed once its MCP server answered through the
   forwarder), alternating the two modes so the machine's load falls on both alike.
2. The p99 of a stream line to the office: ``bench_agents``' harness (real Claude Code and
   Codex processes narrating their steps; model answer -> stream line -> office SSE), once
   with ``SQUADOPS_AGENT_SANDBOX=bwrap`` and once with ``none``.
"""

from __future__ import annotations

import dataclasses
import time
from types import SimpleNamespace
from typing import Any

from bench.bench_agents import _measure, _script
from bench.context import BenchContext, percentile, scratch_sqlite
from domain.shared import agent_tokens
from tests.integration.real_clis import real_squad
from tests.integration.scripted_models import ScriptedModels
from workers.planes.local.forward import Forwarder
from workers.planes.local.launch import LocalConfig, prepare
from workers.planes.local.process import AgentProcess

STARTS = 12  # per mode and program
STREAM_RUNS = 5  # x 2 CLI processes, per mode
MODES = ("bwrap", "none")


def _start(config: LocalConfig, forwarder: Forwarder, kind: str, program: str, n: int) -> float:
    """Milliseconds from spawning one agent process to its first stdout line."""
    config = dataclasses.replace(config, sandbox=dataclasses.replace(config.sandbox, kind=kind),
                                 command=program)
    run = SimpleNamespace(tenant="default", run_id=f"bench-start-{kind}-{n}", project_slug="acme")
    session = SimpleNamespace(agent_id="planner", session_id=f"ses-{n}", role_key="role_planner", process_attempt=0,
                              process={"provider": "claude-code-cli", "model": ""})
    worktree = config.data_dir.resolve() / "bench-start" / f"{kind}-{n}"
    worktree.mkdir(parents=True, exist_ok=True)
    token = agent_tokens.sign(config.token_key, agent_tokens.AgentIdentity("default", run.run_id, session.session_id,
                                                                           "planner"))
    sockets = Forwarder.folder() if kind == "bwrap" else None
    launch = prepare(config, run, session, worktree, token, "(agent `bench-start`) say hello", sockets=sockets)
    started = time.perf_counter()
    process = AgentProcess(launch, forwarder)
    try:
        while not process.take_lines():
            if process.finished:
                raise RuntimeError(f"{program} under {kind} printed nothing: {process.stderr_tail()}")
            time.sleep(0.001)
        return (time.perf_counter() - started) * 1000
    finally:
        if not process.wait(60):  # (it ends by itself: the scripted model answers its one turn)
            process.stop(1.0)
            process.wait(10)


def _starts(svc: Any) -> list[str]:
    config: LocalConfig = svc.plane.config
    forwarder = Forwarder()
    programs = {"trivial program (/usr/bin/echo)": "/usr/bin/echo started",
                "Claude Code (to its init line)": "claude -p --output-format stream-json --verbose"}
    lines = []
    try:
        for label, program in programs.items():
            samples: dict[str, list[float]] = {mode: [] for mode in MODES}
            for n in range(STARTS):
                for mode in MODES if n % 2 == 0 else reversed(MODES):
                    samples[mode].append(_start(config, forwarder, mode, program, n))
            figures = ", ".join(f"{mode}: p50 {percentile(samples[mode], 50):.1f} ms, "
                                f"p99 {percentile(samples[mode], 99):.1f} ms" for mode in MODES)
            extra = percentile(samples["bwrap"], 50) - percentile(samples["none"], 50)
            lines.append(f"start latency, {label}, {STARTS} starts each: {figures} (bwrap adds {extra:+.1f} ms at p50)")
    finally:
        forwarder.close_all()
    return lines


def run(ctx: BenchContext) -> list[str]:
    del ctx  # SQLite, the embedded default
    scripts = {"planner": _script("planner"), "curator": _script("curator")}
    with scratch_sqlite("bench-sandbox") as database_url, ScriptedModels(scripts) as models, \
            real_squad(database_url, models.url) as svc:
        lines = _starts(svc)
    for mode in MODES:
        with scratch_sqlite(f"bench-sandbox-{mode}") as database_url:
            figures = _measure(scripts, database_url, runs=STREAM_RUNS, agent_sandbox=mode)
        lines += [f"[{mode}] {line}" for line in figures]
    return lines
