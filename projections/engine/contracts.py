"""Every area's events in one table: stored kind -> the class its area declares.

The engine reads each stored event back into its class with the event store's mapper
(``projections.engine.envelope``); projectors dispatch on that class. A kind no area
declares stays untyped; projectors ignore it.
"""

from __future__ import annotations

# The aggregates register the topics their events are stored under (``domain.shared.base``):
# importing them lets a reader resolve every stored topic.
import domain.gate.thread
import domain.jobs.binding
import domain.jobs.checkpoint
import domain.jobs.idempotency
import domain.jobs.identity
import domain.jobs.job
import domain.portal.copilot
import domain.portal.notifications
import domain.projects.project
import domain.projects.pull_numbers
import domain.studio.lease
import domain.studio.run
import domain.studio.session
import domain.workspaces.usage
import domain.workspaces.workspace  # noqa: F401
from domain.gate.events import BY_KIND as GATE
from domain.jobs.events import BY_KIND as JOBS
from domain.portal.events import BY_KIND as PORTAL
from domain.projects.events import BY_KIND as PROJECTS
from domain.studio.events import BY_KIND as STUDIO
from domain.workspaces.events import EVENTS as WORKSPACES
from domain.workspaces.events import USAGE_EVENTS

CONTRACTS: dict[str, type] = {
    **STUDIO,
    **PROJECTS,
    **PORTAL,
    **JOBS,
    **GATE,
    **{f"DevWorkspace.{name}": event for name, event in WORKSPACES.items()},
    **USAGE_EVENTS,
}
