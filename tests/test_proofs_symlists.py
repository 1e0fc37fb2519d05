"""Lists of symbolic length (kvpool.proofs.symlists): the loop proofs, and that they can fail."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import z3  # type: ignore[import-untyped]

from kvpool.proofs import props, symlists
from kvpool.proofs.model import fresh_state, isolated_check, iv, q_append, q_prepend
from kvpool.proofs.mutants import world_class
from kvpool.spec import BlockRef, FreeBlocks, GetNewBlocks, World, check_world


def test_the_free_step_that_was_unknown_at_three_entries_is_proved_for_every_length() -> None:
    # PERM / FreeBlocks went unknown at 60 s with 3 unrolled entries; as a loop it is
    # proved for every list length (loop init, step and exit), and so are the counts
    gs = symlists.goals(("PERM", "INV-CONSERVE", "INV-WATCH"), ("FreeBlocks", "UnpinBlocks"))
    assert len(gs) == 3 * 2 * 3
    assert {(g.name, g.op, g.case): g.status for g in gs if g.status != "proved"} == {}


def test_every_part_of_every_list_call_is_proved() -> None:
    gs = symlists.goals()
    assert len(gs) == len(symlists.PARTS) * len(symlists.LIST_OPS) * 3
    assert [(g.name, g.op, g.case, g.status) for g in gs if g.status != "proved"] == []


def test_a_bug_on_the_third_entry_only_is_refuted_here_and_invisible_at_two() -> None:
    bug = frozenset({symlists.LONG_LIST_MUTANT})
    every = symlists.goals(("PERM",), ("FreeBlocks",), ("loop step",), bug, 20000, True)
    assert [g.status for g in every] == ["refuted"]
    g = every[0]
    assert g.model is not None
    assert g.model.eval(g.ctx[3], model_completion=True).as_long() == 2  # entry j = 2
    short = symlists.goals(("PERM",), ("FreeBlocks",), ("loop step",), bug, 20000, max_m=2)
    assert [g.status for g in short] == ["proved"]


def test_the_mutant_rows_replay_their_counterexamples_on_the_buggy_spec() -> None:
    rows = symlists.mutant_rows(10000, ("touch-no-remove", symlists.LONG_LIST_MUTANT))
    # touch-no-remove breaks PERM and INV-CONSERVE's ghost sum, each refuted apart
    assert [(r["invariants"], r["status"], r["replay"].split("; ")[-1][:9]) for r in rows] == [
        (("INV-FREE", "INV-CONSERVE"), "expected-refuted", "confirmed"),
        (("INV-FREE", "INV-CONSERVE"), "expected-refuted", "confirmed"),
        (("INV-CONSERVE",), "expected-refuted", "confirmed"),
    ]
    assert "lists <= 2 the step is proved" in rows[1]["replay"]


def test_the_long_list_mutant_of_the_spec_shows_only_with_three_entries() -> None:
    def run(ids: list[int], bug: str | None) -> list[str]:
        w = World.single(4) if bug is None else world_class(bug).make(bug, 4, True, True)
        w.apply(GetNewBlocks(2))
        w.apply(FreeBlocks(tuple(BlockRef(0, b) for b in ids)))
        return [v.invariant for v in check_world(w)]

    bug = symlists.LONG_LIST_MUTANT
    assert run([1, 2], bug) == [] and run([1, 2], None) == []
    # GetNewBlocks(2) gives blocks 1 and 2 with ref_cnt 1: the list [0, 1, 2] frees 2 last
    assert "INV-FREE" in run([0, 1, 2], bug)
    assert run([0, 1, 2], None) == []


def test_the_loop_agrees_with_model_py_and_the_check_can_fail() -> None:
    assert {g.op: g.status for g in symlists.agreement_goals(n=2)} == dict.fromkeys(
        symlists.LIST_OPS, "proved"
    )
    bad = symlists.agreement_goals(("CacheBlocks",), n=2, bugs=frozenset({"cache-when-off"}))
    assert [g.status for g in bad] == ["refuted"]


def test_insertion_at_0_and_at_l_are_the_model_s_prepend_and_append() -> None:
    cfg = symlists._cfg(frozenset())
    d = cfg.dom
    s = fresh_state(cfg, "s", globals_=False)
    x = z3.Int("x")
    hyp = [d.N >= 1, props.strong(cfg, s)["PERM"], x >= 1, x < d.N, z3.Select(s.ref, x) > 0]

    def same(a: Any, b: Any) -> z3.BoolRef:  # on positions 0..N-2 and blocks 1..N-1
        return z3.And(
            d.forall(0, d.N - 1, lambda i: z3.Select(a.q, i) == z3.Select(b.q, i)),
            d.forall(1, d.N, lambda b_: z3.Select(a.pos, b_) == z3.Select(b.pos, b_)),
            a.L == b.L,
        )

    for f, ref in ((iv(0), q_prepend(d, s, x)), (s.L, q_append(d, s, x))):
        assert isolated_check(hyp, same(symlists.q_insert(d, s, x, f), ref), 20000)[0] == "proved"
    off = symlists.q_insert(d, s, x, iv(1))  # another position is not the prepend
    assert (
        isolated_check([*hyp, d.N == 3, s.L >= 1], same(off, q_prepend(d, s, x)), 20000)[0]
        == "refuted"
    )


@pytest.mark.deep
def test_witnesses_decode_and_a_vacuous_hypothesis_fails_the_row() -> None:
    row = symlists.witness_row()
    assert row["status"] == "witnessed", row["replay"]
    # the same hypotheses with False added: no model, so the row fails
    real = symlists.obligations
    try:
        symlists.obligations = lambda op, bugs=frozenset(), max_m=None, full=False: real(  # type: ignore[assignment]
            op, frozenset({"hyp-false"}), max_m, full
        )
        bad = symlists.witness_row(timeout_ms=5000)
    finally:
        symlists.obligations = real  # type: ignore[assignment]
    assert bad["status"] == "NOT-witnessed"


def test_the_dashboard_says_every_list_length_only_where_a_loop_row_proved_it() -> None:
    from kvpool import verify
    from kvpool.proofs.runner import ObligationResult as R

    rows = [
        R("S => INV-FREE", "inductive", "z3 induction", ("INV-FREE",), "every N", "proved", 0.0),
        R("S => INV-REF", "inductive", "z3 induction", ("INV-REF",), "every N", "proved", 0.0),
        R(
            "S and T => INV-REF, list calls as loops",
            "inductive",
            "z3 induction",
            ("INV-REF",),
            symlists.BOUNDS,
            "proved",
            0.0,
        ),
    ]
    rows.append(
        R(
            "S and T => ORD-HANDOUT",
            "inductive",
            "z3 induction",
            ("ORD-HANDOUT",),
            "every N",
            "proved",
            0.0,
        )
    )
    cells = {c.name: c for c in verify.proof_checks(rows)}["z3 induction"].cells
    assert cells["INV-REF"].detail == "every N, every list length, 2 keys, 2 watcher ids"
    assert cells["INV-FREE"].detail == "every N, lists <= 2, 2 keys, 2 watcher ids"
    assert cells["ORD-HANDOUT"].detail == "every N, no list, 2 keys, 2 watcher ids, one step"
    # a loop row alone (the list-taking calls only) makes no cell
    alone = [replace(rows[2], invariants=("ORD-UNPIN",))]
    assert "ORD-UNPIN" not in {c.name: c for c in verify.proof_checks(alone)}["z3 induction"].cells
    rows[2] = replace(rows[2], status="unknown")
    cells = {c.name: c for c in verify.proof_checks(rows)}["z3 induction"].cells
    assert cells["INV-REF"].status == "failed"


def test_the_ordering_rules_are_proved_for_every_list_length() -> None:
    gs = symlists.rule_goals()
    assert [(g.name, g.case, g.status) for g in gs] == [
        (rule, case, "proved")
        for rule in ("ORD-UNPIN", "ORD-RELEASE")
        for case in ("loop init", "loop step", "loop exit")
    ]


def test_a_rule_mutant_is_refuted_unrolled_and_confirmed_on_the_buggy_spec() -> None:
    rows = symlists.rule_mutant_rows(10000, ("unpin-reversed",))
    assert [r["status"] for r in rows] == ["expected-refuted"], rows
    assert "confirmed: the free queue is" in rows[0]["replay"]
    # and the same unrolled rule holds without the bug (at the N a refutation is looked at)
    g = symlists.unrolled_rule_goal("ORD-UNPIN", frozenset(), 10000)
    assert g.status == "proved"


def test_watch_fire_for_every_list_length_and_its_mutant() -> None:
    gs = symlists.watch_goals()
    assert len(gs) == 3 * len(symlists.LIST_OPS)
    assert [(g.op, g.case) for g in gs if g.status != "proved"] == []
    row = symlists.watch_mutant_row(10000)
    assert row["status"] == "expected-refuted", row
    assert "did not fire" in row["replay"]
