"""Opaque ids (C12) and the aggregate ids built from them."""

from __future__ import annotations

import hashlib
import re
import secrets

# ``(?!\n)``: in Python (msgspec, Litestar, ``re``) ``$`` also matches before a final
# newline, so ``"run-1\n"`` would pass; the lookahead makes the pattern mean the same in
# Python and in the JSON Schema (ECMA) dialect the OpenAPI document publishes it in.
END = r"$(?!\n)"
# The one identifier rule (C12): every identifier that becomes a path segment, a git ref
# component or a command argument is made of these characters only, so it can hold no
# ``/``, no ``.`` (no ``..``), no NUL, no newline. Checked at the API boundary (the
# patterns below) and again wherever a path or a ref is built (``is_valid_id`` and the
# rest, which match the whole string: ``\A…\Z``).
ID = r"[A-Za-z0-9_-]{1,128}"
ID_PATTERN = rf"^{ID}{END}"
OPTIONAL_ID_PATTERN = rf"^(?:{ID})?{END}"
# A repository is ``<owner>/<name>``, each an identifier.
REPO_SLUG_PATTERN = rf"^{ID}/{ID}{END}"
OPTIONAL_REPO_SLUG_PATTERN = rf"^(?:{ID}/{ID})?{END}"
# A branch is identifiers joined by ``/``; no component starts with ``-`` (an option to git).
_BRANCH_PART = r"(?!-)[A-Za-z0-9_-]{1,128}"
BRANCH_PATTERN = rf"^{_BRANCH_PART}(?:/{_BRANCH_PART}){{0,7}}{END}"
# An identifier that also becomes one part of a branch (a gate thread's key).
BRANCH_PART_PATTERN = rf"^{_BRANCH_PART}{END}"
_ID = re.compile(rf"\A{ID}\Z")
_REPO_SLUG = re.compile(rf"\A{ID}/{ID}\Z")
_BRANCH = re.compile(rf"\A{_BRANCH_PART}(?:/{_BRANCH_PART}){{0,7}}\Z")


def is_valid_id(value: str) -> bool:
    return isinstance(value, str) and _ID.match(value) is not None


def is_valid_repo_slug(value: str) -> bool:
    """``owner/name``, each part an identifier."""
    return isinstance(value, str) and _REPO_SLUG.match(value) is not None


def is_valid_branch(value: str) -> bool:
    return isinstance(value, str) and len(value) <= 200 and _BRANCH.match(value) is not None


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
