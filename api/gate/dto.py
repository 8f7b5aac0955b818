"""Requests and answers of the gate endpoints (spec: Gate; Other records / gate run)."""

from __future__ import annotations

from typing import Annotated

import msgspec

from domain.shared.ids import END, ID_PATTERN

Key = Annotated[str, msgspec.Meta(max_length=128, pattern=rf"^[A-Za-z0-9_-]{{0,128}}{END}")]


class GateRunIn(msgspec.Struct, kw_only=True):
    """Run request; ``tenant_id`` defaults to the request's tenant (``default``)."""

    tenant_id: Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=ID_PATTERN)] | None = None
    agent_key: Key = ""
    provider_key: Key = ""
    scenario_key: Key = ""
    notes: Annotated[str, msgspec.Meta(max_length=4000)] = ""
    publish: bool = True
    dry_run: bool = False


class Push(msgspec.Struct, kw_only=True):
    """The published branch sent back to the origin a brought repository mirrors."""

    status: str = ""  # "pushed" | "not_writable"
    origin: str = ""
    branch: str = ""
    head_sha: str = ""
    error: str = ""


class Publication(msgspec.Struct, kw_only=True):
    mode: str = ""
    transport_actor: str = ""
    repo: str = ""
    proposal_id: str = ""
    proposal_key: str = ""
    branch_name: str = ""
    head_sha: str = ""
    pr_title: str = ""
    pr_body: str = ""
    labels: list[str] = []
    summary_comment: str = ""
    check_run_names: list[str] = []
    pr_url: str = ""
    comment_url: str = ""
    check_run_ids: list[int] = []
    committed_paths: list[str] = []
    pr_submission_policy: str = ""
    pr_submission_pipeline: str = ""
    pr_submission_actor_agent_key: str = ""
    affected_dataset_keys: list[str] = []
    resolved_catalog_dataset_urns: list[str] = []
    push: Push | None = None  # only for a repository that mirrors an origin


class GateRunOut(msgspec.Struct, kw_only=True):
    """A gate run (its ``attempt`` numbers the runs of one thread)."""

    thread_key: str
    run_id: str
    repo: str
    agent_key: str
    engine_key: str
    scenario_key: str
    status: str
    runner_kind: str = ""
    github_ref: str = ""
    merge_sha: str = ""
    branch_name: str = ""
    proposal_id: str = ""
    proposal_key: str = ""
    pr_url: str = ""
    evidence_url: str = ""
    artifact_path: str = ""
    promotion_decision: str = ""
    affected_dataset_keys: list[str] = []
    resolved_catalog_dataset_urns: list[str] = []
    publication: Publication | None = None
    attempt: int = 0
    project_slug: str = ""
    repository_key: str = ""
    evidence_scope: str = ""
    error_message: str = ""
    started_at: str = ""
    updated_at: str = ""


class GateRunList(msgspec.Struct, kw_only=True):
    items: list[GateRunOut]
