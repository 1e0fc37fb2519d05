"""Checking throughput of the oracle: lockstep spec + target at exact, 10,000-block pool.

    .venv/bin/python benchmarks/oracle_throughput.py [OPS]

Each call is compared in full (ids, values, errors, watchers fired) together with the
state of every block it named or returned; the whole state every 1,000 calls and at
the end (kvpool.oracle.fastcheck). Prints calls per second per target; the median of
three runs. A figure, not a test: nothing here asserts on time.
"""

from __future__ import annotations

import statistics
import sys

from kvpool.oracle.fastcheck import run_random
from kvpool.oracle.targets import resolve

OPS = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000


def main() -> None:
    for name in ["reference", "vllm==0.33.0"]:
        target = resolve(name)
        rates = []
        for seed in range(3):
            events = name == "reference"  # vLLM: its per-block BlockRemoved (errata) stops a run
            result = run_random(
                target, ops=OPS, num_blocks=10_000, seed=seed, check_every=1000, events=events
            )
            if result.divergence:
                print(f"{name}: diverged: {result.divergence}")
                break
            rates.append(result.ops_per_second)
        if rates:
            print(
                f"{name:14s} {statistics.median(rates):10,.0f} checked calls/s at exact "
                f"(N=10,000, {OPS:,} calls, whole state every 1,000)"
            )


if __name__ == "__main__":
    main()
