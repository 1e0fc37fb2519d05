"""The event log as a sequence and the watchers' firing point (proofs/eventseq.py)."""

from __future__ import annotations

from kvpool.proofs import differential as D
from kvpool.proofs import eventseq, fixedn
from kvpool.proofs.trace import from_op
from kvpool.spec import BlockRef, CacheBlocks, GetNewBlocks, World


def test_sequence_goals_proved_for_every_k_at_small_n() -> None:
    rows = eventseq.rows((2, 3), 60000)
    assert [r["obligation"] for r in rows[:3]] == [
        "INV-EVENTS (log as a sequence)",
        "EVENT-LOG",
        "FIRE-POINT",
    ]
    for r in rows:
        assert r["status"] == "proved", r
        assert "proved for every k at fixed N=" in r["bounds"]


def test_every_seeded_mutant_is_refuted_and_replayed_on_the_spec() -> None:
    rows = eventseq.mutant_rows(3, 60000)
    assert {r["obligation"].split("[")[1].rstrip("]") for r in rows} == set(eventseq.SEQ_MUTANTS)
    for r in rows:
        assert r["status"] == "expected-refuted", r
        assert r["replay"].startswith("confirmed"), r


def test_the_view_form_alone_is_blind_to_an_out_of_order_log() -> None:
    # the set view and the count stay right under this mutant: only the sequence sees it
    st = fixedn.build(3, bugs=frozenset(["event-out-of-order"]))
    (g,) = fixedn.step_goals(st, ("INV-EVENTS",), 60000, ("CacheBlocks",))
    assert g.status == "proved"
    seq = fixedn.build(3, bugs=frozenset(["event-out-of-order"]), seq=True)
    (g,) = fixedn.step_goals(seq, ("INV-EVENTS",), 60000, ("CacheBlocks",))
    assert g.status == "refuted"


def _state_and_call() -> tuple[object, object]:
    w = World.single(3, events=True)
    w.apply(GetNewBlocks(2))
    w.apply(CacheBlocks((BlockRef(0, 1),), ("k1",)))
    c = from_op(CacheBlocks((BlockRef(0, 2),), ("k2",)), 3, {"k1": 1, "k2": 2}, 2)
    return w.pools[0], c


def test_the_differential_compares_the_logs_contents_and_order() -> None:
    ps, c = _state_and_call()
    assert D.compare_step(D.Stepper.build(3), ps, c) is None  # type: ignore[arg-type]
    bad = D.Stepper.build(3, bugs=frozenset(["event-out-of-order"]))
    mism = D.compare_step(bad, ps, c)  # type: ignore[arg-type]
    assert mism is not None
    assert "BlockStored(keys=('k2',)" in str(mism)


def test_the_dashboard_names_them_and_a_failed_one_is_red() -> None:
    from kvpool import verify
    from kvpool.proofs.runner import FIXEDN_TECHNIQUE, ObligationResult

    ok = ObligationResult(
        "FIRE-POINT",
        "fixed-N",
        FIXEDN_TECHNIQUE,
        ("WATCH-FIRE",),
        f"{eventseq.bounds(3)} (12 cases): {eventseq.label(3)}",
        "proved",
        0.1,
    )
    mut = ObligationResult(
        "FIRE-POINT [fire-before-detach]",
        "mutant",
        FIXEDN_TECHNIQUE,
        ("WATCH-FIRE",),
        eventseq.bounds(3),
        "expected-refuted",
        0.1,
    )
    (check,) = [c for c in verify.proof_checks([ok, mut]) if c.technique == FIXEDN_TECHNIQUE]
    assert check.ok and check.caught == {"encoding:fire-before-detach": True}
    assert check.cells["WATCH-FIRE"].status == "proved every k"
    assert check.cells["WATCH-FIRE"].detail == "as a sequence/firing point N=3..3"
    failed = ObligationResult(
        "FIRE-POINT",
        "fixed-N",
        FIXEDN_TECHNIQUE,
        ("WATCH-FIRE",),
        eventseq.bounds(3),
        "unknown",
        1.0,
    )
    (check,) = [c for c in verify.proof_checks([failed]) if c.technique == FIXEDN_TECHNIQUE]
    assert not check.ok and check.cells["WATCH-FIRE"].status == "failed"


def test_the_runner_runs_them() -> None:
    from kvpool.proofs import runner

    rows = runner.run_eventseq((2,), 60000, ("fire-mid-handout",), nested=(1,))
    assert [r.kind for r in rows] == ["fixed-N"] * 4 + ["mutant"]
    assert all(r.ok for r in rows), rows
    assert runner.PROFILES["default"]["eventseq"] == (1, 2, 3, 4, 5)


def test_a_call_nested_in_a_firing_keeps_every_invariant() -> None:
    (row,) = eventseq.nested_rows((2,), 60000)
    assert row["status"] == "proved", row
    # a watcher that runs before the handed-out blocks get ref_cnt 1: a nested
    # get_new_blocks on that state breaks an invariant
    gs = eventseq.nested_goals(3, 60000, frozenset(["fire-mid-handout"]), ("GetNewBlocks",))
    assert gs[-1].status == "refuted"
