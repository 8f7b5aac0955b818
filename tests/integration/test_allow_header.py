"""OPTIONS names every method a path answers, also where two handlers share the path."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from litestar.testing import TestClient

from api.app import create_app
from tests.conftest import ADMIN, settings_for
from workers.bootstrap import build


@pytest.fixture
def client(sqlite_url: str) -> Iterator[TestClient]:
    container = build(settings_for(sqlite_url))
    with TestClient(create_app(container, workers=())) as http:
        yield http
    container.close()


def test_options_and_405_name_every_method_of_a_shared_path(client: TestClient) -> None:
    # GET (the portal's list) and POST (create) are two handlers on one path.
    for path, methods in (
        ("/v1/project-factory/projects", {"GET", "POST", "OPTIONS"}),
        ("/v1/identity/links/github", {"GET", "POST", "OPTIONS"}),
        ("/v1/admin/studio/runs", {"POST", "OPTIONS"}),
    ):
        options = client.options(path, headers=ADMIN)
        assert options.status_code == 204, options.text
        assert set(options.headers["allow"].split(", ")) == methods, (path, options.headers["allow"])
        refused = client.put(path, headers=ADMIN)
        assert refused.status_code == 405 and set(refused.headers["allow"].split(", ")) == methods
