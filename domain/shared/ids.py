"""Opaque ids (C12) and the aggregate ids built from them."""

from __future__ import annotations

import hashlib
import re
import secrets

# ``(?!\n)``: in Python (msgspec, Litestar, ``re``) ``$`` also matches before a final
# newline, so ``"run-1\n"`` would pass; the lookahead makes the pattern mean the same in
# Python and in the JSON Schema (ECMA) dialect the OpenAPI document publishes it in.
END = r"$(?!\n)"
ID_PATTERN = rf"^[A-Za-z0-9_-]{{1,128}}{END}"
_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


def is_valid_id(value: str) -> bool:
    return _ID.fullmatch(value) is not None


def new_id(prefix: str) -> str:
    """A fresh opaque id such as ``run-3f9c0a7b12de4c55``."""
    return f"{prefix}-{secrets.token_hex(8)}"


def derived_id(prefix: str, *parts: object) -> str:
    """An id that the same parts always give (replays and retries name the same thing)."""
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()
    return f"{prefix}-{digest[:16]}"


def run_key(tenant: str, run_id: str) -> str:
    return f"run:{tenant}:{run_id}"


def session_key(tenant: str, run_id: str, session_id: str, agent_id: str) -> str:
    """Carries the agent too, so every session event names its run and agent."""
    return f"ses:{tenant}:{run_id}:{session_id}:{agent_id}"


def project_key(tenant: str, project_slug: str) -> str:
    return f"prj:{tenant}:{project_slug}"


def lease_key(tenant: str, project_slug: str, workspace_name: str) -> str:
    return f"wsl:{tenant}:{project_slug}:{workspace_name}"


def split_key(aggregate_id: str) -> tuple[str, ...]:
    """``("run", tenant, run_id)`` and the like, from an aggregate id."""
    return tuple(aggregate_id.split(":"))
