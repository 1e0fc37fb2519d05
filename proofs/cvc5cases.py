"""cvc5 on the quantified queries its whole and split asks leave open: a case split.

Some proved queries of the every-N induction and the every-N step rules stay unknown to
cvc5 whole and split into the goal's parts (:func:`smtlib.cvc5_confirm`). Each of them is
asked again here case by case (:func:`smtlib.cvc5_confirm_cases`): on the atoms
:data:`CASES` names for its obligation, written over the query's own constants -- the
call's list length, whether its two entries are the same block, whether each entry's
``ref_cnt`` is 1 (the call releases it), where a released block goes (caching, the
eviction flag, whether it has a key). The cases of a split on any atom cover every
model, so the query is unsat iff every case is: the choice of atoms decides what cvc5
can settle, never what a confirmation means. A case cvc5 leaves unknown whole is split
on the next atom; where none is left, each of the goal's parts is asked with each of
:data:`smtlib.CASE_OPTIONS`.
"""

from __future__ import annotations

from collections.abc import Callable

import z3  # type: ignore[import-untyped]

from . import smtlib
from .model import constants, subterms
from .rewrite import simplify

Atoms = Callable[[Callable[[str], z3.ExprRef]], list[z3.BoolRef]]


def _entries(c: Callable[[str], z3.ExprRef]) -> list[z3.BoolRef]:
    """A call on a list of at most 2 entries: its length, whether the entries are one
    block, whether each is released, and where a released block goes."""
    m, e0, e1, ref, key = c("a.m"), c("a.e0"), c("a.e1"), c("s.ref"), c("s.key")
    return [
        m == 0,
        m == 1,
        e0 == e1,
        ref[e0] == 1,
        ref[e1] == 1,
        c("caching") == z3.BoolVal(True),
        c("a.ef") == z3.BoolVal(True),
        key[e0] == 0,
        key[e1] == 0,
    ]


CASES: dict[str, Atoms] = {
    "S and T => PERM / FreeBlocks": _entries,
    "every-N rule: ORD-RELEASE / FreeBlocks": _entries,
    "every-N rule: ORD-UNPIN / UnpinBlocks": _entries,
}
"""Obligation name (as ``model.named`` records it) -> the atoms its queries are split on.

Not here: the source refinement's posts of ``append_n``, ``prepend_n`` and ``_append_n``.
Split on the group's length alone (``m == 0``, ``m == 1``, ``m == 2``), ``append_n``'s
stayed unknown in its third case; on its length and its entries (``bl[i] >= 0``,
``pos[bl[i]] == -1``, ``bl[i] == bl[j]``: twelve atoms) it was still unsettled after
1,500 s of wall time on a loaded machine (2026-12-05, load average 11 to 15)."""


def atoms(name: str, query: list[z3.BoolRef]) -> list[z3.BoolRef] | None:
    """The atoms :data:`CASES` names for ``name``, over ``query``'s constants (None: no
    case split for it, or a constant it names is not in the query)."""
    if name not in CASES:
        return None
    consts = constants(query)

    def c(x: str) -> z3.ExprRef:
        if x not in consts:
            raise KeyError(x)
        return consts[x]

    try:
        return [simplify(a) for a in CASES[name](c)]
    except KeyError:
        return None


def confirm(
    name: str, hyp: list[z3.BoolRef], goal: z3.BoolRef, timeout_ms: int = 5000
) -> tuple[str, str] | None:
    """cvc5's verdict on ``hyp and not goal`` by :func:`smtlib.cvc5_confirm_cases` on the
    atoms of ``name`` (None: it has none), and how it was reached."""
    xs = atoms(name, [*hyp, goal])
    if xs is None:
        return None
    v, leaves = smtlib.cvc5_confirm_cases(hyp, goal, xs, timeout_ms)
    return v, f"cases: {leaves}"


# -- a case split on the goal's own ite conditions (no atoms named) ------------------------

ITE_ATOMS = 4
"""At most this many ``ite`` conditions to split a query on (:func:`ite_atoms`): 16 cases."""


def ite_atoms(goal: z3.BoolRef, limit: int = ITE_ATOMS) -> list[z3.BoolRef]:
    """The conditions of ``goal``'s non-Boolean ``ite`` terms that use no bound variable,
    in the order met, at most ``limit``: where the source's branches join (``x = a if c
    else b``), the goal has ``select(ite(c, A, B), i)`` under a quantifier, which cvc5
    1.4.2 left unknown (``get_new_blocks``' post at L = 3) and settles once c is fixed."""
    found: dict[int, z3.BoolRef] = {}
    loose: dict[tuple[int, int], bool] = {}
    for e in subterms([goal], left_first=True):
        if len(found) >= limit:
            break
        if z3.is_app_of(e, z3.Z3_OP_ITE) and not z3.is_bool(e):
            c = e.arg(0)
            if not smtlib._has_loose_var(c, 0, loose):
                found.setdefault(c.get_id(), c)
    return list(found.values())


def confirm_ite(
    hyp: list[z3.BoolRef], goal: z3.BoolRef, timeout_ms: int = 5000
) -> tuple[str, str] | None:
    """cvc5's verdict on ``hyp and not goal`` case by case on the goal's ``ite``
    conditions (:func:`ite_atoms`; the hypothesis and the goal simplified first, so
    that a condition is written the same way in both), and how it was reached (None:
    the goal has no such condition). Measured 2026-12-06: the source refinement's
    ``_append_n`` post, unknown whole and split, is unsat in 5 cases."""
    hs, g = [simplify(h) for h in hyp], simplify(goal)
    xs = ite_atoms(g)
    if not xs:
        return None
    v, leaves = smtlib.cvc5_confirm_cases(hs, g, xs, timeout_ms)
    return v, f"cases on ite conditions: {leaves}"
