"""The portal copilot (C15): its actions, threads as events, and the answerer port.

Action ids: ``explain_page``, ``summarize_run``, ``draft_followup_task``,
``propose_ui_actions``. A thread belongs to the subject who started it; every question
and answer is recorded on it as an event. ``Answerer`` is the model port: the built-in one
composes from the read-model facts handed to it; an OpenAI-compatible model proxy client
replaces it when configured.
"""

from __future__ import annotations

from typing import Any, Protocol

from eventsourcing.domain import event

from domain.portal.events import CopilotStarted, CopilotTurn
from domain.shared.base import Aggregate

ACTIONS = {
    "explain_page": "Explain this page or surface",
    "summarize_run": "Summarise a run",
    "draft_followup_task": "Draft a follow-up task",
    "propose_ui_actions": "Propose UI actions",
}


def thread_key(tenant: str, thread_id: str) -> str:
    return f"cpt:{tenant}:{thread_id}"


class CopilotThread(Aggregate):
    @staticmethod
    def create_id(tenant: str, thread_id: str) -> str:
        return thread_key(tenant, thread_id)

    @event(CopilotStarted)
    def __init__(self, *, tenant: str, thread_id: str, subject_key: str, at: str) -> None:
        self.tenant, self.thread_id, self.subject_key = tenant, thread_id, subject_key
        self.turns = 0

    @event(CopilotTurn)
    def record_turn(
        self, *, action_id: str, question: dict[str, Any], message: str, tool_calls: list[dict[str, Any]],
        ui_artifacts: list[dict[str, Any]], answered_by: str, at: str,
    ) -> None:
        self.turns += 1


class Answerer(Protocol):
    """Turns the facts and the question into the message (the model port)."""

    name: str

    def answer(self, action_id: str, facts: list[str], question: str) -> str: ...


class ComposedAnswerer:
    """The built-in, deterministic answerer: the facts, composed under the action's title."""

    name = "built_in"

    def answer(self, action_id: str, facts: list[str], question: str) -> str:
        lines = [f"{ACTIONS[action_id]}:"] + [f"- {fact}" for fact in facts]
        if question:
            lines.append(f"(You asked: {question})")
        return "\n".join(lines)
