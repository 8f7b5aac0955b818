"""``squadops worker jobs`` as its own process, two copies at once, on PostgreSQL (the
production topology): every job runs, and no step (no UDP datagram) happens twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import settings_for
from tests.helpers import eventually
from tests.jobs_support import LoopbackPowerDevice
from tests.processes import ServiceProcess, service_env
from workers.bootstrap import build

pytestmark = [pytest.mark.pg, pytest.mark.timeout(120)]


def test_two_job_worker_processes_share_the_queue_and_run_each_step_once(
    pg_url: str, tmp_path: Path, device: LoopbackPowerDevice
) -> None:
    settings = settings_for(pg_url, data_dir=str(tmp_path), power_device_addr=device.addr)
    env = service_env(
        settings, SQUADOPS_DATA_DIR=str(tmp_path), SQUADOPS_POWER_DEVICE_ADDR=device.addr, SQUADOPS_JOB_POLL_SECONDS="0.05"
    )
    container = build(settings)
    workers = [ServiceProcess.worker(f"jobs-{n}", env, "jobs", log_path=tmp_path / f"jobs-{n}.log") for n in (1, 2)]
    try:
        container.start(("projector",))
        for worker in workers:
            worker.start()
        nodes = [f"node-{i}" for i in range(10)]
        for node in nodes:
            container.jobs.enqueue(
                tenant="default", job_type="node_power_sleep", provider_kind="power_device", proposal_id=None,
                request={"tenant_id": "default", "node_name": node, "mac_address": "52:54:00:12:34:56",
                         "power_device_id": "pdu-1", "verify_after_seconds": 0},
                requested_by="op",
            )

        def ended() -> bool:
            rows = [r for r in container.store.dump("jobs") if r.key.startswith("job/")]
            return len(rows) == len(nodes) and all(r.status == "succeeded" for r in rows)

        eventually(ended, timeout=60)
        sleeps = sorted(c.split()[2] for c in device.commands("sleep"))
        assert sleeps == sorted(f"node={n}" for n in nodes)  # each command sent exactly once
        assert [w.stop() for w in workers] == [0, 0]  # SIGTERM: each stops gracefully
    finally:
        for worker in workers:
            worker.close()
        container.close()
