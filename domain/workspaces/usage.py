"""One model request's usage, as the upstream reported it, and the aggregate that records it.

The proxy hands every JSON payload it relays (each SSE ``data:`` object, or a whole JSON
body) to a ``Tally``, which keeps only what the upstream itself reported: the token counts
of Anthropic Messages (``message_start`` then the cumulative ``message_delta``), OpenAI
Responses (``response.completed``) and chat completions (``usage``, on the last chunk of a
stream). Input tokens are normalised to include cached ones (Anthropic reports cache reads
apart). A stream cut before its final usage keeps what had been reported when it stopped.

``ModelUsage`` is one aggregate per metered request (``usage:<tenant>:<request id>``): its
only event, ``Recorded``, is the meter's record; the cost is priced when it is recorded,
so a rebuild of the read models re-sends nothing and reprices nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eventsourcing.domain import event

from domain.shared.base import Aggregate
from domain.workspaces.events import UsageRecorded

MESSAGES, COUNT_TOKENS, RESPONSES, CHAT = "messages", "count_tokens", "responses", "chat_completions"
APIS = (MESSAGES, COUNT_TOKENS, RESPONSES, CHAT)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


@dataclass
class Tally:
    """What one request's upstream reported so far."""

    api: str
    tokens_in: int = 0
    cached_tokens: int = 0
    tokens_out: int = 0
    model: str = ""
    completed: bool = False  # the upstream said the answer is whole

    def observe(self, payload: Any) -> None:
        if not isinstance(payload, dict):
            return
        if self.api == MESSAGES:
            self._anthropic(payload)
        elif self.api == RESPONSES:
            self._responses(payload)
        elif self.api == CHAT:
            self._chat(payload)
        elif self.api == COUNT_TOKENS and "input_tokens" in payload:
            self.completed = True

    def _anthropic_usage(self, usage: Any, start: bool) -> None:
        if not isinstance(usage, dict):
            return
        cached = _count(usage.get("cache_read_input_tokens"))
        fresh = _count(usage.get("input_tokens")) + _count(usage.get("cache_creation_input_tokens"))
        if start or fresh + cached:
            self.tokens_in, self.cached_tokens = fresh + cached, cached
        if "output_tokens" in usage:
            self.tokens_out = _count(usage.get("output_tokens"))

    def _anthropic(self, payload: dict[str, Any]) -> None:
        kind = payload.get("type")
        if kind == "message_start" and isinstance(payload.get("message"), dict):
            message = payload["message"]
            self.model = str(message.get("model") or self.model)
            self._anthropic_usage(message.get("usage"), start=True)
        elif kind == "message_delta":
            self._anthropic_usage(payload.get("usage"), start=False)
        elif kind == "message_stop":
            self.completed = True
        elif kind == "message":  # a whole (non-streamed) answer
            self.model = str(payload.get("model") or self.model)
            self._anthropic_usage(payload.get("usage"), start=True)
            self.completed = True

    def _openai_usage(self, usage: Any, prompt: str, completion: str) -> None:
        if not isinstance(usage, dict):
            return
        details = usage.get(f"{prompt}_details") or {}
        self.tokens_in = _count(usage.get(prompt))
        self.cached_tokens = min(_count(details.get("cached_tokens") if isinstance(details, dict) else 0), self.tokens_in)
        self.tokens_out = _count(usage.get(completion))

    def _responses(self, payload: dict[str, Any]) -> None:
        kind = payload.get("type")
        response = payload.get("response") if kind else payload  # a whole answer is the response itself
        if not isinstance(response, dict):
            return
        self.model = str(response.get("model") or self.model)
        if kind in ("response.completed", "response.incomplete", "response.failed", None):
            self._openai_usage(response.get("usage"), "input_tokens", "output_tokens")
            self.completed = kind in ("response.completed", None) and response.get("object", "response") == "response"

    def _chat(self, payload: dict[str, Any]) -> None:
        self.model = str(payload.get("model") or self.model)
        if isinstance(payload.get("usage"), dict):
            self._openai_usage(payload["usage"], "prompt_tokens", "completion_tokens")
        choices = payload.get("choices")
        if isinstance(choices, list) and any(isinstance(c, dict) and c.get("finish_reason") for c in choices):
            self.completed = True


class ModelUsage(Aggregate):
    """One metered model request."""

    @staticmethod
    def create_id(tenant: str, request_id: str) -> str:
        return f"usage:{tenant}:{request_id}"

    @event(UsageRecorded)
    def __init__(
        self, *, at: str, tenant: str, request_id: str, caller: str, employee: str, project_slug: str,
        run_id: str, session_id: str, agent_id: str, workspace_scope: str, api: str, alias: str,
        upstream: str, upstream_model: str, status: int, tokens_in: int, cached_tokens: int, tokens_out: int,
        requests: int, duration_ms: int, cost_usd: float, priced: bool, partial: bool,
    ) -> None:
        self.tenant, self.request_id, self.cost_usd = tenant, request_id, cost_usd
