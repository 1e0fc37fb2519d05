"""cvc5 on the two proof kinds whose answer is not one recorded query: Spacer and BMC.

**Spacer** (:mod:`.spacer`) answers ``unsat`` on its Horn clauses by finding an inductive
invariant ``Inv`` of the states. That invariant is taken from Spacer
(``Fixedpoint.get_cover_delta(-1, Reach)``: a formula over ``Reach``'s arguments) and
written out as three plain SMT-LIB 2 queries, each of which must be unsat:

* ``Init => Inv``: ``not Inv(init)`` (the pool as built, both switches free);
* ``Inv and T => Inv'``: ``Inv(s) and domain(a) and not Inv(T(s, a))``;
* ``Inv => P``: ``Inv(s) and not P(s)`` (for a step rule, ``Inv(s) and domain(a) and not
  P(s, a, r, T(s, a))``).

Together they prove P for every run at that N without Spacer: a certificate. z3 reads
each query's exported text whole; cvc5 the same query one conjunct of its goal at a time
(each lemma of ``Inv'``, each conjunct of ``P``), in one incremental solver that holds
the hypothesis once (:func:`confirm_clauses`; a conjunct it leaves unknown is asked case
by case on the call's kind, :func:`ask_cases`, the cases' coverage checked first,
:func:`covers`); both must say unsat. A ``sat`` from either is
a failure ("disagree": Spacer said proved, its certificate does not hold); ``unknown``
leaves it *not confirmed*.

**BMC** (``runner.run_bmc``): each obligation at each step 1..k is asked with the
obligations of the earlier steps as lemmas. The very same queries (the unrolled
transition, the earlier steps' obligations, the negated obligation at the step) are
written out at the bounds a row names and asked of z3 and cvc5 (:func:`bmc_queries`).

Both run in a child interpreter (``python -m kvpool.proofs.cvc5certs``) killed at a
deadline, so that neither adds terms to the caller's z3 context.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import z3  # type: ignore[import-untyped]

from . import bmc, cvc5more, smtlib

TIMEOUT_MS = 60000
"""cvc5's and z3's limit per certificate query (quantifier-free: one ask each)."""

SPACER_CHECKS = ("Init => Inv", "Inv and T => Inv'", "Inv => P")

Verdict = list[str]
"""One query's outcome: its name, z3's verdict on the text, cvc5's, cvc5's seconds, and
how cvc5's was reached ("whole", or the parts it was asked in)."""


Query = tuple[list[z3.BoolRef], z3.BoolRef]
"""A query as its hypotheses and its goal: unsat iff the hypotheses imply the goal."""


def spacer_queries(
    inv: z3.BoolRef,
    vs: Sequence[z3.ExprRef],
    init: Sequence[z3.ExprRef],
    post: Sequence[z3.ExprRef],
    dom: z3.BoolRef,
    goal: z3.BoolRef,
    uses_step: bool,
) -> dict[str, Query]:
    """The three queries of the module's doc for Spacer's invariant ``inv`` (a formula
    whose ``Var(i)`` is ``Reach``'s i-th argument): ``vs`` the state's variables, ``init``
    and ``post`` the initial state's and the step's values for them, ``dom`` the calls'
    domain, ``goal`` the obligation (a step rule when ``uses_step``)."""

    def at(xs: Sequence[z3.ExprRef]) -> z3.BoolRef:
        return z3.substitute_vars(inv, *xs)

    return {
        SPACER_CHECKS[0]: ([], at(init)),
        SPACER_CHECKS[1]: ([at(vs), dom], at(post)),
        SPACER_CHECKS[2]: ([at(vs), *([dom] if uses_step else [])], goal),
    }


def confirm(queries: dict[str, Query], timeout_ms: int = TIMEOUT_MS) -> list[Verdict]:
    """Each query exported once (:func:`cvc5more.export`) and z3's verdict on that text;
    cvc5's on the same query with its goal as its conjuncts (the invariant's clauses,
    or the obligations asked together), asked as one group and in halves where
    cvc5 leaves a group unknown (:func:`cvc5more.confirm`: the group whole is the query
    itself). "unsat" only if every part is, "sat" if any is (a model of a part is a
    model of the query). The fifth field says how cvc5's verdict was reached."""
    out = []
    for name, (hyp, goal) in queries.items():
        zv, _ = smtlib.z3_check(cvc5more.export([*hyp, z3.Not(goal)]), timeout_ms)
        t0 = time.perf_counter()
        parts = list(goal.children()) if z3.is_and(goal) else [goal]
        # (not one by one: a Spacer invariant has hundreds of clauses, each with the whole
        # transition; past the halving's asks the child's deadline is what is left)
        g = cvc5more.confirm(cvc5more.Group(name, hyp, parts), one_by_one=False)
        vs = set(g.verdicts)
        cv = "unsat" if vs == {"unsat"} else "sat" if "sat" in vs else "unknown"
        how = f"{len(parts)} parts, {g.how}, {g.asks} asks"
        out.append([name, zv, cv, f"{time.perf_counter() - t0:.1f}", how])
    return out


PART_MS = 10000
"""cvc5's limit per conjunct of a certificate's goal (:func:`confirm_clauses`): a single
clause of N=5's ``Inv and T => Inv'`` took 0.04 CPU s (2026-12-06)."""

PART_GIVE_UP = 5
"""This many conjuncts left unknown in a row end a query's asks (those are hard, not
starved): the query stays unknown."""

LEFTOVERS = 20
"""At most this many parts a query's incremental asks left unknown are asked again as
:func:`cvc5more.confirm` asks a group (each part exported with the whole hypothesis:
whole, in halves, then one by one); more, and the query stays unknown."""

NOT_ASKED = "not asked"
"""A certificate query's verdicts when its child was stopped before it was asked."""


def _parts(goal: z3.BoolRef) -> list[z3.BoolRef]:
    """``goal``'s top-level conjuncts (nested ``and`` flattened): their conjunction is
    ``goal``."""
    if not z3.is_and(goal):
        return [goal]
    return [p for c in goal.children() for p in _parts(c)]


def ask_clauses(
    hyp: list[z3.BoolRef],
    parts: list[z3.BoolRef],
    timeout_ms: int = PART_MS,
    progress: Callable[[int, list[str]], None] | None = None,
) -> list[str]:
    """cvc5's verdict on each ``hyp and not part``, asked of ONE incremental cvc5 solver.

    The hypothesis is written out once (:func:`cvc5more.export`) with, for each part
    ``L_i``, a fresh Boolean ``g_i`` and the assertion ``g_i => not L_i``; cvc5 parses it
    once and is asked ``check-sat-assuming g_i`` for each i in turn (its learned facts
    about ``hyp`` kept between them). Under the assumption ``g_i`` the other ``g_j`` are
    free (set false, their assertions hold), so each ask is satisfiable exactly when
    ``hyp and not L_i`` is. Each ask has ``timeout_ms`` (cvc5's ``tlimit-per``);
    :data:`PART_GIVE_UP` unknowns in a row stop the asks (the rest stay "unknown"), and a
    "sat" stops them (a model of one part is a model of the query). ``progress`` gets
    the number asked and the verdicts so far after each ask."""
    names = [f"kvpool_part_{i}" for i in range(len(parts))]
    gs = [z3.Bool(n) for n in names]
    text = cvc5more.export(
        [*hyp, *(z3.Implies(g, z3.Not(p)) for g, p in zip(gs, parts, strict=True))]
    )
    slv, sm = smtlib.cvc5_load(text, timeout_ms, incremental=True)
    tm = slv.getTermManager()
    declared = {str(t): t for t in sm.getDeclaredTerms()}
    out = ["unknown"] * len(parts)
    misses = 0
    for i, name in enumerate(names):
        # (z3.simplify drops g_i where not L_i simplifies to true: then g_i is free, and
        # the ask is hyp alone, satisfiable exactly when hyp and not L_i is)
        g = declared.get(name) or tm.mkConst(tm.getBooleanSort(), name)
        res = slv.checkSatAssuming(g)
        out[i] = "unsat" if res.isUnsat() else "sat" if res.isSat() else "unknown"
        if progress is not None:
            progress(i + 1, out)
        if out[i] == "sat":
            break
        misses = misses + 1 if out[i] == "unknown" else 0
        if misses >= PART_GIVE_UP:
            break
    return out


CASE_MS = TIMEOUT_MS
"""cvc5's limit on each case of a conjunct asked case by case (:func:`ask_cases`).
Measured 2026-12-06 (load average 4 to 5): the two conjuncts of N=6's ``Inv and T =>
Inv'`` (the state obligations) cvc5 left unknown alone at 60 s take 12.4 and 15.8 CPU s
(19 and 24 s of wall time) in their hardest case, the call UnpinBlocks; each other case
0.1 to 1.1 CPU s."""

CASE_LEFTOVERS = 20
"""At most this many conjuncts a query's incremental asks left unknown are asked case by
case (:func:`_by_cases`); more, and none is (the query is hard throughout)."""


def covers(hyp: list[z3.BoolRef], cases: Sequence[z3.BoolRef], timeout_ms: int = CASE_MS) -> str:
    """cvc5's verdict on ``hyp and not (C_1 or ... or C_k)``: "unsat" when every model
    of the hypothesis is in some case (the call's kind ranges over its domain); one
    case per path of :func:`cvc5more.covers`."""
    return cvc5more.covers([(c,) for c in cases], hyp, timeout_ms)


def ask_cases(
    hyp: list[z3.BoolRef],
    part: z3.BoolRef,
    cases: Sequence[z3.BoolRef],
    timeout_ms: int = CASE_MS,
) -> str:
    """cvc5's verdict on ``hyp and not part``, asked case by case: for each case ``C``
    (``x == c``: the call's kind), ``hyp and C and not part`` with ``x`` replaced by
    ``c`` everywhere and simplified (:func:`smtlib.assume`: the equation kept, the same
    query restricted to the case; the transition's branches for the other kinds fall
    away). cvc5 as :func:`cvc5more.ask` asks (a quantifier-free query in this process,
    with its limit; a quantified one in a child, cvc5's default settings).

    Sound only with the cases' coverage, which the caller checks (:func:`covers`): when
    ``hyp`` implies ``C_1 or ... or C_k``, every model of ``hyp and not part`` is a
    model of one case, so the query is unsat iff every case is. A case's model is a
    model of the query (its hypotheses include all of ``hyp``): "sat" anywhere is a
    disagreement. "unsat" only if every case is; the first case that is not stops the
    asks, and its verdict is returned."""
    for c in cases:
        h, g = smtlib.assume(hyp, part, c)
        v, _ = cvc5more.ask(cvc5more.export([*h, z3.Not(g)]), timeout_ms, ladder=False)
        if v != "unsat":
            return v
    return "unsat"


def _by_cases(
    hyp: list[z3.BoolRef],
    parts: list[z3.BoolRef],
    vs: list[str],
    cases: Sequence[z3.BoolRef],
) -> str:
    """Each part still "unknown" in ``vs`` (at most :data:`CASE_LEFTOVERS`) asked by
    :func:`ask_cases` (``vs`` updated in place), once :func:`covers` says the cases
    cover every model of ``hyp`` (else none is asked, and they stay unknown): what to
    say of it in the verdict's fifth field. A "sat" stops the asks."""
    left = [i for i, v in enumerate(vs) if v == "unknown"]
    if not left or len(left) > CASE_LEFTOVERS:  # (more: the query is hard throughout)
        return ""
    cov = covers(hyp, cases)
    if cov != "unsat":
        return f"; coverage of the {len(cases)} cases {cov}: not asked by cases"
    for i in left:
        v = ask_cases(hyp, parts[i], cases)
        vs[i] = v if v in ("unsat", "sat") else "unknown"
        if vs[i] == "sat":
            break
    n = sum(vs[i] == "unsat" for i in left)
    return (
        f"; {len(left)} unknown asked case by case on the call's kind "
        f"({len(cases)} cases, coverage unsat): {n} unsat"
    )


def _stream(done: list[Verdict], names: Sequence[str], current: Verdict | None) -> list[Verdict]:
    """The verdicts so far, every query named: ``current`` (the one being asked), then
    :data:`NOT_ASKED` for those after it (never counted as confirmed)."""
    rest = [
        n for n in names if n not in {v[0] for v in done} and (current is None or n != current[0])
    ]
    return [
        *done,
        *([current] if current else []),
        *([n, NOT_ASKED, NOT_ASKED, "0.0", "its child was stopped first"] for n in rest),
    ]


def confirm_clauses(
    queries: dict[str, Query],
    timeout_ms: int = TIMEOUT_MS,
    part_ms: int = PART_MS,
    progress: Callable[[list[Verdict]], None] | None = None,
    every_s: float = 5.0,
    cases: dict[str, list[z3.BoolRef]] | None = None,
) -> list[Verdict]:
    """A certificate's queries (:func:`spacer_queries`), each exported once and z3's
    verdict on that text (as :func:`confirm`); cvc5's asked one conjunct of the goal at
    a time, incrementally (:func:`ask_clauses`): for ``Inv and T => Inv'`` each lemma of
    ``Inv'``, for ``Inv => P`` each conjunct of ``P``'s obligations (nested ``and``
    flattened).

    Sound: ``H => (L_1 and ... and L_k)`` is valid iff every ``H => L_i`` is, so the
    query is unsat iff every ``H and not L_i`` is; cvc5's "unsat" is given only when it
    said unsat on every part, "sat" when it said sat on any part (a model of
    ``H and not L_i`` is a model of ``H and not (L_1 and ... and L_k)``: a disagreement),
    else "unknown" (not confirmed). Parts the incremental asks leave unknown are asked
    case by case where ``cases`` names case facts for the query (its name -> facts
    ``x == c`` whose disjunction the hypothesis implies, checked by :func:`covers`: the
    call's kind, for the queries with a call), :func:`_by_cases`; those still unknown (at
    most :data:`LEFTOVERS`, none when one is sat) are asked again non-incrementally
    (:func:`cvc5more.confirm`: the part with the whole hypothesis, the same query).
    ``progress`` gets every query's verdicts so far
    (those not yet asked :data:`NOT_ASKED`) after each query and at most every
    ``every_s`` seconds within one, so a child stopped at its deadline still reports
    what it has."""
    done: list[Verdict] = []
    last = [time.perf_counter()]
    for name, (hyp, goal) in queries.items():
        zv, _ = smtlib.z3_check(cvc5more.export([*hyp, z3.Not(goal)]), timeout_ms)
        t0 = time.perf_counter()
        parts = _parts(goal)

        def show(
            asked: int,
            vs: list[str],
            name: str = name,
            zv: str = zv,
            k: int = len(parts),
            t0: float = t0,
        ) -> None:
            if progress is None or time.perf_counter() - last[0] < every_s:
                return
            last[0] = time.perf_counter()
            how = f"{k} parts, incremental: {asked} asked, stopped there"
            now = [name, zv, "unknown", f"{time.perf_counter() - t0:.1f}", how]
            progress(_stream(done, list(queries), now))

        vs = ask_clauses(hyp, parts, part_ms, show)
        again = ""
        if cases and name in cases and "sat" not in vs:
            # (before the asks alone: N=6's two hard conjuncts, unknown alone at 60 s,
            # are unsat in 12 cases of 0.1 to 16 CPU s; 2026-12-06)
            again = _by_cases(hyp, parts, vs, cases[name])
        left = [i for i, v in enumerate(vs) if v == "unknown"]
        if left and "sat" not in vs and len(left) <= LEFTOVERS:
            # (alone, not incrementally: cvc5's incremental mode skips some of its
            # preprocessing, and a few parts of N=5's Inv => P stayed unknown there)
            g = cvc5more.confirm(cvc5more.Group(name, hyp, [parts[i] for i in left]))
            for i, v in zip(left, g.verdicts, strict=True):
                vs[i] = v
            again += f"; {len(left)} unknown asked again alone ({g.how}, {g.asks} asks)"
        cv = "sat" if "sat" in vs else "unsat" if set(vs) == {"unsat"} else "unknown"
        how = (
            f"{len(parts)} parts, incremental, one at a time: "
            f"{vs.count('unsat')} unsat, {vs.count('sat')} sat, "
            f"{vs.count('unknown')} unknown or not asked{again}"
        )
        done.append([name, zv, cv, f"{time.perf_counter() - t0:.1f}", how])
        if progress is not None:
            last[0] = time.perf_counter()
            progress(_stream(done, list(queries), None))
    return done


def verdict(certs: list[Verdict]) -> str:
    """ "agree" (both unsat on every query), "disagree" (a sat from either solver: the
    certificate or the proof is wrong), else "unknown" (not confirmed)."""
    if any("sat" in (z, c) for _, z, c, *_ in certs):
        return "disagree"
    if certs and all((z, c) == ("unsat", "unsat") for _, z, c, *_ in certs):
        return "agree"
    return "unknown"


Certified = tuple[int, str, str, list[Verdict]]
"""A Spacer answer: its N, what was asked, Spacer's status, its certificate's verdicts."""


def spacer_row(answers: Sequence[Certified], seconds: float) -> dict[str, Any]:
    """Spacer's cvc5 row (``runner.ObligationResult(**row)``) from its proved answers,
    each ``(N, what was asked, Spacer's status, the certificate's verdicts)``: "agree"
    when every proved answer's three queries are unsat to both solvers, "disagree" on
    any sat, "partly-confirmed" when some are unknown (or a proved answer has no
    certificate), "not-run" when Spacer proved nothing."""
    proved = [a for a in answers if a[2] == "proved"]
    ok = [a for a in proved if verdict(a[3]) == "agree"]
    bad = [a for a in proved if verdict(a[3]) == "disagree"]
    open_ = [a for a in proved if a not in ok and a not in bad]

    def say(a: Certified) -> str:
        qs = ", ".join(f"{q}: z3 {z}, cvc5 {c}" for q, z, c, *_ in a[3] if (z, c) != ("unsat",) * 2)
        return f"N={a[0]} {a[1]}: {qs or 'certificate not checked (its child was killed)'}"

    status = (
        "not-run" if not proved else "disagree" if bad else "partly-confirmed" if open_ else "agree"
    )
    return dict(
        obligation="cvc5 re-checks Spacer's invariant",
        kind="second solver",
        technique="cvc5 (Spacer's invariant, SMT-LIB 2: Init => Inv, Inv and T => Inv', Inv => P;"
        " cvc5 asked one conjunct of each goal at a time, incrementally)",
        invariants=(),
        bounds="Spacer's invariant confirmed by z3 and cvc5 at "
        + (", ".join(f"N={a[0]} ({a[1]})" for a in ok) or "none")
        + f": {len(ok)} of {len(proved)} proved answers"
        + (f"; NOT confirmed: {len(open_)}" if open_ else ""),
        status=status,
        seconds=seconds,
        replay="; ".join(
            [f"does not hold: {say(a)}" for a in bad] + [f"not confirmed: {say(a)}" for a in open_]
        ),
    )


# -- BMC ------------------------------------------------------------------------------------


def bmc_queries(n: int, k: int, M: int, names: Sequence[str] | None = None) -> dict[str, Query]:
    """The queries ``runner.run_bmc(n, k, M)`` asks for ``names`` (default: every
    obligation), by "obligation @ step": the unrolling, every obligation of the steps
    before as lemmas, the obligation negated at the step."""
    u = bmc.unroll(n, k, M=M)
    base = list(u.solver.assertions())
    wanted = list(u.obligations) if names is None else list(names)
    out: dict[str, Query] = {}
    for step in range(k):
        lemmas = [u.obligations[o][i] for i in range(step) for o in u.obligations]
        for o in wanted:
            out[f"{o} @ step {step + 1}"] = ([*base, *lemmas], u.obligations[o][step])
    return out


def bmc_row_dict(
    n: int, k: int, M: int, certs: list[Verdict], seconds: float, note: str = ""
) -> dict[str, Any]:
    """BMC's cvc5 row (``runner.ObligationResult(**row)``) from the verdicts."""
    ok = [c for c in certs if (c[1], c[2]) == ("unsat", "unsat")]
    bad = [c for c in certs if "sat" in (c[1], c[2])]
    open_ = [c for c in certs if c not in ok and c not in bad]
    status = "not-run" if not certs else verdict(certs)
    status = "partly-confirmed" if status == "unknown" else status
    return dict(
        obligation=f"cvc5 re-checks BMC at N={n}, k<={k}",
        kind="second solver",
        technique="cvc5 (SMT-LIB 2 from z3, BMC's unrolled queries)",
        invariants=(),
        bounds=f"N={n} k={k} lists<={M}: z3 and cvc5 unsat on {len(ok)} of {len(certs)} "
        f"step queries (each obligation at each step, the earlier steps as lemmas){note}",
        status=status,
        seconds=seconds,
        replay="; ".join(f"{c[0]}: z3 {c[1]}, cvc5 {c[2]}" for c in bad + open_),
    )


# -- the child interpreter ---------------------------------------------------------------------

STARTUP_S = 30.0
"""The child's allowance, on top of its queries' limits, to start and build them."""


def run_isolated(req: dict[str, Any], deadline_s: float) -> list[Verdict] | str:
    """:func:`main` in a child interpreter, killed after ``deadline_s`` + :data:`STARTUP_S`
    seconds: the verdicts, or why there are none."""
    cmd = [sys.executable, "-m", "kvpool.proofs.cvc5certs", json.dumps(req)]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=deadline_s + STARTUP_S, check=False
        )
    except subprocess.TimeoutExpired:
        return f"killed after {deadline_s + STARTUP_S:.0f} s"
    try:
        got: list[Verdict] = json.loads(proc.stdout.strip().splitlines()[-1])
        return got
    except (ValueError, IndexError):
        return f"child exit {proc.returncode}: {proc.stderr.strip()[-300:]}"


def bmc_isolated(
    n: int,
    k: int,
    M: int,
    names: Sequence[str] | None = None,
    timeout_ms: int = TIMEOUT_MS,
    deadline_s: float = 3600.0,
) -> dict[str, Any]:
    """BMC's cvc5 row at ``(n, k, M)``, the queries asked in a child interpreter killed
    after ``deadline_s`` (then the row is "not-run", never confirmed)."""
    t0 = time.perf_counter()
    req = {"what": "bmc", "n": n, "k": k, "M": M, "names": names, "timeout_ms": timeout_ms}
    got = run_isolated(req, deadline_s)
    if isinstance(got, str):
        row = bmc_row_dict(n, k, M, [], time.perf_counter() - t0)
        row["status"], row["replay"] = "not-run", got
        return row
    return bmc_row_dict(n, k, M, got, time.perf_counter() - t0)


def main(argv: list[str]) -> int:
    """The child: one JSON request in, one JSON line of verdicts out."""
    req = json.loads(argv[0])
    if req.get("what") != "bmc":
        raise ValueError(f"unknown request: {req.get('what')!r}")
    qs = bmc_queries(int(req["n"]), int(req["k"]), int(req["M"]), req.get("names"))
    print(json.dumps(confirm(qs, int(req["timeout_ms"]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
