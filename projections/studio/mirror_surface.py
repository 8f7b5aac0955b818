"""The feed's ``execution_workspace_mirror`` surface, whether or not the mirror model exists.

The workspace mirror read model (``projections.studio.workspace_mirror``) is imported lazily: when
it is present its ``compose_mirror`` builds the surface and its ``MirrorProjector`` takes
part in time travel; when it is absent the surface is the empty-typed default.
"""

from __future__ import annotations

import importlib
from typing import Any

from projections.engine.docs import Projector

MIRROR_MODULE = "projections.studio.workspace_mirror"
MIRROR_NAME = "workspace_mirror"


def default_mirror(project_slug: str) -> dict[str, Any]:
    return {"project_slug": project_slug, "isolation": "per_project", "workspace_count": 0, "workspaces": []}


def _module() -> Any:
    try:
        return importlib.import_module(MIRROR_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != MIRROR_MODULE:
            raise
        return None


def mirror_key(tenant: str, project_slug: str) -> str | None:
    """The mirror document's key, or None when there is no mirror model."""
    module = _module()
    return module.mirror_doc_key(tenant, project_slug) if module is not None else None


def mirror_projector() -> Projector | None:
    module = _module()
    return module.MirrorProjector() if module is not None else None


def compose(doc: dict[str, Any] | None, sessions: list[dict[str, Any]], project_slug: str) -> dict[str, Any]:
    """The surface for one run: the mirror model's composition, or the default."""
    module = _module()
    if module is None:
        return default_mirror(project_slug)
    return module.compose_mirror(doc, sessions, project_slug)
