"""``make verify``: run every check kvpool has and print what was proved, checked and found.

Each *technique* (the columns: Hypothesis lockstep, z3 BMC, z3 fixed-N induction,
z3 induction, refinement, CrossHair, golden vectors, oracle) reports a :class:`Cell`
for each invariant or rule it covers (the rows). A cell says exactly how strong it is:

* ``proved every N`` -- a solver's unsat for every pool size and every run length;
* ``proved every k`` -- a solver's unsat for every run length, at the pool sizes N it
  names (fixed-N induction);
* ``bounded`` -- a solver's unsat for every run of at most k calls on N blocks (BMC);
* ``exhaustive`` -- every case within a stated bound enumerated (CrossHair's queue
  rows: every queue of at most 4 blocks): testing, complete within its bound;
* ``tested`` -- sampled (how many runs, vectors or paths within a time budget);
* ``partial`` -- a strengthening is proved but the step to the row's own wording is not
  (say which), so the row is not counted as proved by that technique;
* ``failed``, or ``n/a`` (the technique does not speak of that row).

Under the matrix: the bug catalogue, with the techniques that caught each mutant.

A technique that raised, timed out or was not run is a failure: nothing is green
unless it ran and said so. ``--json FILE`` writes the same for machines; the exit
status is non-zero on any failure.

    python -m kvpool.verify [--profile fast|full] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from rich.console import Console
from rich.table import Table

from kvpool.spec.invariants import INVARIANT_NAMES

Status = Literal[
    "proved every N",
    "proved every k",
    "bounded",
    "exhaustive",
    "tested",
    "partial",
    "failed",
    "n/a",
]
HOLDS: tuple[Status, ...] = ("proved every N", "proved every k", "bounded", "exhaustive", "tested")
"""The statuses that count as covering a row."""
Profile = Literal["fast", "full"]

TECHNIQUES = (
    "hypothesis lockstep",
    "z3 BMC",
    "z3 induction (fixed N)",
    "z3 induction",
    "refinement",
    "CrossHair",
    "golden vectors",
    "oracle",
)
ROWS = (*INVARIANT_NAMES, "ORD-HANDOUT", "ORD-RELEASE", "ORD-UNPIN", "WATCH-FIRE", "ERR-ATOMIC")
REPO = Path(__file__).resolve().parent.parent

_STYLE = {
    "proved every N": "bold green",
    "proved every k": "bold green",
    "bounded": "green",
    "exhaustive": "green",
    "tested": "green",
    "partial": "yellow",
    "failed": "bold red",
    "n/a": "dim",
}
_MARK = {
    "proved every N": "✔ ",
    "proved every k": "✔ ",
    "bounded": "✔ ",
    "exhaustive": "✓ ",
    "tested": "✓ ",
    "partial": "~ ",
    "failed": "✗ ",
    "n/a": "",
}

EVERY_N_LEMMAS = ("INV-REF", "INV-FREE", "INV-NULL", "INV-CACHE", "INV-EVENTS")
"""The invariants z3's every-N induction reaches in the spec's own words (a lemma
``S => INV-X`` is proved for each). INV-CONSERVE and INV-WATCH count blocks: their
strengthenings (PERM, WATCH-PER-BLOCK) are proved for every N, the sum is on paper."""


@dataclass
class Cell:
    status: Status
    detail: str = ""


@dataclass
class Check:
    """One run of one technique (or of a check that fills no column, such as the unit tests)."""

    name: str
    technique: str | None
    ok: bool
    summary: str
    seconds: float
    cells: dict[str, Cell] = field(default_factory=dict)
    caught: dict[str, bool] = field(default_factory=dict)
    """mutant name -> whether this technique caught it (only mutants it was run on)."""
    evidence: dict[str, str] = field(default_factory=dict)
    """mutant name -> what this technique reported when it caught it (the rule broken)."""


def _pytest(name: str, files: list[str], technique: str | None = None) -> Check:
    """Run a pytest selection in a subprocess; its closing line is the summary."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [ln for ln in proc.stdout.strip().splitlines() if ln.strip()]
    summary = lines[-1].strip("= ") if lines else proc.stderr.strip()[-200:]
    return Check(name, technique, proc.returncode == 0, summary, time.perf_counter() - start)


def run_unit_tests(profile: Profile) -> Check:
    """The spec's and the impl's rule-by-rule tests and invariant self-checks."""
    return _pytest(
        "spec and impl rule tests",
        [
            "tests/test_semantics.py",
            "tests/test_invariants.py",
            "tests/test_agreement.py",
            "tests/test_impl.py",
        ],
    )


def run_proofs(profile: Profile) -> list[Check]:
    """z3: BMC, fixed-N induction, induction for every N, the list's refinement; cvc5."""
    from kvpool.proofs import runner as proofs

    start = time.perf_counter()
    rows = proofs.run("fast" if profile == "fast" else "default")
    seconds = time.perf_counter() - start
    checks: dict[str, Check] = {}
    for technique in ("z3 BMC", proofs.FIXEDN_TECHNIQUE, "z3 induction", "refinement"):
        checks[technique] = Check(technique, technique, True, "", 0.0)
    extras = {
        "differential": Check("z3 encoding vs spec (differential)", None, True, "", 0.0),
        "witness": Check("fixed-N hypotheses: witnesses replayed on the spec", None, True, "", 0.0),
        "second solver": Check("cvc5 re-checks z3's proofs (SMT-LIB 2)", None, True, "", 0.0),
    }
    fixed_ns: dict[str, list[int]] = {}
    for r in rows:
        if r.kind in extras:
            extra = extras[r.kind]
            extra.ok = extra.ok and r.ok
            extra.seconds += r.seconds
            extra.summary = "; ".join(
                x for x in (extra.summary, f"{r.status}: {r.bounds}" if r.ok else "") if x
            )
            if not r.ok:
                extra.summary += f" NOT ok: {r.obligation}: {r.status} {r.replay}"
            continue
        check = checks.get(r.technique)
        if check is None:
            continue
        check.seconds += r.seconds
        if r.kind == "mutant":
            name = r.obligation.rsplit("[", 1)[-1].rstrip("]")
            check.caught[f"spec:{name}"] = check.caught.get(f"spec:{name}", False) or r.ok
            if r.ok:
                check.evidence.setdefault(f"spec:{name}", ", ".join(r.invariants))
            if not r.ok:
                check.ok = False
            continue
        for inv in r.invariants:
            if inv not in ROWS:
                continue
            cell = check.cells.get(inv)
            if not r.ok:
                check.cells[inv] = Cell("failed", f"{r.obligation}: {r.status}")
                check.ok = False
                continue
            if cell is not None and cell.status == "failed":
                continue
            if r.kind == "fixed-N":
                fixed_ns.setdefault(inv, []).append(int(r.bounds.split(",")[0].split("=")[1]))
                ns = sorted(fixed_ns[inv])
                check.cells[inv] = Cell("proved every k", f"N={ns[0]}..{ns[-1]}")
            elif r.kind == "inductive":
                if inv in EVERY_N_LEMMAS:
                    check.cells[inv] = Cell("proved every N", "every N")
                else:
                    check.cells[inv] = Cell("partial", "per-block/permutation form; sum on paper")
            elif r.kind == "refinement":
                check.cells[inv] = Cell("proved every N", "every list, transcribed methods")
            elif cell is None:
                check.cells[inv] = Cell("bounded", r.bounds.split(" keys")[0])
    for check in checks.values():
        n_ok = sum(1 for c in check.cells.values() if c.status not in ("failed", "partial"))
        check.summary = (
            f"{n_ok} rows {'proved' if check.technique != 'z3 BMC' else 'bounded'}, "
            f"{sum(check.caught.values())}/{len(check.caught)} mutants refuted"
        )
    for extra in extras.values():
        if not extra.summary:
            extra.ok, extra.summary = False, "not run"
    extras["differential"].seconds = seconds - sum(
        c.seconds for c in [*checks.values(), *list(extras.values())[1:]]
    )
    return [*checks.values(), *extras.values()]


LOCKSTEP_ROWS = ROWS
"""The lockstep machine compares every observable after every step, so it speaks to
every row: the INV-* as @invariants (INV-LIST through the impl's own check), the
ordering and watcher rules through the ids, order and firings it compares, and
ERR-ATOMIC through the state it compares after each refused call."""


def run_lockstep(profile: Profile) -> Check:
    """Hypothesis: the spec and kvpool.impl in lockstep, at the exact and robust levels."""
    from kvpool.impl import BlockPool
    from kvpool.oracle import machine

    start = time.perf_counter()
    settings = machine.profile("ci" if profile == "fast" else "dev")
    steps, failures = 0, []
    for level in ("exact", "robust"):
        found = machine.hunt(BlockPool, machine.impl_config(level=level), settings, f"impl/{level}")
        steps += found.steps
        if found.killed:
            failures.append(f"{level}: {found.rule}: {found.message.splitlines()[0]}")
    examples = 2 * (settings.max_examples or 0)
    detail = f"{examples} runs, {steps} steps"
    status: Status = "failed" if failures else "tested"
    return Check(
        "hypothesis lockstep",
        "hypothesis lockstep",
        not failures,
        "; ".join(failures) or f"{detail}, no divergence",
        time.perf_counter() - start,
        cells={row: Cell(status, detail) for row in LOCKSTEP_ROWS},
    )


def run_catalogue(profile: Profile) -> Check:
    """The bug catalogue: every mutant of kvpool.impl hunted by the lockstep machine."""
    from kvpool import mutants
    from kvpool.oracle import machine

    start = time.perf_counter()
    caught: dict[str, bool] = {}
    evidence: dict[str, str] = {}
    missed: list[str] = []
    for m in mutants.MUTANTS:
        found = machine.kill(m)
        caught[m.name] = found.killed
        if found.killed:
            evidence[m.name] = found.rule or "?"
        else:
            missed.append(m.name)
    return Check(
        "bug catalogue (lockstep)",
        "hypothesis lockstep",
        not missed,
        f"{len(caught) - len(missed)}/{len(caught)} mutants killed"
        + (f"; survived: {', '.join(missed)}" if missed else ""),
        time.perf_counter() - start,
        caught=caught,
        evidence=evidence,
    )


def run_contracts(profile: Profile) -> Check:
    """CrossHair: the docstring contracts of the queue, the pool and the spec, path by path."""
    from kvpool.contracts import runner as contracts

    start = time.perf_counter()
    results = contracts.run("fast" if profile == "fast" else "full")
    cells: dict[str, Cell] = {}
    bad = [r for r in results if r.status == "counterexample"]
    per_row: dict[str, list[contracts.ContractResult]] = {}
    for r in results:
        for inv in r.invariants:
            if inv in ROWS:
                per_row.setdefault(inv, []).append(r)
    blocks = contracts.BOUNDED_BLOCKS["fast" if profile == "fast" else "full"]
    for inv, rs in per_row.items():
        broken = [r.name for r in rs if r.status == "counterexample"]
        confirmed = [r for r in rs if r.status == "confirmed"]
        if broken:
            cells[inv] = Cell("failed", ", ".join(broken))
        elif len(confirmed) == len(rs):
            # CrossHair finished every path of an enumeration of every queue of at most
            # `blocks` blocks: complete within that bound, and still testing, not proof
            cells[inv] = Cell("exhaustive", f"exhaustive, <= {blocks} blocks")
        elif confirmed:
            # Some entry points finished every path (the bounded queue), others ran out
            # of budget (the pool): the row is as strong as its weakest entry point.
            cells[inv] = Cell(
                "tested", f"{len(confirmed)}/{len(rs)} exhaustive (<= {blocks} blocks)"
            )
        else:
            cells[inv] = Cell("tested", "no counterexample within budget")
    caught: dict[str, bool] = {}
    evidence: dict[str, str] = {}
    if profile == "full":
        from kvpool.contracts import bugs

        finds = [*bugs.CROSSHAIR_FINDS.items(), *bugs.BOUNDED_FINDS.items()]
        for name, entry in finds:
            found = contracts.check_one(entry, "fast", name)
            key = f"crosshair:{name}" + (f"@{entry}" if entry in contracts.BOUNDED else "")
            caught[key] = found.status == "counterexample"
            evidence[key] = f"counterexample in {entry}"
    return Check(
        "CrossHair contracts",
        "CrossHair",
        not bad and all(caught.values()),
        f"{len(results)} contracts: "
        + ", ".join(
            f"{sum(r.status == s for r in results)} {s}"
            for s in sorted({r.status for r in results})
        ),
        time.perf_counter() - start,
        cells=cells,
        caught=caught,
        evidence=evidence,
    )


def run_vectors(profile: Profile) -> Check:
    """Golden vectors: the recorded traces still give the spec's results, and the reference's."""
    from kvpool import mutants
    from kvpool.oracle import vectors
    from kvpool.oracle.pytest_plugin import as_target
    from kvpool.oracle.targets import resolve

    start = time.perf_counter()
    stale = vectors.check_vectors()
    against_ref = [(n, d) for n, d in vectors.run_vectors(resolve("reference")) if d is not None]
    count = len(vectors.load())
    ok = not stale and not against_ref and count > 0
    status: Status = "tested" if ok else "failed"
    # Fixed vectors are the cheapest check a user can run; the catalogue shows what
    # they miss (a survivor here is information, not a failure: lockstep must catch it).
    caught: dict[str, bool] = {}
    evidence: dict[str, str] = {}
    for m in mutants.MUTANTS:
        try:
            bad = [(n, d) for n, d in vectors.run_vectors(as_target(m.pool_class())) if d]
        except Exception as exc:  # the mutant crashed the replay: that is a detection
            caught[m.name], evidence[m.name] = True, f"target crashed ({type(exc).__name__})"
            continue
        caught[m.name] = bool(bad)
        if bad:
            evidence[m.name] = f"{bad[0][1].rule} ({len(bad)}/{count} vectors)"
    # The vectors are generated from the spec to cover every rule and error kind; each
    # replay compares results, errors, firings and state, so every row is exercised.
    return Check(
        "golden vectors",
        "golden vectors",
        ok,
        f"{count} vectors; {len(stale)} stale against the spec, "
        f"{len(against_ref)} failing on reference; "
        f"{sum(caught.values())}/{len(caught)} catalogue mutants fail a vector",
        time.perf_counter() - start,
        cells={row: Cell(status, f"{count} vectors") for row in ROWS if row != "INV-LIST"},
        caught=caught,
        evidence=evidence,
    )


def run_oracle(profile: Profile) -> Check:
    """The oracle: `kvpool conform` against the reference pool at every level."""
    from kvpool.oracle.conformance import conform
    from kvpool.oracle.targets import resolve

    start = time.perf_counter()
    examples = 50 if profile == "fast" else 200
    bad: list[str] = []
    for level in ("safety", "exact", "robust"):
        report = conform(resolve("reference"), level=level, examples=examples, seed=0)
        if not report.conforms:
            bad.append(f"{level}: {report.rule}")
    status: Status = "failed" if bad else "tested"
    detail = f"3 levels x {examples} runs"
    caught: dict[str, bool] = {}
    evidence: dict[str, str] = {}
    extra = ""
    if profile == "full":
        # What a user's CI would see: `kvpool conform` on each catalogue mutant.
        from kvpool.oracle import catalogue

        for row in catalogue.run(CATALOGUE_EXAMPLES):
            caught[row["mutant"]] = row["killed"]
            if row["killed"]:
                evidence[row["mutant"]] = f"{row['rule']} ({row['calls_in_minimal_trace']} calls)"
        extra = f"; {sum(caught.values())}/{len(caught)} catalogue mutants fail conform"
    return Check(
        "oracle vs reference",
        "oracle",
        not bad,
        ("; ".join(bad) or f"reference conforms at safety, exact and robust ({detail})") + extra,
        time.perf_counter() - start,
        cells={row: Cell(status, detail) for row in ROWS},
        caught=caught,
        evidence=evidence,
    )


CATALOGUE_EXAMPLES = 500
"""Examples per mutant for `kvpool conform` over the catalogue in the full profile, as
`make conform-mutants` runs it. A mutant stops its search when found, so the budget only
costs where a bug is hard to reach: at 100 or 200, multiplicity-as-set was missed (an
over-free of a block in use is drawn too rarely); at 500 all 44 fail, in at most 5 calls."""


Runner = Callable[[Profile], Check | list[Check]]

RUNNERS: list[Runner] = [
    run_unit_tests,
    run_lockstep,
    run_catalogue,
    run_proofs,
    run_contracts,
    run_vectors,
    run_oracle,
]
"""Every check ``make verify`` runs, in order."""


def run_all(profile: Profile, console: Console) -> list[Check]:
    checks: list[Check] = []
    for runner in RUNNERS:
        label = (runner.__doc__ or runner.__name__).strip().splitlines()[0]
        with console.status(f"[bold]{label}[/] ({profile})"):
            start = time.perf_counter()
            try:
                result = runner(profile)
                produced = result if isinstance(result, list) else [result]
            except Exception as exc:  # a check that crashed is a failed check, never a pass
                produced = [
                    Check(
                        runner.__name__,
                        None,
                        False,
                        f"crashed: {type(exc).__name__}: {exc}",
                        time.perf_counter() - start,
                    )
                ]
                console.print(traceback.format_exc(), style="red", markup=False)
        for check in produced:
            mark = "[green]ok[/]" if check.ok else "[bold red]FAILED[/]"
            console.print(f"{mark} {check.name}: {check.summary} [dim]({check.seconds:.1f}s)[/]")
            checks.append(check)
    return checks


def matrix(checks: list[Check]) -> Table:
    """Rows: invariants and rules; columns: techniques. A bound every cell of a column
    shares goes into the column's header, so the cells read at a glance."""
    by_technique: dict[str, dict[str, Cell]] = {t: {} for t in TECHNIQUES}
    for c in checks:
        if c.technique is not None:
            for row, cell in c.cells.items():
                by_technique[c.technique][row] = cell
    table = Table(
        title="What holds, and how we know",
        caption="proved every N: any pool size, any run | proved every k: any run, at the "
        "pool sizes named | bounded: runs of <= k calls | exhaustive: every case within "
        "the bound enumerated | tested: sampled",
    )
    table.add_column("invariant / rule", style="bold", no_wrap=True)
    shared: dict[str, str] = {}
    for t in TECHNIQUES:
        details = {cell.detail for cell in by_technique[t].values()}
        shared[t] = details.pop() if len(details) == 1 else ""
        table.add_column(f"{t}\n[dim]{shared[t]}[/]" if shared[t] else t)
    for row in ROWS:
        cells = []
        for t in TECHNIQUES:
            cell = by_technique[t].get(row, Cell("n/a"))
            text = _MARK[cell.status] + ("·" if cell.status == "n/a" else cell.status)
            if cell.detail and cell.detail != shared[t]:
                text += f" [dim]({cell.detail})[/]"
            cells.append(f"[{_STYLE[cell.status]}]{text}[/]")
        table.add_row(row, *cells)
    return table


def catalogue(checks: list[Check]) -> Table | None:
    """Every seeded bug, each technique that was run on it, and what it reported."""
    mutants: dict[str, dict[str, tuple[bool, str]]] = {}
    for c in checks:
        for m, hit in c.caught.items():
            mutants.setdefault(m, {})[c.technique or c.name] = (hit, c.evidence.get(m, ""))
    if not mutants:
        return None
    table = Table(title="The bug catalogue: who caught each mutant, and what broke")
    table.add_column("mutant", style="bold", no_wrap=True)
    table.add_column("caught by")
    table.add_column("missed by", style="yellow")
    for m, by in sorted(mutants.items()):
        caught = "; ".join(
            f"{t}" + (f" [dim]({why})[/]" if why else "") for t, (ok, why) in by.items() if ok
        )
        missed = ", ".join(t for t, (ok, _) in by.items() if not ok)
        table.add_row(m, caught or "[bold red]nobody[/]", missed)
    return table


def failures(checks: list[Check]) -> list[str]:
    out = [f"{c.name}: {c.summary}" for c in checks if not c.ok]
    for c in checks:
        out.extend(
            f"{c.name}: {row} {cell.detail}"
            for row, cell in c.cells.items()
            if cell.status == "failed"
        )
    for row in ROWS:
        if not any(c.cells.get(row, Cell("n/a")).status in HOLDS for c in checks):
            out.append(f"nothing proved or tested {row}")
    mutants: dict[str, bool] = {}
    for c in checks:
        for m, caught in c.caught.items():
            mutants[m] = mutants.get(m, False) or caught
    out.extend(f"mutant {m} was caught by no technique" for m, ok in mutants.items() if not ok)
    return out


def _console() -> Console:
    return Console(width=None if sys.stdout.isatty() else 200)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kvpool.verify", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--profile", choices=["fast", "full"], default="full")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the results as JSON")
    args = parser.parse_args(argv)
    console = _console()
    start = time.perf_counter()
    checks = run_all(args.profile, console)
    console.print()
    console.print(matrix(checks))
    table = catalogue(checks)
    if table is not None:
        console.print(table)
    bad = failures(checks)
    elapsed = time.perf_counter() - start
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "profile": args.profile,
                    "ok": not bad,
                    "seconds": elapsed,
                    "failures": bad,
                    "checks": [asdict(c) for c in checks],
                },
                indent=2,
            )
        )
    if bad:
        console.print(f"[bold red]{len(bad)} failure(s)[/] in {elapsed:.0f}s:")
        for line in bad:
            console.print(f"  - {line}", markup=False)
        return 1
    console.print(f"[bold green]all {len(checks)} checks passed[/] in {elapsed:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
