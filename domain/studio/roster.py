"""The roster snapshot of a run (C6): named agent identities and their nicknames."""

from __future__ import annotations

import hashlib

import msgspec

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
