"""The soak's end checks, each with the counts it prints.

Run once every process is stopped (the log no longer grows), on the test's PostgreSQL
and NATS:
- every read model is byte-equal to a rebuild from position 0 (``projections.engine.rebuild``);
- every live event of a run in the log is in JetStream exactly once (by ``Nats-Msg-Id``);
- every command answered 201/202 is in the log exactly once (by the id it answered);
- no 500 (nor any 5xx but 503) was ever answered;
- each SSE subscriber got its run's live events with nothing missing and nothing twice.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from domain.projects import events as pe
from domain.studio import events as ev
from projections.engine.envelope import Envelope
from projections.engine.rebuild import rebuild
from projections.engine.runner import NotificationSource
from projections.studio.live_channel import live_message
from tests.fault.live import Subscription
from tests.fault.load import Command, Recorder
from tests.live_helpers import stream_contents
from workers.bootstrap import read_projectors
from workers.rebuild import memory_bytes, open_parts
from workers.settings import Settings


@dataclass
class Check:
    name: str
    ok: bool
    lines: list[str] = field(default_factory=list)

    def render(self) -> str:
        head = f"[{'PASS' if self.ok else 'FAIL'}] {self.name}"
        return "\n".join([head, *(f"    {line}" for line in self.lines)])


def log_events(source: NotificationSource, page: int = 10_000) -> Iterator[Envelope]:
    """The whole event log in order, a page at a time (bounded by the head read first)."""
    head = source.max_position()
    position = 0
    for _ in range(head // page + 2):
        envs = source.read(position + 1, page, head)
        if not envs:
            return
        yield from envs
        position = envs[-1].position
        if position >= head:
            return


@dataclass
class LogFacts:
    """What the end checks need from the event log, read in one pass."""

    head: int = 0
    live: list[tuple[int, str]] = field(default_factory=list)  # (event id, subject) as the fan-out publishes
    commands: Counter[tuple[str, str]] = field(default_factory=Counter)  # (kind, id) -> times recorded


def read_log(settings: Settings) -> LogFacts:
    app, store = open_parts(settings)
    facts = LogFacts()
    try:
        source = NotificationSource(app)
        facts.head = source.max_position()
        for env in log_events(source):
            message = live_message(env, settings.live_subject_prefix)
            if message is not None:
                facts.live.append((message.event_id, message.subject))
            match env.event:
                case pe.ProjectCreated():
                    facts.commands[("project", env.originator_id.split(":", 2)[-1])] += 1
                case ev.RunLaunched():
                    facts.commands[("launch", env.run_id)] += 1
                case ev.ExecutionRequested(requested_at=requested_at):
                    facts.commands[("execute", f"{env.run_id}@{requested_at}")] += 1
                case ev.ControlRecorded(control_id=control_id) | ev.ControlApplied(control_id=control_id):
                    facts.commands[("control", control_id)] += 1
    finally:
        store.close()
        app.close()
    return facts


# -- read models ------------------------------------------------------------------------------


def _differing_fields(live: bytes, rebuilt: bytes) -> str:
    try:
        a, b = msgspec.json.decode(live), msgspec.json.decode(rebuilt)
    except msgspec.DecodeError:
        return "(not JSON)"
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return "(not objects)"
    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    shown = []
    for k in keys[:4]:
        left, right = str(a.get(k))[:60], str(b.get(k))[:60]
        shown.append(f"{k}: live {left} / rebuilt {right}")
    return "; ".join(shown) or "(same JSON, different bytes)"


def check_read_models(settings: Settings) -> Check:
    """Each read model's rows as live projection left them, against a rebuild of the log."""
    app, store = open_parts(settings)
    try:
        source = NotificationSource(app)
        head = source.max_position()
        projectors = read_projectors()
        positions = store.positions()
        live = {p.name: store.dump(p.name) for p in projectors}
        report = rebuild(store, source, projectors, page_size=10_000, memory_bytes=memory_bytes(settings))
        rebuilt = {p.name: store.dump(p.name) for p in projectors}
    finally:
        store.close()
        app.close()
    lines = [f"event log head {head} ({report.events} events, the rest rolled-back positions); "
             f"rebuilt in {report.seconds:.1f}s"]
    ok = True
    lagging = {p.name: positions.get(p.name, 0) for p in projectors if positions.get(p.name, 0) != head}
    if lagging:
        ok = False
        lines.append(f"projectors not at the head ({head}) when checked: {lagging}")
    for projector in projectors:
        name = projector.name
        old = {row.key: row for row in live[name]}
        new = {row.key: row for row in rebuilt[name]}
        only_live = sorted(set(old) - set(new))
        only_rebuilt = sorted(set(new) - set(old))
        differ = sorted(k for k in set(old) & set(new) if old[k] != new[k])
        equal = not (only_live or only_rebuilt or differ)
        ok = ok and equal
        lines.append(
            f"{name:<17} rows live {len(old):>6}  rebuilt {len(new):>6}  "
            f"differing {len(differ):>4}  only live {len(only_live):>3}  only rebuilt {len(only_rebuilt):>3}"
            + ("" if equal else "  <- NOT EQUAL")
        )
        for key in differ[:3]:
            lines.append(f"    {key}: {_differing_fields(old[key].body, new[key].body)}")
        for key in (only_live[:2] + only_rebuilt[:2]):
            lines.append(f"    {key}: only {'live' if key in old else 'rebuilt'}")
    return Check("every read model is byte-equal to a rebuild", ok, lines)


# -- JetStream ----------------------------------------------------------------------------------


def _in_thread(coro: Any, timeout: float = 120.0) -> Any:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    worker = threading.Thread(target=target, name="stream-read", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TimeoutError(f"reading the stream took over {timeout:.0f}s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def check_stream(settings: Settings, expected: list[tuple[int, str]]) -> Check:
    try:
        stored = _in_thread(stream_contents(settings.nats_url, settings.live_stream_name))
    except Exception as exc:
        return Check("every live event is in JetStream exactly once", False, [f"stream unreadable: {exc!r:.300}"])
    counts = Counter(eid for eid, _, _ in stored)
    subjects = {eid: subject for eid, subject, _ in stored}
    wanted = dict(expected)
    missing = [eid for eid in wanted if counts[eid] == 0]
    twice = {eid: n for eid, n in counts.items() if n > 1}
    unexpected = [eid for eid in counts if eid not in wanted]
    wrong_subject = [eid for eid, subject in wanted.items() if eid in subjects and subjects[eid] != subject]
    order = [eid for eid, _, _ in stored]
    out_of_order = sum(1 for a, b in zip(order, order[1:], strict=False) if b < a)
    ok = not (missing or twice or unexpected or wrong_subject)
    lines = [
        f"live events in the log {len(wanted)}  messages in the stream {len(stored)}  "
        f"distinct ids {len(counts)}",
        f"missing {len(missing)}  duplicated ids {len(twice)} (extra copies {sum(twice.values()) - len(twice)})  "
        f"not in the log {len(unexpected)}  wrong subject {len(wrong_subject)}  "
        f"out of log order {out_of_order} (informational)",
    ]
    if missing:
        lines.append(f"first missing ids: {missing[:10]}")
    if twice:
        lines.append(f"first duplicated ids: {sorted(twice)[:10]}")
    if unexpected:
        lines.append(f"first ids not in the log: {sorted(unexpected)[:10]}")
    return Check("every live event is in JetStream exactly once", ok, lines)


# -- commands ------------------------------------------------------------------------------------


def check_commands(commands: list[Command], found: Counter[tuple[str, str]]) -> Check:
    by_kind: dict[str, list[Command]] = defaultdict(list)
    for command in commands:
        by_kind[command.kind].append(command)
    ok = True
    lines = []
    for kind in sorted(by_kind):
        answered = by_kind[kind]
        if kind == "other":
            lines.append(f"{len(answered)} 201/202 answers of other endpoints (not checked): "
                         f"{sorted({c.label for c in answered})}")
            continue
        keys = Counter(c.key for c in answered)
        once = [k for k in keys if found[(kind, k)] == 1]
        missing = [k for k in keys if found[(kind, k)] == 0]
        twice = [k for k in keys if found[(kind, k)] > 1]
        answered_twice = [k for k, n in keys.items() if n > 1]
        good = not (missing or twice or answered_twice)
        ok = ok and good
        lines.append(
            f"{kind:<8} answered {len(answered):>5}  in the log once {len(once):>5}  missing {len(missing):>3}  "
            f"more than once {len(twice):>3}  same id answered twice {len(answered_twice):>3}"
            + ("" if good else "  <- NOT EXACTLY ONCE")
        )
        for key in (missing[:3] + twice[:3] + answered_twice[:3]):
            lines.append(f"    {kind} {key}: {found[(kind, key)]} time(s) in the log")
    return Check("every 201/202 command is in the log exactly once", ok, lines)


# -- answers ------------------------------------------------------------------------------------


def check_no_server_errors(recorder: Recorder) -> Check:
    errors = recorder.server_errors
    by_phase = Counter((e.phase, e.label, e.status) for e in errors)
    lines = [
        f"answers {recorder.total()}  500s {recorder.count(500)}  other 5xx (not 503) "
        f"{len(errors) - recorder.count(500)}  503s {recorder.count(503)} (allowed: {dict(recorder.unavailable_codes)})",
    ]
    for (phase, label, status), n in sorted(by_phase.items()):
        lines.append(f"    {n:>4} x {status} {label} during '{phase}'")
    for error in errors[:5]:
        lines.append(f"    e.g. {error.status} {error.label} at {error.at:.1f}s: {error.body[:200]}")
    return Check("no 500 was ever answered", not errors, lines)


def check_sse(subscriptions: list[Subscription], expected: list[tuple[int, str]]) -> Check:
    by_run: dict[str, list[int]] = defaultdict(list)
    marker = ".run."
    for eid, subject in expected:
        by_run[subject.rpartition(marker)[2]].append(eid)
    ok = True
    lines = []
    for sub in subscriptions:
        wanted = by_run.get(sub.run_id, [])
        got = sub.received
        upto = [eid for eid in wanted if got and eid <= got[-1]]
        counts = Counter(got)
        missing = [eid for eid in upto if counts[eid] == 0]
        twice = [eid for eid, n in counts.items() if n > 1]
        known = set(wanted)
        foreign = [eid for eid in counts if eid not in known]
        good = bool(got) and not (missing or twice or foreign)
        ok = ok and good
        lines.append(
            f"run {sub.run_id}: received {len(got)} of {len(wanted)} (up to id {got[-1] if got else '-'})  "
            f"missing {len(missing)}  twice {len(twice)}  not the run's {len(foreign)}  "
            f"connections {sub.connects}  stream failures {dict(sub.failures)}  other frames {sub.other_frames}"
            + ("" if good else "  <- NOT EXACTLY ONCE")
        )
    return Check("SSE subscribers got their runs' live events once, through every fault", ok, lines)
