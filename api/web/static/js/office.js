// A run's office: pixel agents by role, live over the run's SSE topic, scrubbable back in
// time, steerable with the control verbs. Reads only the service's own endpoints.

import { ApiError, config, getJSON, postJSON } from "./lib/api.js";
import { h, setAttr, setText, sleep } from "./lib/dom.js";
import { Dock } from "./office/dock.js";
import { Floor } from "./office/floor.js";
import { LiveStream } from "./office/live.js";
import { NO_CONTROL, Panel, showAnswer, verbButton } from "./office/panel.js";
import { Surfaces } from "./office/surfaces.js";
import { Timeline } from "./office/timeline.js";

// The run's feed with what its agents show (agent_views), as the page was first painted.
const FEED = "/office-feed";
const MIN_POSITION = "X-Squadops-Min-Position";

const office = document.getElementById("office");
const floorStatus = document.getElementById("floor-status");
const liveState = document.getElementById("live-state");

const floor = new Floor(document.getElementById("floor"), { onOpen: (id, opener) => panel.open(id, opener) });
const panel = new Panel(document.getElementById("panel"), floor);
const surfaces = new Surfaces({ progress: document.getElementById("progress"), badges: document.getElementById("badges") });
const dock = new Dock({
  list: document.getElementById("dock-list"),
  source: document.getElementById("dock-source"),
  level: document.getElementById("dock-level"),
  count: document.getElementById("dock-count"),
});
const timeline = new Timeline({
  slider: document.getElementById("time-slider"),
  label: document.getElementById("time-label"),
  earlier: document.getElementById("earlier"),
  backLive: document.getElementById("back-live"),
  onScrub: (id) => travel(id),
  onLive: () => backToLive(),
  onEarlier: (oldest) => earlier(oldest),
});

const state = { seen: 0, refreshing: false, again: false, travel: 0 };

function feedParams(extra = {}) {
  return { project_slug: config.project_slug, run_id: config.run_id, limit: config.feed_limit, ...extra };
}

function setStatus(text, kind = "ok") {
  setText(floorStatus, text);
  setAttr(floorStatus, "data-state", kind);
}

function show(feed) {
  floor.apply(feed.pixel_agents, feed.agent_views);
  surfaces.apply(feed);
  panel.refresh();
  setStatus(`${feed.pixel_agent_count} agents · ${feed.event_count} events · latest activity ${feed.latest_activity_at || "—"}`);
}

// -- live -----------------------------------------------------------------------------------

/** Reads the live feed, from read models that include every event seen so far. */
async function refresh() {
  if (state.refreshing) {
    state.again = true;
    return;
  }
  state.refreshing = true;
  try {
    do {
      state.again = false;
      const headers = state.seen ? { [MIN_POSITION]: String(state.seen) } : {};
      try {
        const { body } = await getJSON(FEED, feedParams(), { headers });
        if (!timeline.live) break;
        show(body);
        dock.addLogs(body.runtime_logs);
        dock.addEvents(body.live_events);
        timeline.add(body.live_events, body.event_count);
      } catch (error) {
        const lagging = error instanceof ApiError && error.status === 503;
        setStatus(lagging ? "Read models are catching up…" : `Could not read the feed: ${error.message}`, lagging ? "warn" : "error");
        state.again = true;
        await sleep(lagging ? 500 : 2000);
      }
      if (state.again) await sleep(250); // coalesce a burst of events into one read
    } while (state.again && timeline.live);
  } finally {
    state.refreshing = false;
  }
}

function onEvents(events) {
  for (const event of events) state.seen = Math.max(state.seen, Number(event.event_id) || 0);
  timeline.add(events);
  dock.addEvents(events);
  if (timeline.live) refresh();
}

const LIVE_TEXT = {
  connecting: "connecting to the live channel…",
  open: "live",
  retrying: "live channel dropped; reconnecting",
  refused: "the live channel refused",
};

function onLiveStatus(kind, detail) {
  setAttr(office, "data-live", kind);
  setText(liveState, `${LIVE_TEXT[kind]}${detail ? ` (${detail})` : ""}`);
}

// -- time travel --------------------------------------------------------------------------------

async function travel(id) {
  const ticket = ++state.travel;
  setAttr(office, "data-mode", "past");
  panel.setPast(true);
  try {
    const { body } = await getJSON(FEED, feedParams({ as_of_event: id }));
    if (ticket !== state.travel || timeline.live) return;
    show(body);
    dock.showSnapshot(body);
    setAttr(office, "data-as-of-event", String(id));
    setStatus(`As of event #${id}: ${body.pixel_agent_count} agents · ${body.event_count} events`, "past");
  } catch (error) {
    if (ticket === state.travel) setStatus(`Could not travel to event #${id}: ${error.message}`, "error");
  }
}

function backToLive() {
  state.travel += 1;
  setAttr(office, "data-mode", "live");
  setAttr(office, "data-as-of-event", null);
  panel.setPast(false);
  dock.showLive();
  refresh();
}

async function earlier(oldest) {
  if (!oldest || oldest <= 1) return;
  try {
    const { body } = await getJSON(FEED, feedParams({ as_of_event: oldest - 1 }));
    if (!body.live_events.some((e) => Number(e.event_id) < oldest)) timeline.reachedStart();
    else timeline.add(body.live_events, body.event_count);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) timeline.reachedStart();
    else setStatus(`Could not read earlier events: ${error.message}`, "error");
  }
}

// -- run verbs ------------------------------------------------------------------------------------

const runResult = document.getElementById("run-result");
const runVerbs = document.getElementById("run-verbs");
for (const verb of config.verbs.run) {
  runVerbs.append(
    verbButton(verb, "run", async () => {
      setAttr(runResult, "data-status", "pending");
      const path = `/control-plane/studio/runs/${encodeURIComponent(config.run_id)}/control`;
      try {
        showAnswer(runResult, verb, await postJSON(path, { verb }));
      } catch (error) {
        showAnswer(runResult, verb, { status: 0, body: `the request failed: ${error.message}` });
      }
    }),
  );
}
if (!config.may_control) runVerbs.append(h("p", { class: "notice", id: "run-verbs-denied" }, NO_CONTROL));

// -- start -------------------------------------------------------------------------------------

async function start() {
  // The page carries the feed as it was when served; asked for only if it does not.
  const carried = document.getElementById("initial-data");
  let feed = carried ? JSON.parse(carried.textContent) : null;
  if (!feed) {
    try {
      ({ body: feed } = await getJSON(FEED, feedParams()));
    } catch (error) {
      setStatus(`Could not read the run: ${error.message}`, "error");
      return;
    }
  }
  show(feed);
  const newest = feed.live_events.reduce((max, e) => Math.max(max, Number(e.event_id) || 0), 0);
  state.seen = newest;
  // The agents are painted first; the dock and the timeline follow in the next task.
  requestAnimationFrame(() =>
    setTimeout(() => {
      dock.addLogs(feed.runtime_logs);
      dock.addEvents(feed.live_events);
      timeline.add(feed.live_events, feed.event_count);
      new LiveStream({ topic: config.topic, lastEventId: newest ? String(newest) : "", onEvents, onStatus: onLiveStatus }).start();
      if (carried) refresh(); // the page carried the newest entries only: read the fuller feed
    }, 0),
  );
}

start();
