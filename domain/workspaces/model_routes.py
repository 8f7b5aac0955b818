"""What the model proxy owns: alias -> upstream model, and the price of an upstream model.

The alias table starts from built-in defaults (one upstream model per provider alias of
``domain.studio.squad``) and is overridden by ``SQUADOPS_MODEL_PROXY_UPSTREAM_MODELS``;
a model that is no alias passes unchanged. Prices are US dollars per million tokens, from
``SQUADOPS_MODEL_PRICES`` over the defaults below; cached input tokens cost
``cached_input_per_mtok`` when given, else the input price. A model with no price costs 0
and is recorded as unpriced (a cost is never made up).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import msgspec

from domain.studio.squad import DEFAULT_ALIASES

BUILTIN_MODEL = "squadops-builtin-1"

DEFAULT_UPSTREAM_MODELS: dict[str, str] = {
    DEFAULT_ALIASES["codex"]: "gpt-5-codex",
    DEFAULT_ALIASES["claude-code-cli"]: "claude-sonnet-4-5",
    DEFAULT_ALIASES["antigravity"]: "gemini-2.5-pro",
}


class Price(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None


DEFAULT_PRICES: dict[str, Price] = {
    "claude-sonnet-4-5": Price(3.0, 15.0, 0.3),
    "claude-opus-4-1": Price(15.0, 75.0, 1.5),
    "claude-haiku-4-5": Price(1.0, 5.0, 0.1),
    "gpt-5-codex": Price(1.25, 10.0, 0.125),
    "gpt-5": Price(1.25, 10.0, 0.125),
    "gemini-2.5-pro": Price(1.25, 10.0, 0.31),
    BUILTIN_MODEL: Price(0.0, 0.0),
}


class ModelRoutes:
    """The alias table and the price table, read once from settings."""

    def __init__(self, upstream_models: Mapping[str, str] | None = None,
                 prices: Mapping[str, Price] | None = None) -> None:
        self._models = {**DEFAULT_UPSTREAM_MODELS, **(upstream_models or {})}
        self._prices = {**DEFAULT_PRICES, **(prices or {})}

    def upstream_model(self, model: str) -> str:
        return self._models.get(model, model)

    def price(self, model: str) -> Price | None:
        return self._prices.get(model)

    def cost(self, model: str, tokens_in: int, cached: int, tokens_out: int) -> tuple[float, bool]:
        """(dollars, whether the model has a price) for one request's tokens."""
        price = self._prices.get(model)
        if price is None:
            return 0.0, False
        cached = min(max(cached, 0), tokens_in)
        cached_price = price.input_per_mtok if price.cached_input_per_mtok is None else price.cached_input_per_mtok
        dollars = math.fsum(((tokens_in - cached) * price.input_per_mtok, cached * cached_price,
                             tokens_out * price.output_per_mtok)) / 1_000_000
        return round(dollars, 9), True


def parse_upstream_models(raw: str) -> dict[str, str]:
    """``{"<alias>": "<upstream model>"}``; raises ValueError on anything else."""
    try:
        table = msgspec.json.decode(raw, type=dict[str, str])
    except msgspec.DecodeError as exc:
        raise ValueError(f'must be a JSON object {{"<alias>": "<upstream model>"}}: {exc}') from None
    if any(not k.strip() or not v.strip() for k, v in table.items()):
        raise ValueError("aliases and upstream models must not be empty")
    return table


def parse_prices(raw: str) -> dict[str, Price]:
    """``{"<upstream model>": {"input_per_mtok": 3.0, "output_per_mtok": 15.0}}``."""
    try:
        table = msgspec.json.decode(raw, type=dict[str, Price])
    except msgspec.DecodeError as exc:
        raise ValueError(
            f'must be a JSON object {{"<model>": {{"input_per_mtok": 3.0, "output_per_mtok": 15.0}}}}: {exc}') from None
    for model, price in table.items():
        numbers = (price.input_per_mtok, price.output_per_mtok, price.cached_input_per_mtok or 0.0)
        if any(not math.isfinite(n) or n < 0 for n in numbers):
            raise ValueError(f"prices of {model!r} must be finite and not negative")
    return table
