// The office floor: one character per agent, in the room of its role, keyed by agent id.
// The page arrives with its agents drawn (api/web/templates/office/agent.html); they are
// adopted as they are, and agents that join later are clones of the same template's blank
// agent (<template id="agent-template">), given their values here. An update changes
// only the attributes and texts that differ; agents absent from a snapshot (time travel)
// are hidden, never removed, so nothing is re-rendered.

import { config } from "../lib/api.js";
import { setAttr, setHidden, setText } from "../lib/dom.js";
import { colour, roleWord } from "./sprite.js";

export const STATE_TEXT = config.office.state_text;

/** intake, lanes, testers or compactor: where a role sits. */
export function zoneOf(agent) {
  const role = roleWord(agent.role_key);
  if (role === "planner" || role === "curator") return "intake";
  if (role.startsWith("tester") || agent.agent_id.startsWith("tester-")) return "testers";
  if (role === "compactor") return "compactor";
  return "lanes";
}

export class Floor {
  constructor(root, { onOpen }) {
    this.root = root;
    this.onOpen = onOpen;
    this.agents = new Map(); // agent_id -> {button, parts, data}
    this.rooms = new Map();
    for (const room of root.querySelectorAll(".room")) this.rooms.set(room.dataset.zone, room.querySelector(".agents"));
    for (const button of root.querySelectorAll(".slot > [data-agent-id]")) this.#adopt(button);
    this.firstPainted = this.agents.size > 0; // painted with the page itself
    root.addEventListener("click", (event) => {
      const button = event.target.closest("[data-agent-id]");
      if (button) this.open(button);
    });
    root.addEventListener("keydown", (event) => this.#key(event));
  }

  get(agentId) {
    return this.agents.get(agentId)?.data;
  }

  nickname(agentId) {
    return this.get(agentId)?.agent_nickname || agentId;
  }

  /** Shows ``pixelAgents`` as they are: updates known ones, adds new ones, hides the rest. */
  apply(pixelAgents) {
    const seen = new Set();
    const added = new Map(); // zone -> fragment
    for (const agent of pixelAgents) {
      seen.add(agent.agent_id);
      let record = this.agents.get(agent.agent_id);
      if (!record) {
        record = this.#create(agent);
        const zone = zoneOf(agent);
        if (!added.has(zone)) added.set(zone, document.createDocumentFragment());
        added.get(zone).append(record.slot);
      }
      record.data = agent;
    }
    for (const [zone, fragment] of added) this.rooms.get(zone).append(fragment);
    for (const [agentId, record] of this.agents) {
      setHidden(record.slot, !seen.has(agentId));
      if (seen.has(agentId)) this.#update(record);
    }
    for (const room of this.rooms.values()) {
      setHidden(room.parentElement, ![...room.children].some((slot) => !slot.hidden));
    }
    this.#keepTabStop();
    if (!this.firstPainted && seen.size) {
      this.firstPainted = true;
      requestAnimationFrame(() => performance.mark("squadops:first-agent"));
    }
  }

  #adopt(button) {
    const q = (selector) => button.querySelector(selector);
    const parts = { bubble: q(".bubble"), wall: q(".wall"), wallText: q(".wall-text"), nick: q(".nick"), tool: q(".tool") };
    const record = { slot: button.parentElement, button, parts, data: null };
    this.agents.set(button.dataset.agentId, record);
    return record;
  }

  #create(agent) {
    const slot = document.getElementById("agent-template").content.firstElementChild.cloneNode(true);
    const button = slot.querySelector(".agent");
    button.dataset.agentId = agent.agent_id;
    button.dataset.zone = zoneOf(agent);
    button.dataset.role = roleWord(agent.role_key);
    button.querySelector(".nick").removeAttribute("elementtiming"); // the page's own paint only
    colour(button.querySelector(".sprite"), agent);
    const record = this.#adopt(button);
    record.data = agent;
    return record;
  }

  #update(record) {
    const { button, parts, data: a } = record;
    const state = a.pixel_state;
    setAttr(button, "data-pixel-state", state);
    setAttr(button, "data-live-status", a.live_status);
    setText(parts.nick, a.agent_nickname || a.agent_id);
    setText(parts.tool, a.current_tool_name || STATE_TEXT[state] || state);
    setAttr(parts.tool, "data-tool", a.current_tool_name ? "yes" : "no");
    const target = a.dialogue_target_agent_id ? this.nickname(a.dialogue_target_agent_id) : "";
    let bubble = "";
    if (state === "in_conversation") bubble = target ? `→ ${target}` : "…";
    else if (state === "awaiting_reply") bubble = target ? `? ${target}` : "?";
    else if (state === "waiting") bubble = "…";
    setText(parts.bubble, bubble);
    setHidden(parts.bubble, !bubble);
    const blocked = state === "blocked";
    setHidden(parts.wall, !blocked);
    setText(parts.wallText, blocked ? a.wall.message || a.wall.code : "");
    const tool = a.current_tool_name ? `, tool ${a.current_tool_name}` : "";
    const talk = target && (state === "in_conversation" || state === "awaiting_reply") ? `, with ${target}` : "";
    const wall = blocked ? `, wall ${a.wall.code}: ${a.wall.message}` : "";
    const label = `${a.alias || a.agent_id} ${a.agent_nickname}: ${STATE_TEXT[state] || state}${tool}${talk}${wall}`;
    setAttr(button, "aria-label", label);
    setAttr(button, "title", `${a.alias || a.agent_id}: ${STATE_TEXT[state] || state}${talk}`);
  }

  // -- keyboard: one tab stop in the office, arrow keys between agents -------------------------

  visible() {
    return [...this.root.querySelectorAll(".slot:not([hidden]) > [data-agent-id]")];
  }

  #keepTabStop() {
    const visible = this.visible();
    const current = visible.find((b) => b.tabIndex === 0);
    if (current || !visible.length) return;
    for (const record of this.agents.values()) record.button.tabIndex = -1;
    visible[0].tabIndex = 0;
  }

  focus(button) {
    for (const record of this.agents.values()) if (record.button !== button) record.button.tabIndex = -1;
    button.tabIndex = 0;
    button.focus();
  }

  open(button) {
    this.focus(button);
    for (const record of this.agents.values()) setAttr(record.button, "aria-expanded", record.button === button ? "true" : "false");
    this.onOpen(button.dataset.agentId, button);
  }

  closed() {
    for (const record of this.agents.values()) setAttr(record.button, "aria-expanded", "false");
  }

  #key(event) {
    const button = event.target.closest?.("[data-agent-id]");
    if (!button) return;
    const visible = this.visible();
    const index = visible.indexOf(button);
    let next;
    if (event.key === "ArrowRight") next = visible[Math.min(visible.length - 1, index + 1)];
    else if (event.key === "ArrowLeft") next = visible[Math.max(0, index - 1)];
    else if (event.key === "Home") next = visible[0];
    else if (event.key === "End") next = visible[visible.length - 1];
    else if (event.key === "ArrowDown" || event.key === "ArrowUp") next = this.#vertical(button, visible, event.key === "ArrowDown");
    else return;
    event.preventDefault();
    if (next) this.focus(next);
  }

  /** The nearest agent below (or above) ``button``, on screen. */
  #vertical(button, visible, down) {
    const from = button.getBoundingClientRect();
    const cx = from.left + from.width / 2;
    let best = null;
    let bestScore = Infinity;
    for (const other of visible) {
      if (other === button) continue;
      const r = other.getBoundingClientRect();
      const dy = down ? r.top - from.bottom : from.top - r.bottom;
      if (dy < -from.height / 2) continue;
      const score = Math.max(dy, 0) * 4 + Math.abs(r.left + r.width / 2 - cx);
      if (score < bestScore) {
        bestScore = score;
        best = other;
      }
    }
    return best;
  }
}
