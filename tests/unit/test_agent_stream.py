"""Agent CLI streams read line by line: real Claude Code stream-json and Codex JSONL shapes,
malformed lines, and the steps a session's signals become."""

from __future__ import annotations

import json
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.shared import ports
from domain.studio import agent_stream as s
from domain.studio.agent_tools import (
    StepTranslator,
    check_arguments,
    pull_request_target,
    squad_tool,
)
from domain.studio.policies.first_tool import counts_as_first_tool

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
        s.ToolResult("toolu_01", "Read", False, "# Readme", "# Readme"),
        s.ToolUse("toolu_02", "mcp__squadops__handoff_agent",
                  {"target_agent_id": "tester-admin", "message": "Prove it as admin"}),
        s.ToolResult("toolu_02", "mcp__squadops__handoff_agent", False, '{"accepted": true}', '{"accepted": true}'),
        s.Result({"type": "result", "subtype": "success", "is_error": False, "total_cost_usd": 0.0347,
                  "duration_ms": 2166, "duration_api_ms": 2142, "num_turns": 3, "result": "Done.",
                  "session_id": "8d45afe0-771b-4803-8379-491dd9455365",
                  "usage": {"input_tokens": 10, "output_tokens": 4}, "permission_denials": []}),
    ]


def test_codex_jsonl_gives_the_same_signals_and_reports_no_cost_duration_or_turns() -> None:
    signals = read_all(s.StreamReader(), CODEX)
    assert signals == [
        s.Started("0199a213-81c0-7800-8aa1-bbab2a035a53"),
        s.ToolUse("item_1", "shell", {"command": "bash -lc ls"}),
        s.ToolResult("item_1", "shell", False, "README.md", "README.md\n"),
        s.ToolUse("item_2", "apply_patch", {"changes": [{"path": "a.py", "kind": "add"}]}),
        s.ToolResult("item_2", "apply_patch", False, ""),
        s.ToolUse("item_3", "mcp__squadops__comment_agent", {"target_agent_id": "planner", "message": "done"}),
        s.ToolResult("item_3", "mcp__squadops__comment_agent", True, "unknown_target_agent", "unknown_target_agent"),
        s.ToolResult("item_4", s.ERROR_TOOL, True, "model rerouted", "model rerouted"),
        s.Text("All set."),
        s.Result({"type": "result", "subtype": "success", "is_error": False, "result": "All set.",
                  "session_id": "0199a213-81c0-7800-8aa1-bbab2a035a53",
                  "usage": {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122}}),
    ]
    failed = s.StreamReader().read(json.dumps({"type": "turn.failed", "error": {"message": "401 Unauthorized"}}))
    assert failed == [s.Result({"type": "result", "subtype": "error_during_execution", "is_error": True,
                                "result": "401 Unauthorized", "session_id": ""})]


def test_a_codex_error_item_before_the_turn_is_a_notice_and_within_it_a_failed_call() -> None:
    reader = s.StreamReader()
    metadata = {"type": "item.completed", "item": {"id": "item_0", "type": "error",
                                                   "message": "Model metadata for `alias` not found."}}
    assert read_all(reader, [{"type": "thread.started", "thread_id": "t"}, metadata])[1:] == [
        s.Notice("warn", "codex: Model metadata for `alias` not found."),
    ]
    assert read_all(reader, [{"type": "turn.started"}, metadata]) == [
        s.ToolResult("item_0", s.ERROR_TOOL, True, *["Model metadata for `alias` not found."] * 2),
    ]


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


def test_a_tool_call_is_recorded_when_its_result_arrives_and_a_squad_tool_acts_only_on_success() -> None:
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
    assert translator.first_tool_seen and not translator.in_flight
    # The result line as reported, but only its known fields.
    assert steps[-1] == ports.Finish(agent_id="planner", result=dict(CLAUDE[-1]))

    refused = StepTranslator("curator")
    codex_steps = [st for sig in read_all(s.StreamReader(), CODEX) for st in refused.steps(sig, run, session)]
    failed = [st for st in codex_steps if isinstance(st, ports.FailToolCall)]
    assert [(f.tool_name, f.reason) for f in failed] == [
        ("mcp__squadops__comment_agent", "unknown_target_agent"), (s.ERROR_TOOL, "model rerouted"),
    ]
    assert [st.tool_name for st in codex_steps if isinstance(st, ports.CallTool)] == ["shell", "apply_patch"]
    assert not any(isinstance(st, ports.Comment) for st in codex_steps)
    finish = codex_steps[-1]
    assert isinstance(finish, ports.Finish) and finish.result["usage"]["output_tokens"] == 122


def test_controller_actions_never_satisfy_the_first_tool() -> None:
    run, session = run_and_session()
    translator = StepTranslator("planner")
    report = s.ToolUse("t1", "mcp__squadops__report", {"summary": "starting"})
    translator.steps(report, run, session)
    assert translator.in_flight and not translator.first_tool_seen
    translator.steps(s.ToolResult("t1", "mcp__squadops__report", False, "ok"), run, session)
    assert not translator.first_tool_seen and not translator.in_flight
    assert translator.steps(s.ToolUse("t2", "Grep", {"pattern": "TODO"}), run, session) == []
    assert not translator.first_tool_seen  # not until its result arrives
    translator.steps(s.ToolResult("t2", "Grep", False, "a.py:1"), run, session)
    assert translator.first_tool_seen


# Claude Code with no permission mode: Write is denied, its result says so, and the result
# line lists the denial (the same call, reported twice: counted once).
CLAUDE_DENIED = [
    {"type": "system", "subtype": "init", "session_id": "s-1", "model": "claude-sonnet-4-5", "mcp_servers": []},
    {"type": "assistant", "message": {"model": "claude-opus-4-1", "content": [
        {"type": "tool_use", "id": "toolu_w", "name": "Write", "input": {"file_path": "/w/a.txt", "content": "x"}}]}},
    {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "toolu_w", "is_error": True,
                                              "content": "Claude requested permissions to write to /w/a.txt, but "
                                                         "you haven't granted it yet."}]}},
    {"type": "assistant", "message": {"model": "claude-opus-4-1", "content": [
        {"type": "tool_use", "id": "toolu_b", "name": "Bash", "input": {"command": "git add -A && git commit -m x"}}]}},
    {"type": "result", "subtype": "success", "is_error": False, "result": "I could not write.", "num_turns": 3,
     "duration_ms": 900, "total_cost_usd": 0.01, "session_id": "s-1",
     "permission_denials": [
         {"tool_name": "Write", "tool_use_id": "toolu_w", "tool_input": {"file_path": "/w/a.txt", "content": "x"}},
         {"tool_name": "Bash", "tool_use_id": "toolu_b", "tool_input": {"command": "git add -A && git commit -m x"}},
     ]},
]


def test_denied_calls_are_failed_calls_counted_once_never_the_first_tool_and_block_the_session() -> None:
    run, session = run_and_session()
    translator = StepTranslator("planner")
    signals = read_all(s.StreamReader(), CLAUDE_DENIED)
    assert s.ModelSeen("claude-opus-4-1") in signals  # the model each message names, when it changes
    steps = [step for signal in signals for step in translator.steps(signal, run, session)]
    assert [type(step).__name__ for step in steps] == ["ReportModel", "FailToolCall", "FailToolCall", "Block"]
    write, bash = (st for st in steps if isinstance(st, ports.FailToolCall))
    assert (write.tool_name, bash.tool_name) == ("Write", "Bash")
    assert "haven't granted" in write.reason and bash.reason == "permission denied"
    assert write.route == "/w/a.txt"
    block = steps[-1]
    assert isinstance(block, ports.Block) and block.code == "agent_permission_denied"
    assert "Write, Bash" in block.message and "retry_prompt" in block.message
    assert block.evidence["denied_tools"] == ["Write", "Bash"] and block.evidence["result"]["num_turns"] == 3
    assert not translator.first_tool_seen and not any(isinstance(st, ports.CallTool | ports.Finish) for st in steps)
    assert not translator.in_flight  # the run's result ends the calls it left without a result


# Codex in its read-only sandbox: the patch is rejected, a command declined, the squad's MCP
# call refused for want of approval; then the turn ends.
CODEX_DENIED = [
    {"type": "thread.started", "thread_id": "t-1"},
    {"type": "item.completed", "item": {"id": "i1", "type": "file_change", "changes": [{"path": "a.py", "kind": "add"}],
                                        "status": "failed"}},
    {"type": "item.started", "item": {"id": "i2", "type": "command_execution", "command": "git commit -m x",
                                      "status": "in_progress"}},
    {"type": "item.completed", "item": {"id": "i2", "type": "command_execution", "command": "git commit -m x",
                                        "aggregated_output": "", "exit_code": None, "status": "declined"}},
    {"type": "item.started", "item": {"id": "i3", "type": "mcp_tool_call", "server": "squadops", "tool": "report",
                                      "arguments": {"summary": "hi"}, "status": "in_progress"}},
    {"type": "item.completed", "item": {"id": "i3", "type": "mcp_tool_call", "server": "squadops", "tool": "report",
                                        "arguments": {"summary": "hi"}, "status": "failed", "error": {
                                            "message": "MCP tool call requires approval, but approval policy is never"}}},
    {"type": "item.started", "item": {"id": "i4", "type": "command_execution", "command": "pytest", "status": "in_progress"}},
    {"type": "item.completed", "item": {"id": "i4", "type": "command_execution", "command": "pytest",
                                        "aggregated_output": "1 failed", "exit_code": 1, "status": "failed"}},
    {"type": "turn.completed", "usage": {"input_tokens": 5, "cached_input_tokens": 0, "output_tokens": 2}},
]


def test_codex_failed_declined_and_rejected_items_are_failed_calls_and_refusals_block_the_turn() -> None:
    run, session = run_and_session()
    translator = StepTranslator("backend")
    reader = s.StreamReader()
    steps = [step for signal in read_all(reader, CODEX_DENIED) for step in translator.steps(signal, run, session)]
    failed = [st for st in steps if isinstance(st, ports.FailToolCall)]
    assert [f.tool_name for f in failed] == ["apply_patch", "shell", "mcp__squadops__report", "shell"]
    assert not translator.first_tool_seen and not any(isinstance(st, ports.CallTool) for st in steps)
    block = steps[-1]
    assert isinstance(block, ports.Block) and block.code == "agent_permission_denied"
    # A failing test run is a failed call, not a denial: three refusals, none counted twice.
    assert block.evidence["denied_tools"] == ["apply_patch", "shell", "mcp__squadops__report"]
    assert block.evidence["result"]["usage"]["input_tokens"] == 5
    assert reader.denials == []  # the next turn starts with none


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


NAMES = ["Read", "Write", "Bash", "mcp__squadops__report", "hud_report", "mcp__vcs__read_file", "shell"]


@settings(max_examples=150, deadline=None)
@given(
    calls=st.lists(st.tuples(st.sampled_from(NAMES), st.booleans()), min_size=1, max_size=8),
    data=st.data(),
)
def test_failed_calls_are_never_the_first_tool_and_are_counted_apart(calls: list[tuple[str, bool]], data: st.DataObject) -> None:
    run, session = run_and_session()
    translator = StepTranslator("planner")
    uses = [s.ToolUse(f"c{i}", name, {"path": f"f{i}"}) for i, (name, _) in enumerate(calls)]
    assert all(translator.steps(use, run, session) == [] for use in uses)  # nothing counts before its result
    assert translator.in_flight
    order = data.draw(st.permutations(range(len(calls))))
    steps = [
        step for i in order
        for step in translator.steps(s.ToolResult(f"c{i}", calls[i][0], not calls[i][1], "why"), run, session)
    ]
    succeeded = sorted(name for name, ok in calls if ok)
    assert sorted(st_.tool_name for st_ in steps if isinstance(st_, ports.CallTool)) == succeeded
    assert sum(isinstance(st_, ports.FailToolCall) for st_ in steps) == sum(not ok for _, ok in calls)
    assert translator.first_tool_seen == any(ok and counts_as_first_tool(name) for name, ok in calls)
    assert not translator.in_flight


def test_each_clis_tool_result_shape_is_read_whole_and_the_session_keeps_its_first_bytes() -> None:
    from domain.studio.tool_results import KEPT_BYTES, kept

    listing = "\n".join(f"file_{n}.py" for n in range(2000))  # ~22 KB, more than the log keeps
    claude = [
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
            {"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {"file_path": "a.py"}},
            {"type": "tool_use", "id": "toolu_3", "name": "Write", "input": {"file_path": "/etc/x"}}]}},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": listing},
            {"type": "tool_result", "tool_use_id": "toolu_2",
             "content": [{"type": "text", "text": "1\tfirst"}, {"type": "image", "source": {}}, {"type": "text", "text": "2\tsecond"}]},
            {"type": "tool_result", "tool_use_id": "toolu_3", "content": "EACCES: <denied>", "is_error": True}]}},
    ]
    codex = [
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "item_1", "type": "command_execution", "command": "ls",
                                            "aggregated_output": listing, "exit_code": 0, "status": "completed"}},
        {"type": "item.completed", "item": {"id": "item_2", "type": "mcp_tool_call", "server": "vcs", "tool": "read_file",
                                            "arguments": {"path": "a.py"}, "status": "completed", "error": None,
                                            "result": {"content": [{"type": "text", "text": "1\tfirst"},
                                                                   {"type": "text", "text": "2\tsecond"}]}}},
        {"type": "item.completed", "item": {"id": "item_3", "type": "command_execution", "command": "make",
                                            "aggregated_output": "make: *** [test] Error 2\n", "exit_code": 2,
                                            "status": "failed"}},
    ]
    for lines in (claude, codex):
        results = [x for x in read_all(s.StreamReader(), lines) if isinstance(x, s.ToolResult)]
        # the whole output (a command's as written, a text-block list's blocks one a line), and the excerpt apart
        assert [r.output.rstrip("\n") for r in results][:2] == [listing, "1\tfirst\n2\tsecond"]
        assert results[0].text.endswith("…") and len(results[0].text) == s.EXCERPT
        assert results[2].is_error and results[2].output.strip() in ("EACCES: <denied>", "make: *** [test] Error 2")
    # the steps carry the result to the session: a successful call's and a failed one's
    run, session = run_and_session()
    translator = StepTranslator("planner")
    steps = [step for signal in read_all(s.StreamReader(), claude) for step in translator.steps(signal, run, session)]
    called = [step for step in steps if isinstance(step, ports.CallTool)]
    failed = [step for step in steps if isinstance(step, ports.FailToolCall)]
    assert [c.result for c in called] == [listing, "1\tfirst\n2\tsecond"]
    assert failed[0].result == "EACCES: <denied>" and failed[0].reason == "EACCES: <denied>"
    # what the log keeps: the first KEPT_BYTES bytes, cut on a character boundary, the whole size, the cut
    assert kept("short") == ("short", 5, False)
    big = kept(listing)
    assert big.truncated and big.size == len(listing.encode()) and big.text == listing[:KEPT_BYTES]
    wide = kept("é" * KEPT_BYTES)  # two bytes a character: half of them fit, none split
    assert wide == ("é" * (KEPT_BYTES // 2), 2 * KEPT_BYTES, True)
    odd = kept("a" + "é" * KEPT_BYTES)
    assert odd.text == "a" + "é" * (KEPT_BYTES // 2 - 1) and len(odd.text.encode()) == KEPT_BYTES - 1
