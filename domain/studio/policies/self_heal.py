"""Self-heal: a workspace pending reprovision plus a stale runner signal requeues a launch.

When ``executionWorkspaceSelfHealStatus`` is ``pending_reprovision`` and the session also
shows a stale runner signal (``sandbox_toolbox_observe_failed``, ``sandbox_missing``, a
reaped sandbox, no such container, or a detached runner process that is not alive), the
stale workspace identity metadata is cleared and a fresh launch is requeued. Either fact
alone is not enough: a pending reprovision with a healthy runner heals itself, and a
stale signal without it is the operator's wall.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from domain.shared.metadata import pick

PENDING_REPROVISION = "pending_reprovision"
STATUS_FIELD = "execution_workspace_self_heal_status"
# Signal name -> how it reads in codes, messages and runner output.
STALE_SIGNALS: dict[str, re.Pattern[str]] = {
    "sandbox_toolbox_observe_failed": re.compile(r"sandbox[_ ]toolbox[_ ]observe[_ ]failed"),
    "sandbox_missing": re.compile(r"sandbox[_ ]missing"),
    "sandbox_reaped": re.compile(r"sandbox\b.*\breaped|sandbox[_ ]reaped"),
    "no_such_container": re.compile(r"no[_ ]such[_ ]container"),
    "runner_process_not_alive": re.compile(r"detached[_ ]runner[_ ]process[_ ]not[_ ]alive"),
}
# What names a session's tie to a sandbox that is gone.
IDENTITY_FIELDS = ("workspace_name", "provider_workspace_id", "llm_session_id", "runner_pid")

NOTHING = "nothing"
REQUEUE_FRESH_LAUNCH = "requeue_fresh_launch"


def self_heal_status(evidence: Mapping[str, Any] | None) -> str:
    """``executionWorkspaceSelfHealStatus`` from evidence in either casing."""
    return str(pick(evidence, STATUS_FIELD, "") or "")


def stale_runner_signal(texts: Iterable[str]) -> str:
    """The first stale runner signal named in ``texts`` (codes, messages, runner output)."""
    for text in texts:
        lowered = str(text).lower()
        for signal, pattern in STALE_SIGNALS.items():
            if pattern.search(lowered):
                return signal
    return ""


def signal_texts(blocker_code: str, message: str, evidence: Mapping[str, Any] | None) -> list[str]:
    """Everything a session shows that may name a runner signal."""
    texts = [blocker_code, message]
    for value in (evidence or {}).values():
        if isinstance(value, str):
            texts.append(value)
    return texts


def decide(status: str, signal: str) -> str:
    return REQUEUE_FRESH_LAUNCH if status == PENDING_REPROVISION and signal else NOTHING


def cleared_identity(metadata: Mapping[str, Any]) -> dict[str, str]:
    """The stale identity values that a requeued launch must not inherit."""
    return {name: str(metadata[name]) for name in IDENTITY_FIELDS if metadata.get(name)}
