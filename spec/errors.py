"""The error kinds of the semantics, as data (for the spec) and as exceptions (for pools).

The spec never raises for a pool-level error: it returns the kind in an
:class:`~kvpool.spec.ops.Outcome`. Concrete pools raise the matching exception.
Every exception derives from :class:`PoolError`, itself a ``ValueError`` so that
callers written against vLLM (which raises ``ValueError`` when the pool runs dry)
keep working.
"""

from __future__ import annotations

import enum


class ErrorKind(enum.StrEnum):
    """One name per way a call can be refused. The oracle compares kinds, not messages."""

    INSUFFICIENT_FREE_BLOCKS = "InsufficientFreeBlocks"
    INVALID_ARGUMENT = "InvalidArgument"
    REF_COUNT_UNDERFLOW = "RefCountUnderflow"
    FOREIGN_BLOCK = "ForeignBlock"
    NULL_BLOCK_MISUSE = "NullBlockMisuse"
    CACHING_DISABLED = "CachingDisabled"
    ALREADY_CACHED = "AlreadyCached"
    BLOCK_NOT_IN_USE = "BlockNotInUse"


class PoolError(ValueError):
    """A call the pool refused. The pool is exactly as it was before the call."""

    kind: ErrorKind


class InsufficientFreeBlocks(PoolError):
    """More blocks were asked of ``get_new_blocks`` than the free queue holds."""

    kind = ErrorKind.INSUFFICIENT_FREE_BLOCKS


class InvalidArgument(PoolError):
    """An argument of the wrong type or out of range (a bool count, a negative id...)."""

    kind = ErrorKind.INVALID_ARGUMENT


class RefCountUnderflow(PoolError):
    """A block released more times than it is referenced (a double free)."""

    kind = ErrorKind.REF_COUNT_UNDERFLOW


class ForeignBlock(PoolError):
    """A block owned by another pool where only this pool's blocks are allowed."""

    kind = ErrorKind.FOREIGN_BLOCK


class NullBlockMisuse(PoolError):
    """The null block named where it is not allowed."""

    kind = ErrorKind.NULL_BLOCK_MISUSE


class CachingDisabled(PoolError):
    """A prefix-cache write on a pool built with ``enable_caching=False``."""

    kind = ErrorKind.CACHING_DISABLED


class AlreadyCached(PoolError):
    """``cache_blocks`` on a block that already holds a cache key."""

    kind = ErrorKind.ALREADY_CACHED


class BlockNotInUse(PoolError):
    """``cache_blocks`` on a block nobody references (``ref_cnt == 0``)."""

    kind = ErrorKind.BLOCK_NOT_IN_USE


ERROR_CLASSES: dict[ErrorKind, type[PoolError]] = {
    cls.kind: cls
    for cls in (
        InsufficientFreeBlocks,
        InvalidArgument,
        RefCountUnderflow,
        ForeignBlock,
        NullBlockMisuse,
        CachingDisabled,
        AlreadyCached,
        BlockNotInUse,
    )
}
