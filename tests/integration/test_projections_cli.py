"""``squadops projections list|status|rebuild``, run as the command line runs it."""

from __future__ import annotations

import pytest

from tests.conftest import settings_for
from tests.feed_scenarios import apply_all, launch
from workers.bootstrap import build, read_projectors
from workers.cli import main

STEPS = [
    ("join", "backend", 0),
    ("advance", 0, 4, 5, "backend", (0.5, 100, 2, "success")),
    ("advance", 2, 8, 9, "backend", (0.7, 300, 5, "success")),
    ("block", 1, "sandbox_missing"),
]


@pytest.fixture
def projected(database_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("SQUADOPS_DATABASE_URL", database_url)
    monkeypatch.setenv("SQUADOPS_LOG_LEVEL", "warning")
    container = build(settings_for(database_url))
    try:
        scenario = launch(container, {"project_key": "acme"})
        apply_all(scenario, STEPS)
        while container.runner.run_once():
            pass
    finally:
        container.close()
    return database_url


def test_list_names_every_read_model(projected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["projections", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [p.name for p in read_projectors()]
    assert all(line.split()[1] == f"rm_{line.split()[0]}" for line in lines)


def test_status_shows_positions_and_lag(projected: str, capsys: pytest.CaptureFixture[str]) -> None:
    container = build(settings_for(projected))
    try:
        extra = container.projects.create_project(tenant="default", request={"project_key": "late"}, created_by="op@x")
        assert extra is not None
        head = container.event_store.max_position()
    finally:
        container.close()
    assert main(["projections", "status"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"event log position {head}"
    rows = {line.split()[0]: line.split()[1:] for line in out[2:]}
    for projector in read_projectors():
        position, lag = rows[projector.name][:2]
        assert int(position) == head - 1 and int(lag) == 1  # one event appended since


def test_rebuild_one_and_all_restores_what_live_projection_wrote(
    projected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    container = build(settings_for(projected))
    try:
        store = container.store
        before = {p.name: store.dump(p.name) for p in read_projectors()}
        key = before["pixels"][0].key
        store.commit("pixels", store.position("pixels"), store.position("pixels"), [], [key])  # a lost row
        assert store.get("pixels", key) is None
    finally:
        container.close()
    assert main(["projections", "rebuild", "pixels"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("rebuilt pixels: ")
    assert "events/s" in captured.out
    bar = captured.err.splitlines()  # not a terminal: the bar's tenths, one line each, then its end
    assert bar and all(line.startswith("rebuild ") for line in bar)
    assert "100.0%" in bar[-1] and "events/s" in bar[-1] and "100.0%" not in "".join(bar[:-1])
    assert main(["projections", "rebuild", "--all"]) == 0
    assert capsys.readouterr().out.startswith("rebuilt " + ", ".join(p.name for p in read_projectors()))
    container = build(settings_for(projected))
    try:
        assert {p.name: container.store.dump(p.name) for p in read_projectors()} == before
    finally:
        container.close()
    assert main(["projections", "rebuild"]) == 2
    assert main(["projections", "rebuild", "pixels", "--all"]) == 2
    assert main(["projections", "rebuild", "nope"]) == 2
    assert "unknown read model 'nope'" in capsys.readouterr().err
