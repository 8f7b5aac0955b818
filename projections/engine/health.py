"""Whether read models are being kept current: each projector's lag and liveness.

A projector is ``not_running`` when no runner has beaten for it within the staleness
bound, and ``behind`` when the oldest event it has not folded yet is older than the lag
bound. Either makes the service degraded: commands are recorded, reads do not show them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from projections.engine.heartbeat import Beat, Heartbeats
from projections.engine.runner import NotificationSource
from projections.engine.store import DocStore

OK, BEHIND, NOT_RUNNING = "ok", "behind", "not_running"


@dataclass(frozen=True)
class ProjectorHealth:
    name: str
    position: int
    lag: int  # log position minus the projector's position
    lag_seconds: float  # age of the oldest event not folded yet; 0 when caught up
    running: bool
    heartbeat_age_seconds: float  # -1 when no runner ever beat for it
    state: str


@dataclass(frozen=True)
class ReadModelHealth:
    log_position: int
    positions: dict[str, int]
    projectors: tuple[ProjectorHealth, ...]

    @property
    def degraded(self) -> bool:
        return any(p.state != OK for p in self.projectors)

    def problem(self) -> tuple[str, str]:
        """``(code, sentence)`` for an answer that says why reads cannot be trusted."""
        stopped = [p.name for p in self.projectors if p.state == NOT_RUNNING]
        behind = [p for p in self.projectors if p.state == BEHIND]
        if stopped:
            return "projector_not_running", (
                f"No projector is running for {', '.join(stopped)}: read models do not follow the log "
                f"(position {self.log_position})."
            )
        if behind:
            worst = max(behind, key=lambda p: p.lag_seconds)
            return "read_model_lagging", (
                f"Read models are behind the log: {', '.join(p.name for p in behind)} "
                f"(up to {worst.lag} events, {worst.lag_seconds:.1f} s)."
            )
        return "", ""


def seconds_since(at: str, now: float) -> float:
    """Age of an event timestamp (``2026-01-02T03:04:05.000006Z``); -1 when unreadable."""
    try:
        return max(0.0, now - datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return -1.0


def assess(
    names: Sequence[str],
    log_position: int,
    positions: dict[str, int],
    beats: Sequence[Beat],
    oldest_pending: Callable[[int], float],
    *,
    stale_seconds: float,
    max_lag_seconds: float,
) -> tuple[ProjectorHealth, ...]:
    """Each named projector's state; ``oldest_pending(p)`` ages the first event after ``p``."""
    ages: dict[int, float] = {}
    report = []
    for name in names:
        position = positions.get(name, 0)
        lag = max(0, log_position - position)
        if lag and position not in ages:
            ages[position] = oldest_pending(position)
        lag_seconds = ages.get(position, 0.0) if lag else 0.0
        mine = [b.age_seconds for b in beats if name in b.projectors]
        heartbeat_age = min(mine, default=-1.0)
        running = 0.0 <= heartbeat_age <= stale_seconds
        if not running:
            state = NOT_RUNNING
        elif lag_seconds > max_lag_seconds:
            state = BEHIND
        else:
            state = OK
        report.append(ProjectorHealth(name, position, lag, lag_seconds, running, heartbeat_age, state))
    return tuple(report)


class HealthProbe:
    """Gathers what ``assess`` needs from the log, the read models and the heartbeats."""

    def __init__(
        self,
        store: DocStore,
        source: NotificationSource,
        heartbeats: Heartbeats,
        names: Sequence[str],
        *,
        stale_seconds: float,
        max_lag_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.source = source
        self.heartbeats = heartbeats
        self.names = tuple(names)
        self.stale_seconds = stale_seconds
        self.max_lag_seconds = max_lag_seconds
        self.clock = clock

    def oldest_pending(self, position: int) -> float:
        envs = self.source.read(position + 1, 1)
        return seconds_since(envs[0].at, self.clock()) if envs else 0.0

    def check(self) -> ReadModelHealth:
        log_position = self.source.max_position()
        positions = self.store.positions()
        projectors = assess(
            self.names,
            log_position,
            positions,
            self.heartbeats.beats(),
            self.oldest_pending,
            stale_seconds=self.stale_seconds,
            max_lag_seconds=self.max_lag_seconds,
        )
        return ReadModelHealth(log_position, positions, projectors)

    def alive(self) -> bool:
        """Whether some runner keeps every named read model current (fresh heartbeats)."""
        fresh = [b for b in self.heartbeats.beats() if b.age_seconds <= self.stale_seconds]
        return all(any(name in b.projectors for b in fresh) for name in self.names)
