"""Fork-shaped pools run as ``python:module:Class`` with no adapter code, and the oracle
finds each one's seeded bug (tests/forks/, one module per shape of code from the wild).
A pool with an API of its own (the nano-vllm-shaped manager) runs through its loader,
``forks.nano_loader``, and nothing else.

Each case runs ``kvpool conform`` as a user types it. The base the forks derive from
(forks.shaped) conforms at safety and exact, so each finding is the fork's own bug.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kvpool.oracle.cli import main
from kvpool.oracle.targets import resolve


def conform(target: str, level: str, *extra: str, examples: int = 30) -> tuple[int, str]:
    """``kvpool conform`` on a fork, on pools of up to 4 blocks (small pools: fast shrinking)."""
    args = ["conform", "-t", f"python:forks.{target}", "--level", level, "-n", str(examples)]
    args += ["--max-blocks", "4"]
    result = CliRunner().invoke(main, [*args, *extra])
    return result.exit_code, result.output.replace("\n", " ")


@pytest.mark.parametrize("level", ["safety", "exact"])
def test_the_base_of_the_forks_conforms(level: str) -> None:
    code, out = conform("shaped:BlockPool", level)
    assert code == 0, out
    assert "conforms" in out


def test_vllm_fork_appending_a_block_listed_twice_twice() -> None:
    """A block held twice and freed with both references in one call goes into the free
    list twice: the free list reaches it twice (INV-FREE). Valid use; ``safety`` finds it
    too, but Hypothesis takes minutes to shrink it there, ``exact`` seconds."""
    code, out = conform("double_append:BlockPool", "exact", examples=20)
    assert code == 1, out
    assert "VIOLATION of INV-FREE" in out
    assert "reaches it twice" in out


def test_class_level_monkeypatch_breaks_all_but_the_newest_pool() -> None:
    """State the plugin keeps on the class: with two pools, the older one reports the
    newer one's free count; with one pool per run nothing shows."""
    code, out = conform("monkeypatched:BlockPool", "exact", examples=20)
    assert code == 1, out
    assert "result differs: value: GetNumFreeBlocks" in out
    code, out = conform("monkeypatched:BlockPool", "exact", "--max-pools", "1", examples=20)
    assert code == 0, out


def test_wrapper_of_two_sub_pools_whose_reset_never_succeeds() -> None:
    """Its reset compares a sum over both sub-pools with one pool's size. (It also cannot
    take a block of another wrapper: its mirror sub-pool looks the id up in its own list,
    which the oracle finds first with several pools; one pool per run shows the reset.)"""
    code, out = conform("wrapper:MirroredBlockPool", "exact", "--max-pools", "1")
    assert code == 1, out
    assert "ResetPrefixCache(pool=0): spec True, target False" in out
    # on the key-level calls (its grouped lookup, a multi-key call, shifts the search so
    # that it may meet the reset first)
    code, out = conform("wrapper:MirroredBlockPool", "exact", "--skip", "GetCachedBlockGroups")
    assert code == 1, out
    assert "target crashed: FreeBlocks" in out


def test_pool_without_events_is_run_with_events_off_and_its_bug_found() -> None:
    """No take_events: the oracle turns events off (no INV-EVENTS in two calls) and finds
    the real bug, a stale index entry after evict_blocks (INV-CACHE)."""
    target = resolve("python:forks.no_events:BlockPool")
    assert "TakeEvents" not in target.capabilities
    assert target.defaults == {"events": False}
    code, out = conform("no_events:BlockPool", "safety")
    assert code == 1, out
    assert "events off in every pool (the target cannot do otherwise)" in out
    assert "VIOLATION of INV-CACHE" in out


def test_capabilities_and_state_are_asked_of_the_class_not_the_adapter() -> None:
    """The vLLM adapter has every method; the capabilities are the class's own."""
    core = resolve("python:forks.shaped:CorePool")  # the base without take_events
    full = resolve("python:forks.shaped:BlockPool")
    assert full.capabilities - core.capabilities == {"TakeEvents"}
    assert "multi_pool" in full.capabilities  # its blocks know their pool
    assert full.state_check is not None and full.target_invariants is not None
    wrapper = resolve("python:forks.wrapper:MirroredBlockPool")  # read via kvpool_state()
    assert wrapper.state_check is not None
    assert "EvictFirst" not in wrapper.capabilities and "evict_first" not in wrapper.capabilities


# -- pools whose API is not vLLM's: a loader maps the calls, the pool keeps its own rules ----


@pytest.mark.parametrize("target", ["nano_loader:NanoPool", "v0_allocator:PrefixCachingAllocator"])
def test_the_own_design_pools_conform_at_safety_without_their_bug(target: str) -> None:
    """Each hands blocks out in its own order (a deque; an LRU evictor), so ``safety`` is
    their level; with the bug switched off they conform there."""
    code, out = conform(target, "safety", examples=60)
    assert code == 0, out
    assert "conforms at safety" in out
    # and why safety: at exact their free order is a finding (it is not the spec's)
    code, out = conform(target, "exact", examples=20)
    assert code == 1, out
    assert "state differs: pool 0: free queue:" in out


def test_nano_shaped_manager_serving_a_reused_block_as_a_prefix_hit() -> None:
    """A block taken for new content keeps its old hash in the index: the manager's own
    lookup then serves it under a prefix it no longer holds (INV-CACHE), found through
    the loader alone."""
    code, out = conform("nano_loader:StaleNanoPool", "safety", examples=60)
    assert code == 1, out
    assert "VIOLATION of INV-CACHE" in out
    assert "but does not hold it" in " ".join(out.split())


def test_the_nano_bug_bites_through_the_managers_own_sequence_api() -> None:
    """What the finding means for the engine: a later request with the old prefix is
    handed another request's block as cached, and the fixed manager does not do it."""
    from forks.nano import BlockManager, Sequence, StaleIndexBlockManager

    def second_prefix_hit(manager: BlockManager) -> tuple[int, bool]:
        first = Sequence([1, 2, 3, 4])
        manager.allocate(first)
        manager.deallocate(first)  # block 0 is free, still holding [1, 2, 3, 4]
        other = Sequence([9, 9, 9, 9])
        manager.allocate(other)  # the only free block: taken for new content
        held = list(other.block_table)
        manager.deallocate(other)
        again = Sequence([1, 2, 3, 4])
        manager.allocate(again)
        return again.num_cached_tokens, again.block_table == held

    assert second_prefix_hit(StaleIndexBlockManager(1)) == (4, True)  # [9, 9, 9, 9] as a hit
    assert second_prefix_hit(BlockManager(1)) == (0, True)  # a miss, the block taken afresh


def test_v0_shaped_allocator_keeping_a_revived_block_evictable() -> None:
    """The evictor leaves removal to lazy deletion: a block revived by a prefix hit is
    still in its table, so it counts as free while referenced (INV-FREE)."""
    code, out = conform("v0_allocator:LazyEvictorAllocator", "safety", examples=100)
    assert code == 1, out
    assert "VIOLATION of INV-FREE" in out
    assert "ref_cnt 1 but in the free queue" in " ".join(out.split())
