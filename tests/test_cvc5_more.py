"""cvc5 on the two-pool, multi-key, symbolic-list and pool-source parts (proofs/cvc5more.py).

Each path is shown able to fail: a "proof" whose exported query lost an assumption
(seeded here) is a disagreement, the row fails, and so does ``make verify``'s
"second solver" line."""

from __future__ import annotations

import functools

import pytest
import z3  # type: ignore[import-untyped]

from kvpool.proofs import cvc5more, runner, smtlib, twopool
from kvpool.proofs.model import Record, recording
from kvpool.verify import proof_checks


@functools.cache
def _twopool_records() -> tuple[list[Record], list[z3.BoolRef]]:
    """The proved queries of one two-pool case (INV-REF, FreeBlocks from pool 0, at
    2+2 blocks), and the hypothesis conjuncts that are the pools' invariants."""
    st = twopool.build((2, 2))
    with recording() as rec:
        (g,) = twopool.step_goals(st, ("INV-REF",), 60000, ("FreeBlocks",), (0,))
    assert g.status == "proved"
    return [r for r in rec if r[3] == "proved"], list(st.hyp.values())


def test_a_real_twopool_case_is_confirmed_as_one_group() -> None:
    recs, _ = _twopool_records()
    assert len(recs) > 1  # the goal's conjuncts, one query each ...
    assert len(cvc5more.groups(recs)) == 1  # ... asked of cvc5 as one
    row = cvc5more.row("twopool", recs)
    assert row["status"] == "agree", row
    assert f"confirms {len(recs)} of {len(recs)} queries" in row["bounds"]
    assert "probe sat/sat" in row["bounds"]
    assert runner.ObligationResult(**row).ok


def test_a_dropped_assumption_is_a_disagreement_and_fails_the_run() -> None:
    """The seeded bug: the exported queries lose the pools' invariants (the hypothesis
    the step is proved from) while the records still say "proved". cvc5 finds a model,
    the row says "disagree", and the second-solver line of the dashboard fails."""
    recs, invariants = _twopool_records()
    ids = {h.get_id() for h in invariants}
    dropped = [
        (n, [h for h in hyp if h.get_id() not in ids], goal, st) for n, hyp, goal, st in recs
    ]
    # (z3 agrees that the weakened queries are not all valid: the seeded bug is a real one)
    hyp = dropped[0][1]
    weak = z3.Or(*[z3.Not(goal) for _, _, goal, _ in dropped])
    assert smtlib.z3_check(smtlib.to_smt2([*hyp, weak]))[0] == "sat"
    row = cvc5more.row("twopool", dropped)
    assert row["status"] == "disagree", row
    assert "cvc5 says sat (disagrees)" in row["replay"]
    result = runner.ObligationResult(**row)
    assert not result.ok
    (second,) = [c for c in proof_checks([result]) if c.name.startswith("cvc5 re-checks")]
    assert not second.ok
    assert "NOT ok" in second.summary


def test_halves_find_the_one_false_query_of_a_group() -> None:
    x = z3.Int("x")
    hyp = [x > 0]
    goals = [x >= 1, x > -5, x >= 2, x != 0]  # the third does not follow from x > 0
    recs: list[Record] = [("toy", hyp, g, "proved") for g in goals]
    (grp,) = cvc5more.groups(recs)
    cvc5more.confirm(grp)
    assert grp.verdicts[:3] == ["unsat", "unsat", "sat"]
    assert grp.how == "in halves"
    # and a mutant's records are not the part's proofs
    assert cvc5more.groups([("mutant: x", hyp, goals[2], "proved")]) == []


def test_a_multi_index_array_is_written_as_a_function_cvc5_reads() -> None:
    a = z3.Array("Cnt", z3.IntSort(), z3.IntSort(), z3.IntSort())
    i, j = z3.Ints("i j")
    q = [z3.ForAll([i], z3.Select(a, i, 0) == 0), z3.Select(a, j, 0) == 1]
    text = smtlib.to_smt2(q)
    assert "(Array Int Int Int)" in text
    assert cvc5more.ask(text)[0].startswith("refused")  # cvc5 1.4.2: "Illegal array type"
    out = cvc5more.uncurry_arrays(text)
    assert "(declare-fun Cnt (Int Int) Int)" in out and "select Cnt" not in out
    assert cvc5more.ask(out)[0] == "unsat"
    # the same query with the 1 made 0 is sat to both
    sat = smtlib.to_smt2([q[0], z3.Select(a, j, 0) == 0])
    assert cvc5more.ask(cvc5more.uncurry_arrays(sat))[0] == "sat"
    # an array that is stored into, or compared, is left as it is
    b = z3.Array("B", z3.IntSort(), z3.IntSort(), z3.IntSort())
    kept = smtlib.to_smt2([z3.Store(b, i, j, 1) == b])
    assert cvc5more.uncurry_arrays(kept) == kept


def test_a_part_is_recorded_only_when_the_profile_asks() -> None:
    x = z3.Int("x")
    with cvc5more.recorder(False, "two pools") as off:
        from kvpool.proofs.model import isolated_check

        isolated_check([x > 0], x >= 1, 5000)
    assert off == [] and cvc5more.rows("twopool", off, ()) == []
    with cvc5more.recorder(True, "two pools") as on:
        isolated_check([x > 0], x >= 1, 5000)
    assert [r[0] for r in on] == ["two pools"]
    (row,) = cvc5more.rows("twopool", on, ("twopool",))
    assert row["status"] == "agree"


def test_the_deep_profile_asks_every_part_and_make_verify_none() -> None:
    assert set(runner.PROFILES["deep"]["cvc5_more"]) == set(cvc5more.FAMILIES)
    assert runner.PROFILES["default"]["cvc5_more"] == ()
    assert runner.PROFILES["fast"]["cvc5_more"] == ()


def test_the_dashboard_says_which_solvers_confirmed_each_part() -> None:
    def r(ob: str, kind: str, tech: str, bounds: str, status: str) -> runner.ObligationResult:
        return runner.ObligationResult(ob, kind, tech, ("INV-REF",), bounds, status, 0.0)

    fixed = runner.FIXEDN_TECHNIQUE
    rows = [
        r("INV-REF", "fixed-N", fixed, "N=1, every k (3 cases)", "proved"),
        r("INV-REF", "fixed-N", fixed, "N=5, every k (3 cases)", "proved"),
        r("cvc5 re-checks N=1", "second solver", "cvc5", "N=1: ...", "agree"),
        r("INV-REF (two pools)", "fixed-N", fixed, "N=2+2 (two pools), every k", "proved"),
        r("INV-REF", "BMC", "z3 BMC", "N=4, k<=4", "proved"),
        r("INV-REF (multi-key)", "fixed-N", fixed, "N=2, every k, multi-key", "proved"),
        r(
            f"cvc5 re-checks {cvc5more.FAMILIES['multikey']}",
            "second solver",
            "cvc5",
            "",
            "disagree",
        ),
    ]
    note = cvc5more.solvers_note(rows)
    assert "fixed-N (2 rows): z3 + cvc5; z3 only at N=5" in note
    assert "twopool (1 rows): z3 only" in note
    assert "z3 BMC (1 rows): z3 only" in note
    assert "multikey (1 rows): z3, cvc5 DISAGREES" in note
    checks = proof_checks(rows)
    (second,) = [c for c in checks if c.name.startswith("cvc5 re-checks")]
    assert "solvers by part: " in second.summary and not second.ok


def test_a_constant_array_with_a_negative_default_is_read_by_cvc5() -> None:
    a = z3.Array("A", z3.IntSort(), z3.IntSort())
    i = z3.Int("i")
    k = z3.K(z3.IntSort(), z3.IntVal(-3))
    unsat = smtlib.to_smt2([a == k, z3.Select(a, i) != -3])
    assert "(- 3)" in unsat and cvc5more.ask(unsat)[0].startswith("refused")
    assert cvc5more.ask(cvc5more.negative_defaults(unsat))[0] == "unsat"
    sat = smtlib.to_smt2([a == k, z3.Select(a, i) == -3])
    assert cvc5more.ask(cvc5more.export([a == k, z3.Select(a, i) == -3]))[0] == "sat"
    assert cvc5more.negative_defaults(sat).count("-3") >= 1


def test_a_quantifier_free_group_left_unknown_is_asked_again_at_a_longer_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """cvc5 (a stand-in) settles the quantifier-free group only at QF_RETRY times the
    limit: it is confirmed on the second ask, and says so; the seeded bug, ``ask``
    without its second ask (``again`` dropped), leaves it unknown (the one-by-one
    retries, which would settle it later, are off here)."""
    limits: list[int] = []
    longer = cvc5more.QF_RETRY * cvc5more.TIMEOUT_MS

    def slow(text: str, ms: int, options: object = None) -> tuple[str, float]:
        limits.append(ms)
        return ("unsat" if ms >= longer else "unknown"), 0.0

    monkeypatch.setattr(smtlib, "cvc5_check", slow)
    x = z3.Int("x")
    g = cvc5more.confirm(cvc5more.Group("toy", [x > 1], [x > 0]), one_by_one=False)
    assert (g.verdicts, g.how, g.asks) == (["unsat"], "4x the limit", 2)
    assert limits == [cvc5more.TIMEOUT_MS, longer]
    real = cvc5more.ask
    monkeypatch.setattr(
        cvc5more,
        "ask",
        lambda text, ms=cvc5more.TIMEOUT_MS, ladder=True, again=1: real(text, ms, ladder),
    )
    g = cvc5more.confirm(cvc5more.Group("toy", [x > 1], [x > 0]), one_by_one=False)
    assert g.verdicts == ["unknown"]
