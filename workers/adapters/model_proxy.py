"""OpenAI-compatible chat-completions clients of the model proxy (used when
``SQUADOPS_MODEL_PROXY_URL`` is set): the copilot's answerer (the read-model facts go in
the system message) and the usage meter's upstream."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from domain.portal.copilot import ACTIONS
from domain.shared.errors import Unavailable


class ModelProxyAnswerer:
    name = "model_proxy"

    def __init__(self, url: str, token: str, model: str, timeout: float = 20.0) -> None:
        self.url, self.token, self.model, self.timeout = url.rstrip("/"), token, model, timeout

    def answer(self, action_id: str, facts: list[str], question: str) -> str:
        system = (
            "You are the squadops portal copilot. Answer only from these facts, briefly.\n"
            f"Task: {ACTIONS[action_id]}.\nFacts:\n" + "\n".join(f"- {f}" for f in facts)
        )
        body = {"model": self.model, "messages": [
            {"role": "system", "content": system}, {"role": "user", "content": question or ACTIONS[action_id]},
        ]}
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(
            f"{self.url}/chat/completions", data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as answer:  # noqa: S310 (configured URL)
            reply = json.loads(answer.read())
        content = reply["choices"][0]["message"]["content"]
        if not isinstance(content, str) or not content.strip():
            raise ValueError("the model proxy answered no content")
        return content


class ModelProxyUpstream:
    """The usage meter's upstream when ``SQUADOPS_MODEL_PROXY_URL`` is set: the request is
    forwarded as given to ``{url}/chat/completions`` (OpenAI-compatible) under the
    service's proxy client key. An unreachable or failing proxy is ``Unavailable`` (503),
    and the meter counts nothing for it."""

    def __init__(self, url: str, token: str, timeout: float = 60.0) -> None:
        self.url, self.token, self.timeout = url.rstrip("/"), token, timeout

    def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        call = urllib.request.Request(
            f"{self.url}/chat/completions", data=json.dumps(request).encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(call, timeout=self.timeout) as answer:  # noqa: S310 (configured URL)
                reply = json.loads(answer.read())
        except (OSError, ValueError) as exc:  # unreachable, an HTTP error status, or not JSON
            raise Unavailable(f"The model proxy did not answer: {exc}", code="model_proxy_unavailable") from None
        if not isinstance(reply, dict):
            raise Unavailable("The model proxy answered no completion object.", code="model_proxy_unavailable")
        return reply
