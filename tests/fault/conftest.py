"""The fault tests' marker: ``-m "not soak"`` leaves the production-topology soak out."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "soak: the production-topology fault test (own PostgreSQL, NATS, processes)")
