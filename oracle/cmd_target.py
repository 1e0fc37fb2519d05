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
import os
import selectors
import shlex
import signal
import subprocess
import sys
import time
from collections import OrderedDict
from typing import Any

from kvpool.spec.errors import ERROR_CLASSES, ErrorKind
from kvpool.spec.events import AllBlocksCleared, BlockRemoved, BlockStored, Event, apply_event
from kvpool.spec.state import PoolState

from .driver import HARD_EXIT_HOOKS
from .exits import TargetHung
from .target_base import (
    DROP_POOL,
    METHODS,
    MULTI_POOL,
    MULTIKEY_OPS,
    Target,
    TargetBroken,
    TargetError,
    describe_skips,
)
from .traceformat import dec, enc

PROTOCOL = "kvpool-jsonl/1"


class ProtocolError(RuntimeError):
    """The external target broke the protocol (a bad reply, or it exited)."""


MAX_REPLY = 64 * 2**20
"""Bytes one reply line may have; a longer one is a protocol error (the target is ended)."""

STARTUP_TIMEOUT = 30.0
"""Seconds the first reply (to ``hello``) may take when the call timeout is shorter."""

_LIVE: set[Process] = set()


def end_all() -> None:
    """End every target process group still running (Ctrl-C, SIGTERM, an oracle error)."""
    for proc in list(_LIVE):
        proc.close(wait=0.0)


HARD_EXIT_HOOKS.append(end_all)
atexit.register(end_all)


def _cut(text: str | bytes, n: int = 200) -> str:
    if isinstance(text, bytes):
        text = text[: n + 1].decode("utf-8", "replace") + ("" if len(text) <= n else "...")
    return repr(text if len(text) <= n else text[:n] + "...")


class Process:
    """The target's process, in a process group of its own, spoken to over pipes.

    Each call waits at most ``timeout`` seconds for its reply (:class:`TargetHung`
    past it; the process group is then ended and started again for the next example),
    and reads at most :data:`MAX_REPLY` bytes. :meth:`close` ends the whole group --
    the shell, the target and anything it started -- on every exit path.
    """

    def __init__(self, command: str, timeout: float | None = None) -> None:
        self.command = command
        self.timeout = timeout
        self.next_id = 0
        self.gone = False
        self._buf = b""
        self.proc = self._start()
        _LIVE.add(self)

    def _start(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            self.command,
            shell=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
            start_new_session=True,  # its own process group, ended whole by close()
        )
        assert proc.stdout is not None and proc.stdin is not None  # PIPE was asked for
        os.set_blocking(proc.stdout.fileno(), False)
        os.set_blocking(proc.stdin.fileno(), False)
        self._buf = b""
        return proc

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
        _LIVE.add(self)
        self.gone = False
        self.next_id = 0
        self.call("hello")
        return True

    def _deadline(self, method: str) -> float | None:
        if not self.timeout:
            return None
        # Starting the command (an interpreter, a runtime) is not the call being timed.
        wait = max(self.timeout, STARTUP_TIMEOUT) if method == "hello" else self.timeout
        return time.monotonic() + wait

    def _wait(self, fd: int, event: int, deadline: float | None, method: str) -> None:
        with selectors.DefaultSelector() as sel:
            sel.register(fd, event)
            left = None if deadline is None else deadline - time.monotonic()
            if (left is not None and left <= 0) or not sel.select(left):
                self._hung(method)

    def _hung(self, method: str) -> None:
        self.gone = True
        self.close(wait=0.0)
        waited = max(self.timeout or 0.0, STARTUP_TIMEOUT) if method == "hello" else self.timeout
        raise TargetHung(f"{_cut(self.command)} (its reply to {method})", waited or 0.0)

    def _send(self, data: bytes, deadline: float | None, method: str) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        view = memoryview(data)
        while view:
            self._wait(stdin.fileno(), selectors.EVENT_WRITE, deadline, method)
            try:
                n = os.write(stdin.fileno(), view)
            except BlockingIOError:
                continue
            view = view[n:]

    def _read_line(self, deadline: float | None, method: str) -> bytes:
        stdout = self.proc.stdout
        assert stdout is not None
        buf = bytearray(self._buf)
        end = buf.find(b"\n")
        while end < 0:
            if len(buf) > MAX_REPLY:
                self._buf = bytes(buf[:1000])
                self.gone = True
                self.close(wait=0.0)
                raise ProtocolError(
                    f"{self.command!r}: the reply to {method} is over {MAX_REPLY:,} bytes "
                    f"(it starts {_cut(self._buf)})"
                )
            self._wait(stdout.fileno(), selectors.EVENT_READ, deadline, method)
            try:
                chunk = os.read(stdout.fileno(), 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                return b""
            found = chunk.find(b"\n")
            if found >= 0:
                end = len(buf) + found
            buf += chunk
        line, self._buf = bytes(buf[: end + 1]), bytes(buf[end + 1 :])
        return line

    def call(self, method: str, **params: Any) -> tuple[Any, list[list[int]]]:
        self.next_id += 1
        line = json.dumps({"id": self.next_id, "method": method, "params": params})
        deadline = self._deadline(method)
        try:
            self._send(line.encode() + b"\n", deadline, method)
            reply_line = self._read_line(deadline, method)
        except (BrokenPipeError, OSError) as exc:
            self.gone = True
            raise ProtocolError(f"{self.command!r} is gone: {exc}") from exc
        if not reply_line:
            self.gone = True
            raise ProtocolError(f"{self.command!r} exited (no reply to {method})")
        try:
            reply = json.loads(reply_line)
        except ValueError as exc:
            raise ProtocolError(f"not a JSON reply to {method}: {_cut(reply_line)}") from exc
        if not isinstance(reply, dict):
            raise ProtocolError(f"not a reply object for {method}: {_cut(reply_line)}")
        if reply.get("id") != self.next_id:
            raise ProtocolError(
                f"reply id {_cut(repr(reply.get('id')))} for request {self.next_id}"
            )
        fired = reply.get("fired", [])
        if "error" in reply:
            error = reply["error"] if isinstance(reply["error"], dict) else {}
            kind = error.get("kind")
            if not isinstance(kind, str) or kind not in ErrorKind._value2member_map_:
                raise ProtocolError(f"unknown error kind {_cut(repr(kind))}")
            err = ERROR_CLASSES[ErrorKind(kind)](str(error.get("message", ""))[:500])
            err.fired = fired  # type: ignore[attr-defined]
            raise err
        return reply.get("result"), fired

    def close(self, wait: float = 2.0) -> None:
        """End the target: close its input, give it ``wait`` seconds to exit, then end
        its whole process group (SIGKILL), whatever it did with end-of-input."""
        _LIVE.discard(self)
        proc = self.proc
        if proc.stdin is not None and not proc.stdin.closed:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        if wait and proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=wait)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # the group: the shell, the target, its children
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        if proc.stdout is not None and not proc.stdout.closed:
            with contextlib.suppress(OSError):  # its other end died with unread data
                proc.stdout.close()


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


def cmd_target(command: str, call_timeout: float | None = None) -> Target:
    """The target ``cmd:COMMAND``: ``command`` run through the shell in its own process
    group, each call bounded by ``call_timeout`` seconds."""
    if not command.strip():
        raise TargetError("cmd: needs a command")
    process: Process | None = None
    try:
        shlex.split(command)
        process = Process(command, call_timeout)
        hello, _ = process.call("hello")
    except TargetHung as exc:  # it started, but does not answer: a finding
        if process is not None:
            process.close(wait=0.0)
        raise TargetBroken(f"target hung: {exc}", exc) from exc
    except (OSError, ProtocolError, ValueError) as exc:
        if process is not None:
            process.close(wait=0.0)
        raise TargetError(f"cannot start {_cut(command)}: {exc}") from exc
    if not isinstance(hello, dict) or hello.get("protocol") != PROTOCOL:
        process.close(wait=0.0)
        raise TargetError(f"{_cut(command)} does not speak {PROTOCOL}: {_cut(repr(hello))}")
    raw_caps = hello.get("capabilities", [])
    declared = {c for c in raw_caps if isinstance(c, str)} if isinstance(raw_caps, list) else set()
    if not declared & set(METHODS):
        process.close(wait=0.0)
        raise TargetError(f"{_cut(command)} declares none of the pool methods in its hello")
    # the JSON-lines protocol has no request objects: vLLM's multi-key calls are not carried
    caps = {
        c for c in declared if (c in METHODS and c not in MULTIKEY_OPS) or c == "evict_first"
    } | {MULTI_POOL}
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
