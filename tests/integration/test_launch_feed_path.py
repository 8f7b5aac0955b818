"""Issue 24's straight path: the studio's own files a warmed launch and the read of its
run's feed run through, counted as the README counts them.

Counted: files under ``api/studio/`` and ``projections/studio/`` whose functions run while
a run is launched over HTTP and its feed read back (after two warm-up rounds). Left out:
projectors whose documents the feed never reads (they only observe the run's events):
``projections/studio/transcripts.py`` (the agent's transcript page). The count may only go
down; the list is printed.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

from litestar.testing import TestClient

from api.app import create_app
from tests.conftest import ADMIN, settings_for
from tests.helpers import DEMO_LIKE
from workers.bootstrap import build

ROOT = str(Path(__file__).resolve().parents[2]) + "/"
LAYERS = ("api/studio/", "projections/studio/")
OBSERVERS = {"projections/studio/transcripts.py"}
MOST = 10  # api/studio 2, projections/studio 8 (15 before the merges of issue 24)


def test_the_launch_to_feed_path_touches_few_studio_files(tmp_path: Path) -> None:
    seen: Counter[str] = Counter()
    tracing = [False]

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if tracing[0] and event == "call":
            name = frame.f_code.co_filename
            if name.startswith(ROOT):
                seen[name[len(ROOT):]] += 1

    threading.setprofile(profile)  # before the app's threads (the projector's, the workers') start
    sys.setprofile(profile)
    container = build(settings_for(f"sqlite:///{tmp_path}/path.db"))
    try:
        with TestClient(create_app(container, workers=("projector",))) as http:
            http.headers.update(ADMIN)
            assert http.post("/v1/project-factory/projects", json=DEMO_LIKE).status_code == 201

            def launch_and_read(trace: bool) -> None:
                tracing[0] = trace
                launched = http.post("/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": "acme"})
                assert launched.status_code == 201, launched.text
                position = launched.headers["x-squadops-position"]
                feed = http.get(
                    f"/control-plane/studio/observability-feed?project_slug=acme&run_id={launched.json()['run_id']}",
                    headers={"x-squadops-min-position": position},
                )
                tracing[0] = False
                assert feed.status_code == 200 and feed.json()["pixel_agent_count"] > 0, feed.text

            for trace in (False, False, True):
                launch_and_read(trace)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        container.close()
    studio = sorted(f for f in seen if f.startswith(LAYERS) and f not in OBSERVERS)
    print(f"\n{len(studio)} studio files on the launch -> feed path:", *studio, sep="\n  ")
    assert any(f.startswith("api/studio/") for f in studio) and "projections/studio/feed_doc.py" in studio
    assert len(studio) <= MOST, studio
