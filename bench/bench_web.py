"""The pages' first paint in headless Chromium (target < 1 s each): the office of a 50-agent
run, a pull request page with a 2,000-line diff, and an agent transcript of 1,000 events."""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Browser, sync_playwright

from bench.journey_pages import journey_data
from tests.conftest import ADMIN
from tests.e2e.browser import chromium_path
from tests.e2e.test_web_pages import FIRST_AGENT_PAINT, crowded_run
from tests.live_helpers import served_process

LOADS = 7

# When the element named ``identifier`` (Element Timing) was first painted, from navigation start.
FIRST_PAINT_OF = """
(identifier) => new Promise((resolve) => {
  new PerformanceObserver((list) => {
    const times = list.getEntries().filter((e) => e.identifier === identifier).map((e) => e.renderTime || e.loadTime);
    if (times.length) resolve(Math.min(...times));
  }).observe({ type: 'element', buffered: true });
  setTimeout(() => resolve(-1), 5000);
})
"""
LOADED = "() => performance.getEntriesByType('navigation')[0].loadEventEnd"


def loads(browser: Browser, address: str, ready: str, measure: Any) -> tuple[list[float], list[float]]:
    """First paints (``measure``) and load ends of LOADS fresh loads of ``address``."""
    paints: list[float] = []
    ends: list[float] = []
    for _ in range(LOADS):
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, extra_http_headers=ADMIN)
        page = context.new_page()
        page.goto(address)
        page.wait_for_selector(ready)
        paints.append(measure(page))
        page.wait_for_load_state("load")
        ends.append(page.evaluate(LOADED))
        context.close()
    return paints, ends


def line(what: str, paints: list[float], ends: list[float] | None = None) -> str:
    warm = sorted(paints[1:])
    text = f"{what}: cold {paints[0]:.0f} ms, warm median {statistics.median(warm):.0f} ms, worst {warm[-1]:.0f} ms"
    if ends:
        text += f" (page loaded: median {statistics.median(sorted(ends[1:])):.0f} ms)"
    return text + " (target < 1000 ms)"


def run(ctx: object) -> list[str]:
    found: list[str] = []
    with tempfile.TemporaryDirectory() as scratch, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            settings, run_id = crowded_run(Path(scratch) / "crowd" / "squadops.db")
            with served_process(settings, workers="projector,fanout") as url:
                paints, _ = loads(browser, f"{url}/runs/{run_id}", "[data-agent-id]", lambda page: page.evaluate(FIRST_AGENT_PAINT))
                found.append(line("first agent painted, 50-agent office", paints))

            settings, run_id, author = journey_data(Path(scratch) / "journey")
            with served_process(settings, workers="projector,fanout") as url:
                (pull,) = httpx.get(f"{url}/v1/project-factory/projects/shop/pulls", headers=ADMIN, timeout=30).json()["items"]
                address = f"{url}/projects/shop/pulls/{pull['number']}"
                size = httpx.get(address, headers=ADMIN, timeout=30).text.count('<div class="ln ')
                # A line in view (a hunk's rows, not those of a closed fold).
                paints, ends = loads(browser, address, "#diff .hunk > .ln", lambda page: page.evaluate(FIRST_PAINT_OF, "diff"))
                found.append(line(f"first diff painted, pull request of {size} diff lines", paints, ends))
                address = f"{url}/runs/{run_id}/agents/{author}"
                entries = httpx.get(address, headers=ADMIN, timeout=30).text.count('<li class="entry"')
                paints, ends = loads(browser, address, "#entries .entry", lambda page: page.evaluate(FIRST_PAINT_OF, "entry"))
                found.append(line(f"first entry painted, transcript of {entries} entries", paints, ends))
        finally:
            browser.close()
    return found
