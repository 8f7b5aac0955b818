"""The rebuild's progress bar as a user sees it: on a terminal, and in a pipe or a log."""

from __future__ import annotations

import io
import re

from workers.rebuild_progress import RebuildProgress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def feed(stream: io.StringIO, target: int = 2_000, step: int = 100, seconds: float = 0.5) -> str:
    with RebuildProgress(stream, "rebuild") as progress:
        for position in range(0, target + 1, step):
            progress(position, target, position, seconds)
    return stream.getvalue()


def test_in_a_pipe_each_tenth_is_a_line_and_the_last_line_is_the_finished_bar() -> None:
    lines = feed(io.StringIO()).splitlines()
    shares = [re.search(r"(\d+\.\d)%", line).group(1) for line in lines]  # type: ignore[union-attr]
    assert shares == [f"{tenth * 10}.0" for tenth in range(11)]
    assert all(line.startswith("rebuild ") for line in lines)
    assert "1,000/2,000 events  2,000 events/s" in lines[5]
    assert "100.0%  2,000/2,000 events  4,000 events/s" in lines[-1]
    assert "\x1b" not in "".join(lines)  # no terminal codes in a log


def test_on_a_terminal_the_bar_is_redrawn_in_place() -> None:
    stream = Terminal()
    with RebuildProgress(stream, "rebuild") as progress:
        progress(0, 1_000, 0, 0.1)
        progress.bar.refresh()
        progress(500, 1_000, 500, 0.5)
        progress.bar.refresh()
        progress(1_000, 1_000, 1_000, 1.0)
    out = stream.getvalue()
    assert out.count("\n") == 1  # one line on screen, rewritten, then left as it ended
    assert "\r\x1b[2K" in out  # back to the line's start and erase it: the redraw
    assert re.search(r"50\.0%.*500/1,000 events  1,000 events/s", out)
    last = out.rsplit("\x1b[2K", 1)[-1]
    assert "100.0%" in last and "1,000/1,000 events" in last


def test_an_empty_log_is_a_finished_rebuild() -> None:
    lines = feed(io.StringIO(), target=0, step=1).splitlines()
    assert len(lines) == 1 and "100.0%  0/0 events" in lines[0]
