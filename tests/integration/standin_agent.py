"""A scripted stand-in for an agent CLI, run by the local plane as a real subprocess.

It behaves like Claude Code in print mode (``--output-format stream-json``) or like
``codex exec --json``, as its plan says: it reads its brief from stdin, connects to the
MCP server its ``--mcp-config`` names (expanding ``${VAR}`` in headers as Claude Code does),
calls the squad's tools over HTTP for ``squad`` steps, and writes the stream lines the
real CLI would. Its plan (``--plan plan.json``) maps an agent id to one list of steps per
attempt; what it saw (brief, environment, argv) is kept in ``.standin/`` of its worktree, and its
attempts are counted in its ``HOME`` (the agent's private folder). It needs only the standard
library, so it runs under the machine's ``/usr/bin/python3`` inside the agent sandbox.

Steps: ``["text", str]``, ``["tool", name, input]``, ``["squad", tool, arguments]``,
``["garbage", str]``, ``["stderr", str]``, ``["commit", path, content]``,
``["scratch", path, content]`` (an uncommitted file), ``["hang", seconds]`` (the CLI stops
answering), ``["exit", code]`` (a crash mid-stream), ``["result", fields]``,
``["fail", name, input, text]`` (a tool call that fails), ``["pending", name, input]`` (a
Claude tool call whose result never comes) and ``["denied", name, input]`` (a
call the CLI's permissions refuse: Claude lists it in its result's ``permission_denials``;
Codex declines the command, rejects the patch, or refuses the MCP call for want of approval).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

DEFAULT = {"format": "claude", "steps": [["tool", "Read", {"file_path": "README.md"}], ["result", {}]]}


def emit(line: dict[str, Any] | str) -> None:
    sys.stdout.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
    sys.stdout.flush()


class Mcp:
    """A minimal streamable-HTTP MCP client, configured like Claude Code's ``--mcp-config``."""

    def __init__(self, config_path: str) -> None:
        server = json.loads(Path(config_path).read_text())["mcpServers"]["squadops"]
        self.url = server["url"]
        self.headers = {k: re.sub(r"\$\{(\w+)\}", lambda m: os.environ.get(m.group(1), ""), v)
                        for k, v in server.get("headers", {}).items()}
        self.next_id = 0
        self.status = "failed"
        try:
            self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                        "clientInfo": {"name": "standin", "version": "1"}})
            self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
            self.status = "connected"
        except (OSError, urllib.error.URLError, KeyError):
            pass

    def post(self, message: dict[str, Any]) -> tuple[int, Any]:
        data = json.dumps(message).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "2025-06-18", **self.headers}
        request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=10) as answer:
            body = answer.read()
            return answer.status, json.loads(body) if body else None

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        _, body = self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        if "error" in body:
            raise KeyError(body["error"]["message"])
        return body["result"]

    def call(self, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        result = self.request("tools/call", {"name": tool, "arguments": arguments})
        return bool(result.get("isError")), " ".join(c.get("text", "") for c in result.get("content", []))


class Claude:
    def __init__(self, session: str, mcp: Mcp | None) -> None:
        self.session, self.mcp, self.n = session, mcp, 0
        self.denials: list[dict[str, Any]] = []
        servers = [{"name": "squadops", "status": mcp.status}] if mcp else []
        emit({"type": "system", "subtype": "init", "cwd": os.getcwd(), "session_id": session,
              "tools": ["Bash", "Edit", "Read"], "mcp_servers": servers, "model": "standin-model",
              "permissionMode": "default", "apiKeySource": "none"})

    def _msg(self, kind: str, content: list[dict[str, Any]]) -> None:
        emit({"type": kind, "message": {"role": kind, "content": content}, "parent_tool_use_id": None,
              "session_id": self.session})

    def text(self, text: str) -> None:
        self._msg("assistant", [{"type": "text", "text": text}])

    def tool(self, name: str, arguments: dict[str, Any], run: Any = None) -> None:
        self.n += 1
        call_id = f"toolu_{self.n:04d}"
        self._msg("assistant", [{"type": "tool_use", "id": call_id, "name": name, "input": arguments}])
        is_error, text = run() if run else (False, "ok")
        self._msg("user", [{"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": is_error}])

    def fail(self, name: str, arguments: dict[str, Any], text: str) -> None:
        self.tool(name, arguments, lambda: (True, text))

    def denied(self, name: str, arguments: dict[str, Any]) -> None:
        self.fail(name, arguments, f"Claude requested permissions to use {name}, but you haven't granted it yet.")
        self.denials.append({"tool_name": name, "tool_use_id": f"toolu_{self.n:04d}", "tool_input": arguments})

    def result(self, fields: dict[str, Any]) -> None:
        emit({"type": "result", "subtype": "success", "is_error": False, "result": "done",
              "session_id": self.session, "permission_denials": self.denials, **fields})


class Codex:
    def __init__(self, session: str, mcp: Mcp | None) -> None:
        self.session, self.mcp, self.n = session, mcp, 0
        emit({"type": "thread.started", "thread_id": session})
        emit({"type": "turn.started"})

    def _item(self, kind: str, item: dict[str, Any]) -> None:
        emit({"type": kind, "item": item})

    def text(self, text: str) -> None:
        self.n += 1
        self._item("item.completed", {"id": f"item_{self.n}", "type": "agent_message", "text": text})

    def tool(self, name: str, arguments: dict[str, Any], run: Any = None) -> None:
        self.n += 1
        item_id = f"item_{self.n}"
        if name == "shell":
            item = {"id": item_id, "type": "command_execution", "command": arguments["command"],
                    "aggregated_output": "", "exit_code": None, "status": "in_progress"}
            self._item("item.started", item)
            self._item("item.completed", {**item, "aggregated_output": "ok\n", "exit_code": 0, "status": "completed"})
            return
        server, tool = name.split("__")[1:3]
        item = {"id": item_id, "type": "mcp_tool_call", "server": server, "tool": tool, "arguments": arguments,
                "result": None, "error": None, "status": "in_progress"}
        self._item("item.started", item)
        is_error, text = run() if run else (False, "ok")
        if is_error:
            done = {**item, "error": {"message": text}, "status": "failed"}
        else:
            done = {**item, "result": {"content": [{"type": "text", "text": text}], "structured_content": None},
                    "status": "completed"}
        self._item("item.completed", done)

    def fail(self, name: str, arguments: dict[str, Any], text: str) -> None:
        self.n += 1
        if name == "shell":
            self._item("item.completed", {"id": f"item_{self.n}", "type": "command_execution",
                                          "command": arguments.get("command", ""), "aggregated_output": text,
                                          "exit_code": 1, "status": "failed"})
        else:
            self.n -= 1
            self.tool(name, arguments, lambda: (True, text))

    def denied(self, name: str, arguments: dict[str, Any]) -> None:
        self.n += 1
        item_id = f"item_{self.n}"
        if name == "apply_patch":  # the read-only sandbox rejects the patch
            self._item("item.completed", {"id": item_id, "type": "file_change", "status": "failed",
                                          "changes": arguments.get("changes", [])})
        elif name == "shell":
            self._item("item.completed", {"id": item_id, "type": "command_execution", "status": "declined",
                                          "command": arguments.get("command", ""), "aggregated_output": "",
                                          "exit_code": None})
        else:
            self.n -= 1
            self.tool(name, arguments, lambda: (True, "MCP tool call requires approval, but approval policy is never"))

    def result(self, fields: dict[str, Any]) -> None:
        usage = {"input_tokens": 1200, "cached_input_tokens": 200, "output_tokens": 340}
        emit({"type": "turn.completed", "usage": fields.get("usage", usage)})


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plan", required=True)
    parser.add_argument("--mcp-config", default="")
    parser.add_argument("--allowedTools", default="")
    args, _ = parser.parse_known_args()
    brief = sys.stdin.read()
    agent = os.environ["SQUADOPS_AGENT_ID"]
    # Attempts are counted in its own home (outside the worktree, which may be recreated).
    counter = Path(os.environ["HOME"]) / "standin-attempts"
    attempt = (len(counter.read_text().split()) if counter.exists() else 0) + 1
    counter.write_text(" ".join(str(n) for n in range(1, attempt + 1)))
    seen = Path(".standin")
    seen.mkdir(exist_ok=True)
    # What it saw is the test's, not the agent's work: kept out of git (the plane commits the rest).
    exclude = Path(subprocess.run(["git", "rev-parse", "--git-path", "info/exclude"], capture_output=True,
                                  text=True, check=True).stdout.strip())
    if ".standin/" not in (exclude.read_text() if exclude.exists() else ""):
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with exclude.open("a") as out:
            out.write("\n.standin/\n")
    (seen / f"brief-{attempt}.txt").write_text(brief)
    counter.with_name(f"standin-brief-{attempt}.txt").write_text(brief)
    (seen / f"env-{attempt}.json").write_text(json.dumps(
        {k: v for k, v in os.environ.items() if k.startswith(("SQUADOPS_", "ANTHROPIC_", "OPENAI_"))}))
    (seen / f"argv-{attempt}.json").write_text(json.dumps(sys.argv[1:]))
    attempts = json.loads(Path(args.plan).read_text()).get(agent) or [DEFAULT]
    plan = attempts[min(attempt, len(attempts)) - 1]
    mcp = Mcp(args.mcp_config) if args.mcp_config else None
    cli = (Codex if plan.get("format") == "codex" else Claude)(plan.get("session", f"{agent}-{attempt}"), mcp)
    for step in plan["steps"]:
        kind = step[0]
        if kind == "text":
            cli.text(step[1])
        elif kind == "tool":
            cli.tool(step[1], step[2])
        elif kind == "squad":
            assert mcp is not None, "a squad step needs --mcp-config"
            cli.tool(f"mcp__squadops__{step[1]}", step[2], lambda s=step: mcp.call(s[1], s[2]))
        elif kind == "fail":
            cli.fail(step[1], step[2], step[3])
        elif kind == "pending":
            cli.n += 1
            cli._msg("assistant", [{"type": "tool_use", "id": f"toolu_{cli.n:04d}", "name": step[1], "input": step[2]}])
        elif kind == "denied":
            cli.denied(step[1], step[2])
        elif kind == "garbage":
            emit(step[1])
        elif kind == "stderr":
            sys.stderr.write(step[1] + "\n")
            sys.stderr.flush()
        elif kind in ("commit", "scratch"):
            Path(step[1]).write_text(step[2])
            if kind == "commit":
                subprocess.run(["git", "add", step[1]], check=True)
                subprocess.run(["git", "-c", "user.name=standin", "-c", "user.email=s@x", "commit", "-qm", step[1]],
                               check=True)
        elif kind == "hang":
            time.sleep(step[1])
        elif kind == "exit":
            return int(step[1])
        elif kind == "result":
            cli.result(step[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
