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
