"""``GET /v1/portal/impact``: affected assets, owners, required tests, evidence, recent
failures and the next action for an ``issue_ref``, ``pr_ref`` or ``asset_ref``, over the
projects the permission graph lets the caller read."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import get
from litestar.datastructures import State
from litestar.params import QueryParameter

from api.context import CallerDep, part, read_store
from api.errors import RequestInvalid
from api.openapi import answers
from domain.portal.graph import ListObjectsRequest, identity_tuples, user_ref
from projections.portal.impact import impact

Ref = Annotated[str | None, QueryParameter(required=False, max_length=500)]
Limit = Annotated[int, QueryParameter(ge=1, le=1000, required=False)]


class ImpactOut(msgspec.Struct, kw_only=True):
    query: dict[str, str]
    source_of_truth: str
    affected_assets: list[dict[str, Any]]
    owners: list[dict[str, Any]]
    required_tests: list[dict[str, Any]]
    evidence_refs: list[dict[str, Any]]
    recent_failures: list[str]
    recommended_next_action: str
    source_health: dict[str, Any]


@get(
    "/impact",
    sync_to_thread=True,
    summary="Impact of an issue, pull request or asset",
    opt=answers(401, 403, 404, 409, 422, one_of_query=("refs", ("issue_ref", "pr_ref", "asset_ref"))),
)
def impact_view(
    state: State, caller: CallerDep, issue_ref: Ref = None, pr_ref: Ref = None, asset_ref: Ref = None,
    limit: Limit = 100,
) -> ImpactOut:
    if not (issue_ref or pr_ref or asset_ref):
        raise RequestInvalid(["query", "pr_ref"], "one of issue_ref, pr_ref or asset_ref is required", "missing")
    principal = caller.principal
    readable = {o.partition(":")[2] for o in part(state, "permission_graph").list_objects(ListObjectsRequest(
        store=caller.tenant, user=user_ref(principal.subject_key), relation="viewer", type="project",
        contextual_tuples=identity_tuples(principal.subject_key, principal.groups),
    ))}
    answer = impact(read_store(state), caller.tenant, readable, issue_ref=issue_ref or "",
                    pr_ref=pr_ref or "", asset_ref=asset_ref or "", limit=limit)
    return msgspec.convert(answer, ImpactOut)
