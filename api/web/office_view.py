"""The office's agents as the page shows them: what each agent's character says, computed here only.

``templates/office/agent.html`` is the one drawing of an agent: the page is rendered with
the run's agents in it, and with a blank one in a ``<template>`` that the page's script
clones for agents that join later; the script adopts them all by ``data-agent-id`` and
changes their values in place (``static/js/office/floor.js``). The values an agent shows
(room, colours, bubble, tool line, wall, label, title) are computed here only, by ``view``:
for the first paint, and for every feed the page reads after it (``GET /office-feed``, the
run's feed with ``agent_views`` added), which the script places as they come.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

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
    """32-bit FNV-1a over UTF-16 code units: an agent's stable hair and skin."""
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


def sprite_parts() -> list[tuple[str, list[tuple[str, int, int, int, int]]]]:
    """The figure's rectangles grouped by the part the CSS animates (drawn by the template)."""
    groups: dict[str, list[tuple[str, int, int, int, int]]] = {}
    for part, cls, x, y, width, height in PIXELS:
        groups.setdefault(part, []).append((cls, x, y, width, height))
    return list(groups.items())


def texts(agent: Mapping[str, Any], nicknames: Mapping[str, str]) -> dict[str, str]:
    """Bubble, tool line, wall text, label and title of an agent (and its state's words)."""
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
        "said": said,
        "name": name,
    }


def view(agent: Mapping[str, Any], nicknames: Mapping[str, str]) -> dict[str, Any]:
    """What ``templates/office/agent.html`` prints for one agent, and ``floor.js`` places."""
    return {
        "agent_id": agent["agent_id"],
        "zone": zone_of(agent),
        "role": role_word(agent.get("role_key", "")),
        "pixel_state": agent["pixel_state"],
        "live_status": agent.get("live_status", ""),
        "style": ";".join(f"{k}:{v}" for k, v in colors(agent).items()),
        "nick": agent.get("agent_nickname") or agent["agent_id"],
        "tool_used": bool(agent.get("current_tool_name")),
        **texts(agent, nicknames),
    }


BLANK = {
    "agent_id": "", "zone": "", "role": "", "first": False, "pixel_state": "", "live_status": "", "style": "",
    "nick": "", "tool_used": False, "bubble": "", "tool": "", "wall": "", "label": "", "title": "",
}


class _Agents(msgspec.Struct):
    pixel_agents: list[dict[str, Any]] = []


_agents = msgspec.json.Decoder(_Agents)
_encode = msgspec.json.Encoder().encode


def with_views(feed: bytes) -> tuple[bytes, list[dict[str, Any]]]:
    """The run's feed with ``agent_views`` added (``view`` of each of its ``pixel_agents``,
    in their order), and those views: what the office shows, first paint or later."""
    agents = _agents.decode(feed).pixel_agents
    nicknames = {a["agent_id"]: a.get("agent_nickname", "") for a in agents}
    views = [view(agent, nicknames) for agent in agents]
    return feed.rstrip()[:-1] + b',"agent_views":' + _encode(views) + b"}", views  # a feed is a JSON object


def rooms(views: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The office's rooms in reading order, each with the views of its agents."""
    found: dict[str, list[Mapping[str, Any]]] = {zone: [] for zone in ZONES}
    for shown in views:
        found[shown["zone"]].append(shown)
    # The office's one tab stop: its first agent in reading order.
    first = next((zone_views[0] for zone_views in found.values() if zone_views), None)
    return [
        {"key": zone, "title": zone.title(), "agents": [{**v, "first": v is first} for v in zone_views]}
        for zone, zone_views in found.items()
    ]
