"""Does an isolated obligation's answer depend on what the process did before?

    .venv/bin/python benchmarks/isolation.py [--seeds 2] [--timeout-ms 5000]

The obligation: symsorts' agreement check for CacheBlocks with the bug
``cache-skips-index``, its conjuncts asked apart at N = 3 (what
``symsorts.agreement_goals(..., refute=True)`` asks; the two that a bug in the index
falsifies are asked here). Each run is a process of its own that first "pollutes" the
main z3 context and then asks them at z3 seeds 0..SEEDS-1, either through the old path
(``translate`` into a fresh context, the main context's fresh-name counter inherited)
or through :func:`kvpool.proofs.model.isolated_check` (printed, renamed canonically,
parsed into a fresh context). Pollutions: none; one ``z3.FreshInt()``;
two; 10,000; 10,000 in another context (does not touch the main context's counter);
10,000 plain ``z3.Int`` names (symbols only).

Prints one line per (pollution, path): the answers, and whether they are the same as
without pollution. Measured 2026-12-06 (z3's Python package 5.4.1, 2 shared cores; 40
CPU s, 3 min): the old path's answers changed after one, two and 10,000 FreshInts (e.g.
``unknown unknown refuted unknown`` unpolluted, ``refuted unknown unknown unknown``
after one); the new path's were ``refuted unknown refuted unknown`` under every
pollution.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
POLLUTIONS = ("none", "fresh:1", "fresh:2", "fresh:10000", "otherctx:10000", "names:10000")


def pollute(how: str) -> None:
    import z3  # type: ignore[import-untyped]

    kind, _, n = how.partition(":")
    if kind == "fresh":
        for _ in range(int(n)):
            z3.FreshInt()
    elif kind == "otherctx":
        c = z3.Context()
        for _ in range(int(n)):
            z3.FreshInt(ctx=c)
    elif kind == "names":
        for i in range(int(n)):
            z3.Int(f"x!{i}")


def old_check(hyp: list[Any], goal: Any, timeout_ms: int, seed: int) -> str:
    """The path before: ``translate`` into a fresh context."""
    import z3

    ctx = z3.Context()
    sol = z3.Solver(ctx=ctx)
    sol.set("timeout", timeout_ms)
    sol.set("random_seed", seed)
    for a in [*hyp, z3.Not(goal)]:
        sol.add(a.translate(ctx))
    return str(sol.check())


def child(how: str, path: str, seeds: int, timeout_ms: int) -> list[str]:
    pollute(how)
    from kvpool.proofs import symsorts
    from kvpool.proofs.model import isolated_check

    (ob,) = [
        o
        for o in symsorts.agreement_obligations(frozenset({"cache-skips-index"}))
        if o[1] == "CacheBlocks"
    ]
    _, _, hyp, goal, ctx = ob
    conj = symsorts._conjuncts(goal)
    hyp = [*hyp, ctx[0] == 3]
    out: list[str] = []
    for c in conj[13:15]:
        for seed in range(seeds):
            if path == "old":
                out.append(old_check(hyp, c, timeout_ms, seed).replace("sat", "refuted"))
            else:
                out.append(isolated_check(hyp, c, timeout_ms, seed)[0])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--timeout-ms", type=int, default=5000)
    ap.add_argument("--child", default=None)
    ap.add_argument("--path", default="new")
    a = ap.parse_args()
    if a.child is not None:
        print(json.dumps(child(a.child, a.path, a.seeds, a.timeout_ms)))
        return
    base: dict[str, list[str]] = {}
    for how in POLLUTIONS:
        for path in ("old", "new"):  # each in a process of its own
            args = ["--child", how, "--path", path, "--seeds", str(a.seeds)]
            run = subprocess.run(
                [sys.executable, __file__, *args, "--timeout-ms", str(a.timeout_ms)],
                capture_output=True,
                text=True,
                check=True,
            )
            res = json.loads(run.stdout.strip().splitlines()[-1])
            base.setdefault(path, res)
            same = "same" if res == base[path] else "DIFFERENT"
            print(f"{how:>15} {path}: {' '.join(res)}  ({same} as unpolluted)", flush=True)


if __name__ == "__main__":
    main()
