"""What the oracle can check: target names, how each is built, and what it can do.

The target registry: :func:`resolve` turns a target string into a
:class:`~.target_base.Target` (whose type, capability names and errors are
:mod:`.target_base`, below every kind of target, :mod:`.cmd_target` included).

A target string names a pool implementation:

* ``reference`` -- kvpool.impl (the reference pool);
* ``spec`` -- the executable spec itself behind vLLM's API (a self-check of the oracle);
* ``vllm`` or ``vllm==X.Y.Z`` -- vLLM's real ``BlockPool`` (see :mod:`.vllm_target`);
* ``python:module:Name`` -- any class or factory with vLLM's ``BlockPool`` API;
* ``cmd:COMMAND`` -- a pool in another process, over the JSON-lines protocol
  (see :mod:`.cmd_target`).

A Python target needs no adapter code when it keeps vLLM's API:
``Name(num_gpu_blocks, enable_caching=..., enable_kv_cache_events=...)`` with
``.blocks`` (objects with ``block_id``) and the methods below. Methods it lacks are
*capabilities* it lacks; the oracle tests what exists and says what it skipped. A pool
that is vLLM's own class (it has ``cache_full_blocks`` but no ``cache_blocks``) is
wrapped in the same adapter as the ``vllm`` target (:func:`~.vllm_target.class_factory`),
whose API epoch and capabilities are probed on the class itself, not on the adapter.
Without ``take_events`` a run has events off, without a prefix cache caching off, and
when its blocks do not know their pool one pool per run (``kvpool conform --events``,
``--caching``, ``--max-pools`` override). To let the oracle compare the whole
state and check every INV-* on the target, a pool may also offer
``kvpool_state() -> kvpool.spec.PoolState``; pools built like kvpool.impl (``_index``,
``_watchers``) and like vLLM (``cached_block_hash_to_block``) are read without it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvpool.spec.errors import ERROR_CLASSES
from kvpool.spec.invariants import INVARIANTS, Violation, check_pool
from kvpool.spec.ops import (
    BlockRef,
    CacheBlocks,
    EvictBlocks,
    FreeBlocks,
    GetCachedBlock,
    GetNewBlocks,
    GetNumFreeBlocks,
    GetUsage,
    IsBlockWritable,
    Op,
    ResetPrefixCache,
    TakeEvents,
    Touch,
    UnpinBlocks,
)
from kvpool.spec.state import PoolState, World

from .driver import Driver, PoolFactory, call_guard
from .machine import checks
from .target_base import (
    DROP_POOL,
    EVICT_FIRST,
    GROUP_LOOKUP,
    GROUP_LOOKUP_METHOD,
    METHODS,
    MULTI_POOL,
    Target,
    TargetBroken,
    TargetError,
    describe_skips,
)


class UnknownTarget(TargetError):
    """A target string of no kind the oracle knows (not a name, no known prefix)."""


TRUSTED = ("reference", "spec")
"""Targets that are part of kvpool: the only ones ``kvpool replay`` runs without
``--target`` when a trace names them (a file never chooses a command or module)."""

DEFAULT_CALL_TIMEOUT = 10.0
"""Seconds one call into a ``python:`` or ``cmd:`` target may take (``--call-timeout``)."""

_VERSION = re.compile(r"[0-9]+(\.[0-9]+)*([.+-]?[A-Za-z0-9]+)*")


# -- the spec behind vLLM's API ----------------------------------------------------------


class SpecBlock:
    """A block of a :class:`SpecPool`: just its name."""

    __slots__ = ("__weakref__", "block_id", "pool_index")

    def __init__(self, pool_index: int, block_id: int) -> None:
        self.pool_index = pool_index
        self.block_id = block_id

    def __repr__(self) -> str:
        return f"SpecBlock({self.pool_index}:{self.block_id})"


class SpecPool:
    """The executable spec with vLLM's ``BlockPool`` API: every call is one ``World.apply``.

    Pools built by one :func:`spec_factory` share a world, so cross-pool frees work;
    a pool that is garbage collected becomes a gone pool of that world.
    """

    def __init__(
        self,
        world: World,
        callables: dict[int, Any],
        num_blocks: int,
        caching: bool = True,
        events: bool = False,
    ) -> None:
        self.world = world
        self.index = len(world.pools)
        world.pools.append(PoolState.initial(num_blocks, caching, events))
        world.alive.append(True)
        self.blocks = [SpecBlock(self.index, b) for b in range(num_blocks)]
        self._callables = callables
        self._all_blocks: list[list[SpecBlock]] = getattr(world, "_kvpool_blocks", [])
        self._all_blocks.append(self.blocks)
        world._kvpool_blocks = self._all_blocks  # type: ignore[attr-defined]
        weakref.finalize(self, _mark_gone, world, self.index)

    def _ref(self, block: object) -> object:
        if isinstance(block, SpecBlock):
            return BlockRef(block.pool_index, block.block_id)
        return f"not a block: {block!r}"  # never a name in this pool's shared world

    def _refs(self, blocks: object) -> tuple[object, ...]:
        return tuple(self._ref(b) for b in blocks)  # type: ignore[attr-defined]

    def _watcher(self, fn: object) -> object:
        if not callable(fn):
            return "not callable"
        wid = id(fn)
        self._callables[wid] = fn
        return wid

    def _run(self, op: Op) -> Any:
        out = self.world.apply(op)
        if out.error is not None:
            raise ERROR_CLASSES[out.error](out.detail)
        for f in out.fired:
            fn = self._callables[f.watcher]
            try:
                fn(self._all_blocks[f.pool][f.block])
            except Exception as exc:  # a watcher's failure stops nothing
                sys.unraisablehook(_unraisable(exc, fn))  # type: ignore[arg-type]
        return out.value

    def get_new_blocks(self, num_blocks: object) -> list[SpecBlock]:
        ids = self._run(GetNewBlocks(num_blocks, pool=self.index))
        return [self.blocks[b] for b in ids]

    def free_blocks(self, blocks: object, evict_first: object = False) -> None:
        self._run(FreeBlocks(self._refs(blocks), evict_first, pool=self.index))

    def touch(self, blocks: object) -> None:
        self._run(Touch(self._refs(blocks), pool=self.index))

    def unpin_blocks(self, blocks: object, on_reuse: object) -> None:
        self._run(UnpinBlocks(self._refs(blocks), self._watcher(on_reuse), pool=self.index))

    def cache_blocks(self, blocks: object, keys: object) -> None:
        self._run(CacheBlocks(self._refs(blocks), tuple(keys), pool=self.index))  # type: ignore[arg-type]

    def get_cached_block(self, key: object) -> SpecBlock | None:
        b = self._run(GetCachedBlock(key, pool=self.index))
        return None if b is None else self.blocks[b]

    def evict_blocks(self, block_ids: object) -> None:
        self._run(EvictBlocks(tuple(block_ids), pool=self.index))  # type: ignore[arg-type]

    def reset_prefix_cache(self) -> bool:
        return bool(self._run(ResetPrefixCache(pool=self.index)))

    def get_num_free_blocks(self) -> int:
        return int(self._run(GetNumFreeBlocks(pool=self.index)))

    def get_usage(self) -> float:
        return float(self._run(GetUsage(pool=self.index)))

    def is_block_writable(self, block: object) -> bool:
        return bool(self._run(IsBlockWritable(self._ref(block), pool=self.index)))

    def take_events(self) -> list[object]:
        return list(self._run(TakeEvents(pool=self.index)))

    def kvpool_state(self) -> PoolState:
        ps = self.world.pools[self.index].copy()
        ids = {wid: getattr(fn, "watcher_id", wid) for wid, fn in self._callables.items()}
        ps.pending = {b: [ids.get(w, w) for w in ws] for b, ws in ps.pending.items()}
        return ps


class _unraisable:
    def __init__(self, exc: BaseException, obj: object) -> None:
        self.exc_type = type(exc)
        self.exc_value = exc
        self.exc_traceback = exc.__traceback__
        self.err_msg = "Exception ignored in a block pool reuse watcher"
        self.object = obj


def _mark_gone(world: World, index: int) -> None:
    world.alive[index] = False


def spec_factory() -> PoolFactory:
    """A factory of :class:`SpecPool` sharing one world (and so allowing cross-pool frees)."""
    world = World([], [])
    callables: dict[int, Any] = {}

    def factory(num_blocks: int, caching: bool, events: bool) -> SpecPool:
        return SpecPool(world, callables, num_blocks, caching, events)

    factory.__name__ = "spec"
    return factory


# -- reading state -------------------------------------------------------------------------


_IMPL_LAYOUT = ("_index", "_watchers", "free_block_queue", "_events")
"""What :func:`kvpool.impl.bridge.abstract` reads (pools built like kvpool.impl)."""


def _wid(fn: Any) -> int:
    from .vllm_target import _watcher_id

    return _watcher_id(fn)


def _state_reader(pool: Any) -> Callable[[Driver, int], PoolState] | None:
    """How to read a pool of this kind as a spec state, or None when it exposes nothing."""
    from kvpool.impl.bridge import abstract

    from .vllm_target import VLLM_LAYOUT, VllmPool, decoded_state, vllm_state

    if hasattr(pool, "kvpool_state"):
        return lambda d, i: d.pool(i).kvpool_state()
    if isinstance(pool, VllmPool):
        if hasattr(pool.inner, "kvpool_state"):  # a fork that says what its state is
            return lambda d, i: decoded_state(d.pool(i))
        if all(hasattr(pool.inner, a) for a in _IMPL_LAYOUT):  # kvpool's own, vLLM's API
            return lambda d, i: decoded_state(d.pool(i), abstract(d.pool(i).inner, _wid))
        if all(hasattr(pool.inner, a) for a in VLLM_LAYOUT):
            return lambda d, i: vllm_state(d.pool(i))
        return None
    if all(hasattr(pool, a) for a in _IMPL_LAYOUT):
        return lambda d, i: abstract(d.pool(i))
    return None


def _invariant_reader(pool: Any) -> Callable[[Driver, int], list[Violation]] | None:
    from .vllm_target import VLLM_LAYOUT, VllmPool, vllm_list_violations, vllm_state

    if (
        isinstance(pool, VllmPool)
        and not hasattr(pool.inner, "kvpool_state")
        and not all(hasattr(pool.inner, a) for a in _IMPL_LAYOUT)
        and all(hasattr(pool.inner, a) for a in VLLM_LAYOUT)
    ):  # the spec's INV-* on its state, and the free list's own shape

        @checks("INV-LIST", *INVARIANTS)
        def vllm_inv(d: Driver, i: int) -> list[Violation]:
            return vllm_list_violations(d.pool(i)) + check_pool(vllm_state(d.pool(i)))

        return vllm_inv
    if hasattr(pool, "check_invariants") and hasattr(pool, "_index"):
        from kvpool.impl.bridge import check_invariants

        @checks("INV-LIST", *INVARIANTS)
        def impl_inv(d: Driver, i: int) -> list[Violation]:
            return check_invariants(d.pool(i))

        return impl_inv
    return None


# -- building a target from its name ------------------------------------------------------


def _capabilities(pool: Any) -> frozenset[str]:
    """What ``pool`` can do, asked of the pool class itself.

    An adapter in front of a class (:class:`~.vllm_target.VllmPool`) says which of its
    methods the class behind it backs (``kvpool_methods()``), whether its ``free_blocks``
    takes ``evict_first`` and whether its blocks can be freed into another pool; any
    other pool is probed directly.
    """
    backed = getattr(pool, "kvpool_methods", None)
    methods = backed() if callable(backed) else None
    caps = {
        cap
        for cap, meth in METHODS.items()
        if callable(getattr(pool, meth, None)) and (methods is None or meth in methods)
    }
    if GROUP_LOOKUP in caps and not (
        GROUP_LOOKUP_METHOD in methods if methods is not None else _takes_groups(pool)
    ):
        caps.discard(GROUP_LOOKUP)
    asked = getattr(pool, "kvpool_evict_first", None)
    if callable(asked):
        if asked():
            caps.add(EVICT_FIRST)
    elif (free := getattr(pool, "free_blocks", None)) is not None:
        try:
            if "evict_first" in inspect.signature(free).parameters:
                caps.add(EVICT_FIRST)
        except (TypeError, ValueError):
            pass
    multi = getattr(pool, "kvpool_multi_pool", None)
    if not callable(multi) or multi():
        caps.update((DROP_POOL, MULTI_POOL))
    return frozenset(caps)


def _takes_groups(pool: Any) -> bool:
    """Whether ``pool.get_cached_block`` takes vLLM's ``(block_hash, group_ids)``."""
    try:
        params = list(inspect.signature(pool.get_cached_block).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(p.kind in positional for p in params) >= 2 or any(
        p.kind == p.VAR_POSITIONAL for p in params
    )


def _defaults(caps: frozenset[str]) -> dict[str, Any]:
    """Run settings the target's capabilities fix: no events without ``take_events``, no
    caching without a prefix cache (``kvpool conform --events/--caching`` override)."""
    out: dict[str, Any] = {}
    if "TakeEvents" not in caps:
        out["events"] = False
    if "CacheBlocks" not in caps and "GetCachedBlock" not in caps:
        out["caching"] = False
    return out


def _vllm_shaped(obj: Any) -> bool:
    """A vLLM-API class (a release, a fork, a subclass): it caches with ``cache_full_blocks``."""
    return (
        inspect.isclass(obj)
        and callable(getattr(obj, "cache_full_blocks", None))
        and not hasattr(obj, "cache_blocks")
    )


def _python_factory(obj: Any) -> PoolFactory:
    if _vllm_shaped(obj):  # drive its prefix cache through its own methods
        from .vllm_target import class_factory

        return class_factory(obj)

    def factory(n: int, caching: bool, events: bool) -> Any:
        return obj(n, enable_caching=caching, enable_kv_cache_events=events)

    return factory


def resolve(
    spec: str, version_default: str | None = None, call_timeout: float | None = None
) -> Target:
    """Build the :class:`Target` a target string names (:class:`TargetError` if none).

    ``call_timeout`` bounds each call into a ``python:`` or ``cmd:`` target (a call that
    takes longer raises :class:`~.exits.TargetHung`). A target that is found but raises
    while it is imported or builds its first pool is :class:`TargetBroken`.
    """
    timeout = None
    if spec == "reference":
        from kvpool.impl import BlockPool

        from .driver import by_keyword

        factory: PoolFactory = by_keyword(BlockPool)
        name = "reference"
    elif spec == "spec":
        factory, name = spec_factory(), "spec"
    elif spec == "vllm" or spec.startswith("vllm=="):
        from .vllm_target import DEFAULT_VLLM_VERSION, VllmUnavailable, vllm_factory

        version = spec.partition("==")[2] or version_default or DEFAULT_VLLM_VERSION
        if not _VERSION.fullmatch(version):
            raise TargetError(f"{spec!r}: {version!r} is not a release number")
        try:
            factory, name = vllm_factory(version), f"vllm=={version}"
        except VllmUnavailable as exc:
            text = str(exc)
            if "No matching distribution" in text or "Could not find a version" in text:
                raise TargetError(f"no vLLM release {version} on the package index") from exc
            raise  # a release that exists but that the oracle cannot load: an oracle error
    elif spec.startswith("python:"):
        parts = spec.split(":")
        if len(parts) != 3 or not parts[1] or not parts[2]:
            raise TargetError(f"expected python:module:Name, got {spec!r}")
        obj: Any = _import(parts[1])
        for attr in parts[2].split("."):
            if not hasattr(obj, attr):
                raise TargetError(f"{parts[1]} has no {parts[2]!r}")
            obj = getattr(obj, attr)
        factory, name, timeout = _python_factory(obj), spec, call_timeout
    elif spec.startswith("cmd:"):
        from .cmd_target import cmd_target

        return cmd_target(spec[4:], call_timeout)
    else:
        raise UnknownTarget(
            f"unknown target {spec!r}: use reference, spec, vllm[==X.Y.Z], "
            "python:module:Name or cmd:COMMAND"
        )
    return _probed(name, factory, timeout)


def _path_hint(missing: str) -> str:
    """A hint when the module the user named sits in the current directory: ``python:``
    imports the way Python does, and the ``kvpool`` script's path does not include it."""
    top = missing.split(".", 1)[0]
    here = Path.cwd()
    if (here / f"{top}.py").is_file() or (here / top / "__init__.py").is_file():
        return f" on sys.path ({top!r} is in the current directory: run with PYTHONPATH=.)"
    return " (python: imports the way Python does: put its directory on PYTHONPATH)"


def _import(module: str) -> Any:
    """The module a ``python:`` target names: a wrong name is a :class:`TargetError`, a
    module that exists but raises while it is imported is :class:`TargetBroken`."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module == missing or module.startswith(missing + ".")):
            raise TargetError(
                f"cannot import {module!r}: no module named {missing!r}{_path_hint(missing)}"
            ) from exc
        raise TargetBroken(
            f"importing {module!r} failed: {type(exc).__name__}: {exc}", exc
        ) from exc
    except (ValueError, TypeError) as exc:  # an empty or relative module name
        raise TargetError(f"cannot import {module!r}: {exc}") from exc
    except Exception as exc:
        raise TargetBroken(
            f"importing {module!r} failed: {type(exc).__name__}: {exc}", exc
        ) from exc


def _guarded(fn: Callable[[Driver, int], Any] | None, timeout: float | None, what: str) -> Any:
    if fn is None or not timeout:
        return fn

    @functools.wraps(fn)  # keeps what it is marked with (``checks``)
    def guarded(d: Driver, i: int) -> Any:
        with call_guard(timeout, f"{what} of pool {i}"):
            return fn(d, i)

    return guarded


def _probed(name: str, factory: PoolFactory, timeout: float | None = None) -> Target:
    """The target ``factory`` builds, with what a probe pool shows it can do and expose.

    ``timeout``: every call into the target's pools is bounded (:func:`.driver.call_guard`).
    """
    if timeout:
        inner = factory

        def timed(n: int, caching: bool, events: bool) -> Any:
            return inner(n, caching, events)

        timed.kvpool_call_timeout = timeout  # type: ignore[attr-defined]
        timed.__name__ = getattr(inner, "__name__", "factory")
        factory = timed
    try:
        with call_guard(timeout, "building a pool of 4 blocks"):
            probe = factory(4, True, True)
    except Exception as exc:  # TargetHung included
        why = f"{name}: building a pool of 4 blocks failed: {type(exc).__name__}: {exc}"
        raise TargetBroken(why, exc) from exc
    caps = _capabilities(probe)
    if not caps & set(METHODS):
        raise TargetError(
            f"{name}: {type(probe).__name__} has none of the pool methods "
            f"({', '.join(sorted(set(METHODS.values())))})"
        )
    reader = _guarded(_state_reader(probe), timeout, "reading the state")
    inv = _guarded(_invariant_reader(probe), timeout, "checking the invariants")
    if reader is not None and inv is None:

        @checks(*INVARIANTS)
        def inv(d: Driver, i: int, _r: Any = reader) -> list[Violation]:
            return check_pool(_r(d, i))

    del probe
    return Target(
        name=name,
        factory=factory,
        capabilities=caps,
        state_check=reader,
        target_invariants=inv,
        skipped=describe_skips(caps, reader is not None),
        defaults=_defaults(caps),
    )


def as_target(target: Any) -> Target:
    """A :class:`Target` from a target string, a Target, or a pool class/factory."""
    if isinstance(target, Target):
        return target
    if isinstance(target, str):
        return resolve(target)
    return _probed(getattr(target, "__name__", repr(target)), _python_factory(target))
