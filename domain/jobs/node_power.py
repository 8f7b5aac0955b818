"""The node power jobs: a command to the power device, then the node's state verified.

First step: the sleep command (or, to wake, the wake-on-LAN magic packet) goes to the
power device, and that it went is recorded (``Job.Progressed``), so a replay or a retry of
the verification never sends it again. Second step, ``verify_after_seconds`` later: the
device is asked for the node's state; a node not yet in the expected state fails the
attempt (retried with backoff, which sends the command again).
"""

from __future__ import annotations

from typing import Any

from domain.jobs.job import NODE_POWER_WAKE
from domain.jobs.outcomes import Done, JobContext, JobFailure, Wait
from domain.jobs.policies import EXPECTED_STATE
from domain.jobs.ports import PowerDeviceError, PowerTarget
from domain.shared.clock import shift

VERIFY = "verify"


def target_of(job: Any) -> PowerTarget:
    request = job.payload
    return PowerTarget(
        node_name=str(request["node_name"]),
        mac_address=str(request["mac_address"]),
        power_device_id=str(request.get("power_device_id") or ""),
    )


def run_node_power(job: Any, ctx: JobContext) -> Done | Wait:
    target = target_of(job)
    expected = EXPECTED_STATE[job.job_type]
    if job.phase != VERIFY:
        try:
            sent = ctx.power.wake(target) if job.job_type == NODE_POWER_WAKE else ctx.power.sleep(target)
        except PowerDeviceError as exc:
            raise JobFailure(f"The power device could not be reached: {exc}", retryable=True) from None
        delay = float(job.payload.get("verify_after_seconds") or 0)
        return Wait(VERIFY, {"sent": sent, "sent_at": ctx.now}, shift(ctx.now, delay))
    try:
        state = ctx.power.state(target)
    except PowerDeviceError as exc:
        raise JobFailure(f"The power device could not be asked for {target.node_name}: {exc}", retryable=True) from None
    if state != expected:
        raise JobFailure(
            f"Node {target.node_name} reports {state!r}, not {expected!r}, "
            f"{job.payload.get('verify_after_seconds', 0)} s after the command.",
            retryable=True,
        )
    return Done(
        {
            "node_name": target.node_name,
            "mac_address": target.mac_address,
            "power_device_id": target.power_device_id,
            "state": state,
            "command": job.phase_detail.get("sent", {}),
            "sent_at": job.phase_detail.get("sent_at", ""),
            "verified_at": ctx.now,
        }
    )
