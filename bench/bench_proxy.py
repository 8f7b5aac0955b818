"""Model proxy: first-byte latency it adds (target p99 < 5 ms) and streamed throughput (target >= 0.9 of direct).

Side by side in one run, against one scripted Anthropic Messages upstream in its own
process (``bench.model_upstream``): the same request straight to the upstream, and through
``squadops serve`` (its own process, PostgreSQL, its projector another process) at ``/v1/model-proxy/v1/messages`` under
an agent's proxy token, alternating. First byte: the time until the first body bytes of a
short streamed answer arrive. Throughput: a long streamed answer (``LONG_DELTAS`` deltas of
1 KiB, about 64 MiB) read whole, in MiB/s, and each round's ratio to the round's direct answer; alternating with those two, the same answer through a relay
with no framework (``bench.bare_relay``), the ceiling of a Python relay on this machine.
Beside each rate, the CPU time each process spent per MiB (the client, the upstream, the
relay): on 2 cores, three busy processes share what two had straight to the upstream.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench.context import BenchContext, percentile
from domain.workspaces import proxy_tokens
from tests import infra
from tests.conftest import ADMIN, settings_for
from tests.helpers import eventually
from tests.integration.local_support import PROJECT, STUDIO
from tests.live_helpers import service_process
from tests.processes import ServiceProcess, service_env

KEY = "bench-proxy-signing-key-0123456789abcdef"
FIRST_BYTE_ROUNDS = int(os.environ.get("BENCH_PROXY_ROUNDS", "400"))
# About 64 MiB of SSE per answer, 15 of each: an answer of 16 MiB streams in ~15 ms, where
# one scheduling hiccup of three processes on two cores moved a 5-answer ratio by 0.3.
LONG_DELTAS = 64 * 1024
THROUGHPUT_ROUNDS = 15


@contextlib.contextmanager
def serving(module: str, *args: str) -> Iterator[tuple[str, int]]:
    """``python -m module <port> *args`` until it answers a model request: (its URL, its pid)."""
    port = infra.free_port()
    process = subprocess.Popen([sys.executable, "-m", module, str(port), *args])
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 15
        while True:
            try:
                httpx.post(f"{url}/v1/messages", json={"max_tokens": 1}, timeout=2)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)  # polling the port until it listens
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(10)


def first_byte(http: httpx.Client, url: str, headers: dict[str, str], body: dict[str, Any]) -> float:
    started, elapsed = time.perf_counter(), 0.0
    with http.stream("POST", url, json=body, headers=headers) as answer:
        for _ in answer.iter_raw():
            elapsed = elapsed or time.perf_counter() - started
    return elapsed * 1000


def streamed(http: httpx.Client, url: str, headers: dict[str, str], body: dict[str, Any]) -> float:
    return streamed_size(http, url, headers, body)[0]


def streamed_size(http: httpx.Client, url: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[float, float]:
    """(MiB/s, MiB) of one long answer read whole."""
    started, size = time.perf_counter(), 0
    with http.stream("POST", url, json=body, headers=headers) as answer:
        assert answer.status_code == 200, answer.read()
        for chunk in answer.iter_raw():
            size += len(chunk)
    return size / (1 << 20) / (time.perf_counter() - started), size / (1 << 20)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Costs:
    """CPU milliseconds per MiB streamed, per process, for one way of reaching the upstream."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids, self.spent, self.mib = pids, dict.fromkeys(["client", *pids], 0.0), 0.0

    def measure(self, stream: Any) -> float:
        before = {"client": time.process_time(), **{n: cpu_seconds(p) for n, p in self.pids.items()}}
        rate, mib = stream()
        after = {"client": time.process_time(), **{n: cpu_seconds(p) for n, p in self.pids.items()}}
        for name in self.spent:
            self.spent[name] += after[name] - before[name]
        self.mib += mib
        return float(rate)

    def line(self) -> str:
        return ", ".join(f"{name} {seconds * 1000 / self.mib:.2f}" for name, seconds in self.spent.items())


def run(ctx: BenchContext) -> list[str]:
    with serving("bench.model_upstream") as (models, upstream_pid), ctx.postgres() as database, \
            serving("bench.bare_relay", models.rsplit(":", 1)[1]) as (bare_url, bare_pid):
        settings = settings_for(database)
        env = {"SQUADOPS_UPSTREAM_ANTHROPIC_URL": models, "SQUADOPS_UPSTREAM_ANTHROPIC_KEY": "bench-upstream-key",
               "SQUADOPS_MCP_TOKEN_KEY": KEY, "SQUADOPS_RATE_LIMIT_PER_MINUTE": "0"}
        # As production runs it: the API process (the proxy and its meter's appends) and the
        # read models' projector in a process of its own.
        projector = ServiceProcess.worker("projector", service_env(settings, **env), "projector").start()
        with contextlib.closing(projector), service_process(settings, workers="none", **env) as service, \
                httpx.Client(timeout=60) as http:
            assert http.post(f"{service.url}/v1/project-factory/projects", json=PROJECT, headers=ADMIN).status_code == 201
            run_id = http.post(f"{service.url}{STUDIO}/runs", headers=ADMIN,
                               json={"template_id": "delivery-core", "project_slug": "acme"}).json()["run_id"]
            # The run readable (its projector, another process, may start slowly on a busy machine).
            eventually(lambda: http.get(f"{service.url}{STUDIO}/runs/{run_id}", headers=ADMIN).status_code == 200, timeout=90)
            token = proxy_tokens.sign(KEY, proxy_tokens.ProxyCaller("default", "acme", run_id, "ses-bench", "planner"),
                                      int(time.time() + 3600))
            direct, proxied = f"{models}/v1/messages", f"{service.url}/v1/model-proxy/v1/messages"
            auth = {"authorization": f"Bearer {token}"}
            short = {"model": "model-proxy claude-code-cli alias", "max_tokens": 3, "stream": True,
                     "messages": [{"role": "user", "content": "hello"}]}
            for _ in range(20):  # warm both paths (connections, caches)
                first_byte(http, direct, {}, short)
                first_byte(http, proxied, auth, short)
            straight, through = [], []
            for _ in range(FIRST_BYTE_ROUNDS):
                straight.append(first_byte(http, direct, {}, short))
                through.append(first_byte(http, proxied, auth, short))
            long = {**short, "max_tokens": LONG_DELTAS}
            bare = f"{bare_url}/v1/messages"
            assert service.process is not None
            costs = {"direct": Costs({"upstream": upstream_pid}),
                     "proxy": Costs({"upstream": upstream_pid, "relay": service.process.pid}),
                     "bare": Costs({"upstream": upstream_pid, "relay": bare_pid})}
            for url, headers in ((direct, {}), (proxied, auth), (bare, {})):
                streamed(http, url, headers, long)  # warm each way
            rates_direct, rates_proxy, rates_bare = [], [], []
            for _ in range(THROUGHPUT_ROUNDS):
                rates_direct.append(costs["direct"].measure(lambda: streamed_size(http, direct, {}, long)))
                rates_proxy.append(costs["proxy"].measure(lambda: streamed_size(http, proxied, auth, long)))
                rates_bare.append(costs["bare"].measure(lambda: streamed_size(http, bare, {}, long)))
    added = [p - d for p, d in zip(through, straight, strict=True)]
    ratio = statistics.median(rates_proxy) / statistics.median(rates_direct)
    paired = sorted(p / d for p, d in zip(rates_proxy, rates_direct, strict=True))  # each round's own ratio
    paired_bare = sorted(b / d for b, d in zip(rates_bare, rates_direct, strict=True))
    return [
        f"first byte, direct: p50 {percentile(straight, 50):.2f} ms, p99 {percentile(straight, 99):.2f} ms; "
        f"through the proxy: p50 {percentile(through, 50):.2f} ms, p99 {percentile(through, 99):.2f} ms",
        f"first byte added by the proxy: p50 {percentile(through, 50) - percentile(straight, 50):.2f} ms, "
        f"p99 {percentile(through, 99) - percentile(straight, 99):.2f} ms (paired: p50 {percentile(added, 50):.2f}, "
        f"p99 {percentile(added, 99):.2f}) (target p99 < 5 ms; {FIRST_BYTE_ROUNDS} requests each)",
        f"streamed throughput: direct {statistics.median(rates_direct):.0f} MiB/s, through the proxy "
        f"{statistics.median(rates_proxy):.0f} MiB/s: {ratio:.2f} of direct (target >= 0.9; "
        f"{THROUGHPUT_ROUNDS} answers of {LONG_DELTAS} KiB each; each round's ratio: median "
        f"{statistics.median(paired):.2f}, from {paired[0]:.2f} to {paired[-1]:.2f})",
        f"a relay with no framework (bench.bare_relay), same run: {statistics.median(rates_bare):.0f} MiB/s: "
        f"{statistics.median(rates_bare) / statistics.median(rates_direct):.2f} of direct (each round's: median "
        f"{statistics.median(paired_bare):.2f}, from {paired_bare[0]:.2f} to {paired_bare[-1]:.2f})",
        f"CPU ms per MiB: direct ({costs['direct'].line()}); through the proxy ({costs['proxy'].line()}); "
        f"no framework ({costs['bare'].line()}); load average {os.getloadavg()[0]:.1f}",
    ]
