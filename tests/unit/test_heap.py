"""The serving processes set their startup heap aside from the cyclic collector (workers/heap.py)."""

from __future__ import annotations

import gc
import weakref

from workers.heap import YOUNG_THRESHOLD, collect_young_less_often, freeze_startup_heap


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector reclaims it


def test_what_startup_built_is_frozen_and_garbage_is_collected_first() -> None:
    built_at_startup = [[n] for n in range(100)]  # lists: always tracked by the collector
    garbage = _Node()
    gone = weakref.ref(garbage)
    del garbage
    try:
        frozen = freeze_startup_heap()
        assert gone() is None  # collected before freezing: not kept for the process's life
        # (Frozen objects freed since, by another thread of this worker, leave the count.)
        assert frozen >= gc.get_freeze_count() > len(built_at_startup)
        walked = {id(o) for o in gc.get_objects()}  # what a collection of any generation walks
        assert id(built_at_startup) not in walked
        assert not any(id(route) in walked for route in built_at_startup)
        made_after = [[0]]
        assert id(made_after) in {id(o) for o in gc.get_objects()}
    finally:
        gc.unfreeze()
    assert id(built_at_startup) in {id(o) for o in gc.get_objects()}


def test_the_youngest_generation_is_collected_less_often_and_the_older_ones_as_before() -> None:
    before = gc.get_threshold()
    try:
        assert collect_young_less_often() == (YOUNG_THRESHOLD, before[1], before[2]) == gc.get_threshold()
        assert before[0] < YOUNG_THRESHOLD
        # A pass's worth of objects alive at once (7 young collections at Python's 700).
        gc.collect(0)
        collections = gc.get_stats()[0]["collections"]
        held = [[n] for n in range(YOUNG_THRESHOLD // 2)]
        assert gc.get_stats()[0]["collections"] == collections
        del held
    finally:
        gc.set_threshold(*before)
