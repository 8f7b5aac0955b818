"""``GET /metrics``: Prometheus text format for projections, the event log and HTTP latency.

- ``squadops_projection_position{projector}``: the last log position each read model
  (or any other tracked projector) applied; ``squadops_projection_lag_events{projector}``:
  how many appended events it has not applied yet;
- ``squadops_events_appended_total``: events appended to the log (its last position);
- ``squadops_projector_failures{projector}``: consecutive failures of this process's runner;
- ``squadops_http_request_duration_seconds``: a histogram per method, route and status,
  fed by the request middleware through ``app.state.http_observer``.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable
from typing import Any

from litestar import get
from litestar.handlers import HTTPRouteHandler
from litestar.response import Response

from projections.engine.store import DocStore

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class HttpMetrics:
    """Request latency histograms; ``observe`` is the middleware's ``http_observer``."""

    def __init__(self, buckets: Iterable[float] = BUCKETS) -> None:
        self.buckets = tuple(sorted(buckets))
        self._lock = threading.Lock()
        # (method, route, status) -> [count per bucket ..., +Inf count, sum]
        self._series: dict[tuple[str, str, str], list[float]] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, str(status))
        index = bisect.bisect_left(self.buckets, seconds)
        with self._lock:
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = [0.0] * (len(self.buckets) + 2)
            series[index] += 1
            series[-1] += seconds

    def lines(self) -> list[str]:
        name = "squadops_http_request_duration_seconds"
        out = [f"# HELP {name} HTTP request latency.", f"# TYPE {name} histogram"]
        with self._lock:
            snapshot = {k: list(v) for k, v in self._series.items()}
        for (method, route, status), series in sorted(snapshot.items()):
            labels = f'method="{label(method)}",route="{label(route)}",status="{status}"'
            cumulative = 0.0
            for bound, count in zip(self.buckets, series, strict=False):
                cumulative += count
                out.append(f'{name}_bucket{{{labels},le="{bound:g}"}} {cumulative:g}')
            total = cumulative + series[len(self.buckets)]
            out.append(f'{name}_bucket{{{labels},le="+Inf"}} {total:g}')
            out.append(f"{name}_sum{{{labels}}} {series[-1]:.6f}")
            out.append(f"{name}_count{{{labels}}} {total:g}")
        return out


class MetricsExporter:
    """Everything ``/metrics`` shows, read when scraped."""

    def __init__(
        self,
        store: DocStore,
        log_position: Callable[[], int],
        http: HttpMetrics,
        runner_failures: Callable[[], dict[str, int]] = dict,
    ) -> None:
        self.store = store
        self.log_position = log_position
        self.http = http
        self.runner_failures = runner_failures

    def render(self) -> str:
        head = self.log_position()
        positions = self.store.positions()
        out = [
            "# HELP squadops_events_appended_total Events appended to the event log (its last position).",
            "# TYPE squadops_events_appended_total counter",
            f"squadops_events_appended_total {head}",
            "# HELP squadops_projection_position Last log position the projector applied.",
            "# TYPE squadops_projection_position gauge",
        ]
        out += [f'squadops_projection_position{{projector="{label(n)}"}} {p}' for n, p in sorted(positions.items())]
        out += [
            "# HELP squadops_projection_lag_events Appended events the projector has not applied yet.",
            "# TYPE squadops_projection_lag_events gauge",
        ]
        out += [
            f'squadops_projection_lag_events{{projector="{label(n)}"}} {max(head - p, 0)}'
            for n, p in sorted(positions.items())
        ]
        failures = self.runner_failures()
        if failures:
            out += [
                "# HELP squadops_projector_failures Consecutive failures of a projector in this process.",
                "# TYPE squadops_projector_failures gauge",
            ]
            out += [f'squadops_projector_failures{{projector="{label(n)}"}} {c}' for n, c in sorted(failures.items())]
        out += self.http.lines()
        return "\n".join(out) + "\n"


def metrics_handler(exporter: MetricsExporter) -> HTTPRouteHandler:
    @get("/metrics", sync_to_thread=True, summary="Prometheus metrics", include_in_schema=False)
    def metrics() -> Response[Any]:
        return Response(exporter.render(), media_type=CONTENT_TYPE)

    return metrics
