"""The composition root: builds the service's parts from settings and wires them."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from domain.gate.commands import GateCommands
from domain.gate.ports import ProposalRuns, Vcs
from domain.gate.scenarios import shipped_scenarios
from domain.jobs.commands import JobCommands, JobPolicy
from domain.jobs.ports import Connectors, PowerDevice
from domain.portal.graph import PermissionGraph
from domain.portal.notifications import Inboxes, NotificationWorkflow
from domain.projects.project import ProjectCommands
from domain.projects.provisioning import ProjectProvisioning
from domain.shared.clock import utc_now_iso
from domain.shared.event_store import EventStore
from domain.studio.commands import StudioCommands
from domain.studio.commands.recovery import recovery_policies
from domain.studio.commands.tool_calls import AgentToolCalls
from domain.studio.squad import ModelProxyAliases, TemplateCatalog, shipped_templates
from domain.workspaces.commands import WorkspaceCommands
from domain.workspaces.material import MaterialConfig
from domain.workspaces.metering import MeterTokens
from projections.engine.follower import LogFollower, NotificationSource, header
from projections.engine.health import HealthProbe
from projections.engine.heartbeat import heartbeats_for
from projections.engine.pg_store import PostgresDocStore
from projections.engine.runner import ProjectionRunner
from projections.engine.store import DocStore
from projections.gate.proposals import ProposalIndex
from projections.projects.pulls import StoredNumbers
from projections.studio.live_channel import Broker
from workers.adapters.git_review import GitReviews
from workers.adapters.local_cluster import LocalCluster
from workers.adapters.local_connectors import LocalDirectoryConnectors
from workers.adapters.model_proxy import ModelProxyAnswerer
from workers.adapters.skill_files import DirectorySkills
from workers.adapters.udp_power import UdpPowerDevice
from workers.builders import (
    await_database,
    build_model_proxy,
    build_notifications,
    build_plane,
    build_provisioning,
    build_vcs,
    controller_config,
    eventsourcing_env,
    material_config,
    workspace_root,
)
from workers.eventstore.sqlite import CheckpointedDocStore
from workers.fanout import LiveFanout
from workers.job_claims import JobClaims, PostgresJobClaims, SqliteJobClaims
from workers.jobs import JobRunner
from workers.live_broker import MemoryBroker
from workers.logging import configure_logging
from workers.notify_relay import NotificationRelay
from workers.read_models import read_projectors
from workers.settings import Settings
from workers.ticker import Ticker
from workers.watcher import EventStoreProjectAssets, Watcher, load_project_assets
from workers.workspace_controller import WorkspaceController
from workers.workspace_controller_http import HealthServer

log = structlog.get_logger("squadops")

WORKERS = ("projector", "ticker", "fanout", "jobs")
# Workers that run only when named (``squadops worker watcher`` or ``serve --workers``).
OPTIONAL_WORKERS = ("watcher", "notifier", "workspace-controller")
# What ``serve`` (``make run``) runs in-process with ``--workers all``: every worker but the
# watcher, which needs a plane's observation assets (``squadops worker watcher``).
SERVE_WORKERS = WORKERS + ("notifier", "workspace-controller")


def broker_factory(settings: Settings) -> Callable[[], Broker]:
    """One broker per caller's event loop: NATS when configured, else the shared in-process one."""
    if settings.nats_url:
        from workers.live_nats import NatsBroker

        return lambda: NatsBroker.from_settings(settings)
    shared = MemoryBroker(settings.live_memory_buffer_events)
    return lambda: shared


# The ticker's holdings follow the log (no LISTEN: they read once per pass) in pages of this size.
HOLDINGS_PAGE = 5000

# Workers that hold a PostgreSQL LISTEN connection of their own (outside the pools).
LISTENERS = ("projector", "fanout")


def connection_budget(settings: Settings, workers: tuple[str, ...] = WORKERS, *, api: bool = True) -> int:
    """The most PostgreSQL connections one process holds: its two pools at their maximum, one
    LISTEN connection per listening worker it runs, and one for the API's feed copies."""
    listeners = sum(1 for name in LISTENERS if name in workers) + int(api and settings.read_copies_mib > 0)
    return settings.event_store_pool_max + settings.read_model_pool_max + listeners


@dataclass
class Adapters:
    """The built-in adapters of the jobs' and the gate's ports."""

    connectors: Connectors
    power: PowerDevice
    vcs: Vcs
    proposals: ProposalRuns | None = None  # without read models, threads are named by run id

    @classmethod
    def from_settings(cls, settings: Settings, proposals: ProposalRuns | None = None) -> Adapters:
        return cls(
            connectors=LocalDirectoryConnectors(settings.connectors_path),
            power=UdpPowerDevice(settings.power_device_addr, timeout=settings.power_device_timeout_seconds),
            vcs=build_vcs(settings),
            proposals=proposals,
        )


@dataclass
class Services:
    """The event store and each area's commands over it: what the API and workers call."""

    event_store: EventStore
    projects: ProjectCommands
    studio: StudioCommands
    clock: Callable[[], str]
    jobs: JobCommands
    gate: GateCommands
    workspaces: WorkspaceCommands


def wire_services(
    event_store: EventStore | None = None,
    *,
    templates: TemplateCatalog | None = None,
    agent_domain: str = "agents.squadops.local",
    aliases: ModelProxyAliases | None = None,
    clock: Callable[[], str] = utc_now_iso,
    settings: Settings | None = None,
    adapters: Adapters | None = None,
    proxy_client_key: str = "",
) -> Services:
    """Each area's commands over one event store (in memory when none is given)."""
    settings = settings or Settings()
    adapters = adapters or Adapters.from_settings(settings)
    event_store = event_store if event_store is not None else EventStore()
    templates = templates or shipped_templates()
    projects = ProjectCommands(event_store, templates=templates, clock=clock, mirrors=adapters.vcs)
    studio = StudioCommands(
        event_store,
        projects,
        templates=templates,
        agent_domain=agent_domain,
        aliases=aliases or ModelProxyAliases(),
        clock=clock,
        log=LogFollower(
            NotificationSource(event_store, decode=header),
            page_size=HOLDINGS_PAGE,
            gap_timeout=settings.projection_gap_timeout_seconds,
            name="ticker",
        ),
    )
    jobs = JobCommands(
        event_store,
        connectors=adapters.connectors,
        power=adapters.power,
        clock=clock,
        policy=JobPolicy(
            max_attempts=settings.job_max_attempts,
            retry_base_seconds=settings.job_retry_base_seconds,
            retry_cap_seconds=settings.job_retry_cap_seconds,
            lease_seconds=settings.job_lease_seconds,
        ),
    )
    gate = GateCommands(
        event_store,
        projects,
        vcs=adapters.vcs,
        proposals=adapters.proposals,
        templates=templates,
        scenarios=shipped_scenarios(),
        app_identity=settings.gate_app_identity,
        default_repo=settings.gate_default_repo,
        clock=clock,
    )
    workspaces = WorkspaceCommands(event_store, clock=clock, proxy_client_key=lambda: proxy_client_key)
    return Services(
        event_store=event_store, projects=projects, studio=studio, clock=clock, jobs=jobs, gate=gate,
        workspaces=workspaces,
    )

def job_claims(settings: Settings, store: DocStore) -> JobClaims:
    """Claims beside the read models: PostgreSQL row locks, or the SQLite single writer."""
    if isinstance(store, PostgresDocStore):
        return PostgresJobClaims(store.pool)
    return SqliteJobClaims(settings.sqlite_path, autocheckpoint=False)


@dataclass
class Container(Services):
    """The service's parts: the event store and commands, the read models and the workers."""

    settings: Settings
    store: DocStore
    runner: ProjectionRunner
    ticker: Ticker
    plane: Any
    fanout: LiveFanout
    live_broker: Callable[[], Broker]
    health: HealthProbe | None = None
    started: list[str] = field(default_factory=list)
    _woken: list[Callable[[int], None]] = field(default_factory=list, init=False, repr=False)
    watcher: Watcher | None = None
    job_runner: JobRunner | None = None
    # The squad's MCP server (``/mcp``): its command object and the agent token key.
    agent_tools: AgentToolCalls | None = None
    mcp_token_key: str = ""
    # Project provisioning (VCS repositories, the error-reporting DSN) through its ports.
    provisioning: ProjectProvisioning | None = None
    reviews: GitReviews | None = None  # pull requests' commits and diffs, from the lanes' repositories
    # The permission graph access asks, when not the built-in one over the relationship
    # read model (an OpenFGA adapter).
    permission_graph: PermissionGraph | None = None
    # Notifications: the inbox commands, the workflow port and the outbox relay worker.
    inboxes: Inboxes | None = None
    notification_workflow: NotificationWorkflow | None = None
    notify_relay: NotificationRelay | None = None
    notification_secret: Callable[[], str] | None = None
    notification_config: dict[str, str] = field(default_factory=dict)
    copilot_answerer: Any = None  # ModelProxyAnswerer when SQUADOPS_MODEL_PROXY_URL is set
    skill_sources: list[Any] = field(default_factory=list)  # GET /v1/skills beyond the shipped files
    # Developer workspaces (material, meter tokens); the model proxy (workers.builders.build_model_proxy).
    workspace_material: MaterialConfig = field(default_factory=MaterialConfig)
    meter_tokens: MeterTokens = field(default_factory=lambda: MeterTokens(""))
    model_proxy: Any = None
    workspace_controller: WorkspaceController | None = None
    controller_http: HealthServer | None = None

    def start(self, workers: tuple[str, ...] = WORKERS) -> None:
        """Starts the named workers in this process (the embedded default runs all)."""
        if "projector" in workers:
            listen = self.settings.database_url if self.settings.is_postgres else ""
            channel = getattr(self.event_store.recorder, "channel_name", "")
            self.runner.start(listen_url=listen, channel=channel)
            self._wake_on_save(self.runner.wake)
            self.started.append("projector")
        if "ticker" in workers:
            self.ticker.start()
            self.started.append("ticker")
        if "fanout" in workers:
            self.fanout.start()
            self._wake_on_save(self.fanout.wake)
            self.started.append("fanout")
        for name, worker in (("watcher", self.watcher), ("jobs", self.job_runner), ("notifier", self.notify_relay)):
            if name in workers and worker is not None:
                worker.start()
                self.started.append(name)
        if "workspace-controller" in workers and self.workspace_controller is not None:
            self.workspace_controller.start()
            if self.controller_http is not None:
                self.controller_http.start()
            self.started.append("workspace-controller")

    def _wake_on_save(self, wake: Callable[[int], None]) -> None:
        """A log follower working in this process hears this process's saves at once (a
        command's thread pays for no worker that runs elsewhere)."""
        if wake not in self._woken:
            self._woken.append(wake)
            self.event_store.add_listener(wake)

    def await_reads(self, position: int | None = None, timeout: float = 2.0) -> bool:
        """Read-your-writes: waits until read models include this thread's last save."""
        target = self.event_store.last_saved_position() if position is None else position
        if target <= 0:
            return True
        return self.runner.wait_for(target, timeout, [p.name for p in self.runner.projectors])

    def stop(self) -> None:
        """Stops the workers: those that append first, then the projector and the fan-out
        once they caught up with what was appended (bounded), their positions committed."""
        if "jobs" in self.started and self.job_runner is not None:
            self.job_runner.stop()
        if "notifier" in self.started and self.notify_relay is not None:
            self.notify_relay.stop()
        if "workspace-controller" in self.started and self.workspace_controller is not None:
            if self.controller_http is not None:
                self.controller_http.stop()
            self.workspace_controller.stop()
        if "watcher" in self.started and self.watcher is not None:
            self.watcher.stop()
        if "ticker" in self.started:
            self.ticker.stop()
            self.close_plane()
        self._drain()
        if "fanout" in self.started:
            self.fanout.stop()
        if "projector" in self.started:
            self.runner.stop()
        self.started.clear()

    def close_plane(self) -> None:
        """A plane that runs processes (the local one) stops them."""
        close = getattr(self.plane, "close", None)
        if close is not None:
            close()

    def _drain(self) -> None:
        followers = [w for w in ("projector", "fanout") if w in self.started]
        if not followers:
            return
        try:
            head = self.event_store.max_position()
            if "projector" in followers:
                self.runner.wait_for(head, self.settings.shutdown_drain_seconds)
            deadline = time.monotonic() + self.settings.shutdown_drain_seconds
            while "fanout" in followers and self.fanout.position() < head and time.monotonic() < deadline:
                self.fanout.wake()
                time.sleep(0.02)  # the fan-out publishes in its own thread; its position is stored
        except Exception as exc:  # e.g. the database is away: stop now, resume from the positions
            log.warning("drain_interrupted", error=repr(exc))

    def close(self) -> None:
        self.stop()
        self.close_plane()
        if self.job_runner is not None:
            self.job_runner.claims.close()
        self.store.close()
        self.event_store.close()


def build(settings: Settings) -> Container:
    configure_logging(settings)
    if settings.is_postgres:
        await_database(settings.database_url)
    event_store = EventStore(eventsourcing_env(settings))
    if settings.is_postgres:
        store: DocStore = PostgresDocStore(
            settings.database_url,
            min_size=settings.read_model_pool_min,
            max_size=settings.read_model_pool_max,
            wait_seconds=settings.database_wait_seconds,
            statement_seconds=settings.database_statement_seconds,
        )
    else:
        store = CheckpointedDocStore(Path(settings.sqlite_path))  # SQLite: checkpoints off requests
    services = wire_services(
        event_store,
        agent_domain=settings.agent_domain,
        aliases=ModelProxyAliases(settings.model_proxy_aliases),
        settings=settings,
        adapters=Adapters.from_settings(settings, ProposalIndex(store)),
        proxy_client_key=settings.model_proxy_client_key,
    )
    heartbeats = heartbeats_for(store)
    runner = ProjectionRunner(
        NotificationSource(event_store), store, read_projectors(),
        page_size=settings.projection_page_size,
        cache_bytes=settings.projection_cache_mib << 20,
        poll_seconds=settings.projection_poll_seconds,
        gap_timeout=settings.projection_gap_timeout_seconds,
        heartbeats=heartbeats,
        heartbeat_seconds=settings.projector_heartbeat_seconds,
    )
    health = HealthProbe(
        store,
        NotificationSource(event_store),
        heartbeats,
        [p.name for p in runner.projectors],
        stale_seconds=settings.projector_stale_seconds,
        max_lag_seconds=settings.health_max_lag_seconds,
    )
    mcp_token_key = settings.mcp_token_key or secrets.token_hex(32)
    plane = build_plane(settings, event_store, mcp_token_key)
    services.gate.branches = branches = plane if hasattr(plane, "changes") else None  # the agents' branches
    services.studio.ticks.steps.taken = StoredNumbers(store)  # where a project's pull request numbers start
    ticker = Ticker(
        services.studio.ticks,
        store,
        plane,
        tick_seconds=settings.tick_seconds,
        capacity=settings.max_active_runs,
        policies=recovery_policies(credentials=plane) if settings.auto_recovery else (),
    )
    live_broker = broker_factory(settings)
    fanout = LiveFanout(
        NotificationSource(event_store),
        store,
        live_broker,
        subject_prefix=settings.live_subject_prefix,
        page_size=settings.live_fanout_page_size,
        poll_seconds=settings.projection_poll_seconds,
        gap_timeout=settings.live_gap_timeout_seconds,
        listen_url=settings.database_url if settings.is_postgres else "",
        channel=getattr(event_store.recorder, "channel_name", ""),
    )
    watcher = Watcher(
        services.studio,
        store,
        EventStoreProjectAssets(services.projects),
        timeout_seconds=settings.controller_timeout_seconds,
        interval_seconds=settings.watch_interval_seconds,
        strict=settings.strict_observation,
        explicit_assets=load_project_assets(settings.project_assets_path) if settings.project_assets_path else None,
    )
    job_runner = JobRunner(
        services.jobs,
        store,
        job_claims(settings, store),
        poll_seconds=settings.job_poll_seconds,
        lease_seconds=settings.job_lease_seconds,
    )
    meter_tokens = MeterTokens(settings.model_proxy_client_key)
    controller = WorkspaceController(
        services.workspaces, store, LocalCluster(workspace_root(settings)), meter_tokens,
        clock=services.clock, config=controller_config(settings),
    )
    return Container(
        event_store=event_store, projects=services.projects, studio=services.studio, clock=services.clock,
        jobs=services.jobs, gate=services.gate, settings=settings, store=store, runner=runner, ticker=ticker, plane=plane,
        fanout=fanout, live_broker=live_broker, watcher=watcher, health=health, job_runner=job_runner,
        agent_tools=AgentToolCalls(services.studio.runs, branches=branches), mcp_token_key=mcp_token_key,
        provisioning=build_provisioning(settings, event_store, services.clock, services.gate.vcs),
        reviews=GitReviews(plane.worktrees) if hasattr(plane, "worktrees") else None,
        **build_notifications(settings, event_store, store, services.clock),
        copilot_answerer=ModelProxyAnswerer(settings.model_proxy_url, settings.model_proxy_token, settings.copilot_model)
        if settings.model_proxy_url else None,
        skill_sources=[DirectorySkills(Path(settings.skills_path))] if settings.skills_path else [],
        workspaces=services.workspaces, workspace_material=material_config(settings),
        meter_tokens=meter_tokens, workspace_controller=controller,
        model_proxy=build_model_proxy(settings, event_store, services.clock, mcp_token_key),
        controller_http=HealthServer(controller.health, settings.controller_host, settings.controller_port),
    )
