"""``GET /v1/skills``: shipped skill files, an extra directory source, a role filter, and a
slow or failing source that never holds the answer past the deadline."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from litestar.testing import TestClient

from api.app import create_app
from domain.portal.skills import Skill, catalogue
from tests.conftest import settings_for
from workers.bootstrap import build


def test_skills_from_files_and_a_directory(tmp_path: Path) -> None:
    extra = tmp_path / "skills"
    extra.mkdir()
    (extra / "perf.json").write_text(json.dumps({"skill_id": "perf", "title": "Performance", "roles": ["tester"]}))
    (extra / "handoff.json").write_text(json.dumps({"skill_id": "handoff", "title": "Handoff, our way"}))
    container = build(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}", skills_path=str(extra)))
    with TestClient(create_app(container, workers=())) as http:
        out = http.get("/v1/skills").json()
        ids = {s["skill_id"]: s for s in out["skills"]}
        assert {"error-tracking", "delivery-lanes", "handoff", "perf"} <= set(ids)
        assert ids["handoff"]["title"] == "Handoff, our way" and ids["handoff"]["source"].startswith("dir:")
        assert [s["status"] for s in out["sources"]] == ["ok", "ok"]
        tester = {s["skill_id"] for s in http.get("/v1/skills", params={"role": "tester"}).json()["skills"]}
        assert "perf" in tester and "delivery-lanes" not in tester
    container.close()


class Slow:
    name = "slow"

    def __init__(self) -> None:
        self.release = threading.Event()

    def skills(self) -> list[Skill]:
        self.release.wait(10)
        return [Skill(skill_id="late", title="Late")]


class Broken:
    name = "broken"

    def skills(self) -> list[Skill]:
        raise OSError("source unreachable")


def test_a_slow_or_failing_source_never_delays_past_the_deadline() -> None:
    slow = Slow()
    started = time.monotonic()
    out = catalogue([slow, Broken()], deadline=0.3)
    elapsed = time.monotonic() - started
    slow.release.set()
    assert elapsed < 1.0
    assert {s.source: s.status for s in out.sources} == {"shipped": "ok", "slow": "timeout", "broken": "failed"}
    assert "late" not in {s.skill_id for s in out.skills} and out.count == len(out.skills) >= 3
