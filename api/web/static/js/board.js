// The fleet board: every run the caller may read, newest first, refreshed in place.

import { getJSON } from "./lib/api.js";
import { ago, h, money, setAttr, setText } from "./lib/dom.js";
import "./lib/forms.js"; // the launch form

const BOARD = "/control-plane/studio/runs";
const REFRESH_MS = 4000;
const PAGE = 50;

const form = document.getElementById("board-filters");
const body = document.getElementById("runs-body");
const status = document.getElementById("board-status");
const more = document.getElementById("more");
const rows = new Map(); // run_id -> {tr, cells}
let shown = PAGE;
let nextCursor = "";

function filters() {
  const data = new FormData(form);
  return {
    project_slug: String(data.get("project_slug") || "").trim(),
    status: String(data.get("status") || ""),
    q: String(data.get("q") || "").trim().toLowerCase(),
  };
}

function fillForm() {
  const params = new URLSearchParams(location.search);
  form.elements.project_slug.value = params.get("project_slug") || "";
  form.elements.status.value = params.get("status") || "";
  form.elements.q.value = params.get("q") || "";
}

function officeHref(runId) {
  const tenant = new URLSearchParams(location.search).get("tenant_id");
  return `/runs/${encodeURIComponent(runId)}${tenant ? `?tenant_id=${encodeURIComponent(tenant)}` : ""}`;
}

function newRow(run) {
  const cells = {
    link: h("a", { href: officeHref(run.run_id), class: "run-id" }, run.run_id),
    template: h("span", { class: "muted small" }),
    project: h("span"),
    status: h("span", { class: "pill" }),
    agents: h("span"),
    bar: h("span", { class: "mini-bar", "aria-hidden": "true" }),
    blockers: h("span"),
    codes: h("ul", { class: "codes" }),
    cost: h("span"),
    time: h("time"),
  };
  const tr = h(
    "tr",
    { "data-run-id": run.run_id },
    h("th", { scope: "row" }, cells.link, h("br"), cells.template),
    h("td", {}, cells.project),
    h("td", {}, cells.status),
    h("td", {}, cells.agents, cells.bar),
    h("td", {}, cells.blockers, cells.codes),
    h("td", { class: "num" }, cells.cost),
    h("td", {}, cells.time),
  );
  return { tr, cells, segments: new Map() };
}

const BUCKETS = ["active", "moving", "waiting", "blocked", "idle", "completed"];

function updateRow(row, run) {
  const { cells } = row;
  setAttr(row.tr, "data-status", run.status);
  setText(cells.template, `${run.template_id} · tick ${run.tick}`);
  setText(cells.project, run.project_slug);
  setText(cells.status, run.status.replace("_", " "));
  setAttr(cells.status, "data-status", run.status);
  const p = run.progress;
  setText(cells.agents, `${p.total_agents} agents`);
  for (const bucket of BUCKETS) {
    let seg = row.segments.get(bucket);
    if (!seg) {
      seg = h("span", { class: `seg seg-${bucket}` });
      row.segments.set(bucket, seg);
      cells.bar.append(seg);
    }
    seg.style.setProperty("flex-grow", String(p[bucket] || 0));
  }
  setAttr(cells.bar, "title", BUCKETS.map((b) => `${b} ${p[b]}`).join(", "));
  setText(cells.blockers, run.blocker_count ? `${run.blocker_count} blocked` : "none");
  const codes = run.blockers.map((b) => `${b.agent_id}: ${b.blocker_code}`).join("\n");
  if (cells.codes.dataset.codes !== codes) {
    cells.codes.dataset.codes = codes;
    cells.codes.replaceChildren(...run.blockers.map((b) => h("li", {}, h("code", {}, b.blocker_code), ` ${b.agent_id}`)));
  }
  setText(cells.cost, money(run.total_cost_usd));
  setAttr(cells.time, "datetime", run.latest_activity_at);
  setAttr(cells.time, "title", run.latest_activity_at);
  setText(cells.time, ago(run.latest_activity_at) || "—");
}

function matches(run, q) {
  if (!q) return true;
  const text = [run.run_id, run.project_slug, run.template_id, run.status, run.launched_by]
    .concat(run.blockers.map((b) => `${b.agent_id} ${b.blocker_code}`))
    .join(" ")
    .toLowerCase();
  return text.includes(q);
}

/** Puts the runs in order, reusing each run's row. */
function show(runs, q) {
  const wanted = runs.filter((run) => matches(run, q));
  const keep = new Set(wanted.map((run) => run.run_id));
  for (const [id, row] of rows) {
    if (!keep.has(id)) {
      row.tr.remove();
      rows.delete(id);
    }
  }
  let previous = null;
  for (const run of wanted) {
    let row = rows.get(run.run_id);
    if (!row) {
      row = newRow(run);
      rows.set(run.run_id, row);
    }
    updateRow(row, run);
    const expected = previous ? previous.nextSibling : body.firstChild;
    if (expected !== row.tr) body.insertBefore(row.tr, expected);
    previous = row.tr;
  }
  return wanted.length;
}

async function refresh() {
  const f = filters();
  try {
    const { body: board } = await getJSON(BOARD, {
      project_slug: f.project_slug,
      status: f.status,
      limit: Math.min(200, shown),
    });
    nextCursor = board.next_cursor;
    const count = show(board.runs, f.q);
    more.hidden = !nextCursor || shown >= 200;
    const capped = nextCursor && shown >= 200 ? " (the newest 200: filter to see older runs)" : "";
    status.textContent = count
      ? `${count} run${count === 1 ? "" : "s"}${f.q ? ` matching “${f.q}”` : ""}${capped}; refreshed ${new Date().toLocaleTimeString()}`
      : "No run matches these filters.";
    status.dataset.state = "ok";
  } catch (error) {
    show([], ""); // rows of another filter would mislead
    more.hidden = true;
    status.textContent = `Could not load the board: ${error.message}`;
    status.dataset.state = "error";
  }
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const f = filters();
  const params = new URLSearchParams(location.search);
  for (const key of ["project_slug", "status", "q"]) {
    if (f[key]) params.set(key, f[key]);
    else params.delete(key);
  }
  history.replaceState(null, "", `${location.pathname}${params.size ? `?${params}` : ""}`);
  shown = PAGE;
  refresh();
});

more.addEventListener("click", () => {
  shown = Math.min(200, shown + PAGE);
  refresh();
});

fillForm();
refresh();
setInterval(() => {
  if (!document.hidden) refresh();
}, REFRESH_MS);
