"""Two pools with lists of symbolic length (kvpool/proofs/twolists.py): FREE-FORWARD,
DROP-GONE and POOL-FRAME for every N_0, N_1 and every list length, the list calls as
loops; each seeded bug refuted for every length, proved with lists <= 2, and its unrolled
counterexample confirmed on the spec; every hypothesis witnessed."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
import z3  # type: ignore[import-untyped]

from kvpool import verify
from kvpool.proofs import twolists
from kvpool.proofs.model import isolated_check
from kvpool.proofs.runner import PROFILES, ObligationResult
from kvpool.spec.rules import POOL_RULES

DEEP = pytest.mark.skipif(
    os.environ.get("KVPOOL_DEEP") != "1",
    reason="1 to 20 CPU s each (the whole part: ~25 CPU s; make proofs-deep runs it)",
)


def test_the_rules_and_bugs_are_the_pool_rules() -> None:
    assert set(twolists.NAMES) == set(POOL_RULES)
    assert {name for name, _, _ in twolists.BUGS.values()} == set(twolists.NAMES)
    assert PROFILES["deep"]["twopool_lists"] == twolists.NAMES
    with pytest.raises(ValueError, match="not a bug"):
        twolists.setting("FreeBlocks", 0, frozenset({"no-such-bug"}))
    with pytest.raises(ValueError, match="not a two-pool list call"):
        twolists.setting("GetNewBlocks", 0)


def test_drop_gone_and_pool_frame_are_proved_for_every_list_length() -> None:
    gs = twolists.prove(twolists.obligations(("DROP-GONE", "POOL-FRAME"), callers=(0,)))
    # DROP-GONE: free_blocks; POOL-FRAME: the four calls; each loop init, step and exit
    assert len(gs) == 3 + 4 * 3
    assert [(g.name, g.case, g.status) for g in gs if g.status != "proved"] == []


def test_free_forwards_accept_iff_is_proved_on_a_free_made_on_pool_1() -> None:
    # (every case of both callers, the parts on each pool too: the deep test below)
    obs = twolists.obligations(("FREE-FORWARD",), callers=(1,))
    gs = twolists.prove([o for o in obs if o.case.startswith("FreeBlocks@1 accept")])
    assert len(gs) == 11  # init, 9 step parts, exit
    assert [(g.case, g.status) for g in gs if g.status != "proved"] == []


def test_a_late_bug_fails_the_loop_step_but_not_with_lists_of_two() -> None:
    bug = frozenset({"touch-late-foreign-skipped"})
    (step,) = [
        o
        for o in twolists.obligations(("POOL-FRAME",), bug, ("Touch",), (0,))
        if "loop step" in o.case
    ]
    status, _, m = isolated_check(step.hyp, step.goal, 20000)
    assert status == "refuted" and m is not None
    assert m.eval(step.j, model_completion=True).as_long() >= twolists.LATE
    short = replace(step, hyp=[*step.hyp, step.wd.call.a.m <= twolists.LATE])
    assert isolated_check(short.hyp, short.goal, 20000)[0] == "proved"


@DEEP
def test_a_bug_is_confirmed_on_the_spec() -> None:
    row = twolists.mutant_row("touch-late-foreign-skipped", 20000)
    assert row["status"] == "expected-refuted", row
    assert "the spec refuses it (ForeignBlock)" in row["replay"]
    assert "Touch(" in row["trace"][1]


@DEEP
def test_the_loops_agree_with_twopools_encoding_and_the_check_can_fail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gs = twolists.agreement_goals(ops=("Touch",), callers=(0,))
    assert [g.status for g in gs] == ["proved"]
    # a bug acting from the second entry on shows in lists of 2: the loop disagrees
    monkeypatch.setattr(twolists, "LATE", 1)
    bug = frozenset({"touch-late-foreign-skipped"})
    bad = twolists.agreement_goals(bugs=bug, ops=("Touch",), callers=(0,), sizes=(3, 3))
    assert [g.status for g in bad] == ["refuted"]


def test_a_two_pool_list_row_gets_its_own_note() -> None:
    def row(status: str) -> ObligationResult:
        return ObligationResult(
            "T => POOL-FRAME (two pools, list calls as loops)",
            "inductive",
            "z3 induction",
            ("POOL-FRAME",),
            twolists.BOUNDS,
            status,
            0.1,
        )

    (check,) = [c for c in verify.proof_checks([row("proved")]) if c.technique == "z3 induction"]
    assert "every list length (list calls as loops): POOL-FRAME proved" in check.summary
    assert "lists <= 2" not in check.summary
    (bad,) = [c for c in verify.proof_checks([row("unknown")]) if c.technique == "z3 induction"]
    assert not bad.ok and "list calls as loops): POOL-FRAME proved" not in bad.summary


@DEEP
def test_the_part_proves_witnesses_and_refutes_every_bug() -> None:
    rows = twolists.all_rows()
    assert [(r["obligation"], r["status"]) for r in rows if r["kind"] == "inductive"] == [
        (f"T => {n} (two pools, list calls as loops)", "proved") for n in twolists.NAMES
    ]
    (agree,) = [r for r in rows if r["kind"] == "differential"]
    assert agree["status"] == "agree", agree
    (w,) = [r for r in rows if r["kind"] == "witness"]
    assert w["status"] == "witnessed", w
    muts = {r["obligation"].split("[")[1].rstrip("]"): r for r in rows if r["kind"] == "mutant"}
    assert set(muts) == set(twolists.BUGS)
    for bug, r in muts.items():
        assert r["status"] == "expected-refuted", (bug, r)
        assert "with lists <= 2 every step is proved" in r["replay"]
        assert "confirmed" in r["replay"]


@DEEP
def test_a_vacuous_hypothesis_is_not_witnessed() -> None:
    real = twolists.obligations
    try:
        twolists.obligations = lambda names=twolists.NAMES, bugs=frozenset(), *a: real(  # type: ignore[assignment,misc]
            names, frozenset({"hyp-false"}), *a
        )
        row = twolists.witness_row(names=("DROP-GONE",), worlds=None)
    finally:
        twolists.obligations = real  # type: ignore[assignment]
    assert row["status"] == "NOT-witnessed"
    assert "hypothesis unsat" in row["replay"]


def test_hyp_false_makes_every_hypothesis_unsatisfiable() -> None:
    obs = twolists.obligations(("DROP-GONE",), frozenset({"hyp-false"}), callers=(0,))
    assert obs and all(isolated_check(o.hyp, z3.BoolVal(False), 5000)[0] == "proved" for o in obs)
