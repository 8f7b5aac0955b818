"""``GET /metrics`` read back the way Prometheus reads it: families, labels and values."""

from __future__ import annotations

import math

from litestar.testing import TestClient
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from api.app import create_app
from api.health.metrics import BUCKETS
from tests.conftest import ADMIN, settings_for
from workers.bootstrap import build, read_projectors

HISTOGRAM = "squadops_http_request_duration_seconds"
RUNS = "/v1/admin/studio/runs"


def scrape(http: TestClient) -> dict[str, tuple[str, list[Sample]]]:
    answer = http.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == CONTENT_TYPE_LATEST
    return {f.name: (f.type, f.samples) for f in text_string_to_metric_families(answer.text)}


def by_projector(samples: list[Sample]) -> dict[str, float]:
    return {s.labels["projector"]: s.value for s in samples}


def latency(samples: list[Sample], **labels: str) -> dict[str, list[Sample]]:
    """The histogram's samples of one series, by suffix (``_bucket``, ``_sum``, ``_count``)."""
    out: dict[str, list[Sample]] = {}
    for s in samples:
        if {k: v for k, v in s.labels.items() if k != "le"} == labels:
            out.setdefault(s.name.removeprefix(HISTOGRAM), []).append(s)
    return out


def test_metrics_parse_into_the_same_families_with_labels_and_values(database_url: str) -> None:
    container = build(settings_for(database_url))
    try:
        # Two apps in one process: each has its own registry, so neither sees the other's requests.
        with TestClient(create_app(container, workers=())) as http, TestClient(
            create_app(container, workers=())
        ) as other:
            http.headers.update(ADMIN)
            assert http.post("/v1/project-factory/projects", json={"project_key": "acme"}).status_code == 201
            while container.runner.run_once():
                pass
            projected = container.event_store.max_position()
            launched = http.post(RUNS, json={"template_id": "delivery-core", "project_slug": "acme"})
            assert launched.status_code == 201  # appended, but no projector runs in these apps
            assert http.get(f"{RUNS}/no-such-run").status_code == 404
            for _ in range(3):
                assert http.get("/healthz").status_code == 200
            assert other.get("/healthz").status_code == 200
            head = container.event_store.max_position()
            assert head > projected

            families = scrape(http)
            theirs = scrape(other)
    finally:
        container.close()

    assert set(families) == {
        "squadops_events_appended",
        "squadops_projection_position",
        "squadops_projection_lag_events",
        "squadops_projector_failures",
        HISTOGRAM,
        # The developer workspace usage meter (no employee has used it yet: no samples).
        "squadops_dev_workspace_model_tokens",
        "squadops_dev_workspace_model_requests",
    }
    assert families["squadops_dev_workspace_model_tokens"] == ("counter", [])
    kind, samples = families["squadops_events_appended"]
    assert kind == "counter" and samples == [Sample("squadops_events_appended_total", {}, head)]
    names = [p.name for p in read_projectors()]
    kind, samples = families["squadops_projection_position"]
    assert kind == "gauge" and {n: by_projector(samples)[n] for n in names} == dict.fromkeys(names, projected)
    kind, samples = families["squadops_projection_lag_events"]
    assert kind == "gauge" and {n: by_projector(samples)[n] for n in names} == dict.fromkeys(names, head - projected)
    kind, samples = families["squadops_projector_failures"]
    assert kind == "gauge" and by_projector(samples) == dict.fromkeys([p.name for p in container.runner.projectors], 0)

    kind, samples = families[HISTOGRAM]
    assert kind == "histogram"
    healthz = latency(samples, method="GET", route="/healthz", status="200")
    buckets = healthz["_bucket"]
    assert [float(b.labels["le"]) for b in buckets] == [*BUCKETS, math.inf]
    counts = [b.value for b in buckets]
    assert counts == sorted(counts) and counts[-1] == 3  # cumulative, ending with every request
    assert [s.value for s in healthz["_count"]] == [3] and 0 < healthz["_sum"][0].value < 30
    assert [s.value for s in latency(samples, method="POST", route=RUNS, status="201")["_count"]] == [1]
    missing = latency(samples, method="GET", route=RUNS + "/{run_id}", status="404")
    assert [s.value for s in missing["_count"]] == [1]
    assert "/metrics" not in {s.labels["route"] for s in samples}  # a scrape is counted after it answers

    _, their_samples = theirs[HISTOGRAM]
    assert {(s.labels["route"], s.value) for s in their_samples if s.name.endswith("_count")} == {("/healthz", 1)}
