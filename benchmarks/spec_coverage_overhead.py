"""What measuring the spec's branch coverage costs a ``kvpool conform`` search.

    .venv/bin/python benchmarks/spec_coverage_overhead.py [--examples N] [--repeats R]
        [--targets reference,python:forks.shaped:BlockPool] [--levels safety,exact,robust]

For each (target, level): the same derandomized search (``kvpool.oracle.conform``, the
default 200 examples of 30 calls) with and without the measurement, one after the other,
``--repeats`` times; the figure is the median of the per-pair ratios (with / without),
so the machine's load drifts out of it; times are the process's CPU time. A figure,
not a test: nothing asserts on time.
``python:forks.*`` targets need ``PYTHONPATH=tests``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from kvpool.oracle.conformance import conform
from kvpool.oracle.targets import resolve


class Diverged(Exception):
    """The search found a violation: its time is a shrinking time, not a figure."""


def timed(target: str, level: str, examples: int, spec_coverage: bool) -> float:
    t = resolve(target)
    start = time.process_time()  # this process's CPU time: less swayed by other load
    report = conform(t, level, examples, spec_coverage=spec_coverage)
    seconds = time.process_time() - start
    if not report.conforms:
        raise Diverged(f"does not conform: {report.rule}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--targets", default="reference")
    ap.add_argument("--levels", default="safety,exact,robust")
    args = ap.parse_args(argv)
    for target in args.targets.split(","):
        for level in args.levels.split(","):
            ratios, plain = [], []
            try:
                for _ in range(args.repeats):
                    off = timed(target, level, args.examples, False)
                    on = timed(target, level, args.examples, True)
                    ratios.append(on / off)
                    plain.append(off)
            except Diverged as exc:
                print(f"{target:28s} {level:7s} {exc} (no figure)", flush=True)
                continue
            print(
                f"{target:28s} {level:7s} {args.examples} examples: "
                f"x{statistics.median(ratios):.2f} with spec coverage "
                f"(median of {args.repeats} pairs; {statistics.median(plain):.1f} s without)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
