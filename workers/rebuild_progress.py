"""The rebuild's progress bar (rich): redrawn in place on a terminal, a line per tenth otherwise.

``45.0%  450,000/1,000,000 events  52,345 events/s``: how far the slowest group has read,
against the log's head when the rebuild began, at the pace it kept since the start.
"""

from __future__ import annotations

from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

FIGURES = (
    "{task.fields[share]:>6.1%}  {task.fields[position]:,}/{task.fields[target]:,} events  "
    "{task.fields[rate]:,.0f} events/s"
)


class RebuildProgress:
    """A ``projections.rebuild.Progress`` callback drawing one bar on ``stream``."""

    def __init__(self, stream: TextIO, title: str) -> None:
        self.console = Console(file=stream, highlight=False)
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=30),
            TextColumn(FIGURES),
            TimeElapsedColumn(),
            console=self.console,
        )
        self.task = self.bar.add_task(title, total=None, share=0.0, position=0, target=0, rate=0.0)
        self.tenth = -1

    def __enter__(self) -> RebuildProgress:
        self.bar.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.bar.stop()  # on a terminal the bar stays as it ended; elsewhere it is printed once, now

    def __call__(self, position: int, target: int, events: int, seconds: float) -> None:
        share = 1.0 if target <= 0 else min(1.0, position / target)
        rate = events / seconds if seconds > 0 else 0.0
        self.bar.update(
            self.task, total=1.0, completed=share, share=share, position=position, target=target, rate=rate
        )
        if self.console.is_terminal:
            return
        # Not a terminal (a pipe, a log file): nothing is redrawn, so each tenth reached is
        # printed as a line of its own; the last picture comes when the bar stops.
        tenth = int(share * 10)
        if tenth != self.tenth and tenth < 10:
            self.tenth = tenth
            self.console.print(self.bar.get_renderable())
