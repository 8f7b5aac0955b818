"""The built-in execution plane is deterministic and plays every case the policies need."""

from __future__ import annotations

from collections import Counter

from domain.shared.event_store import EventStore
from tests.helpers import drive_runs
from workers.bootstrap import Services, wire_services
from workers.planes.simulator import Draws, Faults, SimulatorPlane

MEMORY = {
    "PERSISTENCE_MODULE": "eventsourcing.sqlite",
    "SQLITE_DBNAME": ":memory:",
    "ORIGINATOR_ID_TYPE": "text",
}


def simulate(ticks: int, runs: int = 1) -> tuple[Services, list[str]]:
    app = wire_services(EventStore(MEMORY))
    return app, drive_runs(app, runs=runs, ticks=ticks)  # the DEMO_LIKE project


def session_steps(app: Services, run_id: str) -> list[tuple[str, str]]:
    run = app.studio.runs.get_run("default", run_id)
    return sorted((s.agent_id, s.live_status) for s in app.studio.runs.all_sessions(run))


def test_same_run_state_same_steps() -> None:
    plane = SimulatorPlane()
    app, (run_id,) = simulate(10)
    run = app.studio.runs.get_run("default", run_id)
    sessions = app.studio.runs.all_sessions(run)
    first = plane.plan_tick(run, sessions, run.tick + 1)
    second = plane.plan_tick(run, sessions, run.tick + 1)
    assert first == second


def test_squads_grow_by_handoff_deliver_and_misbehave() -> None:
    app, ids = simulate(0, runs=7)
    # A first-tool stall is a draw of the run's seed (12% of processes): eight runs of random
    # ids drew none in one batch of two hundred swept. The eighth run is one whose planner draws it.
    plane, faults = SimulatorPlane(), Faults(None)
    for _ in range(200):  # its start does not fail first (a container-creation corruption)
        run, _ = app.studio.runs.launch_run(tenant="default", template_id="delivery-core", project_slug="acme", launched_by="op")
        if faults.stalls_first_tool(run.seed, "planner", 1) and not faults.corrupt_container(run.seed, "planner", 0, 0):
            break
    else:
        raise AssertionError("no planner of 200 runs drew a first-tool stall")
    app.studio.runs.request_execution(tenant="default", run_id=run.run_id, requested_by="op")
    ids.append(run.run_id)
    app.studio.ticks.tick_runs(plane, start=[("default", run.run_id)])
    for _ in range(160):
        app.studio.ticks.tick_runs(plane, tick=[("default", r) for r in ids])
    blockers: Counter[str] = Counter()
    agents: Counter[str] = Counter()
    prs = completed = 0
    for run_id in ids:
        run = app.studio.runs.get_run("default", run_id)
        for s in app.studio.runs.all_sessions(run):
            agents[s.agent_id] += 1
            prs += s.pull_requests
            completed += s.live_status == "session_completed"
            if s.blocker_code:
                blockers[s.blocker_code] += 1
    assert {"backend", "frontend", "tester-admin", "tester-guest"} <= set(agents)
    assert "contract" not in agents  # no contract binding: that conditional lane never joins
    assert prs > 0 and completed > 0
    assert "agent_first_tool_required" in blockers


def test_final_results_look_like_an_agent_cli_result() -> None:
    app, ids = simulate(120, runs=3)
    results = [
        s.result for run_id in ids for s in app.studio.runs.all_sessions(app.studio.runs.get_run("default", run_id)) if s.result
    ]
    assert results
    for result in results:
        assert result["type"] == "result" and result["subtype"] == "success"
        assert result["total_cost_usd"] > 0 and result["num_turns"] > 0 and result["duration_ms"] >= 0


def test_draws_are_the_same_for_the_same_key_and_spread_evenly() -> None:
    first = Draws("7:12:planner")
    again = Draws("7:12:planner")
    drawn = [first.random() for _ in range(20)]  # past one block of eight
    assert drawn == [again.random() for _ in range(20)]
    assert drawn != [Draws("7:13:planner").random() for _ in range(20)]
    assert len(set(drawn)) == 20
    # Over many keys: in [0, 1), each tenth about as often, and every choice made.
    values = [Draws(f"{seed}:1:curator").random() for seed in range(20_000)]
    assert all(0.0 <= v < 1.0 for v in values)
    tenths = Counter(int(v * 10) for v in values)
    assert sorted(tenths) == list(range(10))
    assert all(1_800 <= n <= 2_200 for n in tenths.values())  # 2,000 expected, sd about 42
    picks = Counter(Draws(f"{seed}:2:lane").choice("abc") for seed in range(3_000))
    assert sorted(picks) == ["a", "b", "c"] and min(picks.values()) > 900
