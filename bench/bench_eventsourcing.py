"""The eventsourcing library's own throughput and timing cases, on our recorders.

``test_performance`` (100 single-event inserts, timed) and ``test_concurrent_throughput``
(4 threads inserting 50-event batches) of the library's ``ApplicationRecorderTestCase``
(``eventsourcing/tests/persistence.py``), against what ``workers.bootstrap`` configures:
the typed-array PostgreSQL recorder and the library's SQLite recorder with our settings.
They measure and print; the suite (tests/integration/test_eventsourcing_cases.py) runs the
library's correctness cases and leaves these two here, where timings are read.
"""

from __future__ import annotations

import contextlib
import io
import re
import tempfile
import unittest
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

from eventsourcing.persistence import InfrastructureFactory
from eventsourcing.tests import persistence as library
from eventsourcing.utils import Environment

from bench.context import BenchContext
from domain.shared.event_store import EventStore
from workers.bootstrap import eventsourcing_env
from workers.settings import Settings

TIMING_CASES = ("test_performance", "test_concurrent_throughput")


class OurRecorderCase(library.ApplicationRecorderTestCase):
    database_url = ""

    def new_originator_id(self) -> str:  # type: ignore[override]
        return str(uuid4())

    def create_recorder(self):  # type: ignore[no-untyped-def]
        env = Environment(EventStore.name, eventsourcing_env(Settings(database_url=self.database_url)))
        factory = InfrastructureFactory.construct(env)
        self.addCleanup(factory.close)
        return factory.application_recorder()


def run_cases(database_url: str) -> str:
    """Runs the timing cases against ``database_url``; answers what they printed."""
    case = type("Case", (OurRecorderCase,), {"database_url": database_url})
    suite = unittest.TestSuite(case(name) for name in TIMING_CASES)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(suite)
    if not result.wasSuccessful():
        problems = [text for _, text in result.errors + result.failures]
        raise AssertionError("library timing cases failed:\n" + "\n".join(problems))
    return printed.getvalue()


def figures(printed: str) -> str:
    per_insert = re.search(r"([\d.]+) μs per insert, (\d+) inserts per second", printed)
    rate = re.search(r"Rate: (\d+) inserts per second", printed)
    parts = []
    if per_insert:
        parts.append(f"single inserts {per_insert.group(1)} µs each ({per_insert.group(2)}/s)")
    if rate:
        parts.append(f"4 threads of 50-event batches {rate.group(1)} events/s")
    return ", ".join(parts) or printed.strip()


@contextlib.contextmanager
def sqlite_url() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as directory:
        yield f"sqlite:///{Path(directory) / 'events.db'}"


def run(ctx: BenchContext) -> list[str]:
    lines = []
    with ctx.postgres() as url:
        lines.append(f"PostgreSQL (typed-array recorder): {figures(run_cases(url))}")
    with sqlite_url() as url:
        lines.append(f"SQLite (library recorder): {figures(run_cases(url))}")
    return lines
