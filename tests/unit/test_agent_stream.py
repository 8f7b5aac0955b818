"""Agent CLI streams read line by line: real Claude Code stream-json and Codex JSONL shapes,
malformed lines, and the steps a session's signals become."""

from __future__ import annotations

import json
from types import SimpleNamespace

from domain.shared import ports
from domain.studio import agent_stream as s
from domain.studio.agent_tools import (
    StepTranslator,
    check_arguments,
    pull_request_target,
    squad_tool,
)

# Claude Code 2.x print mode, --output-format stream-json --verbose (one JSON object per line).
CLAUDE = [
    {"type": "system", "subtype": "hook_started", "hook_name": "SessionStart:startup"},
    {"type": "system", "subtype": "init", "cwd": "/w", "session_id": "8d45afe0-771b-4803-8379-491dd9455365",
     "tools": ["Bash", "Read", "mcp__squadops__handoff_agent"], "model": "claude-sonnet-4-5",
     "mcp_servers": [{"name": "squadops", "status": "failed"}], "permissionMode": "default"},
    {"type": "assistant", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
     "content": [{"type": "thinking", "thinking": "", "signature": "x"}, {"type": "text", "text": "Checking."},
                 {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {"file_path": "README.md"}}]},
     "parent_tool_use_id": None, "session_id": "8d45afe0-771b-4803-8379-491dd9455365"},
    {"type": "user", "message": {"role": "user", "content": [
        {"tool_use_id": "toolu_01", "type": "tool_result", "content": [{"type": "text", "text": "# Readme"}]}]},
     "session_id": "8d45afe0-771b-4803-8379-491dd9455365"},
    {"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_02", "name": "mcp__squadops__handoff_agent",
         "input": {"target_agent_id": "tester-admin", "message": "Prove it as admin"}}]}},
    {"type": "user", "message": {"role": "user", "content": [
        {"tool_use_id": "toolu_02", "type": "tool_result", "content": "{\"accepted\": true}", "is_error": False}]}},
    {"type": "stream_event", "event": {"type": "content_block_delta", "index": 0}},
    {"type": "result", "subtype": "success", "is_error": False, "duration_ms": 2166, "duration_api_ms": 2142,
     "num_turns": 3, "result": "Done.", "session_id": "8d45afe0-771b-4803-8379-491dd9455365",
     "total_cost_usd": 0.0347, "usage": {"input_tokens": 10, "output_tokens": 4}, "permission_denials": []},
]

# codex exec --json (codex-rs/exec ThreadEvent).
CODEX = [
    {"type": "thread.started", "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "**Looking**"}},
    {"type": "item.started", "item": {"id": "item_1", "type": "command_execution", "command": "bash -lc ls",
                                      "aggregated_output": "", "exit_code": None, "status": "in_progress"}},
    {"type": "item.completed", "item": {"id": "item_1", "type": "command_execution", "command": "bash -lc ls",
                                        "aggregated_output": "README.md\n", "exit_code": 0, "status": "completed"}},
    {"type": "item.completed", "item": {"id": "item_2", "type": "file_change",
                                        "changes": [{"path": "a.py", "kind": "add"}], "status": "completed"}},
    {"type": "item.started", "item": {"id": "item_3", "type": "mcp_tool_call", "server": "squadops",
                                      "tool": "comment_agent", "arguments": {"target_agent_id": "planner",
                                                                             "message": "done"},
                                      "result": None, "error": None, "status": "in_progress"}},
    {"type": "item.completed", "item": {"id": "item_3", "type": "mcp_tool_call", "server": "squadops",
                                        "tool": "comment_agent", "arguments": {}, "result": None,
                                        "error": {"message": "unknown_target_agent"}, "status": "failed"}},
    {"type": "item.completed", "item": {"id": "item_4", "type": "error", "message": "model rerouted"}},
    {"type": "item.completed", "item": {"id": "item_5", "type": "agent_message", "text": "All set."}},
    {"type": "turn.completed", "usage": {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122}},
]


def read_all(reader: s.StreamReader, lines: list[object]) -> list[s.Signal]:
    return [signal for line in lines for signal in reader.read(json.dumps(line) + "\n")]


def test_claude_stream_json_gives_session_tools_text_and_the_result_as_reported() -> None:
    signals = read_all(s.StreamReader(), CLAUDE)
    assert signals == [
        s.Started("8d45afe0-771b-4803-8379-491dd9455365", "claude-sonnet-4-5"),
        s.Notice("warn", "MCP server squadops did not connect (failed)."),
        s.Text("Checking."),
        s.ToolUse("toolu_01", "Read", {"file_path": "README.md"}),
        s.ToolResult("toolu_01", "Read", False, "# Readme"),
        s.ToolUse("toolu_02", "mcp__squadops__handoff_agent",
                  {"target_agent_id": "tester-admin", "message": "Prove it as admin"}),
        s.ToolResult("toolu_02", "mcp__squadops__handoff_agent", False, '{"accepted": true}'),
        s.Result({"type": "result", "subtype": "success", "is_error": False, "total_cost_usd": 0.0347,
                  "duration_ms": 2166, "duration_api_ms": 2142, "num_turns": 3, "result": "Done.",
                  "session_id": "8d45afe0-771b-4803-8379-491dd9455365",
                  "usage": {"input_tokens": 10, "output_tokens": 4}}),
    ]


def test_codex_jsonl_gives_the_same_signals_and_reports_no_cost_duration_or_turns() -> None:
    signals = read_all(s.StreamReader(), CODEX)
    assert signals == [
        s.Started("0199a213-81c0-7800-8aa1-bbab2a035a53"),
        s.ToolUse("item_1", "shell", {"command": "bash -lc ls"}),
        s.ToolResult("item_1", "shell", False, "README.md"),
        s.ToolUse("item_2", "apply_patch", {"changes": [{"path": "a.py", "kind": "add"}]}),
        s.ToolResult("item_2", "apply_patch", False, ""),
        s.ToolUse("item_3", "mcp__squadops__comment_agent", {"target_agent_id": "planner", "message": "done"}),
        s.ToolResult("item_3", "mcp__squadops__comment_agent", True, "unknown_target_agent"),
        s.Notice("warn", "codex: model rerouted"),
        s.Text("All set."),
        s.Result({"type": "result", "subtype": "success", "is_error": False, "result": "All set.",
                  "session_id": "0199a213-81c0-7800-8aa1-bbab2a035a53",
                  "usage": {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122}}),
    ]
    failed = s.StreamReader().read(json.dumps({"type": "turn.failed", "error": {"message": "401 Unauthorized"}}))
    assert failed == [s.Result({"type": "result", "subtype": "error_during_execution", "is_error": True,
                                "result": "401 Unauthorized", "session_id": ""})]


def test_malformed_lines_are_named_and_blank_lines_ignored() -> None:
    reader = s.StreamReader()
    assert reader.read("   \n") == []
    kinds = [reader.read(line)[0] for line in (
        "Error: connect ECONNREFUSED", "[1, 2]", '{"no_type": true}',
        json.dumps({"type": "assistant", "message": {"content": ["not a block"]}}),
    )]
    assert all(isinstance(k, s.Malformed) for k in kinds)
    assert kinds[0].reason.startswith("not JSON") and kinds[0].line == "Error: connect ECONNREFUSED"
    assert "without a string 'type'" in kinds[1].reason and "unexpected assistant line" in kinds[3].reason


def run_and_session(agent_id: str = "planner") -> tuple[SimpleNamespace, SimpleNamespace]:
    facts = {"suits": [{"suit_id": "admin", "role_key": "role_tester", "title": "Administrator"}],
             "repository_bindings": [{"repository_key": "backend", "vcs_repo_slug": "acme/api",
                                      "repository_type": ""}]}
    run = SimpleNamespace(project_facts=facts, project_slug="acme", tenant="default", run_id="run-1")
    return run, SimpleNamespace(agent_id=agent_id, pull_requests=0)


def test_a_squad_tool_counts_as_a_call_at_once_and_acts_only_on_its_successful_result() -> None:
    run, session = run_and_session()
    translator = StepTranslator("planner")
    steps = [step for signal in read_all(s.StreamReader(), CLAUDE) for step in translator.steps(signal, run, session)]
    assert [type(step).__name__ for step in steps] == [
        "RunnerOutput", "Say", "CallTool", "CallTool", "Handoff", "Finish",
    ]
    handoff = steps[4]
    assert isinstance(handoff, ports.Handoff)
    assert (handoff.target_agent_id, handoff.spec_agent_id, handoff.reason) == ("tester-admin", "tester", "Prove it as admin")
    assert handoff.suit == {"suit_id": "admin", "role_key": "role_tester", "title": "Administrator"}
    assert translator.first_tool_seen
    # The result line as reported, but only its known fields.
    expected = {k: v for k, v in CLAUDE[-1].items() if k != "permission_denials"}
    assert steps[-1] == ports.Finish(agent_id="planner", result=expected)

    refused = StepTranslator("curator")
    codex_steps = [st for sig in read_all(s.StreamReader(), CODEX) for st in refused.steps(sig, run, session)]
    comment_log = [st for st in codex_steps if isinstance(st, ports.RunnerOutput) and "refused" in st.text]
    assert comment_log and not any(isinstance(st, ports.Comment) for st in codex_steps)


def test_controller_actions_never_satisfy_the_first_tool() -> None:
    run, session = run_and_session()
    translator = StepTranslator("planner")
    report = s.ToolUse("t1", "mcp__squadops__report", {"summary": "starting"})
    translator.steps(report, run, session)
    assert not translator.first_tool_seen
    translator.steps(s.ToolUse("t2", "Grep", {"pattern": "TODO"}), run, session)
    assert translator.first_tool_seen


def test_squad_tool_arguments_and_pull_request_numbers() -> None:
    assert squad_tool("mcp__squadops__open_pull_request") == "open_pull_request"
    assert squad_tool("mcp__squadops__rm") == "" and squad_tool("mcp__vcs__handoff_agent") == ""
    assert check_arguments("comment_agent", {"target_agent_id": "qa", "message": " hi "}) == {
        "target_agent_id": "qa", "message": "hi"}
    run, _ = run_and_session()
    first = pull_request_target(run.project_facts, "acme", "default", "run-1", "backend", 1)
    assert (first.repository_key, first.pr_owner, first.pr_repo) == ("backend", "acme", "api")
    assert first == pull_request_target(run.project_facts, "acme", "default", "run-1", "backend", 1)
    assert first.pr_number != pull_request_target(run.project_facts, "acme", "default", "run-1", "backend", 2).pr_number
