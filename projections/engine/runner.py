"""The projection runner: follows the notification log and keeps read models current.

It reads the log in pages, decodes each event once, gives every projector the events past
its own position, and commits each projector's row changes with its new position. A pass
commits in two transactions: first the derived models (the office's feed) with the models
they are made of, then the others (transcripts, pulls, usage, ...), folded after that
commit, so what the office reads never waits for them. It reads through a ``LogFollower`` (``projections.engine.follower``): contiguous
pages, the gap policy (a gap is waited for while an insert may fill it, at most
``gap_timeout``), and the wake-up after an append in this process or on PostgreSQL
``LISTEN`` from other processes; it polls otherwise.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import structlog

from domain.shared.retry import backoff
from projections.engine.docs import BatchDocs, DerivedProjector, DocCache, DocMemory, Projector
from projections.engine.envelope import Envelope
from projections.engine.follower import FollowsLog, LogFollower, NotificationSource, contiguous
from projections.engine.heartbeat import Heartbeats
from projections.engine.store import Change, DocStore
from projections.engine.unavailable import unavailable

log = structlog.get_logger("squadops.projections")

__all__ = ["NotificationSource", "ProjectionRunner", "ProjectorStatus", "RunnerStats", "contiguous"]


@dataclass
class ProjectorStatus:
    name: str
    position: int = 0
    events_applied: int = 0
    failures: int = 0
    last_error: str = ""
    retry_at: float = 0.0


@dataclass
class _Batch:
    name: str
    position: int
    docs: BatchDocs
    applied: int
    derived: Change | None = None  # a derived read model's rows and position (see _derive)


@dataclass
class RunnerStats:
    batches: int = 0
    events_read: int = 0
    gaps_accepted: int = 0
    statuses: dict[str, ProjectorStatus] = field(default_factory=dict)


class ProjectionRunner(FollowsLog):
    """Runs projectors over the log; safe to run in several processes at once."""

    def __init__(
        self,
        source: NotificationSource,
        store: DocStore,
        projectors: Sequence[Projector],
        *,
        page_size: int = 2000,
        poll_seconds: float = 0.5,
        gap_timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        cache_bytes: int = 64 << 20,  # all read models: the documents of the runs still moving
        heartbeats: Heartbeats | None = None,
        heartbeat_seconds: float = 1.0,
    ) -> None:
        self.source = source
        self.follower: LogFollower[Envelope] = LogFollower(
            source, page_size=page_size, gap_timeout=gap_timeout, clock=clock, name="projection"
        )
        self.store = store
        self.projectors = list(projectors)
        self.poll_seconds = poll_seconds
        self.clock = clock
        self.stats = RunnerStats(statuses={p.name: ProjectorStatus(p.name) for p in self.projectors})
        self._progress = threading.Condition()
        self._passes = 0  # passes ended, under ``_progress``: a waiter never misses one
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._run_lock = threading.Lock()
        self.memory = DocMemory(cache_bytes)
        self._caches: dict[str, DocCache] = {}
        self._cached_at: dict[str, int] = {}
        self.heartbeats = heartbeats
        self.heartbeat_seconds = heartbeat_seconds
        self.runner_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._beat_at = float("-inf")
        for projector in self.projectors:
            store.ensure(projector.name)
            if projector.announced:
                store.announce(projector.name)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, *, listen_url: str = "", channel: str = "stored_events") -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="projection-runner", daemon=True)
        self._thread.start()
        self.follower.listen(listen_url, channel)

    def stop(self) -> None:
        self._stop.set()
        self.follower.wake()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.follower.stop_listening()
        if self.heartbeats is not None:
            try:  # read models stop moving now: say so at once, not when the beat goes stale
                self.heartbeats.forget(self.runner_id)
            except Exception as exc:
                log.warning("projection_heartbeat_failed", error=repr(exc))

    @property
    def running(self) -> bool:
        """Whether this runner's loop runs in this process now."""
        return self._thread is not None and self._thread.is_alive() and not self._stop.is_set()

    def _loop(self) -> None:
        failures = 0
        while not self._stop.is_set():
            self._beat()
            try:
                applied = self.run_once()
            except Exception as exc:  # the database went away: back off, resume by itself
                failures += 1
                with self._run_lock:  # folds may have changed remembered documents, uncommitted
                    for cache in self._caches.values():
                        cache.clear()
                    self._cached_at.clear()
                delay = backoff(failures)
                log.warning("projection_pass_failed", error=repr(exc), failures=failures, retry_in=delay)
                self._stop.wait(delay)
                continue
            if failures:
                log.info("projection_resumed", failures=failures)
                failures = 0
            if applied == 0:
                self.follower.wait(min(self.poll_seconds, self.heartbeat_seconds))

    def _beat(self) -> None:
        """Records in the database, about every ``heartbeat_seconds``, that this runner lives."""
        if self.heartbeats is None or self.clock() - self._beat_at < self.heartbeat_seconds:
            return
        try:
            position = min(self.positions().values(), default=0)
            self.heartbeats.beat(self.runner_id, [p.name for p in self.projectors], position)
            self._beat_at = self.clock()
        except Exception as exc:  # no database, no heartbeat: health will say so
            log.warning("projection_heartbeat_failed", error=repr(exc))

    # -- one pass --------------------------------------------------------------------------

    def positions(self) -> dict[str, int]:
        stored = self.store.positions()
        return {p.name: stored.get(p.name, 0) for p in self.projectors}

    def run_once(self) -> int:
        """Applies what is available; answers how many (projector, event) pairs it applied."""
        with self._run_lock:
            positions = self.positions()
            now = self.clock()
            active = [p for p in self.projectors if self.stats.statuses[p.name].retry_at <= now]
            if not active:
                return 0
            self.follower.seek(min(positions[p.name] for p in active))
            envs = self.follower.read()
            self.stats.gaps_accepted = self.follower.gaps_accepted
            if not envs:
                return 0
            last = envs[-1].position
            self.stats.batches += 1
            self.stats.events_read += len(envs)
            # What a derived model is made of moves first: the derived models and their
            # sources (the office's feed) are folded and committed before the others.
            derived = [p for p in active if isinstance(p, DerivedProjector)]
            sources = {name for p in derived for name in p.sources}
            first = [p for p in active if p.name in sources]
            rest = [p for p in active if p.name not in sources and not isinstance(p, DerivedProjector)]
            batches = self._fold_all(first, positions, envs)
            for projector in derived:
                batch = self._derive(projector, positions, batches, last)
                if batch is not None:
                    batches.append(batch)
            applied = self._commit(batches, last)
            applied += self._commit(self._fold_all(rest, positions, envs), last)
        with self._progress:
            self._passes += 1
            self._progress.notify_all()
        return applied

    def _fold_all(self, projectors: list[Projector], positions: dict[str, int], envs: list[Envelope]) -> list[_Batch]:
        folded = (self._fold(p, positions[p.name], envs) for p in projectors)
        return [batch for batch in folded if batch is not None]

    def _remembered(self, name: str, position: int) -> DocCache:
        """The projector's document memory, lent to one fold.

        The fold mutates the documents it hands out, so the memory stops being trusted the
        moment it is lent: only a confirmed commit (``_confirm``) trusts it again, at the
        committed position. A fold or commit that fails in any way, or a position moved by
        another runner, leaves it untrusted, and the next pass starts from the store.
        """
        cache = self._caches.get(name)
        if cache is None:
            cache = self._caches[name] = self.memory.of(name)
        if self._cached_at.pop(name, None) != position:
            cache.clear()
        return cache

    def _forget(self, name: str) -> None:
        """Discards what an uncommitted fold changed in memory."""
        self._cached_at.pop(name, None)
        cache = self._caches.get(name)
        if cache is not None:
            cache.clear()

    def _confirm(self, batch: _Batch, last: int) -> None:
        """The batch is in the store: its documents are what the store holds at ``last``."""
        status = self.stats.statuses[batch.name]
        if batch.derived is None:
            self._caches[batch.name].keep(batch.docs.cache, batch.docs.sizes)
            self._cached_at[batch.name] = last
        status.position = last if batch.derived is None else batch.derived.position
        status.events_applied += batch.applied
        status.failures = 0
        status.last_error = ""
        status.retry_at = 0.0

    def _fold(self, projector: Projector, position: int, envs: list[Envelope]) -> _Batch | None:
        """Folds the events past ``position`` into a batch of documents (not committed)."""
        status = self.stats.statuses[projector.name]
        pending = [e for e in envs if e.position > position]
        if not pending:
            return None
        docs = BatchDocs(self.store, projector.name, self._remembered(projector.name, position))
        applied = 0
        try:
            for env in pending:
                if projector.wants(env):
                    projector.apply(env, docs)
                    applied += 1
        except Exception as exc:
            self._forget(projector.name)  # documents mutated by a failed fold
            if unavailable(exc) is not None:
                raise  # the database, not this projector: the whole pass backs off
            status.failures += 1
            status.last_error = f"{type(exc).__name__}: {exc} (event {env.position} {env.kind})"
            status.retry_at = self.clock() + min(30.0, 0.5 * 2 ** min(status.failures, 6))
            log.error(
                "projector_failed",
                projector=projector.name,
                position=env.position,
                kind=env.kind,
                error=repr(exc),
            )
            return None
        return _Batch(projector.name, position, docs, applied)

    def _derive(
        self, projector: DerivedProjector, positions: dict[str, int], batches: list[_Batch], last: int
    ) -> _Batch | None:
        """The derived read model's rows as ``batches`` leave its sources (not committed)."""
        status = self.stats.statuses[projector.name]
        try:
            change = projector.derive(self.store, {b.name: b.docs for b in batches}, positions, last)
        except Exception as exc:  # the feed is late, never wrong: the next pass recomposes
            if unavailable(exc) is not None:
                raise
            status.failures += 1
            status.last_error = f"{type(exc).__name__}: {exc}"
            status.retry_at = self.clock() + min(30.0, 0.5 * 2 ** min(status.failures, 6))
            log.error("projector_failed", projector=projector.name, error=repr(exc))
            return None
        if change is None:
            return None
        docs = BatchDocs(self.store, projector.name)
        return _Batch(projector.name, change.expected, docs, len(change.upserts) + len(change.deletes), change)

    def _commit(self, batches: list[_Batch], last: int) -> int:
        """Commits every projector's batch in one transaction (each alone if that fails).

        Whatever happens (a refused position, a dropped connection, an answer lost after
        the database committed), a batch not confirmed here leaves nothing in memory: the
        retry folds the page again over documents read back from the store.
        """
        if not batches:
            return 0
        confirmed: list[_Batch] = []
        try:
            changes = [b.derived or Change(b.name, b.position, last, *b.docs.changes()) for b in batches]
            if self.store.commit_many(changes):
                confirmed = list(batches)
            else:  # another runner moved a projector on: commit the others alone
                # (a derived model never alone: it was composed from all the batches; the
                # next pass finds it behind its sources and composes it again)
                for batch, change in zip(batches, changes, strict=True):
                    if batch.derived is None and self.store.commit(*change):
                        confirmed.append(batch)
        finally:
            done = {b.name for b in confirmed}
            for batch in batches:
                if batch.name in done:
                    self._confirm(batch, last)
                else:
                    self._forget(batch.name)
        return sum(max(b.applied, 1) for b in confirmed)

    # -- waiting (read-your-writes, tests) ----------------------------------------------------

    def wait_for(self, position: int, timeout: float = 5.0, names: Sequence[str] = ()) -> bool:
        """Blocks until the named projectors (all by default) reached ``position``.

        With the runner in this process it waits on its progress; otherwise the projector
        runs elsewhere (``squadops worker projector``) and the stored positions are polled.
        """
        deadline = time.monotonic() + timeout
        wanted = set(names) or {p.name for p in self.projectors}
        self.wake()
        while True:
            with self._progress:
                seen = self._passes
            positions = self.positions()
            if all(positions.get(n, 0) >= position for n in wanted):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if self._thread is None or not self._thread.is_alive():
                time.sleep(min(remaining, 0.005))
                continue
            with self._progress:  # a pass that ended since ``seen`` is not waited for again
                if self._passes == seen:
                    self._progress.wait(min(remaining, 0.05))
