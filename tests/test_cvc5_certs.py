"""cvc5 on Spacer's invariants, BMC's unrolled queries, the hot paths, two pools for every
N and the sorted state (proofs/cvc5certs.py, proofs/cvc5more.py).

Each path is shown able to fail: a certificate that lost Spacer's invariant, a BMC query
that lost its unrolling, a query split on a wrong case. The tests on the real encodings
take seconds each: they run with KVPOOL_DEEP=1 (the rest are toy queries, well under 1 s).
"""

from __future__ import annotations

import json
import os

import pytest
import z3  # type: ignore[import-untyped]

from kvpool.proofs import cvc5cases, cvc5certs, cvc5more, runner, smtlib, twopool
from kvpool.proofs.model import Record
from kvpool.verify import proof_checks

deep = pytest.mark.skipif(
    os.environ.get("KVPOOL_DEEP") != "1",
    reason="real encodings, seconds each: run with KVPOOL_DEEP=1",
)


def _toy_spacer() -> tuple[z3.BoolRef, dict[str, cvc5certs.Query]]:
    """A counter that starts at 0 and steps by 2 never reaches 1: Spacer's invariant and
    the three queries of its certificate."""
    x, x2 = z3.Int("x"), z3.Int("x2")
    fp = z3.Fixedpoint()
    fp.set(engine="spacer")
    reach = z3.Function("Reach", z3.IntSort(), z3.BoolSort())
    fp.register_relation(reach)
    fp.declare_var(x, x2)
    fp.rule(reach(0))
    fp.rule(reach(x + 2), [reach(x)])
    assert fp.query(z3.And(reach(x), x == 1)) == z3.unsat
    inv = fp.get_cover_delta(-1, reach)
    qs = cvc5certs.spacer_queries(
        inv, [x], [z3.IntVal(0)], [x + 2], z3.BoolVal(True), x != 1, False
    )
    return inv, qs


def test_spacers_invariant_is_certified_by_both_solvers() -> None:
    _, qs = _toy_spacer()
    assert list(qs) == list(cvc5certs.SPACER_CHECKS)
    certs = cvc5certs.confirm(qs, 5000)
    assert [(z, c) for _, z, c, *_ in certs] == [("unsat", "unsat")] * 3
    assert cvc5certs.verdict(certs) == "agree"
    row = cvc5certs.spacer_row([(2, "every obligation", "proved", certs)], 0.1)
    assert row["status"] == "agree" and "N=2 (every obligation): 1 of 1" in row["bounds"]


def test_a_certificate_that_lost_the_invariant_fails_the_run() -> None:
    """The seeded bug: Spacer said proved, the exported invariant is ``true``. Inv => P
    is then sat (a state with x == 1), the row says disagree, and the dashboard's
    second-solver line fails."""
    x = z3.Int("x")
    qs = cvc5certs.spacer_queries(
        z3.BoolVal(True), [x], [z3.IntVal(0)], [x + 2], z3.BoolVal(True), x != 1, False
    )
    certs = cvc5certs.confirm(qs, 5000)
    assert certs[2][1:3] == ["sat", "sat"]
    row = runner.ObligationResult(**cvc5certs.spacer_row([(2, "x", "proved", certs)], 0.1))
    assert row.status == "disagree" and not row.ok
    assert "does not hold: N=2 x: Inv => P: z3 sat, cvc5 sat" in row.replay
    (second,) = [c for c in proof_checks([row]) if c.name.startswith("cvc5 re-checks")]
    assert not second.ok


def test_an_invariant_that_is_not_inductive_is_caught_too() -> None:
    x = z3.Int("x")
    inv = z3.Var(0, z3.IntSort()) <= 4  # true at init, implies x != 1 ... not inductive
    wrong = z3.And(inv, z3.Var(0, z3.IntSort()) != 1)
    qs = cvc5certs.spacer_queries(
        wrong, [x], [z3.IntVal(0)], [x + 2], z3.BoolVal(True), x != 1, False
    )
    got = {q: (z, c) for q, z, c, *_ in cvc5certs.confirm(qs, 5000)}
    assert got["Inv and T => Inv'"] == ("sat", "sat")
    assert got["Init => Inv"] == got["Inv => P"] == ("unsat", "unsat")


def test_the_rows_say_not_confirmed_and_not_run_apart() -> None:
    open_ = [["Init => Inv", "unsat", "unknown", "60.0", "whole"]]
    row = cvc5certs.spacer_row([(5, "every state obligation", "proved", open_)], 1.0)
    assert row["status"] == "partly-confirmed" and "NOT confirmed: 1" in row["bounds"]
    none = cvc5certs.spacer_row([(6, "every obligation", "timeout", [])], 1.0)
    assert none["status"] == "not-run"
    assert cvc5certs.bmc_row_dict(1, 1, 1, [], 0.0)["status"] == "not-run"
    bad = cvc5certs.bmc_row_dict(
        1, 1, 1, [["INV-FREE @ step 1", "unsat", "sat", "0", "whole"]], 0.0
    )
    assert bad["status"] == "disagree" and "INV-FREE @ step 1: z3 unsat, cvc5 sat" in bad["replay"]


def test_a_spacer_child_killed_while_certifying_keeps_its_answer() -> None:
    """The child prints Spacer's answers before it checks their certificates: killed
    then, the answers stand (a proved row stays proved) and the certificate is not
    confirmed (never counted as confirmed)."""
    from dataclasses import asdict

    from kvpool.proofs import spacer

    ans = spacer.Answer("all", 5, "proved", 12.0, cpu=4.0)
    partial = (json.dumps({"all": asdict(ans)}) + "\n").encode()
    got = spacer._answers(partial, ("all",))
    assert got is not None and got["all"].status == "proved" and got["all"].cert == []
    assert spacer._answers(b"", ("all",)) is None
    row = cvc5certs.spacer_row([(5, "every obligation", "proved", [])], 0.0)
    assert row["status"] == "partly-confirmed" and "certificate not checked" in row["replay"]
    # killed while asking the certificate: what it streamed so far is kept, not confirmed
    so_far = [["Init => Inv", "unsat", "unsat", "0.1", "2 parts"]]
    so_far += [[q, cvc5certs.NOT_ASKED, cvc5certs.NOT_ASKED, "0.0", "stopped"] for q in "AB"]
    streamed = asdict(spacer.Answer("all", 5, "proved", 12.0, cert=so_far))
    got = spacer._answers(json.dumps({"all": streamed}).encode(), ("all",))
    assert got is not None and cvc5certs.verdict(got["all"].cert) == "unknown"
    row = cvc5certs.spacer_row([(5, "every obligation", "proved", got["all"].cert)], 0.0)
    assert row["status"] == "partly-confirmed" and "A: z3 not asked" in row["replay"]


# -- the certificate asked one conjunct at a time, incrementally (confirm_clauses) ------------


def _shift_register(lemmas: list[z3.BoolRef]) -> dict[str, cvc5certs.Query]:
    """x, y start at 0; a step sets x to y and y to 0; P: x == 0. Its invariant is the
    two lemmas ``x == 0`` and ``y == 0``: the first is not inductive without the second."""
    x, y = z3.Ints("x y")
    inv = z3.And(lemmas) if len(lemmas) > 1 else lemmas[0]
    return cvc5certs.spacer_queries(
        inv, [x, y], [z3.IntVal(0)] * 2, [y, z3.IntVal(0)], z3.BoolVal(True), x == 0, False
    )


def test_the_certificate_is_confirmed_lemma_by_lemma() -> None:
    v0, v1 = z3.Var(0, z3.IntSort()), z3.Var(1, z3.IntSort())
    seen: list[list[cvc5certs.Verdict]] = []
    certs = cvc5certs.confirm_clauses(_shift_register([v0 == 0, v1 == 0]), 5000, 5000, seen.append)
    assert [(z, c) for _, z, c, *_ in certs] == [("unsat", "unsat")] * 3
    assert "2 parts, incremental, one at a time: 2 unsat" in certs[1][4]
    assert cvc5certs.verdict(certs) == "agree" and seen[-1] == certs
    # (streamed as it goes: the first report names the queries not asked yet)
    assert [c[2] for c in seen[0]] == ["unsat", cvc5certs.NOT_ASKED, cvc5certs.NOT_ASKED]
    assert cvc5certs.verdict(seen[0]) == "unknown"


def test_a_dropped_lemma_makes_one_part_sat_and_fails_the_row() -> None:
    """The seeded bug: the invariant without its lemma ``y == 0``. Then ``x' == 0``
    (x' is y) does not follow: that part is sat to cvc5, the query sat to z3 too, and the
    row says disagree."""
    v0 = z3.Var(0, z3.IntSort())
    certs = cvc5certs.confirm_clauses(_shift_register([v0 == 0]), 5000, 5000)
    got = {q: (z, c) for q, z, c, *_ in certs}
    assert got["Inv and T => Inv'"] == ("sat", "sat")
    assert got["Init => Inv"] == got["Inv => P"] == ("unsat", "unsat")
    row = runner.ObligationResult(**cvc5certs.spacer_row([(2, "x", "proved", certs)], 0.1))
    assert row.status == "disagree" and not row.ok


def test_a_part_that_simplifies_away_is_still_asked() -> None:
    """A part ``false`` (its ``g => not false`` simplifies to true, the g gone from the
    text) is sat whenever the hypothesis is; a part ``true`` is unsat."""
    x = z3.Int("x")
    assert cvc5certs.ask_clauses([x > 0], [z3.BoolVal(True), z3.BoolVal(False)]) == [
        "unsat",
        "sat",
    ]


# -- a conjunct cvc5 leaves unknown, asked case by case on the call's kind -------------------


def _kinds_toy(third: int = 0) -> tuple[list[z3.BoolRef], list[z3.BoolRef], list[z3.BoolRef]]:
    """A counter x stepped by a call of kind k in 0..2 (its domain): +2, +4, or
    ``third``. Its invariant's clauses ``x even`` and ``x >= 0``: the step query's
    hypotheses, its two conjuncts (the clauses after the step), and the kind's cases."""
    x, k = z3.Ints("x k")
    post = z3.If(k == 0, x + 2, z3.If(k == 1, x + 4, x + third))
    hyp = [z3.And(x % 2 == 0, x >= 0), z3.And(k >= 0, k < 3)]
    return hyp, [post % 2 == 0, post >= 0], [k == c for c in range(3)]


def test_a_conjunct_is_confirmed_case_by_case_on_the_calls_kind() -> None:
    hyp, parts, kinds = _kinds_toy()
    assert cvc5certs.covers(hyp, kinds) == "unsat"
    assert [cvc5certs.ask_cases(hyp, p, kinds) for p in parts] == ["unsat", "unsat"]


def test_a_case_split_missing_a_kind_is_caught_by_its_coverage() -> None:
    """The seeded bug: the cases leave out kind 2. Coverage is sat (a model with k = 2),
    so no conjunct is asked by cases and each stays unknown: never confirmed."""
    hyp, parts, kinds = _kinds_toy()
    assert cvc5certs.covers(hyp, kinds[:2]) == "sat"
    vs = ["unknown", "unknown"]
    how = cvc5certs._by_cases(hyp, parts, vs, kinds[:2])
    assert vs == ["unknown", "unknown"] and "coverage of the 2 cases sat" in how


def test_a_wrong_step_is_sat_in_its_case_and_fails_the_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seeded bug: kind 2 steps by 1, so ``x' even`` does not follow. The
    incremental asks are made to give up (as cvc5 does on N=6's two conjuncts): the
    case split still finds the model, in case k = 2, and the certificate disagrees;
    with the right step, the same path confirms it."""

    def gave_up(hyp: list[z3.BoolRef], parts: list[z3.BoolRef], *_: object) -> list[str]:
        return ["unknown"] * len(parts)

    monkeypatch.setattr(cvc5certs, "ask_clauses", gave_up)
    monkeypatch.setattr(cvc5certs, "LEFTOVERS", 0)  # (no ask alone after the cases)
    for third, want in ((6, "unsat"), (1, "sat")):
        hyp, parts, kinds = _kinds_toy(third)
        qs = {"Inv and T => Inv'": (hyp, parts[0])}
        (cert,) = cvc5certs.confirm_clauses(qs, 5000, 5000, cases={"Inv and T => Inv'": kinds})
        assert cert[2] == want, cert
        assert "case by case on the call's kind (3 cases, coverage unsat)" in cert[4]
    assert cvc5certs.verdict([cert]) == "disagree"


# -- a query split on its ite conditions ---------------------------------------------------


def _ite_query() -> tuple[list[z3.BoolRef], z3.BoolRef, z3.BoolRef]:
    """A goal over ``select(ite(c, A, B), i)`` under a quantifier, as a branch join in
    the pool's source leaves it."""
    a, b = (z3.Array(n, z3.IntSort(), z3.IntSort()) for n in "AB")
    c = z3.Bool("c")
    i = z3.Int("i")
    hyp = [c, z3.ForAll([i], a[i] >= 0)]
    goal = z3.ForAll([i], z3.If(c, a, b)[i] >= 0)
    return hyp, goal, c


def test_ite_atoms_are_the_closed_conditions_of_the_goal() -> None:
    _, goal, c = _ite_query()
    (atom,) = cvc5cases.ite_atoms(goal)
    assert atom.eq(c)
    i = z3.Int("i")
    bound = z3.ForAll([i], z3.If(i > 0, i, -i) >= 0)  # (uses the bound i: not a case)
    assert cvc5cases.ite_atoms(bound) == []


def test_a_case_split_on_an_ite_condition_confirms_and_can_fail() -> None:
    hyp, goal, _ = _ite_query()
    rec: list[Record] = [("toy ite", hyp, goal, "proved")]
    (g,) = cvc5more.groups(rec)
    assert cvc5more._cases(g, goal, 5000) == "unsat" and g.how.startswith("cases on ite")
    # the seeded bug: the hypothesis lost what it says of A; the case "c" has a model
    # (A negative somewhere), a model of the query: cvc5 says sat
    weak: list[Record] = [("toy ite", hyp[:1], goal, "proved")]
    (w,) = cvc5more.groups(weak)
    assert cvc5more._cases(w, goal, 5000) == "sat"


def test_confirm_ite_is_what_the_refinement_rows_fall_back_on() -> None:
    hyp, goal, _ = _ite_query()
    got = cvc5cases.confirm_ite(hyp, goal, 5000)
    assert got is not None and got[0] == "unsat" and got[1].startswith("cases on ite")
    weak = cvc5cases.confirm_ite(hyp[:1], goal, 5000)  # (the seeded bug, as above)
    assert weak is not None and weak[0] == "sat"
    x = z3.Int("x")
    assert cvc5cases.confirm_ite([x > 0], x >= 1) is None  # (no ite: no case split)


# -- the dashboard's parts -------------------------------------------------------------------


def test_the_new_parts_are_named_apart_on_the_dashboard() -> None:
    def r(ob: str, kind: str, tech: str, bounds: str, status: str) -> runner.ObligationResult:
        return runner.ObligationResult(ob, kind, tech, ("INV-REF",), bounds, status, 0.0)

    rows = [
        r("S and T => POOL-FRAME (two pools, every N)", "inductive", "z3 induction", "x", "proved"),
        r("INV-REF (two pools)", "fixed-N", runner.FIXEDN_TECHNIQUE, "two pools", "proved"),
        r("BlockPool.free_blocks does", "hot-source", runner.SOURCE_TECHNIQUE, "L", "proved"),
        r(
            "RES-CACHED",
            "inductive",
            "z3 induction",
            "every N, every list length; keys and watcher ids uninterpreted sorts",
            "proved",
        ),
        r("every obligation (Spacer, N=3)", "spacer", runner.SPACER_TECHNIQUE, "N=3", "proved"),
        r("INV-REF", "BMC", "z3 BMC", "N=4 k=4", "proved"),
        r(f"cvc5 re-checks {cvc5more.FAMILIES['twopooln']}", "second solver", "c", "", "agree"),
        r(
            f"cvc5 re-checks {cvc5more.FAMILIES['hot-source']}",
            "second solver",
            "c",
            "",
            "partly-confirmed",
        ),
        r("cvc5 re-checks Spacer's invariant", "second solver", "c", "", "agree"),
        r("cvc5 re-checks BMC at N=4, k<=4", "second solver", "c", "", "disagree"),
    ]
    note = cvc5more.solvers_note(rows)
    assert "twopooln (1 rows): z3 + cvc5" in note
    assert "twopool (1 rows): z3 only" in note
    assert "hot-source (1 rows): z3 + cvc5 (partly)" in note
    assert "symsorts (1 rows): z3 only" in note
    assert "z3 Spacer (fixed N) (1 rows): z3 + cvc5" in note
    assert "z3 BMC (1 rows): z3, cvc5 DISAGREES at N=4, k<=4 only" in note


def test_symsorts_records_are_a_family_of_their_own() -> None:
    x = z3.Int("x")
    recs: list[Record] = [
        ("symsorts: RES-CACHED / init", [x > 0], x >= 1, "proved"),
        ("symlists: PERM / Touch / step", [x > 0], x >= 0, "proved"),
    ]
    fams = cvc5more.split_symsorts(recs)
    assert [r[0] for r in fams["symsorts"]] == ["symsorts: RES-CACHED / init"]
    assert [r[0] for r in fams["symlists"]] == ["symlists: PERM / Touch / step"]
    assert set(fams) <= set(cvc5more.FAMILIES)


def test_the_deep_profile_certifies_spacer_and_make_verify_does_not() -> None:
    assert runner.PROFILES["deep"]["spacer_cvc5"] is True
    assert runner.PROFILES["default"]["spacer_cvc5"] is False
    assert runner.PROFILES["default"]["bmc_cvc5"] == ()
    assert runner.PROFILES["deep"]["bmc_cvc5"] == (3, 2, 2)
    assert {"twopooln", "symsorts", "hot-source"} <= set(runner.PROFILES["deep"]["cvc5_more"])


# -- the real encodings (KVPOOL_DEEP=1) -------------------------------------------------------


@deep
def test_spacers_real_invariant_is_certified_and_a_lost_one_is_not() -> None:
    from kvpool.proofs import spacer

    (ans,) = spacer.check(1, ("INV-FREE", "ORD-UNPIN"), together=True, certify=True).values()
    assert ans.status == "proved" and cvc5certs.verdict(ans.cert) == "agree", ans.cert
    (lost,) = spacer.check(1, ("INV-FREE",), certify=True, lose_invariant=True).values()
    assert lost.status == "proved"  # (Spacer's answer is right: its export is not)
    assert cvc5certs.verdict(lost.cert) == "disagree"
    assert lost.cert[2][:3] == ["Inv => P", "sat", "sat"]
    # another: Spacer's invariant at N=2 without its first lemma is not inductive
    (dropped,) = spacer.check(2, ("INV-FREE",), certify=True, drop_lemma=0).values()
    assert dropped.cert[1][:3] == ["Inv and T => Inv'", "sat", "sat"]
    assert cvc5certs.verdict(dropped.cert) == "disagree"


@deep
def test_spacers_real_step_query_by_the_calls_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    """On N=2's certificate for INV-FREE: the calls' kinds cover the step query's
    hypothesis (and all but one do not), a conjunct asked by kind is unsat, and with
    the invariant's first lemma dropped the conjunct that no longer follows is sat in
    one of its cases (a disagreement)."""
    from kvpool.proofs import spacer
    from kvpool.proofs.model import OPS

    got: list[tuple[dict[str, cvc5certs.Query], dict[str, list[z3.BoolRef]]]] = []

    def keep(qs: dict[str, cvc5certs.Query], **kw: object) -> list[cvc5certs.Verdict]:
        got.append((qs, kw["cases"]))  # type: ignore[arg-type]
        return []

    monkeypatch.setattr(cvc5certs, "confirm_clauses", keep)
    spacer.check(2, ("INV-FREE",), certify=True)
    spacer.check(2, ("INV-FREE",), certify=True, drop_lemma=0)
    step = cvc5certs.SPACER_CHECKS[1]
    (hyp, goal), kinds = got[0][0][step], got[0][1][step]
    assert len(kinds) == len(OPS) and list(got[0][1]) == [step]
    assert cvc5certs.covers(hyp, kinds) == "unsat"
    assert cvc5certs.covers(hyp, kinds[1:]) == "sat"  # (a kind left out: caught)
    assert cvc5certs.ask_cases(hyp, cvc5certs._parts(goal)[0], kinds) == "unsat"
    (hyp, goal), kinds = got[1][0][step], got[1][1][step]
    parts = cvc5certs._parts(goal)
    bad = cvc5certs.ask_clauses(hyp, parts).index("sat")
    assert cvc5certs.ask_cases(hyp, parts[bad], kinds) == "sat"


@deep
def test_bmcs_queries_are_confirmed_and_one_that_lost_its_unrolling_is_not() -> None:
    qs = cvc5certs.bmc_queries(1, 1, 1, ["INV-FREE"])
    assert list(qs) == ["INV-FREE @ step 1"]
    assert cvc5certs.verdict(cvc5certs.confirm(qs)) == "agree"
    # the seeded bug: the export keeps only the negated obligation (the unrolled
    # transition and the initial state lost): both solvers find a model
    ((_, goal),) = qs.values()
    lost = cvc5certs.confirm({"INV-FREE @ step 1": ([], goal)})
    assert cvc5certs.verdict(lost) == "disagree"
    row = runner.ObligationResult(**cvc5certs.bmc_row_dict(1, 1, 1, lost, 0.0))
    assert not row.ok


@deep
def test_bmc_row_runs_in_a_child() -> None:
    row = cvc5certs.bmc_isolated(1, 1, 1, ["INV-FREE", "ORD-UNPIN"])
    assert row["status"] == "agree", row
    assert "unsat on 2 of 2 step queries" in row["bounds"]


@deep
def test_get_new_blocks_post_at_3_is_confirmed_on_its_ite_condition() -> None:
    """The one hot-path query cvc5 left unknown whole, split and under every option
    (2026-12-06): settled case by case on its goal's ite condition."""
    from kvpool.proofs import pyhot
    from kvpool.proofs.model import recording

    with recording() as rec:
        pyhot.prove(("get_new_blocks",), None, 240000)
    mine = [r for r in rec if r[3] == "proved" and "L=3 (post: valid: the queue" in r[0]]
    assert mine
    row = cvc5more.row("hot-source", mine, cases=True, with_probe=False)
    assert row["status"] == "agree", row


def test_smtlib_reads_the_toy_certificate_as_z3_wrote_it() -> None:
    _, qs = _toy_spacer()
    hyp, goal = qs["Inv => P"]
    text = smtlib.to_smt2([*hyp, z3.Not(goal)])
    assert "(check-sat)" in text and smtlib.z3_check(text)[0] == "unsat"


# -- BMC's and Spacer's claims through the fixed-N certificate -------------------------------


def _certificate_rows(
    n: int = 4,
    cvc5: str = "agree",
    drop: str | None = None,
    bounds: str | None = None,
) -> list[runner.ObligationResult]:
    """The fixed-N induction's rows at N=n (every name of the certificate proved, but
    ``drop``, left unknown) and its cvc5 row (status ``cvc5``), as the fixedn part makes them."""
    fixed = bounds or f"{runner._fixedn_bounds(n)} (12 cases)"
    names = cvc5more.CERTIFICATE["two pools" if "two pools" in fixed else "one pool"]
    rows = [
        runner.ObligationResult(
            name,
            "fixed-N",
            runner.FIXEDN_TECHNIQUE,
            (name,),
            fixed,
            "unknown" if name == drop else "proved",
            0.0,
        )
        for name in names
    ]
    rows.append(
        runner.ObligationResult(
            f"cvc5 re-checks N={n}", "second solver", "cvc5", (), f"N={n}: ...", cvc5, 0.0
        )
    )
    return rows


def _bmc_rows(n: int = 4, keys: int = 2) -> list[runner.ObligationResult]:
    bounds = f"N={n} k={n} lists<=2 keys={keys} watchers=2 caching,events symbolic"
    return [
        runner.ObligationResult(o, "BMC", "z3 BMC", (o,), bounds, "proved", 0.0)
        for o in ("INV-REF", "INV-FREE", "ORD-UNPIN")
    ]


def test_bmc_and_spacer_claims_are_confirmed_through_the_fixedn_certificate() -> None:
    spacer_row = runner.ObligationResult(
        "every obligation (Spacer, N=4)",
        "spacer",
        runner.SPACER_TECHNIQUE,
        runner.spacer.OBLIGATIONS,
        runner._spacer_bounds(4),
        "proved",
        0.0,
    )
    note = cvc5more.solvers_note(_certificate_rows() + _bmc_rows() + [spacer_row])
    via = "through the fixed-N certificate (cvc5 re-checks N=4)"
    assert f"z3 BMC (3 rows): z3 + cvc5, every row's claim {via}" in note
    assert f"z3 Spacer (fixed N) (1 rows): z3 + cvc5, every row's claim {via}" in note
    # the bounds the runner writes are the ones the tie reads
    assert cvc5more.model_of(runner._spacer_bounds(3)) == ("one pool", (3, 2, 2, 2))
    assert cvc5more.model_of(runner._fixedn_bounds(6)) == ("one pool", (6, 2, 2, 2))
    assert cvc5more.model_of(twopool.bounds((3, 3))) == ("two pools", (3, 3, 2, 2, 2))


@pytest.mark.parametrize(
    "rows",
    [
        # a part of H the induction did not prove: no certificate
        _certificate_rows(drop="LO-HI") + _bmc_rows(),
        # cvc5 left a query at N=4 unconfirmed
        _certificate_rows(cvc5="unknown") + _bmc_rows(),
        # the runs BMC searched have more keys than the certificate's model
        _certificate_rows() + _bmc_rows(keys=3),
        # BMC at N=6, cvc5 confirmed the certificate at N=4 only
        _certificate_rows() + _bmc_rows(n=6),
        # the same numbers for two pools are another model
        _certificate_rows(bounds="N=4+4 (two pools), every k, lists<=2 keys=2 watchers=2")
        + _bmc_rows(),
    ],
    ids=["H-part-unknown", "cvc5-unknown", "other-keys", "other-N", "two-pools"],
)
def test_a_certificate_that_does_not_cover_the_bmc_rows_confirms_nothing(
    rows: list[runner.ObligationResult],
) -> None:
    assert "z3 BMC (3 rows): z3 only" in cvc5more.solvers_note(rows)


def test_bmc_rows_partly_covered_by_the_certificate_say_how_many() -> None:
    rows = _certificate_rows() + _bmc_rows() + _bmc_rows(n=6)
    note = cvc5more.solvers_note(rows)
    assert "z3 BMC (6 rows): z3 + cvc5 (partly): 3 of 6 rows' claims through" in note
    assert "the other 3: z3 only" in note


def test_two_pool_bmc_rows_are_confirmed_through_the_two_pool_certificate() -> None:
    def fixed(name: str, status: str = "proved") -> runner.ObligationResult:
        b = f"{twopool.bounds((3, 3))} (26 cases): proved for every k"
        return runner.ObligationResult(
            f"{name} (two pools)", "fixed-N", runner.FIXEDN_TECHNIQUE, (name,), b, status, 0.0
        )

    def cvc5_row(status: str) -> runner.ObligationResult:
        ob = f"cvc5 re-checks {cvc5more.FAMILIES['twopool']}"
        return runner.ObligationResult(ob, "second solver", "cvc5", (), "", status, 0.0)

    bmc = [
        runner.ObligationResult(
            f"{o} (two pools)",
            "BMC",
            "z3 BMC",
            (o,),
            "two pools N=3+3 k=3 lists<=2 keys=2 watchers=2",
            "proved",
            0.0,
        )
        for o in ("INV-FREE", "FREE-FORWARD")
    ]
    every = [fixed(n) for n in cvc5more.CERTIFICATE["two pools"]]
    good = cvc5more.solvers_note([*every, cvc5_row("agree"), *bmc])
    assert "z3 BMC (2 rows): z3 + cvc5, every row's claim through the fixed-N certificate" in good
    # the two-pool part's cvc5 row left something unconfirmed; DROP-GONE's step unproved
    for rows in (
        [*every, cvc5_row("partly-confirmed"), *bmc],
        [
            fixed(n, "unknown" if n == "DROP-GONE" else "proved")
            for n in cvc5more.CERTIFICATE["two pools"]
        ]
        + [cvc5_row("agree")]
        + bmc,
    ):
        assert "z3 BMC (2 rows): z3 only" in cvc5more.solvers_note(rows)
