# A synthetic "release" of the 0.8 epoch: no hash_block_size, no events, lookup without
# groups, tuple hashes passed as an argument, touch taking one flat list.
import types

from forks import shaped
from vllm import envs  # noqa: F401
from vllm.logger import init_logger
from vllm.v1.core.kv_cache_utils import BlockHashType

logger = init_logger(__name__)


class BlockPool(shaped.CorePool):
    def __init__(self, num_gpu_blocks: int, enable_caching: bool) -> None:
        super().__init__(num_gpu_blocks, enable_caching, 1, False)

    def get_cached_block(self, block_hash):
        hit = super().get_cached_block(block_hash.hash_value, [0])
        return hit[0] if hit else None

    def cache_full_blocks(
        self, request, blocks, block_hashes, num_cached_blocks, num_full_blocks, block_size, hash_fn
    ):
        if not all(isinstance(h, BlockHashType) for h in block_hashes):
            raise TypeError("0.8 takes BlockHashType tuples")
        req = types.SimpleNamespace(block_hashes=[h.hash_value for h in block_hashes])
        super().cache_full_blocks(req, blocks, num_cached_blocks, num_full_blocks, block_size, 0)
