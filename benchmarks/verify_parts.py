"""``make verify``'s parts, side by side: this tree against a git revision, CPU seconds each.

    .venv/bin/python benchmarks/verify_parts.py --base main proofs:differential oracle:catalogue:1/4

Each part (``RUNNER:PART``, as ``python -m kvpool.verify --json``'s "parts" name them) runs
in a fresh interpreter exactly as ``make verify`` runs it (``python -m kvpool.verify
--task RUNNER --part PART``), once in a copy of the base revision (``git archive``) and
once in this tree, alternately, ``--reps`` times. It prints each part's median CPU
seconds (the part's process and its children: what the 2 cores of ``make verify`` are
shared by) on both sides and their ratio, and whether the two payloads are equal once
their timings are left out: a speed-up must not change what a part checks.

Compare the ratio, not the absolute figures (the machine is shared). Runs are
interleaved so that both sides see the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

TIMING_KEYS = frozenset({"seconds", "cpu"})
"""Fields that hold a measured time: left out when two payloads are compared."""


def checkout(rev: str, into: Path) -> Path:
    """The tree of ``rev`` (no .git), unpacked into ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run_part(tree: Path, runner: str, part: str, profile: str) -> dict[str, Any]:
    """One part in a fresh interpreter, as ``make verify`` spawns it: its result file."""
    with tempfile.TemporaryDirectory(prefix="kvpool-part-") as tmp:
        out = Path(tmp) / "out.json"
        env = {**os.environ, "PYTHONPATH": str(tree)}
        cmd = [sys.executable, "-m", "kvpool.verify", "--profile", profile]
        cmd += ["--task", runner, "--part", part, "--out", str(out)]
        subprocess.run(cmd, cwd=tree, env=env, check=False, capture_output=True)
        if not out.exists():
            return {"error": "no result", "cpu": float("nan")}
        result: dict[str, Any] = json.loads(out.read_text())
        return result


def untimed(x: Any) -> Any:
    """``x`` without its timing fields (at any depth)."""
    if isinstance(x, dict):
        return {k: untimed(v) for k, v in x.items() if k not in TIMING_KEYS}
    if isinstance(x, list):
        return [untimed(v) for v in x]
    return x


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="+", metavar="RUNNER:PART")
    parser.add_argument("--base", default="main", help="the git revision to compare with")
    parser.add_argument("--reps", type=int, default=1, help="runs of each part on each side")
    parser.add_argument("--profile", choices=["fast", "full"], default="full")
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    args = parser.parse_args(argv)
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    named = [tuple(p.split(":", 1)) for p in args.parts]
    if any(len(p) != 2 for p in named):
        parser.error("a part is RUNNER:PART, as `python -m kvpool.verify --json` names it")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kvpool-base-") as tmp:
        base = checkout(args.base, Path(tmp))
        for runner, part in named:
            cpu: dict[str, list[float]] = {"base": [], "this": []}
            same = True
            for rep in range(args.reps):
                # alternate which side goes first, so neither always meets the same load
                order = [("base", base), ("this", REPO)]
                if rep % 2:
                    order.reverse()
                got = {}
                for side, tree in order:
                    got[side] = run_part(tree, runner, part, args.profile)
                    cpu[side].append(float(got[side].get("cpu", float("nan"))))
                same = same and untimed(got["base"].get("payload")) == untimed(
                    got["this"].get("payload")
                )
                errors = [f"{s}: {r['error']}" for s, r in got.items() if "error" in r]
                if errors:
                    print(f"  {runner}:{part}: " + "; ".join(errors), file=sys.stderr)
            b, t = statistics.median(cpu["base"]), statistics.median(cpu["this"])
            row = {
                "part": f"{runner}:{part}",
                "base_cpu": cpu["base"],
                "this_cpu": cpu["this"],
                "ratio": t / b if b else float("nan"),
                "same_payload": same,
            }
            rows.append(row)
            print(
                f"{runner}:{part:40s} base {b:7.1f} CPU s  this {t:7.1f} CPU s  "
                f"ratio {row['ratio']:.2f}  payload {'same' if same else 'DIFFERS'}",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps({"base": args.base, "rows": rows}, indent=2))
    return 0 if all(r["same_payload"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
