"""The developer workspace read model: a rebuild equals live projection byte for byte."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.shared.access import ProjectGrants
from domain.shared.errors import DomainError
from domain.shared.event_store import EventStore
from domain.workspaces.commands import WorkspaceCommands
from projections.engine.rebuild import rebuild
from projections.engine.runner import NotificationSource, ProjectionRunner
from projections.engine.store import SqliteDocStore
from projections.workspaces.workspaces import WorkspacesProjector
from tests.conftest import settings_for
from workers.bootstrap import eventsourcing_env, read_projectors

EMPLOYEES = ["a@x.io", "b@x.io", "c@x.io"]
GRANTS = ProjectGrants("acme", {e: "contributor" for e in EMPLOYEES})
AT = "2026-01-01T01:00:00.000000Z"
MOVES = ["launch", "pick_up", "provisioned", "fail", "release", "begin_release", "stopped", "auto_stop", "clean"]


class Who:
    def __init__(self, key: str) -> None:
        self.subject_key, self.is_super_admin = key, False


def test_the_workspace_projector_is_a_read_model() -> None:
    assert any(isinstance(p, WorkspacesProjector) for p in read_projectors())


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.tuples(st.sampled_from(EMPLOYEES), st.sampled_from(["main", "dev"]), st.sampled_from(MOVES)), min_size=3, max_size=40),
    page_size=st.integers(min_value=1, max_value=9),
)
def test_rebuild_equals_live(steps: list[tuple[str, str, str]], page_size: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = settings_for(f"sqlite:///{Path(tmp) / 'squadops.db'}")
        event_store = EventStore(eventsourcing_env(config))
        store = SqliteDocStore(config.sqlite_path)
        tick = iter(range(10**6))
        cmds = WorkspaceCommands(event_store, clock=lambda: f"2026-01-01T00:{next(tick) // 60 % 60:02d}:{next(tick) % 60:02d}.000000Z", proxy_client_key=lambda: "k")
        projectors = [WorkspacesProjector()]
        try:
            runner = ProjectionRunner(NotificationSource(event_store), store, projectors, page_size=page_size)
            for employee, branch, move in steps:
                ws = cmds.launch(Who(employee), GRANTS, tenant="default", repository_key="backend", branch=branch)
                if move == "launch":
                    continue
                try:
                    if move == "release":
                        cmds.release("default", ws.workspace_scope, employee)
                    else:
                        action = {
                            "pick_up": lambda w: w.pick_up(AT, "c"),
                            "provisioned": lambda w: w.provisioned(AT, "pod", ["v"]),
                            "fail": lambda w: w.fail(AT, "boom"),
                            "begin_release": lambda w: w.begin_release(AT, "c"),
                            "stopped": lambda w: w.stopped(AT),
                            "auto_stop": lambda w: w.auto_stop(AT),
                            "clean": lambda w: w.siblings_cleaned(AT, ["old"]),
                        }[move]
                        cmds.claim(ws.id, action)
                except DomainError:
                    pass
                runner.run_once()
            while runner.run_once():
                pass
            live = store.dump("dev_workspaces")
            assert live
            rebuild(store, NotificationSource(event_store), projectors, page_size=5)
            assert store.dump("dev_workspaces") == live
        finally:
            store.close()
            event_store.close()
