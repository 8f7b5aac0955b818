"""Bounded exponential backoff for workers and followers that retry a failing dependency."""

from __future__ import annotations


def backoff(failures: int, base: float = 0.1, cap: float = 5.0) -> float:
    """Seconds to wait after ``failures`` consecutive failures: doubling, at most ``cap``."""
    return min(cap, base * 2 ** min(failures, 10))
