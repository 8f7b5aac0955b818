"""Agent process assignment: which provider/model runs an agent (identity stays stable).

The model proxy owns alias -> upstream model; this module owns provider -> alias, in one
table (``ModelProxyAliases``), so no upstream model id is scattered through configuration.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

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
