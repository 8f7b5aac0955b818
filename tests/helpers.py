"""Small helpers shared by the tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

DEMO_LIKE = {
    "project_key": "acme",
    "display_name": "Acme shop",
    "repository_bindings": [
        {"repository_key": "assembly", "vcs_repo_slug": "acme/assembly", "repository_type": "assembly"},
        {"repository_key": "backend", "vcs_repo_slug": "acme/api"},
        {"repository_key": "frontend", "vcs_repo_slug": "acme/web"},
    ],
    "project_assembly": {"agentSquadSuitTesterRoles": ["admin", "guest"]},
}


def eventually(probe: Callable[[], T | None], timeout: float = 20.0, interval: float = 0.05) -> T:
    """Polls ``probe`` until it answers something truthy (what a client of the API does)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s; last answer: {last!r}")
