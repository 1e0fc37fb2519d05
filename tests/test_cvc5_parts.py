"""cvc5 on a query part by part, a part case by case on named atoms (proofs/cvc5more.py:
``PART_CASES``, ``case_walk``, ``covers``): the symbolic lists' loop == model.py for
FreeBlocks.

Each way it can fail is shown: a split that lost a case is caught by the coverage check
(never confirmed), and a query with a model is "sat" in one of its cases (a
disagreement, and the row fails). The toy queries take well under 1 s; the real
agreement query with a seeded loop bug (never confirmed) runs with KVPOOL_DEEP=1 (make
test-deep).
"""

from __future__ import annotations

from typing import Any

import pytest
import z3  # type: ignore[import-untyped]

from kvpool.proofs import cvc5more, runner
from kvpool.proofs.model import Record


def _force_unknown(monkeypatch: pytest.MonkeyPatch, first: int) -> None:
    """cvc5's first ``first`` asks say "unknown" (as it does whole on the real query,
    which the toy it settles at once): the asks after them are cvc5's own."""
    real = cvc5more.ask
    left = [first]

    def ask(
        text: str, timeout_ms: int = cvc5more.TIMEOUT_MS, ladder: bool = True, again: int = 1
    ) -> Any:
        if left[0] > 0:
            left[0] -= 1
            return "unknown", "forced"
        return real(text, timeout_ms, ladder, again)

    monkeypatch.setattr(cvc5more, "ask", ask)


def _toy(third: int = 2) -> tuple[list[z3.BoolRef], z3.BoolRef, list[z3.BoolRef]]:
    """Two parts: ``y >= 0`` and ``z == x + x`` where z is ``x + 1`` or ``2 * x`` as the
    flag c says, and x is 1 when c holds (``third`` is the factor: 2 is valid)."""
    x, y, z = z3.Ints("x y z")
    c = z3.Bool("c")
    hyp = [y >= 0, z == z3.If(c, x + 1, third * x), z3.Implies(c, x == 1)]
    return hyp, z3.And(y >= 0, z == x + x), [c]


def test_a_part_unknown_whole_is_confirmed_by_its_cases_which_cover_every_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hyp, goal, atoms = _toy()
    _force_unknown(monkeypatch, 1)  # (the walk's first ask: the part whole)
    v, paths = cvc5more.case_walk(hyp, goal, atoms, 2000)
    assert v == "unsat" and [len(p) for p in paths] == [1, 1]
    assert cvc5more.covers(paths) == "unsat"
    g = cvc5more.Group("toy", hyp, [goal])
    _force_unknown(monkeypatch, 2)  # (the first part whole, then its walk's root)
    assert cvc5more._part_cases(g, goal, atoms, 2000) == "unsat"
    assert g.how == "part by part: 2, 1 of them case by case (2 cases)"


def test_a_walk_that_lost_a_case_is_caught_by_the_coverage_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seeded bug: the walk reports its settled cases less the last (``not c``).
    Every case left is unsat, so without the coverage check the query would count as
    confirmed; the row names it "coverage gap" instead."""
    hyp, goal, atoms = _toy()
    real = cvc5more.case_walk

    def lossy(*a: Any, **k: Any) -> tuple[str, list[cvc5more.Path]]:
        v, paths = real(*a, **k)
        return v, paths[:-1]

    monkeypatch.setattr(cvc5more, "case_walk", lossy)
    _force_unknown(monkeypatch, 2)  # (part 1 whole, then the walk's root)
    g = cvc5more.Group("toy", hyp, [goal])
    assert cvc5more._part_cases(g, z3.And(goal.arg(1)), atoms, 2000) == "coverage gap"
    assert cvc5more.covers([(atoms[0],)]) == "sat"


def test_a_wrong_goal_is_sat_in_its_case_and_the_row_disagrees(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seeded bug: z is ``3 * x`` when c is false, so ``z == x + x`` fails there;
    recorded as proved, the query is sat in the case ``not c``: a disagreement."""
    hyp, goal, atoms = _toy(third=3)
    _force_unknown(monkeypatch, 1)
    assert cvc5more.case_walk(hyp, goal, atoms, 2000)[0] == "sat"
    name = "toy parts"
    monkeypatch.setitem(cvc5more.PART_CASES, name, lambda c: [c("c")])
    _force_unknown(monkeypatch, 3)  # (the query whole, its one-part split, the part)
    rec: list[Record] = [(name, hyp, goal.arg(1), "proved")]
    row = runner.ObligationResult(**cvc5more.row("toy", rec, cases=True, with_probe=False))
    assert row.status == "disagree" and not row.ok, row


def test_freeblocks_agreement_is_asked_part_by_part_and_the_others_whole() -> None:
    name = "symlists: loop == model.py / {} / lists <= 3"
    assert set(cvc5more.PART_CASES) == {name.format("FreeBlocks")}
    assert name.format("FreeBlocks") not in cvc5more.CASES
    assert name.format("UnpinBlocks") in cvc5more.CASES


@pytest.mark.deep
def test_a_loop_bug_in_the_real_freeblocks_agreement_is_never_confirmed() -> None:
    """The seeded bug, on the real query: the loop puts each block released to the front
    at position 0 (``front-reversed``: two such blocks end up in reverse order), and
    model.py does not. The queue's part (the one the bug changes), asked case by case as
    the real one is confirmed, is not unsat in some case: not confirmed. (A model is not found:
    with N symbolic and S quantified, cvc5 leaves the query unknown whole under each of
    LADDER's settings, and z3 too at 60 s; the toy above shows the walk's "sat".)"""
    from kvpool.proofs import smtlib, symlists
    from kvpool.proofs.model import constants, recording

    with recording() as rec:  # (the query is all this needs: z3's answer is not used)
        symlists.agreement_goals(("FreeBlocks",), 3, 1000, frozenset(["front-reversed"]))
    ((name, hyp, goal, _),) = rec
    consts = constants([*hyp, goal])
    atoms = [z3.simplify(a) for a in cvc5more.PART_CASES[name](lambda x: consts[x])]
    *rest, queue = smtlib.split_queries(hyp, goal)
    assert "qi" in str(queue[-1]) and len(rest) == 13  # (the queue's part is the last)
    v, _ = cvc5more.case_walk(queue[:-1], queue[-1].arg(0), atoms, 5000)
    assert v != "unsat"
