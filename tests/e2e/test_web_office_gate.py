"""An operator's open office while the gate publishes its run: the delivery badge turns to the
pull request as the gate's steps arrive on the live channel (no other event of the run
happens, no reload), and the log dock shows the gate's lines under their own source."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser

from tests.conftest import ADMIN, settings_for
from tests.e2e.browser import opened
from tests.helpers import DEMO_LIKE
from tests.live_helpers import LiveServer, served

pytestmark = pytest.mark.timeout(120)

STUDIO = "/v1/admin/studio"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[LiveServer]:
    settings = settings_for(f"sqlite:///{tmp_path / 'squadops.db'}", live_heartbeat_seconds=1.0, data_dir=str(tmp_path))
    with served(settings) as server:
        yield server



def pr_page(pr_url: str) -> str:
    """The office links a pull request to its page on this service, not to the VCS host."""
    return f"/projects/acme/pulls/{pr_url.rstrip('/').rsplit('/', 1)[1]}"

def test_the_office_shows_the_gate_publishing_its_run_live(service: LiveServer, browser: Browser) -> None:
    http = httpx.Client(base_url=service.url, headers=ADMIN, timeout=30)
    try:
        assert http.post("/v1/project-factory/projects", json=DEMO_LIKE).status_code == 201
        run_id = http.post(f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": "acme"}).json()["run_id"]

        with opened(browser, extra_http_headers=ADMIN) as page:
            page.goto(f"{service.url}/runs/{run_id}")
            page.locator('#office[data-live="open"]').wait_for()
            page.evaluate("window.__samePage = 'yes'")
            delivery = page.locator('[data-badge="delivery"]')
            assert delivery.get_attribute("data-state") == "none"

            # The run is not executed: the gate's own steps are all that reaches the page.
            gate = http.post(f"/v1/admin/gate/threads/{run_id}/run", json={"agent_key": "backend"})
            assert gate.status_code == 200, gate.text
            pr_url = gate.json()["pr_url"]
            delivery.locator(f'a[href="{pr_page(pr_url)}"]').wait_for(timeout=20_000)
            assert delivery.get_attribute("data-state") == "delivered"

            # The dock: the gate's live events and its log lines, filterable by source.
            page.locator('#dock-list [data-source="live/gate"]').first.wait_for(timeout=20_000)
            page.wait_for_function(
                "() => document.querySelectorAll('#dock-list [data-source=\"gate\"]').length >= 11", timeout=20_000
            )
            page.select_option("#dock-source", "gate")
            shown = page.eval_on_selector_all(
                "#dock-list li:not([hidden])", "els => els.map(e => [e.dataset.source, e.dataset.level, e.textContent])"
            )
            assert len(shown) == 11 and {(s, level) for s, level, _ in shown} == {("gate", "info")}
            # The published pull request by its repository and head: no line names the VCS host (it goes nowhere).
            assert any(gate.json()["publication"]["head_sha"][:12] in text for _, _, text in shown)
            assert not [text for _, _, text in shown if pr_url in text or "vcs.squadops.local" in text]
            assert shown[0][2].endswith("Gate run 1 published.")  # newest first: the run's end
            assert page.evaluate("window.__samePage") == "yes"
    finally:
        http.close()
