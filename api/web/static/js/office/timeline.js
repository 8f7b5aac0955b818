// Time travel: a slider over the run's events (their log positions). Moving it asks the
// feed for ``as_of_event``; its far right end, or "Back to live", returns to live. The
// timeline holds every event the page has seen; "Earlier events" reaches further back.

import { setAttr, setHidden, setText } from "../lib/dom.js";

export class Timeline {
  constructor({ slider, label, earlier, backLive, onScrub, onLive, onEarlier }) {
    this.slider = slider;
    this.label = label;
    this.earlier = earlier;
    this.backLive = backLive;
    this.ids = []; // ascending event ids
    this.info = new Map(); // id -> live event
    this.total = 0; // every live event of the run (the feed's event_count)
    this.live = true;
    this.timer = null;
    slider.addEventListener("input", () => {
      // Leaves live at once (so arriving events do not move the slider back), then asks
      // for the feed once the slider rests.
      clearTimeout(this.timer);
      const index = Number(slider.value);
      if (index >= this.ids.length - 1) {
        this.goLive();
        return;
      }
      this.live = false;
      this.#render();
      this.timer = setTimeout(() => this.onScrub(this.ids[Number(slider.value)]), 120);
    });
    backLive.addEventListener("click", () => this.goLive());
    earlier.addEventListener("click", () => onEarlier(this.ids[0]));
    this.onScrub = onScrub;
    this.onLive = onLive;
    this.#render();
  }

  add(events, total) {
    if (total !== undefined) this.total = Math.max(this.total, total);
    let changed = false;
    for (const event of events) {
      const id = Number(event.event_id);
      if (!id || this.info.has(id)) continue;
      this.info.set(id, event);
      changed = true;
    }
    if (!changed) return;
    const current = this.live ? null : this.ids[Number(this.slider.value)];
    this.ids = [...this.info.keys()].sort((a, b) => a - b);
    this.total = Math.max(this.total, this.ids.length);
    setAttr(this.slider, "max", String(Math.max(0, this.ids.length - 1)));
    this.slider.value = String(this.live ? this.ids.length - 1 : this.ids.indexOf(current));
    this.#render();
  }

  /** The run began at the first event held: there is nothing earlier to ask for. */
  reachedStart() {
    this.total = this.ids.length;
    this.#render();
  }

  get position() {
    return this.live ? null : this.ids[Number(this.slider.value)];
  }

  /** Back to live (also what the slider's right end means). */
  goLive() {
    clearTimeout(this.timer);
    const wasLive = this.live;
    this.live = true;
    this.slider.value = String(Math.max(0, this.ids.length - 1));
    this.#render();
    if (!wasLive) this.onLive();
  }

  #render() {
    setHidden(this.backLive, this.live);
    setHidden(this.earlier, this.ids.length >= this.total);
    const id = this.live ? this.ids[this.ids.length - 1] : this.ids[Number(this.slider.value)];
    const event = this.info.get(id);
    const when = event?.created_at ? new Date(event.created_at).toLocaleTimeString() : "";
    const what = event ? `${event.agent_id || "run"} ${event.event_name}` : "";
    const text = this.live
      ? `live${id ? ` · latest event #${id}` : ""}`
      : `as of event #${id} · ${when} · ${what}`;
    setText(this.label, text);
    setAttr(this.slider, "aria-valuetext", text);
    setAttr(this.slider, "data-as-of-event", this.live ? null : String(id));
  }
}
