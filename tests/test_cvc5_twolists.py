"""cvc5 on two pools' list calls as loops (proofs/twolists.py, proofs/cvc5more.py's
"twolists" family): its proved queries are recorded and re-asked of cvc5, its seeded
bugs' queries are not, and a seeded bug's step, passed off as proved, is a disagreement
that fails the run."""

from __future__ import annotations

import pytest
import z3  # type: ignore[import-untyped]

from kvpool.proofs import cvc5more, runner, twolists
from kvpool.proofs.model import Record, isolated_check, recording
from kvpool.verify import proof_checks


def _step(bug: str, caller: int = 0) -> twolists.Obligation:
    name, op, _ = twolists.BUGS[bug]
    (ob,) = [
        o
        for o in twolists.obligations((name,), frozenset([bug]), (op,), (caller,))
        if o.case.endswith("loop step")
    ]
    return ob


def test_the_deep_profile_sends_twolists_to_cvc5() -> None:
    assert "twolists" in cvc5more.FAMILIES
    assert "twolists" in runner.PROFILES["deep"]["cvc5_more"]
    assert runner.PROFILES["deep"]["twopool_lists"] == twolists.NAMES


def test_a_seeded_bugs_proofs_are_not_recorded_as_the_rules() -> None:
    """The seeded bugs' proofs with lists <= 2 are recorded under "mutant: ..." names,
    which no cvc5 row counts among the proved queries."""
    ob = _step("refusal-keeps-forwarded")
    bounded = twolists.Obligation(
        ob.name, ob.case, [*ob.hyp, ob.wd.call.a.m <= twolists.LATE], ob.goal, ob.wd
    )
    with recording() as rec:
        (g,) = twolists.prove([bounded], 10000, label="mutant: refusal-keeps-forwarded")
    assert g.status == "proved"
    assert [r[0].startswith("mutant: ") for r in rec] == [True]
    assert cvc5more.groups(rec) == []


def test_twolists_rows_are_a_part_of_their_own_on_the_dashboard() -> None:
    def r(ob: str, kind: str, bounds: str, status: str) -> runner.ObligationResult:
        return runner.ObligationResult(ob, kind, "z3 induction", ("X",), bounds, status, 0.0)

    rows = [
        r(
            "T => DROP-GONE (two pools, list calls as loops)",
            "inductive",
            twolists.BOUNDS,
            "proved",
        ),
        r("INV-REF (two pools)", "fixed-N", "N=2+2 (two pools), every k", "proved"),
        r(f"cvc5 re-checks {cvc5more.FAMILIES['twolists']}", "second solver", "", "agree"),
    ]
    note = cvc5more.solvers_note(rows)
    assert "twolists (1 rows): z3 + cvc5" in note
    assert "twopool (1 rows): z3 only" in note


def test_a_seeded_bugs_step_passed_off_as_proved_is_a_disagreement() -> None:
    """The seeded bug: ``refusal-keeps-forwarded``'s loop step (a refused free keeps
    the forwarded pool's changes from the third entry on), which z3 refutes, recorded
    as proved. cvc5 finds a model, the row says "disagree", and the second-solver line
    of the dashboard fails."""
    ob = _step("refusal-keeps-forwarded")
    status, _, _ = isolated_check(ob.hyp, ob.goal, 10000)
    assert status == "refuted"  # (the seeded bug is a real one)
    recs: list[Record] = [("two pools, list loops: seeded", ob.hyp, ob.goal, "proved")]
    row = cvc5more.row("twolists", recs, with_probe=False)
    assert row["status"] == "disagree", row
    assert "cvc5 says sat (disagrees)" in row["replay"]
    result = runner.ObligationResult(**row)
    (second,) = [c for c in proof_checks([result]) if c.name.startswith("cvc5 re-checks")]
    assert not second.ok


@pytest.mark.deep
def test_a_seeded_bug_cvc5_needs_finite_models_for_is_a_disagreement_too() -> None:
    """``touch-late-foreign-skipped``'s step (touch lets another pool's block through from
    the third entry on) passed off as proved: cvc5 finds its model under the ladder's
    ``mbqi`` with ``fmf-bound`` (unknown under its default), and the row fails."""
    ob = _step("touch-late-foreign-skipped")
    recs: list[Record] = [("two pools, list loops: seeded", ob.hyp, ob.goal, "proved")]
    row = cvc5more.row("twolists", recs, with_probe=False)
    assert row["status"] == "disagree", row


@pytest.mark.deep
def test_the_count_step_is_confirmed_by_enumerative_instantiation() -> None:
    """FREE-FORWARD's accept step "counts 0" (the ghost count stays >= 0): unsat to cvc5
    only with E-matching off and enumerative instantiation on (LADDER's last rung); a
    real query confirmed, and the same query without the count's recurrence (which the
    step needs) is not."""
    obs = twolists.obligations(("FREE-FORWARD",), callers=(0,))
    (ob,) = [o for o in obs if o.case == "FreeBlocks@0 accept: loop step, counts 0"]
    v, how = cvc5more.ask(cvc5more.export([*ob.hyp, z3.Not(ob.goal)]))
    assert (v, how) == ("unsat", "e-matching,enum-inst")
    gh = ob.ghosts or {}
    recs = {r.get_id() for r in gh[0].recs[:2]}
    weak = [h for h in ob.hyp if h.get_id() not in recs]
    assert len(weak) == len(ob.hyp) - 2
    # (without it the step does not follow, and no rung of the ladder says it does)
    assert cvc5more.ask(cvc5more.export([*weak, z3.Not(ob.goal)]))[0] != "unsat"


def test_only_the_named_obligations_get_the_long_ask() -> None:
    """:data:`cvc5more.LONG` names the obligations whose last ask is one whole query at
    a longer limit; any other obligation is left unknown without it (no ask made)."""
    x = z3.Int("x")
    other = cvc5more.Group("symlists: something", [x > 0], [x >= 1])
    assert cvc5more._long(other, x >= 1) == "unknown" and other.asks == 0
    named = cvc5more.Group(
        "two pools, list loops == twopool.transition2 / Touch@0 / <= 2", [x > 0], [x >= 1]
    )
    assert cvc5more._long(named, x >= 1) == "unsat" and named.asks == 1
    assert "one whole at 30 s" in named.how
    wrong = cvc5more.Group(named.name, [x > 0], [x >= 2])  # (a false one stays sat)
    assert cvc5more._long(wrong, x >= 2) == "sat"


def test_a_starved_halving_is_finished_one_by_one() -> None:
    """Quantifier-free queries a group's halving left unknown are asked alone: the true
    ones confirmed, a false one sat (a disagreement), a quantified one left as it was."""
    x = z3.Int("x")
    g = cvc5more.Group("multi-key", [x > 0], [x >= 1, x >= 0])
    g.verdicts = ["unknown", "unknown"]
    cvc5more._one_by_one(g, 5000)
    assert g.verdicts == ["unsat", "unsat"] and g.asks == 2
    assert "the rest one by one" in g.how
    bad = cvc5more.Group("multi-key", [x > 0], [x >= 1, x >= 2])
    bad.verdicts = ["unknown", "unknown"]
    cvc5more._one_by_one(bad, 5000)
    assert bad.verdicts == ["unsat", "sat"]
    y = z3.Int("y")
    q = cvc5more.Group("multi-key", [x > 0], [z3.ForAll([y], z3.Implies(y > 5, y + x > 5))])
    q.verdicts = ["unknown"]
    cvc5more._one_by_one(q, 5000)
    assert q.verdicts == ["unknown"] and q.asks == 0


def test_the_deep_twopool_part_records_twolists_and_adds_its_cvc5_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The runner's wiring, with the parts' proofs stubbed: in the deep profile the
    queries twolists asks are recorded and make a row "cvc5 re-checks two pools' list
    calls as loops"; without "twolists" in the profile's ``cvc5_more`` there is none."""
    from kvpool.proofs import twopool, twopooln

    x = z3.Int("x")

    def lists(timeout_ms: int, names: tuple[str, ...]) -> list[dict[str, object]]:
        isolated_check([x > 0], x >= 1, 5000)
        return []

    monkeypatch.setattr(twopool, "all_rows", lambda *a, **k: [])
    monkeypatch.setattr(twopooln, "all_rows", lambda *a, **k: [])
    monkeypatch.setattr(twolists, "all_rows", lists)
    rows = runner.run("deep", "twopool")
    (row,) = [r for r in rows if r.obligation.startswith("cvc5 re-checks two pools' list")]
    assert row.status == "agree" and "confirms 1 of 1" in row.bounds
    deep = dict(runner.PROFILES["deep"])
    deep["cvc5_more"] = tuple(f for f in deep["cvc5_more"] if f != "twolists")
    monkeypatch.setitem(runner.PROFILES, "deep", deep)
    rows = runner.run("deep", "twopool")
    assert not [r for r in rows if r.obligation.startswith("cvc5 re-checks two pools' list")]
