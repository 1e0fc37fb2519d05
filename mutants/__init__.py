"""kvpool.mutants -- the bug catalogue: small, realistic, deliberate bugs in kvpool.impl.

Each :class:`Mutant` is one bug a person could plausibly write, with a name, a
one-line story, the invariants or rules that should catch it, and a way to build
the buggy pool. The real source is never edited: :meth:`Mutant.pool_class` reads
the source of ``kvpool.impl.pool`` (and ``kvpool.impl.free_queue``), applies the
mutant's text patches -- each must match exactly once, else
:class:`MutantDoesNotApply` is raised, so a catalogue that drifted from the code
fails loudly instead of testing the real pool -- and executes the patched copy as
a fresh module. The resulting class has the real constructor signature, so it is
itself a factory for :class:`kvpool.oracle.driver.Driver`::

    pool_cls = CATALOGUE["lifo-fifo-swapped"].pool_class()
    Driver(pool_cls, [(8, True, False)])

The catalogue is shared: the lockstep tests prove that every mutant is killed
(``kvpool.oracle.machine.kill``), and the proofs, contracts, oracle and docs reuse
the same names and stories.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import kvpool.impl.free_queue as _real_queue
import kvpool.impl.pool as _real_pool
from kvpool.impl.pool import BlockPool

Patch = tuple[str, str]
"""(exact text of the real source, its replacement)."""


class MutantDoesNotApply(Exception):
    """A patch's text is not found exactly once in the current source of kvpool.impl."""


@dataclass(frozen=True)
class Mutant:
    """One seeded bug."""

    name: str
    story: str
    """One line: what the programmer did wrong."""
    breaks: tuple[str, ...]
    """Invariants (INV-*) or lockstep rules that should catch it, the most direct first."""
    pool_patches: tuple[Patch, ...] = ()
    queue_patches: tuple[Patch, ...] = ()
    hints: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)
    """LockstepConfig fields that focus a search on this bug (e.g. events=True)."""
    invalid_calls_only: bool = field(default=False, hash=False, compare=False)
    """Measured: no valid call shows this bug (``kvpool conform --level exact`` passes it
    at 500 examples), only invalid calls or faulty watchers do. The oracle's catalogue
    check then skips ``robust``'s first stage, the valid calls' search, which would only
    spend its whole budget finding nothing (see :func:`kvpool.oracle.catalogue.run`)."""

    def pool_class(self) -> type[BlockPool]:
        """The buggy ``BlockPool`` class (built once per mutant, then cached)."""
        return _build(self)

    def factory(self) -> type[BlockPool]:
        """A pool factory for the Driver: ``factory(num_blocks, caching, events)``."""
        return self.pool_class()


def _patched(module: types.ModuleType, patches: tuple[Patch, ...], tag: str) -> dict[str, Any]:
    source = inspect.getsource(module)
    for old, new in patches:
        count = source.count(old)
        if count != 1:
            raise MutantDoesNotApply(
                f"mutant {tag}: patch text found {count} times in {module.__name__}: {old!r}"
            )
        source = source.replace(old, new)
    name = f"{module.__name__}__mutant_{tag.replace('-', '_')}"
    namespace: dict[str, Any] = {
        "__name__": name,
        "__package__": module.__package__,
        "__file__": module.__file__,
    }
    exec(compile(source, f"<{module.__name__} with mutant {tag}>", "exec"), namespace)
    return namespace


def queue_class(patches: tuple[Patch, ...], tag: str) -> type:
    """``FreeKVCacheBlockQueue`` with ``patches`` applied to its source (a queue mutant)."""
    cls: type = _patched(_real_queue, patches, tag)["FreeKVCacheBlockQueue"]
    return cls


@cache
def _build(mutant: Mutant) -> type[BlockPool]:  # cached by name, patches (hints excluded)
    pool_ns = _patched(_real_pool, mutant.pool_patches, mutant.name)
    if mutant.queue_patches:
        queue_ns = _patched(_real_queue, mutant.queue_patches, mutant.name)
        pool_ns["FreeKVCacheBlockQueue"] = queue_ns["FreeKVCacheBlockQueue"]
    cls: type[BlockPool] = pool_ns["BlockPool"]
    cls.__qualname__ = cls.__name__ = f"BlockPool[{mutant.name}]"
    return cls


def _m(
    name: str,
    story: str,
    breaks: tuple[str, ...],
    pool: tuple[Patch, ...] = (),
    queue: tuple[Patch, ...] = (),
    *,
    invalid_calls_only: bool = False,
    **hints: Any,
) -> Mutant:
    return Mutant(name, story, breaks, pool, queue, hints, invalid_calls_only)


_FIRE_ON_HANDOUT = "        if watched:\n            self._fire(self._detach_watchers(ret), ret)\n"

MUTANTS: tuple[Mutant, ...] = (
    # -- eviction order ---------------------------------------------------------------
    _m(
        "lifo-fifo-swapped",
        "free_blocks sends keyless blocks to the back and cached ones to the front",
        ("result differs: ids", "state differs"),
        pool=(
            (
                "                            front.append(block)\n"
                "                        else:\n"
                "                            back.append(block)\n",
                "                            back.append(block)\n"
                "                        else:\n"
                "                            front.append(block)\n",
            ),
        ),
    ),
    _m(
        "evict-first-ignored",
        "free_blocks forgets evict_first: cached blocks freed with it still go to the back",
        ("state differs", "result differs: ids"),
        pool=(
            (
                "all_front = evict_first or not self.enable_caching",
                "all_front = not self.enable_caching",
            ),
        ),
        caching=True,
    ),
    _m(
        "unpin-to-front",
        "unpin_blocks puts released blocks at the head, so still-readable blocks are reused first",
        ("state differs", "result differs: ids"),
        pool=(
            (
                "self.free_block_queue._append_n(released)",
                "self.free_block_queue._prepend_n(released)",
            ),
        ),
    ),
    _m(
        "prepend-reversed",
        "_prepend_n links the group in reverse, so FRONT[-1] becomes the head",
        ("state differs", "result differs: ids"),
        queue=(
            (
                "        for b in blocks:\n            # Chain the group after the head, in order",
                "        for b in reversed(blocks):\n"
                "            # Chain the group after the head, in order",
            ),
        ),
    ),
    # -- the linked list ----------------------------------------------------------------
    _m(
        "popleft-keeps-links",
        "_popleft_n hands blocks out without clearing their prev/next links",
        ("INV-LIST",),
        queue=(
            (
                "            last.prev_free_block = None  # type: ignore[union-attr]\n"
                "            last.next_free_block = None  # type: ignore[union-attr]\n",
                "",
            ),
        ),
    ),
    _m(
        "remove-keeps-links",
        "_remove unlinks a block from its neighbours but leaves its own links set",
        ("INV-LIST",),
        queue=(
            (
                "        block.prev_free_block = None\n"
                "        block.next_free_block = None\n"
                "        self.num_free_blocks -= 1",
                "        self.num_free_blocks -= 1",
            ),
        ),
    ),
    _m(
        "popleft-stale-prev",
        "_popleft_n moves the head on, but the new front keeps its prev link to a handed-out block",
        ("INV-LIST",),
        queue=(("        node.prev_free_block = head  # type: ignore[union-attr]\n", ""),),
    ),
    _m(
        "remove-half-stitched",
        "_remove fixes the previous block's next link but not the next block's prev link",
        ("INV-LIST",),
        queue=(("        nxt.prev_free_block = prev  # type: ignore[union-attr]\n", ""),),
    ),
    _m(
        "prepend-counter-stale",
        "_prepend_n links the blocks in but does not add them to num_free_blocks",
        ("INV-LIST", "INV-FREE", "result differs: value"),
        queue=(
            (
                "        old_first.prev_free_block = prev  # type: ignore[union-attr]\n"
                "        self.num_free_blocks += len(blocks)\n",
                "        old_first.prev_free_block = prev  # type: ignore[union-attr]\n",
            ),
        ),
    ),
    _m(
        "append-counter-stale",
        "_append_n links the blocks in but does not add them to num_free_blocks",
        ("INV-LIST", "INV-FREE", "result differs: value"),
        queue=(
            (
                "        tail.prev_free_block = last\n        self.num_free_blocks += len(blocks)\n",  # noqa: E501
                "        tail.prev_free_block = last\n",
            ),
        ),
    ),
    _m(
        "popleft-n-overrun",
        "_popleft_n's loop runs one step too far and unlinks (and returns) one block too many",
        ("result differs: ids", "target crashed"),
        queue=(("        for _ in range(n):\n", "        for _ in range(n + 1):\n"),),
    ),
    _m(
        "insufficient-off-by-one",
        "get_new_blocks refuses to hand out the last free block (>= instead of >)",
        ("error kind differs",),
        pool=(
            (
                "if num_blocks > queue.num_free_blocks:",
                "if num_blocks >= queue.num_free_blocks and num_blocks:",
            ),
        ),
    ),
    # -- reference counts ---------------------------------------------------------------
    _m(
        "multiplicity-as-set",
        "the releasability check counts distinct blocks, so a duplicate entry is over-freed",
        ("error kind differs", "INV-REF"),
        pool=(
            (
                "for block, m in Counter(blocks).items():",
                "for block, m in dict.fromkeys(blocks, 1).items():",
            ),
        ),
        invalid_calls_only=True,
    ),
    _m(
        "double-free-clamped",
        "free_blocks clamps a ref_cnt that would go negative at 0 and re-queues the block",
        ("error kind differs", "INV-LIST"),
        pool=(
            (
                "                    elif ref_cnt == 0:\n",
                "                    elif ref_cnt == 0 or (ref_cnt < 0 and not block.is_null):\n",
            ),
        ),
        invalid_calls_only=True,
    ),
    _m(
        "touch-keeps-free",
        "touch raises ref_cnt but leaves a free block in the free queue",
        ("INV-FREE", "state differs"),
        pool=(
            (
                "                    prev = block.prev_free_block\n"
                "                    self.free_block_queue._remove(block)\n"
                "                    block.prev_free_block = prev\n"
                "                    unlinked = True\n",
                "                    pass\n",
            ),
        ),
    ),
    # -- the null block -----------------------------------------------------------------
    _m(
        "null-handed-out",
        "the pool marks block 0 null but never takes it out of the free queue",
        ("state differs", "INV-NULL"),
        pool=(
            (
                "self.null_block = self.free_block_queue.popleft()",
                "self.null_block = self.blocks[0]",
            ),
        ),
    ),
    _m(
        "null-pooled",
        "free_blocks treats the null block like any block reaching zero and queues it",
        ("state differs", "INV-NULL"),
        pool=(
            (
                "                    elif ref_cnt == 0:\n                        block.ref_cnt = 0\n",  # noqa: E501
                "                    elif ref_cnt == 0 or block.is_null:\n"
                "                        block.ref_cnt = 0\n",
            ),
        ),
    ),
    _m(
        "null-touched",
        "touch skips the queue removal for the null block but still counts a reference to it",
        ("INV-NULL", "state differs"),
        pool=(
            (
                "                    if block.is_null:  # never pooled: its ref_cnt stays 0\n"
                "                        continue\n",
                "                    if block.is_null:\n"
                "                        block.ref_cnt = 1\n"
                "                        continue\n",
            ),
        ),
    ),
    _m(
        "unpin-null-skipped",
        "unpin_blocks skips the null block silently instead of refusing it",
        ("error kind differs",),
        pool=(
            (
                "                if ref_cnt < 0:  # released more often than referenced, or the null block\n",  # noqa: E501
                "                if ref_cnt < 0 and block.is_null:\n"
                "                    i += 1\n"
                "                    continue\n"
                "                if ref_cnt < 0:\n",
            ),
        ),
        invalid_calls_only=True,
    ),
    # -- watchers -------------------------------------------------------------------------
    _m(
        "watcher-fired-twice",
        "handing a block out fires its watchers but leaves them pending, so they fire again",
        ("INV-WATCH", "fired differs", "state differs"),
        pool=(
            (
                "                block._pending = None\n                firings.extend(",
                "                firings.extend(",
            ),
        ),
    ),
    _m(
        "watcher-never-fired",
        "get_new_blocks detaches the watchers of reused blocks but never calls them",
        ("fired differs",),
        pool=(
            (
                _FIRE_ON_HANDOUT + "        return ret",
                "        if watched:\n            self._detach_watchers(ret)\n        return ret",
            ),
        ),
    ),
    _m(
        "watcher-before-state",
        "get_new_blocks fires watchers before the blocks have ref_cnt 1 and lost their keys",
        ("result differs: value", "fired differs"),
        pool=(
            (_FIRE_ON_HANDOUT + "        return ret", "        return ret"),
            (
                "        ret = queue._popleft_n(num_blocks)\n",
                "        ret = queue._popleft_n(num_blocks)\n"
                "        self._fire(self._detach_watchers(ret), ret)\n",
            ),
        ),
        invalid_calls_only=True,
    ),
    _m(
        "watcher-only-last",
        "unpin_blocks keeps one watcher per block: a second unpin replaces the first's watcher",
        ("INV-WATCH", "fired differs", "state differs"),
        pool=(
            (
                "                if pending is None:\n"
                "                    block._pending = single\n",
                "                if pending is None or pending[0] is not on_reuse:\n"
                "                    block._pending = single\n",
            ),
        ),
    ),
    _m(
        "watcher-registered-twice",
        "unpin_blocks appends the watcher even when that very object is already pending",
        ("INV-WATCH", "fired differs", "state differs"),
        pool=(
            (
                "                elif pending[0] is not on_reuse:  # once per watcher object\n"
                "                    for w in pending:\n",
                "                else:\n                    for w in ():\n",
            ),
        ),
    ),
    _m(
        "reset-fires-nothing",
        "reset_prefix_cache drops the pending watchers without calling them",
        ("fired differs",),
        pool=(("        self._fire(firings)\n        return True", "        return True"),),
    ),
    _m(
        "watcher-error-stops-others",
        "_fire stops at the first watcher that raises: the rest never hear of the reuse",
        ("fired differs",),
        pool=(
            (
                '                            exc, f"Exception in reuse watcher for block {block.block_id}",'  # noqa: E501
                " watcher\n"
                "                        )\n"
                "                    )\n",
                '                            exc, f"Exception in reuse watcher for block {block.block_id}",'  # noqa: E501
                " watcher\n"
                "                        )\n"
                "                    )\n"
                "                    break\n",
            ),
        ),
        invalid_calls_only=True,
    ),
    _m(
        "watcher-error-escapes",
        "_fire lets a watcher's exception escape get_new_blocks, mid-way through the firings",
        ("target crashed",),
        pool=(
            (
                "            except Exception as exc:\n",
                "            except ArithmeticError as exc:\n",
            ),
        ),
        invalid_calls_only=True,
    ),
    # -- the prefix cache -------------------------------------------------------------------
    _m(
        "key-kept-on-reuse",
        "get_new_blocks hands out an evicted cached block without dropping its key",
        ("INV-CACHE", "state differs"),
        pool=(
            (
                "                if block._block_hash is not None:\n"
                "                    self._drop_key(block)\n"
                "                block.ref_cnt = 1\n",
                "                block.ref_cnt = 1\n",
            ),
        ),
        caching=True,
    ),
    _m(
        "cached-newest-holder",
        "get_cached_block returns the newest block holding the key instead of the oldest",
        ("result differs: value",),
        pool=(
            (
                "return next(iter(holders.values()))",
                "return next(reversed(holders.values()))",
            ),
        ),
        caching=True,
        level="exact",
        max_pools=1,
        rules=frozenset({"allocate", "cache_request", "prefix_hit", "observe", "free_request"}),
    ),
    _m(
        "cache-when-disabled",
        "cache_blocks forgets to check enable_caching",
        ("error kind differs",),
        pool=(
            (
                "        if not self.enable_caching:\n"
                '            raise CachingDisabled("prefix caching is disabled on this pool")\n',
                "",
            ),
        ),
        caching=False,
        rules=frozenset({"allocate", "invalid_call", "cache_refused"}),
        invalid_calls_only=True,
    ),
    _m(
        "cache-overwrites-key",
        "cache_blocks re-keys a block that already holds a key (the index keeps the old one)",
        ("error kind differs", "INV-CACHE"),
        pool=(
            (
                "            if block._block_hash is not None:\n"
                "                raise AlreadyCached(",
                "            if False:\n                raise AlreadyCached(",
            ),
        ),
        caching=True,
        invalid_calls_only=True,
    ),
    _m(
        "evict-validates-late",
        "evict_blocks drops keys while it validates, so a bad id leaves earlier keys dropped",
        ("ERR-ATOMIC", "state differs"),
        pool=(
            (
                '                raise NullBlockMisuse("block id 0 is the null block")\n'
                "        blocks = self.blocks\n"
                "        for i in ids:\n"
                "            block = blocks[i]\n",
                '                raise NullBlockMisuse("block id 0 is the null block")\n'
                "            block = self.blocks[i]\n",
            ),
        ),
        caching=True,
        invalid_calls_only=True,
    ),
    _m(
        "evict-negative-ids",
        "evict_blocks accepts negative ids and evicts from the end, Python-style",
        ("error kind differs",),
        pool=(("not 0 <= i < n:", "not -n <= i < n:"),),
        rules=frozenset({"allocate", "invalid_call", "bad_ids_and_keys"}),
        invalid_calls_only=True,
    ),
    # -- events -----------------------------------------------------------------------------
    _m(
        "removed-per-block",
        "BlockRemoved is logged for every block that drops a key, while others still hold it",
        ("INV-EVENTS", "result differs: events", "state differs"),
        pool=(
            (
                "        if not holders and self.enable_kv_cache_events:\n"
                "            self._log(removed(key, self.medium))\n",
                "        if self.enable_kv_cache_events:\n"
                "            self._log(removed(key, self.medium))\n",
            ),
        ),
        caching=True,
        events=True,
        level="exact",
        max_pools=1,
        rules=frozenset({"allocate", "cache_request", "evict", "free_request", "observe"}),
    ),
    _m(
        "reset-not-logged",
        "reset_prefix_cache clears the index without logging AllBlocksCleared",
        ("INV-EVENTS", "result differs: events", "state differs"),
        pool=(("            self._log(AllBlocksCleared())\n", "            pass\n"),),
        caching=True,
        events=True,
    ),
    # -- several pools ------------------------------------------------------------------------
    _m(
        "cross-pool-freed-here",
        "free_blocks takes any live pool's block as its own and queues it in this pool",
        ("INV-LIST", "state differs"),
        pool=(
            (
                "                if type(block) is KVCacheBlock and block._pool is mark:\n"
                "                    ref_cnt = block.ref_cnt - 1\n",
                "                if type(block) is KVCacheBlock and block._pool is mark or (\n"
                "                    not block.is_null and block.pool is not None\n"
                "                    and block.pool()\n"
                "                ):\n"
                "                    ref_cnt = block.ref_cnt - 1\n",
            ),
        ),
        max_pools=2,
        # Only a cross-pool free shows it: keep the search on allocation and frees.
        rules=frozenset({"allocate", "allocate_in", "via_pool", "free_request", "observe"}),
    ),
    _m(
        "touch-foreign-accepted",
        "the ownership check forgets ForeignBlock: touch takes another pool's block",
        ("error kind differs",),
        pool=(
            (
                "            if owner is not self:\n"
                '                raise ForeignBlock(f"block {block.block_id} belongs to another pool")\n'  # noqa: E501
                "            out.append(block)",
                "            out.append(block)",
            ),
        ),
        max_pools=2,
        rules=frozenset({"allocate", "invalid_call", "foreign_block"}),
        invalid_calls_only=True,
    ),
    # -- validation after mutation ------------------------------------------------------------
    _m(
        "forward-underflow-no-undo",
        "free_blocks refuses an over-freed forwarded block after releasing its own blocks",
        ("ERR-ATOMIC", "state differs"),
        pool=(
            (
                "            except RefCountUnderflow:\n"
                "                self._undo_release(blocks, len(blocks))\n"
                "                raise\n",
                "            except RefCountUnderflow:\n                raise\n",
            ),
        ),
        max_pools=2,
        rules=frozenset({"allocate", "free_request", "share_request", "invalid_call", "over_free"}),
        invalid_calls_only=True,
    ),
    _m(
        "double-free-no-undo",
        "free_blocks raises on a double free but keeps the releases it already made",
        ("ERR-ATOMIC", "state differs"),
        pool=(
            (
                "                        self._undo_release(blocks, i)\n"
                "                        # Every entry is checked",
                "                        # Every entry is checked",
            ),
        ),
        invalid_calls_only=True,
    ),
    _m(
        "bad-entry-no-undo",
        "free_blocks raises on an entry that is no block but keeps the releases before it",
        ("ERR-ATOMIC", "state differs"),
        pool=(
            (
                "            self._undo_release(blocks, i)\n"
                "            if not isinstance(exc, Exception):\n",
                "            if not isinstance(exc, Exception):\n",
            ),
        ),
        invalid_calls_only=True,
    ),
    # -- results ----------------------------------------------------------------------------
    _m(
        "count-accepts-bool",
        "get_new_blocks checks isinstance(n, int), so True is a count of one",
        ("error kind differs",),
        pool=(
            (
                "if type(num_blocks) is not int or num_blocks < 0:",
                "if not isinstance(num_blocks, int) or num_blocks < 0:",
            ),
        ),
        invalid_calls_only=True,
    ),
    _m(
        "reset-while-in-use",
        "reset_prefix_cache only refuses when every block is in use",
        ("result differs: value",),
        pool=(
            (
                "if self.free_block_queue.num_free_blocks != self.num_gpu_blocks - 1:",
                "if self.free_block_queue.num_free_blocks == 0:",
            ),
        ),
    ),
    _m(
        "writable-ignores-key",
        "is_block_writable forgets that a cached block is shared by future requests",
        ("result differs: value",),
        pool=(
            (
                "return block.ref_cnt == 1 and block._block_hash is None",
                "return block.ref_cnt == 1",
            ),
        ),
        caching=True,
    ),
    _m(
        "usage-inverted",
        "get_usage returns the free fraction instead of the used fraction",
        ("result differs: value",),
        pool=(
            (
                "return 1.0 - self.free_block_queue.num_free_blocks / total",
                "return self.free_block_queue.num_free_blocks / total",
            ),
        ),
    ),
)

VLLM_API_MUTANTS: tuple[Mutant, ...] = (
    _m(
        "promotion-keeps-old-keys",
        "cache_full_blocks promotes a partial block without dropping its old keys",
        ("state differs", "INV-EVENTS"),
        pool=(
            (
                "            if blk._block_hash is not None:  # partial -> full promotion\n"
                "                self._drop_key(blk)\n",
                "",
            ),
        ),
    ),
    _m(
        "partial-longer-keeps-shorter",
        "cache_partial_block adds a longer prefix beside the shorter one instead of replacing it",
        ("state differs",),
        pool=(
            (
                "                self._drop_key(block)  # a longer prefix replaces the shorter one",
                "                pass",
            ),
        ),
    ),
    _m(
        "drop-forgets-entries",
        "eviction drops a block's primary key but leaves its further entries in the index",
        ("INV-CACHE", "state differs"),
        pool=(
            (
                "        if self._entries:\n            for extra in self._entries.pop(",
                "        if False:\n            for extra in self._entries.pop(",
            ),
        ),
    ),
    _m(
        "move-leaves-source-key",
        "move_block_hashes re-points the index but the source block keeps its primary key",
        ("INV-CACHE", "state differs"),
        pool=(
            (
                "        src._block_hash = None\n        src._block_hash_num_tokens = None\n",
                "",
            ),
        ),
    ),
    _m(
        "move-announces-removal",
        "move_block_hashes logs BlockRemoved for the keys it moves, though dst still holds them",
        ("INV-EVENTS", "result differs: events"),
        pool=(
            (
                "            del holders[src.block_id]\n            holders[dst.block_id] = dst\n",
                "            del holders[src.block_id]\n"
                "            if self.enable_kv_cache_events:\n"
                "                self._log(removed(k, self.medium))\n"
                "            holders[dst.block_id] = dst\n",
            ),
        ),
    ),
    _m(
        "groups-lookup-partial",
        "get_cached_block over groups returns the groups that hit instead of None on any miss",
        ("result differs: value",),
        pool=(
            (
                "            if not holders:\n"
                "                return None\n"
                "            found.append(next(iter(holders.values())))\n",
                "            if holders:\n"
                "                found.append(next(iter(holders.values())))\n",
            ),
        ),
    ),
    _m(
        "mask-ignored",
        "cache_full_blocks caches masked-out blocks too",
        ("state differs",),
        pool=(
            (
                "            if blk.is_null or (mask is not None and not mask[i - nc]):",
                "            if blk.is_null:",
            ),
        ),
    ),
    _m(
        "partial-event-when-held",
        "cache_partial_block announces a key the block already held",
        ("result differs: events",),
        pool=(
            ("        if spec_req is not None and not held:", "        if spec_req is not None:"),
        ),
    ),
)
"""Bugs in vLLM 0.33.0's caching calls (blocks with several keys, groups, moves).

Kept out of :data:`MUTANTS`, which the catalogue check kills with the key-level calls
in short runs. tests/test_multikey.py shows each is caught by the spec-vs-impl lockstep
test of the vLLM operations, tests/test_vllm_dropin.py by the differential against
vLLM 0.33.0, and tests/test_oracle_multikey.py shows the oracle's search catching them
through its multi-key rule (and not without it).
"""

CATALOGUE: dict[str, Mutant] = {m.name: m for m in MUTANTS + VLLM_API_MUTANTS}
"""Every mutant by name, in catalogue order."""

if len(CATALOGUE) != len(MUTANTS) + len(
    VLLM_API_MUTANTS
):  # pragma: no cover - a typo in the table above
    raise RuntimeError("two mutants share a name")


def get(name: str) -> Mutant:
    """The mutant called ``name`` (KeyError lists the known names)."""
    try:
        return CATALOGUE[name]
    except KeyError:
        raise KeyError(f"no mutant {name!r}; known: {', '.join(CATALOGUE)}") from None


__all__ = [
    "CATALOGUE",
    "MUTANTS",
    "VLLM_API_MUTANTS",
    "Mutant",
    "MutantDoesNotApply",
    "get",
    "queue_class",
]
