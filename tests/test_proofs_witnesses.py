"""Every hypothesis a proof rests on has a model, decoded and replayed (kvpool.proofs.witnesses)."""

from __future__ import annotations

from typing import Any

import pytest
import z3  # type: ignore[import-untyped]

from kvpool.impl import FreeKVCacheBlockQueue, KVCacheBlock
from kvpool.proofs import induction, props, pyrefine, refinement, runner, witnesses
from kvpool.proofs.model import Record, recording


def _replay(case: Any) -> str:
    return pyrefine.replay(case, FreeKVCacheBlockQueue, KVCacheBlock)


def _transcribed() -> list[Record]:
    with recording() as rec:
        refinement.single_ops(timeout_ms=30000)
        refinement.n_block_ops(timeout_ms=30000)
    return rec


def _source() -> list[Record]:
    with recording() as rec:
        pyrefine.prove(timeout_ms=30000)
    return rec


def _induction_steps() -> list[Record]:
    with recording() as rec:
        induction.init_goals(60000)
        induction.lemma_goals(60000)
        induction.step_goals(parts=("INV-REF",), timeout_ms=60000)
    return rec


def test_every_hypothesis_of_the_every_n_induction_is_witnessed_on_the_spec() -> None:
    rec = _induction_steps()
    row = runner.witness_row("every-N induction", rec, None)
    assert row.status == "witnessed", row.replay
    # init (one hypothesis: N >= 1), S alone and S with a stepping stone (the lemmas), S
    # and a call of each kind
    proved, hyps = witnesses.distinct_hypotheses(rec)
    assert len(hyps) == 1 + 2 + 12 and proved == len(rec)
    assert row.bounds.startswith(f"{len(hyps)}/{len(hyps)} hypotheses")
    assert "13 replayed on the spec" in row.bounds  # every call, and the initial pool


def test_every_hypothesis_of_both_refinements_is_replayed_on_the_queue_class() -> None:
    for label, rec in (
        ("refinement (transcribed)", _transcribed()),
        ("free_queue.py from source", _source()),
    ):
        row = runner.witness_row(label, rec, _replay)
        _, hyps = witnesses.distinct_hypotheses(rec)
        assert row.status == "witnessed", (label, row.replay)
        assert row.bounds.startswith(f"{len(hyps)}/{len(hyps)} hypotheses"), row.bounds
        assert f"{len(hyps)} replayed on the queue class" in row.bounds, row.bounds


def _with_false_conjunct(rec: list[Record], extra: z3.BoolRef) -> list[Record]:
    """The same proofs, as if each had one more (contradictory) hypothesis: z3 would
    prove them all, vacuously."""
    return [(n, [*hyp, extra], goal, st) for n, hyp, goal, st in rec]


def test_a_contradictory_hypothesis_is_reported_vacuous() -> None:
    # R says n >= 0: with n < 0 added nothing satisfies the refinement's hypotheses
    n = z3.Int("n")
    row = runner.witness_row(
        "refinement (transcribed)", _with_false_conjunct(_transcribed(), n < 0), _replay
    )
    assert row.status == "NOT-witnessed" and not row.ok
    assert "VACUOUS" in row.replay and row.bounds.startswith("0/")


def test_a_vacuous_every_n_step_is_proved_by_z3_and_caught_by_its_witness(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # S with a part that contradicts PERM (the queue's length is >= 0): every step of
    # INV-REF is then "proved", and only the witness says the proof is worth nothing
    real = props.strong

    def strong(cfg: Any, s: Any) -> dict[str, Any]:
        return {**real(cfg, s), "FALSE": s.L < 0}

    monkeypatch.setattr(props, "strong", strong)
    with recording() as rec:
        goals = induction.step_goals(parts=("INV-REF",), ops=("Touch",), timeout_ms=20000)
    assert [g.status for g in goals] == ["proved"]
    row = runner.witness_row("every-N induction", rec, None)
    assert row.status == "NOT-witnessed" and "VACUOUS" in row.replay


def test_a_decoded_state_the_spec_rejects_fails_the_witness() -> None:
    # a "lemma" whose hypothesis is N >= 1 alone: its model is any state at all, which
    # the spec's invariants reject (the decoded state is checked, not trusted)
    N = z3.Int("N")
    s_ref = z3.Array("s.ref", z3.IntSort(), z3.IntSort())
    rec: list[Record] = [("S => INV-REF", [N >= 1, s_ref[0] == 5], z3.BoolVal(True), "proved")]
    row = runner.witness_row("every-N induction", rec, None)
    assert row.status == "NOT-witnessed" and "breaks INV-" in row.replay, row.replay


def test_a_queue_that_disagrees_with_the_witness_fails_it() -> None:
    row = runner.witness_row("refinement (transcribed)", _transcribed(), lambda case: "differs")
    assert row.status == "NOT-witnessed" and "on the queue class: differs" in row.replay
