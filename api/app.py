"""The Litestar application factory: receives the built service parts and wires routes."""

from __future__ import annotations

import functools
from pathlib import Path

from litestar import Litestar
from litestar.datastructures import State
from litestar.openapi import OpenAPIConfig

from api.allow import mend_options_allow
from api.auth import edge_jwt
from api.body import MAX_BODY_BYTES, JsonRequest
from api.browser import browser_rules
from api.context import ServiceParts
from api.errors import EXCEPTION_HANDLERS
from api.gate.controller import gate_router
from api.health.controller import healthz, openapi_json, readyz
from api.health.metrics import metrics_handler, metrics_registry
from api.jobs.controller import jobs_router
from api.jobs.reads import JobReads
from api.live.controller import live_channel
from api.mcp.controller import mcp_router
from api.middleware import request_context
from api.openapi import DocumentedJsonRenderPlugin
from api.portal.controller import portal_router
from api.portal.skills import skills
from api.project_factory.controller import project_factory_router
from api.rate_limit import command_rate_limit
from api.read_your_writes import ReadModelLagging, ReadYourWrites, handle_lagging
from api.studio.control import control_routers
from api.studio.feed import COPIED, FeedReads, feed_router
from api.studio.reads import StudioReads
from api.studio.runs import runs_router
from api.web.controller import web_router
from api.web.pages import template_config
from api.workspaces.controller import workspace_router
from api.workspaces.metrics import UsageCollector
from api.workspaces.proxy import meter_router, model_proxy_router
from api.workspaces.usage import usage_routers
from domain.portal.copilot import ComposedAnswerer
from domain.projects.sources import SourceCheck, SourceError, SourcePolicy
from projections.engine.copies import ReadCopies
from projections.portal.relations import memory_graph, store_graph
from projections.studio.time_travel import EventSelector, TimeTravel
from projections.workspaces.usage import record_ids as usage_record_ids


def _no_probe(url: str, default_branch: str) -> None:
    raise SourceError("this service's vcs cannot bring existing repositories")


def _no_addresses(host: str, port: int) -> list[str]:
    return []  # (a vcs without a source policy brings nothing: _no_probe)


def create_app(container: ServiceParts, *, workers: tuple[str, ...] | None = None) -> Litestar:
    """The HTTP app over the composition root's parts; ``workers`` (default: the
    container's own default set) start and stop with it."""
    settings = container.settings
    # Copies of stored feeds in memory, kept current by the projectors' announcements
    # (PostgreSQL LISTEN); a command answered here is a position they must have heard.
    copy_bytes = settings.read_copies_mib << 20
    copies = ReadCopies(COPIED, max_bytes=copy_bytes) if copy_bytes and container.store.dialect == "postgres" else None
    writes = ReadYourWrites(
        container.event_store,
        container.runner,
        container.health,
        wait_seconds=settings.min_position_wait_seconds,
        copies=copies,
    )
    # The permission graph every access decision asks: the built-in one over the
    # relationship read model unless the composition root hands another (an OpenFGA adapter).
    own_graph = container.permission_graph
    graph = own_graph or store_graph(container.store, copies)
    # The built-in graph over copies in memory: most access decisions need no thread.
    memory = (lambda at_least: memory_graph(copies, at_least)) if copies is not None and own_graph is None else None
    feeds = FeedReads(
        container.store,
        TimeTravel(EventSelector(container.event_store), functools.partial(usage_record_ids, container.store)),
        container.event_store.max_position,
        graph=graph,
        copies=copies,
    )
    registry, http_metrics = metrics_registry(
        container.store,
        container.event_store.max_position,
        lambda: {name: s.failures for name, s in container.runner.stats.statuses.items()},
    )

    registry.register(UsageCollector(container.model_proxy.meter.counts, container.workspace_material))
    live = live_channel(container)
    edge = edge_jwt(settings)

    def on_startup() -> None:
        if copies is not None:
            copies.follow(container.store.url)
        if workers is None:
            container.start()
        elif workers:
            container.start(workers)

    def on_shutdown() -> None:
        if copies is not None:
            copies.stop()
        container.stop()

    app = Litestar(
        route_handlers=[
            healthz,
            readyz,
            openapi_json,
            runs_router(edge),
            project_factory_router(edge),
            portal_router(edge),
            skills,
            live.router,
            feed_router(edge),
            metrics_handler(registry),
            *control_routers(edge),
            mcp_router(),
            jobs_router(edge, settings.api_keys),
            gate_router(edge),
            workspace_router(edge),
            meter_router(),
            model_proxy_router(),
            *usage_routers(edge),
            *web_router(edge),
        ],
        exception_handlers={**EXCEPTION_HANDLERS, ReadModelLagging: handle_lagging},
        template_config=template_config(),  # the pages (api/web/templates), autoescaped
        request_class=JsonRequest,  # every body is decoded there (api/body.py)
        request_max_body_size=MAX_BODY_BYTES,  # unless a handler names its own
        # The service's parts, read by handlers from state (see api/context.py).
        state=State(
            {
                "event_store": container.event_store,
                "studio": container.studio,
                "projects": container.projects,
                "studio_reads": StudioReads(container.store),
                "read_your_writes": writes,
                "wake_ticker": container.ticker.wake,
                "health": container.health,
                "feed_reads": feeds,
                "permission_graph": graph,
                "permission_memory": memory,
                "provisioning": container.provisioning,
                "inboxes": container.inboxes,
                "notification_workflow": container.notification_workflow,
                "notification_secret": container.notification_secret or (lambda: ""),
                "notification_config": container.notification_config,
                "skill_sources": container.skill_sources,
                "skill_deadline": settings.skills_deadline_seconds,
                "copilot_answerer": container.copilot_answerer or ComposedAnswerer(),
                "hub": live.hub,
                "heartbeat": settings.live_heartbeat_seconds,
                "edge_jwt": edge,
                "http_observer": http_metrics.observe,
                # The squad's MCP server: the composition root's command object and token key.
                "agent_tools": container.agent_tools,
                "mcp_token_key": container.mcp_token_key,
                "base_url": settings.base_url,
                "database_wait_budget": settings.database_request_wait_seconds,
                "jobs": container.jobs,
                "job_reads": JobReads(container.store),
                "gate": container.gate,
                "reviews": container.reviews,  # pull requests' commits and diffs (git)
                # What a binding's ``source_repository_url`` must pass (the policy, then git):
                # the vcs adapter's own policy, the one its clone and fetches pass again.
                "source_check": SourceCheck(
                    probe=getattr(container.gate.vcs, "probe", None) or _no_probe,
                    policy=getattr(container.gate.vcs, "source_policy", None) or SourcePolicy(
                        resolve=_no_addresses,
                        forbidden_roots=tuple(Path(p) for p in (settings.data_dir, settings.vcs_path) if p),
                    ),
                ),
                "store": container.store,
                # Developer workspaces (launch, material, the usage meter).
                "workspaces": container.workspaces,
                "workspace_material": container.workspace_material,
                "meter_tokens": container.meter_tokens,
                "model_proxy": container.model_proxy,
            }
        ),
        middleware=[
            request_context,
            # Browsers (api/browser.py), then the commands each principal may send (api/rate_limit.py).
            browser_rules(settings.base_url, settings.allowed_origins),
            command_rate_limit(settings.rate_limit_per_minute),
        ],
        on_startup=[on_startup, live.start],
        on_shutdown=[live.stop, on_shutdown],
        openapi_config=OpenAPIConfig(
            title="squadops",
            version="0.1.0",
            path="/schema",
            render_plugins=[DocumentedJsonRenderPlugin()],
        ),
        logging_config=None,
        debug=False,
    )
    return mend_options_allow(app)
