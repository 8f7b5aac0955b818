"""The studio area's commands, composed from small collaborators wired explicitly.

``StudioCommands`` builds them once over the event store: each receives what it calls
through its constructor, so the dependencies read top to bottom and none goes back up.
"""

from __future__ import annotations

from collections.abc import Callable

from domain.projects.project import ProjectCommands
from domain.shared.event_store import EventStore
from domain.shared.ports import LogFollower
from domain.studio.commands.assignments import AssignmentCommands
from domain.studio.commands.control import ControlCommands
from domain.studio.commands.leases import LeaseCommands
from domain.studio.commands.reviews import ReviewComments
from domain.studio.commands.runs import RunCommands, SessionOpener
from domain.studio.commands.ticks import TickCommands
from domain.studio.commands.watch import WatchCommands
from domain.studio.squad import ModelProxyAliases, TemplateCatalog

__all__ = ["StudioCommands"]


class StudioCommands:
    """Runs, ticks, control verbs, process assignments and the watcher's blocks."""

    def __init__(
        self,
        store: EventStore,
        projects: ProjectCommands,
        *,
        templates: TemplateCatalog,
        agent_domain: str,
        aliases: ModelProxyAliases,
        clock: Callable[[], str],
        log: LogFollower,
    ) -> None:
        """``log`` follows the event log for the ticker's held copies (see ``Holdings``)."""
        self.templates = templates
        self.leases = LeaseCommands(store)
        self.opener = SessionOpener(agent_domain=agent_domain, aliases=aliases)
        self.runs = RunCommands(
            store, projects, self.leases, self.opener, templates=templates, clock=clock
        )
        self.ticks = TickCommands(
            store, self.leases, self.opener, templates=templates, clock=clock, log=log
        )
        self.control = ControlCommands(
            store,
            self.runs,
            self.leases,
            self.opener,
            templates=templates,
            aliases=aliases,
            clock=clock,
        )
        self.assignments = AssignmentCommands(store, self.runs, aliases=aliases, clock=clock)
        self.reviews = ReviewComments(store, self.runs, clock=clock)
        self.watch = WatchCommands(store, self.runs, clock=clock)
