"""A project's pull request numbers (``domain.projects.pull_numbers``): 1, 2, 3… per project,
never one number twice, even when two runs open pull requests at once; and the numbers the
pulls read model gives pull requests recorded before numbering (``assign_number``)."""

from __future__ import annotations

import threading

import pytest
from eventsourcing.persistence import RecordConflictError
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from domain.projects.pull_numbers import PullNumbers, pull_numbers_key
from domain.shared.event_store import EventStore
from domain.studio.events import PullRequestOpened
from projections.projects.pulls import assign_number


def opened(pr_number: int, project_number: int = 0) -> PullRequestOpened:
    return PullRequestOpened(  # type: ignore[call-arg]
        originator_id="ses:t:r:s:a", originator_version=1, timestamp=None, pr_url="", pr_owner="o", pr_repo="r",
        pr_number=pr_number, repository_key="backend", at="", project_number=project_number,
    )


class Numbering(RuleBasedStateMachine):
    """Writers of one project allocating from their own copies: a save on a stale copy is
    refused; a writer that lost loads the winner's and allocates again."""

    def __init__(self) -> None:
        super().__init__()
        self.store = EventStore()
        self.store.save(PullNumbers(tenant="t", project_slug="p", after=0))
        self.copies: dict[int, PullNumbers] = {}
        self.given: list[int] = []

    @rule(writer=st.integers(0, 2))
    def load(self, writer: int) -> None:
        self.copies[writer] = self.store.repository.get(pull_numbers_key("t", "p"))

    @precondition(lambda self: bool(self.copies))
    @rule(data=st.data())
    def allocate_and_save(self, data: st.DataObject) -> None:
        writer = data.draw(st.sampled_from(sorted(self.copies)))
        copy = self.copies.pop(writer)
        number = copy.allocate(run_id=f"run-{writer}", agent_id="backend", session_id="s", at="")
        stale = copy.version - 1 != self.store.repository.get(copy.id).version
        if stale:
            with pytest.raises(RecordConflictError):
                self.store.save(copy)
        else:
            self.store.save(copy)
            self.given.append(number)

    @invariant()
    def numbers_are_one_two_three(self) -> None:
        assert self.given == list(range(1, len(self.given) + 1))


TestNumbering = Numbering.TestCase


def test_numbering_starts_after_the_numbers_the_projects_pages_hold() -> None:
    numbers = PullNumbers(tenant="t", project_slug="p", after=437)
    assert [numbers.allocate(run_id="r", agent_id=a, session_id="s", at="") for a in "abc"] == [438, 439, 440]


def test_two_runs_opening_at_once_get_two_numbers() -> None:
    """Threads racing on one project's numbering through ``retrying``: every save that
    succeeded allocated its own number, and they are 1..n."""
    store = EventStore()
    store.save(PullNumbers(tenant="t", project_slug="p", after=0))
    got: list[int] = []
    barrier = threading.Barrier(6)

    def open_one(n: int) -> None:
        barrier.wait()

        def command() -> int:
            numbers = store.repository.get(pull_numbers_key("t", "p"))
            number = numbers.allocate(run_id=f"run-{n}", agent_id="backend", session_id="s", at="")
            store.save(numbers)
            return number

        got.append(store.retrying(command))

    threads = [threading.Thread(target=open_one, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(got) == [1, 2, 3, 4, 5, 6]


@given(st.lists(st.integers(-1, 12), max_size=30), st.integers(0, 5))
def test_numbers_given_on_replay_are_unique_and_the_same_every_time(legacy: list[int], numbered: int) -> None:
    """Older pull requests (only the plane's number, repeating, even 0) and then numbered ones
    (after the highest, as ``PullNumbers`` starts): no two share a page, a free plane number
    is kept, a numbered one keeps its number, and folding again gives the same numbers."""

    def fold() -> list[int]:
        numbers: dict = {"highest": 0, "taken": []}
        given = [assign_number(numbers, opened(n)) for n in legacy]
        start = numbers["highest"]
        given += [assign_number(numbers, opened(500, start + k)) for k in range(1, numbered + 1)]
        return given

    given = fold()
    assert len(set(given)) == len(given) and all(n >= 1 for n in given) and given == fold()
    seen: set[int] = set()
    for plane, number in zip(legacy, given, strict=False):
        if plane >= 1 and plane not in seen:
            assert number == plane
        seen.add(number)
    assert given[len(legacy):] == list(range(max(given[: len(legacy)], default=0) + 1, max(given[: len(legacy)], default=0) + numbered + 1))
