"""An agent's transcript as its page shows it: the session's entries from the transcripts
read model (``projections.studio.transcripts``), long texts folded, and its metrics line."""

from __future__ import annotations

from typing import Any

from domain.studio.tool_results import KEPT_BYTES
from projections.engine.store import DocStore
from projections.studio.transcripts import read_transcript

# A text longer than this (characters or lines) folds behind its first line.
FOLD_CHARS = 600
FOLD_LINES = 8
MAX_ENTRIES = 20_000


def folded(text: str) -> bool:
    return len(text) > FOLD_CHARS or text.count("\n") >= FOLD_LINES


def first_line(text: str, width: int = 160) -> str:
    line = text.split("\n", 1)[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def transcript(store: DocStore, tenant: str, run_id: str, agent_id: str) -> dict[str, Any] | None:
    """The session's head (metrics) and its entries, oldest first; None when it has none."""
    read = read_transcript(store, tenant, run_id, agent_id, MAX_ENTRIES)
    if read is None:
        return None
    head, entries = read
    for entry in entries:
        entry["folded"] = folded(entry["text"])
        entry["first_line"] = first_line(entry["text"])
        entry["result_folded"] = folded(entry.get("result", ""))
        entry["result_label"] = result_label(entry.get("result_size", 0), entry.get("result_truncated", False))
    return {"head": head, "entries": entries}


def result_label(size: int, truncated: bool) -> str:
    """``result · 1,234 bytes`` (``…, first 4,096 shown`` when the log kept only its first bytes)."""
    return f"result · {size:,} bytes" + (f", first {KEPT_BYTES:,} shown" if truncated else "")


def reported(head: dict[str, Any]) -> list[str]:
    """What the CLI reported when the session ended: cost, duration, turns (as reported)."""
    result = head.get("result") or {}
    found = []
    if "total_cost_usd" in result:
        found.append(f"${float(result['total_cost_usd']):.2f}")
    if "duration_ms" in result:
        found.append(f"{int(result['duration_ms']) / 1000:.0f} s")
    if "num_turns" in result:
        found.append(f"{result['num_turns']} turns")
    return found
