"""``squadops runs watch RUN_ID`` follows the run over the live channel until it ends."""

from __future__ import annotations

import threading

import httpx
import pytest

from tests.conftest import ADMIN
from tests.helpers import eventually
from tests.live_helpers import STUDIO, create_project_and_launch, live_settings, served
from workers import cli
from workers.watch_view import rows

pytestmark = pytest.mark.nats


def table(picture: str) -> list[list[str]]:
    """The agents' rows of one printed picture, as words (empty cells drop out)."""
    lines = [line for line in picture.splitlines()[1:] if line.strip() and "─" not in line]
    assert lines[0].split() == ["role", "nickname", "state", "tool", "calls", "blocker"]
    return [line.split() for line in lines[1:]]


def test_watch_prints_the_run_as_events_arrive_and_exits_when_it_is_cleaned_up(
    sqlite_url: str, nats_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with served(live_settings(sqlite_url, nats_url)) as server, httpx.Client(
        base_url=server.url, headers=ADMIN, timeout=30
    ) as http:
        run_id = create_project_and_launch(http)
        monkeypatch.setenv("SQUADOPS_BASE_URL", server.url)
        printed: list[str] = []

        def pictures() -> list[str]:
            """Every picture printed so far (stdout is not a terminal here: one after another)."""
            printed.append(capsys.readouterr().out)
            return [f"run {run_id}  status {p}" for p in "".join(printed).split(f"run {run_id}  status ")[1:]]

        state_reads: list[str] = []
        real_get = httpx.Client.get

        def counting_get(self: httpx.Client, url: str, *args: object, **kwargs: object) -> httpx.Response:
            if str(url).endswith("/session-state"):
                state_reads.append(str(url))
            return real_get(self, url, *args, **kwargs)

        monkeypatch.setattr(httpx.Client, "get", counting_get)
        exit_code: list[int] = []
        watcher = threading.Thread(target=lambda: exit_code.append(cli.main(["runs", "watch", run_id])))
        watcher.start()

        eventually(lambda: pictures() and f"run {run_id}  status ready" in pictures()[0], timeout=10)
        first = table(pictures()[0])
        assert first and {row[2] for row in first} == {"ready"}  # every agent, before it starts
        assert http.post(f"{STUDIO}/runs/{run_id}/execute").status_code == 202

        def working() -> bool:
            return any(
                "status running" in p and any(row[2] in ("working", "waiting_first_tool") for row in table(p))
                for p in pictures()
            )

        eventually(working, timeout=10)
        http.post(f"{STUDIO}/runs/{run_id}/cleanup", json={"reason": "watched enough"})
        watcher.join(timeout=15)
        ended = real_get(http, f"{STUDIO}/runs/{run_id}/session-state").json()

    assert exit_code == [0]
    shown = pictures()
    assert len(shown) >= 3  # the first picture, then changes as events came
    last = shown[-1]
    assert last.startswith(f"run {run_id}  status {ended['status']}")
    assert ended["status"] in ("cleaned_up", "completed")
    # the last picture is the run's end state, agent by agent, grouped by role
    assert table(last) == [[cell for cell in row if cell] for row in rows(ended)]
    assert {row[2] for row in table(last)} <= {"stopped", "session_completed"}
    # Updated from events, not by polling: more pictures than session-state reads.
    assert len(state_reads) < len(shown)
    # Each change is printed once: no picture repeats the one before it (a squad may come
    # back to an earlier picture, as when a blocked agent resumes the same tool).
    assert all(before != after for before, after in zip(shown, shown[1:], strict=False))
