"""Every identifier field of every request, path and body, against the real HTTP app: any
generated string either answers 422, or whatever the request wrote stays inside the data
directory (nothing is created outside it, nothing inside it leads out of it). Never a 500.

The identifier fields come from the OpenAPI document (path and query parameters and body
fields with a ``pattern``), so a new one is covered by itself; the operations they belong
to need a row in ``REQUESTS`` (a valid request to vary), else the completeness test fails.
The path builders themselves get the same property without HTTP in between.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from domain.shared.ids import ID
from tests.conftest import ADMIN
from tests.helpers import DEMO_LIKE
from tests.jobs_support import http, service
from workers.paths import OutsideRoot, inside
from workers.planes.local.worktrees import WorktreeError, Worktrees

TRICKY = [
    "..", ".", "../..", "../../../../tmp/x", "/tmp/x", "/", "a/../../b", "acme/../../x", "x\n", "main\n", "\x00",
    "a\x00b", "-rf", "--upload-pack=touch /tmp/pwn", "a b", "~", "~root", "%2e%2e", "..%2f..", "\\..\\..", "a\\b",
    ".git", "x.git", "HEAD", "refs/heads/main", "C:\\x", "\u212a", "ｘ", "a" * 300, "",
]
VALUES = st.one_of(st.sampled_from(TRICKY), st.text(max_size=40), st.from_regex(rf"\A{ID}\Z"),
                   st.from_regex(r"\A[A-Za-z0-9_./-]{1,30}\Z"))
_count = itertools.count()


def fresh(prefix: str) -> str:
    return f"{prefix}-{next(_count)}"


# operationId -> (method, path, body factory or None). The SSE stream is answered by its own
# test (test_live_http): a valid topic streams forever, which a property cannot wait out.
Request = tuple[str, str, Callable[[], Any] | None]
CONTROL = {"verb": "pause", "reason": "property"}
REQUESTS: dict[str, Request | None] = {
    "V1AdminStudioTemplatesListTemplates": ("get", "/v1/admin/studio/templates", None),
    "V1AdminStudioRunsLaunchRun": ("post", "/v1/admin/studio/runs", lambda: {"template_id": "delivery-core", "project_slug": "acme"}),
    "V1AdminStudioRunsRunIdGetRun": ("get", "/v1/admin/studio/runs/{run_id}", None),
    "V1AdminStudioRunsRunIdExecuteExecuteRun": ("post", "/v1/admin/studio/runs/{run_id}/execute", None),
    "V1AdminStudioRunsRunIdSessionStateSessionState": ("get", "/v1/admin/studio/runs/{run_id}/session-state", None),
    "V1AdminStudioRunsRunIdReportsReports": ("get", "/v1/admin/studio/runs/{run_id}/reports", None),
    "V1AdminStudioRunsRunIdHandoffTrailHandoffTrail": ("get", "/v1/admin/studio/runs/{run_id}/handoff-trail", None),
    "V1AdminStudioRunsRunIdPreviewSharePreview": ("post", "/v1/admin/studio/runs/{run_id}/preview", lambda: {}),
    "V1AdminStudioRunsRunIdCleanupCleanupRun": ("post", "/v1/admin/studio/runs/{run_id}/cleanup", None),
    "V1AdminStudioRunsRunIdReplayReplayRun": ("post", "/v1/admin/studio/runs/{run_id}/replay", None),
    "V1AdminStudioRunsRunIdControlAdminControl": ("post", "/v1/admin/studio/runs/{run_id}/control", lambda: dict(CONTROL)),
    "V1ProjectFactoryProjectsListProjects": ("get", "/v1/project-factory/projects", None),
    "V1ProjectFactoryProjectsCreateProject": ("post", "/v1/project-factory/projects", lambda: {
        "project_key": fresh("p"),
        "repository_bindings": [{"repository_key": "backend", "vcs_repo_slug": f"{fresh('o')}/api", "default_branch": "main"}],
    }),
    "V1ProjectFactoryProjectsProjectSlugGetProject": ("get", "/v1/project-factory/projects/{project_slug}", None),
    "V1ProjectFactoryProjectsProjectSlugParticipantsAddParticipant": (
        "post", "/v1/project-factory/projects/{project_slug}/participants",
        lambda: {"subject_key": "pat@example.com", "project_role": "viewer"},
    ),
    "V1ProjectFactoryProjectsProjectSlugParticipantsSubjectKeyRemoveParticipant": (
        "delete", "/v1/project-factory/projects/{project_slug}/participants/{subject_key}", None,
    ),
    "V1ProjectFactoryProjectsProjectSlugOverviewGetOverview": (
        "get", "/v1/project-factory/projects/{project_slug}/overview", None,
    ),
    "V1ProjectFactoryProjectsProjectSlugPullsGetPulls": ("get", "/v1/project-factory/projects/{project_slug}/pulls", None),
    "V1ProjectFactoryProjectsProjectSlugPullsNumberGetPull": (
        "get", "/v1/project-factory/projects/{project_slug}/pulls/{number}", None,
    ),
    "V1ProjectFactoryProjectsProjectSlugPullsNumberCommentsPostComment": (
        "post", "/v1/project-factory/projects/{project_slug}/pulls/{number}/comments",
        lambda: {"path": "README.md", "line": 1, "body": "why?"},
    ),
    "V1ProjectFactoryProjectsProjectSlugPullsNumberPublishPostPublish": (
        "post", "/v1/project-factory/projects/{project_slug}/pulls/{number}/publish", None,
    ),
    "V1PortalPermissionsCheckPermissionCheck": ("get", "/v1/portal/permissions/check?object=project:acme&relation=viewer", None),
    "V1PortalWorkspaceWorkspace": ("get", "/v1/portal/workspace", None),
    "V1PortalWorkspaceGraphWorkspaceGraphView": ("get", "/v1/portal/workspace/graph", None),
    "V1PortalNotificationsNovuConfigNovuConfig": ("get", "/v1/portal/notifications/novu-config", None),
    "V1PortalNotificationsTestSendTest": ("post", "/v1/portal/notifications/test", lambda: {}),
    "V1PortalNotificationsInbox": ("get", "/v1/portal/notifications", None),
    "V1PortalNotificationsNotificationIdReadMarkRead": ("post", "/v1/portal/notifications/{notification_id}/read", None),
    "V1PortalCopilotActionsCopilotAction": ("post", "/v1/portal/copilot/actions", lambda: {"action_id": "explain_page"}),
    "V1PortalImpactImpactView": ("get", "/v1/portal/impact?project_slug=acme", None),
    "ControlPlaneStudioLiveLiveSse": None,
    "ControlPlaneStudioObservabilityFeedObservabilityFeed": (
        "get", "/control-plane/studio/observability-feed?project_slug=acme&run_id={run_id}", None,
    ),
    "ControlPlaneStudioRunsFleetBoard": ("get", "/control-plane/studio/runs?project_slug=acme", None),
    "ControlPlaneStudioRunsRunIdControlRun": ("post", "/control-plane/studio/runs/{run_id}/control", lambda: dict(CONTROL)),
    "ControlPlaneStudioRunsRunIdSessionsSessionIdControlSession": (
        "post", "/control-plane/studio/runs/{run_id}/sessions/{session_id}/control", lambda: dict(CONTROL),
    ),
    "V1JobsSyncAccessAccessSync": ("post", "/v1/jobs/sync/access", lambda: {
        "tenant_id": "default", "proposal_id": "p-1", "mode": "request", "required_connectors": ["idp"],
    }),
    "V1WizardTryWizardTry": ("post", "/v1/wizard/try", lambda: {"tenant_id": "default", "proposal_id": "p-1", "provider": "vcs"}),
    "V1JobsNodePowerSleepNodePowerSleep": ("post", "/v1/jobs/node-power/sleep", lambda: {
        "tenant_id": "default", "node_name": "gpu-1", "mac_address": "52:54:00:12:34:56", "proposal_id": "p-1",
        "power_device_id": "dev-1",
    }),
    "V1JobsNodePowerWakeNodePowerWake": ("post", "/v1/jobs/node-power/wake", lambda: {
        "tenant_id": "default", "node_name": "gpu-1", "mac_address": "52:54:00:12:34:56", "proposal_id": "p-1",
        "power_device_id": "dev-1",
    }),
    "V1JobsJobIdGetJob": ("get", "/v1/jobs/{job_id}", None),
    "V1SyncCheckpointsListCheckpoints": ("get", "/v1/sync/checkpoints", None),
    "V1SyncCheckpointsConnectorIdGetCheckpoint": ("get", "/v1/sync/checkpoints/{connector_id}?scope=default", None),
    "V1IdentityLinksProviderGetIdentityLink": ("get", "/v1/identity/links/{provider}", None),
    "V1IdentityLinksProviderPostIdentityLink": ("post", "/v1/identity/links/{provider}", lambda: {"provider_user_id": "1"}),
    "V1AdminGateThreadsThreadKeyRunRunThread": ("post", "/v1/admin/gate/threads/{thread_key}/run", lambda: {
        "tenant_id": "default", "agent_key": "backend", "provider_key": "squadops-gate", "scenario_key": "portal-dashboard-smoke",
    }),
    "V1AdminGateThreadsThreadKeyRunsThreadRuns": ("get", "/v1/admin/gate/threads/{thread_key}/runs", None),
    "V1AdminGateScenariosScenarioKeyGetScenario": ("get", "/v1/admin/gate/scenarios/{scenario_key}", None),
    "V1PortalLaunchesDevWorkspaceWorkspacesListWorkspaces": ("get", "/v1/portal/launches/dev_workspace/workspaces", None),
    "V1PortalLaunchesDevWorkspaceWorkspacesWorkspaceScopeReleaseWorkspace": (
        "delete", "/v1/portal/launches/dev_workspace/workspaces/{workspace_scope}", None,
    ),
    "V1PortalLaunchesDevWorkspaceProviderYamlProviderYaml": (
        "get", "/v1/portal/launches/dev_workspace/provider.yaml?workspace_scope=ws-1", None,
    ),
    "V1PortalLaunchesDevWorkspaceKubeconfigKubeconfig": ("get", "/v1/portal/launches/dev_workspace/kubeconfig?workspace_scope=ws-1", None),
    "V1PortalLaunchesDevWorkspaceLaunch": (
        "get", "/v1/portal/launches/dev_workspace?project_slug=acme&repository_key=backend&branch=main", None,
    ),
    "V1PortalLaunchesSolutionIdLaunchOther": ("get", "/v1/portal/launches/{solution_id}", None),
    **{f"V1Meter{name}MeteredModelCall": ("post", f"/v1/meter/{{employee_slug}}/v1/{path}", lambda: {"model": "m"})
       for name, path in (("EmployeeSlugChatCompletions", "chat/completions"), ("EmployeeSlugResponses", "responses"),
                          ("EmployeeSlugMessages", "messages"), ("EmployeeSlugMessagesCountTokens", "messages/count_tokens"))},
    "V1AdminUsageRunsRunIdRunUsage": ("get", "/v1/admin/usage/runs/{run_id}", None),
    "V1AdminUsageProjectsProjectSlugProjectUsage": ("get", "/v1/admin/usage/projects/{project_slug}", None),
    "V1AdminUsageEmployeesEmployeeUsage": ("get", "/v1/admin/usage/employees?employee=carol@x.io", None),
    "V1PortalUsageOwnUsage": ("get", "/v1/portal/usage", None),
}


def identifier_fields(document: dict[str, Any]) -> dict[str, list[tuple[str, tuple[Any, ...]]]]:
    """operationId -> its identifier fields: ("path"|"query", (name,)) or ("body", (key, …))."""
    components = document["components"]["schemas"]

    def deref(schema: Any) -> Any:
        while isinstance(schema, dict) and "$ref" in schema:
            schema = components[schema["$ref"].rsplit("/", 1)[1]]
        return schema

    def walk(schema: Any, at: tuple[Any, ...], found: set[tuple[Any, ...]], depth: int = 0) -> None:
        schema = deref(schema)
        if depth > 5 or not isinstance(schema, dict):
            return
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in schema.get(key, []):
                walk(sub, at, found, depth + 1)
        if "pattern" in schema and at:
            found.add(at)
        for name, sub in schema.get("properties", {}).items():
            walk(sub, (*at, name), found, depth + 1)
        if "items" in schema:
            walk(schema["items"], (*at, 0), found, depth + 1)

    fields: dict[str, list[tuple[str, tuple[Any, ...]]]] = {}
    for operations in document["paths"].values():
        for operation in operations.values():
            if not isinstance(operation, dict) or "operationId" not in operation:
                continue
            mine = [(p["in"], (p["name"],)) for p in operation.get("parameters", [])
                    if p["in"] in ("path", "query") and "pattern" in p.get("schema", {})]
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            found: set[tuple[Any, ...]] = set()
            if body is not None:
                walk(body, (), found)
            mine += [("body", at) for at in sorted(found, key=str)]
            if mine:
                fields[operation["operationId"]] = mine
    return fields


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    root = tmp_path_factory.mktemp("identifiers")
    data = root / "data"
    with service(f"sqlite:///{root / 'db.sqlite'}", data) as container, http(container, ADMIN, workers=("projector",)) as c:
        created = c.post("/v1/project-factory/projects", json=DEMO_LIKE)
        assert created.status_code == 201, created.text
        c.headers["X-Squadops-Min-Position"] = created.headers["X-Squadops-Position"]
        run = c.post("/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": "acme"})
        assert run.status_code == 201, run.text
        run_id = run.json()["run_id"]
        c.headers["X-Squadops-Min-Position"] = run.headers["X-Squadops-Position"]
        sessions = c.get(f"/v1/admin/studio/runs/{run_id}/session-state").json()["sessions"]
        defaults = {
            "run_id": run_id, "session_id": sessions[0]["session_id"], "project_slug": "acme",
            "subject_key": "pat@example.com", "notification_id": "n-1", "job_id": "job-0", "connector_id": "idp",
            "provider": "vcs", "thread_key": "t-1", "scenario_key": "portal-dashboard-smoke", "workspace_scope": "ws-1",
            "solution_id": "docs", "employee_slug": "op", "number": "1",
        }
        yield SimpleNamespace(client=c, root=root, data=data, defaults=defaults,
                              fields=identifier_fields(c.get("/openapi.json").json()))


def test_every_operation_with_an_identifier_field_has_a_request_to_vary(setup: SimpleNamespace) -> None:
    assert sorted(set(setup.fields) - set(REQUESTS)) == []
    assert sorted(set(REQUESTS) - set(setup.fields)) == []


def walk(top: Path, skip: Path | None = None) -> Iterator[os.DirEntry[str]]:
    """Every entry below ``top`` (links not followed; ``skip`` and what it holds left out),
    read with one ``scandir`` a folder: both checks run after every request."""
    folders = [str(top)]
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    if skip is not None and entry.path == str(skip):
                        continue
                    yield entry
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
        except FileNotFoundError:  # (a folder the service removed meanwhile)
            continue


def outside_files(root: Path, data: Path) -> set[str]:
    return {entry.path for entry in walk(root, skip=data) if not entry.name.startswith("db.sqlite")}


def leads_out(data: Path) -> list[str]:
    base = data.resolve()
    return [entry.path for entry in walk(data) if entry.is_symlink() and base not in Path(entry.path).resolve().parents]


def sent(setup: SimpleNamespace, operation: str, where: str, at: tuple[Any, ...], value: str) -> Any:
    entry = REQUESTS[operation]
    assert entry is not None
    method, template, body_of = entry
    values = dict(setup.defaults)
    path, _, query = template.partition("?")
    params = dict(p.split("=", 1) for p in query.split("&") if p)
    if where == "path":
        values[at[0]] = value
    elif where == "query":
        params[at[0]] = value
    url = path.format(**{k: quote(v, safe="") for k, v in values.items()})
    params = {k: v.format(**setup.defaults) for k, v in params.items()} if where != "query" else params
    body = body_of() if body_of is not None else None
    if where == "body":
        target = body
        for step in at[:-1]:
            target = target[step]
        target[at[-1]] = value
    kwargs: dict[str, Any] = {"params": params}
    if body is not None:
        kwargs["json"] = body
    return setup.client.request(method.upper(), url, **kwargs)


def checker(setup: SimpleNamespace, before: set[str], operation: str, where: str, at: tuple[Any, ...]) -> Callable[[], None]:
    @settings(max_examples=6, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(value=VALUES)
    def check(value: str) -> None:
        note(f"{operation} {where} {at} = {value!r}")
        answer = sent(setup, operation, where, at, value)
        assert answer.status_code < 500, answer.text
        if answer.status_code != 422:
            assert outside_files(setup.root, setup.data) == before
            assert leads_out(setup.data) == []

    return check


def test_any_identifier_answers_422_or_stays_inside_its_root(setup: SimpleNamespace) -> None:
    before = outside_files(setup.root, setup.data)
    for operation, fields in sorted(setup.fields.items()):
        if REQUESTS[operation] is None:
            continue
        for where, at in fields:
            checker(setup, before, operation, where, at)()
    assert outside_files(setup.root, setup.data) == before


# -- the path builders, without HTTP in between ---------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(VALUES, min_size=1, max_size=4))
def test_the_path_builder_refuses_or_answers_a_path_inside_its_root(tmp_path_factory: pytest.TempPathFactory, parts: list[str]) -> None:
    root = tmp_path_factory.getbasetemp() / "paths-root"
    try:
        path = inside(root, *parts, suffix=".git")
    except OutsideRoot:
        return
    assert root.resolve() in path.resolve().parents


@settings(max_examples=200, deadline=None)
@given(key=VALUES, branch=VALUES, tenant=VALUES, slug=VALUES)
def test_a_lane_repository_is_refused_or_inside_the_data_directory(
    tmp_path_factory: pytest.TempPathFactory, key: str, branch: str, tenant: str, slug: str
) -> None:
    data = tmp_path_factory.getbasetemp() / "plane-data"
    run = SimpleNamespace(
        tenant=tenant, project_slug=slug, run_id="run-1",
        project_facts={"repository_bindings": [{"repository_key": key, "default_branch": branch, "repository_type": "assembly"}]},
    )
    try:
        repo = Worktrees(data).repository_for(run, "planner")
    except WorktreeError:
        return
    assert (data / "repos").resolve() in repo.path.resolve().parents
    assert "\n" not in repo.default_branch and not repo.default_branch.startswith("-")
