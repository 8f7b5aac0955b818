"""No sequence of operator verbs and ticks breaks a run's invariants (hypothesis, stateful).

After every step: each agent is in exactly one progress bucket, a blocked agent has a
blocker and only a blocked one does, the run's index names every session, the read model
agrees with the aggregates, and an ended run takes no further verb (and stores nothing).
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from domain.shared.errors import DomainError
from domain.studio.commands import runs as runs_module
from domain.studio.commands.recovery import recovery_policies
from domain.studio.control import RUN_VERBS, SESSION_VERBS, ControlIntent
from domain.studio.policies.pixel import PROGRESS_BUCKETS, pixel_state, progress_bucket
from domain.studio.run import RunEnded
from domain.studio.session import SessionEnded
from projections.engine.docs import MemoryDocs
from projections.engine.runner import NotificationSource
from projections.studio.runs import RunsProjector, run_doc_key
from tests.service.recovery_support import TENANT, Squad
from workers.planes.simulator import FaultRates

AGENTS = ["planner", "curator", "backend", "frontend", "tester-admin", "tester-guest", "compactor"]
ACTOR = "op@example.com"


def intent_for(verb: str, draw: st.DataObject, agent_id: str, open_cards: list[str]) -> ControlIntent:
    fields: dict[str, str] = {"verb": verb, "reason": "hypothesis"}
    if verb in ("intervene", "comment_agent", "reply_thread"):
        fields["message"] = "please continue"
    if verb == "reply_thread":
        fields["thread_id"] = "thr-hypothesis"
    if verb == "handoff_agent":
        fields["target_agent_id"] = draw.draw(st.sampled_from(AGENTS + ["nobody"]))
    if verb == "queue_request":
        fields["wake_target"] = draw.draw(st.sampled_from(["", agent_id]))
    if verb == "switch_agent_process":
        fields["provider"] = draw.draw(st.sampled_from(["codex", "antigravity", "claude-code-cli"]))
        fields["effort"] = draw.draw(st.sampled_from(["", "low", "high"]))
    if verb in ("create_task_card", "create_followup_task"):
        fields["title"] = "follow the thread"
    if verb in ("resolve_task_card", "create_followup_task"):
        fields["task_card_id"] = draw.draw(st.sampled_from(open_cards + ["card-unknown"]))
    return ControlIntent(**fields)


@settings(
    max_examples=15,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
class VerbSequences(RuleBasedStateMachine):
    @initialize(policies=st.booleans(), run_number=st.integers(min_value=1, max_value=2**32))
    def launch(self, policies: bool, run_number: int) -> None:
        # A run id drawn by hypothesis (not at random): the run's seed, so its replay, is reproducible.
        self.squad = Squad(FaultRates(first_tool_stall=0.3, sandbox_loss=0.15, missing_pr=0.3))
        if policies:
            self.squad.policies = recovery_policies(credentials=self.squad.plane)
        original = runs_module.new_id
        runs_module.new_id = lambda prefix: f"{prefix}-{run_number:016x}"
        try:
            self.run_id = self.squad.launch()
        finally:
            runs_module.new_id = original
        self.docs = MemoryDocs()
        self.position = 0
        self.projector = RunsProjector()

    # -- steps ------------------------------------------------------------------------------

    @precondition(lambda self: not self.run.ended)
    @rule(ticks=st.integers(min_value=1, max_value=6))
    def tick(self, ticks: int) -> None:
        self.squad.tick(self.run_id, limit=ticks)

    @precondition(lambda self: not self.run.ended)
    @rule(verb=st.sampled_from(sorted(SESSION_VERBS)), data=st.data())
    def session_verb(self, verb: str, data: st.DataObject) -> None:
        agent_id = data.draw(st.sampled_from(sorted(self.run.sessions)))
        session = self.squad.session(self.run_id, agent_id)
        intent = intent_for(verb, data, agent_id, sorted(session.open_task_cards))
        try:
            self.squad.app.studio.control.control_session(
                tenant=TENANT, run_id=self.run_id, agent_id=agent_id, intent=intent, actor=ACTOR
            )
        except SessionEnded:
            assert session.ended
        except DomainError as exc:
            # Refusals name their reason; none may come from a malformed intent.
            assert exc.code != "invalid_control", exc

    @precondition(lambda self: not self.run.ended)
    @rule(verb=st.sampled_from(sorted(RUN_VERBS)))
    def run_verb(self, verb: str) -> None:
        self.squad.app.studio.control.control_run(
            tenant=TENANT, run_id=self.run_id, intent=ControlIntent(verb=verb, reason="hypothesis"), actor=ACTOR
        )

    @precondition(lambda self: self.run.ended)
    @rule(verb=st.sampled_from(sorted(RUN_VERBS | SESSION_VERBS)), data=st.data())
    def an_ended_run_takes_no_verb(self, verb: str, data: st.DataObject) -> None:
        before = self.squad.app.event_store.max_position()
        agent_id = data.draw(st.sampled_from(sorted(self.run.sessions)))
        intent = intent_for(verb, data, agent_id, [])
        try:
            if verb in RUN_VERBS and data.draw(st.booleans()):
                self.squad.app.studio.control.control_run(tenant=TENANT, run_id=self.run_id, intent=intent, actor=ACTOR)
            elif verb in SESSION_VERBS:
                self.squad.app.studio.control.control_session(
                    tenant=TENANT, run_id=self.run_id, agent_id=agent_id, intent=intent, actor=ACTOR
                )
            else:
                self.squad.app.studio.control.control_run(tenant=TENANT, run_id=self.run_id, intent=intent, actor=ACTOR)
        except RunEnded:
            pass
        else:
            raise AssertionError(f"{verb} was accepted on an ended run")
        assert self.squad.app.event_store.max_position() == before

    # -- invariants -------------------------------------------------------------------------

    @property
    def run(self):  # type: ignore[no-untyped-def]
        return self.squad.app.studio.runs.get_run(TENANT, self.run_id)

    @invariant()
    def every_agent_is_in_exactly_one_progress_bucket(self) -> None:
        sessions = self.squad.app.studio.runs.all_sessions(self.run)
        buckets = Counter(progress_bucket(pixel_state(s.live_status), s.live_status) for s in sessions)
        assert set(buckets) <= set(PROGRESS_BUCKETS)
        assert sum(buckets.values()) == len(sessions) == len(self.run.sessions)
        ended = sum(1 for s in sessions if s.ended)
        assert buckets["completed"] == ended
        assert buckets["blocked"] == sum(1 for s in sessions if s.live_status == "blocked")

    @invariant()
    def walls_and_statuses_agree(self) -> None:
        run = self.run
        for s in self.squad.app.studio.runs.all_sessions(run):
            # A paused agent keeps the wall it was paused behind; nobody else has one.
            if s.live_status == "blocked":
                assert s.blocker_code, s.agent_id
            elif s.blocker_code:
                assert s.live_status == "paused" and s.status_before_pause == "blocked", (s.agent_id, s.live_status)
            assert run.sessions[s.agent_id] == s.session_id and s.run_id == run.run_id
            if run.ended:
                assert s.ended, (s.agent_id, s.live_status)

    @invariant()
    def the_read_model_agrees_with_the_aggregates(self) -> None:
        for env in NotificationSource(self.squad.app.event_store).read(self.position + 1, 10**9):
            if self.projector.wants(env):
                self.projector.apply(env, self.docs)
            self.position = env.position
        doc = self.docs.get(run_doc_key(TENANT, self.run_id))
        run = self.run
        assert doc["execution_status"] == run.status
        for s in self.squad.app.studio.runs.all_sessions(run):
            row = doc["sessions"][s.agent_id]
            assert (row["live_status"], row["blocker_code"]) == (s.live_status, s.blocker_code), s.agent_id


TestVerbSequences = VerbSequences.TestCase
