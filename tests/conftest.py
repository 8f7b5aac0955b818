"""Shared fixtures: real PostgreSQL and NATS, one database per test, both backends."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import infra
from workers.bootstrap import Container, build
from workers.settings import Settings

ADMIN = {
    "x-edge-claim-email": "Operator@Example.com",
    "x-edge-claim-groups": "/org/platform/roles/super_admin",
}


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    url, server = infra.postgres_admin_url()
    yield url
    if server is not None:
        server.cleanup()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def nats_url() -> Iterator[str]:
    url, server = infra.nats_url()
    yield url
    if server is not None:
        server.cleanup()


@pytest.fixture
def pg_url(pg_admin_url: str) -> Iterator[str]:
    with infra.fresh_database(pg_admin_url) as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'squadops.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Both backends: the embedded SQLite default and the real PostgreSQL server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'squadops.db'}"
    else:
        admin = request.getfixturevalue("pg_admin_url")
        with infra.fresh_database(admin) as url:
            yield url


def settings_for(database_url: str, **changes: object) -> Settings:
    base = Settings(
        database_url=database_url,
        tick_seconds=0.02,
        log_level="warning",
        projection_poll_seconds=0.05,
        projection_gap_timeout_seconds=1.0,
        # Provisioned repositories (local bare git) land in a fresh directory, not ./var.
        data_dir=tempfile.mkdtemp(prefix="squadops-data-"),
    )
    return base.replace(**changes) if changes else base


@pytest.fixture
def container(database_url: str) -> Iterator[Container]:
    """The service's parts, workers not started (tests drive them)."""
    built = build(settings_for(database_url))
    yield built
    built.close()


@pytest.fixture
def tmpdir_path() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)
