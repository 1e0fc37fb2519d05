# A synthetic "release" of the 0.11 epoch: touch takes a tuple of per-group lists.
from collections.abc import Sequence

from forks import shaped
from vllm.v1.core.kv_cache_utils import BlockRemoved  # noqa: F401


class BlockPool(shaped.BlockPool):
    def __init__(
        self, num_gpu_blocks: int, enable_caching: bool, enable_kv_cache_events: bool = False
    ) -> None:
        super().__init__(num_gpu_blocks, enable_caching, 1, enable_kv_cache_events)

    def touch(self, blocks: tuple[Sequence[shaped.Block], ...]) -> None:
        if not isinstance(blocks, tuple):
            raise TypeError("touch takes a tuple of per-group lists in this epoch")
        for group in blocks:
            super().touch(group)
