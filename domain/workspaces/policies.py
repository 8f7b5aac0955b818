"""Pure rules of developer workspaces: identity, namespace, access, scratch contract, idleness."""

from __future__ import annotations

import hashlib
import re

from domain.shared.access import ProjectGrants, Subject, has_role
from domain.shared.clock import parse
from domain.shared.errors import Forbidden

PROVIDER_NAME = "dev_workspace"
WORKSPACE_ROLE = "contributor"  # owner ⊃ maintainer ⊃ contributor get one (Authentication §7)
STALE_WINDOW_SECONDS = 420.0
IDLE_TIMEOUT_SECONDS = 30 * 60.0
RESUME_ESTIMATE_SECONDS = 90
TOOL_TIMEOUT_SECONDS = 300.0
# The scratch disk every workspace gets; a claim that differs is refused (Limits).
SCRATCH_SIZE = "10Gi"
SCRATCH_CLASS = "scratch"
SCRATCH_ACCESS_MODE = "ReadWriteOnce"

_STRIP = re.compile(r"[^a-z0-9]+")


def slug(text: str, limit: int = 20) -> str:
    return _STRIP.sub("-", text.lower()).strip("-")[:limit].strip("-") or "x"


def employee_slug(subject_key: str) -> str:
    """``alice.smith@example.com`` -> ``alice-smith`` (the hash keeps look-alikes apart)."""
    return slug(subject_key.partition("@")[0])


def workspace_hash(tenant: str, project_slug: str, repository_key: str, branch: str, employee: str) -> str:
    """Stable for the same (tenant, project, repository, branch, employee)."""
    raw = "|".join((tenant, project_slug, repository_key, branch, employee.lower()))
    return hashlib.sha256(raw.encode()).hexdigest()[:10]


def workspace_scope(project_slug: str, employee: str, digest: str) -> str:
    return f"{slug(project_slug)}-{employee_slug(employee)}-{digest}"


def namespace(tenant: str, project_slug: str, employee: str, digest: str) -> str:
    """``fops-dev-<tenant>-<project>-<employee>-<hash>`` (tenant ``default`` by default)."""
    return f"fops-dev-{slug(tenant, 12)}-{slug(project_slug, 16)}-{employee_slug(employee)[:12].strip('-')}-{digest}"


def workspace_id(tenant: str, scope: str) -> str:
    return f"dws:{tenant}:{scope}"  # = DevWorkspace.create_id


def require_workspace_role(subject: Subject, grants: ProjectGrants) -> None:
    """Authentication §7: contributor and up get a workspace; a viewer or a stranger does not."""
    if has_role(subject, grants, WORKSPACE_ROLE):
        return
    if has_role(subject, grants, "viewer"):  # reaches the project, but only to read it
        raise Forbidden(
            f"A viewer of project {grants.project_slug!r} cannot get a developer workspace.",
            code="dev_workspace_viewer_only",
        )
    raise Forbidden(
        f"No role on project {grants.project_slug!r} grants a developer workspace.",
        code="dev_workspace_project_access_denied",
    )


def scratch_claim_problem(size: str, storage_class: str, access_mode: str) -> str:
    """Why a scratch claim breaks the contract (10Gi, class ``scratch``, RWO), or ``""``."""
    wanted = (SCRATCH_SIZE, SCRATCH_CLASS, SCRATCH_ACCESS_MODE)
    if (size, storage_class, access_mode) == wanted:
        return ""
    return (
        f"scratch claim {size}/{storage_class}/{access_mode} does not match the contract "
        f"{SCRATCH_SIZE}/{SCRATCH_CLASS}/{SCRATCH_ACCESS_MODE}"
    )


def seconds_between(earlier: str, later: str) -> float:
    return (parse(later) - parse(earlier)).total_seconds()


def is_stale(provisioning_since: str, now: str, window: float = STALE_WINDOW_SECONDS) -> bool:
    return bool(provisioning_since) and seconds_between(provisioning_since, now) > window


def is_idle(last_active_at: str, now: str, timeout: float = IDLE_TIMEOUT_SECONDS) -> bool:
    return bool(last_active_at) and seconds_between(last_active_at, now) > timeout
