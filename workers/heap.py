"""The long-running processes' heap: what startup built is kept out of the cyclic collector's walks.

A full (oldest-generation) collection walks every container object the process holds and
stops every thread while it does. ``squadops serve`` holds the API and the workers: about
a hundred thousand objects built at startup (modules, the app's routes and schemas, the
container's parts), so each full collection paused the fan-out, the SSE writers and the
projector for 50-120 ms, every few seconds under a steady append rate; that, not the
database, set the live channel's p99 (``bench/bench_live.py``). What startup built lives as
long as the process: frozen, a full collection walks only what was made since (a few ms).

The youngest generation is collected once the objects made outnumber those freed by
Python's default of 700. A ticker pass holds its runs' new events and steps alive until
its one save (a projector its page), so at 700 a pass of 10,000 events set off about 300
young collections that walked objects all alive or all freed by reference counting right
after: 4-10 µs an event, up to a tenth of the pass (``bench/bench_backbone.py``). At
``YOUNG_THRESHOLD`` a pass sets off none or one, and each walks at most a few ms of objects.
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> int:
    """Collects once, then moves every object alive now into the collector's permanent
    generation (never walked again); answers how many. Call once, when startup is done:
    garbage made before the call and left in a cycle later is never reclaimed."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


# Objects made (net of those freed) before the youngest generation is collected.
YOUNG_THRESHOLD = 10_000


def collect_young_less_often() -> tuple[int, int, int]:
    """Sets the youngest generation's threshold to ``YOUNG_THRESHOLD`` (the older ones'
    stay); answers the thresholds now in force."""
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)
    return gc.get_threshold()
