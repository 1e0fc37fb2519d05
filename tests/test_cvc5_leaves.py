"""cvc5 case by case on a goal's branch conditions, down to leaves (proofs/cvc5leaves.py).

Each way it can fail is shown: a query with a model is "sat" (a disagreement, and the
row fails), a split that lost a case is caught by the coverage check, and more cases
than allowed is not confirmed. The toy queries take well under 1 s; the source
refinement's real posts take seconds each and run with KVPOOL_DEEP=1 (make test-deep).
"""

from __future__ import annotations

import pytest
import z3  # type: ignore[import-untyped]

from kvpool.proofs import cvc5leaves, cvc5more, pyrefine, runner, smtlib
from kvpool.proofs.model import Record, recording


def _unknown_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """cvc5 leaves the query unknown whole and split, as it does the real posts (the toy
    it settles at once): the row then asks it to leaves."""
    monkeypatch.setattr(smtlib, "cvc5_confirm", lambda *a, **k: ("unknown", "whole"))


def _branchy() -> tuple[list[z3.BoolRef], z3.BoolRef, z3.BoolRef, z3.BoolRef]:
    """A goal over ``select(ite(c and d, A, B), i)`` under a quantifier, as the source's
    joined branches leave it: proved from ``c``, and every element of A non-negative."""
    a, b = (z3.Array(n, z3.IntSort(), z3.IntSort()) for n in "AB")
    c, d = z3.Bools("c d")
    i = z3.Int("i")
    hyp = [c, z3.ForAll([i], z3.And(a[i] >= 0, b[i] >= 0))]
    goal = z3.ForAll([i], z3.If(z3.And(c, d), a, b)[i] >= 0)
    return hyp, goal, c, d


def test_base_atoms_look_through_connectives_and_skip_bound_conditions() -> None:
    _, goal, c, d = _branchy()
    got = cvc5leaves.base_atoms(goal)
    assert [str(x) for x in got] == [str(c), str(d)]
    i = z3.Int("i")
    assert cvc5leaves.base_atoms(z3.ForAll([i], z3.If(i > 0, i, -i) >= 0)) == []


def test_a_query_is_confirmed_case_by_case_and_its_cases_cover_every_model() -> None:
    hyp, goal, _, _ = _branchy()
    got = cvc5leaves.confirm(hyp, goal)
    assert got is not None and got[0] == "unsat", got
    cs = cvc5leaves.cases(hyp, goal)
    assert cs is not None
    # (c false contradicts the hypothesis c: a case closed on the quantifier-free part)
    assert [c_.closed for c_ in cs] == [False, False, True]
    assert cvc5more.covers([c_.path for c_ in cs]) == "unsat"


def test_a_split_that_drops_a_case_is_caught_by_the_coverage_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seeded bug: the split loses its last case. Every case left is unsat, so
    without the coverage check the query would count as confirmed."""
    hyp, goal, _, _ = _branchy()
    real = cvc5leaves.cases

    def lossy(h: list[z3.BoolRef], g: z3.BoolRef, n: int = 128) -> list[cvc5leaves.Case] | None:
        cs = real(h, g, n)
        return None if cs is None else cs[:-1]

    monkeypatch.setattr(cvc5leaves, "cases", lossy)
    _unknown_whole(monkeypatch)
    got = cvc5leaves.confirm(hyp, goal)
    assert got is not None and got[0] == "coverage gap", got
    rec: list[Record] = [("toy branches", hyp, goal, "proved")]
    row = runner.cvc5_recorded_row("toy", rec, 2000, split=False, leaves=128)
    assert row.status == "partly-confirmed" and "toy branches (coverage gap)" in row.replay


def test_a_query_with_a_model_is_sat_and_the_row_fails_as_a_disagreement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seeded bug: the hypothesis lost what it says of A and B; the case ``c and d``
    has a model (A negative somewhere), which is a model of the query."""
    hyp, goal, _, _ = _branchy()
    _unknown_whole(monkeypatch)
    got = cvc5leaves.confirm(hyp[:1], goal)
    assert got is not None and got[0] == "sat", got
    rec: list[Record] = [("toy branches", hyp[:1], goal, "proved")]
    row = runner.cvc5_recorded_row("toy", rec, 2000, split=False, leaves=128)
    assert row.status == "disagree" and not row.ok
    assert "cvc5 says sat (disagrees) on: toy branches" in row.replay


def test_more_cases_than_allowed_is_not_confirmed_and_names_where_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hyp, goal, _, _ = _branchy()
    assert cvc5leaves.confirm(hyp, goal, max_leaves=2) == (
        "unknown",
        "leaves: more than 2 cases",
    )
    x = z3.Int("x")
    assert cvc5leaves.confirm([x > 0], x >= 1) is None  # (no branch: no case split)
    _unknown_whole(monkeypatch)
    rec: list[Record] = [("toy branches", hyp, goal, "proved")]
    row = runner.cvc5_recorded_row("toy", rec, 500, split=False, leaves=2, deep_leaves=True)
    assert row.status == "partly-confirmed" and "make proofs-deep confirms them" in row.bounds
    # (make verify asks none to leaves: its source row says where they are confirmed)
    row = runner.cvc5_recorded_row("toy", rec, 500, split=False, deep_leaves=True)
    assert row.status == "partly-confirmed" and "make proofs-deep confirms them" in row.bounds
    row = runner.cvc5_recorded_row("toy", rec, 500, split=False)
    assert "make proofs-deep" not in row.bounds
    row = runner.cvc5_recorded_row("toy", rec, 500, split=False, leaves=128)
    assert row.status == "agree" and "1 case by case to leaves" in row.bounds


def test_a_row_without_cases_names_where_the_named_obligations_are_confirmed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """make verify asks the every-N induction without cases: the obligation
    :data:`cvc5cases.CASES` names, left open there, is named as confirmed in deep."""
    hyp, goal, _, _ = _branchy()
    _unknown_whole(monkeypatch)
    name = "S and T => PERM / FreeBlocks"
    row = runner.cvc5_recorded_row("toy", [(name, hyp, goal, "proved")], 500)
    assert row.status == "partly-confirmed"
    assert f"make proofs-deep confirms {name} case by case" in row.bounds
    other = runner.cvc5_recorded_row("toy", [("not named", hyp, goal, "proved")], 500)
    assert "make proofs-deep" not in other.bounds


def test_make_verify_and_make_proofs_deep_ask_to_leaves_and_make_test_does_not() -> None:
    """The decision the docs state: make verify and make proofs-deep ask up to the full
    case budget (make verify's source row then confirms all 26), the fast profile none."""
    assert runner.PROFILES["deep"]["cvc5_leaves"] == cvc5leaves.MAX_LEAVES
    assert runner.PROFILES["default"]["cvc5_leaves"] == cvc5leaves.MAX_LEAVES
    assert runner.PROFILES["fast"]["cvc5_leaves"] == 0


# -- the source refinement's real posts (seconds each) ------------------------------------


def _posts(*methods: str) -> list[Record]:
    with recording() as rec:
        pyrefine.prove(pyrefine.real_source(), methods=methods, timeout_ms=30000)
    return [r for r in rec if r[0].endswith("(post)")]


@pytest.mark.deep
def test_the_source_posts_cvc5_left_unknown_are_confirmed_to_leaves() -> None:
    posts = _posts("_remove", "_append_n", "_prepend_n", "remove", "append_n", "prepend_n")
    assert len(posts) == 6 and all(r[3] == "proved" for r in posts)
    for name, hyp, goal, _ in posts:
        got = cvc5leaves.confirm(hyp, goal)
        assert got is not None and got[0] == "unsat", (name, got)


@pytest.mark.deep
def test_a_source_post_that_lost_its_list_relation_is_a_disagreement() -> None:
    """The seeded bug on a real post: ``_remove``'s query without the list relation it
    starts from (its first hypothesis), so the list after the call need not be well
    formed: cvc5 must find a model, and the row fail."""
    ((name, hyp, goal, _),) = _posts("_remove")
    got = cvc5leaves.confirm(hyp[1:], goal)
    assert got is not None and got[0] == "sat", got
    row = runner.cvc5_recorded_row("t", [(name, hyp[1:], goal, "proved")], leaves=12)
    assert row.status == "disagree", row.bounds
