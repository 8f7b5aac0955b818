"""The publication gate's steps as a studio run shows them: live events and log-dock lines.

A gate thread publishes for a studio run (its events name it in ``run_id``); each step of
a gate run is then a live event of that run (``event_kind`` ``gate``) and a runtime log
line of source ``gate``. Steps of a thread tied to no studio run, and steps stored before
they named their run, belong to no run and show nowhere. One pure mapping, used by the
log dock and the live fan-out alike, so both always agree.

A line names no address on the VCS host (``vcs.squadops.local`` by default, which nobody
opens): the pull request is reviewed on its page here, which the office's badge links, and
the evidence is named by its path in the repository.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from domain.gate import events as gate
from domain.gate.thread import studio_run_of
from projections.engine.docs import Handlers, handles
from projections.engine.envelope import Envelope

SOURCE = "gate"
EVENT_KIND = "gate"
# Every stored gate step that belongs to a run (the thread's opening belongs to none).
KINDS = frozenset(gate.kind_of(e) for e in gate.EVENTS if e is not gate.ThreadOpened)
CHECK_LEVELS = {"success": "info", "failure": "error"}
DECISION_LEVELS = {"promote": "info", "reject": "error"}
ORCHESTRATION = "A pull request touching only the assembly repository is not implementation evidence."


class Line(NamedTuple):
    """A log-dock line of a gate step."""

    level: str
    message: str
    signal: str
    warning: str = ""


def run_of(env: Envelope) -> str:
    """The studio run a gate envelope belongs to ("" for none)."""
    if env.kind not in KINDS:
        return ""
    return studio_run_of(env.originator_id, env.event)


def summary(event: object) -> str:
    """The live event's summary of a gate step."""
    return line(event).message if isinstance(event, gate.EVENTS) else ""


class _Lines(Handlers):
    """The log-dock line of each gate step, by the step's class."""

    @handles(gate.RunStarted)
    def run_started(self, e: gate.RunStarted) -> Line:
        how = "dry run" if e.dry_run else ("pull request" if e.publish else "commit only")
        return Line("info", f"Gate run {e.attempt} started by {e.actor} for {e.repo} ({how}).", "gate:started")

    @handles(gate.PublicationPlanned)
    def publication_planned(self, e: gate.PublicationPlanned) -> Line:
        return Line("info", f"Gate run {e.attempt} plans {e.mode}: {len(e.committed_paths)} files on {e.branch_name} "
                    f"from {e.base_branch}.", f"gate:planned:{e.mode}")

    @handles(gate.BranchCommitted)
    def branch_committed(self, e: gate.BranchCommitted) -> Line:
        return Line("info", f"Gate run {e.attempt} committed {e.branch_name} at {e.head_sha[:12]}.", "gate:committed")

    @handles(gate.PullRequestPublished)
    def pull_request_published(self, e: gate.PullRequestPublished) -> Line:
        return Line("info", f"Gate run {e.attempt} published the pull request of {e.repo} at {e.head_sha[:12]} as {e.author}.",
                    "gate:pull_request")

    @handles(gate.CheckRunRecorded)
    def check_run_recorded(self, e: gate.CheckRunRecorded) -> Line:
        level = CHECK_LEVELS.get(e.conclusion, "warn")
        return Line(level, f"Gate run {e.attempt} check {e.name}: {e.conclusion}. {e.summary}".strip()[:800],
                    f"gate:check:{e.conclusion}", warning=e.summary if level != "info" else "")

    @handles(gate.CommentPosted)
    def comment_posted(self, e: gate.CommentPosted) -> Line:
        return Line("info", f"Gate run {e.attempt} posted its summary comment on the pull request.", "gate:comment")

    @handles(gate.EvidenceRecorded)
    def evidence_recorded(self, e: gate.EvidenceRecorded) -> Line:
        warning = "" if e.scope == "implementation" else ORCHESTRATION
        return Line("warn" if warning else "info", f"Gate run {e.attempt} recorded {e.scope} evidence in {e.artifact_path}.",
                    f"gate:evidence:{e.scope}", warning=warning)

    @handles(gate.PromotionDecided)
    def promotion_decided(self, e: gate.PromotionDecided) -> Line:
        return Line(DECISION_LEVELS.get(e.decision, "warn"),
                    f"Gate run {e.attempt} promotion {e.decision}: {'; '.join(e.reasons)}"[:800], f"gate:promotion:{e.decision}")

    @handles(gate.RunCompleted)
    def run_completed(self, e: gate.RunCompleted) -> Line:
        return Line("info", f"Gate run {e.attempt} {e.status}.", f"gate:{e.status}")

    @handles(gate.RunFailed)
    def run_failed(self, e: gate.RunFailed) -> Line:
        return Line("error", f"Gate run {e.attempt} failed at {e.step}: {e.error_message}"[:800], "gate:failed",
                    warning="The gate stopped; a new run of the thread starts over.")


LINES = _Lines()
OTHER_STEP = Line("info", "Gate step.", "gate")


def line(event: Any) -> Line:
    """The log-dock line of a gate step."""
    make = LINES.handler(type(event))
    return OTHER_STEP if make is None else make(LINES, event)
