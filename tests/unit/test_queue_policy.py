"""pendingRunExecution is FIFO by requested_at: older scheduled runs are never starved."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from domain.studio.policies.queue import QueueEntry, pick_runs

entries = st.lists(
    st.builds(
        QueueEntry,
        requested_at=st.integers(0, 50).map(lambda n: f"2026-01-01T00:00:{n:02d}.000000Z"),
        tenant=st.sampled_from(["default", "other"]),
        run_id=st.text("abcdef0123", min_size=3, max_size=6),
        status=st.sampled_from(["scheduled", "running"]),
    ),
    max_size=30,
    unique_by=lambda e: (e.tenant, e.run_id),
)


@given(entries, st.integers(0, 12))
def test_started_runs_are_the_oldest_scheduled_ones(queue: list[QueueEntry], capacity: int) -> None:
    running, to_start = pick_runs(queue, capacity)
    assert len(running) + len(to_start) <= max(capacity, 0)
    waiting = [e for e in queue if e.status == "scheduled" and e not in to_start]
    for started in to_start:
        for left in waiting:
            assert (started.requested_at, started.tenant, started.run_id) <= (left.requested_at, left.tenant, left.run_id)


@given(entries, st.integers(0, 12))
def test_running_runs_keep_their_slots(queue: list[QueueEntry], capacity: int) -> None:
    running, to_start = pick_runs(queue, capacity)
    all_running = [e for e in queue if e.status == "running"]
    assert len(running) == min(len(all_running), capacity)
    if len(all_running) >= capacity:
        assert to_start == []


def test_a_newer_kick_does_not_jump_the_queue() -> None:
    older = QueueEntry("2026-01-01T00:00:01.000000Z", "default", "run-a", "scheduled")
    newer = QueueEntry("2026-01-01T00:00:02.000000Z", "default", "run-b", "scheduled")
    _, to_start = pick_runs([newer, older], capacity=1)
    assert to_start == [older]
