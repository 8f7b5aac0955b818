"""``squadops runs watch`` in a real terminal: a pty of a fixed size, its screen read with pyte.

The service runs in a subprocess (``squadops serve``), the watch in another, attached to the
pty as a user's shell would attach it. What the test reads is the emulated screen: the
table must be redrawn where it stands, not scrolled, and end as the run ended.
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import httpx
import pyte

from tests.conftest import ADMIN
from tests.helpers import eventually
from tests.live_helpers import STUDIO, create_project_and_launch, live_settings, served_process
from workers.watch_view import rows

COLUMNS, LINES = 120, 40


class Terminal:
    """One command on a pseudo-terminal of ``COLUMNS`` x ``LINES``; its screen as pyte shows it."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
        self.process = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=Path(__file__).resolve().parents[2]
        )
        os.close(slave)
        self.screen = pyte.Screen(COLUMNS, LINES)
        self.stream = pyte.ByteStream(self.screen)
        self.output = bytearray()
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: the command ended and closed its side
                return
            if not chunk:
                return
            with self.lock:
                self.output += chunk
                self.stream.feed(chunk)

    def lines(self) -> list[str]:
        """The screen's non-blank lines, top to bottom."""
        with self.lock:
            return [line.rstrip() for line in self.screen.display if line.strip()]

    def drawn(self, text: str) -> int:
        """How many times ``text`` was written to the terminal, whatever the screen shows now."""
        with self.lock:
            return self.output.decode(errors="replace").count(text)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)
        self.reader.join(5)
        os.close(self.master)


def table(lines: list[str]) -> list[list[str]]:
    """The agents' rows below the header, the column names and the rule, as words.

    Empty while the screen holds no whole table (the first picture not yet drawn, or a
    redraw read halfway through).
    """
    if len(lines) < 4 or lines[1].split() != ["role", "nickname", "state", "tool", "calls", "blocker"]:
        return []
    return [line.split() for line in lines[3:]]


def test_watch_redraws_the_table_in_place_and_leaves_the_run_as_it_ended(sqlite_url: str) -> None:
    with served_process(live_settings(sqlite_url), tick_seconds=0.05) as url, httpx.Client(
        base_url=url, headers=ADMIN, timeout=30
    ) as http:
        run_id = create_project_and_launch(http)
        header = f"run {run_id}  status "
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env.update(SQUADOPS_BASE_URL=url, SQUADOPS_LOG_LEVEL="warning", TERM="xterm-256color")
        terminal = Terminal([sys.executable, "-m", "workers.cli", "runs", "watch", run_id], env)

        def whole() -> list[str] | None:
            lines = terminal.lines()
            return lines if table(lines) and lines[0].startswith(header) else None

        try:
            first = eventually(whole)
            assert first[0].startswith(header + "ready")
            agents = len(http.get(f"{STUDIO}/runs/{run_id}/session-state").json()["sessions"])
            assert len(table(first)) == agents and {row[2] for row in table(first)} == {"ready"}

            assert http.post(f"{STUDIO}/runs/{run_id}/execute").status_code == 202
            eventually(lambda: any(row[2] == "working" for row in table(terminal.lines())), timeout=30)
            http.post(f"{STUDIO}/runs/{run_id}/cleanup", json={"reason": "watched enough"})
            assert terminal.process.wait(30) == 0
            terminal.reader.join(5)
            ended = http.get(f"{STUDIO}/runs/{run_id}/session-state").json()
            screen = terminal.lines()
        finally:
            terminal.close()

    assert terminal.drawn(header) >= 3  # several pictures were drawn ...
    assert [line for line in screen if header in line] == [screen[0]]  # ... in one place
    assert screen[0].startswith(header + ended["status"]) and ended["status"] in ("cleaned_up", "completed")
    assert table(screen) == [[cell for cell in row if cell] for row in rows(ended)]  # and nothing else
