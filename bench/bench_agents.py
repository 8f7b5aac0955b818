"""Real agent CLIs: 20 Claude Code and Codex processes streaming at once -> the office's SSE.

The service (SQLite, local plane, all workers) runs in this process on a real port; ten
runs each start a planner on Claude Code and a curator on Codex (20 CLI processes from
npm at once), against the scripted model server of the tests. Each model answer narrates
its step (``[<run> <agent> <turn>]``) before its tool call; the CLI prints that text as a
stream line the moment the answer arrives, the plane records it, and the office's SSE
stream of the run carries it. A sample is the time from the answer leaving the model
server to that live event reaching an SSE client of the office: the stream line's way
through the plane, the event store, the projector, the fan-out and the live endpoint.

Memory: the service process's RSS with the 20 agents streaming, less its RSS before, per
agent (what the plane and its records cost per agent), and the CLIs' own RSS per process (with everything it runs: under the sandbox, bwrap, its
init and the forwarders too).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from bench.context import BenchContext, percentile, scratch_sqlite
from projections.studio.live_channel import topic_for
from tests.conftest import ADMIN
from tests.integration.real_clis import real_squad
from tests.integration.scripted_models import ScriptedModels
from workers.live_watch import SseEvent, SseParser

RUNS = 10  # x (planner on Claude Code + curator on Codex) = 20 CLI processes at once
TURNS = 8


def _script(agent: str) -> list[tuple[Any, ...]]:
    steps: list[tuple[Any, ...]] = [("shell", f"echo {agent} step {n}") for n in range(TURNS)]
    return steps + [("say", f"{agent}: done.")]


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def _trees_rss_kib(pid: int) -> list[int]:
    """For each child of ``pid``: the RSS of it and all its descendants (a sandboxed CLI runs
    under bwrap's processes), from one pass over ``/proc``."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])

    def tree(root: int) -> int:
        return _rss_kib(root) + sum(tree(child) for child, parent in parents.items() if parent == root)

    return [tree(child) for child, parent in parents.items() if parent == pid]


def _listen(base_url: str, run_id: str, received: dict[str, float], stop: threading.Event, ready: threading.Event,
            open_streams: list[httpx.Response]) -> None:
    with contextlib.suppress(httpx.HTTPError):  # closed under it at the end
        _follow(base_url, run_id, received, stop, ready, open_streams)


def _follow(base_url: str, run_id: str, received: dict[str, float], stop: threading.Event, ready: threading.Event,
            open_streams: list[httpx.Response]) -> None:
    parser = SseParser()
    with httpx.Client(base_url=base_url, headers=ADMIN, timeout=None) as http, http.stream(
        "GET", "/control-plane/studio/live", params={"topic": topic_for("default", run_id)}
    ) as response:
        open_streams.append(response)
        for chunk in response.iter_raw():
            now = time.perf_counter()
            for item in parser.feed(chunk):
                if item == "subscribed":
                    ready.set()
                elif isinstance(item, SseEvent) and item.data:
                    summary = str(json.loads(item.data).get("summary", ""))
                    if summary.startswith("["):
                        received.setdefault(summary, now)
            if stop.is_set():
                return


def run(ctx: BenchContext) -> list[str]:
    del ctx  # SQLite, the embedded default
    scripts = {"planner": _script("planner"), "curator": _script("curator")}
    with scratch_sqlite("bench-agents") as database_url:
        return _measure(scripts, database_url)


def _measure(scripts: dict[str, list[tuple[Any, ...]]], database_url: str, runs: int = RUNS, **changes: Any) -> list[str]:
    """The figures of ``runs`` runs (2 CLI processes each); ``changes`` are settings (the sandbox)."""
    with ScriptedModels(scripts, narrate=True) as models, real_squad(
        database_url, models.url, local_max_processes=2 * runs, tick_seconds=0.02, **changes,
    ) as svc:
        base_url = str(svc.http.base_url).rstrip("/")
        rss_before = _rss_kib(os.getpid())
        received: dict[str, float] = {}
        stop = threading.Event()
        open_streams: list[httpx.Response] = []
        listeners = []
        run_ids = []
        started = time.perf_counter()
        for _ in range(runs):
            answer = svc.http.post("/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": "acme"})
            run_id = answer.json()["run_id"]
            ready = threading.Event()
            thread = threading.Thread(target=_listen, args=(base_url, run_id, received, stop, ready, open_streams),
                                      daemon=True)
            thread.start()
            ready.wait(30)
            listeners.append(thread)
            run_ids.append(run_id)
        for run_id in run_ids:
            launch_existing(svc, run_id)
        peak_rss, cli_rss = rss_before, []
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not all(svc.run_status(r) == "completed" for r in run_ids):
            peak_rss = max(peak_rss, _rss_kib(os.getpid()))
            kids = _trees_rss_kib(os.getpid())
            if len([k for k in kids if k]) >= len(cli_rss):
                cli_rss = [k for k in kids if k]
            time.sleep(0.2)
        elapsed = time.perf_counter() - started
        settle = time.monotonic() + 10  # the last live events on their way to the listeners
        while time.monotonic() < settle and not set(models.sent) <= set(received):
            time.sleep(0.05)
        stop.set()
        for response in open_streams:
            with contextlib.suppress(Exception):
                response.close()
        for thread in listeners:
            thread.join(5)
        samples = [(received[text] - sent) * 1000 for text, sent in models.sent.items() if text in received]
    agents = 2 * runs
    lines = [
        f"{agents} real CLI processes ({runs} Claude Code + {runs} Codex), {TURNS} narrated steps each, "
        f"all runs completed in {elapsed:.1f} s",
        f"model answer -> stream line -> office SSE: p50 {percentile(samples, 50):.1f} ms, "
        f"p99 {percentile(samples, 99):.1f} ms over {len(samples)} of {len(models.sent)} steps",
        f"plane memory: service RSS +{(peak_rss - rss_before) / 1024 / agents:.1f} MiB per agent "
        f"({rss_before / 1024:.0f} -> {peak_rss / 1024:.0f} MiB); the CLIs themselves "
        f"{(sum(cli_rss) / max(len(cli_rss), 1)) / 1024:.0f} MiB per process (peak, {len(cli_rss)} seen)",
    ]
    return lines


def launch_existing(svc: Any, run_id: str) -> None:
    """Points the run's planner at Claude Code (the curator stays on Codex), then executes it."""
    from domain.studio.squad import parse_assignment

    svc.container.studio.assignments.assign_processes(
        tenant="default", run_id=run_id, actor="bench@squadops.local", reason="bench",
        assignments=[parse_assignment("planner:claude-code-cli")],
    )
    assert svc.http.post(f"/v1/admin/studio/runs/{run_id}/execute").status_code == 202

