# A synthetic "release" of the 0.11 epoch (bytes hashes), for tests/test_releases.py.
from vllm.distributed.kv_events import BlockRemoved, BlockStored  # noqa: F401
from vllm.v1.kv_cache_interface import KVCacheConfig  # noqa: F401
