"""Driving runs through the simulator and the recovery policies, for the service tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain.shared.ids import lease_key, session_key
from domain.studio.commands.runs import run_seed
from tests.events import named
from tests.helpers import DEMO_LIKE
from workers.bootstrap import wire_services
from workers.planes.simulator import FaultRates, SimulatorPlane

TENANT = "default"


class Squad:
    """An in-memory service, a simulator with chosen faults, and the ticker's policies."""

    def __init__(
        self,
        faults: FaultRates,
        policies: list[Any] | None = None,
        project: dict | None = None,
        clock: Callable[[], str] | None = None,
    ) -> None:
        self.app = wire_services(clock=clock) if clock is not None else wire_services()
        self.project = project or DEMO_LIKE
        self.app.projects.create_project(tenant=TENANT, request=self.project, created_by="owner@example.com")
        self.plane = SimulatorPlane(faults=faults)
        self.policies = policies if policies is not None else []
        self.slug = self.app.projects.get_project(TENANT, str(self.project["project_key"])).project_slug

    def launch(self, wanted: Callable[[int], bool] = lambda seed: True, tries: int = 500) -> str:
        """Launches runs until one whose seed makes ``wanted`` true; executes that one."""
        for _ in range(tries):
            run, _ = self.app.studio.runs.launch_run(
                tenant=TENANT, template_id="delivery-core", project_slug=self.slug, launched_by="op@example.com"
            )
            if wanted(run_seed(run.run_id)):
                self.app.studio.runs.request_execution(tenant=TENANT, run_id=run.run_id, requested_by="op@example.com")
                self.app.studio.ticks.tick_runs(self.plane, start=[(TENANT, run.run_id)], policies=self.policies)
                return run.run_id
        raise AssertionError(f"no run in {tries} launches had the wanted faults")

    def tick(self, run_id: str, until: Callable[[], Any] | None = None, limit: int = 400) -> Any:
        """Ticks until ``until()`` answers something truthy (or ``limit`` ticks)."""
        for _ in range(limit):
            if until is not None:
                found = until()
                if found:
                    return found
            self.app.studio.ticks.tick_runs(self.plane, tick=[(TENANT, run_id)], policies=self.policies)
        if until is None:
            return None
        raise AssertionError(f"condition not met within {limit} ticks")

    def session(self, run_id: str, agent_id: str) -> Any:
        run = self.app.studio.runs.get_run(TENANT, run_id)
        return self.app.studio.runs.agent_session(run, agent_id) if agent_id in run.sessions else None

    def events(self, aggregate_id: str, name: str = "") -> list[Any]:
        found = list(self.app.event_store.events.get(aggregate_id))
        return [e for e in found if not name or named(e) == name]

    def session_events(self, run_id: str, agent_id: str, name: str = "") -> list[Any]:
        s = self.session(run_id, agent_id)
        return self.events(session_key(TENANT, run_id, s.session_id, agent_id), name)

    def lease(self, workspace_name: str) -> Any:
        return self.app.event_store.get_or_none(lease_key(TENANT, self.slug, workspace_name))

    def status(self, run_id: str, agent_id: str) -> str:
        s = self.session(run_id, agent_id)
        return s.live_status if s is not None else ""
