"""What the browser tests share: Debian's chromium under Playwright, the dev edge proxy
on a real server, and the checks a page must pass (contrast, focus)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, Playwright, sync_playwright

from tests import infra
from workers.cli import OPERATOR, SUPER_ADMIN

ROOT = Path(__file__).resolve().parents[2]

CHROMIUM_PATHS = ("chromium", "/usr/bin/chromium")


def chromium_path() -> str:
    """The system chromium (Debian's package, installed by ``make test``); never a download."""
    for name in CHROMIUM_PATHS:
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("chromium is not installed: `make test` installs it (apt-get install -y chromium)")


class Chromium:
    """Debian's chromium under Playwright, started on first use."""

    def __init__(self) -> None:
        self.playwright: Playwright | None = None
        self.browser: Browser | None = None

    def get(self) -> Browser:
        if self.browser is None:
            self.playwright = sync_playwright().start()
            self.browser = self.playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        return self.browser

    def close(self) -> None:
        if self.browser is not None:
            self.browser.close()
            self.browser = None
        if self.playwright is not None:
            self.playwright.stop()
            self.playwright = None


CHROMIUM = Chromium()


@pytest.fixture
def browser() -> Browser:
    """The worker's chromium (started on first use; tests/e2e/conftest.py stops it after the
    last browser test of a stretch); each test opens its own context with ``opened``."""
    return CHROMIUM.get()


@contextmanager
def opened(browser: Browser, **options: Any) -> Iterator[Page]:
    """A fresh page (own context: no cookies, no headers but those of the proxy)."""
    # Playwright polls a ``wait_for_function`` predicate with eval inside the page, which the
    # pages' own CSP (script-src 'self', asserted over HTTP in test_web_http) refuses once
    # the predicate is not true at the first look: the tests' probes bypass it.
    options.setdefault("bypass_csp", True)
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, **options)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.errors = errors  # type: ignore[attr-defined]
    try:
        yield page
    finally:
        context.close()
    assert errors == [], f"script errors on the page: {errors}"


class ProxyServer:
    """``squadops open --no-browser`` in a subprocess: the dev edge proxy, restartable on
    its port (a process that ends drops its connections, as a real outage does)."""

    def __init__(self, upstream: str, email: str = OPERATOR, groups: str = SUPER_ADMIN) -> None:
        self.upstream = upstream
        self.email = email
        self.groups = groups
        self.port = infra.free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ProxyServer:
        env = {k: v for k, v in os.environ.items() if k != "SQUADOPS_EDGE_JWT_KEY"}
        command = [
            sys.executable, "-m", "workers.cli", "open", "--no-browser", "--port", str(self.port),
            "--upstream", self.upstream, "--email", self.email, "--groups", self.groups,
        ]
        self.process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("squadops open did not start")
            time.sleep(0.05)  # the poll interval of this bounded wait

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def __enter__(self) -> ProxyServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# Every visible text of the page against its effective background (WCAG 2.x contrast);
# answers the failures: large text (>= 24px, or >= 18.66px bold) needs 3, the rest 4.5.
CONTRAST_JS = """
() => {
  const parse = (c) => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
    const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const lum = ([r, g, b]) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const over = (top, bottom) => [0, 1, 2].map((i) => top[i] * top[3] + bottom[i] * (1 - top[3])).concat(1);
  const background = (el) => { const layers = [];
    for (let e = el; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; } }
    let color = [255, 255, 255, 1]; for (const layer of layers.reverse()) color = over(layer, color); return color; };
  const failures = []; const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.textContent.trim()) continue; const el = node.parentElement;
    if (!el || el.closest('.sr-only, [hidden], script, option') || !el.getClientRects().length) continue;
    const style = getComputedStyle(el); if (style.visibility === 'hidden') continue;
    const bg = background(el); const fg = over(parse(style.color), bg);
    const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x); const ratio = (a + 0.05) / (b + 0.05);
    const size = parseFloat(style.fontSize); const bold = Number(style.fontWeight) >= 700;
    const needed = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
    if (ratio < needed) failures.push(`${el.tagName.toLowerCase()}.${el.className} "${node.textContent.trim().slice(0, 40)}" ${ratio.toFixed(2)} < ${needed}`);
  }
  return failures;
}
"""
