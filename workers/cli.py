"""The ``squadops`` command line: serve, workers, run commands, demo seed, operator tools."""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import httpx
import msgspec

from workers.cli_client import OPERATOR, SUPER_ADMIN, client
from workers.portal_cli import add_parsers as add_portal_parsers
from workers.projections_cli import add_parser as add_projections_parser
from workers.settings import Settings, SettingsError, check_exposure, load_settings

if TYPE_CHECKING:
    from domain.projects.project import ProjectCommands

DEMO_PROJECT = {
    "project_key": "demo",
    "display_name": "Demo project",
    "description": "A demo project with three delivery lanes and two actor suits.",
    "template_id": "delivery-core",
    "proposal_id": "proposal-demo",
    "owner_subject_keys": ["operator@squadops.local"],
    "repository_bindings": [
        {"repository_key": "assembly", "vcs_repo_slug": "demo/assembly", "repository_type": "assembly"},
        {"repository_key": "backend", "vcs_repo_slug": "demo/api"},
        {"repository_key": "frontend", "vcs_repo_slug": "demo/web"},
        {"repository_key": "contract", "vcs_repo_slug": "demo/contract"},
    ],
    "project_assembly": {
        "agentSquadSuitTesterRoles": [
            {"suit_id": "admin", "title": "Administrator"},
            {"suit_id": "guest", "title": "Guest visitor"},
        ],
        "sourceRefRepos": [{"slug": "demo/design-system", "branch": "main"}],
    },
}


def seed_demo(projects: ProjectCommands, tenant: str = "default") -> bool:
    """Creates the demo project unless it exists; answers whether it created it."""
    if projects.get_project(tenant, "demo") is not None:
        return False
    projects.create_project(tenant=tenant, request=DEMO_PROJECT, created_by=OPERATOR)
    return True


# -- serve / worker ----------------------------------------------------------------------------


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    from api.app import create_app
    from api.server import serve
    from workers.bootstrap import SERVE_WORKERS, build
    from workers.embedded_defaults import with_embedded_defaults
    from workers.heap import collect_young_less_often, freeze_startup_heap

    if args.host:
        settings = settings.replace(host=args.host)
    if args.port:
        settings = settings.replace(port=args.port)
    try:
        check_exposure(settings)  # again: --host may have moved it off loopback
    except SettingsError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    pages_socket = None
    if args.open is not None:
        refusal = dev_identity_refusal(settings)
        if refusal:
            print(f"configuration error: {refusal}", file=sys.stderr)
            return 2
        try:
            pages_socket = loopback_socket(args.open)
        except OSError as exc:
            print(f"configuration error: --open cannot listen on 127.0.0.1:{args.open}: {exc}", file=sys.stderr)
            return 2
    settings = with_embedded_defaults(settings)
    container = build(settings)
    if args.demo or settings.demo:
        seed_demo(container.projects)
    workers = SERVE_WORKERS if args.workers == "all" else tuple(w for w in args.workers.split(",") if w and w != "none")
    app = create_app(container, workers=workers)
    freeze_startup_heap()  # full collections walk only what serving makes (workers/heap.py)
    collect_young_less_often()
    pages = start_dev_identity(settings, pages_socket) if pages_socket is not None else None
    print(f"squadops listening on http://{settings.host}:{settings.port} ({container.store.dialect})", file=sys.stderr)
    # SIGTERM: live streams are told to reconnect, requests in flight finish, workers commit.
    serve(
        app, host=settings.host, port=settings.port, drain=app.state["hub"].drain,
        header_read_timeout=settings.header_read_timeout_seconds,
    )
    if pages is not None:
        pages.should_exit = True
    container.close()
    return 0


def dev_identity_refusal(settings: Settings) -> str:
    """Why the dev identity proxy may not run with these settings ("" when it may)."""
    from workers.embedded_defaults import is_production
    from workers.open_proxy import is_loopback

    if is_production(settings):
        return "--open (the dev identity proxy) never runs with SQUADOPS_ENV=production"
    if not is_loopback(settings.host):
        return f"--open (the dev identity proxy) runs only on a loopback address, not {settings.host!r}"
    return ""


def loopback_socket(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:``port`` (taken now, so a busy port fails at once)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    return sock


def start_dev_identity(settings: Settings, sock: socket.socket) -> Any:
    """``squadops open``'s proxy in a thread of this process: the pages, as the dev operator."""
    import uvicorn

    from workers.open_proxy import EdgeProxy, dev_claims

    host = "[::1]" if settings.host in ("::1", "[::1]") else settings.host
    proxy = EdgeProxy(f"http://{host}:{settings.port}", dev_claims(OPERATOR, SUPER_ADMIN, settings.edge_jwt_key))
    server = uvicorn.Server(uvicorn.Config(proxy, log_level="warning", timeout_graceful_shutdown=2))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="dev-identity", daemon=True).start()
    port = sock.getsockname()[1]
    print(f"squadops pages: http://127.0.0.1:{port}/ (dev identity {OPERATOR}, {SUPER_ADMIN})", file=sys.stderr)
    return server


def cmd_worker(settings: Settings, args: argparse.Namespace) -> int:
    from workers.bootstrap import OPTIONAL_WORKERS, WORKERS, build
    from workers.heap import collect_young_less_often, freeze_startup_heap

    known = WORKERS + OPTIONAL_WORKERS
    if args.name not in known:
        print(f"unknown worker {args.name!r}; workers: {', '.join(known)}", file=sys.stderr)
        return 2
    from workers.embedded_defaults import with_embedded_defaults

    settings = with_embedded_defaults(settings)
    if args.name == "watcher":
        from workers.assign import watcher_settings

        try:
            settings = watcher_settings(settings, args)
        except (ValueError, OSError) as exc:
            print(f"configuration error: {exc}", file=sys.stderr)
            return 2
    container = build(settings)
    if args.name == "watcher" and args.once and container.watcher is not None:
        from workers.watcher import ObservationFailed, views_json

        try:
            print(views_json(container.watcher.watch_once()))
            return 0
        except ObservationFailed as exc:
            print(f"observation failed: {exc}", file=sys.stderr)
            return 1
        finally:
            container.close()
    container.start((args.name,))
    freeze_startup_heap()  # full collections walk only what the worker makes (workers/heap.py)
    collect_young_less_often()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"squadops worker {args.name} running ({container.store.dialect})", file=sys.stderr)
    failed = False
    while not stop.wait(0.5):
        # Strict observation fails loudly: a watcher that stopped on a failure ends the worker.
        if container.watcher is not None and container.watcher.failure is not None:
            print(f"observation failed: {container.watcher.failure}", file=sys.stderr)
            failed = True
            break
    container.close()
    return 1 if failed else 0


def cmd_assign_processes(settings: Settings, args: argparse.Namespace) -> int:
    from workers.assign import run_assign_processes

    return run_assign_processes(settings, args)


def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from workers.bootstrap import build

    container = build(settings)
    try:
        created = seed_demo(container.projects)
    finally:
        container.close()
    print("demo project created" if created else "demo project already exists")
    return 0


# -- run commands (HTTP clients of a running service) -------------------------------------------


def _answer(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise SystemExit(f"error {response.status_code}: {response.text}")
    return response.json()


def cmd_runs(settings: Settings, args: argparse.Namespace) -> int:
    with client(settings) as http:
        if args.action == "launch":
            body = {"template_id": args.template, "project_slug": args.project}
            if args.work_scope:
                body["work_scope"] = args.work_scope
            run = _answer(http.post("/v1/admin/studio/runs", json=body))
            print(run["run_id"])
            if args.execute:
                _answer(http.post(f"/v1/admin/studio/runs/{run['run_id']}/execute"))
            return 0
        if args.action == "execute":
            print(msgspec.json.encode(_answer(http.post(f"/v1/admin/studio/runs/{args.run_id}/execute"))).decode())
            return 0
        if args.action == "show":
            run = _answer(http.get(f"/v1/admin/studio/runs/{args.run_id}"))
            print(msgspec.json.format(msgspec.json.encode(run), indent=2).decode())
            return 0
        if args.action == "watch":
            return watch(http, args.run_id, args.interval)
    return 2


def watch(http: httpx.Client, run_id: str, interval: float) -> int:
    """Shows the run as a table, redrawn whenever it changes (live channel), until the run ends."""
    from workers.live_watch import watch_live
    from workers.watch_view import WatchView

    with WatchView() as view:
        return watch_live(http, run_id, view.show, retry_seconds=interval)


def cmd_open(settings: Settings, args: argparse.Namespace) -> int:
    """Serves the local dev proxy (loopback only) and opens the pages in a browser."""
    import uvicorn

    from workers.open_proxy import EdgeProxy, dev_claims

    upstream = args.upstream or settings.base_url
    proxy = EdgeProxy(upstream, dev_claims(args.email, args.groups, settings.edge_jwt_key))
    address = f"http://127.0.0.1:{args.port}{args.path}"
    print(f"squadops open: {address} -> {upstream} as {args.email} ({args.groups})", file=sys.stderr)
    if not args.no_browser:
        import webbrowser

        threading.Timer(0.8, webbrowser.open, (address,)).start()
    uvicorn.run(proxy, host="127.0.0.1", port=args.port, log_level="warning", timeout_graceful_shutdown=2)
    return 0


# -- entry point ----------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="squadops", description="Agent squad operations service.")
    sub = root.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="serve the HTTP API (with workers in-process by default)")
    serve.add_argument("--host", default="")
    serve.add_argument("--port", type=int, default=0)
    serve.add_argument("--demo", action="store_true", help="seed the demo project")
    serve.add_argument("--workers", default="all", help="'all', 'none', or a comma list")
    serve.add_argument(
        "--open", type=int, nargs="?", const=8080, default=None, metavar="PORT",
        help="also serve the pages with the dev identity on 127.0.0.1:PORT (default 8080, 0: any free port; dev, loopback only)",
    )
    serve.set_defaults(func=cmd_serve)

    worker = sub.add_parser("worker", help="run one worker in this process")
    worker.add_argument("name")
    worker.add_argument(
        "--controller-timeout-seconds",
        type=float,
        default=None,
        help="watcher: bound of each controller call (default 25 s, below the 30 s cadence)",
    )
    worker.add_argument("--project-assets", default="", help="watcher: explicit project-assets JSON file")
    worker.add_argument("--strict", action="store_true", help="watcher: fail loudly on transport/credential errors")
    worker.add_argument("--once", action="store_true", help="watcher: one pass, printed as JSON")
    worker.set_defaults(func=cmd_worker)

    assign = sub.add_parser("assign-processes", help="switch the agent processes of a run's sessions")
    assign.add_argument("run_id")
    assign.add_argument(
        "--assignment",
        action="append",
        required=True,
        metavar="TARGET:PROVIDER:MODEL:EFFORT:SPEED",
        help="target = agent id, role key (role_tester) or 'testers'; repeatable, later wins",
    )
    assign.add_argument("--tenant", default="default")
    assign.add_argument("--actor", default=OPERATOR)
    assign.add_argument("--reason", default="")
    assign.set_defaults(func=cmd_assign_processes)

    demo = sub.add_parser("demo", help="seed the demo project")
    demo.set_defaults(func=cmd_demo)

    runs = sub.add_parser("runs", help="launch, execute, show and watch runs")
    runs_sub = runs.add_subparsers(dest="action", required=True)
    launch = runs_sub.add_parser("launch")
    launch.add_argument("--project", default="demo")
    launch.add_argument("--template", default="delivery-core")
    launch.add_argument("--work-scope", default="")
    launch.add_argument("--execute", action="store_true", help="execute right after launch")
    for action in ("execute", "show", "watch"):
        one = runs_sub.add_parser(action)
        one.add_argument("run_id")
        if action == "watch":
            one.add_argument("--interval", type=float, default=1.0)
    runs.set_defaults(func=cmd_runs)
    opener = sub.add_parser("open", help="serve a local proxy adding dev edge claims, and open the pages")
    opener.add_argument("--port", type=int, default=8080, help="loopback port of the proxy (default 8080)")
    opener.add_argument("--upstream", default="", help="the service (default SQUADOPS_BASE_URL)")
    opener.add_argument("--email", default=OPERATOR, help="the dev email claim")
    opener.add_argument("--groups", default=SUPER_ADMIN, help="the dev group claims, comma-separated")
    opener.add_argument("--path", default="/", help="the page to open (/, /portal, /runs/<run_id>)")
    opener.add_argument("--no-browser", action="store_true", help="only serve the proxy")
    opener.set_defaults(func=cmd_open)
    add_projections_parser(sub)
    add_portal_parsers(sub)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    return int(args.func(settings, args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
