"""The Litestar application factory: receives the built service parts and wires routes."""

from __future__ import annotations

from litestar import Litestar
from litestar.datastructures import State
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin

from api.control import control_routers
from api.control_plane import control_plane_router
from api.control_plane_reads import ControlPlaneReads
from api.errors import EXCEPTION_HANDLERS
from api.health import healthz, openapi_json
from api.live import live_channel
from api.metrics import HttpMetrics, MetricsExporter, metrics_handler
from api.middleware import request_context
from api.project_factory import project_factory_router
from api.reads import Reads
from api.studio import studio_router
from projections.time_travel import EventSelector, TimeTravel
from workers.bootstrap import WORKERS, Container


def create_app(container: Container, *, workers: tuple[str, ...] = WORKERS) -> Litestar:
    """The HTTP app over ``container``; ``workers`` start and stop with it."""
    settings = container.settings
    reads = Reads(
        container.store,
        container.await_reads,
        container.ticker.wake,
        container.app.max_position,
    )
    control_plane = ControlPlaneReads(
        container.store,
        TimeTravel(EventSelector(container.app.recorder)),
        container.app.max_position,
        cache_seconds=settings.feed_cache_seconds,
    )
    http_metrics = HttpMetrics()
    exporter = MetricsExporter(
        container.store,
        container.app.max_position,
        http_metrics,
        lambda: {name: s.failures for name, s in container.runner.stats.statuses.items()},
    )

    live = live_channel(container)

    def on_startup() -> None:
        if workers:
            container.start(workers)

    def on_shutdown() -> None:
        container.stop()

    return Litestar(
        route_handlers=[
            healthz,
            openapi_json,
            studio_router(settings.edge_jwt_key),
            project_factory_router(settings.edge_jwt_key),
            live.router,
            control_plane_router(settings.edge_jwt_key),
            metrics_handler(exporter),
            *control_routers(settings.edge_jwt_key),
        ],
        exception_handlers=EXCEPTION_HANDLERS,
        # The service's parts, read by handlers from state (see api/context.py).
        state=State(
            {
                "squadops": container.app,
                "reads": reads,
                "control_plane": control_plane,
                "hub": live.hub,
                "heartbeat": settings.live_heartbeat_seconds,
                "jwt_key": settings.edge_jwt_key,
                "http_observer": http_metrics.observe,
                "database_wait_budget": settings.database_request_wait_seconds,
            }
        ),
        middleware=[request_context],
        on_startup=[on_startup, live.start],
        on_shutdown=[live.stop, on_shutdown],
        openapi_config=OpenAPIConfig(
            title="squadops",
            version="0.1.0",
            path="/schema",
            render_plugins=[JsonRenderPlugin()],
        ),
        logging_config=None,
        debug=False,
    )
