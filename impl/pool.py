"""The concrete block pool, with vLLM's API and the reference semantics.

Hot paths (``get_new_blocks``, ``free_blocks``, ``touch``, ``unpin_blocks``,
``cache_full_blocks``) do one pass over the blocks they are given, O(1) work per
block, and check as they go. Ownership costs one pointer comparison: only this
pool's blocks carry its mark (``block._pool is self._weak_self``, a ``PoolRef``
that no copy or hand-built block can hold). A pass that meets a bad entry gives
back what it did to the entries before it, then lets the full check name the
refusal, so a refused call changes nothing. The full checks (``_own``,
``_check_releasable``, ...) run only then, off the hot path.

Watchers (``unpin_blocks``' ``on_reuse``) are detached from the state first and
called only once the state is complete, each in its own ``try``: a watcher may
call back into the pool, and one that raises is reported through
``sys.unraisablehook`` and stops nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import sys
from collections import Counter
from collections.abc import Hashable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from kvpool.spec.errors import (
    AlreadyCached,
    BlockNotInUse,
    CachingDisabled,
    ForeignBlock,
    InsufficientFreeBlocks,
    InvalidArgument,
    NullBlockMisuse,
    PoolError,
    RefCountUnderflow,
)
from kvpool.spec.events import AllBlocksCleared, BlockRemoved, BlockStored, Event, apply_event
from kvpool.spec.keys import GROUP_ID_BYTES, removed
from kvpool.spec.ops import Lora, MMFeature, Request
from kvpool.spec.state import DEFAULT_HASH_BLOCK_SIZE, MEDIUM_GPU
from kvpool.spec.state import MAX_COUNT as MAX_BLOCKS
from kvpool.spec.state import shown as _show
from kvpool.spec.vllm_ops import partial_event, stored_event

from .block import KVCacheBlock, PoolRef, Watcher
from .bridge import check_invariants as _check_invariants
from .free_queue import FreeKVCacheBlockQueue
from .hash_map import BlockHashToBlockMap

if TYPE_CHECKING:
    from kvpool.spec.invariants import Violation

__all__ = ["BlockPool", "Watcher"]


class _Unraisable:
    """What ``sys.unraisablehook`` expects (CPython does not export the type)."""

    __slots__ = ("err_msg", "exc_traceback", "exc_type", "exc_value", "object")

    def __init__(self, exc: BaseException, err_msg: str, obj: object) -> None:
        self.exc_type: type[BaseException] = type(exc)
        self.exc_value: BaseException = exc
        self.exc_traceback: TracebackType | None = exc.__traceback__
        self.err_msg = err_msg
        self.object = obj


def _materialise(values: Iterable[Any], what: str) -> list[Any]:
    """Read an iterable argument exactly once, before anything changes.

    Not iterable is ``InvalidArgument``; an exception the iterable itself raises
    while it is read surfaces unchanged (the pool has not changed yet).
    """
    try:
        it = iter(values)
    except TypeError:
        raise InvalidArgument(f"{what} must be iterable, got {_show(values)}") from None
    return list(it)


_MAX_GROUPS = 1 << (8 * GROUP_ID_BYTES)


def _block_hashes(request: Any) -> Any:
    """A request's ``block_hashes``, which must support ``len`` and indexing."""
    try:
        hashes = request.block_hashes
        len(hashes)
    except (AttributeError, TypeError):
        raise InvalidArgument(f"{request!r} has no list of block_hashes") from None
    return hashes


def embedding_rows(embeds: Any, lo: int = 0, hi: int | None = None) -> tuple[bytes, ...]:
    """The raw bytes of each row (prompt position) of a prompt-embedding tensor.

    vLLM hashes a block's slice of the tensor as ``tensor_data`` reads it: flattened,
    on the CPU, contiguous, viewed as uint8; the rows here split those bytes evenly,
    so the rows ``start:end`` joined are that slice's bytes. A torch tensor is read
    that way; anything else with the buffer protocol (a NumPy array, a memoryview
    with a shape) as its C-order bytes; a tuple of bytes (the spec's form) is the rows
    themselves. Anything else is ``InvalidArgument``.

    Only rows ``lo:hi`` (all for ``hi`` None) are read, so an event costs its blocks'
    share of the tensor; the others are given as ``b""``, which no digest of the
    event reads.
    """
    if type(embeds) is tuple and all(type(row) is bytes for row in embeds):
        return embeds  # the rows already, as the spec's request carries them
    try:
        n = len(embeds)
        lo = min(max(lo, 0), n)
        hi = n if hi is None else min(max(hi, lo), n)
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(embeds, torch.Tensor):
            part = embeds[lo:hi].flatten().cpu().contiguous().view(torch.uint8)
            data = bytes(part.numpy().data)
        else:
            view = memoryview(embeds)
            if not view.ndim:
                raise TypeError("a 0-dimensional buffer")
            try:
                data = memoryview(embeds[lo:hi]).tobytes()
            except NotImplementedError:  # a memoryview of several dimensions
                data = view.tobytes()[lo * view.nbytes // n : hi * view.nbytes // n]
    except Exception as exc:
        raise InvalidArgument(
            f"prompt_embeds must be a tensor or buffer of one row per position: {exc}"
        ) from None
    size = len(data) // (hi - lo) if hi > lo else 0
    rows = tuple(data[i * size : (i + 1) * size] for i in range(hi - lo))
    return (b"",) * lo + rows + (b"",) * (n - hi)


def _spec_request(request: Any, lo: int = 0, hi: int | None = None) -> Request:
    """What the events read of a duck-typed vLLM request, as the spec's plain data.

    ``lo:hi``: the positions whose prompt embeddings the events read (all for None).
    """
    try:
        embeds = getattr(request, "prompt_embeds", None)
        rows = None if embeds is None else embedding_rows(embeds, lo, hi)
        lora_request = request.lora_request
        lora = None
        if lora_request:
            name = getattr(lora_request, "name", None) or lora_request.lora_name
            lora = Lora(lora_request.adapter_id, name, getattr(lora_request, "lora_path", ""))
        mm = tuple(
            MMFeature(f.identifier, f.mm_position.offset, f.mm_position.length)
            for f in (request.mm_features or ())
        )
        return Request(
            tuple(request.block_hashes),
            tuple(request.all_token_ids),
            lora,
            mm,
            getattr(request, "cache_salt", None),
            getattr(request, "session_id", None),
            rows,
        )
    except (AttributeError, TypeError) as exc:
        raise InvalidArgument(f"{request!r} is not a request the pool can read: {exc}") from None


_VLLM_EVENTS: list[Any] = []


def _vllm_event_module() -> Any:
    """``vllm.distributed.kv_events`` if vLLM is installed, else None (looked up once)."""
    if not _VLLM_EVENTS:
        try:
            _VLLM_EVENTS.append(importlib.import_module("vllm.distributed.kv_events"))
        except Exception:
            _VLLM_EVENTS.append(None)
    return _VLLM_EVENTS[0]


INT_HASHES_SETTING = "VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES"
"""vLLM's setting: events carry each block hash as the low 64 bits of its bytes (an int)."""


def int_event_hashes(with_vllm: bool) -> bool:
    """Whether a pool built now puts block hashes into its events as vLLM's ints.

    ``with_vllm`` (vLLM is importable, so the events are vLLM's own classes): read
    through vLLM's ``vllm.envs``, exactly as vLLM reads it (its default, on; its
    parse, ``bool(int(value))``; its cache once an engine has frozen the settings).
    Otherwise (the spec's look-alike events) from ``os.environ``, parsed the same
    way, but off when unset: without vLLM the events are the spec's, whose hashes
    are bytes. A value vLLM cannot parse is ``InvalidArgument``.
    """
    if with_vllm:
        try:
            envs = importlib.import_module("vllm.envs")
        except Exception:
            envs = None
        if envs is not None:
            try:
                return bool(getattr(envs, INT_HASHES_SETTING))
            except ValueError as exc:
                raise InvalidArgument(f"{INT_HASHES_SETTING}: {exc}") from None
    raw = os.environ.get(INT_HASHES_SETTING)
    if raw is None:
        return False
    try:
        return bool(int(raw))
    except ValueError:
        raise InvalidArgument(
            f"{INT_HASHES_SETTING} must be an integer (vLLM reads int(value)), got {raw!r}"
        ) from None


def external_block_hash(block_hash: bytes) -> int:
    """A block hash in vLLM's int form: its bytes read big-endian, the low 64 bits kept."""
    return int.from_bytes(block_hash, byteorder="big") & 0xFFFF_FFFF_FFFF_FFFF


def _int_hashes(event: Event) -> Event:
    """``event`` with its vLLM block hashes as ints (an event of opaque keys unchanged)."""
    if isinstance(event, BlockStored) and event.block_hashes is not None:
        parent = event.parent_block_hash
        return dataclasses.replace(
            event,
            block_hashes=cast(Any, tuple(external_block_hash(h) for h in event.block_hashes)),
            parent_block_hash=cast(Any, None if parent is None else external_block_hash(parent)),
        )
    if isinstance(event, BlockRemoved) and event.block_hashes is not None:
        return dataclasses.replace(
            event, block_hashes=cast(Any, tuple(external_block_hash(h) for h in event.block_hashes))
        )
    return event


def _to_vllm(module: Any, event: Event, medium: str) -> Any:
    """A spec event as vLLM's own event object (lists where the spec keeps tuples)."""
    if isinstance(event, BlockStored):
        return module.BlockStored(
            block_hashes=list(event.block_hashes if event.block_hashes is not None else event.keys),
            parent_block_hash=event.parent_block_hash,
            token_ids=list(event.token_ids or ()),
            block_size=event.block_size or 0,
            lora_id=event.lora_id,
            medium=event.medium or medium,
            lora_name=event.lora_name,
            extra_keys=None if event.extra_keys is None else list(event.extra_keys),
            group_idx=event.group_idx,
            session_id=event.session_id,
            lookahead_token_ids=None
            if event.lookahead_token_ids is None
            else [list(t) for t in event.lookahead_token_ids],
        )
    if isinstance(event, BlockRemoved):
        return module.BlockRemoved(
            block_hashes=list(event.block_hashes or (event.key,)),
            medium=event.medium or medium,
            group_idx=event.group_idx,
        )
    return module.AllBlocksCleared()


def _pending_order(block: KVCacheBlock) -> int:
    return block._pending_order


class _NotABlock(Exception):
    """Internal: an entry that is no pool's block."""


def _holds(blocks: list[KVCacheBlock], block: KVCacheBlock) -> bool:
    """Whether ``block`` is the very object ``blocks`` holds at its id (ownership)."""
    bid = block.block_id
    return type(bid) is int and 0 <= bid < len(blocks) and blocks[bid] is block


def _owner(block: object) -> BlockPool | None:
    """The live pool whose block ``block`` is, or None if the pool it names is gone.

    Ownership is identity: ``pool.blocks[block.block_id] is block``; such a block
    carries its pool's mark (a ``PoolRef``), which nothing else can (see
    ``kvpool.impl.block.PoolRef``). A hand-built ``KVCacheBlock``, a copy of a
    block, or any other object raises ``_NotABlock``. Only exact ``KVCacheBlock``
    slots and exact ``PoolRef`` objects are read, so no code of the caller's runs
    here.
    """
    if type(block) is not KVCacheBlock:
        raise _NotABlock
    ref = block._pool
    if type(ref) is not PoolRef:
        raise _NotABlock
    owner = ref()
    if owner is None:
        return None  # its pool is gone: nothing to give the block back to
    if not issubclass(type(owner), BlockPool) or not _holds(owner.blocks, block):
        raise _NotABlock
    return cast(BlockPool, owner)


def _forward(
    block: Any, forwarded: dict[BlockPool, list[KVCacheBlock]] | None
) -> dict[BlockPool, list[KVCacheBlock]] | None:
    """File a ``free_blocks`` entry that is not this pool's: skip, forward, or refuse it."""
    owner = _owner(block)
    if owner is None or block.is_null:
        return forwarded
    if forwarded is None:
        forwarded = {}
    forwarded.setdefault(owner, []).append(block)
    return forwarded


class BlockPool:
    """A pool of ``num_gpu_blocks`` KV-cache blocks; block 0 is the null block.

    Contracts (PEP 316: read by CrossHair, never evaluated in normal use; opt in to
    checking them at run time with ``kvpool.contracts.runtime.enable()``). The
    ``# INV-...`` line above a condition names the invariant it states; the free
    queue's own INV-LIST conditions are in ``FreeKVCacheBlockQueue``. Methods that
    fire watchers claim their old-state postconditions only when none fired (a
    watcher may call back into the pool).

    inv:
        # INV-REF
        all(b.ref_cnt >= 0 for b in self.blocks)
        # INV-NULL
        self.null_block is self.blocks[0] and self.null_block.is_null
        self.null_block.ref_cnt == 0 and self.null_block.block_hash is None
        self.null_block.prev_free_block is None and self.null_block._pending is None
        # INV-FREE: exactly the non-null blocks with ref_cnt 0 are linked in, and counted
        all((b.ref_cnt == 0) == (b.prev_free_block is not None) for b in self.blocks[1:])
        self.free_block_queue.num_free_blocks == sum(b.ref_cnt == 0 for b in self.blocks[1:])
        all(b is self.blocks[b.block_id] for b in self.free_block_queue.get_all_free_blocks())
        # INV-LIST: a block outside the list has both links None
        all((b.prev_free_block is None) == (b.next_free_block is None) for b in self.blocks)
        # INV-CACHE
        all(self.blocks[i].block_hash in (k,) for k, hs in self._index.items() for i in hs)
        all(b.block_hash is None or b.block_id in self._index[b.block_hash] for b in self.blocks)
    """

    def __init__(
        self,
        num_gpu_blocks: int,
        enable_caching: bool = True,
        hash_block_size: int = DEFAULT_HASH_BLOCK_SIZE,
        enable_kv_cache_events: bool = False,
        metrics_collector: Any = None,
        num_hash_lookahead_tokens: int = 0,
        medium: str = MEDIUM_GPU,
    ) -> None:
        if type(num_gpu_blocks) is not int or not 1 <= num_gpu_blocks <= MAX_BLOCKS:
            raise InvalidArgument(
                f"num_gpu_blocks must be an int in 1..{MAX_BLOCKS}, got {_show(num_gpu_blocks)}"
            )
        if type(enable_caching) is not bool or type(enable_kv_cache_events) is not bool:
            raise InvalidArgument("enable_caching and enable_kv_cache_events must be bools")
        if type(hash_block_size) is not int or hash_block_size < 1:
            raise InvalidArgument(f"hash_block_size must be an int >= 1, got {hash_block_size!r}")
        if type(num_hash_lookahead_tokens) is not int or num_hash_lookahead_tokens < 0:
            raise InvalidArgument(
                f"num_hash_lookahead_tokens must be an int >= 0, got {num_hash_lookahead_tokens!r}"
            )
        if type(medium) is not str:
            raise InvalidArgument(f"medium must be a str, got {medium!r}")
        # vLLM's own event classes when vLLM is importable, else the spec's look-alikes;
        # the hash form is read once, here, so that a setting vLLM cannot parse is
        # refused before anything exists (vLLM reads it at every event).
        vllm_events = _vllm_event_module() if enable_kv_cache_events else None
        int_hashes = enable_kv_cache_events and int_event_hashes(vllm_events is not None)
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        self.hash_block_size = hash_block_size
        self.enable_kv_cache_events = enable_kv_cache_events
        self.metrics_collector = metrics_collector
        self.num_hash_lookahead_tokens = num_hash_lookahead_tokens
        self.medium = medium
        # The pool's mark: its blocks, and only they, carry this very object (PoolRef).
        self._weak_self = PoolRef(self)
        self.blocks: list[KVCacheBlock] = [KVCacheBlock(i) for i in range(num_gpu_blocks)]
        for block in self.blocks:
            block._pool = self._weak_self
        self.free_block_queue = FreeKVCacheBlockQueue(self.blocks)
        # Block 0 leaves the queue for good: it is the placeholder for "no block".
        self.null_block = self.free_block_queue.popleft()
        self.null_block.is_null = True
        # The cache index, vLLM's map: key -> {block_id: block}, oldest holder first.
        self.cached_block_hash_to_block = BlockHashToBlockMap()
        self.cached_block_hash_to_block._owned = True
        self._index: dict[Hashable, dict[int, KVCacheBlock]] = (
            self.cached_block_hash_to_block._cache
        )
        # block_id -> the block's further keys (beyond its primary block_hash), oldest first.
        self._entries: dict[int, list[Hashable]] = {}
        # Pending watchers live on the blocks (``_pending``, a tuple: one serves every
        # block of an unpin_blocks call); ``_pending_order`` numbers the blocks in the
        # order they first got a pending watcher, and this is the next number.
        self._next_pending_order = 0
        self._watch_registered = 0
        self._watch_fired = 0
        # The events not yet taken, as ``take_events`` hands them out: vLLM's live list,
        # which callers may read, append to (vLLM's CPU offload manager announces the
        # keys it inserts there) or replace (a subclass may make it another pool's).
        self.kv_event_queue: list[Any] = []
        # The same events as the spec's data (what the bridge reads as the pending log):
        # those this pool appended to the list ``_events_queue`` since it was last empty.
        self._events: list[Event] = []
        self._events_queue: list[Any] | None = None
        # What a consumer that read every event so far believes (INV-EVENTS).
        self._event_view: set[Hashable] = set()
        self._vllm_events = vllm_events
        self._int_event_hashes = int_hashes

    # -- allocation ---------------------------------------------------------------

    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        """Hand out the first ``num_blocks`` free blocks, each with ``ref_cnt == 1`` and no key.

        raises: InsufficientFreeBlocks, InvalidArgument, RefCountUnderflow, ForeignBlock, NullBlockMisuse, CachingDisabled, AlreadyCached, BlockNotInUse
        post: [b.block_id for b in __return__] == [b.block_id for b in __old__.self.free_block_queue.get_all_free_blocks()][:num_blocks]
        post: self._watch_fired > __old__.self._watch_fired or all(b.ref_cnt == 1 and b.block_hash is None for b in __return__)
        post: self._watch_fired > __old__.self._watch_fired or self.free_block_queue.num_free_blocks == __old__.self.free_block_queue.num_free_blocks - num_blocks
        post: all(b._pending is None for b in __return__) or self._watch_fired > __old__.self._watch_fired
        """  # noqa: E501
        if type(num_blocks) is not int or num_blocks < 0:
            raise InvalidArgument(f"num_blocks must be an int >= 0, got {_show(num_blocks)}")
        queue = self.free_block_queue
        if num_blocks > queue.num_free_blocks:
            if num_blocks > MAX_BLOCKS:  # more than any pool holds: not a count one can print
                raise InvalidArgument(f"num_blocks {_show(num_blocks)} exceeds {MAX_BLOCKS}")
            raise InsufficientFreeBlocks(f"Cannot get {num_blocks} free blocks from the pool")
        ret = queue._popleft_n(num_blocks)
        watched = False  # whether a handed-out block has pending watchers
        if self.enable_caching:
            for block in ret:
                # A reused block's old contents are gone: it leaves the cache.
                if block._block_hash is not None:
                    self._drop_key(block)
                block.ref_cnt = 1
                if block._pending is not None:
                    watched = True
        else:
            for block in ret:
                block.ref_cnt = 1
                if block._pending is not None:
                    watched = True
        if self.metrics_collector:
            self._metrics_allocated(ret)
        if watched:
            self._fire(self._detach_watchers(ret), ret)
        return ret

    def _metrics_allocated(self, blocks: list[KVCacheBlock]) -> None:
        """vLLM's collector calls for handed-out blocks (once the state is complete)."""
        collector = self.metrics_collector
        for block in blocks:
            if self.enable_caching:
                collector.on_block_evicted(block)
            collector.on_block_allocated(block)

    # -- release --------------------------------------------------------------------

    def free_blocks(
        self, ordered_blocks: Iterable[KVCacheBlock], evict_first: bool = False
    ) -> None:
        """Release one reference per entry, in eviction-priority order.

        A block reaching ``ref_cnt == 0`` goes to the FRONT group if it holds no
        key (LIFO reuse, for GPU locality), caching is off, or ``evict_first``;
        else to the BACK (FIFO, so cached blocks are evicted least recently used
        first). Blocks of another live pool are forwarded to it.

        (The postconditions read ``ordered_blocks`` again, so they speak of list arguments.)

        raises: InsufficientFreeBlocks, InvalidArgument, RefCountUnderflow, ForeignBlock, NullBlockMisuse, CachingDisabled, AlreadyCached, BlockNotInUse
        post: type(ordered_blocks) is not list or all(b.ref_cnt == __old__.self.blocks[b.block_id].ref_cnt - m for b, m in Counter(ordered_blocks).items() if b.pool is self._weak_self and not b.is_null)
        post: type(ordered_blocks) is not list or self.free_block_queue.num_free_blocks == __old__.self.free_block_queue.num_free_blocks + sum(1 for b, m in Counter(ordered_blocks).items() if b.pool is self._weak_self and not b.is_null and __old__.self.blocks[b.block_id].ref_cnt == m)
        """  # noqa: E501
        if evict_first is not True and evict_first is not False:
            raise InvalidArgument(f"evict_first must be a bool, got {_show(evict_first)}")
        blocks = (
            ordered_blocks
            if type(ordered_blocks) is list
            else _materialise(ordered_blocks, "ordered_blocks")
        )
        mark = self._weak_self
        # With caching off, or when asked, every block reaching zero goes to FRONT.
        all_front = evict_first or not self.enable_caching
        front: list[KVCacheBlock] = []
        back: list[KVCacheBlock] = []
        forwarded: dict[BlockPool, list[KVCacheBlock]] | None = None
        i = 0  # entries processed so far: what a refusal must roll back
        try:
            for block in blocks:
                # Ownership: an exact block carrying the pool's mark (as in ``touch``);
                # anything else is another pool's block or no block (``_forward``).
                if type(block) is KVCacheBlock and block._pool is mark:
                    ref_cnt = block.ref_cnt - 1
                    if ref_cnt > 0:
                        block.ref_cnt = ref_cnt
                    elif ref_cnt == 0:
                        block.ref_cnt = 0
                        if all_front or block._block_hash is None:
                            front.append(block)
                        else:
                            back.append(block)
                    elif not block.is_null:  # the null block's ref_cnt is never touched
                        self._undo_release(blocks, i)
                        # Every entry is checked for being a block before counts are:
                        # a later non-block makes the call InvalidArgument.
                        for later in blocks[i + 1 :]:
                            if not self._is_some_block(later):
                                raise InvalidArgument(f"{_show(later)} is not a block of any pool")
                        raise RefCountUnderflow(
                            f"block {block.block_id} is freed more often than it is "
                            "referenced (a double free)"
                        )
                else:
                    forwarded = _forward(block, forwarded)
                i += 1
        except PoolError:
            raise
        except BaseException as exc:
            # Anything else an entry raised (an attribute, an index, an ``__index__``):
            # give back what was taken, then refuse the entry, or let an interrupt through.
            self._undo_release(blocks, i)
            if not isinstance(exc, Exception):
                raise
            raise InvalidArgument(f"{_show(blocks[i])} is not a block of any pool") from (
                None if isinstance(exc, _NotABlock) else exc
            )
        if forwarded:
            try:
                for owner, theirs in forwarded.items():
                    owner._check_releasable(theirs)
            except RefCountUnderflow:
                self._undo_release(blocks, len(blocks))
                raise
        queue = self.free_block_queue
        queue._prepend_n(front)
        queue._append_n(back)
        if forwarded:
            for owner, theirs in forwarded.items():
                owner.free_blocks(theirs, evict_first)

    def _undo_release(self, blocks: list[Any], stop: int) -> None:
        """Give back the references ``free_blocks`` took from ``blocks[:stop]`` before refusing."""
        mine = self.blocks
        for block in blocks[:stop]:
            # Entries before ``stop`` passed the identity test or were filed as another
            # pool's: ``_owner`` reads no caller code, so this test cannot raise.
            if type(block) is KVCacheBlock and _holds(mine, block) and not block.is_null:
                block.ref_cnt += 1

    def _is_some_block(self, entry: object) -> bool:
        """Whether ``entry`` is a block of some pool, live or gone."""
        try:
            _owner(entry)
        except _NotABlock:
            return False
        return True

    def _check_releasable(self, blocks: list[KVCacheBlock]) -> None:
        """Each of this pool's blocks listed m times must have ``ref_cnt >= m``."""
        for block, m in Counter(blocks).items():
            if block.ref_cnt < m:
                raise RefCountUnderflow(
                    f"block {block.block_id} is released {m} time(s) "
                    f"but has ref_cnt {block.ref_cnt}"
                )

    def _own(self, blocks: list[Any], *, null_ok: bool) -> list[KVCacheBlock]:
        """Check that every entry is a block of this pool.

        Per entry, in order: is the very block of some pool, live or gone
        (``InvalidArgument``), is the null block (skipped if ``null_ok``, else
        ``NullBlockMisuse``), belongs to this pool (``ForeignBlock``). Returns this
        pool's non-null blocks, in order.
        """
        out: list[KVCacheBlock] = []
        for block in blocks:
            try:
                owner = _owner(block)
            except _NotABlock:
                raise InvalidArgument(f"{_show(block)} is not a block of any pool") from None
            if block.is_null:
                if null_ok:
                    continue
                raise NullBlockMisuse(f"block {block.block_id} is the null block")
            if owner is not self:
                raise ForeignBlock(f"block {block.block_id} belongs to another pool")
            out.append(block)
        return out

    def touch(self, blocks: Iterable[KVCacheBlock]) -> None:
        """Take one more reference to each block (a prefix-cache hit).

        A block with ``ref_cnt == 0`` is an eviction candidate in the free queue;
        touching it takes it out, so it cannot be handed out while in use.

        (The postconditions read ``blocks`` again, so they speak of list arguments.)

        raises: InsufficientFreeBlocks, InvalidArgument, RefCountUnderflow, ForeignBlock, NullBlockMisuse, CachingDisabled, AlreadyCached, BlockNotInUse
        post: type(blocks) is not list or all(b.ref_cnt == __old__.self.blocks[b.block_id].ref_cnt + m for b, m in Counter(blocks).items() if not b.is_null)
        post: type(blocks) is not list or all(b.prev_free_block is None for b in blocks if not b.is_null)
        post: self.free_block_queue.num_free_blocks <= __old__.self.free_block_queue.num_free_blocks
        """  # noqa: E501
        # (Kept in ``blocks``, not a second name: on lists of a few blocks, what
        # vLLM's calls pass, every local of this frame shows in benchmarks/vllm_paths.py.)
        if type(blocks) is not list:
            blocks = _materialise(blocks, "blocks")
        mark = self._weak_self
        # One pass checks, counts and unlinks. A free block it meets leaves the queue
        # at once, through the queue's own ``_remove`` (the method the refinement proof
        # covers), one call per such block as vLLM makes, and keeps in its emptied
        # ``prev_free_block`` the neighbour it followed: a refusal puts the blocks back
        # after those neighbours newest first, the exact reverse of the unlinking
        # ("dancing links", ``_undo_touch``); after the pass the link is emptied again.
        # Nothing is allocated: a list of the blocks to unlink after the pass cost 0.05
        # of touch's time or more here (benchmarks/vllm_paths.py, 12-05).
        unlinked = False
        block: Any = None
        try:
            for block in blocks:
                # Ownership: an exact block (so reading its slots runs no code of the
                # caller's: a proxy forwarding to one of our blocks would show our mark)
                # carrying the pool's mark, which only its own blocks carry.
                if type(block) is not KVCacheBlock or block._pool is not mark:
                    raise _NotABlock
                ref_cnt = block.ref_cnt
                if ref_cnt == 0:
                    if block.is_null:  # never pooled: its ref_cnt stays 0
                        continue
                    # An eviction candidate in use again: it leaves the free queue.
                    prev = block.prev_free_block
                    self.free_block_queue._remove(block)
                    block.prev_free_block = prev
                    unlinked = True
                block.ref_cnt = ref_cnt + 1
        except BaseException as exc:
            self._undo_touch(blocks, block)
            if not isinstance(exc, Exception):
                raise
            # Something is not ours (or not a block): the full check names it, or (the
            # null block of another pool, which touch skips) leaves a list to touch.
            # Not a call of touch itself: a check that wrongly let an entry through
            # would then recurse instead of touching what the check accepted.
            self._touch_checked(self._own(blocks, null_ok=True))
            return
        if unlinked:
            # Out of the queue: no links (INV-LIST). A block in use has none already;
            # ``next_free_block`` is left as ``_remove`` left it.
            for block in blocks:
                if block.prev_free_block is not None:
                    block.prev_free_block = None
        if self.metrics_collector:
            self._metrics_accessed(blocks)

    def _metrics_accessed(self, blocks: list[KVCacheBlock]) -> None:
        """vLLM's collector call for each touched block (once the state is complete)."""
        collector = self.metrics_collector
        for block in blocks:
            if not block.is_null:
                collector.on_block_accessed(block)

    def _undo_touch(self, entries: list[Any], failed: Any) -> None:
        """Give back what ``touch`` did before ``failed``'s first appearance.

        Every entry before it passed the ownership test, so is this pool's block; the
        first entry to fail is the first appearance of ``failed``, since an entry that
        fails the test fails it every time. (Counting entries instead costs a tenth
        of touch's time on lists of in-use blocks, measured by benchmarks/vllm_paths.py.)
        The blocks ``touch`` unlinked are those of them with a ``prev_free_block`` (a
        block in use has none), unlinked in the order they first appear. They go back
        newest first, each after the neighbour it kept: undone in the reverse order of
        the unlinking, each finds that neighbour's next is the block that followed it
        then, so the queue is exactly as it was.
        """
        stop = next((i for i, e in enumerate(entries) if e is failed), len(entries))
        done = entries[:stop]
        unlinked = list({id(b): b for b in done if b.prev_free_block is not None}.values())
        for block in reversed(unlinked):
            prev = block.prev_free_block
            nxt = prev.next_free_block
            block.next_free_block = nxt
            nxt.prev_free_block = block
            prev.next_free_block = block
        self.free_block_queue.num_free_blocks += len(unlinked)
        for block in done:
            if not block.is_null:
                block.ref_cnt -= 1

    def _touch_checked(self, own: list[KVCacheBlock]) -> None:
        """``touch`` of blocks already checked to be this pool's and not the null block."""
        queue = self.free_block_queue
        for block in own:
            if block.ref_cnt == 0:
                queue._remove(block)
            block.ref_cnt += 1
        if self.metrics_collector:
            for block in own:
                self.metrics_collector.on_block_accessed(block)

    def unpin_blocks(self, blocks: Iterable[KVCacheBlock], on_reuse: Watcher) -> None:
        """Release references to blocks that stay readable until the pool reuses them.

        Each block gets ``on_reuse`` as a pending watcher (once, however often it
        is listed or unpinned with that very object); blocks reaching
        ``ref_cnt == 0`` join the back of the free queue whether or not they hold
        a key, so they are the last candidates for reuse.

        (The postconditions read ``blocks`` again, so they speak of list arguments.)

        raises: InsufficientFreeBlocks, InvalidArgument, RefCountUnderflow, ForeignBlock, NullBlockMisuse, CachingDisabled, AlreadyCached, BlockNotInUse
        post: type(blocks) is not list or all(b.ref_cnt == __old__.self.blocks[b.block_id].ref_cnt - m for b, m in Counter(blocks).items())
        post: type(blocks) is not list or all(any(w is on_reuse for w in b._pending or ()) for b in blocks)
        post: self._watch_registered >= __old__.self._watch_registered
        post: [b.block_id for b in self.free_block_queue.get_all_free_blocks()][:__old__.self.free_block_queue.num_free_blocks] == [b.block_id for b in __old__.self.free_block_queue.get_all_free_blocks()]
        """  # noqa: E501
        if not callable(on_reuse):
            raise InvalidArgument(f"on_reuse must be callable, got {_show(on_reuse)}")
        entries = blocks if type(blocks) is list else _materialise(blocks, "blocks")
        mark = self._weak_self
        # One pass checks and changes: each block gives up a reference and gets
        # ``on_reuse`` as a pending watcher. One tuple serves every block that had
        # none, so a refusal can find and take them off again (``_undo_unpin``);
        # ``grown`` keeps the tuples a watcher was added to.
        single = (on_reuse,)
        order0 = order = self._next_pending_order
        grown: list[tuple[KVCacheBlock, tuple[Watcher, ...]]] | None = None
        released: list[KVCacheBlock] = []
        i = 0  # entries done so far: what a refusal gives back
        try:
            for block in entries:
                # Ownership: an exact block carrying the pool's mark (as in ``touch``).
                if type(block) is not KVCacheBlock or block._pool is not mark:
                    raise _NotABlock
                ref_cnt = block.ref_cnt - 1
                if ref_cnt < 0:  # released more often than referenced, or the null block
                    raise _NotABlock
                block.ref_cnt = ref_cnt
                if not ref_cnt:
                    released.append(block)
                pending = block._pending
                if pending is None:
                    block._pending = single
                    block._pending_order = order
                    order += 1
                elif pending[0] is not on_reuse:  # once per watcher object
                    for w in pending:
                        if w is on_reuse:
                            break
                    else:
                        if grown is None:
                            grown = []
                        grown.append((block, pending))
                        block._pending = (*pending, on_reuse)
                i += 1
        except BaseException as exc:
            self._undo_unpin(entries, i, single, grown)
            if not isinstance(exc, Exception):
                raise
            # Name the refusal a check of the whole list before any change gives.
            self._check_releasable(self._own(entries, null_ok=False))
            raise AssertionError("unpin_blocks refused a call its checks accept") from exc
        self._next_pending_order = order
        self._watch_registered += order - order0 + (len(grown) if grown else 0)
        if released:
            # Last candidates for reuse: the back of the queue, key or not.
            self.free_block_queue._append_n(released)

    def _undo_unpin(
        self,
        entries: list[Any],
        stop: int,
        single: tuple[Watcher, ...],
        grown: list[tuple[KVCacheBlock, tuple[Watcher, ...]]] | None,
    ) -> None:
        """Give back what ``unpin_blocks`` did to ``entries[:stop]`` (all this pool's blocks).

        ``grown`` holds the tuples it replaced; the blocks that had no watcher now hold
        ``single``, the call's own tuple, which no other block holds and no replaced
        tuple is; the released blocks were not linked in yet.
        """
        for block, pending in reversed(grown or ()):
            block._pending = pending
        for block in entries[:stop]:
            if block._pending is single:
                block._pending = None
            block.ref_cnt += 1

    # -- the prefix cache ---------------------------------------------------------------

    def cache_blocks(self, blocks: Iterable[KVCacheBlock], keys: Iterable[Hashable]) -> None:
        """Give ``blocks[i]`` the key ``keys[i]``; each joins the index last under its key.

        (The postconditions read ``blocks`` and ``keys`` again, so they speak of list arguments.)

        raises: InsufficientFreeBlocks, InvalidArgument, RefCountUnderflow, ForeignBlock, NullBlockMisuse, CachingDisabled, AlreadyCached, BlockNotInUse
        post: type(blocks) is not list or type(keys) is not list or all(b.block_hash == k for b, k in zip(blocks, keys))
        post: type(blocks) is not list or all(b.block_id in self._index[b.block_hash] for b in blocks)
        post: [b.block_id for b in self.free_block_queue.get_all_free_blocks()] == [b.block_id for b in __old__.self.free_block_queue.get_all_free_blocks()]
        """  # noqa: E501
        entries = _materialise(blocks, "blocks")
        key_list = _materialise(keys, "keys")
        if len(entries) != len(key_list):
            raise InvalidArgument(f"{len(entries)} blocks but {len(key_list)} keys")
        for key in key_list:
            try:
                hash(key)
            except TypeError:
                raise InvalidArgument(f"key {_show(key)} is not hashable") from None
            if key is None:
                raise InvalidArgument("None is not a cache key (it means 'no key')")
        if not self.enable_caching:
            raise CachingDisabled("prefix caching is disabled on this pool")
        own = self._own(entries, null_ok=False)
        seen: set[int] = set()
        for block in own:
            if block.ref_cnt < 1:
                raise BlockNotInUse(f"block {block.block_id} has ref_cnt 0: nobody wrote it")
            if block._block_hash is not None:
                raise AlreadyCached(
                    f"block {block.block_id} already holds key {_show(block._block_hash)}"
                )
            if block.block_id in seen:
                raise InvalidArgument(f"block {block.block_id} is listed twice")
            seen.add(block.block_id)
        if not own:
            return
        # Every key is looked up before anything changes: a key's ``__hash__`` or
        # ``__eq__`` that raises does so here, and surfaces with the pool untouched.
        index = self._index
        found: list[dict[int, KVCacheBlock]] = []
        new: dict[Hashable, dict[int, KVCacheBlock]] = {}
        for key in key_list:
            holders = index.get(key)
            if holders is None:
                holders = new.get(key)
                if holders is None:
                    holders = new[key] = {}
            found.append(holders)
        # The change. ``dict.update`` from a dict reuses the hashes computed above.
        for block, key, holders in zip(own, key_list, found, strict=True):
            block._block_hash = key
            holders[block.block_id] = block
        if new:
            index.update(new)
        if self.enable_kv_cache_events:
            self._log(BlockStored(tuple(key_list)))

    # -- vLLM 0.33.0's caching calls: blocks with several keys ------------------------------

    @property
    def cached_block_hashes_by_block(self) -> dict[int, set[Hashable]]:
        """vLLM's view of the further entries: block_id -> keys beyond ``block_hash`` (a copy)."""
        return {bid: set(keys) for bid, keys in self._entries.items()}

    def _insert(self, key: Hashable, block: KVCacheBlock, num_tokens: int | None) -> bool:
        """``block`` holds ``key`` (as its primary key if it has none); False if it already did."""
        if block._block_hash == key:
            return False
        holders = self._index.get(key)
        if holders is not None and block.block_id in holders:
            return False
        if block._block_hash is None:
            block._block_hash = key
            block._block_hash_num_tokens = num_tokens
        else:
            self._entries.setdefault(block.block_id, []).append(key)
        if holders is None:
            self._index[key] = {block.block_id: block}
        else:
            holders[block.block_id] = block
        return True

    def _insert_block_hash(
        self, block_hash_with_group_id: bytes, block: KVCacheBlock, num_tokens: int | None
    ) -> None:
        """vLLM's helper, which its CPU offload manager calls: ``block`` holds the key too.

        As vLLM: nothing if ``block`` holds the key already; else it becomes the block's
        primary key (with ``num_tokens``) if it has none, or a further entry; no event
        is logged: vLLM's caller announces the key itself, by appending its own
        ``BlockStored`` to ``kv_event_queue``, so the key joins the consumers' view
        here (INV-EVENTS). Stricter than vLLM: the key must be in vLLM's form (bytes
        longer than the 4-byte group id), ``num_tokens`` None or an int >= 1, and
        ``block`` this pool's, not the null block, in use (else ``InvalidArgument``,
        ``ForeignBlock``, ``NullBlockMisuse``, ``BlockNotInUse``), with caching on
        (``CachingDisabled``); a refusal changes nothing.

        raises: InsufficientFreeBlocks, InvalidArgument, RefCountUnderflow, ForeignBlock, NullBlockMisuse, CachingDisabled, AlreadyCached, BlockNotInUse
        post: block.block_hash == block_hash_with_group_id or block_hash_with_group_id in self._entries.get(block.block_id, ())
        """  # noqa: E501
        key = block_hash_with_group_id
        if type(key) is not bytes or len(key) <= GROUP_ID_BYTES:
            raise InvalidArgument(
                f"key {_show(key)} is not a block hash followed by a {GROUP_ID_BYTES}-byte group id"
            )
        if num_tokens is not None and (type(num_tokens) is not int or num_tokens < 1):
            raise InvalidArgument(
                f"num_tokens must be None or an int >= 1, got {_show(num_tokens)}"
            )
        self._mine(block)
        if block.is_null:
            raise NullBlockMisuse(f"block {block.block_id} is the null block")
        self._need_caching()
        self._cacheable(block, set())
        if self._insert(key, block, num_tokens) and self.enable_kv_cache_events:
            self._event_view.add(key)

    def _sizes(self, block_size: Any, group: Any) -> None:
        if type(block_size) is not int or block_size < 1 or block_size % self.hash_block_size:
            raise InvalidArgument(
                f"block_size must be a positive multiple of hash_block_size "
                f"{self.hash_block_size}, got {block_size!r}"
            )
        if type(group) is not int or not 0 <= group < _MAX_GROUPS:
            raise InvalidArgument(f"group id {group!r} is not an int in 0..2**32-1")

    def _need_caching(self) -> None:
        if not self.enable_caching:
            raise CachingDisabled("this pool was built with enable_caching=False")

    def _mine(self, block: Any) -> None:
        """Refuse a non-block (``InvalidArgument``) or another pool's block (``ForeignBlock``)."""
        try:
            owner = _owner(block)
        except _NotABlock:
            raise InvalidArgument(f"{_show(block)} is not a block of any pool") from None
        if owner is not self and not block.is_null:
            raise ForeignBlock(f"block {block.block_id} belongs to another pool")

    def _cacheable(self, block: Any, seen: set[int]) -> KVCacheBlock:
        """A block that may take a key: this pool's, in use, not listed before in the call."""
        self._mine(block)
        if block.ref_cnt < 1:
            raise BlockNotInUse(f"block {block.block_id} has ref_cnt 0: nobody wrote it")
        if block.block_id in seen:
            raise InvalidArgument(f"block {block.block_id} is listed twice")
        seen.add(block.block_id)
        return cast(KVCacheBlock, block)

    def cache_full_blocks(
        self,
        request: Any,
        blocks: list[KVCacheBlock],
        num_cached_blocks: int,
        num_full_blocks: int,
        block_size: int,
        kv_cache_group_id: int,
        block_mask: list[bool] | None = None,
    ) -> None:
        """vLLM's: key ``blocks[num_cached_blocks:num_full_blocks]`` by the request's hashes.

        Null and masked-out entries are skipped. A block already holding a key is
        promoted (its old keys dropped, with their events) if that key covers
        fewer tokens; otherwise the call is refused (``AlreadyCached``).

        raises: InsufficientFreeBlocks, InvalidArgument, RefCountUnderflow, ForeignBlock, NullBlockMisuse, CachingDisabled, AlreadyCached, BlockNotInUse
        """  # noqa: E501
        hashes = _block_hashes(request)  # the request first, as the spec reads it first
        nc, nf = num_cached_blocks, num_full_blocks
        for value, what in ((nc, "num_cached_blocks"), (nf, "num_full_blocks")):
            if type(value) is not int or value < 0:
                raise InvalidArgument(f"{what} must be an int >= 0, got {value!r}")
        self._sizes(block_size, kv_cache_group_id)
        if nc >= nf:
            return
        self._need_caching()
        entries = blocks if type(blocks) is list else _materialise(blocks, "blocks")
        if nf > len(entries):
            raise InvalidArgument(f"num_full_blocks {nf} but the request has {len(entries)} blocks")
        mask = None if block_mask is None else _materialise(block_mask, "block_mask")
        if mask is not None and (len(mask) != nf - nc or any(type(m) is not bool for m in mask)):
            raise InvalidArgument(f"block_mask must be {nf - nc} bools, got {block_mask!r}")
        scale = block_size // self.hash_block_size
        if len(hashes) // scale < nf:
            raise InvalidArgument(
                f"the request has {len(hashes) // scale} block hashes at block size "
                f"{block_size}, {nf} are needed"
            )
        # The common case in one pass; anything else falls through to the full check.
        if (
            mask is None
            and type(hashes) is list
            and self._cache_full_fast(
                request, entries, hashes, nc, nf, block_size, scale, kv_cache_group_id
            )
        ):
            return
        todo: list[tuple[int, KVCacheBlock, bytes]] = []
        seen: set[int] = set()
        for i in range(nc, nf):
            blk = entries[i]
            try:
                _owner(blk)
            except _NotABlock:
                raise InvalidArgument(f"{_show(blk)} is not a block of any pool") from None
            if blk.is_null or (mask is not None and not mask[i - nc]):
                continue
            self._cacheable(blk, seen)
            covers = (i + 1) * block_size
            if blk._block_hash is not None:
                have = blk._block_hash_num_tokens
                if have is None or have >= covers:
                    raise AlreadyCached(
                        f"block {blk.block_id} already holds key {blk._block_hash!r} covering "
                        f"{have} tokens; only a shorter prefix may be promoted to {covers}"
                    )
            h = hashes[(i + 1) * scale - 1]
            if type(h) is not bytes:
                raise InvalidArgument(f"block hash {h!r} is not bytes")
            todo.append((i, blk, h))
        events = self.enable_kv_cache_events
        spec_req = (  # read before any change
            _spec_request(
                request, nc * block_size, nf * block_size + self.num_hash_lookahead_tokens
            )
            if events
            else None
        )
        suffix = kv_cache_group_id.to_bytes(GROUP_ID_BYTES, "big")
        keys: list[Hashable] = []
        for i, blk, h in todo:
            if blk._block_hash is not None:  # partial -> full promotion
                self._drop_key(blk)
            key = h + suffix
            self._insert(key, blk, (i + 1) * block_size)
            keys.append(key)
        if spec_req is not None:
            self._log_full(
                spec_req,
                keys,
                [h for _, _, h in todo],
                [i for i, _, _ in todo],
                hashes,
                nc,
                nf,
                block_size,
                scale,
                kv_cache_group_id,
            )

    def _log_full(
        self,
        spec_req: Request,
        keys: list[Hashable],
        chosen: list[bytes],
        positions: list[int],
        hashes: Any,
        nc: int,
        nf: int,
        block_size: int,
        scale: int,
        group: int,
    ) -> None:
        """The ``BlockStored`` event of a ``cache_full_blocks`` call that keyed ``positions``."""
        self._log(
            stored_event(
                self.num_hash_lookahead_tokens,
                self.medium,
                spec_req,
                keys,
                chosen,
                None if nc == 0 else hashes[nc * scale - 1],
                positions,
                nc * block_size,
                nf * block_size,
                block_size,
                group,
            )
        )

    def _cache_full_fast(
        self,
        request: Any,
        entries: list[Any],
        hashes: list[Any],
        nc: int,
        nf: int,
        block_size: int,
        scale: int,
        group: int,
    ) -> bool:
        """``cache_full_blocks``' common case in one pass; False if the call is not one.

        The common case: every block this pool's, in use, listed once and holding no
        key yet, every hash bytes. The pass keys each block as it goes; at the first
        entry that is not such a block it takes back what it added (removing entries
        leaves every other key's holders in their order) and returns False, so the
        full check can name the refusal or do the promotion.
        """
        mark = self._weak_self
        index = self._index
        chosen = hashes[(nc + 1) * scale - 1 : nf * scale : scale]
        suffix = group.to_bytes(GROUP_ID_BYTES, "big")
        covers = nc * block_size
        done = 0
        try:
            for blk, h in zip(entries[nc:nf], chosen, strict=True):
                if (
                    type(blk) is not KVCacheBlock  # no block, or a proxy of one
                    or blk._pool is not mark  # another pool's
                    or blk.ref_cnt < 1  # nobody wrote it, or the null block
                    or blk._block_hash is not None  # a promotion, or listed twice
                    or type(h) is not bytes
                ):
                    raise _NotABlock
                key = h + suffix
                covers += block_size
                blk._block_hash = key
                blk._block_hash_num_tokens = covers
                holders = index.get(key)
                if holders is None:
                    index[key] = {blk.block_id: blk}
                else:
                    holders[blk.block_id] = blk
                done += 1
        except BaseException as exc:
            self._uncache_last(entries[nc : nc + done])
            if not isinstance(exc, Exception):
                raise
            return False
        if self.enable_kv_cache_events:
            try:
                spec_req = _spec_request(
                    request, nc * block_size, nf * block_size + self.num_hash_lookahead_tokens
                )
            except BaseException:
                self._uncache_last(entries[nc:nf])
                raise
            keys: list[Hashable] = [h + suffix for h in chosen]
            positions = list(range(nc, nf))
            self._log_full(
                spec_req, keys, chosen, positions, hashes, nc, nf, block_size, scale, group
            )
        return True

    def _uncache_last(self, blocks: list[KVCacheBlock]) -> None:
        """Take back the primary keys ``_cache_full_fast`` gave ``blocks`` (and emptied keys)."""
        index = self._index
        for blk in reversed(blocks):
            key = blk._block_hash
            holders = index[key]
            del holders[blk.block_id]
            if not holders:
                del index[key]
            blk._block_hash = None
            blk._block_hash_num_tokens = None

    def cache_partial_block(
        self,
        request: Any,
        block: KVCacheBlock,
        num_tokens: int,
        kv_cache_group_id: int,
        block_size: int,
        replace_existing_hashes: bool = False,
    ) -> bytes | None:
        """vLLM's: make ``block`` reachable from the ``num_tokens`` prefix; the key, or None.

        The key becomes the block's primary key if it has none, else a further
        entry. ``replace_existing_hashes`` drops every key first (with events); a
        prefix longer than the primary key's replaces the block's keys too.

        raises: InsufficientFreeBlocks, InvalidArgument, RefCountUnderflow, ForeignBlock, NullBlockMisuse, CachingDisabled, AlreadyCached, BlockNotInUse
        """  # noqa: E501
        hashes = _block_hashes(request)  # the request first, as the spec reads it first
        try:
            _owner(block)
        except _NotABlock:
            raise InvalidArgument(f"{_show(block)} is not a block of any pool") from None
        if type(kv_cache_group_id) is not int or not 0 <= kv_cache_group_id < _MAX_GROUPS:
            raise InvalidArgument(f"group id {kv_cache_group_id!r} is not an int in 0..2**32-1")
        if type(replace_existing_hashes) is not bool:
            raise InvalidArgument(
                f"replace_existing_hashes must be a bool, got {replace_existing_hashes!r}"
            )
        if block.is_null:
            return None
        self._sizes(block_size, kv_cache_group_id)
        hsz = self.hash_block_size
        n = num_tokens
        if type(n) is not int or n < 1 or n % hsz or n // hsz > len(hashes):
            raise InvalidArgument(
                f"num_tokens must be a positive multiple of {hsz} covered by the request's "
                f"{len(hashes)} block hashes, got {n!r}"
            )
        self._need_caching()
        self._cacheable(block, set())
        m = n // hsz
        h = hashes[m - 1]
        parent = hashes[m - 2] if m > 1 else None
        if type(h) is not bytes or (parent is not None and type(parent) is not bytes):
            raise InvalidArgument("the request's block hashes must be bytes")
        spec_req = (
            _spec_request(request, n - hsz, n + self.num_hash_lookahead_tokens)
            if self.enable_kv_cache_events
            else None
        )
        key = h + kv_cache_group_id.to_bytes(GROUP_ID_BYTES, "big")
        holders = self._index.get(key)
        held = block._block_hash == key or (holders is not None and block.block_id in holders)
        if replace_existing_hashes:
            if block._block_hash is not None:
                self._drop_key(block)
            held = False
        elif not held and block._block_hash is not None:
            have = block._block_hash_num_tokens
            if have is not None and have < n:
                self._drop_key(block)  # a longer prefix replaces the shorter one
        self._insert(key, block, n)
        if spec_req is not None and not held:
            self._log(
                partial_event(
                    self.num_hash_lookahead_tokens,
                    self.medium,
                    spec_req,
                    key,
                    h,
                    parent,
                    n,
                    hsz,
                    kv_cache_group_id,
                )
            )
        return key

    def move_block_hashes(self, src_block: KVCacheBlock, dst_block: KVCacheBlock) -> None:
        """vLLM's: every key of ``src_block`` moves to ``dst_block`` (which holds none); no events.

        raises: InsufficientFreeBlocks, InvalidArgument, RefCountUnderflow, ForeignBlock, NullBlockMisuse, CachingDisabled, AlreadyCached, BlockNotInUse
        """  # noqa: E501
        src, dst = self._own([src_block, dst_block], null_ok=False)
        if dst._block_hash is not None:
            raise AlreadyCached(f"block {dst.block_id} already holds key {dst._block_hash!r}")
        key = src._block_hash
        if key is None:
            return
        if dst.ref_cnt < 1:
            raise BlockNotInUse(f"block {dst.block_id} has ref_cnt 0: nobody wrote it")
        keys = [key, *self._entries.pop(src.block_id, ())]
        num_tokens = src._block_hash_num_tokens
        src._block_hash = None
        src._block_hash_num_tokens = None
        index = self._index
        for k in keys:
            holders = index[k]
            del holders[src.block_id]
            holders[dst.block_id] = dst
        dst._block_hash = key
        dst._block_hash_num_tokens = num_tokens
        if len(keys) > 1:
            self._entries[dst.block_id] = keys[1:]

    def emit_cached_block_events(
        self, request: Any, num_cached_blocks: int, block_size: int, kv_cache_group_id: int
    ) -> None:
        """vLLM's: announce a prefix hit of ``num_cached_blocks`` blocks again (state unchanged).

        raises: InsufficientFreeBlocks, InvalidArgument, RefCountUnderflow, ForeignBlock, NullBlockMisuse, CachingDisabled, AlreadyCached, BlockNotInUse
        """  # noqa: E501
        hashes = _block_hashes(request)  # the request first, as the spec reads it first
        n = num_cached_blocks
        if type(n) is not int or n < 0:
            raise InvalidArgument(f"num_cached_blocks must be an int >= 0, got {n!r}")
        self._sizes(block_size, kv_cache_group_id)
        if not self.enable_kv_cache_events or n == 0:
            return
        scale = block_size // self.hash_block_size
        if len(hashes) // scale < n:
            raise InvalidArgument(
                f"the request has {len(hashes) // scale} block hashes at block size "
                f"{block_size}, {n} are needed"
            )
        chosen = [hashes[(i + 1) * scale - 1] for i in range(n)]
        if any(type(h) is not bytes for h in chosen):
            raise InvalidArgument("the request's block hashes must be bytes")
        suffix = kv_cache_group_id.to_bytes(GROUP_ID_BYTES, "big")
        held: list[Hashable] = [h + suffix for h in chosen if h + suffix in self._index]
        self._log(
            stored_event(
                self.num_hash_lookahead_tokens,
                self.medium,
                _spec_request(request, 0, n * block_size + self.num_hash_lookahead_tokens),
                held,
                chosen,
                None,
                list(range(n)),
                0,
                n * block_size,
                block_size,
                kv_cache_group_id,
            )
        )

    def get_cached_block(
        self, block_hash: Hashable, kv_cache_group_ids: Iterable[int] | None = None
    ) -> Any:
        """vLLM's lookup: the oldest holder of ``block_hash`` in each group, or None.

        With ``kv_cache_group_ids`` (vLLM's form) the result is a list with one
        block per group, or None if any group misses (``[]`` for no groups). Without
        it (the key-level form), ``block_hash`` is a whole index key and the result
        is its oldest holder, or None.

        raises: InsufficientFreeBlocks, InvalidArgument, RefCountUnderflow, ForeignBlock, NullBlockMisuse, CachingDisabled, AlreadyCached, BlockNotInUse
        post: kv_cache_group_ids is not None or (__return__ is None) == (block_hash not in self._index)
        post: kv_cache_group_ids is not None or __return__ is None or __return__.block_hash == block_hash or block_hash in self._entries.get(__return__.block_id, ())
        """  # noqa: E501
        index = self._index
        if kv_cache_group_ids is None:
            try:
                holders = index.get(block_hash)
            except TypeError:
                raise InvalidArgument(f"key {_show(block_hash)} is not hashable") from None
            if not holders:
                return None
            return next(iter(holders.values()))
        if type(block_hash) is not bytes:
            raise InvalidArgument(f"block hash {block_hash!r} is not bytes")
        groups = (
            kv_cache_group_ids
            if type(kv_cache_group_ids) is list
            else _materialise(kv_cache_group_ids, "kv_cache_group_ids")
        )
        found: list[KVCacheBlock] = []
        for g in groups:
            if type(g) is not int or not 0 <= g < _MAX_GROUPS:
                raise InvalidArgument(f"group id {g!r} is not an int in 0..2**32-1")
        for g in groups:
            holders = index.get(block_hash + g.to_bytes(GROUP_ID_BYTES, "big"))
            if not holders:
                return None
            found.append(next(iter(holders.values())))
        return found

    def evict_blocks(self, block_ids: Iterable[int]) -> None:
        """Drop the key of each named block; the blocks stay where they are.

        (The postconditions read ``block_ids`` again, so they speak of list arguments.)

        raises: InsufficientFreeBlocks, InvalidArgument, RefCountUnderflow, ForeignBlock, NullBlockMisuse, CachingDisabled, AlreadyCached, BlockNotInUse
        post: type(block_ids) is not list or all(self.blocks[i].block_hash is None for i in block_ids)
        post: [b.block_id for b in self.free_block_queue.get_all_free_blocks()] == [b.block_id for b in __old__.self.free_block_queue.get_all_free_blocks()]
        post: [b.ref_cnt for b in self.blocks] == [b.ref_cnt for b in __old__.self.blocks]
        """  # noqa: E501
        ids = _materialise(block_ids, "block_ids")
        n = self.num_gpu_blocks
        for i in ids:
            if type(i) is not int or not 0 <= i < n:
                raise InvalidArgument(f"block id {_show(i)} is not an int in 0..{n - 1}")
            if i == 0:
                raise NullBlockMisuse("block id 0 is the null block")
        blocks = self.blocks
        for i in ids:
            block = blocks[i]
            if block._block_hash is not None:
                self._drop_key(block)
        if self.metrics_collector:
            for i in ids:
                self.metrics_collector.on_block_evicted(blocks[i])

    def _maybe_evict_cached_block(self, block: KVCacheBlock) -> bool:
        """vLLM's helper: drop every key ``block`` holds; whether it held any.

        raises: InsufficientFreeBlocks, InvalidArgument, RefCountUnderflow, ForeignBlock, NullBlockMisuse, CachingDisabled, AlreadyCached, BlockNotInUse
        """  # noqa: E501
        self._mine(block)
        had = block._block_hash is not None
        if had:
            self._drop_key(block)
        if self.metrics_collector:
            self.metrics_collector.on_block_evicted(block)
        return had

    def _drop_key(self, block: KVCacheBlock) -> None:
        """``block`` forgets every key it holds, primary first, then its further entries.

        Each key is announced removed if ``block`` was its last holder.
        """
        key = block._block_hash
        block._block_hash = None
        block._block_hash_num_tokens = None
        index = self._index
        try:
            holders = index[key]
            del holders[block.block_id]  # a block is in one holders dict: this proves it
        except Exception:  # the key hashes elsewhere now, or its __eq__ raises
            holders = self._holders_of(block)
            del holders[block.block_id]
            if not holders:
                self._forget(key, holders)
        else:
            if not holders:
                try:
                    del index[key]  # the lookup above found these holders under ``key``
                except Exception:
                    self._forget(key, holders)
        if not holders and self.enable_kv_cache_events:
            self._log(removed(key, self.medium))
        if self._entries:
            for extra in self._entries.pop(block.block_id, ()):
                holders = index[extra]
                del holders[block.block_id]
                if not holders:
                    del index[extra]
                    if self.enable_kv_cache_events:
                        self._log(removed(extra, self.medium))

    def _holders_of(self, block: KVCacheBlock) -> dict[int, KVCacheBlock]:
        """The holders ``block`` is filed under, found by identity: no key is hashed.

        For a key that no longer finds itself (its hash changed, its ``__eq__`` raises).
        """
        bid = block.block_id
        for holders in self._index.values():
            if holders.get(bid) is block:
                return holders
        raise AssertionError(f"INV-CACHE: block {bid} holds a key it is not indexed under")

    def _forget(self, key: Hashable, holders: dict[int, KVCacheBlock]) -> None:
        """Remove the emptied ``holders`` from the index; never raises.

        If ``key`` no longer finds them (its hash changed, its ``__eq__`` raises), the
        empty entry stays: every reader treats an empty entry as absent; the event
        view drops the key by identity.
        """
        try:
            if self._index.get(key) is holders:
                del self._index[key]
                return
        except Exception:
            pass
        if self.enable_kv_cache_events:
            # The consumer's view cannot find the key either: drop it by identity.
            with contextlib.suppress(Exception):
                self._event_view = {k for k in self._event_view if k is not key}

    def reset_prefix_cache(self) -> bool:
        """Forget every key, if no block is in use; fire every pending watcher. False if refused.

        post: __return__ == (__old__.self.free_block_queue.num_free_blocks == self.num_gpu_blocks - 1)
        post: self._watch_fired > __old__.self._watch_fired or not __return__ or not self._index
        post: __return__ or self._index.keys() == __old__.self._index.keys()
        post: not __return__ or all(b._pending is None for b in self.blocks) or self._watch_fired > __old__.self._watch_fired
        """  # noqa: E501
        if self.free_block_queue.num_free_blocks != self.num_gpu_blocks - 1:
            return False
        for holders in self._index.values():
            for block in holders.values():
                block._block_hash = None
                block._block_hash_num_tokens = None
        self._index.clear()
        self._entries.clear()
        if self.metrics_collector:
            self.metrics_collector.reset()
        watched = self._watched_blocks()
        firings = [
            (w, block) for block in watched for w in cast(tuple[Watcher, ...], block._pending)
        ]
        for block in watched:
            block._pending = None
        self._watch_fired += len(firings)
        if self.enable_kv_cache_events:
            self._log(AllBlocksCleared())
        self._fire(firings)
        return True

    # -- watchers and events --------------------------------------------------------------

    def _watched_blocks(self) -> list[KVCacheBlock]:
        """The blocks with pending watchers, in the order they first got one."""
        watched = [b for b in self.blocks if b._pending is not None]
        watched.sort(key=_pending_order)
        return watched

    @property
    def _watchers(self) -> dict[int, tuple[Watcher, ...]]:
        """The pending watchers as a fresh map: block_id -> watchers in registration order.

        Its order is the order blocks first got a pending watcher (vLLM keeps a dict
        ``_reuse_watchers`` of one watcher per block); the state itself is on the
        blocks (``KVCacheBlock._pending``), and this map is read-only.
        """
        return {b.block_id: cast(tuple[Watcher, ...], b._pending) for b in self._watched_blocks()}

    def _detach_watchers(self, blocks: list[KVCacheBlock]) -> list[tuple[Watcher, KVCacheBlock]]:
        """Take the pending watchers of ``blocks`` out of the state, in firing order."""
        firings: list[tuple[Watcher, KVCacheBlock]] = []
        for block in blocks:
            pending = block._pending
            if pending is not None:
                block._pending = None
                firings.extend((w, block) for w in pending)
        self._watch_fired += len(firings)
        return firings

    @staticmethod
    def _fire(
        firings: list[tuple[Watcher, KVCacheBlock]], handed_out: list[KVCacheBlock] | None = None
    ) -> None:
        """Call each watcher once. Errors go to ``sys.unraisablehook``; the rest still fire.

        A ``BaseException`` (``KeyboardInterrupt``, ``SystemExit``) from a watcher, or
        any exception from the hook itself, is held until every other watcher has
        fired; then the first one is raised, carrying ``handed_out`` (the blocks
        ``get_new_blocks`` handed out, which the caller now holds) as its
        ``kvpool_blocks`` attribute.
        """
        interrupt: BaseException | None = None
        for watcher, block in firings:
            try:
                try:
                    watcher(block)
                except Exception as exc:
                    sys.unraisablehook(
                        cast(Any, _Unraisable)(
                            exc, f"Exception in reuse watcher for block {block.block_id}", watcher
                        )
                    )
            except BaseException as exc:  # after the others, so none is lost
                if interrupt is None:
                    interrupt = exc
        if interrupt is not None:
            if handed_out is not None:
                try:
                    interrupt.kvpool_blocks = handed_out  # type: ignore[attr-defined]
                    interrupt.add_note(
                        f"kvpool: get_new_blocks handed out {len(handed_out)} block(s); "
                        "they are in this exception's kvpool_blocks attribute"
                    )
                except Exception:
                    pass
            raise interrupt

    def _log(self, event: Event) -> None:
        """Append ``event`` to ``kv_event_queue`` in the form handed out, and to the spec log."""
        queue = self.kv_event_queue
        if queue is not self._events_queue or not queue:  # taken, replaced or emptied
            self._events = []
            self._events_queue = queue
        self._events.append(event)
        out: Any = _int_hashes(event) if self._int_event_hashes else event
        if self._vllm_events is not None:
            out = _to_vllm(self._vllm_events, out, self.medium)
        queue.append(out)
        try:
            apply_event(self._event_view, event)
        except Exception:  # a key that no longer hashes: ``_forget`` has dropped it
            if type(event) is not BlockRemoved:
                raise

    def take_events(self) -> list[Any]:
        """Every event in ``kv_event_queue``, oldest first, which starts again empty.

        ``[]`` when events are off. The events are vLLM's own classes when vLLM is
        importable, else the spec's; their block hashes are vLLM's ints when
        ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES`` says so (see :func:`int_event_hashes`).

        post: self._events == []
        post: self.enable_kv_cache_events or __return__ == []
        """
        if not self.enable_kv_cache_events:
            return []
        events = self.kv_event_queue
        self.kv_event_queue = []
        self._events = []
        return events

    # -- queries ------------------------------------------------------------------------

    def get_num_free_blocks(self) -> int:
        """The length of the free queue.

        post: __return__ == sum(b.ref_cnt == 0 for b in self.blocks[1:])
        """
        return self.free_block_queue.num_free_blocks

    def get_usage(self) -> float:
        """The fraction of non-null blocks in use (0.0 for a pool of only the null block).

        post: 0.0 <= __return__ <= 1.0
        """
        total = self.num_gpu_blocks - 1
        if not total:
            return 0.0
        return 1.0 - self.free_block_queue.num_free_blocks / total

    def is_block_writable(self, block: KVCacheBlock) -> bool:
        """Whether the sole owner of ``block`` may write it: not null, ``ref_cnt == 1``, no key.

        raises: InsufficientFreeBlocks, InvalidArgument, RefCountUnderflow, ForeignBlock, NullBlockMisuse, CachingDisabled, AlreadyCached, BlockNotInUse
        post: __return__ == (not block.is_null and block.ref_cnt == 1 and block.block_hash is None)
        """  # noqa: E501
        try:
            owner = _owner(block)
        except _NotABlock:
            raise InvalidArgument(f"{_show(block)} is not a block of any pool") from None
        if block.is_null:
            return False
        if owner is not self:
            raise ForeignBlock(f"block {block.block_id} belongs to another pool")
        return block.ref_cnt == 1 and block._block_hash is None

    def check_invariants(self) -> list[Violation]:
        """Every violated invariant, INV-LIST included, each naming its block (empty: all hold)."""
        return _check_invariants(self)

    def __repr__(self) -> str:
        return (
            f"BlockPool(num_gpu_blocks={self.num_gpu_blocks}, "
            f"free={self.free_block_queue.num_free_blocks}, "
            f"enable_caching={self.enable_caching})"
        )
