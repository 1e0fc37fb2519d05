"""Run spec operations against a concrete pool with vLLM's API, and report in spec terms.

The :class:`Driver` is the one place where spec data (:class:`BlockRef`, watcher
ids, :class:`Outcome`) meets concrete objects (blocks, callables, exceptions).
The lockstep tests and the oracle both use it: apply an op to the spec, execute
the same op through the driver, compare the two outcomes.

Watchers are :class:`ScriptedWatcher` objects: each records its firings and may
be given an *action* -- raise, or call back into the pool with a nested operation.
Nested operations are recorded in execution order (:attr:`Driver.nested`), which
is the order the spec must apply them in: a watcher runs only after the outer
operation's state is complete, so "outer, then each nested call as it started"
is a sequential history.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kvpool.spec.errors import ErrorKind
from kvpool.spec.ops import (
    BlockRef,
    CacheBlocks,
    CacheFullBlocks,
    CachePartialBlock,
    DropPool,
    EmitCachedBlockEvents,
    EvictBlocks,
    Firing,
    FreeBlocks,
    GetCachedBlock,
    GetCachedBlockGroups,
    GetNewBlocks,
    GetNumFreeBlocks,
    GetUsage,
    IsBlockWritable,
    MoveBlockHashes,
    Op,
    Outcome,
    Request,
    ResetPrefixCache,
    TakeEvents,
    Touch,
    UnpinBlocks,
)

from .exits import VIOLATION, TargetCrashed, TargetHung

PoolFactory = Callable[[int, bool, bool], Any]
"""``factory(num_blocks, enable_caching, enable_kv_cache_events) -> pool``.

A factory may carry ``kvpool_call_timeout`` (seconds): every call the :class:`Driver`
makes on its pools then runs under :func:`call_guard`."""


# -- a per-call timeout for in-process (python:) targets ------------------------------------


class _Alarm(BaseException):
    """Raised into the target's code by SIGALRM; a BaseException, so that a target's
    ``except Exception`` does not swallow it. Becomes :class:`TargetHung` at the call."""


HARD_EXIT_HOOKS: list[Callable[[], None]] = []
"""Run before the watchdog ends the process (each ends child processes it knows of)."""


def _hard_exit(call: str, timeout: float) -> None:  # pragma: no cover - ends the process
    for hook in HARD_EXIT_HOOKS:
        with contextlib.suppress(Exception):
            hook()
    sys.stderr.write(
        f"kvpool: target hung: {call} did not return within {timeout:g} s and could not be "
        "interrupted (a call that does not return to Python); ending the oracle\n"
    )
    sys.stderr.flush()
    os._exit(VIOLATION)


@contextlib.contextmanager
def call_guard(timeout: float | None, call: str) -> Iterator[None]:
    """Run the body with a deadline of ``timeout`` seconds; past it, :class:`TargetHung`.

    In-process, on the main thread: SIGALRM interrupts the target's Python code (and any
    system call that returns EINTR), re-firing every ``timeout`` seconds in case the
    target catches it. A call stuck where no signal reaches it (a C loop that never
    returns to Python) is ended by a watchdog thread after twice the timeout: it runs
    :data:`HARD_EXIT_HOOKS` and exits the process with code 1 (a hang is a finding).
    No timeout, or not on the main thread (where signals cannot be used): no guard.
    """
    if (
        not timeout
        or threading.current_thread() is not threading.main_thread()
        or not hasattr(signal, "setitimer")
    ):
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Alarm

    _watchdog_running()
    old = signal.signal(signal.SIGALRM, on_alarm)
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, timeout, timeout)
            _WATCHED[:] = [time.monotonic() + 2 * timeout + 1, call, timeout]
            yield
        finally:
            _WATCHED[:] = [None, "", 0.0]
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    except _Alarm:
        raise TargetHung(call, timeout) from None


_WATCHED: list[Any] = [None, "", 0.0]
"""The guarded call in progress: [hard deadline (monotonic) or None, its name, timeout]."""
_WATCHDOG: list[threading.Thread] = []


def _watchdog_running() -> None:
    """One daemon thread for the process, polling :data:`_WATCHED` (a call pays only for
    setting it)."""
    if _WATCHDOG and _WATCHDOG[0].is_alive():
        return

    def watch() -> None:  # pragma: no cover - runs in its own thread
        while True:
            time.sleep(0.1)
            deadline, call, timeout = _WATCHED
            if deadline is not None and time.monotonic() > deadline:
                _hard_exit(call, timeout)

    thread = threading.Thread(target=watch, name="kvpool-call-watchdog", daemon=True)
    thread.start()
    _WATCHDOG[:] = [thread]


def by_keyword(factory: PoolFactory) -> PoolFactory:
    """A factory that builds ``factory`` by keyword if it takes vLLM's constructor.

    vLLM's ``BlockPool`` (and kvpool.impl's, a drop-in for it) take
    ``hash_block_size`` third, so ``cls(n, caching, events)`` would misread ``events``.
    """
    if not isinstance(factory, type):
        return factory
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return factory
    if "hash_block_size" not in params:
        return factory
    cls = factory

    def build(num_blocks: int, caching: bool, events: bool) -> Any:
        return cls(num_blocks, enable_caching=caching, enable_kv_cache_events=events)

    return build


_KINDS = {k.value: k for k in ErrorKind}


class WatcherRaised(Exception):
    """What a watcher scripted to fail raises (the pool must report it and carry on)."""


@dataclass
class WatcherAction:
    """What a scripted watcher does when it fires: raise, or run ``op`` on the pool."""

    raise_error: bool = False
    op: Op | None = None


class ScriptedWatcher:
    """A watcher with an id the spec can name, and an optional action."""

    def __init__(self, driver: Driver, watcher_id: int) -> None:
        self.watcher_id = watcher_id
        self._driver = driver
        self.action: WatcherAction | None = None

    def __call__(self, block: Any) -> None:
        self._driver._on_fire(self, block)

    def __repr__(self) -> str:
        return f"watcher#{self.watcher_id}"


def error_kind_of(exc: BaseException) -> ErrorKind | None:
    """The error kind a pool's exception stands for: its ``kind`` attribute or its class name."""
    kind = getattr(exc, "kind", None)
    if isinstance(kind, ErrorKind):
        return kind
    if isinstance(kind, str) and kind in _KINDS:
        return _KINDS[kind]
    for cls in type(exc).__mro__:
        if cls.__name__ in _KINDS:
            return _KINDS[cls.__name__]
    return None


class Driver:
    """Executes spec operations on concrete pools built by ``factory``."""

    def __init__(self, factory: PoolFactory, configs: list[tuple[int, bool, bool]]) -> None:
        self.timeout: float | None = getattr(factory, "kvpool_call_timeout", None)
        self.factory = by_keyword(factory)
        self.pools: list[Any | None] = []
        self._blocks: list[list[Any]] = []
        self._ref_of: dict[int, BlockRef] = {}
        self._watchers: dict[int, ScriptedWatcher] = {}
        self._fired_stack: list[list[Firing]] = []
        self.nested: list[tuple[Op, Outcome]] = []
        """Operations watchers ran during the last :meth:`execute`, in the order they started."""
        self.unraisable: list[BaseException] = []
        """Exceptions the pools reported through ``sys.unraisablehook`` during the last call."""
        for num_blocks, caching, events in configs:
            self.add_pool(num_blocks, caching, events)

    # -- naming ----------------------------------------------------------------------

    def add_pool(self, num_blocks: int, caching: bool, events: bool) -> int:
        where = f"building a pool of {num_blocks} blocks"
        with call_guard(self.timeout, where):
            try:
                pool = self.factory(num_blocks, caching, events)
                blocks = list(pool.blocks)
            except Exception as exc:  # the target's constructor, not the oracle
                raise TargetCrashed(where, exc) from exc
        index = len(self.pools)
        self.pools.append(pool)
        self._blocks.append(blocks)
        for b in blocks:
            self._ref_of[id(b)] = BlockRef(index, b.block_id)
        return index

    def block(self, ref: object) -> Any:
        """The concrete block a spec entry names; an ill-formed entry is passed through as is."""
        if isinstance(ref, BlockRef) and 0 <= ref.pool < len(self._blocks):
            blocks = self._blocks[ref.pool]
            if 0 <= ref.block < len(blocks):
                return blocks[ref.block]
        return ref

    def ref(self, block: Any) -> BlockRef:
        return self._ref_of[id(block)]

    def watcher(self, wid: object) -> Any:
        """The callable for spec watcher id ``wid`` (the same object every time); else ``wid``."""
        if type(wid) is not int:
            return wid
        w = self._watchers.get(wid)
        if w is None:
            w = self._watchers[wid] = ScriptedWatcher(self, wid)
        return w

    def set_action(self, wid: int, action: WatcherAction | None) -> None:
        self.watcher(wid).action = action

    def pool(self, index: int) -> Any:
        pool = self.pools[index]
        if pool is None:
            raise LookupError(f"pool {index} is gone")
        return pool

    # -- execution ---------------------------------------------------------------------

    def execute(self, op: Op) -> Outcome:
        """Run ``op``; nested operations started by watchers go to :attr:`nested`."""
        self.nested = []
        self.unraisable = []
        old_hook = sys.unraisablehook
        sys.unraisablehook = self._on_unraisable
        try:
            with call_guard(self.timeout, "the call"):
                return self._execute(op)
        finally:
            sys.unraisablehook = old_hook

    def _on_unraisable(self, args: Any) -> None:
        self.unraisable.append(args.exc_value)

    def _on_fire(self, watcher: ScriptedWatcher, block: Any) -> None:
        ref = self.ref(block)
        self._fired_stack[-1].append(Firing(watcher.watcher_id, ref.pool, ref.block))
        action = watcher.action
        if action is None:
            return
        if action.op is not None:
            slot = len(self.nested)
            self.nested.append((action.op, Outcome()))
            self.nested[slot] = (action.op, self._execute(action.op))
        if action.raise_error:
            raise WatcherRaised(f"watcher {watcher.watcher_id} fails on purpose")

    def _execute(self, op: Op) -> Outcome:
        self._fired_stack.append([])
        try:
            value = self._call(op)
            error = None
        except (TargetCrashed, TargetHung):  # already attributed (a nested call, a timeout)
            raise
        except Exception as exc:
            kind = error_kind_of(exc)
            if kind is None:  # no pool error: the target crashed (its traceback kept)
                method = CALLS[type(op)][0] if type(op) in CALLS else type(op).__name__
                raise TargetCrashed(method, exc) from exc
            value, error = None, kind
        finally:
            fired = tuple(self._fired_stack.pop())
        return Outcome(value=value, error=error, fired=fired)

    def _call(self, op: Op) -> object:
        if isinstance(op, DropPool):
            self.pools[op.pool] = None
            return None
        method, args, result = CALLS[type(op)]
        pos, kw = args(self, op)
        return result(getattr(self.pool(op.pool), method)(*pos, **kw))


_Args = Callable[[Driver, Any], tuple[tuple[object, ...], dict[str, object]]]
_NO_ARGS: _Args = lambda d, op: ((), {})  # noqa: E731


def _ignored(result: object) -> None:
    return None


def _blocks(d: Driver, op: Any) -> list[Any]:
    return [d.block(e) for e in op.blocks]


class RequestView:
    """A spec :class:`~kvpool.spec.ops.Request` as vLLM's pool reads a request (attributes
    only: vLLM 0.33.0's ``block_hashes``, ``all_token_ids``, ``lora_request``,
    ``mm_features``, ``cache_salt``, ``session_id``; no vLLM import)."""

    def __init__(self, req: Request) -> None:
        self.request_id = "kvpool"
        self.block_hashes = list(req.block_hashes)
        self.all_token_ids = list(req.all_token_ids)
        self.num_tokens = len(self.all_token_ids)
        self.lora_request = None if req.lora is None else _LoraView(req.lora)
        self.mm_features = [_MMView(f.identifier, f.offset, f.length) for f in req.mm]
        self.cache_salt = req.cache_salt
        self.session_id = req.session_id
        self.prompt_embeds = req.prompt_embeds  # the rows of bytes: kvpool's pool reads them

    def __repr__(self) -> str:
        return f"RequestView({len(self.block_hashes)} hashes)"


class _LoraView:
    def __init__(self, lora: Any) -> None:
        self.adapter_id = lora.adapter_id
        self.name = self.lora_name = lora.name
        self.lora_path = lora.path


class _Span:
    def __init__(self, offset: int, length: int) -> None:
        self.offset, self.length = offset, length


class _MMView:
    def __init__(self, identifier: str, offset: int, length: int) -> None:
        self.identifier = identifier
        self.mm_position = _Span(offset, length)


def request_view(req: object) -> object:
    """What the driver passes for a call's request: a :class:`RequestView` of a spec
    request; anything else (an ill-formed request, at ``robust``) as it is."""
    return RequestView(req) if isinstance(req, Request) else req


def _group_hit(blocks: Any) -> object:
    return None if blocks is None else tuple(b.block_id for b in blocks)


CALLS: dict[type[Op], tuple[str, _Args, Callable[[Any], object]]] = {
    GetNewBlocks: (
        "get_new_blocks",
        lambda d, op: ((op.n,), {}),
        lambda blocks: tuple(b.block_id for b in blocks),
    ),
    FreeBlocks: (
        "free_blocks",  # evict_first only when asked: vLLM 0.33 has no such parameter
        lambda d, op: (
            (_blocks(d, op),),
            {} if op.evict_first is False else {"evict_first": op.evict_first},
        ),
        _ignored,
    ),
    Touch: ("touch", lambda d, op: ((_blocks(d, op),), {}), _ignored),
    UnpinBlocks: (
        "unpin_blocks",
        lambda d, op: ((_blocks(d, op), d.watcher(op.watcher)), {}),
        _ignored,
    ),
    CacheBlocks: ("cache_blocks", lambda d, op: ((_blocks(d, op), list(op.keys)), {}), _ignored),
    GetCachedBlock: (
        "get_cached_block",
        lambda d, op: ((op.key,), {}),
        lambda block: None if block is None else block.block_id,
    ),
    EvictBlocks: ("evict_blocks", lambda d, op: ((list(op.block_ids),), {}), _ignored),
    ResetPrefixCache: ("reset_prefix_cache", _NO_ARGS, bool),
    GetNumFreeBlocks: ("get_num_free_blocks", _NO_ARGS, lambda n: n),
    GetUsage: ("get_usage", _NO_ARGS, float),
    IsBlockWritable: ("is_block_writable", lambda d, op: ((d.block(op.block),), {}), bool),
    TakeEvents: ("take_events", _NO_ARGS, tuple),
    # vLLM 0.33.0's calls on blocks with several keys (requests as RequestView)
    CacheFullBlocks: (
        "cache_full_blocks",
        lambda d, op: (
            (
                request_view(op.request),
                _blocks(d, op),
                op.num_cached_blocks,
                op.num_full_blocks,
                op.block_size,
                op.group,
            ),
            {} if op.block_mask is None else {"block_mask": list(op.block_mask)},
        ),
        _ignored,
    ),
    CachePartialBlock: (
        "cache_partial_block",
        lambda d, op: (
            (
                request_view(op.request),
                d.block(op.block),
                op.num_tokens,
                op.group,
                op.block_size,
            ),
            {}
            if op.replace_existing_hashes is False
            else {"replace_existing_hashes": op.replace_existing_hashes},
        ),
        lambda key: key,
    ),
    MoveBlockHashes: (
        "move_block_hashes",
        lambda d, op: ((d.block(op.src), d.block(op.dst)), {}),
        _ignored,
    ),
    GetCachedBlockGroups: (
        "get_cached_block",  # vLLM's form: (block_hash, kv_cache_group_ids)
        lambda d, op: ((op.block_hash, list(op.group_ids)), {}),
        _group_hit,
    ),
    EmitCachedBlockEvents: (
        "emit_cached_block_events",
        lambda d, op: (
            (request_view(op.request), op.num_cached_blocks, op.block_size, op.group),
            {},
        ),
        _ignored,
    ),
}
"""Every pool operation (all but DropPool): the method it calls on a vLLM-API pool, how the
spec operation's arguments become the call's, and how the call's result becomes the spec's
value. The one op -> pool-call translation of the oracle (target_base.METHODS is derived)."""
