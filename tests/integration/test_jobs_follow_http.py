"""A client follows its jobs over HTTP while the job runner works, on SQLite and PostgreSQL.

The runner runs in-process (as under ``make run``) against the built-in adapters: a local
connector directory and a power device on a loopback UDP socket. The job moves from
``queued`` to ``succeeded`` (or ``failed``, with its ``error_message``), the access sync's
checkpoint and identity links are then served by their endpoints, for the tenant the
tenant header names.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from litestar.testing import TestClient

from tests.jobs_support import (
    ANN,
    BOB,
    IDP,
    MAC,
    LoopbackPowerDevice,
    http,
    service,
    write_connector,
)

KEY = "automation-key-follow"
ACME = {"x-api-key": KEY, "X-Squadops-Tenant-Id": "acme"}


def follow(
    client: TestClient, job_id: str, headers: dict[str, str], timeout: float = 20.0
) -> tuple[dict[str, Any], list[str]]:
    """Polls ``GET /v1/jobs/{job_id}`` until the job ends; answers it and the statuses seen."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = client.get(f"/v1/jobs/{job_id}", headers=headers)
        if answer.status_code == 200:
            job = answer.json()
            if not seen or seen[-1] != job["status"]:
                seen.append(job["status"])
            if job["status"] in ("succeeded", "failed"):
                return job, seen
        else:  # not projected yet: never a 404 once the enqueue's position is given
            assert answer.status_code == 404 and not seen, answer.text
        time.sleep(0.02)  # the poll interval of this bounded wait: a client following its job
    raise AssertionError(f"job {job_id} did not end; statuses seen: {seen}")


def test_a_client_follows_its_jobs_to_their_end_and_reads_what_they_recorded(
    database_url: str, tmp_path: Path, device: LoopbackPowerDevice
) -> None:
    write_connector(tmp_path / "connectors", "idp", IDP, [ANN, BOB], scope="staff")
    changes = {
        "api_keys": (f"acme:{KEY}", f"default:{KEY}"),  # one key bound to two tenants
        "power_device_addr": device.addr,
        "power_device_timeout_seconds": 0.5,
        "job_retry_base_seconds": 0.01,
    }
    with (
        service(database_url, tmp_path, **changes) as container,
        http(container, workers=("projector", "jobs")) as client,
    ):
        body = {
            "tenant_id": "acme",
            "proposal_id": "proposal-1",
            "mode": "delta_cursor",
            "payload": {"scope": "staff"},
        }
        queued = client.post("/v1/jobs/sync/access", json=body, headers=ACME)
        assert queued.status_code == 202 and queued.json()["status"] == "queued", queued.text
        reads = {**ACME, "X-Squadops-Min-Position": queued.headers["X-Squadops-Position"]}
        job, seen = follow(client, queued.json()["id"], reads)
        assert seen[-1] == "succeeded" and set(seen) <= {"queued", "running", "succeeded"}, seen
        assert job["error_message"] is None and job["result"]["totals"]["linked"] == 2
        assert (job["tenant_id"], job["payload"]["payload"]) == ("acme", {"scope": "staff"})
        # Another tenant does not see the job.
        assert client.get(f"/v1/jobs/{job['id']}", headers={"x-api-key": KEY}).status_code == 404

        # The checkpoint the sync advanced, for the tenant of the header only.
        [checkpoint] = client.get("/v1/sync/checkpoints", headers=ACME).json()["items"]
        assert (checkpoint["tenant_id"], checkpoint["connector_id"], checkpoint["scope"]) == (
            "acme",
            "idp",
            "staff",
        )
        assert checkpoint["cursor_value"] == "2" and checkpoint["meta"]["mode"] == "delta_cursor"
        assert checkpoint["meta"]["linked_subjects"] == [
            "vcs|ann@example.com",
            "vcs|bob@example.com",
        ]
        assert (
            client.get("/v1/sync/checkpoints/idp", params={"scope": "staff"}, headers=ACME).json()
            == checkpoint
        )
        assert client.get("/v1/sync/checkpoints", headers={"x-api-key": KEY}).json() == {
            "items": []
        }
        other = client.get(
            "/v1/sync/checkpoints/idp", params={"scope": "staff"}, headers={"x-api-key": KEY}
        )
        assert other.status_code == 404 and other.json()["code"] == "checkpoint_not_found"

        # The identity links the sync wrote, looked up by username, user id or e-mail.
        ann = client.get("/v1/identity/links/vcs", params={"username": "ann"}, headers=ACME).json()
        assert (
            ann["subject_key"],
            ann["linked"],
            ann["provider_user_id"],
            ann["provider_username"],
        ) == (
            "ann@example.com",
            True,
            "101",
            "ann-gh",
        )
        bob = client.get(
            "/v1/identity/links/vcs", params={"email": "bob@example.com"}, headers=ACME
        ).json()
        assert (bob["linked"], bob["provider_user_id"]) == (True, "102")

        # A strict preflight that does not hold: the job fails at once, saying why.
        strict = {**body, "preflight_ssot": {"idp": {"schema": "3"}}}
        queued = client.post("/v1/jobs/sync/access", json=strict, headers=ACME)
        failed, seen = follow(client, queued.json()["id"], ACME)
        assert (
            seen[-1] == "failed"
            and "idp.schema: expected '3', source says '2'" in failed["error_message"]
        )
        assert failed["result"]["preflight"]["mismatches"]

        # Node power: the sleep command arrives at the device, then the node is verified asleep.
        sleep = {
            "tenant_id": "acme",
            "node_name": "gpu-1",
            "mac_address": MAC,
            "power_device_id": "pdu-1",
            "verify_after_seconds": 0,
        }
        queued = client.post("/v1/jobs/node-power/sleep", json=sleep, headers=ACME)
        assert queued.status_code == 202 and "result" not in queued.json()
        slept, seen = follow(client, queued.json()["id"], ACME)
        assert seen[-1] == "succeeded" and slept["result"]["state"] == "asleep"
        assert device.commands("sleep") == [
            f"squadops-power/1 sleep node=gpu-1 mac={MAC} device=pdu-1"
        ]
