"""``runs watch`` on screen: the run as one table (rich), redrawn in place on a terminal.

A header line (``run RUN_ID  status running  ·  2 working, 1 blocked``), then a row per
agent, grouped by role: role, nickname, state (``live_status``), the tool it is running,
how many tools it called, and its blocker. On a terminal the table is redrawn where it
stands (``rich.live.Live``) and stays on screen, as it ended, when the run ends. Elsewhere
(a pipe, a log file) nothing can be redrawn: each changed picture is printed once, as
plain text, so the log reads as the run went and ends with the run's last picture.
"""

from __future__ import annotations

import os
from collections import Counter
from types import TracebackType
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

Row = tuple[str, str, str, str, str, str]  # role, nickname, state, tool, calls, blocker
COLUMNS = ("role", "nickname", "state", "tool", "calls", "blocker")
PIPE_WIDTH = 120  # a log has no width of its own; wide enough that rows are not wrapped

STATE_STYLE = {
    "ready": "dim",
    "waiting_first_tool": "yellow",
    "working": "green",
    "blocked": "bold red",
    "paused": "magenta",
    "session_completed": "cyan",
    "stopped": "dim",
}


def role_name(role_key: str) -> str:
    return role_key.removeprefix("role_")


def step_text(current_step: str) -> str:
    """The tool an agent is running; a step the state does not tell (a handoff) as it is."""
    tool = current_step.removeprefix("tool:")
    if tool != current_step:
        return tool
    quiet = current_step in STATE_STYLE or current_step.startswith("blocked:")  # said by state, blocker
    return "" if quiet or current_step == "session_warming" else current_step


def rows(state: dict[str, Any]) -> list[Row]:
    """One row per agent, grouped by role, then by nickname."""
    found = [
        (
            role_name(s["role_key"]),
            s["agent_nickname"] or s["agent_id"],
            s["live_status"],
            step_text(s["current_step"]),
            str(s["tool_call_count"]),
            s["blocker_code"],
        )
        for s in state["sessions"]
    ]
    return sorted(found, key=lambda row: (row[0], row[1]))


def header(state: dict[str, Any]) -> str:
    counts = Counter(s["live_status"] for s in state["sessions"])
    tally = ", ".join(f"{n} {status}" for status, n in sorted(counts.items(), key=lambda c: (-c[1], c[0])))
    return f"run {state['run_id']}  status {state['status']}" + (f"  ·  {tally}" if tally else "")


def picture(state: dict[str, Any]) -> Group:
    """The header and the table, as rich renders them."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name in COLUMNS:
        table.add_column(name, justify="right" if name == "calls" else "left", no_wrap=name != "blocker")
    found = rows(state)
    for index, (role, nickname, status, tool, calls, blocker) in enumerate(found):
        last_of_role = index + 1 < len(found) and found[index + 1][0] != role
        table.add_row(
            role,
            nickname,
            Text(status, style=STATE_STYLE.get(status, "")),
            tool,
            calls,
            Text(blocker, style="red"),
            end_section=last_of_role,
        )
    return Group(Text(header(state), style="bold"), table)


class WatchView:
    """Shows a run's session state whenever it changed; a context manager around the screen."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)
        if not self.console.is_terminal and "COLUMNS" not in os.environ and console is None:
            self.console.width = PIPE_WIDTH
        self.live = Live(console=self.console, auto_refresh=False) if self.console.is_terminal else None
        self.shown: tuple[str, list[Row]] | None = None

    def __enter__(self) -> WatchView:
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.live is not None:
            self.live.stop()  # the last picture stays on screen

    def show(self, state: dict[str, Any]) -> bool:
        """Draws ``state`` unless it looks as last drawn; answers whether it drew."""
        seen = (header(state), rows(state))
        if seen == self.shown:
            return False
        self.shown = seen
        if self.live is not None:
            self.live.update(picture(state), refresh=True)
        else:
            self.console.print(picture(state))
        return True
