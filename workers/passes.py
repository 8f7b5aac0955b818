"""A worker's thread of passes: the ticker, the job runner and the watcher run on it.

``run_once`` runs pass after pass until ``stop``; between two passes the thread rests for
``pause(result, started)`` seconds, which ``wake`` cuts short; a pass that fails (e.g. the
database went away) is retried after ``retry_in(failures)`` seconds, never given up, and
its return logged once it passes again. An exception of ``stops_on`` ends the thread
(kept in ``failure``).
"""

from __future__ import annotations

import abc
import threading
import time
from typing import Any

import structlog

from domain.shared.retry import backoff

log = structlog.get_logger("squadops.passes")


class PassThread(abc.ABC):
    """Base of a worker that runs passes on its own thread (see the module's docstring)."""

    thread_name = "passes"
    event = "pass"  # logged as "<event>_pass_failed", "<event>_resumed", "<event>_failed"
    join_seconds = 10.0
    stops_on: tuple[type[Exception], ...] = ()

    def __init__(self) -> None:
        self.failures = 0  # passes failed so far
        self.failure: Exception | None = None  # what ended the thread (one of ``stops_on``)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @abc.abstractmethod
    def run_once(self) -> Any:
        """One pass; what it answers is handed to ``pause``."""

    @abc.abstractmethod
    def pause(self, result: Any, started: float) -> float:
        """Seconds to rest after a pass that answered ``result`` (started at ``started``)."""

    def retry_in(self, failures: int) -> float:
        return backoff(failures)

    def wake(self, _position: int | None = None) -> None:
        self._wake.set()

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.join_seconds)
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _rest(self, seconds: float) -> None:
        self._wake.wait(seconds)
        self._wake.clear()

    def _loop(self) -> None:
        failures = 0
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                result = self.run_once()
            except self.stops_on as exc:
                self.failure = exc
                log.error(f"{self.event}_failed", error=str(exc))
                return
            except Exception as exc:  # e.g. the database went away: back off, resume by itself
                failures += 1
                self.failures += 1
                delay = self.retry_in(failures)
                log.warning(f"{self.event}_pass_failed", error=repr(exc), failures=failures, retry_in=delay)
                self._rest(delay)
                continue
            if failures:
                log.info(f"{self.event}_resumed", failures=failures)
                failures = 0
            self._rest(self.pause(result, started))
