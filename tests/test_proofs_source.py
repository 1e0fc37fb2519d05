"""The free queue's own source, translated into z3 and proved (kvpool.proofs.pyrefine)."""

from __future__ import annotations

from typing import Any

import pytest

from kvpool.impl import FreeKVCacheBlockQueue, KVCacheBlock
from kvpool.mutants import CATALOGUE
from kvpool.proofs import pyrefine
from kvpool.proofs.pysource import Unsupported


def test_every_method_of_the_real_free_queue_is_proved_from_its_source() -> None:
    # this is the test a change to impl/free_queue.py that breaks the proof fails
    rows = pyrefine.prove()
    assert {r.op for r in rows} == set(pyrefine.METHODS)
    assert [(r.op, r.step, r.status) for r in rows if r.status != "proved"] == []
    # the loops of the unchecked methods are proved by invariant, for every length
    steps = {(r.op, r.step) for r in rows}
    assert ("_append_n", "_append_n:blocks: one iteration keeps the invariant") in steps
    assert ("popleft_n", "_popleft_n:range(n): one iteration keeps the invariant") in steps


def _patched_class(src: str) -> type:
    ns: dict[str, Any] = {"__name__": "kvpool.impl._patched_queue", "__package__": "kvpool.impl"}
    exec(compile(src, "<patched free_queue.py>", "exec"), ns)
    return ns["FreeKVCacheBlockQueue"]  # type: ignore[no-any-return]


QUEUE_MUTANTS = {
    **{name: patches for name, (_, patches) in pyrefine.SOURCE_MUTANTS.items()},
    **{m.name: m.queue_patches for m in CATALOGUE.values() if m.queue_patches},
}


def test_the_catalogue_has_queue_mutants_to_refute() -> None:
    catalogue = [m.name for m in CATALOGUE.values() if m.queue_patches]
    assert len(catalogue) >= 8 and set(catalogue) <= set(QUEUE_MUTANTS)


@pytest.mark.parametrize("name", sorted(QUEUE_MUTANTS))
def test_each_queue_mutant_applied_to_the_source_is_refuted_and_replays(name: str) -> None:
    patches = QUEUE_MUTANTS[name]
    row, case = pyrefine.refute(patches, 20000)
    assert row is not None and case is not None, f"{name}: the proof still goes through"
    assert row.status == "refuted"
    # the decoded counterexample, run on the patched class itself, disagrees with the spec
    buggy = _patched_class(pyrefine.patched(patches))
    assert pyrefine.replay(case, buggy, KVCacheBlock) != "agrees", str(case)
    # and the same case agrees on the real class (the bug, not the replay, is wrong)
    assert pyrefine.replay(case, FreeKVCacheBlockQueue, KVCacheBlock) == "agrees", str(case)


@pytest.mark.parametrize("method", pyrefine.METHODS)
def test_each_method_has_a_witness_that_replays_on_the_real_queue(method: str) -> None:
    case = pyrefine.witness(method)
    assert case is not None, f"{method}: its hypotheses are unsatisfiable (a vacuous proof)"
    assert pyrefine.replay(case, FreeKVCacheBlockQueue, KVCacheBlock) == "agrees", str(case)


def test_a_new_message_or_an_added_check_that_keeps_the_links_still_proves() -> None:
    src = pyrefine.patched(
        (
            (
                'raise InvalidArgument(f"remove() called on an invalid block: {block!r}")',
                'raise InvalidArgument(f"{block!r}: not queued here (another message)")',
            ),
        )
    )
    rows = pyrefine.prove(src, methods=("remove",))
    assert rows and all(r.status == "proved" for r in rows)


def test_unsupported_python_is_refused_with_its_construct_and_line() -> None:
    src = pyrefine.patched(
        (
            (
                "        prev, nxt = block.prev_free_block, block.next_free_block\n",
                "        prev, nxt = block.prev_free_block, block.next_free_block\n"
                "        while prev is None:\n            pass\n",
            ),
        )
    )
    line = src.splitlines().index("        while prev is None:") + 1
    with pytest.raises(Unsupported) as err:
        pyrefine.prove(src, methods=("_remove",))
    assert err.value.line == line and "While" in err.value.construct
    # a write to an attribute the model does not have is refused too, not skipped
    src = pyrefine.patched(
        (("        block.prev_free_block = None\n", "        block.ref_cnt = 0\n"),)
    )
    with pytest.raises(Unsupported, match=r"\.ref_cnt"):
        pyrefine.prove(src, methods=("_remove",))


def test_a_replay_sees_each_kind_of_damage() -> None:
    good = pyrefine.Case(2, "_remove", {"block": 1})
    assert pyrefine.replay(good, FreeKVCacheBlockQueue, KVCacheBlock) == "agrees"
    # the spec's answer for refused input, and a wrong one
    bad = pyrefine.Case(2, "remove", {"block": 5})
    assert pyrefine.replay(bad, FreeKVCacheBlockQueue, KVCacheBlock) == "agrees"
    assert pyrefine.expected(bad)[0] == "InvalidArgument"
    broken = _patched_class(pyrefine.patched(CATALOGUE["remove-keeps-links"].queue_patches))
    assert "keeps a link" in pyrefine.replay(good, broken, KVCacheBlock)


# -- the source refinement as a row of the proofs runner and of make verify's matrix --------


def test_the_source_row_is_proved_and_labelled_with_its_bounds() -> None:
    from kvpool import verify
    from kvpool.proofs import runner

    rows = runner.run_source(mutants={})
    assert {r.obligation.split(".")[-1].split()[0] for r in rows} == set(pyrefine.METHODS)
    assert all(r.status == "proved" for r in rows), [r for r in rows if r.status != "proved"]
    bounds = {r.obligation.split(".")[-1].split()[0]: r.bounds for r in rows}
    assert bounds["append_n"].startswith("every list; groups of <= 3 entries")
    assert bounds["_popleft_n"].startswith("every list, every n")
    (check,) = [c for c in verify.proof_checks(rows) if c.technique == runner.SOURCE_TECHNIQUE]
    # no mutant was run: the row is not green on the proofs alone
    assert (check.ok, check.summary) == (False, "not run")


def test_a_seeded_bug_in_the_source_fails_the_row() -> None:
    from kvpool import verify
    from kvpool.proofs import runner

    _, patches = pyrefine.SOURCE_MUTANTS["remove-unchecked"]
    rows = runner.run_source(source=pyrefine.patched(patches), mutants={})
    # (over every list the quantified query may come back unknown: not proved either way)
    bad = [r.obligation for r in rows if r.status != "proved"]
    assert bad == ["FreeKVCacheBlockQueue.remove refines seq"]
    (check,) = [c for c in verify.proof_checks(rows) if c.technique == runner.SOURCE_TECHNIQUE]
    assert not check.ok and check.cells["INV-LIST"].status == "failed"


def test_a_weakened_proof_leaves_mutants_standing_and_fails_make_verify(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import z3  # type: ignore[import-untyped]

    from kvpool import verify
    from kvpool.proofs import runner

    mutants, replay = verify.source_mutants()
    assert len(mutants) == 17  # the proof's own 9 and the catalogue's 8 queue mutants
    pick = {k: mutants[k] for k in ("remove-keeps-links", "remove-unchecked")}
    good = runner.run_source(mutants=pick, replay=replay)
    checks = {c.technique: c for c in verify.proof_checks(good)}
    src = checks[runner.SOURCE_TECHNIQUE]
    assert src.ok, src.summary
    # a catalogue mutant keeps its name (the catalogue table), the proof's own are marked
    assert src.caught == {"remove-keeps-links": True, "source:remove-unchecked": True}
    assert all(r.replay.startswith("confirmed") for r in good if r.kind == "mutant")

    # the proof weakened: every method's postcondition is dropped
    real_checks = pyrefine.checks

    def weak(tr: Any) -> Any:
        out = real_checks(tr)
        for ch in out.values():
            ch.goal = lambda res: z3.BoolVal(True)
        return out

    monkeypatch.setattr(pyrefine, "checks", weak)
    rows = runner.run_source(mutants=pick, replay=replay)
    assert {r.status for r in rows if r.kind == "mutant"} == {"NOT-refuted"}
    src = {c.technique: c for c in verify.proof_checks(rows)}[runner.SOURCE_TECHNIQUE]
    assert not src.ok and "NOT refuted: remove-keeps-links" in src.summary
    assert any("caught by no technique" in f for f in verify.failures([src]))
