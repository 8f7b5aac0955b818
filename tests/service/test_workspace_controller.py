"""The workspace controller with an injected clock over a real event store and read models."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from domain.shared.access import ProjectGrants
from domain.shared.clock import iso, shift
from domain.workspaces.commands import WorkspaceCommands
from domain.workspaces.ports import VolumeClaim
from tests.conftest import settings_for
from tests.events import kind_of
from workers.adapters.local_cluster import LocalCluster
from workers.bootstrap import Container, build
from workers.workspace_controller import ControllerConfig, WorkspaceController
from workers.workspace_controller_http import HealthServer

GRANTS = ProjectGrants("acme", {f"dev{i}@x.io": "contributor" for i in range(12)})


class Who:
    def __init__(self, key: str) -> None:
        self.subject_key, self.is_super_admin = key, False


class Clock:
    def __init__(self) -> None:
        self.now = iso(datetime.now(UTC))

    def __call__(self) -> str:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now = shift(self.now, seconds)


@pytest.fixture
def world(database_url: str, tmp_path: Path) -> Iterator[tuple[Container, WorkspaceCommands, Clock, Path]]:
    container = build(settings_for(database_url))
    container.start(("projector",))
    clock = Clock()
    commands = WorkspaceCommands(container.event_store, clock=clock, proxy_client_key=lambda: "k")
    yield container, commands, clock, tmp_path / "cluster"
    container.close()


def controller(world: tuple[Container, WorkspaceCommands, Clock, Path], cluster: LocalCluster, **config: object) -> WorkspaceController:
    container, commands, clock, _ = world
    return WorkspaceController(
        commands, container.store, cluster, container.meter_tokens.__class__("k"), clock=clock,
        config=ControllerConfig(**config),  # type: ignore[arg-type]
        settle=lambda: container.await_reads(container.event_store.max_position(), 5.0),
    )


def launch(commands: WorkspaceCommands, who: str = "dev0@x.io", branch: str = "main") -> str:
    return commands.launch(Who(who), GRANTS, tenant="default", repository_key="backend", branch=branch).id


def test_pending_to_ready_creates_real_volumes_and_binds_the_meter_token(world) -> None:  # type: ignore[no-untyped-def]
    _, commands, _, root = world
    cluster = LocalCluster(root)
    ctl = controller(world, cluster)
    wid = launch(commands)
    first = ctl.reconcile_once()
    ctl.reconcile_once()
    ws = commands.store.get_or_none(wid)
    assert first.processed >= 1 and ws.status == "ready"
    assert (root / ws.namespace / "volumes" / f"{ws.workspace_scope}-home").is_dir()
    assert (root / ws.namespace / "volumes" / f"{ws.pod_name}-scratch").is_dir()
    pod = json.loads((root / ws.namespace / "pods" / f"{ws.pod_name}.json").read_text())
    assert pod["env"]["SQUADOPS_METER_TOKEN"].startswith(f"{ws.employee_slug}.{ws.workspace_scope}.")


def test_provisioning_past_the_stale_window_becomes_error_and_relaunch_requeues(world) -> None:  # type: ignore[no-untyped-def]
    _, commands, clock, root = world
    ctl = controller(world, LocalCluster(root, boot_seconds=10_000))
    wid = launch(commands)
    ctl.reconcile_once()
    ctl.reconcile_once()
    assert commands.store.get_or_none(wid).status == "provisioning"
    clock.advance(419)
    assert ctl.reconcile_once().stale_provisioning == 0
    clock.advance(2)
    report = ctl.reconcile_once()
    ws = commands.store.get_or_none(wid)
    assert ws.status == "error" and "stale window" in ws.last_error
    assert (report.errored, report.stale_provisioning) == (1, 1)
    assert ctl.health()["last_reconcile"]["stale_provisioning"] == 1
    launch(commands)
    assert commands.store.get_or_none(wid).status == "pending"


def test_a_scratch_claim_off_the_contract_is_refused(world) -> None:  # type: ignore[no-untyped-def]
    _, commands, _, root = world
    wrong = VolumeClaim(name="scratch", size="10Gi", storage_class="standard", access_mode="ReadWriteOnce")
    ctl = controller(world, LocalCluster(root), scratch=wrong)
    wid = launch(commands)
    ctl.reconcile_once()
    ctl.reconcile_once()
    ws = commands.store.get_or_none(wid)
    assert ws.status == "error" and "does not match the contract 10Gi/scratch/ReadWriteOnce" in ws.last_error
    assert not (root / ws.namespace / "pods").exists()


def ready(world, ctl: WorkspaceController, commands: WorkspaceCommands) -> str:  # type: ignore[no-untyped-def]
    wid = launch(commands)
    for _ in range(3):
        ctl.reconcile_once()
    assert commands.store.get_or_none(wid).status == "ready"
    return wid


def test_release_goes_through_releasing_to_suspended_keeping_home(world) -> None:  # type: ignore[no-untyped-def]
    _, commands, _, root = world
    ctl = controller(world, LocalCluster(root))
    wid = ready(world, ctl, commands)
    ws = commands.store.get_or_none(wid)
    commands.release("default", ws.workspace_scope, "dev0@x.io")
    # One pass or two, depending on when the read model shows ``releasing``.
    stopped = sum(ctl.reconcile_once().stopped for _ in range(2))
    assert stopped == 1 and commands.store.get_or_none(wid).status == "suspended"
    kinds = [kind_of(e) for e in commands.store.events.get(wid)]
    assert kinds[-3:] == ["DevWorkspace.ReleaseRequested", "DevWorkspace.ReleaseStarted", "DevWorkspace.Suspended"]
    assert list((root / ws.namespace / "pods").glob("*.json")) == []
    assert (root / ws.namespace / "volumes" / f"{ws.workspace_scope}-home").is_dir()


def test_only_the_newest_pod_and_its_claim_are_kept(world) -> None:  # type: ignore[no-untyped-def]
    _, commands, clock, root = world
    cluster = LocalCluster(root)
    ctl = controller(world, cluster)
    wid = ready(world, ctl, commands)
    ws = commands.store.get_or_none(wid)
    old = cluster.create_pod(ws.namespace, ws.workspace_scope, "leftover", shift(clock.now, -60), {}, clock.now)
    report = ctl.reconcile_once()
    assert report.cleaned_workspace_resources == 2 and report.workspace_cleanup_errors == 0
    assert [p.name for p in cluster.pods(ws.namespace, ws.workspace_scope)] == [ws.pod_name]
    assert not (root / ws.namespace / "volumes" / old.pvc).exists()
    assert commands.store.get_or_none(wid).cleaned == 1


def test_idle_workspace_is_auto_stopped_and_relaunch_resumes(world) -> None:  # type: ignore[no-untyped-def]
    _, commands, clock, root = world
    ctl = controller(world, LocalCluster(root))
    wid = ready(world, ctl, commands)
    clock.advance(1799)
    ctl.reconcile_once()
    assert commands.store.get_or_none(wid).status == "ready"
    clock.advance(2)
    assert ctl.reconcile_once().stopped == 1
    assert commands.store.get_or_none(wid).status == "suspended"
    launch(commands)
    assert commands.store.get_or_none(wid).status == "pending"
    for _ in range(3):
        ctl.reconcile_once()
    assert commands.store.get_or_none(wid).status == "ready"


def test_several_controllers_move_each_workspace_once(world) -> None:  # type: ignore[no-untyped-def]
    _, commands, _, root = world
    cluster = LocalCluster(root)
    controllers = [controller(world, cluster, controller_id=f"c{i}") for i in range(3)]
    ids = [launch(commands, f"dev{i}@x.io") for i in range(10)]
    for _ in range(3):
        threads = [threading.Thread(target=c.reconcile_once) for c in controllers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for wid in ids:
        ws = commands.store.get_or_none(wid)
        assert ws.status == "ready" and ws.version == 3  # Launched, ProvisioningStarted, Provisioned
        assert len(cluster.pods(ws.namespace, ws.workspace_scope)) == 1
    assert all(c.last_error == "" for c in controllers)


def test_healthz_serves_every_field_on_its_own_port(world) -> None:  # type: ignore[no-untyped-def]
    _, commands, _, root = world
    ctl = controller(world, LocalCluster(root, boot_seconds=10_000))
    launch(commands)
    launch(commands, "dev1@x.io")
    ctl.reconcile_once()
    server = HealthServer(ctl.health, "127.0.0.1", 0)
    server.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz") as answer:
            body = json.loads(answer.read())
    finally:
        server.stop()
    assert set(body) == {
        "reconcile_enabled", "reconcile_interval_seconds", "reconcile_in_progress", "last_reconcile_started_at",
        "last_reconcile_at", "last_reconcile_error", "last_reconcile", "pending_sample_scopes",
        "release_sample_scopes", "provisioning_sample_scopes",
    }
    assert set(body["last_reconcile"]) == {
        "processed", "ready", "stopped", "errored", "stale_provisioning", "cleaned_workspace_resources",
        "workspace_cleanup_errors",
    }
    assert body["last_reconcile"]["processed"] == 2 and body["reconcile_in_progress"] is False
    ctl.settle()
    assert len(ctl.health()["provisioning_sample_scopes"]) == 2


class HangingUp(LocalCluster):
    """The local cluster whose ``up`` never answers within the tool timeout."""

    def __init__(self, root: Path, release: threading.Event) -> None:
        super().__init__(root)
        self.release = release

    def up(self, spec, now):  # type: ignore[no-untyped-def]
        self.release.wait(5)
        return super().up(spec, now)


def test_a_workspace_tool_call_past_its_timeout_fails_the_workspace(world) -> None:  # type: ignore[no-untyped-def]
    _, commands, _, root = world
    release = threading.Event()
    ctl = controller(world, HangingUp(root, release), tool_timeout_seconds=0.2)
    wid = launch(commands)
    ctl.reconcile_once()
    ctl.reconcile_once()
    release.set()
    ws = commands.store.get_or_none(wid)
    assert ws.status == "error" and "timed out after 0.2 s" in ws.last_error
    ctl.stop()
