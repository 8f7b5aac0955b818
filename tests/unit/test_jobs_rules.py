"""The jobs area's pure rules and the Job aggregate's life, without a database."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.jobs.job import FAILED, QUEUED, RUNNING, SUCCEEDED, Job, JobNotClaimable
from domain.jobs.policies import (
    binding_action,
    fingerprint,
    magic_packet,
    preflight,
    retry_at,
    sync_plan,
    wizard_problems,
)
from domain.shared.clock import parse, shift

T0 = "2026-01-02T03:04:05.000000Z"


def new_job(max_attempts: int = 3) -> Job:
    return Job(
        tenant="default", job_id="job-1", job_type="node_power_sleep", provider_kind="power_device",
        proposal_id=None, payload={"node_name": "n1"}, idempotency_key="", fingerprint="f",
        requested_by="op@example.com", queued_at=T0, max_attempts=max_attempts,
    )


# -- idempotency, retries --------------------------------------------------------------------------


def test_the_same_request_under_another_key_has_the_same_fingerprint_and_any_change_another() -> None:
    body = {"tenant_id": "t", "proposal_id": "p", "mode": "reconcile", "dry_run": False}
    assert fingerprint("access_sync", {**body, "idempotency_key": "a"}) == fingerprint("access_sync", {**body, "idempotency_key": "b"})
    assert fingerprint("access_sync", body) != fingerprint("access_sync", {**body, "dry_run": True})
    assert fingerprint("access_sync", body) != fingerprint("wizard_try", body)
    assert fingerprint("access_sync", dict(reversed(list(body.items())))) == fingerprint("access_sync", body)


@given(attempt=st.integers(min_value=1, max_value=40), base=st.floats(0.01, 5.0), cap=st.floats(5.0, 120.0))
def test_retry_backoff_doubles_and_never_exceeds_its_cap(attempt: int, base: float, cap: float) -> None:
    wait = (parse(retry_at(T0, attempt, base=base, cap=cap)) - parse(T0)).total_seconds()
    assert 0 < wait <= cap + 1e-6
    later = (parse(retry_at(T0, attempt + 1, base=base, cap=cap)) - parse(T0)).total_seconds()
    assert wait <= later <= min(cap, wait * 2) + 1e-5
    first = (parse(retry_at(T0, 1, base=base, cap=cap)) - parse(T0)).total_seconds()
    assert first == pytest.approx(base, abs=1e-5)


# -- access sync plans and preflight ----------------------------------------------------------------


def test_each_sync_mode_reads_and_moves_the_cursor_its_own_way() -> None:
    assert sync_plan("delta_cursor", "7", {}) == sync_plan("repository_dispatch", "7", {"repository": "a/b"})
    delta = sync_plan("delta_cursor", "7", {})
    assert (delta.read_from, delta.moves_cursor, delta.unlinks_missing) == ("7", True, False)
    full = sync_plan("reconcile", "7", {})
    assert (full.read_from, full.moves_cursor, full.unlinks_missing) == ("", True, True)
    asked = sync_plan("request", "7", {"subjects": ["Ann@Example.com"]})
    assert (asked.read_from, asked.moves_cursor, asked.subjects) == ("", False, frozenset({"ann@example.com"}))
    assert sync_plan("request", "7", {}).subjects is None
    with pytest.raises(ValueError):
        sync_plan("everything", "", {})


def test_preflight_names_each_mismatch_and_each_missing_connector() -> None:
    facts = {"idp": {"provider": "vcs", "schema": "2"}, "board": None}
    check = preflight({"idp": {"schema": "3", "provider": "vcs"}, "board": {"x": "1"}}, facts, "best_effort")
    assert check.failed_connectors == ["board", "idp"]
    assert check.mismatches == ["board: no such connector in the source", "idp.schema: expected '3', source says '2'"]
    assert check.as_dict()["skipped_connectors"] == ["board", "idp"]
    ok = preflight({"idp": {"schema": "2"}}, facts, "strict")
    assert ok.mismatches == [] and ok.as_dict()["skipped_connectors"] == []


def test_wizard_problems_come_from_the_connector_facts() -> None:
    facts = {"required_ssot_keys": "org, token_ref", "org": "acme"}
    assert wizard_problems("vcs", {}, None) == ["no connector named 'vcs' in the source"]
    assert wizard_problems("vcs", {"org": "acme", "token_ref": "vault:x"}, facts) == []
    problems = wizard_problems("vcs", {"org": "other"}, facts)
    assert problems == ["ssot lacks 'token_ref', which vcs requires", "ssot org='other' differs from the source's 'acme'"]


@pytest.mark.parametrize(
    ("exists", "differs", "apply", "mode", "confirm", "action"),
    [
        (False, False, False, "ask", False, "not_applied"),
        (False, False, True, "ask", False, "created"),
        (True, False, True, "force", False, "unchanged"),
        (True, True, True, "skip", True, "skipped"),
        (True, True, True, "force", False, "updated"),
        (True, True, True, "ask", True, "updated"),
        (True, True, True, "ask", False, "confirmation_required"),
    ],
)
def test_wizard_binding_follows_update_mode(exists: bool, differs: bool, apply: bool, mode: str, confirm: bool, action: str) -> None:
    assert binding_action(exists=exists, differs=differs, apply_binding=apply, update_mode=mode, confirm_update=confirm) == action


def test_magic_packet_is_six_ff_then_sixteen_macs() -> None:
    packet = magic_packet("52-54-00-AB-cd-01")
    assert len(packet) == 102
    assert packet[:6] == b"\xff" * 6
    assert all(packet[6 + 6 * i : 12 + 6 * i] == bytes([0x52, 0x54, 0x00, 0xAB, 0xCD, 0x01]) for i in range(16))
    with pytest.raises(ValueError):
        magic_packet("52:54:00")


# -- the Job aggregate -------------------------------------------------------------------------------


def test_a_job_runs_once_per_claim_and_ends_once() -> None:
    job = new_job()
    assert job.status == QUEUED and job.claimable(T0) and not job.claimable(shift(T0, -1))
    job.start(runner_id="r1", at=T0, lease_until=shift(T0, 300))
    assert (job.status, job.attempt) == (RUNNING, 1)
    assert not job.claimable(shift(T0, 10))  # its runner holds the lease
    job.succeed(result={"state": "asleep"}, at=shift(T0, 1))
    assert job.status == SUCCEEDED and job.ended and not job.claimable(shift(T0, 1000))
    with pytest.raises(JobNotClaimable):
        job.start(runner_id="r2", at=shift(T0, 1000), lease_until=shift(T0, 2000))


def test_a_failed_attempt_waits_for_its_retry_and_the_last_one_fails() -> None:
    job = new_job(max_attempts=2)
    job.start(runner_id="r1", at=T0, lease_until=shift(T0, 300))
    job.retry(error_message="no answer", at=shift(T0, 1), retry_at=shift(T0, 3))
    assert job.status == QUEUED and job.error_message == "no answer"
    assert not job.claimable(shift(T0, 2)) and job.claimable(shift(T0, 3))
    job.start(runner_id="r2", at=shift(T0, 3), lease_until=shift(T0, 300))
    assert job.attempt == 2 and not job.attempts_left
    job.fail(error_message="still no answer", at=shift(T0, 4))
    assert (job.status, job.error_message) == (FAILED, "still no answer")


def test_a_waiting_step_keeps_its_attempt_and_a_lost_runner_costs_one() -> None:
    job = new_job()
    job.start(runner_id="r1", at=T0, lease_until=shift(T0, 60))
    job.progress(phase="verify", detail={"sent": "sleep"}, at=T0, due_at=shift(T0, 5))
    assert job.claimable(shift(T0, 5)) and not job.lost(shift(T0, 5))
    job.start(runner_id="r2", at=shift(T0, 5), lease_until=shift(T0, 65))
    assert (job.attempt, job.phase) == (1, "verify")  # resumed, not restarted
    assert job.lost(shift(T0, 66))
    job.start(runner_id="r3", at=shift(T0, 66), lease_until=shift(T0, 99))
    assert (job.attempt, job.phase) == (2, "")  # a new attempt starts from its first step
