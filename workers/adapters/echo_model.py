"""The built-in model-proxy upstream: a deterministic echo model that reports token usage."""

from __future__ import annotations

import hashlib
from typing import Any


def _words(text: str) -> int:
    return len(text.split())


class EchoModel:
    """Answers the last user message back; tokens are counted as whitespace-separated words."""

    name = "echo-1"

    def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        messages = request.get("messages") if isinstance(request.get("messages"), list) else []
        texts = [str(m.get("content", "")) for m in messages if isinstance(m, dict)]
        last = texts[-1] if texts else ""
        answer = f"echo: {last}"
        prompt, completion = sum(_words(t) for t in texts), _words(answer)
        digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
        return {
            "id": f"chatcmpl-{digest}",
            "object": "chat.completion",
            "model": str(request.get("model") or self.name),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }
