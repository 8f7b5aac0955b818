"""The cross-parameter rules OpenAPI cannot state, for schemathesis' generated requests.

A schema describes each parameter alone. Some rules of the API relate parameters, or the
world, so a request valid parameter by parameter may still be refused with a 422 (as it must be):
- C1: the tenant header, the ``tenant_id`` query and a body ``tenant_id`` name one tenant;
- the feed answers ``as_of_event`` or ``as_of``, not both;
- a binding's ``source_repository_url`` names a repository git can read (a drawn string
  names none; tests/integration/test_bring_repository_http.py checks sources).
``conform`` makes a positive case follow them just before it is sent (negative cases are
left as drawn: they are refused anyway). tests/integration/test_schemathesis.py registers
``before_call``; ``SCHEMATHESIS_HOOKS=tests.schemathesis_hooks`` does for ``st run``.
"""

from __future__ import annotations

import itertools
from collections.abc import MutableMapping
from typing import Any

TENANT_HEADER = "x-squadops-tenant-id"
MIN_POSITION_HEADER = "x-squadops-min-position"


def _is_positive(case: Any) -> bool:
    meta = case.meta
    return meta is None or meta.generation.mode.is_positive


def _is_stateful(case: Any) -> bool:
    meta = case.meta
    return meta is not None and str(getattr(meta.phase.name, "value", meta.phase.name)) == "stateful"


def _containers(case: Any) -> tuple[MutableMapping[str, Any], MutableMapping[str, Any], str | None]:
    query = case.query if isinstance(case.query, MutableMapping) else {}
    headers = case.headers if isinstance(case.headers, MutableMapping) else {}
    header_name = next((name for name in headers if name.lower() == TENANT_HEADER), None)
    return query, headers, header_name


def conform(case: Any) -> None:
    """Makes a positive ``case`` follow the two rules (in place)."""
    if not _is_positive(case):
        return
    query, headers, header_name = _containers(case)
    tenant = query.get("tenant_id")
    if tenant is None and header_name is not None:
        tenant = headers[header_name]
    if header_name is not None and tenant is not None:
        headers[header_name] = tenant
    if isinstance(case.body, dict) and case.body.get("tenant_id") is not None:
        case.body["tenant_id"] = tenant if tenant is not None else "default"
    if "as_of_event" in query and "as_of" in query:
        del query["as_of"]
    if isinstance(case.body, dict):
        for key in ("repository_bindings", "project_repository_bindings", "projectRepositoryBindings"):
            for binding in case.body.get(key) or []:
                if isinstance(binding, dict):
                    binding.pop("source_repository_url", None)


def stay_in_one_tenant(case: Any) -> None:
    """A stateful sequence stays in the default tenant: a link addresses a run in the
    tenant that launched it, which a drawn tenant parameter would change (tenancy itself
    is what the stateless phases and the HTTP tests check)."""
    if not _is_stateful(case):
        return
    query, headers, header_name = _containers(case)
    query.pop("tenant_id", None)
    if header_name is not None:
        del headers[header_name]
    # A drawn X-Squadops-Min-Position is mostly beyond this short log (409): a sequence
    # waits on no position here (the positions tests check that header).
    for name in [n for n in headers if n.lower() == MIN_POSITION_HEADER]:
        del headers[name]


PROJECT_CREATE = ("POST", "/v1/project-factory/projects")
LAUNCH = ("POST", "/v1/admin/studio/runs")
FRESH_PREFIX = "seq"
# The project ``squadops serve --demo`` (workers.cli.seed_demo) creates, and a template it launches.
DEMO_LAUNCH = {"project_slug": "demo", "template_id": "delivery-core"}
_fresh = itertools.count(1)


def fresh_projects(case: Any) -> None:
    """A stateful sequence creates a project of its own: its slug source gets a prefix no
    earlier request used. Hypothesis replays a sequence's first steps to explore what
    follows them; the same slug again would answer 409 where it answered 201, the
    sequence would not find the project its link expects, and Hypothesis would end the
    phase early ("inconsistent data generation"). Conflicts are what the stateless
    phases and the project tests check."""
    if not _is_stateful(case) or not _is_positive(case) or (case.method.upper(), case.path) != PROJECT_CREATE:
        return
    if not isinstance(case.body, MutableMapping):
        return
    source = "project_key" if case.body.get("project_key") else "display_name"
    value = case.body.get(source)
    if isinstance(value, str) and value:
        prefix = f"{FRESH_PREFIX}{next(_fresh)}-"
        case.body[source] = (prefix + value)[:200]


def launch_in_a_project(case: Any) -> None:
    """A stateful sequence launches its runs in a project that exists: one it created
    (a link carried its slug), else the demo project with a template it has. A drawn slug
    names no project (404), and a sequence's first launch would lead nowhere; the
    stateless phases check those 404s."""
    if not _is_stateful(case) or not _is_positive(case) or (case.method.upper(), case.path) != LAUNCH:
        return
    if not isinstance(case.body, MutableMapping):
        return
    slug = case.body.get("project_slug")
    if not (isinstance(slug, str) and slug.startswith(FRESH_PREFIX)):
        case.body.update(DEMO_LAUNCH)


def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    stay_in_one_tenant(case)
    fresh_projects(case)
    launch_in_a_project(case)
    conform(case)
