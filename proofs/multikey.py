"""Blocks with several keys (vLLM 0.33.0's whole pool), encoded at a fixed N and proved
for every run length there.

The encoding of :mod:`kvpool.proofs.model` gives a block at most one key. This module
extends its finite reading (:class:`~kvpool.proofs.model.Finite`) with what
``docs/semantics.md`` says of blocks with several keys, reusing the model's state, its
queue moves, reference counts, watchers and validation for the key-level calls, and
adding on top of them:

* per block: its **primary key** (the model's ``key``), the prefix tokens it covers
  (``tok``: 0 = none recorded), and its **further entries** (``ent[k][b]``: a set, so at
  most K-1 of them: a block's keys are distinct, and no bound narrower than the key
  universe is imposed); per (key, block) the time ``kst[k][b]`` the block joined the
  key's holders (the index's "oldest first" order, and the order of a block's entries:
  the spec appends to both at once). The index ``idx[k][b]`` is kept apart from the
  blocks' keys, so that INV-CACHE says something;
* keys are vLLM's ``(block hash, group id)`` pairs over H hashes and G groups
  (K = H*G keys: key ``(h, g)`` is ``(h-1)*G + g + 1``), and a request is a list of at
  most R hash ids (``hash_block_size`` is 1 token; block sizes 1 and 2, and 0, which
  is refused);
* the calls ``cache_full_blocks`` (already-cached prefix, null and masked entries
  skipped, promotion of a partial entry dropping the block's keys with their events),
  ``cache_partial_block`` (``replace_existing_hashes``, a longer prefix replacing a
  shorter one), ``move_block_hashes`` (entries move, no event) and
  ``get_cached_block`` over a list of groups (all or nothing, the oldest holder per
  group); reuse by ``get_new_blocks``, ``evict_blocks`` and ``reset_prefix_cache``
  drop every key a block holds.

Obligations (:func:`state_obligations`, :func:`step_rules`): INV-CACHE and INV-EVENTS
restated for several keys, every other INV-* and the model's ghost conjuncts, the step
rules of ``spec/rules.py`` with RES-CACHED restated over every key a block holds, and
two of this module's own: RES-GROUPS (the lookup over groups) and MOVE-SILENT (a move
announces nothing: the "moving keys announces nothing" clause of INV-EVENTS).

Proved by 1-induction at fixed N (:func:`induction_goals`, as :mod:`.fixedn` does, with
the same ghost conjuncts); refuted on seeded bugs (:data:`MUTANTS`) by bounded model
checking from the pool as built (:func:`bmc_refute`), each counterexample decoded into
spec calls and replayed on the spec with the same bug (:class:`BuggyMultiWorld`); every
hypothesis has a witness decoded and replayed on the spec (:func:`witness_goals`); and
a differential (:func:`differential`) steps random reachable spec states by the encoding
and by ``kvpool.spec`` and compares everything, which also catches each mutant.
INV-CACHE and INV-EVENTS are also proved for every N (:func:`every_n_goals`: the same
transition read with a symbolic N, as the model's every-N induction reads its own).

The event log is its view (the set of keys a consumer replays) and its length, as in
the model's unbounded reading: the order of one call's events is not modelled here
(:mod:`.eventseq` proves it for the key-level calls). ``emit_cached_block_events``,
several pools and the private ``_insert_block_hash``/``_maybe_evict_cached_block`` are
not encoded.
"""

from __future__ import annotations

import graphlib
import itertools
import random
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import Any, cast

import z3  # type: ignore[import-untyped]

from kvpool.spec import (
    BlockRef,
    CacheBlocks,
    CacheFullBlocks,
    CachePartialBlock,
    GetCachedBlock,
    GetCachedBlockGroups,
    MoveBlockHashes,
    Op,
    Outcome,
    PoolState,
    Request,
    World,
    check_pool,
    group_key,
)
from kvpool.spec.keys import removed

from . import fixedn, props
from .differential import _Subst, catch_row, encoded_outcome, spec_comparable_outcome
from .fixedn import conjuncts
from .model import (
    ERR,
    OPK,
    OPS,
    Args,
    Config,
    Finite,
    Goal,
    Result,
    State,
    Unbounded,
    args_domain,
    fresh_args,
    fresh_state,
    goal_row,
    in_queue,
    initial,
    int_sort,
    isolated_check,
    isolated_checks,
    isolated_model,
    iv,
    ladder,
    merge,
    mkint,
    op_cache_blocks,
    op_evict_blocks,
    op_free_blocks,
    op_get_new_blocks,
    op_reset,
    op_touch,
    op_unpin_blocks,
    positions,
    state_eq,
    to_int,
)
from .rewrite import simplify
from .trace import ConcreteArgs, decode_state
from .trace import to_op as base_to_op

MK_OPS: tuple[str, ...] = (
    *OPS,
    "CacheFullBlocks",
    "CachePartialBlock",
    "MoveBlockHashes",
    "GetCachedBlockGroups",
)
"""The calls the encoding ranges over: the model's, then vLLM's calls on several keys."""
MKK: dict[str, int] = {name: i for i, name in enumerate(MK_OPS)}
NEW_OPS: tuple[str, ...] = MK_OPS[len(OPS) :]

TECHNIQUE = "z3 induction (fixed N)"
"""The matrix column the proof rows fill (``runner.FIXEDN_TECHNIQUE``)."""

I = "int"  # noqa: E741  (the model's marker for its integer sort)
B = z3.BoolSort()


# -- configuration, state, arguments ---------------------------------------------------------


@dataclass
class MConfig:
    """The bounds: N blocks, H hashes x G groups = K keys, requests of at most R hashes,
    block lists of at most M entries, W watcher ids."""

    cfg: Config
    H: int = 2
    G: int = 2
    R: int = 4
    GM: int = 2
    """Group lists of ``get_cached_block`` hold at most GM ids."""

    @property
    def K(self) -> int:
        return self.H * self.G

    @property
    def n(self) -> int:
        return self.cfg.dom.n  # type: ignore[attr-defined,no-any-return]


def make_config(
    n: int,
    H: int = 2,
    G: int = 2,
    R: int = 4,
    bugs: frozenset[str] = frozenset(),
    caching: Any = None,
    events: Any = None,
) -> MConfig:
    cfg = Config(
        Finite(n),
        K=H * G,
        W=2,
        M=2,
        caching=z3.Bool("caching") if caching is None else caching,
        events=z3.Bool("events") if events is None else events,
        bugs=bugs,
    )
    return MConfig(cfg, H, G, R)


@dataclass
class MState:
    """The model's state (``base.key`` is the primary key, ``base.idx`` the index; its
    per-block ``kst`` is unused: zero), and what several keys add."""

    base: State
    tok: Any
    """per block: prefix tokens its primary key covers (0: none recorded)"""
    ent: list[Any]
    """``ent[k-1][b]``: key k is one of b's further entries"""
    kst: list[Any]
    """``kst[k-1][b]``: when b joined k's holders (and, for an entry, its place in b's list)"""


@dataclass
class MArgs:
    """The model's arguments (``base``; its block list ``e[:m]`` is also cache_full_blocks'
    blocks, ``e[0]``/``e[1]`` move's src/dst, ``ib`` cache_partial_block's block), and:"""

    base: Args
    rl: Any  # the request's number of hashes
    rh: list[Any]  # its hash ids, 1..H
    nc: Any
    nf: Any
    bs: Any  # block_size in hash units (0 is refused)
    g: Any  # the group of cache_full_blocks / cache_partial_block
    mp: Any  # a block_mask is given
    ml: Any  # its length
    mb: list[Any]  # its bits
    pn: Any  # cache_partial_block's num_tokens
    rep: Any  # replace_existing_hashes
    qh: Any  # get_cached_block's hash id
    gm: Any  # its number of groups
    gs: list[Any]  # its group ids

    @property
    def kind(self) -> Any:
        return self.base.kind


@dataclass
class MResult:
    r: Result
    groups: list[Any] = field(default_factory=list)
    """get_cached_block over groups: the holder found per group (-1: none)"""


def fresh_mstate(mc: MConfig, name: str) -> MState:
    d = mc.cfg.dom
    finite = isinstance(d, Finite)
    base = replace(fresh_state(mc.cfg, name, globals_=finite), kst=d.mk(lambda b: iv(0), I))
    return MState(
        base,
        d.fresh(f"{name}.tok", I),
        [d.fresh(f"{name}.ent{k}", B) for k in range(1, mc.K + 1)],
        [d.fresh(f"{name}.kst{k}", I) for k in range(1, mc.K + 1)],
    )


def fresh_margs(mc: MConfig, name: str) -> MArgs:
    return MArgs(
        base=fresh_args(mc.cfg, name),
        rl=mkint(f"{name}.rl"),
        rh=[mkint(f"{name}.rh{j}") for j in range(mc.R)],
        nc=mkint(f"{name}.nc"),
        nf=mkint(f"{name}.nf"),
        bs=mkint(f"{name}.bs"),
        g=mkint(f"{name}.g"),
        mp=z3.Bool(f"{name}.mp"),
        ml=mkint(f"{name}.ml"),
        mb=[z3.Bool(f"{name}.mb{j}") for j in range(mc.cfg.M)],
        pn=mkint(f"{name}.pn"),
        rep=z3.Bool(f"{name}.rep"),
        qh=mkint(f"{name}.qh"),
        gm=mkint(f"{name}.gm"),
        gs=[mkint(f"{name}.gs{j}") for j in range(mc.GM)],
    )


def domain(mc: MConfig, a: MArgs) -> z3.BoolRef:
    """The calls the encoding ranges over (the model's domain, the kind widened)."""
    M, R = mc.cfg.M, mc.R
    c = [
        args_domain(mc.cfg, replace(a.base, kind=iv(0))),
        a.kind >= 0,
        a.kind < len(MK_OPS),
        a.rl >= 0,
        a.rl <= R,
        a.nc >= 0,
        a.nc <= M,
        a.nf >= 0,
        a.nf <= M,
        a.bs >= 0,
        a.bs <= 2,
        a.g >= 0,
        a.g < mc.G,
        a.ml >= 0,
        a.ml <= M,
        a.pn >= 0,
        a.pn <= R + 1,
        a.qh >= 1,
        a.qh <= mc.H,
        a.gm >= 0,
        a.gm <= mc.GM,
    ]
    c += [z3.And(h >= 1, h <= mc.H) for h in a.rh]
    c += [z3.And(x >= 0, x < mc.G) for x in a.gs]
    return z3.And(c)


def minitial(mc: MConfig) -> MState:
    d = mc.cfg.dom
    zero = d.mk(lambda b: iv(0), I)
    no = d.mk(lambda b: z3.BoolVal(False), B)
    return MState(initial(mc.cfg), zero, [no] * mc.K, [zero] * mc.K)


def mmerge(mc: MConfig, c: Any, a: MState, b: MState) -> MState:
    """``a`` where ``c`` holds, else ``b``."""
    d = mc.cfg.dom
    return MState(
        merge(d, c, a.base, b.base),
        d.ite(c, a.tok, b.tok),
        [d.ite(c, x, y) for x, y in zip(a.ent, b.ent, strict=True)],
        [d.ite(c, x, y) for x, y in zip(a.kst, b.kst, strict=True)],
    )


def mstate_eq(mc: MConfig, a: MState, b: MState) -> z3.BoolRef:
    d = mc.cfg.dom
    return z3.And(
        [state_eq(d, a.base, b.base), d.eq(a.tok, b.tok)]
        + [d.eq(x, y) for x, y in zip(a.ent, b.ent, strict=True)]
        + [d.eq(x, y) for x, y in zip(a.kst, b.kst, strict=True)]
    )


def key_of(mc: MConfig, h: Any, g: Any) -> Any:
    """The key id of (hash id h, group g)."""
    return (h - 1) * mc.G + g + 1


def _pick(xs: list[Any], i: Any, default: Any) -> Any:
    """``xs[i]`` for a symbolic i (``default`` out of range)."""
    out = default
    for j in reversed(range(len(xs))):
        out = z3.If(i == j, xs[j], out)
    return out


# -- keys: hold, drop, insert ------------------------------------------------------------------


def holds(mc: MConfig, s: MState, k: int, b: Any) -> Any:
    """Block b holds key k (as its primary key or as a further entry), by its own fields."""
    d = mc.cfg.dom
    return z3.Or(d.sel(s.base.key, b) == k, d.sel(s.ent[k - 1], b))


def drop_where(mc: MConfig, s: MState, dropping: Callable[[Any], Any]) -> MState:
    """Every block where ``dropping`` holds drops every key it holds; a key is announced
    removed when no block holds it any more (one BlockRemoved per such key)."""
    cfg = mc.cfg
    d = cfg.dom
    base = s.base
    key = d.mk(lambda b: z3.If(dropping(b), iv(0), d.sel(base.key, b)), I)
    tok = d.mk(lambda b: z3.If(dropping(b), iv(0), d.sel(s.tok, b)), I)
    ent, idx, view = [], [], []
    nev = base.nev
    for k in range(1, mc.K + 1):
        old = base.idx[k - 1]

        def gone_here(b: Any, k: int = k) -> Any:
            return z3.And(dropping(b), holds(mc, s, k, b))

        new = d.mk(lambda b, old=old, gh=gone_here: z3.And(d.sel(old, b), z3.Not(gh(b))), B)  # type: ignore[misc]
        ent.append(
            d.mk(lambda b, k=k: z3.And(d.sel(s.ent[k - 1], b), z3.Not(dropping(b))), B)  # type: ignore[misc]
        )
        idx.append(new)
        dropped = d.exists(1, d.N, gone_here)
        gone = z3.And(dropped, z3.Not(d.exists(1, d.N, lambda b, new=new: d.sel(new, b))))  # type: ignore[misc]
        log = z3.And(cfg.events, gone)
        view.append(z3.And(base.view[k - 1], z3.Not(log)))
        nev = nev + z3.If(log, iv(1), iv(0))
    return replace(s, base=replace(base, key=key, idx=idx, view=view, nev=nev), tok=tok, ent=ent)


def drop_block(mc: MConfig, s: MState, x: Any) -> MState:
    return drop_where(mc, s, lambda b: b == x)


def insert(mc: MConfig, s: MState, live: Any, x: Any, k: Any, ntok: Any) -> MState:
    """Where ``live``: block x holds key k (symbolic id), as its primary key covering
    ``ntok`` tokens if it has none, else as a further entry; nothing if it holds k."""
    d = mc.cfg.dom
    base = s.base
    px = d.sel(base.key, x)
    already = z3.Or(
        px == k, z3.Or([z3.And(k == kk, d.sel(base.idx[kk - 1], x)) for kk in range(1, mc.K + 1)])
    )
    new = z3.And(live, z3.Not(already))
    as_prim = z3.And(new, px == 0)
    as_ent = z3.And(new, px != 0)
    key = d.ite(as_prim, d.store(base.key, x, k, I), base.key)
    tok = d.ite(as_prim, d.store(s.tok, x, ntok, I), s.tok)
    idx, ent, kst = [], [], []
    for kk in range(1, mc.K + 1):
        here = z3.And(new, k == kk)
        idx.append(d.ite(here, d.store(base.idx[kk - 1], x, z3.BoolVal(True), B), base.idx[kk - 1]))
        ent.append(
            d.ite(
                z3.And(as_ent, k == kk),
                d.store(s.ent[kk - 1], x, z3.BoolVal(True), B),
                s.ent[kk - 1],
            )
        )
        kst.append(d.ite(here, d.store(s.kst[kk - 1], x, base.clock, I), s.kst[kk - 1]))
    clock = base.clock + z3.If(new, iv(1), iv(0))
    return MState(replace(base, key=key, idx=idx, clock=clock), tok, ent, kst)


def stored(mc: MConfig, s: MState, c: Any, keys: list[tuple[Any, Any]]) -> MState:
    """One BlockStored where ``c`` (events on): the keys ``k`` with their condition."""
    cfg = mc.cfg
    on = z3.And(cfg.events, c)
    view = [
        z3.Or(v, z3.And(on, z3.Or([z3.And(w, k == kk) for w, k in keys] + [False])))
        for kk, v in enumerate(s.base.view, start=1)
    ]
    return replace(s, base=replace(s.base, view=view, nev=s.base.nev + z3.If(on, iv(1), iv(0))))


def oldest(mc: MConfig, s: MState, k: Any) -> Any:
    """The oldest block holding key k (symbolic id) in the index, or -1. (The every-N
    reading does not model a lookup's value, as the model's does not: -1.)"""
    d = mc.cfg.dom
    out: Any = iv(-1)
    if not isinstance(d, Finite):
        return out
    for kk in range(1, mc.K + 1):
        best: Any = iv(-1)
        for b in range(1, mc.n):
            held = d.sel(s.base.idx[kk - 1], b)
            older = s.kst[kk - 1][b] < d.sel(s.kst[kk - 1], best)
            best = z3.If(z3.And(held, z3.Or(best == -1, older)), iv(b), best)
        out = z3.If(k == kk, best, out)
    return out


# -- the calls ---------------------------------------------------------------------------------

INVALID, NULL, AC, NIU, OFF = (
    ERR["InvalidArgument"],
    ERR["NullBlockMisuse"],
    ERR["AlreadyCached"],
    ERR["BlockNotInUse"],
    ERR["CachingDisabled"],
)


def _first(checks: list[tuple[Any, Any]]) -> Any:
    """The error of the first check that holds (0 if none); an error may be a term."""
    out: Any = iv(0)
    for cond, code in reversed(checks):
        out = z3.If(cond, code if not isinstance(code, int) else iv(code), out)
    return out


def op_cache_full(mc: MConfig, s: MState, a: MArgs) -> tuple[MState, Any]:
    cfg, d = mc.cfg, mc.cfg.dom
    base = s.base
    N, M = d.N, cfg.M
    e = a.base.e
    need = z3.If(a.bs == 1, a.nf, 2 * a.nf)  # hashes at block_size granularity: nf*bs

    def bit(i: Any) -> Any:
        return z3.Or([z3.And(i == j, a.mb[j]) for j in range(M)])

    inr = [z3.And(a.nc <= j, j < a.nf) for j in range(M)]
    skip = [z3.Or(e[j] == 0, z3.And(a.mp, z3.Not(bit(j - a.nc)))) for j in range(M)]
    live = [z3.And(inr[j], z3.Not(skip[j])) for j in range(M)]
    covers = [iv(j + 1) * a.bs for j in range(M)]
    per: Any = iv(0)
    for j in reversed(range(M)):
        x = e[j]
        dup = z3.Or([z3.And(live[i], e[i] == x) for i in range(j)] + [False])
        px, tx = d.sel(base.key, x), d.sel(s.tok, x)
        here = _first(
            [
                (x >= N, INVALID),
                (skip[j], 0),
                (d.sel(base.ref, x) < 1, NIU),
                (dup, INVALID),
                (z3.And(px != 0, z3.Or(tx == 0, tx >= covers[j])), AC),
            ]
        )
        per = z3.If(z3.And(inr[j], here != 0), here, per)
    err = _first(
        [
            (a.bs < 1, INVALID),
            (a.nc >= a.nf, 0),
            (z3.Not(cfg.caching), OFF),
            (a.nf > a.base.m, INVALID),
            (z3.And(a.mp, a.ml != a.nf - a.nc), INVALID),
            (a.rl < need, INVALID),
            (z3.BoolVal(True), per),
        ]
    )
    t = s
    keys = []
    for j in range(M):
        x = e[j]
        k = key_of(mc, _pick(a.rh, iv(j + 1) * a.bs - 1, iv(1)), a.g)
        promote = z3.And(live[j], d.sel(t.base.key, x) != 0)
        if "mk-promote-keeps-index" in cfg.bugs:
            # the bug: the block forgets its keys, the index keeps them (and logs nothing)
            cleared = replace(
                t,
                base=replace(t.base, key=d.store(t.base.key, x, iv(0), I)),
                tok=d.store(t.tok, x, iv(0), I),
                ent=[d.store(en, x, z3.BoolVal(False), B) for en in t.ent],
            )
            t = mmerge(mc, promote, cleared, t)
        else:
            t = mmerge(mc, promote, drop_block(mc, t, x), t)
        t = insert(mc, t, live[j], x, k, covers[j])
        keys.append((live[j], k))
    t = stored(mc, t, z3.BoolVal(True), keys)
    return mmerge(mc, a.nc < a.nf, t, s), err


def op_cache_partial(mc: MConfig, s: MState, a: MArgs) -> tuple[MState, Any, Any]:
    cfg, d = mc.cfg, mc.cfg.dom
    N = d.N
    x = a.base.ib
    err = _first(
        [
            (x >= N, INVALID),
            (x == 0, 0),
            (a.bs < 1, INVALID),
            (z3.Or(a.pn < 1, a.pn > a.rl), INVALID),
            (z3.Not(cfg.caching), OFF),
            (d.sel(s.base.ref, x) < 1, NIU),
        ]
    )
    k = key_of(mc, _pick(a.rh, a.pn - 1, iv(1)), a.g)
    px, tx = d.sel(s.base.key, x), d.sel(s.tok, x)
    held = z3.Or(
        px == k, z3.Or([z3.And(k == kk, d.sel(s.base.idx[kk - 1], x)) for kk in range(1, mc.K + 1)])
    )
    longer = z3.And(z3.Not(held), px != 0, tx != 0, tx < a.pn)
    if "mk-partial-keeps-shorter" in cfg.bugs:
        longer = z3.BoolVal(False)
    t = mmerge(mc, z3.Or(a.rep, longer), drop_block(mc, s, x), s)
    t = insert(mc, t, z3.BoolVal(True), x, k, a.pn)
    t = stored(mc, t, z3.Or(a.rep, z3.Not(held)), [(z3.BoolVal(True), k)])
    return mmerge(mc, x != 0, t, s), err, z3.If(x == 0, iv(0), k)


def op_move(mc: MConfig, s: MState, a: MArgs) -> tuple[MState, Any]:
    cfg, d = mc.cfg, mc.cfg.dom
    N = d.N
    src, dst = a.base.e[0], a.base.e[1]
    base = s.base
    ps, pd = d.sel(base.key, src), d.sel(base.key, dst)
    err = _first(
        [
            (src >= N, INVALID),
            (src == 0, NULL),
            (dst >= N, INVALID),
            (dst == 0, NULL),
            (pd != 0, AC),
            (ps == 0, 0),
            (d.sel(base.ref, dst) < 1, NIU),
        ]
    )
    K = mc.K
    h = [holds(mc, s, k, src) for k in range(1, K + 1)]
    st = [d.sel(s.kst[k - 1], src) for k in range(1, K + 1)]
    es = [d.sel(s.ent[k - 1], src) for k in range(1, K + 1)]
    # dst takes src's keys in src's order: the primary first, then the entries by age
    rank = [
        z3.If(
            ps == k,
            iv(0),
            1 + z3.Sum([z3.If(z3.And(es[j], st[j] < st[k - 1]), iv(1), iv(0)) for j in range(K)]),
        )
        for k in range(1, K + 1)
    ]
    keep_src = "mk-move-leaves-source" in cfg.bugs
    idx, ent, kst = [], [], []
    for k in range(1, K + 1):
        old = base.idx[k - 1]

        def cell(b: Any, old: Any = old, k: int = k) -> Any:
            at_src = d.sel(old, b) if keep_src else z3.And(d.sel(old, b), z3.Not(h[k - 1]))
            return z3.If(
                b == src, at_src, z3.If(b == dst, z3.Or(d.sel(old, b), h[k - 1]), d.sel(old, b))
            )

        idx.append(d.mk(cell, B))
        ent.append(
            d.mk(
                lambda b, k=k: z3.If(  # type: ignore[misc]
                    b == src,
                    z3.BoolVal(False),
                    z3.If(b == dst, es[k - 1], d.sel(s.ent[k - 1], b)),
                ),
                B,
            )
        )
        kst.append(
            d.mk(
                lambda b, k=k: z3.If(  # type: ignore[misc]
                    z3.And(b == dst, h[k - 1]), base.clock + rank[k - 1], d.sel(s.kst[k - 1], b)
                ),
                I,
            )
        )
    key = d.mk(lambda b: z3.If(b == src, iv(0), z3.If(b == dst, ps, d.sel(base.key, b))), I)
    tok = d.mk(
        lambda b: z3.If(b == src, iv(0), z3.If(b == dst, d.sel(s.tok, src), d.sel(s.tok, b))), I
    )
    view, nev = list(base.view), base.nev
    if "mk-move-announces" in cfg.bugs:
        # the bug: src announces each key it was the last holder of, before dst holds it
        for k in range(1, K + 1):
            others = d.exists(
                1,
                d.N,
                lambda b, k=k: z3.And(b != src, d.sel(base.idx[k - 1], b)),  # type: ignore[misc]
            )
            alone = z3.And(h[k - 1], z3.Not(others))
            log = z3.And(cfg.events, alone)
            view[k - 1] = z3.And(view[k - 1], z3.Not(log))
            nev = nev + z3.If(log, iv(1), iv(0))
    t = MState(
        replace(base, key=key, idx=idx, clock=base.clock + K, view=view, nev=nev), tok, ent, kst
    )
    return mmerge(mc, ps != 0, t, s), err


def op_groups(mc: MConfig, s: MState, a: MArgs) -> tuple[Any, list[Any]]:
    """get_cached_block(hash, groups): 1 and the holders if every group has one, else -1."""
    found = [oldest(mc, s, key_of(mc, a.qh, g)) for g in a.gs]
    every = z3.And([z3.Or(j >= a.gm, found[j] != -1) for j in range(mc.GM)])
    if "mk-groups-partial" in mc.cfg.bugs:  # the bug: what was found, if anything was
        every = z3.Or(a.gm == 0, z3.Or([z3.And(j < a.gm, found[j] != -1) for j in range(mc.GM)]))
    return z3.If(every, iv(1), iv(-1)), found


def op_evict(mc: MConfig, s: MState, a: MArgs) -> tuple[MState, Any]:
    cfg, d = mc.cfg, mc.cfg.dom
    _, err = op_evict_blocks(cfg, s.base, a.base)  # (its validation; the drop is below)
    e, m = a.base.e, a.base.m

    def dropping(b: Any) -> Any:
        return z3.Or([z3.And(j < m, e[j] == b) for j in range(cfg.M)])

    if "mk-evict-primary-only" in cfg.bugs:
        # the bug: only the primary key leaves the block and the index; entries stay
        t = s
        for j in range(cfg.M):
            x = e[j]
            px = d.sel(t.base.key, x)
            only = replace(
                t,
                base=replace(t.base, key=t.base.key, idx=t.base.idx),
                ent=t.ent,
            )
            for k in range(1, mc.K + 1):
                idx_k = d.ite(
                    px == k,
                    d.store(only.base.idx[k - 1], x, z3.BoolVal(False), B),
                    only.base.idx[k - 1],
                )
                gone = z3.And(px == k, z3.Not(d.exists(1, d.N, lambda b, i=idx_k: d.sel(i, b))))  # type: ignore[misc]
                log = z3.And(cfg.events, gone)
                view = list(only.base.view)
                view[k - 1] = z3.And(view[k - 1], z3.Not(log))
                idx = list(only.base.idx)
                idx[k - 1] = idx_k
                only = replace(
                    only,
                    base=replace(
                        only.base, idx=idx, view=view, nev=only.base.nev + z3.If(log, iv(1), iv(0))
                    ),
                )
            only = replace(
                only,
                base=replace(only.base, key=d.store(only.base.key, x, iv(0), I)),
                tok=d.store(only.tok, x, iv(0), I),
            )
            t = mmerge(mc, j < m, only, t)
        return t, err
    return drop_where(mc, s, dropping), err


def mtransition(mc: MConfig, s: MState, a: MArgs) -> tuple[MState, MResult]:
    """The state after ``a`` and its result; a refused call leaves the state as it was."""
    cfg, d = mc.cfg, mc.cfg.dom
    base, ab = s.base, a.base
    kind = a.kind
    g, gerr, gres = op_get_new_blocks(cfg, base, ab)
    ps_ = positions(d, base)

    def taken(b: Any) -> Any:  # (op_get_new_blocks' own test: the first n of the queue)
        p = d.sel(ps_, b)
        return z3.And(b >= 1, b < d.N, in_queue(d, base, b), p >= 0, p < ab.n)

    gm = drop_where(mc, s, taken)
    gm = replace(
        gm, base=replace(g, key=gm.base.key, idx=gm.base.idx, view=gm.base.view, nev=gm.base.nev)
    )
    f, ferr = op_free_blocks(cfg, base, ab)
    t, terr = op_touch(cfg, base, ab)
    u, uerr = op_unpin_blocks(cfg, base, ab)
    c, cerr = op_cache_blocks(cfg, base, ab)
    ckst = list(s.kst)
    for j in range(cfg.M):  # entry j took its key at clock + j (the model's stamps per block)
        x, k = ab.e[j], ab.ks[j]
        ckst = [
            d.ite(
                z3.And(j < ab.m, k == kk), d.store(ckst[kk - 1], x, base.clock + j, I), ckst[kk - 1]
            )
            for kk in range(1, mc.K + 1)
        ]
    cm = MState(replace(c, kst=base.kst), s.tok, s.ent, ckst)
    em, eerr = op_evict(mc, s, a)
    r, rok = op_reset(cfg, base)
    no = d.mk(lambda b: z3.BoolVal(False), B)
    zero = d.mk(lambda b: iv(0), I)
    rm = mmerge(mc, rok, MState(r, zero, [no] * mc.K, s.kst), s)
    fm, fmerr = op_cache_full(mc, s, a)
    pm, pmerr, pval = op_cache_partial(mc, s, a)
    mm, mmerr = op_move(mc, s, a)
    gval, found = op_groups(mc, s, a)
    werr = z3.If(ab.ib >= d.N, iv(INVALID), iv(0))
    err: Any = iv(0)
    for name, e_ in (
        ("GetNewBlocks", gerr),
        ("FreeBlocks", ferr),
        ("Touch", terr),
        ("UnpinBlocks", uerr),
        ("CacheBlocks", cerr),
        ("EvictBlocks", eerr),
        ("IsBlockWritable", werr),
        ("CacheFullBlocks", fmerr),
        ("CachePartialBlock", pmerr),
        ("MoveBlockHashes", mmerr),
    ):
        err = z3.If(kind == MKK[name], e_, err)
    same = MState(base, s.tok, s.ent, s.kst)
    nxt = s
    for name, cand in (
        ("GetNewBlocks", gm),
        ("FreeBlocks", replace(same, base=f)),
        ("Touch", replace(same, base=t)),
        ("UnpinBlocks", replace(same, base=u)),
        ("CacheBlocks", cm),
        ("EvictBlocks", em),
        ("ResetPrefixCache", rm),
        ("TakeEvents", replace(same, base=replace(base, nev=iv(0)))),
        ("CacheFullBlocks", fm),
        ("CachePartialBlock", pm),
        ("MoveBlockHashes", mm),
    ):
        nxt = mmerge(mc, z3.And(kind == MKK[name], err == 0), cand, nxt)
    writable = z3.And(ab.ib != 0, d.sel(base.ref, ab.ib) == 1, d.sel(base.key, ab.ib) == 0)
    value: Any = iv(0)
    for name, v in (
        ("GetNewBlocks", ab.n),
        ("GetCachedBlock", oldest(mc, s, ab.qk)),
        ("ResetPrefixCache", z3.If(rok, iv(1), iv(0))),
        ("GetNumFreeBlocks", base.L),
        ("IsBlockWritable", z3.If(writable, iv(1), iv(0))),
        ("TakeEvents", base.nev),
        ("CachePartialBlock", pval),
        ("GetCachedBlockGroups", gval),
    ):
        value = z3.If(kind == MKK[name], v, value)
    gnb = z3.And(kind == MKK["GetNewBlocks"], err == 0)
    rs = z3.And(kind == MKK["ResetPrefixCache"], rok)
    fire = [d.ite(gnb, gf, d.ite(rs, base.pend[w], no)) for w, gf in enumerate(gres.fire)]
    fire_key = d.ite(gnb, gres.fire_key, base.bst)
    return nxt, MResult(Result(err, value, None, gres.ret, fire, fire_key), found)


# -- obligations -------------------------------------------------------------------------------


def inv_cache(mc: MConfig, s: MState) -> z3.BoolRef:
    """INV-CACHE for several keys: block in the index under k <=> k is its primary key or
    one of its further entries; its keys are distinct; entries and a token count only
    beside a primary key; nothing is cached with caching off."""
    cfg, d = mc.cfg, mc.cfg.dom

    def agree(b: Any) -> z3.BoolRef:
        kb = d.sel(s.base.key, b)
        c = [kb >= 0, kb <= mc.K, z3.Implies(z3.Not(cfg.caching), kb == 0)]
        c.append(z3.Implies(d.sel(s.tok, b) != 0, kb != 0))
        for k in range(1, mc.K + 1):
            en = d.sel(s.ent[k - 1], b)
            c.append(d.sel(s.base.idx[k - 1], b) == z3.Or(kb == k, en))
            c.append(z3.Implies(en, z3.And(kb != 0, kb != k)))
        return z3.And(c)

    return d.forall(0, d.N, agree)


STATE_OBLIGATIONS = fixedn.STATE_OBLIGATIONS
"""fixedn's hypothesis parts, read for blocks with several keys (:func:`state_obligations`)."""
STEP_RULES = (*fixedn.STEP_RULES, "RES-GROUPS", "MOVE-SILENT")
"""fixedn's step rules and this module's own two (:data:`OWN_RULES`)."""
OWN_RULES = {
    "RES-GROUPS": "get_cached_block(hash, groups): the oldest holder of (hash, g) for each "
    "group g in order, or None if some group has none (all or nothing)",
    "MOVE-SILENT": "move_block_hashes logs no event and leaves the consumers' view as it was",
}
"""The two step rules this module adds (the rest are ``spec/rules.py``'s)."""
ROW_OF = {"RES-GROUPS": "RES-CACHED", "MOVE-SILENT": "INV-EVENTS"}
"""The matrix row each of this module's own rules speaks to."""


def state_obligations(mc: MConfig, s: MState) -> dict[str, z3.BoolRef]:
    """The fixed-N induction's hypothesis, part by part (fixedn's, INV-CACHE restated for
    several keys, INV-NULL extended to the null block's entries and token count)."""
    d = mc.cfg.dom
    out = fixedn.state_obligations(mc.cfg, s.base)
    out["INV-CACHE"] = inv_cache(mc, s)
    out["INV-NULL"] = z3.And(
        [out["INV-NULL"], d.sel(s.tok, 0) == 0] + [z3.Not(d.sel(x, 0)) for x in s.ent]
    )
    return out


def step_rules(mc: MConfig, s: MState, a: MArgs, r: MResult, t: MState) -> dict[str, z3.BoolRef]:
    """The rules of one call (props.step_props, RES-CACHED and ERR-ATOMIC restated for
    several keys, and RES-GROUPS and MOVE-SILENT)."""
    cfg, d = mc.cfg, mc.cfg.dom
    N = d.N
    kind, ok = a.kind, r.r.err == 0
    out = props.step_props(cfg, s.base, a.base, r.r, t.base)
    out["ERR-ATOMIC"] = z3.Implies(z3.Not(ok), mstate_eq(mc, s, t))

    def res_of(k: Any, v: Any) -> z3.BoolRef:
        def holder(b: Any) -> Any:
            return z3.Or(
                [z3.And(k == kk, d.sel(s.base.idx[kk - 1], b)) for kk in range(1, mc.K + 1)]
            )

        def stamp(b: Any) -> Any:
            return z3.Sum(
                [z3.If(k == kk, d.sel(s.kst[kk - 1], b), iv(0)) for kk in range(1, mc.K + 1)]
            )

        return z3.And(
            (v == -1) == d.forall(1, N, lambda b: z3.Not(holder(b))),
            z3.Implies(
                v != -1,
                z3.And(
                    v >= 1,
                    v < N,
                    holder(v),
                    d.forall(1, N, lambda b: z3.Implies(holder(b), stamp(v) <= stamp(b))),
                ),
            ),
        )

    out["RES-CACHED"] = z3.Implies(kind == OPK["GetCachedBlock"], res_of(a.base.qk, r.r.value))
    every = z3.And(
        [
            z3.Implies(
                j < a.gm,
                z3.Or(
                    [_held(mc, s, key_of(mc, a.qh, a.gs[j]), b) for b in range(1, mc.n)] + [False]
                ),
            )
            for j in range(mc.GM)
        ]
    )
    groups = [
        z3.Implies(z3.And(j < a.gm, r.r.value == 1), res_of(key_of(mc, a.qh, a.gs[j]), r.groups[j]))
        for j in range(mc.GM)
    ]
    out["RES-GROUPS"] = z3.Implies(
        kind == MKK["GetCachedBlockGroups"], z3.And([(r.r.value == 1) == every, *groups])
    )
    out["MOVE-SILENT"] = z3.Implies(
        kind == MKK["MoveBlockHashes"],
        z3.And(
            [t.base.nev == s.base.nev]
            + [x == y for x, y in zip(t.base.view, s.base.view, strict=True)]
        ),
    )
    return out


def _held(mc: MConfig, s: MState, k: Any, b: Any) -> Any:
    d = mc.cfg.dom
    return z3.Or([z3.And(k == kk, d.sel(s.base.idx[kk - 1], b)) for kk in range(1, mc.K + 1)])


# -- one symbolic step (the induction's) -------------------------------------------------------


@dataclass
class MStep:
    mc: MConfig
    s: MState
    a: MArgs
    r: MResult
    t: MState
    hyp: dict[str, z3.BoolRef]
    goals: dict[str, z3.BoolRef]
    dom: z3.BoolRef


def build(n: int, H: int = 2, G: int = 2, R: int = 4, bugs: frozenset[str] = frozenset()) -> MStep:
    with int_sort(None):
        mc = make_config(n, H, G, R, bugs)
        s = fresh_mstate(mc, "s")
        a = fresh_margs(mc, "a")
        t, r = mtransition(mc, s, a)
        hyp = state_obligations(mc, s)
        goals = {**state_obligations(mc, t), **step_rules(mc, s, a, r, t)}
        return MStep(mc, s, a, r, t, hyp, goals, domain(mc, a))


def _case(st: MStep, op: str, f: z3.BoolRef) -> z3.BoolRef:
    return simplify(z3.substitute(f, (st.a.kind, iv(MKK[op]))))


def step_goals(
    st: MStep,
    names: tuple[str, ...] | None = None,
    ops: tuple[str, ...] = MK_OPS,
    timeout_ms: int = 120000,
    split: bool = True,
) -> list[Goal]:
    """Each step obligation, one case per call kind, one query per conjunct (as
    ``fixedn.step_goals``); a case is proved iff every conjunct is."""
    out = []
    hyp = list(st.hyp.values())
    for name in names or tuple(st.goals):
        for op in ops:
            base = [_case(st, op, st.dom), st.a.kind == MKK[op], *hyp]
            goal = _case(st, op, st.goals[name])
            parts = conjuncts(goal) if split else [goal]
            g = Goal(name, "step", "proved", 0.0, op=op)
            for part, (status, dt, m) in zip(
                parts, isolated_checks(base, parts, timeout_ms), strict=False
            ):
                g.seconds += dt
                g.queries.append([*base, z3.Not(part)])
                if status != "proved":
                    g.status, g.model = status, m
            g.query = g.queries[-1] if g.status == "refuted" else g.queries[0]
            out.append(g)
    return out


def init_goals(n: int, H: int = 2, G: int = 2, R: int = 4) -> list[Goal]:
    with int_sort(None):
        mc = make_config(n, H, G, R)
        out = []
        for name, g in state_obligations(mc, minitial(mc)).items():
            status, dt, m = isolated_check([], g, 60000)
            out.append(Goal(name, "init", status, dt, m, query=[z3.Not(g)]))
        return out


def lemma_goal(st: MStep) -> Goal:
    """INV-WATCH from WATCH-PER-BLOCK on any state (fixedn's lemma, on this encoding)."""
    with int_sort(None):
        u = fresh_mstate(st.mc, "u")
        obl = state_obligations(st.mc, u)
    status, dt, m = isolated_check([obl["WATCH-PER-BLOCK"]], obl["INV-WATCH"], 120000)
    return Goal("INV-WATCH", "lemma", status, dt, m, op="from WATCH-PER-BLOCK")


# -- from models back to the spec --------------------------------------------------------------


def hname(h: int) -> bytes:
    """Hash id h of the encoding is the block hash ``b"h<h>"`` of the spec."""
    return f"h{h}".encode()


def kname(mc: MConfig, k: int) -> bytes:
    """Key id k is vLLM's key of (hash id, group): the hash then the group as 4 bytes."""
    return group_key(hname((k - 1) // mc.G + 1), (k - 1) % mc.G)


@dataclass(frozen=True)
class MC:
    """Concrete arguments of one call."""

    base: ConcreteArgs
    rl: int = 0
    rh: tuple[int, ...] = ()
    nc: int = 0
    nf: int = 0
    bs: int = 1
    g: int = 0
    mp: bool = False
    ml: int = 0
    mb: tuple[bool, ...] = ()
    pn: int = 0
    rep: bool = False
    qh: int = 1
    gm: int = 0
    gs: tuple[int, ...] = ()


def read_args(m: Any, mc: MConfig, a: MArgs) -> MC:
    from .trace import read_args as base_read

    def i(x: Any) -> int:
        return to_int(m.eval(x, model_completion=True))

    def t(x: Any) -> bool:
        return z3.is_true(m.eval(x, model_completion=True))  # type: ignore[no-any-return]

    return MC(
        base_read(m, a.base),
        i(a.rl),
        tuple(i(x) for x in a.rh),
        i(a.nc),
        i(a.nf),
        i(a.bs),
        i(a.g),
        t(a.mp),
        i(a.ml),
        tuple(t(x) for x in a.mb),
        i(a.pn),
        t(a.rep),
        i(a.qh),
        i(a.gm),
        tuple(i(x) for x in a.gs),
    )


def request(c: MC) -> Request:
    return Request(tuple(hname(h) for h in c.rh[: c.rl]), tuple(range(c.rl)))


def to_op(mc: MConfig, c: MC) -> Op:
    """The spec call a step of the encoding stands for."""
    b = c.base
    name = MK_OPS[b.kind]
    blocks = tuple(BlockRef(0, x) for x in b.e[: b.m])
    if name == "CacheBlocks":
        return CacheBlocks(blocks, tuple(kname(mc, k) for k in b.ks[: b.km]))
    if name == "GetCachedBlock":
        return GetCachedBlock(kname(mc, b.qk))
    if name == "CacheFullBlocks":
        mask = tuple(c.mb[: c.ml]) if c.mp else None
        return CacheFullBlocks(request(c), blocks, c.nc, c.nf, c.bs, c.g, mask)
    if name == "CachePartialBlock":
        return CachePartialBlock(request(c), BlockRef(0, b.ib), c.pn, c.g, c.bs, c.rep)
    if name == "MoveBlockHashes":
        return MoveBlockHashes(BlockRef(0, b.e[0]), BlockRef(0, b.e[1]))
    if name == "GetCachedBlockGroups":
        return GetCachedBlockGroups(hname(c.qh), tuple(c.gs[: c.gm]))
    return base_to_op(b, mc.n)


def decode(
    m: Any, mc: MConfig, s: MState, caching: bool, events: bool, n: int | None = None
) -> PoolState:
    """The spec state an encoded state stands for (``m`` a model or a substitution; ``n``
    the number of blocks when the reading is the unbounded one, whose arrays are z3's)."""
    K = mc.K
    finite = n is None
    n = mc.n if n is None else n

    def sel(a: Any, j: int) -> Any:
        return a[j] if finite else z3.Select(a, j)

    def i(x: Any) -> int:
        return to_int(m.eval(x, model_completion=True))

    def t(x: Any) -> bool:
        return z3.is_true(m.eval(x, model_completion=True))  # type: ignore[no-any-return]

    ps = decode_state(m, s.base, n, K, mc.cfg.W, caching, events, sel)
    ps.hash_block_size = 1
    prim = [i(sel(s.base.key, b)) for b in range(n)]
    ps.key = [kname(mc, k) if 1 <= k <= K else None for k in prim]
    tok = [i(sel(s.tok, b)) for b in range(n)]
    ps.tokens = {b: tok[b] for b in range(n) if tok[b] != 0}
    stamp = {(k, b): i(sel(s.kst[k - 1], b)) for k in range(1, K + 1) for b in range(n)}
    ps.entries = {}
    for b in range(n):
        ks = sorted(
            (k for k in range(1, K + 1) if t(sel(s.ent[k - 1], b))), key=lambda k: stamp[k, b]
        )
        if ks:
            ps.entries[b] = [kname(mc, k) for k in ks]
    ps.index = {}
    for k in range(1, K + 1):
        hs = sorted(
            (b for b in range(n) if t(sel(s.base.idx[k - 1], b))), key=lambda b: stamp[k, b]
        )
        if hs:
            ps.index[kname(mc, k)] = dict.fromkeys(hs)
    ps.view = {kname(mc, k) for k in range(1, K + 1) if t(s.base.view[k - 1])} if events else set()
    return ps


def flags(m: Any, mc: MConfig) -> tuple[bool, bool]:
    return (
        z3.is_true(m.eval(mc.cfg.caching, model_completion=True)),
        z3.is_true(m.eval(mc.cfg.events, model_completion=True)),
    )


def spec_world(ps: PoolState) -> World:
    return World([ps.copy()], [True])


# -- the spec with a bug (for replaying a mutant's counterexample) ----------------------------


MUTANTS: dict[str, tuple[str, str]] = {
    "mk-promote-keeps-index": (
        "INV-CACHE",
        "cache_full_blocks promotes a partial block: the block forgets its keys, the index "
        "keeps them",
    ),
    "mk-move-leaves-source": (
        "INV-CACHE",
        "move_block_hashes leaves src among the holders of the keys it moved",
    ),
    "mk-move-announces": (
        "INV-EVENTS",
        "move_block_hashes logs BlockRemoved for each key src was the last holder of",
    ),
    "mk-evict-primary-only": (
        "INV-CACHE",
        "evict_blocks drops only a block's primary key; its further entries stay",
    ),
    "mk-groups-partial": (
        "RES-GROUPS",
        "get_cached_block over groups returns the holders found, not all or nothing",
    ),
}
"""Seeded bugs of the multi-key calls: name -> (the obligation it breaks, what it does).
Each exists in the encoding (``Config.bugs``) and in :class:`BuggyMultiWorld`."""

DIFF_ONLY_MUTANTS: dict[str, str] = {
    "mk-partial-keeps-shorter": "cache_partial_block keeps a shorter prefix's keys when a "
    "longer one comes (no invariant breaks: only the differential sees it)",
}


class BuggyMultiWorld(World):
    """The executable spec with one bug of :data:`MUTANTS` (``spec/`` is not edited: the
    bug is made around the spec's own handlers)."""

    bug: str = ""
    _op: str = ""

    @classmethod
    def from_state(cls, bug: str, ps: PoolState) -> BuggyMultiWorld:
        w = cls([ps.copy()], [True])
        w.bug = bug
        return w

    def apply(self, op: Op) -> Outcome:
        self._op = type(op).__name__
        ps = self.pools[0]
        before = {k: list(h) for k, h in ps.index.items()}
        src_keys = (
            ps.keys_of(op.src.block)
            if isinstance(op, MoveBlockHashes) and isinstance(op.src, BlockRef)
            else []
        )
        try:
            out = super().apply(op)
        finally:
            self._op = ""
        if self.bug == "mk-move-leaves-source" and isinstance(op, MoveBlockHashes) and out.ok:
            for k in src_keys:  # src keeps its place among the holders, dst after them all
                ps.index[k] = dict.fromkeys([*before[k], cast(BlockRef, op.dst).block])
        if self.bug == "mk-move-announces" and isinstance(op, MoveBlockHashes) and out.ok:
            for k in src_keys:
                if before[k] == [cast(BlockRef, op.src).block]:
                    self._log(ps, removed(k, ps.medium))
        if self.bug == "mk-groups-partial" and isinstance(op, GetCachedBlockGroups) and out.ok:
            found = [ps.index.get(group_key(op.block_hash, g)) for g in op.group_ids]  # type: ignore[arg-type]
            hits = tuple(next(iter(h)) for h in found if h)
            if hits or not found:
                out = Outcome(value=hits, fired=out.fired)
        return out

    def _drop_key(self, ps: PoolState, b: int) -> None:
        if self.bug == "mk-promote-keeps-index" and self._op == "CacheFullBlocks":
            ps.key[b] = None  # the block forgets its keys; the index keeps them
            ps.tokens.pop(b, None)
            ps.entries.pop(b, None)
            return
        if self.bug == "mk-evict-primary-only" and self._op == "EvictBlocks":
            k = ps.key[b]
            if k is None:
                return
            ps.key[b] = None
            ps.tokens.pop(b, None)
            holders = ps.index[k]
            del holders[b]
            if not holders:
                del ps.index[k]
                self._log(ps, removed(k, ps.medium))
            return
        super()._drop_key(ps, b)


def replay(bug: str, obligation: str, ps: PoolState, trace: list[Op]) -> str:
    """``trace`` from ``ps`` on the buggy spec and on the spec: "confirmed at step i: ..."
    when the bug breaks ``obligation`` there (an invariant the spec's checker reports, or
    a result or state that differs from the spec's), else "NOT confirmed"."""
    w = BuggyMultiWorld.from_state(bug, ps)
    for i, op in enumerate(trace):
        good = spec_world(w.pools[0])
        out = w.apply(op)
        ref = good.apply(op)
        if obligation.startswith("INV-"):
            bad = [v for v in check_pool(w.pools[0]) if v.invariant == obligation]
            if bad:
                return f"confirmed at step {i + 1}: {op!r} breaks {bad[0]}"
        elif (ref.value, ref.error) != (out.value, out.error):
            return f"confirmed at step {i + 1}: {op!r} gives {out.value!r}, the spec {ref.value!r}"
    return "NOT confirmed by replay"


# -- bounded model checking from the pool as built -----------------------------------------


def _pin(mc: MConfig, s: MState, name: str) -> tuple[MState, list[z3.BoolRef]]:
    from .bmc import _pin as pin_base

    base, eqs = pin_base(mc.cfg.dom, s.base, name, mc.cfg)  # type: ignore[arg-type]
    f = fresh_mstate(mc, name)
    eqs += [x == y for x, y in zip(f.tok, s.tok, strict=True)]
    for u, v in zip(f.ent + f.kst, s.ent + s.kst, strict=True):
        eqs += [x == y for x, y in zip(u, v, strict=True)]
    return MState(replace(base, kst=s.base.kst), f.tok, f.ent, f.kst), eqs


@dataclass
class Refutation:
    bug: str
    obligation: str
    status: str  # "refuted", "proved" (NOT refuted within the bound), "unknown"
    seconds: float
    trace: list[Op] = field(default_factory=list)
    caching: bool = True
    events: bool = True
    replay: str = ""


def bmc_refute(
    bug: str, n: int = 3, k: int = 4, timeout_ms: int = 120000, H: int = 2, G: int = 2, R: int = 2
) -> Refutation:
    """Is ``MUTANTS[bug]``'s obligation broken within k calls from the pool as built?
    The counterexample decoded into spec calls and replayed on the buggy spec."""
    obligation = MUTANTS[bug][0]
    t0 = time.perf_counter()
    with int_sort(None):
        mc = make_config(n, H, G, R, frozenset([bug]))
        sol = z3.Solver()
        s, eqs = _pin(mc, minitial(mc), "s0")
        sol.add(eqs)
        args, bad = [], []
        for i in range(k):
            a = fresh_margs(mc, f"a{i}")
            sol.add(domain(mc, a))
            t, r = mtransition(mc, s, a)
            t, eqs = _pin(mc, t, f"s{i + 1}")
            sol.add(eqs)
            goals = {**state_obligations(mc, t), **step_rules(mc, s, a, r, t)}
            bad.append(z3.Not(goals[obligation]))
            args.append(a)
            s = t
        sol.add(z3.Or(bad))
        sol.set("timeout", timeout_ms)
        res = sol.check()
    dt = time.perf_counter() - t0
    if res != z3.sat:
        return Refutation(bug, obligation, "proved" if res == z3.unsat else "unknown", dt)
    m = sol.model()
    first = next(i for i, p in enumerate(bad) if z3.is_true(m.eval(p, model_completion=True)))
    trace = [to_op(mc, read_args(m, mc, a)) for a in args[: first + 1]]
    caching, events = flags(m, mc)
    ps = PoolState.initial(n, caching, events, hash_block_size=1)
    return Refutation(
        bug, obligation, "refuted", dt, trace, caching, events, replay(bug, obligation, ps, trace)
    )


# -- witnesses ---------------------------------------------------------------------------------


def witness_goals(st: MStep, timeout_ms: int = 60000) -> list[tuple[str, str, str]]:
    """For each call kind: a state satisfying H and a call of that kind, decoded; the state
    must pass the spec's invariants, and so must the spec's state after the call.
    (kind, "sat"/"unsat"/"unknown", what went wrong or "")."""
    out = []
    for op in MK_OPS:
        hs = [_case(st, op, st.dom), st.a.kind == MKK[op], *st.hyp.values()]
        res, _, m = isolated_model(hs, timeout_ms)
        if m is None:
            out.append((op, res, "no model"))
            continue
        caching, events = flags(m, st.mc)
        ps = decode(m, st.mc, st.s, caching, events)
        call = to_op(st.mc, read_args(m, st.mc, st.a))
        pre = check_pool(ps)
        if pre:
            out.append((op, "sat", f"decoded state breaks {pre[0]}"))
            continue
        w = spec_world(ps)
        w.apply(call)
        post = check_pool(w.pools[0])
        out.append((op, "sat", f"{call!r} on the spec breaks {post[0]}" if post else ""))
    return out


# -- the differential: the encoding's step against the spec's ------------------------------


def stamps(ps: PoolState) -> dict[tuple[Hashable, int], int]:
    """Join times for every (key, block) pair held, consistent with each key's holder
    order and each block's entry order (a topological order of both)."""
    ts: graphlib.TopologicalSorter[tuple[Hashable, int]] = graphlib.TopologicalSorter()
    for k, holders in ps.index.items():
        hs = list(holders)
        for b in hs:
            ts.add((k, b))
        for x, y in itertools.pairwise(hs):
            ts.add((k, y), (k, x))
    for b, es in ps.entries.items():
        for older, newer in itertools.pairwise(es):
            ts.add((newer, b), (older, b))
    return {node: i for i, node in enumerate(ts.static_order())}


def encode(mc: MConfig, s: MState, a: MArgs, ps: PoolState, c: MC) -> list[tuple[Any, Any]]:
    """Substitution pairs giving the encoding's variables the values of ``ps`` and ``c``."""
    n, K, cfg = ps.num_blocks, mc.K, mc.cfg
    ids: dict[Hashable, int] = {kname(mc, k): k for k in range(1, K + 1)}
    pairs: list[tuple[Any, Any]] = []

    def put(var: Any, val: int | bool) -> None:
        pairs.append((var, z3.BoolVal(val) if isinstance(val, bool) else z3.IntVal(val)))

    st = stamps(ps)
    order = list(ps.free) + [b for b in range(1, n) if b not in ps.free]
    pos = {b: p for p, b in enumerate(order)}
    bst = [0] * n
    wst = [[0] * n for _ in range(cfg.W)]
    for rank, (b, ws) in enumerate(ps.pending.items()):
        bst[b] = rank
        for j, w in enumerate(ws):
            wst[w][b] = j
    sb = s.base
    for b in range(n):
        k = ps.key[b]
        put(sb.ref[b], ps.ref[b])
        put(sb.key[b], ids[k] if k is not None else 0)
        put(sb.bst[b], bst[b])
        put(sb.reg[b], len(ps.pending.get(b, ())))
        put(sb.fb[b], 0)
        put(sb.pos[b], pos.get(b, -1))
        put(sb.inq[b], b in ps.free)
        put(sb.q[b], order[b] if b < len(order) else 0)
        put(s.tok[b], ps.tokens.get(b, 0))
        for kk in range(1, K + 1):
            name = kname(mc, kk)
            put(sb.idx[kk - 1][b], b in ps.index.get(name, {}))
            put(s.ent[kk - 1][b], name in ps.entries.get(b, ()))
            put(s.kst[kk - 1][b], st.get((name, b), 0))
        for w in range(cfg.W):
            put(sb.pend[w][b], w in ps.pending.get(b, ()))
            put(sb.wst[w][b], wst[w][b])
    put(sb.L, len(ps.free))
    put(sb.lo, 0)
    put(sb.hi, len(ps.free) - 1)
    put(sb.clock, max(len(st), len(ps.pending), cfg.W) + 1)
    for kk in range(1, K + 1):
        put(sb.view[kk - 1], kname(mc, kk) in ps.view)
    put(sb.nev, len(ps.log))
    assert sb.registered is not None and sb.fired is not None
    put(sb.registered, ps.registered)
    put(sb.fired, ps.fired)
    put(cfg.caching, ps.caching)
    put(cfg.events, ps.events_on)
    ab, cb = a.base, c.base
    for var, val in (
        (ab.kind, cb.kind),
        (ab.n, cb.n),
        (ab.m, cb.m),
        (ab.ef, cb.ef),
        (ab.w, cb.w),
        (ab.km, cb.km),
        (ab.qk, cb.qk),
        (ab.ib, cb.ib),
        (a.rl, c.rl),
        (a.nc, c.nc),
        (a.nf, c.nf),
        (a.bs, c.bs),
        (a.g, c.g),
        (a.mp, c.mp),
        (a.ml, c.ml),
        (a.pn, c.pn),
        (a.rep, c.rep),
        (a.qh, c.qh),
        (a.gm, c.gm),
    ):
        put(var, val)
    for j in range(cfg.M):
        put(ab.e[j], cb.e[j])
        put(ab.ks[j], cb.ks[j])
        put(a.mb[j], c.mb[j] if j < len(c.mb) else False)
    for j in range(mc.R):
        put(a.rh[j], c.rh[j] if j < len(c.rh) else 1)
    for j in range(mc.GM):
        put(a.gs[j], c.gs[j] if j < len(c.gs) else 0)
    return pairs


@dataclass
class Stepper:
    mc: MConfig
    s: MState
    a: MArgs
    t: MState
    r: MResult
    outputs: list[tuple[Any, Any]]

    @classmethod
    def build(cls, n: int, bugs: frozenset[str] = frozenset(), R: int = 4) -> Stepper:
        with int_sort(None):
            mc = make_config(n, R=R, bugs=bugs)
            s = fresh_mstate(mc, "pre")
            a = fresh_margs(mc, "arg")
            t, r = mtransition(mc, s, a)
        outs: list[Any] = []
        tb = t.base
        for arr in [tb.ref, tb.key, tb.bst, tb.reg, tb.fb, tb.pos, tb.inq, t.tok]:
            outs += list(arr)
        for arr in [*tb.idx, *tb.pend, *tb.wst, *t.ent, *t.kst, *r.r.fire, *s.base.wst]:
            outs += list(arr)
        outs += list(r.r.fire_key) + list(r.r.ret) + list(s.base.reg) + list(s.base.fb)
        outs += [tb.L, *tb.view, tb.nev, r.r.err, r.r.value, s.base.L, *r.groups]
        outs += [tb.registered, tb.fired]
        return cls(mc, s, a, t, r, [(x, x) for x in outs])


def comparable(ps: PoolState) -> tuple[object, ...]:
    return (
        tuple(ps.ref),
        tuple(ps.key),
        tuple(sorted(ps.tokens.items())),
        tuple(sorted((b, tuple(ks)) for b, ks in ps.entries.items() if ks)),
        tuple(ps.free),
        tuple(sorted((k, tuple(h)) for k, h in ps.index.items())),
        tuple((b, tuple(ws)) for b, ws in ps.pending.items()),
        frozenset(ps.view),
        ps.registered,
        ps.fired,
        len(ps.log),
    )


def compare_step(st: Stepper, ps: PoolState, c: MC) -> str | None:
    """One (state, call) pair: the encoding's step against the spec's; None if they agree,
    else what differs."""
    mc = st.mc
    op = to_op(mc, c)
    m = _Subst(encode(mc, st.s, st.a, ps, c), st.outputs)
    after = decode(m, mc, st.t, ps.caching, ps.events_on)
    after.log = [None] * to_int(m.eval(st.t.base.nev))  # type: ignore[list-item]
    name = MK_OPS[c.base.kind]
    shim = _Shim(st)
    if name in OPS:
        enc = encoded_outcome(shim, m, c.base, ps)  # type: ignore[arg-type]
    else:
        # (the model's decoder, for the error and the watchers; the value is decoded here)
        probe = encoded_outcome(shim, m, replace(c.base, kind=OPK["GetNumFreeBlocks"]), ps)  # type: ignore[arg-type]
        err = to_int(m.eval(st.r.r.err))
        value: object = None
        v = to_int(m.eval(st.r.r.value))
        if name == "CachePartialBlock" and v:
            value = kname(mc, v)
        if name == "GetCachedBlockGroups" and v == 1:
            value = tuple(to_int(m.eval(x)) for x in st.r.groups[: c.gm])
        enc = probe if err else Outcome(value=value, fired=probe.fired)
    w = spec_world(ps)
    spec_out = spec_comparable_outcome(w.apply(op), name if name in OPS else "")
    spec_view = (spec_out, comparable(w.pools[0]))
    enc_view = (enc, comparable(after))
    if spec_view != enc_view:
        return f"{op!r} on {ps.describe()}:\n  spec    {spec_view}\n  encoded {enc_view}"
    return None


@dataclass
class _Shim:
    """What ``differential.encoded_outcome`` reads of its stepper."""

    st: Stepper

    @property
    def res(self) -> Result:
        return self.st.r.r

    @property
    def cfg(self) -> Config:
        return self.st.mc.cfg

    @property
    def pre(self) -> State:
        return self.st.s.base

    reading = "finite"

    def sel(self, a: Any, i: int) -> Any:
        return a[i]


WEIGHTS = {
    "GetNewBlocks": 4,
    "CachePartialBlock": 4,
    "CacheFullBlocks": 4,
    "MoveBlockHashes": 3,
    "CacheBlocks": 2,
    "FreeBlocks": 2,
    "EvictBlocks": 2,
    "Touch": 2,
    "UnpinBlocks": 2,
    "GetCachedBlockGroups": 2,
}


def random_call(rng: random.Random, mc: MConfig, ps: PoolState, kind: int | None = None) -> MC:
    """A call that mostly makes sense on ``ps`` (blocks in use to cache, keyed ones to
    move or evict, ...), sometimes not (refusals are calls too)."""
    n = ps.num_blocks
    kind = (
        rng.choices(range(len(MK_OPS)), [WEIGHTS.get(o, 1) for o in MK_OPS])[0]
        if kind is None
        else kind
    )
    name = MK_OPS[kind]
    in_use = [b for b in range(1, n) if ps.ref[b] > 0]
    keyed = [b for b in range(1, n) if ps.key[b] is not None]
    sane = rng.random() < 0.85

    def pick(pool: list[int]) -> int:
        if pool and sane:
            return rng.choice(pool)
        return rng.choice([0, n, *range(1, n)]) if n > 1 else rng.choice([0, n])

    pool = {
        "FreeBlocks": in_use,
        "UnpinBlocks": in_use,
        "CacheBlocks": [b for b in in_use if ps.key[b] is None],
        "Touch": list(ps.free) + in_use,
        "EvictBlocks": keyed,
        "CacheFullBlocks": in_use,
    }.get(name, list(range(1, n)))
    m = rng.randint(0, 2) if not sane else min(2, max(1, len(pool)))
    e = [pick(pool) for _ in range(m)]
    if name == "CacheFullBlocks" and rng.random() < 0.2 and e:
        e[rng.randrange(len(e))] = 0  # a null entry is skipped
    if name == "MoveBlockHashes":
        dsts = [b for b in in_use if ps.key[b] is None]
        e = [rng.choice(keyed) if keyed and sane else pick([]), pick(dsts)]
        m = 2
    e += [0] * (2 - len(e))
    base = ConcreteArgs(
        kind=kind,
        n=rng.randint(0, max(1, len(ps.free))) if sane else rng.choice([-1, 0, n]),
        m=m,
        e=tuple(e),
        ef=rng.random() < 0.4,
        w=rng.randrange(2),
        km=m,
        ks=tuple(rng.randint(1, mc.K) for _ in range(2)),
        qk=rng.randint(1, mc.K),
        ib=pick(in_use),
    )
    rl = rng.randint(0, mc.R) if not sane else mc.R
    nf = rng.randint(0, 2)
    nc = rng.randint(0, nf) if sane else rng.randint(0, 2)
    bs = rng.choice([1, 1, 2]) if sane else rng.choice([0, 1, 2])
    # blocks whose primary key covers fewer tokens than a full block of size 2 at position 2
    partial = [b for b in in_use if 0 < ps.tokens.get(b, 0) < 4]
    if name == "CacheFullBlocks" and sane and partial and rng.random() < 0.6:
        # a partial block at the last position of a longer prefix: a promotion
        nc, nf, bs = rng.choice([0, 0, 1]), 2, 2
        e[nf - 1] = rng.choice(partial)
        e[0] = rng.choice([0, *(b for b in in_use if b != e[1] and ps.key[b] is None)])
        m = max(m, nf)
        base = replace(base, m=m, km=m, e=tuple(e))
    pn = rng.choice([1, 1, 2, rl]) if sane and rl else rng.randint(0, mc.R + 1)
    if name == "CachePartialBlock" and sane and partial and rng.random() < 0.5:
        base = replace(base, ib=rng.choice(partial))
        pn = min(rl, ps.tokens[base.ib] + rng.randint(0, 2)) if rl else pn
    held = sorted({(k - 1) // mc.G + 1 for k in range(1, mc.K + 1) if kname(mc, k) in ps.index})
    qh = rng.choice(held) if held and rng.random() < 0.7 else rng.randint(1, mc.H)
    ml = nf - nc if sane or rng.random() < 0.5 else rng.randint(0, 2)
    return MC(
        base,
        rl=rl,
        rh=tuple(rng.randint(1, mc.H) for _ in range(mc.R)),
        nc=nc,
        nf=nf,
        bs=bs,
        g=rng.randrange(mc.G),
        mp=rng.random() < 0.3,
        ml=ml,
        mb=tuple(rng.random() < 0.6 for _ in range(2)),
        pn=pn,
        rep=rng.random() < 0.25,
        qh=qh,
        gm=rng.choice([0, 1, 2, 2, 2]) if mc.GM == 2 else rng.randint(0, mc.GM),
        gs=tuple(rng.sample(range(mc.G), mc.GM))
        if mc.G >= mc.GM
        else tuple(rng.randrange(mc.G) for _ in range(mc.GM)),
    )


RUN_WEIGHTS = {
    "GetNewBlocks": 3,
    "CachePartialBlock": 5,
    "CacheFullBlocks": 4,
    "MoveBlockHashes": 3,
    "CacheBlocks": 2,
    "ResetPrefixCache": 0.3,
    "GetCachedBlock": 0.3,
    "GetCachedBlockGroups": 0.3,
    "GetNumFreeBlocks": 0.3,
    "GetUsage": 0.3,
    "IsBlockWritable": 0.3,
}
"""How often a run's call is each kind (others 1): the ones that give blocks keys."""


def reachable(rng: random.Random, mc: MConfig, max_steps: int = 14) -> list[PoolState]:
    """States the spec reaches by a random run from the pool as built (most runs start by
    taking every block: keys are given only to blocks in use)."""
    ps = PoolState.initial(mc.n, rng.random() < 0.9, rng.random() < 0.75, hash_block_size=1)
    w = spec_world(ps)
    from kvpool.spec import GetNewBlocks

    if rng.random() < 0.6:
        w.apply(GetNewBlocks(mc.n - 1))
    out = [w.pools[0].copy()]
    weights = [RUN_WEIGHTS.get(o, 1) for o in MK_OPS]
    for _ in range(rng.randint(1, max_steps)):
        kind = rng.choices(range(len(MK_OPS)), weights)[0]
        w.apply(to_op(mc, random_call(rng, mc, w.pools[0], kind)))
        out.append(w.pools[0].copy())
    return out


DIFF_SIZES = (3,)
"""N=3: two blocks (a move needs a keyed one and a keyless one in use)."""
KEY_OPS = ("GetNewBlocks", "CacheBlocks", "EvictBlocks", "ResetPrefixCache", "GetCachedBlock")
"""The model's calls whose key handling this module restates."""
DIFF_SEED = 11


def differential(
    samples: int,
    bugs: frozenset[str] = frozenset(),
    seed: int = DIFF_SEED,
    stop_at_first: bool = False,
) -> tuple[int, list[str]]:
    """``samples`` (reachable state, call) pairs compared: (compared, mismatches)."""
    rng = random.Random(seed)
    steppers = {n: Stepper.build(n, bugs) for n in DIFF_SIZES}
    bad: list[str] = []
    done = 0
    while done < samples:
        st = steppers[rng.choice(DIFF_SIZES)]
        states = reachable(rng, st.mc)
        ps = states[rng.randrange(len(states))]
        # every kind that changes keys at each state, and three of the others
        keyed = [MKK[o] for o in (*NEW_OPS, *KEY_OPS)]
        rest = [i for i in range(len(MK_OPS)) if i not in keyed]
        for kind in rng.sample(keyed + rng.sample(rest, 3), len(keyed) + 3):
            if done >= samples:
                break
            miss = compare_step(st, ps, random_call(rng, st.mc, ps, kind))
            done += 1
            if miss is not None:
                bad.append(miss)
                if stop_at_first:
                    return done, bad
    return done, bad


# -- rows for the runner -----------------------------------------------------------------------


def bounds(n: int, H: int = 2, G: int = 2, R: int = 4) -> str:
    return (
        f"N={n}, every k, multi-key: keys K={H * G} ({H} hashes x {G} groups), "
        f"E<={H * G - 1} further entries per block, requests of <={R} hashes, lists<=2 "
        "watchers=2"
    )


def rows(ns: tuple[int, ...], timeout_ms: int = 120000) -> list[dict[str, Any]]:
    """At each N: init and step of every obligation (INV-WATCH by its lemma), and the
    witnesses (``runner.ObligationResult(**row)`` rows)."""
    out: list[dict[str, Any]] = []
    for n in ns:
        inits = {g.name: g for g in init_goals(n)}
        st = build(n)
        by: dict[str, list[Goal]] = {}
        for g in step_goals(st, timeout_ms=timeout_ms):
            by.setdefault(g.name, []).append(g)
        by["INV-WATCH"] = [lemma_goal(st)]
        # (one row per name by goal_row, not name_rows: the goals kept alive, and so the
        # main context's term ids the next N's obligations get, are the loop's as before)
        for name in (*STATE_OBLIGATIONS, *STEP_RULES):
            gs = ([inits[name]] if name in inits else []) + by.get(name, [])
            how = (
                "lemma from WATCH-PER-BLOCK"
                if name == "INV-WATCH"
                else f"{len(by.get(name, []))} cases"
            )
            out.append(
                goal_row(
                    f"{name} (multi-key)",
                    gs,
                    f"{bounds(n)} ({how})",
                    (ROW_OF.get(name, name),),
                    lambda g: f"{g.case} {g.op} ({g.status})",
                    most=3,
                    kind="fixed-N",
                    technique=TECHNIQUE,
                )
            )
        t1 = time.perf_counter()
        ws = witness_goals(st)
        problems = [
            f"{op}: {status} {why}".strip() for op, status, why in ws if status != "sat" or why
        ]
        out.append(
            dict(
                obligation=f"H satisfiable at N={n} (multi-key)",
                kind="witness",
                technique=TECHNIQUE,
                invariants=(),
                bounds=f"multi-key N={n}: {len(ws) - len(problems)}/{len(ws)} hypotheses (a call "
                "of each kind), decoded, the calls replayed on the spec",
                status="witnessed" if not problems else "NOT-witnessed",
                seconds=time.perf_counter() - t1,
                replay="; ".join(problems[:3]),
            )
        )
    return out


def mutant_rows(
    n: int = 3, k: int = 4, timeout_ms: int = 120000, which: tuple[str, ...] | None = None
) -> list[dict[str, Any]]:
    """Each of :data:`MUTANTS` (or of ``which``) refuted by BMC from the pool as built,
    replayed on the spec."""
    out = []
    for bug in MUTANTS if which is None else which:
        ref = bmc_refute(bug, n, k, timeout_ms)
        ok = ref.status == "refuted" and ref.replay.startswith("confirmed")
        out.append(
            dict(
                obligation=f"{ref.obligation} [{bug}]",
                kind="mutant",
                technique="z3 BMC",
                invariants=(ROW_OF.get(ref.obligation, ref.obligation),),
                bounds=f"multi-key N={n} k={k}",
                status="expected-refuted"
                if ok
                else (
                    "NOT-confirmed" if ref.status == "refuted" else f"NOT-refuted ({ref.status})"
                ),
                seconds=ref.seconds,
                trace=[repr(op) for op in ref.trace],
                replay=ref.replay,
            )
        )
    return out


def differential_rows(samples: int, mutants: bool = True) -> list[dict[str, Any]]:
    """The encoding against the spec on ``samples`` pairs, and (``mutants``) each mutant
    caught within as many."""
    t0 = time.perf_counter()
    done, bad = differential(samples)
    out = [
        dict(
            obligation="multi-key z3 transition == spec.World.apply",
            kind="differential",
            technique="differential",
            invariants=("INV-CACHE", "INV-EVENTS"),
            bounds=f"multi-key: {done} reachable states x calls, N in {DIFF_SIZES}",
            status="agree" if not bad else "disagree",
            seconds=time.perf_counter() - t0,
            trace=bad[:3],
        )
    ]
    for bug in (*MUTANTS, *DIFF_ONLY_MUTANTS) if mutants else ():

        def run(bug: str = bug) -> tuple[int, list[str]]:
            done, miss = differential(samples, frozenset([bug]), stop_at_first=True)
            return done, miss[:1]

        out.append(catch_row("multi-key", "multi-key", bug, run))
    return out


@dataclass(frozen=True)
class Plan:
    """What one profile runs of this module (``runner.PROFILES[...]["multikey"]``)."""

    ns: tuple[int, ...]
    """fixed-N induction (every obligation, every k) and witnesses at each of these N"""
    bmc: tuple[int, int]
    """(N, k): each mutant refuted by BMC within k calls on N blocks, replayed"""
    diff: int
    """pairs of the differential (reachable state x call)"""
    diff_mutants: bool
    """the differential run on each mutant too (it must catch every one)"""
    bmc_mutants: tuple[str, ...] | None = None
    """the mutants BMC refutes (None: every one of :data:`MUTANTS`)"""
    every_n: tuple[str, ...] = ()
    """INV-CACHE and INV-EVENTS for every N (:func:`every_n_rows`) when not empty, with
    these mutants' every-N steps refuted"""


def part_rows(plan: Plan | None, timeout_ms: int = 120000) -> list[dict[str, Any]]:
    """Every row of the multi-key part (``runner.ObligationResult(**row)``)."""
    if plan is None:
        return []
    out = rows(plan.ns, timeout_ms)
    out += mutant_rows(*plan.bmc, timeout_ms=timeout_ms, which=plan.bmc_mutants)
    if plan.diff:
        out += differential_rows(plan.diff, plan.diff_mutants)
    if plan.every_n:
        out += every_n_rows(plan.every_n, timeout_ms // 2)
    return out


# -- every N: the key invariants ----------------------------------------------------------------

EVERY_N_GOALS = ("INV-CACHE", "INV-EVENTS")
"""What is proved for every N with several keys: the two invariants the multi-key calls
restate (the rest of the obligations are fixed N only: see docs/06-z3.md)."""


def every_n_hypothesis(mc: MConfig, s: MState) -> list[z3.BoolRef]:
    """INV-CACHE and INV-EVENTS for several keys, INV-REF, and the null block holds
    nothing: the hypothesis of the every-N step (a symbolic N)."""
    d = mc.cfg.dom
    return [
        d.N >= 1,
        inv_cache(mc, s),
        props._events(mc.cfg, s.base),
        d.forall(0, d.N, lambda b: d.sel(s.base.ref, b) >= 0),
        d.sel(s.base.key, 0) == 0,
        d.sel(s.tok, 0) == 0,
        *[z3.Not(d.sel(x, 0)) for x in s.base.idx + s.ent],
    ]


def every_n_goals(
    bugs: frozenset[str] = frozenset(),
    ops: tuple[str, ...] = MK_OPS,
    timeout_ms: int = 60000,
    names: tuple[str, ...] = EVERY_N_GOALS,
    seed: int = 0,
) -> list[Goal]:
    """For every N: the pool as built satisfies :data:`EVERY_N_GOALS`, and a call of
    each kind in ``ops`` from a state satisfying :func:`every_n_hypothesis` keeps them
    (the whole transition, in the model's unbounded reading: z3 arrays, quantifiers);
    one case per kind, split into conjuncts."""
    out: list[Goal] = []
    with int_sort(None):
        cfg = Config(
            Unbounded(z3.Int("N")),
            K=4,
            W=2,
            M=2,
            caching=z3.Bool("caching"),
            events=z3.Bool("events"),
            bugs=bugs,
        )
        mc = MConfig(cfg)
        s0 = minitial(mc)
        for name, g in (
            ("INV-CACHE", inv_cache(mc, s0)),
            ("INV-EVENTS", props._events(cfg, s0.base)),
        ):
            status, dt, m = isolated_check([cfg.dom.N >= 1], g, timeout_ms)
            out.append(Goal(name, "init", status, dt, m, query=[cfg.dom.N >= 1, z3.Not(g)]))
        s = fresh_mstate(mc, "s")
        a = fresh_margs(mc, "a")
        t, _ = mtransition(mc, s, a)
        hyp = every_n_hypothesis(mc, s)
        dom_ = domain(mc, a)
        goals = {"INV-CACHE": inv_cache(mc, t), "INV-EVENTS": props._events(cfg, t.base)}
    for name, goal in goals.items():
        if name not in names:
            continue
        for op in ops:
            sub = (a.kind, iv(MKK[op]))
            base = [simplify(z3.substitute(dom_, sub)), a.kind == MKK[op], *hyp]
            parts = conjuncts(simplify(z3.substitute(goal, sub)))
            g = Goal(name, "step", "proved", 0.0, op=op)
            for part, (status, dt, m) in zip(
                parts, isolated_checks(base, parts, timeout_ms, seed), strict=False
            ):
                g.seconds += dt
                g.queries.append([*base, z3.Not(part)])
                if status != "proved":
                    g.status, g.model = status, m
            out.append(g)
    return out


EVERY_N_MUTANTS = (
    "mk-promote-keeps-index",
    "mk-move-leaves-source",
    "mk-move-announces",
    "mk-evict-primary-only",
)
"""The mutants whose every-N step is asked to be refuted (every one that breaks
INV-CACHE or INV-EVENTS)."""

MUTANT_OP = {
    "mk-promote-keeps-index": "CacheFullBlocks",
    "mk-move-leaves-source": "MoveBlockHashes",
    "mk-move-announces": "MoveBlockHashes",
    "mk-evict-primary-only": "EvictBlocks",
}
"""The call whose step each invariant-breaking mutant changes."""


def every_n_refutes(bug: str, timeout_ms: int = 3000, seeds: int = 5) -> tuple[str, float]:
    """The every-N step of ``bug``'s call, on its obligation: "refuted" at some z3 seed
    (each seed asked while the answer is unknown), else its last answer; and seconds.
    (Finding a counterexample to a quantified step is a model search: z3's seed and the
    context it runs in decide how soon it ends. Each retry doubles the timeout, up to
    ten times ``timeout_ms``: z3's timeout is wall-clock time, and on a loaded machine
    the first answer the quiet machine gets in a second can take longer than 3.)"""
    ob, op = MUTANTS[bug][0], MUTANT_OP[bug]
    last: list[Goal] = []  # the last rung's step, alive while the next rung's is built

    def ask(limit: int, seed: int) -> tuple[str, float]:
        (g,) = [
            g
            for g in every_n_goals(frozenset([bug]), (op,), limit, (ob,), seed)
            if g.case == "step"
        ]
        last[:] = [g]
        return g.status, g.seconds

    answers, seconds = ladder(
        ask, lambda status: status != "unknown", timeout_ms, seeds, cap_ms=10 * timeout_ms
    )
    return answers[-1], seconds


def every_n_witnesses(timeout_ms: int = 30000) -> list[tuple[str, str, str]]:
    """For each call kind: a model of the every-N step's hypothesis (a pool of 3 or 4
    blocks preferred, with some key held), decoded; the spec's checker must find no
    INV-CACHE or INV-EVENTS violation in it (what the hypothesis claims). (kind,
    "sat"/"unsat"/"unknown", what went wrong or "")."""
    from .model import hypothesis_model

    out = []
    with int_sort(None):
        cfg = Config(
            Unbounded(z3.Int("N")),
            K=4,
            W=2,
            M=2,
            caching=z3.Bool("caching"),
            events=z3.Bool("events"),
        )
        mc = MConfig(cfg)
        s = fresh_mstate(mc, "s")
        a = fresh_margs(mc, "a")
        hyp = every_n_hypothesis(mc, s)
        dom_ = domain(mc, a)
        N = cfg.dom.N
        some = z3.Or([z3.Select(x, b) for x in s.base.idx for b in (1, 2)])
        prefer = [[N >= 3, N <= 4, some], [N >= 1, N <= 4], []]
    for op in MK_OPS:
        sub = (a.kind, iv(MKK[op]))
        case = [simplify(z3.substitute(dom_, sub)), a.kind == MKK[op], *hyp]
        status, _, m = hypothesis_model(case, prefer, timeout_ms, seeds=2)
        if status != "sat" or m is None:
            out.append((op, status, "no model"))
            continue
        n = to_int(m.eval(N, model_completion=True))
        if not 1 <= n <= 64:
            out.append((op, status, f"a model with N={n}, not decoded"))
            continue
        caching, events = flags(m, mc)
        ps = decode(m, mc, s, caching, events, n)
        bad = [v for v in check_pool(ps) if v.invariant in EVERY_N_GOALS]
        out.append((op, status, f"decoded state breaks {bad[0]}" if bad else ""))
    return out


def every_n_rows(
    mutants: tuple[str, ...] = EVERY_N_MUTANTS, timeout_ms: int = 60000
) -> list[dict[str, Any]]:
    """INV-CACHE and INV-EVENTS for several keys, every N; each of ``mutants`` refuted
    by the same every-N step (:func:`every_n_refutes`); the hypothesis witnessed
    (``runner.ObligationResult(**row)`` rows)."""
    out: list[dict[str, Any]] = []
    gs = every_n_goals(timeout_ms=timeout_ms)
    for name in EVERY_N_GOALS:
        mine = [g for g in gs if g.name == name]
        bad = [g for g in mine if g.status != "proved"]
        out.append(
            dict(
                obligation=f"{name} (multi-key, every N)",
                kind="inductive",
                technique="z3 induction",
                invariants=(name,),
                bounds=f"every N, every k, multi-key: {EVERY_N_BOUNDS} "
                f"({len(mine) - 1} cases, hypothesis INV-CACHE, INV-EVENTS, INV-REF)",
                status="proved"
                if not bad
                else "refuted"
                if any(g.status == "refuted" for g in bad)
                else "unknown",
                seconds=sum(g.seconds for g in mine),
                replay="; ".join(f"{g.case} {g.op} ({g.status})" for g in bad[:3]),
            )
        )
    for bug in mutants:
        ob = MUTANTS[bug][0]
        status, seconds = every_n_refutes(bug)
        out.append(
            dict(
                obligation=f"{ob} [{bug}] (every N)",
                kind="mutant",
                technique="z3 induction",
                invariants=(ob,),
                bounds="multi-key, every N",
                status="expected-refuted" if status == "refuted" else f"NOT-refuted ({status})",
                seconds=seconds,
                replay=f"{MUTANT_OP[bug]} step {status} (a step counterexample, not decoded: "
                "BMC's of the same bug is replayed)",
            )
        )
    t0 = time.perf_counter()
    ws = every_n_witnesses()
    problems = [f"{op}: {st} {why}".strip() for op, st, why in ws if st != "sat" or why]
    out.append(
        dict(
            obligation="every-N hypothesis satisfiable (multi-key)",
            kind="witness",
            technique="z3 induction",
            invariants=(),
            bounds=f"multi-key every N: {len(ws) - len(problems)}/{len(ws)} hypotheses (a call "
            "of each kind), decoded, INV-CACHE and INV-EVENTS checked by the spec",
            status="witnessed" if not problems else "NOT-witnessed",
            seconds=time.perf_counter() - t0,
            replay="; ".join(problems[:3]),
        )
    )
    return out


EVERY_N_BOUNDS = "keys K=4 (2 hashes x 2 groups), E<=3 further entries, lists<=2"
