"""SQLite: no commit checkpoints; the checkpointer keeps the WAL bounded (functional, no timings)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from projections.engine.store import Change, Row, SqliteDocStore
from tests.helpers import DEMO_LIKE, eventually
from workers.bootstrap import build
from workers.eventstore.sqlite import WalCheckpointer
from workers.settings import Settings

PAGE = 4096


def wal_size(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return wal.stat().st_size if wal.exists() else 0


def write_rows(store: SqliteDocStore, count: int, start: int = 0) -> None:
    """Each commit writes a few pages: one 6 KB document and the position."""
    store.ensure("bulk")
    for n in range(start, start + count):
        row = Row(key=f"k{n:06d}", partition="p", group="", sort_key=f"{n:06d}", status="", body=b"x" * 6000)
        store.commit_many([Change("bulk", store.position("bulk"), n + 1, [row], [])])


def test_the_service_connections_never_checkpoint_and_keep_full_sync(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    container = build(Settings(database_url=f"sqlite:///{path}", log_level="warning"))
    try:
        container.projects.create_project(tenant="default", request=DEMO_LIKE, created_by="t@example.com")
        datastore = container.event_store.recorder.datastore  # type: ignore[attr-defined]
        with datastore.get_connection(commit=False) as conn:
            raw = conn._sqlite_conn
            assert raw.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
            assert raw.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
            assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert container.store._conn().execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0  # type: ignore[attr-defined]
        checkpointer = container.store.checkpointer  # type: ignore[attr-defined]
        eventually(lambda: checkpointer.runs >= 2, timeout=30)  # its thread runs by itself
        assert checkpointer.last is not None and checkpointer.last.busy == 0
        assert checkpointer.last.moved == checkpointer.last.wal_frames
    finally:
        container.close()


def test_without_a_checkpointer_the_wal_only_grows(tmp_path: Path) -> None:
    """The reference the next test is measured against: the pragma really is off."""
    path = tmp_path / "s.db"
    store = SqliteDocStore(path, autocheckpoint=False)
    try:
        write_rows(store, 600)
        assert wal_size(path) > 600 * PAGE
    finally:
        store.close()


def test_checkpoints_keep_the_wal_reused_and_bounded(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteDocStore(path, autocheckpoint=False)
    checkpointer = WalCheckpointer(str(path), restart_frames=64)
    try:
        write_rows(store, 50)
        first = checkpointer.pass_once()
        assert first.busy == 0 and first.moved == first.wal_frames > 0  # every frame moved
        size = wal_size(path)
        write_rows(store, 20, start=50)  # the next writer starts the WAL over: it does not grow
        assert wal_size(path) == size
        for round_ in range(12):  # 600 more commits, a pass every 50
            write_rows(store, 50, start=70 + 50 * round_)
            assert checkpointer.pass_once().busy == 0
        assert wal_size(path) <= size * 2  # unbounded, it would be ~12 times as large
        assert checkpointer.runs == 13 and checkpointer.restarts == 0  # rewinds sufficed: nothing waited
        checkpointer.stop()
        store.close()
        with sqlite3.connect(path) as conn:  # nothing was lost on the way
            assert conn.execute("SELECT count(*) FROM rm_bulk").fetchone()[0] == 670  # noqa: S608
    finally:
        checkpointer.stop()
        store.close()


def test_a_reader_holding_a_snapshot_only_delays_the_reset(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteDocStore(path, autocheckpoint=False)
    checkpointer = WalCheckpointer(str(path))
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        write_rows(store, 10)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM rm_bulk").fetchone()  # holds its snapshot
        write_rows(store, 100, start=10)
        held = checkpointer.checkpoint()
        assert held.moved < held.wal_frames  # frames after the reader's snapshot stay
        reader.execute("COMMIT")
        caught_up = checkpointer.checkpoint()
        assert caught_up.moved == caught_up.wal_frames
        write_rows(store, 1, start=110)
        assert checkpointer.checkpoint().wal_frames < held.wal_frames  # the WAL started over
    finally:
        reader.close()
        checkpointer.stop()
        store.close()
