"""The model proxy's tables and tally: aliases, prices, settings refused at start, and what
each API's answer reports (issue 26)."""

from __future__ import annotations

import json
import time

import pytest

from domain.workspaces import proxy_tokens
from domain.workspaces.model_routes import ModelRoutes, Price
from domain.workspaces.usage import CHAT, COUNT_TOKENS, MESSAGES, RESPONSES, Tally
from workers.settings import SettingsError, load_settings


def test_aliases_map_over_the_defaults_and_other_models_pass_unchanged() -> None:
    routes = ModelRoutes({"model-proxy codex alias": "gpt-5.1-codex", "fast": "claude-haiku-4-5"})
    assert routes.upstream_model("model-proxy codex alias") == "gpt-5.1-codex"
    assert routes.upstream_model("model-proxy claude-code-cli alias") == "claude-sonnet-4-5"  # a default kept
    assert routes.upstream_model("fast") == "claude-haiku-4-5"
    assert routes.upstream_model("some-model") == "some-model"


def test_cost_is_the_price_table_times_the_tokens() -> None:
    routes = ModelRoutes(prices={"m": Price(3.0, 15.0)})
    assert routes.cost("m", 1_000_000, 0, 1_000_000) == (18.0, True)
    assert routes.cost("claude-sonnet-4-5", 1_000_000, 1_000_000, 0) == (0.3, True)  # all cached, at the cached price
    assert routes.cost("unpriced", 10, 0, 10) == (0.0, False)


@pytest.mark.parametrize(("name", "value"), [
    ("MODEL_PRICES", json.dumps({"m": {"input_per_mtok": -1, "output_per_mtok": 1}})),
    ("MODEL_PRICES", json.dumps({"m": {"input_per_mtok": 1}})),
    ("MODEL_PRICES", "not json"),
    ("MODEL_PROXY_UPSTREAM_MODELS", json.dumps({"alias": ""})),
    ("MODEL_PROXY_UPSTREAM_MODELS", json.dumps(["alias"])),
    ("UPSTREAM_ANTHROPIC_URL", "api.anthropic.com"),
    ("UPSTREAM_OPENAI_URL", "ftp://api.openai.com"),
    ("MODEL_PROXY_TOKEN_SECONDS", "0"),
])
def test_settings_the_proxy_cannot_use_are_refused_at_start(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=f"SQUADOPS_{name}"):
        load_settings({f"SQUADOPS_{name}": value})


def sse_payloads(api: str) -> list[dict]:
    if api == MESSAGES:
        return [{"type": "message_start", "message": {"model": "claude-sonnet-4-5", "usage": {
                    "input_tokens": 10, "cache_read_input_tokens": 90, "cache_creation_input_tokens": 5,
                    "output_tokens": 1}}},
                {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "hi"}},
                {"type": "message_delta", "usage": {"output_tokens": 42}},
                {"type": "message_stop"}]
    if api == RESPONSES:
        return [{"type": "response.created", "response": {"model": "gpt-5-codex"}},
                {"type": "response.completed", "response": {"model": "gpt-5-codex", "usage": {
                    "input_tokens": 105, "input_tokens_details": {"cached_tokens": 90}, "output_tokens": 42}}}]
    return [{"model": "gpt-5", "choices": [{"delta": {"content": "hi"}, "finish_reason": None}]},
            {"model": "gpt-5", "choices": [{"delta": {}, "finish_reason": "stop"}]},
            {"model": "gpt-5", "choices": [], "usage": {"prompt_tokens": 105, "completion_tokens": 42,
                                                         "prompt_tokens_details": {"cached_tokens": 90}}}]


@pytest.mark.parametrize("api", [MESSAGES, RESPONSES, CHAT])
def test_each_api_reports_its_tokens_normalised_and_whole(api: str) -> None:
    tally = Tally(api)
    for payload in sse_payloads(api):
        tally.observe(payload)
    assert (tally.tokens_in, tally.cached_tokens, tally.tokens_out, tally.completed) == (105, 90, 42, True)


def test_a_stream_cut_before_its_end_keeps_what_was_reported_and_is_not_whole() -> None:
    tally = Tally(MESSAGES)
    for payload in sse_payloads(MESSAGES)[:2]:
        tally.observe(payload)
    assert (tally.tokens_in, tally.tokens_out, tally.completed) == (105, 1, False)
    counted = Tally(COUNT_TOKENS)
    counted.observe({"input_tokens": 7})
    assert (counted.tokens_in, counted.completed) == (0, True)  # counting tokens bills none


def test_a_proxy_token_names_its_caller_until_it_expires() -> None:
    caller = proxy_tokens.ProxyCaller("default", "acme", "run-1", "ses-1", "backend")
    token = proxy_tokens.sign("k" * 32, caller, int(time.time()) + 60)
    assert proxy_tokens.verify("k" * 32, token, time.time()) == caller
    assert proxy_tokens.verify("k" * 32, token, time.time() + 61) is None
    assert proxy_tokens.verify("x" * 32, token, time.time()) is None
    assert proxy_tokens.verify("k" * 32, token.replace("backend", "planner"), time.time()) is None
