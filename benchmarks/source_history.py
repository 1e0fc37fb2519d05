"""Does a formula translated from source depend on what the process translated before?

    .venv/bin/python benchmarks/source_history.py [--simplify rewrite|default]

Two processes of their own each translate every obligation proved from
``impl/pool.py``'s source (``pyhot.obligations`` for ``get_new_blocks``,
``free_blocks`` and ``unpin_blocks``, ``pypool.obligations`` for ``touch``; each
method at each of its proof's bounds), one in that order and one in the reverse order,
make each as z3 is asked it (``model.isolate``: a context of its own, canonical names
and term numbers) and hash its formulas (z3's structural hash of each). Prints the
number of obligations and how many differ between the two orders.

``--simplify default`` replaces the project's :func:`kvpool.proofs.rewrite.simplify`
by z3's default (disjunctions sorted by term number) in both processes: what the
proofs did before 2026-12-06's fix.

Measured 2026-12-06 (z3's Python package 5.4.1, 2 shared cores, ``make proofs-deep``
beside it): see docs/06-z3.md, "One obligation, one answer, in any process".
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

METHODS = ("get_new_blocks", "free_blocks", "touch", "unpin_blocks")

_CHILD = """
import json, sys
import z3
if sys.argv[2] == "default":
    z3_simplify = z3.simplify
    z3.simplify = lambda e, **k: z3_simplify(e, **{**k, "sort_disjunctions": True})
from kvpool.proofs import model, pyhot, pypool
out = {}
for method in json.loads(sys.argv[1]):
    if method == "touch":
        runs = [(b, r, pypool.obligations(None, "touch", b, r)) for b, r in pypool.PROOF_BOUNDS]
    else:
        bounds = pyhot.PROOF_BOUNDS[method]
        runs = [(b, r, pyhot.obligations(None, method, b, r)) for b, r in bounds]
    for bound, refused, obligations in runs:
        for step, hyps, goal in obligations:
            iso = model.isolate([*hyps, z3.Not(goal)])
            out[f"{method} {bound} {refused} {step}"] = [e.hash() for e in iso.exprs]
print(json.dumps(out))
"""


def translate(order: tuple[str, ...], simplify: str) -> Any:
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, json.dumps(order), simplify],
        stdout=subprocess.PIPE,
        text=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--simplify", choices=("rewrite", "default"), default="rewrite")
    args = ap.parse_args()
    children = [translate(METHODS, args.simplify), translate(METHODS[::-1], args.simplify)]
    forward, backward = (json.loads(c.communicate()[0]) for c in children)
    if any(c.returncode for c in children) or forward.keys() != backward.keys():
        sys.exit("a translation failed, or the two made different obligations")
    differ = [k for k in forward if forward[k] != backward[k]]
    print(f"simplify: {args.simplify}; {len(forward)} obligations, {len(differ)} differ")
    for k in differ[:10]:
        print("  differs:", k)


if __name__ == "__main__":
    main()
