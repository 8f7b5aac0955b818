"""The long-running processes' heap: what startup built is kept out of the cyclic collector's walks.

A full (oldest-generation) collection walks every container object the process holds and
stops every thread while it does. ``squadops serve`` holds the API and the workers: about
a hundred thousand objects built at startup (modules, the app's routes and schemas, the
container's parts), so each full collection paused the fan-out, the SSE writers and the
projector for 50-120 ms, every few seconds under a steady append rate; that, not the
database, set the live channel's p99 (``bench/bench_live.py``). What startup built lives as
long as the process: frozen, a full collection walks only what was made since (a few ms).
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
