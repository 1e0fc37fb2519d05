"""Pools for the oracle tests, importable as ``python:oracle_targets:Name`` under pytest."""

from __future__ import annotations

from typing import Any

from kvpool import mutants
from kvpool.impl import BlockPool

LifoFifoSwapped = mutants.get("lifo-fifo-swapped").pool_class()
"""A catalogue mutant: cached and uncached blocks rejoin the wrong ends of the queue."""


class MinimalPool:
    """vLLM's core API only (no unpin_blocks, no cache operations), and no state to read."""

    def __init__(
        self, num_gpu_blocks: int, enable_caching: bool = True, enable_kv_cache_events: bool = False
    ) -> None:
        self._inner = BlockPool(
            num_gpu_blocks, enable_caching, enable_kv_cache_events=enable_kv_cache_events
        )
        self.blocks = self._inner.blocks

    def get_new_blocks(self, n: Any) -> Any:
        return self._inner.get_new_blocks(n)

    def free_blocks(self, blocks: Any) -> None:
        self._inner.free_blocks(blocks)

    def touch(self, blocks: Any) -> None:
        self._inner.touch(blocks)

    def get_num_free_blocks(self) -> int:
        return self._inner.get_num_free_blocks()
