"""cvc5 on one hot path's proof from source, as the deep profile's row counts it.

    .venv/bin/python benchmarks/hot_cvc5.py METHOD

``METHOD`` is ``touch`` (``pypool``), ``free_blocks``, ``unpin_blocks`` or
``get_new_blocks`` (``pyhot``). z3 proves the method's every obligation at each of its
proof's bounds (240 s each, as ``make proofs-deep``) with its queries recorded, then
``cvc5hot.tally`` asks cvc5 each query z3 proved, step by step, as the ``pool-source``
part's second-solver row does for all four methods at once (in one process there, so
one method alone here is its share of that row, not the row). Prints z3's statuses and
seconds, the method's line ("touch 50 of 67 (...)"), cvc5's asks and seconds, and each
query left open or in disagreement (exit status 1 on a disagreement).

Measured 2026-12-06 (2 shared cores; the load in the docs): see docs/06-z3.md,
"One method at a time, as its row counts it".
"""

from __future__ import annotations

import argparse
import time

from kvpool.proofs import cvc5hot, cvc5more, pyhot, pypool

METHODS = ("touch", *pyhot.METHODS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("method", choices=METHODS)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    with cvc5more.recorder(True, "pool source") as rec:
        if args.method == "touch":
            statuses = [r.status for r in pypool.prove(None, 240000)]
        else:
            statuses = [r.status for r in pyhot.prove((args.method,), None, 240000)]
    counts = {s: statuses.count(s) for s in sorted(set(statuses))}
    print(f"z3: {counts} in {time.perf_counter() - t0:.0f} s", flush=True)
    t1 = time.perf_counter()
    by_method, asks = cvc5hot.tally(rec)
    disagree = 0
    for m, t in by_method.items():
        print(f"cvc5: {t.line(m)}; {asks} asks in {time.perf_counter() - t1:.0f} s")
        for x in t.open:
            print(f"  open: {x}")
        for x in t.disagree:
            print(f"  DISAGREE: {x}")
        disagree += len(t.disagree)
    return 1 if disagree else 0


if __name__ == "__main__":
    raise SystemExit(main())
