// The portal's developer workspaces panel: the caller's own records
// (GET /v1/portal/launches/dev_workspace/workspaces), a launch form (the shared launch path,
// provider dev_workspace) and a release button per ready workspace (DELETE). Every state
// and every error is what the service answered; while a workspace is moving (pending,
// provisioning, releasing…) the list is read again every two seconds.

import { ApiError, describe, getJSON, url } from "./lib/api.js";
import { h } from "./lib/dom.js";

export const LAUNCH = "/v1/portal/launches/dev_workspace";
const MOVING = new Set(["pending", "provisioning", "release_requested", "releasing"]);
const POLL_MS = 2000;

const panel = document.getElementById("workspaces");
const body = document.getElementById("workspaces-body");
const note = document.getElementById("workspaces-status");
const form = document.getElementById("workspace-launch");
let timer = 0;

function say(text, error = false) {
  note.textContent = text;
  note.classList.toggle("error", error);
}

function copyable(label, text) {
  return text ? h("li", {}, h("span", { class: "muted" }, `${label}: `), h("code", {}, text)) : null;
}

function row(ws) {
  const material = ws.reconnect_material || {};
  return h(
    "li",
    { class: "portal-item", "data-scope": ws.workspace_scope, "data-status": ws.status },
    h("span", { class: "item-title" }, `${ws.project_slug} · ${ws.repository_key} · ${ws.branch}`),
    h("span", { class: "pill", "data-status": ws.status }, ws.status),
    ws.last_error ? h("p", { class: "notice error" }, ws.last_error) : null,
    h(
      "ul",
      { class: "item-metrics" },
      copyable("namespace", ws.namespace),
      copyable("add provider", material.provider_add_command),
      copyable("up", material.up_command),
    ),
    ws.status === "ready" ? h("button", { type: "button", onclick: () => release(ws.workspace_scope) }, "Release") : null,
  );
}

async function refresh() {
  clearTimeout(timer);
  try {
    const { body: answer } = await getJSON(`${LAUNCH}/workspaces`);
    const items = answer.items || [];
    panel.dataset.state = "ready";
    body.replaceChildren(
      items.length ? h("ul", { class: "portal-items" }, items.map(row)) : h("p", { class: "muted" }, "No workspaces yet."),
    );
    if (items.some((ws) => MOVING.has(ws.status))) timer = setTimeout(refresh, POLL_MS);
  } catch (error) {
    panel.dataset.state = error instanceof ApiError && error.status === 404 ? "unavailable" : "error";
    say(`Could not load your workspaces: ${error.message}`, true);
  }
}

async function launch(event) {
  event.preventDefault();
  const project = form.elements.project_slug.value.trim();
  if (!project) return;
  try {
    const { body: ws } = await getJSON(LAUNCH, { project_slug: project });
    say(`Workspace ${ws.workspace_scope} is ${ws.status}.`);
  } catch (error) {
    say(error.message, true);
  }
  await refresh();
}

async function release(scope) {
  const response = await fetch(url(`${LAUNCH}/workspaces/${encodeURIComponent(scope)}`), {
    method: "DELETE",
    headers: { accept: "application/json" },
    cache: "no-store",
  });
  const answer = await response.json().catch(() => null);
  if (response.ok) say(`Workspace ${scope} is ${answer.status}.`);
  else say(describe(response.status, answer), true);
  await refresh();
}

form.addEventListener("submit", launch);
refresh();
