"""Log positions over HTTP (C19): commands say where they are, reads wait for it.

- Every command answers ``X-Squadops-Position``: the log position of the events it
  recorded (the log's head if it recorded none). It waits for read models to include
  them only while a projector is alive, and then only for a bounded time: the header,
  not a delay, is what makes its effect findable.
- A request given ``X-Squadops-Min-Position: N`` is answered from read models at N or
  later: it waits (``SQUADOPS_MIN_POSITION_WAIT_SECONDS``), then answers 503
  ``read_model_lagging`` with ``Retry-After``, never a 404 for what is not projected yet.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypeVar

import anyio
import structlog
from litestar import Request, Response
from litestar.datastructures import State
from litestar.params import HeaderParameter

from api.errors import ApiError, RequestInvalid, error_body
from domain.shared.event_store import EventStore
from domain.shared.ids import END

log = structlog.get_logger("squadops.api.positions")

POSITION_HEADER = "X-Squadops-Position"
MIN_POSITION_HEADER = "X-Squadops-Min-Position"
MAX_POSITION = 2**63 - 1
_DIGITS = re.compile(r"[0-9]{1,19}")

T = TypeVar("T")

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


class ReadPositions:
    """Waits, without holding a thread, until the read models reached a log position."""

    def __init__(
        self,
        positions: Callable[[], dict[str, int]],
        log_position: Callable[[], int],
        names: Sequence[str],
        *,
        wait_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.positions = positions
        self.log_position = log_position
        self.names = tuple(names)
        self.wait_seconds = wait_seconds
        self.clock = clock

    async def reach(self, position: int) -> None:
        """Returns once every read model is at ``position`` or later; else ReadModelLagging."""
        if position <= 0:
            return
        deadline = self.clock() + self.wait_seconds
        pause = 0.005
        head_checked = False
        while True:
            stored = await anyio.to_thread.run_sync(self.positions)
            reached = min((stored.get(n, 0) for n in self.names), default=position)
            if reached >= position:
                return
            if not head_checked:
                self._within_log(position, await anyio.to_thread.run_sync(self.log_position))
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


# -- commands ------------------------------------------------------------------------------------


def command_mark(app: EventStore) -> int:
    """Taken before a command runs, in its thread: tells its own saves from earlier ones."""
    return app.last_saved_position()


def command_position(app: EventStore, mark: int) -> int:
    """The log position of what the command recorded since ``mark`` (the head if nothing)."""
    saved = app.last_saved_position()
    return saved if saved != mark else app.max_position()


def positioned(state: State, mark: int, body: T, status_code: int) -> Response[T]:
    """The command's answer with its position; read models waited for while a projector lives."""
    position = command_position(state["event_store"], mark)
    state["reads"].settle(position)
    return Response(body, status_code=status_code, headers={POSITION_HEADER: str(position)})
