"""The developer workspace controller: a reconcile loop over the workspace records.

Each pass reads the controller's queue (the ``dev_workspaces`` read model, partition
``dws-queue``, by state) and moves each workspace through ``WorkspaceCommands.claim``:
pending -> provisioning -> ready (or error: failure, or provisioning older than the stale
window), release_requested -> releasing -> suspended, ready and idle -> suspended (auto-stop),
and, while ready, only the newest pod and its claim are kept among siblings. Claims are
optimistic, so several controllers at once move each workspace once. The clock is
injected; ``health()`` is what ``GET /healthz`` of the controller answers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as CallTimeout
from dataclasses import asdict, dataclass, field
from typing import Any

import msgspec
import structlog

from domain.workspaces import policies
from domain.workspaces.commands import WorkspaceCommands
from domain.workspaces.metering import MeterTokens
from domain.workspaces.ports import VolumeClaim, WorkspaceProvider, WorkspaceSpec
from domain.workspaces.workspace import DevWorkspace
from projections.engine.store import DocStore
from projections.workspaces.workspaces import QUEUE_PARTITION, TABLE

log = structlog.get_logger("squadops.workspace_controller")
_decode = msgspec.json.Decoder(dict).decode
SAMPLE = 5


@dataclass
class PassReport:
    processed: int = 0
    ready: int = 0
    stopped: int = 0
    errored: int = 0
    stale_provisioning: int = 0
    cleaned_workspace_resources: int = 0
    workspace_cleanup_errors: int = 0


@dataclass(frozen=True)
class ControllerConfig:
    controller_id: str = "controller-1"
    interval_seconds: float = 5.0
    enabled: bool = True
    stale_seconds: float = policies.STALE_WINDOW_SECONDS
    idle_seconds: float = policies.IDLE_TIMEOUT_SECONDS
    tool_timeout_seconds: float = policies.TOOL_TIMEOUT_SECONDS  # each call of the workspace tool
    scratch: VolumeClaim = field(
        default_factory=lambda: VolumeClaim(
            name="scratch",
            size=policies.SCRATCH_SIZE,
            storage_class=policies.SCRATCH_CLASS,
            access_mode=policies.SCRATCH_ACCESS_MODE,
        )
    )


class WorkspaceController:
    def __init__(
        self,
        commands: WorkspaceCommands,
        store: DocStore,
        provider: WorkspaceProvider,
        tokens: MeterTokens,
        *,
        clock: Callable[[], str],
        config: ControllerConfig = ControllerConfig(),
        settle: Callable[[], Any] = lambda: None,
    ) -> None:
        self.commands, self.store, self.provider, self.tokens = commands, store, provider, tokens
        self.clock, self.config, self.settle = clock, config, settle
        self._lock = threading.Lock()  # one pass at a time in this process
        self._calls = ThreadPoolExecutor(max_workers=4, thread_name_prefix="workspace-tool")
        self._calls_closed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.in_progress = False
        self.last_started_at = ""
        self.last_at = ""
        self.last_error = ""
        self.last = PassReport()

    def _tool(self, fn: Callable[..., Any], *args: Any) -> Any:
        """One call of the workspace tool, bounded by the tool timeout (Limits: 300 s)."""
        future = self._calls.submit(fn, *args)
        try:
            return future.result(timeout=self.config.tool_timeout_seconds)
        except CallTimeout:
            future.cancel()
            raise TimeoutError(f"workspace tool call timed out after {self.config.tool_timeout_seconds:g} s") from None

    # -- the queue ------------------------------------------------------------------------------

    def _queue(self, status: str, limit: int = 10_000) -> Iterator[dict[str, Any]]:
        after, seen = "", 0
        while seen < limit:
            rows = self.store.scan(TABLE, partition=QUEUE_PARTITION, status=status, after=after, limit=min(500, limit - seen))
            for row in rows:
                yield _decode(row.body)
            if len(rows) < 500:
                return
            seen, after = seen + len(rows), rows[-1].sort_key

    def sample(self, status: str) -> list[str]:
        return [q["workspace_scope"] for q in self._queue(status, SAMPLE)]

    # -- one pass -------------------------------------------------------------------------------

    def reconcile_once(self) -> PassReport:
        with self._lock:
            self.in_progress, self.last_started_at = True, self.clock()
            report = PassReport()
            try:
                self.settle()
                self._pass(report)
                self.last_error = ""
            except Exception as exc:  # the loop goes on; healthz tells
                log.warning("workspace_reconcile_failed", error=repr(exc))
                self.last_error = repr(exc)
            finally:
                self.in_progress, self.last_at, self.last = False, self.clock(), report
            return report

    def _pass(self, report: PassReport) -> None:
        now = self.clock()
        cid = self.config.controller_id
        for item in self._queue("pending"):
            if self.commands.claim(item["aggregate_id"], lambda w: w.pick_up(now, cid)) is not None:
                report.processed += 1
        for item in self._queue("provisioning"):
            self._provision(item["aggregate_id"], now, report)
        for item in self._queue("release_requested"):
            if self.commands.claim(item["aggregate_id"], lambda w: w.begin_release(now, cid)) is not None:
                report.processed += 1
        for item in self._queue("releasing"):
            self._finish_release(item["aggregate_id"], now, report)
        for item in self._queue("ready"):
            self._keep_ready(item["aggregate_id"], now, report)

    def _spec(self, ws: DevWorkspace) -> WorkspaceSpec:
        home = VolumeClaim(name="home", size="", storage_class="", access_mode="ReadWriteOnce", retain=True)
        # The meter token is bound at runtime through the provider env, never baked in.
        token = self.tokens.issue(ws.employee_slug, ws.workspace_scope, ws.tenant)
        return WorkspaceSpec(
            scope=ws.workspace_scope,
            namespace=ws.namespace,
            generation=ws.version,
            volumes=[home, self.config.scratch],
            env={"SQUADOPS_METER_TOKEN": token},
        )

    def _provision(self, aggregate_id: str, now: str, report: PassReport) -> None:
        ws = self.commands.store.get_or_none(aggregate_id)
        if ws is None or ws.status != "provisioning":
            return
        if policies.is_stale(ws.status_since, now, self.config.stale_seconds):
            message = f"provisioning exceeded the stale window of {int(self.config.stale_seconds)} s"
            if self.commands.claim(aggregate_id, lambda w: w.fail(now, message, stale=True)) is not None:
                report.processed, report.errored, report.stale_provisioning = (
                    report.processed + 1, report.errored + 1, report.stale_provisioning + 1)
            return
        try:
            pod = self._tool(self.provider.up, self._spec(ws), now)
        except Exception as exc:
            message = f"workspace up failed: {exc}"
            if self.commands.claim(aggregate_id, lambda w: w.fail(now, message)) is not None:
                report.processed, report.errored = report.processed + 1, report.errored + 1
            return
        if not pod.ready:
            return
        volumes = [pod.pvc, f"{ws.workspace_scope}-home"]
        if self.commands.claim(aggregate_id, lambda w: w.provisioned(now, pod.name, volumes)) is not None:
            report.processed, report.ready = report.processed + 1, report.ready + 1

    def _finish_release(self, aggregate_id: str, now: str, report: PassReport) -> None:
        ws = self.commands.store.get_or_none(aggregate_id)
        if ws is None or ws.status != "releasing":
            return
        if not self._stop_resources(ws, report, "workspace_stop_failed"):
            return
        if self.commands.claim(aggregate_id, lambda w: w.stopped(now)) is not None:
            report.processed, report.stopped = report.processed + 1, report.stopped + 1

    def _stop_resources(self, ws: DevWorkspace, report: PassReport, failed: str) -> bool:
        """Stops the workspace's pod; a failure is logged as ``failed`` and counted."""
        try:
            self._tool(self.provider.stop, ws.namespace, ws.workspace_scope)
        except Exception as exc:
            log.warning(failed, scope=ws.workspace_scope, error=repr(exc))
            report.workspace_cleanup_errors += 1
            return False
        return True

    def _keep_ready(self, aggregate_id: str, now: str, report: PassReport) -> None:
        ws = self.commands.store.get_or_none(aggregate_id)
        if ws is None or ws.status != "ready":
            return
        if policies.is_idle(ws.last_active_at, now, self.config.idle_seconds):
            if self.commands.claim(aggregate_id, lambda w: w.auto_stop(now)) is not None:
                report.processed, report.stopped = report.processed + 1, report.stopped + 1
                self._stop_resources(ws, report, "workspace_auto_stop_failed")
            return
        try:
            pods = self._tool(self.provider.pods, ws.namespace, ws.workspace_scope)
            older = [p.name for p in pods[:-1]]  # the newest pod (and its claim) stays
            for name in older:
                self._tool(self.provider.remove, ws.namespace, name)
        except Exception as exc:
            log.warning("workspace_cleanup_failed", scope=ws.workspace_scope, error=repr(exc))
            report.workspace_cleanup_errors += 1
            return
        if older and self.commands.claim(aggregate_id, lambda w: w.siblings_cleaned(now, older)) is not None:
            report.processed += 1
        report.cleaned_workspace_resources += 2 * len(older)  # each sibling: its pod and its claim

    # -- health ---------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        return {
            "reconcile_enabled": self.config.enabled,
            "reconcile_interval_seconds": self.config.interval_seconds,
            "reconcile_in_progress": self.in_progress,
            "last_reconcile_started_at": self.last_started_at,
            "last_reconcile_at": self.last_at,
            "last_reconcile_error": self.last_error,
            "last_reconcile": asdict(self.last),
            "pending_sample_scopes": self.sample("pending"),
            "release_sample_scopes": self.sample("release_requested"),
            "provisioning_sample_scopes": self.sample("provisioning"),
        }

    # -- the loop -------------------------------------------------------------------------------

    def start(self) -> None:
        if not self.config.enabled or self._thread is not None:
            return
        if self._calls_closed:  # stopped before: a fresh pool for the tool calls
            self._calls, self._calls_closed = ThreadPoolExecutor(max_workers=4, thread_name_prefix="workspace-tool"), False
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="workspace-controller", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.reconcile_once()
            self._stop.wait(self.config.interval_seconds)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self._calls.shutdown(wait=False, cancel_futures=True)
        self._calls_closed = True
