"""ERR-ATOMIC for every list length (kvpool.proofs.symlists), and that it can fail."""

from __future__ import annotations

import pytest
import z3  # type: ignore[import-untyped]

from kvpool.proofs import symlists
from kvpool.proofs.mutants import world_class
from kvpool.spec import BlockRef, FreeBlocks, GetNewBlocks, World


def test_err_atomic_is_proved_for_every_list_call_and_length() -> None:
    gs = symlists.atomic_goals()
    assert len(gs) == 3 * len(symlists.LIST_OPS)
    assert [(g.op, g.case, g.status) for g in gs if g.status != "proved"] == []


def test_a_refusal_keeping_a_long_prefix_is_refuted_and_invisible_at_two_entries() -> None:
    bug = frozenset({symlists.ATOMIC_MUTANT})
    every = symlists.atomic_goals(("FreeBlocks",), ("loop step",), bug, 20000, True)
    assert [g.status for g in every] == ["refuted"]
    g = every[0]
    assert g.model is not None
    assert g.model.eval(g.ctx[3], model_completion=True).as_long() >= 2  # entry j >= 2
    short = symlists.atomic_goals(("FreeBlocks",), ("loop step",), bug, 20000, max_m=2)
    assert [g.status for g in short] == ["proved"]
    row = symlists.atomic_mutant_row(10000)
    assert row["status"] == "expected-refuted", row
    assert "confirmed: refused (RefCountUnderflow) with the state changed" in row["replay"]


def test_the_spec_mutant_of_err_atomic_shows_only_with_three_entries() -> None:
    def run(ids: list[int], bug: str | None) -> tuple[object, bool]:
        w = World.single(4) if bug is None else world_class(bug).make(bug, 4, True, True)
        w.apply(GetNewBlocks(2))
        before = w.pools[0].snapshot()
        out = w.apply(FreeBlocks(tuple(BlockRef(0, b) for b in ids)))
        return out.error is not None, w.pools[0].snapshot() != before

    bug = symlists.ATOMIC_MUTANT
    assert run([1, 1], bug) == (True, False) == run([1, 1], None)  # refused at entry 1
    assert run([1, 2, 1], None) == (True, False)
    assert run([1, 2, 1], bug) == (True, True)  # refused at entry 2, 1 and 2 released


def test_a_vacuous_err_atomic_hypothesis_fails_the_witness_row() -> None:
    real = symlists.atomic_obligations
    try:
        symlists.atomic_obligations = lambda op, bugs=frozenset(), max_m=None, full=False: real(  # type: ignore[assignment]
            op, frozenset({"hyp-false"}), max_m, full
        )
        ws = symlists.atomic_witness_goals(timeout_ms=5000)
    finally:
        symlists.atomic_obligations = real  # type: ignore[assignment]
    assert len(ws) == 3 * len(symlists.LIST_OPS)
    assert {w.status for w in ws} == {"unsat"}
    assert {w.status for w in symlists.atomic_witness_goals()} == {"sat"}


# -- keys and watcher ids as uninterpreted sorts; RES-CACHED for every N (symsorts) ---------


def test_res_cached_is_proved_for_every_n_with_keys_a_sort() -> None:
    from kvpool.proofs import symsorts

    assert symsorts.KEY.kind() == z3.Z3_UNINTERPRETED_SORT
    assert symsorts.WATCHER.kind() == z3.Z3_UNINTERPRETED_SORT
    gs = symsorts.cached_goals()
    assert [(g.case, g.status) for g in gs] == [
        ("scan init", "proved"),
        ("scan step", "proved"),
        ("scan exit", "proved"),
    ]
    # the scan by its recurrence is model.cached_block at N = 1..4; with the newest
    # holder kept it is not (from N = 3: two holders and the null block)
    assert {g.status for g in symsorts.scan_agreement_goals()} == {"proved"}
    bad = symsorts.scan_agreement_goals(bugs=frozenset({symsorts.SCAN_MUTANT}))
    assert [g.status for g in bad] == ["proved", "proved", "refuted", "refuted"]


def test_the_res_cached_mutant_is_refuted_and_confirmed_on_the_buggy_spec() -> None:
    from kvpool.proofs import symsorts

    bug = frozenset({symsorts.SCAN_MUTANT})
    assert [g.status for g in symsorts.cached_goals(("scan step",), bug, 20000, True)] == [
        "refuted"
    ]
    row = symsorts.cached_mutant_row(10000)
    assert row["status"] == "expected-refuted", row
    assert "confirmed: get_cached_block(" in row["replay"]


def test_err_atomic_and_watch_fire_with_sorts_and_their_mutants() -> None:
    from kvpool.proofs import symsorts

    gs = symsorts.atomic_goals() + symsorts.watch_goals()
    assert len(gs) == 2 * 3 * len(symlists.LIST_OPS)
    assert [(g.name, g.op, g.case) for g in gs if g.status != "proved"] == []
    rows = symsorts.mutant_rows(10000, state=False)  # RES-CACHED, ERR-ATOMIC, WATCH-FIRE
    assert [r["status"] for r in rows] == ["expected-refuted"] * 3, rows
    assert "with lists <= 2 the step is proved" in rows[1]["replay"]


def test_every_sorted_hypothesis_has_a_witness_and_a_vacuous_one_fails() -> None:
    from kvpool.proofs import symsorts

    row = symsorts.witness_row(state=False)  # (S's parts' and the rules': their own tests)
    assert row["status"] == "witnessed", row["replay"]
    real = symsorts.cached_obligations
    try:
        symsorts.cached_obligations = lambda bugs=frozenset(): real(frozenset({"hyp-false"}))  # type: ignore[assignment]
        bad = symsorts.witness_row(timeout_ms=5000)
    finally:
        symsorts.cached_obligations = real  # type: ignore[assignment]
    assert bad["status"] == "NOT-witnessed"
    assert "RES-CACHED / GetCachedBlock / scan init: hypothesis unsat" in bad["replay"]


def test_the_parts_of_s_with_sorts_are_proved_and_their_mutants_refuted() -> None:
    from kvpool.proofs import symsorts

    gs = symsorts.part_goals()
    assert len(gs) == len(symsorts.SORTED_PARTS) * len(symlists.LIST_OPS) * 3
    assert [(g.name, g.op, g.case, g.status) for g in gs if g.status != "proved"] == []
    rows = symsorts.part_mutant_rows(10000)
    assert len(rows) == 9 and {r["status"] for r in rows} == {"expected-refuted"}, rows
    ws = symsorts.part_witness_goals()
    assert symsorts.part_witness_problems(ws, 3) == []


def test_the_sorted_loops_agree_with_symlists_loops_and_the_check_can_fail() -> None:
    from kvpool.proofs import symsorts

    assert {g.op: g.status for g in symsorts.agreement_goals()} == dict.fromkeys(
        symlists.LIST_OPS, "proved"
    )
    # a bug put into the sorted loop only: cache_blocks leaves the index as it was (asked
    # in this process: the answer no longer depends on what the process did before)
    bad = symsorts.agreement_goals(
        frozenset({"cache-skips-index"}), 5000, refute=True, ops=("CacheBlocks",)
    )
    assert [g.status for g in bad] == ["refuted"]


def test_the_dashboard_says_sorts_only_where_a_sorted_row_proved_it() -> None:
    from kvpool import verify
    from kvpool.proofs import symsorts
    from kvpool.proofs.runner import ObligationResult as R

    def row(inv: str, bounds: str, status: str = "proved") -> R:
        return R(f"S => {inv}", "inductive", "z3 induction", (inv,), bounds, status, 0.0)

    rows = [
        row("INV-REF", "every N"),
        row("INV-FREE", "every N"),
        row("INV-REF", symlists.BOUNDS),
        row("INV-FREE", symlists.BOUNDS),
        row("INV-REF", symsorts.SORTS_BOUNDS),
    ]
    cells = {c.name: c for c in verify.proof_checks(rows)}["z3 induction"].cells
    assert cells["INV-REF"].detail == f"every N, every list length, {verify.KW_SORTS}"
    assert cells["INV-FREE"].detail == f"every N, every list length, {verify.KW_FIXED}"
    rows[-1] = row("INV-REF", symsorts.SORTS_BOUNDS, "unknown")
    cells = {c.name: c for c in verify.proof_checks(rows)}["z3 induction"].cells
    assert cells["INV-REF"].status == "failed"


@pytest.mark.deep
def test_the_ordering_rules_with_sorts_and_their_mutants_replayed() -> None:
    from kvpool.proofs import symsorts

    gs = symsorts.rule_goals()
    assert [(g.name, g.case, g.status) for g in gs] == [
        (rule, case, "proved")
        for rule in ("ORD-UNPIN", "ORD-RELEASE")
        for case in ("loop init", "loop step", "loop exit")
    ]
    rows = symsorts.rule_mutant_rows(10000)
    assert [r["status"] for r in rows] == ["expected-refuted"] * 3, rows
    assert all("confirmed: the free queue is" in r["replay"] for r in rows)
    ws = symsorts.rule_witness_goals()
    assert {w.status for w in ws} == {"sat"}
    assert symsorts.part_witness_problems(ws, 3) == []


def test_watch_per_block_with_a_watcher_sort_and_its_mutants() -> None:
    from kvpool.proofs import symsorts

    part = (symsorts.WATCH_PART,)
    gs = symsorts.part_goals(part)
    assert len(gs) == 3 * len(symlists.LIST_OPS)
    assert [(g.op, g.case) for g in gs if g.status != "proved"] == []
    for bug in symsorts.WATCH_MUTANTS:
        step = ("loop step",)
        bad = symsorts.part_goals(part, ("UnpinBlocks",), step, frozenset({bug}), 10000, True)
        assert [g.status for g in bad] == ["refuted"], bug
