"""The browser tests' chromium: one per test session (per xdist worker), a context per test.

Playwright's sync API runs an event loop of its own in this thread, which the asyncio
tests' loop may not meet: chromium starts for the first browser test and stops after the
last of a contiguous stretch of them (the browser modules come one after the other in
collection order): one chromium for the browser tests a worker runs, not one per module.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.browser import CHROMIUM, browser  # noqa: F401 (the fixture, for every browser test here)


def pytest_runtest_teardown(item: pytest.Item, nextitem: Any) -> None:
    if nextitem is None or "browser" not in getattr(nextitem, "fixturenames", ()):
        CHROMIUM.close()
