// An agent's panel: what it does, its wall, and one button per verb allowed at the
// session level. A blocked agent's recommended action comes first (the control-line rule:
// read wall.message, dispatch wall.recommended_action, one click). Every click calls the
// real control endpoint and shows its answer: the 202, or the error body.

import { config, describe, postJSON } from "../lib/api.js";
import { h, money, setAttr, setHidden, setText } from "../lib/dom.js";

const FIELDS = [
  // [name, label, kind]
  ["message", "Message", "textarea"],
  ["target_agent_id", "Target agent (handoff)", "agents"],
  ["wake_target", "Wake target (resume)", "agents"],
  ["thread_id", "Thread id", "text"],
  ["title", "Task card title", "text"],
  ["task_card_id", "Task card id", "text"],
  ["provider", "Provider", "text"],
  ["model", "Model", "text"],
  ["effort", "Effort", ["", "low", "medium", "high"]],
  ["speed", "Speed", ["", "standard", "fast"]],
  ["reason", "Reason (recorded with the verb)", "text"],
];
const COMMON = new Set(["message", "reason"]);

/** The body of a verb: the verb and the fields it reads that are filled in. */
export function controlBody(verb, values) {
  const body = { verb };
  for (const field of config.verbs.uses[verb] || ["reason"]) {
    const value = (values[field] || "").trim();
    if (value) body[field] = value;
  }
  return body;
}

/** What a verb still needs, as a hint on its button. */
function needs(verb) {
  const required = config.verbs.required[verb] || [];
  const oneOf = config.verbs.one_of[verb] || [];
  if (oneOf.length) return [...required, oneOf.join(" or ")];
  return required;
}

/** Shows a control answer in ``output``: "202 accepted …" or the error body. */
export function showAnswer(output, verb, { status, body }) {
  const ok = status === 202;
  setAttr(output, "data-status", String(status));
  setAttr(output, "data-answer-verb", verb);
  const summary = ok ? `${status} ${verb} accepted (control ${body.control_id})` : describe(status, body);
  output.replaceChildren(h("span", { class: "answer-line" }, summary), h("pre", { class: "answer-body" }, JSON.stringify(body, null, 2)));
}

/** A verb button with its hint; destructive verbs ask for a second click. */
export const NO_CONTROL =
  "Your role on this project does not include control (owner or maintainer): the verbs are shown, not sent.";

export function verbButton(verb, level, send) {
  const hint = needs(verb);
  const button = h(
    "button",
    // A caller whose role cannot control sees the verbs, not a button the service would refuse.
    { type: "button", class: "verb", "data-verb": verb, "data-level": level, disabled: !config.may_control,
      title: config.may_control ? null : NO_CONTROL },
    h("span", { class: "verb-label" }, config.verbs.labels[verb] || verb),
    h("code", { class: "verb-code" }, verb),
    hint.length ? h("span", { class: "verb-needs" }, `needs ${hint.join(", ")}`) : null,
  );
  let armed = null;
  button.addEventListener("click", () => {
    if (config.verbs.confirm.includes(verb) && !armed) {
      button.dataset.armed = "true";
      button.querySelector(".verb-label").textContent = `Confirm ${config.verbs.labels[verb] || verb}`;
      armed = setTimeout(() => disarm(), 4000);
      return;
    }
    disarm();
    send(verb, button);
  });
  function disarm() {
    clearTimeout(armed);
    armed = null;
    delete button.dataset.armed;
    button.querySelector(".verb-label").textContent = config.verbs.labels[verb] || verb;
  }
  return button;
}

export class Panel {
  constructor(root, floor) {
    this.root = root;
    this.floor = floor;
    this.agentId = "";
    this.opener = null;
    this.past = false;
    this.#build();
    root.addEventListener("keydown", (event) => {
      if (event.key === "Escape") this.close();
    });
  }

  #build() {
    const t = {};
    t.title = h("h2", { id: "panel-title", tabindex: "-1" });
    t.close = h("button", { type: "button", class: "close", "aria-label": "Close the agent panel" }, "×");
    t.close.addEventListener("click", () => this.close());
    t.state = h("p", { class: "panel-state", "data-panel-state": "" });
    t.facts = h("dl", { class: "facts" });
    t.factValues = {};
    for (const [key, label] of [
      ["agent", "Agent"],
      ["status", "Live status"],
      ["tempo", "Tempo"],
      ["step", "Step"],
      ["tool", "Tool"],
      ["process", "Process"],
      ["mailbox", "Mailbox"],
      ["thread", "Thread"],
      ["metrics", "Cost · turns"],
      ["updated", "Last update"],
    ]) {
      t.factValues[key] = h("dd");
      t.facts.append(h("dt", {}, label), t.factValues[key]);
    }
    t.wall = h("section", { class: "wall-box", "aria-labelledby": "wall-title", hidden: true });
    t.wallTitle = h("h3", { id: "wall-title" });
    t.wallMessage = h("p", { class: "wall-message", "data-wall-message": "" });
    t.wall.append(t.wallTitle, t.wallMessage);
    t.past = h("p", { class: "notice", hidden: true }, "You are looking at the past: verbs act on the live session.");
    t.denied = h(
      "p",
      { class: "notice", hidden: config.may_control },
      NO_CONTROL,
    );
    t.inputs = {};
    const form = h("form", { class: "verb-fields", "aria-label": "Verb fields" });
    form.addEventListener("submit", (event) => event.preventDefault());
    const more = h("details", { class: "more-fields" }, h("summary", {}, "More fields"));
    for (const [name, label, kind] of FIELDS) {
      const id = `field-${name}`;
      let input;
      if (kind === "textarea") input = h("textarea", { id, name, rows: "2" });
      else if (kind === "agents") input = h("select", { id, name }, h("option", { value: "" }, "—"));
      else if (Array.isArray(kind)) input = h("select", { id, name }, kind.map((v) => h("option", { value: v }, v || "—")));
      else input = h("input", { id, name, type: "text", autocomplete: "off", spellcheck: "false" });
      t.inputs[name] = input;
      (COMMON.has(name) ? form : more).append(h("div", { class: "field" }, h("label", { for: id }, label), input));
    }
    form.append(more);
    t.verbs = h("div", { class: "verb-row session-verbs", role: "group", "aria-label": "Session verbs" });
    t.buttons = new Map();
    for (const verb of config.verbs.session) {
      const button = verbButton(verb, "session", (v) => this.#send(v));
      t.buttons.set(verb, button);
      t.verbs.append(button);
    }
    t.result = h("output", { class: "control-result", "data-control-result": "session", "aria-live": "polite" });
    this.root.replaceChildren(
      h("div", { class: "panel-head" }, t.title, t.close),
      t.state,
      t.past,
      t.denied,
      t.wall,
      t.verbs,
      form,
      t.result,
      t.facts,
    );
    this.t = t;
  }

  open(agentId, opener) {
    if (this.agentId !== agentId) {
      this.t.result.replaceChildren();
      setAttr(this.t.result, "data-status", null);
    }
    this.agentId = agentId;
    this.opener = opener;
    setAttr(this.root, "data-agent", agentId);
    this.refresh();
    setHidden(this.root, false);
    this.t.title.focus();
  }

  close() {
    if (this.root.hidden) return;
    setHidden(this.root, true);
    this.floor.closed();
    this.opener?.focus();
  }

  setPast(past) {
    this.past = past;
    setHidden(this.t.past, !past);
  }

  /** Re-reads the agent from the floor and changes what differs. */
  refresh() {
    if (!this.agentId) return;
    const a = this.floor.get(this.agentId);
    const v = this.floor.view(this.agentId);
    const t = this.t;
    if (!a) return;
    setText(t.title, `${v.name} · ${a.agent_nickname}`);
    setText(t.state, v.said);
    setAttr(t.state, "data-pixel-state", a.pixel_state);
    const f = t.factValues;
    setText(f.agent, `${a.agent_id} (${a.role_key}) · session ${a.session_id}`);
    setText(f.status, a.live_status);
    setText(f.tempo, a.tempo_phase);
    setText(f.step, a.current_step || "—");
    setText(f.tool, a.current_tool_name || "—");
    const process = [a.agent_process_provider, a.agent_process_model, a.agent_process_effort, a.agent_process_speed].filter(Boolean);
    setText(f.process, process.join(" · ") || "—");
    setText(f.mailbox, String(a.mailbox_count));
    setText(f.thread, a.active_thread_id || "—");
    const m = a.process_metrics;
    const turns = m.num_turns >= 0 ? `${m.num_turns} turns` : "turns unknown";
    setText(f.metrics, `${money(m.total_cost_usd)} · ${turns}`);
    setText(f.updated, a.last_update_at || "—");
    const blocked = a.pixel_state === "blocked" && a.wall.recommended_action;
    setHidden(t.wall, !blocked);
    setText(t.wallTitle, blocked ? `Blocked: ${a.wall.code}` : "");
    setText(t.wallMessage, blocked ? a.wall.message : "");
    this.#order(blocked ? a.wall.recommended_action : "");
    if (!t.inputs.thread_id.value && a.active_thread_id) t.inputs.thread_id.placeholder = a.active_thread_id;
    this.#agentOptions(a.agent_id);
  }

  /** The recommended verb first, the others in their usual order. */
  #order(recommended) {
    const t = this.t;
    if (t.verbs.dataset.recommended === recommended) return;
    t.verbs.dataset.recommended = recommended;
    for (const [verb, button] of t.buttons) {
      const first = verb === recommended;
      button.classList.toggle("recommended", first);
      setAttr(button, "data-recommended", first ? "true" : null);
    }
    const order = recommended ? [recommended, ...config.verbs.session.filter((v) => v !== recommended)] : config.verbs.session;
    for (const verb of order) t.verbs.append(t.buttons.get(verb));
  }

  #agentOptions(self) {
    const ids = [...this.floor.agents.keys()].filter((id) => id !== self);
    const key = `${self}|${ids.join(",")}`;
    if (this.optionsKey === key) return;
    this.optionsKey = key;
    for (const name of ["target_agent_id", "wake_target"]) {
      const select = this.t.inputs[name];
      const value = select.value;
      select.replaceChildren(
        h("option", { value: "" }, "—"),
        ...ids.map((id) => h("option", { value: id }, `${id} (${this.floor.nickname(id)})`)),
      );
      select.value = ids.includes(value) ? value : "";
    }
  }

  async #send(verb) {
    const a = this.floor.get(this.agentId);
    if (!a) return;
    const values = Object.fromEntries(Object.entries(this.t.inputs).map(([k, input]) => [k, input.value]));
    const body = controlBody(verb, values);
    const path = `/control-plane/studio/runs/${encodeURIComponent(config.run_id)}/sessions/${encodeURIComponent(a.session_id)}/control`;
    setAttr(this.t.result, "data-status", "pending");
    this.t.result.replaceChildren(h("span", { class: "answer-line" }, `sending ${verb}…`));
    try {
      showAnswer(this.t.result, verb, await postJSON(path, body));
    } catch (error) {
      showAnswer(this.t.result, verb, { status: 0, body: `the request failed: ${error.message}` });
    }
  }
}
