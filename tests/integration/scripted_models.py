"""Scripted model servers for the real agent CLIs: an Anthropic Messages API (streaming SSE,
with ``count_tokens``) for Claude Code and an OpenAI Responses API (streaming SSE) for Codex.

Each CLI is a real process from npm; only the model is scripted. A request names its agent
through the brief the plane wrote ("(agent `backend`, ...)"), and how far the agent has got
is the number of tool results already in the conversation, so the server keeps no session
state: turn ``n`` of an agent's script answers the request that carries ``n`` tool results.

Script actions (one model turn each):
- ``("write", path, content)``: the CLI's own file tool (Claude ``Write``; Codex ``exec_command``
  with a shell redirect, the tool Codex gives a model it has no metadata for);
- ``("shell", command)``: Claude ``Bash``; Codex ``exec_command``;
- ``("squad", tool, arguments)``: a tool of the squad's MCP server, by the name the CLI gave it;
- ``("say", text)``: a final answer (the turn ends). Every script ends with one.

Every request is recorded (path, model, authorization, agent, turn) for the tests to assert.
With ``narrate``, each tool turn also says ``[<run_id> <agent> <turn>]`` before its call, and
the time each answer was sent is kept (``sent``): a benchmark matches the office's live
events to them.
"""

from __future__ import annotations

import json
import re
import shlex
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from workers.json_http import JsonHandler

Action = tuple[Any, ...]
AGENT = re.compile(r"\(agent `([A-Za-z0-9_-]+)`")
RUN = re.compile(r"of squad run ([A-Za-z0-9_-]+) for project")
CLAUDE_CWD = re.compile(r"Primary working directory: (\S+?)(?:\\n|\s)")
CODEX_CWD = re.compile(r"<cwd>([^<]+)</cwd>")
USAGE = {"input_tokens": 120, "output_tokens": 30}


@dataclass
class Seen:
    api: str
    path: str
    model: str
    authorization: str
    agent: str
    turn: int
    tools: list[str] = field(default_factory=list)
    narration: str = ""


def _tool_names(tools: Any) -> Iterator[str]:
    """Every tool name a request offers, namespaces included."""
    if isinstance(tools, list):
        for tool in tools:
            yield from _tool_names(tool)
    elif isinstance(tools, dict):
        if isinstance(tools.get("name"), str):
            yield tools["name"]
        for value in tools.values():
            if isinstance(value, list | dict):
                yield from _tool_names(value)


class ScriptedModels:
    """Both APIs on one loopback port; ``scripts`` maps an agent id to its actions."""

    def __init__(self, scripts: Mapping[str, Sequence[Action]], narrate: bool = False) -> None:
        self.scripts = {agent: list(actions) for agent, actions in scripts.items()}
        self.narrate = narrate
        self.sent: dict[str, float] = {}  # narration -> when its answer was sent (perf_counter)
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-models", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ScriptedModels:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def requests_of(self, agent: str) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.agent == agent]

    # -- one turn --------------------------------------------------------------------------

    def _turn(self, agent: str, turn: int) -> Action:
        actions = self.scripts.get(agent, [])
        if turn < len(actions):
            return actions[turn]
        return ("say", f"{agent}: done.")

    @staticmethod
    def _squad_name(tools: Any, tool: str) -> str:
        names = [n for n in _tool_names(tools) if n.endswith(tool) and "squadops" in n]
        return names[0] if names else f"mcp__squadops__{tool}"

    @staticmethod
    def _squad_call(tools: Any, tool: str) -> tuple[str, str]:
        """(name, namespace) of a squad tool as Codex offers it: a function in the
        ``mcp__squadops`` namespace, or a flat ``mcp__squadops__<tool>`` function."""
        for entry in tools or []:
            if (entry.get("type") == "namespace" and "squadops" in str(entry.get("name", ""))
                    and any(t.get("name") == tool for t in entry.get("tools", []))):
                return tool, str(entry["name"])
        return ScriptedModels._squad_name(tools, tool), ""

    def anthropic(self, body: dict[str, Any]) -> tuple[list[tuple[str, dict[str, Any]]], Seen]:
        text = json.dumps(body)
        agent = (AGENT.search(text) or [None, ""])[1]
        turn = sum(1 for m in body.get("messages", []) if isinstance(m.get("content"), list)
                   for block in m["content"] if isinstance(block, dict) and block.get("type") == "tool_result")
        seen = Seen("anthropic", "", str(body.get("model", "")), "", agent, turn,
                    list(_tool_names(body.get("tools", []))))
        action = self._turn(agent, turn) if agent and body.get("tools") else ("say", "ok")
        cwd = (CLAUDE_CWD.search(text) or [None, "."])[1]
        block: dict[str, Any]
        if action[0] == "say":
            block, stop = {"type": "text", "text": action[1]}, "end_turn"
        else:
            if action[0] == "write":
                name, arguments = "Write", {"file_path": f"{cwd}/{action[1]}", "content": action[2]}
            elif action[0] == "shell":
                name, arguments = "Bash", {"command": action[1], "description": action[1][:60]}
            else:
                name, arguments = self._squad_name(body.get("tools"), action[1]), dict(action[2])
            block, stop = {"type": "tool_use", "id": f"toolu_{agent}_{turn:03d}", "name": name, "input": arguments}, "tool_use"
        model = str(body.get("model", ""))
        events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": {
            "id": f"msg_{agent}_{turn}", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": USAGE["input_tokens"], "output_tokens": 1}}})]
        index = 0
        narration = self._narration(text, agent, turn) if block["type"] == "tool_use" else ""
        if narration:
            events += [("content_block_start", {"type": "content_block_start", "index": 0,
                                                "content_block": {"type": "text", "text": ""}}),
                       ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                "delta": {"type": "text_delta", "text": narration}}),
                       ("content_block_stop", {"type": "content_block_stop", "index": 0})]
            index = 1
        if block["type"] == "text":
            events += [("content_block_start", {"type": "content_block_start", "index": index,
                                                "content_block": {"type": "text", "text": ""}}),
                       ("content_block_delta", {"type": "content_block_delta", "index": index,
                                                "delta": {"type": "text_delta", "text": block["text"]}})]
        else:
            events += [("content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                           "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}),
                       ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {
                           "type": "input_json_delta", "partial_json": json.dumps(block["input"])}})]
        events += [("content_block_stop", {"type": "content_block_stop", "index": index}),
                   ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                      "usage": {"output_tokens": USAGE["output_tokens"]}}),
                   ("message_stop", {"type": "message_stop"})]
        seen.narration = narration
        return events, seen

    def _narration(self, text: str, agent: str, turn: int) -> str:
        if not self.narrate:
            return ""
        run = (RUN.search(text) or [None, ""])[1]
        return f"[{run} {agent} {turn}] next step"

    def responses(self, body: dict[str, Any]) -> tuple[list[tuple[str, dict[str, Any]]], Seen]:
        text = json.dumps(body)
        agent = (AGENT.search(text) or [None, ""])[1]
        turn = sum(1 for item in body.get("input", []) if isinstance(item, dict)
                   and str(item.get("type", "")).endswith("_output"))
        seen = Seen("openai", "", str(body.get("model", "")), "", agent, turn, list(_tool_names(body.get("tools", []))))
        action = self._turn(agent, turn) if agent else ("say", "ok")
        cwd = (CODEX_CWD.search(text) or [None, "."])[1]
        rid = f"resp_{agent}_{turn}"
        item: dict[str, Any]
        namespace = ""
        if action[0] == "say":
            item = {"type": "message", "id": f"msg_{agent}_{turn}", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": action[1], "annotations": []}]}
        else:
            if action[0] == "write":
                name = "exec_command"
                arguments = {"cmd": f"printf %s {shlex.quote(action[2])} > {shlex.quote(action[1])}", "workdir": cwd}
            elif action[0] == "shell":
                name, arguments = "exec_command", {"cmd": action[1], "workdir": cwd}
            else:
                arguments = dict(action[2])
                name, namespace = self._squad_call(body.get("tools"), action[1])
            item = {"type": "function_call", "id": f"fc_{agent}_{turn}", "call_id": f"call_{agent}_{turn}",
                    "name": name, "arguments": json.dumps(arguments), "status": "completed"}
            if namespace:
                item["namespace"] = namespace
        usage = {"input_tokens": USAGE["input_tokens"], "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": USAGE["output_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": USAGE["input_tokens"] + USAGE["output_tokens"]}
        output = [item]
        narration = self._narration(text, agent, turn) if item["type"] == "function_call" else ""
        if narration:
            output.insert(0, {"type": "message", "id": f"msg_{agent}_{turn}_n", "role": "assistant",
                              "status": "completed",
                              "content": [{"type": "output_text", "text": narration, "annotations": []}]})
        events: list[tuple[str, dict[str, Any]]] = [
            ("response.created", {"type": "response.created", "response": {"id": rid, "status": "in_progress", "output": []}})]
        for n, out in enumerate(output):
            events += [("response.output_item.added", {"type": "response.output_item.added", "output_index": n, "item": out}),
                       ("response.output_item.done", {"type": "response.output_item.done", "output_index": n, "item": out})]
        events.append(("response.completed", {"type": "response.completed", "response": {
            "id": rid, "status": "completed", "model": body.get("model", ""), "output": output, "usage": usage}}))
        seen.narration = narration
        return events, seen

    # -- HTTP -----------------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        models = self

        class Handler(JsonHandler):
            protocol_version = "HTTP/1.1"

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                self.send_json(404, {"error": {"type": "not_found", "message": self.path}})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self.send_json(400, {"error": {"type": "invalid_request_error", "message": "not JSON"}})
                    return
                path = self.path.split("?", 1)[0]
                if path.endswith("/messages/count_tokens"):
                    self.send_json(200, {"input_tokens": len(json.dumps(body)) // 4})
                    return
                if path.endswith("/messages"):
                    events, seen = models.anthropic(body)
                elif path.endswith("/responses"):
                    events, seen = models.responses(body)
                else:
                    self.send_json(404, {"error": {"type": "not_found", "message": path}})
                    return
                seen.path = path
                seen.authorization = self.headers.get("authorization") or self.headers.get("x-api-key") or ""
                with models._lock:
                    models.seen.append(seen)
                data = b"".join(f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode() for name, payload in events)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()
                if seen.narration:
                    with models._lock:
                        models.sent[seen.narration] = time.perf_counter()

        return Handler
