"""One SQLite connection per thread to one file, all closed together (the read-model store
and the job claims each keep such a set; SQLite connections are not shared across threads)."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import suppress


class ThreadConnections:
    """This thread's connection to ``path`` (opened on first use with ``pragmas`` applied)."""

    def __init__(self, path: str, pragmas: tuple[str, ...]) -> None:
        self.path = path
        self.pragmas = pragmas
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()

    def get(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            for pragma in self.pragmas:
                conn.execute(f"PRAGMA {pragma}")
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def close(self) -> None:
        """Closes every thread's connection; a thread's next ``get`` opens a new one."""
        with self._lock:
            for conn in self._all:
                with suppress(sqlite3.Error):
                    conn.close()
            self._all.clear()
        self._local = threading.local()
