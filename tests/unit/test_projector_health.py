"""A projector's state from its position, the log's head and runners' heartbeats."""

from __future__ import annotations

import pytest

from projections.engine.health import (
    BEHIND,
    NOT_RUNNING,
    OK,
    ReadModelHealth,
    assess,
    seconds_since,
)
from projections.engine.heartbeat import Beat
from workers.settings import SettingsError, load_settings

NAMES = ("runs", "fleet")


def states(log: int, positions: dict[str, int], beats: list[Beat], pending_age: float = 0.0) -> dict[str, str]:
    report = assess(NAMES, log, positions, beats, lambda _p: pending_age, stale_seconds=10, max_lag_seconds=5)
    return {p.name: p.state for p in report}


def beat(age: float, *names: str) -> Beat:
    return Beat("host:1:abc", names or NAMES, 0, age)


def test_no_runner_ever_beat_is_not_running_even_when_caught_up() -> None:
    assert states(0, {}, []) == {"runs": NOT_RUNNING, "fleet": NOT_RUNNING}


def test_a_stale_heartbeat_is_a_runner_that_died() -> None:
    assert states(9, {"runs": 9, "fleet": 9}, [beat(10.5)]) == {"runs": NOT_RUNNING, "fleet": NOT_RUNNING}


def test_a_runner_counts_only_for_the_projectors_it_runs() -> None:
    assert states(9, {"runs": 9, "fleet": 9}, [beat(0.2, "runs")]) == {"runs": OK, "fleet": NOT_RUNNING}


def test_lag_within_the_bound_is_ok_beyond_it_behind() -> None:
    assert states(20, {"runs": 10, "fleet": 20}, [beat(0.2)], pending_age=4.0) == {"runs": OK, "fleet": OK}
    assert states(20, {"runs": 10, "fleet": 20}, [beat(0.2)], pending_age=6.0) == {"runs": BEHIND, "fleet": OK}


def test_the_report_names_why_reads_cannot_be_trusted() -> None:
    report = assess(NAMES, 20, {"runs": 10, "fleet": 20}, [beat(0.2)], lambda _p: 7.5, stale_seconds=10, max_lag_seconds=5)
    health = ReadModelHealth(20, {"runs": 10, "fleet": 20}, report)
    code, detail = health.problem()
    assert health.degraded and code == "read_model_lagging" and "runs" in detail and "10 events" in detail
    runs = report[0]
    assert (runs.lag, runs.lag_seconds, runs.running) == (10, 7.5, True)


def test_event_ages() -> None:
    assert seconds_since("1970-01-01T00:00:10.000000Z", 12.5) == 2.5
    assert seconds_since("not a time", 12.5) == -1.0


def test_a_runner_must_beat_several_times_before_it_counts_as_gone() -> None:
    with pytest.raises(SettingsError):
        load_settings({"SQUADOPS_PROJECTOR_HEARTBEAT_SECONDS": "5", "SQUADOPS_PROJECTOR_STALE_SECONDS": "5"})
    settings = load_settings({"SQUADOPS_MIN_POSITION_WAIT_SECONDS": "0.5"})
    assert settings.min_position_wait_seconds == 0.5 and settings.projector_stale_seconds == 10.0
