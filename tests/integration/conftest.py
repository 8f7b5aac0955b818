"""Fixtures of the integration tests besides the shared ones (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.jobs_support import LoopbackPowerDevice


@pytest.fixture
def device() -> Iterator[LoopbackPowerDevice]:
    """A power device on a loopback UDP socket, for the jobs that wake and sleep machines."""
    found = LoopbackPowerDevice()
    yield found
    found.close()
