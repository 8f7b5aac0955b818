"""Pure rules of the jobs area: idempotency, retries, sync plans, preflight, wizard binding.

No clock, no I/O: callers hand in times and facts, so each rule is tested on its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from domain.shared.clock import shift
from domain.shared.retry import backoff

_canonical = msgspec.json.Encoder(order="sorted").encode

SYNC_MODES = ("request", "repository_dispatch", "delta_cursor", "reconcile")
PREFLIGHT_MODES = ("strict", "best_effort")
UPDATE_MODES = ("ask", "force", "skip")
DEFAULT_SCOPE = "default"

# -- idempotency (C18) ---------------------------------------------------------------------------


def fingerprint(job_type: str, request: Mapping[str, Any]) -> str:
    """What makes two requests "the same": the job type and every field but the key."""
    body = {k: v for k, v in request.items() if k != "idempotency_key"}
    return hashlib.sha256(job_type.encode() + b"\n" + _canonical(body)).hexdigest()


# -- retries -------------------------------------------------------------------------------------


def retry_at(at: str, attempt: int, *, base: float, cap: float) -> str:
    """When attempt ``attempt + 1`` may start after attempt ``attempt`` failed at ``at``:
    doubling from ``base`` seconds, never more than ``cap``."""
    return shift(at, backoff(max(attempt - 1, 0), base=base, cap=cap))


# -- access sync -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SyncPlan:
    """How one mode reads a connector scope and what it does with the checkpoint."""

    read_from: str  # the cursor to read after ("" = from the start)
    moves_cursor: bool
    unlinks_missing: bool  # reconcile: subjects the source no longer names are unlinked
    subjects: frozenset[str] | None  # request: only these subject keys (None = all)


def sync_plan(mode: str, cursor: str, payload: Mapping[str, Any]) -> SyncPlan:
    """The plan of ``mode`` given the checkpoint's cursor and the request's payload.

    - ``request``: an on-demand read of the named subjects (``payload.subjects``, all when
      absent) from the start of the source; the cursor stays where it is.
    - ``delta_cursor``: what the source holds after the cursor; the cursor moves on.
    - ``repository_dispatch``: the same incremental read, triggered by a repository
      dispatch (its ``event_type`` and ``repository`` are kept in the checkpoint's meta).
    - ``reconcile``: the whole source; subjects this scope linked before and the source no
      longer names are unlinked; the cursor moves to the head.
    """
    if mode == "request":
        raw = payload.get("subjects")
        subjects = frozenset(str(s).lower() for s in raw) if isinstance(raw, list) else None
        return SyncPlan("", False, False, subjects)
    if mode in ("delta_cursor", "repository_dispatch"):
        return SyncPlan(cursor, True, False, None)
    if mode == "reconcile":
        return SyncPlan("", True, True, None)
    raise ValueError(f"unknown sync mode {mode!r}")


def subject_of(record: Any) -> str:
    """A record's subject key: its own, else its e-mail (C2: subject key = lower-cased email)."""
    return str(record.subject_key or record.email or "").strip().lower()


def record_problem(record: Any) -> str:
    """Why a connector record cannot be applied ("" when it can)."""
    if not subject_of(record):
        return "record names no subject_key or email"
    if record.linked and not record.provider_user_id:
        return f"record for {subject_of(record)} is linked but has no provider_user_id"
    return ""


@dataclass
class Preflight:
    """The outcome of checking connectors' facts against the expected ``preflight_ssot``."""

    mode: str
    checked: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    failed_connectors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "checked": self.checked,
            "mismatches": self.mismatches,
            "skipped_connectors": self.failed_connectors if self.mode == "best_effort" else [],
        }


def preflight(
    expected: Mapping[str, Mapping[str, str]], facts: Mapping[str, Mapping[str, str] | None], mode: str
) -> Preflight:
    """Each connector's facts against what ``preflight_ssot`` expects of it.

    ``facts`` holds None for a connector the source does not have.
    """
    outcome = Preflight(mode)
    for connector_id in sorted(expected):
        outcome.checked.append(connector_id)
        known = facts.get(connector_id)
        if known is None:
            outcome.mismatches.append(f"{connector_id}: no such connector in the source")
            outcome.failed_connectors.append(connector_id)
            continue
        wrong = [
            f"{connector_id}.{key}: expected {value!r}, source says {known.get(key)!r}"
            for key, value in sorted(expected[connector_id].items())
            if known.get(key) != value
        ]
        if wrong:
            outcome.mismatches.extend(wrong)
            outcome.failed_connectors.append(connector_id)
    return outcome


def sync_targets(
    available: Iterable[str], required: list[str], provider_kind: str | None, facts: Mapping[str, Mapping[str, str]]
) -> list[str]:
    """The connectors a sync reads: the required ones, else every one of the provider kind."""
    if required:
        return sorted(dict.fromkeys(required))
    return sorted(
        c for c in available if not provider_kind or facts.get(c, {}).get("provider_kind") == provider_kind
    )


# -- wizard try -----------------------------------------------------------------------------------


def wizard_problems(provider: str, ssot: Mapping[str, Any], facts: Mapping[str, str] | None) -> list[str]:
    """What is wrong with trying ``ssot`` as the configuration of ``provider``."""
    if facts is None:
        return [f"no connector named {provider!r} in the source"]
    problems = []
    required = [k.strip() for k in facts.get("required_ssot_keys", "").split(",") if k.strip()]
    problems += [f"ssot lacks {key!r}, which {provider} requires" for key in required if key not in ssot]
    for key, value in sorted(ssot.items()):
        if key in facts and key != "required_ssot_keys" and isinstance(value, str) and value != facts[key]:
            problems.append(f"ssot {key}={value!r} differs from the source's {facts[key]!r}")
        elif isinstance(value, str) and not value.strip():
            problems.append(f"ssot {key} is empty")
    return problems


def binding_action(
    *, exists: bool, differs: bool, apply_binding: bool, update_mode: str, confirm_update: bool
) -> str:
    """What a wizard try does to the proposal's binding.

    ``not_applied`` (a try only), ``created``, ``unchanged``, ``updated``, ``skipped``
    (``update_mode=skip`` keeps the existing one) or ``confirmation_required``
    (``update_mode=ask`` without ``confirm_update``).
    """
    if not apply_binding:
        return "not_applied"
    if not exists:
        return "created"
    if not differs:
        return "unchanged"
    if update_mode == "skip":
        return "skipped"
    if update_mode == "force" or confirm_update:
        return "updated"
    return "confirmation_required"


# -- identity links: who may act for whom ----------------------------------------------------------


def may_act_for(*, own_subject: str, privileged: bool, subject: str) -> bool:
    """A person reads and links their own identities; super_admin and automation (an API
    key) those of any subject of the tenant."""
    return privileged or (bool(own_subject) and own_subject == subject)


# -- node power ------------------------------------------------------------------------------------

EXPECTED_STATE = {"node_power_sleep": "asleep", "node_power_wake": "awake"}


def mac_bytes(mac: str) -> bytes:
    """The six bytes of ``aa:bb:cc:dd:ee:ff`` (``-`` or no separator alike)."""
    digits = mac.replace(":", "").replace("-", "").replace(".", "")
    if len(digits) != 12:
        raise ValueError(f"not a MAC address: {mac!r}")
    return bytes.fromhex(digits)


def magic_packet(mac: str) -> bytes:
    """Wake-on-LAN: six 0xFF bytes, then the MAC sixteen times (102 bytes)."""
    return b"\xff" * 6 + mac_bytes(mac) * 16
