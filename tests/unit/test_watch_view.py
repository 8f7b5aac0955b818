"""``runs watch`` as a user sees it: the run's table, on a terminal and in a pipe."""

from __future__ import annotations

import copy
import io
from typing import Any

import pyte
from rich.console import Console

from workers.watch_view import WatchView, rows

WIDTH, HEIGHT = 110, 30


def session(agent: str, role: str, nickname: str, status: str, step: str, code: str = "", calls: int = 0) -> dict:
    return {
        "agent_id": agent, "role_key": f"role_{role}", "agent_nickname": nickname, "session_id": f"s-{agent}",
        "llm_session_id": "", "live_status": status, "current_step": step, "blocker_code": code,
        "tool_call_count": calls,
    }


def run_state() -> dict[str, Any]:
    """A run in roster order (not by role), one agent of each kind of step."""
    return {
        "run_id": "run-7",
        "status": "blocked",
        "sessions": [
            session("planner", "planner", "Ada", "working", "tool:mcp__vcs__read_file", calls=3),
            session("curator", "curator", "Bo", "blocked", "blocked:agent_first_tool_required",
                    "agent_first_tool_required"),
            session("frontend", "developer", "Zed", "working", "handoff:backend", calls=2),
            session("backend", "developer", "Cy", "session_completed", "session_completed", calls=12),
            session("tester-admin", "tester", "Di", "ready", "session_warming"),
        ],
    }


def test_rows_are_grouped_by_role_with_state_tool_and_blocker() -> None:
    assert rows(run_state()) == [
        ("curator", "Bo", "blocked", "", "0", "agent_first_tool_required"),
        ("developer", "Cy", "session_completed", "", "12", ""),
        ("developer", "Zed", "working", "handoff:backend", "2", ""),
        ("planner", "Ada", "working", "mcp__vcs__read_file", "3", ""),
        ("tester", "Di", "ready", "", "0", ""),
    ]


def test_in_a_pipe_each_changed_picture_is_printed_once_as_plain_text() -> None:
    out = io.StringIO()
    state = run_state()
    with WatchView(Console(file=out, width=WIDTH)) as view:
        assert view.show(state)
        assert not view.show(copy.deepcopy(state))  # nothing changed: nothing printed
        state["sessions"][1].update(live_status="working", current_step="tool:grep", blocker_code="")
        state["status"] = "running"
        assert view.show(state)
    text = out.getvalue()
    assert "\x1b" not in text
    first, last = text.split("run run-7  status ")[1:]
    assert first.startswith("blocked  ·  2 working, 1 blocked, 1 ready, 1 session_completed")
    assert last.startswith("running  ·  3 working, 1 ready, 1 session_completed")
    table = [line.split() for line in last.splitlines()[1:] if line.strip() and "─" not in line]
    assert table[0] == ["role", "nickname", "state", "tool", "calls", "blocker"]
    assert table[1:] == [
        ["curator", "Bo", "working", "grep", "0"],
        ["developer", "Cy", "session_completed", "12"],
        ["developer", "Zed", "working", "handoff:backend", "2"],
        ["planner", "Ada", "working", "mcp__vcs__read_file", "3"],
        ["tester", "Di", "ready", "0"],
    ]


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def on_screen(output: str) -> list[str]:
    screen = pyte.Screen(WIDTH, HEIGHT)
    pyte.Stream(screen).feed(output.replace("\n", "\r\n"))  # a tty's output post-processing
    return [line.rstrip() for line in screen.display if line.strip()]


def test_on_a_terminal_the_table_is_redrawn_in_place() -> None:
    terminal = Tty()
    console = Console(file=terminal, width=WIDTH, height=HEIGHT, force_terminal=True)
    state = run_state()
    with WatchView(console) as view:
        view.show(state)
        first = on_screen(terminal.getvalue())
        for step in range(4):
            state["sessions"][0].update(current_step=f"tool:step{step}", tool_call_count=4 + step)
            view.show(state)
        state["sessions"][1].update(live_status="stopped", current_step="stopped", blocker_code="")
        state["status"] = "cleaned_up"
        view.show(state)
    assert terminal.getvalue().count("run run-7  status") >= 6  # six pictures drawn ...
    screen = on_screen(terminal.getvalue())
    assert [line for line in screen if "run-7" in line] == [  # ... one left on the screen
        "run run-7  status cleaned_up  ·  2 working, 1 ready, 1 session_completed, 1 stopped"
    ]
    assert len(screen) == len(first)  # the same lines, rewritten: nothing scrolled
    assert screen[3].split() == ["curator", "Bo", "stopped", "0"]
    assert screen[-2].split() == ["planner", "Ada", "working", "step3", "7"]
