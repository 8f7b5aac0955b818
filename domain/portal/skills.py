"""The skill catalogue agents pull at launch (``GET /v1/skills``), from data files.

The shipped skills (``domain/portal/skills/*.json``) always answer; extra sources (a
directory named by ``SQUADOPS_SKILLS_PATH``, or any ``SkillSource``) are asked in
parallel under one deadline (5 s by default): a slow or failing source is reported in
``sources`` and left out, so it never delays a launch beyond the deadline.
"""

from __future__ import annotations

import concurrent.futures
import time
from importlib import resources
from typing import Protocol

import msgspec

DEADLINE_SECONDS = 5.0


class Skill(msgspec.Struct, kw_only=True):
    skill_id: str
    title: str
    version: str = "1"
    summary: str = ""
    roles: list[str] = []
    instructions: list[str] = []
    source: str = "shipped"


class SourceStatus(msgspec.Struct, kw_only=True):
    source: str
    status: str  # ok | timeout | failed
    skill_count: int = 0
    error: str = ""


class SkillCatalogOut(msgspec.Struct, kw_only=True):
    skills: list[Skill]
    count: int
    sources: list[SourceStatus]


class SkillSource(Protocol):
    name: str

    def skills(self) -> list[Skill]: ...


_decode = msgspec.json.Decoder(Skill).decode


def shipped_skills() -> list[Skill]:
    folder = resources.files("domain.portal") / "skills"
    return sorted((_decode(e.read_bytes()) for e in folder.iterdir() if e.name.endswith(".json")),
                  key=lambda s: s.skill_id)


_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="skills")


def catalogue(sources: list[SkillSource], deadline: float = DEADLINE_SECONDS, role: str = "") -> SkillCatalogOut:
    """Shipped skills plus every source that answers before the deadline (theirs win by id)."""
    by_id = {s.skill_id: s for s in shipped_skills()}
    statuses = [SourceStatus(source="shipped", status="ok", skill_count=len(by_id))]
    futures = {source.name: _POOL.submit(source.skills) for source in sources}
    ends = time.monotonic() + deadline
    for name, future in futures.items():
        try:
            found = future.result(timeout=max(0.0, ends - time.monotonic()))
        except concurrent.futures.TimeoutError:
            statuses.append(SourceStatus(source=name, status="timeout", error=f"no answer within {deadline:g} s"))
            continue
        except Exception as exc:  # a failing source is reported, never fatal
            statuses.append(SourceStatus(source=name, status="failed", error=str(exc) or type(exc).__name__))
            continue
        for skill in found:
            by_id[skill.skill_id] = msgspec.structs.replace(skill, source=name)
        statuses.append(SourceStatus(source=name, status="ok", skill_count=len(found)))
    skills = [s for s in sorted(by_id.values(), key=lambda s: s.skill_id) if not role or not s.roles or role in s.roles]
    return SkillCatalogOut(skills=skills, count=len(skills), sources=statuses)
