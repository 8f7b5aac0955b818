"""``squadops runs watch RUN_ID`` follows the run over the live channel until it ends."""

from __future__ import annotations

import threading

import httpx
import pytest

from tests.conftest import ADMIN
from tests.helpers import eventually
from tests.live_helpers import STUDIO, create_project_and_launch, live_settings, served
from workers import cli

pytestmark = pytest.mark.nats


def test_watch_prints_the_run_as_events_arrive_and_exits_when_it_is_cleaned_up(
    sqlite_url: str, nats_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with served(live_settings(sqlite_url, nats_url)) as server, httpx.Client(
        base_url=server.url, headers=ADMIN, timeout=30
    ) as http:
        run_id = create_project_and_launch(http)
        monkeypatch.setenv("SQUADOPS_BASE_URL", server.url)
        printed: list[str] = []
        monkeypatch.setattr("builtins.print", lambda *parts, **_: printed.append(" ".join(map(str, parts))))
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

        eventually(lambda: any(f"run {run_id}  status ready" in p for p in printed), timeout=10)
        assert http.post(f"{STUDIO}/runs/{run_id}/execute").status_code == 202
        eventually(lambda: any("tools" in p and "status running" in p for p in printed), timeout=10)
        http.post(f"{STUDIO}/runs/{run_id}/cleanup", json={"reason": "watched enough"})
        watcher.join(timeout=15)

    assert exit_code == [0]
    pictures = [p for p in printed if p.startswith(f"run {run_id}")]
    assert len(pictures) >= 3  # the first picture, then changes as events came
    assert "status cleaned_up" in pictures[-1] or "status completed" in pictures[-1]
    assert "stopped" in pictures[-1] or "session_completed" in pictures[-1]
    # Updated from events, not by polling: more pictures than session-state reads.
    assert len(state_reads) < len(pictures)
    assert len(set(pictures)) == len(pictures)
