"""The lockstep state machine: the spec and a target pool, side by side, under Hypothesis.

:func:`build_machine` returns a :class:`hypothesis.stateful.RuleBasedStateMachine`
class. Each run builds one to ``max_pools`` pools (sizes, caching and events drawn
or fixed by :class:`LockstepConfig`) in a spec :class:`~kvpool.spec.World` and,
through a :class:`~kvpool.oracle.driver.Driver`, in the target. Every rule makes
one call (or a short realistic sequence of calls, each checked on its own): the
spec applies it, the driver runs it on the target, and the two
:class:`~kvpool.spec.ops.Outcome` are compared. Operations that watchers run from
inside the target (``driver.nested``) are applied to the spec after the outer
operation, in the order they started, and compared the same way.

Interface (for the oracle, the catalogue test and anyone pointing the machine at a
new pool)::

    Machine = build_machine(factory, LockstepConfig(...))
    try:
        hypothesis.stateful.run_state_machine_as_test(Machine, settings=...)
    except LockstepFailure as failure:      # an AssertionError
        failure.rule                         # "INV-FREE", "result differs: ids", ...
        Machine.last_trace                   # the trace of the final (shrunk) failing run
        print(format_trace(Machine.last_trace))

* ``factory(num_blocks, enable_caching, enable_kv_cache_events) -> pool`` builds a
  target pool with vLLM's ``BlockPool`` API (see :data:`~kvpool.oracle.driver.PoolFactory`).
* Every failure is a :class:`LockstepFailure` whose message starts with the name of
  what broke: an invariant (``INV-REF`` ... ``INV-LIST``), or one of the comparison
  rules ``error kind differs``, ``result differs: ids`` (get_new_blocks),
  ``result differs: events`` (take_events), ``result differs: value`` (any other
  return value), ``fired differs`` (which watchers fired, on which blocks, in which
  order), ``state differs`` (whole abstract state, field named), ``ERR-ATOMIC``
  (a refused call changed the state), ``unraisable differs`` (a raising watcher
  was not reported through ``sys.unraisablehook`` exactly once per firing) and
  ``target crashed`` (the target raised something that is no pool error). The
  trace follows in the message.
* ``Machine.last_trace`` is a class attribute that every instance replaces with its
  own :class:`Trace` as it starts, so after ``run_state_machine_as_test`` raises it
  holds the final run Hypothesis made: the shrunk failing example.
* Levels: ``exact`` generates valid calls only and compares everything; ``robust``
  adds invalid calls of every error kind (each must be refused with its kind and
  leave spec and target states unchanged) and faulty watchers (raising ones, and
  re-entrant ones that allocate, free, touch, reset or probe the pool from inside
  a callback); ``safety`` compares only error kinds and checks the target's own
  invariants (returned ids, order, watchers and state are not compared; the
  simulated requests still name blocks by the spec's ids, so a target that hands
  out other ids needs the refinement the conformance oracle adds).
* ``state_check(driver, i)`` reads target pool ``i`` as a spec ``PoolState``; with
  it the machine compares the whole state every ``check_every`` steps (after every
  refused call, and at teardown) and checks every INV-* on the target.
  ``target_invariants(driver, i)`` returns the target's own extra violations (for
  kvpool.impl: INV-LIST and the free counter, as ``kvpool.impl.check_invariants``
  adds INV-LIST and the free counter) beyond the spec invariants, which the machine
  runs on ``state_check``'s abstraction itself. :func:`impl_config` fills both for
  kvpool.impl and pools derived from it.
* ``capabilities``: names of the op classes the target supports (``"FreeBlocks"``,
  ``"UnpinBlocks"``, ...); rules that need another op are never chosen.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal, TypeVar, cast

import hypothesis.strategies as st
from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    precondition,
    rule,
)

from kvpool.impl.bridge import abstract, inv_list, walk_free_queue
from kvpool.spec.invariants import INVARIANT_NAMES, INVARIANTS, Violation, check_pool
from kvpool.spec.keys import split_key
from kvpool.spec.ops import (
    ALL_OP_CLASSES,
    BlockRef,
    CacheBlocks,
    CacheFullBlocks,
    CachePartialBlock,
    DropPool,
    EmitCachedBlockEvents,
    EvictBlocks,
    FreeBlocks,
    GetCachedBlock,
    GetCachedBlockGroups,
    GetNewBlocks,
    GetNumFreeBlocks,
    GetUsage,
    IsBlockWritable,
    Lora,
    MMFeature,
    MoveBlockHashes,
    Op,
    Outcome,
    Request,
    ResetPrefixCache,
    TakeEvents,
    Touch,
    UnpinBlocks,
)
from kvpool.spec.state import NULL_BLOCK, PoolState, World

from .driver import Driver, PoolFactory, WatcherAction
from .exits import TargetCrashed, TargetHung
from .steering import FRESH_SHARE, Shape, Steering
from .traceformat import result_rule

ALL_OPS: frozenset[str] = frozenset(cls.__name__ for cls in ALL_OP_CLASSES)
"""Every op class name of the semantics (vLLM's multi-key calls included): the default
``capabilities``."""

MULTIKEY_OPS: tuple[str, ...] = (
    "CacheFullBlocks",
    "CachePartialBlock",
    "MoveBlockHashes",
    "GetCachedBlockGroups",
    "EmitCachedBlockEvents",
)
"""vLLM 0.33.0's calls on blocks with several keys: rule ``multikey`` makes them (any one
the target has), ``multikey_refused`` their refusals."""
CACHING_CALLS = ("CacheFullBlocks", "CachePartialBlock")

Level = Literal["safety", "exact", "robust"]


class LockstepFailure(AssertionError):
    """The target parted from the spec. ``rule`` names what broke; the message has the trace.

    ``traceback``: the target's own, when the rule is ``target crashed``.
    """

    def __init__(self, rule: str, message: str, traceback: str = "") -> None:
        super().__init__(message)
        self.rule = rule
        self.traceback = traceback


COMPARISON_RULES: tuple[str, ...] = (
    "error kind differs",
    "result differs: ids",
    "result differs: value",
    "result differs: events",
    "fired differs",
    "unraisable differs",
    "ERR-ATOMIC",
    "state differs",
)
"""The rules the machine checks by comparing the target with the spec (the INV-* it checks
on the target's own state are :data:`~kvpool.spec.invariants.INVARIANT_NAMES`)."""


_F = TypeVar("_F", bound=Callable[..., Any])
_T = TypeVar("_T")


def checks(*rules: str) -> Callable[[_F], _F]:
    """Mark a ``target_invariants`` function with the INV-* it checks, so that a run can
    count them (``Machine.rule_checks``); an unmarked one is counted as checking none."""

    def mark(fn: _F) -> _F:
        fn.kvpool_rules = rules  # type: ignore[attr-defined]
        return fn

    return mark


Problem = tuple[str, str]
"""A rule and its detail: what the search reports, and what ``replay`` reports the same."""


def compare_outcomes(
    op: Op, expected: Outcome, observed: Outcome, level: str, where: str = ""
) -> Problem | None:
    """The first difference between the spec's and the target's outcome of ``op``.

    The one comparison of the search (:meth:`_Lockstep.compare`) and of ``replay``:
    error kind, then (above ``safety``) the value, then the watchers fired.
    """
    if expected.error != observed.error:
        exp = expected.error.value if expected.error else "success"
        obs = observed.error.value if observed.error else "success"
        return "error kind differs", f"{op!r}{where}: spec {exp}, target {obs}"
    if level == "safety":
        return None
    if expected.value != observed.value:
        return (
            result_rule(op),
            f"{op!r}{where}: spec {expected.value!r}, target {observed.value!r}",
        )
    if expected.fired != observed.fired:
        return "fired differs", f"{op!r}{where}: spec {expected.fired}, target {observed.fired}"
    return None


def state_problem(
    i: int,
    expected: PoolState,
    observed: PoolState | None,
    violations: list[Violation],
    level: str,
    refused: Op | None,
) -> Problem | None:
    """What is wrong with target pool ``i``'s state after a call, if anything.

    The one order of the search (:meth:`_Lockstep.check_state`) and of ``replay``, so both
    name one rule: a refused call that changed the state is ``ERR-ATOMIC`` (the cause),
    then the target's first broken invariant (the more telling name), and only then
    ``state differs``. ``violations``: the target's invariant findings on this state;
    ``observed`` None: a target without a state reader, judged by them alone.
    """
    diff = (
        None
        if observed is None or level == "safety" or expected.snapshot() == observed.snapshot()
        else state_diff(expected, observed)
    )
    if diff is not None and refused is not None:
        return "ERR-ATOMIC", f"refusing {refused!r} changed target pool {i}: {diff}"
    if violations:
        return violations[0].invariant, f"target pool {i}: {violations[0]}"
    if diff is not None:
        return "state differs", f"pool {i}: {diff}"
    return None


@dataclass(frozen=True)
class LockstepConfig:
    """What the machine generates and what it compares (see the module docstring)."""

    level: Level = "robust"
    min_blocks: int = 1
    max_blocks: int = 64
    caching: bool | None = None
    """None: drawn per pool; True/False: fixed."""
    events: bool | None = None
    """None: drawn per pool; True/False: fixed."""
    max_pools: int = 3
    """Several pools allow cross-pool frees and DropPool; 1 disables both."""
    capabilities: frozenset[str] = ALL_OPS
    state_check: Callable[[Driver, int], PoolState] | None = None
    check_every: int = 1
    target_invariants: Callable[[Driver, int], list[Violation]] | None = None
    faults: bool = True
    """At ``robust``: raising and re-entrant watchers."""
    rules: frozenset[str] | None = None
    """Only these rules (method names, e.g. ``"free_request"``) and invalid-call kinds
    (e.g. ``"over_free"``); None: all. For a search focused on one kind of bug."""

    def __post_init__(self) -> None:
        if self.level not in ("safety", "exact", "robust"):
            raise ValueError(f"level must be safety, exact or robust, got {self.level!r}")
        if not 1 <= self.min_blocks <= self.max_blocks:
            raise ValueError("need 1 <= min_blocks <= max_blocks")
        if self.max_pools < 1 or self.check_every < 1:
            raise ValueError("max_pools and check_every must be >= 1")


def impl_state(driver: Driver, index: int) -> PoolState:
    """``state_check`` for kvpool.impl (and any pool with its internals)."""
    return abstract(driver.pool(index))


@checks("INV-LIST", "INV-FREE")
def impl_invariants(driver: Driver, index: int) -> list[Violation]:
    """``target_invariants`` for kvpool.impl: INV-LIST and the free counter.

    (What :func:`kvpool.impl.check_invariants` adds to the spec invariants, which the
    machine already runs on the ``state_check`` abstraction; computing that once
    per step instead of twice keeps the machine fast.)
    """
    pool = driver.pool(index)
    out = inv_list(pool)
    queue = pool.free_block_queue
    walked, _ = walk_free_queue(queue, len(pool.blocks))
    if len(walked) != queue.num_free_blocks:
        out.append(
            Violation(
                "INV-FREE",
                f"the free count is {queue.num_free_blocks} but the queue holds {len(walked)}",
            )
        )
    return out


def impl_config(**changes: Any) -> LockstepConfig:
    """A config for kvpool.impl or a pool built like it (the catalogue's mutants)."""
    base = LockstepConfig(state_check=impl_state, target_invariants=impl_invariants)
    return replace(base, **changes)


def crash_detail(op: Op, expected: Outcome, exc: Exception) -> str:
    """What a ``target crashed`` on ``op`` says: the call, and, when the spec refuses the
    call, the kind it refuses it with (so that the finding is "bad input of this kind
    crashes the target", whichever exception a particular bad value happened to raise)."""
    refused = f" {REFUSED_NOTE}{expected.error.value})" if expected.error else ""
    return f"{op!r}{refused}: {exc}"


REFUSED_NOTE = "(the spec refuses it: "
"""The marker :func:`crash_detail` puts after the call when the spec refuses it."""


# -- the trace -----------------------------------------------------------------------


@dataclass(frozen=True)
class TraceStep:
    """One call: what the spec did, what the target did, and what watchers ran inside it."""

    op: Op | None
    """None for a note (a watcher being scripted), which is no call."""
    spec: Outcome
    target: Outcome | None
    """None when the target crashed."""
    nested: tuple[tuple[Op, Outcome, Outcome], ...] = ()
    """(op, spec outcome, target outcome) for each call a watcher made, in start order."""
    note: str = ""


@dataclass
class Trace:
    """A run: the pools built, then the steps."""

    pools: list[tuple[int, bool, bool]] = field(default_factory=list)
    """(num_blocks, enable_caching, enable_kv_cache_events) per pool."""
    steps: list[TraceStep] = field(default_factory=list)
    arms: list[str] = field(default_factory=list)
    """Watcher scripts set during the run (also shown in place among the steps)."""

    def ops(self) -> list[Op]:
        """The outer calls, in order (nested calls are made by watchers, not the caller)."""
        return [s.op for s in self.steps if s.op is not None]


def format_outcome(out: Outcome | None) -> str:
    """An outcome in a few characters: ``ok``, a value, ``! ErrorKind``, the watchers fired."""
    if out is None:
        return "crashed"
    if out.error is not None:
        return f"! {out.error.value}"
    text = "ok" if out.value is None else repr(out.value)
    if out.fired:
        text += " fired " + " ".join(f"w{f.watcher}@{f.pool}:{f.block}" for f in out.fired)
    return text


def format_trace(trace: Trace | None) -> str:
    """The trace as numbered lines a person can read."""
    if trace is None:
        return "(no run)"
    lines = [
        "pools: "
        + ", ".join(f"{i}: N={n} caching={c} events={e}" for i, (n, c, e) in enumerate(trace.pools))
    ]
    for i, s in enumerate(trace.steps, 1):
        if s.note:
            lines.append(f"{i:3d}. {s.note}")
            continue
        same = s.target is not None and s.spec == s.target
        tgt = "same" if same else format_outcome(s.target)
        lines.append(f"{i:3d}. {s.op!r} -> spec {format_outcome(s.spec)} | target {tgt}")
        for nop, nexp, nobs in s.nested:
            ntgt = "same" if nexp == nobs else format_outcome(nobs)
            lines.append(
                f"       watcher ran {nop!r} -> spec {format_outcome(nexp)} | target {ntgt}"
            )
    return "\n".join(lines)


_SNAPSHOT_FIELDS = (
    "num_blocks",
    "caching",
    "events_on",
    "ref_cnt",
    "keys",
    "free queue",
    "cache index",
    "pending watchers",
    "event log",
    "consumer view",
    "watchers registered",
    "watchers fired",
    "primary key token counts",
    "further keys",
    "hash block size",
    "lookahead tokens",
    "medium",
)


def common_start(a: Sequence[object], b: Sequence[object]) -> int:
    """How many entries two sequences share from their start."""
    n = min(len(a), len(b))
    return next((k for k in range(n) if a[k] != b[k]), n)


def state_diff(expected: PoolState, observed: PoolState) -> str:
    """The first fields in which two states differ, named, spec value then target value.

    The event log is shown from its first difference on (the equal entries before it
    left out), so that the detail names the difference, not the history before it:
    a call that logged something earlier (a reset's ``AllBlocksCleared``) is not part
    of the finding, and deleting it keeps the detail (:mod:`.minimize`).
    """
    a, b = expected.snapshot(), observed.snapshot()
    parts = []
    for name, x, y in zip(_SNAPSHOT_FIELDS, a, b, strict=True):
        if x == y:
            continue
        if name == "event log" and isinstance(x, tuple) and isinstance(y, tuple):
            same = common_start(x, y)
            if same:
                parts.append(
                    f"{name} (from the first difference): spec {x[same:]!r} target {y[same:]!r}"
                )
                continue
        parts.append(f"{name}: spec {x!r} target {y!r}")
    return "; ".join(parts[:3])


# -- strategies -------------------------------------------------------------------------

TOKENS = "abcd"
"""Prefix keys are strings of these: the key of block i of a request is its first i+1 tokens."""

watcher_ids = st.integers(0, 5)
token_lists = st.lists(st.sampled_from(TOKENS), min_size=1, max_size=5).map("".join)


def prefix_keys(tokens: str) -> list[str]:
    """``"abc" -> ["a", "ab", "abc"]``: a request's chain of block keys (shared prefixes share)."""
    return [tokens[: i + 1] for i in range(len(tokens))]


HASH_UNIT = 16
"""Tokens per request hash: the machine's pools keep the default ``hash_block_size``."""
BLOCK_SIZES = (16, 32)
"""Block sizes of vLLM's multi-key calls: one and two hash units."""
GROUPS = st.sampled_from((0, 1))
FLAVOURS: tuple[dict[str, Any], ...] = (
    {},
    {"lora": Lora(7, "adapter", "/lora/adapter")},
    {"mm": (MMFeature("img", 20, 8), MMFeature("aud", 40, 30)), "cache_salt": "salt"},
    {"session_id": "s1"},
)
"""What a request carries beside its tokens (each shapes vLLM's event fields)."""


def make_request(tokens: str, flavour: int) -> Request:
    """A request of one hash per token letter: hash i covers the first i+1 letters (so shared
    prefixes share hashes), ``HASH_UNIT`` token ids per letter. Hashes start with ``h``, the
    flavour and ``:`` (a flavour changes every hash, as vLLM's extra keys do)."""
    hashes = tuple(b"h%d:" % flavour + tokens[: i + 1].encode() for i in range(len(tokens)))
    ids = tuple(ord(c) * 100 + j for c in tokens for j in range(HASH_UNIT))
    return Request(hashes, ids, **FLAVOURS[flavour])


def request_tokens(block_hash: object) -> tuple[int, str] | None:
    """(flavour, tokens) of a hash :func:`make_request` made, else None."""
    if type(block_hash) is not bytes or block_hash[:1] != b"h" or block_hash[3:4] != b":":
        return None
    if not block_hash[1:2].isdigit() or int(block_hash[1:2]) >= len(FLAVOURS):
        return None
    return int(block_hash[1:2]), block_hash[4:].decode("ascii", "replace")


BAD_COUNTS: tuple[object, ...] = (-1, -3, True, False, 1.5, "2", None)
NOT_BLOCKS: tuple[object, ...] = ("x", 3.5, None, (1,))
BAD_WATCHERS: tuple[object, ...] = ("w", None, 2.0)
BAD_KEYS: tuple[object, ...] = (None, ["unhashable"], {"a": 1})
BAD_FLAG_NAMES = ("1", "0", "'yes'", "None")
NOT_BLOCK_NAMES = (*map(repr, NOT_BLOCKS), "past the end")


def _needs(
    *ops: str, level: tuple[Level, ...] = ("safety", "exact", "robust")
) -> Callable[[_F], _F]:
    """A precondition: the target supports ``ops``, the level is one of ``level``, and the
    config's ``rules`` (when set) name this rule."""

    def decorate(fn: _F) -> _F:
        name = fn.__name__

        def check(self: _Lockstep) -> bool:
            cfg = self.config
            return (
                cfg.level in level
                and all(o in cfg.capabilities for o in ops)
                and (cfg.rules is None or name in cfg.rules)
            )

        return precondition(check)(fn)

    return decorate


def _needs_any(*ops: str) -> Callable[[_F], _F]:
    """A precondition: the target supports at least one of ``ops`` (the rule makes only
    those it supports), and the config's ``rules`` (when set) name this rule."""

    def decorate(fn: _F) -> _F:
        name = fn.__name__

        def check(self: _Lockstep) -> bool:
            cfg = self.config
            return any(o in cfg.capabilities for o in ops) and (
                cfg.rules is None or name in cfg.rules
            )

        return precondition(check)(fn)

    return decorate


ROBUST: tuple[Level, ...] = ("robust",)


class _Lockstep(RuleBasedStateMachine):
    """The rules; :func:`build_machine` binds a factory and a config to a subclass."""

    factory: ClassVar[PoolFactory]
    config: ClassVar[LockstepConfig]
    last_trace: ClassVar[Trace | None] = None
    rule_checks: ClassVar[Counter[str]] = Counter()
    """How many times each rule was checked, by every instance of this class (a new
    counter per :func:`build_machine`): INV-* on a target state read, and each comparison."""
    steering: ClassVar[Steering | None] = None
    """An ``--all`` search's steering of invalid calls (:mod:`.steering`); None: none."""
    searching_past: ClassVar[bool] = False
    """The search goes past accepted differences (``--all`` after a finding, ``--allow``):
    :meth:`multikey` then builds blocks with several further entries more often
    (:meth:`steer_further`). False: the draws of a plain search."""

    requests = Bundle("requests")

    def __init__(self) -> None:
        super().__init__()
        self.trace = Trace()
        type(self).last_trace = self.trace
        self.world = World([], [])
        self.driver: Driver | None = None
        self.held: dict[int, list[BlockRef]] = {}
        self.orphans: list[BlockRef] = []
        self.next_rid = 0
        self.steps = 0
        self.since_check = 0
        self.fresh = False
        self.target_violations: dict[int, list[Violation]] = {}
        self.spec_violations: dict[int, list[Violation]] = {}
        self.target_states: dict[int, PoolState] = {}
        self.raising: set[int] = set()
        self.action_pools: dict[int, int] = {}
        self.shape: Shape = ()
        """The shape of the invalid call being made (:mod:`.steering`); () for a valid call."""

    # -- plumbing -------------------------------------------------------------------

    def fail(self, rule: str, detail: str, traceback: str = "") -> None:
        trace = format_trace(self.trace)
        raise LockstepFailure(rule, f"{rule}: {detail}\n--- trace ---\n{trace}", traceback)

    def alive(self) -> list[int]:
        return [i for i, a in enumerate(self.world.alive) if a]

    def ps(self, pool: int) -> PoolState:
        return self.world.pools[pool]

    def tokens(self, p: int, data: st.DataObject) -> str:
        """A prefix: fresh tokens, or (half the time) a key pool ``p`` already holds.

        Reusing held keys is what makes shared keys (several blocks under one key)
        and prefix hits common.
        """
        held = sorted(k for k in self.ps(p).index if isinstance(k, str))
        if held and bool(data.draw(st.booleans(), label="reuse a cached key")):
            key: str = data.draw(st.sampled_from(held), label="cached key")
            return key
        fresh: str = data.draw(token_lists, label="tokens")
        return fresh

    def new_request(self, entries: list[BlockRef]) -> int:
        rid = self.next_rid
        self.next_rid += 1
        self.held[rid] = entries
        return rid

    def steer(
        self,
        data: st.DataObject,
        label: str,
        options: Sequence[_T],
        names: Sequence[str] | None = None,
    ) -> _T:
        """``data.draw(st.sampled_from(options))`` for a choice that shapes an invalid call,
        steered to options whose shape has not yet shown an accepted difference
        (:mod:`.steering`). ``names``: each option's name in the shape (default ``str``).
        With no steering, or nothing to steer by here, the draw is the plain one."""
        named = [str(o) for o in options] if names is None else list(names)
        steering = type(self).steering
        path = self.shape
        if steering is not None:
            steering.note(path, named)
            fresh = steering.fresh(path, named)
            if fresh is not None and data.draw(st.integers(0, FRESH_SHARE), label="steered"):
                i = named.index(data.draw(st.sampled_from(fresh), label=label))
                self.shape = (*path, named[i])
                return options[i]
        value = data.draw(st.sampled_from(options), label=label)
        at = next((j for j, o in enumerate(options) if o is value), None)
        self.shape = (*path, named[options.index(value) if at is None else at])
        return value

    def steer_bool(self, data: st.DataObject, label: str, names: tuple[str, str]) -> bool:
        """``data.draw(st.booleans())`` for a choice that shapes an invalid call, steered as
        :meth:`steer` (``names``: of False, of True)."""
        steering = type(self).steering
        path = self.shape
        if steering is not None:
            steering.note(path, names)
            fresh = steering.fresh(path, names)
            if fresh is not None and data.draw(st.integers(0, FRESH_SHARE), label="steered"):
                self.shape = (*path, fresh[0])
                return fresh[0] == names[1]
        value = data.draw(st.booleans(), label=label)
        self.shape = (*path, names[int(value)])
        return value

    def spec_apply(self, op: Op) -> Outcome:
        """The spec's side of a call (a subclass may measure it: ``kvpool conform`` does)."""
        return self.world.apply(op)

    def count(self, *rules: str) -> None:
        self.rule_checks.update(rules)

    def compare(self, op: Op, expected: Outcome, observed: Outcome, where: str) -> None:
        self.count("error kind differs")
        if self.config.level != "safety":
            self.count(result_rule(op), "fired differs")
        problem = compare_outcomes(op, expected, observed, self.config.level, where)
        if problem is not None:
            self.fail(*problem)

    def do(self, op: Op, *, refused: bool = False) -> Outcome:
        """Apply ``op`` to both sides, with the nested calls its watchers make; compare."""
        driver = self.driver
        assert driver is not None  # set by initialize, which always runs first
        # A refused call must change nothing. The spec's state is compared before and
        # after; the target's is compared with the spec's right after the call (the
        # previous step left them equal), or, when whole-state checks are spaced out,
        # with its own state before the call.
        spaced = refused and self.config.check_every > 1
        if refused:
            spec_before = [self.ps(i).snapshot() for i in self.alive()]
            target_before = self.read_target_states() if spaced else {}
        expected = self.spec_apply(op)
        if refused:  # the refusal kind ends the call's shape (:mod:`.steering`)
            kind = "accepted" if expected.ok else str(expected.error)
            steering = type(self).steering
            if steering is not None:
                steering.note(self.shape, [kind])
            self.shape = (*self.shape, kind)
        else:
            self.shape = ()
        try:
            observed = driver.execute(op)
        except TargetHung as exc:  # past the per-call timeout: a finding, shrunk like any
            self.trace.steps.append(TraceStep(op, expected, None))
            self.fail("target hung", f"{op!r}: {exc}")
        except TargetCrashed as exc:  # the target raised something that is no pool error
            self.trace.steps.append(TraceStep(op, expected, None))
            self.fail("target crashed", crash_detail(op, expected, exc), exc.traceback)
        nested: list[tuple[Op, Outcome, Outcome]] = []
        for nop, nobs in driver.nested:
            nested.append((nop, self.spec_apply(nop), nobs))
        self.trace.steps.append(TraceStep(op, expected, observed, tuple(nested)))
        self.steps += 1 + len(nested)
        self.compare(op, expected, observed, "")
        for nop, nexp, nobs in nested:
            self.compare(nop, nexp, nobs, " (run by a watcher)")
            if nexp.ok and isinstance(nop, GetNewBlocks):
                self.orphans.extend(BlockRef(nop.pool, b) for b in nexp.value)  # type: ignore[attr-defined]
            elif nexp.ok and isinstance(nop, Touch):
                self.orphans.extend(
                    e
                    for e in nop.blocks
                    if isinstance(e, BlockRef) and e.block != NULL_BLOCK and e.pool == nop.pool
                )
        if self.config.level != "safety":
            self.count("unraisable differs")
            raised = sum(
                1
                for out in [expected, *(n[1] for n in nested)]
                for f in out.fired
                if f.watcher in self.raising
            )
            if raised != len(driver.unraisable):
                self.fail(
                    "unraisable differs",
                    f"{op!r}: {raised} raising watcher call(s) but {len(driver.unraisable)} "
                    "reported through sys.unraisablehook",
                )
        if refused or (
            not expected.ok and self.config.level != "safety" and self.config.state_check
        ):
            self.count("ERR-ATOMIC")  # by the states before and after, spec and target
        if refused:
            if expected.ok:
                self.fail("ERR-ATOMIC", f"{op!r} was meant to be refused but the spec accepted it")
            if [self.ps(i).snapshot() for i in self.alive()] != spec_before:
                self.fail("ERR-ATOMIC", f"the spec changed its state refusing {op!r}")
            after = self.read_target_states() if spaced else {}
            for i, before in target_before.items():
                if after.get(i) is not None and before.snapshot() != after[i].snapshot():
                    self.fail(
                        "ERR-ATOMIC",
                        f"refusing {op!r} changed target pool {i}: {state_diff(before, after[i])}",
                    )
        self.since_check += 1
        self.fresh = False
        if refused or self.since_check >= self.config.check_every:
            # a call the spec refused must change nothing, whether or not it was drawn
            # to be refused (the replay names a difference after any refusal ERR-ATOMIC)
            self.check_state(op if refused or not expected.ok else None)
        return expected

    def read_target_states(self) -> dict[int, PoolState]:
        check = self.config.state_check
        if check is None or self.driver is None:
            return {}
        return {i: self._read(f"reading pool {i}'s state", check, i) for i in self.alive()}

    def _read(self, where: str, reader: Callable[[Driver, int], Any], i: int) -> Any:
        """``reader(driver, i)``: it reads the target's objects, so its crash is the target's."""
        try:
            return reader(self.driver, i)  # type: ignore[arg-type]
        except (TargetHung, TargetCrashed, LockstepFailure):
            raise
        except Exception as exc:
            crash = TargetCrashed(where, exc)
            self.fail("target crashed", str(crash), crash.traceback)

    def check_state(self, refused: Op | None = None) -> None:
        """Compare every live pool's whole state; refresh the target's invariant findings.

        ``refused``: the call just refused, if any (a difference then is ``ERR-ATOMIC``).
        """
        self.since_check = 0
        driver = self.driver
        assert driver is not None
        self.target_states = self.read_target_states()
        self.target_violations = {}
        extra = self.config.target_invariants
        self.spec_violations = {i: check_pool(self.ps(i)) for i in self.alive()}
        for i in self.alive():
            found = check_pool(self.target_states[i]) if i in self.target_states else []
            checked = set(INVARIANTS) if i in self.target_states else set()
            if extra is not None:
                found.extend(self._read(f"checking pool {i}'s own invariants", extra, i))
                checked.update(getattr(extra, "kvpool_rules", ()))
            self.count(*sorted(checked))
            if i in self.target_states and self.config.level != "safety":
                self.count("state differs")
            self.target_violations[i] = found
        self.fresh = True
        if self.config.level == "safety":
            return
        for i, observed in self.target_states.items():
            level = self.config.level
            found = self.target_violations.get(i, [])
            problem = state_problem(i, self.ps(i), observed, found, level, refused)
            if problem is not None:
                self.fail(*problem)

    def check_invariant(self, name: str) -> None:
        """Report a violation of ``name`` found by the last whole-state check, spec or target."""
        if not self.fresh:
            return
        for i in self.alive():
            for v in self.spec_violations.get(i, ()):
                if v.invariant == name:
                    self.fail(name, f"the spec itself broke it in pool {i}: {v}")
            for v in self.target_violations.get(i, ()):
                if v.invariant == name:
                    self.fail(name, f"target pool {i}: {v}")

    # -- building ----------------------------------------------------------------------

    @initialize(target=requests, data=st.data())
    def build_pools(self, data: st.DataObject) -> int:
        """Build the pools; a first request takes some blocks of pool 0 (maybe caching them)."""
        cfg = self.config
        multi = cfg.max_pools > 1
        n_pools = data.draw(st.integers(1, cfg.max_pools), label="pools") if multi else 1
        configs: list[tuple[int, bool, bool]] = []
        for _ in range(n_pools):
            n = data.draw(st.integers(cfg.min_blocks, cfg.max_blocks), label="num_blocks")
            c = cfg.caching if cfg.caching is not None else data.draw(st.booleans(), "caching")
            e = cfg.events if cfg.events is not None else data.draw(st.booleans(), "events")
            configs.append((n, c, e))
        self.trace.pools = configs
        self.world = World.of(*(PoolState.initial(n, c, e) for n, c, e in configs))
        self.driver = Driver(type(self).factory, configs)
        self.check_state()
        if "GetNewBlocks" not in self.config.capabilities:
            return self.new_request([])
        return self.allocate_in(0, data)

    def teardown(self) -> None:
        if self.driver is not None and self.since_check:
            self.check_state()

    # -- valid calls ---------------------------------------------------------------------

    @_needs("GetNewBlocks")
    @rule(target=requests, data=st.data())
    def allocate(self, data: st.DataObject) -> int:
        """A request takes fresh blocks (n from 0 to every free block), maybe caching them."""
        return self.allocate_in(data.draw(st.sampled_from(self.alive()), label="pool"), data)

    def allocate_in(self, p: int, data: st.DataObject) -> int:
        free = len(self.ps(p).free)
        n = data.draw(st.integers(0, min(free, 6)) | st.just(free), label="n")
        out = self.do(GetNewBlocks(n, pool=p))
        taken: tuple[int, ...] = out.value if out.ok else ()  # type: ignore[assignment]
        entries = [BlockRef(p, b) for b in taken]
        caps = self.config.capabilities
        if entries and self.ps(p).caching and "CacheBlocks" in caps:
            tokens = self.tokens(p, data)
            full = data.draw(st.integers(0, len(entries)), label="full blocks")
            keys = prefix_keys(tokens)[:full]
            if keys:
                self.do(CacheBlocks(tuple(entries[: len(keys)]), tuple(keys), pool=p))
        return self.new_request(entries)

    def entries_of(self, rid: int, data: st.DataObject) -> list[BlockRef]:
        entries = list(self.held.pop(rid, []))
        order = data.draw(st.sampled_from(["reversed", "as-is", "shuffled"]), label="order")
        if order == "reversed":
            entries.reverse()
        elif order == "shuffled":
            entries = data.draw(st.permutations(entries), label="permutation")
        return entries

    def via_pool(self, entries: list[BlockRef], data: st.DataObject) -> int:
        """The pool the call is made on: the blocks' own pool, or (cross-pool) another one."""
        alive = self.alive()
        own = entries[0].pool if entries else alive[0]
        if own in alive and (len(alive) == 1 or data.draw(st.integers(0, 3), "cross") > 0):
            return own
        return data.draw(st.sampled_from(alive), label="via")

    @_needs("FreeBlocks")
    @rule(rid=consumes(requests), data=st.data(), evict_first=st.booleans())
    def free_request(self, rid: int, data: st.DataObject, evict_first: bool) -> None:
        """A request finishes: its blocks go back, in some order, maybe through another pool."""
        entries = self.entries_of(rid, data)
        via = self.via_pool(entries, data)
        if data.draw(st.booleans(), label="with the null block"):  # skipped silently
            entries.insert(data.draw(st.integers(0, len(entries))), BlockRef(via, NULL_BLOCK))
        self.do(FreeBlocks(tuple(entries), evict_first, pool=via))

    @_needs("FreeBlocks")
    @rule(a=consumes(requests), b=consumes(requests), data=st.data())
    def free_two_requests(self, a: int, b: int, data: st.DataObject) -> None:
        """Two requests freed in one call (a block both hold is listed twice)."""
        entries = self.entries_of(a, data) + self.entries_of(b, data)
        self.do(FreeBlocks(tuple(entries), pool=self.via_pool(entries, data)))

    @_needs("FreeBlocks")
    @precondition(lambda self: bool(self.orphans))
    @rule(data=st.data())
    def free_orphans(self, data: st.DataObject) -> None:
        """Release the blocks watchers took (re-entrant allocations and touches)."""
        entries, self.orphans = self.orphans, []
        self.do(FreeBlocks(tuple(entries), pool=self.via_pool(entries, data)))

    @_needs("CacheBlocks")
    @rule(rid=requests, data=st.data())
    def cache_request(self, rid: int, data: st.DataObject) -> None:
        """A request's full blocks get prefix keys (keys shared with other requests' prefixes).

        At ``robust``, sometimes a block that already holds a key is included (refused).
        """
        entries = self.held.get(rid, [])
        if not entries or not self.world.alive[entries[0].pool]:
            return
        p = entries[0].pool
        ps = self.ps(p)
        if not ps.caching:
            return
        tokens = self.tokens(p, data)
        keyed = [e for e in entries if ps.key[e.block] is not None and ps.ref[e.block] >= 1]
        if keyed and self.config.level == "robust" and data.draw(st.booleans(), label="recache"):
            self.shape = ("cache_request",)
            again = data.draw(st.sampled_from(keyed), label="cached block")
            self.do(CacheBlocks((again,), (tokens,), pool=p), refused=True)
            return
        blocks: list[BlockRef] = []
        for e in entries:
            if ps.key[e.block] is None and ps.ref[e.block] >= 1 and e not in blocks:
                blocks.append(e)
        keys = prefix_keys(tokens)[: len(blocks)]
        blocks = blocks[: len(keys)]
        self.do(CacheBlocks(tuple(blocks), tuple(keys), pool=p))

    @_needs("GetCachedBlock", "Touch")
    @rule(target=requests, data=st.data(), dup=st.booleans())
    def prefix_hit(self, data: st.DataObject, dup: bool) -> int:
        """A new request looks up its prefix chain and touches the hits (maybe one twice)."""
        p = data.draw(st.sampled_from(self.alive()), label="pool")
        tokens = self.tokens(p, data)
        hits: list[BlockRef] = []
        for key in prefix_keys(tokens):
            out = self.do(GetCachedBlock(key, pool=p))
            if out.value is None:
                break
            hits.append(BlockRef(p, out.value))  # type: ignore[arg-type]
        if dup and hits:
            hits.append(hits[-1])
        if hits:
            self.do(Touch(tuple(hits), pool=p))
        return self.new_request(hits)

    @_needs("Touch")
    @rule(target=requests, rid=requests)
    def share_request(self, rid: int) -> int:
        """A second request shares every block of a running one (touch on blocks in use)."""
        entries = list(self.held.get(rid, []))
        if not entries or not self.world.alive[entries[0].pool]:
            return self.new_request([])
        self.do(Touch(tuple(entries), pool=entries[0].pool))
        return self.new_request(entries)

    @_needs("Touch")
    @rule(target=requests, data=st.data())
    def touch_free(self, data: st.DataObject) -> int:
        """Touch blocks straight out of the free queue (and the null block, which is skipped)."""
        p = data.draw(st.sampled_from(self.alive()), label="pool")
        free = list(self.ps(p).free)
        if not free:
            return self.new_request([])
        picks = data.draw(st.lists(st.sampled_from(free), min_size=1, max_size=3), label="blocks")
        with_null = data.draw(st.booleans(), label="null")
        entries = [BlockRef(p, b) for b in picks]
        self.do(Touch(tuple([*entries, BlockRef(p, NULL_BLOCK)] if with_null else entries), pool=p))
        return self.new_request(entries)

    @_needs("UnpinBlocks")
    @rule(rid=consumes(requests), watcher=watcher_ids, data=st.data())
    def unpin_request(self, rid: int, watcher: int, data: st.DataObject) -> None:
        """A request lets go of its blocks but wants to hear when they are reused."""
        entries = self.entries_of(rid, data)
        if not entries or not self.world.alive[entries[0].pool]:
            return
        p = entries[0].pool
        cfg = self.config
        if cfg.level == "robust" and cfg.faults and data.draw(st.booleans(), label="faulty"):
            self.script(watcher, p, data.draw(st.booleans(), label="raises"), data)
        self.do(UnpinBlocks(tuple(entries), watcher, pool=p))

    @_needs("EvictBlocks")
    @rule(data=st.data())
    def evict(self, data: st.DataObject) -> None:
        """Drop the keys of some blocks (in use or free, cached or not)."""
        p = data.draw(st.sampled_from(self.alive()), label="pool")
        n = self.ps(p).num_blocks
        if n < 2:
            return
        cached = [b for b in range(1, n) if self.ps(p).key[b] is not None]
        ids_of = (
            st.sampled_from(cached) | st.integers(1, n - 1) if cached else st.integers(1, n - 1)
        )
        ids = data.draw(st.lists(ids_of, max_size=4), label="ids")
        self.do(EvictBlocks(tuple(ids), pool=p))

    @_needs("ResetPrefixCache")
    @rule(data=st.data())
    def reset(self, data: st.DataObject) -> None:
        self.do(ResetPrefixCache(pool=data.draw(st.sampled_from(self.alive()), label="pool")))

    @_needs_any("GetNumFreeBlocks", "GetUsage", "TakeEvents", "IsBlockWritable", "GetCachedBlock")
    @rule(data=st.data())
    def observe(self, data: st.DataObject) -> None:
        """The read-only calls: free count, usage, events, writability, cache lookup.

        Each is made when the target has it: a pool with only ``get_num_free_blocks``
        still has its count compared (the draws are the same for every target, so a
        target with all five is searched as before)."""
        caps = self.config.capabilities
        p = data.draw(st.sampled_from(self.alive()), label="pool")
        tokens = self.tokens(p, data)
        which = data.draw(st.sampled_from(["counts", "block"]), label="observe")
        if which == "counts":
            calls: list[Op] = [GetNumFreeBlocks(pool=p), GetUsage(pool=p), TakeEvents(pool=p)]
        else:
            b = data.draw(st.integers(0, self.ps(p).num_blocks - 1), label="block")
            calls = [IsBlockWritable(BlockRef(p, b), pool=p), GetCachedBlock(tokens, pool=p)]
        for op in calls:
            if type(op).__name__ in caps:
                self.do(op)

    @_needs("DropPool")
    @precondition(lambda self: len(self.alive()) > 1)
    @rule(data=st.data())
    def drop_pool(self, data: st.DataObject) -> None:
        """A pool is garbage collected; requests may still hold (and later free) its blocks."""
        p = data.draw(st.sampled_from(self.alive()), label="pool")
        assert self.driver is not None
        for wid, ap in list(self.action_pools.items()):
            if ap == p:  # a script calling into a gone pool is a malformed trace
                self.driver.set_action(wid, None)
                self.raising.discard(wid)
                del self.action_pools[wid]
        self.do(DropPool(pool=p))

    # -- vLLM 0.33.0's calls on blocks with several keys -------------------------------------

    def mk_request(self, p: int, data: st.DataObject) -> tuple[Request, str]:
        """A request and its tokens: fresh, or (half the time) extending a prefix pool ``p``
        holds under a key in vLLM's form, so that requests share prefixes and keys."""
        held = sorted(
            {
                t
                for k in self.ps(p).index
                if (parts := split_key(k)) is not None
                and (t := request_tokens(parts[0])) is not None
            }
        )
        if held and bool(data.draw(st.booleans(), label="extend a cached prefix")):
            flavour, prefix = data.draw(st.sampled_from(held), label="cached prefix")
            more = data.draw(st.lists(st.sampled_from(TOKENS), max_size=2), label="more")
            tokens = prefix + "".join(more)
        else:
            flavour = data.draw(st.integers(0, len(FLAVOURS) - 1), label="flavour")
            tokens = data.draw(token_lists, label="tokens")
        return make_request(tokens, flavour), tokens

    def held_blocks(self, p: int) -> list[BlockRef]:
        """Every block of pool ``p`` some request holds, in use, each once."""
        ps = self.ps(p)
        out: dict[BlockRef, None] = {}
        for entries in self.held.values():
            out.update((e, None) for e in entries if e.pool == p and ps.ref[e.block] > 0)
        return list(out)

    @_needs()
    @precondition(lambda self: any(o in self.config.capabilities for o in MULTIKEY_OPS))
    @rule(rid=requests, data=st.data())
    def multikey(self, rid: int, data: st.DataObject) -> None:
        """A request's step through vLLM 0.33.0's calls on blocks with several keys: one to
        four valid calls (partial entries, full blocks and promotion, moves, lookups by
        group, re-announced hits) on one pool, one request and (mostly) its blocks.

        One rule among the others, so the key-level rules keep their share of the
        steps (about fourteen in fifteen); the calls it makes come in short runs, so
        that one call builds the state the next reads (a partial entry then its
        promotion, a cached hash then its lookup by groups, keys then their move).
        """
        caps = self.config.capabilities
        entries = self.held.get(rid, [])
        kinds = [o for o in MULTIKEY_OPS if o in caps]
        # caching calls three times as often as the others: they build the state the rest read
        weighted = [k for k in kinds for _ in range(3 if k in CACHING_CALLS else 1)]
        alive = self.alive()
        own = entries[0].pool if entries else -1
        p = own if own in alive else data.draw(st.sampled_from(alive), label="pool")
        if "EvictBlocks" in caps:  # vLLM's manager evicts cached blocks between calls too
            weighted.append("EvictBlocks")
        req, tokens = self.mk_request(p, data)
        if self.steer_further(data):
            self.further_entries(p, req, tokens, entries, data)
            return
        last: list[CachePartialBlock] = []
        for _ in range(data.draw(st.integers(1, 4), label="calls")):
            kind = data.draw(st.sampled_from(weighted), label="vLLM call")
            if kind == "CachePartialBlock" and last and data.draw(st.booleans(), label="again"):
                # the same block again: the same key (held), a longer prefix, a shorter one
                # or another group beside it (further entries)
                before = last[-1]
                n = HASH_UNIT * data.draw(st.integers(1, len(tokens)), label="hash units")
                g = data.draw(GROUPS, label="group")
                again = data.draw(st.integers(0, 4), label="replace") == 0
                same = data.draw(st.booleans(), label="same key")
                op: Op | None = before
                if not same:
                    op = replace(before, num_tokens=n, group=g, replace_existing_hashes=again)
            elif kind == "CacheFullBlocks" and last and data.draw(st.booleans(), label="promote"):
                before = last[-1]
                bs = data.draw(st.sampled_from(BLOCK_SIZES), label="block_size")
                g = data.draw(GROUPS, label="group")
                op = self.full_blocks_call(p, req, [], bs, g, data, promote=before)
            elif kind == "EvictBlocks":
                keyed = [b for b in range(1, self.ps(p).num_blocks) if self.ps(p).keys_of(b)]
                if not keyed:
                    continue
                op = EvictBlocks((data.draw(st.sampled_from(keyed), label="evicted"),), pool=p)
            else:
                op = self.multikey_call(kind, p, req, tokens, entries, data)
            if op is None:
                continue
            out = self.do(op)
            if isinstance(op, CachePartialBlock) and out.ok:
                last.append(op)

    def steer_further(self, data: st.DataObject) -> bool:
        """Make this step's run of multi-key calls :meth:`further_entries`, one time in
        two, when the search goes past accepted differences (:attr:`searching_past`);
        never in a plain search (its draws are unchanged).

        Several further entries on one block take several calls in a row on it, and in a
        search that goes past accepted differences an example stops comparing at its
        first one (vLLM 0.33.0's two common valid-use errata come early in most
        examples), so such a state was rarely compared at all (12-06: about one search
        of 200 examples in 13 met a block whose further entries are out of order)."""
        if not type(self).searching_past or "CachePartialBlock" not in self.config.capabilities:
            return False
        return bool(data.draw(st.booleans(), label="further entries"))

    def further_entries(
        self, p: int, req: Request, tokens: str, entries: list[BlockRef], data: st.DataObject
    ) -> None:
        """A partial entry on a block in use, then two or three more keys the block keeps
        beside it (further entries): prefixes no longer than the first, in another group
        when as long, never replacing the block's keys."""
        ps = self.ps(p)
        mine = [e for e in entries if e.pool == p and ps.ref[e.block] > 0]
        held = [
            e
            for e in mine or self.held_blocks(p)
            if type(ps.key[e.block]) in (bytes, type(None))  # as multikey_call's partial entries
        ]
        if not ps.caching or not held:
            return
        block = data.draw(st.sampled_from(held), label="block")
        units = data.draw(st.integers(1, len(tokens)), label="hash units")
        size = data.draw(st.sampled_from(BLOCK_SIZES), label="block_size")
        first = CachePartialBlock(req, block, HASH_UNIT * units, 0, size, False, pool=p)
        if not self.do(first).ok:
            return
        for _ in range(data.draw(st.integers(2, 3), label="further entries")):
            m = data.draw(st.integers(1, units), label="further hash units")
            g = data.draw(GROUPS, label="further group")
            if m == units and g == 0:
                g = 1
            self.do(
                replace(first, num_tokens=HASH_UNIT * m, group=g, replace_existing_hashes=False)
            )

    def multikey_call(
        self,
        kind: str,
        p: int,
        req: Request,
        tokens: str,
        entries: list[BlockRef],
        data: st.DataObject,
    ) -> Op | None:
        """One valid call of kind ``kind`` on pool ``p`` (None: none can be made here)."""
        ps = self.ps(p)
        mine = [e for e in entries if e.pool == p and ps.ref[e.block] > 0]
        held = mine or self.held_blocks(p)
        if kind in CACHING_CALLS and (not ps.caching or not held):
            return None  # caching off is a refusal (multikey_refused); nothing in use
        bs = data.draw(st.sampled_from(BLOCK_SIZES), label="block_size")
        g = data.draw(GROUPS, label="group")
        if kind == "CachePartialBlock":
            # not on a block keyed by the key-level cache_blocks: that key has no token count
            # in the spec, while a vLLM pool (cache_blocks through cache_full_blocks)
            # records one, which decides whether a longer prefix replaces it
            held = [e for e in held if type(ps.key[e.block]) in (bytes, type(None))]
            if not held:
                return None
            null = BlockRef(p, NULL_BLOCK)  # now and then the null block: None, no change
            b = data.draw(st.sampled_from(held) | st.just(null), label="block")
            n = HASH_UNIT * data.draw(st.integers(1, len(tokens)), label="hash units")
            again = data.draw(st.integers(0, 4), label="replace") == 0
            return CachePartialBlock(req, b, n, g, bs, again, pool=p)
        if kind == "CacheFullBlocks":
            return self.full_blocks_call(p, req, held, bs, g, data)
        if kind == "MoveBlockHashes":
            keyed = [b for b in range(1, ps.num_blocks) if ps.key[b] is not None]
            empty = [e.block for e in self.held_blocks(p) if ps.key[e.block] is None]
            if keyed and empty:
                src = data.draw(st.sampled_from(keyed), label="src")
                dst = data.draw(st.sampled_from(empty), label="dst")
            else:  # src holds no key: nothing moves
                bare = [b for b in range(1, ps.num_blocks) if ps.key[b] is None]
                if not bare:
                    return None
                src = data.draw(st.sampled_from(bare), label="src")
                dst = data.draw(st.sampled_from(bare), label="dst")
            return MoveBlockHashes(BlockRef(p, src), BlockRef(p, dst), pool=p)
        if kind == "GetCachedBlockGroups":
            cached = sorted(
                {parts[0] for k in ps.index if (parts := split_key(k)) is not None}, key=repr
            )
            pick = st.sampled_from(req.block_hashes)
            h = data.draw(st.sampled_from(cached) | pick if cached else pick, label="hash")
            groups = data.draw(st.lists(GROUPS, max_size=3), label="groups")
            return GetCachedBlockGroups(h, tuple(groups), pool=p)
        top = len(tokens) // (bs // HASH_UNIT)
        n = data.draw(st.integers(0, top), label="num_cached_blocks")
        return EmitCachedBlockEvents(req, n, bs, g, pool=p)

    def full_blocks_call(
        self,
        p: int,
        req: Request,
        mine: list[BlockRef],
        bs: int,
        g: int,
        data: st.DataObject,
        promote: CachePartialBlock | None = None,
    ) -> Op:
        """cache_full_blocks on a request's blocks, as vLLM's manager makes it: the first
        ``num_cached_blocks`` already done, maybe a null entry (a sliding window's) and a
        mask; entries that would be refused (listed twice, cached and not promotable) are
        masked out, so the call is valid. ``promote``: a partial entry just made, whose
        block is put where its full block covers more tokens (a promotion)."""
        ps = self.ps(p)
        blocks: list[BlockRef] = list(mine)
        top = min(len(blocks), len(req.block_hashes) // (bs // HASH_UNIT))
        at = -1
        if promote is not None and type(promote.num_tokens) is int:
            at = promote.num_tokens // bs  # covers (at + 1) * bs > num_tokens
            if at < len(req.block_hashes) // (bs // HASH_UNIT):
                blocks = [BlockRef(p, NULL_BLOCK)] * at + [promote.block]  # type: ignore[list-item]
                top = at + 1
            else:
                at = -1
        elif data.draw(st.booleans(), label="null entry"):
            blocks.insert(data.draw(st.integers(0, len(blocks)), label="null at"), BlockRef(p, 0))
            top = min(len(blocks), len(req.block_hashes) // (bs // HASH_UNIT))
        nf = top if at >= 0 else data.draw(st.integers(0, top), label="num_full_blocks")
        nc = data.draw(st.integers(0, nf if at < 0 else at), label="num_cached_blocks")
        mask: list[bool] | None = None
        if at < 0 and data.draw(st.booleans(), label="mask"):
            mask = data.draw(st.lists(st.booleans(), min_size=nf - nc, max_size=nf - nc))
        seen: set[int] = set()
        for i in range(nc, nf):
            b = blocks[i].block
            if b == NULL_BLOCK or (mask is not None and not mask[i - nc]):
                continue
            have = ps.tokens.get(b)
            if b in seen or (ps.key[b] is not None and (have is None or have >= (i + 1) * bs)):
                mask = mask if mask is not None else [True] * (nf - nc)
                mask[i - nc] = False
                continue
            seen.add(b)
        return CacheFullBlocks(
            req, tuple(blocks), nc, nf, bs, g, None if mask is None else tuple(mask), pool=p
        )

    # -- faulty and re-entrant watchers --------------------------------------------------

    def arm(self, wid: int, action: WatcherAction | None, pool: int, text: str) -> None:
        assert self.driver is not None
        self.driver.set_action(wid, action)
        if action is not None and action.raise_error:
            self.raising.add(wid)
        else:
            self.raising.discard(wid)
        if action is not None and action.op is not None:
            self.action_pools[wid] = pool
        else:
            self.action_pools.pop(wid, None)
        note = f"script watcher {wid}: {text}"
        self.trace.arms.append(note)
        self.trace.steps.append(TraceStep(None, Outcome(), Outcome(), (), note))

    @_needs("UnpinBlocks", level=ROBUST)
    @precondition(lambda self: self.config.faults)
    @rule(wid=watcher_ids, data=st.data(), fails=st.booleans())
    def script_watcher(self, wid: int, data: st.DataObject, fails: bool) -> None:
        """Watcher ``wid`` will raise, and/or call back into a pool when it fires."""
        p = data.draw(st.sampled_from(self.alive()), label="pool")
        self.script(wid, p, fails, data)

    def script(self, wid: int, p: int, fails: bool, data: st.DataObject) -> None:
        """Draw what watcher ``wid`` does when it fires: raise, call into pool ``p``, or both."""
        ps = self.ps(p)
        kinds = ["none", "alloc", "reset", "writable", "cached", "numfree"]
        kind = data.draw(st.sampled_from(kinds), label="calls")
        op: Op | None = None
        if kind == "alloc":
            op = GetNewBlocks(data.draw(st.integers(0, 2), label="n"), pool=p)
        elif kind == "reset":
            op = ResetPrefixCache(pool=p)
        elif kind == "writable":
            b = data.draw(st.integers(0, ps.num_blocks - 1), label="block")
            op = IsBlockWritable(BlockRef(p, b), pool=p)
        elif kind == "cached":
            op = GetCachedBlock(data.draw(token_lists, label="key"), pool=p)
        elif kind == "numfree":
            op = GetNumFreeBlocks(pool=p)
        if op is None and not fails:
            self.arm(wid, None, p, "plain")
            return
        text = ("raises" if fails else "") + (
            f"{' after ' if fails else ''}calls {op!r}" if op else ""
        )
        self.arm(wid, WatcherAction(raise_error=fails, op=op), p, text)

    @_needs("UnpinBlocks", "FreeBlocks", "Touch", level=ROBUST)
    @precondition(lambda self: self.config.faults)
    @rule(wid=watcher_ids, rid=consumes(requests), touch=st.booleans())
    def script_watcher_on_request(self, wid: int, rid: int, touch: bool) -> None:
        """Watcher ``wid`` will free (or touch) a request's blocks from inside the callback."""
        entries = self.held.get(rid, [])
        if not entries or not self.world.alive[entries[0].pool]:
            return
        p = entries[0].pool
        if touch:
            op: Op = Touch(tuple(entries), pool=p)
            self.held[rid] = entries  # touching does not release the request
        else:
            op = FreeBlocks(tuple(self.held.pop(rid)), pool=p)
        self.arm(wid, WatcherAction(op=op), p, f"calls {op!r}")

    @_needs("UnpinBlocks", "IsBlockWritable", "GetCachedBlock", level=ROBUST)
    @precondition(lambda self: self.config.faults)
    @rule(rid=consumes(requests), wid=watcher_ids, data=st.data())
    def unpin_with_probe(self, rid: int, wid: int, data: st.DataObject) -> None:
        """Unpin a request with a watcher that inspects the reused block from inside the callback.

        When it fires, the block must already be handed out completely: writable
        (ref_cnt 1, no key) and no longer found under its old key.
        """
        entries = self.held.get(rid, [])
        if not entries or not self.world.alive[entries[0].pool]:
            self.held.pop(rid, None)
            return
        p = entries[0].pool
        b = data.draw(st.sampled_from(entries), label="probed block")
        key = self.ps(p).key[b.block]
        op: Op = (
            GetCachedBlock(key, pool=p)
            if key is not None and data.draw(st.booleans(), label="probe key")
            else IsBlockWritable(b, pool=p)
        )
        self.arm(wid, WatcherAction(op=op), p, f"calls {op!r}")
        self.do(UnpinBlocks(tuple(self.held.pop(rid)), wid, pool=p))

    # -- invalid calls: each must be refused with its kind and change nothing ------------

    def some_held(self, p: int) -> list[BlockRef]:
        """Blocks of pool ``p`` a request holds (valid entries to put before a bad one)."""
        out: list[BlockRef] = []
        for entries in self.held.values():
            out.extend(e for e in entries if e.pool == p and self.ps(p).ref[e.block] > 0)
            if len(out) >= 3:
                break
        return out[:3]

    INVALID_CALLS: ClassVar[tuple[tuple[str, tuple[str, ...]], ...]] = (
        ("bad_count", ("GetNewBlocks",)),
        ("over_free", ("FreeBlocks",)),
        ("free_bad_entries", ("FreeBlocks",)),
        ("foreign_block", ("Touch", "UnpinBlocks", "CacheBlocks", "IsBlockWritable")),
        ("null_misuse", ("UnpinBlocks", "CacheBlocks", "EvictBlocks")),
        ("unpin_refused", ("UnpinBlocks",)),
        ("cache_refused", ("CacheBlocks",)),
        ("bad_ids_and_keys", ("EvictBlocks", "GetCachedBlock")),
        ("multikey_refused", MULTIKEY_OPS),
    )
    """Each kind of invalid call and the ops it needs (one rule draws among them);
    ``multikey_refused`` needs any one of vLLM's multi-key calls."""

    @_needs(level=ROBUST)
    @rule(data=st.data())
    def invalid_call(self, data: st.DataObject) -> None:
        """A call the pool must refuse with its error kind, changing nothing."""
        caps = self.config.capabilities
        only = self.config.rules
        kinds = [
            name
            for name, ops in self.INVALID_CALLS
            if (any if name == "multikey_refused" else all)(o in caps for o in ops)
            and (only is None or name in only)
        ]
        if len(self.world.pools) == 1 and "foreign_block" in kinds:
            kinds.remove("foreign_block")
        if not kinds:
            return
        self.shape = ()
        steering = type(self).steering
        # every kind of invalid call has shown an accepted difference: one in
        # FRESH_SHARE + 1 is still made, the rest of the steps go to valid calls
        spent = steering is not None and steering.is_spent(())
        if spent and data.draw(st.integers(0, FRESH_SHARE), label="spent: skip"):
            return
        getattr(self, self.steer(data, "invalid call", kinds))(data)

    def bad_count(self, data: st.DataObject) -> None:
        """get_new_blocks with a count that is negative, not an int, or too large."""
        p = data.draw(st.sampled_from(self.alive()), label="pool")
        free = len(self.ps(p).free)
        names = [*map(repr, BAD_COUNTS), "free + 1", "free + 5"]
        n = self.steer(data, "n", [*BAD_COUNTS, free + 1, free + 5], names)
        self.do(GetNewBlocks(n, pool=p), refused=True)

    def over_free(self, data: st.DataObject) -> None:
        """A double free (a free block) or a duplicate over-free (listed more often than held)."""
        evict_first = data.draw(st.booleans(), label="evict_first")
        alive = self.alive()
        p = data.draw(st.sampled_from(alive), label="pool")
        ps = self.ps(p)
        if ps.num_blocks < 2:
            return
        b = data.draw(st.integers(1, ps.num_blocks - 1), label="block")
        victim = [BlockRef(p, b)] * (ps.ref[b] + 1)
        via = data.draw(st.sampled_from(alive), label="via")  # another pool: a forwarded refusal
        # valid entries first (the calling pool's own, then the victim's pool's), so
        # that a pool which validates late has already released something
        prefix = self.some_held(via) + (self.some_held(p) if p != via else [])
        if not data.draw(st.booleans(), label="prefix"):
            prefix = []
        self.do(FreeBlocks(tuple(prefix + victim), evict_first, pool=via), refused=True)

    def free_bad_entries(self, data: st.DataObject) -> None:
        """free_blocks with a non-bool evict_first or an entry that is no block."""
        p = data.draw(st.sampled_from(self.alive()), label="pool")
        prefix = self.some_held(p)
        if self.steer_bool(data, "evict_first is bad", ("entry", "evict_first")):
            ef = self.steer(data, "evict_first", [1, 0, "yes", None], BAD_FLAG_NAMES)
            self.do(FreeBlocks(tuple(prefix), ef, pool=p), refused=True)
        else:
            past = BlockRef(p, self.ps(p).num_blocks)
            bad = self.steer(data, "entry", [*NOT_BLOCKS, past], NOT_BLOCK_NAMES)
            self.do(FreeBlocks((*prefix, bad), pool=p), refused=True)

    def foreign_block(self, data: st.DataObject) -> None:
        """touch / unpin / cache / is_block_writable with another pool's block."""
        watcher = data.draw(watcher_ids, label="watcher")
        p = data.draw(st.sampled_from(self.alive()), label="pool")
        others = [q for q in range(len(self.world.pools)) if q != p and self.ps(q).num_blocks > 1]
        if not others:
            return
        q = data.draw(st.sampled_from(others), label="other pool")
        alien = BlockRef(q, data.draw(st.integers(1, self.ps(q).num_blocks - 1), label="block"))
        prefix = self.some_held(p)
        which = self.steer(data, "op", ["touch", "unpin", "cache", "writable"])
        op: Op
        if which == "touch":
            op = Touch((*prefix, alien), pool=p)
        elif which == "unpin":
            op = UnpinBlocks((*prefix, alien), watcher, pool=p)
        elif which == "cache":
            if not self.ps(p).caching:
                return
            op = CacheBlocks((alien,), ("foreign",), pool=p)
        else:
            op = IsBlockWritable(alien, pool=p)
        self.do(op, refused=True)

    def null_misuse(self, data: st.DataObject) -> None:
        """The null block where it is not allowed: unpin, cache, evict."""
        watcher = data.draw(watcher_ids, label="watcher")
        p = data.draw(st.sampled_from(self.alive()), label="pool")
        null = BlockRef(p, NULL_BLOCK)
        prefix = self.some_held(p)
        which = self.steer(data, "op", ["unpin", "cache", "evict"])
        op: Op
        if which == "unpin":
            op = UnpinBlocks((*prefix, null), watcher, pool=p)
        elif which == "cache":
            if not self.ps(p).caching:
                return
            op = CacheBlocks((null,), ("null",), pool=p)
        else:
            op = EvictBlocks((*(e.block for e in prefix), NULL_BLOCK), pool=p)
        self.do(op, refused=True)

    def unpin_refused(self, data: st.DataObject) -> None:
        """unpin_blocks with a non-callable watcher, or more often than a block is held."""
        watcher = data.draw(watcher_ids, label="watcher")
        p = data.draw(st.sampled_from(self.alive()), label="pool")
        ps = self.ps(p)
        prefix = self.some_held(p)
        if ps.num_blocks < 2 or self.steer_bool(data, "bad watcher", ("count", "watcher")):
            w = self.steer(data, "watcher", BAD_WATCHERS, [*map(repr, BAD_WATCHERS)])
            self.do(UnpinBlocks(tuple(prefix), w, pool=p), refused=True)
            return
        b = data.draw(st.integers(1, ps.num_blocks - 1), label="block")
        entries = [e for e in prefix if e.block != b] + [BlockRef(p, b)] * (ps.ref[b] + 1)
        self.do(UnpinBlocks(tuple(entries), watcher, pool=p), refused=True)

    def cache_refused(self, data: st.DataObject) -> None:
        """cache_blocks refused: caching off, a cached or unused block, bad keys, a duplicate."""
        p = data.draw(st.sampled_from(self.alive()), label="pool")
        ps = self.ps(p)
        used = [BlockRef(p, b) for b in range(1, ps.num_blocks) if ps.ref[b] > 0]
        uncached = [e for e in used if ps.key[e.block] is None]
        cases = ["length", "bad key"]
        if not ps.caching and used:
            cases.append("caching off")
        if ps.caching:
            if any(ps.key[e.block] is not None for e in used):
                cases.append("already cached")
            if ps.free:
                cases.append("not in use")
            if uncached:
                cases.append("twice")
        case = self.steer(data, "case", cases)
        blocks: tuple[object, ...]
        keys: tuple[object, ...]
        if case == "length":
            blocks, keys = tuple(uncached[:1]), ("k1", "k2")
        elif case == "bad key":
            blocks = tuple(uncached[:1]) or (BlockRef(p, NULL_BLOCK),)
            keys = (self.steer(data, "key", BAD_KEYS, [*map(repr, BAD_KEYS)]),)
        elif case == "caching off":
            blocks, keys = (data.draw(st.sampled_from(used), label="block"),), ("k",)
        elif case == "already cached":
            cached = [e for e in used if ps.key[e.block] is not None]
            target = data.draw(st.sampled_from(cached), label="block")
            blocks = (*uncached[:2], target)
            keys = tuple(f"x{i}" for i in range(len(blocks)))
        elif case == "not in use":
            target = BlockRef(p, data.draw(st.sampled_from(list(ps.free)), label="block"))
            blocks = (*uncached[:2], target)
            keys = tuple(f"x{i}" for i in range(len(blocks)))
        else:
            e = data.draw(st.sampled_from(uncached), label="block")
            blocks, keys = (e, e), ("t1", "t2")
        self.do(CacheBlocks(blocks, keys, pool=p), refused=True)

    def bad_ids_and_keys(self, data: st.DataObject) -> None:
        """evict_blocks with an id out of range or not an int; get_cached_block, unhashable key."""
        p = data.draw(st.sampled_from(self.alive()), label="pool")
        n = self.ps(p).num_blocks
        if self.steer_bool(data, "evict", ("key", "evict")):
            ids = [-1, -n, n, n + 3, "1", 1.0, True, None]
            names = ["-1", "-n", "n", "n + 3", "'1'", "1.0", "True", "None"]
            bad = self.steer(data, "id", ids, names)
            good = [e.block for e in self.some_held(p)]
            self.do(EvictBlocks((*good, bad), pool=p), refused=True)
        else:
            self.do(GetCachedBlock(["unhashable"], pool=p), refused=True)

    def multikey_refused(self, data: st.DataObject) -> None:
        """One of vLLM 0.33.0's multi-key calls that the semantics refuses, each refusal kind
        it defines for them: a bad count, block size, group, mask, request or flag
        (InvalidArgument), too few hashes, a block listed twice, a cached block that is not
        promotable or a keyed move target (AlreadyCached), a free block (BlockNotInUse),
        another pool's block (ForeignBlock), the null block (NullBlockMisuse), caching off
        (CachingDisabled)."""
        caps = self.config.capabilities
        p = data.draw(st.sampled_from(self.alive()), label="pool")
        ps = self.ps(p)
        if ps.num_blocks < 2:
            return
        kind = self.steer(data, "call", [o for o in MULTIKEY_OPS if o in caps])
        req, tokens = self.mk_request(p, data)
        bs = data.draw(st.sampled_from(BLOCK_SIZES), label="block_size")
        g = data.draw(GROUPS, label="group")
        held = self.held_blocks(p)
        some = data.draw(st.sampled_from(held), label="block") if held else BlockRef(p, 1)
        free = [BlockRef(p, b) for b in ps.free]
        keyed = [BlockRef(p, b) for b in range(1, ps.num_blocks) if ps.key[b] is not None]
        others = [q for q in self.alive() if q != p and self.ps(q).num_blocks > 1]
        alien = BlockRef(others[0], 1) if others else None
        bad_group: list[object] = [-1, 1 << 32, "0", None, 1.0]
        bad_size: list[object] = [0, -16, 8, 24, "16", None]
        bad_request: list[object] = ["request", None, (b"h0:a",)]
        cases = ["block_size", "group", "request"]
        if not ps.caching:
            cases.append("caching off")
        elif free:
            cases.append("not in use")
        if alien is not None and ps.caching:
            cases.append("foreign")
        case_of = {
            "CachePartialBlock": ["num_tokens", "replace"],
            "CacheFullBlocks": ["counts", "mask", "too many", "hashes", "twice", "cached"],
            "MoveBlockHashes": ["null", "not a block", "dst keyed", "dst not in use"],
            "GetCachedBlockGroups": ["hash", "group"],
            "EmitCachedBlockEvents": ["counts", "block_size", "group", "request", "hashes"],
        }
        if kind == "MoveBlockHashes":
            cases = ["foreign"] if alien is not None else []
        elif kind in ("GetCachedBlockGroups", "EmitCachedBlockEvents"):
            cases = []
        cases += case_of[kind]
        case = self.steer(data, "case", cases)
        op: Op
        if kind == "CachePartialBlock":
            n: object = HASH_UNIT * len(tokens)
            block: object = some
            size: object = bs
            group: object = g
            request: object = req
            again: object = False
            if case == "num_tokens":
                over = HASH_UNIT * (len(tokens) + 1)
                bad_n: list[object] = [0, -16, 8, over, "16", None]
                n = self.steer(data, "n", bad_n, ["0", "-16", "8", "over", "'16'", "None"])
            elif case == "replace":
                again = self.steer(data, "replace", [1, 0, "yes", None], BAD_FLAG_NAMES)
            elif case == "block_size":
                size = self.steer(data, "bad block_size", bad_size, [*map(repr, bad_size)])
            elif case == "group":
                group = self.steer(data, "bad group", bad_group, [*map(repr, bad_group)])
            elif case == "request":
                request = self.steer(data, "bad request", bad_request, [*map(repr, bad_request)])
            elif case == "not in use":
                block = data.draw(st.sampled_from(free), label="free block")
            elif case == "foreign":
                block = alien
            op = CachePartialBlock(request, block, n, group, size, again, pool=p)
        elif kind == "CacheFullBlocks":
            op = self.full_blocks_refused(p, case, req, held, free, keyed, alien, bs, g, data)
        elif kind == "MoveBlockHashes":
            src: object = data.draw(st.sampled_from(keyed), label="src") if keyed else some
            dst: object = some
            if case == "null":
                null = BlockRef(p, NULL_BLOCK)
                null_src = self.steer_bool(data, "src", ("null dst", "null src"))
                src, dst = (null, dst) if null_src else (src, null)
            elif case == "not a block":
                past = BlockRef(p, ps.num_blocks)
                dst = self.steer(data, "dst", [*NOT_BLOCKS, past], NOT_BLOCK_NAMES)
            elif case == "foreign":
                dst = alien
            elif case == "dst keyed":
                if not keyed:
                    return
                dst = data.draw(st.sampled_from(keyed), label="keyed dst")
            else:
                bare = [e for e in free if ps.key[e.block] is None]
                if not keyed or not bare:
                    return
                dst = data.draw(st.sampled_from(bare), label="free dst")
            op = MoveBlockHashes(src, dst, pool=p)
        elif kind == "GetCachedBlockGroups":
            if case == "hash":
                bad_hash: list[object] = ["h0:a", None, 3, ["x"]]
                h = self.steer(data, "bad hash", bad_hash, [*map(repr, bad_hash)])
                op = GetCachedBlockGroups(h, (g,), pool=p)
            else:
                bad = self.steer(data, "bad group", bad_group, [*map(repr, bad_group)])
                op = GetCachedBlockGroups(req.block_hashes[0], (g, bad), pool=p)
        else:
            top = len(tokens) // (bs // HASH_UNIT)
            args: list[object] = [req, top, bs, g]
            if case == "counts":
                args[1] = self.steer(data, "bad count", BAD_COUNTS, [*map(repr, BAD_COUNTS)])
            elif case == "block_size":
                args[2] = self.steer(data, "bad block_size", bad_size, [*map(repr, bad_size)])
            elif case == "group":
                args[3] = self.steer(data, "bad group", bad_group, [*map(repr, bad_group)])
            elif case == "request":
                args[0] = self.steer(data, "bad request", bad_request, [*map(repr, bad_request)])
            else:
                args[1] = top + 1
            op = EmitCachedBlockEvents(args[0], args[1], args[2], args[3], pool=p)
        if self.world.copy().apply(op).ok:
            return  # this state accepts it (events off, nothing cached...): not a refusal
        self.do(op, refused=True)

    def full_blocks_refused(
        self,
        p: int,
        case: str,
        req: Request,
        held: list[BlockRef],
        free: list[BlockRef],
        keyed: list[BlockRef],
        alien: BlockRef | None,
        bs: int,
        g: int,
        data: st.DataObject,
    ) -> Op:
        """A refused cache_full_blocks: one argument (or one entry) wrong, the rest valid."""
        ps = self.ps(p)
        blocks: list[object] = list(held[:2]) or [BlockRef(p, 1)]
        have = len(req.block_hashes) // (bs // HASH_UNIT)
        nc: object = 0
        nf: object = max(1, min(len(blocks), have))
        size: object = bs
        group: object = g
        request: object = req
        mask: tuple[object, ...] | None = None
        if case == "counts":
            bad = self.steer(data, "bad count", BAD_COUNTS, [*map(repr, BAD_COUNTS)])
            first = self.steer_bool(data, "which", ("num_full_blocks", "num_cached_blocks"))
            nc, nf = (bad, nf) if first else (nc, bad)
        elif case == "block_size":
            sizes: list[object] = [0, -16, 8, 24, "16", None]
            size = self.steer(data, "bad size", sizes, [*map(repr, sizes)])
        elif case == "group":
            groups: list[object] = [-1, 1 << 32, "0", None]
            group = self.steer(data, "bad group", groups, [*map(repr, groups)])
        elif case == "request":
            request = self.steer(data, "bad request", ["request", None], ["'request'", "None"])
        elif case == "mask":
            masks: list[tuple[object, ...]] = [(), (True, True, True), (1,)]
            mask = self.steer(data, "bad mask", masks, ["()", "(True, True, True)", "(1,)"])
        elif case == "too many":
            nf = len(blocks) + 1
        elif case == "hashes":
            blocks = [*held, *[BlockRef(p, NULL_BLOCK)] * (have + 1)]
            nf = have + 1
        elif case == "twice":
            blocks = [blocks[0], blocks[0]]
            nf = 2 if have >= 2 else 1
            if nf < 2:
                request = make_request("abcd", 0)
                nf = 2
        elif case == "cached":
            mine = [e for e in keyed if ps.ref[e.block] > 0]
            if mine:
                blocks = [data.draw(st.sampled_from(mine), label="cached block")]
                nf = 1
        elif case == "not in use":
            blocks = [data.draw(st.sampled_from(free), label="free block")]
            nf = 1
        elif case == "foreign":
            blocks = [alien]
            nf = 1
        return CacheFullBlocks(request, tuple(blocks), nc, nf, size, group, mask, pool=p)

    # -- the invariants, every step ----------------------------------------------------------

    @invariant()
    def inv_ref(self) -> None:
        self.check_invariant("INV-REF")

    @invariant()
    def inv_free(self) -> None:
        self.check_invariant("INV-FREE")

    @invariant()
    def inv_null(self) -> None:
        self.check_invariant("INV-NULL")

    @invariant()
    def inv_watch(self) -> None:
        self.check_invariant("INV-WATCH")

    @invariant()
    def inv_cache(self) -> None:
        self.check_invariant("INV-CACHE")

    @invariant()
    def inv_events(self) -> None:
        self.check_invariant("INV-EVENTS")

    @invariant()
    def inv_conserve(self) -> None:
        self.check_invariant("INV-CONSERVE")

    @invariant()
    def inv_list(self) -> None:
        self.check_invariant("INV-LIST")


assert len(INVARIANT_NAMES) == 8  # one @invariant above per name


def build_machine(
    factory: PoolFactory, config: LockstepConfig = LockstepConfig()
) -> type[RuleBasedStateMachine]:
    """A lockstep machine class for pools built by ``factory``, generating per ``config``.

    Run it with ``hypothesis.stateful.run_state_machine_as_test(cls, settings=...)``
    (or expose ``cls.TestCase`` to unittest/pytest). After a failure, ``cls.last_trace``
    is the trace of the final (shrunk) failing run.
    """
    name = f"Lockstep_{getattr(factory, '__name__', 'target')}_{config.level}"
    body: dict[str, Any] = {
        "factory": staticmethod(factory),
        "config": config,
        "rule_checks": Counter(),
    }
    if not any(o in config.capabilities for o in MULTIKEY_OPS):
        # no rule at all (not one whose precondition fails): Hypothesis draws among the
        # class's rules, so a target without vLLM's multi-key calls is searched exactly
        # as before they existed
        body["multikey"] = None
    machine: type[_Lockstep] = type(name, (_Lockstep,), body)
    machine.last_trace = None
    return machine


# -- settings profiles -------------------------------------------------------------------

_COMMON: dict[str, Any] = {
    "deadline": None,
    # no "explain" phase: it re-runs the shrunk example many times to annotate lines
    # of code, which costs more than finding and shrinking the failure together
    "phases": (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink),
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
}

PROFILES: dict[str, settings] = {
    # part of `make test`: deterministic, no database, a few hundred short runs
    "ci": settings(
        max_examples=200,
        stateful_step_count=30,
        derandomize=True,
        database=None,
        print_blob=False,
        **_COMMON,
    ),
    # the catalogue check (part of `make test`): ci, with shorter runs per mutant
    "mutant": settings(
        max_examples=200,
        stateful_step_count=16,
        derandomize=True,
        database=None,
        print_blob=False,
        **_COMMON,
    ),
    # a developer's run: random, remembers failures in the local example database
    "dev": settings(max_examples=1000, stateful_step_count=50, **_COMMON),
    # `make fuzz`: long runs, resumable from the shared example database
    "deep": settings(
        max_examples=20000,
        stateful_step_count=100,
        database=DirectoryBasedExampleDatabase(".hypothesis/examples"),
        **_COMMON,
    ),
}
for _name, _profile in PROFILES.items():
    settings.register_profile(f"kvpool-{_name}", _profile)


def profile(name: str) -> settings:
    """The settings of profile ``ci``, ``dev`` or ``deep``."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose from {sorted(PROFILES)}")
    return PROFILES[name]


# -- hunting a target (the catalogue check, the oracle) ------------------------------------


@dataclass
class Hunt:
    """The result of running a machine until it fails or the examples run out."""

    target: str
    killed: bool
    rule: str | None
    """What the final (shrunk) failure names (see :class:`LockstepFailure`), or None."""
    trace: Trace | None
    """The final failing run (or the last run, when nothing failed)."""
    message: str
    seconds: float
    steps: int
    """Lockstep steps (outer and nested calls) made, over every run including shrinking."""

    def summary(self) -> dict[str, object]:
        """A JSON-ready record: the shortest failing sequence as numbered readable lines."""
        ops = self.trace.ops() if self.trace is not None and self.killed else []
        return {
            "target": self.target,
            "killed": self.killed,
            "caught_by": self.rule,
            "failure": self.message.split("\n--- trace ---")[0] if self.killed else "",
            "steps_in_minimal_trace": len(ops),
            "minimal_trace": format_trace(self.trace).splitlines() if self.killed else [],
            "seconds": round(self.seconds, 3),
        }


MUTANT_FOCUS: dict[str, Any] = {"max_blocks": 8, "max_pools": 2}
"""Small pools make mutant runs fast and their minimal traces short."""


@contextmanager
def _shrink_budget(max_shrinks: int | None) -> Iterator[None]:
    """Cap how many times Hypothesis improves a failing example (its default is 500).

    A count, not a time, so that a capped run stays deterministic. Hypothesis has
    no public setting for this; the engine's module constant is patched for the
    duration of one run and restored after.
    """
    if max_shrinks is None:
        yield
        return
    from hypothesis.internal.conjecture import engine

    saved = engine.MAX_SHRINKS
    engine.MAX_SHRINKS = max_shrinks
    try:
        yield
    finally:
        engine.MAX_SHRINKS = saved


def hunt(
    factory: PoolFactory,
    config: LockstepConfig,
    run_settings: settings | None = None,
    name: str | None = None,
    max_shrinks: int | None = None,
) -> Hunt:
    """Run the lockstep machine on ``factory``; report the (shrunk) failure, if any.

    ``max_shrinks`` caps the shrinker's successful steps (None: Hypothesis' default).
    """
    import time

    from hypothesis.stateful import run_state_machine_as_test

    machine = cast(type[_Lockstep], build_machine(factory, config))
    counter = [0]
    original = machine.teardown

    def counting_teardown(self: _Lockstep) -> None:
        counter[0] += self.steps
        original(self)

    machine.teardown = counting_teardown  # type: ignore[method-assign]
    start = time.perf_counter()
    killed, rule, message = False, None, ""
    try:
        with _shrink_budget(max_shrinks):
            run_state_machine_as_test(machine, settings=run_settings or profile("ci"))
    except LockstepFailure as failure:
        killed, rule, message = True, failure.rule, str(failure)
    except Exception as exc:  # the target broke the machine itself: still a kill
        killed, rule, message = True, "target crashed", f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - start
    return Hunt(
        target=name or str(getattr(factory, "__name__", repr(factory))),
        killed=killed,
        rule=rule,
        trace=machine.last_trace,
        message=message,
        seconds=seconds,
        steps=counter[0],
    )


def kill(
    mutant: Any,
    run_settings: settings | None = None,
    max_shrinks: int | None = 20,
    **config: Any,
) -> Hunt:
    """Hunt one catalogue mutant (a :class:`kvpool.mutants.Mutant` or its name) at ``robust``.

    Uses the ``mutant`` profile (the ``ci`` profile with shorter runs), small pools
    (:data:`MUTANT_FOCUS`) and the mutant's own hints.
    """
    from kvpool import mutants

    m = mutants.get(mutant) if isinstance(mutant, str) else mutant
    # the key-level catalogue is hunted with the key-level calls (as it was before vLLM's
    # multi-key calls were made); their own catalogue with every call
    ops = ALL_OPS if m in mutants.VLLM_API_MUTANTS else ALL_OPS - set(MULTIKEY_OPS)
    cfg = impl_config(**{"capabilities": ops, **MUTANT_FOCUS, **dict(m.hints), **config})
    return hunt(m.pool_class(), cfg, run_settings or profile("mutant"), m.name, max_shrinks)


def minimal_trace(mutant: Any, run_settings: settings | None = None) -> Trace:
    """The shortest failing sequence the ``ci`` profile finds for a catalogue mutant."""
    result = kill(mutant, run_settings)
    if not result.killed or result.trace is None:
        raise LookupError(f"mutant {result.target} survived: no failing trace")
    return result.trace


__all__ = [
    "ALL_OPS",
    "MUTANT_FOCUS",
    "PROFILES",
    "Hunt",
    "LockstepConfig",
    "LockstepFailure",
    "Trace",
    "TraceStep",
    "build_machine",
    "format_trace",
    "hunt",
    "impl_config",
    "impl_invariants",
    "impl_state",
    "kill",
    "minimal_trace",
    "profile",
    "state_diff",
]


def _main(argv: list[str] | None = None) -> int:
    """``python -m kvpool.oracle.machine [PROFILE] [LEVEL]``: lockstep steps per second."""
    import sys

    from kvpool.impl import BlockPool

    args = sys.argv[1:] if argv is None else argv
    name = args[0] if args else "ci"
    level = args[1] if len(args) > 1 else "robust"
    import time

    cpu = time.process_time()
    found = hunt(BlockPool, impl_config(level=level), profile(name), name="kvpool.impl")
    cpu = time.process_time() - cpu
    rate = found.steps / found.seconds if found.seconds else 0.0
    print(
        f"profile {name}, level {level}: {found.steps} lockstep steps in {found.seconds:.2f} s "
        f"wall ({cpu:.2f} s CPU) = {rate:.0f} steps/s wall, {found.steps / max(cpu, 1e-9):.0f}"
        f" steps/s CPU; {'FAILED: ' + found.message if found.killed else 'all passed'}"
    )
    return 1 if found.killed else 0


if __name__ == "__main__":
    raise SystemExit(_main())
