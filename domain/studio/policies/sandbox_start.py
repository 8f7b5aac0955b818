"""Sandbox start recovery: container-creation corruption on start is a missing binding.

A provider workspace whose start call returns container-creation corruption is treated
as a missing provider binding and recreated once through the shared workspace registry;
session rows still pointing at the old provider id are kept as stale slot bindings in the
active shared workspace and revived when their process starts there again. A second
corruption after the recreation is left to the operator.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from domain.shared.metadata import pick
from domain.studio.policies.blockers import SANDBOX_MISSING

START_ERROR_FIELD = "start_error"
_CORRUPTION = re.compile(
    r"container[ _-]?creation[ _-]?(corrupt|corruption)|corrupt(ed)?[ _-]container|"
    r"container[ _-]create[ _-]failed:.*corrupt"
)
MAX_AUTOMATIC_RECREATIONS = 1

NOTHING = "nothing"
RECREATE_ONCE = "recreate_once"
LEAVE_TO_OPERATOR = "leave_to_operator"


def is_container_creation_corruption(start_error: str) -> bool:
    return bool(_CORRUPTION.search(start_error.lower()))


def start_error(evidence: Mapping[str, Any] | None) -> str:
    return str(pick(evidence, START_ERROR_FIELD, "") or "")


def decide(
    live_status: str,
    blocker_code: str,
    evidence: Mapping[str, Any] | None,
    automatic_recreations: int,
    *,
    max_recreations: int = MAX_AUTOMATIC_RECREATIONS,
) -> str:
    if live_status != "blocked" or blocker_code != SANDBOX_MISSING:
        return NOTHING
    if not is_container_creation_corruption(start_error(evidence)):
        return NOTHING
    if automatic_recreations >= max_recreations:
        return LEAVE_TO_OPERATOR
    return RECREATE_ONCE
