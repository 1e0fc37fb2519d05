"""Minimal exposing traces for seeded bugs, found breadth first and drawn step by step.

A *subject* is anything that applies spec operations and (optionally) shows its
state as a spec :class:`PoolState`: a buggy copy of the spec, or a concrete pool
driven through the :class:`~kvpool.oracle.driver.Driver`. :func:`shortest_trace`
tries every trace over a small alphabet of calls, shortest first, and returns
the first one at whose last step the subject parts from the spec: a different
outcome, a different state, or a broken invariant. Traces are short because the
search is exhaustive to its depth, not because a shrinker got lucky.

The bug zoo page of the docs is generated from this (``docs/_gen/make_zoo.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from kvpool.impl.bridge import abstract, check_invariants
from kvpool.spec.invariants import check_pool
from kvpool.spec.ops import (
    CacheBlocks,
    EvictBlocks,
    FreeBlocks,
    GetCachedBlock,
    GetNewBlocks,
    GetNumFreeBlocks,
    GetUsage,
    IsBlockWritable,
    Op,
    Outcome,
    ResetPrefixCache,
    Touch,
    UnpinBlocks,
)
from kvpool.spec.state import PoolState, World

from .driver import Driver, PoolFactory
from .render import text_in_use, text_queue

Config = tuple[int, bool, bool]
"""``(num_blocks, enable_caching, enable_kv_cache_events)``."""


class Subject(Protocol):
    """What :func:`run_trace` needs of the thing under test."""

    def apply(self, op: Op) -> Outcome: ...

    def state(self) -> PoolState | None: ...


class SpecSubject:
    """A (possibly buggy) spec :class:`World`, pool 0."""

    def __init__(self, world: World) -> None:
        self.world = world

    def apply(self, op: Op) -> Outcome:
        return self.world.apply(op)

    def state(self) -> PoolState | None:
        return self.world.pools[0]


class PoolSubject:
    """A concrete pool with vLLM's API, through the Driver.

    Its state is read with :func:`kvpool.impl.abstract` when it has kvpool's
    internals; otherwise only outcomes are compared.
    """

    def __init__(self, factory: PoolFactory, config: Config) -> None:
        self.driver = Driver(factory, [config])

    def apply(self, op: Op) -> Outcome:
        return self.driver.execute(op)

    def _readable(self) -> bool:
        pool = self.driver.pool(0)
        return all(hasattr(pool, a) for a in ("free_block_queue", "_index", "_watchers"))

    def state(self) -> PoolState | None:
        if not self._readable():
            return None
        try:
            return abstract(self.driver.pool(0))
        except (AttributeError, TypeError):
            return None

    def violations(self) -> list[str]:
        """Every INV-* on the pool, INV-LIST included (kvpool-like pools only)."""
        if not self._readable():
            return []
        try:
            return [str(v) for v in check_invariants(self.driver.pool(0))]
        except (AttributeError, TypeError):
            return []


def alphabet(num_blocks: int) -> list[Op]:
    """The calls the search tries at every step: every kind, on every block."""
    blocks = range(1, num_blocks)
    ops: list[Op] = [GetNewBlocks(1), GetNewBlocks(2)]
    for b in blocks:
        ops += [FreeBlocks((b,)), FreeBlocks((b,), evict_first=True), Touch((b,))]
        ops += [UnpinBlocks((b,), 1), UnpinBlocks((b,), 2), CacheBlocks((b,), ("a",))]
        ops += [EvictBlocks((b,))]
    ops += [FreeBlocks((a, b)) for a in blocks for b in blocks if a != b]
    ops += [FreeBlocks((b, b)) for b in blocks]
    ops += [IsBlockWritable(b) for b in blocks]
    ops += [Touch((0,)), UnpinBlocks((0,), 1), GetCachedBlock("a"), ResetPrefixCache()]
    ops += [GetNumFreeBlocks(), GetUsage(), GetNewBlocks(num_blocks - 1)]
    # Ill-formed calls: each must be refused, with its kind, changing nothing.
    # (No block list mixing a non-block with a block: which of two faults a call reports
    # first is not fixed by the semantics, and the spec and kvpool.impl differ on it.)
    ops += [GetNewBlocks(True), EvictBlocks((-1,)), EvictBlocks((1, num_blocks))]
    return ops


@dataclass
class StepView:
    """One step of a trace on both sides, and what was wrong after it."""

    op: Op
    expected: Outcome
    observed: Outcome
    spec_state: PoolState
    subject_state: PoolState | None
    problems: list[str]


def _observable(o: Outcome) -> tuple[object, ...]:
    return (o.value, o.error, o.fired)


def run_trace(make: Callable[[], Subject], trace: Iterable[Op], config: Config) -> list[StepView]:
    """Run ``trace`` on a fresh spec and a fresh subject; what each step showed."""
    spec = World.single(*config)
    subject = make()
    views = []
    for op in trace:
        expected, observed = spec.apply(op), subject.apply(op)
        st = subject.state()
        problems = []
        if _observable(expected) != _observable(observed):
            problems.append("the outcome differs")
        if st is not None:
            st = st.copy()
            if st.snapshot() != spec.pools[0].snapshot():
                problems.append("the state differs")
            own = getattr(subject, "violations", None)
            problems += own() if own is not None else [str(v) for v in check_pool(st)]
        views.append(StepView(op, expected, observed, spec.pools[0].copy(), st, problems))
    return views


def shortest_trace(
    make: Callable[[], Subject],
    config: Config = (4, True, True),
    depth: int = 5,
    budget: int = 20_000,
) -> list[StepView] | None:
    """The shortest trace over :func:`alphabet` whose last step exposes the subject, or None.

    Gives up (None) after ``budget`` traces have been run.
    """
    ops = alphabet(config[0])
    frontier: list[tuple[Op, ...]] = [()]
    seen: set[Any] = set()
    runs = 0
    for _ in range(depth):
        nxt = []
        for trace in frontier:
            for op in ops:
                runs += 1
                if runs > budget:
                    return None
                views = run_trace(make, (*trace, op), config)
                last = views[-1]
                if last.problems:
                    return views
                sub = last.subject_state
                key = (last.spec_state.snapshot(), None if sub is None else sub.snapshot())
                if key not in seen:
                    seen.add(key)
                    nxt.append((*trace, op))
        frontier = nxt
    return None


def describe_outcome(o: Outcome) -> str:
    if o.error is not None:
        return f"refused: {o.error.value}"
    text = repr(o.value)
    if o.fired:
        text += "; fired " + ", ".join(f"w{f.watcher} for block {f.block}" for f in o.fired)
    return text


def draw_trace(views: list[StepView]) -> str:
    """The trace step by step: the call, what each side returned, both pools, what broke."""
    from .play import describe_op

    lines = []
    for i, v in enumerate(views, 1):
        lines.append(f"{i}. {describe_op(v.op)}")
        lines.append(f"   spec returns   {describe_outcome(v.expected)}")
        lines.append(f"   bug returns    {describe_outcome(v.observed)}")
        lines.append(f"   spec:  {text_queue(v.spec_state)}   in use: {text_in_use(v.spec_state)}")
        if v.subject_state is not None:
            s = v.subject_state
            lines.append(f"   bug:   {text_queue(s)}   in use: {text_in_use(s)}")
        for p in v.problems:
            lines.append(f"   !! {p}")
    return "\n".join(lines)


def op_source(op: Op) -> str:
    """Python source that builds ``op`` (pool 0, block ids as ints)."""

    def ids(entries: Iterable[object]) -> str:
        items = [repr(getattr(e, "block", e)) for e in entries]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"

    if isinstance(op, GetNewBlocks):
        return f"GetNewBlocks({op.n!r})"
    if isinstance(op, FreeBlocks):
        extra = f", evict_first={op.evict_first!r}" if op.evict_first is not False else ""
        return f"FreeBlocks({ids(op.blocks)}{extra})"
    if isinstance(op, Touch):
        return f"Touch({ids(op.blocks)})"
    if isinstance(op, UnpinBlocks):
        return f"UnpinBlocks({ids(op.blocks)}, {op.watcher!r})"
    if isinstance(op, CacheBlocks):
        keys = "(" + ", ".join(map(repr, op.keys)) + ("," if len(op.keys) == 1 else "") + ")"
        return f"CacheBlocks({ids(op.blocks)}, {keys})"
    if isinstance(op, GetCachedBlock):
        return f"GetCachedBlock({op.key!r})"
    if isinstance(op, EvictBlocks):
        return f"EvictBlocks({ids(op.block_ids)})"
    if isinstance(op, IsBlockWritable):
        return f"IsBlockWritable({getattr(op.block, 'block', op.block)!r})"
    return f"{type(op).__name__}()"


def draw_spec_trace(config: Config, ops: Iterable[Op]) -> str:
    """A trace on the spec alone, step by step: the call, its outcome, the pool after it."""
    from .play import describe_op

    world = World.single(*config)
    lines = []
    for i, op in enumerate(ops, 1):
        outcome = world.apply(op)
        ps = world.pools[0]
        lines.append(f"{i}. {describe_op(op)}  ->  {describe_outcome(outcome)}")
        lines.append(f"   spec:  {text_queue(ps)}   in use: {text_in_use(ps)}")
    return "\n".join(lines)
