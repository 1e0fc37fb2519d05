"""Search power: does ``kvpool conform`` find a valid-use finding on vLLM 0.33.0, seed by seed?

    .venv/bin/python benchmarks/search_power.py [SEEDS] [--levels exact,robust]

For each level and each seed 0..SEEDS-1 it runs, one after the other (one process
each, as a user would)::

    kvpool conform --target vllm==0.33.0 --level LEVEL --seed SEED --json FILE

at the default budget (200 examples of up to 30 calls per search, ``--patience 3``: a
stage ends after 3 searches in a row found nothing), and records whether the first
finding is a valid-use erratum of ``docs/errata.md`` (``unpin-one-watcher``,
``removed-while-held`` or ``further-entries-unordered``) or another trace of valid
calls only, its signature, the process's CPU seconds and the search's
wall seconds (search and shrinking, from the report).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TARGET = "vllm==0.33.0"


def command(level: str, seed: int) -> list[str]:
    return ["kvpool", "conform", "--target", TARGET, "--level", level, "--seed", str(seed)]


def one(level: str, seed: int) -> dict[str, Any]:
    from kvpool.oracle.findings import FINDINGS

    valid = {f.name for f in FINDINGS if f.arises_from == "valid use"}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        argv = [sys.executable, "-m", "kvpool.oracle.cli", *command(level, seed)[1:]]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(
            [*argv, "--json", str(out)], capture_output=True, text=True, env=env, check=False
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"{' '.join(argv)}: exit {proc.returncode}\n{proc.stderr}")
        report = json.loads(out.read_text())
    first = report["findings"][0] if report["findings"] else None
    # valid use: a known valid-use erratum, or a trace of calls the spec accepts, with
    # no scripted watcher (the valid calls the exact search makes)
    steps = first["trace"]["steps"] if first and first["trace"] else []
    plain = bool(steps) and all(
        "call" in s and not (s.get("expected") or {}).get("error") for s in steps
    )
    return {
        "level": level,
        "seed": seed,
        "valid_use": bool(first and (first["erratum"] in valid or plain)),
        "erratum": first["erratum"] if first else None,
        "signature": first["signature"] if first else None,
        "seconds": report["seconds"],
        "cpu_seconds": round(cpu, 2),
    }


def run(seeds: int = 20, levels: tuple[str, ...] = ("exact", "robust")) -> dict[str, Any]:
    rows = [one(level, seed) for level in levels for seed in range(seeds)]
    return {"seeds": seeds, "levels": list(levels), "rows": rows}


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "| level | seeds with a valid-use finding | CPU seconds per seed (median, max) | "
        "wall seconds (median, max) | first findings |",
        "| --- | --- | --- | --- | --- |",
    ]
    for level in result["levels"]:
        rows = [r for r in result["rows"] if r["level"] == level]
        wall = sorted(r["seconds"] for r in rows)
        cpu = sorted(r["cpu_seconds"] for r in rows)
        found = sum(r["valid_use"] for r in rows)
        names: dict[str, int] = {}
        for r in rows:
            key = r["erratum"] or r["signature"] or "conforms"
            names[key] = names.get(key, 0) + 1
        what = ", ".join(f"`{k}` {n}" for k, n in sorted(names.items()))
        lines.append(
            f"| `{level}` | {found}/{len(rows)} | {cpu[len(cpu) // 2]:.1f}, {cpu[-1]:.1f} | "
            f"{wall[len(wall) // 2]:.1f}, {wall[-1]:.1f} | {what} |"
        )
    lines.append("")
    lines.append(
        "Each seed is one run of `" + " ".join(command("LEVEL", 0))[:-1] + "SEED` "
        "(default budget: searches of 200 examples of up to 30 calls, a stage ending after "
        "3 searches in a row found nothing, `--patience 3`), one after the other. CPU "
        "seconds are the process's (start-up, search and shrinking); wall seconds are the "
        "report's (search and shrinking) and count other work on the machine too. A "
        "`robust` run searches the valid calls first, as `exact` does, so for a seed its "
        "first finding is `exact`'s."
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seeds", nargs="?", type=int, default=20)
    parser.add_argument("--levels", default="exact,robust")
    args = parser.parse_args()
    result = run(args.seeds, tuple(args.levels.split(",")))
    for r in result["rows"]:
        print(json.dumps(r), flush=True)
    print(markdown(result))


if __name__ == "__main__":
    main()
