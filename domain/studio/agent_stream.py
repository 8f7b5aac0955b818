"""Agent CLI streams read line by line: Claude Code ``stream-json`` and Codex ``exec --json``.

Each line of a process's stdout becomes zero or more signals. The two formats name their
line kinds apart (Claude Code: ``system``, ``assistant``, ``user``, ``result``; Codex:
``thread.started``, ``item.completed``, ``turn.completed`` ...), so one reader follows
either, line by line. Pure: no I/O; numbers are copied as the CLI reported them.

- Claude Code: ``system``/``init`` carries ``session_id``; ``assistant`` messages carry
  ``text`` and ``tool_use`` blocks; ``user`` messages carry ``tool_result`` blocks; the
  ``result`` line carries ``total_cost_usd``, ``duration_ms``, ``num_turns``, ``is_error``,
  ``subtype`` and ``permission_denials`` (every call the CLI denied). The model that ran is
  named on ``init`` and on each assistant message.
- Codex: ``thread.started`` carries ``thread_id``; items (``command_execution``,
  ``mcp_tool_call``, ``file_change``, ``web_search``, ``todo_list``, ``agent_message`` ...)
  start and complete; ``turn.completed`` carries ``usage`` and ends the exec run, and
  ``turn.failed`` ends it with an error. Codex reports no cost, duration or turn count.
  A failed or declined item, a rejected patch and an ``error`` item within a turn are failed
  tool calls (an ``error`` item before the turn, such as an unknown model's metadata, is a
  notice); a declined item, a rejected patch and a call refused for want of approval (or by a
  read-only sandbox) are denials, listed in the turn's result as ``permission_denials``
  (shaped like Claude Code's).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

EXCERPT = 300
# Claude Code result fields copied as reported (nothing else is taken, nothing made up).
RESULT_FIELDS = (
    "type", "subtype", "is_error", "total_cost_usd", "duration_ms", "duration_api_ms",
    "num_turns", "result", "session_id", "usage", "permission_denials",
)
# Codex item types that are tool calls, and the tool name each one stands for.
CODEX_TOOLS = {
    "command_execution": "shell",
    "file_change": "apply_patch",
    "web_search": "web_search",
    "todo_list": "update_plan",
}
FAILED = frozenset({"failed", "declined"})
# A failed Codex item whose error says one of these was refused, not merely unsuccessful.
REFUSALS = ("requires approval", "not permitted", "permission denied", "read-only file system")
ERROR_TOOL = "codex_error"


class Started(msgspec.Struct, frozen=True):
    """The CLI opened its LLM session (Claude ``session_id``, Codex ``thread_id``)."""

    llm_session_id: str
    model: str = ""


class ToolUse(msgspec.Struct, frozen=True):
    call_id: str
    name: str
    input: dict[str, Any]


class ToolResult(msgspec.Struct, frozen=True):
    call_id: str
    name: str
    is_error: bool
    text: str = ""  # an excerpt (a failure's reason)
    output: str = ""  # what the call answered, whole as the CLI reported it


class ModelSeen(msgspec.Struct, frozen=True):
    """The stream named the model that ran (once per change of model)."""

    model: str


class Text(msgspec.Struct, frozen=True):
    text: str


class Result(msgspec.Struct, frozen=True):
    """The run's final result, shaped like Claude Code's ``result`` line."""

    result: dict[str, Any]


class Notice(msgspec.Struct, frozen=True):
    """Something worth a runtime log line (an MCP server that did not connect, an error item)."""

    level: str
    text: str


class Malformed(msgspec.Struct, frozen=True):
    line: str
    reason: str


Signal = Started | ToolUse | ToolResult | ModelSeen | Text | Result | Notice | Malformed


def excerpt(text: str, limit: int = EXCERPT) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _content_text(content: Any, separator: str = " ") -> str:
    """A tool result's or message's text: a string, or the text of its blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return separator.join(
            str(block.get("text", "")) for block in content if isinstance(block, dict) and block.get("type") == "text"
        )
    return ""


class StreamReader:
    """One process's stream: remembers its LLM session and the tool calls awaiting results."""

    def __init__(self, watched_servers: tuple[str, ...] = ("squadops",)) -> None:
        self.llm_session_id = ""
        self.pending: dict[str, str] = {}
        self.last_text = ""
        self.watched_servers = watched_servers
        self.model = ""
        # This turn's denied calls (Codex), reported with its result like Claude Code's.
        self.denials: list[dict[str, Any]] = []
        self.errors = 0
        self.in_turn = False  # between Codex's turn.started and its turn's end

    def read(self, line: str) -> list[Signal]:
        """The signals of one line of the stream (a blank line has none)."""
        stripped = line.strip()
        if not stripped:
            return []
        try:
            data = json.loads(stripped)
        except ValueError as exc:
            return [Malformed(excerpt(stripped), f"not JSON ({exc.msg})")]
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            return [Malformed(excerpt(stripped), "a JSON line without a string 'type'")]
        kind = data["type"]
        try:
            if "." in kind or kind in ("error", "request_user_input"):
                return self._codex(kind, data)
            return self._claude(kind, data)
        except (AttributeError, TypeError, ValueError) as exc:
            return [Malformed(excerpt(stripped), f"unexpected {kind} line ({type(exc).__name__}: {exc})")]

    # -- Claude Code stream-json ---------------------------------------------------------

    def _claude(self, kind: str, data: dict[str, Any]) -> list[Signal]:
        if kind == "system":
            if data.get("subtype") != "init":
                return []
            self.llm_session_id = str(data.get("session_id") or "")
            self.model = str(data.get("model") or "")
            signals: list[Signal] = [Started(self.llm_session_id, self.model)]
            for server in data.get("mcp_servers") or []:
                name, status = str(server.get("name", "")), str(server.get("status", ""))
                if name in self.watched_servers and status != "connected":
                    signals.append(Notice("warn", f"MCP server {name} did not connect ({status or 'no status'})."))
            return signals
        if kind == "assistant":
            message = data.get("message") or {}
            model = str(message.get("model") or "")
            seen: list[Signal] = []
            if model and model != self.model and model != "<synthetic>":
                self.model = model
                seen.append(ModelSeen(model))
            return seen + self._assistant(message)
        if kind == "user":
            return self._tool_results(data.get("message") or {})
        if kind == "result":
            result = {key: data[key] for key in RESULT_FIELDS if key in data}
            result.setdefault("type", "result")
            return [Result(result)]
        return []  # stream_event, control lines and kinds added later carry nothing we use

    def _assistant(self, message: dict[str, Any]) -> list[Signal]:
        content = message.get("content")
        if isinstance(content, str):
            return self._text(content)
        signals: list[Signal] = []
        for block in content or []:
            kind = block.get("type")
            if kind == "text":
                signals += self._text(str(block.get("text", "")))
            elif kind == "tool_use":
                call_id, name = str(block.get("id", "")), str(block.get("name", ""))
                arguments = block.get("input")
                self.pending[call_id] = name
                signals.append(ToolUse(call_id, name, arguments if isinstance(arguments, dict) else {}))
        return signals

    def _tool_results(self, message: dict[str, Any]) -> list[Signal]:
        content = message.get("content")
        if not isinstance(content, list):
            return []
        signals: list[Signal] = []
        for block in content:
            if block.get("type") != "tool_result":
                continue
            call_id = str(block.get("tool_use_id", ""))
            name = self.pending.pop(call_id, "")
            text = _content_text(block.get("content"), "\n")
            signals.append(ToolResult(call_id, name, bool(block.get("is_error")), excerpt(text), text))
        return signals

    def _text(self, text: str) -> list[Signal]:
        if not text.strip():
            return []
        self.last_text = text
        return [Text(text)]

    # -- Codex exec --json ----------------------------------------------------------------

    def _codex(self, kind: str, data: dict[str, Any]) -> list[Signal]:
        if kind == "thread.started":
            self.llm_session_id = str(data.get("thread_id") or "")
            return [Started(self.llm_session_id)]
        if kind == "turn.started":
            self.in_turn = True
            return []
        if kind in ("item.started", "item.completed"):
            return self._item(kind, data.get("item") or {})
        if kind in ("turn.completed", "turn.failed"):
            self.in_turn = False
        if kind == "turn.completed":
            result = {
                "type": "result", "subtype": "success", "is_error": False,
                "result": self.last_text, "session_id": self.llm_session_id,
            }
            if isinstance(data.get("usage"), dict):
                result["usage"] = data["usage"]
            if self.denials:
                result["permission_denials"], self.denials = self.denials, []
            return [Result(result)]
        if kind == "turn.failed":
            error = data.get("error") or {}
            result = {
                "type": "result", "subtype": "error_during_execution", "is_error": True,
                "result": str(error.get("message", "")), "session_id": self.llm_session_id,
            }
            if self.denials:
                result["permission_denials"], self.denials = self.denials, []
            return [Result(result)]
        if kind == "error":
            return [Notice("warn", excerpt(f"codex: {data.get('message', '')}"))]
        if kind == "request_user_input":
            return [Notice("warn", "The agent asked for user input; a squad process has no one to answer.")]
        return []  # turn.started, item.updated, item.plan.delta

    def _item(self, kind: str, item: dict[str, Any]) -> list[Signal]:
        item_type, call_id = str(item.get("type", "")), str(item.get("id", ""))
        if item_type in ("agent_message", "plan"):
            return self._text(str(item.get("text", ""))) if kind == "item.completed" else []
        if item_type == "error":
            if not self.in_turn:  # a setup notice before the model acted (an unknown model's metadata)
                return [Notice("warn", excerpt(f"codex: {item.get('message', '')}"))]
            # An error item in a turn is a failed call of its own (it has no start): counted, never a tool.
            self.errors += 1
            message = str(item.get("message", ""))
            return [ToolResult(call_id or f"error-{self.errors}", ERROR_TOOL, True, excerpt(message) or "error", message)]
        name, arguments = self._codex_tool(item_type, item)
        if not name:
            return []  # reasoning, and item types added later
        signals: list[Signal] = []
        if call_id not in self.pending:
            # A file change is only ever emitted completed; anything else started first.
            self.pending[call_id] = name
            signals.append(ToolUse(call_id, name, arguments))
        if kind == "item.completed":
            self.pending.pop(call_id, None)
            status = str(item.get("status", ""))
            failed = status in FAILED or bool(item.get("error"))
            output = self._codex_output(item)
            if failed and self._denied(item_type, status, output):
                self.denials.append({"tool_name": name, "tool_use_id": call_id, "tool_input": arguments})
            signals.append(ToolResult(call_id, name, failed, excerpt(output or (status if failed else "")), output))
        return signals

    @staticmethod
    def _denied(item_type: str, status: str, output: str) -> bool:
        """A declined item, a rejected patch, or a call refused for want of approval."""
        if status == "declined" or item_type == "file_change":
            return True
        lowered = output.lower()
        return any(refusal in lowered for refusal in REFUSALS)

    @staticmethod
    def _codex_tool(item_type: str, item: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if item_type == "mcp_tool_call":
            arguments = item.get("arguments")
            name = f"mcp__{item.get('server', '')}__{item.get('tool', '')}"
            return name, arguments if isinstance(arguments, dict) else {}
        if item_type == "collab_tool_call":
            return f"collab_{item.get('tool', '')}", {"prompt": item.get("prompt") or ""}
        name = CODEX_TOOLS.get(item_type, "")
        if item_type == "command_execution":
            return name, {"command": str(item.get("command", ""))}
        if item_type == "file_change":
            return name, {"changes": list(item.get("changes") or [])}
        if item_type == "web_search":
            return name, {"query": str(item.get("query", ""))}
        if item_type == "todo_list":
            return name, {"items": list(item.get("items") or [])}
        return name, {}

    @staticmethod
    def _codex_output(item: dict[str, Any]) -> str:
        error = item.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if item.get("aggregated_output"):
            return str(item["aggregated_output"])
        result = item.get("result")
        if isinstance(result, dict):
            return _content_text(result.get("content"), "\n")
        return ""
