"""vLLM 0.33.0's operations on blocks with several keys, as spec handlers.

Each ``_op_*`` function is one bullet of the "vLLM operations" section of
``docs/semantics.md``. They share :class:`~kvpool.spec.state.World`'s state and
helpers with the key-level operations and are registered in its handler table
when ``kvpool.spec`` is imported. Like every operation, each validates the whole
call before it changes anything.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable
from typing import Any, cast

from .errors import ErrorKind
from .events import BlockStored
from .keys import group_key
from .ops import (
    CacheFullBlocks,
    CachePartialBlock,
    EmitCachedBlockEvents,
    GetCachedBlockGroups,
    MMFeature,
    MoveBlockHashes,
    Outcome,
    Request,
)
from .state import _HANDLERS, NULL_BLOCK, PoolState, World, _Refused


def _insert(ps: PoolState, k: Hashable, b: int, num_tokens: int | None) -> bool:
    """Block ``b`` holds ``k`` (as its primary key if it has none); False if it already did."""
    if ps.key[b] == k or b in ps.index.get(k, ()):
        return False
    if ps.key[b] is None:
        ps.key[b] = k
        if num_tokens is not None:
            ps.tokens[b] = num_tokens
    else:
        ps.entries.setdefault(b, []).append(k)
    ps.index.setdefault(k, {})[b] = None
    return True


def _count(value: object, what: str) -> int:
    if type(value) is not int or value < 0:
        raise _Refused(ErrorKind.INVALID_ARGUMENT, f"{what} must be an int >= 0, got {value!r}")
    return value


def _group(value: object) -> int:
    if type(value) is not int or not 0 <= value < 1 << 32:
        raise _Refused(
            ErrorKind.INVALID_ARGUMENT, f"group id {value!r} is not an int in 0..2**32-1"
        )
    return value


def _block_size(ps: PoolState, value: object) -> int:
    if type(value) is not int or value < 1 or value % ps.hash_block_size:
        raise _Refused(
            ErrorKind.INVALID_ARGUMENT,
            f"block_size must be a positive multiple of hash_block_size "
            f"{ps.hash_block_size}, got {value!r}",
        )
    return value


def _request(value: object) -> Request:
    if not isinstance(value, Request):
        raise _Refused(ErrorKind.INVALID_ARGUMENT, f"{value!r} is not a request")
    return value


def _hashes_at(ps: PoolState, req: Request, block_size: int, need: int) -> list[bytes]:
    """The request's first ``need`` block hashes at ``block_size`` granularity."""
    scale = block_size // ps.hash_block_size
    raw = req.block_hashes
    if len(raw) // scale < need:
        raise _Refused(
            ErrorKind.INVALID_ARGUMENT,
            f"the request has {len(raw) // scale} block hashes at block size {block_size}, "
            f"{need} are needed",
        )
    out = [raw[(i + 1) * scale - 1] for i in range(need)]
    for h in out:
        if type(h) is not bytes:
            raise _Refused(ErrorKind.INVALID_ARGUMENT, f"block hash {h!r} is not bytes")
    return cast(list[bytes], out)


def _cacheable(world: World, ps: PoolState, pi: int, entry: object, seen: set[int]) -> int:
    """A block that may take a key: this pool's, in use, not listed before in the call."""
    ref = world._entry(entry)
    if ref.pool != pi:
        raise _Refused(
            ErrorKind.FOREIGN_BLOCK, f"block {ref!r} belongs to pool {ref.pool}, not {pi}"
        )
    b = ref.block
    if ps.ref[b] < 1:
        raise _Refused(ErrorKind.BLOCK_NOT_IN_USE, f"block {pi}:{b} has ref_cnt 0")
    if b in seen:
        raise _Refused(ErrorKind.INVALID_ARGUMENT, f"block {pi}:{b} is listed twice")
    seen.add(b)
    return b


def _op_cache_full_blocks(world: World, op: CacheFullBlocks) -> Outcome:
    pi = op.pool
    ps = world.pool(pi)
    req = _request(op.request)
    nc = _count(op.num_cached_blocks, "num_cached_blocks")
    nf = _count(op.num_full_blocks, "num_full_blocks")
    bs = _block_size(ps, op.block_size)
    g = _group(op.group)
    if nc >= nf:
        return Outcome()
    if not ps.caching:
        raise _Refused(ErrorKind.CACHING_DISABLED, "prefix caching is disabled on this pool")
    if nf > len(op.blocks):
        raise _Refused(
            ErrorKind.INVALID_ARGUMENT,
            f"num_full_blocks {nf} but the request has {len(op.blocks)} blocks",
        )
    mask = op.block_mask
    if mask is not None and (len(mask) != nf - nc or any(type(m) is not bool for m in mask)):
        raise _Refused(
            ErrorKind.INVALID_ARGUMENT, f"block_mask must be {nf - nc} bools, got {mask!r}"
        )
    hashes = _hashes_at(ps, req, bs, nf)
    # Validate every entry the call will touch before changing anything.
    todo: list[tuple[int, int]] = []  # (position, block)
    seen: set[int] = set()
    for i in range(nc, nf):
        ref = world._entry(op.blocks[i])
        if ref.block == NULL_BLOCK or (mask is not None and not mask[i - nc]):
            continue
        b = _cacheable(world, ps, pi, ref, seen)
        covers = (i + 1) * bs
        if ps.key[b] is not None:
            have = ps.tokens.get(b)
            if have is None or have >= covers:
                raise _Refused(
                    ErrorKind.ALREADY_CACHED,
                    f"block {pi}:{b} already holds key {ps.key[b]!r} covering {have} tokens; "
                    f"only a shorter prefix may be promoted to {covers}",
                )
        todo.append((i, b))
    keys: list[Hashable] = []
    for i, b in todo:
        if ps.key[b] is not None:  # partial -> full promotion: the old keys go first
            world._drop_key(ps, b)
        k = group_key(hashes[i], g)
        _insert(ps, k, b, (i + 1) * bs)
        keys.append(k)
    if ps.events_on:
        positions = [i for i, _ in todo]
        world._log(
            ps,
            stored_event(
                ps.lookahead,
                ps.medium,
                req,
                keys,
                [hashes[i] for i in positions],
                None if nc == 0 else hashes[nc - 1],
                positions,
                nc * bs,
                nf * bs,
                bs,
                g,
            ),
        )
    return Outcome()


def stored_event(
    lookahead: int,
    medium: str,
    req: Request,
    keys: list[Hashable],
    hashes: list[bytes],
    parent: bytes | None,
    positions: list[int],
    start: int,
    end: int,
    bs: int,
    g: int,
) -> BlockStored:
    """vLLM's BlockStored for the blocks at ``positions`` (block indices at size ``bs``).

    Shared with ``kvpool.impl`` (one definition of vLLM's event fields; the
    differential test against vLLM checks it).
    """
    extra: list[tuple[object, ...] | None] = []
    ahead: list[tuple[int, ...]] = []
    mm_idx = 0
    for i in positions:
        keys_i, mm_idx = _event_extra_keys(lookahead, req, i * bs, i * bs + bs, mm_idx)
        extra.append(keys_i)
        ahead.append(req.all_token_ids[i * bs + bs : i * bs + bs + lookahead])
    return BlockStored(
        keys=tuple(keys),
        block_hashes=tuple(hashes),
        parent_block_hash=parent,
        token_ids=req.all_token_ids[start:end],
        block_size=bs,
        lora_id=req.lora.adapter_id if req.lora else None,
        medium=medium,
        lora_name=req.lora.name if req.lora else None,
        extra_keys=tuple(extra) if extra else None,
        group_idx=g,
        session_id=req.session_id,
        lookahead_token_ids=tuple(ahead) if lookahead else None,
    )


def _op_cache_partial_block(world: World, op: CachePartialBlock) -> Outcome:
    pi = op.pool
    ps = world.pool(pi)
    req = _request(op.request)
    ref = world._entry(op.block)
    g = _group(op.group)
    if type(op.replace_existing_hashes) is not bool:
        raise _Refused(
            ErrorKind.INVALID_ARGUMENT,
            f"replace_existing_hashes must be a bool, got {op.replace_existing_hashes!r}",
        )
    if ref.block == NULL_BLOCK:
        return Outcome(value=None)
    _block_size(ps, op.block_size)
    n = op.num_tokens
    hsz = ps.hash_block_size
    if type(n) is not int or n < 1 or n % hsz or n // hsz > len(req.block_hashes):
        raise _Refused(
            ErrorKind.INVALID_ARGUMENT,
            f"num_tokens must be a positive multiple of {hsz} covered by the request's "
            f"{len(req.block_hashes)} block hashes, got {n!r}",
        )
    if not ps.caching:
        raise _Refused(ErrorKind.CACHING_DISABLED, "prefix caching is disabled on this pool")
    b = _cacheable(world, ps, pi, ref, set())
    m = n // hsz
    h = req.block_hashes[m - 1]
    parent = req.block_hashes[m - 2] if m > 1 else None
    if type(h) is not bytes or (parent is not None and type(parent) is not bytes):
        raise _Refused(ErrorKind.INVALID_ARGUMENT, "the request's block hashes must be bytes")
    k = group_key(h, g)
    held = ps.key[b] == k or b in ps.index.get(k, ())
    if op.replace_existing_hashes:
        world._drop_key(ps, b)
        held = False
    elif not held and ps.key[b] is not None and ps.tokens.get(b, n) < n:
        world._drop_key(ps, b)  # a longer prefix replaces the shorter one
    _insert(ps, k, b, n)
    if ps.events_on and not held:
        world._log(ps, partial_event(ps.lookahead, ps.medium, req, k, h, parent, n, hsz, g))
    return Outcome(value=k)


def _op_move_block_hashes(world: World, op: MoveBlockHashes) -> Outcome:
    pi = op.pool
    ps = world.pool(pi)
    src, dst = world._own_blocks(pi, (op.src, op.dst), null="refuse")
    if ps.key[dst] is not None:
        raise _Refused(
            ErrorKind.ALREADY_CACHED, f"block {pi}:{dst} already holds key {ps.key[dst]!r}"
        )
    keys = ps.keys_of(src)
    if not keys:
        return Outcome()
    if ps.ref[dst] < 1:
        raise _Refused(ErrorKind.BLOCK_NOT_IN_USE, f"block {pi}:{dst} has ref_cnt 0")
    num_tokens = ps.tokens.get(src)
    # The keys leave src without events: dst holds each of them right after.
    for k in keys:
        del ps.index[k][src]
    ps.key[src] = None
    ps.tokens.pop(src, None)
    ps.entries.pop(src, None)
    for k in keys:
        _insert(ps, k, dst, num_tokens)
    for k in keys:
        if not ps.index[k]:  # pragma: no cover (dst holds every key now)
            del ps.index[k]
    return Outcome()


def _op_get_cached_block_groups(world: World, op: GetCachedBlockGroups) -> Outcome:
    ps = world.pool(op.pool)
    if type(op.block_hash) is not bytes:
        raise _Refused(ErrorKind.INVALID_ARGUMENT, f"block hash {op.block_hash!r} is not bytes")
    groups = [_group(g) for g in op.group_ids]
    found: list[int] = []
    for g in groups:
        holders = ps.index.get(group_key(op.block_hash, g))
        if not holders:
            return Outcome(value=None)
        found.append(next(iter(holders)))
    return Outcome(value=tuple(found))


def _op_emit_cached_block_events(world: World, op: EmitCachedBlockEvents) -> Outcome:
    ps = world.pool(op.pool)
    req = _request(op.request)
    n = _count(op.num_cached_blocks, "num_cached_blocks")
    bs = _block_size(ps, op.block_size)
    g = _group(op.group)
    if not ps.events_on or n == 0:
        return Outcome()
    hashes = _hashes_at(ps, req, bs, n)
    keys = [group_key(h, g) for h in hashes]
    # Consumers learn only keys some block holds (a sliding-window hit also names
    # positions that are null blocks; vLLM's event lists them, the view does not).
    held: list[Hashable] = [k for k in keys if k in ps.index]
    world._log(
        ps,
        stored_event(
            ps.lookahead, ps.medium, req, held, hashes, None, list(range(n)), 0, n * bs, bs, g
        ),
    )
    return Outcome()


def partial_event(
    lookahead: int,
    medium: str,
    req: Request,
    k: Hashable,
    h: bytes,
    parent: bytes | None,
    n: int,
    hsz: int,
    g: int,
) -> BlockStored:
    """vLLM's BlockStored for a partial entry ``k`` at prefix ``n`` (its last hash unit)."""
    start = n - hsz
    mm_idx = 0
    if start > 0 and req.mm and req.mm[-1].offset + req.mm[-1].length > start:
        mm_idx = next(j for j, f in enumerate(req.mm) if f.offset + f.length > start)
    extra, _ = _event_extra_keys(lookahead, req, start, n, mm_idx)
    return BlockStored(
        keys=(k,),
        block_hashes=(h,),
        parent_block_hash=parent,
        token_ids=req.all_token_ids[start:n],
        block_size=n - start,
        lora_id=req.lora.adapter_id if req.lora else None,
        medium=medium,
        lora_name=req.lora.name if req.lora else None,
        extra_keys=(extra,),
        group_idx=g,
        session_id=req.session_id,
        lookahead_token_ids=(req.all_token_ids[n : n + lookahead],) if lookahead else None,
    )


def _extra_keys(
    req: Request, start: int, end: int, mm_idx: int
) -> tuple[tuple[tuple[object, ...], ...] | None, int]:
    """The hash extra keys of tokens ``start:end`` (LoRA, multimodal inputs, cache salt,
    the SHA-256 of the prompt embeddings of those positions).

    ``mm_idx`` is the first multimodal input that may still overlap; the second
    value is where the next block should start looking.
    """
    keys: list[tuple[object, ...]] = []
    if req.lora:
        keys.append(("lora", req.lora.name, req.lora.path))
    mm: tuple[MMFeature, ...] = req.mm
    if mm and mm[-1].offset + mm[-1].length > start:
        while mm_idx < len(mm):
            f = mm[mm_idx]
            if end <= f.offset:
                break
            if start >= f.offset + f.length:
                mm_idx += 1
                continue
            keys.append(("mm", f.identifier, f.offset - start))
            if end < f.offset + f.length:
                break
            mm_idx += 1
    if start == 0 and req.cache_salt:
        keys.append(("cache_salt", req.cache_salt))
    if req.prompt_embeds is not None:
        digest = hashlib.sha256(b"".join(req.prompt_embeds[start:end])).digest()
        keys.append(("prompt_embeds", digest))
    return (tuple(keys) if keys else None), mm_idx


def _event_extra_keys(
    lookahead: int, req: Request, start: int, end: int, mm_idx: int
) -> tuple[tuple[object, ...] | None, int]:
    """A block's extra keys as vLLM's events publish them (tags dropped), and the next mm index.

    With lookahead the keys cover the lookahead tokens too, and the next block
    starts again at the first input that reaches past ``end``.
    """
    if lookahead:
        keys, nxt = _extra_keys(req, start, end + lookahead, mm_idx)
        while nxt > 0 and req.mm[nxt - 1].offset + req.mm[nxt - 1].length > end:
            nxt -= 1
    else:
        keys, nxt = _extra_keys(req, start, end, mm_idx)
    if keys is None:
        return None, nxt
    return tuple(k[1:] if k[0] == "mm" else k[1] for k in keys), nxt


HANDLERS: dict[type, Callable[[World, Any], Outcome]] = {
    CacheFullBlocks: _op_cache_full_blocks,
    CachePartialBlock: _op_cache_partial_block,
    MoveBlockHashes: _op_move_block_hashes,
    GetCachedBlockGroups: _op_get_cached_block_groups,
    EmitCachedBlockEvents: _op_emit_cached_block_events,
}
"""The vLLM operations' handlers (added to the spec's one handler table below)."""

_HANDLERS.update(HANDLERS)
