"""Builders the composition root uses for the portal, workspaces and execution planes."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from api.workspaces.proxy import ROOT as MODEL_PROXY_ROOT
from api.workspaces.proxy import ModelProxy
from domain.portal.notifications import Inboxes, InboxWorkflow, NotificationWorkflow
from domain.projects.provisioning import ProjectProvisioning, SurfacePorts
from domain.projects.sources import SourcePolicy
from domain.shared.event_store import EventStore
from domain.shared.ids import run_key
from domain.shared.retry import backoff
from domain.workspaces.material import MaterialConfig
from domain.workspaces.metering import Meter
from domain.workspaces.model_routes import ModelRoutes, parse_prices, parse_upstream_models
from domain.workspaces.ports import VolumeClaim
from projections.engine.store import DocStore
from workers.adapters.builtin_model import BuiltinModel
from workers.adapters.error_tracking import NoDsn, SentryKeysDsn
from workers.adapters.git_sources import resolve_host
from workers.adapters.local_git import LocalGitVcs
from workers.adapters.model_upstream import ANTHROPIC, OPENAI, HttpUpstream
from workers.adapters.novu import NovuWorkflow
from workers.adapters.portal_surfaces import LocalBoard, LocalCatalog, LocalDesign
from workers.notify_relay import NotificationRelay
from workers.planes.local import LocalConfig, LocalPlane
from workers.planes.local.sandbox import SandboxConfig
from workers.planes.simulator import FaultRates, SimulatorPlane
from workers.settings import Settings, SettingsError, secret_value
from workers.workspace_controller import ControllerConfig

log = structlog.get_logger("squadops.bootstrap")
STARTUP_WAIT_SECONDS = 30.0


def workspace_root(settings: Settings) -> Path:
    return Path(settings.workspace_root) if settings.workspace_root else Path(settings.data_dir) / "workspaces"


def controller_config(settings: Settings) -> ControllerConfig:
    return ControllerConfig(
        controller_id=f"controller-{secrets.token_hex(4)}",
        interval_seconds=settings.controller_interval_seconds,
        enabled=settings.controller_reconcile_enabled,
        stale_seconds=settings.workspace_stale_seconds,
        idle_seconds=settings.workspace_idle_seconds,
        tool_timeout_seconds=settings.workspace_tool_timeout_seconds,
        scratch=VolumeClaim(
            name="scratch",
            size=settings.workspace_scratch_size,
            storage_class=settings.workspace_scratch_class,
            access_mode=settings.workspace_scratch_access_mode,
        ),
    )


def material_config(settings: Settings) -> MaterialConfig:
    return MaterialConfig(
        base_url=settings.base_url,
        kube_api_server=settings.kube_api_server,
        kube_oidc_issuer=settings.kube_oidc_issuer,
        kube_oidc_client_id=settings.kube_oidc_client_id,
        metric_prefix=settings.usage_metric_prefix,
        dashboard_uid=settings.usage_dashboard_uid,
        dashboard_base_url=settings.usage_dashboard_base_url,
    )


def build_notifications(
    settings: Settings, event_store: EventStore, store: DocStore, clock: Callable[[], str]
) -> dict[str, Any]:
    """The inbox, the workflow (Novu when ``SQUADOPS_NOVU_API_URL`` is set) and the relay."""
    inboxes = Inboxes(event_store, clock)
    workflow: NotificationWorkflow = InboxWorkflow(inboxes)
    if settings.novu_api_url:
        workflow = NovuWorkflow(settings.novu_api_url, settings.novu_api_key, settings.novu_workflow_id, inboxes)
    relay = NotificationRelay(store, inboxes, workflow, poll_seconds=max(settings.projection_poll_seconds, 0.2))
    config = {
        "provider": workflow.name,
        "application_identifier": settings.novu_application_identifier,
        "backend_url": settings.novu_api_url,
        "socket_url": settings.novu_socket_url,
    }
    return {
        "inboxes": inboxes, "notification_workflow": workflow, "notify_relay": relay,
        "notification_secret": notification_secret, "notification_config": config,
    }


def notification_secret() -> str:
    """The subscriber-hash secret, read from the environment (or the file
    ``SQUADOPS_NOVU_SECRET_KEY_FILE`` names) on every call, never cached, so a rotated
    secret applies to the next request. Both set, or the file unreadable: none (startup
    refused it already, ``workers.settings.load_settings``)."""
    try:
        return secret_value(os.environ, "novu_secret_key") or ""
    except SettingsError:
        return ""


def source_policy(settings: Settings) -> SourcePolicy:
    """The sources a binding may bring: never the service's own data, local ones under
    ``SQUADOPS_SOURCE_LOCAL_ROOTS`` (``Settings.source_roots``), network ones on public
    addresses unless ``SQUADOPS_SOURCE_PRIVATE_HOSTS``; host names resolved here."""
    return SourcePolicy(
        resolve=resolve_host,
        forbidden_roots=tuple(Path(p) for p in (settings.data_dir, settings.vcs_path) if p),
        local_roots=settings.source_roots,
        private_hosts=settings.source_private_hosts,
    )


def build_vcs(settings: Settings) -> LocalGitVcs:
    """The local git adapter (the factory's and the gate's repositories, and mirrors of the
    sources bindings bring, under the source policy)."""
    return LocalGitVcs(settings.vcs_path, settings.vcs_base_url, source_policy=source_policy(settings))


def build_provisioning(
    settings: Settings, event_store: EventStore, clock: Callable[[], str], vcs: Any = None
) -> ProjectProvisioning:
    """Project provisioning: local bare git repositories under the data directory (the same
    adapter, and so the same repositories, as the gate's), and a DSN from Sentry's
    client-keys API when ``SQUADOPS_ERROR_TRACKING_URL`` is set."""
    dsn: Any = NoDsn()
    if settings.error_tracking_url:
        dsn = SentryKeysDsn(settings.error_tracking_url, settings.error_tracking_token, settings.error_tracking_org)
    vcs = vcs if vcs is not None else build_vcs(settings)
    surfaces = SurfacePorts(board=LocalBoard(), design=LocalDesign(), catalog=LocalCatalog())
    return ProjectProvisioning(event_store, vcs=vcs, dsn=dsn, clock=clock, surfaces=surfaces)


def service_url(settings: Settings) -> str:
    """Where agents reach this service's ``/mcp``: ``SQUADOPS_PUBLIC_URL`` when set, else the
    address it listens on (a wildcard address is reached on loopback)."""
    if settings.public_url:
        return settings.public_url.rstrip("/")
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(settings.host, settings.host)
    return f"http://{f'[{host}]' if ':' in host else host}:{settings.port}"


def sandbox_config(settings: Settings) -> SandboxConfig:
    """The agent sandbox: what it hides (the data dir, the event store's folder, the checkout)
    and what it shows read-only (the pinned CLIs, ``SQUADOPS_AGENT_SANDBOX_READ_ONLY``)."""
    checkout = Path(__file__).resolve().parents[1]
    hidden = [Path(settings.data_dir), checkout]
    if not settings.is_postgres:
        hidden.append(settings.sqlite_path.resolve().parent)
    return SandboxConfig(
        kind=settings.agent_sandbox,
        hidden=tuple(hidden),
        read_only=tuple(Path(p) for p in settings.agent_sandbox_read_only.split(":") if p),
        clis=checkout / ".clis" / "node_modules",
    )


def build_plane(settings: Settings, event_store: EventStore, token_key: str) -> Any:
    """The execution plane C21 names: the simulator (default) or the local one."""
    if settings.execution_plane != "local":
        return SimulatorPlane(
            data_dir=Path(settings.data_dir), agent_domain=settings.agent_domain, vcs_root=settings.vcs_path,
            review_calls=settings.simulator_review_calls,
            faults=None if settings.simulator_faults else FaultRates.none(),
        )
    config = LocalConfig(
        data_dir=Path(settings.data_dir),
        vcs_root=settings.vcs_path,
        base_url=service_url(settings),
        agent_domain=settings.agent_domain,
        allowed_commands=tuple(c.strip() for c in settings.local_allowed_commands.split(",") if c.strip()),
        command=settings.local_agent_command,
        max_processes=settings.local_max_processes,
        first_tool_seconds=settings.local_first_tool_seconds,
        stop_grace_seconds=settings.local_stop_grace_seconds,
        # C22: the service's own model proxy unless an endpoint is set explicitly.
        model_proxy_base_url=settings.model_proxy_base_url or service_url(settings) + MODEL_PROXY_ROOT,
        model_proxy_token=settings.model_proxy_token,
        own_model_proxy=not settings.model_proxy_base_url,
        model_proxy_token_seconds=settings.model_proxy_token_seconds,
        token_key=token_key,
        provider_fallback=settings.local_provider_fallback,
        sandbox=sandbox_config(settings),
    )
    return LocalPlane(config, load_run=lambda tenant, run_id: event_store.get_or_none(run_key(tenant, run_id)))


def eventsourcing_env(settings: Settings) -> dict[str, str]:
    """The eventsourcing library's configuration for the chosen database."""
    env = {
        "ORIGINATOR_ID_TYPE": "text",
        "AGGREGATE_CACHE_MAXSIZE": "5000",
        "TRANSCODER_TOPIC": "workers.eventstore.transcoder:MsgspecTranscoder",
        "MAPPER_TOPIC": "workers.eventstore.mapping:LeanMapper",
    }
    if settings.is_postgres:
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(settings.database_url)
        env.update(
            PERSISTENCE_MODULE="workers.eventstore.recorder:BoundedPostgresFactory",
            POSTGRES_DBNAME=str(info.get("dbname", "squadops")),
            POSTGRES_HOST=str(info.get("host", "127.0.0.1")),
            POSTGRES_PORT=str(info.get("port", "5432")),
            POSTGRES_USER=str(info.get("user", "postgres")),
            POSTGRES_PASSWORD=str(info.get("password", "")),
            POSTGRES_POOL_SIZE=str(settings.event_store_pool_min),
            POSTGRES_MAX_OVERFLOW=str(settings.event_store_pool_max - settings.event_store_pool_min),
            POSTGRES_LOCK_TIMEOUT="10",
            POSTGRES_ENABLE_DB_FUNCTIONS="n",
            APPLICATION_RECORDER_TOPIC="workers.eventstore.recorder:TypedArrayApplicationRecorder",
            # C19: a connection killed while idle is never handed out; every wait is bounded.
            POSTGRES_PRE_PING="y",
            POSTGRES_POOL_WAIT_SECONDS=str(settings.database_wait_seconds),
            POSTGRES_STATEMENT_TIMEOUT_SECONDS=str(settings.database_statement_seconds),
        )
    else:
        path = settings.sqlite_path
        path.parent.mkdir(parents=True, exist_ok=True)
        env.update(
            PERSISTENCE_MODULE="workers.eventstore.sqlite:CheckpointedSQLiteFactory", SQLITE_DBNAME=str(path), SQLITE_LOCK_TIMEOUT="30")
    return env


def await_database(url: str, seconds: float = STARTUP_WAIT_SECONDS) -> None:
    """At start, waits (bounded) for PostgreSQL to accept connections: once running, the
    service answers 503 within 2 s while it cannot reach it, but it does not start without."""
    import psycopg

    deadline, failures = time.monotonic() + seconds, 0
    while True:
        try:
            psycopg.connect(url, connect_timeout=2).close()
            return
        except psycopg.OperationalError as exc:
            failures += 1
            if time.monotonic() + backoff(failures) > deadline:
                raise
            log.warning("waiting_for_database", error=repr(exc), failures=failures)
            time.sleep(backoff(failures))


def build_model_proxy(settings: Settings, event_store: EventStore, clock: Callable[[], str], token_key: str) -> ModelProxy:
    """The model proxy: each API's upstream (the configured root under the service's key, else
    the built-in model), the alias and price tables, and the meter recording to the event store."""
    builtin = BuiltinModel()

    def upstream(name: str, url: str, key: str) -> Any:
        return HttpUpstream(name, url, key) if url else builtin

    routes = ModelRoutes(
        parse_upstream_models(settings.model_proxy_upstream_models) if settings.model_proxy_upstream_models else None,
        parse_prices(settings.model_prices) if settings.model_prices else None,
    )
    return ModelProxy(
        meter=Meter(event_store, routes),
        anthropic=upstream(ANTHROPIC, settings.upstream_anthropic_url, settings.upstream_anthropic_key),
        openai=upstream(OPENAI, settings.upstream_openai_url, settings.upstream_openai_key),
        token_key=token_key,
        clock=clock,
    )
