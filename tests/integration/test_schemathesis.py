"""schemathesis over every operation of the app's own /openapi.json, with every default check.

schemathesis' own engine, phase after phase as ``st run`` runs them: coverage and fuzzing
(positive and negative data) on every operation, then stateful sequences that follow the
document's links (schemathesis' state machine, ``schema.as_state_machine`` inside the
engine): a project's slug to a launch, a launch's run_id to the run's reads, execute,
control and session state ...
Zero failures of any kind: no 5xx, only documented statuses, bodies and content types as
documented, schema-valid requests accepted, invalid ones refused, created runs readable.
Bounded for CI: a fixed seed, deterministic generation, a few examples per operation
(about 55 operations; the whole module takes about 1 minute of CPU, 1.5-2.5 minutes of
wall time on a loaded 2-core machine).

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

from collections import Counter
from collections.abc import Iterator
from typing import Any

import jsonschema_rs
import pytest
import schemathesis
from litestar import Litestar
from schemathesis.engine import events
from schemathesis.hooks import GLOBAL_HOOK_DISPATCHER

from api.app import create_app
from tests.conftest import ADMIN, settings_for
from tests.schemathesis_rules import before_call
from workers.bootstrap import Container, build
from workers.cli import seed_demo

SEED = 20261122
MAX_EXAMPLES = 8
STATEFUL_SCENARIOS = 100  # fewer leave following a launch's links to the luck of the seed
LAUNCH = "POST /v1/admin/studio/runs"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Litestar, Container]]:
    database = tmp_path_factory.mktemp("schemathesis") / "squadops.db"
    # A command waits for read models to include it while the projector lives (bounded):
    # under load that can take longer than the default 2 s, and a run the launch answered
    # must be readable by the link that follows it.
    container = build(settings_for(f"sqlite:///{database}", min_position_wait_seconds=20.0))
    seed_demo(container.projects)
    container.start(("projector",))  # commands answer once read models include them
    # case.call() runs global before_call hooks only: registered for this module's tests.
    GLOBAL_HOOK_DISPATCHER.register_hook_with_name(before_call, "before_call")
    try:
        yield create_app(container, workers=()), container
    finally:
        GLOBAL_HOOK_DISPATCHER.unregister(before_call)
        container.close()


# Every operation of the document: health, studio, control plane, project factory, portal,
# developer workspaces and the usage meter, jobs, sync and identity, gate. (The pages and
# /mcp, JSON-RPC, are not in the OpenAPI document: tests/integration/test_web_* and
# test_mcp_* cover them.)
COVERED = r"^/"


def load_schema(app: Litestar, *phases: str) -> Any:
    schema = schemathesis.openapi.from_asgi("/openapi.json", app).include(path_regex=COVERED)
    schema.config.update(headers=dict(ADMIN))
    schema.config.seed = SEED
    schema.config.generation.update(max_examples=MAX_EXAMPLES, deterministic=True)
    schema.config.phases.update(phases=list(phases))
    return schema


class Outcome:
    """What one engine run reported: failures, statuses per operation, links followed."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.answered: Counter[tuple[str, int]] = Counter()
        self.followed: Counter[str] = Counter()
        self.operations: set[str] = set()


def body_fits_document(document: dict[str, Any], case: Any) -> bool:
    """Whether ``case``'s JSON body is valid against the request body schema the document
    gives its operation (a 'negative' case that is not negative)."""
    operation = document["paths"].get(case.operation.path, {}).get(case.method.lower(), {})
    schema = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if schema is None:
        return False
    root = {**schema, "components": document.get("components", {})}
    return bool(jsonschema_rs.Draft202012Validator(root).is_valid(case.body))


def run_engine(schema: Any) -> Outcome:
    outcome = Outcome()
    for event in schemathesis.engine.from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            recorder = event.recorder
            for case_id, checks in recorder.checks.items():
                for check in checks:
                    if check.failure_info is not None:
                        failure = check.failure_info.failure
                        if check.name == "negative_data_rejection" and body_fits_document(
                            schema.raw_schema, recorder.cases[case_id].value
                        ):
                            # schemathesis' coverage phase mutates one branch of a oneOf and
                            # calls the body invalid though it fits another branch (a body
                            # naming ``linked: false`` needs no provider_user_id): the body is
                            # valid against the document, and accepted as it must be.
                            continue
                        outcome.failures.append(
                            f"{event.label}: {check.name}: {failure.title}\n{failure.message}\n{check.failure_info.code_sample}"
                        )
            for case_id, interaction in recorder.interactions.items():
                if interaction.response is None:
                    continue
                node = recorder.cases[case_id]
                outcome.answered[(node.value.operation.label, interaction.response.status_code)] += 1
                if node.transition is not None and node.is_transition_applied and interaction.response.status_code < 300:
                    outcome.followed[node.transition.id] += 1
        elif isinstance(event, events.NonFatalError):
            outcome.failures.append(f"{event.label}: error: {event.value!r}")
        elif isinstance(event, events.FatalError):
            outcome.failures.append(f"engine error: {event.exception!r}")
        elif isinstance(event, events.EngineFinished):
            outcome.failures.extend(f"after run: {failure.title}: {failure.message}" for failure in event.failures)
    return outcome


def stateful_schema(app: Litestar) -> Any:
    """The stateful phase alone: the document's links, no calibration, fixed scenarios."""
    schema = load_schema(app, "stateful")
    stateful = schema.config.phases.stateful
    stateful.generation.update(max_examples=STATEFUL_SCENARIOS)
    stateful.inference.algorithms = []
    stateful.link_calibration = False
    return schema


@pytest.fixture(scope="module")
def outcome(service: tuple[Litestar, Container]) -> Outcome:
    """Coverage and fuzzing over every operation, then the stateful phase."""
    schema = load_schema(service[0], "coverage", "fuzzing")
    result = run_engine(schema)
    stateful = run_engine(stateful_schema(service[0]))
    result.failures += stateful.failures
    result.answered += stateful.answered
    result.followed = stateful.followed
    result.operations = {r.ok().label for r in schema.get_all_operations()}
    return result


def test_no_generated_request_fails_any_check(outcome: Outcome) -> None:
    assert not outcome.failures, "\n\n".join(outcome.failures[:10])


def test_every_operation_was_called_and_reached_past_validation(outcome: Outcome) -> None:
    assert {label for label, _ in outcome.answered} == outcome.operations
    statuses = {status for _, status in outcome.answered}
    assert {200, 201, 202, 404, 409, 422} <= statuses, sorted(statuses)


def test_stateful_sequences_followed_links(outcome: Outcome) -> None:
    # Links were followed to answers that worked: from a created project to a launch, and
    # from a launch to what can be done with its run. A link whose expression finds
    # nothing is not applied, and one that names the wrong thing is refused: neither
    # counts. tests/integration/test_openapi_document.py follows every link once.
    sources = {transition.split(" -> ", 1)[0] for transition in outcome.followed}
    assert LAUNCH in sources, (outcome.followed, sorted(outcome.answered.items()))
    assert len(outcome.followed) >= 3, outcome.followed


def test_the_document_links_runs_to_what_follows(service: tuple[Litestar, Container]) -> None:
    schema = load_schema(service[0], "stateful")
    operations = {result.ok().label: result.ok() for result in schema.get_all_operations()}
    assert len(operations) >= 18
    links = {
        (label, name)
        for label, operation in operations.items()
        for response in operation.definition.raw.get("responses", {}).values()
        for name in response.get("links", {})
    }
    for name in ("GetRun", "ExecuteRun", "GetSessionState", "ControlRun", "AdminControl", "GetFeed"):
        assert (LAUNCH, name) in links, name
    assert ("GET /v1/admin/studio/runs/{run_id}/session-state", "ControlSession") in links
    assert ("POST /v1/project-factory/projects", "LaunchRun") in links
