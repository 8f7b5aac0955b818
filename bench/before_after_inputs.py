"""The inputs of ``bench_before_after``, written by the code of the "before" commit.

Run by path, with ``PYTHONPATH`` and the working directory at a checkout of that commit
(``bench_before_after`` does): every version is then measured over the same event log, in
the stored format of the start of the redesign, which the "after" code must read as it is
(its upcasting included). Prints one JSON line.

- ``feed URL RUNS MIN_EVENTS``: the feed's store (``bench.bench_feed.generate`` of that
  commit: templates simulated to completion, copied under new run ids, one 50-agent run);
- ``backlog URL COUNT``: a run and ``COUNT`` live events for the fan-out to relay;
- ``lag URL API_URL SECONDS RATE``: appends session lines at ``RATE`` events/s while a
  probe line is appended now and then and waited for in the feed served at ``API_URL``
  (another process, the version measured, whose projector follows ``URL``).
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    del sys.path[0]  # this file's folder (bench/ of the harness): the checkout's packages only

import json  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402

from workers.bootstrap import build  # noqa: E402
from workers.settings import Settings  # noqa: E402

ADMIN = {"x-edge-claim-email": "bench@example.com", "x-edge-claim-groups": "/org/platform/roles/super_admin"}
TENANT = "default"
ACTOR = "bench@example.com"


def feed(url: str, runs: int, min_events: int) -> dict[str, object]:
    from bench import bench_feed

    bench_feed.RUNS, bench_feed.MIN_EVENTS = runs, min_events
    bench_feed.TEMPLATES = min(bench_feed.TEMPLATES, max(1, runs // 10))
    container = build(Settings(database_url=url, log_level="warning"))
    try:
        target, events, seconds, stored_runs = bench_feed.generate(container)
    finally:
        container.close()
    return {"run_id": target, "events": events, "runs": stored_runs, "seconds": seconds}


def backlog(url: str, count: int) -> dict[str, object]:
    from bench import bench_live

    container = build(Settings(database_url=url, log_level="warning"))
    try:
        run_id = bench_live.launch(container)
        messages = bench_live.backlog(container, run_id, count)
        return {"run_id": run_id, "live": len(messages), "events": container.event_store.max_position()}
    finally:
        container.close()


def lag(url: str, api_url: str, seconds: float, rate: float) -> dict[str, object]:
    from bench.scale_support import project
    from domain.shared.ids import session_key

    app = build(Settings(database_url=url, log_level="warning"))
    launch = lambda slug: app.studio.runs.launch_run(  # noqa: E731
        tenant=TENANT, template_id="delivery-core", project_slug=slug, launched_by=ACTOR
    )[0]
    try:
        app.projects.create_project(tenant=TENANT, request=project("fleet", 12), created_by=ACTOR)
        app.projects.create_project(tenant=TENANT, request=project("bench", 12), created_by=ACTOR)
        writers = [launch("fleet") for _ in range(20)]
        sessions = [
            app.event_store.repository.get(session_key(TENANT, r.run_id, sid, agent))
            for r in writers
            for agent, sid in r.sessions.items()
        ]
        probe_run = launch("bench")
        agent, sid = next(iter(probe_run.sessions.items()))
        probe = app.event_store.repository.get(session_key(TENANT, probe_run.run_id, sid, agent))
        path = f"/control-plane/studio/observability-feed?project_slug=bench&run_id={probe_run.run_id}"
        with httpx.Client(base_url=api_url, headers=ADMIN, timeout=30) as http:
            head = app.event_store.max_position()
            deadline = time.monotonic() + 120
            while not _shows(http, path, head):  # the version's projector caught up with the launches
                if time.monotonic() > deadline:
                    raise RuntimeError("the read models did not catch up with the launches")
                time.sleep(0.05)  # the poll interval of this bounded wait
            samples, achieved = lag_samples(app, sessions, probe, rate, seconds, lambda position: _shows(http, path, position))
        return {"samples": samples, "rate": achieved}
    finally:
        app.close()


def lag_samples(
    app: Any, sessions: list[Any], probe: Any, rate: float, seconds: float, shows: Callable[[int], bool]
) -> tuple[list[float], float]:
    """For ``seconds``, while ``sessions`` say lines at ``rate`` events/s: a ``probe`` line
    now and then, and the seconds until ``shows`` its position (bounded). Answers the
    samples and the rate achieved (also bench_feed's projection lag)."""
    stop, appended = threading.Event(), [0]
    thread = threading.Thread(target=say_at_rate, args=(app, sessions, rate, stop, appended), daemon=True)
    thread.start()
    samples: list[float] = []
    started = time.perf_counter()
    try:
        while time.perf_counter() - started < seconds:
            probe.say("probe", app.clock())
            app.event_store.save(probe)
            t0 = time.perf_counter()
            position = app.event_store.last_saved_position()
            while not shows(position):
                if time.perf_counter() - t0 > 30:
                    raise RuntimeError(f"position {position} not shown within 30 s")
                time.sleep(0.002)  # the poll interval of this bounded wait
            samples.append(time.perf_counter() - t0)
            time.sleep(0.03)  # pacing: probes spaced out
    finally:
        stop.set()
        thread.join()
    return samples, appended[0] / (time.perf_counter() - started)


def say_at_rate(app: Any, sessions: list[Any], rate: float, stop: threading.Event, appended: list[int]) -> None:
    """Session lines at ``rate`` events/s, 20 a save, until ``stop``; counts them in
    ``appended[0]`` (also bench_feed's projection lag load)."""
    per_save = 20
    next_at = time.perf_counter()
    while not stop.is_set():
        at = app.clock()
        touched = []
        for i in range(per_save):
            session = sessions[(appended[0] + i) % len(sessions)]
            session.say("bench load", at)
            touched.append(session)
        app.event_store.save(*{id(a): a for a in touched}.values())
        appended[0] += per_save
        next_at += per_save / rate
        delay = next_at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)  # pacing: the append rate


def _shows(http: httpx.Client, path: str, position: int) -> bool:
    """Whether the feed's newest live event is at ``position`` or later."""
    answer = http.get(path)
    if answer.status_code != 200:
        return False
    events = answer.json().get("live_events") or []
    return bool(events) and int(events[0]["event_id"]) >= position


def main(argv: list[str]) -> None:
    command, url, *rest = argv
    if command == "feed":
        result = feed(url, int(rest[0]), int(rest[1]))
    elif command == "backlog":
        result = backlog(url, int(rest[0]))
    elif command == "lag":
        result = lag(url, rest[0], float(rest[1]), float(rest[2]))
    else:
        raise SystemExit(f"unknown input: {command}")
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
