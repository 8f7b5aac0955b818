"""Project factory: ``POST /v1/project-factory/projects``, and the projects the permission
graph lets the caller read: ``GET /v1/project-factory/projects`` and ``…/projects/{slug}``
(403 ``not_a_participant`` without a path of tuples, 404 for no such project)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec
from litestar import Router, delete, get
from litestar.datastructures import State
from litestar.params import JSONBody, PathParameter

from api.access import CONTROL, READ, Access, access_guard, guarded, project_in
from api.auth import EdgeJwt
from api.context import (
    CallerDep,
    caller_dependency,
    part,
    project_commands,
    studio_reads,
)
from api.errors import ApiError, RequestInvalid
from api.openapi import COMMAND_ERRORS, answers, link
from api.project_factory.overview import get_overview
from api.project_factory.pulls import ROUTES as pull_routes
from api.read_your_writes import command
from domain.gate.ports import VcsError
from domain.portal.graph import ListObjectsRequest, identity_tuples, user_ref
from domain.portal.relations import graph_grants
from domain.projects.events import (
    settings_from_request,
    settings_mapping,
)
from domain.projects.project import repository_bindings, slugify
from domain.projects.provisioning import wants_repository
from domain.projects.sources import MAX_LENGTH as MAX_SOURCE_LENGTH
from domain.projects.sources import SourceError, redact
from domain.shared.access import ROLES, may_manage_participant
from domain.shared.errors import Conflict, Forbidden, Invalid, project_not_found
from domain.shared.ids import (
    BRANCH_PATTERN,
    ID_PATTERN,
    OPTIONAL_ID_PATTERN,
    OPTIONAL_REPO_SLUG_PATTERN,
    is_valid_branch,
    is_valid_id,
    is_valid_repo_slug,
)
from projections.projects.projects import apply_provisioning, project_out

Slug = Annotated[str, PathParameter(pattern=ID_PATTERN, description="project slug")]

Short = Annotated[str, msgspec.Meta(max_length=200)]
Long = Annotated[str, msgspec.Meta(max_length=20_000)]
Keys = Annotated[list[Short], msgspec.Meta(max_length=500)]


class Participant(msgspec.Struct, kw_only=True):
    subject_key: Short = ""
    project_role: Short = "contributor"
    stack_ids: Keys = []


# Identifiers that become paths, git refs or command arguments (C12, ``domain.shared.ids``).
RepositoryKey = Annotated[str, msgspec.Meta(max_length=128, pattern=OPTIONAL_ID_PATTERN, description="[A-Za-z0-9_-]")]
RepoSlug = Annotated[str, msgspec.Meta(max_length=257, pattern=OPTIONAL_REPO_SLUG_PATTERN, description="owner/name")]
Branch = Annotated[str, msgspec.Meta(max_length=200, pattern=BRANCH_PATTERN, description="[A-Za-z0-9_-] parts joined by /")]


class RepositoryBindingIn(msgspec.Struct, kw_only=True):
    repository_key: RepositoryKey = ""
    display_name: Short = ""
    vcs_repo_slug: RepoSlug = ""
    default_branch: Branch = "main"
    private_repo: bool = True
    repository_provisioning_policy: Short = ""
    create_vcs_repo: bool = True
    workspace_scope: Short = "project_shared"
    repository_type: Short = "application"
    source_repository_url: Annotated[
        str,
        msgspec.Meta(
            max_length=MAX_SOURCE_LENGTH,
            description=(
                "An existing repository to bring (an absolute local path, or a file, https, http or git URL git "
                "can read): the binding's repository is a bare mirror of it, fetched again before each run, and "
                "the gate pushes published branches back to it when it takes them. A source git cannot read, "
                "another transport (ext::, ssh), an option-like value or a path into the service's own data is "
                "a 422 with git's error, and nothing is created."
            ),
        ),
    ] = ""


class PortalProjectCreateIn(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The create request; no field is required (a slug comes from key or name)."""

    tenant_id: Short | None = None
    proposal_id: Short | None = None
    template_id: Short = "delivery-core"
    project_key: Short | None = None
    display_name: Short | None = None
    description: Long | None = None
    project_type: Short | None = None
    frontend_framework: Short | None = None
    backend_framework: Short | None = None
    private_repo: bool = True
    owner_subject_keys: Keys | None = None
    member_subject_keys: Keys | None = None
    member_team_keys: Keys | None = None
    member_group_paths: Keys | None = None
    participants: Annotated[list[Participant], msgspec.Meta(max_length=500)] | None = None
    repository_bindings: Annotated[list[RepositoryBindingIn], msgspec.Meta(max_length=50)] | None = None
    enabled_stack_ids: Keys | None = None
    board_project_uid: Short | None = None
    repository_provisioning_policy: Short | None = None
    create_vcs_repo: bool = True
    establish_design_sync: bool | None = None
    # Project metadata, accepted in snake_case and camelCase alike.
    project_assembly: dict[str, Any] | None = None
    source_ref_repos: list[Any] | None = None
    source_ref_repos_camel: list[Any] | None = msgspec.field(default=None, name="sourceRefRepos")
    project_repository_bindings: list[dict[str, Any]] | None = None
    project_repository_bindings_camel: list[dict[str, Any]] | None = msgspec.field(
        default=None, name="projectRepositoryBindings"
    )
    agent_squad_suit_tester_roles: Any = None
    agent_squad_suit_tester_roles_camel: Any = msgspec.field(default=None, name="agentSquadSuitTesterRoles")


# The slug comes from project_key, else display_name (``domain.projects.project``): the
# first of them given must hold a character ``domain.project.slugify`` keeps, that is one
# whose lower case is an ASCII letter or digit (İ and the Kelvin sign K lower to i and k).
_SLUG_SOURCE = {"type": "string", "pattern": "[A-Za-z0-9\u0130\u212a]"}


def create_body_schema(components: Mapping[str, Any]) -> dict[str, Any]:
    """The create request's schema, plus what a struct cannot say: where the slug comes from."""
    base = copy.deepcopy(components["PortalProjectCreateIn"])
    base["anyOf"] = [
        {"required": ["project_key"], "properties": {"project_key": _SLUG_SOURCE}},
        {"required": ["display_name"], "properties": {"project_key": {"enum": [None, ""]}, "display_name": _SLUG_SOURCE}},
    ]
    base.pop("title", None)
    return base


class ParticipantOut(msgspec.Struct, kw_only=True):
    subject_key: str
    project_role: str
    stack_ids: list[str]


class RepositoryBindingOut(msgspec.Struct, kw_only=True):
    repository_key: str = ""
    display_name: str = ""
    vcs_repo_slug: str = ""
    vcs_repo_url: str = ""
    default_branch: str = "main"
    workspace_scope: str = ""
    repository_type: str = ""
    metadata: dict[str, Any] = {}


class PortalProjectOut(msgspec.Struct, kw_only=True):
    tenant_id: str = ""
    project_slug: str = ""
    is_favorite: bool = False
    template_id: str = ""
    template_family: str = ""
    display_name: str = ""
    description: str = ""
    vcs_repo_slug: str = ""
    vcs_repo_url: str = ""
    repository_provisioning_policy: str = ""
    vcs_repo_provision_status: str = ""
    vcs_repo_provision_error: str = ""
    design_team_ref: str = ""
    vcs_repo_node_id: str = ""
    catalog_entity_ref: str = ""
    catalog_annotations: dict[str, str] = {}
    created_by: str = ""
    updated_at: str = ""
    source_group_paths: list[str] = []
    owner_group_paths: list[str] = []
    contributor_group_paths: list[str] = []
    team_group_paths: list[str] = []
    member_subject_keys: list[str] = []
    participants: list[ParticipantOut] = []
    enabled_stack_ids: list[str] = []
    suggested_stack_ids: list[str] = []
    registry_profile: str = ""
    execution_profile: str = ""
    delivery_profile: str = ""
    default_ai_agents: list[str] = []
    binding_status: str = ""
    permission_status: str = ""
    execution_project_id: str = ""
    execution_board_url: str = ""
    execution_bridge_mode: str = ""
    execution_session_mode: str = ""
    execution_browser_execution_plane: str = ""
    deploy_project_url: str = ""
    deploy_preview_base_url: str = ""
    proof_target_policy: str = ""
    proof_codebase_repo_slug: str = ""
    board_project_uid: str = ""
    board_projection: dict[str, Any] = {}
    board_sync_status: str = ""
    agent_knowledge: dict[str, Any] = {}
    project_assembly: dict[str, Any] = {}
    launch: dict[str, str] = {}
    packages: list[dict[str, Any]] = []
    repository_bindings: list[RepositoryBindingOut] = []
    design_hub: dict[str, Any] | None = None
    ai_config: dict[str, Any] = {}
    ai_run_history: list[dict[str, Any]] = []
    studio_digest: dict[str, Any] | None = None
    studio: dict[str, Any] | None = None


def request_meta(data: PortalProjectCreateIn) -> dict[str, Any]:
    """The create request: JSON names (camelCase where sent so), no unset fields (the
    project records its settings from it by name)."""
    raw = msgspec.to_builtins(data)
    return {k: v for k, v in raw.items() if v is not None}


_BINDING_IDENTIFIERS = (
    ("repository_key", is_valid_id, OPTIONAL_ID_PATTERN),
    ("vcs_repo_slug", is_valid_repo_slug, OPTIONAL_REPO_SLUG_PATTERN),
    ("default_branch", is_valid_branch, BRANCH_PATTERN),
)


def check_bindings(meta: dict[str, Any], caller: Any, state: State) -> None:
    """Every repository binding, wherever the request puts it (``repository_bindings``,
    ``projectRepositoryBindings``, ``project_assembly``), names its repository key, slug and
    branch by identifiers (C12) and brings only a source git can read under the source policy
    (``domain.projects.sources``) before anything is recorded; and the owner of the gate's
    default repository is the service's own: only super_admin binds a repository under it."""
    bindings = repository_bindings(settings_mapping(settings_from_request(meta)))
    for index, binding in enumerate(bindings):
        for field, valid, pattern in _BINDING_IDENTIFIERS:
            value = binding.get(field)
            if value in (None, ""):
                continue
            if not isinstance(value, str) or not valid(value):
                raise RequestInvalid(
                    ["body", "repository_bindings", index, field], f"{field} must match {pattern}",
                    "string_pattern_mismatch", value,
                )
    for index, binding in enumerate(bindings):
        if binding.get("source_repository_url") and not wants_repository(meta, binding):
            raise RequestInvalid(
                ["body", "repository_bindings", index, "create_vcs_repo"],
                "a binding that brings a repository is mirrored: create_vcs_repo must not be false",
                "value_error", False,
            )
        check_source(state, index, binding)
    gate = part(state, "gate")
    reserved = str(getattr(gate, "default_repo", "")).partition("/")[0]
    if not reserved or caller.principal.is_super_admin:
        return
    project_slug = slugify(str(meta.get("project_key") or meta.get("display_name") or ""))
    for binding in bindings:
        key = str(binding.get("repository_key") or "")
        slug = str(binding.get("vcs_repo_slug") or f"{project_slug}/{key or 'main'}")
        if slug.partition("/")[0] == reserved:
            raise Forbidden(
                f"Repositories under {reserved!r} are the service's own (the gate's default repository); "
                "only super_admin binds them.",
                code="repository_reserved",
            )


def check_source(state: State, index: int, binding: dict[str, Any]) -> None:
    """422 (git's error first line, the URL without its credentials) unless the binding's
    source passes the policy and git reads it, with its default branch."""
    url = binding.get("source_repository_url")
    if url in (None, ""):
        return
    loc = ["body", "repository_bindings", index, "source_repository_url"]
    if not isinstance(url, str):
        raise RequestInvalid(loc, "source_repository_url must be a string", "string_type", url)
    try:
        part(state, "source_check")(url, str(binding.get("default_branch") or "main"))
    except (SourceError, VcsError) as exc:
        raise RequestInvalid(loc, str(exc).replace(url, redact(url)), "value_error", redact(url)) from None


@command(
    "/projects",
    status_code=201,
    summary="Create a project",
    opt=answers(
        *COMMAND_ERRORS,
        links={
            "LaunchRun": link(
                "launch_run", body={"project_slug": "$response.body#/project_slug", "template_id": "delivery-core"}
            ),
            "GetBoard": link("fleet_board", project_slug="$response.body#/project_slug"),
        },
        body=("PortalProjectCreateRequest", create_body_schema),
    ),
)
def create_project(
    data: JSONBody[PortalProjectCreateIn], state: State, caller: CallerDep
) -> PortalProjectOut:
    projects, tenant = project_commands(state), caller.tenant
    if data.tenant_id is not None and data.tenant_id != tenant:
        raise RequestInvalid(["body", "tenant_id"], "tenant_id differs from the request's tenant", "value_error", data.tenant_id)
    meta = request_meta(data)
    check_bindings(meta, caller, state)
    try:
        project = projects.create_project(tenant=tenant, request=meta, created_by=caller.subject_key)
    except Invalid as exc:
        if exc.code == "project_key_required":
            raise RequestInvalid(["body", "project_key"], exc.message, "missing") from None
        raise
    out = project_out(tenant, project.project_slug, project.request, project.created_by, project.created_at)
    provisioning = part(state, "provisioning")
    if provisioning is not None:  # fails open inside: outcomes are recorded, never raised
        for outcome in provisioning.provision(tenant, project.project_slug):
            apply_provisioning(out, outcome)
    return msgspec.convert(out, PortalProjectOut)


_project = msgspec.json.Decoder(PortalProjectOut)


class PortalProjectList(msgspec.Struct, kw_only=True):
    projects: list[PortalProjectOut]
    count: int


@get(
    "/projects/{project_slug:str}",
    sync_to_thread=True,
    guards=[access_guard],
    summary="A project the caller may read",
    opt=guarded(Access(READ, project_in("path", "project_slug"))),
)
def get_project(project_slug: Slug, state: State, caller: CallerDep) -> PortalProjectOut:
    reads = studio_reads(state)
    doc = reads.project_doc(caller.tenant, project_slug)
    if doc is None:  # who may read it: the access guard decided
        raise project_not_found(project_slug)
    return msgspec.convert(doc, PortalProjectOut)


@get("/projects", sync_to_thread=True, summary="The projects the caller may read")
def list_projects(state: State, caller: CallerDep) -> PortalProjectList:
    principal, tenant = caller.principal, caller.tenant
    slugs = sorted(
        obj.partition(":")[2]
        for obj in part(state, "permission_graph").list_objects(
            ListObjectsRequest(
                store=tenant,
                user=user_ref(principal.subject_key),
                relation="viewer",
                type="project",
                contextual_tuples=identity_tuples(principal.subject_key, principal.groups),
            )
        )
    )
    reads = studio_reads(state)
    found = [doc for slug in slugs if (doc := reads.project_doc(tenant, slug)) is not None]
    projects = [msgspec.convert(doc, PortalProjectOut) for doc in found]
    return PortalProjectList(projects=projects, count=len(projects))


SubjectKey = Annotated[str, PathParameter(max_length=200, description="participant subject key")]
Role = Literal["owner", "maintainer", "contributor", "viewer"]


class ParticipantIn(msgspec.Struct, kw_only=True):
    """A participant to add (or add back, or give another role)."""

    subject_key: Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=r"\S")]
    project_role: Role = "contributor"
    stack_ids: Keys = []


def caller_role(state: State, caller: Any, project_slug: str) -> str | None:
    """The highest project role the caller holds here, as the permission graph answers."""
    grants = graph_grants(part(state, "permission_graph"), caller.tenant, project_slug)
    return next((r for r in reversed(ROLES) if grants.decide is not None and grants.decide(caller.principal, r)), None)


def manage_check(state: State, caller: Any, project_slug: str, held: str | None, wanted: str | None) -> None:
    """403 unless the caller's role is above both the role the subject holds and the one it
    is to hold (owners manage owners; super_admin everyone)."""
    mine, admin = caller_role(state, caller, project_slug), caller.principal.is_super_admin
    for target in (held, wanted):
        if target is not None and not may_manage_participant(mine, super_admin=admin, target_role=target):
            raise Forbidden(
                f"Managing a participant who is (or becomes) {target} needs a role above it; you are {mine or 'no participant'}.",
                code="participant_rank_forbidden",
            )


def last_owner_check(doc: dict[str, Any], key: str, wanted: str | None) -> None:
    """409 when ``key`` is the project's only owner and would stop being one."""
    owners = {p["subject_key"] for p in doc["participants"] if p["project_role"] == "owner"}
    if owners == {key} and wanted != "owner":
        raise Conflict(f"{key!r} is the last owner of the project; add another owner first.", code="last_owner")


def held_role(doc: dict[str, Any], key: str) -> str | None:
    return next((p["project_role"] for p in doc["participants"] if p["subject_key"] == key), None)


@command(
    "/projects/{project_slug:str}/participants",
    status_code=200,
    guards=[access_guard],
    summary="Add a participant, add one back, or change one's role (a role above theirs)",
    opt=guarded(Access(CONTROL, project_in("path", "project_slug"))),
)
def add_participant(
    project_slug: Slug, data: JSONBody[ParticipantIn], state: State, caller: CallerDep
) -> PortalProjectOut:
    reads, tenant = studio_reads(state), caller.tenant
    doc = reads.project_doc(tenant, project_slug)
    if doc is None:  # who may steer it: the access guard decided
        raise project_not_found(project_slug)
    key = data.subject_key.strip().lower()
    held = held_role(doc, key)
    manage_check(state, caller, project_slug, held, data.project_role)
    if held is not None:
        last_owner_check(doc, key, data.project_role)
    added = project_commands(state).add_participant(
        tenant=tenant, project_slug=project_slug, subject_key=key, project_role=data.project_role,
        stack_ids=list(data.stack_ids), added_by=caller.subject_key,
    )
    apply_provisioning(doc, dataclasses.replace(added, at=doc["updated_at"]))  # the answer keeps the read's time
    return msgspec.convert(doc, PortalProjectOut)


@command(
    "/projects/{project_slug:str}/participants/{subject_key:str}",
    status_code=200,
    method=delete,
    guards=[access_guard],
    summary="Remove a participant (a role above theirs; never the last owner)",
    opt=guarded(Access(CONTROL, project_in("path", "project_slug"))),
)
def remove_participant(
    project_slug: Slug, subject_key: SubjectKey, state: State, caller: CallerDep
) -> PortalProjectOut:
    reads, tenant = studio_reads(state), caller.tenant
    doc = reads.project_doc(tenant, project_slug)
    if doc is None:  # who may steer it: the access guard decided
        raise project_not_found(project_slug)
    key = subject_key.lower()
    held = held_role(doc, key)
    if held is None:
        raise ApiError(404, f"{key!r} is not a participant of project {project_slug!r}.", "participant_not_found")
    manage_check(state, caller, project_slug, held, None)
    last_owner_check(doc, key, None)
    removed = project_commands(state).remove_participant(
        tenant=tenant, project_slug=project_slug, subject_key=key, removed_by=caller.subject_key
    )
    apply_provisioning(doc, dataclasses.replace(removed, at=doc["updated_at"]))
    return msgspec.convert(doc, PortalProjectOut)


def project_factory_router(edge: EdgeJwt) -> Router:
    return Router(
        path="/v1/project-factory",
        route_handlers=[
            create_project, get_project, list_projects, add_participant, remove_participant, *pull_routes,
            get_overview,
        ],
        dependencies=caller_dependency(edge, admin=False),
        tags=["project-factory"],
    )
