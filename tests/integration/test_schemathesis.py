"""Generated requests against the app's own /openapi.json: no input yields a 5xx."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings

from api.app import create_app
from tests.conftest import ADMIN, settings_for
from workers.bootstrap import build
from workers.cli import seed_demo


def check_response(case: Any, response: Any) -> None:
    where = f"{case.method} {case.formatted_path}"
    assert response.status_code < 500, f"{where}: {response.status_code} {response.text[:300]}"
    if response.status_code == 422:
        body = response.json()
        assert isinstance(body["detail"], list) and body["detail"], where
        for item in body["detail"]:
            assert {"loc", "msg", "type", "input", "ctx"} <= set(item), where
    elif response.status_code >= 400:
        assert set(response.json()) == {"detail", "code"}, f"{where}: {response.text[:300]}"


def test_no_generated_input_makes_the_service_fail(tmp_path: Path) -> None:
    container = build(settings_for(f"sqlite:///{tmp_path / 'squadops.db'}", data_dir=str(tmp_path)))
    try:
        seed_demo(container.projects)
        container.start(("projector",))  # commands answer once read models include them
        app = create_app(container, workers=())
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 10
        seen: dict[int, int] = {}
        for operation in operations:

            @given(case=operation.as_strategy())
            @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
            def exercise(case: Any) -> None:
                headers = {**ADMIN, **(case.headers or {})}
                response = case.call(headers=headers)
                seen[response.status_code] = seen.get(response.status_code, 0) + 1
                check_response(case, response)

            exercise()
        # Generated input reached past validation too, not only 422s.
        assert sum(seen.values()) >= 100 and set(seen) & {200, 201, 202, 404, 409}, seen
    finally:
        container.close()
