"""An operator in the browser: the board lists a run, its office comes alive, an agent is
paused from the page, time travel scrubs back and returns to live, and the live channel
resumes after a dropped connection without gap or duplicate.

Headless Chromium (Debian's package) under Playwright, against the service on a real
server behind ``squadops open``'s proxy: the page carries no identity of its own, exactly
as behind the edge.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page

from tests.conftest import ADMIN, settings_for
from tests.e2e.browser import ProxyServer, opened
from tests.helpers import DEMO_LIKE, eventually
from tests.live_helpers import LiveServer, expected_events, served

pytestmark = pytest.mark.timeout(120)

STUDIO = "/v1/admin/studio"
PLANE = "/control-plane/studio"
SESSION_VERBS = 15

# Counts agent elements taken out of the office: an update must never rebuild it.
WATCH_REMOVALS = """
() => {
  window.__removedAgents = 0;
  new MutationObserver((records) => {
    for (const record of records) for (const node of record.removedNodes) {
      if (node.nodeType === 1 && (node.matches('.slot, [data-agent-id]') || node.querySelector('[data-agent-id]'))) {
        window.__removedAgents += 1;
      }
    }
  }).observe(document.getElementById('floor'), { childList: true, subtree: true });
  document.querySelector('[data-agent-id="planner"]').__probe = 'kept';
  window.__samePage = 'yes';
}
"""


@pytest.fixture
def service(tmp_path: Path) -> Iterator[LiveServer]:
    settings = settings_for(f"sqlite:///{tmp_path / 'squadops.db'}", tick_seconds=0.3, live_heartbeat_seconds=1.0)
    with served(settings) as server:
        yield server


def states(page: Page) -> dict[str, str]:
    """agent id -> data-pixel-state of every agent shown (not hidden) in the office."""
    return page.eval_on_selector_all(
        ".slot:not([hidden]) > [data-agent-id]",
        "els => Object.fromEntries(els.map(e => [e.dataset.agentId, e.dataset.pixelState]))",
    )


def session_state(http: httpx.Client, run_id: str) -> dict[str, dict[str, Any]]:
    answer = http.get(f"{STUDIO}/runs/{run_id}/session-state")
    assert answer.status_code == 200, answer.text
    return {s["agent_id"]: s for s in answer.json()["sessions"]}


def dock_event_ids(page: Page) -> list[int]:
    return page.eval_on_selector_all('#dock-list [data-kind="live"]', "els => els.map(e => Number(e.dataset.id))")



def drawn(page: Page, agent_id: str) -> dict[str, Any]:
    """What an agent's character says and wears: its label, title, bubble, tool, wall, colours."""
    button = page.locator(f'[data-agent-id="{agent_id}"]')
    part = {name: button.locator(f".{name}") for name in ("bubble", "tool", "wall", "wall-text", "sprite")}
    return {
        "state": button.get_attribute("data-pixel-state"),
        "label": button.get_attribute("aria-label"),
        "title": button.get_attribute("title"),
        "bubble": (part["bubble"].text_content(), part["bubble"].get_attribute("hidden") is None),
        "tool": (part["tool"].text_content(), part["tool"].get_attribute("data-tool")),
        "wall": (part["wall-text"].text_content(), part["wall"].get_attribute("hidden") is None),
        "colours": part["sprite"].get_attribute("style"),
    }


def first_paint(browser: Browser, address: str, agent_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The agents as the service paints them with the page, before any script runs."""
    with opened(browser, java_script_enabled=False) as page:
        page.goto(address)
        return {agent_id: drawn(page, agent_id) for agent_id in agent_ids}


def pr_page(pr_url: str) -> str:
    """The office links a pull request to its page on this service, not to the VCS host."""
    return f"/projects/acme/pulls/{pr_url.rstrip('/').rsplit('/', 1)[1]}"

def test_an_operator_watches_steers_and_scrubs_a_run_in_the_browser(service: LiveServer, browser: Browser) -> None:
    http = httpx.Client(base_url=service.url, headers=ADMIN, timeout=30)
    answer = http.post("/v1/project-factory/projects", json=DEMO_LIKE)
    assert answer.status_code == 201, answer.text
    launched = http.post(f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": "acme"})
    assert launched.status_code == 201, launched.text
    run_id = launched.json()["run_id"]

    proxy = ProxyServer(service.url).start()
    try:
        with opened(browser) as page:

            # The board lists the run with its full id, linking to its office.
            page.goto(f"{proxy.url}/")
            row = page.locator(f'tr[data-run-id="{run_id}"]')
            row.wait_for()
            assert row.locator("a.run-id").inner_text() == run_id
            assert "acme" in row.inner_text() and "ready" in row.inner_text()
            row.locator("a.run-id").click()
            page.wait_for_url(f"**/runs/{run_id}")

            # The office shows the intake pair before the run is executed.
            page.locator('[data-agent-id="planner"]').wait_for()
            page.locator('[data-agent-id="curator"]').wait_for()
            before = states(page)
            assert set(before) == {"planner", "curator"}
            page.locator('#office[data-live="open"]').wait_for()
            page.evaluate(WATCH_REMOVALS)

            # Executed through the API: agents join by handoff and move, live, no reload.
            assert http.post(f"{STUDIO}/runs/{run_id}/execute").status_code == 202
            page.locator('[data-agent-id="backend"]').wait_for(timeout=20_000)
            page.wait_for_function(
                "s => document.querySelector('[data-agent-id=\"planner\"]').dataset.pixelState !== s",
                arg=before["planner"],
                timeout=20_000,
            )
            assert page.evaluate("window.__samePage") == "yes"
            assert page.evaluate("document.querySelector('[data-agent-id=\"planner\"]').__probe") == "kept"

            # Pause the curator from its panel; the API then says it is paused.
            page.click('[data-agent-id="curator"]')
            panel = page.locator("[data-panel]")
            panel.wait_for()
            assert panel.locator("[data-verb]").count() == SESSION_VERBS
            panel.locator('[data-verb="pause_session"]').click()
            result = panel.locator('[data-control-result="session"]')
            result.locator("xpath=self::*[@data-status='202']").wait_for()
            assert "pause_session accepted" in result.inner_text()
            eventually(lambda: session_state(http, run_id)["curator"]["live_status"] == "paused", timeout=10)
            page.wait_for_function(
                "() => document.querySelector('[data-agent-id=\"curator\"]').dataset.pixelState === 'waiting'"
            )
            # The paused curator says the same after this live update as on a page's first paint
            # (its bubble "…", its label and title), and an agent that joined live wears the
            # colours the first paint gives it: one rule draws both (api/web/office_view.py).
            live = {"curator": drawn(page, "curator"), "backend": drawn(page, "backend")}
            assert live["curator"]["state"] == "waiting" and live["curator"]["bubble"] == ("…", True)
            assert ": waiting" in live["curator"]["label"] and live["curator"]["title"].endswith(": waiting")
            painted = first_paint(browser, f"{proxy.url}/runs/{run_id}", ["curator", "backend"])
            assert painted["curator"] == live["curator"]
            assert painted["backend"]["colours"] == live["backend"]["colours"]
            # Paused again: the page shows the service's error body, not a success.
            panel.locator('[data-verb="pause_session"]').click()
            result.locator("xpath=self::*[@data-status='409']").wait_for()
            assert "session_paused" in result.inner_text()

            # Time travel: the slider's first stop is the run's first event; the office
            # then shows exactly the feed as of that event.
            slider = page.locator("#time-slider")
            slider.focus()
            page.keyboard.press("Home")
            page.locator('#office[data-mode="past"][data-as-of-event]').wait_for()
            position = int(page.get_attribute("#office", "data-as-of-event") or 0)
            past = http.get(
                f"{PLANE}/observability-feed", params={"project_slug": "acme", "run_id": run_id, "as_of_event": position}
            )
            assert past.status_code == 200, past.text
            expected = {a["agent_id"]: a["pixel_state"] for a in past.json()["pixel_agents"]}
            eventually(lambda: states(page) == expected, timeout=10)
            assert "backend" not in expected
            page.keyboard.press("ArrowRight")  # one event later
            page.wait_for_function(
                "p => Number(document.getElementById('office').dataset.asOfEvent) > p", arg=position
            )

            # Back to live: every agent again, the curator still paused.
            page.click("#back-live")
            page.locator('#office[data-mode="live"]').wait_for()
            page.locator('.slot:not([hidden]) > [data-agent-id="backend"]').wait_for()
            assert states(page)["curator"] == "waiting"
            assert page.evaluate("window.__removedAgents") == 0

            # The connection drops (the proxy restarts): the page resumes with
            # Last-Event-ID, and the dock holds every event of the run exactly once.
            held = max(dock_event_ids(page))
            with page.expect_request(lambda r: f"{PLANE}/live?" in r.url, timeout=20_000) as reconnect:
                proxy.stop()
                proxy.start()
            resumed_after = int(reconnect.value.headers["last-event-id"])
            assert resumed_after >= held  # resumes where the page stood, not from scratch
            page.locator('#office[data-live="open"]').wait_for(timeout=20_000)
            # An event after the reconnect whatever the simulator does meanwhile (under load
            # the run may have gone quiet): the operator wakes the paused curator.
            curator = session_state(http, run_id)["curator"]["session_id"]
            woken = http.post(
                f"{PLANE}/runs/{run_id}/sessions/{curator}/control",
                json={"verb": "queue_request", "wake_target": "curator", "message": "carry on"},
            )
            assert woken.status_code == 202, woken.text
            eventually(lambda: max(dock_event_ids(page)) > resumed_after, timeout=20)
            shown = dock_event_ids(page)
            assert len(shown) == len(set(shown))
            truth = [int(e["event_id"]) for e in expected_events(service.container, run_id)]
            assert sorted(shown) == [i for i in truth if i <= max(shown)]
    finally:
        proxy.stop()
        http.close()


BUCKETS = ["active", "moving", "waiting", "blocked", "idle", "completed"]


def test_the_office_header_shows_the_runs_surfaces_and_each_agent_its_nickname_and_tool(
    service: LiveServer, browser: Browser
) -> None:
    http = httpx.Client(base_url=service.url, headers=ADMIN, timeout=30)
    try:
        assert http.post("/v1/project-factory/projects", json=DEMO_LIKE).status_code == 201
        run_id = http.post(f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": "acme"}).json()["run_id"]
        # The gate publishes the run's proposal as a pull request (a real commit in the local repository).
        gate = http.post(f"/v1/admin/gate/threads/{run_id}/run", json={"agent_key": "backend"})
        assert gate.status_code == 200, gate.text
        pr_url = gate.json()["pr_url"]

        with opened(browser, extra_http_headers=ADMIN) as page:
            page.goto(f"{service.url}/runs/{run_id}")
            page.locator('#office[data-live="open"]').wait_for()
            page.evaluate("window.__samePage = 'yes'")
            feed = http.get(f"{PLANE}/observability-feed", params={"project_slug": "acme", "run_id": run_id}).json()

            # Delivery: the pull request's link; cost, queue state and source ref as the feed has them.
            delivery = page.locator('[data-badge="delivery"]')
            assert delivery.get_attribute("data-state") == "delivered"
            assert delivery.locator(f'a[href="{pr_page(pr_url)}"]').inner_text() == "PR #1"
            queue = page.locator('[data-badge="queue"]')
            assert queue.get_attribute("data-state") == feed["queue"]["state"]
            cost = page.inner_text('[data-badge="cost"] .badge-value')
            assert cost.startswith(f"${feed['run_cost']['total_cost_usd']:.2f}")
            source = page.inner_text('[data-badge="source"] .badge-value')
            assert source.split(" · ")[0] == feed["source_ref"]["mode"]

            # Progress: the six buckets, each counting agents as the feed does.
            shown = page.eval_on_selector_all(
                "#progress [data-bucket]", "els => els.map(e => [e.dataset.bucket, e.querySelector('.count').textContent])"
            )
            total = feed["progress"]["total_agents"]
            assert shown == [[b, f"{feed['progress'][b]} of {total}"] for b in BUCKETS]

            # Under each character: its nickname, and its current tool (or its state).
            for agent in feed["pixel_agents"]:
                element = page.locator(f'[data-agent-id="{agent["agent_id"]}"]')
                assert element.locator(".nick").inner_text() == agent["agent_nickname"]
                assert element.locator(".tool").inner_text()

            # A preview shared now shows up live beside the pull request, without a reload.
            preview = "https://preview.acme.example/orders"
            shared = http.post(f"{STUDIO}/runs/{run_id}/preview", json={"url": preview})
            assert shared.status_code == 200, shared.text
            delivery.locator(f'a[href="{preview}"]').wait_for(timeout=20_000)
            assert delivery.locator(f'a[href="{pr_page(pr_url)}"]').count() == 1
            assert page.evaluate("window.__samePage") == "yes"
    finally:
        http.close()
