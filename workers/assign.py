"""``squadops assign-processes`` and the watcher's command-line options."""

from __future__ import annotations

import argparse
import sys

import msgspec

from domain.shared.errors import DomainError
from domain.studio.policies import watch
from domain.studio.squad import AssignmentError, parse_assignment
from workers.settings import Settings
from workers.watcher import load_project_assets


def run_assign_processes(settings: Settings, args: argparse.Namespace) -> int:
    """Switches the processes of the run's existing sessions; prints one JSON line each."""
    from workers.bootstrap import build

    try:
        assignments = [parse_assignment(text) for text in args.assignment]
    except AssignmentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    container = build(settings)
    try:
        results = container.studio.assignments.assign_processes(
            tenant=args.tenant,
            run_id=args.run_id,
            assignments=assignments,
            actor=args.actor,
            reason=args.reason,
        )
    except AssignmentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except DomainError as exc:
        print(f"error ({exc.code}): {exc.message}", file=sys.stderr)
        return 1
    finally:
        container.close()
    for result in results:
        print(msgspec.json.encode(result).decode())
    return 0


def watcher_settings(settings: Settings, args: argparse.Namespace) -> Settings:
    """Settings with the watcher's command-line options applied (ValueError when out of bounds)."""
    changes: dict[str, object] = {}
    if getattr(args, "controller_timeout_seconds", None) is not None:
        changes["controller_timeout_seconds"] = args.controller_timeout_seconds
    if getattr(args, "project_assets", None):
        changes["project_assets_path"] = args.project_assets
    if getattr(args, "strict", False):
        changes["strict_observation"] = True
    settings = settings.replace(**changes) if changes else settings
    watch.check_bounds(settings.controller_timeout_seconds, settings.watch_interval_seconds)
    if settings.project_assets_path:
        load_project_assets(settings.project_assets_path)  # a bad file is a configuration error
    return settings
