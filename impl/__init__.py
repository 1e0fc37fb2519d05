"""kvpool.impl -- the concrete block pool: an intrusive doubly linked free queue, vLLM's API.

>>> from kvpool.impl import BlockPool
>>> pool = BlockPool(num_gpu_blocks=8, enable_caching=True, hash_block_size=16)
>>> [b.block_id for b in pool.get_new_blocks(3)]
[1, 2, 3]
"""

from kvpool.spec.errors import (
    AlreadyCached,
    BlockNotInUse,
    CachingDisabled,
    ErrorKind,
    ForeignBlock,
    InsufficientFreeBlocks,
    InvalidArgument,
    NullBlockMisuse,
    PoolError,
    RefCountUnderflow,
)
from kvpool.spec.events import AllBlocksCleared, BlockRemoved, BlockStored

from .block import KVCacheBlock
from .bridge import abstract, check_invariants, default_watcher_id, inv_list, inv_list_of
from .free_queue import FreeKVCacheBlockQueue
from .hash_map import BlockHashToBlockMap
from .pool import INT_HASHES_SETTING, BlockPool, external_block_hash, int_event_hashes

__all__ = [
    "INT_HASHES_SETTING",
    "AllBlocksCleared",
    "AlreadyCached",
    "BlockHashToBlockMap",
    "BlockNotInUse",
    "BlockPool",
    "BlockRemoved",
    "BlockStored",
    "CachingDisabled",
    "ErrorKind",
    "ForeignBlock",
    "FreeKVCacheBlockQueue",
    "InsufficientFreeBlocks",
    "InvalidArgument",
    "KVCacheBlock",
    "NullBlockMisuse",
    "PoolError",
    "RefCountUnderflow",
    "abstract",
    "check_invariants",
    "default_watcher_id",
    "external_block_hash",
    "int_event_hashes",
    "inv_list",
    "inv_list_of",
]
