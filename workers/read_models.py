"""The read models the API serves, in the order the projection runner folds them (the live
fan-out is not one of them): the composition root runs them, the projection CLI rebuilds them."""

from __future__ import annotations

from projections.engine.docs import Projector
from projections.gate.proposals import ProposalsProjector
from projections.gate.runs import GateRunsProjector
from projections.jobs.checkpoints import CheckpointsProjector
from projections.jobs.identity import IdentityLinksProjector
from projections.jobs.jobs import JobsProjector
from projections.portal.impact import ImpactProjector
from projections.portal.notifications import InboxProjector, NotifyOutboxProjector
from projections.portal.relations import RelationsProjector
from projections.projects.projects import ProjectsProjector
from projections.projects.pulls import PullsProjector
from projections.studio.feed_doc import FeedProjector
from projections.studio.fleet import FleetProjector
from projections.studio.log_dock import LogDockProjector
from projections.studio.pixels import PixelsProjector
from projections.studio.runs import RunsProjector
from projections.studio.surfaces import SurfacesProjector
from projections.studio.transcripts import TranscriptsProjector
from projections.studio.workspace_mirror import MirrorProjector
from projections.workspaces.usage import UsageProjector
from projections.workspaces.workspaces import WorkspacesProjector


def read_projectors() -> list[Projector]:
    """Every read model the API serves (the live fan-out is not one of them)."""
    return [
        RunsProjector(),
        ProjectsProjector(),
        PullsProjector(),
        MirrorProjector(),
        PixelsProjector(),
        SurfacesProjector(),
        LogDockProjector(),
        TranscriptsProjector(),
        FleetProjector(),
        JobsProjector(),
        CheckpointsProjector(),
        IdentityLinksProjector(),
        GateRunsProjector(),
        ProposalsProjector(),
        RelationsProjector(),
        NotifyOutboxProjector(),
        InboxProjector(),
        ImpactProjector(),
        WorkspacesProjector(),
        UsageProjector(),
        FeedProjector(),  # derived from the studio models above, in the same transaction
    ]
