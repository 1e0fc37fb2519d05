"""``make bench``: run every benchmark in one go and regenerate docs/benchmarks.md and its plot.

    .venv/bin/python benchmarks/report.py [--quick]

Each section is produced by its own script (pool_vs_vllm.py, oracle_throughput.py,
the proofs' reach grid, the wall time of ``make test`` and ``make verify``) and
lands in ``benchmarks/results.json``; the docs page is written from that file,
so the page never shows a figure no command produced.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DOCS = REPO / "docs"
RESULTS = HERE / "results.json"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}, {platform.system()}"


def pool_section(quick: bool) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    import pool_vs_vllm

    return pool_vs_vllm.run(reps=3 if quick else 7, steps=5_000 if quick else 20_000)


def memory_section(quick: bool) -> dict[str, Any]:
    """Bytes per block alone (the pool section measures them too, with its timings)."""
    sys.path.insert(0, str(HERE))
    import pool_vs_vllm

    return {"bytes_per_block": pool_vs_vllm.measure_memory()}


def vllm_paths_section(quick: bool) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    import vllm_paths

    result = vllm_paths.run(rounds=3 if quick else 7, steps=3_000 if quick else 10_000)
    result["markdown"] = vllm_paths.markdown(result)
    return result


def walltime_section(quick: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    logs = REPO / "build"
    logs.mkdir(exist_ok=True)
    for target in ("test", "verify"):
        start = time.perf_counter()
        proc = subprocess.run(
            ["make", target], cwd=REPO, capture_output=True, text=True, check=False
        )
        seconds = time.perf_counter() - start
        # The output is kept: a wall time is only worth quoting next to what the run did.
        (logs / f"walltime-make-{target}.log").write_text(proc.stdout + proc.stderr)
        out[f"make {target}"] = {"seconds": seconds, "ok": proc.returncode == 0}
    return out


def oracle_section(quick: bool) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    import oracle_throughput

    ops, repeats = (20_000, 1) if quick else (100_000, 3)
    rows = oracle_throughput.measure(ops=ops, repeats=repeats)
    # The Hypothesis search that `kvpool conform` runs, for contrast: its own figure.
    cmd = [sys.executable, "-m", "kvpool.oracle.machine", "ci", "exact"]
    search = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=True)
    return {
        "markdown": _oracle_markdown(ops, repeats, rows, search.stdout.strip()),
        "rows": [asdict(r) for r in rows],
    }


def _oracle_markdown(ops: int, repeats: int, rows: list[Any], search: str) -> str:
    table = [
        "| target | level | 1,000 blocks | 10,000 blocks |",
        "| --- | --- | ---: | ---: |",
    ]
    cells: dict[tuple[str, str], dict[int, str]] = {}
    for r in rows:
        if r.divergence is not None and not r.calls_per_second:
            # "after N calls: <what differed>": the count says it; errata.md says what.
            text = f"stops {r.divergence.split(':', 1)[0]} (a finding)"
        else:
            text = f"{r.calls_per_second:,.0f}"
        cells.setdefault((r.target, r.level), {})[r.num_blocks] = text
    for (target, level), by_size in cells.items():
        table.append(
            f"| {target} | {level} | {by_size.get(1_000, '')} | {by_size.get(10_000, '')} |"
        )
    return (
        "Checked calls per second of the fast random checker "
        "(`kvpool.oracle.fastcheck.run_random`: every call's outcome and the blocks it "
        f"touched compared, the whole state every 1,000 calls), {ops:,} calls per run, "
        f"median of {repeats} seeds (`.venv/bin/python benchmarks/oracle_throughput.py "
        f"{ops}`). The goal is 25,000 a second at `exact` on 10,000 blocks. vLLM runs with "
        "KV events off (with them on its `removed-while-held` erratum stops a run), and at "
        "`robust` it stops at its first invalid call: a finding, not a rate.\n\n"
        + "\n".join(table)
        + "\n\n`kvpool conform`'s Hypothesis search is a different kind of run: it spends "
        "its time generating and shrinking short traces on small pools "
        f"(`.venv/bin/python -m kvpool.oracle.machine ci exact`): `{search}`"
    )


REACH_SECONDS = 120.0
"""The issue's budget: the largest (N, k) BMC proves within two minutes here."""


def _bmc_lists() -> int:
    """Block lists of at most this many entries, as `make proofs` (the default profile)."""
    from kvpool.proofs.runner import PROFILES

    return int(PROFILES["default"]["bmc"][2])


def _bmc_row(n: int, k: int, timeout_s: float) -> tuple[bool, float, int]:
    from kvpool.proofs.runner import run_bmc

    start = time.perf_counter()
    results = run_bmc(n, k, _bmc_lists(), timeout_ms=int(timeout_s * 1000))
    return all(r.ok for r in results), time.perf_counter() - start, len(results)


def proofs_section(quick: bool) -> dict[str, Any]:
    from kvpool.proofs.runner import run_induction, run_refinement

    grid = [(4, 4), (5, 5), (6, 6)] if quick else [(4, 4), (5, 6), (6, 6), (6, 8), (6, 10)]
    rows = ["| N | k | obligations | all proved | seconds |", "| ---: | ---: | ---: | --- | ---: |"]
    for n, k in grid:
        ok, seconds, count = _bmc_row(n, k, 600.0)
        rows.append(f"| {n} | {k} | {count} | {'yes' if ok else 'NO'} | {seconds:.0f} |")
    # Reach: for each N, the largest k (in steps of 2) proved within the budget. Times
    # grow with N, so each N starts from the previous N's k and walks up or down.
    reach = [
        "| N | largest k proved within 2 min | its seconds | next k |",
        "| ---: | ---: | ---: | ---: |",
    ]
    best: tuple[int, int] | None = None
    k = 4
    for n in (4, 5) if quick else (5, 6, 7, 8):
        proved: dict[int, float] = {}
        while k >= 2:
            ok, seconds, _ = _bmc_row(n, k, REACH_SECONDS)
            if ok and seconds <= REACH_SECONDS:
                proved[k] = seconds
                k += 2
            elif proved or k == 2:
                break
            else:
                k -= 2
        if not proved:
            reach.append(f"| {n} | none | | {k} |")
            break
        top = max(proved)
        reach.append(f"| {n} | {top} | {proved[top]:.0f} | {top + 2} over |")
        # A run over the budget costs the whole budget, one under it less: start the
        # next N a little below this frontier and walk up.
        best, k = (n, top), max(2, top - 4)
    per = ["| obligation | kind | result | seconds |", "| --- | --- | --- | ---: |"]
    for r in run_induction(60000) + run_refinement(30000):
        per.append(f"| {r.obligation} | {r.kind} | {r.status} | {r.seconds:.2f} |")
    return {
        "markdown": "Bounded model checking of every invariant and rule, block lists of at most "
        f"{_bmc_lists()} entries, as `make proofs` runs it "
        f"(`kvpool.proofs.runner.run_bmc(N, k, {_bmc_lists()})`), wall time:\n\n"
        + "\n".join(rows)
        + "\n\nReach: for each pool size N, the bound k raised by 2 until BMC no longer "
        f"proves everything within {REACH_SECONDS:.0f} s (z3's own timeout, so an over-budget "
        "run ends as unknown, never as proved):\n\n"
        + "\n".join(reach)
        + (f"\n\nThe frontier's largest pool: N = {best[0]} up to k = {best[1]}." if best else "")
        + "\n\nInduction (every N) and refinement, solver time per obligation "
        "(`run_induction(60000)`, `run_refinement(30000)`):\n\n" + "\n".join(per)
    }


def fixedn_section(quick: bool) -> dict[str, Any]:
    """Fixed-N induction per N as the default profile runs it, and cvc5 on the quantified
    queries (every-N induction, both refinements)."""
    from kvpool.proofs.model import recording
    from kvpool.proofs.runner import (
        PROFILES,
        cvc5_recorded_row,
        run_fixedn,
        run_induction,
        run_refinement,
        run_source,
    )

    ns = PROFILES["default"]["fixedn"][: 4 if quick else None]
    rows = [
        "| N | all proved | solver seconds | wall seconds | largest obligations (solver s) |",
        "| ---: | --- | ---: | ---: | --- |",
    ]
    total_solver = total_wall = 0.0
    for n in ns:
        start = time.perf_counter()
        res = run_fixedn((n,), 120000, ())
        wall = time.perf_counter() - start
        solver = sum(r.seconds for r in res)
        total_solver, total_wall = total_solver + solver, total_wall + wall
        top = sorted(res, key=lambda r: -r.seconds)[:3]
        rows.append(
            f"| {n} | {'yes' if all(r.ok for r in res) else 'NO'} | {solver:.1f} | {wall:.1f} | "
            + ", ".join(f"{r.obligation} {r.seconds:.1f}" for r in top)
            + " |"
        )
    rows.append(f"| all | | {total_solver:.1f} | {total_wall:.1f} | |")
    from kvpool.proofs.runner import witness_row
    from kvpool.verify import queue_replay

    second = [
        "| queries | cvc5's verdict | seconds | witnesses of the hypotheses | seconds |",
        "| --- | --- | ---: | --- | ---: |",
    ]
    runs: list[tuple[str, str, Callable[[], Any]]] = [
        ("the every-N induction", "every-N induction", lambda: run_induction(60000)),
        (
            "the list refinement (transcribed)",
            "refinement (transcribed)",
            lambda: run_refinement(30000),
        ),
        (
            "free_queue.py from source",
            "free_queue.py from source",
            lambda: run_source(30000, mutants={}),
        ),
    ]
    for label, wlabel, run in runs[: 1 if quick else None]:
        with recording() as rec:
            run()
        w = witness_row(wlabel, rec, queue_replay())
        row = cvc5_recorded_row(label, rec)
        second.append(
            f"| {label} | {row.status}: {row.bounds} {row.replay} | {row.seconds:.0f} "
            f"| {w.status}: {w.bounds} {w.replay} | {w.seconds:.1f} |"
        )
    return {
        "markdown": "Fixed-N induction (every obligation, for every k, at each N; each step "
        "case split into its goal's conjuncts), as `make proofs` runs it "
        "(`kvpool.proofs.runner.run_fixedn((N,), 120000)`: init, steps, witnesses):\n\n"
        + "\n".join(rows)
        + "\n\ncvc5 on the proved quantified queries (lambdas lifted; 5 s per query, wall "
        "clock, so a query near the limit can go either way on a loaded machine; a query "
        "unknown whole is asked again split), and the witnesses of their hypotheses (z3's "
        "seconds), as `make proofs` runs them:\n\n" + "\n".join(second)
    }


def eventseq_section(quick: bool) -> dict[str, Any]:
    """The event log as a sequence and the watchers' firing point (proofs/eventseq.py),
    per N: the default profile's N, then the deep profile's (not with --quick)."""
    from kvpool.proofs import eventseq
    from kvpool.proofs.runner import PROFILES

    default = PROFILES["default"]["eventseq"]
    deep = PROFILES["deep"]["eventseq"]
    ns = default if quick else deep
    rows = [
        "| N | profile | all proved | INV-EVENTS (seq) s | EVENT-LOG s | FIRE-POINT s "
        "| wall seconds |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    total = 0.0
    for n in ns:
        start = time.perf_counter()
        res = eventseq.rows((n,), 300000)
        wall = time.perf_counter() - start
        if n in default:
            total += wall
        rows.append(
            f"| {n} | {'default' if n in default else 'deep'} | "
            f"{'yes' if all(r['status'] == 'proved' for r in res) else 'NO'} | "
            + " | ".join(f"{r['seconds']:.1f}" for r in res)
            + f" | {wall:.1f} |"
        )
    start = time.perf_counter()
    muts = eventseq.mutant_rows(3, 60000)
    mwall = time.perf_counter() - start
    refuted = sum(r["status"] == "expected-refuted" for r in muts)
    return {
        "markdown": "INV-EVENTS over the event log as a sequence, EVENT-LOG and FIRE-POINT "
        "(`kvpool.proofs.eventseq.rows((N,), 300000)`: init and every step case), for "
        "every k at each N:\n\n"
        + "\n".join(rows)
        + f"\n\nThe default profile's N ({default[0]}..{default[-1]}) take {total:.1f} s of "
        f"wall time in all; its {len(muts)} mutants (`eventseq.mutant_rows(3, 60000)`: "
        f"refuted and replayed on the spec) {mwall:.1f} s, {refuted} of {len(muts)} refuted."
    }


def spacer_section(quick: bool) -> dict[str, Any]:
    """Spacer (no hand lemma) as the deep profile runs it (each N's obligations in one
    query); and one query per obligation at the smaller N, for their times."""
    from kvpool.proofs import spacer
    from kvpool.proofs.runner import PROFILES

    # as `make proofs-deep` runs it
    plan = [
        (n, names, f"{spacer.group_name(names)} ({len(names)})")
        for n, names in PROFILES["deep"]["spacer"]
    ][: 2 if quick else None]
    split_ns = (3,) if quick else (3, 4)
    timeout_s = 900.0
    rows = [
        "| N | obligations, one query | result | wall seconds | CPU seconds |",
        "| ---: | --- | --- | ---: | ---: |",
    ]
    data: dict[str, Any] = {"together": {}, "split": {}}
    for n, names, what in plan:
        (ans,) = spacer.check_isolated(n, names, timeout_s=timeout_s, together=True).values()
        data["together"][n] = [what, ans.status, ans.seconds, ans.cpu]
        rows.append(f"| {n} | {what} | {ans.status} | {ans.seconds:.1f} | {ans.cpu:.1f} |")
    head = "| obligation | " + " | ".join(f"N={n}" for n in split_ns) + " |"
    per = [head, "| --- |" + " ---: |" * len(split_ns)]
    for name in spacer.OBLIGATIONS:
        cells = []
        for n in split_ns:
            (ans,) = spacer.check_isolated(n, (name,), timeout_s=timeout_s).values()
            data["split"].setdefault(name, {})[n] = [ans.status, ans.seconds, ans.cpu]
            cells.append(
                f"{ans.cpu:.1f}" if ans.status == "proved" else f"{ans.status} {ans.seconds:.0f}"
            )
        per.append(f"| {name} | " + " | ".join(cells) + " |")
    total = [sum(v[n][2] for v in data["split"].values()) for n in split_ns]
    per.append("| all, one by one | " + " | ".join(f"{t:.1f}" for t in total) + " |")
    data["markdown"] = (
        "z3's Spacer (IC3/PDR over Horn clauses) on the finite reading's transition, "
        "unchanged and with no hand lemma (`kvpool.proofs.spacer`), each query in a child "
        f"process killed at {timeout_s:.0f} s of wall time; seconds are the query's own "
        "(CPU seconds grow less with the machine's load than wall seconds). Every "
        "obligation it can state (the 7 INV-*, RANK-BOUNDS and the 8 step rules: all of "
        "the fixed-N induction's but its two ghost conjuncts) in one query, "
        "`spacer.check_isolated(N, names, together=True)`, as "
        "`make proofs-deep` runs it:\n\n"
        + "\n".join(rows)
        + "\n\nOne query per obligation (`spacer.check_isolated(N, (name,))`), CPU "
        "seconds: Spacer "
        "finds the invariant again for each, so the sum is larger than the joint query:"
        "\n\n" + "\n".join(per)
    )
    return data


def search_power_section(quick: bool) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    import search_power

    result = search_power.run(seeds=5 if quick else 20)
    result["markdown"] = search_power.markdown(result)
    return result


def _cpu() -> float:
    """CPU seconds of this process and of its children waited for (cvc5's forks)."""
    import resource

    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def cvc5_cases_section(quick: bool) -> dict[str, Any]:
    """cvc5 on what its whole and split asks leave open: the event log's queries per N
    (folds abstracted; the default profile's N, then the deep profile's, not with
    --quick), and each obligation of ``cvc5cases.CASES`` asked case by case."""
    from kvpool.proofs import cvc5cases, eventseq, induction, steprules
    from kvpool.proofs.model import Goal, recording
    from kvpool.proofs.runner import PROFILES

    default = PROFILES["default"]["cvc5_eventseq"]
    deep = PROFILES["deep"]["cvc5_eventseq"]
    rows = [
        "| queries | profile | cvc5's verdict | cvc5 CPU seconds | wall seconds |",
        "| --- | --- | --- | ---: | ---: |",
    ]
    for n in default if quick else deep:
        kept: dict[int, list[Goal]] = {}
        eventseq.rows((n,), 120000, kept)
        c0, w0 = _cpu(), time.perf_counter()
        row = eventseq.cvc5_row(kept, 5000)
        rows.append(
            f"| the event log as a sequence, N={n} | {'default' if n in default else 'deep'} "
            f"| {row['status']}: {row['bounds']} {row['replay']} | {_cpu() - c0:.1f} "
            f"| {time.perf_counter() - w0:.0f} |"
        )
    asks: list[tuple[str, Callable[[], Any]]] = [
        ("S and T => PERM / FreeBlocks", lambda: induction.step_goals(("PERM",), ("FreeBlocks",))),
        (
            "every-N rule: ORD-RELEASE / FreeBlocks",
            lambda: steprules.goals(("ORD-RELEASE",), ("FreeBlocks",)),
        ),
        (
            "every-N rule: ORD-UNPIN / UnpinBlocks",
            lambda: steprules.goals(("ORD-UNPIN",), ("UnpinBlocks",)),
        ),
    ]
    for name, ask in asks:
        with recording() as rec:
            ask()
        for rname, hyp, goal, status in rec:
            c0, w0 = _cpu(), time.perf_counter()
            got = cvc5cases.confirm(rname, hyp, goal) if status == "proved" else None
            verdict = f"{got[0]}, {got[1]}" if got else f"z3 {status}"
            rows.append(
                f"| {name} | deep | {verdict} | {_cpu() - c0:.1f} "
                f"| {time.perf_counter() - w0:.0f} |"
            )
    return {
        "markdown": "cvc5 on what it leaves unknown whole and split (docs/06-z3.md, "
        '"Case by case"): the event log\'s queries at each N, their folds abstracted '
        "(`kvpool.proofs.eventseq.cvc5_row` after `eventseq.rows((N,), 120000)`), and "
        "each obligation `kvpool.proofs.cvc5cases.CASES` names, asked case by case "
        "(`cvc5cases.confirm`; 5 s per query, wall clock, so a loaded machine settles "
        "less). CPU seconds include cvc5's forked children:\n\n" + "\n".join(rows)
    }


SECTIONS: dict[str, Callable[[bool], dict[str, Any]]] = {
    "pool": pool_section,
    "vllm_paths": vllm_paths_section,
    "memory": memory_section,
    "oracle": oracle_section,
    "search_power": search_power_section,
    "proofs": proofs_section,
    "fixedn": fixedn_section,
    "eventseq": eventseq_section,
    "cvc5_cases": cvc5_cases_section,
    "spacer": spacer_section,
    "walltime": walltime_section,
}


def plot(pool: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = pool["workload"]
    sizes = [p["blocks"] for p in points]
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=120)
    ax.plot(sizes, [p["kvpool_us"] for p in points], "o-", label="kvpool (validating)")
    ax.plot(sizes, [p["vllm_us"] for p in points], "s--", label="vLLM 0.33.0")
    ax.set_xscale("log")
    ax.set_xlabel("blocks in the pool")
    ax.set_ylabel("microseconds per pool call")
    ax.set_ylim(bottom=0)
    ax.set_title("Serving-like workload: time per call against pool size")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def render(results: dict[str, Any]) -> str:
    lines = [
        "# Benchmarks",
        "",
        "Every figure on this page was produced by `make bench` "
        "(`.venv/bin/python benchmarks/report.py`), which rewrites this page from "
        "`benchmarks/results.json`. Ratios come from one run, the two sides interleaved "
        "repetition by repetition; absolute times differ from machine to machine, ratios "
        "much less.",
        "",
        f"Page written {results['date']}. Each section says when and on what machine its "
        'figures were measured (`make bench BENCH_ARGS="--only SECTION"` re-runs one).',
        "",
    ]

    def measured(section: dict[str, Any]) -> list[str]:
        when = section.get("measured", "before sections were dated")
        quick = (
            " (a `--quick` smoke run: too few repetitions to quote)" if section.get("quick") else ""
        )
        return [f"*Measured {when}.{quick}*", ""]

    pool = results.get("pool")
    if pool:
        lines += [
            "## The pool against vLLM's",
            "",
            f"kvpool time / vLLM 0.33.0 time, {pool['reps']} repetitions; below 1.0 kvpool is "
            "faster. *checked* rows call the free queue's public methods, which refuse bad "
            "input; *internal* rows call the unchecked methods the pool itself uses, after "
            "validating at its own level. The serving rows go through each pool's public API, "
            "kvpool validating every call.",
            "",
            *measured(pool),
            "| workload | kvpool µs | vLLM µs | median | min | max |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in pool["rows"]:
            lines.append(
                f"| {r['name']} | {r['kvpool_us']:.3f} | {r['vllm_us']:.3f} | "
                f"**{r['median']:.2f}** | {r['min']:.2f} | {r['max']:.2f} |"
            )
        # The later of the two measurements: the pool section's, or the memory section's
        # (``--only memory``, which re-measures the bytes without the timings).
        memory = results.get("memory")
        if memory and memory.get("measured", "") >= pool.get("measured", ""):
            m, when = memory["bytes_per_block"], memory.get("measured", "")
        else:
            m, when = pool["bytes_per_block"], pool.get("measured", "")
        lines += [
            "",
            f"Memory: {m['kvpool']:.0f} bytes per block for kvpool, {m['vllm']:.0f} for vLLM "
            "(tracemalloc, after building a 100,000-block pool: "
            "`.venv/bin/python benchmarks/pool_vs_vllm.py --memory-only`, or "
            f'`make bench BENCH_ARGS="--only memory"`; measured {when.split(",")[0]}).',
            "",
            "![time per call against pool size](img/pool_vs_vllm.png)",
            "",
        ]
    paths = results.get("vllm_paths")
    if paths and paths.get("markdown"):
        lines += [
            "## vLLM's own call paths",
            "",
            "A serving trace of vLLM 0.33.0 API calls (`get_cached_block(hash, [0])`, `touch`, "
            "`get_new_blocks`, `cache_full_blocks`, `free_blocks`, `unpin_blocks`) replayed on "
            f"a fresh {paths['num_blocks']:,}-block pool of each kind, kvpool validating every "
            f"call; {paths['rounds']} interleaved rounds of {paths.get('repeats', 1)} "
            "replays per pool, keeping the fastest replay (and, in the per-call rows, the "
            "fastest time of each call), ratio kvpool / vLLM per round, "
            "median shown (`.venv/bin/python benchmarks/vllm_paths.py`, or "
            '`make bench BENCH_ARGS="--only vllm_paths"`). *lookup-heavy* requests walk long '
            "cached prefixes. Per-call rows time each call on its own (the timer's cost, the "
            "same on both sides, pulls them towards 1.0); *overall* replays the trace without "
            "a timer inside the loop.",
            "",
            *measured(paths),
            paths["markdown"],
            "",
            "What the figures rest on (measured with this benchmark, 12-04 and 12-05):",
            "",
            "* Ownership is one pointer comparison per block: `block._pool is "
            "self._weak_self`, the pool's mark that no copy or hand-built block can carry "
            "(docs/semantics.md, *Hostile input*). The identity test it replaces, "
            "`self.blocks[block.block_id] is block`, reads the block id's int object and "
            "the list, and cost 0.1-0.2 of vLLM's whole time on `touch` and `free_blocks` "
            "here.",
            "* `touch`, `free_blocks`, `unpin_blocks` and `cache_full_blocks` check and "
            "change in one pass and roll back the entries done on a refusal (the full "
            "checks run only then), where they used to validate in a pass of their own.",
            "* `touch` takes a free block it meets out of the queue in its one pass, "
            "through the queue's own `_remove` (the method the refinement proof covers), "
            "one call per such block as vLLM makes, and keeps what a refusal needs in the "
            "block's emptied `prev_free_block` (the neighbour it followed): a refusal "
            "relinks the blocks newest first, the exact reverse of the unlinking (dancing "
            "links), so nothing is allocated per call. Until 12-05 it "
            "collected those blocks in a list and unlinked them after its pass, which cost "
            "0.1 of `touch`'s time against unlinking in the pass with no rollback at all; "
            "keeping the rollback in the emptied links gives back a quarter of that: the "
            "old and the new `touch` interleaved in one process on this trace (12-05, "
            "three runs of 9 to 11 rounds), 1.13-1.16 of vLLM's time before against "
            "1.11-1.14 after. Unlinking inline "
            "instead of calling `_remove` measured a further 0.03 and was not taken: the "
            "hot path would leave the proof, and the catalogue's two `_remove` mutants "
            "(`remove-keeps-links`, `remove-half-stitched`) would no longer be reachable "
            "by the lockstep search. What keeps `touch` above vLLM's time on the serving "
            "mix is the checks themselves on short lists (4.5 blocks on average; "
            "lookup-heavy lists hold 23): with every check removed it runs at 0.91-0.96 of "
            "vLLM's time here; the argument's type test (a generator or a list subclass is "
            "copied first, so that a refusal can read the entries again) costs about 0.04, "
            "the pool's mark (its load and its test per block) about 0.09. A block class "
            "of each pool's own "
            "(`type(block) is pool_class`, one test for *a block, and mine*) measured "
            "slower than the mark (1.15 against 1.10, 12-05): a `type()` call costs more "
            "than reading a slot.",
            "* `unpin_blocks` keeps every distinct watcher of a block (vLLM keeps the last "
            "one: the `unpin-one-watcher` finding of docs/errata.md). The pending watchers "
            "live on the block (`KVCacheBlock._pending`, and `_pending_order`, its place in "
            "the order blocks first got one), so per block the pass reads and writes slots "
            "of the block it already holds, where vLLM stores into a dict; kept in a dict "
            "(block id -> watchers, until 12-05) they made `unpin_blocks` 1.3 to 1.6 of "
            "vLLM's time here. `get_new_blocks` reads the slot of each block it hands out in the "
            "pass it makes anyway, where it popped each from the dict. The two slots cost "
            "16 bytes a block (the memory line above). One tuple serves every block of a "
            "call, and the first pending watcher is tested before the rest are searched. "
            "Linking the released blocks onto the queue's tail in the pass, instead of "
            "collecting them for `_append_n`, measured 0.79 against 0.89-0.90 on the "
            "serving mix (12-05) and was not taken, for the reason above: `_append_n` is "
            "proved, and the `unpin-to-front` mutant patches that call.",
            "",
        ]
    for name, title in (
        ("oracle", "Oracle throughput"),
        ("search_power", "Search power"),
        ("proofs", "Proof reach"),
        ("fixedn", "Proof reach: fixed-N induction and the second solver"),
        ("eventseq", "Proof reach: the event log as a sequence, watchers that call back"),
        ("cvc5_cases", "The second solver on what it left open"),
        ("spacer", "Proof reach: Spacer, no hand lemma"),
    ):
        section = results.get(name)
        if section and section.get("markdown"):
            lines += [f"## {title}", "", *measured(section), section["markdown"], ""]
    wall = results.get("walltime")
    if wall:
        lines += [
            "## Wall time of the two commands",
            "",
            *measured(wall),
            "| command | seconds | passed |",
            "| --- | ---: | --- |",
        ]
        for cmd, w in wall.items():
            if not isinstance(w, dict):
                continue
            lines.append(f"| `{cmd}` | {w['seconds']:.0f} | {'yes' if w['ok'] else 'no'} |")
        lines += [
            "",
            "Both run one after the other with `.venv` already installed (on a fresh machine "
            "the first command also creates it: about 20 s here from the local package "
            "mirror); `make verify` is its default, full profile, its parts run side by "
            "side in fresh interpreters, one per core (`--jobs`), and it prints its CPU "
            "seconds too. The budget is 10 minutes for each. The output of each run "
            "is kept in `build/walltime-make-*.log`.",
            "",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (for a smoke run)")
    parser.add_argument(
        "--only", nargs="*", choices=sorted(SECTIONS), help="run only these sections"
    )
    args = parser.parse_args(argv)
    results: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results["date"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    results["machine"] = machine()
    for name in args.only or SECTIONS:
        print(f"== {name}", flush=True)
        results[name] = SECTIONS[name](args.quick)
        # Sections can be re-run alone (--only), so each carries when and where it ran.
        results[name]["measured"] = f"{results['date']}, {results['machine']}"
        results[name]["quick"] = args.quick
    RESULTS.write_text(json.dumps(results, indent=2))
    (DOCS / "img").mkdir(parents=True, exist_ok=True)
    if results.get("pool"):
        plot(results["pool"], DOCS / "img" / "pool_vs_vllm.png")
    (DOCS / "benchmarks.md").write_text(render(results))
    print(render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
