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
    row = cvc5hot.row("pool-source", rec)  # the deep part's own row, for this method
    print(f"cvc5: {row['status']}, {row['seconds']:.0f} s: {row['bounds']}")
    if row["replay"]:
        print(f"  {row['replay']}")
    return 1 if row["status"] == "disagree" else 0


if __name__ == "__main__":
    raise SystemExit(main())
