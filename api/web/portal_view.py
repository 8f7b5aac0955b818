"""What the portal home shows first, read on the server with the caller's rights: the
projects the permission graph lets them see (with their role there), the runs of
those projects that are blocked and the open pull requests they may publish. The rest of the portal (dashboard sections, inbox,
workspaces) is read by the page's script from the portal endpoints."""

from __future__ import annotations

from typing import Any

from litestar.datastructures import State

from api.context import part, studio_reads
from api.project_factory.pulls import list_pulls
from api.studio.feed import FeedReads
from domain.portal.graph import ListObjectsRequest, identity_tuples, user_ref
from domain.shared.access import ROLES

BLOCKED_SHOWN = 20


def projects_where(state: State, caller: Any, relation: str) -> list[str]:
    """The slugs of the projects on which the caller holds ``relation`` (or a role above)."""
    principal = caller.principal
    found = part(state, "permission_graph").list_objects(
        ListObjectsRequest(
            store=caller.tenant,
            user=user_ref(principal.subject_key),
            relation=relation,
            type="project",
            contextual_tuples=identity_tuples(principal.subject_key, principal.groups),
        )
    )
    return sorted(obj.partition(":")[2] for obj in found)


def your_projects(state: State, caller: Any) -> list[dict[str, Any]]:
    """Each project the caller reads, with its name and the caller's highest role there."""
    by_role = {role: set(projects_where(state, caller, role)) for role in ROLES}
    reads = studio_reads(state)
    found = []
    for slug in sorted(by_role["viewer"]):
        doc = reads.project_doc(caller.tenant, slug)
        if doc is None:
            continue
        role = next((r for r in reversed(ROLES) if slug in by_role[r]), "viewer")
        found.append({"slug": slug, "display_name": doc.get("display_name") or slug, "role": role})
    return found


def pending_reviews(state: State, caller: Any) -> list[Any]:
    """Open pull requests of the projects where the caller may publish (maintainer and up)."""
    return [pr for slug in projects_where(state, caller, "maintainer") for pr in list_pulls(state, caller, slug, open_only=True).items]


def blocked_runs(state: State, caller: Any) -> list[Any]:
    """The newest blocked runs the caller may read (the fleet board's rule)."""
    fleet: FeedReads = part(state, "feed_reads")
    board = fleet.fleet(caller.principal, caller.tenant, project_slug=None, status="blocked", limit=BLOCKED_SHOWN, cursor=None)
    return list(board.runs)
