"""``cmd:COMMAND`` targets: a pool in another process, over JSON lines on stdin/stdout.

Protocol ``kvpool-jsonl/1`` (JSON Schema: ``oracle/schema/kvpool-jsonl-1.schema.json``,
shipped in the package as ``kvpool/oracle/schema/``).
The oracle starts COMMAND (through the shell) once per run and writes one request per
line; the target answers each with one line, in order.

Request: ``{"id": n, "method": m, "params": {...}}``. Reply:
``{"id": n, "result": r, "fired": [[watcher, pool, block], ...]}`` or
``{"id": n, "error": {"kind": K, "message": "..."}, "fired": []}`` with ``K`` one of
the spec's error kinds. ``fired`` lists the watchers the call fired, in firing order.

* ``hello`` {} -> ``{"protocol": "kvpool-jsonl/1", "capabilities": [...]}`` (op class
  names it supports, plus ``"evict_first"``, ``"state"``).
* ``new_pool`` {num_blocks, enable_caching, enable_kv_cache_events} -> pool id (int).
* every pool method takes ``pool`` (the id) and its arguments: ``get_new_blocks`` {n}
  -> [block ids]; ``free_blocks`` {blocks, evict_first}; ``touch`` {blocks};
  ``unpin_blocks`` {blocks, watcher}; ``cache_blocks`` {blocks, keys};
  ``get_cached_block`` {key} -> id or null; ``evict_blocks`` {block_ids};
  ``reset_prefix_cache`` -> bool; ``get_num_free_blocks`` -> int; ``get_usage`` -> number;
  ``is_block_writable`` {block} -> bool; ``take_events`` -> [event];
  ``state`` -> {ref, key, free, index, pending, log, registered, fired}.
* A block is ``[pool, block_id]``; anything else the oracle sends where a block belongs
  (``{"bad": "..."}``) must be refused with ``InvalidArgument``. A watcher is an int id
  or ``null`` (not callable). Keys and other values are JSON, with non-JSON Python values
  tagged as in kvpool traces (``{"t": "tuple", "v": [...]}``...).
* An event is ``{"type": "BlockStored", "keys": [...]}``, ``{"type": "BlockRemoved",
  "key": k}`` or ``{"type": "AllBlocksCleared"}``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import shlex
import subprocess
import sys
from collections import OrderedDict
from typing import Any

from kvpool.spec.errors import ERROR_CLASSES, ErrorKind
from kvpool.spec.events import AllBlocksCleared, BlockRemoved, BlockStored, Event, apply_event
from kvpool.spec.state import PoolState

from .conformance import dec, enc
from .targets import DROP_POOL, METHODS, MULTI_POOL, Target, TargetError, describe_skips

PROTOCOL = "kvpool-jsonl/1"


class ProtocolError(RuntimeError):
    """The external target broke the protocol (a bad reply, or it exited)."""


class Process:
    def __init__(self, command: str) -> None:
        self.command = command
        self.proc = self._start()
        self.next_id = 0
        self.gone = False
        atexit.register(self.close)

    def _start(self) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command,
            shell=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def restart_if_gone(self) -> bool:
        """Start the command again if it exited: each example then begins on a live
        process, so a call that kills the target fails the same way every time it is
        replayed (and shrinks), instead of leaving the next examples a dead pipe."""
        # A reply that never came marks the process gone at once: it may not have been
        # reaped yet, and poll() alone would race with its exit.
        if not self.gone and self.proc.poll() is None:
            return False
        self.close()
        self.proc = self._start()
        self.gone = False
        self.next_id = 0
        self.call("hello")
        return True

    def call(self, method: str, **params: Any) -> tuple[Any, list[list[int]]]:
        self.next_id += 1
        line = json.dumps({"id": self.next_id, "method": method, "params": params})
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
            reply_line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError) as exc:
            self.gone = True
            raise ProtocolError(f"{self.command!r} is gone: {exc}") from exc
        if not reply_line:
            self.gone = True
            raise ProtocolError(f"{self.command!r} exited (no reply to {method})")
        reply = json.loads(reply_line)
        if reply.get("id") != self.next_id:
            raise ProtocolError(f"reply id {reply.get('id')} for request {self.next_id}")
        fired = reply.get("fired", [])
        if "error" in reply:
            kind = reply["error"].get("kind")
            if kind not in ErrorKind._value2member_map_:
                raise ProtocolError(f"unknown error kind {kind!r}")
            err = ERROR_CLASSES[ErrorKind(kind)](reply["error"].get("message", ""))
            err.fired = fired  # type: ignore[attr-defined]
            raise err
        return reply.get("result"), fired

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # type: ignore[union-attr]
                self.proc.wait(timeout=5)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None and not pipe.closed:
                with contextlib.suppress(OSError):  # its other end died with unread data
                    pipe.close()


class CmdBlock:
    __slots__ = ("block_id", "pool_id")

    def __init__(self, pool_id: int, block_id: int) -> None:
        self.pool_id, self.block_id = pool_id, block_id


def _event(d: dict[str, Any]) -> Event:
    if d["type"] == "BlockStored":
        return BlockStored(tuple(dec(k) for k in d["keys"]))
    if d["type"] == "BlockRemoved":
        return BlockRemoved(dec(d["key"]))
    return AllBlocksCleared()


class CmdPool:
    """One pool of the external process, behind vLLM's API."""

    def __init__(
        self,
        process: Process,
        pools: dict[int, CmdPool],
        num_blocks: int,
        caching: bool,
        events: bool,
    ) -> None:
        self.process, self.registry = process, pools
        pid, _ = process.call(
            "new_pool", num_blocks=num_blocks, enable_caching=caching, enable_kv_cache_events=events
        )
        self.pool_id = int(pid)
        pools[self.pool_id] = self
        self.blocks = [CmdBlock(self.pool_id, b) for b in range(num_blocks)]
        self.watchers: dict[int, Any] = {}
        self.taken_view: set[Any] = set()

    def _b(self, block: object) -> object:
        if isinstance(block, CmdBlock):
            return [block.pool_id, block.block_id]
        return {"bad": repr(block)}

    def _call(self, method: str, **params: Any) -> Any:
        try:
            result, fired = self.process.call(method, pool=self.pool_id, **params)
        except Exception as exc:
            self._fire(getattr(exc, "fired", []))
            raise
        self._fire(fired)
        return result

    def _fire(self, fired: list[list[int]]) -> None:
        for wid, pool_id, bid in fired:
            fn = self.watchers.get(wid)
            owner = self.registry.get(pool_id, self)
            if fn is None:
                raise ProtocolError(f"fired unknown watcher {wid}")
            try:
                fn(owner.blocks[bid])
            except Exception as exc:
                sys.unraisablehook(_Unraisable(exc, fn))  # type: ignore[arg-type]

    def get_new_blocks(self, n: object) -> list[CmdBlock]:
        return [self.blocks[b] for b in self._call("get_new_blocks", n=enc(n))]

    def free_blocks(self, blocks: Any, evict_first: object = False) -> None:
        self._call("free_blocks", blocks=[self._b(b) for b in blocks], evict_first=enc(evict_first))

    def touch(self, blocks: Any) -> None:
        self._call("touch", blocks=[self._b(b) for b in blocks])

    def unpin_blocks(self, blocks: Any, on_reuse: Any) -> None:
        wid = None
        if callable(on_reuse):
            wid = getattr(on_reuse, "watcher_id", None)
            wid = wid if type(wid) is int else id(on_reuse) % (1 << 31)
            for p in self.registry.values():
                p.watchers[wid] = on_reuse
        self._call("unpin_blocks", blocks=[self._b(b) for b in blocks], watcher=wid)

    def cache_blocks(self, blocks: Any, keys: Any) -> None:
        self._call("cache_blocks", blocks=[self._b(b) for b in blocks], keys=[enc(k) for k in keys])

    def get_cached_block(self, key: object) -> CmdBlock | None:
        b = self._call("get_cached_block", key=enc(key))
        return None if b is None else self.blocks[b]

    def evict_blocks(self, block_ids: Any) -> None:
        self._call("evict_blocks", block_ids=[enc(i) for i in block_ids])

    def reset_prefix_cache(self) -> bool:
        return bool(self._call("reset_prefix_cache"))

    def get_num_free_blocks(self) -> int:
        return int(self._call("get_num_free_blocks"))

    def get_usage(self) -> float:
        return float(self._call("get_usage"))

    def is_block_writable(self, block: object) -> bool:
        return bool(self._call("is_block_writable", block=self._b(block)))

    def take_events(self) -> list[Event]:
        events = [_event(e) for e in self._call("take_events")]
        for e in events:
            apply_event(self.taken_view, e)
        return events

    def kvpool_state(self) -> PoolState:
        s = self._call("state")
        log = [_event(e) for e in s["log"]]
        view = set(self.taken_view)
        for e in log:
            apply_event(view, e)
        return PoolState(
            num_blocks=len(s["ref"]),
            caching=bool(s.get("caching", True)),
            events_on=bool(s.get("events", False)),
            ref=list(s["ref"]),
            key=[dec(k) for k in s["key"]],
            free=OrderedDict.fromkeys(s["free"]),
            index={dec(k): dict.fromkeys(ids) for k, ids in s["index"]},
            pending={int(b): list(ws) for b, ws in s["pending"]},
            log=log,
            view=view,
            registered=int(s["registered"]),
            fired=int(s["fired"]),
        )


class _Unraisable:
    def __init__(self, exc: BaseException, obj: object) -> None:
        self.exc_type, self.exc_value, self.exc_traceback = type(exc), exc, exc.__traceback__
        self.err_msg, self.object = "Exception ignored in a reuse watcher", obj


def cmd_target(command: str) -> Target:
    if not command.strip():
        raise TargetError("cmd: needs a command")
    try:
        shlex.split(command)
        process = Process(command)
        hello, _ = process.call("hello")
    except (OSError, ProtocolError, ValueError) as exc:
        raise TargetError(f"cannot start {command!r}: {exc}") from exc
    if not isinstance(hello, dict) or hello.get("protocol") != PROTOCOL:
        raise TargetError(f"{command!r} does not speak {PROTOCOL}: {hello!r}")
    declared = set(hello.get("capabilities", []))
    caps = {c for c in declared if c in METHODS or c == "evict_first"} | {MULTI_POOL}
    has_state = "state" in declared
    registry: dict[int, CmdPool] = {}

    def factory(num_blocks: int, caching: bool, events: bool) -> CmdPool:
        if process.restart_if_gone():
            registry.clear()  # its pools died with it
        return CmdPool(process, registry, num_blocks, caching, events)

    factory.__name__ = "cmd"
    frozen = frozenset(caps)
    state = (lambda d, i: d.pool(i).kvpool_state()) if has_state else None
    from kvpool.spec.invariants import check_pool

    inv = (lambda d, i: check_pool(d.pool(i).kvpool_state())) if has_state else None
    skipped = describe_skips(frozen | {DROP_POOL}, has_state)
    skipped.append("DropPool: a pool in another process is never garbage collected")
    return Target(f"cmd:{command}", factory, frozen, state, inv, skipped, process.close)
