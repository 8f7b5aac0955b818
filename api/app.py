"""The Litestar application factory: receives the built service parts and wires routes."""

from __future__ import annotations

from litestar import Litestar
from litestar.datastructures import State
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin

from api.context import ServiceParts
from api.control_plane.controller import control_plane_router
from api.control_plane.reads import ControlPlaneReads
from api.control_plane.verbs import control_routers
from api.errors import EXCEPTION_HANDLERS
from api.health.controller import healthz, openapi_json, readyz
from api.health.metrics import metrics_handler, metrics_registry
from api.live.controller import live_channel
from api.middleware import request_context
from api.positions import ReadModelLagging, ReadPositions, handle_lagging
from api.project_factory.controller import project_factory_router
from api.studio.controller import studio_router
from api.studio.reads import Reads
from api.web.controller import web_router
from projections.studio.time_travel import EventSelector, TimeTravel


def create_app(container: ServiceParts, *, workers: tuple[str, ...] | None = None) -> Litestar:
    """The HTTP app over the composition root's parts; ``workers`` (default: the
    container's own default set) start and stop with it."""
    settings = container.settings
    reads = Reads(
        container.store,
        container.settle,
        container.ticker.wake,
        container.event_store.max_position,
    )
    read_positions = ReadPositions(
        container.store.positions,
        container.event_store.max_position,
        [p.name for p in container.runner.projectors],
        wait_seconds=settings.min_position_wait_seconds,
    )
    control_plane = ControlPlaneReads(
        container.store,
        TimeTravel(EventSelector(container.event_store.recorder)),
        container.event_store.max_position,
        cache_seconds=settings.feed_cache_seconds,
    )
    registry, http_metrics = metrics_registry(
        container.store,
        container.event_store.max_position,
        lambda: {name: s.failures for name, s in container.runner.stats.statuses.items()},
    )

    live = live_channel(container)

    def on_startup() -> None:
        if workers is None:
            container.start()
        elif workers:
            container.start(workers)

    def on_shutdown() -> None:
        container.stop()

    return Litestar(
        route_handlers=[
            healthz,
            readyz,
            openapi_json,
            studio_router(settings.edge_jwt_key),
            project_factory_router(settings.edge_jwt_key),
            live.router,
            control_plane_router(settings.edge_jwt_key),
            metrics_handler(registry),
            *control_routers(settings.edge_jwt_key),
            *web_router(settings.edge_jwt_key),
        ],
        exception_handlers={**EXCEPTION_HANDLERS, ReadModelLagging: handle_lagging},
        # The service's parts, read by handlers from state (see api/context.py).
        state=State(
            {
                "event_store": container.event_store,
                "studio": container.studio,
                "projects": container.projects,
                "reads": reads,
                "read_positions": read_positions,
                "health": container.health,
                "control_plane": control_plane,
                "hub": live.hub,
                "heartbeat": settings.live_heartbeat_seconds,
                "jwt_key": settings.edge_jwt_key,
                "http_observer": http_metrics.observe,
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
