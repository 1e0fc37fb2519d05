"""cvc5 on ``impl/pool.py``'s hot paths from source: rewrites that keep validity.

The pool's hot paths proved from their own source (:mod:`.pyhot`: ``free_blocks``,
``unpin_blocks``, ``get_new_blocks``; :mod:`.pypool`: ``touch``) give z3 queries with
dozens of hypotheses: the pool's invariant, the queue's contract, each translated
statement's effect (the pending watchers' tuples: formulas of ten thousand characters).
cvc5 1.4.2 leaves many of them unknown whole, though the goal follows from a handful of
hypotheses. :func:`confirm` asks each query z3 proved this way, in order, and stops at
the first unsat:

1. **The quantifier-free part** (:func:`cvc5leaves.closed`): the quantifier-free
   hypotheses (and the negated goal, if it has no quantifier). Fewer hypotheses, more
   models: its unsat proves the query's.
2. **The relevant hypotheses** (:func:`relevant`): the hypotheses split into their
   conjuncts, of which those a symbol of the goal reaches, in at most ``depth`` steps,
   by the SInE rule (a conjunct is reached through its rarest symbols). A subset of the
   conjuncts: its unsat proves the query's. A ``sat`` of a subset is no model of the query
   and counts for nothing; the steps after it are asked.
3. **The query whole** (:func:`cvc5more.export`, the lambdas lifted, chains of lambdas
   too: :func:`smtlib.lift_lambdas`). ``sat`` here is a model of the query z3 proved
   unsat: a disagreement.
3b. **Instances** (:func:`instantiated`): each universal quantifier a hypothesis states
   (in a positive position) replaced by its instances at the negated goal's Skolem
   constants and the call's list entries ``bl[0..2]``, the quantified originals dropped;
   the goal negated and Skolemized (fresh names only), whole, then each of its parts
   (:func:`smtlib.split_goal`) on its own. A weakening of the query (each
   instance follows from its quantifier; :func:`checked` refuses an "instance" whose
   source is not one of the hypothesis' conjuncts, or whose formula is not that
   source's instance): its unsat proves the query's, its ``sat`` counts for nothing.
3c. **Cores** (:func:`cores`): z3 chooses the instances, cvc5 proves. For the goal
   whole, then each of its parts, negated and Skolemized as in 3b: the candidates are
   each quantified conjunct instantiated at each term on its own (:func:`candidates`),
   the terms two rounds deep (:func:`candidate_terms`: 3b's, then the indices and
   arguments the negated goal and those instances read). z3 is asked the quantifier-free
   conjuncts and the candidates, each tracked by a fresh literal, with no quantifier it
   instantiates (:func:`core`); on its unsat, its core (minimized) is checked as 3b's
   instances are (:func:`core_checked`) and asked of cvc5 with the negated part alone: a
   subset of a weakening of the query, so cvc5's unsat proves it. z3's unsat alone
   counts for nothing, nor cvc5's ``sat`` or unknown on a core.
3d. **The hypothesis' core** (:func:`hyp_cores`): z3 chooses the conjuncts, cvc5 proves.
   For the goal whole, then each of its parts, negated and Skolemized as in 3b, z3 is
   asked the query with each of the hypothesis' conjuncts tracked by a fresh literal,
   quantifiers and all (:func:`hyp_core`); on its unsat, the conjuncts its core names
   are checked to be the hypothesis' own and asked of cvc5 with the negated part: a
   subset of the query's conjuncts, so cvc5's unsat proves it. Where 2's symbol rule
   keeps most of ``touch``'s conjuncts, z3's core keeps those its proof used. A core
   cvc5 leaves open is asked for again with other seeds (:data:`HYP_CORE_SEEDS`). Where
   z3 finds no core with its literals, or cvc5 leaves each core open, z3 is asked without
   literals, dropping one conjunct at a time while it still says unsat
   (:func:`deletion_core`, from the first core or from every conjunct), and cvc5 is asked
   that smaller core with more time; then 3c is asked on the smallest core's conjuncts
   alone. A part
   left unconfirmed is split once more (:data:`SPLIT_AGAIN`; 3b's split is capped, so
   its last part can hold many), and each of its parts must be confirmed.
3e. **z3's own instances, decided by Yices** (:func:`proof_instance_core`): where 3c
   leaves 3d's smallest core open, z3 proves it again recording its proof, whose
   quantifier instantiations name the terms (:func:`proof_terms`); the core's quantified
   conjuncts are instantiated at each of them (3c's candidates, checked as 3c's cores
   are), the originals dropped: a subset of a weakening of the query, quantifier-free.
   Yices 2 (:mod:`.yices`), a third solver, decides it: cvc5 1.4.2 leaves these
   unknown at 300 s (``touch``'s posts at 3 entries; Yices: seconds). Yices' unsat
   proves the part; a row names a query so confirmed apart (:data:`YICES_STEP`).
4. **The list's shape** (:func:`shape_cases`): the query case by case on the call's list
   (how many entries, which of them are one block, which are null, which are this
   pool's); every case's query is the original with the case's facts added and used
   (:func:`assume`), so it is unsat iff the original is in that case; cvc5 must find
   that the cases cover every model (:func:`cvc5leaves.covers`), and each case is asked
   as 1 to 3 above. A case's ``sat`` under 3 is a model of the query: a disagreement.
   The first case not confirmed ends it, and the split is made again with what the call
   does with each entry besides (released, keyed, watched: :func:`shape_atoms`). A
   query with no list (``get_new_blocks``' count) is asked case by case on its goal's
   ``ite`` conditions instead (:func:`cvc5cases.confirm_ite`: each condition's two cases
   cover every model).

"unsat" only if a step says so (and, for 4, coverage is unsat and every case is);
"sat" only at 3 or in a case at 3; else "unknown" (or "refused" when cvc5 does not
read the query whole): not confirmed.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import z3  # type: ignore[import-untyped]

from . import cvc5cases, cvc5leaves, cvc5more, smtlib, yices
from .model import Record, constants, nodes, subterms
from .pysource import NONE
from .rewrite import selects_expanded, simplify

E = TypeVar("E", bound=z3.ExprRef)
"""A formula or a term (:func:`_dropped` drops either)."""

TIMEOUT_MS = 5000
"""cvc5's time limit (wall clock) on a query whole and on each relevant subset."""

CASE_MS = 3000
"""cvc5's time limit on each case of :func:`shape_cases` (whole and each subset)."""

DEPTHS = (1, 2)
"""The relevance depths asked (:func:`relevant`), in turn."""

TOLERANCE = 1.5
"""SInE's tolerance: a conjunct is reached through each of its symbols that occurs in
at most this many times as many conjuncts as its rarest symbol."""

MAX_CASES = 48
"""At most this many cases of :func:`shape_cases` (past it: not confirmed)."""

MARK = 1
"""``_pool``'s mark of this pool's blocks in the translation (:data:`pypool.MARK`)."""

ENTRIES = 3
"""A call's list has at most this many entries in any of the hot paths' queries
(:data:`pyhot.L_REFUSED`, :data:`pypool.L_REFUSED`)."""


# -- step 2: the relevant hypotheses ------------------------------------------------------


def conjuncts(hyp: list[z3.BoolRef]) -> list[z3.BoolRef]:
    """``hyp``'s formulas with each conjunction split into its conjuncts (the same set of
    formulas: a model of one list is a model of the other)."""
    out: list[z3.BoolRef] = []
    todo = list(reversed(hyp))
    while todo:
        h = todo.pop()
        if z3.is_and(h):
            todo.extend(reversed(h.children()))
        elif not z3.is_true(h):
            out.append(h)
    return out


def symbols(e: z3.ExprRef) -> set[str]:
    """The uninterpreted symbols (constants and functions) ``e`` uses."""
    return {t.decl().name() for t in subterms([e]) if t.decl().kind() == z3.Z3_OP_UNINTERPRETED}


def relevant(
    hyp: list[z3.BoolRef], goal: z3.BoolRef, depth: int, tolerance: float = TOLERANCE
) -> list[z3.BoolRef]:
    """The conjuncts of ``hyp`` (:func:`conjuncts`) the goal's symbols reach in at most
    ``depth`` rounds, by SInE's trigger rule: a conjunct is reached when one of its
    *trigger* symbols (those at most ``tolerance`` times as frequent among the conjuncts
    as its rarest one) is reached, and then all its symbols are. A conjunct with no
    symbol is always kept. Only ever members of ``conjuncts(hyp)``, in their order."""
    hs = conjuncts(hyp)
    syms = [symbols(h) for h in hs]
    occ: dict[str, int] = {}
    for s in syms:
        for x in s:
            occ[x] = occ.get(x, 0) + 1
    trig = [{x for x in s if occ[x] <= tolerance * min(occ[y] for y in s)} for s in syms]
    reached, chosen = symbols(goal), {i for i, s in enumerate(syms) if not s}
    for _ in range(depth):
        new = [i for i in range(len(hs)) if i not in chosen and trig[i] & reached]
        if not new:
            break
        for i in new:
            chosen.add(i)
            reached |= syms[i]
    return [hs[i] for i in sorted(chosen)]


# -- step 4: the list's shape -------------------------------------------------------------


def shape_atoms(
    query: list[z3.BoolRef], entries: int = ENTRIES
) -> tuple[list[z3.BoolRef], list[z3.BoolRef]]:
    """The atoms of the call's list (``m`` entries of ``bl``) in ``query``'s constants, for
    the entries the query reads (``bl[k]``, k < ``entries``):
    ``m == k`` (k <= ``entries``), ``bl[j] == bl[i]`` (j < i < ``entries``), ``is_null[bl[i]]``,
    ``mark[bl[i]] == MARK`` (the list's own); and, apart, what the call does with each
    entry, where the query has it: ``ref[bl[i]] == 1`` (released), no key
    (``_block_hash[bl[i]] == NONE``), no pending watchers (``_pending[bl[i]] == NONE``) or
    one (``tuple_len`` 1). ([], []) when the query has no such list."""
    cs = constants(query)
    if "m" not in cs or "bl" not in cs:
        return [], []
    m, bl = cs["m"], cs["bl"]
    read = [
        t.arg(1).as_long()
        for t in subterms(query)
        if z3.is_select(t) and t.arg(0).eq(bl) and z3.is_int_value(t.arg(1))
    ]
    entries = min(entries, 1 + max(read, default=-1))
    out: list[z3.BoolRef] = [m == k for k in range(entries + 1)]
    for i in range(entries):
        b = z3.Select(bl, i)
        out += [z3.Select(bl, j) == b for j in range(i)]
        if "is_null" in cs:
            out.append(z3.Select(cs["is_null"], b))
        if "mark" in cs:
            out.append(z3.Select(cs["mark"], b) == MARK)
    calls: list[z3.BoolRef] = []
    for i in range(entries):  # (what the call does with each entry)
        b = z3.Select(bl, i)
        if "ref" in cs:
            calls.append(z3.Select(cs["ref"], b) == 1)
        for name in ("_block_hash", "_pending"):
            if name in cs:
                calls.append(z3.Select(cs[name], b) == NONE)
        if "_pending" in cs and _TLEN in _functions(query):
            calls.append(_functions(query)[_TLEN](z3.Select(cs["_pending"], b)) == 1)
    return [simplify(a) for a in out], [simplify(a) for a in calls]


_TLEN = "tuple_len"
"""The translation's length of a tuple object (the pending watchers')."""


def _functions(query: list[z3.BoolRef]) -> dict[str, z3.FuncDeclRef]:
    """The uninterpreted functions of one argument ``query`` applies, by name."""
    return {
        t.decl().name(): t.decl()
        for t in subterms(query)
        if t.decl().kind() == z3.Z3_OP_UNINTERPRETED and t.num_args() == 1
    }


def assume(
    hyp: list[z3.BoolRef], goal: z3.BoolRef, fact: z3.BoolRef
) -> tuple[list[z3.BoolRef], z3.BoolRef]:
    """``hyp and fact`` with ``fact`` used everywhere, and ``goal`` the same way: an
    equivalent query (``fact`` is kept among the hypotheses, and each replacement is an
    equality ``fact`` states). ``t == u`` replaces the term ``t`` by ``u`` (``u`` a value,
    or the earlier entry ``bl[j]`` for ``t = bl[i]``); else the atom becomes true (or
    false, for ``not a``), both ways an equation is written."""
    atom, value = (fact.arg(0), False) if z3.is_not(fact) else (fact, True)
    pairs: list[tuple[z3.ExprRef, z3.ExprRef]] = [(atom, z3.BoolVal(value))]
    if z3.is_eq(atom):
        x, y = atom.arg(0), atom.arg(1)
        pairs.append((y == x, z3.BoolVal(value)))
        if value:
            if z3.is_int_value(x) or z3.is_true(x) or z3.is_false(x):
                x, y = y, x
            if not z3.is_int_value(x) and x.get_id() != y.get_id():
                pairs = [(x, y)]
    new_hyp = [simplify(z3.substitute(h, *pairs)) for h in hyp]
    return [*new_hyp, fact], simplify(z3.substitute(goal, *pairs))


def _occurs(atom: z3.BoolRef, goal: z3.BoolRef) -> bool:
    """Does the goal mention the atom's terms (each side of an equation that is not a
    value: ``m`` for ``m == k``, both entries for ``bl[j] == bl[i]``)?"""
    ids = {t.get_id() for t in subterms([goal])}
    sides = atom.children() if z3.is_eq(atom) else [atom]
    return all(c.get_id() in ids for c in sides if not z3.is_int_value(c))


@dataclass
class ShapeCase:
    path: tuple[z3.BoolRef, ...]
    hyp: list[z3.BoolRef]
    goal: z3.BoolRef
    closed: bool


def shape_cases(
    hyp: list[z3.BoolRef],
    goal: z3.BoolRef,
    atoms: list[z3.BoolRef],
    max_cases: int = MAX_CASES,
) -> list[ShapeCase] | None:
    """The query split on ``atoms`` in turn, depth first: each case ``P`` on an atom
    ``a`` the goal still mentions becomes ``P and a`` and ``P and not a``
    (:func:`assume`); an atom the goal no longer mentions is not split on; a case whose
    quantifier-free hypotheses cvc5 finds unsat (:func:`cvc5leaves.closed`) is closed
    there (None: more than ``max_cases``)."""
    out: list[ShapeCase] = []

    def walk(h: list[z3.BoolRef], g: z3.BoolRef, path: tuple[z3.BoolRef, ...], k: int) -> bool:
        if len(out) >= max_cases:
            return False
        if cvc5leaves.closed(h, g):
            out.append(ShapeCase(path, h, g, True))
            return True
        while k < len(atoms) and not _occurs(atoms[k], g):
            k += 1
        if k == len(atoms):
            out.append(ShapeCase(path, h, g, False))
            return True
        a = atoms[k]
        for fact in (a, z3.Not(a)):
            h2, g2 = assume(h, g, fact)
            if not walk(h2, g2, (*path, fact), k + 1):
                return False
        return True

    return out if walk(hyp, goal, (), 0) else None


# -- step 3b: instances of the quantified hypotheses ----------------------------------------

INSTANCE_MS = 8000
"""cvc5's time limit on the instantiated query (:func:`instantiated`)."""

SKOLEM = "sk!"
"""The prefix of the negated goal's fresh constants (:func:`negated_goal`)."""


def negated_goal(goal: z3.BoolRef, query: list[z3.BoolRef]) -> list[z3.BoolRef] | None:
    """Formulas whose conjunction has a model (with fresh constants) iff ``not goal`` has
    one: ``not (a or b)`` as ``not a``, ``not b``; ``not (a implies b)`` as ``a``, ``not
    b``; ``not (not a)`` as ``a``; ``not (forall x. P)`` as ``not P(c)`` for a fresh
    constant ``c`` (Skolem's: a witness of ``exists x. not P`` is a value of ``c``, and
    back); any other ``g`` as ``not g``. None when a fresh name would clash with one of
    ``query``'s constants (then nothing is asked)."""
    taken = set(constants(query))
    out: list[z3.BoolRef] = []
    made: list[str] = []
    todo: list[z3.BoolRef] = [goal]
    while todo:
        g = todo.pop()
        if z3.is_or(g):
            todo.extend(reversed(g.children()))
        elif z3.is_app_of(g, z3.Z3_OP_IMPLIES):
            out.append(g.arg(0))
            todo.append(g.arg(1))
        elif z3.is_not(g):
            out.append(g.arg(0))
        elif z3.is_quantifier(g) and g.is_forall():
            cs = []
            for i in range(g.num_vars()):
                name = f"{SKOLEM}{len(made)}"
                if name in taken:
                    return None
                made.append(name)
                cs.append(z3.Const(name, g.var_sort(i)))
            todo.append(z3.substitute_vars(g.body(), *reversed(cs)))
        else:
            out.append(z3.Not(g))
    return out


def instantiate(h: z3.BoolRef, terms: tuple[z3.ExprRef, ...]) -> z3.BoolRef:
    """``h`` with each universal quantifier of one variable that it states (in a positive
    position: reached through ``and``, ``or``, the consequent of ``implies``, an even
    number of ``not``) replaced by the conjunction of its body at each of ``terms`` of
    the variable's sort (the instances' own such quantifiers too). Each
    instance follows from the quantifier, and ``h`` only gets weaker where its parts do:
    ``h`` implies the result. Quantifiers elsewhere (under ``ite``, ``==``, a binder)
    are left as they are. Not simplified: built the same way twice, it is the same
    term (:func:`checked` compares), whatever z3's rewriter would make of it."""
    memo: dict[tuple[int, bool], z3.BoolRef] = {}

    def walk(e: z3.BoolRef, positive: bool) -> z3.BoolRef:
        key = (e.get_id(), positive)
        if key in memo:
            return memo[key]
        r = e
        if z3.is_quantifier(e):
            if e.is_forall() and positive and e.num_vars() == 1:
                srt = e.var_sort(0)
                r = z3.And(
                    [
                        instantiate(z3.substitute_vars(e.body(), t), terms)
                        for t in terms
                        if t.sort() == srt
                    ]
                )
        elif z3.is_and(e):
            r = z3.And([walk(c, positive) for c in e.children()])
        elif z3.is_or(e):
            r = z3.Or([walk(c, positive) for c in e.children()])
        elif z3.is_not(e):
            r = z3.Not(walk(e.arg(0), not positive))
        elif z3.is_app_of(e, z3.Z3_OP_IMPLIES):
            r = z3.Implies(walk(e.arg(0), not positive), walk(e.arg(1), positive))
        memo[key] = r
        return r

    if any(smtlib._has_loose_var(t, 0, {}) for t in terms):
        raise ValueError("an instance's term holds a bound variable")
    return walk(h, True)


@dataclass(frozen=True)
class Instance:
    """``source`` (one of the hypothesis' conjuncts) instantiated at ``terms``:
    ``formula`` must be :func:`instantiate` ``(source, terms)``."""

    source: z3.BoolRef
    terms: tuple[z3.ExprRef, ...]
    formula: z3.BoolRef


def instance_terms(hyp: list[z3.BoolRef], negated: list[z3.BoolRef]) -> tuple[z3.ExprRef, ...]:
    """The terms to instantiate at: the negated goal's fresh constants and the call's
    list entries ``bl[k]`` (k < :data:`ENTRIES`), where the query has them (one round:
    measured, these settle ``unpin_blocks``' open posts; the index terms those instances
    read, a second round, made queries neither solver decided in 15 s)."""
    out: list[z3.ExprRef] = [c for name, c in constants(negated).items() if name.startswith(SKOLEM)]
    cs = constants([*hyp, *negated])
    if "bl" in cs and z3.is_array(cs["bl"]):
        out += [z3.Select(cs["bl"], k) for k in range(ENTRIES)]
    return tuple(out)


def instances(hyp: list[z3.BoolRef], terms: tuple[z3.ExprRef, ...]) -> list[Instance]:
    """Each conjunct of ``hyp`` (:func:`conjuncts`) that states a quantifier,
    instantiated at ``terms``."""
    out = []
    for h in conjuncts(hyp):
        f = instantiate(h, terms)
        if not f.eq(h):
            out.append(Instance(h, terms, f))
    return out


def _valid(mine: dict[int, z3.BoolRef], i: Instance) -> bool:
    """Is ``i`` an instance of one of ``mine`` (the hypothesis' conjuncts, by id): its
    source one of them, its terms closed, its formula :func:`instantiate`'s own?"""
    return (
        i.source.get_id() in mine
        and not any(smtlib._has_loose_var(t, 0, {}) for t in i.terms)
        and i.formula.eq(instantiate(i.source, i.terms))
    )


def checked(hyp: list[z3.BoolRef], insts: list[Instance]) -> list[z3.BoolRef] | None:
    """The hypothesis' conjuncts with each instantiated one replaced by its instances,
    a weakening of ``hyp`` (so its unsat, with the negated goal, proves the query's);
    None (refused) when an instance's source is not one of ``hyp``'s conjuncts, its
    terms hold a bound variable, or its formula is not :func:`instantiate`'s own."""
    mine = {h.get_id(): h for h in conjuncts(hyp)}
    done: dict[int, z3.BoolRef] = {}
    for i in insts:
        if not _valid(mine, i):
            return None
        done[i.source.get_id()] = i.formula
    return [done.get(k, h) for k, h in mine.items()]


INSTANCE_PARTS = 16
"""The goal is split into at most this many parts (:func:`smtlib.split_goal`) for
:func:`instantiated`, each asked on its own."""


def instantiated(
    hyp: list[z3.BoolRef], goal: z3.BoolRef, timeout_ms: int = INSTANCE_MS
) -> tuple[str, str]:
    """Step 3b: the goal whole, then (if cvc5 does not say unsat) split into its parts
    (:func:`smtlib.split_goal`: their conjunction is the goal, so the query is unsat iff
    each part's is; measured, some posts are confirmed whole in 1 to 5 s and not in 8 s
    a part, others only part by part); for the goal or each part,
    the hypothesis with its quantifiers instantiated (:func:`instances`, at
    :func:`instance_terms`, checked: :func:`checked`) and the quantified originals
    dropped, with the part negated and Skolemized (:func:`negated_goal`): a weakening of
    the part's query, so "unsat" on every part proves the query; any other answer counts
    for nothing ("unknown"). The second value says how ("instances" or "instances: k
    parts"), or why not."""
    return _whole_then_parts(_instantiated_parts, hyp, goal, timeout_ms)


def _whole_then_parts(
    ask: Callable[[list[z3.BoolRef], list[z3.BoolRef], int], tuple[str, str]],
    hyp: list[z3.BoolRef],
    goal: z3.BoolRef,
    timeout_ms: int,
) -> tuple[str, str]:
    """``ask`` on the goal whole; unless that is unsat or refused (its answer ends with
    :data:`REFUSED`: a part that fails the check would fail it again), on the goal's
    parts (:func:`smtlib.split_goal`), each of which must be unsat."""
    v, how = ask(hyp, [goal], timeout_ms)
    if v == "unsat" or how.endswith(REFUSALS):
        return v, how
    parts = smtlib.split_goal(goal, INSTANCE_PARTS)
    if len(parts) == 1:
        return v, how
    return ask(hyp, parts, timeout_ms)


def _instantiated_parts(
    hyp: list[z3.BoolRef], parts: list[z3.BoolRef], timeout_ms: int
) -> tuple[str, str]:
    """:func:`instantiated` on the goal's ``parts`` (whose conjunction is the goal)."""

    def one(neg: list[z3.BoolRef]) -> str | None:
        terms = instance_terms(hyp, neg)
        if not terms:
            return "no term"
        weak = checked(hyp, instances(hyp, terms))
        if weak is None:
            return REFUSED
        if _ask([selects_expanded(f) for f in [*weak, *neg]], timeout_ms) != "unsat":
            return ""
        return None

    return _each_part("instances", hyp, parts, one)


REFUSED = "refused (not instances of the hypothesis)"
"""Why a step 3b or 3c query was not asked: :func:`checked` or :func:`core_checked`
refused what it would have asked (:func:`_whole_then_parts` does not split then)."""

NOT_CONJUNCTS = "refused (not conjuncts of the hypothesis)"
"""Why a step 3d query was not asked: z3's core named a formula that is none of the
hypothesis' conjuncts (:func:`hyp_cores`)."""

REFUSALS = (REFUSED, NOT_CONJUNCTS)


def _each_part(
    step: str,
    hyp: list[z3.BoolRef],
    parts: list[z3.BoolRef],
    one: Callable[[list[z3.BoolRef]], str | None],
    again: int = 1,
) -> tuple[str, str]:
    """Steps 3b to 3d on the goal's ``parts``: each part negated and Skolemized
    (:func:`negated_goal`) and given to ``one``, which returns None when cvc5 said unsat
    on it, else why not ("" for no more than the part's place). A part ``one`` does not
    confirm is split again into at most ``again`` parts (:func:`smtlib.split_goal`; 1:
    not), each of which must then be. "unsat" only if every part is; the second value
    says how, or why not, prefixed with ``step``."""
    where = f": a part of {len(parts)}" if len(parts) > 1 else ""
    n = 0
    for part in parts:
        neg = negated_goal(part, [*hyp, part])
        if neg is None:
            return "unknown", f"{step}: a fresh name clashes"
        why = one(neg)
        if why is not None and why not in REFUSALS and again > 1:
            subs = smtlib.split_goal(part, again)
            if len(subs) > 1:
                v, how = _each_part(step, hyp, subs, one)
                if v == "unsat":
                    n += len(subs)
                    continue
                why = how.removeprefix(step).removeprefix(": ") + " (split again)"
        if why in REFUSALS:
            return "unknown", f"{step}: {why}"
        if why is not None:
            return "unknown", (f"{step}: {why}" if why else step) + where
        n += 1
    return "unsat", step + (f": {n} parts" if n > 1 else "")


# -- step 3c: cores (z3 picks the instances, cvc5 proves) ----------------------------------

CORE_MS = 20000
"""z3's time limit on the candidate instances (:func:`core`): a query without the
quantifiers it instantiates."""

CORE_CVC5_MS = 8000
"""cvc5's time limit on a core (:func:`cores`)."""

CORE_QF_AGAIN = 8
"""A quantifier-free core cvc5 left unknown at :data:`CORE_CVC5_MS` is asked once more at
this many times it (64 s; :func:`cvc5more.ask`'s ``again``). Such a query is decidable,
so more time is what helps (measured by hand: ``touch``'s queue [5/9] at 2 entries,
part 8's core, unknown at 8 s, unsat in 17.7 s); a core with a quantifier left is not
asked again (there, time was not what it lacked)."""

CORE_LIT = "core"
"""The prefix of the fresh literals (``z3.FreshBool``: no name of the query) z3's query
tracks each candidate with (:func:`core`)."""


TERM_SIZE = 6
"""A round-2 term (:func:`candidate_terms`) has at most this many distinct subterms
(``pos[sk!0]``, ``nxt[bl[0]]``: the translation's index terms also hold whole
``ite`` and ``store`` chains, whose instances would be as large)."""


def _small(t: z3.ExprRef, size: int = TERM_SIZE) -> bool:
    """Has ``t`` at most ``size`` distinct subterms (and no quantifier)?"""
    seen: set[int] = set()
    todo = [t]
    while todo:
        e = todo.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        if len(seen) > size or not z3.is_app(e):
            return False
        todo.extend(e.children())
    return True


def _indices(fs: list[z3.BoolRef], sorts: set[int]) -> dict[int, z3.ExprRef]:
    """The small closed terms (:func:`_small`) of a sort in ``sorts`` (by id) that ``fs``
    read as an array's index or an uninterpreted function's argument, by id."""
    out: dict[int, z3.ExprRef] = {}
    for t in subterms(fs):
        if z3.is_select(t):
            args = list(t.children())[1:]
        elif t.decl().kind() == z3.Z3_OP_UNINTERPRETED and t.num_args():
            args = list(t.children())
        else:
            continue
        for a in args:
            if a.sort().get_id() in sorts and _small(a):
                out.setdefault(a.get_id(), a)
    return out


def _quantified_sorts(hyp: list[z3.BoolRef]) -> set[int]:
    """The sorts (by id) of the variables of the universal quantifiers in ``hyp``."""
    out: set[int] = set()
    for e in nodes(hyp):
        if z3.is_quantifier(e) and e.is_forall():
            out |= {e.var_sort(i).get_id() for i in range(e.num_vars())}
    return out


def candidate_terms(
    hyp: list[z3.BoolRef], negated: list[z3.BoolRef], rounds: int = 2
) -> tuple[z3.ExprRef, ...]:
    """The terms :func:`cores` instantiates at: :func:`instance_terms` (round 1), then in
    each further round the closed terms of a quantified variable's sort that the
    negated goal and the instances so far read as an index or an argument (round 2:
    the positions the round-1 instances name, ``pos[sk!0]``, ``nxt[bl[0]]``)."""
    terms = list(instance_terms(hyp, negated))
    sorts = _quantified_sorts(hyp)
    for _ in range(rounds - 1):
        fs = [*negated, *(i.formula for i in instances(hyp, tuple(terms)))]
        have = {t.get_id() for t in terms}
        terms += [t for k, t in _indices(fs, sorts).items() if k not in have]
    return tuple(terms)


def candidates(hyp: list[z3.BoolRef], terms: tuple[z3.ExprRef, ...]) -> list[Instance]:
    """Each conjunct of ``hyp`` that states a quantifier, instantiated at each of ``terms``
    on its own (one candidate a conjunct and a term: :func:`core` keeps those it needs)."""
    out: list[Instance] = []
    for h in conjuncts(hyp):
        for t in terms:
            f = instantiate(h, (t,))
            if not f.eq(h):
                out.append(Instance(h, (t,), f))
    return out


def split_at(
    within: list[z3.BoolRef], terms: tuple[z3.ExprRef, ...]
) -> tuple[list[z3.BoolRef], list[Instance]]:
    """``within``'s conjuncts that state no quantifier :func:`candidates` instantiates (kept
    as they are), and the others' instances at each of ``terms``."""
    insts = candidates(within, terms)
    sources = {i.source.get_id() for i in insts}
    return [h for h in conjuncts(within) if h.get_id() not in sources], insts


def core(
    base: list[z3.BoolRef],
    insts: list[Instance],
    negated: list[z3.BoolRef],
    timeout_ms: int = CORE_MS,
) -> tuple[list[z3.BoolRef], list[Instance]] | str:
    """z3 on ``base``, ``insts``' formulas and ``negated``, each of the first two tracked
    by a fresh literal; on unsat, the formulas of ``base`` and the instances its
    unsat core names (``core.minimize``: z3 drops what it can); else z3's answer ("sat":
    the candidates are too few; "unknown": not decided in ``timeout_ms``). z3 only
    chooses here: :func:`cores` checks the choice and asks cvc5."""
    keep = _tracked_core([*base, *(i.formula for i in insts)], negated, timeout_ms, True)
    if isinstance(keep, str):
        return keep
    n = len(base)
    return [base[k] for k in keep if k < n], [insts[k - n] for k in keep if k >= n]


def _tracked_core(
    fs: list[z3.BoolRef], negated: list[z3.BoolRef], timeout_ms: int, minimize: bool, seed: int = 0
) -> list[int] | str:
    """z3 on ``fs``, each tracked by a fresh literal (:data:`CORE_LIT`), and ``negated``:
    on unsat, the positions in ``fs`` of those its unsat core names, in order; else z3's
    answer. ``minimize``: ``core.minimize``; ``seed``: z3's random seed (0: its default)."""
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    if minimize:
        s.set("core.minimize", True)
    if seed:
        s.set("random_seed", seed)
    lits = [z3.FreshBool(CORE_LIT) for _ in fs]
    for lit, f in zip(lits, fs, strict=True):
        s.add(z3.Implies(lit, f))
    s.add(*negated)
    r = s.check(*lits)
    if r != z3.unsat:
        return str(r)
    used = {lit.get_id() for lit in s.unsat_core()}
    return [k for k, lit in enumerate(lits) if lit.get_id() in used]


def core_checked(
    hyp: list[z3.BoolRef], base: list[z3.BoolRef], insts: list[Instance]
) -> list[z3.BoolRef] | None:
    """``base`` and ``insts``' formulas when each of ``base`` is one of the hypothesis'
    conjuncts and each instance is one of a conjunct (:func:`checked`'s rule): a subset
    of a weakening of ``hyp``, so its unsat with the negated goal proves the query's.
    None (refused) otherwise."""
    mine = {h.get_id(): h for h in conjuncts(hyp)}
    if any(b.get_id() not in mine for b in base) or not all(_valid(mine, i) for i in insts):
        return None
    return [*base, *(i.formula for i in insts)]


def cores(
    hyp: list[z3.BoolRef], goal: z3.BoolRef, timeout_ms: int = CORE_CVC5_MS
) -> tuple[str, str]:
    """Step 3c: the goal whole, then (if not confirmed) part by part
    (:func:`smtlib.split_goal`, as :func:`instantiated`); for the goal or each part,
    negated and Skolemized (:func:`negated_goal`), z3 is given the hypothesis' conjuncts
    with each quantified one replaced by :func:`candidates` at :func:`candidate_terms`
    (two rounds), each tracked, and its unsat core (:func:`core`) is checked
    (:func:`core_checked`) and asked of cvc5 with the negated part: a subset of a weakening
    of the part's query, so cvc5's unsat proves it. z3's unsat alone counts for nothing;
    cvc5's ``sat`` or unknown on a core counts for nothing. The second value says how
    ("cores" or "cores: k parts"), or why not."""
    return _whole_then_parts(_core_parts, hyp, goal, timeout_ms)


def _core_parts(hyp: list[z3.BoolRef], parts: list[z3.BoolRef], timeout_ms: int) -> tuple[str, str]:
    """:func:`cores` on the goal's ``parts`` (whose conjunction is the goal)."""
    return _each_part("cores", hyp, parts, lambda neg: _instance_core(hyp, hyp, neg, timeout_ms))


def _instance_core(
    hyp: list[z3.BoolRef], within: list[z3.BoolRef], neg: list[z3.BoolRef], timeout_ms: int
) -> str | None:
    """3c on one negated part ``neg``, its candidates drawn from the conjuncts of
    ``within`` (``hyp`` itself, or 3d's core of it: fewer candidates): None when cvc5
    says unsat on z3's core, else why not. The core is checked against ``hyp``'s own
    conjuncts (:func:`core_checked`)."""
    terms = candidate_terms(within, neg)
    if not terms:
        return "no term"
    base, insts = split_at(within, terms)
    got = core(base, insts, neg)
    if isinstance(got, str):
        return f"z3 {got} on {len(insts)} candidates"
    sub = core_checked(hyp, *got)
    if sub is None:
        return REFUSED
    v = _ask([selects_expanded(f) for f in [*sub, *neg]], timeout_ms, CORE_QF_AGAIN)
    if v != "unsat":
        return f"cvc5 {v} on a core ({len(got[1])} of {len(insts)} instances)"
    return None


# -- step 3d: the hypothesis' core (z3 picks the conjuncts, cvc5 proves) -------------------

HYP_CORE_MS = 20000
"""z3's time limit on a query whose hypothesis conjuncts it tracks (:func:`hyp_core`)."""

SPLIT_AGAIN = 32
"""A part 3d leaves unconfirmed is split again into at most this many parts
(:func:`smtlib.split_goal`). Measured on ``touch``'s open posts: the first split's last
part holds what the cap of :data:`INSTANCE_PARTS` left whole (27 parts in
``the queue is the spec's sequence [3/9]``'s)."""


HYP_CORE_SEEDS = 3
"""z3 is asked for the hypothesis' core with at most this many random seeds (0, 1, ...)
until cvc5 confirms one (:func:`hyp_cores`): each seed's search may name other
conjuncts. Measured on ``touch``'s "after ``_undo_touch``" at 2 entries, part 12's
second part: seed 0's core of 11 conjuncts unknown to cvc5 at 8 s, seeds 1 to 3's (14,
14, 11) unsat in 4 to 5 s."""


def hyp_core(
    hyp: list[z3.BoolRef],
    negated: list[z3.BoolRef],
    timeout_ms: int | None = None,
    seed: int = 0,
) -> list[z3.BoolRef] | str:
    """z3 on the hypothesis' conjuncts (:func:`conjuncts`), each tracked by a fresh
    literal, and ``negated``: on unsat, the conjuncts its unsat core names, in order;
    else z3's answer. The core is not minimized (measured on ``touch``'s posts: the
    check took under 20 s, ``core.minimize`` past 120 s). z3 only chooses here:
    :func:`hyp_cores` checks the choice and asks cvc5. ``timeout_ms``: by default
    :data:`HYP_CORE_MS`, read at the call; ``seed``: z3's random seed."""
    cs = conjuncts(hyp)
    ms = HYP_CORE_MS if timeout_ms is None else timeout_ms
    keep = _tracked_core(cs, negated, ms, False, seed)
    return keep if isinstance(keep, str) else [cs[k] for k in keep]


DELETION_MS = 10000
"""z3's time limit on the first check of :func:`deletion_core` (measured on ``touch``'s
open posts: an unsat check took 0.5 to 5 s; a check that lost a needed conjunct ran out
of time rather than said sat)."""

DELETION_FACTOR = 3
"""Each later check of :func:`deletion_core` is given this many times the first one's
time (at least a second, at most :data:`DELETION_MS`): one that drops an unneeded
conjunct is as fast as the first, and one that drops a needed one runs to its limit."""


DELETION_CVC5_MS = 30000
"""cvc5's time limit on a deletion core (:func:`deletion_core`; quantifiers and all):
smaller than z3's tracked cores, and slower for cvc5 than its 8 s on them. Measured on
``touch``'s valid queue [3/9] at 2 entries, part 16's 17th part: its deletion core of 4
conjuncts unknown at 8 s, unsat in 17 s."""


def deletion_later_ms(first_ms: int, took_ms: int) -> int:
    """The limit of :func:`deletion_core`'s later checks: :data:`DELETION_FACTOR` times
    what the first took (``took_ms``), at least a second, at most the first's limit."""
    return min(first_ms, max(1000, DELETION_FACTOR * took_ms))


def deletion_core(
    start: list[z3.BoolRef], negated: list[z3.BoolRef], timeout_ms: int | None = None
) -> list[z3.BoolRef] | str:
    """z3 on ``start`` and ``negated``, with no tracking literal (the quantifiers stay at
    the top, where z3 proves queries it leaves unknown tracked): when unsat, each formula
    of ``start`` in turn is dropped if z3 still says unsat without it (a check that says
    sat or runs out of its time keeps it: :data:`DELETION_FACTOR` times the first
    check's); what is left, in order. Else z3's answer on ``start`` (in ``timeout_ms``).
    z3 only chooses here: :func:`hyp_cores` checks the choice and asks cvc5.
    ``timeout_ms``: by default :data:`DELETION_MS`, read at the call."""
    ms = DELETION_MS if timeout_ms is None else timeout_ms
    return _dropped(start, list, negated, ms)


def _dropped(
    items: Sequence[E],
    formulas: Callable[[list[E]], list[z3.BoolRef]],
    negated: list[z3.BoolRef],
    first_ms: int,
) -> list[E] | str:
    """The deletion loop of :func:`deletion_core` and :func:`needed_terms`: z3, with no
    tracking literal, on ``formulas(items)`` and ``negated`` (in ``first_ms``); when
    unsat, each item in turn is dropped if z3 still says unsat without it (each later
    check limited by :func:`deletion_later_ms`); what is left, in order. Else z3's
    answer."""

    def unsat(xs: list[E], limit: int) -> str:
        s = z3.Solver()
        s.set("timeout", limit)
        s.add(*formulas(xs), *negated)
        return str(s.check())

    t0 = time.perf_counter()
    first = unsat(list(items), first_ms)
    if first != "unsat":
        return first
    later = deletion_later_ms(first_ms, int(1000 * (time.perf_counter() - t0)))
    keep = list(items)
    for x in items:
        without = [y for y in keep if not y.eq(x)]
        if unsat(without, later) == "unsat":
            keep = without
    return keep


def hyp_cores(
    hyp: list[z3.BoolRef], goal: z3.BoolRef, timeout_ms: int = CORE_CVC5_MS
) -> tuple[str, str]:
    """Step 3d: the goal whole, then (if not confirmed) part by part, each part that is
    not split once more (:data:`SPLIT_AGAIN`); for the goal or each part, negated and
    Skolemized (:func:`negated_goal`), z3's core of the hypothesis' conjuncts
    (:func:`hyp_core`), checked to be a subset of them, asked of cvc5 with the negated
    part (quantifiers and all; a quantifier-free one again as 3c's, :data:`CORE_QF_AGAIN`);
    with other seeds (:data:`HYP_CORE_SEEDS`) while cvc5 leaves the cores open; then
    :func:`deletion_core` (from the first core, or from every conjunct if z3 named none),
    checked and asked the same way in :data:`DELETION_CVC5_MS`; then 3c on the smallest
    core's conjuncts (:func:`_instance_core`), then 3e on it (:func:`proof_instance_core`:
    Yices on z3's own instances). z3's unsat alone counts for nothing; cvc5's or Yices'
    ``sat`` or unknown on a core counts for nothing. The second value says how
    ("hypothesis core" or "hypothesis core: k parts"; :data:`YICES_STEP` ": j by Yices
    [of k parts]" when 3e confirmed j of them), or why not."""
    return _whole_then_parts(_hyp_core_parts, hyp, goal, timeout_ms)


def _hyp_core_parts(
    hyp: list[z3.BoolRef], parts: list[z3.BoolRef], timeout_ms: int
) -> tuple[str, str]:
    """:func:`hyp_cores` on the goal's ``parts`` (whose conjunction is the goal)."""
    mine = {h.get_id() for h in conjuncts(hyp)}

    def one(neg: list[z3.BoolRef]) -> str | None:
        asked: dict[tuple[int, ...], tuple[list[z3.BoolRef], str]] = {}  # (left open: cvc5's)

        def ask(core: list[z3.BoolRef], ms: int = timeout_ms) -> str | None:
            """None when cvc5 confirms ``core`` (in ``ms``); else why not (a core asked
            before is not asked again)."""
            ids = tuple(g.get_id() for g in core)
            if not mine.issuperset(ids):
                return NOT_CONJUNCTS
            if ids not in asked:
                v = _ask([selects_expanded(f) for f in [*core, *neg]], ms, CORE_QF_AGAIN)
                if v == "unsat":
                    return None
                asked[ids] = (core, v)
            return asked[ids][1]

        no_core = ""  # (z3's answer when it named no core with any seed)
        for seed in range(HYP_CORE_SEEDS):
            got = hyp_core(hyp, neg, seed=seed)
            if isinstance(got, str):
                if not asked:
                    no_core = got
                    break  # (seeds are for cores cvc5 leaves open)
                continue
            why = ask(got)
            if why in (None, NOT_CONJUNCTS):
                return why
        # (z3 found no core with its tracking literals, or cvc5 left each open: z3 again
        # without them, dropping conjuncts one at a time from the first core)
        first = next(iter(asked.values()), None)
        small = deletion_core(conjuncts(hyp) if first is None else first[0], neg)
        if isinstance(small, list):
            why = ask(small, max(timeout_ms, DELETION_CVC5_MS))
            if why in (None, NOT_CONJUNCTS):
                return why
        elif first is None:
            return f"z3 {no_core}"
        # (cvc5 left each core's quantifiers unknown: 3c on the smallest core's conjuncts
        # alone, whose fewer candidates z3 can choose among where it could not among all)
        least, v = min(asked.values(), key=lambda a: len(a[0]))
        why = _instance_core(hyp, least, neg, timeout_ms)
        if why is None:
            return None
        if why == REFUSED:
            return why
        # (then 3e: the instances z3's own proof of that core makes, decided by Yices)
        why_e = proof_instance_core(hyp, least, neg)
        if why_e is None:
            by_yices[0] += 1
            return None
        if why_e == REFUSED:
            return why_e
        cores_ = f"{len(asked)} cores" if len(asked) > 1 else "a core"
        opened = f"cvc5 {v} on {cores_} ({len(least)} of {len(mine)} conjuncts)"
        return f"{opened}, then {why}, then {why_e}"

    by_yices = [0]  # (how many parts 3e confirmed)
    v, how = _each_part("hypothesis core", hyp, parts, one, again=SPLIT_AGAIN)
    if v == "unsat" and by_yices[0]:
        rest = how.removeprefix("hypothesis core").removeprefix(": ")
        how = f"{YICES_STEP}: {by_yices[0]} by Yices" + (f" of {rest}" if rest else "")
    return v, how


# -- step 3e: z3's own instances, decided by Yices -----------------------------------------

PROOF_MS = 240000
"""z3's time limit on a core when it records its proof (:func:`proof_terms`). Measured on
``touch`` at 3 entries (2026-12-07): the proof of a part's smallest core took 15 to 44 s
with one other job on the machine, and 60 s was too little under two ("after
``_undo_touch``" part 5, links [3/9]'s last subpart); z3 stops as soon as it is done, so
only a core it cannot prove pays the whole limit."""

YICES_MS = 60000
"""Yices' time limit on z3's instances of a core (:func:`proof_instance_core`)."""

YICES_STEP = "Yices on z3's instances"
"""How a row names a query one of whose parts step 3e confirmed (:data:`STEPS`)."""


def proof_terms(
    fs: list[z3.BoolRef], negated: list[z3.BoolRef], timeout_ms: int | None = None
) -> tuple[z3.ExprRef, ...] | str:
    """z3 on ``fs`` and ``negated``, recording its proof (in a context of its own): on
    unsat, the terms its proof instantiates a quantifier at (each ``quant-inst`` step's
    bindings) that are closed and hold no quantifier, in the order met, in the main
    context; else z3's answer. Any closed term is a sound place to instantiate a
    universal: the proof only says which ones z3 found it needed (after its own
    rewriting of the quantifiers, which is why the originals are instantiated at them,
    not the proof's instances taken). ``timeout_ms``: by default :data:`PROOF_MS`."""
    ctx = z3.Context(proof=True)
    s = z3.Solver(ctx=ctx)
    s.set("timeout", PROOF_MS if timeout_ms is None else timeout_ms)
    for f in [*fs, *negated]:
        s.add(f.translate(ctx))
    r = s.check()
    if r != z3.unsat:
        return str(r)
    out: dict[int, z3.ExprRef] = {}
    for e in nodes([s.proof()]):
        if z3.is_app_of(e, z3.Z3_OP_PR_QUANT_INST):
            for b in e.decl().params():  # (a binding; the parameters also hold sorts)
                if isinstance(b, z3.ExprRef) and z3.is_app(b) and _closed(b):
                    out.setdefault(b.get_id(), b)
    return tuple(b.translate(z3.main_ctx()) for b in out.values())


def needed_terms(
    within: list[z3.BoolRef], terms: tuple[z3.ExprRef, ...], negated: list[z3.BoolRef]
) -> tuple[z3.ExprRef, ...]:
    """``terms`` less each one z3 proves the instances without (:func:`split_at`, with
    ``negated``, quantifier-free: :func:`deletion_core`'s loop on terms); all of them
    when z3 does not prove the instances at all of them (in :data:`DELETION_MS`). A
    proof names terms for each of its branches, and Yices' time grows with the
    instances (on "raises ForeignBlock" at 3 entries: 165 instances at 33 terms, 28 s;
    230 at 46, unknown at 60 s). z3 only
    chooses here: the instances at what is left are checked and asked of Yices."""

    def formulas(ts: list[z3.ExprRef]) -> list[z3.BoolRef]:
        base, insts = split_at(within, tuple(ts))
        return [*base, *(i.formula for i in insts)]

    keep = _dropped(terms, formulas, negated, DELETION_MS)
    return terms if isinstance(keep, str) else tuple(keep)


def _closed(t: z3.ExprRef) -> bool:
    """Does ``t`` hold no bound variable and no quantifier (or lambda)?"""
    return not smtlib._has_loose_var(t, 0, {}) and yices.quantifier_free([t])


def proof_instance_core(
    hyp: list[z3.BoolRef],
    within: list[z3.BoolRef],
    neg: list[z3.BoolRef],
) -> str | None:
    """Step 3e on one negated part ``neg``: z3 proves it from ``within`` (3d's smallest
    core) recording its proof; each quantified conjunct of ``within`` is instantiated at
    each term the proof instantiates at (:func:`proof_terms`, :func:`candidates`) and
    checked against ``hyp``'s own conjuncts (:func:`core_checked`), the originals
    dropped: with the negated part, a subset of a weakening of the query, and without a
    quantifier, which Yices decides (:func:`yices.ask`; cvc5 1.4.2 leaves ``touch``'s
    unknown at 300 s), in :data:`YICES_MS`. Yices' unsat proves the part; None then,
    else why not."""
    terms = proof_terms(within, neg)
    if isinstance(terms, str):
        return f"z3 {terms} recording its proof"
    base, insts = split_at(within, needed_terms(within, terms, neg))
    sub = core_checked(hyp, base, insts)
    if sub is None:
        return REFUSED
    v = yices.ask([selects_expanded(f) for f in [*sub, *neg]], YICES_MS)
    if v != "unsat":
        return f"Yices {v} on z3's {len(insts)} instances"
    return None


# -- the steps ------------------------------------------------------------------------------


def _ask(query: list[z3.BoolRef], timeout_ms: int, again: int = 1) -> str:
    """cvc5's verdict on ``query`` (:func:`cvc5more.ask`, its first setting, ``again``)."""
    try:
        text = cvc5more.export(query)
    except z3.Z3Exception as exc:  # (a query z3 cannot print: not read)
        return f"refused ({str(exc)[:60]})"
    return cvc5more.ask(text, timeout_ms, ladder=False, again=again)[0]


def _direct(
    hyp: list[z3.BoolRef],
    goal: z3.BoolRef,
    timeout_ms: int,
    asks: list[int],
    qf: bool = True,
) -> tuple[str, str]:
    """Steps 1 (with ``qf``) to 3 on one query (or one case): the verdict and the step
    that gave it."""
    if qf and cvc5leaves.closed(hyp, goal):
        return "unsat", "quantifier-free part"
    mine = {h.get_id() for h in conjuncts(hyp)}
    seen: set[int] = set()
    for d in DEPTHS:
        sub = relevant(hyp, goal, d)
        if len(sub) >= len(mine) or len(sub) in seen:
            continue
        if any(h.get_id() not in mine for h in sub):  # (not a subset: proves nothing)
            continue
        seen.add(len(sub))
        asks[0] += 1
        if _ask([*sub, z3.Not(goal)], timeout_ms) == "unsat":
            return "unsat", "relevant hypotheses"
    asks[0] += 1
    return _ask([*hyp, z3.Not(goal)], timeout_ms), "whole"


def normalise(hyp: list[z3.BoolRef], goal: z3.BoolRef) -> tuple[list[z3.BoolRef], z3.BoolRef]:
    """The same query with the constants the hypothesis fixes substituted (their
    equations kept, as :func:`smtlib.split_queries`), simplified."""
    pairs = smtlib._fixed_constants(hyp)
    if pairs:
        hyp = [z3.substitute(h, *pairs) for h in hyp] + [x == c for x, c in pairs]
        goal = z3.substitute(goal, *pairs)
    return [simplify(h) for h in hyp], simplify(goal)


def confirm(
    hyp: list[z3.BoolRef],
    goal: z3.BoolRef,
    timeout_ms: int = TIMEOUT_MS,
    shape: bool = True,
    asks: list[int] | None = None,
    instances_step: bool = True,
    cores_step: bool = True,
    hyp_core_step: bool = True,
) -> tuple[str, str]:
    """cvc5's verdict on ``hyp and not goal`` (the module's steps) and the step that
    settled it: "quantifier-free part", "relevant hypotheses", "whole", "instances",
    "cores", "hypothesis core", :data:`YICES_STEP`, "shape: k cases", or why not (3b,
    3c and 3d with 3e are asked only with ``instances_step``, ``cores_step`` and
    ``hyp_core_step``; the shape, step 4, only with ``shape``)."""
    asks = [0] if asks is None else asks
    hyp, goal = normalise(hyp, goal)
    v, how = confirm_steps(hyp, goal, timeout_ms, asks, instances_step, cores_step, hyp_core_step)
    if v in ("unsat", "sat") or not shape:
        return v, how
    return shaped(hyp, goal, v, timeout_ms, asks)


def confirm_steps(
    hyp: list[z3.BoolRef],
    goal: z3.BoolRef,
    timeout_ms: int = TIMEOUT_MS,
    asks: list[int] | None = None,
    instances_step: bool = True,
    cores_step: bool = True,
    hyp_core_step: bool = True,
) -> tuple[str, str]:
    """Steps 1 to 3e of :func:`confirm` on a query already normalised (:func:`normalise`): what
    settled it, or steps 1 to 3's answer ("whole") when none did."""
    asks = [0] if asks is None else asks
    v, how = _direct(hyp, goal, timeout_ms, asks)
    if v in ("unsat", "sat"):
        return v, how
    if instances_step:
        asks[0] += 1
        iv, ihow = instantiated(hyp, goal)
        if iv == "unsat":
            return iv, ihow
    if cores_step:
        asks[0] += 1
        cv, chow = cores(hyp, goal)
        if cv == "unsat":
            return cv, chow
    if hyp_core_step:
        asks[0] += 1
        hv, hhow = hyp_cores(hyp, goal)
        if hv == "unsat":
            return hv, hhow
    return v, how


def shaped(
    hyp: list[z3.BoolRef], goal: z3.BoolRef, whole: str, timeout_ms: int, asks: list[int]
) -> tuple[str, str]:
    """Step 4 of :func:`confirm` on a normalised query :func:`confirm_steps` left open
    (its answer ``whole``): the cases of the list's shape, or of the goal's ite conditions
    when there is no list."""
    own, calls = shape_atoms([*hyp, goal])
    if not own:  # (no list: get_new_blocks' count) the goal's ite conditions
        got = cvc5cases.confirm_ite(hyp, goal, timeout_ms)
        if got is None:
            return whole, "whole"
        return got[0], "ite cases" + got[1].removeprefix("cases on ite conditions")
    how = "whole"
    for atoms in (own, own + calls) if calls else (own,):
        v, how = _shape(hyp, goal, atoms, asks)
        if v in ("unsat", "sat", "coverage gap") or how.startswith("shape: more than"):
            return (whole if v == "unknown" else v), how
    return whole, how


def _shape(
    hyp: list[z3.BoolRef], goal: z3.BoolRef, atoms: list[z3.BoolRef], asks: list[int]
) -> tuple[str, str]:
    """Step 4 on ``atoms``: the verdict and how it was reached ("unknown" when a case is)."""
    cs = shape_cases(hyp, goal, atoms)
    if cs is None:
        return "unknown", f"shape: more than {MAX_CASES} cases"
    if len(cs) <= 1:
        return "unknown", "whole"
    cov = cvc5more.covers([c.path for c in cs], timeout_ms=cvc5leaves.QF_MS)
    if cov != "unsat":
        return "coverage gap", f"shape: coverage {cov}"
    for c in cs:
        if c.closed:
            continue
        cv, _ = _direct(c.hyp, c.goal, CASE_MS, asks, qf=False)
        if cv != "unsat":
            return ("sat" if cv == "sat" else "unknown"), f"shape: a case {cv}"
    return "unsat", f"shape: {len(cs)} cases"


# -- the row --------------------------------------------------------------------------------

SHAPE_GIVE_UP = 3
"""After this many queries of one method in a row that the shape split (step 4) did not
confirm, the method's other queries are asked steps 1 to 3 only (the row names them so).
Each such split costs 20 to 90 s of wall time (2026-12-06, load average 3): ``touch``'s
first ten open queries all failed it; ``unpin_blocks``' and ``free_blocks``' successes
came between single failures."""

FAMILIES = ("hot-source", "pool-source")
"""The runner's parts whose proved queries this module asks (:data:`cvc5more.FAMILIES`)."""

STEPS = (
    "quantifier-free part",
    "relevant hypotheses",
    "whole",
    "instances",
    "cores",
    "hypothesis core",
    YICES_STEP,
    "shape",
    "ite cases",
)
"""The steps of :func:`confirm` a row counts queries by, in order."""


def method_of(name: str) -> str:
    """The method a recorded query's name is about ("pool unpin_blocks L=2 (...)": the
    second word; "pool contract: ...": "contract")."""
    words = name.split()
    if len(words) > 1 and words[0] == "pool":
        return "contract" if words[1] == "contract:" else words[1]
    return name


@dataclass
class Tally:
    """One method's queries: how many, settled by which step, and those not confirmed."""

    queries: int = 0
    by_step: dict[str, int] = field(default_factory=dict)
    open: list[str] = field(default_factory=list)
    disagree: list[str] = field(default_factory=list)
    shape_misses: int = 0  # (shape splits in a row that did not confirm)

    def line(self, method: str) -> str:
        ok = sum(self.by_step.values())
        steps = ", ".join(f"{self.by_step[s]} {s}" for s in STEPS if self.by_step.get(s))
        return f"{method} {ok} of {self.queries}" + (f" ({steps})" if steps else "")


def tally(
    records: list[Record],
    timeout_ms: int = TIMEOUT_MS,
    ask: Callable[..., tuple[str, str]] | None = None,
    jobs: int = 1,
) -> tuple[dict[str, Tally], int]:
    """cvc5 on each query z3 proved among ``records`` (not a mutant's), by method; and
    the asks made (``ask``: :func:`confirm`, or a stand-in of the same signature). With
    ``jobs`` > 1 (and :func:`confirm`), steps 1 to 3e of the queries are asked ``jobs``
    at a time in processes of their own (:func:`steps_apart`), then the shape of those
    left open here, in order, as :func:`confirm` would: the same steps and the same
    :data:`SHAPE_GIVE_UP` count as one by one."""
    proved = [
        (name, hyp, goal)
        for name, hyp, goal, status in records
        if status == "proved" and not name.startswith("mutant:")
    ]
    asks = [0]
    apart = (
        [None] * len(proved)
        if ask is not None
        else steps_apart([(h, g) for _, h, g in proved], timeout_ms, jobs, asks)
    )
    ask = confirm if ask is None else ask
    out: dict[str, Tally] = {}
    for (name, hyp, goal), first in zip(proved, apart, strict=True):
        t = out.setdefault(method_of(name), Tally())
        t.queries += 1
        shape = t.shape_misses < SHAPE_GIVE_UP
        if first is None:  # (one by one here, or its process failed: asked here)
            v, how = ask(hyp, goal, timeout_ms, shape=shape, asks=asks)
        else:
            v, how = first
            if v not in ("unsat", "sat") and shape:
                v, how = shaped(*normalise(hyp, goal), v, timeout_ms, asks)
        if shape and how.startswith("shape"):
            t.shape_misses = 0 if v == "unsat" else t.shape_misses + 1
        if not shape and v != "unsat":
            how += f"; the shape not asked: {SHAPE_GIVE_UP} failed in a row"
        if v == "unsat":
            step = how.split(":")[0]
            t.by_step[step] = t.by_step.get(step, 0) + 1
        elif v == "sat":
            t.disagree.append(f"{name} ({how})")
        else:
            t.open.append(f"{name} ({v}: {how})")
    return out, asks[0]


def steps_apart(
    queries: list[tuple[list[z3.BoolRef], z3.BoolRef]],
    timeout_ms: int,
    jobs: int,
    asks: list[int],
) -> list[tuple[str, str] | None]:
    """:func:`confirm_steps` on each query, ``jobs`` processes at a time (none when
    ``jobs`` <= 1: a list of None): each query normalised (:func:`normalise`), written as SMT-LIB 2
    (:func:`query_text`) and read back in a fresh interpreter (spawned: z3's state is not
    forked). Each answer in order, its asks added to ``asks``; None for a query that could
    not be written, read back or asked there (the caller asks it itself)."""
    if jobs <= 1 or not queries:
        return [None] * len(queries)
    texts = [query_text(*normalise(h, g)) for h, g in queries]
    out: list[tuple[str, str] | None] = [None] * len(queries)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = {
            pool.submit(_steps_of_text, text, timeout_ms): k
            for k, text in enumerate(texts)
            if text is not None
        }
        for fut, k in futures.items():
            try:
                v, how, n = fut.result()
            except Exception:  # (its process died or raised: asked by the caller instead)
                continue
            out[k] = (v, how)
            asks[0] += n
    return out


def query_text(hyp: list[z3.BoolRef], goal: z3.BoolRef) -> str | None:
    """``hyp`` then ``goal`` as SMT-LIB 2 assertions, headed by the count of ``hyp``
    (:func:`read_query` reads it back); None when z3 cannot write it out, or what it
    writes does not read back as the same number of formulas."""
    s = z3.Solver()
    s.add(*hyp, goal)
    try:
        text: str = f"; hypotheses {len(hyp)}\n" + s.sexpr()
        if len(z3.parse_smt2_string(text)) != len(hyp) + 1:
            return None
    except z3.Z3Exception:
        return None
    return text


def read_query(text: str) -> tuple[list[z3.BoolRef], z3.BoolRef]:
    """The query :func:`query_text` wrote: its hypotheses and its goal."""
    n = int(text.split("\n", 1)[0].split()[-1])
    fs = list(z3.parse_smt2_string(text))
    return fs[:n], fs[n]


def _steps_of_text(text: str, timeout_ms: int) -> tuple[str, str, int]:
    """(In a process of :func:`steps_apart`.) :func:`confirm_steps` on the query in
    ``text``: its verdict, how, and the asks made."""
    asks = [0]
    v, how = confirm_steps(*read_query(text), timeout_ms, asks)
    return v, how, asks[0]


def row(
    part: str, records: list[Record], timeout_ms: int = TIMEOUT_MS, jobs: int = 1
) -> dict[str, Any]:
    """cvc5 on every query z3 proved among ``records`` (the ``part``'s), as a
    ``runner.ObligationResult(**row)`` of kind "second solver", named as
    :func:`cvc5more.row`'s (so :func:`cvc5more.solvers_note` counts it for the part): its
    bounds give per method the queries and how many each step confirmed; "agree" when
    cvc5 confirms every one, "partly-confirmed" when it disagrees with none but leaves
    some not confirmed (named in the replay), "disagree" on any sat (or an unsat on the
    probe z3 finds sat, :func:`cvc5more.probe`), "not-run" when z3 proved nothing here.
    ``jobs``: the queries asked at a time (:func:`tally`)."""
    t0 = time.perf_counter()
    by_method, asks = tally(records, timeout_ms, jobs=jobs)
    n = sum(t.queries for t in by_method.values())
    ok = sum(sum(t.by_step.values()) for t in by_method.values())
    open_ = [x for t in by_method.values() for x in t.open]
    disagree = [x for t in by_method.values() for x in t.disagree]
    zp, cp = cvc5more.probe(cvc5more.groups(records), timeout_ms) if n else ("none", "none")
    status, replay = cvc5more.verdict(bool(n), disagree, open_, zp, cp)
    lines = "; ".join(t.line(m) for m, t in by_method.items())
    return dict(
        obligation=f"cvc5 re-checks {cvc5more.FAMILIES.get(part, part)}",
        kind="second solver",
        technique="cvc5 (SMT-LIB 2 from z3; quantifier-free part, relevant hypotheses, "
        "whole, instances, z3's unsat core of instances, z3's unsat core of the hypothesis' "
        "conjuncts, Yices 2 on the instances z3's proof of that core uses, the list's shape)",
        invariants=(),
        bounds=f"{part}: cvc5 confirms {ok} of {n} queries z3 proved ({lines}; {asks} asks, "
        f"{timeout_ms // 1000} s each"
        + (f", {jobs} queries at a time" if jobs > 1 else "")
        + f"); probe {zp}/{cp}"
        + (f"; NOT confirmed: {len(open_)}" if open_ else ""),
        status=status,
        seconds=time.perf_counter() - t0,
        replay=replay,
    )


def rows(
    part: str, records: list[Record], on: tuple[str, ...], jobs: int = 1
) -> list[dict[str, Any]]:
    """:func:`row` of ``part`` (``jobs`` queries at a time) when the profile's
    ``cvc5_more`` names it (``on``), else none."""
    return [row(part, records, jobs=jobs)] if part in on else []
