"""The copilot's answerer over an OpenAI-compatible chat-completions endpoint (used when
``SQUADOPS_MODEL_PROXY_URL`` is set): the read-model facts go in the system message."""

from __future__ import annotations

import json
import urllib.request

from domain.portal.copilot import ACTIONS


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
