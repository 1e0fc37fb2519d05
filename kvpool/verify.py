"""``make verify``: run every check kvpool has and print what was proved, checked and found.

Each *technique* (the columns: Hypothesis lockstep, z3 BMC, z3 fixed-N induction,
z3 induction, refinement, refinement (from source), z3 Spacer (fixed N) when it is
switched on, CrossHair, golden vectors, oracle)
reports a :class:`Cell` for each invariant or rule it covers (the rows). A cell says
exactly how strong it is:

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

Every part of every check runs in a fresh interpreter, ``--jobs`` at a time (default:
one per core), longest first; ``--jobs 0`` runs them in this process one after another.

    python -m kvpool.verify [--profile fast|full|deep] [--only RUNNER,...] [--jobs N]
                            [--json FILE] [--obligations FILE] [--keep DIR]

``--profile deep`` is the proofs' deep profile (``kvpool/proofs/runner.py``'s
``PROFILES["deep"]``) with every other check as in ``full``; ``make proofs-deep`` runs it
with ``--only proofs``: the proofs' parts side by side, each in its own interpreter.
``--only`` runs the named runners alone (then a row no selected runner covers is not a
failure: the other techniques were not asked).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rich.console import Console
from rich.table import Table

from kvpool.spec.invariants import INVARIANT_NAMES
from kvpool.spec.rules import POOL_RULES

if TYPE_CHECKING:
    from kvpool.contracts.runner import ContractResult
    from kvpool.proofs.runner import ObligationResult

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
Profile = Literal["fast", "full", "deep"]

TECHNIQUES = (
    "hypothesis lockstep",
    "z3 BMC",
    "z3 induction (fixed N)",
    "z3 induction",
    "refinement",
    "refinement (from source)",
    "z3 Spacer (fixed N)",
    "CrossHair",
    "golden vectors",
    "oracle",
)
OPTIONAL_TECHNIQUES = ("z3 Spacer (fixed N)",)
"""Columns shown only when their check ran (Spacer is in the deep proofs' profile, and in
``make verify`` only if its switch is on)."""
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
``S => INV-X`` is proved for each)."""
EVERY_N_OWN_ROW = (
    "INV-CONSERVE",
    "INV-WATCH",
    "ORD-HANDOUT",
    "ORD-RELEASE",
    "ORD-UNPIN",
    "WATCH-FIRE",
    "ERR-ATOMIC",
)
"""Proved for every N by a row that names that row alone: the invariants that count
blocks (their sums carried as ghost arrays defined by their recurrence,
``proofs/counting.py``) and the step rules (``proofs/steprules.py``). A row of the
counting invariants' strengthenings (PERM, WATCH-PER-BLOCK) alone leaves them partial."""


KW_FIXED = "2 keys, 2 watcher ids"
KW_SORTS = "keys, watcher ids: sorts in the list calls, 2 in the rest"
"""What an every-N cell of z3's induction says of keys and watcher ids: 2 of each, or
(``proofs/symsorts.py``) uninterpreted sorts in the list-taking calls' loops."""


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


# -- the runners ------------------------------------------------------------------------------
#
# A runner is split into *parts* that need nothing from each other. ``make verify`` runs
# every part in a fresh interpreter (``python -m kvpool.verify --task RUNNER --part PART``),
# as many at a time as there are cores, longest first; a part's *payload* is plain JSON,
# and the runner's ``combine`` turns the payloads of all its parts into checks. A fresh
# interpreter per part also means no part's verdict depends on what ran before it in the
# same process.


@dataclass(frozen=True)
class Runner:
    """One technique's work, in parts that can run side by side."""

    name: str
    label: str
    parts: Callable[[Profile], list[tuple[str, float]]]
    """The parts of this runner at a profile, each with its expected CPU seconds (on a
    quiet 2-core machine; they order the queue, longest first, and decide nothing else)."""
    work: Callable[[Profile, str], Any]
    """Run one part (in the child); return its payload (JSON-able)."""
    combine: Callable[[Profile, list[Any]], list[Check]]
    """Turn every part's payload (in :meth:`parts`' order) into checks (in the parent)."""


def _check_from_json(d: dict[str, Any]) -> Check:
    cells = {row: Cell(**c) for row, c in d.get("cells", {}).items()}
    return Check(
        str(d["name"]),
        d["technique"],
        bool(d["ok"]),
        str(d["summary"]),
        float(d["seconds"]),
        cells,
        dict(d.get("caught", {})),
        dict(d.get("evidence", {})),
    )


def single(fn: Callable[[Profile], Check | list[Check]]) -> Runner:
    """A runner of one part from a function that returns its checks directly."""

    def work(profile: Profile, part: str) -> Any:
        result = fn(profile)
        return [asdict(c) for c in (result if isinstance(result, list) else [result])]

    def combine(profile: Profile, payloads: list[Any]) -> list[Check]:
        return [_check_from_json(d) for d in payloads[0]]

    name = getattr(fn, "__name__", "runner")
    label = (fn.__doc__ or name).strip().splitlines()[0]
    return Runner(name, label, lambda profile: [("all", 1.0)], work, combine)


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


# -- z3 and cvc5 ------------------------------------------------------------------------------

SOURCE_LINES = {
    "pool-source": "impl/pool.py's touch from its source (z3)",
    # (no method named here: make verify proves get_new_blocks, make proofs-deep all
    # three; the line lists the rows the run proved)
    "hot-source": "impl/pool.py's other hot paths from source (z3)",
}
"""The dashboard's line for each kind of row about ``impl/pool.py``'s source."""

PROOF_COSTS: dict[str, float] = {
    # CPU s of each part in `make verify VERIFY_ARGS="--json F"` (2026-12-06, load ~3):
    # they only order the queue, longest first
    "bmc-induction": 128.0,  # with PERM's FreeBlocks step asked of cvc5 to leaves
    "differential": 33.0,
    "fixedn": 80.0,
    "refinement": 14.0,
    "source": 92.0,  # with cvc5 to leaves on the six posts
    "spacer": 13.0,  # make verify's: N=3 and 4 and two mutants
    "twopool": 19.0,
    "multikey": 26.0,
    "symlists": 17.0,
    "pool-source": 5.0,  # make verify's: get_new_blocks from source (pyhot)
}


DEEP_PROOF_COSTS: dict[str, float] = {
    # wall s of each part in the second whole `make proofs-deep` (2026-12-06, 5ed6455, load
    # 3-4.5; docs/obligations-deep.md), pool-source's plus cvc5hot's step 3c on `touch`
    # (about 2,200 CPU s, measured on its own): they only order the queue, longest first
    "pool-source": 7150.0,
    "twopool": 4842.0,
    "multikey": 2414.0,
    "fixedn": 1797.0,
    "spacer": 803.0,
    "symlists": 627.0,
    "bmc-induction": 513.0,
    "source": 145.0,
    "differential": 58.0,
    "refinement": 19.0,
}


def _proof_level(profile: Profile) -> str:
    """The proofs' own profile (``PROFILES`` in ``kvpool/proofs/runner.py``) for ours."""
    return {"fast": "fast", "full": "default", "deep": "deep"}[profile]


def _proof_parts(profile: Profile) -> list[tuple[str, float]]:
    """Every part of the proofs' profile; Spacer's only when the profile names an N for
    it (``PROFILES[...]["spacer"]`` in ``kvpool/proofs/runner.py``: the one switch), the
    symbolic lists' only when it names something to run."""
    from kvpool.proofs import runner as proofs

    level = proofs.PROFILES[_proof_level(profile)]
    # switched off: not spawned
    off = {p for p in ("spacer", "symlists", "multikey") if not level[p]}
    if not level["pool_source"] and not level["hot_source"]:
        off.add("pool-source")
    costs = DEEP_PROOF_COSTS if profile == "deep" else PROOF_COSTS
    return [(part, costs.get(part, 60.0)) for part in proofs.PARTS if part not in off]


def _proof_work(profile: Profile, part: str) -> Any:
    from kvpool.proofs import runner as proofs

    level = _proof_level(profile)
    if part == "source":
        mutants, replay = source_mutants()
        rows = proofs.run(level, part, mutants, replay, queue_replay())
    elif part == "pool-source":
        rows = proofs.run(level, part, pool_replay=pool_replay())
    else:
        rows = proofs.run(level, part, queue_replay=queue_replay())
    return [asdict(r) for r in rows]


def queue_replay() -> Any:
    """A refinement witness, decoded, run on the real queue class (the proofs import no
    ``impl``): "agrees" with the spec's sequence, or what differs."""
    from kvpool.impl import FreeKVCacheBlockQueue, KVCacheBlock
    from kvpool.proofs import pyrefine

    return lambda case: pyrefine.replay(case, FreeKVCacheBlockQueue, KVCacheBlock)


def _mutant_name(obligation: str) -> str:
    """The mutant a proof row names in brackets, with what follows the brackets:
    ``"INV-CACHE [mk-x] (every N)"`` is ``"mk-x (every N)"``, ``"INV-REF [bug]"`` is
    ``"bug"``."""
    inside, _, after = obligation.rpartition("[")[2].partition("]")
    return f"{inside} {after.strip()}".strip()


def source_mutants() -> tuple[dict[str, tuple[str, tuple[tuple[str, str], ...]]], Any]:
    """The "source" proof part's mutants: the proof's own and every queue mutant of the
    catalogue, applied to ``impl/free_queue.py``; and the replay of a counterexample on
    the patched class (which must disagree with the spec) and on the real one (which
    must agree), here because the proofs import no ``impl``."""
    from kvpool.impl import FreeKVCacheBlockQueue, KVCacheBlock
    from kvpool.mutants import CATALOGUE, queue_class
    from kvpool.proofs import pyrefine

    mutants = {
        **pyrefine.SOURCE_MUTANTS,
        **{m.name: (m.story, m.queue_patches) for m in CATALOGUE.values() if m.queue_patches},
    }

    def replay(case: pyrefine.Case, patches: tuple[tuple[str, str], ...]) -> str:
        buggy = pyrefine.replay(case, queue_class(patches, "source-replay"), KVCacheBlock)
        real = pyrefine.replay(case, FreeKVCacheBlockQueue, KVCacheBlock)
        if real != "agrees":
            return f"NOT confirmed: the real queue does not agree either ({real})"
        if buggy == "agrees":
            return "NOT confirmed: the patched queue agrees with the spec"
        return f"confirmed: {case}: {buggy}"

    return mutants, replay


def pool_replay() -> Any:
    """A ``touch`` counterexample (``kvpool.proofs.pypool``) run on the patched pool class,
    which must disagree with the spec, and on the real one, which must agree."""
    from kvpool.impl import BlockPool
    from kvpool.mutants import Mutant
    from kvpool.proofs import pyhot, pypool

    def replay(case: pypool.Case | pyhot.HotCase, patches: tuple[tuple[str, str], ...]) -> str:
        run: Any = pyhot.replay if isinstance(case, pyhot.HotCase) else pypool.replay
        real = run(case, BlockPool)
        if real != "agrees":
            return f"NOT confirmed: the real pool does not agree either ({real})"
        buggy = run(case, Mutant("pool-source", "", (), patches).pool_class())
        if buggy == "agrees":
            return "NOT confirmed: the patched pool agrees with the spec"
        return f"confirmed: {case}: {buggy}"

    return replay


def _proof_combine(profile: Profile, payloads: list[Any]) -> list[Check]:
    from kvpool.proofs.runner import ObligationResult

    rows = [
        ObligationResult(**{**d, "invariants": tuple(d["invariants"])})
        for payload in payloads
        for d in payload
    ]
    return proof_checks(rows)


def run_proofs(profile: Profile) -> list[Check]:
    """z3: BMC, fixed-N induction, induction for every N, the list's refinement; cvc5."""
    from kvpool.proofs import runner as proofs

    return proof_checks(proofs.run(_proof_level(profile), queue_replay=queue_replay()))


def source_detail() -> str:
    """The source refinement's cell: every list length, but the checked ``append_n`` and
    ``prepend_n`` only for groups of a bounded size (their loops are unrolled)."""
    from kvpool.proofs.pyrefine import GROUP_BOUND

    return f"free_queue.py's source: every list; append_n/prepend_n groups of <= {GROUP_BOUND}"


def _catalogue_names() -> set[str]:
    from kvpool.mutants import CATALOGUE

    return set(CATALOGUE)


MULTIKEY_BOUNDS = "keys K=4 of 2 hashes x 2 groups, E<=3 further entries per block"
"""What a multi-key fixed-N cell holds besides its N (``proofs/multikey.py``'s defaults)."""


GIVEN_S = "given each pool's S"
"""In a two-pool every-N row's bounds: its hypothesis holds each pool's strengthened
invariant S, which ``twopool.every_n_rows`` (rows PERM, INV-REF, ...) proves inductive for
two pools: in ``make proofs-deep`` only."""


TWO_LISTS = "two pools, every list length"
"""How a two-pool row proved with lists of symbolic length opens its bounds
(``proofs/twolists.py``'s BOUNDS)."""


def two_every_note(done: list[tuple[str, bool]]) -> str:
    """The z3 induction column's note on what two pools prove for every N (every such row
    ok): rows resting on each pool's S say so unless S's own two-pool rows ran too."""
    names = list(dict.fromkeys(n for n, _ in done))
    given = list(dict.fromkeys(n for n, g in done if g))
    if not given or "PERM" in names:
        return "two pools, every N (lists <= 2): " + ", ".join(names) + " proved"
    rest = [n for n in names if n not in given]
    return (
        "two pools, every N (lists <= 2): "
        + (", ".join(rest) + " proved; " if rest else "")
        + ", ".join(given)
        + f" proved {GIVEN_S} (S for two pools: make proofs-deep)"
    )


PROOF_ROWS: list[dict[str, Any]] = []
"""The last run's proof rows, one per obligation (or mutant, or solver re-check), as
:func:`proof_checks` saw them: what ``--json`` writes under ``"obligations"`` and
``--obligations`` writes as a table."""


def obligation_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: every proof row of a run, grouped by technique, with its bounds, its status
    and its seconds (wall clock, in its part: the solver's time with the encoding's), and
    per technique the count of rows and their total seconds. Rows are in the run's order."""
    by_technique: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_technique.setdefault(str(r["technique"]), []).append(r)

    def cell(text: object) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    out = [
        "| technique | obligation | bounds | status | seconds |",
        "| --- | --- | --- | --- | ---: |",
    ]
    head = ["| technique | rows | statuses | seconds |", "| --- | ---: | --- | ---: |"]
    totals = []
    for technique, rs in by_technique.items():
        for r in rs:
            out.append(
                f"| {cell(technique)} | {cell(r['obligation'])} | {cell(r['bounds'])} "
                f"| {cell(r['status'])} | {float(r['seconds']):.2f} |"
            )
        totals.append(
            f"| {cell(technique)} | {len(rs)} | "
            + ", ".join(f"{n} {s}" for s, n in sorted(Counter(r["status"] for r in rs).items()))
            + f" | {sum(float(r['seconds']) for r in rs):.1f} |"
        )
    return "\n".join([*out, "", "Per technique:", "", *head, *totals]) + "\n"


def proof_checks(rows: list[ObligationResult]) -> list[Check]:
    """The proofs runner's rows as checks: one per technique, and the extras
    (differential, witnesses, second solver) that fill no column."""
    from kvpool.proofs import runner as proofs
    from kvpool.proofs.cvc5more import solvers_note
    from kvpool.proofs.eventseq import SEQ_MUTANTS
    from kvpool.proofs.symlists import EVERY_LIST, NO_LIST_RULES
    from kvpool.proofs.symsorts import SORTS_MARK

    PROOF_ROWS[:] = [r.as_dict() for r in rows]

    checks: dict[str, Check] = {}
    for technique in (
        "z3 BMC",
        proofs.FIXEDN_TECHNIQUE,
        "z3 induction",
        "refinement",
        proofs.SOURCE_TECHNIQUE,
    ):
        checks[technique] = Check(technique, technique, True, "", 0.0)
    extras = {
        "differential": Check("z3 encoding vs spec (differential)", None, True, "", 0.0),
        "witness": Check(
            "every hypothesis satisfiable: witnesses decoded and replayed", None, True, "", 0.0
        ),
        "second solver": Check("cvc5 re-checks z3's proofs (SMT-LIB 2)", None, True, "", 0.0),
    }
    fixed_ns: dict[str, list[int]] = {}
    scope: dict[str, list[str]] = {}
    fixed_seq: dict[str, list[int]] = {}
    fixed_mk: dict[str, list[int]] = {}
    every_mk: set[str] = set()
    spacer_ns: dict[str, list[int]] = {}
    spacer_asked: dict[int, dict[str, bool]] = {}  # N -> obligation -> proved
    spacer_bad: list[str] = []
    every_list: set[str] = set()  # proved for every list length too (proofs/symlists.py)
    every_sorts: set[str] = set()  # and with keys, watcher ids as sorts (proofs/symsorts.py)
    n_methods: dict[bool, int] = {}
    diff_catches: dict[str, list[bool]] = {}
    unshown: dict[str, list[str]] = {}  # technique -> failed rows with no matrix cell
    fixed_two: dict[str, list[str]] = {}
    two_pools: dict[bool, list[tuple[str, str]]] = {}
    two_every: dict[bool, list[tuple[str, bool]]] = {}  # two pools, every N: (name, given S)
    two_lists: dict[bool, list[str]] = {}  # two pools, every list length (proofs/twolists.py)
    for r in rows:
        if r.kind in (proofs.POOL_SOURCE_KIND, proofs.HOT_SOURCE_KIND):  # a line each, if run
            extra = extras.setdefault(
                r.kind,
                Check(SOURCE_LINES[r.kind], None, True, "", 0.0),
            )
            extra.seconds += r.seconds
            extra.ok = extra.ok and r.ok
            sep = "; " if extra.summary else ""
            if "[" not in r.obligation:
                extra.summary += f"{sep}{r.obligation}: {r.status} ({r.bounds})"
            else:
                extra.summary += f"{sep}mutant {_mutant_name(r.obligation)} {r.status}"
            if not r.ok:
                extra.summary += f" NOT ok: {r.replay}"
            continue
        if r.kind == "differential" and r.status in ("caught", "missed"):
            # one row per (reading, mutant): counted, and the mutant's catch recorded
            name = _mutant_name(r.obligation)
            reading = r.bounds.split(":", 1)[0]
            diff_catches.setdefault(reading, []).append(r.ok)
            extra = extras["differential"]
            extra.seconds += r.seconds
            extra.caught[f"spec:{name}"] = extra.caught.get(f"spec:{name}", False) or r.ok
            if r.ok:
                extra.evidence.setdefault(f"spec:{name}", f"{reading} reading")
            else:
                extra.ok = False
                extra.summary += f" NOT caught on the {reading} reading: {name}"
            continue
        if r.kind in extras:
            extra = extras[r.kind]
            extra.ok = extra.ok and r.ok
            extra.seconds += r.seconds
            extra.summary = "; ".join(
                x for x in (extra.summary, f"{r.status}: {r.bounds}" if r.ok else "") if x
            )
            if r.kind == "witness" and r.ok:  # each part's time (the row says its counts)
                extra.summary += f" ({r.seconds:.1f} s)"
            if r.status == "partly-confirmed":  # which ones cvc5 did not confirm, by name
                extra.summary += f" ({r.replay})"
            if not r.ok:
                extra.summary += f" NOT ok: {r.obligation}: {r.status} {r.replay}"
            continue
        if r.technique == proofs.SPACER_TECHNIQUE and r.technique not in checks:
            checks[r.technique] = Check(r.technique, r.technique, True, "", 0.0)
        check = checks.get(r.technique)
        if check is None:
            # A technique this table does not know fills no column, but its verdict
            # still counts: a failed row must never vanish from the run's result.
            check = extras.setdefault(
                f"other:{r.technique}", Check(r.technique, None, True, "", 0.0)
            )
            check.ok = check.ok and r.ok
            check.seconds += r.seconds
            if not r.ok:
                check.summary += f" NOT ok: {r.obligation}: {r.status} {r.replay}".rstrip()
            elif not check.summary:
                check.summary = f"{r.status}: {r.bounds}"
            continue
        if r.kind == "scope":  # a rule the technique does not state, and why
            scope.setdefault(r.technique, []).append(f"{r.invariants[0]}: {r.status}")
            continue
        check.seconds += r.seconds
        if r.kind == "spacer":  # counted by obligation: RES-* and RANK-BOUNDS have no row
            at_n = spacer_asked.setdefault(int(r.bounds.split(",")[0].split("=")[1]), {})
            for name in r.invariants:
                at_n[name] = at_n.get(name, True) and r.ok
            if not r.ok:
                check.ok = False
                spacer_bad.append(f"{r.obligation}: {r.status} {r.replay}".strip())
        if r.technique == proofs.SOURCE_TECHNIQUE and r.kind == "refinement":
            n_methods[r.ok] = n_methods.get(r.ok, 0) + 1
        if r.kind == "mutant":
            name = _mutant_name(r.obligation)
            if r.technique == proofs.SOURCE_TECHNIQUE:
                # a catalogue mutant keeps its name (the catalogue table shows who caught
                # it); the proof's own mutants of the source are named as such
                key = name if name in _catalogue_names() else f"source:{name}"
                check.caught[key] = check.caught.get(key, False) or r.ok
                if r.ok:
                    check.evidence.setdefault(key, "INV-LIST, from source")
                else:
                    check.ok = False
                    check.summary += f" NOT refuted: {name} ({r.status})"
                continue
            # (the event-log and firing-point mutants exist in the encoding only)
            key = f"encoding:{name}" if name in SEQ_MUTANTS else f"spec:{name}"
            check.caught[key] = check.caught.get(key, False) or r.ok
            if r.ok:
                check.evidence.setdefault(key, ", ".join(r.invariants))
            if not r.ok:
                check.ok = False
            continue
        if "two pools" in r.bounds:
            # two pools (proofs/twopool.py): each pool's INV-* and POOL_RULES; a failure
            # fails the column, a rule's too (the rules have no row of the matrix)
            if r.kind == "fixed-N":
                two_pools.setdefault(r.ok, []).append((r.invariants[0], r.bounds.split(" ")[0]))
            if r.kind == "inductive" and r.bounds.startswith("two pools, every N"):
                given = GIVEN_S in r.bounds
                two_every.setdefault(r.ok, []).append((r.invariants[0], given))
            if r.kind == "inductive" and r.bounds.startswith(TWO_LISTS):
                two_lists.setdefault(r.ok, []).append(r.invariants[0])
            if not r.ok:
                check.ok = False
                scope.setdefault(r.technique or "", []).append(f"NOT proved: {r.obligation}")
            if r.invariants[0] not in ROWS:
                continue
        elif not r.ok and not any(inv in ROWS for inv in r.invariants):
            # (RES-*, RANK-BOUNDS, ...: no matrix cell to show it in, so the summary says it)
            check.ok = False
            unshown.setdefault(r.technique, []).append(f"{r.obligation}: {r.status}")
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
                # (eventseq's rows -- the log as a sequence, the firing point -- reach
                # their own N: named apart in the cell; so do two pools' sizes N_0+N_1)
                seq = "event log a sequence" in r.bounds
                two = "(two pools)" in r.bounds
                mk = "multi-key" in r.bounds  # blocks with several keys (proofs/multikey.py)
                if two:
                    fixed_two.setdefault(inv, []).append(r.bounds.split(" ")[0][2:])
                else:
                    by_n = fixed_mk if mk else fixed_seq if seq else fixed_ns
                    by_n.setdefault(inv, []).append(int(r.bounds.split(",")[0].split("=")[1]))
                ns, sq = sorted(fixed_ns.get(inv, [])), sorted(fixed_seq.get(inv, []))
                mks = sorted(fixed_mk.get(inv, []))
                tw = list(dict.fromkeys(fixed_two.get(inv, [])))
                detail = ", ".join(
                    ([f"N={ns[0]}..{ns[-1]}"] if ns else [])
                    + ([f"as a sequence/firing point N={sq[0]}..{sq[-1]}"] if sq else [])
                    + ([f"multi-key N={mks[0]}..{mks[-1]} ({MULTIKEY_BOUNDS})"] if mks else [])
                    + ([f"two pools N={'/'.join(tw)}"] if tw else [])
                )
                check.cells[inv] = Cell("proved every k", detail)
            elif r.kind == "spacer":  # the engine found its own invariant
                spacer_ns.setdefault(inv, []).append(int(r.bounds.split(",")[0].split("=")[1]))
                ns = sorted(spacer_ns[inv])
                at = f"N={ns[0]}..{ns[-1]}" if len(ns) > 1 else f"N={ns[0]}"
                check.cells[inv] = Cell("proved every k", f"{at}, {proofs.SPACER_LABEL}")
            elif r.kind == "inductive" and r.bounds.startswith(EVERY_LIST):
                # the list-taking calls for every list length: it refines the cell the
                # every-N induction's own rows give (the other calls), and makes none
                every_list.add(inv)
                if SORTS_MARK in r.bounds:
                    every_sorts.add(inv)
            elif r.kind == "inductive":
                if inv in EVERY_N_LEMMAS:
                    if "multi-key" in r.bounds:  # proofs/multikey.py's every-N rows
                        every_mk.add(inv)
                    mk_note = f", blocks with several keys too ({MULTIKEY_BOUNDS})"
                    detail = "every N" + (mk_note if inv in every_mk else "")
                    check.cells[inv] = Cell("proved every N", detail)
                elif inv in EVERY_N_OWN_ROW and r.invariants == (inv,):
                    how = "sums as ghost arrays" if inv.startswith("INV-") else "one step"
                    check.cells[inv] = Cell("proved every N", f"every N, {how}")
                elif cell is None or cell.status != "proved every N":
                    check.cells[inv] = Cell("partial", "per-block/permutation form only")
            elif r.kind == "refinement" and r.technique == proofs.SOURCE_TECHNIQUE:
                check.cells[inv] = Cell("proved every N", source_detail())
            elif r.kind == "refinement":
                check.cells[inv] = Cell("proved every N", "every list, transcribed methods")
            elif cell is None:
                check.cells[inv] = Cell("bounded", r.bounds.split(" keys")[0])
    for inv, cell in checks["z3 induction"].cells.items():
        if cell.status == "proved every N":  # the list-taking calls' lists: which length
            lists = (
                "every list length"
                if inv in every_list
                else "no list"
                if inv in NO_LIST_RULES
                else "lists <= 2"
            )
            kw = KW_SORTS if inv in every_sorts else KW_FIXED  # keys and watcher ids
            cell.detail = cell.detail.replace("every N", f"every N, {lists}, {kw}", 1)
    for check in checks.values():
        n_ok = sum(1 for c in check.cells.values() if c.status not in ("failed", "partial"))
        if check.technique == proofs.SOURCE_TECHNIQUE:
            check.summary = (
                f"{n_methods.get(True, 0)}/{sum(n_methods.values())} methods of "
                f"impl/free_queue.py proved from source, "
                f"{sum(check.caught.values())}/{len(check.caught)} queue mutants refuted"
                + check.summary
            )
            if not n_methods or not check.caught:
                check.ok, check.summary = False, "not run"
            continue
        if check.technique == proofs.SPACER_TECHNIQUE:
            from kvpool.proofs.spacer import OBLIGATIONS

            check.summary = (
                f"proved for every k at fixed N, {proofs.SPACER_LABEL}: "
                + ", ".join(
                    f"N={n} {sum(v.values())}/{len(OBLIGATIONS)}"
                    for n, v in sorted(spacer_asked.items())
                )
                + f" obligations; {sum(check.caught.values())}/{len(check.caught)} "
                "mutants refuted" + "".join(f"; NOT proved: {b}" for b in spacer_bad)
            )
            if not spacer_asked or not check.caught:
                check.ok, check.summary = False, "not run"
            continue
        if check.technique == proofs.FIXEDN_TECHNIQUE and two_pools and not two_pools.get(False):
            sizes = ", ".join(dict.fromkeys(at for _, at in two_pools[True]))
            rules = ", ".join(sorted({name for name, _ in two_pools[True]} & set(POOL_RULES)))
            scope.setdefault(check.technique, []).append(
                f"two pools ({sizes}): each pool's INV-* and {rules} proved every k"
            )
        if check.technique == "z3 induction" and two_every and not two_every.get(False):
            scope.setdefault(check.technique, []).append(two_every_note(two_every[True]))
        if check.technique == "z3 induction" and two_lists and not two_lists.get(False):
            names = ", ".join(dict.fromkeys(two_lists[True]))
            scope.setdefault(check.technique, []).append(
                f"two pools, every N, every list length (list calls as loops): {names} proved"
            )
        check.summary = (
            f"{n_ok} rows {'proved' if check.technique != 'z3 BMC' else 'bounded'}, "
            f"{sum(check.caught.values())}/{len(check.caught)} mutants refuted"
            + "".join(f"; {note}" for note in scope.get(check.technique or "", []))
        )
    for technique, failed in unshown.items():
        checks[technique].summary += "".join(f"; NOT ok: {f}" for f in failed)
    if diff_catches:
        extra = extras["differential"]
        extra.summary += "; encoding mutants caught: " + ", ".join(
            f"{sum(v)}/{len(v)} on the {reading} reading" for reading, v in diff_catches.items()
        )
    if extras["second solver"].summary:  # which parts cvc5 confirmed, and which z3 alone
        extras["second solver"].summary += "; " + solvers_note(rows)
    for extra in extras.values():
        if not extra.summary:
            extra.ok, extra.summary = False, "not run"
    return [*checks.values(), *extras.values()]


# -- Hypothesis -------------------------------------------------------------------------------

LOCKSTEP_ROWS = ROWS
"""The lockstep machine compares every observable after every step, so it speaks to
every row: the INV-* as @invariants (INV-LIST through the impl's own check), the
ordering and watcher rules through the ids, order and firings it compares, and
ERR-ATOMIC through the state it compares after each refused call."""

LOCKSTEP_LEVELS = ("exact", "robust")


def _lockstep_work(profile: Profile, level: str) -> Any:
    from kvpool.impl import BlockPool
    from kvpool.oracle import machine

    settings = machine.profile("ci" if profile == "fast" else "dev")
    found = machine.hunt(BlockPool, machine.impl_config(level=level), settings, f"impl/{level}")
    return {
        "level": level,
        "examples": settings.max_examples or 0,
        "steps": found.steps,
        "killed": found.killed,
        "rule": found.rule,
        "message": found.message.splitlines()[0] if found.killed and found.message else "",
    }


def _lockstep_combine(profile: Profile, payloads: list[Any]) -> list[Check]:
    hunts: list[dict[str, Any]] = payloads
    failures = [f"{h['level']}: {h['rule']}: {h['message']}" for h in hunts if h["killed"]]
    examples = sum(int(h["examples"]) for h in hunts)
    steps = sum(int(h["steps"]) for h in hunts)
    detail = f"{examples} runs, {steps} steps"
    status: Status = "failed" if failures else "tested"
    return [
        Check(
            "hypothesis lockstep",
            "hypothesis lockstep",
            not failures,
            "; ".join(failures) or f"{detail}, no divergence",
            0.0,
            cells={row: Cell(status, detail) for row in LOCKSTEP_ROWS},
        )
    ]


def run_lockstep(profile: Profile) -> Check:
    """Hypothesis: the spec and kvpool.impl in lockstep, at the exact and robust levels."""
    return _lockstep_combine(profile, [_lockstep_work(profile, lv) for lv in LOCKSTEP_LEVELS])[0]


SHARDS = 4
"""The catalogue's mutants are hunted in this many parts (mutant i in part i % SHARDS)."""


def _shard(items: list[str], part: str) -> list[str]:
    i, n = (int(x) for x in part.split("/"))
    return [m for j, m in enumerate(items) if j % n == i]


def _mutant_names() -> list[str]:
    from kvpool import mutants

    return [m.name for m in mutants.MUTANTS]


def _catalogue_work(profile: Profile, part: str) -> Any:
    from kvpool.oracle import machine

    out = []
    for name in _shard(_mutant_names(), part):
        found = machine.kill(name)
        out.append({"mutant": name, "killed": found.killed, "rule": found.rule or "?"})
    return out


def _catalogue_combine(profile: Profile, payloads: list[Any]) -> list[Check]:
    rows = [r for payload in payloads for r in payload]
    caught = {r["mutant"]: bool(r["killed"]) for r in rows}
    evidence = {r["mutant"]: str(r["rule"]) for r in rows if r["killed"]}
    missed = [m for m, hit in caught.items() if not hit]
    return [
        Check(
            "bug catalogue (lockstep)",
            "hypothesis lockstep",
            bool(caught) and not missed,
            f"{len(caught) - len(missed)}/{len(caught)} mutants killed"
            + (f"; survived: {', '.join(missed)}" if missed else ""),
            0.0,
            caught=caught,
            evidence=evidence,
        )
    ]


def run_catalogue(profile: Profile) -> Check:
    """The bug catalogue: every mutant of kvpool.impl hunted by the lockstep machine."""
    return _catalogue_combine(profile, [_catalogue_work(profile, "0/1")])[0]


# -- CrossHair --------------------------------------------------------------------------------

CONTRACT_COSTS: dict[str, float] = {"bounded": 8.0, "entry": 5.5, "find": 1.0}  # as PROOF_COSTS


def _contract_parts(profile: Profile) -> list[tuple[str, float]]:
    from kvpool.contracts import bugs
    from kvpool.contracts import runner as contracts

    parts = [
        (name, CONTRACT_COSTS["bounded" if name in contracts.BOUNDED else "entry"])
        for name in contracts.ENTRY_POINTS
    ]
    if profile != "fast":
        finds = [*bugs.CROSSHAIR_FINDS.items(), *bugs.BOUNDED_FINDS.items()]
        parts += [(f"find:{mutant}@{entry}", CONTRACT_COSTS["find"]) for mutant, entry in finds]
    return parts


CONTRACTS_PROFILE = "fast"
"""The CrossHair profile ``make verify`` runs (both of its own profiles): every queue of
at most 3 blocks, 5 s per pool contract. ``make contracts`` runs "full" (4 blocks, 15 s):
at 4 blocks the queue's four enumerations alone took 230 CPU s of make verify's 600 s
(12-05), which the proofs added that day no longer left room for."""


def _contract_work(profile: Profile, part: str) -> Any:
    from kvpool.contracts import runner as contracts

    if part.startswith("find:"):
        mutant, entry = part.removeprefix("find:").split("@")
        found = contracts.check_one(entry, "fast", mutant)
        return {"find": mutant, "entry": entry, "status": found.status}
    r = contracts.run(CONTRACTS_PROFILE, names=[part], jobs=1)[0]
    return asdict(r)


def _contract_combine(profile: Profile, payloads: list[Any]) -> list[Check]:
    from kvpool.contracts import runner as contracts

    items: list[dict[str, Any]] = payloads
    results = [
        contracts.ContractResult(**{**d, "invariants": tuple(d["invariants"])})
        for d in items
        if "find" not in d
    ]
    caught: dict[str, bool] = {}
    evidence: dict[str, str] = {}
    for d in items:
        if "find" in d:
            entry = str(d["entry"])
            key = f"crosshair:{d['find']}" + (f"@{entry}" if entry in contracts.BOUNDED else "")
            caught[key] = d["status"] == "counterexample"
            evidence[key] = f"counterexample in {entry}"
    return [contract_check(profile, results, caught, evidence)]


def run_contracts(profile: Profile) -> Check:
    """CrossHair: the docstring contracts of the queue, the pool and the spec, path by path."""
    from kvpool.contracts import runner as contracts

    return contract_check(profile, contracts.run(CONTRACTS_PROFILE), {}, {})


def contract_check(
    profile: Profile,
    results: list[ContractResult],
    caught: dict[str, bool],
    evidence: dict[str, str],
) -> Check:
    """CrossHair's verdicts as one check: a row is as strong as its weakest entry point."""
    from kvpool.contracts import runner as contracts

    cells: dict[str, Cell] = {}
    bad = [r for r in results if r.status == "counterexample"]
    per_row: dict[str, list[contracts.ContractResult]] = {}
    for r in results:
        for inv in r.invariants:
            if inv in ROWS:
                per_row.setdefault(inv, []).append(r)
    blocks = contracts.BOUNDED_BLOCKS[CONTRACTS_PROFILE]
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
    return Check(
        "CrossHair contracts",
        "CrossHair",
        bool(results) and not bad and all(caught.values()),
        f"{len(results)} contracts: "
        + ", ".join(
            f"{sum(r.status == s for r in results)} {s}"
            for s in sorted({r.status for r in results})
        )
        + (f"; {sum(caught.values())}/{len(caught)} seeded bugs found" if caught else ""),
        0.0,
        cells=cells,
        caught=caught,
        evidence=evidence,
    )


# -- golden vectors ---------------------------------------------------------------------------


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


# -- the oracle -------------------------------------------------------------------------------

ORACLE_LEVELS = ("safety", "exact", "robust")

CATALOGUE_EXAMPLES = 500
"""Examples per mutant for `kvpool conform` over the catalogue in the full profile, as
`make conform-mutants` runs it. A mutant stops its search when found, so the budget only
costs where a bug is hard to reach: at 100 or 200, multiplicity-as-set was missed (an
over-free of a block in use is drawn too rarely); at 500 all 44 fail, in at most 5 calls."""


def _oracle_parts(profile: Profile) -> list[tuple[str, float]]:
    parts = [(level, 5.0) for level in ORACLE_LEVELS]  # CPU s, as PROOF_COSTS
    if profile != "fast":
        parts += [(f"catalogue:{i}/{SHARDS}", 45.0) for i in range(SHARDS)]
    return parts


def _oracle_work(profile: Profile, part: str) -> Any:
    if part.startswith("catalogue:"):
        # What a user's CI would see: `kvpool conform` on each catalogue mutant.
        from kvpool.oracle import catalogue

        names = _shard(_mutant_names(), part.removeprefix("catalogue:"))
        return {"catalogue": catalogue.run(CATALOGUE_EXAMPLES, names) if names else []}
    from kvpool.oracle.conformance import conform
    from kvpool.oracle.targets import resolve

    report = conform(resolve("reference"), level=part, examples=_oracle_examples(profile), seed=0)
    return {"level": part, "conforms": report.conforms, "rule": report.rule}


def _oracle_examples(profile: Profile) -> int:
    return 50 if profile == "fast" else 200


def _oracle_combine(profile: Profile, payloads: list[Any]) -> list[Check]:
    items: list[dict[str, Any]] = payloads
    levels = [d for d in items if "level" in d]
    bad = [f"{d['level']}: {d['rule']}" for d in levels if not d["conforms"]]
    status: Status = "failed" if bad or not levels else "tested"
    detail = f"{len(levels)} levels x {_oracle_examples(profile)} runs"
    caught: dict[str, bool] = {}
    evidence: dict[str, str] = {}
    for d in items:
        for row in d.get("catalogue", []):
            caught[row["mutant"]] = row["killed"]
            if row["killed"]:
                evidence[row["mutant"]] = f"{row['rule']} ({row['calls_in_minimal_trace']} calls)"
    extra = (
        f"; {sum(caught.values())}/{len(caught)} catalogue mutants fail conform" if caught else ""
    )
    return [
        Check(
            "oracle vs reference",
            "oracle",
            bool(levels) and not bad,
            ("; ".join(bad) or f"reference conforms at safety, exact and robust ({detail})")
            + extra,
            0.0,
            cells={row: Cell(status, detail) for row in ROWS},
            caught=caught,
            evidence=evidence,
        )
    ]


def run_oracle(profile: Profile) -> Check:
    """The oracle: `kvpool conform` against the reference pool at every level."""
    parts = [p for p, _ in _oracle_parts(profile)]
    return _oracle_combine(profile, [_oracle_work(profile, p) for p in parts])[0]


# -- running them -----------------------------------------------------------------------------


def _unit_runner() -> Runner:
    r = single(run_unit_tests)
    return Runner(r.name, r.label, lambda profile: [("all", 10.0)], r.work, r.combine)


def _vectors_runner() -> Runner:
    r = single(run_vectors)
    return Runner(r.name, r.label, lambda profile: [("all", 10.0)], r.work, r.combine)


RUNNERS: list[Runner | Callable[[Profile], Check | list[Check]]] = [
    _unit_runner(),
    Runner(
        "lockstep",
        "Hypothesis: the spec and kvpool.impl in lockstep, at the exact and robust levels",
        lambda profile: [(lv, 30.0) for lv in LOCKSTEP_LEVELS],  # CPU s, as PROOF_COSTS
        _lockstep_work,
        _lockstep_combine,
    ),
    Runner(
        "catalogue",
        "The bug catalogue: every mutant of kvpool.impl hunted by the lockstep machine",
        lambda profile: [(f"{i}/{SHARDS}", 16.0) for i in range(SHARDS)],
        _catalogue_work,
        _catalogue_combine,
    ),
    Runner(
        "proofs",
        "z3: BMC, fixed-N induction, induction for every N, the list's refinement; cvc5",
        _proof_parts,
        _proof_work,
        _proof_combine,
    ),
    Runner(
        "contracts",
        "CrossHair: the docstring contracts of the queue, the pool and the spec",
        _contract_parts,
        _contract_work,
        _contract_combine,
    ),
    _vectors_runner(),
    Runner(
        "oracle",
        "The oracle: `kvpool conform` against the reference pool at every level",
        _oracle_parts,
        _oracle_work,
        _oracle_combine,
    ),
]
"""Every check ``make verify`` runs. A plain function ``profile -> Check | list[Check]``
is accepted too (a runner of one part)."""


def _runners(only: frozenset[str] | None = None) -> dict[str, Runner]:
    """Every runner by name, or those named in ``only`` (an unknown name: ValueError)."""
    out: dict[str, Runner] = {}
    for r in RUNNERS:
        runner = r if isinstance(r, Runner) else single(r)
        out[runner.name] = runner
    if only is None:
        return out
    unknown = sorted(only - out.keys())
    if unknown:
        raise ValueError(f"no runner named {', '.join(unknown)} (runners: {', '.join(out)})")
    return {name: r for name, r in out.items() if name in only}


def run_task(runner: str, part: str, profile: Profile, out: Path) -> int:
    """The child's side: run one part and write ``{"payload": ...}`` (or ``{"error": ...}``)."""
    start = time.perf_counter()
    try:
        payload = _runners()[runner].work(profile, part)
        result: dict[str, object] = {"payload": payload}
        code = 0
    except BaseException as exc:  # reported to the parent as this part's failure
        result = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        code = 1
    usage = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    result["cpu"] = usage.ru_utime + usage.ru_stime + kids.ru_utime + kids.ru_stime
    result["seconds"] = time.perf_counter() - start
    out.write_text(json.dumps(result))
    return code


@dataclass
class _Task:
    runner: str
    part: str
    cost: float
    out: Path
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    seconds: float = 0.0
    cpu: float = 0.0
    error: str = ""
    payload: Any = None


TASK_TIMEOUT = 1200.0
"""Seconds after which a part is stopped and counted as failed (a hang is never a pass)."""

DEEP_TASK_TIMEOUT = 3 * 3600.0
"""The same in the deep profile, whose longest part took 65 min in its first whole run."""


def _task_timeout(profile: Profile) -> float:
    return DEEP_TASK_TIMEOUT if profile == "deep" else TASK_TIMEOUT


def _kill(task: _Task) -> None:
    if task.proc is not None and task.proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(task.proc.pid, signal.SIGKILL)
        task.proc.wait()


def _finish(task: _Task) -> None:
    task.seconds = time.perf_counter() - task.started
    try:
        result = json.loads(task.out.read_text())
    except (OSError, ValueError):
        code = task.proc.returncode if task.proc is not None else None
        task.error = task.error or f"the part's process exited {code} with no result"
        return
    task.cpu = float(result.get("cpu", 0.0))
    if "error" in result:
        task.error = f"crashed: {result['error']}"
        task.payload = result.get("traceback", "")
    else:
        task.payload = result["payload"]


def _spawn(task: _Task, profile: Profile) -> None:
    cmd = [sys.executable, "-m", "kvpool.verify", "--profile", profile]
    cmd += ["--task", task.runner, "--part", task.part, "--out", str(task.out)]
    task.started = time.perf_counter()
    task.proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: ended whole, solvers included
    )


def _combine(runner: Runner, profile: Profile, tasks: list[_Task], console: Console) -> list[Check]:
    bad = [t for t in tasks if t.error]
    seconds = sum(t.seconds for t in tasks)
    if bad:
        for t in bad:
            if isinstance(t.payload, str) and t.payload:
                console.print(t.payload, style="red", markup=False)
        return [
            Check(
                runner.name,
                None,
                False,
                "; ".join(f"{t.part}: {t.error}" for t in bad),
                seconds,
            )
        ]
    try:
        checks = runner.combine(profile, [t.payload for t in tasks])
    except Exception as exc:  # a check that crashed is a failed check, never a pass
        console.print(traceback.format_exc(), style="red", markup=False)
        return [Check(runner.name, None, False, f"crashed: {type(exc).__name__}: {exc}", seconds)]
    for c in checks:
        c.seconds = c.seconds or seconds
    return checks


def run_all(
    profile: Profile,
    console: Console,
    jobs: int = 0,
    only: frozenset[str] | None = None,
    keep: Path | None = None,
) -> list[Check]:
    """Every runner's parts (or those of the runners named in ``only``), ``jobs`` at a
    time in fresh interpreters (longest first), or in this process one after another
    when ``jobs`` is 0. ``keep``: a directory that keeps each part's result file (the
    default is a temporary one)."""
    runners = _runners(only)
    checks: list[Check] = []

    def report(produced: list[Check]) -> None:
        for check in produced:
            mark = "[green]ok[/]" if check.ok else "[bold red]FAILED[/]"
            console.print(f"{mark} {check.name}: {check.summary} [dim]({check.seconds:.1f}s)[/]")
            checks.append(check)

    if jobs == 0:
        for runner in runners.values():
            tasks = []
            for part, cost in runner.parts(profile):
                task = _Task(runner.name, part, cost, Path(os.devnull))
                with console.status(f"[bold]{runner.label}[/] ({part}, {profile})"):
                    task.started = time.perf_counter()
                    try:
                        task.payload = runner.work(profile, part)
                    except Exception as exc:
                        task.error = f"crashed: {type(exc).__name__}: {exc}"
                        task.payload = traceback.format_exc()
                    task.seconds = time.perf_counter() - task.started
                tasks.append(task)
            report(_combine(runner, profile, tasks, console))
        return checks

    with contextlib.ExitStack() as stack:
        if keep is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="kvpool-verify-"))
        else:
            keep.mkdir(parents=True, exist_ok=True)
            tmp = str(keep)
        by_runner: dict[str, list[_Task]] = {}
        for runner in runners.values():
            by_runner[runner.name] = [
                _Task(runner.name, part, cost, Path(tmp) / f"{runner.name}-{i}.json")
                for i, (part, cost) in enumerate(runner.parts(profile))
            ]
        queue = sorted(
            (t for ts in by_runner.values() for t in ts), key=lambda t: t.cost, reverse=True
        )
        running: list[_Task] = []
        left = {name: len(ts) for name, ts in by_runner.items()}
        try:
            with console.status("") as status:
                while queue or running:
                    while queue and len(running) < jobs:
                        task = queue.pop(0)
                        _spawn(task, profile)
                        running.append(task)
                    status.update(
                        "[bold]running[/] "
                        + ", ".join(f"{t.runner}:{t.part}" for t in running)
                        + f" [dim]({len(queue)} queued)[/]"
                    )
                    time.sleep(0.2)
                    for task in list(running):
                        if task.proc is None:  # not spawned yet
                            continue
                        limit = _task_timeout(profile)
                        overdue = time.perf_counter() - task.started > limit
                        if task.proc.poll() is None and not overdue:
                            continue
                        if overdue and task.proc.poll() is None:
                            _kill(task)
                            task.error = f"timed out after {limit:.0f}s"
                        running.remove(task)
                        _finish(task)
                        left[task.runner] -= 1
                        if left[task.runner] == 0:
                            report(
                                _combine(
                                    runners[task.runner], profile, by_runner[task.runner], console
                                )
                            )
        finally:  # Ctrl-C or a crash here: no part outlives the run
            for task in running:
                _kill(task)
        tasks = [t for ts in by_runner.values() for t in ts]
        cpu = sum(t.cpu for t in tasks)
        slow = sorted(tasks, key=lambda t: t.seconds, reverse=True)[:5]
        console.print(
            f"[dim]{len(tasks)} parts, {jobs} at a time, {cpu:.0f} CPU-s; slowest: "
            + ", ".join(f"{t.runner}:{t.part} {t.seconds:.0f}s" for t in slow)
            + "[/]"
        )
        _TIMINGS[:] = [
            {"runner": t.runner, "part": t.part, "seconds": t.seconds, "cpu": t.cpu} for t in tasks
        ]
    return checks


_TIMINGS: list[dict[str, object]] = []
"""The last parallel run's parts, with their wall and CPU seconds (for ``--json``)."""


def matrix(checks: list[Check], every_runner: bool = True) -> Table:
    """Rows: invariants and rules; columns: techniques (those that ran, when not
    ``every_runner``). A bound every cell of a column shares goes into the column's
    header, so the cells read at a glance."""
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
    ran = {c.technique for c in checks}
    techniques = [
        t for t in TECHNIQUES if t in ran or (every_runner and t not in OPTIONAL_TECHNIQUES)
    ]
    for t in techniques:
        details = {cell.detail for cell in by_technique[t].values()}
        shared[t] = details.pop() if len(details) == 1 else ""
        table.add_column(f"{t}\n[dim]{shared[t]}[/]" if shared[t] else t)
    for row in ROWS:
        cells = []
        for t in techniques:
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


def failures(checks: list[Check], every_runner: bool = True) -> list[str]:
    """Every failure of ``checks``; a row nothing covers is one only when ``every_runner``
    ran (``--only`` asks some techniques alone)."""
    out = [f"{c.name}: {c.summary}" for c in checks if not c.ok]
    for c in checks:
        out.extend(
            f"{c.name}: {row} {cell.detail}"
            for row, cell in c.cells.items()
            if cell.status == "failed"
        )
    for row in ROWS if every_runner else ():
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
    parser.add_argument(
        "--profile",
        choices=["fast", "full", "deep"],
        default="full",
        help="deep: the proofs' deep profile (make proofs-deep), the rest as full",
    )
    parser.add_argument(
        "--only",
        metavar="RUNNER,...",
        help="run only these runners (" + ", ".join(_runners()) + ")",
    )
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="keep each part's result file in DIR"
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the results as JSON")
    parser.add_argument(
        "--obligations",
        type=Path,
        metavar="FILE",
        help="write every proof row (technique, obligation, bounds, status, seconds) as a "
        "Markdown table",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="parts run at a time, each in a fresh interpreter (default: one per core; "
        "0 runs them in this process)",
    )
    parser.add_argument("--task", help=argparse.SUPPRESS)  # the child's side of --jobs
    parser.add_argument("--part", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.jobs < 0:
        parser.error("--jobs must be 0 or more")
    if args.task is not None:
        if args.part is None or args.out is None:
            parser.error("--task needs --part and --out")
        return run_task(args.task, args.part, args.profile, args.out)
    only = None if args.only is None else frozenset(filter(None, args.only.split(",")))
    try:
        _runners(only)
    except ValueError as exc:
        parser.error(str(exc))
    console = _console()
    start = time.perf_counter()
    checks = run_all(args.profile, console, args.jobs, only, args.keep)
    console.print()
    console.print(matrix(checks, every_runner=only is None))
    table = catalogue(checks)
    if table is not None:
        console.print(table)
    bad = failures(checks, every_runner=only is None)
    elapsed = time.perf_counter() - start
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "profile": args.profile,
                    "only": None if only is None else sorted(only),
                    "ok": not bad,
                    "seconds": elapsed,
                    "failures": bad,
                    "checks": [asdict(c) for c in checks],
                    "parts": _TIMINGS,
                    "obligations": PROOF_ROWS,
                },
                indent=2,
            )
        )
    if args.obligations:
        args.obligations.write_text(obligation_table(PROOF_ROWS), encoding="utf-8")
    if bad:
        console.print(f"[bold red]{len(bad)} failure(s)[/] in {elapsed:.0f}s:")
        for line in bad:
            console.print(f"  - {line}", markup=False)
        return 1
    console.print(f"[bold green]all {len(checks)} checks passed[/] in {elapsed:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
