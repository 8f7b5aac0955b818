"""``make bench``: runs every ``bench/bench_*.py`` (or the ones named) and prints results.

Each module has ``run(ctx) -> list[str]``; ``ctx`` offers real PostgreSQL/NATS URLs and
scratch databases. Targets are printed beside each measured figure, never asserted.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import traceback

import bench
from bench.context import BenchContext


def main(argv: list[str]) -> int:
    wanted = set(argv)
    names = sorted(
        m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_")
    )
    if wanted:
        names = [n for n in names if n in wanted or n.removeprefix("bench_") in wanted]
    failures = 0
    with BenchContext() as ctx:
        for name in names:
            module = importlib.import_module(f"bench.{name}")
            print(f"== {name}: {(module.__doc__ or '').strip().splitlines()[0]}", flush=True)
            started = time.perf_counter()
            try:
                for line in module.run(ctx):
                    print(f"   {line}", flush=True)
            except Exception:
                failures += 1
                traceback.print_exc()
            print(f"   ({time.perf_counter() - started:.1f}s)", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
