"""cvc5 on the hot paths' queries from source (proofs/cvc5hot.py), on toy queries.

Each rewrite has a seeded bug it must catch: a "subset" of the hypotheses that holds a
formula not among them proves nothing; so does an "instance" of a formula that is no
hypothesis, or one at a term the goal does not need; a subset's sat is no
disagreement, but the query's is; a shape split that lost a case is caught by the
coverage check; a lambda chain's axiom keeps the query's models. The real queries
(seconds each) run in ``make proofs-deep``'s "pool-source" part.
"""

from __future__ import annotations

import pytest
import z3  # type: ignore[import-untyped]

from kvpool.proofs import cvc5hot, cvc5more, smtlib
from kvpool.proofs.model import Record, constants
from kvpool.proofs.rewrite import selects_expanded, simplify


def _buried() -> tuple[list[z3.BoolRef], z3.BoolRef, z3.BoolRef]:
    """A goal that follows from one quantified hypothesis among unrelated ones (linear
    arithmetic under the quantifiers: cvc5 decides these, sat included)."""
    a, b, c, d, e, x, y = z3.Ints("a b c d e x y")
    hyp = [
        z3.ForAll([x], z3.Implies(x > a, x > b)),  # (b <= a)
        z3.And(z3.ForAll([y], z3.Implies(y > c, y > d)), e == 5),
    ]
    return hyp, b <= a + 1, b < a


def test_relevant_keeps_the_goals_hypothesis_and_only_conjuncts_of_the_query() -> None:
    hyp, goal, _ = _buried()
    sub = cvc5hot.relevant(hyp, goal, 1)
    assert [str(h) for h in sub] == [str(hyp[0])]
    ids = {h.get_id() for h in cvc5hot.conjuncts(hyp)}
    assert all(h.get_id() in ids for h in cvc5hot.relevant(hyp, goal, 3))
    assert len(cvc5hot.conjuncts(hyp)) == 3  # (the second's two conjuncts)


def test_a_query_is_confirmed_on_its_relevant_hypotheses() -> None:
    hyp, goal, _ = _buried()
    assert cvc5hot.confirm(hyp, goal) == ("unsat", "relevant hypotheses")


def test_a_wrong_post_is_a_disagreement_though_a_subset_is_sat() -> None:
    """The seeded bug: the goal ``f(3) > 1`` does not follow. The subset's sat counts
    for nothing; the query whole is sat: a disagreement."""
    hyp, _, wrong = _buried()
    assert cvc5hot.confirm(hyp, wrong, shape=False) == ("sat", "whole")


def test_a_subset_that_is_not_one_proves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seeded bug: ``relevant`` returns the goal itself as a "hypothesis" (then any
    query would be unsat). It is not a conjunct of the query: not asked."""
    hyp, _, wrong = _buried()
    monkeypatch.setattr(cvc5hot, "relevant", lambda h, g, d, *a: [g])
    assert cvc5hot.confirm(hyp, wrong, shape=False) == ("sat", "whole")


def test_a_lambda_chain_is_lifted_with_its_variables_in_order() -> None:
    """``lambda x. lambda y. x - y`` read as one array of arrays: ``A[1][2]`` is -1 and
    ``A[2][1]`` is 1 (the seeded bug a lifting with the chain's variables swapped would
    be: both queries below would have a model)."""
    x, y = z3.Ints("x y")
    chain = z3.Lambda([x], z3.Lambda([y], x - y))
    a = z3.Const("a", chain.sort())
    for i, j, v in ((1, 2, -1), (2, 1, 1)):
        text = smtlib.to_smt2_lifted([a == chain, z3.Select(z3.Select(a, i), j) != v])
        assert "(lambda" not in text
        assert smtlib.cvc5_check(text, 5000)[0] == "unsat"
    # (the axiom does not make every query unsat)
    other = smtlib.to_smt2_lifted([a == chain, z3.Select(z3.Select(a, 1), 2) == -1])
    assert smtlib.cvc5_check(other, 5000)[0] != "unsat"


def _listy() -> tuple[list[z3.BoolRef], z3.BoolRef]:
    """A call's list (``m`` entries of ``bl``) as the hot paths' queries have it
    (``ref[bl[0]] >= 0`` written with a quantifier over the integers, which cvc5
    decides, a model included: the quantifier-free part alone proves no case that needs
    it)."""
    m = z3.Int("m")
    bl = z3.Array("bl", z3.IntSort(), z3.IntSort())
    ref = z3.Array("ref", z3.IntSort(), z3.IntSort())
    is_null = z3.Array("is_null", z3.IntSort(), z3.BoolSort())
    mark = z3.Array("mark", z3.IntSort(), z3.IntSort())
    x = z3.Int("x")
    hyp = [
        m >= 0,
        m <= 2,
        z3.ForAll([x], z3.Implies(z3.And(mark[bl[0]] == 1, x < 0), x < ref[bl[0]])),
        z3.Implies(m >= 1, z3.And(mark[bl[0]] == 1, z3.Not(is_null[bl[0]]))),
    ]
    first = z3.If(m >= 1, ref[bl[0]], 0)
    return hyp, first + z3.If(is_null[bl[0]], -1, 0) >= z3.If(m >= 1, 0, -1)


def test_the_lists_shape_cases_cover_every_model() -> None:
    hyp, goal = _listy()
    own, calls = cvc5hot.shape_atoms([*hyp, goal])
    assert [str(a) for a in own] == ["m == 0", "m == 1", "is_null[bl[0]]", "mark[bl[0]] == 1"]
    assert [str(a) for a in calls] == ["ref[bl[0]] == 1"]
    atoms = own + calls
    cs = cvc5hot.shape_cases(hyp, goal, atoms)
    assert cs is not None and len(cs) > 1
    assert [str(c.path[0]) for c in cs[:2]] == ["m == 0", "Not(m == 0)"]

    assert cvc5more.covers([c.path for c in cs]) == "unsat"


def _whole_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    """cvc5 leaves the query unknown whole (as it does the real posts) and on the
    hypothesis' core (step 3d, which settles these toy queries): the shape split is
    asked."""
    real = cvc5hot._direct
    monkeypatch.setattr(cvc5hot, "hyp_cores", lambda h, g: ("unknown", "hypothesis core"))

    def direct(
        h: list[z3.BoolRef], g: z3.BoolRef, ms: int, asks: list[int], qf: bool = True
    ) -> tuple[str, str]:
        return ("unknown", "whole") if qf else real(h, g, ms, asks, qf)

    monkeypatch.setattr(cvc5hot, "_direct", direct)


def test_a_query_is_confirmed_case_by_case_on_its_lists_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _whole_unknown(monkeypatch)
    hyp, goal = _listy()
    v, how = cvc5hot.confirm(hyp, goal)
    assert v == "unsat" and how.startswith("shape: "), how


def test_a_shape_split_that_drops_a_case_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seeded bug: the split loses its last case; every case left is unsat."""
    _whole_unknown(monkeypatch)
    real = cvc5hot.shape_cases
    monkeypatch.setattr(cvc5hot, "shape_cases", lambda *a, **k: (real(*a, **k) or [])[:-1])
    hyp, goal = _listy()
    v, how = cvc5hot.confirm(hyp, goal)
    assert v == "coverage gap" and how == "shape: coverage sat"


def test_a_wrong_post_in_one_case_is_a_disagreement(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seeded bug: the goal fails when the list has one entry with ``ref`` 0."""
    _whole_unknown(monkeypatch)
    hyp, goal = _listy()
    m = z3.Int("m")
    ref = z3.Array("ref", z3.IntSort(), z3.IntSort())
    bl = z3.Array("bl", z3.IntSort(), z3.IntSort())
    wrong = z3.And(goal, z3.Implies(m == 1, ref[bl[0]] >= 1))
    assert cvc5hot.confirm(hyp, wrong)[0] == "sat"


def test_assume_gives_an_equivalent_query() -> None:
    hyp, goal = _listy()
    bl = z3.Array("bl", z3.IntSort(), z3.IntSort())
    is_null = z3.Array("is_null", z3.IntSort(), z3.BoolSort())
    for fact in (bl[1] == bl[0], z3.Not(is_null[bl[0]]), z3.Int("m") == 1):
        h2, g2 = cvc5hot.assume([*hyp, is_null[bl[1]]], goal, fact)
        s = z3.Solver()
        same = z3.And(*hyp, is_null[bl[1]], fact, goal) == z3.And(*h2, g2)
        s.add(z3.Not(same))
        assert s.check() == z3.unsat, fact


def _two_touch_and_a_mutant() -> list[Record]:
    """Two proved ``touch`` queries (one settled by its relevant hypotheses, one
    quantifier-free) and a mutant's, which no row counts."""
    hyp, goal, wrong = _buried()
    x = z3.Int("x")
    return [
        ("pool touch L=2 (post: a)", hyp, goal, "proved"),
        ("pool touch L=2 (post: b)", [x > 0], x >= 1, "proved"),
        ("mutant: m", hyp, wrong, "refuted"),
    ]


def test_the_row_counts_each_method_by_step_and_names_what_is_open() -> None:
    hyp, _, wrong = _buried()
    recs = _two_touch_and_a_mutant()
    row = cvc5hot.row("pool-source", recs)
    assert row["status"] == "agree", row
    assert "touch 2 of 2 (1 quantifier-free part, 1 relevant hypotheses)" in row["bounds"]
    assert row["obligation"] == f"cvc5 re-checks {cvc5more.FAMILIES['pool-source']}"
    bad = cvc5hot.row("hot-source", [("pool free_blocks L=2 (post: c)", hyp, wrong, "proved")])
    assert bad["status"] == "disagree" and "free_blocks L=2 (post: c)" in bad["replay"]
    assert cvc5hot.method_of("pool contract: FreeKVCacheBlockQueue._remove") == "contract"
    assert cvc5hot.rows("hot-source", recs, ()) == []


def test_the_shape_split_is_given_up_after_failing_in_a_row() -> None:
    """A stand-in for :func:`cvc5hot.confirm` that the shape never settles: after
    ``SHAPE_GIVE_UP`` failures in a row the method's other queries are asked without it,
    and the row says so; another method still gets it."""
    x = z3.Int("x")
    shapes: list[bool] = []

    def ask(
        h: list[z3.BoolRef], g: z3.BoolRef, ms: int, shape: bool, asks: list[int]
    ) -> tuple[str, str]:
        shapes.append(shape)
        return ("unknown", "shape: a case unknown") if shape else ("unknown", "whole")

    recs: list[Record] = [(f"pool touch L=2 (q{i})", [x > 0], x >= 1, "proved") for i in range(5)]
    recs.append(("pool free_blocks L=2 (q)", [x > 0], x >= 1, "proved"))
    by_method, _ = cvc5hot.tally(recs, ask=ask)
    n = cvc5hot.SHAPE_GIVE_UP
    assert shapes == [True] * n + [False] * (5 - n) + [True]
    assert by_method["touch"].open[-1].endswith(f"the shape not asked: {n} failed in a row)")


def test_the_row_asked_two_at_a_time_says_what_one_by_one_says() -> None:
    """Steps 1 to 3e of each query in a process of its own (``jobs`` 2), read back from
    SMT-LIB: the same counts by step as one by one. The seeded bug, a wrong post, is
    still a disagreement when its process finds it."""
    hyp, _, wrong = _buried()
    recs = _two_touch_and_a_mutant()
    one = cvc5hot.row("pool-source", recs)
    two = cvc5hot.row("pool-source", recs, jobs=2)
    assert two["status"] == one["status"] == "agree", two
    counts = "touch 2 of 2 (1 quantifier-free part, 1 relevant hypotheses)"
    assert counts in one["bounds"] and counts in two["bounds"]
    assert "2 queries at a time" in two["bounds"] and "at a time" not in one["bounds"]
    bad = [("pool free_blocks L=2 (post: c)", hyp, wrong, "proved"), *recs[:2]]
    row = cvc5hot.row("hot-source", bad, jobs=2)
    assert row["status"] == "disagree" and "free_blocks L=2 (post: c)" in row["replay"]


def test_a_query_is_read_back_as_it_was_written() -> None:
    hyp, goal, _ = _buried()
    text = cvc5hot.query_text(hyp, goal)
    assert text is not None
    h2, g2 = cvc5hot.read_query(text)
    assert [str(h) for h in h2] == [str(h) for h in hyp] and str(g2) == str(goal)


def test_a_query_its_process_cannot_read_is_asked_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process given a query it cannot read (garbage for its text) answers nothing
    for it, and the row asks it here: still confirmed, not left open."""
    hyp, goal, _ = _buried()
    monkeypatch.setattr(cvc5hot, "query_text", lambda h, g: "; hypotheses 1\n(assert")
    asks = [0]
    assert cvc5hot.steps_apart([(hyp, goal)], cvc5hot.TIMEOUT_MS, 2, asks) == [None]
    assert asks == [0]
    row = cvc5hot.row("pool-source", [("pool touch L=2 (post: a)", hyp, goal, "proved")], jobs=2)
    assert row["status"] == "agree" and "touch 1 of 1 (1 relevant hypotheses)" in row["bounds"]


def test_the_shape_is_asked_here_of_what_the_processes_left_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With ``jobs`` 2, a query steps 1 to 3e leave open (a stand-in for the processes'
    answers) is split on its list's shape here, and the give-up count is kept as one by
    one keeps it: the seeded bug, a wrong post in one case, is a disagreement."""
    hyp, goal = _listy()
    monkeypatch.setattr(
        cvc5hot, "steps_apart", lambda qs, ms, jobs, asks: [("unknown", "whole")] * len(qs)
    )
    by_method, _ = cvc5hot.tally([("pool touch L=2 (post)", hyp, goal, "proved")], jobs=2)
    assert by_method["touch"].by_step == {"shape": 1}, by_method["touch"]
    m = z3.Int("m")
    ref, bl = (z3.Array(a, z3.IntSort(), z3.IntSort()) for a in ("ref", "bl"))
    wrong = z3.And(goal, z3.Implies(m == 1, ref[bl[0]] >= 1))
    by_method, _ = cvc5hot.tally([("pool touch L=2 (post)", hyp, wrong, "proved")], jobs=2)
    assert len(by_method["touch"].disagree) == 1, by_method["touch"]


# -- step 3b: instances of the quantified hypotheses ---------------------------------------


def _instq() -> tuple[list[z3.BoolRef], z3.BoolRef, z3.BoolRef]:
    """A goal over every position (``forall z. f(z) + 1 > 0``) that follows from a
    quantified hypothesis at the goal's Skolem constant; and a wrong one."""
    f = z3.Function("f", z3.IntSort(), z3.IntSort())
    p, c = z3.Bool("p"), z3.Int("c")
    x, y, z = z3.Ints("x y z")
    hyp = [
        z3.ForAll([x], f(x) > 0),
        z3.Or(z3.Not(p), z3.ForAll([y], f(y) > 1)),
        c == 7,
    ]
    return hyp, z3.ForAll([z], f(z) + 1 > 0), z3.ForAll([z], f(z) > 1)


def test_a_goal_is_confirmed_on_instances_at_its_skolem_constant() -> None:
    hyp, goal, wrong = _instq()
    assert cvc5hot.instantiated(hyp, goal) == ("unsat", "instances")
    # (a conjunction of such goals: whole it has no Skolem constant, so part by part,
    # each part with its own)
    w = z3.Int("w")
    f = z3.Function("f", z3.IntSort(), z3.IntSort())
    both = z3.And(goal, z3.ForAll([w], f(w) >= 1))
    assert cvc5hot.instantiated(hyp, both) == ("unsat", "instances: 2 parts")
    assert cvc5hot.instantiated(hyp, z3.And(goal, wrong)) == (
        "unknown",
        "instances: a part of 2",
    )


def test_instantiate_weakens_and_leaves_negative_quantifiers() -> None:
    """Each instantiated conjunct follows from its source (z3 proves it); a quantifier
    under ``not`` is not instantiated; a term holding a bound variable is refused."""
    hyp, _, _ = _instq()
    f = z3.Function("f", z3.IntSort(), z3.IntSort())
    x = z3.Int("x")
    terms = (z3.Int("c"), z3.Int("d"))
    for h in hyp:
        w = cvc5hot.instantiate(h, terms)
        s = z3.Solver()
        s.add(h, z3.Not(w))
        assert s.check() == z3.unsat, h
    neg = z3.Not(z3.ForAll([x], f(x) > 0))
    assert cvc5hot.instantiate(neg, terms).eq(neg)
    assert str(cvc5hot.instantiate(hyp[1], terms)) == "Or(Not(p), And(f(c) > 1, f(d) > 1))"
    with pytest.raises(ValueError):
        cvc5hot.instantiate(hyp[0], (z3.Var(0, z3.IntSort()),))


def test_a_wrong_goal_stays_unconfirmed_after_instantiation() -> None:
    """The seeded bug: ``forall z. f(z) > 1`` does not follow (``p`` may be false). The
    instantiated query is sat: it counts for nothing ("unknown"), and the query stays
    unconfirmed (cvc5 finds no model of ``f`` whole at its default: unknown)."""
    hyp, _, wrong = _instq()
    assert cvc5hot.instantiated(hyp, wrong)[0] == "unknown"
    assert cvc5hot.confirm(hyp, wrong, shape=False)[0] != "unsat"


def test_an_instance_at_the_wrong_term_does_not_confirm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seeded bug: the hypothesis instantiated at ``c``, not at the goal's Skolem
    constant: the weakened query has a model, so nothing is confirmed."""
    hyp, goal, _ = _instq()
    monkeypatch.setattr(cvc5hot, "instance_terms", lambda h, n: (z3.Int("c"),))
    assert cvc5hot.instantiated(hyp, goal)[0] == "unknown"


def test_an_instance_of_a_formula_that_is_no_hypothesis_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seeded bugs: an "instance" of ``forall x. f(x) > 5`` (no hypothesis: it would
    prove the wrong goal), and an instance of a real hypothesis whose formula was
    altered. Both refused: nothing asked, not confirmed."""
    hyp, _, wrong = _instq()
    f = z3.Function("f", z3.IntSort(), z3.IntSort())
    x = z3.Int("x")
    sk = z3.Int(cvc5hot.SKOLEM + "0")
    fake = z3.ForAll([x], f(x) > 5)
    real = cvc5hot.instances
    for bad in (
        [cvc5hot.Instance(fake, (sk,), cvc5hot.instantiate(fake, (sk,)))],
        [cvc5hot.Instance(hyp[0], (sk,), f(sk) > 5)],
    ):
        assert cvc5hot.checked(hyp, bad) is None
        monkeypatch.setattr(cvc5hot, "instances", lambda h, t, bad=bad: real(h, t) + bad)
        assert cvc5hot.instantiated(hyp, wrong) == (
            "unknown",
            "instances: refused (not instances of the hypothesis)",
        )


def test_the_negated_goal_is_skolemized_with_fresh_names_only() -> None:
    hyp, goal, _ = _instq()
    neg = cvc5hot.negated_goal(goal, [*hyp, goal])
    assert neg is not None and [str(n) for n in neg] == ["Not(f(sk!0) + 1 > 0)"]
    p = z3.Bool("p")
    neg2 = cvc5hot.negated_goal(z3.Or(z3.Not(p), z3.Implies(p, goal)), [*hyp, goal])
    assert neg2 is not None and [str(n) for n in neg2] == ["p", "p", "Not(f(sk!0) + 1 > 0)"]
    clash = [*hyp, z3.Int(cvc5hot.SKOLEM + "0") == 1]
    assert cvc5hot.negated_goal(goal, clash) is None
    m, bl = z3.Int("m"), z3.Array("bl", z3.IntSort(), z3.IntSort())
    terms = cvc5hot.instance_terms([m >= 0, bl[0] >= 0], neg)
    assert [str(t) for t in terms] == ["sk!0", "bl[0]", "bl[1]", "bl[2]"]


# -- the real queries (make test-deep) --------------------------------------------------------


@pytest.mark.deep
def test_get_new_blocks_from_source_is_confirmed_query_by_query() -> None:
    """``get_new_blocks``' 63 queries from source, as ``make proofs-deep`` asks them:
    every one confirmed (2026-12-06: 49 on their relevant hypotheses, 13 on their
    quantifier-free part, the post at 3 entries on its ``ite`` condition; 13 CPU s)."""
    from kvpool.proofs import pyhot
    from kvpool.proofs.model import recording

    with recording() as rec:
        pyhot.prove(("get_new_blocks",), None, 240000)
    row = cvc5hot.row("hot-source", rec)
    assert row["status"] == "agree", row
    assert "get_new_blocks 63 of 63" in row["bounds"]


# -- step 3c: cores (z3 picks the instances, cvc5 proves) ------------------------------------


def _coreq() -> tuple[list[z3.BoolRef], z3.BoolRef, z3.BoolRef]:
    """A goal (``forall z. b[a[z]] > 0``) that needs a hypothesis at ``a[sk!0]``, a term
    the goal's Skolem constant only reaches through an index (round 2 of
    :func:`cvc5hot.candidate_terms`), among hypotheses it does not need; and a wrong goal."""
    a = z3.Array("a", z3.IntSort(), z3.IntSort())
    b = z3.Array("b", z3.IntSort(), z3.IntSort())
    c = z3.Array("c", z3.IntSort(), z3.IntSort())
    x, y, z, w = z3.Ints("x y z w")
    hyp = [
        z3.ForAll([x], a[x] > 0),
        z3.ForAll([y], z3.Implies(y > 0, b[y] > 0)),
        z3.ForAll([w], c[w] == w + 1),
        z3.Int("e") == 3,
    ]
    return hyp, z3.ForAll([z], b[a[z]] > 0), z3.ForAll([z], b[z] > 0)


def test_a_goal_is_confirmed_by_cvc5_on_the_core_z3_picks() -> None:
    """Round 1 (at ``sk!0``) is not enough, round 2 (at ``a[sk!0]`` too) is; z3's core
    keeps the two instances the goal needs, not ``c``'s nor ``e == 3``; cvc5 proves it."""
    hyp, goal, _ = _coreq()
    assert cvc5hot.instantiated(hyp, goal)[0] == "unknown"
    assert cvc5hot.cores(hyp, goal) == ("unsat", "cores")
    neg = cvc5hot.negated_goal(goal, [*hyp, goal])
    assert neg is not None
    terms = cvc5hot.candidate_terms(hyp, neg)
    assert [str(t) for t in terms] == ["sk!0", "a[sk!0]"]
    insts = cvc5hot.candidates(hyp, terms)
    assert len(insts) == 6  # (three quantified conjuncts, two terms)
    got = cvc5hot.core([hyp[3]], insts, neg)
    assert not isinstance(got, str)
    base, used = got
    assert base == [] and sorted(str(i.formula) for i in used) == [
        "And(Implies(a[sk!0] > 0, b[a[sk!0]] > 0))",
        "And(a[sk!0] > 0)",
    ]


def _cores_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """cvc5 leaves the query unknown whole and at step 3b (as it does ``touch``'s open
    posts): step 3c is asked."""
    _whole_unknown(monkeypatch)
    monkeypatch.setattr(cvc5hot, "instantiated", lambda h, g: ("unknown", "instances"))


def test_the_row_counts_a_query_confirmed_by_its_core(monkeypatch: pytest.MonkeyPatch) -> None:
    _cores_only(monkeypatch)
    hyp, goal, _ = _coreq()
    assert cvc5hot.confirm(hyp, goal, shape=False) == ("unsat", "cores")
    by_method, _ = cvc5hot.tally([("pool touch L=2 (post: p)", hyp, goal, "proved")])
    assert by_method["touch"].line("touch") == "touch 1 of 1 (1 cores)"


def test_a_core_with_a_non_instance_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seeded bugs: z3's "core" holds an instance of ``forall z. b[z] > 0`` (no
    hypothesis: with it the wrong goal follows), an instance of a real hypothesis with
    an altered formula, or a "conjunct" that is none (the wrong goal at ``sk!0``).
    Each refused: nothing asked of cvc5, not confirmed."""
    hyp, _, wrong = _coreq()
    b = z3.Array("b", z3.IntSort(), z3.IntSort())
    sk = z3.Int(cvc5hot.SKOLEM + "0")
    fake = z3.ForAll([z3.Int("v")], b[z3.Int("v")] > 0)
    for bad_base, bad in (
        ([], cvc5hot.Instance(fake, (sk,), cvc5hot.instantiate(fake, (sk,)))),
        ([], cvc5hot.Instance(hyp[1], (sk,), b[sk] > 0)),
        ([b[sk] > 0], None),
    ):
        extra = [] if bad is None else [bad]
        assert cvc5hot.core_checked(hyp, bad_base, extra) is None
        monkeypatch.setattr(cvc5hot, "core", lambda base, i, n, bb=bad_base, e=extra: (bb, e))
        assert cvc5hot.cores(hyp, wrong) == (
            "unknown",
            "cores: refused (not instances of the hypothesis)",
        )


def test_a_wrong_goal_is_not_confirmed_though_z3_gave_a_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seeded bug: z3 "says unsat" on the wrong goal ``forall z. b[z] > 0`` and
    gives every candidate as its core. cvc5 finds the core's query sat: not confirmed."""
    _cores_only(monkeypatch)
    hyp, _, wrong = _coreq()
    neg = cvc5hot.negated_goal(wrong, [*hyp, wrong])
    assert neg is not None
    insts = cvc5hot.candidates(hyp, cvc5hot.candidate_terms(hyp, neg))
    assert cvc5hot.core([hyp[3]], insts, neg) == "sat"  # (no core)
    monkeypatch.setattr(cvc5hot, "core", lambda base, insts, neg: (base, insts))
    assert cvc5hot.cores(hyp, wrong) == ("unknown", "cores: cvc5 sat on a core (3 of 3 instances)")
    assert cvc5hot.confirm(hyp, wrong, shape=False)[0] != "unsat"


def test_a_core_z3_finds_unsat_and_cvc5_does_not_is_not_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seeded bugs: cvc5 (a stand-in) leaves z3's core unknown; and the core loses an
    instance it needs (the one at ``a[sk!0]``: its query has a model). Neither counts:
    the row leaves the query open."""
    _cores_only(monkeypatch)
    hyp, goal, _ = _coreq()
    real_ask, real_core = cvc5hot._ask, cvc5hot.core
    monkeypatch.setattr(cvc5hot, "_ask", lambda q, ms, again=1: "unknown")
    assert cvc5hot.cores(hyp, goal) == (
        "unknown",
        "cores: cvc5 unknown on a core (2 of 6 instances)",
    )
    monkeypatch.setattr(cvc5hot, "_ask", real_ask)

    def lossy(
        base: list[z3.BoolRef], insts: list[cvc5hot.Instance], neg: list[z3.BoolRef]
    ) -> tuple[list[z3.BoolRef], list[cvc5hot.Instance]] | str:
        got = real_core(base, insts, neg)
        assert not isinstance(got, str)
        return got[0], [i for i in got[1] if "b[a[sk!0]]" not in str(i.formula)]

    monkeypatch.setattr(cvc5hot, "core", lossy)
    assert cvc5hot.cores(hyp, goal) == ("unknown", "cores: cvc5 sat on a core (1 of 6 instances)")
    by_method, _ = cvc5hot.tally([("pool touch L=2 (post: p)", hyp, goal, "proved")])
    assert by_method["touch"].line("touch") == "touch 0 of 1"
    assert by_method["touch"].open == ["pool touch L=2 (post: p) (unknown: whole)"]


def test_a_quantifier_free_core_left_unknown_is_asked_again_with_more_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """cvc5 (a stand-in) settles only with the longer limit: a quantifier-free core is
    confirmed on the second ask, a quantified query is not asked again; the seeded bug,
    no second ask (``again`` not passed), leaves the core unknown."""
    limits: list[int] = []
    again_ms = cvc5hot.CORE_QF_AGAIN * 8000

    def slow(text: str, ms: int, options: object = None) -> tuple[str, float]:
        limits.append(ms)
        return ("unsat" if ms >= again_ms else "unknown"), 0.0

    monkeypatch.setattr(smtlib, "cvc5_check", slow)
    monkeypatch.setattr(smtlib, "cvc5_check_bounded", slow)
    p, x = z3.Bool("p"), z3.Int("x")
    assert cvc5hot._ask([p, z3.Not(p)], 8000, cvc5hot.CORE_QF_AGAIN) == "unsat"
    assert limits == [8000, again_ms]
    limits.clear()
    assert cvc5hot._ask([z3.ForAll([x], x > 0), p], 8000, cvc5hot.CORE_QF_AGAIN) == "unknown"
    assert limits == [8000]
    assert cvc5hot._ask([p, z3.Not(p)], 8000) == "unknown"  # the seeded bug
    _cores_only(monkeypatch)
    hyp, goal, _ = _coreq()
    assert cvc5hot.cores(hyp, goal) == ("unsat", "cores")


def _lambdaq() -> tuple[list[z3.BoolRef], z3.BoolRef, z3.BoolRef]:
    """A goal that reads, at every index, an array the spec builds as a lambda or keeps,
    by a condition (as ``touch``'s sequence after a removal): ``forall z. g[z] + g[z + 1]
    > 1`` where ``g = c ? (lambda i. a[i] + 1) : a``, from ``forall x. a[x] > 0`` (two
    instances needed, at ``sk!0`` and ``sk!0 + 1``); and a wrong goal (``> 2``)."""
    a = z3.Array("a", z3.IntSort(), z3.IntSort())
    x, i, z = z3.Ints("x i z")
    c = z3.Bool("c")
    grown = z3.If(c, z3.Lambda([i], a[i] + 1), a)
    hyp = [z3.ForAll([x], a[x] > 0), z3.Int("e") == 3]
    return (
        hyp,
        z3.ForAll([z], grown[z] + grown[z + 1] > 1),
        z3.ForAll([z], grown[z] + grown[z + 1] > 2),
    )


def test_a_read_of_a_conditional_lambda_is_asked_without_quantifiers() -> None:
    """A query reading the conditional array at two indices (as ``touch``'s cores read
    the sequence after a removal): with the reads pushed into the ``ite``'s branches the
    lambda is read at each index and disappears from the export (z3's default pushes a
    read into an ``ite`` only at times: in ``touch``'s cores the export lifted the lambda
    into a quantified definition, and cvc5 left them unknown at 8 s). The result is z3's
    equivalent of what it was made from."""
    a = z3.Array("a", z3.IntSort(), z3.IntSort())
    i, k = z3.Ints("i k")
    grown = z3.If(z3.Bool("c"), z3.Lambda([i], a[i] + 1), a)
    f = grown[k] + grown[k + 1] <= 1
    assert not cvc5more.quantified(cvc5more.export([selects_expanded(f)]))
    assert "Lambda" in str(simplify(f))
    s = z3.Solver()
    s.add(f != selects_expanded(f))
    assert s.check() == z3.unsat


def test_a_conditional_lambda_goal_is_confirmed_and_a_wrong_one_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _cores_only(monkeypatch)
    hyp, goal, wrong = _lambdaq()
    assert cvc5hot.cores(hyp, goal) == ("unsat", "cores")
    assert cvc5hot.cores(hyp, wrong)[0] == "unknown"  # (z3 finds the wrong goal sat)
    assert cvc5hot.confirm(hyp, wrong, shape=False)[0] != "unsat"


# -- step 3d: the hypothesis' core (z3 picks the conjuncts, cvc5 proves) --------------------


def _no_instances(monkeypatch: pytest.MonkeyPatch) -> None:
    """cvc5 leaves the query unknown whole, at step 3b and at 3c (as it does ``touch``'s
    open posts): step 3d is asked."""
    real = cvc5hot._direct

    def direct(
        h: list[z3.BoolRef], g: z3.BoolRef, ms: int, asks: list[int], qf: bool = True
    ) -> tuple[str, str]:
        return ("unknown", "whole") if qf else real(h, g, ms, asks, qf)

    monkeypatch.setattr(cvc5hot, "_direct", direct)
    monkeypatch.setattr(cvc5hot, "instantiated", lambda h, g: ("unknown", "instances"))
    monkeypatch.setattr(cvc5hot, "cores", lambda h, g: ("unknown", "cores"))


def test_a_goal_is_confirmed_by_cvc5_on_the_conjuncts_z3_used() -> None:
    """z3's core keeps the two quantified conjuncts the goal needs (not ``c``'s nor
    ``e == 3``); cvc5 proves the goal from them, quantifiers and all."""
    hyp, goal, _ = _coreq()
    neg = cvc5hot.negated_goal(goal, [*hyp, goal])
    assert neg is not None
    got = cvc5hot.hyp_core(hyp, neg)
    assert isinstance(got, list) and [str(h) for h in got] == [str(hyp[0]), str(hyp[1])]
    assert cvc5hot.hyp_cores(hyp, goal) == ("unsat", "hypothesis core")


def test_the_row_counts_a_query_confirmed_by_the_hypothesis_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_instances(monkeypatch)
    hyp, goal, _ = _coreq()
    assert cvc5hot.confirm(hyp, goal, shape=False) == ("unsat", "hypothesis core")
    by_method, _ = cvc5hot.tally([("pool touch L=2 (post: p)", hyp, goal, "proved")])
    assert by_method["touch"].line("touch") == "touch 1 of 1 (1 hypothesis core)"
    assert cvc5hot.confirm(hyp, goal, shape=False, hyp_core_step=False)[0] == "unknown"


def test_a_hypothesis_core_with_a_formula_that_is_no_conjunct_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seeded bug: z3's "core" holds the wrong goal itself (then any query would be
    unsat). It is none of the hypothesis' conjuncts: refused, nothing asked of cvc5."""
    _no_instances(monkeypatch)
    hyp, _, wrong = _coreq()
    asked: list[object] = []
    monkeypatch.setattr(cvc5hot, "hyp_core", lambda h, n, seed=0: [hyp[0], wrong])

    def ask(*a: object) -> str:
        asked.append(a)
        return "unsat"

    monkeypatch.setattr(cvc5hot, "_ask", ask)
    assert cvc5hot.hyp_cores(hyp, wrong) == ("unknown", "hypothesis core: " + cvc5hot.NOT_CONJUNCTS)
    assert asked == []
    assert cvc5hot.confirm(hyp, wrong, shape=False)[0] != "unsat"


def test_a_wrong_goal_is_not_confirmed_though_z3_gave_a_hypothesis_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seeded bugs: z3 "says unsat" on the wrong goal ``forall z. b[z] > 0`` and
    names every conjunct; and a core that lost a conjunct the right goal needs. cvc5
    does not confirm either (unknown, quantifiers left): not confirmed. And cvc5 (a
    stand-in) leaving a right core unknown is not counted either."""
    _no_instances(monkeypatch)
    hyp, goal, wrong = _coreq()
    neg = cvc5hot.negated_goal(wrong, [*hyp, wrong])
    assert neg is not None and isinstance(cvc5hot.hyp_core(hyp, neg, 2000), str)  # (no core)
    monkeypatch.setattr(cvc5hot, "hyp_core", lambda h, n, seed=0: cvc5hot.conjuncts(h))
    monkeypatch.setattr(cvc5hot, "PROOF_MS", 2000)  # (z3 unknown on the wrong goal)
    assert cvc5hot.hyp_cores(hyp, wrong) == (
        "unknown",
        "hypothesis core: cvc5 unknown on a core (4 of 4 conjuncts), then z3 sat on 3 "
        "candidates, then z3 unknown recording its proof",
    )
    monkeypatch.setattr(cvc5hot, "hyp_core", lambda h, n, seed=0: [hyp[1]])
    assert cvc5hot.hyp_cores(hyp, goal)[1].startswith("hypothesis core: cvc5 unknown on a core")
    monkeypatch.setattr(cvc5hot, "hyp_core", lambda h, n, seed=0: [hyp[0], hyp[1]])
    monkeypatch.setattr(cvc5hot, "_ask", lambda q, ms, again=1: "unknown")
    assert cvc5hot.confirm(hyp, goal, shape=False)[0] == "unknown"


def test_a_hypothesis_core_left_unknown_is_asked_as_its_instances(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """cvc5 (a stand-in for its real answer on ``touch``'s big cores) leaves every
    quantified query unknown: 3d then asks 3c's question on the core's two conjuncts
    alone (their 4 candidates, not the hypothesis' 6), and cvc5 proves z3's core of
    those instances. The seeded bug: the same with a wrong goal is not confirmed."""
    hyp, goal, wrong = _coreq()
    real = cvc5hot._ask

    def qf_only(q: list[z3.BoolRef], ms: int, again: int = 1) -> str:
        return "unknown" if cvc5more.quantified(cvc5more.export(q)) else real(q, ms, again)

    within: list[int] = []
    real_inst = cvc5hot._instance_core

    def spy(h: list[z3.BoolRef], w: list[z3.BoolRef], n: list[z3.BoolRef], ms: int) -> str | None:
        within.append(len(cvc5hot.candidates(w, cvc5hot.candidate_terms(w, n))))
        return real_inst(h, w, n, ms)

    monkeypatch.setattr(cvc5hot, "_ask", qf_only)
    monkeypatch.setattr(cvc5hot, "_instance_core", spy)
    monkeypatch.setattr(cvc5hot, "HYP_CORE_MS", 2000)  # (z3 unknown on the wrong goal)
    assert cvc5hot.hyp_cores(hyp, goal) == ("unsat", "hypothesis core")
    assert within == [4]
    assert cvc5hot.hyp_cores(hyp, wrong)[0] == "unknown"


def test_a_core_cvc5_leaves_open_is_asked_again_with_another_seed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """z3 (a stand-in) names a core that lacks a conjunct the goal needs with seed 0, and
    the right one with seed 1: the second is confirmed. The seeded bug, one seed only
    (``HYP_CORE_SEEDS`` 1), leaves it open (3c on the first core stands in as failing).
    The same core twice is asked once."""
    hyp, goal, _ = _coreq()
    cores = {0: [hyp[1]], 1: [hyp[0], hyp[1]]}
    asked: list[int] = []
    real = cvc5hot._ask

    def ask(q: list[z3.BoolRef], ms: int, again: int = 1) -> str:
        asked.append(len(q))
        return real(q, ms, again)

    monkeypatch.setattr(cvc5hot, "hyp_core", lambda h, n, seed=0: cores.get(seed, cores[0]))
    monkeypatch.setattr(cvc5hot, "_ask", ask)
    monkeypatch.setattr(cvc5hot, "_instance_core", lambda h, w, n, ms: "z3 sat")
    assert cvc5hot.hyp_cores(hyp, goal) == ("unsat", "hypothesis core")
    monkeypatch.setattr(cvc5hot, "HYP_CORE_SEEDS", 1)
    assert cvc5hot.hyp_cores(hyp, goal)[0] == "unknown"
    asked.clear()
    cores[1] = [hyp[1]]
    monkeypatch.setattr(cvc5hot, "HYP_CORE_SEEDS", 3)
    v, how = cvc5hot.hyp_cores(hyp, goal)
    assert v == "unknown" and how.startswith("hypothesis core: cvc5 unknown on a core (1 of 4")
    assert asked == [2]  # (the one core and the negated goal, asked once for three seeds)


def test_a_part_left_unconfirmed_is_split_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The goal ``p1 and (p2 and p3)`` split into two parts (the cap at 2, as 3b's cap
    leaves ``touch``'s last part whole); z3 (a stand-in) answers nothing on a part that
    holds both ``p2`` and ``p3``: split again, each of ``p2`` and ``p3`` is confirmed.
    The seeded bugs: no second split (``SPLIT_AGAIN`` 1) leaves it unknown; a wrong
    conjunct in the second split's parts is not confirmed."""
    ps = z3.Ints("p1 p2 p3")
    hyp = [z3.And(*[p > 0 for p in ps])]
    goal = z3.And(ps[0] >= 1, z3.And(ps[1] >= 1, ps[2] >= 1))
    wrong = z3.And(ps[0] >= 1, z3.And(ps[1] >= 1, ps[2] >= 2))
    real = cvc5hot.hyp_core

    def picky(h: list[z3.BoolRef], neg: list[z3.BoolRef], seed: int = 0) -> list[z3.BoolRef] | str:
        text = str(neg)
        return "unknown" if "p2" in text and "p3" in text else real(h, neg, seed=seed)

    real_deletion = cvc5hot.deletion_core

    def picky_deletion(start: list[z3.BoolRef], neg: list[z3.BoolRef]) -> list[z3.BoolRef] | str:
        text = str(neg)
        return "unknown" if "p2" in text and "p3" in text else real_deletion(start, neg)

    monkeypatch.setattr(cvc5hot, "hyp_core", picky)
    monkeypatch.setattr(cvc5hot, "deletion_core", picky_deletion)
    monkeypatch.setattr(cvc5hot, "INSTANCE_PARTS", 2)
    assert cvc5hot.hyp_cores(hyp, goal) == ("unsat", "hypothesis core: 3 parts")
    v, how = cvc5hot.hyp_cores(hyp, wrong)
    assert v == "unknown" and how.endswith("(split again): a part of 2"), how
    monkeypatch.setattr(cvc5hot, "SPLIT_AGAIN", 1)
    assert cvc5hot.hyp_cores(hyp, goal) == ("unknown", "hypothesis core: z3 unknown: a part of 2")


def test_the_deletion_core_drops_what_z3_does_not_need_and_keeps_what_it_does() -> None:
    """Without tracking literals, z3 proves the goal from ``a``'s and ``b``'s conjuncts
    alone: the two others are dropped, and each of those two is kept (without it z3
    says sat). On the wrong goal there is no core (z3's answer)."""
    hyp, goal, wrong = _coreq()
    neg = cvc5hot.negated_goal(goal, [*hyp, goal])
    bad = cvc5hot.negated_goal(wrong, [*hyp, wrong])
    assert neg is not None and bad is not None
    got = cvc5hot.deletion_core(hyp, neg)
    assert isinstance(got, list) and [str(h) for h in got] == [str(hyp[0]), str(hyp[1])]
    assert cvc5hot.deletion_core(hyp, bad, 2000) in ("sat", "unknown")


def test_the_deletion_cores_later_checks_get_three_times_the_firsts_time() -> None:
    """A first check of 0.5 s gives the later ones 1.5 s; a fast one still 1 s; a slow one
    no more than the first's limit. The seeded bug (every check at the first's limit,
    10 s per kept conjunct) fails the first two."""
    assert cvc5hot.deletion_later_ms(10000, 500) == 1500
    assert cvc5hot.deletion_later_ms(10000, 100) == 1000
    assert cvc5hot.deletion_later_ms(10000, 5000) == 10000


def _untracked_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """z3 (a stand-in) finds no core with its tracking literals, as on ``touch``'s posts
    at 3 entries, where it proves the same query untracked."""
    monkeypatch.setattr(cvc5hot, "hyp_core", lambda h, n, seed=0: "unknown")


def test_a_goal_z3_leaves_unknown_tracked_is_confirmed_on_its_deletion_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No tracked core at all: the deletion core (the two conjuncts the goal needs) is
    asked of cvc5, which proves it. The seeded bugs: the wrong goal is not confirmed
    (no deletion core; the seed loop's "z3 unknown" is the answer), and without the
    deletion step (a stand-in that always fails) neither is the right one."""
    _untracked_only(monkeypatch)
    hyp, goal, wrong = _coreq()
    asked: list[tuple[int, int]] = []
    real = cvc5hot._ask

    def ask(q: list[z3.BoolRef], ms: int, again: int = 1) -> str:
        asked.append((len(q), ms))
        return real(q, ms, again)

    monkeypatch.setattr(cvc5hot, "_ask", ask)
    monkeypatch.setattr(cvc5hot, "DELETION_MS", 2000)  # (z3 unknown on the wrong goal)
    assert cvc5hot.hyp_cores(hyp, goal) == ("unsat", "hypothesis core")
    # (the two conjuncts and the negated goal, at the deletion core's longer limit)
    assert asked == [(3, cvc5hot.DELETION_CVC5_MS)]
    v, how = cvc5hot.hyp_cores(hyp, wrong)
    assert v == "unknown" and how.startswith("hypothesis core: z3 unknown"), how
    monkeypatch.setattr(cvc5hot, "deletion_core", lambda s, n: "unknown")
    assert cvc5hot.hyp_cores(hyp, goal)[0] == "unknown"


def test_a_deletion_core_that_is_no_subset_or_lost_a_conjunct_is_not_confirmed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seeded bugs in the deletion step: a "core" holding the wrong goal itself is
    refused (nothing asked of cvc5); one that dropped a conjunct the goal needs is left
    unknown by cvc5 (then 3c on it, which cannot find the dropped one either)."""
    _untracked_only(monkeypatch)
    hyp, goal, wrong = _coreq()
    asked: list[object] = []
    monkeypatch.setattr(cvc5hot, "deletion_core", lambda s, n: [hyp[0], wrong])
    monkeypatch.setattr(cvc5hot, "_ask", lambda *a: asked.append(a) or "unsat")
    assert cvc5hot.hyp_cores(hyp, wrong) == ("unknown", "hypothesis core: " + cvc5hot.NOT_CONJUNCTS)
    assert asked == []
    monkeypatch.undo()
    _untracked_only(monkeypatch)
    monkeypatch.setattr(cvc5hot, "deletion_core", lambda s, n: [hyp[1]])
    v, how = cvc5hot.hyp_cores(hyp, goal)
    assert v == "unknown" and how.startswith("hypothesis core: cvc5 unknown on a core (1 of 4"), how


def test_a_tracked_core_cvc5_leaves_open_is_made_smaller_by_deletion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """z3 (a stand-in) names every conjunct with each seed, a core cvc5 (a stand-in for
    its answer on ``touch``'s cores of 10 and more) leaves open; the deletion core drops
    ``c``'s and ``e``'s, starting from that core, and cvc5 proves the two left."""
    hyp, goal, _ = _coreq()
    monkeypatch.setattr(cvc5hot, "hyp_core", lambda h, n, seed=0: cvc5hot.conjuncts(h))
    real = cvc5hot._ask
    starts: list[int] = []
    real_deletion = cvc5hot.deletion_core

    def deletion(start: list[z3.BoolRef], neg: list[z3.BoolRef]) -> list[z3.BoolRef] | str:
        starts.append(len(start))
        return real_deletion(start, neg)

    def ask(q: list[z3.BoolRef], ms: int, again: int = 1) -> str:
        return "unknown" if len(q) > 3 else real(q, ms, again)

    monkeypatch.setattr(cvc5hot, "_ask", ask)
    monkeypatch.setattr(cvc5hot, "deletion_core", deletion)
    assert cvc5hot.hyp_cores(hyp, goal) == ("unsat", "hypothesis core")
    assert starts == [4]


def test_the_benchmark_asks_one_step_of_the_chosen_queries(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``benchmarks/hot_cvc5.py METHOD --step 3d --queries ...`` (how docs/06-z3.md's 3d
    figures were made) asks the step of the proved queries at the given positions only,
    and counts what it confirmed; a query z3 did not prove is not asked. The seeded bug,
    the positions ignored, asks the third query and counts it."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "hot_cvc5.py"
    spec = importlib.util.spec_from_file_location("hot_cvc5", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    hyp, goal, wrong = _coreq()
    rec: list[Record] = [
        ("pool touch L=2 (post: a)", hyp, goal, "proved"),
        ("pool touch L=2 (post: b)", hyp, wrong, "unknown"),
        ("pool touch L=2 (post: c)", hyp, goal, "proved"),
    ]
    asked: list[str] = []

    def step(h: list[z3.BoolRef], g: z3.BoolRef) -> tuple[str, str]:
        asked.append(str(g))
        return "unsat", "hypothesis core"

    assert bench.one_step(rec, step, "0,1") == 0
    out = capsys.readouterr().out
    assert len(asked) == 1 and "0 pool touch L=2 (post: a): unsat (hypothesis core)" in out
    assert out.rstrip().endswith("1 of 1 confirmed by the step alone")
    assert bench.STEPS["3d"] is cvc5hot.hyp_cores


# -- step 3e: z3's own instances, decided by Yices ------------------------------------------


def test_the_proof_names_the_terms_z3_instantiated_at() -> None:
    """z3's proof of ``b[a[sk!0]] > 0`` instantiates ``a``'s quantifier at ``sk!0`` and
    ``b``'s at ``a[sk!0]`` (round 2 of 3c's terms, found here by z3 itself); on the
    wrong goal there is no proof, and z3's answer is returned."""
    hyp, goal, wrong = _coreq()
    neg = cvc5hot.negated_goal(goal, [*hyp, goal])
    bad = cvc5hot.negated_goal(wrong, [*hyp, wrong])
    assert neg is not None and bad is not None
    terms = cvc5hot.proof_terms(hyp[:2], neg)
    assert isinstance(terms, tuple)
    assert {"sk!0", "a[sk!0]"} <= {str(t) for t in terms}
    assert cvc5hot.proof_terms(hyp, bad, 2000) in ("sat", "unknown")


def _cvc5_open(monkeypatch: pytest.MonkeyPatch) -> None:
    """cvc5 (a stand-in for its answer on ``touch``'s posts at 3 entries) leaves every
    query open."""
    monkeypatch.setattr(cvc5hot, "_ask", lambda q, ms, again=1: "unknown")


def test_a_part_cvc5_leaves_open_is_confirmed_by_yices_on_z3s_instances(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """cvc5 leaves each core open; z3's proof of the smallest core (``a``'s and ``b``'s)
    names the terms, the two conjuncts are instantiated at them, and Yices proves the
    instances. The row names the step. The seeded bug: the wrong goal is not confirmed."""
    _cvc5_open(monkeypatch)
    hyp, goal, wrong = _coreq()
    assert cvc5hot.hyp_cores(hyp, goal) == ("unsat", "Yices on z3's instances: 1 by Yices")
    monkeypatch.setattr(cvc5hot, "DELETION_MS", 2000)
    monkeypatch.setattr(cvc5hot, "HYP_CORE_MS", 2000)
    monkeypatch.setattr(cvc5hot, "PROOF_MS", 2000)
    assert cvc5hot.hyp_cores(hyp, wrong)[0] == "unknown"
    monkeypatch.setattr(cvc5hot, "instantiated", lambda h, g: ("unknown", "instances"))
    monkeypatch.setattr(cvc5hot, "cores", lambda h, g: ("unknown", "cores"))
    by_method, _ = cvc5hot.tally([("pool touch L=3 (post: p)", hyp, goal, "proved")])
    assert by_method["touch"].line("touch") == "touch 1 of 1 (1 Yices on z3's instances)"


def test_instances_at_terms_z3_did_not_use_or_of_no_hypothesis_are_not_confirmed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seeded bugs in step 3e: the proof's terms lost (none: the quantified conjuncts
    stay, and Yices is not asked), or replaced by one the goal does not need (Yices says
    sat); an "instance" whose source is the goal itself is refused, Yices not asked."""
    from kvpool.proofs import yices

    _cvc5_open(monkeypatch)
    hyp, goal, _ = _coreq()
    neg = cvc5hot.negated_goal(goal, [*hyp, goal])
    assert neg is not None
    core = hyp[:2]
    assert cvc5hot.proof_instance_core(hyp, core, neg) is None
    monkeypatch.setattr(cvc5hot, "proof_terms", lambda fs, n, ms=None: ())
    why = cvc5hot.proof_instance_core(hyp, core, neg)
    assert why is not None and why.startswith("Yices refused (a quantifier or lambda")
    monkeypatch.setattr(cvc5hot, "proof_terms", lambda fs, n, ms=None: (z3.Int("e"),))
    assert cvc5hot.proof_instance_core(hyp, core, neg) == "Yices sat on z3's 2 instances"
    asked: list[object] = []
    monkeypatch.setattr(yices, "ask", lambda q, ms: asked.append(q) or "unsat")
    forged = cvc5hot.Instance(goal, (z3.Int("e"),), z3.BoolVal(False))
    monkeypatch.setattr(cvc5hot, "candidates", lambda w, t: [forged])
    assert cvc5hot.proof_instance_core(hyp, core, neg) == cvc5hot.REFUSED
    assert asked == []
    assert cvc5hot.hyp_cores(hyp, goal) == ("unknown", "hypothesis core: " + cvc5hot.REFUSED)


def test_the_terms_z3_proves_the_instances_without_are_dropped() -> None:
    """Of ``sk!0``, ``e`` and ``a[sk!0]``, z3 proves the goal from the instances at the
    first and last alone: ``e`` is dropped, each of the two others kept (without it z3
    says sat). Where z3 does not prove the instances at all the terms (the wrong goal),
    every term is kept: nothing is chosen."""
    hyp, goal, wrong = _coreq()
    neg = cvc5hot.negated_goal(goal, [*hyp, goal])
    bad = cvc5hot.negated_goal(wrong, [*hyp, wrong])
    assert neg is not None and bad is not None
    sk = constants(neg)["sk!0"]
    a = z3.Array("a", z3.IntSort(), z3.IntSort())
    terms = (sk, z3.Int("e"), a[sk])
    assert [str(t) for t in cvc5hot.needed_terms(hyp[:2], terms, neg)] == ["sk!0", "a[sk!0]"]
    assert cvc5hot.needed_terms(hyp[:2], terms, bad) == terms
