"""impl/pool.py's free_blocks, unpin_blocks and get_new_blocks, translated from their
source into z3 (kvpool.proofs.pyhot).

``make verify`` runs get_new_blocks' whole proof and its mutant; ``make proofs-deep``
adds free_blocks' (lists of <= 2 entries, refused calls at 3), unpin_blocks' (lists of
<= 2) and their mutants. Here: the whole proofs of get_new_blocks and unpin_blocks, and
free_blocks' at one entry with its refused calls at two (a change to any of them that
breaks its proof fails this file), seeded bugs refuted and replayed, the hypotheses'
witnesses, and the dashboard's line."""

from __future__ import annotations

import pytest
import z3  # type: ignore[import-untyped]

from kvpool.impl import BlockPool
from kvpool.mutants import Mutant
from kvpool.proofs import pyhot, pypool, runner
from kvpool.proofs.model import isolated_check, robust_check
from kvpool.proofs.pysource import BoolV, Heap, IntV, ListV, Translation, Unsupported


def _statuses(
    method: str, source: str | None, bound: int, refused: bool = False, timeout_ms: int = 120000
) -> dict[str, str]:
    # an obligation left unknown is asked again at z3 seeds 1 and 2, at the same limit (the
    # ladder; free_blocks' [6/9] is proved or unknown depending on the seed)
    return {
        step: robust_check(hyps, goal, timeout_ms, cap_ms=timeout_ms)[0]
        for step, hyps, goal in pyhot.obligations(source, method, bound, refused)
    }


def test_get_new_blocks_is_proved_on_the_real_source() -> None:
    for refused in (False, True):
        st = _statuses("get_new_blocks", None, pyhot.L_GET, refused)
        assert st and set(st.values()) == {"proved"}, st
        # the queue's contract is met where it is called, and the loops are covered
        assert any("pre of free_block_queue._popleft_n" in s for s in st)
        assert refused or any("ret ends within" in s for s in st)


@pytest.mark.deep
def test_unpin_blocks_is_proved_on_the_real_source() -> None:
    for refused in (False, True):
        st = _statuses("unpin_blocks", None, pyhot.L_UNPIN, refused)
        assert st and set(st.values()) == {"proved"}, st
        assert refused or any(s.startswith("post: valid: pending watchers") for s in st)
        # the loop over a block's watchers (a tuple, grown by the call) is covered
        assert any("pending ends within 3 iterations" in s for s in st)


@pytest.mark.deep
def test_free_blocks_is_proved_on_the_real_source_at_one_entry_and_refusals_at_two() -> None:
    st = _statuses("free_blocks", None, 1)
    assert st and set(st.values()) == {"proved"}, st
    assert any(s.startswith("post: valid: the queue is the spec's sequence") for s in st)
    st = _statuses("free_blocks", None, 2, refused=True)
    assert st and set(st.values()) == {"proved"}, st
    assert any(s.startswith("post: refused: every link") for s in st)


@pytest.mark.parametrize(
    ("name", "bound", "refused", "step"),
    [
        ("evict-first-ignored", 1, False, "post: valid: the queue is the spec's sequence"),
        ("undo-release-short", 2, True, "post: refused: ref counts"),
        ("watched-last-only", 2, False, "post: valid: pending watchers as the spec's"),
        ("unpin-watcher-twice", 1, False, "post: valid: pending watchers as the spec's"),
        ("undo-unpin-keeps-watcher", 2, True, "post: refused: ref counts, watchers"),
    ],
)
def test_a_change_that_breaks_a_proof_fails_this_test(
    name: str, bound: int, refused: bool, step: str
) -> None:
    meth, _, patches = pyhot.HOT_MUTANTS[name]
    # a false goal is refuted or unknown, never proved however long z3 runs: 5 s each,
    # up to the first that is not proved
    asked = []
    for s, h, g in pyhot.obligations(pyhot.patched(patches), meth, bound, refused):
        if s.startswith(step):
            asked.append((s, isolated_check(h, g, 5000)[0]))
            if asked[-1][1] != "proved":
                return
    raise AssertionError(f"every obligation {step!r} still proved: {asked}")


# (the unpin mutants' concrete refutations cost 6 and 37 CPU s: the runner's, in
# proofs-deep; their counterexamples are replayed below)
@pytest.mark.parametrize("name", ["undo-release-short", "watched-last-only"])
def test_a_seeded_bug_is_refuted_and_replays_on_the_patched_pool(name: str) -> None:
    meth, idea, patches = pyhot.HOT_MUTANTS[name]
    step, case = pyhot.refute(meth, patches, 20000, 2 if meth == "unpin_blocks" else 3)
    assert step is not None and case is not None, f"{name}: the proof still goes through"
    assert case.method == meth
    buggy = Mutant(name, idea, (), patches).pool_class()
    assert pyhot.replay(case, buggy) != "agrees", str(case)
    assert pyhot.replay(case, BlockPool) == "agrees", str(case)


def test_the_evict_first_case_replays_as_the_spec_says() -> None:
    # the counterexample z3 gave for evict-first-ignored (12-05): a keyed block reaching
    # 0 with evict_first goes to the front, not the back
    case = pyhot.HotCase(
        "free_blocks",
        (2, 3),
        {1: 2, 2: 0, 3: 0},
        [pypool.FOREIGN_NULL, 1, 1],
        True,
        True,
        (1, 2, 3),
    )
    assert pyhot.expected(case).free == [1, 2, 3]
    assert pyhot.replay(case, BlockPool) == "agrees"
    _, idea, patches = pyhot.HOT_MUTANTS["evict-first-ignored"]
    buggy = Mutant("evict-first-ignored", idea, (), patches).pool_class()
    assert "free" in pyhot.replay(case, buggy)


def test_the_watcher_twice_case_replays_as_the_spec_says() -> None:
    # z3's counterexample to unpin-watcher-twice (12-05): block 1 has watcher 0, and is
    # listed twice with watcher 2: the spec adds 2 once
    case = pyhot.HotCase(
        "unpin_blocks",
        (2, 3),
        {1: 2, 2: 0, 3: 0},
        [1, 1],
        False,
        pending={1: (0,), 2: (0, 1)},
        watcher=2,
    )
    assert pyhot.expected(case).watchers == {1: (0, 2), 2: (0, 1)}
    assert pyhot.replay(case, BlockPool) == "agrees"
    _, idea, patches = pyhot.HOT_MUTANTS["unpin-watcher-twice"]
    buggy = Mutant("unpin-watcher-twice", idea, (), patches).pool_class()
    assert "watchers" in pyhot.replay(case, buggy)


def test_the_undo_unpin_case_replays_as_the_spec_says() -> None:
    # z3's counterexample to undo-unpin-keeps-watcher (12-05): another pool's block after
    # block 1 refuses the call, and block 1 must not keep the watcher
    case = pyhot.HotCase(
        "unpin_blocks", (2, 3), {1: 2, 2: 0, 3: 0}, [1, pypool.FOREIGN], False, watcher=0
    )
    assert pyhot.expected(case).error == "FOREIGN_BLOCK"
    assert pyhot.replay(case, BlockPool) == "agrees"
    _, idea, patches = pyhot.HOT_MUTANTS["undo-unpin-keeps-watcher"]
    buggy = Mutant("undo-unpin-keeps-watcher", idea, (), patches).pool_class()
    assert "watched" in pyhot.replay(case, buggy)


def test_every_mutant_applies_to_the_current_source() -> None:
    for meth, _, patches in pyhot.HOT_MUTANTS.values():
        assert meth in pyhot.METHODS
        pyhot.patched(patches)  # raises PatchDoesNotApply if the source moved on


@pytest.mark.parametrize(
    ("method", "bound", "refused"),
    [
        ("free_blocks", 2, False),
        ("free_blocks", 3, True),
        ("get_new_blocks", 3, False),
        ("unpin_blocks", 2, False),
        ("unpin_blocks", 2, True),
    ],
)
def test_the_hypotheses_have_a_witness(method: str, bound: int, refused: bool) -> None:
    # (a proof from hypotheses nothing satisfies would say nothing): a concrete pool with
    # a queue of 2 or 3 blocks and a full list satisfies them; the refused ones too. (The
    # contracts' posts the goals also assume are met by their callees' runs.)
    st = pyhot.state_for(method)
    sol = z3.Solver()
    sol.set("timeout", 60000)
    free = (1, 2, 3) if method == "get_new_blocks" else (2, 3)  # (block 1 in use otherwise)
    sol.add(*pypool._pin(st, free, bound), *pyhot.entry_hypotheses(method, st, bound, refused))
    if method != "get_new_blocks":
        sol.add(st.m == bound)
    else:
        sol.add(z3.Int("num_blocks") == bound)
    assert sol.check() == z3.sat
    # the same hypotheses open each post obligation
    hyps = next(h for s, h, _ in pyhot.obligations(None, method, bound, refused) if "post" in s)
    want = pyhot.entry_hypotheses(method, pyhot.state_for(method), bound, refused)
    assert [str(x) for x in hyps[: len(want)]] == [str(x) for x in want]


def test_the_translator_reads_the_new_constructs_and_refuses_what_it_cannot() -> None:
    src = (
        "class C:\n"
        "    def f(self, xs: list, flag: bool) -> None:\n"
        "        ys = xs if type(xs) is list else other(xs)\n"
        "        if flag is not True and flag is not False:\n"
        "            raise ValueError('no')\n"
        "        n = 1 if flag else 2\n"
        "        self.num_free_blocks = n + LIMIT\n"
    )
    flag = z3.Bool("flag")
    tr = Translation(src, "C", consts={"LIMIT": IntV(z3.IntVal(10))})

    h = Heap(pyhot._arr("nxt"), pyhot._arr("prv"), z3.Int("cnt"))
    res = tr.run("f", {"xs": ListV(pyhot._arr("xs"), z3.Int("k")), "flag": BoolV(flag)}, h)
    s = z3.Solver()
    s.add(z3.Not(z3.And(res.exc == 0, res.heap.cnt == z3.If(flag, 11, 12))))
    assert s.check() == z3.unsat  # the branch not taken (other(xs)) is never translated
    bad = src.replace("n = 1 if flag else 2", "n = 1 if flag else xs")
    with pytest.raises(Unsupported, match="two kinds"):
        Translation(bad, "C", consts={"LIMIT": IntV(z3.IntVal(10))}).run(
            "f", {"xs": ListV(pyhot._arr("xs"), z3.Int("k")), "flag": BoolV(flag)}, h
        )
    with pytest.raises(Unsupported, match="LIMIT"):
        Translation(src, "C").run(
            "f", {"xs": ListV(pyhot._arr("xs"), z3.Int("k")), "flag": BoolV(flag)}, h
        )


def test_get_new_blocks_is_in_make_verify_and_free_blocks_in_the_deep_profile() -> None:
    assert runner.PROFILES["default"]["hot_source"] == ("get_new_blocks",)
    assert set(runner.PROFILES["deep"]["hot_source"]) == set(pyhot.METHODS)
    assert runner.PROFILES["fast"]["hot_source"] == ()


def test_the_dashboard_shows_the_part_on_its_own_line_and_fails_on_a_bad_row() -> None:
    from kvpool import verify
    from kvpool.proofs.runner import HOT_SOURCE_KIND, SOURCE_TECHNIQUE, ObligationResult

    def row(name: str, status: str) -> ObligationResult:
        return ObligationResult(
            name, HOT_SOURCE_KIND, SOURCE_TECHNIQUE, ("INV-REF",), "b", status, 1.0
        )

    label = verify.SOURCE_LINES[HOT_SOURCE_KIND]
    good = [
        row("BlockPool.get_new_blocks does the spec's step, from source", "proved"),
        row("pool.py get_new_blocks [watched-last-only]", "expected-refuted"),
    ]
    line = {c.name: c for c in verify.proof_checks(good)}[label]
    assert line.ok and "watched-last-only" in line.summary and "get_new_blocks" in line.summary
    # the label claims no method: make verify proves get_new_blocks only, and its line
    # once named all three
    assert not any(m in label for m in ("free_blocks", "unpin_blocks", "get_new_blocks"))
    assert not line.summary.startswith(";")
    bad = [row("BlockPool.get_new_blocks does the spec's step, from source", "unknown")]
    assert not {c.name: c for c in verify.proof_checks(bad)}[label].ok


def test_the_runner_part_confirms_a_mutant(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvpool import verify

    # (the proof itself is tested above: left out here, the mutant's row is what runs; a
    # row with no obligation is not "proved")
    monkeypatch.setattr(pyhot, "prove", lambda *a, **k: [])
    pick = {"watched-last-only": pyhot.HOT_MUTANTS["watched-last-only"]}
    rows = runner.run_hot_source(
        ("get_new_blocks",), 60000, mutants=pick, pool_replay=verify.pool_replay()
    )
    by_name = {r.obligation: r for r in rows}
    proof = by_name["BlockPool.get_new_blocks does the spec's step, from source"]
    assert proof.status == "unknown"
    mut = by_name["pool.py get_new_blocks [watched-last-only]"]
    assert mut.status == "expected-refuted" and mut.replay.startswith("confirmed"), mut.replay
    # a mutant of a method the profile leaves out is not run
    assert not runner.run_hot_source((), 60000, mutants=pick)
