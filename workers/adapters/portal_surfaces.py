"""The built-in board, design and catalog adapters: they say what is (and is not) set up.

No board or design tool is connected by default, so the board projection records the
requested board id as ``unlinked`` (``board_sync_status`` ``not_configured``, or
``disabled`` without one) and the design hub, when design sync is asked, reports
``not_configured``. The catalog is the service's own: an entity ref per project and its
repository URLs as annotations."""

from __future__ import annotations

from typing import Any


class LocalBoard:
    def project(self, *, tenant: str, project_slug: str, board_project_uid: str) -> dict[str, Any]:
        if not board_project_uid:
            return {"board_projection": {}, "board_sync_status": "disabled"}
        return {
            "board_projection": {"provider": "none", "board_project_uid": board_project_uid, "status": "unlinked"},
            "board_sync_status": "not_configured",
        }


class LocalDesign:
    def project(self, *, tenant: str, project_slug: str, enabled: bool) -> dict[str, Any]:
        if not enabled:
            return {}
        return {
            "project_slug": project_slug, "design_enabled": True, "design_sync_enabled": False,
            "design_team_ref": "", "design_launch_url": "", "access_status": "not_configured",
            "materialization_status": "not_materialized", "evidence_status": "none",
            "design_team_materialized": False, "design_library_refs": [], "design_file_refs": [],
            "last_synced_at": "", "freshness_status": "never_synced", "local_chipsets": [], "shared_chipsets": [],
            "linked_projects": [], "blockers": ["no design tool is configured"], "evidence_url": "",
        }


class LocalCatalog:
    def register(self, *, tenant: str, project_slug: str, repo_urls: list[str]) -> dict[str, Any]:
        return {
            "catalog_entity_ref": f"component:{tenant}/{project_slug}",
            "catalog_annotations": {
                "squadops.io/tenant": tenant,
                "squadops.io/project-slug": project_slug,
                "squadops.io/vcs-repos": ",".join(repo_urls),
            },
        }
