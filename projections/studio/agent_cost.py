"""An agent's cost as the feed (``run_cost``, ``process_metrics``) and the fleet board show
it: its CLI's own report, else (Codex reports none) the sum the model proxy metered for it.

Both read models keep the same three fields in their private state of an agent: ``cost``
(the cost shown), and, from the agent's first metered request on, ``metered`` (the meter's
sum) and ``reported`` (its CLI's own total wins over the meter's).
"""

from __future__ import annotations

import math
from typing import Any


def reported(private: dict[str, Any], cost: float) -> None:
    """The CLI's own total (a number it reported at a session's end)."""
    private["cost"] = float(cost) if cost > 0 else 0.0
    if "metered" in private:  # the CLI's own total wins over the meter's
        private["reported"] = True


def metered(private: dict[str, Any], cost_usd: float) -> None:
    """One metered model request of the agent."""
    if "metered" not in private:  # (absent until the agent's first metered request)
        # Before any metered request, only the CLI's own report sets a cost.
        private["metered"], private["reported"] = 0.0, private["cost"] > 0
    private["metered"] = round(private["metered"] + cost_usd, 9)
    if not private["reported"]:
        private["cost"] = private["metered"]


def cost_in(result: Any) -> float | None:
    """The total a CLI's final result reports, if it reports a finite number."""
    cost = result.get("total_cost_usd") if isinstance(result, dict) else None
    if isinstance(cost, bool) or not isinstance(cost, (int, float)) or cost != cost or abs(cost) == float("inf"):
        return None
    return float(cost)


def shown(privates: Any) -> tuple[float, int]:
    """(the sum of the positive costs shown, how many agents have one): ``fsum`` is exact,
    so the agents' order is not."""
    positive = [c for private in privates if (c := private["cost"]) > 0]
    return round(math.fsum(positive), 6), len(positive)
