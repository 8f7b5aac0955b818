"""The publication gate's steps as a studio run shows them: live events and log-dock lines.

A gate thread publishes for a studio run (its events name it in ``run_id``); each step of
a gate run is then a live event of that run (``event_kind`` ``gate``) and a runtime log
line of source ``gate``. Steps of a thread tied to no studio run, and steps stored before
they named their run, belong to no run and show nowhere. One pure mapping, used by the
log dock and the live fan-out alike, so both always agree.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from domain.gate import events as gate
from domain.gate.thread import studio_run_of
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


def line(event: Any) -> Line:
    """The log-dock line of a gate step."""
    match event:
        case gate.RunStarted(attempt=n, repo=repo, actor=actor, dry_run=dry_run, publish=publish):
            how = "dry run" if dry_run else ("pull request" if publish else "commit only")
            return Line("info", f"Gate run {n} started by {actor} for {repo} ({how}).", "gate:started")
        case gate.PublicationPlanned(attempt=n, mode=mode, branch_name=branch, base_branch=base, committed_paths=paths):
            return Line("info", f"Gate run {n} plans {mode}: {len(paths)} files on {branch} from {base}.", f"gate:planned:{mode}")
        case gate.BranchCommitted(attempt=n, branch_name=branch, head_sha=head):
            return Line("info", f"Gate run {n} committed {branch} at {head[:12]}.", "gate:committed")
        case gate.PullRequestPublished(attempt=n, pr_url=url, author=author):
            return Line("info", f"Gate run {n} published pull request {url} as {author}.", "gate:pull_request")
        case gate.CheckRunRecorded(attempt=n, name=name, conclusion=conclusion, summary=text):
            level = CHECK_LEVELS.get(conclusion, "warn")
            return Line(level, f"Gate run {n} check {name}: {conclusion}. {text}".strip()[:800], f"gate:check:{conclusion}",
                        warning=text if level != "info" else "")
        case gate.CommentPosted(attempt=n, comment_url=url):
            return Line("info", f"Gate run {n} posted its summary comment {url}.", "gate:comment")
        case gate.EvidenceRecorded(attempt=n, scope=scope, evidence_url=url):
            warning = "" if scope == "implementation" else ORCHESTRATION
            return Line("warn" if warning else "info", f"Gate run {n} recorded {scope} evidence {url}.",
                        f"gate:evidence:{scope}", warning=warning)
        case gate.PromotionDecided(attempt=n, decision=decision, reasons=reasons):
            return Line(DECISION_LEVELS.get(decision, "warn"), f"Gate run {n} promotion {decision}: {'; '.join(reasons)}"[:800],
                        f"gate:promotion:{decision}")
        case gate.RunCompleted(attempt=n, status=status):
            return Line("info", f"Gate run {n} {status}.", f"gate:{status}")
        case gate.RunFailed(attempt=n, step=step, error_message=error):
            return Line("error", f"Gate run {n} failed at {step}: {error}"[:800], "gate:failed",
                        warning="The gate stopped; a new run of the thread starts over.")
    return Line("info", "Gate step.", "gate")
