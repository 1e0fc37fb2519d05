"""``python -m kvpool.proofs [--deep|--fast] [--json FILE]``: run the proofs, print the table."""

from __future__ import annotations

import argparse
import json
import sys

from .runner import ObligationResult, run


def table(rows: list[ObligationResult]) -> str:
    head = f"{'obligation':58} {'kind':12} {'invariant':26} {'bounds':44} {'result':17} {'time':>8}"
    out = [head, "-" * len(head)]
    for r in rows:
        out.append(
            f"{r.obligation[:58]:58} {r.kind:12} {','.join(r.invariants)[:26]:26} "
            f"{r.bounds[:44]:44} "
            f"{r.status:17} {r.seconds:7.2f}s"
        )
        if r.replay:
            out.append(f"    {r.replay}")
        for t in r.trace[:6]:
            out.append(f"      {t}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kvpool.proofs")
    ap.add_argument("--deep", action="store_true", help="raise the bounds")
    ap.add_argument("--fast", action="store_true", help="the subset `make test` runs")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    a = ap.parse_args(argv)
    profile = "deep" if a.deep else "fast" if a.fast else "default"
    rows = run(profile)
    proofs = [r for r in rows if r.kind != "mutant"]
    muts = [r for r in rows if r.kind == "mutant"]
    print(f"== obligations ({profile}) ==")
    print(table(proofs))
    print("\n== mutants (each must be refuted, its trace replayed on the buggy spec) ==")
    print(table(muts))
    bad = [r for r in rows if not r.ok]
    print(
        f"\n{len(rows) - len(bad)}/{len(rows)} ok"
        + (f"; NOT ok: {[r.obligation for r in bad]}" if bad else "")
    )
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"profile": profile, "results": [r.as_dict() for r in rows]}, f, indent=2)
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
