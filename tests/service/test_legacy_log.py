"""A log written before the area layout reads the same after it.

``tests/fixtures/legacy_log/events.db`` holds 250 events written by the service before its
modules moved into area packages (a generated scenario of every session step and operator
verb, plus two simulator-driven runs, one cleaned up), and ``expected_read_models.json``
every read model that code projected from them. Stored events live forever: today's code
must decode each of them, project the same read models byte for byte, and write new events
under the same topics.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from domain.shared.ids import run_key
from tests.conftest import settings_for
from workers.bootstrap import build, read_projectors

FIXTURE = Path(__file__).parent.parent / "fixtures" / "legacy_log"


def _copy(tmp_path: Path) -> Path:
    db = tmp_path / "legacy.db"
    shutil.copy(FIXTURE / "events.db", db)
    return db


def test_the_legacy_log_projects_the_same_read_models_byte_for_byte(tmp_path: Path) -> None:
    container = build(settings_for(f"sqlite:///{_copy(tmp_path)}"))
    try:
        while container.runner.run_once():
            pass
        expected = json.loads((FIXTURE / "expected_read_models.json").read_text())
        # Every read model the old code had; read models added since have no old answer.
        assert set(expected) <= {p.name for p in read_projectors()}
        for projector in (p for p in read_projectors() if p.name in expected):
            rows = [[bytes(v).decode() if isinstance(v, (bytes, memoryview)) else v for v in row]
                    for row in container.store.dump(projector.name)]
            if projector.name not in expected:  # a read model newer than the fixture: it folds the old log
                assert projector.name != "relations" or rows, projector.name  # (projects have tuples)
                continue
            assert rows == expected[projector.name], projector.name
    finally:
        container.close()


def test_every_legacy_aggregate_loads_and_new_events_keep_the_stored_topics(tmp_path: Path) -> None:
    db = _copy(tmp_path)
    with sqlite3.connect(db) as conn:
        ids = [r[0] for r in conn.execute("SELECT DISTINCT originator_id FROM stored_events")]
        old_topics = {r[0] for r in conn.execute("SELECT DISTINCT topic FROM stored_events")}
    container = build(settings_for(f"sqlite:///{db}"))
    try:
        app = container
        loaded = [app.event_store.repository.get(aggregate_id) for aggregate_id in ids]
        assert len(loaded) == len(ids) and all(a.version >= 1 for a in loaded)
        run_id = next(i.split(":")[2] for i in ids if i.startswith("run:"))
        assert app.event_store.repository.get(run_key("default", run_id)).run_id == run_id
        fresh, _ = app.studio.runs.launch_run(tenant="default", template_id="delivery-core", project_slug="acme", launched_by="op")
    finally:
        container.close()
    with sqlite3.connect(db) as conn:
        new_topics = {r[0] for r in conn.execute(
            "SELECT DISTINCT topic FROM stored_events WHERE originator_id LIKE ?", (f"%{fresh.run_id}%",)
        )}
        created = conn.execute(
            "SELECT state FROM stored_events WHERE originator_id = ? AND originator_version = 1",
            (run_key("default", fresh.run_id),),
        ).fetchone()[0]
    assert new_topics and new_topics <= old_topics | {"domain.session:AgentSession.Opened", "domain.run:Run.SessionOpened"}
    assert all(t.split(":")[0] in {"domain.run", "domain.session", "domain.lease", "domain.project"} for t in new_topics)
    assert json.loads(created)["originator_topic"] == "domain.run:Run"


def test_a_project_created_today_records_named_settings_and_reads_as_the_legacy_one(tmp_path: Path) -> None:
    """The legacy log's projects recorded the raw request (created event version 1); today's
    code records the settings by name (version 2). The same request, created again today,
    projects the same project (but for its slug and times)."""
    db = _copy(tmp_path)
    with sqlite3.connect(db) as conn:
        legacy = json.loads(conn.execute(
            "SELECT state FROM stored_events WHERE topic = 'domain.project:Project.Created' AND originator_id LIKE '%:acme'"
        ).fetchone()[0])
    assert "request" in legacy and "class_version" not in legacy
    request = {**legacy["request"], "project_key": "acme-again"}
    container = build(settings_for(f"sqlite:///{db}"))
    try:
        again = container.projects.create_project(tenant="default", request=request, created_by=legacy["created_by"])
        assert again.request == {**container.projects.get_project("default", "acme").request, "project_key": "acme-again"}
        while container.runner.run_once():
            pass
        docs = {slug: json.loads(container.store.get("projects", f"project/default/{slug}"))
                for slug in ("acme", "acme-again")}
    finally:
        container.close()
    with sqlite3.connect(db) as conn:
        stored = json.loads(conn.execute(
            "SELECT state FROM stored_events WHERE topic = 'domain.project:Project.Created' AND originator_id LIKE '%:acme-again'"
        ).fetchone()[0])
    assert "request" not in stored and stored["class_version"] == 2 and stored["display_name"] == "Acme"
    same = {"project_slug", "updated_at", "created_at", "ai_run_history"}  # (runs launched in the old log)
    assert {k: v for k, v in docs["acme"].items() if k not in same} == {
        k: v for k, v in docs["acme-again"].items() if k not in same
    }
