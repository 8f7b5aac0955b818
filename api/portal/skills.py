"""``GET /v1/skills``: the skill catalogue agents pull at launch (optional ``role``), answered
within the catalogue's deadline whatever its extra sources do (domain.portal.skills)."""

from __future__ import annotations

from typing import Annotated

from litestar import get
from litestar.datastructures import State
from litestar.params import QueryParameter

from domain.portal.skills import SkillCatalogOut, catalogue

Role = Annotated[str | None, QueryParameter(required=False, max_length=100)]


@get("/v1/skills", sync_to_thread=True, summary="The skill catalogue agents pull at launch", tags=["discovery"])
def skills(state: State, role: Role = None) -> SkillCatalogOut:
    sources = state.get("skill_sources", [])
    deadline = state.get("skill_deadline", 5.0)
    return catalogue(list(sources), deadline, role or "")
