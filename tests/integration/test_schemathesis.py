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
runs coverage and fuzzing; test_schemathesis_stateful.py the stateful phase, on a service
of its own, so the two run on different xdist workers at once (tests/schemathesis_engine.py).

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

import pytest
from litestar import Litestar

from tests.schemathesis_engine import Outcome, load_schema, run_engine, service_at
from workers.bootstrap import Container


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Litestar, Container]]:
    with service_at(tmp_path_factory.mktemp("schemathesis") / "squadops.db") as found:
        yield found


@pytest.fixture(scope="module")
def outcome(service: tuple[Litestar, Container]) -> Outcome:
    """Coverage and fuzzing over every operation."""
    schema = load_schema(service[0], "coverage", "fuzzing")
    result = run_engine(schema)
    result.operations = {r.ok().label for r in schema.get_all_operations()}
    return result


def test_no_generated_request_fails_any_check(outcome: Outcome) -> None:
    assert not outcome.failures, "\n\n".join(outcome.failures[:10])


def test_every_operation_was_called_and_reached_past_validation(outcome: Outcome) -> None:
    assert {label for label, _ in outcome.answered} == outcome.operations
    statuses = {status for _, status in outcome.answered}
    assert {200, 201, 202, 404, 409, 422} <= statuses, sorted(statuses)
