"""cvc5 on the proof parts the other cvc5 rows do not reach: two pools, blocks with
several keys, lists of symbolic length, and ``impl/pool.py``'s ``touch`` from source.

Each of those parts runs with its queries recorded (:func:`model.recording`, as the
every-N induction's are). Every query z3 proved there is re-asked of cvc5 here, grouped:
the queries z3 proved under one hypothesis (one case of one obligation, or of a case
split on the call's kind) are asked as one query, the hypothesis and the disjunction of
the negated goals, which is unsat iff each of them is. Where cvc5 leaves a group
unknown it is asked again in halves, down to single queries; a quantified single query
is then asked under each of :data:`LADDER`'s options, then split into its goal's parts
(:func:`smtlib.split_queries`), each part under each option, then case by case where
:data:`CASES` names atoms for its obligation, or part by part, a part case by case,
where :data:`PART_CASES` does (its settled cases' coverage checked). A query is *confirmed*
only if cvc5 says unsat on it, or on every part or case of it; a ``sat`` anywhere is a
disagreement (a model of a group, a half or a part is a model of one of the queries
z3 proved unsat) and fails the row; ``unknown`` and text cvc5 refuses are *not
confirmed*, and the row names them.

The export is z3's own SMT-LIB 2 text, with four rewrites cvc5 needs: lambdas lifted
to arrays with axioms (:func:`smtlib.lift_lambdas`), the event log's folds abstracted
(:func:`smtlib.abstract_folds`: unsat proves the original unsat), arrays with several
indices (z3's ``(Array Int Int Int)``, which cvc5 1.4.2 refuses: "Illegal array type")
that appear only as ``select``'s array written as functions of those indices
(:func:`uncurry_arrays`), each an equisatisfiable query, and a constant array's
negative default written as one literal (:func:`negative_defaults`, the same query).

Each row asks, besides, one query cvc5 must not find unsat: a group's goals without
their hypothesis, one z3 finds sat (cvc5 unsat there is a disagreement, so that a
reader that lost the query's meaning on the way cannot pass).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import z3  # type: ignore[import-untyped]

from . import cvc5cases, fixedn, smtlib, twopool
from .model import Record, constants, named, recording
from .rewrite import simplify
from .symsorts import SORTS_MARK

TIMEOUT_MS = 5000
"""cvc5's time limit per ask (wall clock, as :func:`smtlib.cvc5_check`'s)."""

QF_RETRY = 4
"""A quantifier-free group or query cvc5 leaves unknown is asked once more with this many
times the limit before it is halved (at fixed N: one of multikey's at N=3 ran out of its
5 s under load)."""

MAX_ASKS = 40
"""At most this many asks per group (halves included); past it, what is left is not
confirmed. Halving a group of n queries that all run out of time would take 2n - 1."""

LADDER: tuple[dict[str, str], ...] = (
    {},
    {"full-saturate-quant": "true"},
    {"mbqi": "true", "fmf-bound": "true"},
    {"e-matching": "false", "enum-inst": "true"},
)
"""cvc5's settings tried in turn on a quantified query it leaves unknown (a
quantifier-free one is asked once: these settings act on quantifiers only). Measured
on the symbolic lists' queries (2026-12-05): ``full-saturate-quant`` settles the loop
steps of PERM for Touch and UnpinBlocks, ``mbqi`` with ``fmf-bound`` the one for
FreeBlocks; ``enum-inst``, ``mbqi`` alone and ``cegqi=false`` settled none that these
did not. The last, enumerative instantiation *instead of* E-matching (2026-12-06),
settles two pools' FREE-FORWARD accept step "counts p" (:mod:`.twolists`: unsat in 1.5
s, unknown at 8 s under each of the others): the count's recurrence
``Cnt(x, j + 1) = Cnt(x, j) + ...`` must be instantiated at the goal's Skolem block and
``j``, a ground term ``Cnt(b, j)`` E-matching never meets (the goal names only
``Cnt(b, j + 1)``). Settings change how cvc5 searches, not what the query says."""

FAMILIES: dict[str, str] = {
    "twopool": "two pools (fixed-N induction, every-N, their witnesses' and mutants' "
    "proved conjuncts)",
    "multikey": "blocks with several keys (fixed-N induction, every-N INV-CACHE and INV-EVENTS)",
    "symlists": "lists of symbolic length (loop proofs, loop == model.py)",
    "pool-source": "impl/pool.py's touch from source",
    "twopooln": "two pools' counts and rules for every N",
    "symsorts": "keys and watcher ids as sorts",
    "hot-source": "impl/pool.py's hot paths from source",
    "twolists": "two pools' list calls as loops (every list length)",
}
"""The parts whose proved queries this module re-asks, by the runner's part name."""


# -- the export ---------------------------------------------------------------------------

_SYM = r"[A-Za-z0-9~!@$%^&*_+=<>.?/-]"


def uncurry_arrays(text: str) -> str:
    """``text`` with each constant of a multi-index array sort that occurs only as
    ``select``'s array written as a function of its indices: ``(declare-fun A ()
    (Array I J E))`` becomes ``(declare-fun A (I J) E)`` and ``(select A i j)``
    becomes ``(A i j)``. A constant used any other way (stored, compared, passed) is
    left alone. Equisatisfiable: an array is a total function of its indices, and
    nothing here asks two arrays to be equal."""
    decl = re.compile(
        r"\(declare-fun (" + _SYM + r"+) \(\) \(Array ((?:[A-Za-z]\w* ){2,})(\S+?)\)\)"
    )
    for m in list(decl.finditer(text)):
        name, idx, elem = m.group(1), m.group(2).split(), m.group(3)
        uses = len(re.findall(rf"(?<!{_SYM}){re.escape(name)}(?!{_SYM})", text))
        selects = text.count(f"(select {name} ")
        if uses != selects + 1:
            continue
        text = text.replace(m.group(0), f"(declare-fun {name} ({' '.join(idx)}) {elem})")
        text = text.replace(f"(select {name} ", f"({name} ")
    return text


def export(query: list[z3.BoolRef]) -> str:
    """``query`` as SMT-LIB 2 text cvc5 reads (the rewrites of the module's doc)."""
    if smtlib.find_folds(query):
        query = smtlib.abstract_folds(query)
    text = smtlib.to_smt2_lifted(query)
    # (z3 sometimes prints a nullary constructor as the indexed ``(_ c c)``: the same term)
    text = re.sub(r"\(_ (" + _SYM + r"+) \1\)", r"\1", text)
    return negative_defaults(uncurry_arrays(text))


_CONST_NEG = re.compile(r"\(\(as const ((?:[^()]|\((?:[^()]|\([^()]*\))*\))*)\) \(- (\d+)\)\)")


def negative_defaults(text: str) -> str:
    """``text`` with a constant array's negative default written as one literal:
    ``((as const S) (- 3))`` as ``((as const S) -3)``, the same integer. cvc5 1.4.2 wants
    a value there and refuses ``(- 3)``, an application of unary minus ("expected a
    value": the pool's ``touch`` from source fills its arrays with -3)."""
    return _CONST_NEG.sub(r"((as const \1) -\2)", text)


def quantified(text: str) -> bool:
    return "(forall" in text or "(exists" in text


def again_how(again: int) -> str:
    """What :func:`ask` says gave its verdict when it asked a second time."""
    return f"{again}x the limit"


def ask(
    text: str, timeout_ms: int = TIMEOUT_MS, ladder: bool = True, again: int = 1
) -> tuple[str, str]:
    """cvc5's verdict on ``text``, and the settings that gave it: a quantifier-free
    query once, in this process (cvc5 keeps its time limit there), and, left unknown,
    once more at ``again`` times the limit when ``again`` > 1 (decidable: time is what
    it lacks; the settings then say :func:`again_how`); a quantified one
    in a forked child (:func:`smtlib.cvc5_check_bounded`) under each of :data:`LADDER`
    (only its first without ``ladder``) until one says sat or unsat. Text cvc5 does
    not read is "refused (...)"."""
    if not quantified(text):
        try:
            v = smtlib.cvc5_check(text, timeout_ms)[0]
            if v == "unknown" and again > 1:
                return smtlib.cvc5_check(text, again * timeout_ms)[0], again_how(again)
            return v, "plain"
        except (ValueError, RuntimeError) as exc:
            return f"refused ({str(exc)[:60]})", "plain"
    v = "unknown"
    for opts in LADDER if ladder else LADDER[:1]:
        v, _ = smtlib.cvc5_check_bounded(text, timeout_ms, options=opts)
        if v in ("unsat", "sat") or v.startswith("refused"):
            return v, ",".join(opts) or "plain"
    return v, "every setting"


# -- groups ---------------------------------------------------------------------------------


@dataclass
class Group:
    """The queries z3 proved under one obligation name and one hypothesis."""

    name: str
    hyp: list[z3.BoolRef]
    goals: list[z3.BoolRef]
    verdicts: list[str] = field(default_factory=list)  # one per goal, after :func:`confirm`
    how: str = ""
    asks: int = 0


def groups(records: list[Record]) -> list[Group]:
    """The proved queries of ``records`` (not a mutant's: names "mutant: ..."), by
    (name, hypothesis), in the order first met."""
    out: dict[tuple[str, tuple[int, ...]], Group] = {}
    for name, hyp, goal, status in records:
        if status != "proved" or name.startswith("mutant:"):
            continue
        key = (name, tuple(h.get_id() for h in hyp))
        out.setdefault(key, Group(name, list(hyp), [])).goals.append(goal)
    return list(out.values())


def _negated(goals: list[z3.BoolRef]) -> z3.BoolRef:
    return z3.Not(goals[0]) if len(goals) == 1 else z3.Or(*[z3.Not(g) for g in goals])


def _single(g: Group, hyp: list[z3.BoolRef], goal: z3.BoolRef, timeout_ms: int) -> str:
    """One query cvc5 left unknown as a whole: its goal's parts, each asked in turn."""
    parts = smtlib.split_queries(hyp, goal)
    if len(parts) <= 1:
        return "unknown"
    for q in parts:
        g.asks += 1
        v, _ = ask(export(q), timeout_ms)
        if v != "unsat":
            return v
    g.how = g.how or f"split into {len(parts)}"
    return "unsat"


def _list_atoms(c: Callable[[str], z3.ExprRef]) -> list[z3.BoolRef]:
    """A call on a list of symbolic length unrolled to 3 entries: its length is 0, 1, 2;
    its entries are one block, pairwise."""
    m, e = c("a.m"), c("a.E")
    return [
        m == 0,
        m == 1,
        m == 2,
        z3.Select(e, 0) == z3.Select(e, 1),
        z3.Select(e, 0) == z3.Select(e, 2),
        z3.Select(e, 1) == z3.Select(e, 2),
    ]


CASES: dict[str, cvc5cases.Atoms] = {
    f"symlists: loop == model.py / {op} / lists <= 3": _list_atoms
    for op in ("UnpinBlocks", "Touch", "CacheBlocks", "EvictBlocks")
}
"""Obligation name -> the atoms a query of it cvc5 leaves unknown (whole, and split into
its goal's parts) is asked on case by case (:func:`smtlib.cvc5_confirm_cases`, as
:mod:`.cvc5cases` does for the every-N induction). The loop == model.py agreement of
UnpinBlocks needed it (2026-12-05: 15 cases, 229 s of wall time under load average
13-19); FreeBlocks's is in :data:`PART_CASES`."""


def _free_atoms(c: Callable[[str], z3.ExprRef]) -> list[z3.BoolRef]:
    """``free_blocks`` on a list unrolled to 3 entries: its length (0, 1, 2, 3), then
    where a released block goes (``evict_first``, caching, each entry's key is 0: to the
    front or the back), then its entries being one block, pairwise, and each entry's
    ref_cnt being 1 (released at its first decrement)."""
    m, e, key, ref = c("a.m"), c("a.E"), c("s.key"), c("s.ref")
    xs = [z3.Select(e, j) for j in range(3)]
    return [
        *(m == k for k in range(4)),
        c("a.ef") == z3.BoolVal(True),
        c("caching") == z3.BoolVal(True),
        *(z3.Select(key, x) == 0 for x in xs),
        xs[0] == xs[1],
        xs[0] == xs[2],
        xs[1] == xs[2],
        *(z3.Select(ref, x) == 1 for x in xs),
    ]


PART_CASES: dict[str, cvc5cases.Atoms] = {
    "symlists: loop == model.py / FreeBlocks / lists <= 3": _free_atoms,
}
"""Obligation name -> atoms, for a query asked *part by part* (:func:`_part_cases`): each
part of its goal whole, a part cvc5 leaves unknown case by case on these atoms.
Measured 2026-12-06 (load average 3): of the 14 parts of FreeBlocks's loop == model.py
(refused alike, then field by field), 13 are unsat in 0.1 to 0.3 CPU s each; the queue's
(``q[i]`` alike below ``L``) is unknown whole and under each of :data:`LADDER`'s
settings at 30 s in its case ``m == 3``, and unsat in 25 cases (52.6 CPU s) on these
atoms: released blocks that go to the front and to the back in one call are what cvc5
needs fixed (under ``evict_first``, or with caching off, each case is unsat in 1 s)."""

CASE_WHOLE_MS = 2000
"""cvc5's limit on a case asked whole before it is split on the next atom
(:func:`case_walk`)."""

MAX_CASES = 64
"""At most this many settled cases per part (:func:`case_walk`): past it, not confirmed."""


Path = tuple[z3.BoolRef, ...]


def case_walk(
    hyp: list[z3.BoolRef],
    goal: z3.BoolRef,
    atoms: list[z3.BoolRef],
    timeout_ms: int = TIMEOUT_MS,
    whole_ms: int = CASE_WHOLE_MS,
    max_cases: int = MAX_CASES,
) -> tuple[str, list[Path]]:
    """cvc5's verdict on ``hyp and not goal`` case by case, and the cases it settled
    (each as its path: the facts assumed, in order). A case is asked whole
    (``whole_ms``); unknown, it is split on the next atom ``a`` into ``a`` and ``not a``
    (:func:`smtlib.assume`: the fact kept among the hypotheses and used everywhere, the
    same query restricted to the case); with no atom left, its goal's parts are asked
    under each of :data:`smtlib.CASE_OPTIONS` (``timeout_ms``). "unsat" when every case
    met is; the first that is not ends the walk with its verdict ("sat": a model of the
    case, so of the query). The caller checks that the settled cases cover every model
    (:func:`covers`) before it counts the query unsat."""
    settled: list[Path] = []

    def walk(h: list[z3.BoolRef], g: z3.BoolRef, xs: list[z3.BoolRef], path: Path) -> str:
        if len(settled) >= max_cases:
            return "unknown"
        v, _ = ask(export([*h, z3.Not(g)]), whole_ms, ladder=False)
        if v == "unknown" and not xs:
            split = smtlib.split_queries(h, g)
            v = smtlib.parts_unsat(split, timeout_ms, smtlib.CASE_OPTIONS, export)
        if v == "unsat":
            settled.append(path)
        if v != "unknown" or not xs:
            return v
        for fact in (xs[0], z3.Not(xs[0])):
            h2, g2 = smtlib.assume(h, g, fact)
            rest = [simplify(z3.substitute(a, *smtlib._pairs(fact))) for a in xs[1:]]
            # (an atom the case decides is no split: drop it)
            rest = [a for a in rest if not (z3.is_true(a) or z3.is_false(a))]
            v = walk(h2, g2, rest, (*path, fact))
            if v != "unsat":
                return v
        return "unsat"

    return walk(hyp, goal, atoms, ()), settled


def covers(
    paths: Sequence[Sequence[z3.BoolRef]],
    hyp: Sequence[z3.BoolRef] = (),
    timeout_ms: int = CASE_WHOLE_MS,
) -> str:
    """cvc5's verdict on ``hyp and not (P_1 or ... or P_k)``, each path the conjunction
    of its facts (an empty path: every model): "unsat" when every model of ``hyp`` is in
    some case. The one coverage check of every case split (:func:`case_walk`,
    ``cvc5leaves``, ``cvc5hot``, ``cvc5certs``), asked of cvc5 directly (not through
    :func:`ask`, which the tests starve to force a split); text cvc5 does not read is
    "refused (...)", never "unsat"."""
    whole = z3.Or(*[z3.And(*p) if p else z3.BoolVal(True) for p in paths])
    try:
        text = export([*hyp, z3.Not(whole)])
        if not quantified(text):
            return smtlib.cvc5_check(text, timeout_ms)[0]
        return smtlib.cvc5_check_bounded(text, timeout_ms, options=LADDER[0])[0]
    except (ValueError, RuntimeError) as exc:
        return f"refused ({str(exc)[:60]})"


def _part_cases(g: Group, goal: z3.BoolRef, atoms: list[z3.BoolRef], timeout_ms: int) -> str:
    """One query asked part by part: its goal's parts (:func:`smtlib.split_queries`:
    ``H => A and B`` is valid iff ``H => A`` and ``H => B`` are, and a model of a part's
    query is a model of the query), each whole under cvc5's default, and one it leaves
    unknown case by case on ``atoms`` (:func:`case_walk`), counted unsat only when its
    settled cases cover every model (:func:`covers`; else "coverage gap", not
    confirmed). "unsat" when every part is; the first part that is not ends the asks."""
    parts = smtlib.split_queries(g.hyp, goal)
    split, n_cases = 0, 0
    for q in parts:
        g.asks += 1
        v, _ = ask(export(q), timeout_ms, ladder=False)
        if v == "unknown":
            v, paths = case_walk(q[:-1], q[-1].arg(0), atoms, timeout_ms)
            g.asks += len(paths)
            if v == "unsat" and covers(paths) != "unsat":
                v = "coverage gap"
            split, n_cases = split + 1, n_cases + len(paths)
        if v != "unsat":
            return v
    g.how = f"part by part: {len(parts)}, {split} of them case by case ({n_cases} cases)"
    return "unsat"


LONG: dict[str, int] = {"two pools, list loops == twopool.transition2": 30000}
"""Obligation name (its start) -> a longer limit (ms) for one quantified query still
unknown after the ladder, its parts and its cases, asked once more whole under cvc5's
default. The limit is wall clock: under load the 5 s run out on queries cvc5 settles
(two pools' loop == transition2 for FreeBlocks, lists <= 2: 2 of 27 parts unknown at 5 s
under load average 4 to 6, unsat in 10.3 s of wall time whole; 2026-12-06)."""


def _long(g: Group, goal: z3.BoolRef) -> str:
    """:data:`LONG`'s last ask of one query of ``g`` (the same query: unsat of it is unsat
    of the query z3 proved), "unknown" when no entry names ``g``."""
    limit = next((ms for start, ms in LONG.items() if g.name.startswith(start)), 0)
    if not limit:
        return "unknown"
    g.asks += 1
    v, _ = ask(export([*g.hyp, z3.Not(goal)]), limit, ladder=False)
    if v == "unsat":
        g.how = (f"{g.how}; " if g.how else "") + f"one whole at {limit // 1000} s"
    return v


def _cases(g: Group, goal: z3.BoolRef, timeout_ms: int) -> str:
    """One quantified query still unknown, asked case by case: part by part on the atoms
    :data:`PART_CASES` names for its obligation (:func:`_part_cases`), whole on those
    :data:`CASES` names, else on its goal's ``ite`` conditions
    (:func:`cvc5cases.ite_atoms`; hypothesis and goal simplified first, so that the condition
    is written the same way in both)."""
    hyp, how = g.hyp, "cases"
    named_atoms = PART_CASES.get(g.name) or CASES.get(g.name)
    if named_atoms is not None:
        consts = constants([*g.hyp, goal])
        try:
            atoms = [simplify(a) for a in named_atoms(lambda x: consts[x])]
        except KeyError:  # (a constant the atoms name is not in the query)
            return "unknown"
        if g.name in PART_CASES:
            return _part_cases(g, goal, atoms, timeout_ms)
    else:
        hyp, goal = [simplify(h) for h in g.hyp], simplify(goal)
        atoms, how = cvc5cases.ite_atoms(goal), "cases on ite conditions"
        if not atoms:
            return "unknown"
    v, leaves = smtlib.cvc5_confirm_cases(hyp, goal, atoms, timeout_ms)
    g.asks += leaves
    if v == "unsat":
        g.how = f"{how}: {leaves}"
    return v


def _confirm(
    g: Group,
    goals: list[z3.BoolRef],
    timeout_ms: int,
    cases: bool,
    leaves: Leaves | None = None,
) -> list[str]:
    if g.asks >= MAX_ASKS:  # (the group's budget is spent: the rest are not confirmed)
        return ["unknown"] * len(goals)
    g.asks += 1
    text = export([*g.hyp, _negated(goals)])
    # (a group of several queries gets cvc5's default only: its halves get the rest;
    # a quantifier-free one left unknown is asked again at a longer limit, before halving)
    v, how = ask(text, timeout_ms, ladder=len(goals) == 1, again=QF_RETRY)
    if how == again_how(QF_RETRY):
        g.asks += 1
    if v == "unsat":
        if how != "plain":
            g.how = g.how or how
        return ["unsat"] * len(goals)
    if v == "sat" and len(goals) == 1:
        return ["sat"]
    if v.startswith("refused"):
        return [v] * len(goals)
    if len(goals) > 1:  # unknown, or sat (then the halves find which query): in halves
        g.how = g.how or "in halves"
        half = len(goals) // 2
        left = _confirm(g, goals[:half], timeout_ms, cases, leaves)
        if "sat" in left:  # (a disagreement: the rest need not be asked)
            return left + ["not asked"] * (len(goals) - half)
        return left + _confirm(g, goals[half:], timeout_ms, cases, leaves)
    if quantified(text):
        v = _single(g, g.hyp, goals[0], timeout_ms)
        if v == "unknown" and cases:
            v = _cases(g, goals[0], timeout_ms)
        if v == "unknown":
            v = _long(g, goals[0])
        if v == "unknown" and leaves is not None:  # (last: case by case on its branches)
            v = _by_leaves(g, goals[0], leaves)
    return [v]


def confirm(
    g: Group,
    timeout_ms: int = TIMEOUT_MS,
    cases: bool = False,
    one_by_one: bool = True,
    leaves: Leaves | None = None,
) -> Group:
    """cvc5's verdict on each of ``g``'s queries (``g.verdicts``), asked as the module's
    doc says; with ``cases``, a single query still unknown is asked case by case on the
    atoms :data:`CASES` names for its obligation; with ``one_by_one``, what the halving
    left unknown is asked alone (:func:`_one_by_one`), and with ``leaves`` one still unknown
    alone (quantified or not) case by case on its goal's branches (:func:`_by_leaves`)."""
    g.verdicts = _confirm(g, g.goals, timeout_ms, cases, leaves)
    if one_by_one:
        _one_by_one(g, timeout_ms, leaves)
    g.how = g.how or "whole"
    return g


LEFTOVERS = 300
"""At most this many quantifier-free queries of a group left unknown by its halving are
asked one by one (:func:`_one_by_one`); :data:`LEFTOVERS_GIVE_UP` unknowns in a row end it."""
LEFTOVERS_GIVE_UP = 5
LEFTOVER_RETRY = (QF_RETRY, 12)
"""The limits (times the row's) a leftover query is asked at after its first unknown: a
multikey query at N=6 took 32.6 CPU s (43 s of wall time) alone (2026-12-06)."""


LEAVES_MAX = 3
"""At most this many quantifier-free queries of a group still unknown alone, at every
limit of :data:`LEFTOVER_RETRY`, are asked case by case on their goal's branches
(:func:`_by_leaves`); the rest stay not confirmed."""

Leaves = Callable[[list[z3.BoolRef], z3.BoolRef], tuple[str, str] | None]
"""How a query is asked case by case on its goal's branches: ``cvc5leaves.confirm``
(passed in by the caller, as the runner does for blocks with several keys:
:mod:`.cvc5leaves` builds on this module, so this module does not import it)."""


def _by_leaves(g: Group, goal: z3.BoolRef, leaves: Leaves) -> str:
    """One query of ``g`` cvc5 left unknown alone (a quantifier-free one at every limit,
    :func:`_one_by_one`; a quantified one after the ladder, its parts, its cases and
    :data:`LONG`, :func:`_confirm`), asked case by case on its goal's ``ite`` conditions
    (``leaves``: ``cvc5leaves.confirm``).

    Why unsat there is unsat of the query z3 proved: the fixed constants (the call's
    kind) are substituted, the equations kept, and hypothesis and goal simplified (each
    an equivalent query); each split on an atom ``a`` gives the cases ``P and a`` and ``P
    and not a``, which cover every model of ``P``; a case counts only when cvc5 finds
    it unsat: closed (its quantifier-free hypotheses and negated goal unsat: the case
    has more hypotheses, so no more models), or a leaf asked whole, or each part of its
    goal (``H => A and B`` is valid iff ``H => A`` and ``H => B`` are); and
    cvc5 itself must find ``not (P_1 or ... or P_k)`` unsat over the cases' paths
    (coverage), else the verdict is "coverage gap", not confirmed. A ``sat`` of a case is
    a model of the query: a disagreement.

    Measured 2026-12-06 (load average 2 to 3): the one query of blocks with several keys
    the deep run left unknown alone at 5, 20 and 60 s (INV-WATCH's step for UnpinBlocks at
    N = 6, its conjunct ``registered == fired + #pending``, 231 queries in its group)
    is unsat in 50 cases, all closed on their quantifier-free part, coverage unsat:
    64.8 CPU s (130 s of wall time). Two pools' (2026-12-06, load average 4): INV-WATCH's
    same conjunct for UnpinBlocks at N = 6+6, 34 closed cases, 45 CPU s; the every-N
    step's PERM for FreeBlocks (quantified), 171 to 335 cases, 53 to 118 CPU s."""
    g.asks += 1
    got = leaves(g.hyp, goal)
    if got is None:  # (no ite condition to split on)
        return "unknown"
    v, how = got
    if v == "unsat":
        g.how = (f"{g.how}; " if g.how else "") + f"one by its goal's branches ({how})"
    return v


def _one_by_one(g: Group, timeout_ms: int, leaves: Leaves | None = None) -> None:
    """Each quantifier-free query of ``g`` still "unknown" after the halving asked alone,
    at ``timeout_ms``, then at :data:`LEFTOVER_RETRY` times it (the query itself: unsat
    of it is unsat of the query z3 proved; a "sat" is a disagreement like any other).
    The halving spends its :data:`MAX_ASKS` on groups that run out of their wall-clock
    limit under load before it reaches single queries: blocks with several keys at N=6
    (2026-12-06, load average 6 to 7), a group of 231 left 74 unknown after 40 asks,
    each of them unsat alone in 0.1 to 0.3 CPU s (one more took 2.9 CPU s and 8.8 s of
    wall time alone, another 32.6 CPU s and 43 s). At most :data:`LEFTOVERS`;
    :data:`LEFTOVERS_GIVE_UP` unknowns in a row stop it (those are hard, not starved);
    quantified queries are left as they are (the halving asked them alone already, up
    the ladder). A query still unknown at every limit is asked case by case on its goal's
    branches when ``leaves`` is given (:func:`_by_leaves`, at most :data:`LEAVES_MAX` per
    group)."""
    todo = [k for k, v in enumerate(g.verdicts) if v == "unknown"][:LEFTOVERS]
    misses, n_leaves = 0, 0
    for k in todo:
        text = export([*g.hyp, z3.Not(g.goals[k])])
        if quantified(text):
            continue
        g.asks += 1
        v, _ = ask(text, timeout_ms)
        for times in LEFTOVER_RETRY:  # (as the halving does: again at a longer limit)
            if v != "unknown":
                break
            g.asks += 1
            v, _ = ask(text, times * timeout_ms)
        if v == "unknown" and leaves is not None and n_leaves < LEAVES_MAX:
            n_leaves += 1  # (cases on the goal's own branches)
            v = _by_leaves(g, g.goals[k], leaves)
        g.verdicts[k] = v
        if v == "sat":
            return
        misses = misses + 1 if v == "unknown" else 0
        if misses >= LEFTOVERS_GIVE_UP:
            return
    if todo and g.verdicts.count("unknown") < len(todo):
        g.how = (f"{g.how}; " if g.how else "") + "the rest one by one"


def probe(gs: list[Group], timeout_ms: int = TIMEOUT_MS, tries: int = 3) -> tuple[str, str]:
    """A query that must come out sat: a group's goals with no hypothesis (the first
    of ``tries`` groups that has one and whose such query z3 finds sat). Returns z3's
    and cvc5's verdicts ("none", "none" when no group has one)."""
    for g in [g for g in gs if g.hyp][:tries]:
        query = [_negated(g.goals)]
        zv, _ = smtlib.z3_check(smtlib.to_smt2(query), timeout_ms)
        if zv == "sat":
            return zv, ask(export(query), timeout_ms)[0]
    return "none", "none"


def _label(g: Group) -> str:
    """The group's obligation name, and the constants its hypothesis fixes (the call's
    kind, the calling pool) where the name alone does not tell the case."""
    fixed = smtlib._fixed_constants(g.hyp)
    return g.name + (f" [{', '.join(f'{x}={c}' for x, c in fixed)}]" if fixed else "")


def row(
    part: str,
    records: list[Record],
    timeout_ms: int = TIMEOUT_MS,
    cases: bool = False,
    with_probe: bool = True,
    leaves: Leaves | None = None,
) -> dict[str, Any]:
    """cvc5 on every query z3 proved among ``records`` (one part's, :data:`FAMILIES`),
    as a ``runner.ObligationResult(**row)`` of kind "second solver": "agree" when cvc5
    confirms every one, "partly-confirmed" when it disagrees with none but leaves some
    not confirmed (named), "disagree" on any sat (or an unsat on the probe z3 finds sat),
    "not-run" when z3 proved nothing here."""
    t0 = time.perf_counter()
    gs = [confirm(g, timeout_ms, cases, leaves=leaves) for g in groups(records)]
    n_queries = sum(len(g.goals) for g in gs)
    by_name: dict[str, list[str]] = {}
    for g in gs:
        by_name.setdefault(_label(g), []).extend(g.verdicts)
    confirmed = [n for n, vs in by_name.items() if all(v == "unsat" for v in vs)]
    disagree = [n for n, vs in by_name.items() if "sat" in vs]
    open_ = [
        f"{n} ({sum(v != 'unsat' for v in vs)} of {len(vs)}: "
        f"{', '.join(sorted({v for v in vs if v != 'unsat'}))})"
        for n, vs in by_name.items()
        if n not in confirmed and n not in disagree
    ]
    zp, cp = probe(gs, timeout_ms) if with_probe and gs else ("none", "none")
    # (z3 sat and cvc5 unsat on the probe is a disagreement; a probe cvc5 cannot decide,
    # or no group with one, is reported in the row, not counted either way)
    status, replay = verdict(bool(gs), disagree, open_, zp, cp)
    hows = sorted({g.how for g in gs if g.how != "whole"})
    n_ok = sum(v == "unsat" for g in gs for v in g.verdicts)
    return dict(
        obligation=f"cvc5 re-checks {FAMILIES.get(part, part)}",
        kind="second solver",
        technique="cvc5 (SMT-LIB 2 from z3, grouped by hypothesis)",
        invariants=(),
        bounds=f"{part}: cvc5 confirms {n_ok} of {n_queries} queries z3 proved "
        f"({len(confirmed)} of {len(by_name)} obligation cases; {len(gs)} groups, "
        f"{sum(g.asks for g in gs)} asks, {timeout_ms // 1000} s each"
        + (f"; settled {', '.join(hows)}" if hows else "")
        + f"); probe {zp}/{cp}"
        + (f"; NOT confirmed: {len(open_)}" if open_ else ""),
        status=status,
        seconds=time.perf_counter() - t0,
        replay=replay,
    )


def verdict(
    asked: bool, disagree: list[str], open_: list[str], zp: str, cp: str
) -> tuple[str, str]:
    """A cvc5 row's status and replay: "not-run" when nothing was ``asked``, "disagree"
    on any query cvc5 found sat (``disagree``) or a probe z3 finds sat and cvc5 unsat
    (``zp``, ``cp``), "partly-confirmed" when some stay not confirmed (``open_``), else
    "agree"; the replay names each of them."""
    bad_probe = zp == "sat" and cp == "unsat"
    status = (
        "not-run"
        if not asked
        else "disagree"
        if disagree or bad_probe
        else "partly-confirmed"
        if open_
        else "agree"
    )
    replay = "; ".join(
        ([f"cvc5 says sat (disagrees) on: {', '.join(disagree)}"] if disagree else [])
        + ([f"the probe: z3 {zp}, cvc5 {cp} (disagree)"] if bad_probe else [])
        + ([f"not confirmed: {', '.join(open_)}"] if open_ else [])
    )
    return status, replay


@contextlib.contextmanager
def recorder(on: bool, name: str) -> Iterator[list[Record]]:
    """The queries z3 asks inside the block, recorded under ``name`` (where the part names
    none of its own), when ``on``; else nothing is recorded (the list stays empty), and
    the part runs exactly as without it (recording keeps every query's terms alive,
    which changes the term ids later queries of the process get)."""
    if not on:
        yield []
        return
    with recording() as rec, named(name):
        yield rec


def split_symsorts(records: list[Record]) -> dict[str, list[Record]]:
    """The symbolic lists' part's records as two families: "symsorts" (the queries
    :mod:`.symsorts` names "symsorts: ...", run inside that part) and "symlists" (the rest)."""
    mine = [r for r in records if r[0].startswith("symsorts:")]
    return {"symlists": [r for r in records if not r[0].startswith("symsorts:")], "symsorts": mine}


def rows(
    part: str, records: list[Record], on: tuple[str, ...], leaves: Leaves | None = None
) -> list[dict[str, Any]]:
    """:func:`row` of ``part`` (asked case by case where :data:`CASES` names atoms, and
    with ``leaves`` a query unknown alone on its goal's branches) when the profile's
    ``cvc5_more`` names it (``on``), else none."""
    return [row(part, records, cases=True, leaves=leaves)] if part in on else []


# -- which solvers confirmed what (the dashboard's note) ------------------------------------

ONE_SOLVER = ("z3 BMC", "z3 Spacer (fixed N)")
"""Techniques whose proofs cvc5 does not re-ask query by query: BMC's unrolled queries
(its rows are "bounded") and Spacer's Horn clauses. Their own cvc5 rows
(:mod:`.cvc5certs`: Spacer's invariant as three plain checks, BMC's unrolled queries at
the bounds the row names) count for them where a run has them, and so does the fixed-N
induction's certificate on the same model (:func:`certified_by_fixedn`)."""


def _part_of(r: Any) -> str | None:
    """The proof part a row labelled proved belongs to (None: not a proof row)."""
    if r.status != "proved":
        return None
    where = f"{r.obligation} {r.bounds}"
    if r.technique in ONE_SOLVER:
        return str(r.technique)
    if r.kind == "pool-source":
        return "pool-source"
    if r.kind == "hot-source":
        return "hot-source"
    if "(two pools, every N)" in r.obligation:
        return "twopooln"
    if "(two pools, list calls as loops)" in r.obligation:
        return "twolists"
    if "two pools" in where:
        return "twopool"
    if "multi-key" in where:
        return "multikey"
    if SORTS_MARK in r.bounds:
        return "symsorts"
    if r.bounds.startswith("every N, every list length"):
        return "symlists"
    if "event log a sequence" in r.bounds:
        return "event log"
    if r.kind == "fixed-N":
        return "fixed-N"
    if r.technique == "refinement (from source)":
        return "source"
    if r.technique == "refinement":
        return "transcribed"
    if r.kind == "inductive":
        return "every-N"
    return None


_CVC5_ROWS: tuple[tuple[str, str], ...] = (
    ("event log", "cvc5 re-checks the event log"),
    ("every-N", "cvc5 re-checks the every-N"),
    ("transcribed", "cvc5 re-checks the list refinement"),
    ("source", "cvc5 re-checks free_queue.py"),
    *((part, f"cvc5 re-checks {label}") for part, label in FAMILIES.items()),
    ("z3 Spacer (fixed N)", "cvc5 re-checks Spacer's invariant"),
    ("z3 BMC", "cvc5 re-checks BMC"),
)


# -- BMC's and Spacer's claims, through the fixed-N induction's certificate -----------------

_ONE_POOL = re.compile(r"\bN=(\d+)\b.*?\blists<=(\d+) keys=(\d+) watchers=(\d+)")
_TWO_POOLS = re.compile(r"\bN=(\d+)\+(\d+)\b.*?\blists<=(\d+) keys=(\d+) watchers=(\d+)")
_OTHER_MODELS = ("multi-key", "event log a sequence", "every N")

Model = tuple[str, tuple[int, ...]]
"""A finite model a row speaks of: ("one pool", (N, lists, keys, watchers)) or
("two pools", (N_0, N_1, lists, keys, watchers))."""

CERTIFICATE: dict[str, tuple[str, ...]] = {
    "one pool": fixedn.STATE_OBLIGATIONS + fixedn.STEP_RULES,
    "two pools": twopool.STATE_NAMES + twopool.RULE_NAMES,
}
"""What the fixed-N induction proves of a model, per kind: ``H`` (every state obligation,
with its ghost conjuncts LO-HI and WATCH-PER-BLOCK) holds on the pool (the world) as
built, and every step from a state satisfying ``H`` keeps each part of ``H`` and meets
every step rule."""


def model_of(bounds: str) -> Model | None:
    """The finite model a row's bounds name (one pool of :mod:`.model`'s ``Finite``
    reading, or two pools of :mod:`.twopool`), with its list length and the numbers of
    keys and watchers; None for any other model (several keys, the log as a sequence,
    every N) or bounds that do not say them all."""
    if any(m in bounds for m in _OTHER_MODELS):
        return None
    if "two pools" in bounds:
        m = _TWO_POOLS.search(bounds)
        return ("two pools", tuple(int(g) for g in m.groups())) if m else None
    m = _ONE_POOL.search(bounds)
    return ("one pool", tuple(int(g) for g in m.groups())) if m else None


def _cvc5_rows_of(model: Model) -> tuple[str, str]:
    """(how the cvc5 rows that ask every query z3 proved on ``model`` begin, how the note
    names them)."""
    if model[0] == "one pool":
        name = f"cvc5 re-checks N={model[1][0]}"
        return name, name
    return f"cvc5 re-checks {FAMILIES['twopool']}", "cvc5 re-checks two pools"


def certified_by_fixedn(rows: list[Any]) -> dict[Model, str]:
    """The models whose every-k certificate cvc5 confirmed in ``rows``, each with the
    name of the cvc5 row that did.

    A model qualifies when the fixed-N induction proved every name of its
    :data:`CERTIFICATE` there (their init and step queries) and every cvc5 row that asks
    the queries z3 proved there ("cvc5 re-checks N=...", one per N; for two pools the
    two-pool part's row) agrees. Then cvc5 alone has shown ``H`` on the model as built
    and ``H`` kept by every step, so each state obligation and step rule holds on every
    run of any length there. BMC builds its runs from the same pieces (the initial
    state, the transition, the argument domain and the obligations, on the same
    configuration), and Spacer asks about the same transition, so a BMC or Spacer row
    proved for names of the certificate on that model is a claim cvc5 has confirmed
    (for every k, so for k <= K too)."""
    proved: dict[Model, set[str]] = {}
    for r in rows:
        model = model_of(r.bounds)
        if r.kind == "fixed-N" and r.status == "proved" and model is not None:
            proved.setdefault(model, set()).add(r.obligation.removesuffix(" (two pools)"))
    out = {}
    for model, names in proved.items():
        prefix, name = _cvc5_rows_of(model)
        seen = {
            r.status
            for r in rows
            if r.kind == "second solver"
            and (
                r.obligation == prefix
                if model[0] == "one pool"
                else r.obligation.startswith(prefix)
            )
        }
        if set(CERTIFICATE[model[0]]) <= names and seen == {"agree"}:
            out[model] = name
    return out


def certified_row(r: Any, certified: dict[Model, str]) -> str | None:
    """The cvc5 row that confirms proved BMC or Spacer row ``r``'s claim through the
    fixed-N certificate (:func:`certified_by_fixedn`), or None."""
    model = model_of(r.bounds)
    if r.status != "proved" or r.technique not in ONE_SOLVER or model not in certified:
        return None
    names = set(r.invariants)
    return certified[model] if names and names <= set(CERTIFICATE[model[0]]) else None


def _through_certificate(
    part: str, n: int, who: str, rows: list[Any], certified: dict[Model, str]
) -> str:
    """``who`` for BMC's or Spacer's ``n`` proved rows, with the rows whose claim cvc5
    confirmed through the fixed-N certificate (:func:`certified_row`): "z3 + cvc5" when
    that covers all ``n``, "(partly)" when some, and which cvc5 rows did it."""
    tied = [
        c for r in rows if _part_of(r) == part and (c := certified_row(r, certified)) is not None
    ]
    if not tied:
        return who
    via = f"through the fixed-N certificate ({', '.join(sorted(set(tied)))})"
    if len(tied) == n:
        own = "" if who == "z3 only" else f"; its own queries re-checked too: {who}"
        return f"z3 + cvc5, every row's claim {via}{own}"
    rest = n - len(tied)
    return f"z3 + cvc5 (partly): {len(tied)} of {n} rows' claims {via}; the other {rest}: {who}"


def solvers_note(rows: list[Any]) -> str:
    """Per proof part of ``rows``: how many rows z3 proved there, and which solvers
    confirmed them: "z3 + cvc5" when the part's cvc5 rows all agree, "z3 + cvc5
    (partly)" when cvc5 left some query not confirmed (the cvc5 row names it), "z3
    only" when no cvc5 row covers the part in this run (never counted as confirmed).
    The fixed-N induction's cvc5 rows are per N."""
    proved: dict[str, int] = {}
    fixed_ns: set[str] = set()
    for r in rows:
        part = _part_of(r)
        if part is not None:
            proved[part] = proved.get(part, 0) + 1
            if part == "fixed-N":
                fixed_ns.add(r.bounds.split(",")[0])
    cvc5: dict[str, list[str]] = {}
    bmc_at: list[str] = []  # (BMC's cvc5 rows name their own bounds: not the rows')
    for r in rows:
        if r.kind != "second solver":
            continue
        if r.obligation.startswith("cvc5 re-checks BMC at "):
            bmc_at.append(r.obligation.removeprefix("cvc5 re-checks BMC at "))
        if r.obligation.startswith("cvc5 re-checks N="):
            cvc5.setdefault("fixed-N", []).append(r.status)
            fixed_ns.discard(r.obligation.removeprefix("cvc5 re-checks "))
        for part, prefix in _CVC5_ROWS:
            if r.obligation.startswith(prefix):
                cvc5.setdefault(part, []).append(r.status)
    certified = certified_by_fixedn(rows)
    out = []
    for part, n in proved.items():
        seen = cvc5.get(part, [])
        who = (
            "z3 only"
            if not seen
            else "z3, cvc5 DISAGREES"
            if "disagree" in seen
            else "z3 + cvc5"
            if all(s == "agree" for s in seen)
            else "z3 + cvc5 (partly)"
        )
        if part == "fixed-N" and seen and fixed_ns:
            who += f"; z3 only at {', '.join(sorted(fixed_ns))}"
        if part == "z3 BMC" and seen:
            who += f" at {', '.join(bmc_at)} only"
        if part in ONE_SOLVER and "DISAGREES" not in who:
            who = _through_certificate(part, n, who, rows, certified)
        out.append(f"{part} ({n} rows): {who}")
    return "solvers by part: " + "; ".join(out) if out else ""
