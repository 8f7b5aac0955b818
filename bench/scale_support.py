"""What the scale benchmarks share: sizes (full or quick), a log that grows on demand, RSS.

``SQUADOPS_BENCH_QUICK=1`` shrinks every size for development; ``make bench`` runs the
full ones. ``SQUADOPS_BENCH_REBUILD_SIZES`` (comma list of event counts) overrides the
rebuild sizes alone.

The log grows like bench_feed's: a few template runs of a real project are simulated
to completion through the domain, then their events are copied under new run ids
straight through the event recorder (the same events the domain would append, without
paying the simulation again for every copy).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from eventsourcing.persistence import StoredEvent

from domain.studio.control import ControlIntent
from workers.bootstrap import Container
from workers.planes.simulator import SimulatorPlane

TENANT = "default"
ACTOR = "bench@example.com"
QUICK = os.environ.get("SQUADOPS_BENCH_QUICK", "") not in ("", "0", "false", "no")


def sizes(name: str, full: tuple[int, ...], quick: tuple[int, ...]) -> tuple[int, ...]:
    raw = os.environ.get(name, "")
    if raw.strip():
        return tuple(int(x) for x in raw.split(",") if x.strip())
    return quick if QUICK else full


def project(slug: str, suits: int) -> dict[str, Any]:
    return {
        "project_key": slug,
        "proposal_id": "proposal-bench",
        "repository_bindings": [
            {"repository_key": "assembly", "vcs_repo_slug": f"{slug}/assembly", "repository_type": "assembly"},
            {"repository_key": "backend", "vcs_repo_slug": f"{slug}/api"},
            {"repository_key": "frontend", "vcs_repo_slug": f"{slug}/web"},
            {"repository_key": "contract", "vcs_repo_slug": f"{slug}/contract"},
        ],
        "project_assembly": {
            "agentSquadSuitTesterRoles": [f"suit{i}" for i in range(suits)],
            "sourceRefRepos": [{"slug": f"{slug}/design", "branch": "main"}],
        },
    }


def launch(app: Container, slug: str) -> str:
    return app.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug=slug, launched_by=ACTOR)[0].run_id


def simulate(app: Container, run_ids: list[str], *, ticks: int, until_agents: int = 0) -> None:
    """Ticks runs through the simulator (the operator replays blockers now and then),
    until they end, or until the first has ``until_agents`` sessions."""
    plane = SimulatorPlane()
    for run_id in run_ids:
        app.studio.runs.request_execution(tenant=TENANT, run_id=run_id, requested_by=ACTOR)
    app.studio.ticks.tick_runs(plane, start=[(TENANT, r) for r in run_ids])
    live = list(run_ids)
    for i in range(ticks):
        if until_agents and len(app.studio.runs.get_run(TENANT, run_ids[0]).sessions) >= until_agents:
            return
        if i % 10 == 0:
            live = [r for r in run_ids if app.studio.runs.get_run(TENANT, r).status == "running"]
            if not live:
                return
        app.studio.ticks.tick_runs(plane, tick=[(TENANT, r) for r in live])
        if i % 15 == 14:
            for run_id in live:
                try:
                    app.studio.control.control_run(
                        tenant=TENANT, run_id=run_id, intent=ControlIntent(verb="replay_blockers"), actor=ACTOR
                    )
                except Exception:  # an ended run takes no verb; the next pass forgets it
                    continue


class GrowingLog:
    """Copies of simulated template runs, appended until the log holds enough events."""

    def __init__(self, app: Container, *, templates: int = 4, suits: int = 8) -> None:
        self.app = app
        app.projects.create_project(tenant=TENANT, request=project("fleet", suits), created_by=ACTOR)
        self.templates = [launch(app, "fleet") for _ in range(templates)]
        simulate(app, self.templates, ticks=800)
        recorder = app.event_store.recorder
        notes = recorder.select_notifications(start=1, limit=10**7)
        self.by_run: dict[str, list[Any]] = {r: [] for r in self.templates}
        for note in notes:
            for run_id in self.templates:
                if run_id in note.originator_id:
                    self.by_run[run_id].append(note)
                    break
        self.copies = 0

    def events_per_copy(self) -> float:
        return sum(len(v) for v in self.by_run.values()) / len(self.by_run)

    def copy_events(self) -> list[StoredEvent]:
        """One more run: a template's events under a new run id."""
        source = self.templates[self.copies % len(self.templates)]
        clone = f"run-scale{self.copies:07d}"
        self.copies += 1
        old, new = source.encode(), clone.encode()
        return [
            StoredEvent(
                originator_id=n.originator_id.replace(source, clone),
                originator_version=n.originator_version,
                topic=n.topic,
                state=n.state.replace(old, new),
            )
            for n in self.by_run[source]
        ]

    def grow_to(self, events: int) -> float:
        """Appends copies until the log holds ``events``; answers the seconds it took."""
        started, recorder = time.perf_counter(), self.app.event_store.recorder
        head = self.app.event_store.max_position()
        batch: list[StoredEvent] = []
        while head + len(batch) < events:
            batch.extend(self.copy_events())
            if len(batch) >= 5_000:
                recorder.insert_events(batch)
                head, batch = head + len(batch), []
        if batch:
            recorder.insert_events(batch)
        return time.perf_counter() - started


def rss_mb(pid: int) -> float:
    """Resident set size of a process (``VmRSS``), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def caught_up(app: Container, timeout: float) -> bool:
    """Waits until the stored positions of every read model reach the log's head."""
    return app.runner.wait_for(app.event_store.max_position(), timeout)


def ratio_line(label: str, unit: str, points: list[tuple[int, float]], fmt: str = "{:.2f}") -> str:
    """``label`` at each size, and the ratio between the ends (last / first)."""
    shown = ", ".join(f"{n:,}: {fmt.format(v)} {unit}" for n, v in points)
    first, last = points[0][1], points[-1][1]
    ratio = last / first if first else float("inf")
    return f"{label}: {shown}; ratio last/first {ratio:.2f} (x{points[-1][0] / points[0][0]:.0f} the size)"
