"""Rebuild groups: every read model in exactly one process, the costly ones spread out; each
process's memory budget."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from workers.rebuild import groups, memory_bytes
from workers.settings import load_settings

NAMES = ["runs", "projects", "workspace_mirror", "pixels", "surfaces", "log_dock", "fleet", "later_model"]


@given(names=st.lists(st.sampled_from(NAMES), min_size=1, unique=True), workers=st.integers(min_value=1, max_value=6))
def test_every_read_model_lands_in_exactly_one_group(names: list[str], workers: int) -> None:
    parts = groups(names, workers)
    assert 0 < len(parts) <= min(workers, len(names))
    assert sorted(n for part in parts for n in part) == sorted(names)
    assert all(part for part in parts)


def test_the_heavy_read_models_are_split_across_two_processes() -> None:
    first, second = groups(NAMES[:7], 2)
    assert {"runs", "pixels"} <= set(first) | set(second)
    assert not {"runs", "pixels", "log_dock"} <= set(first)
    assert not {"runs", "pixels", "log_dock"} <= set(second)


def test_the_memory_budget_of_a_rebuild_process_is_read_from_its_setting() -> None:
    assert memory_bytes(load_settings({})) == 64 << 20
    assert memory_bytes(load_settings({"SQUADOPS_REBUILD_MEMORY_MIB": "64"})) == 64 << 20
    assert memory_bytes(load_settings({"SQUADOPS_REBUILD_MEMORY_MIB": "0"})) is None  # no bound
