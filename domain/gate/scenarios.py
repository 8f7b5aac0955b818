"""Gate scenarios: probe scenarios shipped as data files (``domain/gate/scenarios/*.json``)."""

from __future__ import annotations

from functools import cache
from importlib import resources

import msgspec

from domain.shared.errors import NotFound


class ProbeStep(msgspec.Struct, kw_only=True):
    action: str
    name: str = ""
    path: str = ""
    selector: str = ""
    text: str = ""
    value: str = ""
    budget_ms: int = 0
    optional: bool = False


class Scenario(msgspec.Struct, kw_only=True):
    """A gate scenario (spec: Other records / gate scenario)."""

    scenario_key: str
    title: str
    domain: str = ""
    pack_key: str = ""
    asset_kind: str = ""
    entrypoint: str = ""
    objective: str = ""
    operator_prompt: str = ""
    probe_steps: list[ProbeStep] = []
    expected_output: str = ""
    signal_kinds: list[str] = []
    gitops_surface: str = ""
    expected_artifacts: list[str] = []
    agent_prompt_template: str = ""
    acceptance_contract: str = ""
    evaluation_focus: list[str] = []
    tags: list[str] = []
    priority: str = "standard"
    requires_browser_driver: bool = False


def scenario_not_found(scenario_key: str) -> NotFound:
    return NotFound(f"No gate scenario with key {scenario_key!r}.", code="scenario_not_found")


class ScenarioCatalog:
    """The shipped scenarios by key."""

    def __init__(self, scenarios: list[Scenario]) -> None:
        self._by_key = {s.scenario_key: s for s in sorted(scenarios, key=lambda s: s.scenario_key)}

    def scenario_keys(self) -> list[str]:
        return list(self._by_key)

    def get(self, scenario_key: str) -> Scenario | None:
        return self._by_key.get(scenario_key)

    def require(self, scenario_key: str) -> Scenario:
        scenario = self.get(scenario_key)
        if scenario is None:
            raise scenario_not_found(scenario_key)
        return scenario


@cache
def shipped_scenarios() -> ScenarioCatalog:
    folder = resources.files("domain.gate") / "scenarios"
    decoder = msgspec.json.Decoder(Scenario)
    return ScenarioCatalog(
        [decoder.decode(entry.read_bytes()) for entry in folder.iterdir() if entry.name.endswith(".json")]
    )
