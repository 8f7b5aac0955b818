"""Connection material of a developer workspace: reconnect links, provider definition, kubeconfig.

Pure functions of a workspace record and ``MaterialConfig``. Nothing here carries a secret:
the provider definition names the meter token by reference (an env variable the workspace
tool resolves at runtime), and the kubeconfig logs in through the identity provider with
the kube-access client (Authentication §8–9), never the edge/web-IDE client.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import msgspec

from domain.workspaces import policies

LAUNCH_BASE = "/v1/portal/launches/dev_workspace"
METER_TOKEN_ENV = "SQUADOPS_METER_TOKEN"
TOOL_LOADOUT = ("dev_workspace", "kubectl", "kubelogin", "llm")


class MaterialConfig(msgspec.Struct, frozen=True, kw_only=True):
    base_url: str = "http://127.0.0.1:8000"
    kube_api_server: str = "https://kube.squadops.local"
    kube_oidc_issuer: str = "https://idp.squadops.local/realms/squadops"
    kube_oidc_client_id: str = "kube-access"
    metric_prefix: str = "squadops_dev_workspace_model"
    dashboard_uid: str = "squadops-dev-workspace-usage"
    dashboard_base_url: str = "http://127.0.0.1:3000"


def metric_names(cfg: MaterialConfig) -> dict[str, str]:
    """The one place metric names are composed; clients take them from usage_observability."""
    return {"tokens": f"{cfg.metric_prefix}_tokens", "requests": f"{cfg.metric_prefix}_requests"}


def meter_path(employee_slug: str) -> str:
    return f"/v1/meter/{employee_slug}/v1"


def usage_observability(record: dict[str, Any], cfg: MaterialConfig) -> dict[str, Any]:
    """Where the employee's model use is counted. The meter's path names the employee's
    slug; the counts are keyed by the whole subject (``employee``, the metrics' label):
    ``carol@evil.com`` is never counted as ``carol@corp.com``, though both are ``carol``."""
    slug, employee = record["employee_slug"], record["employee"]
    dashboard_path = f"/d/{cfg.dashboard_uid}?var-employee={quote(employee)}"
    return {
        "employee_slug": slug,
        "employee": employee,
        "meter_path": meter_path(slug),
        "dashboard_uid": cfg.dashboard_uid,
        "dashboard_path": dashboard_path,
        "dashboard_url": cfg.dashboard_base_url.rstrip("/") + dashboard_path,
        "metric_names": metric_names(cfg),
        "employee_label": "employee",
    }


def _scoped(cfg: MaterialConfig, leaf: str, scope: str) -> str:
    return f"{cfg.base_url.rstrip('/')}{LAUNCH_BASE}/{leaf}?workspace_scope={quote(scope)}"


def reconnect_material(record: dict[str, Any], cfg: MaterialConfig) -> dict[str, Any]:
    scope = record["workspace_scope"]
    provider_url = _scoped(cfg, "provider.yaml", scope)
    observability = usage_observability(record, cfg)
    return {
        "provider_url": provider_url,
        "kubeconfig_url": _scoped(cfg, "kubeconfig", scope),
        "provider_add_command": f"dev_workspace provider add {policies.PROVIDER_NAME}-{scope} --url '{provider_url}'",
        "up_command": (
            f"dev_workspace up --provider {policies.PROVIDER_NAME}-{scope} --id {scope} "
            f"--source {record['repository_key']}@{record['branch']}"
        ),
        "tool_loadout": list(TOOL_LOADOUT),
        "usage_links": {
            "dashboard_url": observability["dashboard_url"],
            "meter_url": cfg.base_url.rstrip("/") + observability["meter_path"],
        },
        "usage_observability": observability,
    }


def provider_definition(record: dict[str, Any], cfg: MaterialConfig) -> dict[str, Any]:
    """The workspace tool's provider: kubernetes driver, model routing env, scratch volume."""
    meter_url = cfg.base_url.rstrip("/") + meter_path(record["employee_slug"])
    token_ref = "${" + METER_TOKEN_ENV + "}"
    return {
        "name": f"{policies.PROVIDER_NAME}-{record['workspace_scope']}",
        "version": "v1",
        "description": f"Developer workspace of {record['employee']} on {record['project_slug']}",
        "options": {
            "KUBERNETES_NAMESPACE": {"default": record["namespace"]},
            "KUBERNETES_CONTEXT": {"default": f"{policies.PROVIDER_NAME}-{record['workspace_scope']}"},
            "INACTIVITY_TIMEOUT": {"default": f"{int(policies.IDLE_TIMEOUT_SECONDS // 60)}m"},
        },
        "agent": {"driver": "kubernetes", "timeout": f"{int(policies.TOOL_TIMEOUT_SECONDS)}s"},
        "env": {
            # One CLI takes a base URL plus an auth token, another a base URL plus an API key.
            # Claude appends /v1/messages to its root; OpenAI clients append /responses to theirs.
            "ANTHROPIC_BASE_URL": meter_url.removesuffix("/v1"),
            "ANTHROPIC_AUTH_TOKEN": token_ref,
            "OPENAI_BASE_URL": meter_url,
            "OPENAI_API_KEY": token_ref,
            "SQUADOPS_METER_URL": meter_url,
            "SQUADOPS_METER_TOKEN_REF": f"env:{METER_TOKEN_ENV}",
        },
        "volumes": [
            {"name": "home", "mount_path": "/home/dev", "retain": True},
            {
                "name": "scratch",
                "mount_path": "/scratch",
                "size": policies.SCRATCH_SIZE,
                "storage_class": policies.SCRATCH_CLASS,
                "access_mode": policies.SCRATCH_ACCESS_MODE,
            },
        ],
    }


def kubeconfig(record: dict[str, Any], cfg: MaterialConfig) -> dict[str, Any]:
    """A kubeconfig whose user logs in by OIDC exec with the kube-access client."""
    name = f"{policies.PROVIDER_NAME}-{record['workspace_scope']}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": cfg.kube_api_server}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": record["namespace"]}}],
        "current-context": name,
        "users": [
            {
                "name": name,
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "kubectl",
                        "args": [
                            "oidc-login",
                            "get-token",
                            f"--oidc-issuer-url={cfg.kube_oidc_issuer}",
                            f"--oidc-client-id={cfg.kube_oidc_client_id}",
                        ],
                        "interactiveMode": "IfAvailable",
                    }
                },
            }
        ],
    }
