"""The meter's counts as Prometheus metrics on the service's ``/metrics``.

Sample names are exactly ``material.metric_names`` (``<prefix>_tokens``, ``<prefix>_requests``),
the names ``usage_observability`` hands clients; no ``_total`` suffix is added, so a client
queries the name it was given. Labelled by ``employee`` as the spec says, plus ``run`` and
``agent`` (empty for a developer workspace's traffic).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from domain.workspaces.material import MaterialConfig, metric_names
from domain.workspaces.metering import UsageCounts


class UsageCollector(Collector):
    def __init__(self, counts: UsageCounts, cfg: MaterialConfig) -> None:
        self.counts = counts
        self.names = metric_names(cfg)

    def _families(self) -> tuple[Metric, Metric]:
        tokens = Metric(self.names["tokens"], "Model tokens metered per employee, run and agent.", "counter")
        requests = Metric(self.names["requests"], "Model requests metered per employee, run and agent.", "counter")
        return tokens, requests

    def describe(self) -> Iterator[Metric]:
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        tokens, requests = self._families()
        token_counts, request_counts = self.counts.snapshot()
        for key in sorted(request_counts):
            employee, run_id, agent_id = key
            labels = {"employee": employee, "run": run_id, "agent": agent_id}
            tokens.add_sample(self.names["tokens"], labels, float(token_counts.get(key, 0)))
            requests.add_sample(self.names["requests"], labels, float(request_counts[key]))
        yield tokens
        yield requests
