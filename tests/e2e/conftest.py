"""The browser tests' chromium: one per test session (per xdist worker), a context per test.

Playwright's sync API runs an event loop of its own in this thread, which the asyncio
tests' loop may not meet: chromium starts for the first browser test and stops after the
last of a contiguous stretch of them (the browser modules come one after the other in
collection order): one chromium for the browser tests a worker runs, not one per module.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, Playwright, sync_playwright

from tests.e2e.browser import chromium_path


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
    return CHROMIUM.get()


def pytest_runtest_teardown(item: pytest.Item, nextitem: Any) -> None:
    if nextitem is None or "browser" not in getattr(nextitem, "fixturenames", ()):
        CHROMIUM.close()
