"""vLLM's index keys: a block hash and a KV-cache group id in one bytes value.

vLLM 0.33.0 keys its prefix cache by ``BlockHashWithGroupId``: the block hash
followed by the group id as 4 big-endian unsigned bytes. The spec keeps keys
opaque (any hashable); a key that is bytes of at least 4 is read in vLLM's form
when an event needs its ``block_hashes``/``group_idx`` fields.
"""

from __future__ import annotations

from collections.abc import Hashable

from .events import BlockRemoved

GROUP_ID_BYTES = 4
"""vLLM appends a key's group id to its block hash as 4 big-endian unsigned bytes."""


def group_key(block_hash: bytes, group: int) -> bytes:
    """The index key of ``block_hash`` in KV-cache group ``group`` (vLLM's BlockHashWithGroupId)."""
    return block_hash + group.to_bytes(GROUP_ID_BYTES, "big", signed=False)


def split_key(key: Hashable) -> tuple[bytes, int] | None:
    """``(block_hash, group)`` of a key in vLLM's form (bytes of >= 4), else None (opaque key)."""
    if type(key) is not bytes or len(key) < GROUP_ID_BYTES:
        return None
    return key[:-GROUP_ID_BYTES], int.from_bytes(key[-GROUP_ID_BYTES:], "big", signed=False)


def removed(key: Hashable, medium: str) -> BlockRemoved:
    """The event announcing that no block holds ``key`` any more."""
    parts = split_key(key)
    if parts is None:
        return BlockRemoved(key)
    return BlockRemoved(key, (parts[0],), medium, parts[1])
