"""The control verbs' effect tables cover the verb sets exactly: one handler per verb."""

from __future__ import annotations

from domain.studio.commands.control import RUN_EFFECTS, SESSION_EFFECTS
from domain.studio.control import RUN_VERBS, SESSION_VERBS


def test_every_run_verb_has_one_handler_and_every_handler_a_verb() -> None:
    assert set(RUN_EFFECTS) == RUN_VERBS


def test_every_session_verb_has_one_handler_and_every_handler_a_verb() -> None:
    assert set(SESSION_EFFECTS) == SESSION_VERBS
