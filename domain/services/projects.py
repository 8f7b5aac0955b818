"""Project factory commands."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eventsourcing.persistence import RecordConflictError

from domain.errors import Conflict, Invalid, template_not_found
from domain.ids import is_valid_id, project_key
from domain.project import Project, slugify

if TYPE_CHECKING:
    from domain.application import SquadOps


class ProjectExists(Conflict):
    code = "project_exists"


class ProjectCommands:
    def create_project(
        self: SquadOps, *, tenant: str, request: dict[str, Any], created_by: str
    ) -> Project:
        """Creates a project; its slug comes from ``project_key`` or ``display_name``."""
        base = str(request.get("project_key") or request.get("display_name") or "")
        slug = slugify(base)
        if not slug or not is_valid_id(slug):
            raise Invalid(
                "A project needs a project_key or display_name with letters or digits.",
                code="project_key_required",
            )
        template_id = str(request.get("template_id") or "")
        if template_id and self.templates.get(template_id) is None:
            raise template_not_found(template_id)
        if self.get_or_none(project_key(tenant, slug)) is not None:
            raise ProjectExists(f"A project with slug {slug!r} already exists in this tenant.")
        project = Project(
            tenant=tenant,
            project_slug=slug,
            request=request,
            created_by=created_by,
            created_at=self.now(),
        )
        try:
            self.save(project)
        except RecordConflictError:  # a concurrent create of the same slug won the race
            raise ProjectExists(
                f"A project with slug {slug!r} already exists in this tenant."
            ) from None
        return project

    def get_project(self: SquadOps, tenant: str, slug: str) -> Project | None:
        if not is_valid_id(slug):
            return None
        return self.get_or_none(project_key(tenant, slug))
