"""Processes starting at once on a fresh PostgreSQL database (the API and its projector, as
production starts them; ``bench_proxy`` saw its projector die of it): each creates the schema
it needs, and none fails because another was creating it at the same moment. PostgreSQL does
not guard ``CREATE TABLE IF NOT EXISTS`` or ``CREATE TYPE`` against a concurrent creator (a
unique violation on ``pg_type``): before, 14 of 20 such starts failed."""

from __future__ import annotations

import threading

import pytest

from tests import infra
from tests.conftest import settings_for
from workers.bootstrap import build

pytestmark = pytest.mark.pg

STARTS = 4
DATABASES = 3


def test_services_starting_together_on_a_fresh_database_all_start(pg_admin_url: str) -> None:
    failures: list[str] = []
    for _ in range(DATABASES):
        with infra.fresh_database(pg_admin_url, dropper=infra.DROPPER) as url:
            together = threading.Barrier(STARTS)

            def start(url: str = url, together: threading.Barrier = together) -> None:
                together.wait()
                try:
                    build(settings_for(url)).close()
                except Exception as exc:
                    failures.append(repr(exc))

            threads = [threading.Thread(target=start) for _ in range(STARTS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    assert failures == []
