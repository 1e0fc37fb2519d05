"""The named invariants of the semantics, as predicates over a :class:`PoolState`.

Each predicate returns the list of its violations (empty when it holds), each
naming the invariant, the block (where there is one) and what is wrong, so that a
failure reads as a sentence: ``INV-FREE on block 3: ref_cnt 1 but in the free queue``.

INV-LIST is the implementation's own (the linked list) and lives in
:mod:`kvpool.impl`; everything here applies to the spec and, through the
abstraction function, to any concrete pool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .state import NULL_BLOCK, PoolState, World, shown


@dataclass(frozen=True)
class Violation:
    """One invariant broken: which, on which block of which pool, and why."""

    invariant: str
    detail: str
    block: int | None = None
    pool: int | None = None

    def __str__(self) -> str:
        where = ""
        if self.block is not None:
            where = (
                f" on block {self.block}"
                if self.pool is None
                else f" on block {self.pool}:{self.block}"
            )
        elif self.pool is not None:
            where = f" in pool {self.pool}"
        return f"{self.invariant}{where}: {self.detail}"


Predicate = Callable[[PoolState], list[Violation]]


def inv_ref(ps: PoolState) -> list[Violation]:
    """INV-REF: every block's ``ref_cnt >= 0``."""
    return [Violation("INV-REF", f"ref_cnt is {r}", b) for b, r in enumerate(ps.ref) if r < 0]


def inv_free(ps: PoolState) -> list[Violation]:
    """INV-FREE: the queue holds each non-null block with ``ref_cnt == 0`` once, nothing else."""
    out: list[Violation] = []
    for b in ps.free:
        if not 0 < b < ps.num_blocks:
            out.append(Violation("INV-FREE", "the free queue holds a non-block id", b))
        elif ps.ref[b] != 0:
            out.append(Violation("INV-FREE", f"ref_cnt {ps.ref[b]} but in the free queue", b))
    for b in range(1, ps.num_blocks):
        if ps.ref[b] == 0 and b not in ps.free:
            out.append(Violation("INV-FREE", "ref_cnt 0 but missing from the free queue", b))
    return out


def inv_null(ps: PoolState) -> list[Violation]:
    """INV-NULL: the null block is never free, cached or watched; its ``ref_cnt`` stays 0."""
    out: list[Violation] = []
    b = NULL_BLOCK
    if b in ps.free:
        out.append(Violation("INV-NULL", "the null block is in the free queue", b))
    if ps.ref[b] != 0:
        out.append(Violation("INV-NULL", f"the null block's ref_cnt changed to {ps.ref[b]}", b))
    if (
        ps.key[b] is not None
        or b in ps.entries
        or any(b in holders for holders in ps.index.values())
    ):
        out.append(Violation("INV-NULL", "the null block is cached", b))
    if b in ps.pending:
        out.append(Violation("INV-NULL", "the null block is watched", b))
    return out


def inv_watch(ps: PoolState) -> list[Violation]:
    """INV-WATCH: each registration is pending exactly once or has fired exactly once.

    As a state predicate: no block lists a watcher twice or keeps an empty list,
    and registrations == firings + pending watchers. (That a watcher fires only
    when its block is handed out or the cache is reset is a property of the
    transitions; the lockstep tests and the proofs check it.)
    """
    out: list[Violation] = []
    pending = 0
    for b, ws in ps.pending.items():
        if not 0 <= b < ps.num_blocks:
            out.append(Violation("INV-WATCH", "a watcher waits on a non-block id", b))
        if not ws:
            out.append(Violation("INV-WATCH", "an empty watcher list is kept", b))
        if len(set(ws)) != len(ws):
            out.append(Violation("INV-WATCH", f"a watcher is pending twice: {ws}", b))
        pending += len(ws)
    if ps.registered != ps.fired + pending:
        out.append(
            Violation(
                "INV-WATCH",
                f"{ps.registered} registrations but {ps.fired} fired + {pending} pending",
            )
        )
    return out


def same_key(a: object, b: object) -> bool:
    """Whether two keys are the same key: identity first (so a NaN is itself), then ``==``.

    A key whose ``__eq__`` raises or answers something that is not a bool is the same
    only as itself: a check never fails because of what a key does.
    """
    if a is b:
        return True
    try:
        return (a == b) is True
    except Exception:
        return False


def inv_cache(ps: PoolState) -> list[Violation]:
    """INV-CACHE: block in index under k <=> k is one of the keys the block holds.

    A block's keys are its primary key and its further entries: distinct, further
    entries only beside a primary key, a token count only for a primary key.
    Nothing is cached with caching off.
    """
    out: list[Violation] = []
    for b, k in enumerate(ps.key):
        extra = ps.entries.get(b, [])
        if k is None and (extra or b in ps.tokens):
            out.append(Violation("INV-CACHE", "further entries or a token count without a key", b))
            continue
        held = ps.keys_of(b)
        if any(same_key(x, y) for i, x in enumerate(held) for y in held[i + 1 :]):
            out.append(Violation("INV-CACHE", f"holds a key twice: {[shown(x) for x in held]}", b))
        for key in held:
            if b not in ps.index.get(key, ()):
                out.append(
                    Violation(
                        "INV-CACHE", f"holds key {shown(key)} but the index does not say so", b
                    )
                )
    for b in list(ps.entries) + list(ps.tokens):
        if not 0 <= b < ps.num_blocks:
            out.append(Violation("INV-CACHE", "keys recorded for a non-block id", b))
    for key, holders in ps.index.items():
        if not holders:
            out.append(Violation("INV-CACHE", f"key {shown(key)} is indexed with no block"))
        for b in holders:
            if not 0 <= b < ps.num_blocks or not any(same_key(x, key) for x in ps.keys_of(b)):
                out.append(
                    Violation("INV-CACHE", f"indexed under {shown(key)} but does not hold it", b)
                )
    if not ps.caching and (ps.index or any(k is not None for k in ps.key)):
        out.append(Violation("INV-CACHE", "caching is off but something is cached"))
    return out


def inv_events(ps: PoolState) -> list[Violation]:
    """INV-EVENTS: replaying every event ever logged gives exactly the indexed keys.

    The indexed keys are every key of every block, primary or further entry: a
    key is announced stored when some block first holds it and removed only when
    the last block holding it drops it (a move between blocks announces nothing).
    """
    if not ps.events_on:
        if ps.log or ps.view:
            return [Violation("INV-EVENTS", "events are off but something was logged")]
        return []
    keys = set(ps.index)
    if ps.view == keys:
        return []
    missing = sorted(map(shown, keys - ps.view))
    extra = sorted(map(shown, ps.view - keys))
    return [
        Violation(
            "INV-EVENTS",
            f"consumers believe the wrong keys: missing {missing}, stale {extra}",
        )
    ]


def inv_conserve(ps: PoolState) -> list[Violation]:
    """INV-CONSERVE: free + in use + the null block == N."""
    in_use = sum(1 for b in range(1, ps.num_blocks) if ps.ref[b] > 0)
    if len(ps.free) + in_use + 1 == ps.num_blocks:
        return []
    return [
        Violation(
            "INV-CONSERVE",
            f"{len(ps.free)} free + {in_use} in use + 1 null != {ps.num_blocks} blocks",
        )
    ]


INVARIANTS: dict[str, Predicate] = {
    "INV-REF": inv_ref,
    "INV-FREE": inv_free,
    "INV-NULL": inv_null,
    "INV-WATCH": inv_watch,
    "INV-CACHE": inv_cache,
    "INV-EVENTS": inv_events,
    "INV-CONSERVE": inv_conserve,
}
"""Every spec-level invariant by its name, in the order of the semantics page."""

INVARIANT_NAMES: tuple[str, ...] = (*INVARIANTS, "INV-LIST")
"""All invariant names, INV-LIST (implementation only) last."""


def check_pool(ps: PoolState, pool: int | None = None) -> list[Violation]:
    """Every violation of every spec invariant in one pool (empty when all hold)."""
    out: list[Violation] = []
    for predicate in INVARIANTS.values():
        for v in predicate(ps):
            out.append(v if pool is None else Violation(v.invariant, v.detail, v.block, pool))
    return out


def check_world(world: World) -> list[Violation]:
    """Every violation in every live pool of ``world``."""
    out: list[Violation] = []
    for i, ps in enumerate(world.pools):
        if world.alive[i]:
            out.extend(check_pool(ps, i))
    return out
