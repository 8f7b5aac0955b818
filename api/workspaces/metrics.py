"""The usage meter's counts as Prometheus metrics on the service's ``/metrics``.

Sample names are exactly ``material.metric_names`` (``<prefix>_tokens``, ``<prefix>_requests``),
the names ``usage_observability`` hands clients; no ``_total`` suffix is added, so a client
queries the name it was given.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from domain.workspaces.material import MaterialConfig, metric_names
from domain.workspaces.metering import UsageMeter


class UsageCollector(Collector):
    def __init__(self, meter: UsageMeter, cfg: MaterialConfig) -> None:
        self.meter = meter
        self.names = metric_names(cfg)

    def _families(self) -> tuple[Metric, Metric]:
        tokens = Metric(self.names["tokens"], "Model tokens metered per employee.", "counter")
        requests = Metric(self.names["requests"], "Model requests metered per employee.", "counter")
        return tokens, requests

    def describe(self) -> Iterator[Metric]:
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        tokens, requests = self._families()
        token_counts, request_counts = self.meter.snapshot()
        for employee in sorted(request_counts):
            tokens.add_sample(self.names["tokens"], {"employee": employee}, float(token_counts.get(employee, 0)))
            requests.add_sample(self.names["requests"], {"employee": employee}, float(request_counts[employee]))
        yield tokens
        yield requests
