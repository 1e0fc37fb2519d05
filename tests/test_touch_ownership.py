"""``touch`` refuses every entry that is not one of the pool's own blocks (issue 13, item 5).

Its per-block test is two tests, the entry's exact type and the pool's mark
(docs/semantics.md, *Hostile input*): benchmarks/touch_ownership.py measured what it costs
and what would replace it. Four entries that are not the pool's blocks, each next to a
free block of the pool (which ``touch`` unlinks before it meets the bad entry, so a refusal
must put it back): each is refused with the typed error and nothing changes. Seeded: the
same ``touch`` with its ownership test removed, or either half of it, accepts some of
them (each entry is caught by the full test and let through by at least one seeded one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kvpool.impl import BlockPool, ForeignBlock, InvalidArgument, KVCacheBlock, PoolError, abstract
from kvpool.mutants import Mutant

_TEST = (
    "if type(block) is not KVCacheBlock or block._pool is not mark:\n"
    "                    raise _NotABlock\n"
    "                ref_cnt = block.ref_cnt\n"
)
_REST = "                    raise _NotABlock\n                ref_cnt = block.ref_cnt\n"

SEEDED: dict[str, tuple[str, str]] = {
    "no ownership test": (_TEST, "ref_cnt = block.ref_cnt\n"),
    "exact type only": (_TEST, "if type(block) is not KVCacheBlock:\n" + _REST),
    "mark only": (_TEST, "if block._pool is not mark:\n" + _REST),
}


def seeded(name: str) -> type[BlockPool]:
    return Mutant(f"touch-{name.replace(' ', '-')}", name, (), (SEEDED[name],)).pool_class()


class _Forwarding:
    """Reads and writes every attribute of a real block (so it shows that block's mark)."""

    def __init__(self, target: KVCacheBlock) -> None:
        object.__setattr__(self, "_target", target)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_target"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "_target"), name, value)


class _ForwardingBlock(KVCacheBlock):
    """A ``KVCacheBlock`` subclass that forwards its attribute reads and writes to a real
    block: ``isinstance`` of a block, and it shows that block's mark."""

    __slots__ = ("_target",)

    def __init__(self, target: KVCacheBlock) -> None:
        object.__setattr__(self, "_target", target)

    def __getattribute__(self, name: str) -> Any:
        if name in ("__class__", "__dict__"):
            return object.__getattribute__(self, name)
        return getattr(object.__getattribute__(self, "_target"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "_target"), name, value)


Entry = Callable[[BlockPool, list[KVCacheBlock]], tuple[object, type[PoolError]]]


def _another_pools_block(
    pool: BlockPool, blocks: list[KVCacheBlock]
) -> tuple[object, type[PoolError]]:
    other = BlockPool(4)
    return other.get_new_blocks(1)[0], ForeignBlock  # in use: touching it would count it


def _hand_built(pool: BlockPool, blocks: list[KVCacheBlock]) -> tuple[object, type[PoolError]]:
    return KVCacheBlock(3, 1), InvalidArgument  # the id and count of a block of the pool


def _subclass_instance(
    pool: BlockPool, blocks: list[KVCacheBlock]
) -> tuple[object, type[PoolError]]:
    return _ForwardingBlock(blocks[2]), InvalidArgument


def _proxy(pool: BlockPool, blocks: list[KVCacheBlock]) -> tuple[object, type[PoolError]]:
    return _Forwarding(blocks[2]), InvalidArgument


ENTRIES: dict[str, Entry] = {
    "another pool's block": _another_pools_block,
    "a hand-built KVCacheBlock": _hand_built,
    "a KVCacheBlock subclass forwarding to a real block": _subclass_instance,
    "a proxy forwarding to a real block": _proxy,
}

CAUGHT_ONLY_BY = {
    "another pool's block": "mark only",  # an exact block: the type test lets it through
    "a hand-built KVCacheBlock": "mark only",
    "a KVCacheBlock subclass forwarding to a real block": "exact type only",
    "a proxy forwarding to a real block": "exact type only",
}


def _pool(cls: type[BlockPool]) -> tuple[BlockPool, list[KVCacheBlock]]:
    pool = cls(8)
    blocks = pool.get_new_blocks(4)
    pool.free_blocks(blocks[:1])  # blocks[0]: free again, so touch unlinks it first
    return pool, blocks


def _refused_unchanged(cls: type[BlockPool], make: Entry) -> bool:
    """Whether ``touch([free block, entry])`` raises the entry's typed error and changes
    nothing (references, queue, every invariant)."""
    pool, blocks = _pool(cls)
    entry, error = make(pool, blocks)
    before = abstract(pool).snapshot()
    try:
        pool.touch([blocks[0], entry])  # type: ignore[list-item]
    except error:
        return abstract(pool).snapshot() == before and pool.check_invariants() == []
    except PoolError:
        return False
    return False


@pytest.mark.parametrize("name", list(ENTRIES))
def test_touch_refuses_what_is_not_its_own_block(name: str) -> None:
    assert _refused_unchanged(BlockPool, ENTRIES[name])


@pytest.mark.parametrize("name", list(ENTRIES))
def test_without_the_ownership_test_touch_takes_it(name: str) -> None:
    """The seeded bugs: the whole test removed lets every entry through, and the half
    named in CAUGHT_ONLY_BY is the one that catches this entry (the other lets it in)."""
    make = ENTRIES[name]
    assert not _refused_unchanged(seeded("no ownership test"), make)
    catches = CAUGHT_ONLY_BY[name]
    misses = "exact type only" if catches == "mark only" else "mark only"
    assert _refused_unchanged(seeded(catches), make)
    assert not _refused_unchanged(seeded(misses), make)
