"""cvc5 on one hot path's proof from source, as the deep profile's row counts it.

    .venv/bin/python benchmarks/hot_cvc5.py METHOD

``METHOD`` is ``touch`` (``pypool``), ``free_blocks``, ``unpin_blocks`` or
``get_new_blocks`` (``pyhot``). z3 proves the method's every obligation at each of its
proof's bounds (240 s each, as ``make proofs-deep``) with its queries recorded, then
``cvc5hot.row`` asks cvc5 each query z3 proved, step by step, as the ``pool-source``
part's second-solver row does for all four methods at once (in one process there, so
one method alone here is its share of that row, not the row). Prints z3's statuses and
seconds, then the row: its status and seconds, its bounds ("touch 50 of 67 (...)",
cvc5's asks) and the queries it names not confirmed (exit status 1 on a disagreement).

Measured 2026-12-06 (2 shared cores; the load in the docs): see docs/06-z3.md,
"One method at a time, as its row counts it".

    .venv/bin/python benchmarks/hot_cvc5.py METHOD --jobs 2

asks the row's queries two at a time, as the deep profile does (``runner.PROFILES``'
``cvc5_jobs``: steps 1 to 3e of each query in a process of its own, then the shape of
those left open in this one).

    .venv/bin/python benchmarks/hot_cvc5.py METHOD --step 3d [--queries 7,13,...]

asks one step alone instead of the row (``3b``, ``3c`` or ``3d``: ``cvc5hot.instantiated``,
``cores`` or ``hyp_cores`` on the query normalised as ``cvc5hot.confirm`` does), of each
proved query or of those at the given positions (0-based, in the order z3 asked them),
and prints each one's verdict, how, and wall seconds. Measured 2026-12-07 with
``touch --step 3d`` on the 17 queries the row left open: docs/06-z3.md, "The
hypothesis' core (step 3d), on those 17".
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import z3  # type: ignore[import-untyped]

from kvpool.proofs import cvc5hot, cvc5more, pyhot, pypool
from kvpool.proofs.model import Record

METHODS = ("touch", *pyhot.METHODS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("method", choices=METHODS)
    parser.add_argument("--step", choices=tuple(STEPS), help="ask this step alone")
    parser.add_argument("--queries", help="with --step: the positions asked (7,13,...)")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="the row's queries asked at a time (as the deep profile's 2)",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be 1 or more")
    t0 = time.perf_counter()
    with cvc5more.recorder(True, "pool source") as rec:
        if args.method == "touch":
            statuses = [r.status for r in pypool.prove(None, 240000)]
        else:
            statuses = [r.status for r in pyhot.prove((args.method,), None, 240000)]
    counts = {s: statuses.count(s) for s in sorted(set(statuses))}
    print(f"z3: {counts} in {time.perf_counter() - t0:.0f} s", flush=True)
    if args.step:
        return one_step(rec, STEPS[args.step], args.queries)
    row = cvc5hot.row("pool-source", rec, jobs=args.jobs)  # the deep part's row, this method
    print(f"cvc5: {row['status']}, {row['seconds']:.0f} s: {row['bounds']}")
    if row["replay"]:
        print(f"  {row['replay']}")
    return 1 if row["status"] == "disagree" else 0


STEPS: dict[str, Callable[[list[z3.BoolRef], z3.BoolRef], tuple[str, str]]] = {
    "3b": cvc5hot.instantiated,
    "3c": cvc5hot.cores,
    "3d": cvc5hot.hyp_cores,
}


def one_step(
    rec: list[Record],
    step: Callable[[list[z3.BoolRef], z3.BoolRef], tuple[str, str]],
    queries: str | None,
) -> int:
    """``step`` alone on each proved query of ``rec`` (or those at ``queries``)."""
    picked = set(map(int, queries.split(","))) if queries else None
    ok = n = 0
    for k, (name, hyp, goal, status) in enumerate(rec):
        if status != "proved" or (picked is not None and k not in picked):
            continue
        t0 = time.perf_counter()
        v, how = step(*cvc5hot.normalise(hyp, goal))
        n += 1
        ok += v == "unsat"
        print(f"{k} {name}: {v} ({how}), {time.perf_counter() - t0:.0f} s", flush=True)
    print(f"{ok} of {n} confirmed by the step alone")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
