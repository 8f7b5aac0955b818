// An agent's transcript, live: the entries the page came with, then those the run's live
// channel brings for this agent (resumed after the last event the page was read at), each
// a clone of the page's blank entry (<template id="entry-template">) given its values.

import { config } from "./lib/api.js";
import { setAttr, setText } from "./lib/dom.js";
import { LiveStream } from "./office/live.js";

// live event name -> [entry kind, failed, the metric it counts]
const KINDS = {
  assistant_message: ["message", false, "messages"],
  tool_called: ["tool", false, "tool_calls"],
  tool_call_failed: ["tool", true, "failed_calls"],
  controller_action_observed: ["controller", false, ""],
  handed_off: ["handoff", false, "handoffs"],
  message_delivered: ["mailbox", false, ""],
  blocked: ["blocker", true, ""],
  unblocked: ["blocker", false, ""],
  pull_request_opened: ["delivery", false, ""],
  process_started: ["session", false, ""],
  start_failed: ["session", true, ""],
  model_reported: ["session", false, ""],
  completed: ["session", false, ""],
  stopped: ["session", false, ""],
};

const list = document.getElementById("entries");
const root = document.getElementById("transcript");
const liveState = document.getElementById("live-state");
let last = Number(config.position) || 0;

// The page's fold rule (api/web/transcript_view.py): a text longer than this folds.
function folded(text) {
  return text.length > config.fold.chars || text.split("\n").length > config.fold.lines;
}

function resultLabel(event) {
  const size = Number(event.result_size) || 0;
  const cut = event.result_truncated ? `, first ${config.fold.kept_bytes.toLocaleString("en-US")} shown` : "";
  return `result · ${size.toLocaleString("en-US")} bytes${cut}`;
}

function count(metric) {
  const el = document.querySelector(`[data-metric="${metric}"]`);
  if (el) setText(el, Number(el.textContent) + 1);
}

function append(event) {
  const mapped = KINDS[event.event_name];
  if (!mapped || event.agent_id !== config.agent_id) return;
  const [kind, failed, metric] = mapped;
  const item = document.getElementById("entry-template").content.firstElementChild.cloneNode(true);
  item.dataset.kind = kind;
  item.dataset.position = event.event_id;
  setAttr(item, "data-failed", failed);
  setText(item.querySelector(".entry-kind"), kind);
  if (failed) item.querySelector(".entry-kind").append(" ", Object.assign(document.createElement("strong"), { className: "failed", textContent: "failed" }));
  const tool = item.querySelector(".entry-tool");
  tool.hidden = !event.tool_name;
  setText(tool.querySelector("code"), event.tool_name);
  setText(tool.querySelector(".entry-input"), event.route);
  const target = item.querySelector(".entry-target");
  target.hidden = !event.target_agent_id;
  if (event.target_agent_id) {
    target.href = `/runs/${encodeURIComponent(config.run_id)}/agents/${encodeURIComponent(event.target_agent_id)}`;
    setText(target, `→ ${event.target_agent_id}`);
  }
  const result = item.querySelector(".entry-result");
  result.hidden = !event.result;
  if (event.result) {
    result.open = !folded(event.result);
    setText(result.querySelector("summary"), resultLabel(event));
    setText(result.querySelector("pre"), event.result);
  }
  setText(item.querySelector(".entry-text"), event.summary);
  setText(item.querySelector(".entry-at"), event.created_at);
  list.append(item);
  if (metric) count(metric);
  if (kind === "tool" && failed) count("tool_calls");
}

function onEvents(events) {
  for (const event of events) {
    const position = Number(event.event_id) || 0;
    if (position <= last) continue; // shown already
    last = position;
    append(event);
  }
}

function onStatus(state, detail) {
  root.dataset.live = state;
  setText(liveState, state === "open" ? "live" : `${state}${detail ? `: ${detail}` : ""}`);
}

new LiveStream({ topic: config.topic, lastEventId: last ? String(last) : "", onEvents, onStatus }).start();
