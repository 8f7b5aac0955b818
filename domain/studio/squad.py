"""A run's squad: the templates it launches from (C10), the roster identity each agent gets
(C6), and the process (provider, model) that runs each agent, by default or by assignment.

Templates ship as JSON data files (``domain/studio/templates/*.json``) decoded into typed
structs. The model proxy owns alias -> upstream model; this module owns provider -> alias,
in one table (``ModelProxyAliases``), so no upstream model id is scattered through
configuration. An operator's assignment (``assign-processes``) reads
``target:provider:model:effort:speed``; empty parts keep what the session runs (a new
provider without a model gets that provider's model-proxy alias). The target is an agent
id, a role key such as ``role_tester``, or the group alias ``testers``. Later assignments
win over earlier ones for the same agent, so a group can be assigned first and one member
refined after it. Each assignment is also recorded on the run, and a session opened later
for its target (by a handoff, say) takes it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import msgspec

from domain.shared.ids import is_valid_id

# A template's and an agent spec's fields, in their order: most are optional text or lists of
# text (empty by default); each struct is declared by the runs of its fields, kind by kind.
Fields = list[tuple[str, Any] | tuple[str, Any, Any]]


def required(names: str) -> Fields:
    return [(name, str) for name in names.split()]


def texts(names: str) -> Fields:
    return [(name, str, "") for name in names.split()]


def lists(names: str, item: Any = str) -> Fields:
    return [(name, list[item], []) for name in names.split()]  # type: ignore[valid-type]


def flags(names: str) -> Fields:
    return [(name, bool, False) for name in names.split()]


def struct(name: str, *runs: Fields, bases: tuple[type, ...] = ()) -> Any:
    fields = [field for run in runs for field in run]
    return msgspec.defstruct(name, fields, bases=bases or None, kw_only=True, module=__name__)


TestTrack = struct(
    "TestTrack",
    required("track_id"),
    texts("role_key title route_path"),
    lists("acceptance_checks evidence_requirements"),
    texts("actor_suit_id actor_account_ref actor_credential_ref actor_entry_state"),
    lists("a2a_handoff_targets"),
    texts("replay_focus issue_label"),
)

AgentSpec = struct(
    "AgentSpec",
    required("agent_id alias title"),
    texts(
        "agent_nickname agent_process_kind role_key agent_tier agent_pack avatar_style avatar_source"
        " avatar_license avatar_seed avatar_url provider principal_type execution_profile route_pack"
    ),
    lists("escalation_chain workload_groups focus_entities ignore_entities"),
    texts("scenario_phase persona_target next_goal handoff_target mission_brief"),
    lists("oss_watchlist"),
    lists("test_tracks", TestTrack),
    texts("allowed_write_policy pr_submission_policy"),
    flags("pr_submission_allowed"),
    texts("pr_submission_pipeline issue_scope issue_sink handoff_scope"),
    lists("handoff_targets capabilities handoff_profile_keys handoff_capabilities skill_ids mcp_server_ids"),
    texts("memory_namespace"),
    flags("provision"),
    texts("activation_reason"),
)


class _AgentLookup(msgspec.Struct, kw_only=True):
    """A template's lookups of its agent specs (``agent_specs``, its last field)."""

    def spec(self, agent_id: str) -> AgentSpec | None:
        return next((spec for spec in self.agent_specs if spec.agent_id == agent_id), None)

    def spec_for_role(self, role_key: str) -> AgentSpec | None:
        return next((spec for spec in self.agent_specs if spec.role_key == role_key), None)


Template = struct(
    "Template",
    required("template_id title"),
    texts(
        "agent_process_kind issue_scope work_scope handoff_scope target_surface provider"
        " execution_plane contention_policy"
    ),
    lists("promotion_targets"),
    texts("allowed_write_policy pr_submission_policy"),
    lists("pr_submitter_agent_ids"),
    texts("pr_submission_pipeline required_identity_shape required_dataset_scope"),
    lists("required_connectors ontology_roots scoped_entity_kinds"),
    texts("visibility_policy"),
    lists("default_wave_plan default_agent_ids conditional_agent_ids"),
    [("extension_packs", dict[str, list[str]], {})],
    lists("agent_specs", AgentSpec),
    bases=(_AgentLookup,),
)


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


# -- the roster (C6): named agent identities and their nicknames ----------------------------

IDENTITY_BINDING_MODE = "named_agent_idp"

_ADJECTIVES = (
    "amber", "brisk", "calm", "dapper", "eager", "fuzzy", "gentle", "hardy", "ivory",
    "jolly", "keen", "lucid", "mellow", "nimble", "olive", "plucky", "quiet", "rusty",
    "sunny", "tidy", "umber", "vivid", "witty", "zesty",
)
_ANIMALS = (
    "otter", "heron", "lynx", "badger", "falcon", "marten", "newt", "ibis", "koala",
    "panda", "quokka", "raven", "stoat", "tapir", "urchin", "vole", "walrus", "yak",
    "zebra", "gecko", "moth", "finch", "hare", "orca",
)


class RosterAgent(msgspec.Struct, kw_only=True):
    agent_id: str
    role_key: str
    user_principal_name: str
    subject_key: str
    identity_binding_mode: str
    secret_lease_ref: str
    agent_nickname: str
    skill_ids: list[str] = []
    mcp_server_ids: list[str] = []


def role_name(role_key: str) -> str:
    """``role_planner`` -> ``planner``; the name used in identities."""
    return role_key.removeprefix("role_") or role_key


def agent_nickname(run_id: str, agent_id: str, role_key: str) -> str:
    """Deterministic per (run, agent, role); never assigned by hand."""
    digest = hashlib.sha256(f"{run_id}|{agent_id}|{role_key}".encode()).digest()
    adjective = _ADJECTIVES[digest[0] % len(_ADJECTIVES)]
    animal = _ANIMALS[digest[1] % len(_ANIMALS)]
    return f"{adjective}-{animal}-{digest[2:4].hex()}"


def roster_agent(run_id: str, agent_id: str, role_key: str, domain: str) -> RosterAgent:
    role = role_name(role_key)
    principal = f"{role}@{domain}"
    return RosterAgent(
        agent_id=agent_id,
        role_key=role_key,
        user_principal_name=principal,
        subject_key=principal,
        identity_binding_mode=IDENTITY_BINDING_MODE,
        secret_lease_ref=f"named-agent/{role}",
        agent_nickname=agent_nickname(run_id, agent_id, role_key),
    )


# -- agent processes: which provider/model runs an agent (identity stays stable) -----------

CODEX = "codex"
ANTIGRAVITY = "antigravity"
CLAUDE_CODE_CLI = "claude-code-cli"

DEFAULT_ALIASES: dict[str, str] = {
    CODEX: "model-proxy codex alias",
    ANTIGRAVITY: "model-proxy antigravity alias",
    CLAUDE_CODE_CLI: "model-proxy claude-code-cli alias",
}

TESTER_ROLES = frozenset({"role_tester"})
EFFORTS = ("", "low", "medium", "high")
SPEEDS = ("", "standard", "fast")


class ProcessAssignment(msgspec.Struct, frozen=True, kw_only=True):
    provider: str
    model: str
    effort: str = "medium"
    speed: str = "standard"

    def as_dict(self) -> dict[str, str]:
        return msgspec.structs.asdict(self)


class ModelProxyAliases:
    """Provider -> model alias, the single table the model proxy resolves."""

    def __init__(self, overrides: Iterable[tuple[str, str]] = ()) -> None:
        self._aliases = dict(DEFAULT_ALIASES)
        self._aliases.update(dict(overrides))

    def alias_for(self, provider: str) -> str:
        return self._aliases.get(provider, f"model-proxy {provider} alias")

    def items(self) -> list[tuple[str, str]]:
        return sorted(self._aliases.items())


def default_provider(role_key: str, spec_provider: str = "") -> str:
    """Tester roles run on antigravity; coordination and delivery roles on codex."""
    if role_key in TESTER_ROLES:
        return ANTIGRAVITY
    return spec_provider if spec_provider and spec_provider != ANTIGRAVITY else CODEX


def default_assignment(
    role_key: str, aliases: ModelProxyAliases, spec_provider: str = ""
) -> ProcessAssignment:
    provider = default_provider(role_key, spec_provider)
    return ProcessAssignment(provider=provider, model=aliases.alias_for(provider))


def resolve_switch(
    current: ProcessAssignment,
    aliases: ModelProxyAliases,
    *,
    provider: str = "",
    model: str = "",
    effort: str = "",
    speed: str = "",
) -> ProcessAssignment:
    """The assignment after a switch: a new provider without a model gets its alias."""
    new_provider = provider or current.provider
    if model:
        new_model = model
    elif new_provider != current.provider:
        new_model = aliases.alias_for(new_provider)
    else:
        new_model = current.model
    return ProcessAssignment(
        provider=new_provider,
        model=new_model,
        effort=effort or current.effort,
        speed=speed or current.speed,
    )


# -- process assignments (``assign-processes``): parsing and target resolution -------------

TESTERS = "testers"


class AssignmentError(ValueError):
    """An assignment that cannot be parsed or names no session of the run."""


@dataclass(frozen=True)
class Assignment:
    target: str
    provider: str = ""
    model: str = ""
    effort: str = ""
    speed: str = ""

    def as_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)

    def applied_to(self, current: ProcessAssignment, aliases: ModelProxyAliases) -> ProcessAssignment:
        """What runs the agent after this assignment (``resolve_switch``)."""
        return resolve_switch(
            current, aliases, provider=self.provider, model=self.model, effort=self.effort, speed=self.speed
        )


@dataclass(frozen=True)
class Seat:
    """One session as the resolver sees it."""

    agent_id: str
    role_key: str
    live: bool


def parse_assignment(text: str) -> Assignment:
    parts = [p.strip() for p in text.split(":")]
    if len(parts) > 5:
        raise AssignmentError(f"{text!r}: expected target:provider:model:effort:speed")
    parts += [""] * (5 - len(parts))
    target, provider, model, effort, speed = parts
    if not target or not is_valid_id(target):
        raise AssignmentError(f"{text!r}: the target must be an agent id, a role key or {TESTERS!r}")
    if provider and not is_valid_id(provider.replace(".", "_")):
        raise AssignmentError(f"{text!r}: provider {provider!r} is not a provider name")
    if effort not in EFFORTS:
        raise AssignmentError(f"{text!r}: effort must be one of {', '.join(e for e in EFFORTS if e)}")
    if speed not in SPEEDS:
        raise AssignmentError(f"{text!r}: speed must be one of {', '.join(s for s in SPEEDS if s)}")
    if not (provider or model or effort or speed):
        raise AssignmentError(f"{text!r}: names no provider, model, effort or speed")
    return Assignment(target, provider, model, effort, speed)


def names(target: str, agent_id: str, role_key: str) -> bool:
    """Whether ``target`` (an agent id, a role key or ``testers``) names this agent."""
    return target in (agent_id, role_key) or (target == TESTERS and role_key in TESTER_ROLES)


def later_assignments(records: Sequence[Mapping[str, str]], agent_id: str, role_key: str) -> list[Assignment]:
    """The run-level assignments a session opened now for ``agent_id`` takes, oldest first:
    of each ``assign-processes`` (one ``control_id``) the last that names it, as there."""
    chosen: dict[str, Assignment] = {}
    for record in records:
        if names(record.get("target", ""), agent_id, role_key):
            chosen.pop(record.get("control_id", ""), None)  # (keeps the calls in their order)
            chosen[record.get("control_id", "")] = Assignment(
                record.get("target", ""), record.get("provider", ""), record.get("model", ""),
                record.get("effort", ""), record.get("speed", ""),
            )
    return list(chosen.values())


def resolve_target(target: str, seats: Sequence[Seat], joinable: Collection[str] = ()) -> list[str]:
    """Agent ids of the live sessions ``target`` names (an error when it names none, unless
    it names agents that may still join the run: ``joinable`` agent ids and role keys)."""
    if target == TESTERS:
        chosen = [s for s in seats if s.role_key in TESTER_ROLES]
    elif any(s.agent_id == target for s in seats):
        chosen = [s for s in seats if s.agent_id == target]
        if not chosen[0].live:
            raise AssignmentError(f"agent {target!r} has ended; its process cannot be switched")
    else:
        chosen = [s for s in seats if s.role_key == target]
    live = [s.agent_id for s in chosen if s.live]
    if not live and not (target == TESTERS or target in joinable):
        raise AssignmentError(f"{target!r} names no live session of this run, nor an agent that may join it")
    return live


def plan(
    assignments: Sequence[Assignment], seats: Sequence[Seat], joinable: Collection[str] = ()
) -> dict[str, Assignment]:
    """agent id -> the assignment that applies to it (the last one naming it wins)."""
    chosen: dict[str, Assignment] = {}
    for assignment in assignments:
        for agent_id in resolve_target(assignment.target, seats, joinable):
            chosen[agent_id] = assignment
    return chosen
