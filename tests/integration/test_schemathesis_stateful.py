"""schemathesis' stateful phase over the app's own /openapi.json (its links), alone on a
service of its own: see tests/integration/test_schemathesis.py for the whole run and its
bounds. What it explores depends on the seed and the API's answers only, not on what the
coverage and fuzzing phases happened to learn."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from litestar import Litestar

from tests.schemathesis_engine import (
    LAUNCH,
    Outcome,
    load_schema,
    run_engine,
    service_at,
    stateful_schema,
)
from workers.bootstrap import Container


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Litestar, Container]]:
    with service_at(tmp_path_factory.mktemp("schemathesis-stateful") / "squadops.db") as found:
        yield found


@pytest.fixture(scope="module")
def outcome(service: tuple[Litestar, Container]) -> Outcome:
    return run_engine(stateful_schema(service[0]))


def test_no_stateful_sequence_fails_any_check(outcome: Outcome) -> None:
    assert not outcome.failures, "\n\n".join(outcome.failures[:10])


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
