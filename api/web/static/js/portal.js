// The portal home: the caller's dashboard sections (GET /v1/portal/workspace) and the
// notification inbox, exactly as the portal endpoints answer them. Where they do not
// exist on this service (404), the page says the portal is not available: it shows no
// data of its own.

import { ApiError, getJSON } from "./lib/api.js";
import { h } from "./lib/dom.js";
import "./portal_workspaces.js"; // the developer workspaces panel

export const WORKSPACE = "/v1/portal/workspace";
export const INBOX = "/v1/portal/notifications";

const root = document.getElementById("portal");
const status = document.getElementById("portal-status");

/** Only links that stay on the web: http(s) or a path (never javascript: and the like). */
function safeHref(value) {
  if (typeof value !== "string" || !value) return "";
  if (value.startsWith("/") && !value.startsWith("//")) return value;
  try {
    const parsed = new URL(value);
    return parsed.protocol === "https:" || parsed.protocol === "http:" ? parsed.href : "";
  } catch {
    return "";
  }
}

function link(href, label) {
  const safe = safeHref(href);
  return safe ? h("a", { href: safe }, label || safe) : null;
}

const SECTIONS = [
  ["solutions", "Solutions"],
  ["guided_actions", "Guided actions"],
  ["onboarding_checks", "Onboarding checks"],
  ["role_workbench", "Role workbench"],
  ["role_scenarios", "Role scenarios"],
  ["journey_lanes", "Journey lanes"],
  ["interaction_flows", "Interaction flows"],
  ["edit_surfaces", "Edit surfaces"],
  ["group_clusters", "Group clusters"],
  ["project_factory_templates", "Project factory templates"],
  ["recent_launches", "Recent launches"],
];

function item(entry) {
  const title = entry.title || entry.label || entry.template_id || entry.check_id || "untitled";
  const summary = entry.summary || entry.description || entry.detail || "";
  const href = entry.action_url || entry.url || entry.launch_url || entry.target_url;
  const metrics = Array.isArray(entry.metrics) ? entry.metrics : [];
  return h(
    "li",
    { class: "portal-item" },
    h("span", { class: "item-title" }, title),
    entry.status ? h("span", { class: "pill", "data-status": entry.status }, entry.status) : null,
    entry.item_count !== undefined ? h("span", { class: "pill" }, `${entry.item_count} items`) : null,
    summary ? h("p", { class: "item-summary" }, summary) : null,
    metrics.length ? h("ul", { class: "item-metrics" }, metrics.map((m) => h("li", {}, `${m.label || m.metric_key}: ${m.value}`))) : null,
    link(href, entry.action_label || "Open"),
  );
}

function section(key, title, entries) {
  return h(
    "section",
    { class: "portal-section", "data-section": key, "aria-label": title },
    h("h3", {}, `${title} (${entries.length})`),
    entries.length ? h("ul", { class: "portal-items" }, entries.map(item)) : h("p", { class: "muted" }, "Nothing here yet."),
  );
}

function dashboard(d) {
  const p = d.principal || {};
  const snapshot = d.experience_snapshot || {};
  const parts = [
    h(
      "section",
      { class: "portal-section", "data-section": "principal", "aria-label": "You" },
      h("h3", {}, d.session_widget?.display_name || p.email || p.subject_key || "You"),
      h("p", {}, `${p.subject_key || ""}${p.group_paths?.length ? ` · ${p.group_paths.join(", ")}` : ""}`),
      h(
        "ul",
        { class: "item-metrics" },
        Object.entries(snapshot).map(([key, value]) => h("li", {}, `${key.replaceAll("_", " ")}: ${value}`)),
      ),
    ),
  ];
  for (const [key, title] of SECTIONS) if (Array.isArray(d[key])) parts.push(section(key, title, d[key]));
  const agenda = d.work_agenda;
  if (agenda) {
    const entries = [...(agenda.events || []), ...(agenda.tasks || [])];
    parts.push(
      h(
        "section",
        { class: "portal-section", "data-section": "work_agenda", "aria-label": "Work agenda" },
        h("h3", {}, `Work agenda (${agenda.provider} · ${agenda.status})`),
        entries.length ? h("ul", { class: "portal-items" }, entries.map(item)) : h("p", { class: "muted" }, "No events or tasks."),
      ),
    );
  }
  return parts;
}

function inbox(answer) {
  const entries = Array.isArray(answer) ? answer : answer?.items || answer?.notifications || [];
  if (!entries.length) return [h("p", { class: "muted" }, "No notifications.")];
  return [
    h(
      "ul",
      { class: "portal-items" },
      entries.map((n) =>
        h(
          "li",
          { class: "portal-item", "data-read": n.read || n.read_at || n.seen ? "true" : "false" },
          h("span", { class: "item-title" }, n.title || n.subject || n.workflow_id || "notification"),
          n.read || n.read_at || n.seen ? null : h("span", { class: "pill" }, "unread"),
          h("p", { class: "item-summary" }, n.body || n.message || n.content || ""),
          n.created_at ? h("time", { datetime: n.created_at }, new Date(n.created_at).toLocaleString()) : null,
          n.created_at ? " · " : null,
          link(n.url || n.action_url, "Open"),
        ),
      ),
    ),
  ];
}

async function load(path, target, render) {
  const body = document.getElementById(`${target.id}-body`);
  try {
    const { body: answer } = await getJSON(path);
    target.dataset.state = "ready";
    body.replaceChildren(...render(answer));
    return "ready";
  } catch (error) {
    const missing = error instanceof ApiError && error.status === 404;
    target.dataset.state = missing ? "unavailable" : "error";
    body.replaceChildren(
      h(
        "p",
        { class: missing ? "notice" : "notice error" },
        missing ? `Portal not available: this service does not answer ${path} (404).` : `Could not load ${path}: ${error.message}`,
      ),
    );
    return target.dataset.state;
  }
}

const results = await Promise.all([
  load(WORKSPACE, document.getElementById("dashboard"), dashboard),
  load(INBOX, document.getElementById("inbox"), inbox),
]);
const overall = results.every((r) => r === "unavailable") ? "unavailable" : results.includes("error") ? "error" : "ready";
root.dataset.portal = overall;
status.textContent = {
  unavailable: "Portal not available on this service: its portal endpoints answer 404.",
  error: "Part of the portal could not be loaded; see below.",
  ready: "Your dashboard and notifications.",
}[overall];
