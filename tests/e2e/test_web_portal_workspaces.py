"""Issues 10 and 11 in the browser: the portal page of a contributor shows the notification
sent to them, launches a developer workspace that the in-process controller makes ready,
and releases it; a viewer launching sees the graph's refusal. ``squadops serve`` runs in
its own process with every worker (as ``make run``), the controller on a free port."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, Page

from tests.conftest import ADMIN, settings_for
from tests.e2e.browser import CONTRAST_JS, opened
from tests.infra import free_port
from tests.live_helpers import service_process

DEV = {"x-edge-claim-email": "dev@example.com"}
VIEWER = {"x-edge-claim-email": "look@example.com"}
PROJECT = {
    "project_key": "acme",
    "participants": [
        {"subject_key": "dev@example.com", "project_role": "contributor"},
        {"subject_key": "look@example.com", "project_role": "viewer"},
    ],
    "repository_bindings": [{"repository_key": "backend", "vcs_repo_slug": "acme/backend", "default_branch": "trunk"}],
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("portal")
    settings = settings_for(f"sqlite:///{root / 'squadops.db'}", data_dir=str(root / "data"))
    env = {
        "SQUADOPS_DATA_DIR": str(root / "data"),
        "SQUADOPS_CONTROLLER_PORT": str(free_port()),
        "SQUADOPS_CONTROLLER_INTERVAL_SECONDS": "0.2",
        "SQUADOPS_MODEL_PROXY_CLIENT_KEY": "proxy-client-key-0123456789abcdef-0123",
    }
    with service_process(settings, workers="all", **env) as service:
        created = httpx.post(f"{service.url}/v1/project-factory/projects", json=PROJECT, headers=ADMIN, timeout=30)
        assert created.status_code == 201, created.text
        yield service.url


def ready_portal(page: Page, url: str) -> None:
    page.goto(f"{url}/portal")
    page.wait_for_function("document.getElementById('portal').dataset.portal !== 'loading'")
    page.wait_for_function("document.getElementById('workspaces').dataset.state !== 'loading'")


def test_a_contributor_sees_notifications_and_launches_then_releases_a_workspace(served: str, browser: Browser) -> None:
    sent = httpx.post(f"{served}/v1/portal/notifications/test", headers=DEV, timeout=30)
    assert sent.status_code == 202, sent.text
    with opened(browser, extra_http_headers=DEV) as page:
        page.set_extra_http_headers({**DEV, "x-squadops-min-position": sent.headers["x-squadops-position"]})
        ready_portal(page, served)
        inbox = page.locator("#inbox")
        assert inbox.get_attribute("data-state") == "ready"
        assert "Test notification" in inbox.inner_text() and "unread" in inbox.inner_text()
        workspaces = page.locator("#workspaces")
        assert workspaces.get_attribute("data-state") == "ready"
        assert "No workspaces yet." in workspaces.inner_text()

        page.fill("#ws-project", "acme")
        page.click("#workspace-launch button[type=submit]")
        item = workspaces.locator(".portal-item")
        item.wait_for()
        scope = item.get_attribute("data-scope")
        assert scope and "acme" in (item.inner_text())
        assert "is pending" in page.inner_text("#workspaces-status")
        # The page reads the list again while the workspace moves: the controller makes it ready.
        page.wait_for_selector(f'#workspaces .portal-item[data-scope="{scope}"][data-status="ready"]', timeout=30_000)
        assert "dev_workspace provider add" in item.inner_text()
        page.click(f'#workspaces .portal-item[data-scope="{scope}"] button:has-text("Release")')
        page.wait_for_selector(f'#workspaces .portal-item[data-scope="{scope}"][data-status="suspended"]', timeout=30_000)
        assert page.evaluate(CONTRAST_JS) == []

    listed = httpx.get(f"{served}/v1/portal/launches/dev_workspace/workspaces", headers=DEV, timeout=30).json()
    assert [(w["workspace_scope"], w["status"]) for w in listed["items"]] == [(scope, "suspended")]


def test_a_viewer_is_refused_a_workspace_on_the_page(served: str, browser: Browser) -> None:
    with opened(browser, extra_http_headers=VIEWER) as page:
        ready_portal(page, served)
        page.fill("#ws-project", "acme")
        page.click("#workspace-launch button[type=submit]")
        page.wait_for_selector('#workspaces-status:has-text("403")')
        assert "dev_workspace_viewer_only" in page.inner_text("#workspaces-status")
        assert "No workspaces yet." in page.inner_text("#workspaces")
