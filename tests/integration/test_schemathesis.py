"""schemathesis over every operation of the app's own /openapi.json, with every default check.

schemathesis' own engine, phase after phase as ``st run`` runs them: coverage and fuzzing
(positive and negative data) on every operation, then stateful sequences that follow the
document's links (schemathesis' state machine, ``schema.as_state_machine`` inside the
engine): a project's slug to a launch, a launch's run_id to the run's reads, execute,
control and session state ...
Zero failures of any kind: no 5xx, only documented statuses, bodies and content types as
documented, schema-valid requests accepted, invalid ones refused, created runs readable.
Bounded for CI: a fixed seed, deterministic generation, a few examples per operation
(about 55 operations; coverage about 40 s of CPU, fuzzing 15 s, stateful 20 s). This module
runs coverage and fuzzing, in two halves of the operations (two classes);
test_schemathesis_stateful.py the stateful phase; each part on a service of its own, so the
three run on different xdist workers at once (tests/schemathesis_engine.py).

The stateful phase runs as its own engine run, so that what it explores depends on the
seed and the API's answers only, not on what the earlier phases happened to learn:
- the document's links only (no inferred links) and no link calibration (which adapts
  to answers as they come);
- tests/schemathesis_rules.py makes each sequence create projects of its own and launch
  in a project that exists, so a replayed first step answers as it did the first time
  (else Hypothesis ends the phase early as "inconsistent data generation") and a
  launch leads somewhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.schemathesis_engine import Outcome, load_schema, run_engine, service_at


class CoverageAndFuzzing:
    """Coverage and fuzzing over one half of the operations (``half``), on its own service.
    Each half is a class of its own (below), so ``--dist loadscope`` runs them at once."""

    # The class's outcome is built in its first test's setup (about a minute on an idle
    # 2-core machine); a machine shared by several suites at once takes several times that.
    pytestmark = pytest.mark.timeout(600)
    half = ""
    # The statuses past validation this half's operations answer (the two halves together:
    # 200, 201, 202, 404, 409 and 422, as the whole run answered).
    reached: frozenset[int] = frozenset()

    @pytest.fixture(scope="class")
    @classmethod
    def outcome(cls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
        with service_at(tmp_path_factory.mktemp(f"schemathesis-{cls.half}") / "squadops.db") as (app, _):
            schema = load_schema(app, "coverage", "fuzzing", half=cls.half)
            result = run_engine(schema)
            result.operations = {r.ok().label for r in schema.get_all_operations()}
            yield result

    def test_no_generated_request_fails_any_check(self, outcome: Outcome) -> None:
        assert not outcome.failures, "\n\n".join(outcome.failures[:10])

    def test_every_operation_was_called_and_reached_past_validation(self, outcome: Outcome) -> None:
        assert {label for label, _ in outcome.answered} == outcome.operations
        statuses = {status for _, status in outcome.answered}
        assert self.reached <= statuses, sorted(statuses)


class TestAdminAndControlPlane(CoverageAndFuzzing):
    half = "studio"
    # (A drawn launch names no project: 404; the other half creates projects, 201.)
    reached = frozenset({200, 404, 409, 422})


class TestEveryOtherOperation(CoverageAndFuzzing):
    half = "rest"
    reached = frozenset({200, 201, 202, 404, 409, 422})


def test_the_halves_hold_every_operation_once(tmp_path: Path) -> None:
    with service_at(tmp_path / "squadops.db") as (app, _):
        every = [r.ok().label for r in load_schema(app, "coverage").get_all_operations()]
        halves = [r.ok().label for half in ("studio", "rest") for r in load_schema(app, "coverage", half=half).get_all_operations()]
    assert sorted(halves) == sorted(every)
    assert len(every) >= 50
