"""Read-your-writes over HTTP (C19), in one place: commands say where they are, reads wait for it.

- Every command route is declared with ``@command`` (instead of ``@post``): its handler
  returns its answer, and the answer carries ``X-Squadops-Position``, the log position the
  command's writes reached (the log's head if it recorded none). It waits for read models
  to include them only while a projector is alive, and then only for a bounded time: the
  header, not a delay, is what makes its effect findable.
- A request given ``X-Squadops-Min-Position: N`` is answered from read models at N or
  later: it waits (``SQUADOPS_MIN_POSITION_WAIT_SECONDS``), then answers 503
  ``read_model_lagging`` with ``Retry-After``, never a 404 for what is not projected yet.
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Callable
from typing import Annotated, Any

import anyio
import structlog
from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.handlers import HTTPRouteHandler
from litestar.params import HeaderParameter

from api.errors import ApiError, RequestInvalid, error_body
from domain.shared.event_store import EventStore
from domain.shared.ids import END
from projections.engine.copies import ReadCopies
from projections.engine.health import HealthProbe
from projections.engine.runner import ProjectionRunner
from projections.engine.unavailable import unavailable

log = structlog.get_logger("squadops.api.read_your_writes")

POSITION_HEADER = "X-Squadops-Position"
MIN_POSITION_HEADER = "X-Squadops-Min-Position"
MAX_POSITION = 2**63 - 1
_DIGITS = re.compile(r"[0-9]{1,19}")

MinPositionHeader = Annotated[
    str | None,
    HeaderParameter(
        name=MIN_POSITION_HEADER,
        required=False,
        schema_extra={"pattern": rf"^[0-9]{{1,19}}{END}"},  # documented; checked by parse_min_position (C3 loc)
        description="answer from read models that include this log position (a command's X-Squadops-Position)",
    ),
]


class ReadModelLagging(Exception):
    """Read models did not reach the asked position in time (503 with ``Retry-After``)."""

    def __init__(self, position: int, reached: int, retry_after: int) -> None:
        super().__init__(f"Read models are at log position {reached}, not yet at {position}; retry shortly.")
        self.detail = str(self)
        self.retry_after = retry_after


def handle_lagging(request: Request[Any, Any, Any], exc: ReadModelLagging) -> Response[Any]:
    response = error_body(503, exc.detail, "read_model_lagging")
    response.headers["Retry-After"] = str(exc.retry_after)
    return response


def parse_min_position(raw: str | None) -> int:
    """The header's position, 0 when absent; anything but 1 to 19 digits (as documented) is
    a 422. A position past any log there can be (over ``MAX_POSITION``) is past this log's
    head too: the read answers 409 ``position_ahead_of_log``, as for any position beyond it."""
    if raw is None:
        return 0
    text = raw.strip()
    if not _DIGITS.fullmatch(text):
        raise RequestInvalid(
            ["header", MIN_POSITION_HEADER.lower()],
            f"{MIN_POSITION_HEADER} must be a log position: 1 to 19 digits",
            "int_parsing",
            raw,
        )
    return int(text)


class ReadYourWrites:
    """Where the read models stand against the log: a command's bounded courtesy wait
    (``settle``), a read's wait for the position it names (``reach``).

    Built by the app factory from the service's parts (the event store, the projection
    runner, the health probe); it waits on the runner itself, never through the
    composition root.
    """

    def __init__(
        self,
        event_store: EventStore,
        runner: ProjectionRunner,
        health: HealthProbe | None,
        *,
        wait_seconds: float,
        copies: ReadCopies | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.event_store = event_store
        self.runner = runner
        self.health = health
        self.names = tuple(p.name for p in runner.projectors)
        self.wait_seconds = wait_seconds
        self.copies = copies
        self.clock = clock
        self._alive_until = 0.0

    # -- commands --------------------------------------------------------------------------

    def mark(self) -> int:
        """Taken before a command runs, in its thread: tells its own saves from earlier ones."""
        return self.event_store.last_saved_position()

    def written(self, mark: int) -> int:
        """The log position of what the command recorded since ``mark`` (the head if nothing)."""
        saved = self.event_store.last_saved_position()
        return saved if saved != mark else self.event_store.max_position()

    def settle(self, position: int) -> bool:
        """Waits (bounded, only while a projector is alive) until read models reach ``position``.

        The command is recorded already: a database gone meanwhile ends the wait, it does
        not turn the command's answer into an error (C19).
        """
        if self.copies is not None:
            self.copies.expect(position)  # no older copy of a read model serves a read now
        if position <= 0:
            return True
        try:
            if not self.projector_alive():
                return False  # nothing projects: waiting cannot help
            return self.runner.wait_for(position, self.wait_seconds, self.names)
        except Exception as exc:
            if unavailable(exc) is None:
                raise
            return False

    def projector_alive(self) -> bool:
        """Whether read models are being kept current, in this process or by another one."""
        if self.runner.running:
            return True
        if self.health is None:
            return False
        now = self.clock()
        if now < self._alive_until:  # asked once a second at most, not once per command
            return True
        try:
            alive = self.health.alive()
        except Exception as exc:  # no database: nothing will project either
            log.warning("projector_liveness_unknown", error=repr(exc))
            return False
        if alive:
            self._alive_until = now + 1.0
        return alive

    # -- reads -----------------------------------------------------------------------------

    async def reach(self, position: int) -> None:
        """Returns once every read model is at ``position`` or later; else ReadModelLagging."""
        if position <= 0:
            return
        deadline = self.clock() + self.wait_seconds
        pause = 0.005
        head_checked = False
        while True:
            stored = await anyio.to_thread.run_sync(self.runner.positions)
            reached = min((stored.get(n, 0) for n in self.names), default=position)
            if reached >= position:
                return
            if not head_checked:
                self._within_log(position, await anyio.to_thread.run_sync(self.event_store.max_position))
                head_checked = True
            remaining = deadline - self.clock()
            if remaining <= 0:
                log.info("read_model_lagging", min_position=position, reached=reached)
                raise ReadModelLagging(position, reached, max(1, math.ceil(self.wait_seconds)))
            await anyio.sleep(min(pause, remaining))
            pause = min(pause * 2, 0.1)

    @staticmethod
    def _within_log(position: int, head: int) -> None:
        """Commands answer positions already in the log: one past its head names no write."""
        if position > head:
            raise ApiError(
                409,
                f"{MIN_POSITION_HEADER} {position} is beyond the log (position {head}): no command answered it",
                "position_ahead_of_log",
            )


def read_your_writes(state: State) -> ReadYourWrites:
    """The app's one ``ReadYourWrites`` (``api.app.create_app`` puts it in state)."""
    return state["read_your_writes"]  # type: ignore[no-any-return]


def command(
    path: str,
    *,
    status_code: int,
    method: type[HTTPRouteHandler] = post,
    wakes_ticker: bool = False,
    **route: Any,
) -> Callable[[Callable[..., Any]], HTTPRouteHandler]:
    """``@post`` (or ``method``) for a command, run in a worker thread: the handler returns
    its answer (a body, or a ``Response`` when its status varies) and the answer leaves with
    the log position the command wrote, read models given their bounded moment to reach it.
    ``wakes_ticker``: the ticker acts on it now, not at its next tick."""

    def route_of(handler: Callable[..., Any]) -> HTTPRouteHandler:
        @functools.wraps(handler)
        def answered(*args: Any, **kwargs: Any) -> Response[Any]:
            state: State = kwargs["state"]
            writes = read_your_writes(state)
            mark = writes.mark()
            answer = handler(*args, **kwargs)
            response = answer if isinstance(answer, Response) else Response(answer, status_code=status_code)
            position = writes.written(mark)
            writes.settle(position)
            response.headers[POSITION_HEADER] = str(position)
            if wakes_ticker:
                state["wake_ticker"]()
            return response

        return method(path, status_code=status_code, sync_to_thread=True, **route)(answered)

    return route_of
