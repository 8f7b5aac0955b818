"""A review comment on an agent's pull request, for that agent (Vibe Kanban's inline review
loop): ``comment_agent`` into the agent's mailbox, and the agent acts on it.

An agent at work reads it in its mailbox as any comment. An agent that had completed
works again: its session goes back to ``ready`` (a ``ProcessRestarted`` with reason
``review_comment``, the status every reader already folds), so the plane starts its
process anew, briefed with the mission and the mailbox that now holds the comment, while
its run is live. The comment reaches no one, and is refused with nothing stored (409),
when the run has ended (``run_ended``: nothing of it runs again) or when an operator
stopped the agent (``agent_stopped``: a review does not override an operator's stop).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass

from domain.shared.event_store import EventStore
from domain.shared.ids import new_id
from domain.studio.commands.control import ControlOutcome
from domain.studio.commands.effects import record_verb
from domain.studio.commands.runs import RunCommands
from domain.studio.control import ControlIntent, check_intent
from domain.studio.events import COMPLETED, STOPPED
from domain.studio.run import RunEnded
from domain.studio.session import SessionEnded

REVIEW_COMMENT = "review_comment"


@dataclass(eq=False)
class ReviewComments:
    """``comment_agent`` for a review of the agent's own pull request."""

    store: EventStore
    runs: RunCommands
    _: KW_ONLY
    clock: Callable[[], str]

    def comment(self, *, tenant: str, run_id: str, agent_id: str, message: str, reason: str, actor: str) -> ControlOutcome:
        intent = ControlIntent(verb="comment_agent", message=message, reason=reason)
        check_intent(intent, level="session")
        control_id = new_id("ctl")

        def command() -> ControlOutcome:
            run = self.runs.get_run(tenant, run_id)
            if run.ended:
                raise RunEnded(
                    f"Run {run_id} has ended ({run.status}): none of its agents works again, so a comment cannot "
                    f"reach {agent_id}. Launch a new run of the project to follow the review up."
                )
            session = self.runs.agent_session(run, agent_id)
            if session.live_status == STOPPED:
                raise SessionEnded(
                    f"Agent {agent_id} was stopped by an operator; a review comment does not start it again.",
                    code="agent_stopped",
                )
            at = self.clock()
            status = "accepted"
            if session.live_status == COMPLETED:
                session.reopen(reason=REVIEW_COMMENT, actor=actor, control_id=control_id, at=at, tick=run.tick)
                status = "reopened"
            record_verb(session, intent.verb, control_id, actor, intent, at)
            session.deliver_message(channel="mailbox", message=message, thread_id="", actor=actor, control_id=control_id, at=at)
            self.store.save(session)
            return ControlOutcome(control_id, run.run_id, session.session_id, intent.verb, status)

        return self.store.retrying(command)
