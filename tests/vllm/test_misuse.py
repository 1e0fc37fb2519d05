"""A caller's misuse of the pool behind vLLM's KVCacheManager: kvpool refuses it at the call.

vLLM's own pool takes these calls and corrupts itself (a ref count of -1, a block in the
free queue twice, a foreign block counted in); kvpool's raises a typed PoolError at the
faulty call and leaves the pool as it was, so the manager keeps working.
"""

from __future__ import annotations

import pytest
from harness import Manager, prompt
from vllm.v1.core.kv_cache_utils import KVCacheBlock as VllmBlock

from kvpool.spec.errors import ForeignBlock, InvalidArgument, RefCountUnderflow


def _one_request(kind: str) -> tuple[Manager, list[int]]:
    m = Manager(kind)
    m.add("a", prompt(0, 40))
    return m, list(m.manager.get_block_ids("a")[0])


def test_connector_double_free_raises_at_the_second_free() -> None:
    m, ids = _one_request("kvpool")
    blocks = [m.pool.blocks[i] for i in ids]
    m.manager.free(m.requests.pop("a"))  # the manager frees the request's blocks
    before = m.snapshot()
    with pytest.raises(RefCountUnderflow):
        m.pool.free_blocks(blocks)  # a connector frees them again
    assert m.snapshot() == before
    m.add("b", prompt(0, 40))  # the pool still serves: a full prefix hit
    assert m.log[-1]["out"][2] == 32


def test_vllms_pool_takes_the_double_free_and_corrupts_itself() -> None:
    m, ids = _one_request("vllm")
    blocks = [m.pool.blocks[i] for i in ids]
    m.manager.free(m.requests.pop("a"))
    m.pool.free_blocks(blocks)  # no error
    assert [b.ref_cnt for b in blocks] == [-1] * len(blocks)  # and they sit in the free queue
    assert all(b.prev_free_block is not None or b.next_free_block is not None for b in blocks)


def test_scheduler_freeing_a_block_of_no_pool_raises() -> None:
    m, _ = _one_request("kvpool")
    before = m.snapshot()
    stray = VllmBlock(3)  # a block built outside any pool, as a buggy scheduler might
    stray.ref_cnt = 1
    with pytest.raises(InvalidArgument, match="not a block of any pool"):
        m.pool.free_blocks([stray])
    assert m.snapshot() == before


def test_touching_a_block_of_another_pool_raises() -> None:
    m, ids = _one_request("kvpool")
    other, _ = _one_request("kvpool")
    before = m.snapshot()
    with pytest.raises(ForeignBlock):
        m.pool.touch([other.pool.blocks[ids[0]]])
    assert m.snapshot() == before


def test_freeing_an_unallocated_block_raises_and_the_manager_goes_on() -> None:
    m, _ = _one_request("kvpool")
    free_id = m.snapshot()["free"][0]
    before = m.snapshot()
    with pytest.raises(RefCountUnderflow):
        m.pool.free_blocks([m.pool.blocks[free_id]])
    assert m.snapshot() == before
    m.free("a")
    assert m.pool.get_num_free_blocks() == m.pool.num_gpu_blocks - 1
