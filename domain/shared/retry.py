"""Bounded exponential backoff for workers and followers that retry a failing dependency,
and the jittered pause between retries of a command that lost an optimistic-concurrency race."""

from __future__ import annotations

import random


def backoff(failures: int, base: float = 0.1, cap: float = 5.0) -> float:
    """Seconds to wait after ``failures`` consecutive failures: doubling, at most ``cap``."""
    return min(cap, base * 2 ** min(failures, 10))


def conflict_pause(conflicts: int, base: float = 0.002, cap: float = 0.05) -> float:
    """Seconds to wait before retrying a command after ``conflicts`` lost races: a random
    ("full jitter") share of a doubling bound, so contenders that collided spread out
    instead of colliding again in lockstep."""
    return random.uniform(0.0, min(cap, base * 2 ** min(conflicts, 10)))  # noqa: S311 (not a secret)
