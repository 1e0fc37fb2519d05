"""A formula the proofs build depends on what it was made from, not on what the process
made before it (proofs/rewrite.py; docs/06-z3.md, "One obligation, one answer")."""

from __future__ import annotations

import z3  # type: ignore[import-untyped]
from fresh import in_a_fresh_interpreter

from kvpool.proofs.rewrite import simplify


def _disjunction(ctx: z3.Context, made_first: str) -> z3.BoolRef:
    """``(p or q) and (r or p)`` in ``ctx``, its atoms made (so numbered) in the order
    ``made_first``."""
    atoms = {n: z3.Bool(n, ctx) for n in made_first}
    p, q, r = atoms["p"], atoms["q"], atoms["r"]
    return z3.And(z3.Or(p, q), z3.Or(r, p))


def test_a_disjunction_keeps_its_written_order() -> None:
    a, b = _disjunction(z3.Context(), "pqr"), _disjunction(z3.Context(), "rqp")
    assert simplify(a).sexpr() == simplify(b).sexpr() == "(and (or p q) (or r p))"
    # The seeded bug: z3's default orders the disjuncts by term number, so the same
    # formula made in another order comes out otherwise.
    assert z3.simplify(a).sexpr() != z3.simplify(b).sexpr()


# One obligation translated from impl/pool.py's source, in a fresh interpreter, alone or
# after another method's translation; its text as model.isolate hands it to z3. argv[1]:
# "after" translates free_blocks first; argv[2]: "sort" seeds the bug (z3's default,
# disjunctions ordered by term number, under every call of rewrite.simplify).
_OBLIGATION = """
import hashlib, sys
import z3
if sys.argv[2] == "sort":
    default = z3.simplify
    z3.simplify = lambda e, **k: default(e, **{**k, "sort_disjunctions": True})
from kvpool.proofs import model, pyhot
if sys.argv[1] == "after":
    pyhot.obligations(None, "free_blocks", 2, False)
for step, hyps, goal in pyhot.obligations(None, "unpin_blocks", 2, False):
    if step == "post: valid: the queue is the spec's sequence [6/9]":
        iso = model.isolate([*hyps, z3.Not(goal)])
        text = "\\n".join(e.sexpr() for e in iso.exprs)
        print(hashlib.sha1(text.encode()).hexdigest())
"""


def _translated(history: str, simplify_as: str) -> str:
    lines = in_a_fresh_interpreter(_OBLIGATION, history, simplify_as, timeout=300).split()
    assert len(lines) == 1, lines  # the step exists, once
    return lines[0]


def test_an_obligation_from_source_is_the_same_after_other_translations() -> None:
    assert _translated("alone", "rewrite") == _translated("after", "rewrite")
    # The seeded bug: with z3's default ordering, translating free_blocks first changes
    # unpin_blocks' formula (in make proofs-deep it was then unknown at 240 s, against
    # 5 s alone).
    assert _translated("alone", "sort") != _translated("after", "sort")
