"""The production-topology fault test ("soak"): real processes, real PostgreSQL and NATS.

2 API processes, 2 projectors, 2 tickers, 2 fan-outs and the watcher, each its own
``squadops`` process; 50 runs ticking (20 in the suite); readers, control verbs and SSE subscribers on both
API processes; then, in sequence, kill -9 of one process of each kind, PostgreSQL stopped
for 10 s (3 s in the suite), NATS stopped and started. At the end: every read model byte-equal to a rebuild,
every live event in JetStream once, every 201/202 command in the log once, no 500.

In the normal suite it runs one short fault cycle (``SoakConfig.short``: 20 runs,
PostgreSQL down 3 s); ``make soak`` (``SQUADOPS_SOAK_SECONDS``)
repeats the cycle with load in between until the time is spent. The counts are printed
either way (pytest shows them on failure, ``-s`` on success); ``SQUADOPS_SOAK_REPORT=FILE``
also writes them to a file, ``SQUADOPS_SOAK_LOGS=DIR`` keeps the processes' logs, ``SQUADOPS_SOAK_FAULTS`` picks
a subset of ``kill,postgres,nats`` (or ``none``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fault.soak import SoakConfig, run_soak

SOAK_SECONDS = float(os.environ.get("SQUADOPS_SOAK_SECONDS", "0") or 0)
REPORT_FILE = os.environ.get("SQUADOPS_SOAK_REPORT", "")
KEEP_LOGS = os.environ.get("SQUADOPS_SOAK_LOGS", "")
# A subset of kill,postgres,nats (or "none"), to tell which fault a failure comes from.
FAULTS = tuple(f for f in os.environ.get("SQUADOPS_SOAK_FAULTS", "kill,postgres,nats").split(",") if f and f != "none")


@pytest.mark.soak
@pytest.mark.timeout(int(SOAK_SECONDS * 1.5) + 300)
def test_production_topology_through_faults_loses_nothing_and_never_answers_500() -> None:
    config = SoakConfig(seconds=SOAK_SECONDS, keep_logs=KEEP_LOGS, faults=FAULTS)
    report = run_soak(config if SOAK_SECONDS else SoakConfig.short(keep_logs=KEEP_LOGS, faults=FAULTS))
    text = report.render()
    print(text)
    if REPORT_FILE:
        Path(REPORT_FILE).write_text(text + "\n")
    assert report.ok, "soak failed (counts printed above): " + "; ".join(report.failed())
