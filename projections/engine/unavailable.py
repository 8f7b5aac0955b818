"""The one place that tells "the database (or broker) cannot be reached" from other errors.

C19: such a failure answers 503 ``database_unavailable`` with ``Retry-After``, never a 500
and never a false 404; workers back off and resume by themselves. The drivers raise it in
many shapes (psycopg, its pool, eventsourcing's wrappers, sqlite3, nats); ``unavailable``
turns each into the domain's ``Unavailable``, and ``connection_lost`` says whether a
read may be tried once more on a fresh connection. ``PoolGuard`` makes all the waits of
one request for pooled connections share one bound, so the request answers in time.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import psycopg
from eventsourcing.persistence import InterfaceError, OperationalError
from psycopg_pool import ConnectionPool, PoolTimeout

from domain.shared.errors import Unavailable

CODE = "database_unavailable"
RETRY_AFTER_SECONDS = 1
CONNECT_TIMEOUT_SECONDS = 2
DETAIL = "The database cannot be reached right now; nothing was changed. Try again shortly."
OUTCOME_UNKNOWN_DETAIL = (
    "The database connection was lost while the change was being committed, and it could "
    "not be checked whether it was recorded. Read the resource before repeating the command."
)

# SQLSTATE classes and codes of a connection that is gone (08: connection exception;
# 57P01-03: admin shutdown, crash shutdown, cannot connect now).
_LOST_CLASSES = ("08",)
_LOST_CODES = frozenset({"57P01", "57P02", "57P03"})
# sqlite3 raises OperationalError for SQL mistakes too ("no such table"): only these are
# the database being unusable right now.
_SQLITE_UNAVAILABLE = ("database is locked", "disk i/o error", "unable to open database", "database or disk is full")


class CommitOutcomeUnknown(OperationalError):
    """The connection died during COMMIT and the database could not be asked afterwards."""


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the errors it was raised from (drivers' errors get wrapped)."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in found and len(found) < 8:
        found.append(current)
        current = current.__cause__
    return found


def _is_unreachable(exc: BaseException) -> bool:
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError | OperationalError | InterfaceError):
        return True
    if isinstance(exc, sqlite3.OperationalError):
        return str(exc).lower().startswith(_SQLITE_UNAVAILABLE)
    return _is_broker_unreachable(exc)


def _is_broker_unreachable(exc: BaseException) -> bool:
    try:
        from nats import errors as nats_errors
        from nats.js import errors as js_errors
    except ImportError:  # pragma: no cover - nats-py is a dependency
        return False
    return isinstance(
        exc,
        nats_errors.NoServersError
        | nats_errors.ConnectionClosedError
        | nats_errors.StaleConnectionError
        | nats_errors.ConnectionReconnectingError
        | nats_errors.TimeoutError
        | js_errors.ServiceUnavailableError,
    )


def unavailable(exc: BaseException) -> Unavailable | None:
    """The domain's ``Unavailable`` (503) if ``exc`` means the store cannot be reached; else None."""
    chain = _chain(exc)
    if any(isinstance(e, Unavailable) for e in chain):
        return next(e for e in chain if isinstance(e, Unavailable))
    if not any(_is_unreachable(e) for e in chain):
        return None
    detail = OUTCOME_UNKNOWN_DETAIL if any(isinstance(e, CommitOutcomeUnknown) for e in chain) else DETAIL
    return Unavailable(detail, code=CODE)


def connection_lost(exc: BaseException) -> bool:
    """Whether the connection died under the statement (retry once on a fresh one).

    A pool that waited in vain (``PoolTimeout``) or a statement that ran out of time is
    not retried: the time is spent already.
    """
    for error in _chain(exc):
        if isinstance(error, PoolTimeout):
            return False
        if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
            state = error.sqlstate
            return state is None or state.startswith(_LOST_CLASSES) or state in _LOST_CODES
    return False


def connection_bounds(statement_seconds: float) -> dict[str, Any]:
    """PostgreSQL connection parameters bounding a connect attempt (libpq's least, 2 s)
    and, when ``statement_seconds`` > 0, every statement."""
    bounds: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_SECONDS}
    if statement_seconds > 0:
        bounds["options"] = f"-c statement_timeout={round(statement_seconds * 1000)}"
    return bounds


class WaitBudget:
    """What is left of one request's time for waiting on pooled connections (seconds).

    Only the waits are counted, not the request's other work: a command that runs for
    seconds (a gate run writing git commits) still gets its connections, while the waits
    of a request against an unreachable database end within the budget in total."""

    __slots__ = ("left",)

    def __init__(self, seconds: float) -> None:
        self.left = seconds

    def spend(self, seconds: float) -> None:
        self.left = max(0.0, self.left - seconds)


_budget: ContextVar[WaitBudget | None] = ContextVar("squadops_database_wait_budget", default=None)


def set_wait_budget(seconds: float | None) -> None:
    """From now on, in this context, waits for pooled connections take at most ``seconds``
    in total (None: each wait has only its pool's own bound)."""
    _budget.set(None if seconds is None else WaitBudget(seconds))


def wait_budget(timeout: float) -> float:
    """``timeout``, cut to what is left of this context's budget (a ready connection is
    still taken when none is left)."""
    budget = _budget.get()
    if budget is None:
        return timeout
    return max(0.001, min(timeout, budget.left))


@contextmanager
def waiting() -> Iterator[None]:
    """Counts the time spent inside against this context's budget."""
    budget = _budget.get()
    started = time.monotonic()
    try:
        yield
    finally:
        if budget is not None:
            budget.spend(time.monotonic() - started)


RECHECK_AFTER_SECONDS = 0.25


class PoolGuard:
    """Mixin for a psycopg_pool pool (C19): a connection idle for more than
    ``RECHECK_AFTER_SECONDS`` is checked before it is handed out, and one found dead makes
    the pool check all its idle ones at once (a restart or a cut kills them together; the
    pool alone would pause a second per dead one); waits keep within the context's budget.

    A connection given back moments ago worked moments ago: checking it again costs a
    round trip per use (a tenth of a ticker pass). If it died in between, the use fails
    as a dropped connection does, and the callers' own handling applies (a read is tried
    once more, an insert asks whether it was recorded; otherwise 503).
    """

    timeout: float

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, check=self._check_or_sweep, **kwargs)  # type: ignore[call-arg]

    def _check_or_sweep(self, conn: Any) -> None:
        returned = getattr(conn, "_squadops_returned_at", None)
        if returned is not None and time.monotonic() - returned < RECHECK_AFTER_SECONDS and not conn.closed:
            return
        try:
            ConnectionPool.check_connection(conn)
        except Exception:
            self.check()  # type: ignore[attr-defined]
            raise

    def putconn(self, conn: Any) -> None:
        conn._squadops_returned_at = time.monotonic()
        super().putconn(conn)  # type: ignore[misc]

    def getconn(self, timeout: float | None = None) -> Any:
        with waiting():
            return super().getconn(wait_budget(self.timeout if timeout is None else timeout))  # type: ignore[misc]


class GuardedPool(PoolGuard, ConnectionPool):  # type: ignore[misc]
    """psycopg_pool's pool, guarded."""
