"""From z3 models back to the spec's language: operations, states and outcomes."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import z3  # type: ignore[import-untyped]

from kvpool.spec import (
    AllBlocksCleared,
    BlockRef,
    BlockRemoved,
    BlockStored,
    CacheBlocks,
    Event,
    EvictBlocks,
    FreeBlocks,
    GetCachedBlock,
    GetNewBlocks,
    GetNumFreeBlocks,
    GetUsage,
    IsBlockWritable,
    Op,
    PoolState,
    ResetPrefixCache,
    TakeEvents,
    Touch,
    UnpinBlocks,
)

from .model import OPS, Args, to_int


def key_name(k: int) -> str:
    """Keys 1..K of the encoding are the strings ``k1``..``kK`` of the spec."""
    return f"k{k}"


@dataclass(frozen=True)
class ConcreteArgs:
    kind: int
    n: int
    m: int
    e: tuple[int, ...]
    ef: bool
    w: int
    km: int
    ks: tuple[int, ...]
    qk: int
    ib: int


def read_args(model: z3.ModelRef, a: Args) -> ConcreteArgs:
    def i(x: Any) -> int:
        return to_int(model.eval(x, model_completion=True))

    return ConcreteArgs(
        kind=i(a.kind),
        n=i(a.n),
        m=i(a.m),
        e=tuple(i(x) for x in a.e),
        ef=z3.is_true(model.eval(a.ef, model_completion=True)),
        w=i(a.w),
        km=i(a.km),
        ks=tuple(i(x) for x in a.ks),
        qk=i(a.qk),
        ib=i(a.ib),
    )


def _block(x: int, n_blocks: int) -> object:
    # id N stands for "not a block": a BlockRef out of range (InvalidArgument in the spec)
    return BlockRef(0, x)


def to_op(c: ConcreteArgs, n_blocks: int) -> Op:
    """The spec operation a step of the encoding stands for."""
    kind = OPS[c.kind]
    blocks = [_block(x, n_blocks) for x in c.e[: c.m]]
    if kind == "GetNewBlocks":
        return GetNewBlocks(c.n)
    if kind == "FreeBlocks":
        return FreeBlocks(tuple(blocks), evict_first=c.ef)
    if kind == "Touch":
        return Touch(tuple(blocks))
    if kind == "UnpinBlocks":
        return UnpinBlocks(tuple(blocks), watcher=c.w)
    if kind == "CacheBlocks":
        return CacheBlocks(tuple(blocks), tuple(key_name(k) for k in c.ks[: c.km]))
    if kind == "GetCachedBlock":
        return GetCachedBlock(key_name(c.qk))
    if kind == "EvictBlocks":
        return EvictBlocks(tuple(c.e[: c.m]))
    if kind == "ResetPrefixCache":
        return ResetPrefixCache()
    if kind == "GetNumFreeBlocks":
        return GetNumFreeBlocks()
    if kind == "GetUsage":
        return GetUsage()
    if kind == "IsBlockWritable":
        return IsBlockWritable(_block(c.ib, n_blocks))
    return TakeEvents()


def from_op(op: Op, n_blocks: int, keys: dict[Hashable, int], M: int) -> ConcreteArgs:
    """The encoding's arguments for a spec operation (inverse of :func:`to_op`)."""

    def ids(entries: tuple[object, ...]) -> tuple[int, int, tuple[int, ...]]:
        out = []
        for x in entries:
            b = x.block if isinstance(x, BlockRef) else x
            out.append(b if isinstance(b, int) and 0 <= b < n_blocks else n_blocks)
        m = len(out)
        return m, m, tuple(out + [0] * (M - m))

    name = type(op).__name__
    kind = OPS.index(name)
    if isinstance(op, GetNewBlocks):
        n = op.n if type(op.n) is int else 0
        return ConcreteArgs(kind, n, 0, (0,) * M, False, 0, 0, (1,) * M, 1, 0)
    if isinstance(op, (FreeBlocks, Touch, UnpinBlocks, CacheBlocks)):
        m, _, e = ids(op.blocks)
        ef = bool(op.evict_first) if isinstance(op, FreeBlocks) else False
        w = int(op.watcher) if isinstance(op, UnpinBlocks) else 0  # type: ignore[call-overload]
        km, ks = 0, (1,) * M
        if isinstance(op, CacheBlocks):
            km = len(op.keys)
            ks = tuple([keys[k] for k in op.keys] + [1] * (M - km))
        return ConcreteArgs(kind, 0, m, e, ef, w, km, ks, 1, 0)
    if isinstance(op, EvictBlocks):
        m, _, e = ids(op.block_ids)
        return ConcreteArgs(kind, 0, m, e, False, 0, 0, (1,) * M, 1, 0)
    if isinstance(op, GetCachedBlock):
        return ConcreteArgs(kind, 0, 0, (0,) * M, False, 0, 0, (1,) * M, keys[op.key], 0)
    if isinstance(op, IsBlockWritable):
        b = op.block.block if isinstance(op.block, BlockRef) else n_blocks
        return ConcreteArgs(kind, 0, 0, (0,) * M, False, 0, 0, (1,) * M, 1, b)
    return ConcreteArgs(kind, 0, 0, (0,) * M, False, 0, 0, (1,) * M, 1, 0)


def decode_state(
    model: z3.ModelRef,
    s: Any,
    n_blocks: int,
    K: int,
    W: int,
    caching: bool,
    events: bool,
    sel: Any,
    ranked: bool = True,
) -> PoolState:
    """The spec state a model's encoded state stands for (``sel(array, i)`` reads a cell)."""

    def i(x: Any) -> int:
        return to_int(model.eval(x, model_completion=True))

    def t(x: Any) -> bool:
        return z3.is_true(model.eval(x, model_completion=True))  # type: ignore[no-any-return]

    N = n_blocks
    ref = [i(sel(s.ref, b)) for b in range(N)]
    keyn = [i(sel(s.key, b)) for b in range(N)]
    kst = [i(sel(s.kst, b)) for b in range(N)]
    L = i(s.L)
    if ranked:  # finite reading: membership flags and order keys
        members = [b for b in range(N) if t(sel(s.inq, b))]
        members.sort(key=lambda b: i(sel(s.pos, b)))
        free = OrderedDict.fromkeys(members)
    else:
        free = OrderedDict.fromkeys(i(sel(s.q, p)) for p in range(L))
    index: dict[Hashable, dict[int, None]] = {}
    for k in range(1, K + 1):
        holders = [b for b in range(N) if t(sel(s.idx[k - 1], b))]
        holders.sort(key=lambda b: kst[b])
        if holders:
            index[key_name(k)] = dict.fromkeys(holders)
    bst = [i(sel(s.bst, b)) for b in range(N)]
    pending: dict[int, list[int]] = {}
    for b in sorted(range(N), key=lambda b: bst[b]):
        ws = [w for w in range(W) if t(sel(s.pend[w], b))]
        ws.sort(key=lambda w: i(sel(s.wst[w], b)))
        if ws:
            pending[b] = ws
    if s.registered is not None:
        registered, fired = i(s.registered), i(s.fired)
    else:
        fired = sum(i(sel(s.fb, b)) for b in range(N))
        registered = sum(i(sel(s.reg, b)) for b in range(N))
    view: set[Hashable] = (
        {key_name(k) for k in range(1, K + 1) if t(s.view[k - 1])} if events else set()
    )
    return PoolState(
        num_blocks=N,
        caching=caching,
        events_on=events,
        ref=ref,
        key=[key_name(k) if k else None for k in keyn],
        free=free,
        index=index,
        pending=pending,
        log=[],
        view=view,
        registered=registered,
        fired=fired,
    )


def decode_events(value: Any) -> list[Event]:
    """A model's value of an event sequence, as the spec's events (keys ``k1``..)."""
    out: list[Event] = []

    def walk(v: Any) -> None:
        if z3.is_app_of(v, z3.Z3_OP_SEQ_CONCAT):
            for c in v.children():
                walk(c)
        elif z3.is_app_of(v, z3.Z3_OP_SEQ_UNIT):
            e = v.arg(0)
            name = e.decl().name()
            if name == "stored":
                ks = [e.arg(j).as_long() for j in range(e.num_args())]
                out.append(BlockStored(tuple(key_name(k) for k in ks if k != 0)))
            elif name == "removed":
                out.append(BlockRemoved(key_name(e.arg(0).as_long())))
            else:
                out.append(AllBlocksCleared())
        elif not z3.is_app_of(v, z3.Z3_OP_SEQ_EMPTY):
            raise ValueError(f"not a concrete event sequence: {v}")

    walk(value)
    return out
