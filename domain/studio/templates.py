"""Studio templates (C10): shipped as JSON data files, decoded into typed structs."""

from __future__ import annotations

from functools import cache
from importlib import resources

import msgspec


class TestTrack(msgspec.Struct, kw_only=True, omit_defaults=False):
    track_id: str
    role_key: str = ""
    title: str = ""
    route_path: str = ""
    acceptance_checks: list[str] = []
    evidence_requirements: list[str] = []
    actor_suit_id: str = ""
    actor_account_ref: str = ""
    actor_credential_ref: str = ""
    actor_entry_state: str = ""
    a2a_handoff_targets: list[str] = []
    replay_focus: str = ""
    issue_label: str = ""


class AgentSpec(msgspec.Struct, kw_only=True):
    agent_id: str
    alias: str
    title: str
    agent_nickname: str = ""
    agent_process_kind: str = ""
    role_key: str = ""
    agent_tier: str = ""
    agent_pack: str = ""
    avatar_style: str = ""
    avatar_source: str = ""
    avatar_license: str = ""
    avatar_seed: str = ""
    avatar_url: str = ""
    provider: str = ""
    principal_type: str = ""
    execution_profile: str = ""
    route_pack: str = ""
    escalation_chain: list[str] = []
    workload_groups: list[str] = []
    focus_entities: list[str] = []
    ignore_entities: list[str] = []
    scenario_phase: str = ""
    persona_target: str = ""
    next_goal: str = ""
    handoff_target: str = ""
    mission_brief: str = ""
    oss_watchlist: list[str] = []
    test_tracks: list[TestTrack] = []
    allowed_write_policy: str = ""
    pr_submission_policy: str = ""
    pr_submission_allowed: bool = False
    pr_submission_pipeline: str = ""
    issue_scope: str = ""
    issue_sink: str = ""
    handoff_scope: str = ""
    handoff_targets: list[str] = []
    capabilities: list[str] = []
    handoff_profile_keys: list[str] = []
    handoff_capabilities: list[str] = []
    skill_ids: list[str] = []
    mcp_server_ids: list[str] = []
    memory_namespace: str = ""
    provision: bool = False
    activation_reason: str = ""


class Template(msgspec.Struct, kw_only=True):
    template_id: str
    title: str
    agent_process_kind: str = ""
    issue_scope: str = ""
    work_scope: str = ""
    handoff_scope: str = ""
    target_surface: str = ""
    provider: str = ""
    execution_plane: str = ""
    contention_policy: str = ""
    promotion_targets: list[str] = []
    allowed_write_policy: str = ""
    pr_submission_policy: str = ""
    pr_submitter_agent_ids: list[str] = []
    pr_submission_pipeline: str = ""
    required_identity_shape: str = ""
    required_dataset_scope: str = ""
    required_connectors: list[str] = []
    ontology_roots: list[str] = []
    scoped_entity_kinds: list[str] = []
    visibility_policy: str = ""
    default_wave_plan: list[str] = []
    default_agent_ids: list[str] = []
    conditional_agent_ids: list[str] = []
    extension_packs: dict[str, list[str]] = {}
    agent_specs: list[AgentSpec] = []

    def spec(self, agent_id: str) -> AgentSpec | None:
        for spec in self.agent_specs:
            if spec.agent_id == agent_id:
                return spec
        return None

    def spec_for_role(self, role_key: str) -> AgentSpec | None:
        for spec in self.agent_specs:
            if spec.role_key == role_key:
                return spec
        return None


class TemplateCatalog:
    """The templates shipped in ``domain/templates/*.json``, in id order."""

    def __init__(self, templates: list[Template]) -> None:
        self._by_id = {t.template_id: t for t in sorted(templates, key=lambda t: t.template_id)}

    def all(self) -> list[Template]:
        return list(self._by_id.values())

    def get(self, template_id: str) -> Template | None:
        return self._by_id.get(template_id)


@cache
def shipped_templates() -> TemplateCatalog:
    folder = resources.files("domain.studio") / "templates"
    decoder = msgspec.json.Decoder(Template)
    templates = [
        decoder.decode(entry.read_bytes())
        for entry in folder.iterdir()
        if entry.name.endswith(".json")
    ]
    return TemplateCatalog(templates)
