"""Issue 27's journey in Chromium, on the simulator plane (its lanes commit a real change in
the project's repository before they open a pull request): a contributor brings an existing
local repository through the project factory page, launches from the project page's form,
watches the office until a lane opens a pull request, reads it on its page and comments
on a line, which lands in the authoring agent's mailbox; a maintainer publishes, and the
origin repository has the branch. A viewer sees the diff and the transcript but no
control; a stranger gets the 403 page. Every page is photographed (``SQUADOPS_SCREENSHOTS``,
default ``var/screenshots``; the README's pictures are ``docs/pages/``)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.conftest import settings_for
from tests.e2e.browser import CONTRAST_JS, ROOT, opened
from tests.live_helpers import service_process

pytestmark = pytest.mark.timeout(240)

CONTRIBUTOR = {"x-edge-claim-email": "dev@example.com", "x-edge-claim-groups": ""}
MAINTAINER = {"x-edge-claim-email": "lead@example.com", "x-edge-claim-groups": ""}
VIEWER = {"x-edge-claim-email": "viewer@example.com", "x-edge-claim-groups": ""}
STRANGER = {"x-edge-claim-email": "stranger@example.com", "x-edge-claim-groups": ""}
SHOTS = Path(os.environ.get("SQUADOPS_SCREENSHOTS") or ROOT / "var" / "screenshots")


# Tool entries the live channel brought (after the page's position): one folded result of a
# read's 40 lines and one short result shown open.
LIVE_RESULTS = """() => {
  const start = JSON.parse(document.getElementById("page-config").textContent).position;
  const results = [...document.querySelectorAll('#entries .entry[data-kind="tool"]')]
    .filter((e) => Number(e.dataset.position) > start).map((e) => e.querySelector(".entry-result"))
    .filter((r) => !r.hidden && r.querySelector("pre").textContent);
  return results.some((r) => !r.open && r.querySelector("pre").textContent.endsWith("line 40"))
    && results.some((r) => r.open && r.querySelector("pre").textContent.split("\\n").length < 8);
}"""


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Dev", "-c", "user.email=dev@example.com", *args], cwd=cwd, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The team's repository as it already is: a working copy with history."""
    root = tmp_path_factory.mktemp("team") / "shop"
    root.mkdir()
    git(root, "init", "--quiet", "--initial-branch=main")
    (root / "README.md").write_text("# The shop\n")
    (root / "app.py").write_text("def total(items):\n    return sum(i.price for i in items)\n")
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "-m", "The team's first commit")
    git(root, "config", "receive.denyCurrentBranch", "updateInstead")
    return root


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("journey")
    settings = settings_for(f"sqlite:///{root / 'squadops.db'}", data_dir=str(root / "data"))
    # Lanes keep working after their pull request (a review can reach them), and tick fast.
    # The simulator's seeded faults stay off: one lane in twenty skips its pull request and
    # stays blocked (a run id drawn at launch decides), which is not this journey.
    with service_process(
        settings, workers="all", tick_seconds=0.2,
        SQUADOPS_SIMULATOR_REVIEW_CALLS="100000", SQUADOPS_SIMULATOR_FAULTS="false",
    ) as service:
        yield service.url


def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=False)


def test_bring_a_repository_launch_review_comment_and_publish(served: str, origin: Path, browser: Browser) -> None:
    url = served
    with opened(browser, extra_http_headers=CONTRIBUTOR) as page:
        # The project factory page: by keyboard, an existing repository and two people.
        page.goto(f"{url}/portal/projects/new")
        page.fill("#f-key", "shop")
        page.fill("#f-name", "The shop")
        page.fill("#b0-key", "backend")
        page.fill("#b0-source", str(origin))
        page.fill("#b0-slug", "shop/api")
        page.fill("#p0-key", "lead@example.com")
        page.select_option("#p0-role", "maintainer")
        page.fill("#p1-key", "viewer@example.com")
        page.select_option("#p1-role", "viewer")
        shot(page, "project_new")
        page.focus("#project-form button[type=submit]")
        page.keyboard.press("Enter")
        page.wait_for_url(f"{url}/projects/shop")
        expect(page.locator('#bindings [data-repository="backend"] .provision')).to_have_text("mirrored")
        assert "viewer@example.com viewer" in page.inner_text("#participants")

        # Launch from the project page's form: it lands on the new run's office.
        page.fill("#launch-goal", "Add a discount to the total")
        page.click(".launch-form button[type=submit]")
        page.wait_for_url(f"{url}/runs/run-*")
        run_id = page.url.rsplit("/", 1)[1]
        page.locator('#office[data-live="open"]').wait_for()
        # Watched until a lane opens a pull request: the badge links to its page here.
        badge = page.locator('[data-badge="delivery"] a[href^="/projects/shop/pulls/"]')
        badge.wait_for(timeout=120_000)
        shot(page, "office")
        badge.click()
        page.wait_for_url(f"{url}/projects/shop/pulls/*")

        # The pull request: its commits and the changed file's lines, coloured, by keyboard.
        added = page.locator("#diff .ln.add")
        expect(added.first).to_be_visible()
        number = page.url.rsplit("/", 1)[1]
        assert page.locator(".commit-list li").count() >= 1
        shot(page, "pull")
        page.locator("#diff .ln").first.focus()
        for _ in range(200):  # down the diff with the arrow key, to the first added line
            if page.evaluate("document.activeElement.classList.contains('add')"):
                break
            page.keyboard.press("ArrowDown")
        line = page.evaluate("document.activeElement.dataset.line")
        path = page.locator("#diff .file").first.get_attribute("data-path")
        page.keyboard.press("Enter")
        page.keyboard.type("Please round the discount to cents.")
        page.click("#comment-form button[type=submit]")
        expect(page.locator("#comment-result")).to_contain_text("mailbox")
        author = page.locator(".pull-side a[href*='/agents/']").first
        author.click()

        # The authoring agent's transcript: the comment is in its mailbox, with file and line.
        page.wait_for_url(f"{url}/runs/{run_id}/agents/*")
        mailbox = page.locator('#entries .entry[data-kind="mailbox"]').last
        mailbox.wait_for(timeout=30_000)
        text = mailbox.inner_text()
        assert f"{path} line {line}" in text and "Please round the discount to cents." in text
        page.locator('#transcript[data-live="open"]').wait_for()
        expect(page.locator('#entries .entry[data-kind="tool"]').first).to_be_visible()
        # The lane keeps calling tools: each arrives live with its result under it, a long one
        # (a read's 40 lines) folded, a short one open.
        page.wait_for_function(LIVE_RESULTS, timeout=60_000)
        shot(page, "transcript")

    # A maintainer publishes: the gate runs, and the origin repository now has the branch.
    with opened(browser, extra_http_headers=MAINTAINER) as page:
        page.goto(f"{url}/portal")  # the review waits for them on their portal home
        page.wait_for_function("document.getElementById('portal').dataset.portal !== 'loading'")
        review = page.locator(f'#reviews a[href="/projects/shop/pulls/{number}"]')
        expect(review).to_be_visible()
        assert "· 1 file ·" in page.inner_text("#reviews")  # the lane changed one file
        shot(page, "portal")
        review.click()
        page.click("#publish")
        expect(page.locator("#publish-result")).to_contain_text("Published", timeout=60_000)
    branches = git(origin, "branch", "--list", "--format=%(refname:short)").split()
    assert len(branches) >= 2 and "main" in branches, branches

    # The viewer: the diff and the transcript, no control; a stranger: the 403 page.
    with opened(browser, extra_http_headers=VIEWER) as page:
        page.goto(f"{url}/projects/shop/pulls/{number}")
        expect(page.locator("#diff .ln.add").first).to_be_visible()
        assert page.locator("#publish, #comment-form").count() == 0
        page.goto(f"{url}/projects/shop")
        assert page.locator(".launch-form").count() == 0
        page.goto(f"{url}/runs/{run_id}/agents/{author_id(page, url, number)}")
        expect(page.locator("#entries .entry").first).to_be_visible()
        assert page.evaluate(CONTRAST_JS) == []
        # The office: the run and its verbs are seen, none can be sent (the role is said why).
        page.goto(f"{url}/runs/{run_id}")
        verbs = page.locator("#run-verbs button.verb")
        expect(verbs.first).to_be_visible()
        assert verbs.count() == verbs.and_(page.locator("[disabled]")).count() > 0
        assert "does not include control" in (verbs.first.get_attribute("title") or "")
        expect(page.locator("#run-verbs-denied")).to_contain_text("does not include control")
    with opened(browser, extra_http_headers=STRANGER) as page:
        for path_ in (f"/projects/shop/pulls/{number}", "/projects/shop", f"/runs/{run_id}/agents/planner"):
            answer = page.goto(f"{url}{path_}")
            assert answer is not None and answer.status == 403
            expect(page.locator("#error-title")).to_contain_text("403")
        shot(page, "forbidden")


def author_id(page: Page, url: str, number: str) -> str:
    page.goto(f"{url}/projects/shop/pulls/{number}")
    href = page.locator(".pull-side a[href*='/agents/']").first.get_attribute("href") or ""
    return href.rsplit("/", 1)[1]
