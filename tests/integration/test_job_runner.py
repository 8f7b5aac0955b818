"""The job runner against real adapters: a local connector directory, a power device on a
loopback UDP socket; claims on SQLite and on PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from domain.jobs.job import job_key
from domain.shared.clock import shift, utc_now_iso
from tests.helpers import eventually
from tests.jobs_support import ANN, BOB, IDP, MAC, LoopbackPowerDevice, service, write_connector
from workers.bootstrap import Container


@pytest.fixture
def app(sqlite_url: str, tmp_path: Path, device: LoopbackPowerDevice) -> Iterator[Container]:
    with service(sqlite_url, tmp_path, power_device_addr=device.addr, job_retry_base_seconds=0.01, power_device_timeout_seconds=0.3) as container:
        yield container


def settle(app: Container) -> None:
    while app.runner.run_once():
        pass


def run_job(app: Container, job_type: str, request: dict[str, Any], *, passes: int = 50) -> Any:
    """Queues a job and drives projector and runner until it ends; answers the job."""
    job, _ = app.jobs.enqueue(
        tenant="default", job_type=job_type, provider_kind="test", proposal_id=request.get("proposal_id"),
        request=request, requested_by="op@example.com",
    )
    assert app.job_runner is not None
    for _ in range(passes):
        settle(app)
        app.job_runner.run_once()
        current = app.jobs.get_job("default", job.job_id)
        if current.ended:
            settle(app)
            return current
        time.sleep(0.01)  # pacing between the runner's passes: a retry's backoff is due by the clock
    raise AssertionError(f"job did not end: {app.jobs.get_job('default', job.job_id).status}")


def links(app: Container) -> dict[str, bool]:
    from projections.engine.docs import decode

    rows = [decode(r.body) for r in app.store.dump("identity_links") if r.key.startswith("link/")]
    return {f"{d['provider']}|{d['subject_key']}": d["linked"] for d in rows}


def checkpoint(app: Container, connector_id: str = "idp", scope: str = "default") -> dict[str, Any]:
    from projections.engine.docs import decode

    raw = app.store.get("sync_checkpoints", f"chk/default/{connector_id}/{scope}")
    assert raw is not None
    return decode(raw)


def access(mode: str, **more: Any) -> dict[str, Any]:
    return {
        "tenant_id": "default", "proposal_id": "proposal-1", "mode": mode, "idempotency_key": None,
        "provider_kind": None, "payload": {}, "required_connectors": [], "preflight_ssot": {},
        "dry_run": False, "preflight_mode": "strict", **more,
    }


# -- access sync ---------------------------------------------------------------------------------


def test_delta_sync_links_and_unlinks_and_moves_its_checkpoint(app: Container, tmp_path: Path) -> None:
    source = tmp_path / "connectors"
    write_connector(source, "idp", IDP, [ANN, BOB])
    job = run_job(app, "access_sync", access("delta_cursor"))
    assert job.status == "succeeded" and job.result["totals"]["linked"] == 2
    assert links(app) == {"vcs|ann@example.com": True, "vcs|bob@example.com": True}
    assert checkpoint(app)["cursor_value"] == "2"
    write_connector(source, "idp", IDP, [{**BOB, "linked": False}, {"subject_key": "carl@example.com", "provider_user_id": "103"}])
    job = run_job(app, "access_sync", access("delta_cursor"))
    report = job.result["connectors"][0]
    assert (report["from_cursor"], report["to_cursor"], report["records"]) == ("2", "4", 2)
    assert links(app) == {"vcs|ann@example.com": True, "vcs|bob@example.com": False, "vcs|carl@example.com": True}
    assert checkpoint(app)["meta"]["linked_subjects"] == ["vcs|ann@example.com", "vcs|carl@example.com"]
    again = run_job(app, "access_sync", access("delta_cursor"))
    assert again.result["totals"]["records"] == 0 and checkpoint(app)["cursor_value"] == "4"


def test_reconcile_unlinks_who_the_source_no_longer_names_and_request_reads_only_the_named(app: Container, tmp_path: Path) -> None:
    source = tmp_path / "connectors"
    write_connector(source, "idp", IDP, [ANN, BOB], scope="staff")
    payload = {"scope": "staff"}
    run_job(app, "access_sync", access("reconcile", payload=payload))
    assert links(app) == {"vcs|ann@example.com": True, "vcs|bob@example.com": True}
    (source / "idp" / "staff.jsonl").write_text('{"subject_key": "ann@example.com", "provider_user_id": "101"}\n')
    job = run_job(app, "access_sync", access("reconcile", payload=payload))
    assert job.result["totals"]["unlinked"] == 1 and links(app)["vcs|bob@example.com"] is False
    assert checkpoint(app, scope="staff")["cursor_value"] == "1"
    write_connector(source, "idp", IDP, [{**BOB, "provider_user_id": "202"}, {"subject_key": "dan@example.com", "provider_user_id": "4"}], scope="staff")
    asked = run_job(app, "access_sync", access("request", payload={**payload, "subjects": ["BOB@example.com"]}))
    assert asked.result["totals"]["linked"] == 1 and "vcs|dan@example.com" not in links(app)
    assert checkpoint(app, scope="staff")["cursor_value"] == "1"  # a request leaves the cursor alone


def test_dry_run_reports_without_recording_and_dispatch_keeps_its_trigger(app: Container, tmp_path: Path) -> None:
    write_connector(tmp_path / "connectors", "idp", IDP, [ANN, BOB, {"provider_user_id": "x"}])
    dry = run_job(app, "access_sync", access("delta_cursor", dry_run=True))
    assert dry.result["totals"] == {"linked": 2, "records": 3, "rejected": 1, "relinked": 0, "unchanged": 0, "unlinked": 0}
    assert links(app) == {} and app.store.dump("sync_checkpoints") == []
    dispatch = {"event_type": "access-changed", "repository": "acme/api"}
    run_job(app, "access_sync", access("repository_dispatch", payload=dispatch))
    assert checkpoint(app)["meta"]["dispatch"] == dispatch and len(links(app)) == 2


def test_preflight_strict_fails_best_effort_skips_and_required_connectors_must_exist(app: Container, tmp_path: Path) -> None:
    source = tmp_path / "connectors"
    write_connector(source, "idp", IDP, [ANN])
    write_connector(source, "board", {"provider": "board", "schema": "1"}, [BOB])
    expect = {"idp": {"schema": "3"}, "board": {"schema": "1"}}
    strict = run_job(app, "access_sync", access("delta_cursor", preflight_ssot=expect))
    assert strict.status == "failed" and strict.attempt == 1  # not worth a retry
    assert "idp.schema: expected '3', source says '2'" in strict.error_message
    best = run_job(app, "access_sync", access("delta_cursor", preflight_ssot=expect, preflight_mode="best_effort"))
    assert best.status == "succeeded" and best.result["preflight"]["skipped_connectors"] == ["idp"]
    assert [c["connector_id"] for c in best.result["connectors"]] == ["board"]
    assert links(app) == {"board|bob@example.com": True}
    missing = run_job(app, "access_sync", access("delta_cursor", required_connectors=["idp", "hr"]))
    assert missing.status == "failed" and "hr" in missing.error_message


# -- wizard try -------------------------------------------------------------------------------------


def test_wizard_try_validates_and_binds_per_update_mode(app: Container, tmp_path: Path) -> None:
    write_connector(tmp_path / "connectors", "vcs", {"provider": "vcs", "org": "acme", "required_ssot_keys": "org,token_ref"}, [])
    base = {"tenant_id": "default", "proposal_id": "proposal-1", "provider": "vcs", "idempotency_key": None,
            "strict": False, "apply_binding": True, "confirm_update": False, "update_mode": "ask", "enabled": None}
    strict = run_job(app, "wizard_try", {**base, "ssot": {"org": "acme"}, "strict": True})
    assert strict.status == "failed" and "token_ref" in strict.error_message
    created = run_job(app, "wizard_try", {**base, "ssot": {"org": "acme", "token_ref": "vault:a"}})
    assert created.result["binding"]["action"] == "created" and created.result["valid"]
    changed = {**base, "ssot": {"org": "acme", "token_ref": "vault:b"}}
    assert run_job(app, "wizard_try", changed).result["binding"]["action"] == "confirmation_required"
    assert run_job(app, "wizard_try", {**changed, "update_mode": "skip"}).result["binding"]["action"] == "skipped"
    assert run_job(app, "wizard_try", {**changed, "confirm_update": True}).result["binding"]["action"] == "updated"
    warned = run_job(app, "wizard_try", {**changed, "ssot": {"org": "other", "token_ref": "vault:b"}, "apply_binding": False})
    assert warned.result["binding"]["action"] == "not_applied" and warned.result["warnings"]
    kinds = [n.topic.rpartition(":")[2] for n in app.event_store.recorder.select_notifications(start=1, limit=1000)]
    assert kinds.count("ProviderBinding.Applied") == 1 and kinds.count("ProviderBinding.Updated") == 1


# -- node power --------------------------------------------------------------------------------------


def sleep_request(node: str, mac: str = MAC, **more: Any) -> dict[str, Any]:
    return {"tenant_id": "default", "node_name": node, "mac_address": mac, "idempotency_key": None,
            "proposal_id": None, "power_device_id": "pdu-1", "verify_after_seconds": 0, **more}


def test_sleep_sends_the_command_once_and_verifies_the_node_asleep(app: Container, device: LoopbackPowerDevice) -> None:
    job = run_job(app, "node_power_sleep", sleep_request("gpu-1"))
    assert job.status == "succeeded" and job.result["state"] == "asleep"
    assert device.commands("sleep") == [f"squadops-power/1 sleep node=gpu-1 mac={MAC} device=pdu-1"]
    assert len(device.commands("state")) == 1


def test_the_node_is_asked_for_its_state_only_verify_after_seconds_after_the_command(app: Container, device: LoopbackPowerDevice) -> None:
    job, _ = app.jobs.enqueue(tenant="default", job_type="node_power_sleep", provider_kind="power_device",
                              proposal_id=None, request=sleep_request("gpu-6", verify_after_seconds=1), requested_by="op")
    settle(app)
    assert app.job_runner is not None
    app.job_runner.run_once()
    waiting = app.jobs.get_job("default", job.job_id)
    sent_at = waiting.phase_detail["sent_at"]
    assert (waiting.status, waiting.phase, waiting.due_at) == ("running", "verify", shift(sent_at, 1))
    # The datagram was sent; the device's listener thread takes it in on its own time.
    eventually(lambda: len(device.commands("sleep")) == 1)
    assert device.commands("state") == []
    settle(app)
    app.job_runner.run_once()  # not due yet: nothing is asked
    assert device.commands("state") == []
    done = run_job_to_end(app, job.job_id)
    assert done.status == "succeeded" and done.result["verified_at"] >= shift(sent_at, 1)
    assert len(device.commands("sleep")) == 1 and len(device.commands("state")) == 1


def run_job_to_end(app: Container, job_id: str, passes: int = 300) -> Any:
    assert app.job_runner is not None
    for _ in range(passes):
        settle(app)
        app.job_runner.run_once()
        current = app.jobs.get_job("default", job_id)
        if current.ended:
            return current
        time.sleep(0.01)  # pacing between the runner's passes: a retry's backoff is due by the clock
    raise AssertionError(f"job did not end: {app.jobs.get_job('default', job_id).status}")


def test_the_wake_on_lan_magic_packet_arrives_byte_for_byte(app: Container, device: LoopbackPowerDevice) -> None:
    job = run_job(app, "node_power_wake", sleep_request("gpu-2", mac="0A-1b-2C-3d-4E-5f"))
    assert job.status == "succeeded" and job.result["state"] == "awake"
    [packet] = device.magic_packets()
    assert len(packet) == 102
    assert list(packet[:6]) == [0xFF] * 6
    mac = [0x0A, 0x1B, 0x2C, 0x3D, 0x4E, 0x5F]
    for repeat in range(16):
        assert list(packet[6 + 6 * repeat : 12 + 6 * repeat]) == mac, repeat


def test_a_node_that_never_answers_is_retried_with_backoff_then_failed(sqlite_url: str, tmp_path: Path) -> None:
    silent = LoopbackPowerDevice(answers=False)
    try:
        with service(
            sqlite_url, tmp_path, power_device_addr=silent.addr, job_max_attempts=2,
            job_retry_base_seconds=0.05, power_device_timeout_seconds=0.1,
        ) as app:
            job = run_job(app, "node_power_sleep", sleep_request("gpu-3"))
            assert (job.status, job.attempt) == ("failed", 2)
            assert "reports 'unknown', not 'asleep'" in job.error_message
            assert len(silent.commands("sleep")) == 2  # a new attempt sends the command again
            kinds = [n.topic.rpartition(":")[2] for n in app.event_store.recorder.select_notifications(start=1, limit=100)]
            assert kinds.count("Job.Retried") == 1 and kinds.count("Job.Failed") == 1
    finally:
        silent.close()


def test_an_attempt_whose_runner_vanished_is_taken_over_after_its_lease(app: Container, device: LoopbackPowerDevice) -> None:
    job, _ = app.jobs.enqueue(tenant="default", job_type="node_power_sleep", provider_kind="power_device",
                              proposal_id=None, request=sleep_request("gpu-4"), requested_by="op")
    now = utc_now_iso()
    stuck = app.event_store.repository.get(job_key("default", job.job_id))
    stuck.start(runner_id="gone", at=now, lease_until=shift(now, 0.3))
    app.event_store.save(stuck)
    settle(app)
    assert app.job_runner is not None
    app.job_runner.run_once()
    assert app.jobs.get_job("default", job.job_id).attempt == 1  # the lease still holds

    def taken_over() -> bool:
        settle(app)
        app.job_runner.run_once()  # type: ignore[union-attr]
        return app.jobs.get_job("default", job.job_id).ended

    eventually(taken_over, timeout=10, interval=0.02)  # once the 0.3 s lease has run out
    done = app.jobs.get_job("default", job.job_id)
    assert (done.status, done.attempt) == ("succeeded", 2)


def test_concurrent_enqueues_under_one_key_race_to_one_job(app: Container) -> None:
    barrier = threading.Barrier(20)
    found: list[tuple[str, bool]] = []

    def enqueue() -> None:
        barrier.wait()
        job, created = app.jobs.enqueue(tenant="default", job_type="node_power_sleep", provider_kind="power_device",
                                        proposal_id=None, request=sleep_request("gpu-5", idempotency_key="k"), requested_by="op")
        found.append((job.job_id, created))

    threads = [threading.Thread(target=enqueue) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({job_id for job_id, _ in found}) == 1 and sum(created for _, created in found) == 1


# -- two runners: FOR UPDATE SKIP LOCKED on PostgreSQL, BEGIN IMMEDIATE on SQLite ----------------------


def test_two_runners_never_execute_one_job_twice(database_url: str, tmp_path: Path, device: LoopbackPowerDevice) -> None:
    nodes = [f"node-{i}" for i in range(12)]
    changes = {"power_device_addr": device.addr, "job_poll_seconds": 0.01}
    with service(database_url, tmp_path, **changes) as first, service(database_url, tmp_path, **changes) as second:
        for node in nodes:
            first.jobs.enqueue(tenant="default", job_type="node_power_sleep", provider_kind="power_device",
                               proposal_id=None, request=sleep_request(node), requested_by="op")
        first.start(("projector", "jobs"))
        second.start(("jobs",))

        def all_ended() -> bool:
            rows = [r for r in first.store.dump("jobs") if r.key.startswith("job/")]
            return len(rows) == len(nodes) and all(r.status == "succeeded" for r in rows)

        eventually(all_ended, timeout=30)
        sleeps = device.commands("sleep")
        assert sorted(c.split()[2] for c in sleeps) == sorted(f"node={n}" for n in nodes)  # each exactly once
        kinds = [n.topic.rpartition(":")[2] for n in first.event_store.recorder.select_notifications(start=1, limit=1000)]
        assert kinds.count("Job.Progressed") == len(nodes) and kinds.count("Job.Succeeded") == len(nodes)
        assert first.job_runner is not None and second.job_runner is not None
        steps = sum(r.outcomes.get("waiting", 0) + r.outcomes.get("succeeded", 0) for r in (first.job_runner, second.job_runner))
        assert steps == 2 * len(nodes)
