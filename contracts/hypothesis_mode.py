"""The lockstep state machine under Hypothesis's CrossHair backend, beside random generation.

``python -m kvpool.contracts.hypothesis_mode [--examples N]`` (``make contracts-hypothesis``)
runs helper A's lockstep machine (:mod:`kvpool.oracle.machine`) on the real pool and
on each mutant of :mod:`.bugs`, once with Hypothesis's default (random) backend and
once with ``backend="crosshair"`` (the hypothesis-crosshair plugin: CrossHair picks
the choices symbolically, path by path), with the same example budget, and prints
which backend found each mutant and after how long. The real pool must pass both.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from kvpool.impl import BlockPool

from .bugs import POOLS


@dataclass
class Finding:
    target: str
    backend: str
    found: bool
    seconds: float
    detail: str


def hunt(target: str, backend: str, examples: int) -> Finding:
    from kvpool.oracle.machine import LockstepConfig, build_machine

    factory = POOLS.get(target, BlockPool)
    machine = build_machine(factory, LockstepConfig())
    base = settings(
        max_examples=examples,
        stateful_step_count=12,
        deadline=None,
        database=None,
        derandomize=backend != "crosshair",
        print_blob=False,
        backend=backend,
    )
    start = time.perf_counter()
    try:
        run_state_machine_as_test(machine, settings=base)
    except AssertionError as exc:
        return Finding(target, backend, True, time.perf_counter() - start, str(exc)[:160])
    except Exception as exc:  # a crash of the backend is reported, never counted as a find
        detail = f"{type(exc).__name__}: {exc}"[:160]
        return Finding(target, backend, False, time.perf_counter() - start, detail)
    return Finding(target, backend, False, time.perf_counter() - start, "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvpool.contracts.hypothesis_mode")
    parser.add_argument("--examples", type=int, default=30)
    args = parser.parse_args(argv)
    ok = True
    for target in ["real", *POOLS]:
        for backend in ("hypothesis", "crosshair"):
            f = hunt(target, backend, args.examples)
            verdict = "FOUND" if f.found else "-"
            print(f"{target:38} {backend:10} {verdict:6} {f.seconds:6.1f}s {f.detail[:90]}")
            if target == "real" and (f.found or f.detail):
                ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
