"""The pages under load and for everyone: a 50-agent office paints its first agent (how
soon is ``bench/bench_web.py``'s to measure), is driven by keyboard, names each
character's state, meets WCAG AA contrast, follows the control line for a blocked agent in one click; the portal home
shows what needs the caller first and what the portal endpoints answer, or says they are not there.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from api.web.office_view import STATE_TEXT
from domain.studio.commands.runs import run_seed
from tests.conftest import ADMIN, settings_for
from tests.e2e.browser import CONTRAST_JS, opened
from tests.helpers import DEMO_LIKE, eventually
from tests.live_helpers import served_process
from workers.bootstrap import build
from workers.planes.simulator import FaultRates, Faults, SimulatorPlane
from workers.settings import Settings

pytestmark = pytest.mark.timeout(120)

AGENTS = 50


def crowded_run(db: Path) -> tuple[Settings, str]:
    """A run of 50 agents (46 actor suits, so 46 testers), some blocked at their first tool,
    stored in ``db``; served afterwards by ``squadops serve`` in its own process with no
    ticker: nothing moves unless asked, and the browser's timings are the service's."""
    settings = settings_for(f"sqlite:///{db}", auto_recovery=False)
    c = build(settings)
    try:
        c.start(("projector",))
        suits = [f"suit{n:02d}" for n in range(AGENTS - 4)]
        project = {**DEMO_LIKE, "project_key": "crowd", "project_assembly": {"agentSquadSuitTesterRoles": suits}}
        c.projects.create_project(tenant="default", request=project, created_by="operator@example.com")
        rates = FaultRates.none(first_tool_stall=0.12)
        faults, steady = Faults(rates), ("planner", "curator", "backend", "frontend")
        for _ in range(100):  # a seed whose intake and lanes start, and some testers stall
            run, _ = c.studio.runs.launch_run(tenant="default", template_id="delivery-core", project_slug="crowd", launched_by="op")
            seed = run_seed(run.run_id)
            # Two at least: a test unblocks one, and the board's "blocked" filter still finds the run.
            if not any(faults.stalls_first_tool(seed, a, 1) for a in steady) and sum(
                faults.stalls_first_tool(seed, f"tester-{suit}", 1) for suit in suits
            ) >= 2:
                break
        c.studio.runs.request_execution(tenant="default", run_id=run.run_id, requested_by="op")
        plane = SimulatorPlane(faults=rates)
        c.studio.ticks.tick_runs(plane, start=[("default", run.run_id)])
        for _ in range(200):
            c.studio.ticks.tick_runs(plane, tick=[("default", run.run_id)])
            current = c.studio.runs.get_run("default", run.run_id)
            sessions = [c.studio.runs.agent_session(current, a) for a in current.sessions]
            if len(sessions) >= AGENTS and sum(s.live_status == "blocked" for s in sessions) >= 2:
                break
        assert len(sessions) >= AGENTS and sum(s.live_status == "blocked" for s in sessions) >= 2
        assert c.await_reads(c.event_store.max_position(), c.settings.min_position_wait_seconds)
    finally:
        c.close()
    return settings, run.run_id


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    settings, run_id = crowded_run(tmp_path_factory.mktemp("crowd") / "squadops.db")
    with served_process(settings, workers="projector,fanout") as url:
        # A service that has served before (as it would have when an operator opens a page).
        assert httpx.get(f"{url}/runs/{run_id}", headers=ADMIN).status_code == 200
        yield url, run_id


# When the first character was painted: Element Timing of the characters the page came
# with, else the mark the script sets after painting the first agent it drew itself.
FIRST_AGENT_PAINT = """
() => new Promise((resolve) => {
  const mark = () => performance.getEntriesByName('squadops:first-agent')[0]?.startTime ?? -1;
  new PerformanceObserver((list) => {
    const times = list.getEntries().filter((e) => e.identifier === 'agent').map((e) => e.renderTime || e.loadTime);
    resolve(times.length ? Math.min(...times) : mark());
  }).observe({ type: 'element', buffered: true });
  setTimeout(() => resolve(mark()), 3000);
})
"""


def feed(url: str, run_id: str) -> dict[str, Any]:
    answer = httpx.get(
        f"{url}/control-plane/studio/observability-feed",
        params={"project_slug": "crowd", "run_id": run_id},
        headers=ADMIN,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def focused_agent(page: Page) -> str:
    return page.evaluate("document.activeElement?.dataset?.agentId || ''")


def test_fifty_agents_paint_fast_and_the_office_is_usable_by_keyboard(crowded: tuple[str, str], browser: Browser) -> None:
    url, run_id = crowded
    truth = {a["agent_id"]: a for a in feed(url, run_id)["pixel_agents"]}
    assert len(truth) >= AGENTS
    with opened(browser, extra_http_headers=ADMIN) as page:
        page.goto(f"{url}/runs/{run_id}")
        page.wait_for_function("n => document.querySelectorAll('[data-agent-id]').length >= n", arg=len(truth))
        first = page.evaluate(FIRST_AGENT_PAINT)
        assert first > 0, "the first agent was never painted"  # how fast: bench/bench_web.py

        # Every character: its id, its state, and a text alternative naming that state.
        shown = page.eval_on_selector_all(
            "[data-agent-id]",
            "els => els.map(e => [e.dataset.agentId, e.dataset.pixelState, e.getAttribute('aria-label')])",
        )
        assert {agent for agent, _, _ in shown} == set(truth)
        # Each drawn in its colours (the page's own markup and the script's alike).
        shirts = page.eval_on_selector_all(
            "[data-agent-id] .sprite", "els => els.map(e => getComputedStyle(e).getPropertyValue('--shirt').trim())"
        )
        assert len(shirts) == len(truth) and all(shirt.startswith("#") for shirt in shirts)
        for agent, state, label in shown:
            assert state == truth[agent]["pixel_state"]
            assert STATE_TEXT[state] in label and truth[agent]["agent_nickname"] in label

        # One tab stop in the office; arrows, Home and End move between agents.
        assert page.eval_on_selector_all("[data-agent-id]", "els => els.filter(e => e.tabIndex === 0).length") == 1
        order = [agent for agent, _, _ in shown]
        page.focus(f'[data-agent-id="{order[0]}"]')
        page.keyboard.press("ArrowRight")
        assert focused_agent(page) == order[1]
        page.keyboard.press("End")
        assert focused_agent(page) == order[-1]
        page.keyboard.press("Home")
        assert focused_agent(page) == order[0]
        page.keyboard.press("ArrowDown")
        below = focused_agent(page)
        assert below and below != order[0]
        top = "id => document.querySelector(`[data-agent-id=\"${id}\"]`).getBoundingClientRect().top"
        assert page.evaluate(top, below) > page.evaluate(top, order[0])
        # Focus is visible.
        outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle + ' ' + getComputedStyle(document.activeElement).outlineWidth")
        assert not outline.startswith("none") and float(outline.split()[1].rstrip("px")) >= 2
        # Enter opens the panel with focus in it; Escape closes it and gives focus back.
        page.keyboard.press("Enter")
        page.locator("[data-panel]").wait_for()
        assert page.evaluate("document.activeElement.id") == "panel-title"
        page.keyboard.press("Escape")
        page.locator("[data-panel]").wait_for(state="hidden")
        assert focused_agent(page) == below

        # The timeline reaches back past what the page started with.
        page.locator("#earlier").wait_for()
        held = int(page.get_attribute("#time-slider", "max") or 0)
        page.click("#earlier")
        page.wait_for_function("n => Number(document.getElementById('time-slider').max) > n", arg=held)

        # WCAG AA contrast for every visible text, with a panel open too.
        page.click(f'[data-agent-id="{order[0]}"]')
        page.locator("[data-panel]").wait_for()
        assert page.evaluate(CONTRAST_JS) == []


def test_a_blocked_agent_offers_its_recommended_action_first(crowded: tuple[str, str], browser: Browser) -> None:
    url, run_id = crowded
    blocked = next(a for a in feed(url, run_id)["pixel_agents"] if a["pixel_state"] == "blocked")
    wall = blocked["wall"]
    with opened(browser, extra_http_headers=ADMIN) as page:
        page.goto(f"{url}/runs/{run_id}")
        agent = page.locator(f'[data-agent-id="{blocked["agent_id"]}"]')
        agent.wait_for()
        assert agent.get_attribute("data-pixel-state") == "blocked"
        assert agent.locator(".wall-text").inner_text() == wall["message"]
        agent.click()
        panel = page.locator("[data-panel]")
        panel.wait_for()
        assert panel.locator("[data-wall-message]").inner_text() == wall["message"]
        first = panel.locator(".session-verbs [data-verb]").first
        assert first.get_attribute("data-verb") == wall["recommended_action"]
        assert first.get_attribute("data-recommended") == "true"
        first.click()  # the control-line rule: one click
        panel.locator('[data-control-result="session"][data-status="202"]').wait_for()

        # The run's verbs are in the header and answer the same way.
        page.click('#run-verbs [data-level="run"][data-verb="verify_wave"]')
        page.locator('[data-control-result="run"][data-status="202"]').wait_for()

        # The log dock filters by level and by source.
        page.select_option("#dock-level", "warn")
        levels = page.eval_on_selector_all("#dock-list .entry:not([hidden])", "els => els.map(e => e.dataset.level)")
        assert levels and set(levels) == {"warn"}
        page.select_option("#dock-level", "")
        page.select_option("#dock-source", "live")
        kinds = page.eval_on_selector_all("#dock-list .entry:not([hidden])", "els => els.map(e => e.dataset.kind)")
        assert kinds and set(kinds) == {"live"}
        page.select_option("#dock-source", "sandbox/wall")
        sources = page.eval_on_selector_all("#dock-list .entry:not([hidden])", "els => els.map(e => e.dataset.source)")
        assert sources and set(sources) == {"sandbox/wall"}

    def unblocked() -> bool:
        states = httpx.get(f"{url}/v1/admin/studio/runs/{run_id}/session-state", headers=ADMIN).json()
        session = next(s for s in states["sessions"] if s["agent_id"] == blocked["agent_id"])
        return session["live_status"] != "blocked"

    eventually(unblocked, timeout=10)


def test_the_board_meets_contrast_and_links_every_run(crowded: tuple[str, str], browser: Browser) -> None:
    url, run_id = crowded
    with opened(browser, extra_http_headers=ADMIN) as page:
        page.goto(f"{url}/")
        link = page.locator(f'tr[data-run-id="{run_id}"] a.run-id')
        link.wait_for()
        assert link.inner_text() == run_id and link.get_attribute("href") == f"/runs/{run_id}"
        page.fill("#f-project", "nothing-here")
        page.click("text=Apply filters")
        page.locator(f'tr[data-run-id="{run_id}"]').wait_for(state="detached")
        assert "project_slug=nothing-here" in page.url
        assert "404 project_not_found" in page.inner_text("#board-status")
        page.fill("#f-project", "crowd")
        page.select_option("#f-status", "blocked")
        page.click("text=Apply filters")
        link.wait_for()
        assert page.evaluate(CONTRAST_JS) == []


def test_the_portal_home_shows_the_portal_endpoints_or_says_they_are_absent(crowded: tuple[str, str], browser: Browser) -> None:
    url, _ = crowded
    workspace = httpx.get(f"{url}/v1/portal/workspace", headers=ADMIN)
    with opened(browser, extra_http_headers=ADMIN) as page:
        page.goto(f"{url}/portal")
        page.wait_for_function("document.getElementById('portal').dataset.portal !== 'loading'")
        # What a person does first comes first; the dashboard's sections are folded below.
        headings = page.locator("main h2").all_inner_texts()
        assert headings[:3] == ["Needs you", "Your projects", "Your workspaces"], headings
        more = page.locator("details.portal-more")
        assert more.get_attribute("open") is None
        more.locator("summary").focus()
        page.keyboard.press("Enter")  # opened by keyboard
        dashboard = page.locator("#dashboard")
        if workspace.status_code == 404:
            assert dashboard.get_attribute("data-state") == "unavailable"
            assert "Portal not available" in dashboard.inner_text()
            assert dashboard.locator(".portal-item").count() == 0  # nothing made up
        else:
            assert workspace.status_code == 200, workspace.text
            assert dashboard.get_attribute("data-state") == "ready"
            principal = workspace.json()["principal"]
            assert principal["subject_key"] in dashboard.inner_text()
        assert page.evaluate(CONTRAST_JS) == []


# One computed style property of an agent's figure.
FIGURE_STYLE = "([id, prop]) => getComputedStyle(document.querySelector(`[data-agent-id=\"${id}\"] .figure`))[prop]"


def test_characters_walk_when_moving_and_grey_out_when_resolved(crowded: tuple[str, str], browser: Browser) -> None:
    url, run_id = crowded
    agents = feed(url, run_id)["pixel_agents"]
    moving = [a["agent_id"] for a in agents if a["pixel_state"] == "moving"]
    assert moving, "the crowded run has agents whose last act was a tool call"
    with opened(browser, extra_http_headers=ADMIN) as page:
        page.goto(f"{url}/runs/{run_id}")
        page.locator('#office[data-live="open"]').wait_for()
        for agent in moving:
            assert page.evaluate(FIGURE_STYLE, [agent, "animationName"]) == "walk"
        # The operator stops one: live, the character turns resolved and greyed out.
        target = next(a for a in agents if a["agent_id"] == moving[0])
        answer = httpx.post(
            f"{url}/control-plane/studio/runs/{run_id}/sessions/{target['session_id']}/control",
            json={"verb": "stop_session", "reason": "done here"}, headers=ADMIN,
        )
        assert answer.status_code == 202, answer.text
        page.wait_for_function(
            "id => document.querySelector(`[data-agent-id=\"${id}\"]`).dataset.pixelState === 'resolved'",
            arg=target["agent_id"], timeout=20_000,
        )
        assert "grayscale(1)" in page.evaluate(FIGURE_STYLE, [target["agent_id"], "filter"])
        label = page.get_attribute(f'[data-agent-id="{target["agent_id"]}"]', "aria-label") or ""
        assert STATE_TEXT["resolved"] in label


def test_the_office_runs_under_its_own_content_security_policy(crowded: tuple[str, str], browser: Browser) -> None:
    # The other browser tests bypass the CSP for their probes; here the page's own scripts
    # run under it (script-src 'self'), and waiting uses selectors only (no eval).
    url, run_id = crowded
    with opened(browser, extra_http_headers=ADMIN, bypass_csp=False) as page:
        refused: list[str] = []
        page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
        page.goto(f"{url}/runs/{run_id}")
        expect(page.locator("[data-agent-id]")).to_have_count(len(feed(url, run_id)["pixel_agents"]))
        assert refused == []


def test_a_diff_with_folded_code_is_reached_and_walked_by_keyboard(crowded: tuple[str, str], browser: Browser, tmp_path: Path) -> None:
    """A pull request's page over a real diff whose hunk opens with a fold (the code above the
    change): the diff's tab stop is its first line in view, the arrow keys pass the closed
    fold by, and once the fold is opened (Enter on its summary) they walk into it. The page
    is rendered as the service renders it; its script comes from the served service."""
    import subprocess

    from api.web.diff_view import KEEP, files_view
    from api.web.pages import environment
    from workers.adapters.git_review import commits, file_diffs

    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=Dev", "-c", "user.email=dev@example.com", *args], cwd=tmp_path,
                              capture_output=True, text=True, check=True).stdout.strip()

    git("init", "--quiet", "--initial-branch=main")
    code = [f"def f_{n}():\n    return {n}\n" for n in range(30)]
    (tmp_path / "app.py").write_text("".join(code))
    git("add", "--all")
    git("commit", "--quiet", "-m", "base")
    base = git("rev-parse", "HEAD")
    code[15] = "def f_15():\n    return 'changed'\n"
    (tmp_path / "app.py").write_text("".join(code))
    git("commit", "--quiet", "--all", "-m", "change")
    head = git("rev-parse", "HEAD")
    files = file_diffs(tmp_path / ".git", base, head)
    pull = {"number": 3, "run_id": "run-1", "agent_id": "backend", "repository_key": "backend", "opened_at": "", "state": "open",
            "publications": []}
    detail = {"pull": pull, "base_sha": base, "head_sha": head, "commits": commits(tmp_path / ".git", base, head), "files": files,
              "evidence": [], "agents": [], "may": {"comment": True, "publish": False}, "comment_closed": ""}
    html = environment().get_template("pull.html").render(
        page="pull", title="PR", who="", script=True, config={"project_slug": "crowd", "number": 3}, initial="",
        project_slug="crowd", pull=pull, detail=detail, files=files_view(files), may=detail["may"],
    )
    url, _ = crowded
    changed = 2 * 15 + 2  # the line of f_15's return
    first_shown = changed - KEEP
    with opened(browser) as page:
        page.route(f"{url}/pull-with-folds", lambda route: route.fulfill(body=html, content_type="text/html"))
        page.goto(f"{url}/pull-with-folds")
        expect(page.locator(f'#diff .ln[tabindex="0"][data-line="{first_shown}"]')).to_have_count(1)
        page.locator("#diff summary").first.wait_for()
        for _ in range(12):  # Tab from the page's start reaches the diff
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.classList.contains('ln')"):
                break
        assert page.evaluate("document.activeElement.dataset.line") == str(first_shown)
        page.keyboard.press("ArrowUp")  # the fold above is closed: nowhere to go
        assert page.evaluate("document.activeElement.dataset.line") == str(first_shown)
        page.keyboard.press("ArrowDown")
        assert page.evaluate("document.activeElement.dataset.line") == str(first_shown + 1)
        page.locator("#diff details.fold summary").first.focus()
        page.keyboard.press("Enter")
        page.locator(f'#diff .ln[data-line="{first_shown + 1}"]').focus()
        for _ in range(2):
            page.keyboard.press("ArrowUp")
        assert page.evaluate("document.activeElement.dataset.line") == str(first_shown - 1)
        assert page.locator("#diff details.fold").first.evaluate("d => d.open")
