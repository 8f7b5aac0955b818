"""Watch policy of the operator projection watcher.

- Project context comes only from explicit project-assets JSON or from session state
  (what the run recorded of its project at launch). The project-assets lookup is the one
  bounded controller call made when neither has it; it is never a secondary lookup after
  one of them answered, and a failed lookup is not retried through another path.
- Every controller call is bounded by ``--controller-timeout-seconds`` (25 s by default),
  which must stay below the 30 s monitor polling cadence.
- A slow or failed lookup becomes the blocker ``project_assets_lookup_failed`` with the
  reason in ``source_refs.lookup_error``. With strict observation, transport, credential
  and proxy failures fail loudly instead of answering an empty context.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULT_CONTROLLER_TIMEOUT_SECONDS = 25.0
MONITOR_POLL_SECONDS = 30.0

FROM_JSON = "project_assets_json"
FROM_SESSION_STATE = "session_state"
FROM_LOOKUP = "project_assets_lookup"
NO_CONTEXT = "none"

TIMEOUT = "timeout"
TRANSPORT = "transport"
CREDENTIAL = "credential"
PROXY = "proxy"
NOT_FOUND = "not_found"
ERROR = "error"
LOUD_IN_STRICT_MODE = frozenset({TRANSPORT, CREDENTIAL, PROXY})
CONTEXT_KEYS = ("repository_bindings", "delivery_lanes", "suits", "source_ref_repos")


def check_bounds(timeout_seconds: float, poll_seconds: float = MONITOR_POLL_SECONDS) -> None:
    """Raises ValueError unless 0 < controller timeout < monitor polling cadence."""
    if not 0 < timeout_seconds < poll_seconds:
        raise ValueError(
            f"the controller timeout ({timeout_seconds:g} s) must be positive and below "
            f"the monitor polling cadence ({poll_seconds:g} s)"
        )


def has_context(context: Mapping[str, Any] | None) -> bool:
    return bool(context) and any(context.get(k) for k in CONTEXT_KEYS)  # type: ignore[union-attr]


def context_source(explicit: Mapping[str, Any] | None, session_state: Mapping[str, Any] | None) -> str:
    """Where the context comes from without calling anything; FROM_LOOKUP when neither has it."""
    if explicit is not None:
        return FROM_JSON
    if has_context(session_state):
        return FROM_SESSION_STATE
    return FROM_LOOKUP


def fails_loudly(kind: str, *, strict: bool) -> bool:
    """Strict observation turns transport, credential and proxy failures into errors."""
    return strict and kind in LOUD_IN_STRICT_MODE


def lookup_error_reason(kind: str, detail: str, timeout_seconds: float) -> str:
    if kind == TIMEOUT:
        return f"project assets lookup exceeded the controller timeout of {timeout_seconds:g} s"
    return f"project assets lookup failed ({kind}): {detail}".strip()
