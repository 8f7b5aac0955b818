"""The faults, in sequence: kill -9 of one process of each kind (each started again after),
PostgreSQL stopped for 10 s (``FaultPlan.postgres_down_seconds``) and started again, NATS stopped and started again.

``run_cycles`` repeats the sequence until the soak's time is spent (at least once, at
most ``max_cycles``), with load running throughout; the recorder's phase names what the
clients' answers happened during.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from tests.fault.load import Recorder
from tests.fault.servers import Servers
from tests.fault.topology import KINDS, Timeline, Topology

FAULTS = ("kill", "postgres", "nats")


@dataclass(frozen=True)
class FaultPlan:
    seconds: float  # the soak's length: cycles are repeated until it is spent
    postgres_down_seconds: float = 10.0
    nats_down_seconds: float = 3.0
    kill_down_seconds: float = 0.5
    settle_seconds: float = 2.0  # load without a fault between two faults
    max_cycles: int = 1000
    together: bool = True  # the first cycle kills one of each kind at once; later ones alternate
    faults: tuple[str, ...] = FAULTS  # a subset to tell which fault a failure comes from


class Faults:
    def __init__(self, topology: Topology, servers: Servers, recorder: Recorder, timeline: Timeline) -> None:
        self.topology = topology
        self.servers = servers
        self.recorder = recorder
        self.timeline = timeline
        self.connections: list[tuple[str, int]] = []  # (moment, PostgreSQL connections of the service)
        self.problems: list[str] = []  # faults the harness could not inject or recover from

    def phase(self, name: str) -> None:
        self.recorder.set_phase(name)
        self.timeline.note(f"phase: {name}")

    def settle(self, seconds: float) -> None:
        time.sleep(seconds)  # pacing: load runs this long between faults

    def run_cycles(self, plan: FaultPlan) -> int:
        """At least one cycle; another only while one more (as long as the longest so far)
        fits in the time left; the rest of the time is steady load."""
        deadline = time.monotonic() + plan.seconds
        longest = 0.0
        cycles = 0
        for cycle in range(plan.max_cycles):
            began = time.monotonic()
            self.one_cycle(plan, cycle, together=plan.together if cycle % 2 == 0 else not plan.together)
            cycles += 1
            longest = max(longest, time.monotonic() - began)
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.phase(f"steady (cycle {cycle + 1})")
            self.settle(min(left, 30.0) if left > 30.0 + longest else left)
            if time.monotonic() >= deadline:
                break
        return cycles

    def one_cycle(self, plan: FaultPlan, cycle: int, together: bool) -> None:
        self.sample_connections(f"cycle {cycle + 1} start")
        if "kill" in plan.faults:
            if together:
                self.kill_each_kind_at_once(plan, cycle)
            else:
                for kind in KINDS:
                    self.kill_one(kind, cycle, plan)
            self.settle(plan.settle_seconds)
        if "postgres" in plan.faults:
            self.postgres_outage(plan)
            self.settle(plan.settle_seconds)
        if "nats" in plan.faults:
            self.nats_outage(plan)
            self.settle(plan.settle_seconds)
        if not plan.faults:
            self.phase("no faults")
            self.settle(20.0)

    # -- kill -9 ------------------------------------------------------------------------------

    def kill_one(self, kind: str, cycle: int, plan: FaultPlan) -> None:
        self.phase(f"kill -9 {kind}")
        try:
            self.topology.kill_and_restart(kind, cycle, plan.kill_down_seconds, _sleep)
        except Exception as exc:  # the supervisor starts it again; the report says so
            self.problems.append(f"restart after kill -9 of a {kind}: {exc!r:.300}")
            self.timeline.note(f"restart of a {kind} failed: {exc!r:.200}")
        self.settle(1.0)

    def kill_each_kind_at_once(self, plan: FaultPlan, cycle: int) -> None:
        self.phase("kill -9 one of each kind")
        threads = [
            threading.Thread(target=self._kill_quietly, args=(kind, cycle, plan), name=f"kill-{kind}")
            for kind in KINDS
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(150)
        self.settle(1.0)

    def _kill_quietly(self, kind: str, cycle: int, plan: FaultPlan) -> None:
        try:
            self.topology.kill_and_restart(kind, cycle, plan.kill_down_seconds, _sleep)
        except Exception as exc:
            self.problems.append(f"restart after kill -9 of a {kind}: {exc!r:.300}")

    # -- PostgreSQL ---------------------------------------------------------------------------

    def postgres_outage(self, plan: FaultPlan) -> None:
        self.phase("postgres down")
        try:
            self.servers.postgres.stop("fast")
        except Exception as exc:
            self.problems.append(f"PostgreSQL did not stop: {exc!r:.300}")
            return
        self.timeline.note("PostgreSQL stopped")
        time.sleep(plan.postgres_down_seconds)  # pacing: the outage lasts this long
        try:
            self.servers.postgres.start()
        except Exception as exc:
            self.problems.append(f"PostgreSQL did not start again: {exc!r:.300}")
            raise
        self.phase("postgres back")
        self.timeline.note("PostgreSQL started again")
        if not self.topology.wait_apis_healthy(60):
            self.problems.append("the API processes did not answer /healthz 200 within 60 s of PostgreSQL's return")
        self.sample_connections("after the PostgreSQL outage")

    # -- NATS ---------------------------------------------------------------------------------

    def nats_outage(self, plan: FaultPlan) -> None:
        self.phase("nats down")
        try:
            self.servers.nats.stop()
        except Exception as exc:
            self.problems.append(f"NATS did not stop: {exc!r:.300}")
            return
        self.timeline.note("NATS stopped")
        time.sleep(plan.nats_down_seconds)  # pacing: the outage lasts this long
        self.servers.nats.start()
        self.phase("nats back")
        self.timeline.note("NATS started again")

    def sample_connections(self, moment: str) -> None:
        try:
            self.connections.append((moment, self.servers.postgres.connections("squadops")))
        except Exception as exc:
            self.connections.append((f"{moment} (unreadable: {type(exc).__name__})", -1))


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)  # pacing: a phase of the scenario lasts this long
    return True
