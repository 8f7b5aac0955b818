"""What the schemathesis tests share: the service they call, the engine run, its outcome.

Two modules run it (tests/integration/test_schemathesis.py: coverage and fuzzing, in two
halves of the operations; test_schemathesis_stateful.py: the stateful phase), each part on
its own service, so that ``make test``'s xdist workers run the three parts at once.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema_rs
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


@contextlib.contextmanager
def service_at(database: Path) -> Iterator[tuple[Litestar, Container]]:
    """The app on a SQLite database with the demo project, its projector running."""
    # A command waits for read models to include it while the projector lives (bounded):
    # under load that can take longer than the default 2 s, and a run the launch answered
    # must be readable by the link that follows it.
    container = build(settings_for(f"sqlite:///{database}", min_position_wait_seconds=20.0))
    seed_demo(container.projects)
    container.start(("projector",))  # commands answer once read models include them
    # case.call() runs global before_call hooks only: registered while this service lives.
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
# The coverage and fuzzing phases run in two halves of the operations, each on a service of
# its own, so that xdist's workers run them at once (a class each: ``--dist loadscope``
# sends a class's tests to one worker): the admin (studio, gate) and control-plane
# operations (the most fields, so the most coverage cases), and every other one.
STUDIO_HALF = r"^/(v1/admin|control-plane)/"


def load_schema(app: Litestar, *phases: str, half: str | None = None) -> Any:
    """The document's operations (``half``: ``"studio"``, ``"rest"`` or all of them)."""
    # (Two ``include`` filters are either one, not both: a half is one include.)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app).include(
        path_regex=STUDIO_HALF if half == "studio" else COVERED
    )
    if half == "rest":
        schema = schema.exclude(path_regex=STUDIO_HALF)
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
