"""The portal and developer workspaces from a terminal (HTTP clients of a running service).

- ``squadops portal check OBJECT [--relation R]``: the permission graph's explain view for
  the caller (which path of tuples grants access);
- ``squadops portal inbox [--unread]`` / ``squadops portal test-notification``: the caller's
  notifications;
- ``squadops workspace launch|list|release|provider|kubeconfig``: the caller's developer
  workspaces (``dev_workspace`` launch provider);
- ``squadops workspace health``: the workspace controller's own ``/healthz``; exits 1 when
  the loop fields say it is unhealthy (HTTP 200 alone is not health).

``--as EMAIL`` and ``--groups PATHS`` act as another person (dev edge claims, as ``squadops
open`` adds them); the default is the operator.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import httpx
import msgspec

from workers.cli_client import OPERATOR, SUPER_ADMIN, client
from workers.settings import Settings

LAUNCHES = "/v1/portal/launches/dev_workspace"


def add_parsers(sub: Any) -> None:
    def who(p: argparse.ArgumentParser) -> None:
        p.add_argument("--as", dest="email", default=OPERATOR, help="the edge email claim (default: operator)")
        p.add_argument("--groups", default=SUPER_ADMIN, help="the edge group claims, comma-separated")

    portal = sub.add_parser("portal", help="the portal: permission explain view and notifications")
    actions = portal.add_subparsers(dest="action", required=True)
    check = actions.add_parser("check", help="explain the caller's access to OBJECT (project:<slug>)")
    check.add_argument("object")
    check.add_argument("--relation", default="viewer", help="viewer, contributor, maintainer or owner")
    inbox = actions.add_parser("inbox", help="the caller's notifications")
    inbox.add_argument("--unread", action="store_true")
    test = actions.add_parser("test-notification", help="send the caller a test notification")
    for p in (check, inbox, test):
        who(p)
    portal.set_defaults(func=run_portal)

    workspace = sub.add_parser("workspace", help="the caller's developer workspaces")
    ws_actions = workspace.add_subparsers(dest="action", required=True)
    launch = ws_actions.add_parser("launch", help="launch (or resume) a workspace for a project")
    launch.add_argument("--project", default="demo")
    launch.add_argument("--repository-key", default="")
    launch.add_argument("--branch", default="")
    listing = ws_actions.add_parser("list", help="the caller's own workspace records")
    release = ws_actions.add_parser("release", help="release a ready workspace")
    release.add_argument("workspace_scope")
    material = []
    for name in ("provider", "kubeconfig"):
        one = ws_actions.add_parser(name, help=f"the workspace's {name} material (YAML)")
        one.add_argument("workspace_scope")
        material.append(one)
    health = ws_actions.add_parser("health", help="the workspace controller's /healthz")
    health.add_argument("--url", default="", help="the controller (default SQUADOPS_CONTROLLER_HOST/PORT)")
    for p in (launch, listing, release, *material):
        who(p)
    workspace.set_defaults(func=run_workspace)


def _client(settings: Settings, args: argparse.Namespace) -> httpx.Client:
    return client(settings, args.email, args.groups)


def _answer(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        print(f"error {response.status_code}: {response.text}", file=sys.stderr)
        raise SystemExit(1)
    return response.json()


def _print(value: Any) -> None:
    print(msgspec.json.format(msgspec.json.encode(value), indent=2).decode())


def run_portal(settings: Settings, args: argparse.Namespace) -> int:
    with _client(settings, args) as http:
        if args.action == "check":
            answer = _answer(http.get("/v1/portal/permissions/check",
                                      params={"object": args.object, "relation": args.relation}))
            _print(answer)
            return 0 if answer["allowed"] else 3  # a scriptable "no" that is not an error
        if args.action == "inbox":
            _print(_answer(http.get("/v1/portal/notifications", params={"unread_only": str(args.unread).lower()})))
            return 0
        _print(_answer(http.post("/v1/portal/notifications/test")))
        return 0


def healthy(health: dict[str, Any]) -> bool:
    """The spec's reading of the controller's health: the loop fields, not the status code."""
    last = health.get("last_reconcile", {})
    return not health.get("last_reconcile_error") and not any(
        last.get(k, 0) for k in ("errored", "stale_provisioning", "workspace_cleanup_errors")
    )


def run_workspace(settings: Settings, args: argparse.Namespace) -> int:
    if args.action == "health":
        url = args.url or f"http://{settings.controller_host}:{settings.controller_port}"
        try:
            answer = httpx.get(f"{url.rstrip('/')}/healthz", timeout=10)
        except httpx.HTTPError as exc:
            print(f"controller unreachable at {url}: {exc}", file=sys.stderr)
            return 1
        health = _answer(answer)
        _print(health)
        return 0 if healthy(health) else 1
    with _client(settings, args) as http:
        if args.action == "launch":
            params = {"project_slug": args.project}
            params.update({k: v for k, v in (("repository_key", args.repository_key), ("branch", args.branch)) if v})
            _print(_answer(http.get(LAUNCHES, params=params)))
        elif args.action == "list":
            _print(_answer(http.get(f"{LAUNCHES}/workspaces")))
        elif args.action == "release":
            _print(_answer(http.delete(f"{LAUNCHES}/workspaces/{args.workspace_scope}")))
        else:
            path = "provider.yaml" if args.action == "provider" else "kubeconfig"
            response = http.get(f"{LAUNCHES}/{path}", params={"workspace_scope": args.workspace_scope})
            if response.status_code >= 400:
                _answer(response)
            print(response.text, end="")
    return 0
