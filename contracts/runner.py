"""Run CrossHair over the contract entry points and report per contract.

``python -m kvpool.contracts [--profile fast|full] [--mutant NAME]`` (``make contracts``
runs the full profile) prints one line per contract -- ``confirmed`` (CrossHair
explored every path), ``no counterexample within budget`` (it stopped at the time
limit: evidence, not proof) or ``counterexample`` (with CrossHair's message) -- and
exits non-zero on any counterexample. :func:`run` returns the same as data for
``make verify``. A status is only ever CrossHair's own verdict, parsed from its output.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal

Status = Literal["confirmed", "no counterexample within budget", "counterexample"]

# (per-condition, per-path) CPU-second limits. 8 entry points, 2 at a time.
BUDGETS: dict[str, tuple[float, float]] = {"fast": (5.0, 2.0), "full": (15.0, 3.0)}

ENTRY_POINTS: dict[str, tuple[str, ...]] = {
    "get_new_blocks": ("INV-LIST", "INV-FREE", "INV-REF", "INV-NULL", "INV-CACHE", "ORD-HANDOUT"),
    "free_blocks": ("INV-LIST", "INV-FREE", "INV-REF", "INV-NULL", "ORD-RELEASE", "ERR-ATOMIC"),
    "touch": ("INV-LIST", "INV-FREE", "INV-REF", "INV-NULL", "ERR-ATOMIC"),
    "unpin_blocks": ("INV-LIST", "INV-FREE", "INV-REF", "INV-NULL", "ORD-UNPIN", "ERR-ATOMIC"),
    "cache_blocks": ("INV-CACHE", "INV-NULL", "INV-FREE", "ERR-ATOMIC"),
    "evict_blocks": ("INV-CACHE", "INV-FREE", "INV-LIST", "ERR-ATOMIC"),
    "reset_prefix_cache": ("INV-CACHE", "INV-FREE", "INV-WATCH"),
    "queries": ("INV-FREE", "INV-NULL", "RES-NUMFREE", "RES-CACHED"),
}
"""Entry point of :mod:`kvpool.contracts.harness` -> the invariants and rules it checks.

Every entry point also evaluates the docstring contracts of the method it calls
(``BlockPool.<name>`` and, through it, ``FreeKVCacheBlockQueue``'s), which state
INV-LIST, INV-FREE, INV-REF, INV-NULL and INV-CACHE as class invariants.
"""

BOUNDED: dict[str, tuple[str, ...]] = {
    "queue_popleft_n": ("INV-LIST", "ORD-HANDOUT"),
    "queue_remove": ("INV-LIST",),
    "queue_append_n": ("INV-LIST", "ORD-RELEASE"),
    "queue_prepend_n": ("INV-LIST", "ORD-RELEASE"),
}
"""Entry points of :mod:`kvpool.contracts.bounded`: the free queue on every queue of at
most ``BOUNDED_BLOCKS`` blocks, small enough for CrossHair to finish every path."""

BOUNDED_BLOCKS: dict[str, int] = {"fast": 3, "full": 4}
BOUNDED_BUDGETS: dict[str, tuple[float, float]] = {"fast": (90.0, 5.0), "full": (300.0, 5.0)}
"""A bounded entry point must finish all its paths to say anything more than the pool's
entry points do, so its per-condition limit is far above what it needs (about 17 s at 3
blocks and 35 s at 4 here): the limit is a safety net, not the budget that decides."""

ENTRY_POINTS.update(BOUNDED)

_LINE = re.compile(r"^(?P<file>.*?):(?P<line>\d+): (?P<level>info|error|warning): (?P<msg>.*)$")


@dataclass
class ContractResult:
    """CrossHair's verdict on one contract."""

    name: str
    invariants: tuple[str, ...]
    status: Status
    seconds: float
    detail: str = ""
    mutant: str = ""
    messages: list[str] = field(default_factory=list)


def _crosshair() -> str:
    exe = os.path.join(os.path.dirname(sys.executable), "crosshair")
    return exe if os.path.exists(exe) else "crosshair"


def check_one(name: str, profile: str = "fast", mutant: str = "") -> ContractResult:
    """Run ``crosshair check`` on one harness entry point and read its verdict."""
    bounded = name in BOUNDED
    cond, path = (BOUNDED_BUDGETS if bounded else BUDGETS)[profile]
    env = {
        **os.environ,
        "KVPOOL_CONTRACTS_MUTANT": mutant,
        "KVPOOL_CONTRACTS_BLOCKS": str(BOUNDED_BLOCKS[profile]),
    }
    module = "bounded" if bounded else "harness"
    cmd = [
        _crosshair(),
        "check",
        "--analysis_kind",
        "asserts",
        "--report_all",
        "--per_condition_timeout",
        str(cond),
        "--per_path_timeout",
        str(path),
        f"kvpool.contracts.{module}.{name}",
    ]
    start = time.perf_counter()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, timeout=cond * 6 + 60, check=False
    )
    seconds = time.perf_counter() - start
    msgs = [m for m in (_LINE.match(ln) for ln in proc.stdout.splitlines()) if m]
    errors = [m.group("msg") for m in msgs if m.group("level") == "error"]
    infos = [m.group("msg") for m in msgs if m.group("level") == "info"]
    invs = ENTRY_POINTS[name]
    texts = [m.group(0) for m in msgs]
    if errors:
        return ContractResult(name, invs, "counterexample", seconds, errors[0], mutant, texts)
    if proc.returncode != 0 or not infos:
        # CrossHair failed to run: never a pass. Report it as a failure with its output.
        detail = f"crosshair exited {proc.returncode}: {proc.stderr.strip()[-300:]}"
        return ContractResult(name, invs, "counterexample", seconds, detail, mutant, texts)
    if all(i == "Confirmed over all paths." for i in infos):
        return ContractResult(name, invs, "confirmed", seconds, "", mutant, texts)
    return ContractResult(
        name, invs, "no counterexample within budget", seconds, infos[0], mutant, texts
    )


def run(
    profile: str = "fast", mutant: str = "", names: list[str] | None = None, jobs: int = 2
) -> list[ContractResult]:
    """CrossHair's verdict on every contract entry point (in the order of ENTRY_POINTS)."""
    if profile not in BUDGETS:
        raise ValueError(f"profile must be one of {sorted(BUDGETS)}, got {profile!r}")
    todo = names or list(ENTRY_POINTS)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda n: check_one(n, profile, mutant), todo))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvpool.contracts", description=__doc__)
    parser.add_argument("--profile", choices=sorted(BUDGETS), default="full")
    parser.add_argument("--mutant", default="", help="a name from kvpool.contracts.bugs.POOLS")
    parser.add_argument("names", nargs="*", help="entry points (default: all)")
    args = parser.parse_args(argv)
    cond, path = BUDGETS[args.profile]
    print(f"CrossHair, profile {args.profile}: {cond:g}s per contract, {path:g}s per path")
    if not args.names or set(args.names) & set(BOUNDED):
        bcond, _ = BOUNDED_BUDGETS[args.profile]
        print(
            f"  queue_*: every queue of at most {BOUNDED_BLOCKS[args.profile]} blocks, "
            f"up to {bcond:g}s each to finish every path"
        )
    start = time.perf_counter()
    results = run(args.profile, args.mutant, args.names or None)
    for r in results:
        print(f"{r.name:20} {r.status:32} {r.seconds:6.1f}s  {', '.join(r.invariants)}")
        if r.detail and r.status != "no counterexample within budget":
            print(f"    {r.detail[:400]}")
    bad = [r for r in results if r.status == "counterexample"]
    print(
        f"{len(results)} contracts, {len(bad)} with a counterexample, "
        f"{time.perf_counter() - start:.0f}s"
    )
    return 1 if bad else 0
