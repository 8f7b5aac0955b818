"""Loading aggregates within one command: each once, and each saved once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Loader = Callable[[str], Any]
"""Answers the aggregate with this id, or None."""


def one_copy(load: Loader) -> Loader:
    """``load`` remembered per id, so two effects on one aggregate share a copy."""
    loaded: dict[str, Any] = {}

    def load_once(aggregate_id: str) -> Any:
        if aggregate_id not in loaded:
            loaded[aggregate_id] = load(aggregate_id)
        return loaded[aggregate_id]

    return load_once


def unique(aggregates: list[Any]) -> list[Any]:
    """Each aggregate once, in first-seen order (one save per command)."""
    return list({id(a): a for a in aggregates}.values())
