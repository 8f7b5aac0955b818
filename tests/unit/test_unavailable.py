"""C19's one place: which errors mean "the database (or broker) cannot be reached"."""

from __future__ import annotations

import contextvars
import sqlite3
import time

import psycopg
import pytest
from eventsourcing.persistence import (
    IntegrityError,
    InterfaceError,
    OperationalError,
    ProgrammingError,
)
from nats.errors import NoServersError
from psycopg import errors as pg
from psycopg_pool import PoolTimeout

from domain.shared.errors import NotFound, Unavailable
from domain.shared.retry import backoff
from projections.engine.unavailable import (
    CODE,
    DETAIL,
    OUTCOME_UNKNOWN_DETAIL,
    CommitOutcomeUnknown,
    connection_bounds,
    connection_lost,
    set_wait_budget,
    unavailable,
    wait_budget,
    waiting,
)


def wrapped(cause: Exception, wrapper: type[Exception] = OperationalError) -> Exception:
    """As eventsourcing raises it: its own error, raised from the driver's."""
    try:
        try:
            raise cause
        except Exception as exc:
            raise wrapper(str(exc)) from exc
    except Exception as outer:
        return outer


UNREACHABLE = [
    psycopg.OperationalError("connection refused"),
    pg.AdminShutdown("terminating connection due to administrator command"),
    pg.QueryCanceled("canceling statement due to statement timeout"),
    PoolTimeout("couldn't get a connection after 1.00 sec"),
    psycopg.InterfaceError("the connection is closed"),
    wrapped(pg.AdminShutdown("terminating connection")),
    wrapped(psycopg.InterfaceError("closed"), InterfaceError),
    OperationalError("couldn't get a connection after 1.00 sec"),
    sqlite3.OperationalError("database is locked"),
    sqlite3.OperationalError("disk I/O error"),
    NoServersError(),
]

NOT_UNREACHABLE = [
    ValueError("bad input"),
    pg.UndefinedTable('relation "rm_missing" does not exist'),
    wrapped(pg.UniqueViolation("duplicate key"), IntegrityError),
    ProgrammingError("syntax error"),
    sqlite3.OperationalError("no such table: rm_missing"),
    NotFound("No run with id 'x'.", code="run_not_found"),
]


@pytest.mark.parametrize("error", UNREACHABLE, ids=lambda e: type(e).__name__)
def test_an_unreachable_store_is_a_503_database_unavailable(error: Exception) -> None:
    found = unavailable(error)
    assert isinstance(found, Unavailable)
    assert (found.code, found.message) == (CODE, DETAIL)


@pytest.mark.parametrize("error", NOT_UNREACHABLE, ids=lambda e: type(e).__name__)
def test_other_errors_are_not_turned_into_unavailability(error: Exception) -> None:
    assert unavailable(error) is None


def test_a_commit_whose_outcome_is_unknown_says_so() -> None:
    found = unavailable(wrapped(pg.AdminShutdown("cut"), CommitOutcomeUnknown))
    assert found is not None and (found.code, found.message) == (CODE, OUTCOME_UNKNOWN_DETAIL)


def test_only_a_connection_that_died_is_worth_one_more_try() -> None:
    assert connection_lost(pg.AdminShutdown("terminating connection"))
    assert connection_lost(psycopg.OperationalError("server closed the connection unexpectedly"))
    assert connection_lost(wrapped(pg.AdminShutdown("terminating connection")))
    assert connection_lost(pg.ConnectionFailure("connection failure"))
    assert not connection_lost(PoolTimeout("couldn't get a connection"))  # the wait is spent already
    assert not connection_lost(pg.QueryCanceled("statement timeout"))
    assert not connection_lost(pg.UndefinedTable("no such table"))
    assert not connection_lost(ValueError("x"))


def test_backoff_doubles_and_is_bounded() -> None:
    delays = [backoff(n) for n in range(1, 12)]
    assert delays == sorted(delays) and delays[0] == 0.2 and max(delays) == 5.0


def test_connections_bound_the_connect_and_each_statement() -> None:
    assert connection_bounds(1.5) == {"connect_timeout": 2, "options": "-c statement_timeout=1500"}
    assert connection_bounds(0) == {"connect_timeout": 2}


def test_a_requests_waits_share_one_budget_in_its_own_context_only() -> None:
    def in_request(budget: float) -> float:
        set_wait_budget(budget)
        return wait_budget(1.0)

    assert contextvars.copy_context().run(in_request, 0.2) == 0.2
    assert contextvars.copy_context().run(in_request, 0.0) == 0.001  # spent: only a ready connection
    assert wait_budget(1.0) == 1.0  # outside a request: each wait has its pool's bound


def test_only_the_waits_spend_the_budget_not_the_requests_other_work() -> None:
    def in_request() -> list[float]:
        set_wait_budget(0.2)
        time.sleep(0.25)  # the command's own work (git, a UDP exchange) is not waiting
        left = [wait_budget(1.0)]
        with waiting():
            time.sleep(0.12)  # a wait for a connection, which spends the budget
        left.append(wait_budget(1.0))
        with waiting():
            time.sleep(0.12)  # a wait for a connection, which spends the budget
        left.append(wait_budget(1.0))
        return left

    untouched, some, spent = contextvars.copy_context().run(in_request)
    assert untouched == 0.2 and 0.0 < some <= 0.08 and spent == 0.001
