"""The built-in model: the model proxy's upstream when none is configured (works offline).

A deterministic model that speaks Anthropic Messages (streamed, and ``count_tokens``),
OpenAI Responses (streamed) and chat completions well enough for Claude Code and Codex to
finish a short task: on its first turn an agent writes ``NOTES-<agent>.md`` in its working
directory with its CLI's own tool (Claude ``Write``; Codex ``exec_command`` or ``shell``),
then it says what it did and ends the turn. A request offering no tool is answered with a
short text. How far an agent has got is the number of tool results in the conversation,
so the model keeps no state. Its usage is reported (a token per four bytes) under its own
model name, which the default price table prices at zero.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import AsyncIterator
from typing import Any

from domain.workspaces.model_routes import BUILTIN_MODEL

AGENT = re.compile(r"\(agent `([A-Za-z0-9_-]+)`")
CLAUDE_CWD = re.compile(r"Primary working directory: (\S+?)(?:\\n|\s)")
CODEX_CWD = re.compile(r"<cwd>([^<]+)</cwd>")


def _tokens(data: str | bytes) -> int:
    return max(1, len(data) // 4)


def _tool_names(tools: Any) -> list[str]:
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict):
            names.append(str(tool.get("name") or (tool.get("function") or {}).get("name") or ""))
    return names


def _sse(events: list[tuple[str, dict[str, Any]]]) -> list[bytes]:
    return [f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode() for name, payload in events]


class _Answer:
    def __init__(self, status: int, content_type: str, parts: list[bytes]) -> None:
        self.status, self.headers, self._parts = status, [("content-type", content_type)], parts

    async def chunks(self) -> AsyncIterator[bytes]:
        for part in self._parts:
            yield part

    async def close(self) -> None:
        return None


def _json(status: int, payload: dict[str, Any]) -> _Answer:
    return _Answer(status, "application/json", [json.dumps(payload).encode()])


class Notes:
    """The short task: which file an agent writes, with what, and what it says after."""

    def __init__(self, text: str) -> None:
        self.agent = (AGENT.search(text) or [None, ""])[1]
        self.file = f"NOTES-{self.agent}.md" if self.agent else "NOTES.md"
        self.content = (f"# Notes by {self.agent or 'the agent'}\n\nWritten by the squadops built-in model "
                        "(no upstream model is configured).\n")

    def done(self, wrote: bool) -> str:
        if wrote:
            return f"Done: wrote {self.file} (squadops built-in model)."
        return "Done (squadops built-in model; no tool to write with)."


class BuiltinModel:
    """``ModelUpstream`` for both APIs at once."""

    name = "builtin"

    async def open(self, path: str, query: str, headers: list[tuple[str, str]], body: bytes) -> _Answer:
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            request = None
        if not isinstance(request, dict):
            return _json(400, {"error": {"type": "invalid_request_error", "message": "The body is not a JSON object."}})
        if path.endswith("/messages/count_tokens"):
            return _json(200, {"input_tokens": _tokens(body)})
        if path.endswith("/messages"):
            return self.messages(request, body)
        if path.endswith("/responses"):
            return self.responses(request, body)
        if path.endswith("/chat/completions"):
            return self.chat(request, body)
        return _json(404, {"error": {"type": "not_found_error", "message": f"No such model API: {path}"}})

    # -- Anthropic Messages ----------------------------------------------------------------

    def messages(self, request: dict[str, Any], body: bytes) -> _Answer:
        text = body.decode("utf-8", "replace")
        notes = Notes(text)
        turn = sum(1 for m in request.get("messages", []) if isinstance(m, dict) and isinstance(m.get("content"), list)
                   for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result")
        cwd = (CLAUDE_CWD.search(text) or [None, ""])[1]
        block: dict[str, Any]
        if turn == 0 and notes.agent and cwd and "Write" in _tool_names(request.get("tools")):
            block = {"type": "tool_use", "id": f"toolu_builtin_{notes.agent}_0", "name": "Write",
                     "input": {"file_path": f"{cwd.rstrip('/')}/{notes.file}", "content": notes.content}}
            delta, stop = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}, "tool_use"
            start = {**block, "input": {}}
        else:
            said = notes.done(turn > 0) if notes.agent and request.get("tools") else "ok"
            block, stop = {"type": "text", "text": said}, "end_turn"
            delta, start = {"type": "text_delta", "text": said}, {"type": "text", "text": ""}
        usage_in, usage_out = _tokens(body), _tokens(json.dumps(block))
        if not request.get("stream"):
            return _json(200, {"id": f"msg_builtin_{turn}", "type": "message", "role": "assistant",
                               "model": BUILTIN_MODEL, "content": [block], "stop_reason": stop, "stop_sequence": None,
                               "usage": {"input_tokens": usage_in, "output_tokens": usage_out}})
        return _Answer(200, "text/event-stream", _sse([
            ("message_start", {"type": "message_start", "message": {
                "id": f"msg_builtin_{turn}", "type": "message", "role": "assistant", "model": BUILTIN_MODEL,
                "content": [], "stop_reason": None, "stop_sequence": None,
                "usage": {"input_tokens": usage_in, "output_tokens": 1}}}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": usage_out}}),
            ("message_stop", {"type": "message_stop"}),
        ]))

    # -- OpenAI Responses ------------------------------------------------------------------

    def responses(self, request: dict[str, Any], body: bytes) -> _Answer:
        text = body.decode("utf-8", "replace")
        notes = Notes(text)
        items = request.get("input") if isinstance(request.get("input"), list) else []
        turn = sum(1 for i in items if isinstance(i, dict) and str(i.get("type", "")).endswith("_output"))
        cwd = (CODEX_CWD.search(text) or [None, ""])[1]
        tools = _tool_names(request.get("tools"))
        write = f"printf %s {shlex.quote(notes.content)} > {shlex.quote(notes.file)}"
        item: dict[str, Any]
        if turn == 0 and notes.agent and "exec_command" in tools:
            arguments: dict[str, Any] = {"cmd": write, **({"workdir": cwd} if cwd else {})}
            item = self._call("exec_command", arguments, notes.agent)
        elif turn == 0 and notes.agent and "shell" in tools:
            item = self._call("shell", {"command": ["bash", "-lc", write], **({"workdir": cwd} if cwd else {})},
                              notes.agent)
        else:
            said = notes.done(turn > 0) if notes.agent else "ok"
            item = {"type": "message", "id": f"msg_builtin_{turn}", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": said, "annotations": []}]}
        usage_in, usage_out = _tokens(body), _tokens(json.dumps(item))
        usage = {"input_tokens": usage_in, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": usage_out,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": usage_in + usage_out}
        rid = f"resp_builtin_{turn}"
        done = {"id": rid, "object": "response", "status": "completed", "model": BUILTIN_MODEL, "output": [item],
                "usage": usage}
        if not request.get("stream"):
            return _json(200, done)
        return _Answer(200, "text/event-stream", _sse([
            ("response.created", {"type": "response.created", "response": {
                "id": rid, "object": "response", "status": "in_progress", "model": BUILTIN_MODEL, "output": []}}),
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed", "response": done}),
        ]))

    @staticmethod
    def _call(name: str, arguments: dict[str, Any], agent: str) -> dict[str, Any]:
        return {"type": "function_call", "id": f"fc_builtin_{agent}_0", "call_id": f"call_builtin_{agent}_0",
                "name": name, "arguments": json.dumps(arguments), "status": "completed"}

    # -- chat completions ------------------------------------------------------------------

    def chat(self, request: dict[str, Any], body: bytes) -> _Answer:
        messages = request.get("messages") if isinstance(request.get("messages"), list) else []
        last = next((str(m.get("content", "")) for m in reversed(messages) if isinstance(m, dict)), "")
        said = f"echo: {last}"
        usage = {"prompt_tokens": _tokens(body), "completion_tokens": _tokens(said)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        base = {"id": "chatcmpl-builtin", "model": BUILTIN_MODEL}
        if not request.get("stream"):
            return _json(200, {**base, "object": "chat.completion", "usage": usage, "choices": [
                {"index": 0, "message": {"role": "assistant", "content": said}, "finish_reason": "stop"}]})
        chunks = [{**base, "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": said}, "finish_reason": None}]},
            {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
        if (request.get("stream_options") or {}).get("include_usage"):
            chunks.append({**base, "object": "chat.completion.chunk", "choices": [], "usage": usage})
        return _Answer(200, "text/event-stream",
                       [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"])
