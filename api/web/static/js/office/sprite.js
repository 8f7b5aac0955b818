// The pixel characters' colours: the 12×16 inline-SVG figure (drawn by the service's
// template, api/web/templates/office/agent.html) is coloured per agent through CSS
// variables: the shirt by role, hair and skin from the nickname, stable across reloads
// (api/web/office_view.py computes the same for the agents painted with the page).

import { config } from "../lib/api.js";

const PALETTE = config.office.palette;

/** 32-bit FNV-1a over UTF-16 code units (the service computes the same). */
function hash(text) {
  let value = 2166136261;
  for (let i = 0; i < text.length; i += 1) {
    value ^= text.charCodeAt(i);
    value = Math.imul(value, 16777619) >>> 0;
  }
  return value >>> 0;
}

/** The role word of a role key: role_tester -> tester. */
export function roleWord(roleKey) {
  return (roleKey || "").replace(/^role_/, "");
}

function shirtOf(roleKey) {
  const role = roleWord(roleKey);
  if (PALETTE.roles[role]) return PALETTE.roles[role];
  if (role.startsWith("tester")) return PALETTE.roles.tester;
  return PALETTE.lanes[hash(role) % PALETTE.lanes.length];
}

/** Colours ``svg``, a blank figure, for ``agent``. */
export function colour(svg, agent) {
  const seed = hash(`${agent.agent_nickname}|${agent.agent_id}`);
  svg.style.setProperty("--shirt", shirtOf(agent.role_key));
  svg.style.setProperty("--hair", PALETTE.hair[seed % PALETTE.hair.length]);
  svg.style.setProperty("--skin", PALETTE.skin[(seed >>> 8) % PALETTE.skin.length]);
}
