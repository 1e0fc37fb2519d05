"""Run by ``make conform-releases`` only (it needs every release's two files, downloaded
once): every release on the registry from 0.8.0 loads, is probed, and its pools are
driven and read without an oracle crash. Not collected by ``make test`` (no ``test_``
prefix), so nothing here is ever skipped and counted as passing.
"""

from __future__ import annotations

import pytest

from kvpool.oracle.matrix import registry_releases, select
from kvpool.oracle.vllm_target import load_vllm, probe_api, vllm_factory, vllm_state

RELEASES = select(registry_releases(), "0.8.0", "latest")


@pytest.mark.parametrize("version", RELEASES)
def test_release_loads_and_is_driven(version: str) -> None:
    module = load_vllm(version)
    api = probe_api(module.BlockPool)
    pool = vllm_factory(version)(6, True, "take_events" in api.methods)
    blocks = pool.get_new_blocks(2)
    pool.cache_blocks(blocks[:1], ["a"])
    pool.touch(blocks[:1])
    assert pool.get_cached_block("a") is blocks[0]
    pool.free_blocks(blocks)
    pool.free_blocks(blocks[:1])
    state = vllm_state(pool)
    assert state.index == {"a": {blocks[0].block_id: None}}
    assert state.ref[blocks[0].block_id] == 0 and blocks[0].block_id in state.free
