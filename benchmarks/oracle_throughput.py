"""Checking throughput of the oracle: every level, 1,000- and 10,000-block pools, each target.

    .venv/bin/python benchmarks/oracle_throughput.py [OPS] [--repeats R] [--json FILE]
        [--targets reference,vllm==0.33.0] [--sizes 1000,10000] [--levels safety,exact,robust]

One row per (target, level, pool size): checked calls per second, the median of
``--repeats`` runs (seeds 0, 1, ...) of ``OPS`` calls (default 100,000) of
:func:`kvpool.oracle.fastcheck.run_random`, which compares every call incrementally
and the whole state every 1,000 calls and at the end (see its docstring for what each
level compares). vLLM runs with KV events off: with them on, its per-copy
``BlockRemoved`` (errata: ``removed-while-held``) stops a run within a few thousand
calls. A run that finds a divergence stops there; its row says so (vLLM at ``robust``
stops at its first invalid call: it validates nothing, see docs/errata.md). A figure,
not a test: nothing here asserts on time, and timings on a shared machine are noisy.

``measure(...)`` returns the rows (:class:`Row`) for other scripts (benchmarks/report.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass

from kvpool.oracle.fastcheck import run_random
from kvpool.oracle.targets import resolve

TARGETS = ("reference", "vllm==0.33.0")
LEVELS = ("safety", "exact", "robust")
SIZES = (1_000, 10_000)
CHECK_EVERY = 1_000


@dataclass
class Row:
    target: str
    level: str
    num_blocks: int
    ops: int
    """Calls per run (the requested number; a diverging run made fewer)."""
    calls_per_second: float
    """Median over the runs that did not diverge (0.0 when every run diverged)."""
    runs: int
    divergence: str | None = None
    """The first run's divergence, if one diverged (then it is a finding, not a figure)."""

    def line(self) -> str:
        head = f"{self.target:14s} {self.level:7s} N={self.num_blocks:<6,d}"
        if self.divergence is not None and not self.calls_per_second:
            return f"{head} diverges: {self.divergence[:90]}"
        return (
            f"{head} {self.calls_per_second:10,.0f} checked calls/s "
            f"({self.ops:,} calls, whole state every {CHECK_EVERY:,}, median of {self.runs})"
        )


def measure(
    ops: int = 100_000,
    targets: tuple[str, ...] = TARGETS,
    levels: tuple[str, ...] = LEVELS,
    sizes: tuple[int, ...] = SIZES,
    repeats: int = 3,
) -> list[Row]:
    """Every (target, level, size) row; see the module docstring."""
    rows = []
    for name in targets:
        target = resolve(name)
        events = not name.startswith("vllm")
        for level in levels:
            for n in sizes:
                rates, divergence = [], None
                for seed in range(repeats):
                    result = run_random(
                        target,
                        ops=ops,
                        num_blocks=n,
                        seed=seed,
                        check_every=CHECK_EVERY,
                        events=events,
                        level=level,
                    )
                    if result.divergence:
                        divergence = f"after {result.ops} calls: {result.divergence}"
                        break
                    rates.append(result.ops_per_second)
                rate = statistics.median(rates) if rates else 0.0
                rows.append(Row(target.name, level, n, ops, rate, repeats, divergence))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ops", nargs="?", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--levels", default=",".join(LEVELS))
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--json", default=None, help="also write the rows as JSON")
    args = parser.parse_args(argv)
    rows = measure(
        args.ops,
        tuple(args.targets.split(",")),
        tuple(args.levels.split(",")),
        tuple(int(s) for s in args.sizes.split(",")),
        args.repeats,
    )
    for row in rows:
        print(row.line())
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump([asdict(r) for r in rows], out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
