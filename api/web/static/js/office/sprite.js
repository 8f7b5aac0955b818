// The pixel characters: a 12×16 inline-SVG figure drawn from rects (no image is fetched).
// Body parts are groups the CSS animates per pixel_state; colours are CSS variables set
// per agent: the shirt by role, hair and skin from the nickname, stable across reloads.

const NS = "http://www.w3.org/2000/svg";

// [part, class, x, y, width, height]
const PIXELS = [
  ["head", "px-hair", 3, 0, 6, 1],
  ["head", "px-hair", 2, 1, 8, 1],
  ["head", "px-hair", 2, 2, 2, 2],
  ["head", "px-hair", 8, 2, 2, 2],
  ["head", "px-skin", 4, 2, 4, 1],
  ["head", "px-skin", 3, 3, 6, 3],
  ["head", "px-eye", 4, 4, 1, 1],
  ["head", "px-eye", 7, 4, 1, 1],
  ["head", "px-mouth", 5, 5, 2, 1],
  ["body", "px-skin", 5, 6, 2, 1],
  ["body", "px-shirt", 2, 7, 8, 4],
  ["body", "px-badge", 3, 8, 2, 1],
  ["body", "px-belt", 2, 11, 8, 1],
  ["arm-l", "px-sleeve", 1, 7, 1, 3],
  ["arm-l", "px-skin", 1, 10, 1, 1],
  ["arm-r", "px-sleeve", 10, 7, 1, 3],
  ["arm-r", "px-skin", 10, 10, 1, 1],
  ["leg-l", "px-pants", 3, 12, 3, 3],
  ["leg-l", "px-shoe", 2, 15, 4, 1],
  ["leg-r", "px-pants", 6, 12, 3, 3],
  ["leg-r", "px-shoe", 6, 15, 4, 1],
];

const ROLE_SHIRTS = {
  planner: "#8b5cf6",
  curator: "#14b8a6",
  backend: "#3b82f6",
  frontend: "#f97316",
  contract: "#22c55e",
  tester: "#ec4899",
  compactor: "#a8a29e",
};
const LANE_SHIRTS = ["#0ea5e9", "#eab308", "#84cc16", "#f43f5e", "#6366f1", "#06b6d4"];
const HAIR = ["#2b1d0e", "#6b3e1f", "#d4a017", "#111827", "#9ca3af", "#b45309", "#7c2d12", "#f1f5f9"];
const SKIN = ["#f5d0b0", "#e0ac69", "#c68642", "#8d5524", "#ffdbac", "#f1c27d"];

function hash(text) {
  let value = 2166136261;
  for (let i = 0; i < text.length; i += 1) {
    value ^= text.charCodeAt(i);
    value = Math.imul(value, 16777619);
  }
  return value >>> 0;
}

/** The role word of a role key: role_tester -> tester. */
export function roleWord(roleKey) {
  return (roleKey || "").replace(/^role_/, "");
}

export function shirtOf(roleKey) {
  const role = roleWord(roleKey);
  if (ROLE_SHIRTS[role]) return ROLE_SHIRTS[role];
  if (role.startsWith("tester")) return ROLE_SHIRTS.tester;
  return LANE_SHIRTS[hash(role) % LANE_SHIRTS.length];
}

let prototype = null;

function build() {
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", "0 0 12 16");
  svg.setAttribute("class", "sprite");
  svg.setAttribute("shape-rendering", "crispEdges");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  const parts = new Map();
  for (const [part, cls, x, y, width, height] of PIXELS) {
    let group = parts.get(part);
    if (!group) {
      group = document.createElementNS(NS, "g");
      group.setAttribute("class", `part ${part}`);
      parts.set(part, group);
      svg.append(group);
    }
    const rect = document.createElementNS(NS, "rect");
    rect.setAttribute("class", cls);
    rect.setAttribute("x", x);
    rect.setAttribute("y", y);
    rect.setAttribute("width", width);
    rect.setAttribute("height", height);
    group.append(rect);
  }
  return svg;
}

/** A new figure for an agent (cloned from one built prototype). */
export function sprite(agent) {
  prototype ??= build();
  const svg = prototype.cloneNode(true);
  const seed = hash(`${agent.agent_nickname}|${agent.agent_id}`);
  svg.style.setProperty("--shirt", shirtOf(agent.role_key));
  svg.style.setProperty("--hair", HAIR[seed % HAIR.length]);
  svg.style.setProperty("--skin", SKIN[(seed >>> 8) % SKIN.length]);
  return svg;
}
