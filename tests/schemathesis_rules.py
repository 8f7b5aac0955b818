"""The cross-parameter rules OpenAPI cannot state, for schemathesis' generated requests.

A schema describes each parameter alone. Two rules of the API relate parameters, so a
request valid parameter by parameter may still be refused with a 422 (as it must be):
- C1: the tenant header, the ``tenant_id`` query and a body ``tenant_id`` name one tenant;
- the feed answers ``as_of_event`` or ``as_of``, not both.
``conform`` makes a positive case follow them just before it is sent (negative cases are
left as drawn: they are refused anyway). tests/integration/test_schemathesis.py registers
``before_call``; ``SCHEMATHESIS_HOOKS=tests.schemathesis_hooks`` does for ``st run``.
"""

from __future__ import annotations

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


def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    stay_in_one_tenant(case)
    conform(case)
