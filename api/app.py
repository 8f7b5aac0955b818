"""The Litestar application factory: receives the built service parts and wires routes."""

from __future__ import annotations

from litestar import Litestar
from litestar.datastructures import State
from litestar.openapi import OpenAPIConfig

from api.auth import edge_jwt
from api.body import JsonRequest
from api.control import control_routers
from api.control_plane import control_plane_router
from api.control_plane_reads import ControlPlaneReads
from api.errors import EXCEPTION_HANDLERS
from api.health import healthz, openapi_json, readyz
from api.live import live_channel
from api.metrics import metrics_handler, metrics_registry
from api.middleware import request_context
from api.openapi import DocumentedJsonRenderPlugin
from api.positions import ReadModelLagging, ReadPositions, handle_lagging
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
        container.settle,
        container.ticker.wake,
        container.app.max_position,
    )
    read_positions = ReadPositions(
        container.store.positions,
        container.app.max_position,
        [p.name for p in container.runner.projectors],
        wait_seconds=settings.min_position_wait_seconds,
    )
    control_plane = ControlPlaneReads(
        container.store,
        TimeTravel(EventSelector(container.app.recorder)),
        container.app.max_position,
        cache_seconds=settings.feed_cache_seconds,
    )
    registry, http_metrics = metrics_registry(
        container.store,
        container.app.max_position,
        lambda: {name: s.failures for name, s in container.runner.stats.statuses.items()},
    )

    live = live_channel(container)
    edge = edge_jwt(settings)

    def on_startup() -> None:
        if workers:
            container.start(workers)

    def on_shutdown() -> None:
        container.stop()

    return Litestar(
        route_handlers=[
            healthz,
            readyz,
            openapi_json,
            studio_router(edge),
            project_factory_router(edge),
            live.router,
            control_plane_router(edge),
            metrics_handler(registry),
            *control_routers(edge),
        ],
        exception_handlers={**EXCEPTION_HANDLERS, ReadModelLagging: handle_lagging},
        request_class=JsonRequest,  # every body is decoded there (api/body.py)
        # The service's parts, read by handlers from state (see api/context.py).
        state=State(
            {
                "squadops": container.app,
                "reads": reads,
                "read_positions": read_positions,
                "health": container.health,
                "control_plane": control_plane,
                "hub": live.hub,
                "heartbeat": settings.live_heartbeat_seconds,
                "edge_jwt": edge,
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
            render_plugins=[DocumentedJsonRenderPlugin()],
        ),
        logging_config=None,
        debug=False,
    )
