// The office floor: one character per agent, in the room of its role, keyed by agent id.
// The page arrives with its agents drawn (api/web/templates/office/agent.html); they are
// adopted as they are, and agents that join later are clones of the same template's blank
// agent (<template id="agent-template">). What an agent shows (room, colours, texts) comes
// ready-made with each feed (agent_views, computed by api/web/office_view.py as for the
// first paint) and is only placed here. An update changes only the attributes and texts
// that differ; agents absent from a snapshot (time travel) are hidden, never removed, so
// nothing is re-rendered.

import { setAttr, setHidden, setText } from "../lib/dom.js";

export class Floor {
  constructor(root, { onOpen }) {
    this.root = root;
    this.onOpen = onOpen;
    this.agents = new Map(); // agent_id -> {button, parts, data, view}
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

  /** What the agent shows (its entry of the feed's agent_views). */
  view(agentId) {
    return this.agents.get(agentId)?.view;
  }

  nickname(agentId) {
    return this.get(agentId)?.agent_nickname || agentId;
  }

  /** Shows ``pixelAgents`` as ``views`` say: updates known ones, adds new ones, hides the rest. */
  apply(pixelAgents, views) {
    const seen = new Set();
    const added = new Map(); // zone -> fragment
    pixelAgents.forEach((agent, index) => {
      const view = views[index];
      seen.add(agent.agent_id);
      let record = this.agents.get(agent.agent_id);
      if (!record) {
        record = this.#create(view);
        if (!added.has(view.zone)) added.set(view.zone, document.createDocumentFragment());
        added.get(view.zone).append(record.slot);
      }
      record.data = agent;
      record.view = view;
    });
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
    const record = { slot: button.parentElement, button, parts, data: null, view: null };
    this.agents.set(button.dataset.agentId, record);
    return record;
  }

  #create(view) {
    const slot = document.getElementById("agent-template").content.firstElementChild.cloneNode(true);
    const button = slot.querySelector(".agent");
    button.dataset.agentId = view.agent_id;
    button.dataset.zone = view.zone;
    button.dataset.role = view.role;
    button.querySelector(".nick").removeAttribute("elementtiming"); // the page's own paint only
    button.querySelector(".sprite").setAttribute("style", view.style);
    return this.#adopt(button);
  }

  #update(record) {
    const { button, parts, view: v } = record;
    setAttr(button, "data-pixel-state", v.pixel_state);
    setAttr(button, "data-live-status", v.live_status);
    setText(parts.nick, v.nick);
    setText(parts.tool, v.tool);
    setAttr(parts.tool, "data-tool", v.tool_used ? "yes" : "no");
    setText(parts.bubble, v.bubble);
    setHidden(parts.bubble, !v.bubble);
    setHidden(parts.wall, !v.wall);
    setText(parts.wallText, v.wall);
    setAttr(button, "aria-label", v.label);
    setAttr(button, "title", v.title);
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
