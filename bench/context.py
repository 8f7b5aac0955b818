"""What benchmarks share: the real servers and scratch databases that clean up after."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests import infra


class BenchContext:
    def __enter__(self) -> BenchContext:
        self._stack = contextlib.ExitStack()
        self.pg_admin_url, pg_server = infra.postgres_admin_url()
        if pg_server is not None:
            self._stack.callback(pg_server.cleanup)  # type: ignore[attr-defined]
        self.nats_url, nats_server = infra.nats_url()
        if nats_server is not None:
            self._stack.callback(nats_server.cleanup)
        return self

    @contextlib.contextmanager
    def postgres(self) -> Iterator[str]:
        """A fresh PostgreSQL database for one benchmark."""
        with infra.fresh_database(self.pg_admin_url) as url:
            yield url

    def __exit__(self, *exc: Any) -> None:
        self._stack.close()


@contextlib.contextmanager
def scratch_sqlite(name: str) -> Iterator[str]:
    """A SQLite URL under ``var/`` for one benchmark, its files removed afterwards."""
    database = Path("var") / f"{name}-{os.getpid()}.db"
    database.parent.mkdir(exist_ok=True)
    try:
        yield f"sqlite:///{database}"
    finally:
        for path in database.parent.glob(database.name + "*"):
            path.unlink(missing_ok=True)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]
