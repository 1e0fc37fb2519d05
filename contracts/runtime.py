"""Opt-in run-time checking of the PEP 316 contracts written in the docstrings.

In normal use the contracts cost nothing: they are docstring text, and Python
never evaluates docstrings. To debug an integration (your scheduler drives the
pool, something goes wrong), turn checking on::

    import kvpool.contracts.runtime as rt
    rt.enable()              # every contract-carrying method of the pool, queue and spec
    ...                      # your code; a broken contract raises ContractViolation
    rt.disable()             # the original functions are put back

    with rt.checking():      # the same, for a block of code
        ...

or run a test suite with ``python -m pytest -p kvpool.contracts.pytest_plugin``, or
set ``KVPOOL_CONTRACTS=1`` and ``import kvpool.contracts.runtime`` (the import
enables it then). Checking is slow (each call snapshots the pool for ``__old__``
and walks the free queue several times); it is for debugging, never for serving.

What is checked, per call of a wrapped method: its ``pre:`` conditions and the
class's ``inv:`` conditions (public methods only, as CrossHair does) before the
call; after a normal return its ``post:`` conditions and the invariants; after an
exception the invariants (a refused call must leave a consistent state). The
invariants of an object include those of its parts: a pool's free queue, a
world's live pools. ``__old__.self`` is a snapshot of the receiver taken before
the call; other ``__old__`` arguments are the argument objects themselves.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import os
import re
import threading
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Clause",
    "ConcurrentUse",
    "ContractViolation",
    "checked_call",
    "checking",
    "class_invariants",
    "disable",
    "enable",
    "enabled",
    "method_clauses",
    "parse_clauses",
]

_HEADER = re.compile(r"^(\s*)(pre|post|inv|raises)(\[[^\]]*\])?:\s*(.*)$")
_TAG = re.compile(r"^\s*#\s*(INV-[A-Z]+)")


@dataclass(frozen=True)
class Clause:
    """One condition: its kind, its source text, the invariant it is tagged with, where it is."""

    kind: str
    """``pre``, ``post`` or ``inv``."""
    expr: str
    tag: str | None
    owner: str
    """The qualified name of the function or class whose docstring holds it."""
    code: types.CodeType


class ContractViolation(AssertionError):
    """A contract did not hold at run time."""

    def __init__(self, clause: Clause, when: str, detail: str = "") -> None:
        self.clause = clause
        self.when = when
        tag = f" [{clause.tag}]" if clause.tag else ""
        extra = f" ({detail})" if detail else ""
        super().__init__(
            f"{clause.kind} of {clause.owner}{tag} broken {when}: {clause.expr}{extra}"
        )


def parse_clauses(doc: str | None, owner: str) -> list[Clause]:
    """The PEP 316 conditions of a docstring, in order (``raises:`` is documentation here)."""
    out: list[Clause] = []
    if not doc:
        return out
    section: tuple[str, int] | None = None
    tag: str | None = None
    for line in inspect.cleandoc(doc).splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if section is not None and indent > section[1]:
            m = _TAG.match(line)
            if m:
                tag = m.group(1)
            elif not line.strip().startswith("#"):
                out.append(_clause(section[0], line.strip(), tag, owner))
            continue
        section = None
        m = _HEADER.match(line)
        if not m:
            tag = None
            continue
        kind, inline = m.group(2), m.group(4).strip()
        if kind == "raises":
            continue
        if inline and not inline.startswith("#"):
            out.append(_clause(kind, inline, None, owner))
            tag = None
        else:
            section = (kind, len(m.group(1)))
            tag = None
    return out


def _clause(kind: str, expr: str, tag: str | None, owner: str) -> Clause:
    code = compile(expr, f"<contract of {owner}>", "eval")
    return Clause(kind, expr, tag, owner, code)


@functools.cache
def class_invariants(cls: type) -> tuple[Clause, ...]:
    """The ``inv:`` conditions of ``cls`` and of every class it inherits from."""
    out: list[Clause] = []
    for klass in reversed(cls.__mro__):
        doc = klass.__dict__.get("__doc__")
        out.extend(c for c in parse_clauses(doc, klass.__qualname__) if c.kind == "inv")
    return tuple(out)


def method_clauses(cls: type, name: str) -> tuple[tuple[Clause, ...], Callable[..., Any] | None]:
    """The pre/post conditions of method ``name``: from the nearest definition that has any."""
    for klass in cls.__mro__:
        fn = klass.__dict__.get(name)
        if fn is None:
            continue
        fn = getattr(fn, "__wrapped__", fn)
        clauses = parse_clauses(getattr(fn, "__doc__", None), f"{klass.__qualname__}.{name}")
        clauses = [c for c in clauses if c.kind in ("pre", "post")]
        if clauses:
            return tuple(clauses), fn
    return (), None


# -- snapshots for __old__ ----------------------------------------------------------------


def _clone_block(block: Any, memo: dict[int, Any]) -> Any:
    got = memo.get(id(block))
    if got is not None:
        return got
    new = object.__new__(type(block))
    for slot in (
        "block_id",
        "ref_cnt",
        "_block_hash",
        "is_null",
        "pool",
        "_pending",
        "_pending_order",
    ):
        with contextlib.suppress(AttributeError):
            object.__setattr__(new, slot, getattr(block, slot))
    memo[id(block)] = new
    return new


def _link_clones(memo: dict[int, Any], originals: list[Any]) -> None:
    for b in originals:
        new = memo[id(b)]
        for slot in ("prev_free_block", "next_free_block"):
            other = getattr(b, slot, None)
            object.__setattr__(new, slot, None if other is None else memo.get(id(other), other))


def _walk(queue: Any, limit: int) -> list[Any]:
    """The nodes reachable from the head sentinel, sentinels included, at most ``limit``."""
    out: list[Any] = []
    seen: set[int] = set()
    node = queue.fake_free_list_head
    while node is not None and id(node) not in seen and len(out) < limit:
        seen.add(id(node))
        out.append(node)
        node = node.next_free_block
    tail = queue.fake_free_list_tail
    if id(tail) not in seen:
        out.append(tail)
    return out


def _clone_queue(queue: Any, memo: dict[int, Any], extra: list[Any]) -> Any:
    nodes = _walk(queue, max(queue.num_free_blocks, len(extra)) + 2)
    originals = [*nodes, *extra]
    for b in originals:
        _clone_block(b, memo)
    _link_clones(memo, originals)
    new = object.__new__(type(queue))
    new.fake_free_list_head = memo[id(queue.fake_free_list_head)]
    new.fake_free_list_tail = memo[id(queue.fake_free_list_tail)]
    new.num_free_blocks = queue.num_free_blocks
    return new


def _clone_pool(pool: Any) -> Any:
    memo: dict[int, Any] = {}
    new = object.__new__(type(pool))
    new.__dict__.update(pool.__dict__)
    new.free_block_queue = _clone_queue(pool.free_block_queue, memo, list(pool.blocks))
    new.blocks = [memo[id(b)] for b in pool.blocks]
    new.null_block = memo.get(id(pool.null_block), pool.null_block)
    new._index = {
        k: {i: memo.get(id(b), b) for i, b in hs.items()} for k, hs in pool._index.items()
    }
    new._events = list(pool._events)
    new._event_view = set(pool._event_view)
    return new


def _snapshot(obj: Any) -> Any:
    from kvpool.impl import BlockPool, FreeKVCacheBlockQueue

    if isinstance(obj, BlockPool):
        return _clone_pool(obj)
    if isinstance(obj, FreeKVCacheBlockQueue):
        return _clone_queue(obj, {}, [])
    try:
        return copy.deepcopy(obj)
    except Exception:
        return copy.copy(obj)


# -- evaluation ---------------------------------------------------------------------------

_state = threading.local()


def _busy() -> bool:
    return getattr(_state, "busy", False)


class _Old:
    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)


def _eval(clause: Clause, env: dict[str, Any], glb: dict[str, Any], when: str) -> None:
    try:
        # One namespace: generator expressions in a condition must see the arguments.
        ok = eval(clause.code, {**glb, **env})
    except Exception as exc:
        raise ContractViolation(clause, when, f"raised {type(exc).__name__}: {exc}") from exc
    if not ok:
        raise ContractViolation(clause, when)


def _parts(obj: Any) -> list[Any]:
    """The objects whose invariants are part of ``obj``'s."""
    from kvpool.impl import BlockPool
    from kvpool.spec import World

    if isinstance(obj, BlockPool):
        return [obj.free_block_queue]
    if isinstance(obj, World):
        return [ps for ps, alive in zip(obj.pools, obj.alive, strict=False) if alive]
    return []


def _reaches_tail(queue: Any) -> bool:
    """Whether ``num_free_blocks + 1`` next links lead from the head exactly to the tail.

    The invariants walk the queue with ``get_all_free_blocks``, which never ends on a
    cycle; this bounded walk runs first, so a cycle is reported instead of looped on.
    """
    node = queue.fake_free_list_head
    steps = queue.num_free_blocks + 1 if type(queue.num_free_blocks) is int else 0
    for _ in range(max(steps, 0)):
        node = getattr(node, "next_free_block", None)
        if node is None or node is queue.fake_free_list_tail:
            break
    return node is queue.fake_free_list_tail


def _check_invariants(obj: Any, when: str) -> None:
    from kvpool.impl import FreeKVCacheBlockQueue

    targets = [*_parts(obj), obj]  # the parts first: a pool's conditions walk its queue
    for target in targets:
        cls = type(target)
        glb = vars(inspect.getmodule(cls) or types.ModuleType("empty"))
        clauses = class_invariants(cls)  # type: ignore[arg-type]
        if isinstance(target, FreeKVCacheBlockQueue) and not _reaches_tail(target):
            walk = next(c for c in clauses if "len(self.get_all_free_blocks())" in c.expr)
            raise ContractViolation(
                walk,
                when,
                "the tail is not reached in num_free_blocks steps: a cycle or a lost link",
            )
        for clause in clauses:
            _eval(clause, {"self": target}, glb, when)


# -- one thread per pool ----------------------------------------------------------------------
#
# A pool is single-threaded, as vLLM's is (its scheduler owns it). In checked mode a
# call that enters a pool while a call from another thread is still inside it is
# refused before it starts; calls from the thread inside (a watcher calling back,
# a contract reading the pool) nest. Unchecked, nothing is wrapped: the pool's own
# methods pay nothing for this.


class ConcurrentUse(RuntimeError):
    """A pool was called from a second thread while another thread's call was inside it."""


_pool_lock = threading.Lock()
_pool_owner: dict[int, tuple[int, int]] = {}
"""id(pool) -> (the thread inside it, how deeply its calls nest)."""


def _enter_pool(receiver: Any) -> None:
    from kvpool.impl import BlockPool

    if not isinstance(receiver, BlockPool):
        return
    me = threading.get_ident()
    with _pool_lock:
        inside = _pool_owner.get(id(receiver))
        if inside is not None and inside[0] != me:
            raise ConcurrentUse(
                f"{type(receiver).__name__} at {id(receiver):#x} is in use by thread "
                f"{inside[0]}; a pool is single-threaded (call it from one thread, or lock)"
            )
        _pool_owner[id(receiver)] = (me, 1 if inside is None else inside[1] + 1)


def _leave_pool(receiver: Any) -> None:
    with _pool_lock:
        inside = _pool_owner.get(id(receiver))
        if inside is None or inside[0] != threading.get_ident():
            return
        if inside[1] <= 1:
            del _pool_owner[id(receiver)]
        else:
            _pool_owner[id(receiver)] = (inside[0], inside[1] - 1)


def checked_call(fn: Callable[..., Any], owner: type, name: str, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn(*args, **kwargs)`` (method ``name`` of ``owner``), checking its contracts.

    A pool's method called from a second thread while another thread is inside the
    pool raises ``ConcurrentUse`` and changes nothing.
    """
    receiver = args[0] if args else None
    _enter_pool(receiver)
    try:
        return _checked_call(fn, owner, name, *args, **kwargs)
    finally:
        _leave_pool(receiver)


def _checked_call(fn: Callable[..., Any], owner: type, name: str, *args: Any, **kwargs: Any) -> Any:
    if _busy():
        return fn(*args, **kwargs)
    clauses, declared = method_clauses(owner, name)
    public = not name.startswith("_") or name == "__init__"
    glb = getattr(declared or fn, "__globals__", {})
    try:
        bound = inspect.signature(declared or fn).bind(*args, **kwargs)
        bound.apply_defaults()
        env: dict[str, Any] = dict(bound.arguments)
    except TypeError:
        return fn(*args, **kwargs)  # a call that cannot bind fails in the function itself
    receiver = env.get("self")
    pre = [c for c in clauses if c.kind == "pre"]
    post = [c for c in clauses if c.kind == "post"]
    call = f"on entry to {name}"
    _state.busy = True
    try:
        env["__old__"] = _Old(env)
        for c in pre:
            _eval(c, env, glb, call)
        if public and receiver is not None and name != "__init__":
            _check_invariants(receiver, call)
        old = dict(env)
        if receiver is not None and any("__old__" in c.expr for c in post):
            old["self"] = _snapshot(receiver)
        old.pop("__old__", None)
    finally:
        _state.busy = False
    try:
        result = fn(*args, **kwargs)
    except BaseException:
        if public and receiver is not None and not _busy():
            _state.busy = True
            try:
                _check_invariants(receiver, f"after {name} raised")
            finally:
                _state.busy = False
        raise
    _state.busy = True
    try:
        env = {**env, "__return__": result, "__old__": _Old(old)}
        for c in post:
            _eval(c, env, glb, f"on return from {name}")
        if public and receiver is not None:
            _check_invariants(receiver, f"on return from {name}")
    finally:
        _state.busy = False
    return result


# -- switching it on and off -----------------------------------------------------------------

_installed: dict[tuple[type, str], Any] = {}


def _default_classes() -> list[type]:
    from kvpool.impl import BlockPool, FreeKVCacheBlockQueue
    from kvpool.spec import World

    return [FreeKVCacheBlockQueue, BlockPool, World]


def _wrap(cls: type, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        return checked_call(fn, cls, name, *args, **kwargs)

    return checked


def enable(classes: list[type] | None = None) -> None:
    """Check the contracts of ``classes`` (default: the queue, the pool, the spec's World)."""
    for cls in classes or _default_classes():
        names = {n for klass in cls.__mro__ for n in vars(klass)}
        for name in sorted(names):
            if (cls, name) in _installed:
                continue
            attr = inspect.getattr_static(cls, name)
            if not isinstance(attr, types.FunctionType):
                continue
            clauses, _ = method_clauses(cls, name)
            public = not name.startswith("_") or name == "__init__"
            if not clauses and not (public and class_invariants(cls)):
                continue
            _installed[(cls, name)] = cls.__dict__.get(name, _MISSING)
            setattr(cls, name, _wrap(cls, name, attr))


_MISSING = object()


def disable() -> None:
    """Put every original function back: the classes are exactly as before ``enable``."""
    for (cls, name), original in reversed(list(_installed.items())):
        if original is _MISSING:
            delattr(cls, name)
        else:
            setattr(cls, name, original)
    _installed.clear()


def enabled() -> bool:
    return bool(_installed)


@contextlib.contextmanager
def checking(classes: list[type] | None = None) -> Iterator[None]:
    """Check contracts inside the ``with`` block only."""
    was = dict(_installed)
    enable(classes)
    try:
        yield
    finally:
        if not was:
            disable()


if os.environ.get("KVPOOL_CONTRACTS") == "1":
    enable()
