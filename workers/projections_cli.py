"""``squadops projections list|status|rebuild NAME|--all``: the read models' replay tooling.

- ``list``: every read model the runner keeps, its table and what it subscribes to;
- ``status``: the event log's position and each tracked projector's position and lag;
- ``rebuild``: replays the log from position 0 into shadow tables and swaps them in
  (blue/green; readers never see a half-built model), with a progress bar (rich) and the
  rate it reached, in ``SQUADOPS_REBUILD_WORKERS`` processes. Only read models are rebuilt:
  the live fan-out keeps its own position.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from workers.settings import Settings


def add_parser(sub: Any) -> None:
    projections = sub.add_parser("projections", help="list, inspect and rebuild the read models")
    actions = projections.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="the read models and their tables")
    actions.add_parser("status", help="each projector's position and lag behind the event log")
    rebuild = actions.add_parser("rebuild", help="replay the event log into a read model and swap it in")
    rebuild.add_argument("name", nargs="?", default="", help="the read model to rebuild")
    rebuild.add_argument("--all", action="store_true", help="rebuild every read model")
    projections.set_defaults(func=run)


def subscribes(projector: Any) -> str:
    if projector.topics:
        return f"{len(projector.topics)} event kinds"
    prefixes = getattr(projector, "prefixes", ())
    return ", ".join(f"{p}*" for p in prefixes) or "every event"


def run(settings: Settings, args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    if args.action == "rebuild" and args.all and settings.rebuild_workers > 1:
        from workers.rebuild import pool_context

        pool_context()  # the group processes' fork server loads the service while this process does
    from projections.engine.runner import NotificationSource
    from projections.engine.store import table_name
    from workers.bootstrap import build, read_projectors
    from workers.rebuild import rebuild_parallel
    from workers.rebuild_progress import RebuildProgress

    out, err = out or sys.stdout, err or sys.stderr
    projectors = read_projectors()
    names = [p.name for p in projectors]
    if args.action == "list":
        for projector in projectors:
            print(f"{projector.name:<18} {table_name(projector.name):<22} {subscribes(projector)}", file=out)
        return 0
    if args.action == "rebuild":
        if bool(args.name) == bool(args.all):
            print("name one read model or give --all", file=err)
            return 2
        if args.name and args.name not in names:
            print(f"unknown read model {args.name!r}; read models: {', '.join(names)}", file=err)
            return 2
    container = build(settings)
    try:
        source = NotificationSource(container.event_store)
        if args.action == "status":
            head = source.max_position()
            positions = container.store.positions()
            print(f"event log position {head}", file=out)
            print(f"{'projector':<18} {'position':>10} {'lag':>10}", file=out)
            for name in names + sorted(set(positions) - set(names)):
                position = positions.get(name, 0)
                note = "" if name in names else "  (not a read model)"
                print(f"{name:<18} {position:>10} {max(head - position, 0):>10}{note}", file=out)
            return 0
        chosen = [p.name for p in projectors if args.all or p.name == args.name]
        with RebuildProgress(err, "rebuild") as progress:
            report = rebuild_parallel(settings, chosen, workers=settings.rebuild_workers, progress=progress)
        print(
            f"rebuilt {', '.join(report.names)}: {report.events:,} events in {report.seconds:.2f} s "
            f"({report.rate:,.0f} events/s), at position {report.position}"
            + (f"; {report.spilled:,} documents spilled, {report.reloaded:,} read back" if report.spilled else ""),
            file=out,
        )
        return 0
    finally:
        container.close()
