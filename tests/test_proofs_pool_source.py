"""impl/pool.py's touch, translated from its source into z3 (kvpool.proofs.pypool).

The whole proof (every obligation at L = 2, the refused calls' at L = 3) runs in
``make proofs-deep`` (part "pool-source"); here the fast parts: the queue contract it
uses, the refused calls' obligations at L = 2 (which a broken undo fails), the seeded
bugs refuted and replayed, and the translator's refusals."""

from __future__ import annotations

import pytest

from kvpool.impl import BlockPool
from kvpool.mutants import CATALOGUE, Mutant
from kvpool.proofs import pypool, runner
from kvpool.proofs.model import isolated_check
from kvpool.proofs.pysource import Unsupported


def _statuses(
    source: str | None, bound: int = 2, only: str = "", timeout_ms: int = 60000
) -> dict[str, str]:
    return {
        step: isolated_check(hyps, goal, timeout_ms)[0]
        for step, hyps, goal in pypool.obligations(source, "touch", bound, refused_only=True)
        if only in step
    }


def test_the_queue_contract_touch_uses_is_proved_from_free_queue_py() -> None:
    (row,) = pypool.prove_contracts()
    assert row.status == "proved"


def test_touch_refused_calls_are_proved_on_the_real_source() -> None:
    st = _statuses(None)
    assert st and set(st.values()) == {"proved"}, st
    # the undo is checked where it returns, and the refusal's state as a whole
    assert "touch: after _undo_touch" in st
    assert any(s.startswith("post: refused: every link") for s in st)


def test_a_change_to_touch_that_breaks_the_proof_fails_this_test() -> None:
    # the undo forgets to give the counter back: the proof no longer goes through
    _, patches = pypool.POOL_MUTANTS["undo-miscounts"]
    # (only where the undo returns: a failed proof shows as refuted, or unknown: it is
    # false, so never proved however long z3 is given; 5 s keeps the test fast)
    st = _statuses(pypool.patched(patches), only="after _undo_touch", timeout_ms=5000)
    assert st == {"touch: after _undo_touch": st["touch: after _undo_touch"]}
    assert st["touch: after _undo_touch"] != "proved"


FAST_MUTANTS = ("undo-forward",)


@pytest.mark.parametrize("name", FAST_MUTANTS)
def test_a_seeded_bug_is_refuted_and_replays_on_the_patched_pool(name: str) -> None:
    idea, patches = pypool.POOL_MUTANTS[name]
    row, case = pypool.refute(patches, 20000)
    assert row is not None and case is not None, f"{name}: the proof still goes through"
    buggy = Mutant(name, idea, (), patches).pool_class()
    assert pypool.replay(case, buggy) != "agrees", str(case)
    assert pypool.replay(case, BlockPool) == "agrees", str(case)


def test_the_dancing_links_case_replays_as_the_spec_says() -> None:
    # two neighbours unlinked, then a foreign entry: undone newest first, the queue is whole
    case = pypool.Case((1, 2, 3), {0: 0, 1: 0, 2: 0, 3: 0}, [2, 1, pypool.FOREIGN])
    assert pypool.expected(case).error == "FOREIGN_BLOCK"
    assert pypool.replay(case, BlockPool) == "agrees"
    _, patches = pypool.POOL_MUTANTS["undo-forward"]
    buggy = Mutant("undo-forward", "", (), patches).pool_class()
    assert pypool.replay(case, buggy) != "agrees"
    # a valid call with another pool's null block takes the slow path, as the spec
    slow = pypool.Case((1, 2), {0: 0, 1: 0, 2: 0, 3: 1}, [1, pypool.FOREIGN_NULL, 3])
    assert pypool.expected(slow).error is None
    assert pypool.replay(slow, BlockPool) == "agrees"
    keeps = CATALOGUE["touch-keeps-free"]
    assert pypool.replay(slow, keeps.pool_class()) != "agrees"
    # the catalogue's null-touched: the counterexample z3 gave (12-05), replayed
    nulls = pypool.Case((1, 2, 3), {0: 0, 1: 0, 2: 0, 3: 0}, [1, 0, 0])
    assert pypool.replay(nulls, BlockPool) == "agrees"
    assert "ref counts" in pypool.replay(nulls, CATALOGUE["null-touched"].pool_class())


def test_every_mutant_applies_to_the_current_source() -> None:
    for _, patches in pypool.POOL_MUTANTS.values():
        pypool.patched(patches)  # raises PatchDoesNotApply if the source moved on


def test_unsupported_python_in_touch_is_refused_with_its_line() -> None:
    src = pypool.patched(
        (
            (
                "                block.ref_cnt = ref_cnt + 1\n",
                "                block.ref_cnt = ref_cnt + 1\n"
                "                while False:\n                    pass\n",
            ),
        )
    )
    with pytest.raises(Unsupported, match="While"):
        pypool.obligations(src, "touch", 2)
    # an attribute the model does not have is refused, not skipped
    src = pypool.patched(
        (
            (
                "                block.ref_cnt = ref_cnt + 1\n",
                "                block._pending = None\n",
            ),
        )
    )
    with pytest.raises(Unsupported, match="_pending"):
        pypool.obligations(src, "touch", 2)


def test_the_pool_source_part_is_in_the_deep_profile_only() -> None:
    assert runner.PROFILES["deep"]["pool_source"]
    assert not runner.PROFILES["default"]["pool_source"]
    assert not runner.PROFILES["fast"]["pool_source"]
    assert runner.run("fast", "pool-source") == []


@pytest.mark.parametrize(("bound", "refused"), [(2, False), (2, True), (3, True)])
def test_the_hypotheses_have_a_witness(bound: int, refused: bool) -> None:
    # (a proof from hypotheses nothing satisfies would say nothing): a concrete pool
    # with the queue [1, 2, 3] and a full list satisfies them, valid and refused
    import z3  # type: ignore[import-untyped]

    st = pypool.fresh_state()
    ref = pypool.spec_touch(st.a, st.ref, st.mark, st.is_null, st.bl, st.m, bound)[0]
    sol = z3.Solver()
    sol.set("timeout", 30000)
    sol.add(*pypool._pin(st, (1, 2, 3), bound), *pypool.pool_invariant(st))
    sol.add(*pypool.entries(st, bound), st.m == bound, ref if refused else z3.Not(ref))
    assert sol.check() == z3.sat


def test_the_dashboard_shows_the_part_on_its_own_line_and_fails_on_a_bad_row() -> None:
    from kvpool import verify
    from kvpool.proofs.runner import POOL_SOURCE_KIND, SOURCE_TECHNIQUE, ObligationResult

    def row(name: str, status: str) -> ObligationResult:
        return ObligationResult(
            name, POOL_SOURCE_KIND, SOURCE_TECHNIQUE, ("INV-REF",), "b", status, 1.0
        )

    good = [
        row("BlockPool.touch does the spec's step, from source", "proved"),
        row("pool.py touch [undo-forward]", "expected-refuted"),
    ]
    checks = {c.name: c for c in verify.proof_checks(good)}
    line = checks["impl/pool.py's touch from its source (z3)"]
    assert line.ok and "undo-forward" in line.summary
    # the free queue's column is not filled by these rows
    assert checks[SOURCE_TECHNIQUE].cells == {}
    bad = [*good[:1], row("pool.py touch [undo-forward]", "NOT-refuted")]
    line = {c.name: c for c in verify.proof_checks(bad)}[
        "impl/pool.py's touch from its source (z3)"
    ]
    assert not line.ok


def test_the_runner_part_refutes_and_confirms_a_mutant(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvpool import verify

    # (the proof itself is make proofs-deep's: left out here, the mutant's row is what runs)
    monkeypatch.setattr(pypool, "prove", lambda *a, **k: [])
    pick = {"undo-forward": pypool.POOL_MUTANTS["undo-forward"]}
    rows = runner.run_pool_source(60000, mutants=pick, pool_replay=verify.pool_replay())
    by_name = {r.obligation: r for r in rows}
    assert by_name["FreeKVCacheBlockQueue._remove meets touch's contract"].status == "proved"
    assert by_name["BlockPool.touch does the spec's step, from source"].status == "unknown"
    mut = by_name["pool.py touch [undo-forward]"]
    assert mut.status == "expected-refuted" and mut.replay.startswith("confirmed"), mut.replay
