"""The office's agents as HTML, so the first agents paint with the page itself.

The page's script adopts these elements by ``data-agent-id`` and updates them in place
(``static/js/office/floor.js`` builds the same markup for agents that join later). The
pixel figure, its palette and the state texts live here only: the page gets the figure
as a ``<template>`` and the rest in its config.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from api.web.pages import escape

STATE_TEXT = {
    "idle": "idle",
    "active": "working",
    "in_conversation": "in conversation",
    "waiting": "waiting",
    "awaiting_reply": "awaiting a reply",
    "moving": "moving (using a tool)",
    "blocked": "blocked by a wall",
    "resolved": "resolved (session ended)",
}
ZONES = ("intake", "lanes", "testers", "compactor")

# A 12×16 figure: (part, class, x, y, width, height); parts are what the CSS animates.
PIXELS = (
    ("head", "px-hair", 3, 0, 6, 1),
    ("head", "px-hair", 2, 1, 8, 1),
    ("head", "px-hair", 2, 2, 2, 2),
    ("head", "px-hair", 8, 2, 2, 2),
    ("head", "px-skin", 4, 2, 4, 1),
    ("head", "px-skin", 3, 3, 6, 3),
    ("head", "px-eye", 4, 4, 1, 1),
    ("head", "px-eye", 7, 4, 1, 1),
    ("head", "px-mouth", 5, 5, 2, 1),
    ("body", "px-skin", 5, 6, 2, 1),
    ("body", "px-shirt", 2, 7, 8, 4),
    ("body", "px-badge", 3, 8, 2, 1),
    ("body", "px-belt", 2, 11, 8, 1),
    ("arm-l", "px-sleeve", 1, 7, 1, 3),
    ("arm-l", "px-skin", 1, 10, 1, 1),
    ("arm-r", "px-sleeve", 10, 7, 1, 3),
    ("arm-r", "px-skin", 10, 10, 1, 1),
    ("leg-l", "px-pants", 3, 12, 3, 3),
    ("leg-l", "px-shoe", 2, 15, 4, 1),
    ("leg-r", "px-pants", 6, 12, 3, 3),
    ("leg-r", "px-shoe", 6, 15, 4, 1),
)
PALETTE = {
    "roles": {
        "planner": "#8b5cf6",
        "curator": "#14b8a6",
        "backend": "#3b82f6",
        "frontend": "#f97316",
        "contract": "#22c55e",
        "tester": "#ec4899",
        "compactor": "#a8a29e",
    },
    "lanes": ["#0ea5e9", "#eab308", "#84cc16", "#f43f5e", "#6366f1", "#06b6d4"],
    "hair": ["#2b1d0e", "#6b3e1f", "#d4a017", "#111827", "#9ca3af", "#b45309", "#7c2d12", "#f1f5f9"],
    "skin": ["#f5d0b0", "#e0ac69", "#c68642", "#8d5524", "#ffdbac", "#f1c27d"],
}


def fnv1a(text: str) -> int:
    """32-bit FNV-1a over UTF-16 code units (what the page's script computes)."""
    raw = text.encode("utf-16-le")
    value = 2166136261
    for i in range(0, len(raw), 2):
        value ^= raw[i] | raw[i + 1] << 8
        value = (value * 16777619) & 0xFFFFFFFF
    return value


def role_word(role_key: str) -> str:
    return role_key.removeprefix("role_")


def zone_of(agent: Mapping[str, Any]) -> str:
    role = role_word(agent.get("role_key", ""))
    if role in ("planner", "curator"):
        return "intake"
    if role.startswith("tester") or agent.get("agent_id", "").startswith("tester-"):
        return "testers"
    return "compactor" if role == "compactor" else "lanes"


def colors(agent: Mapping[str, Any]) -> dict[str, str]:
    role = role_word(agent.get("role_key", ""))
    roles, lanes = PALETTE["roles"], PALETTE["lanes"]
    shirt = roles.get(role) or (roles["tester"] if role.startswith("tester") else lanes[fnv1a(role) % len(lanes)])
    seed = fnv1a(f"{agent.get('agent_nickname', '')}|{agent.get('agent_id', '')}")
    hair, skin = PALETTE["hair"], PALETTE["skin"]
    return {"--shirt": shirt, "--hair": hair[seed % len(hair)], "--skin": skin[(seed >> 8) % len(skin)]}


def sprite_svg(style: str = "") -> str:
    groups: dict[str, list[str]] = {}
    for part, cls, x, y, width, height in PIXELS:
        groups.setdefault(part, []).append(f'<rect class="{cls}" x="{x}" y="{y}" width="{width}" height="{height}"></rect>')
    body = "".join(f'<g class="part {part}">{"".join(rects)}</g>' for part, rects in groups.items())
    styled = f' style="{escape(style)}"' if style else ""
    return (
        f'<svg viewBox="0 0 12 16" class="sprite" shape-rendering="crispEdges" aria-hidden="true" '
        f'focusable="false"{styled}>{body}</svg>'
    )


def texts(agent: Mapping[str, Any], nicknames: Mapping[str, str]) -> dict[str, str]:
    """Bubble, tool line, wall text, label and title of an agent (as floor.js computes them)."""
    state = agent["pixel_state"]
    said = STATE_TEXT.get(state, state)
    target_id = agent.get("dialogue_target_agent_id", "")
    target = nicknames.get(target_id, target_id) if target_id else ""
    bubble = ""
    if state == "in_conversation":
        bubble = f"→ {target}" if target else "…"
    elif state == "awaiting_reply":
        bubble = f"? {target}" if target else "?"
    elif state == "waiting":
        bubble = "…"
    wall = agent.get("wall") or {}
    blocked = state == "blocked"
    tool = agent.get("current_tool_name", "")
    talk = f", with {target}" if target and state in ("in_conversation", "awaiting_reply") else ""
    name = agent.get("alias") or agent["agent_id"]
    label = f"{name} {agent.get('agent_nickname', '')}: {said}"
    label += (f", tool {tool}" if tool else "") + talk + (f", wall {wall.get('code', '')}: {wall.get('message', '')}" if blocked else "")
    return {
        "bubble": bubble,
        "tool": tool or said,
        "wall": (wall.get("message") or wall.get("code", "")) if blocked else "",
        "label": label,
        "title": f"{name}: {said}{talk}",
    }


def agent_slot(agent: Mapping[str, Any], nicknames: Mapping[str, str], first: bool = False) -> str:
    t = texts(agent, nicknames)
    style = ";".join(f"{k}:{v}" for k, v in colors(agent).items())
    hidden = lambda empty: " hidden" if empty else ""  # noqa: E731
    timing = ' elementtiming="agent"'  # when each character was painted (Element Timing)
    return (
        f'<li class="slot"><button type="button" class="agent" data-agent-id="{escape(agent["agent_id"])}" '
        f'data-zone="{zone_of(agent)}" data-role="{escape(role_word(agent.get("role_key", "")))}" tabindex="{0 if first else -1}" '
        f'aria-controls="panel" aria-expanded="false" data-pixel-state="{escape(agent["pixel_state"])}" '
        f'data-live-status="{escape(agent.get("live_status", ""))}" aria-label="{escape(t["label"])}" title="{escape(t["title"])}">'
        f'<span class="bubble" aria-hidden="true"{hidden(not t["bubble"])}>{escape(t["bubble"])}</span>'
        f'<span class="wall"{hidden(not t["wall"])}><span class="bricks" aria-hidden="true"></span>'
        f'<span class="wall-text">{escape(t["wall"])}</span></span>'
        f'<span class="figure" aria-hidden="true">{sprite_svg(style)}<span class="shadow"></span></span>'
        f'<span class="nick"{timing}>{escape(agent.get("agent_nickname") or agent["agent_id"])}</span>'
        f'<span class="tool" data-tool="{"yes" if agent.get("current_tool_name") else "no"}">{escape(t["tool"])}</span>'
        "</button></li>"
    )


def rooms(agents: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The agents of each room as HTML (``room_<zone>``) and whether it is empty (``hide_<zone>``)."""
    agents = list(agents)
    nicknames = {a["agent_id"]: a.get("agent_nickname", "") for a in agents}
    found: dict[str, list[Mapping[str, Any]]] = {zone: [] for zone in ZONES}
    for agent in agents:
        found[zone_of(agent)].append(agent)
    # The office's one tab stop: its first agent in reading order.
    first = next((zone_agents[0] for zone_agents in found.values() if zone_agents), None)
    html = {
        f"room_{zone}": "".join(agent_slot(a, nicknames, first=a is first) for a in zone_agents)
        for zone, zone_agents in found.items()
    }
    return html | {f"hide_{zone}": "" if found[zone] else " hidden" for zone in ZONES}


def script_config() -> dict[str, Any]:
    """What floor.js needs to draw agents that join later."""
    return {"state_text": STATE_TEXT, "palette": PALETTE}
