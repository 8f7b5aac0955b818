// The run's live channel (C9) read as Server-Sent Events over fetch, so the reconnect is
// ours: after a dropped stream the next request names the last event seen in
// Last-Event-ID and the service resumes there without gap or duplicate. A stream that
// stays silent past three heartbeats is treated as dropped.

import { describe, url } from "../lib/api.js";
import { sleep } from "../lib/dom.js";

const LIVE = "/control-plane/studio/live";
const SILENCE_MS = 50_000;
const MAX_BACKOFF_MS = 15_000;

export class LiveStream {
  /**
   * onEvents(list of live_events items), onStatus(state, detail) with state one of
   * connecting, open, retrying, refused.
   */
  constructor({ topic, lastEventId, onEvents, onStatus }) {
    this.topic = topic;
    this.lastEventId = lastEventId || "";
    this.onEvents = onEvents;
    this.onStatus = onStatus;
    this.retryMs = 2000;
    this.stopped = false;
    this.connections = 0;
  }

  start() {
    this.#loop();
  }

  stop() {
    this.stopped = true;
    this.controller?.abort();
  }

  async #loop() {
    let failures = 0;
    while (!this.stopped) {
      this.controller = new AbortController();
      const headers = { accept: "text/event-stream" };
      if (this.lastEventId) headers["Last-Event-ID"] = this.lastEventId;
      this.onStatus(this.connections ? "retrying" : "connecting", this.lastEventId ? `resuming after event ${this.lastEventId}` : "");
      try {
        const response = await fetch(url(LIVE, { topic: this.topic }), { headers, signal: this.controller.signal, cache: "no-store" });
        if (!response.ok) {
          let body = await response.text();
          try {
            body = JSON.parse(body);
          } catch {
            /* not JSON: shown as text */
          }
          failures += 1;
          this.onStatus("refused", describe(response.status, body));
        } else {
          this.connections += 1;
          failures = 0;
          await this.#read(response.body);
          if (!this.stopped) failures += 1;
        }
      } catch (error) {
        if (this.stopped) return;
        failures += 1;
        this.onStatus("retrying", error.message);
      }
      if (this.stopped) return;
      await sleep(Math.min(this.retryMs * 2 ** Math.max(0, failures - 1), MAX_BACKOFF_MS));
    }
  }

  async #read(stream) {
    const reader = stream.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let event = { id: "", data: [] };
    let watchdog = null;
    const arm = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => this.controller.abort(), SILENCE_MS);
    };
    arm();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        arm();
        buffer += decoder.decode(value, { stream: true });
        const lines = buffer.split(/\r\n|\r|\n/);
        buffer = lines.pop();
        const batch = [];
        for (const line of lines) {
          if (line === "") {
            if (event.data.length) {
              try {
                batch.push(JSON.parse(event.data.join("\n")));
              } catch {
                /* a frame that is not JSON is not a live event */
              }
            }
            if (event.id) this.lastEventId = event.id;
            event = { id: "", data: [] };
          } else if (line.startsWith(":")) {
            if (line.slice(1).trim() === "subscribed") this.onStatus("open", "");
          } else {
            const colon = line.indexOf(":");
            const field = colon < 0 ? line : line.slice(0, colon);
            let value = colon < 0 ? "" : line.slice(colon + 1);
            if (value.startsWith(" ")) value = value.slice(1);
            if (field === "data") event.data.push(value);
            else if (field === "id") event.id = value;
            else if (field === "retry" && /^\d+$/.test(value)) this.retryMs = Number(value);
          }
        }
        if (batch.length) this.onEvents(batch);
      }
    } catch (error) {
      if (!this.stopped) this.onStatus("retrying", error.name === "AbortError" ? "the stream went silent" : error.message);
    } finally {
      clearTimeout(watchdog);
    }
  }
}
