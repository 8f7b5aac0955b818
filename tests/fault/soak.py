"""The soak: the production topology under load through the faults, then the end checks.

``run_soak`` starts everything, always stops everything (processes, servers, temporary
directories) and answers a ``SoakReport`` whose ``render()`` prints every count.
"""

from __future__ import annotations

import json
import os
import random
import re
import resource
import shutil
import signal
import time
from collections import Counter
from dataclasses import dataclass, field

from projections.engine.runner import NotificationSource
from tests.fault import checks
from tests.fault.faults import FAULTS, FaultPlan, Faults
from tests.fault.live import LiveSubscriber
from tests.fault.load import Load, Recorder
from tests.fault.servers import Servers
from tests.fault.topology import Timeline, Topology
from workers.bootstrap import read_projectors
from workers.fanout import TRACKING_NAME
from workers.rebuild import open_parts
from workers.settings import Settings


@dataclass(frozen=True)
class SoakConfig:
    seconds: float = 0.0  # 0: one short fault cycle (the in-suite variant, ``short``)
    runs: int = 50
    tick_seconds: float = 0.5
    sse_runs: int = 3
    warmup_seconds: float = 2.0
    drain_timeout: float = 90.0
    keep_logs: str = ""  # a directory to copy the processes' logs to (they go with the temp dir)
    faults: tuple[str, ...] = FAULTS

    @classmethod
    def short(cls, **changes: object) -> SoakConfig:
        """The in-suite cycle: every fault once, at the smallest size that still shows each
        one (20 runs ticking; PostgreSQL down 3 s, three times the pools' 1 s timeout, so
        that requests meet the outage and answer 503). ``make soak`` runs the long one."""
        return cls(**{"runs": 20, "warmup_seconds": 1.0, **changes})  # type: ignore[arg-type]

    def plan(self) -> FaultPlan:
        if self.seconds:
            return FaultPlan(seconds=self.seconds, faults=self.faults)
        return FaultPlan(seconds=0, faults=self.faults, postgres_down_seconds=3.0, settle_seconds=1.0)

    @property
    def lifetime(self) -> float:
        """No client, subscriber or supervisor loop outlives this (seconds from the start)."""
        return self.seconds * 2 + 900

    @property
    def max_runs(self) -> int:
        """Finished runs are replaced to keep ``runs`` ticking, up to this many launches."""
        return self.runs + 10 + int(self.seconds / 3)


@dataclass
class SoakReport:
    config: SoakConfig
    seconds: float = 0.0
    cycles: int = 0
    checks: list[checks.Check] = field(default_factory=list)
    sections: list[tuple[str, list[str]]] = field(default_factory=list)
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and bool(self.checks) and all(c.ok for c in self.checks)

    def failed(self) -> list[str]:
        names = [c.name for c in self.checks if not c.ok]
        return ([f"harness: {self.error}"] if self.error else []) + names

    def render(self) -> str:
        out = [
            "=" * 100,
            f"soak: {self.seconds:.0f}s, {self.cycles} fault cycle(s) of {', '.join(self.config.faults) or 'no faults'}, "
            f"{self.config.runs} runs ticking every "
            f"{self.config.tick_seconds}s, 2 API processes, 2 projectors, 2 tickers, 2 fan-outs, 1 watcher",
        ]
        for title, lines in self.sections:
            out.append(f"-- {title}")
            out.extend(f"  {line}" for line in lines)
        out.append("-- end checks")
        out.extend(c.render() for c in self.checks)
        if self.error:
            out.append(f"[FAIL] harness: {self.error}")
        out.append(f"RESULT: {'PASS' if self.ok else 'FAIL: ' + '; '.join(self.failed())}")
        out.append("=" * 100)
        return "\n".join(out)


def wait_caught_up(settings: Settings, timeout: float) -> tuple[bool, int, dict[str, int]]:
    """Until every read model and the fan-out reached the log's head (bounded)."""
    app, store = open_parts(settings)
    names = [p.name for p in read_projectors()] + [TRACKING_NAME]
    try:
        source = NotificationSource(app)
        deadline = time.monotonic() + timeout
        while True:
            head = source.max_position()
            positions = store.positions()
            behind = {n: positions.get(n, 0) for n in names if positions.get(n, 0) < head}
            if not behind or time.monotonic() > deadline:
                return not behind, head, behind
            time.sleep(0.5)  # the poll interval of this bounded wait
    finally:
        store.close()
        app.close()


def answers_section(recorder: Recorder) -> list[str]:
    lines = []
    by_label: dict[str, Counter[int]] = {}
    for (label, status), n in recorder.statuses.items():
        by_label.setdefault(label, Counter())[status] += n
    for label in sorted(by_label):
        counts = "  ".join(f"{status}: {n}" for status, n in sorted(by_label[label].items()))
        lines.append(f"{label:<22} {counts}")
    phases: dict[str, Counter[int]] = {}
    for (phase, status), n in recorder.by_phase.items():
        phases.setdefault(phase, Counter())[status] += n
    lines.append("by phase the request was sent in (statuses; answers slower than 2 s, informational; slowest):")
    for phase, counts in phases.items():
        lines.append(
            f"  {phase:<28} " + "  ".join(f"{s}: {n}" for s, n in sorted(counts.items()))
            + f"  | slower than 2 s: {recorder.slow.get(phase, 0)}  slowest {recorder.slowest.get(phase, 0.0):.1f}s"
        )
    if recorder.transport_errors:
        lines.append("no answer (connection refused/reset while a process or server was down, timeouts):")
        lines.extend(f"  {n:>5} x {what}" for what, n in sorted(recorder.transport_errors.items()))
    lines.append(
        f"404 for a resource known to exist (informational, C19: never a false 404): "
        f"{sum(recorder.false_not_found.values())} {dict(recorder.false_not_found)}"
    )
    return lines


def run_soak(config: SoakConfig) -> SoakReport:
    report = SoakReport(config)
    timeline = Timeline()
    recorder = Recorder(started=timeline.started)
    servers = Servers()
    topology: Topology | None = None
    load: Load | None = None
    live: LiveSubscriber | None = None
    faults: Faults | None = None
    started = time.monotonic()
    cpu_before = _cpu()
    try:
        servers.start()
        timeline.note(f"PostgreSQL on 127.0.0.1:{servers.postgres.port}, NATS on {servers.nats.url}")
        settings = Settings(database_url=servers.database_url, nats_url=servers.nats.url)
        topology = Topology(servers, tick_seconds=config.tick_seconds, timeline=timeline, lifetime=config.lifetime)
        topology.start()
        load = Load(topology.api_urls, recorder, runs=config.runs, max_runs=config.max_runs, lifetime=config.lifetime)
        load.setup()
        timeline.note(f"{len(load.runs.ids())} runs launched and executed")
        runs, rng = load.runs, random.Random(8)
        # A long soak adds a subscriber of a live run every minute (runs end); the short
        # cycle lasts about that long, and one added as the drain begins would get nothing.
        live = LiveSubscriber(
            topology.api_urls, recorder, runs.ids()[: config.sse_runs],
            pick=(lambda: runs.pick(rng)) if config.seconds else None, lifetime=config.lifetime,
        )
        live.start()
        load.start()
        time.sleep(config.warmup_seconds)  # pacing: load and subscribers run before the first fault
        faults = Faults(topology, servers, recorder, timeline)
        report.cycles = faults.run_cycles(config.plan())

        faults.phase("drain")
        stuck = load.finish(30) + ([] if live.finish(20) else ["sse"])
        topology.stop_kinds(("ticker", "watcher"))
        caught_up, head, behind = wait_caught_up(settings, config.drain_timeout)
        timeline.note(f"log head {head}; " + ("every projector and the fan-out caught up" if caught_up else f"behind: {behind}"))
        topology.stop_kinds(("api", "projector", "fanout"))
        report.seconds = time.monotonic() - started

        facts = checks.read_log(settings)
        report.checks = [
            checks.check_read_models(settings),
            checks.check_stream(settings, facts.live),
            checks.check_commands(recorder.commands, facts.commands),
            checks.check_no_server_errors(recorder),
            checks.check_sse(live.subscriptions, facts.live),
        ]
        if not caught_up:
            report.checks.append(checks.Check(
                "projectors and fan-out caught up after the load stopped", False,
                [f"still behind the head {head} after {config.drain_timeout:.0f}s: {behind}"],
            ))
        if stuck:
            report.sections.append(("harness", [f"client threads that did not stop in time: {stuck}"]))
    except Exception as exc:
        report.error = f"{exc!r:.1000}"
    finally:
        try:
            _wind_down(report, config, recorder, load, live, topology, faults)
        finally:
            report.sections.insert(0, ("timeline", [line.strip() for line in timeline.lines()]))
            servers.close()
            report.seconds = report.seconds or time.monotonic() - started
            own, children = (after - before for after, before in zip(_cpu(), cpu_before, strict=True))
            report.sections.append(("machine", [
                f"CPU seconds: harness (clients, checks) {own:.0f}, child processes (service, NATS, pg_ctl) "
                f"{children:.0f}; PostgreSQL not counted; load average at the end {os.getloadavg()[0]:.1f} "
                f"on {os.cpu_count()} cores",
            ]))
    return report


def _wind_down(
    report: SoakReport,
    config: SoakConfig,
    recorder: Recorder,
    load: Load | None,
    live: LiveSubscriber | None,
    topology: Topology | None,
    faults: Faults | None,
) -> None:
    """Stops the clients and every process (also after a failure); adds what they tell."""
    if load is not None:
        load.finish(10)
    if live is not None:
        live.finish(10)
    report.sections.append(("answers", answers_section(recorder)))
    if topology is None:
        return
    report.sections.insert(0, ("processes", _process_lines(topology, faults)))
    topology.close()
    report.sections.append(("the processes' logs", _exceptions(topology)))
    if not report.ok:
        report.sections.append(("log tails of the processes", _tails(topology)))
    if config.keep_logs:
        shutil.copytree(topology.logs_dir(), config.keep_logs, dirs_exist_ok=True)


def _cpu() -> tuple[float, float]:
    """CPU seconds of this process (the harness) and of its ended children (the service, NATS)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _process_lines(topology: Topology, faults: Faults | None) -> list[str]:
    lines = [f"{p.name:<12} started {p.starts} time(s)" for p in topology.all()]
    lines.append(f"exited by themselves or failed to start (started again): {len(topology.exits)}")
    for exit_ in topology.exits:
        code = exit_.code
        how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        lines.append(f"  {exit_.name} {how}: {crash_summary(exit_.log_tail)}")
    cpu = "  ".join(f"{name} {seconds:.0f}s" for name, seconds in sorted(topology.cpu_seconds.items()))
    lines.append(f"CPU seconds used by the service's processes: {sum(topology.cpu_seconds.values()):.0f} ({cpu})")
    if faults is not None:
        lines.append("PostgreSQL connections of the service: " + ", ".join(f"{m}: {n}" for m, n in faults.connections))
        lines.extend(f"fault problem: {p[:120]} ... {crash_summary(p)}" for p in faults.problems)
    return lines


EXCEPTION = re.compile(r"(?<![\w.])([A-Za-z_][\w.]*(?:Error|Exception|Shutdown|Detected|Violation|Timeout))\b: ")


FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\w+)')


def crash_summary(text: str) -> str:
    """The last exception in ``text`` and the service's own frame it was raised from."""
    text = text.replace("\\n", "\n").replace('\\"', '"')  # JSON logs escape tracebacks
    exceptions = [m.group(0).rstrip(": ") for m in EXCEPTION.finditer(text)]
    frames = [m for m in FRAME.finditer(text) if "/site-packages/" not in m.group(1) and "/lib/python" not in m.group(1)]
    where = ""
    if frames:
        path, line, function = frames[-1].groups()
        where = f" in {function} ({'/'.join(path.split('/')[-2:])}:{line})"
    if not exceptions:
        last = text.strip().splitlines()[-1:] or [""]
        return last[0][:300]
    return f"{exceptions[-1]}{where}"


def _exceptions(topology: Topology) -> list[str]:
    """Per process: exception classes in its log, what it logged (warnings and errors: the
    level is ``warning``), and where each 500 (``unhandled_error``) came from."""
    lines = []
    for process in topology.all():
        path = process.log_path
        if path is None or not path.exists():
            continue
        raw = path.read_text(errors="replace")
        found = Counter(EXCEPTION.findall(raw.replace("\\n", "\n")))  # JSON logs escape tracebacks
        if found:
            lines.append(f"{process.name:<12} raised: " + ", ".join(f"{name} x{n}" for name, n in found.most_common(8)))
        events: Counter[str] = Counter()
        causes: Counter[str] = Counter()
        for line in raw.splitlines():
            if not line.startswith("{"):
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            events[str(entry.get("event", ""))] += 1
            if entry.get("event") == "unhandled_error":
                causes[f"{entry.get('path', '')}: {crash_summary(str(entry.get('exception', '')))}"] += 1
        if events:
            lines.append(f"{process.name:<12} logged: " + ", ".join(f"{name} x{n}" for name, n in events.most_common(10)))
        lines.extend(f"    500 from {cause} x{n}" for cause, n in causes.most_common(10))
    return lines


def _tails(topology: Topology) -> list[str]:
    lines = []
    for name, tail in topology.log_tails().items():
        lines.append(f"[{name}]")
        lines.extend(f"  {line[:300]}" for line in tail.strip().splitlines()[-5:])
    return lines
