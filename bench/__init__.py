"""Benchmarks (not tests): each ``bench_*.py`` module measures and prints side-by-side ratios."""
