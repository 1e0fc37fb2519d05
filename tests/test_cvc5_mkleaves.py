"""cvc5's last step on a quantifier-free query it leaves unknown alone at every limit
(proofs/cvc5more.py's ``_by_leaves``): case by case on the goal's branches, counted
confirmed only with the cases' coverage checked by cvc5; a false query stays a
disagreement, a lost case stays not confirmed."""

from __future__ import annotations

import pytest
import z3  # type: ignore[import-untyped]

from kvpool.proofs import cvc5leaves, cvc5more, multikey
from kvpool.proofs.model import constants, named, recording


def _starved(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every whole ask says unknown (a query cvc5 runs out of time on, at every limit)."""
    monkeypatch.setattr(cvc5more, "ask", lambda *a, **k: ("unknown", "plain"))


X, Y = z3.Ints("x y")


def _sum(at_least: int) -> z3.BoolRef:
    """A goal over two branches (true for 2, false for 3: x = 1, y = 1)."""
    return z3.If(X > 5, X + 1, X) + z3.If(Y > 2, Y, 1) >= at_least


def _group(goal: z3.BoolRef) -> cvc5more.Group:
    g = cvc5more.Group("multi-key", [X > 0, Y > 0], [goal])
    g.verdicts = ["unknown"]
    return g


def test_a_query_unknown_at_every_limit_is_settled_on_its_branches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _starved(monkeypatch)
    g = _group(_sum(2))
    cvc5more._one_by_one(g, 5000, cvc5leaves.confirm)
    assert g.verdicts == ["unsat"] and g.asks == 4  # (alone at 5, 20, 60 s; leaves)
    assert "one by its goal's branches (leaves: 0 (+1 closed))" in g.how


def test_a_false_query_on_its_branches_is_a_disagreement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _starved(monkeypatch)
    g = _group(_sum(3))  # (seeded bug: x = y = 1 is a model)
    cvc5more._one_by_one(g, 5000, cvc5leaves.confirm)
    assert g.verdicts == ["sat"]


def test_a_lost_case_is_a_coverage_gap_not_a_confirmation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _starved(monkeypatch)
    cases = cvc5leaves.cases
    # (seeded bug: the split forgets its last case, x > 5; the case x <= 5 and y <= 2, the
    # one the false goal fails in, is kept: coverage is checked before any leaf is asked)
    monkeypatch.setattr(cvc5leaves, "cases", lambda h, g, m: (cases(h, g, m) or [])[:-1])
    g = _group(_sum(3))
    cvc5more._one_by_one(g, 5000, cvc5leaves.confirm)
    assert g.verdicts == ["coverage gap"]


def test_a_query_with_no_branch_stays_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    _starved(monkeypatch)
    g = _group(X >= 1)
    cvc5more._one_by_one(g, 5000, cvc5leaves.confirm)
    assert g.verdicts == ["unknown"]
    h = _group(_sum(2))  # (and without ``leaves``, as the other parts' rows: no cases)
    cvc5more._one_by_one(h, 5000)
    assert h.verdicts == ["unknown"] and h.asks == 3


@pytest.mark.parametrize("at_least, verdict", [(2, "unsat"), (3, "sat")])
def test_a_quantified_query_unknown_after_every_step_is_asked_on_its_branches(
    monkeypatch: pytest.MonkeyPatch, at_least: int, verdict: str
) -> None:
    """A quantified query (two pools' every-N PERM for FreeBlocks: unknown under every
    setting, its parts and its cases) is asked on its goal's branches last: confirmed when
    true, a disagreement when false (seeded: ``x = y = 1``), and unknown without ``leaves``."""
    _starved(monkeypatch)
    monkeypatch.setattr(cvc5more, "_cases", lambda *a: "unknown")
    z = z3.Int("z")  # (linear arithmetic: cvc5 decides it, so finds the false one sat)
    hyp = [X > 0, Y > 0, z3.ForAll([z], z3.Implies(z > X, z > 0))]
    g = cvc5more.confirm(
        cvc5more.Group("two pools", hyp, [_sum(at_least)]), cases=True, leaves=cvc5leaves.confirm
    )
    assert g.verdicts == [verdict]
    if verdict == "unsat":
        assert "one by its goal's branches" in g.how
    h = cvc5more.confirm(cvc5more.Group("two pools", hyp, [_sum(at_least)]), cases=True)
    assert h.verdicts == ["unknown"]


@pytest.mark.deep
@pytest.mark.parametrize("n", [5, 6])
def test_the_multikey_query_cvc5_left_unknown_is_settled_on_its_branches(n: int) -> None:
    """The deep multikey cvc5 row's one query unknown alone at 5, 20 and 60 s:
    INV-WATCH's step for UnpinBlocks at N = 6, ``registered == fired + #pending`` (the same
    conjunct at N = 5 was unknown alone at 5 s too; tens of CPU s)."""
    st = multikey.build(n)
    with recording() as rec, named("multi-key"):
        gs = multikey.step_goals(st, ("INV-WATCH",), ("UnpinBlocks",))
    assert all(g.status == "proved" for g in gs)
    (g,) = cvc5more.groups(rec)
    hard = [q for q in g.goals if {"s.registered", "s.fired"} <= set(constants([q]))]
    assert len(hard) == 1
    assert cvc5more._by_leaves(g, hard[0], cvc5leaves.confirm) == "unsat"
    assert "one by its goal's branches (leaves: " in g.how


@pytest.mark.deep
def test_the_two_pool_query_cvc5_left_unknown_is_settled_on_its_branches() -> None:
    """One of the six queries the deep twopool cvc5 row left unknown alone at every limit:
    INV-WATCH's step for UnpinBlocks at N = 6+6 on pool 0, ``registered == fired +
    #pending`` (the multikey conjunct's kind; 34 closed cases, tens of CPU s)."""
    from kvpool.proofs import twopool

    st = twopool.build((6, 6))
    with recording() as rec, named("two pools"):
        gs = twopool.step_goals(st, ("INV-WATCH",), ops=("UnpinBlocks",), callers=(0,))
    assert all(g.status == "proved" for g in gs)
    (g,) = cvc5more.groups(rec)
    mine = {"w.p0.registered", "w.p0.fired"}
    hard = [q for q in g.goals if z3.is_eq(q) and mine <= set(constants([q]))]
    assert len(hard) == 1
    assert cvc5more._by_leaves(g, hard[0], cvc5leaves.confirm) == "unsat"
    assert "one by its goal's branches (leaves: " in g.how


def test_the_row_reads_agree_through_the_branches_and_disagree_on_a_false_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The part's row (``cvc5more.row``, as the deep multikey part makes it): a query
    starved at every limit and settled on its branches counts as confirmed; the seeded
    false one (recorded as proved) is a disagreement that the row names."""
    _starved(monkeypatch)
    leaves = cvc5leaves.confirm
    good = cvc5more.row(
        "multikey", [("multi-key", [X > 0, Y > 0], _sum(2), "proved")], leaves=leaves
    )
    assert good["status"] == "agree" and "confirms 1 of 1" in good["bounds"]
    assert "one by its goal's branches" in good["bounds"]
    bad = cvc5more.row(
        "multikey", [("multi-key", [X > 0, Y > 0], _sum(3), "proved")], leaves=leaves
    )
    assert bad["status"] == "disagree" and "multi-key" in bad["replay"]


def test_the_deep_multikey_row_asks_the_branches(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner's wiring, with the part's proofs stubbed by one query z3 proves there
    and cvc5 (starved) leaves unknown at every limit: the deep multikey row confirms it on
    its branches."""
    from kvpool.proofs import runner
    from kvpool.proofs.model import isolated_check

    def part(plan: object) -> list[dict[str, object]]:
        isolated_check([X > 0, Y > 0], _sum(2), 5000)
        return []

    monkeypatch.setattr(multikey, "part_rows", part)
    _starved(monkeypatch)
    rows = runner.run("deep", "multikey")
    (row,) = [r for r in rows if r.obligation.startswith("cvc5 re-checks blocks with several")]
    assert row.status == "agree" and "one by its goal's branches" in row.bounds


@pytest.mark.parametrize("part", ["twopool", "twopooln", "twolists"])
@pytest.mark.parametrize("at_least, status", [(2, "agree"), (3, "disagree")])
def test_the_deep_two_pool_rows_ask_the_branches(
    monkeypatch: pytest.MonkeyPatch, part: str, at_least: int, status: str
) -> None:
    """The runner's wiring of the two-pool part's three cvc5 rows (the deep run left six of
    twopool's quantifier-free queries unknown alone at every limit): with the part's proofs
    stubbed by one query z3 proves and cvc5 starved at every limit, the row confirms it on
    its goal's branches; with the recorded goal swapped for a false one (seeded bug: ``x =
    y = 1`` is a model), the row is a disagreement."""
    from kvpool.proofs import runner, twolists, twopool, twopooln
    from kvpool.proofs.model import Record, isolated_check

    def prove(*args: object) -> list[dict[str, object]]:
        isolated_check([X > 0, Y > 0], _sum(2), 5000)
        return []

    for mod, name in ((twopool, "twopool"), (twopooln, "twopooln"), (twolists, "twolists")):
        monkeypatch.setattr(mod, "all_rows", prove if name == part else lambda *a: [])
    _starved(monkeypatch)
    if at_least == 3:
        real = cvc5more.groups

        def swapped(records: list[Record]) -> list[cvc5more.Group]:
            return real([(n, h, _sum(at_least), s) for n, h, _, s in records])

        monkeypatch.setattr(cvc5more, "groups", swapped)
    rows = runner.run("deep", "twopool")
    (row,) = [r for r in rows if r.obligation == f"cvc5 re-checks {cvc5more.FAMILIES[part]}"]
    assert row.status == status
    if status == "agree":
        assert "one by its goal's branches" in row.bounds
