"""A run's metered model cost (issue 26) in the reads that show a run's cost: the feed at a
past position (time travel) shows it as it was then, and the fleet board's cost column is
the feed's ``run_cost`` total (each agent's CLI report, else what the proxy metered)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator

import msgspec
import pytest

from api.studio.feed import FeedReads
from domain.workspaces.metering import Metered
from domain.workspaces.usage import MESSAGES, Tally
from projections.studio.fleet import fleet_doc_key
from projections.studio.time_travel import EventSelector, TimeTravel
from projections.workspaces.usage import record_ids
from tests.conftest import settings_for
from tests.feed_scenarios import ACTOR, TENANT, Scenario, apply_one, launch
from workers.bootstrap import Container, build

PRICES = {"claude-sonnet-4-5": {"input_per_mtok": 3.0, "output_per_mtok": 15.0}}


@pytest.fixture
def world(database_url: str) -> Iterator[Container]:
    container = build(settings_for(database_url, tick_seconds=0.0, model_prices=json.dumps(PRICES)))
    yield container
    container.close()


def settle(container: Container) -> None:
    while container.runner.run_once():
        pass


def meter(app: Container, scenario: Scenario, agent: tuple[str, str], tokens_in: int, tokens_out: int, n: int) -> float:
    agent_id, session_id = agent
    who = Metered(tenant=TENANT, caller="agent", employee=ACTOR, project_slug="acme", run_id=scenario.run_id,
                  session_id=session_id, agent_id=agent_id)
    tally = Tally(MESSAGES, tokens_in=tokens_in, tokens_out=tokens_out, model="claude-sonnet-4-5", completed=True)
    usage = app.model_proxy.meter.record(
        who, tally, request_id=f"req-{n}", at=app.clock(), alias="model-proxy claude-code-cli alias",
        upstream="anthropic", upstream_model="claude-sonnet-4-5", status=200, duration_ms=5, partial=False)
    return float(usage.cost_usd)


def test_metered_cost_in_time_travel_and_on_the_fleet_board(world: Container) -> None:
    app = world
    travel = TimeTravel(EventSelector(app.event_store), functools.partial(record_ids, app.store))
    reads = FeedReads(app.store, travel, app.event_store.max_position)
    scenario = launch(app, {"project_key": "acme"})
    agents = list(scenario.run().sessions.items())
    captured: list[tuple[int, bytes]] = []

    def capture() -> None:
        settle(app)
        captured.append((app.event_store.max_position(), reads.feed(TENANT, "acme", scenario.run_id, 200)))

    capture()
    first = meter(app, scenario, agents[0], 1000, 200, 1)  # an agent whose CLI reports no cost (Codex)
    capture()
    first += meter(app, scenario, agents[0], 3000, 500, 2)
    meter(app, scenario, agents[1], 2000, 100, 3)  # metered, then its CLI reports its own total
    capture()
    apply_one(scenario, ("start", 1))
    apply_one(scenario, ("tool", 1, "Read"))
    apply_one(scenario, ("finish", 1, (0.5, 10, 1, "success")))
    capture()

    costs = [msgspec.json.decode(body)["run_cost"] for _, body in captured]
    assert costs[0]["total_cost_usd"] == 0.0 and "metered_cost_usd" not in costs[0]
    assert costs[1]["total_cost_usd"] == pytest.approx(1000 * 3e-6 + 200 * 15e-6, abs=1e-6)
    assert costs[3]["total_cost_usd"] == pytest.approx(first + 0.5, abs=1e-6)  # the CLI's own report wins
    assert [s["source"] for s in costs[3]["cost_sources"]] == ["meter", "cli_report"]
    # The feed at each past position is the live feed then, its cost included.
    for position, live in captured:
        past, answered = reads.feed_at(TENANT, "acme", scenario.run_id, 200, position=position)
        assert answered == position
        assert past == live, f"time travel differs from the live feed at position {position}"
    # The fleet board's cost column is the feed's run cost.
    row = msgspec.json.decode(app.store.get("fleet", fleet_doc_key(TENANT, scenario.run_id)))
    assert (row["total_cost_usd"], row["agent_count_with_cost"]) == (
        costs[3]["total_cost_usd"], costs[3]["agent_count_with_cost"]) == (row["total_cost_usd"], 2)
