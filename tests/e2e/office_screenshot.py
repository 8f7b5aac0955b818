"""Draws ``docs/office.png``: a running office with a blocked agent's panel open.

    .venv/bin/python -m tests.e2e.office_screenshot docs/office.png

A demo-like run is driven by the simulator (a seed where one delivery lane stalls at its
first tool) to the middle of its delivery, served by ``squadops serve`` in its own
process, and photographed by the system chromium.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

from domain.studio.commands.runs import run_seed
from tests.conftest import ADMIN, settings_for
from tests.e2e.browser import chromium_path
from tests.live_helpers import served_process
from workers.bootstrap import build
from workers.cli import DEMO_PROJECT
from workers.planes.simulator import FaultRates, Faults, SimulatorPlane

TICKS = 20


def main(target: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings = settings_for(f"sqlite:///{Path(tmp) / 'squadops.db'}", auto_recovery=False)
        c = build(settings)
        try:
            c.start(("projector",))
            c.projects.create_project(tenant="default", request=DEMO_PROJECT, created_by="operator@squadops.local")
            rates = FaultRates.none(first_tool_stall=0.2)
            faults = Faults(rates)
            for _ in range(300):
                run, _ = c.studio.runs.launch_run(
                    tenant="default", template_id="delivery-core", project_slug="demo", launched_by="operator@squadops.local"
                )
                seed = run_seed(run.run_id)
                stalls = {a: faults.stalls_first_tool(seed, a, 1) for a in ("planner", "curator", "backend", "frontend", "contract")}
                if stalls["contract"] and not any(v for k, v in stalls.items() if k != "contract"):
                    break
            c.studio.runs.request_execution(tenant="default", run_id=run.run_id, requested_by="operator@squadops.local")
            plane = SimulatorPlane(faults=rates)
            c.studio.ticks.tick_runs(plane, start=[("default", run.run_id)])
            for _ in range(TICKS):
                c.studio.ticks.tick_runs(plane, tick=[("default", run.run_id)])
            c.await_reads(c.event_store.max_position(), c.settings.min_position_wait_seconds)
        finally:
            c.close()
        with served_process(settings, workers="projector,fanout") as url, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path())
            page = browser.new_page(viewport={"width": 1440, "height": 1000}, extra_http_headers=ADMIN)
            page.goto(f"{url}/runs/{run.run_id}")
            page.locator('#office[data-live="open"]').wait_for()
            blocked = page.locator('[data-pixel-state="blocked"]').first
            (blocked if blocked.count() else page.locator("[data-agent-id]").first).click()
            page.locator("[data-panel]").wait_for()
            time.sleep(1.0)  # pacing: the sprites settle into their animation before the picture
            page.screenshot(path=target, full_page=False)
            browser.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/office.png")
