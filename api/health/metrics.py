"""``GET /metrics``: projections, the event log and HTTP latency, exposed with prometheus-client.

- ``squadops_projection_position{projector}``: the last log position each read model
  (or any other tracked projector) applied; ``squadops_projection_lag_events{projector}``:
  how many appended events it has not applied yet;
- ``squadops_events_appended_total``: events appended to the log (its last position);
- ``squadops_projector_failures{projector}``: consecutive failures of this process's runner;
- ``squadops_http_request_duration_seconds``: a histogram per method, route and status,
  fed by the request middleware through ``app.state.http_observer``.

Each app has its own ``CollectorRegistry`` (never the library's global one), so several
apps in one process keep separate figures. The log and projection figures are read from
the database when scraped, by a custom collector.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from litestar import MediaType, get
from litestar.handlers import HTTPRouteHandler
from litestar.response import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from projections.engine.store import DocStore

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class HttpMetrics(Collector):
    """Request latency histograms; ``observe`` is the middleware's ``http_observer``."""

    def __init__(self, registry: CollectorRegistry, buckets: Iterable[float] = BUCKETS) -> None:
        self.latency = Histogram(
            "squadops_http_request_duration_seconds",
            "HTTP request latency.",
            ("method", "route", "status"),
            buckets=tuple(buckets),
            registry=None,  # exposed through this collector, below
        )
        registry.register(self)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.latency.labels(method, route, str(status)).observe(seconds)

    def collect(self) -> Iterator[Metric]:
        # The histogram as before: its buckets, sum and count, without a ``_created`` series.
        for family in self.latency.collect():
            family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family

    def describe(self) -> Iterator[Metric]:
        return self.latency.describe()


class LogCollector(Collector):
    """The event log's head and each projector's position, lag and failures, read when scraped."""

    def __init__(
        self,
        store: DocStore,
        log_position: Callable[[], int],
        runner_failures: Callable[[], dict[str, int]] = dict,
    ) -> None:
        self.store = store
        self.log_position = log_position
        self.runner_failures = runner_failures

    def families(self) -> tuple[CounterMetricFamily, GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        return (
            CounterMetricFamily(
                "squadops_events_appended", "Events appended to the event log (its last position)."
            ),
            GaugeMetricFamily(
                "squadops_projection_position", "Last log position the projector applied.", labels=["projector"]
            ),
            GaugeMetricFamily(
                "squadops_projection_lag_events",
                "Appended events the projector has not applied yet.",
                labels=["projector"],
            ),
            GaugeMetricFamily(
                "squadops_projector_failures",
                "Consecutive failures of a projector in this process.",
                labels=["projector"],
            ),
        )

    def describe(self) -> Iterator[Metric]:
        return iter(self.families())  # claims the names without reading the database

    def collect(self) -> Iterator[Metric]:
        appended, position, lag, failures = self.families()
        head = self.log_position()
        appended.add_metric([], head)
        yield appended
        positions = sorted(self.store.positions().items())
        for name, applied in positions:
            position.add_metric([name], applied)
            lag.add_metric([name], max(head - applied, 0))
        yield position
        yield lag
        counts = self.runner_failures()
        if counts:  # only a process that runs projectors has any
            for name, count in sorted(counts.items()):
                failures.add_metric([name], count)
            yield failures


def metrics_registry(
    store: DocStore, log_position: Callable[[], int], runner_failures: Callable[[], dict[str, int]] = dict
) -> tuple[CollectorRegistry, HttpMetrics]:
    """One app's registry: the log collector, then the HTTP latency histograms."""
    registry = CollectorRegistry()
    registry.register(LogCollector(store, log_position, runner_failures))
    return registry, HttpMetrics(registry)


def metrics_handler(registry: CollectorRegistry) -> HTTPRouteHandler:
    @get("/metrics", sync_to_thread=True, summary="Prometheus metrics", include_in_schema=False)
    def metrics() -> Response[Any]:
        # Given as a header: as ``media_type``, Litestar would add a second ``charset``.
        return Response(
            generate_latest(registry), media_type=MediaType.TEXT, headers={"content-type": CONTENT_TYPE_LATEST}
        )

    return metrics
