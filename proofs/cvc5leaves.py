"""cvc5 on a quantified query it leaves unknown, case by case on the goal's own branches.

The source refinement's posts (:mod:`.pyrefine`) state what a method's translated body
does; where the source branches (``if b.prev_free_block is None: raise ...``, a loop
unrolled with a ``try``), the goal holds ``ite(c, ...)`` terms, and inside the
quantified list relation cvc5 1.4.2 gives up on them as a whole (``_remove``,
``remove``, ``_append_n``, ``append_n``, ``prepend_n``: unknown at 20 s, under every
setting of :data:`smtlib.CASE_OPTIONS`). Once each branch condition is decided, the
query falls apart into small ones cvc5 settles in tenths of a second.

:func:`confirm` asks the query ``hyp and not goal`` this way:

1. **Cases.** The *base atoms* of the goal (:func:`base_atoms`: the atomic formulas of
   its closed ``ite`` conditions that hold no ``ite`` themselves) are split on one at a
   time: a case ``P`` becomes ``P and a`` and ``P and not a``, each with
   :func:`smtlib.assume` (``a`` replaced by true, or false, in the hypothesis and the
   goal, and kept among the hypotheses: the same query restricted to the case). Each
   split covers every model of ``P``, so the cases, down to where no base atom is left,
   cover every model: the query is unsat iff each case is.
2. **Closed cases.** A case whose quantifier-free hypotheses alone cvc5 finds unsat
   (the case contradicts them: ``m <= 0`` beside ``1 <= m``) is unsat: a query with more
   hypotheses has fewer models. It is not split further.
3. **Coverage, checked.** That the cases cover every model is not taken on trust:
   cvc5 must find ``not (P_1 or ... or P_k)`` unsat over all cases, closed ones
   included (:func:`covers`). A split that lost a case fails it: the query is then
   "coverage gap", never confirmed.
4. **Leaves.** Every other case is asked whole (:data:`LEAF_MS`); one cvc5 leaves
   unknown is split into its goal's parts (:func:`smtlib.split_queries`: each part
   follows from the goal, so a model of a part's query is a model of the case's), each
   under :data:`PART_OPTIONS` until one settles it.

Every text cvc5 reads is :func:`cvc5more.export`'s (z3's SMT-LIB 2 with the rewrites
cvc5 needs: lambdas lifted, multi-index arrays as functions, negative constant-array
defaults as literals; each an equisatisfiable query).

"unsat" only when coverage is unsat and every leaf (or every part of it) is unsat. A
``sat`` anywhere is a model of the original query, so a disagreement with z3; anything
else (unknown, refused, more than ``max_leaves`` cases) is "unknown": not confirmed.
"""

from __future__ import annotations

from dataclasses import dataclass

import z3  # type: ignore[import-untyped]

from . import cvc5cases, cvc5more, smtlib
from .rewrite import simplify

LEAF_MS = 2000
"""cvc5's time limit on a leaf, and on each part of a leaf split into its goal's parts."""

QF_MS = 2000
"""cvc5's time limit on a case's quantifier-free hypotheses (:func:`closed`) and on the
coverage query: both quantifier-free, asked in this process."""

MAX_LEAVES = 160
"""At most this many cases (leaves and closed cases): past it the query is not confirmed.
Measured 2026-12-06: ``append_n``'s post has 70 leaves, ``_remove``'s 7, the every-N
induction's ``S and T => PERM / FreeBlocks`` 131 cases."""

TWO_POOL_LEAVES = 3 * MAX_LEAVES
"""The cap on cases for the two-pool part's cvc5 rows (the runner passes
``confirm`` with it): the every-N step's PERM for FreeBlocks, quantified and unknown
under every setting whole, splits on both pools' entries. Measured 2026-12-06 (load
average 3 to 4), coverage unsat each time: called on pool 0, for pool 0 unsat in 201
cases (138 leaves, 63 closed), 69.4 CPU s (126 s of wall time), for pool 1 in 177, 54.6
CPU s; called on pool 1, for pool 0 in 171, 53.3 CPU s, for pool 1 in 335 (219 leaves),
118.4 CPU s (154 s)."""

PART_OPTIONS: tuple[dict[str, str], ...] = ({}, {"full-saturate-quant": "true"})
"""cvc5's settings tried in turn on each part of a leaf it left unknown whole."""

_CONNECTIVES = (
    z3.Z3_OP_AND,
    z3.Z3_OP_OR,
    z3.Z3_OP_NOT,
    z3.Z3_OP_IMPLIES,
    z3.Z3_OP_XOR,
    z3.Z3_OP_ITE,
)


def _has_ite(e: z3.ExprRef, memo: dict[int, bool]) -> bool:
    if e.get_id() not in memo:
        memo[e.get_id()] = z3.is_app_of(e, z3.Z3_OP_ITE) or any(
            _has_ite(c, memo) for c in e.children()
        )
    return memo[e.get_id()]


def base_atoms(goal: z3.BoolRef) -> list[z3.BoolRef]:
    """The atomic formulas of ``goal``'s closed ``ite`` conditions (those of its
    non-Boolean ``ite`` terms that use no bound variable, :func:`cvc5cases.ite_atoms`)
    that hold no ``ite`` themselves, in the order met: Boolean connectives (and ``=``
    between formulas) are looked through, ``true``/``false`` dropped."""
    found: dict[int, z3.BoolRef] = {}
    memo: dict[int, bool] = {}
    seen: set[int] = set()
    for cond in cvc5cases.ite_atoms(goal, limit=1 << 30):
        todo = [cond]
        while todo:
            e = todo.pop()
            if e.get_id() in seen:
                continue
            seen.add(e.get_id())
            connective = z3.is_app(e) and e.decl().kind() in _CONNECTIVES
            if (connective or (z3.is_eq(e) and z3.is_bool(e.arg(0)))) and z3.is_bool(e):
                todo.extend(reversed(e.children()))
            elif not (z3.is_true(e) or z3.is_false(e)) and not _has_ite(e, memo):
                found.setdefault(e.get_id(), e)
    return list(found.values())


@dataclass
class Case:
    """One case of the split: its path (the facts assumed, in order), the query
    restricted to it, and whether cvc5 closed it on its quantifier-free hypotheses."""

    path: tuple[z3.BoolRef, ...]
    hyp: list[z3.BoolRef]
    goal: z3.BoolRef
    closed: bool


def _quantifier_free(e: z3.ExprRef, memo: dict[int, bool]) -> bool:
    if e.get_id() not in memo:
        memo[e.get_id()] = not z3.is_quantifier(e) and all(
            _quantifier_free(c, memo) for c in e.children()
        )
    return memo[e.get_id()]


def closed(hyp: list[z3.BoolRef], goal: z3.BoolRef) -> bool:
    """Does cvc5 find the quantifier-free hypotheses (and the negated goal, if it is
    quantifier-free) unsat? Then so is ``hyp and not goal``, which has more of them."""
    memo: dict[int, bool] = {}
    qf = [h for h in hyp if _quantifier_free(h, memo)]
    if _quantifier_free(goal, memo):
        qf.append(z3.Not(goal))
    if not qf:
        return False
    try:
        return smtlib.cvc5_check(cvc5more.export(qf), QF_MS)[0] == "unsat"
    except (ValueError, RuntimeError):  # (text cvc5 does not read: not closed)
        return False


def cases(
    hyp: list[z3.BoolRef], goal: z3.BoolRef, max_cases: int = MAX_LEAVES
) -> list[Case] | None:
    """The cases of the module's step 1 and 2, depth first (None: more than
    ``max_cases``). The root is a case too: a query whose quantifier-free part alone
    cvc5 finds unsat is one closed case (measured 2026-12-06: nine of ``unpin_blocks``'
    refused-call posts from source, unknown whole at 5 s, are closed in their first two
    cases)."""
    out: list[Case] = []

    def walk(h: list[z3.BoolRef], g: z3.BoolRef, path: tuple[z3.BoolRef, ...]) -> bool:
        if len(out) >= max_cases:
            return False
        if closed(h, g):
            out.append(Case(path, h, g, True))
            return True
        atoms = base_atoms(g)
        if not atoms:
            out.append(Case(path, h, g, False))
            return True
        for fact in (atoms[0], z3.Not(atoms[0])):
            h2, g2 = smtlib.assume(h, g, fact)
            if not walk(h2, g2, (*path, fact)):
                return False
        return True

    return out if walk(hyp, goal, ()) else None


def ask_leaf(hyp: list[z3.BoolRef], goal: z3.BoolRef, timeout_ms: int = LEAF_MS) -> str:
    """One leaf (the module's step 4): whole, then its goal's parts."""
    v, _ = smtlib.cvc5_check_bounded(cvc5more.export([*hyp, z3.Not(goal)]), timeout_ms)
    if v in ("unsat", "sat"):
        return v
    parts = smtlib.split_queries(hyp, goal)
    if len(parts) <= 1:
        return v
    return smtlib.parts_unsat(parts, timeout_ms, PART_OPTIONS, cvc5more.export)


def confirm(
    hyp: list[z3.BoolRef],
    goal: z3.BoolRef,
    timeout_ms: int = LEAF_MS,
    max_leaves: int = MAX_LEAVES,
) -> tuple[str, str] | None:
    """cvc5's verdict on ``hyp and not goal`` asked as the module's doc says, and how
    (None: the goal has no closed ``ite`` condition to split on). Each constant the
    hypothesis fixes (``x == c``: the call's kind) is substituted everywhere first, the
    equation kept (an equivalent query, as in :func:`smtlib.split_queries`), and the
    hypothesis and the goal simplified, so that an atom is written the same way in both.
    Measured 2026-12-06: the every-N induction's ``S and T => PERM / FreeBlocks``, 131
    cases, 35 CPU s (``cvc5cases``' named atoms: 105 cases, 67-94 s)."""
    pairs = smtlib._fixed_constants(hyp)  # (as smtlib.split_queries: the same query)
    if pairs:
        hyp = [z3.substitute(h, *pairs) for h in hyp] + [x == c for x, c in pairs]
        goal = z3.substitute(goal, *pairs)
    hs, g = [simplify(h) for h in hyp], simplify(goal)
    if not base_atoms(g):
        return None
    cs = cases(hs, g, max_leaves)
    if cs is None:
        return "unknown", f"leaves: more than {max_leaves} cases"
    cov = cvc5more.covers([c.path for c in cs], timeout_ms=QF_MS)
    if cov != "unsat":
        return "coverage gap", f"leaves: coverage {cov}"
    leaves = [c for c in cs if not c.closed]
    for c in leaves:
        v = ask_leaf(c.hyp, c.goal, timeout_ms)
        if v != "unsat":
            return v, f"leaves: a leaf {v}"
    return "unsat", f"leaves: {len(leaves)} (+{len(cs) - len(leaves)} closed)"
