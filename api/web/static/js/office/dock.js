// The log dock: runtime logs and live events, newest first, filterable by source and
// level. Entries are keyed (kind + event id), so a log seen in many feed reads and an
// event replayed after a reconnect appear once. Live events carry no level: they show
// under "all levels" only.

import { h, setHidden, setText } from "../lib/dom.js";

const CAP = 600;

function logEntry(log) {
  return {
    key: `log:${log.event_id}:${log.source}`,
    id: Number(log.event_id) || 0,
    kind: "log",
    source: log.source,
    level: log.level,
    agent: log.agent_id,
    at: log.created_at,
    text: log.warning && log.warning !== log.message ? `${log.message} — ${log.warning}` : log.message,
  };
}

function eventEntry(event) {
  const parts = [event.summary, event.tool_name && !event.summary.includes(event.tool_name) ? `[${event.tool_name}]` : ""];
  return {
    key: `live:${event.event_id}`,
    id: Number(event.event_id) || 0,
    kind: "live",
    source: `live/${event.event_kind}`,
    level: "",
    agent: event.agent_id,
    at: event.created_at,
    text: `${event.event_name}${parts.filter(Boolean).length ? ": " : ""}${parts.filter(Boolean).join(" ")}`,
  };
}

export class Dock {
  constructor({ list, source, level, count }) {
    this.list = list;
    this.sourceSelect = source;
    this.levelSelect = level;
    this.count = count;
    this.live = new Map(); // key -> entry (the live view's entries)
    this.rows = new Map(); // key -> li (what the list shows now)
    this.sources = new Set(["live"]);
    this.snapshot = false;
    source.addEventListener("change", () => this.#filter());
    level.addEventListener("change", () => this.#filter());
  }

  addLogs(logs) {
    this.#addLive(logs.map(logEntry));
  }

  addEvents(events) {
    this.#addLive(events.map(eventEntry));
  }

  #addLive(entries) {
    const fresh = entries.filter((e) => !this.live.has(e.key));
    for (const entry of fresh) this.live.set(entry.key, entry);
    if (this.live.size > CAP * 1.5) {
      const keep = [...this.live.values()].sort((a, b) => b.id - a.id).slice(0, CAP);
      this.live = new Map(keep.map((e) => [e.key, e]));
    }
    if (!this.snapshot) this.#insert(fresh);
  }

  /** Shows what a past feed held (time travel). */
  showSnapshot(feed) {
    this.snapshot = true;
    this.#replace([...feed.runtime_logs.map(logEntry), ...feed.live_events.map(eventEntry)]);
  }

  /** Back to the live entries. */
  showLive() {
    this.snapshot = false;
    this.#replace([...this.live.values()]);
  }

  #replace(entries) {
    this.rows.clear();
    this.list.replaceChildren();
    this.#insert(entries);
  }

  #insert(entries) {
    if (!entries.length) return;
    entries.sort((a, b) => b.id - a.id || a.kind.localeCompare(b.kind));
    let cursor = this.list.firstElementChild;
    for (const entry of entries) {
      if (this.rows.has(entry.key)) continue;
      while (cursor && Number(cursor.dataset.id) > entry.id) cursor = cursor.nextElementSibling;
      const row = this.#row(entry);
      this.list.insertBefore(row, cursor);
      this.rows.set(entry.key, row);
      this.#noteSource(entry.source);
    }
    while (this.list.childElementCount > CAP) {
      const last = this.list.lastElementChild;
      this.rows.delete(last.dataset.key);
      last.remove();
    }
    this.#filter();
  }

  #row(entry) {
    const time = entry.at ? new Date(entry.at) : null;
    const row = h(
      "li",
      { class: "entry", "data-key": entry.key, "data-id": entry.id, "data-kind": entry.kind, "data-source": entry.source, "data-level": entry.level },
      h("time", { datetime: entry.at, title: entry.at }, time ? time.toLocaleTimeString() : ""),
      h("span", { class: "source" }, entry.source),
      h("span", { class: `level level-${entry.level || "none"}` }, entry.level || "event"),
      h("span", { class: "who" }, entry.agent || "run"),
      h("span", { class: "text" }, entry.text),
    );
    row.hidden = !this.#passes(row);
    return row;
  }

  #noteSource(source) {
    if (source.startsWith("live/") || this.sources.has(source)) return;
    this.sources.add(source);
    this.sourceSelect.append(h("option", { value: source }, source));
  }

  #passes(row) {
    const source = this.sourceSelect.value;
    const level = this.levelSelect.value;
    if (source === "live" && row.dataset.kind !== "live") return false;
    if (source && source !== "live" && row.dataset.source !== source) return false;
    if (level && row.dataset.level !== level) return false;
    return true;
  }

  #filter() {
    let shown = 0;
    for (const row of this.list.children) {
      const pass = this.#passes(row);
      setHidden(row, !pass);
      if (pass) shown += 1;
    }
    setText(this.count, `${shown} of ${this.list.childElementCount} entries`);
  }
}
