"""Reading the files a user hands the oracle, as data only, within limits.

Every file input -- a saved trace (``kvpool replay``, ``kvpool show``), a golden-vector
corpus (``kvpool vectors``), a recorded log (``kvpool check-log``), a play script
(``kvpool play --script``) -- is read through this module. A file is never code: the
target a trace names is a label, run only when the user names it with ``--target``.

Each reader checks the file's size, then its shape (the fields a trace, log or vector
index has, their types, the pools and blocks they name), against :class:`Limits`, before
anything is built from it; a file over a limit or of the wrong shape raises
:class:`~.exits.BadInput` with one line that names the file and what is wrong (exit 2).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from kvpool.spec.ops import BlockRef, Op

from .exits import BadInput
from .traceformat import LEVELS, TRACE_SCHEMA, SavedTrace, op_from_json, outcome_from_json


@dataclass(frozen=True)
class Limits:
    """How big a file may be, and how much it may make the oracle build.

    Each has a ``kvpool`` option to raise it (``--max-file-bytes`` ...). A trace the
    search writes is far inside the defaults (a few pools of at most ``--max-blocks``
    blocks, ``--steps`` calls); the defaults keep a replay of the largest file they admit
    to a bounded time and memory (every step copies each pool's state).
    """

    max_bytes: int = 16 * 2**20
    """File size in bytes."""
    max_blocks: int = 4096
    """Blocks per pool a file may ask for."""
    max_pools: int = 16
    """Pools a file may ask for."""
    max_steps: int = 10_000
    """Steps of a trace, records of a log, lines of a play script, vectors in a corpus."""
    max_line: int = 2**20
    """Characters in one line of a log or a play script."""
    max_depth: int = 32
    """JSON nesting depth (of a trace, a vector index, one log record)."""


DEFAULT_LIMITS = Limits()
LOG_LIMITS = Limits(max_bytes=256 * 2**20, max_blocks=65_536, max_pools=1, max_steps=1_000_000)
"""``check-log``'s defaults: a log of a real serving run is longer, and of one bigger pool."""


def _cut(text: str, n: int = 120) -> str:
    return text if len(text) <= n else f"{text[:n]}... ({len(text):,} characters)"


# -- bytes and JSON --------------------------------------------------------------------------


def read_text(path: str | Path, limits: Limits, what: str = "file") -> str:
    """The file's text, if it is at most ``limits.max_bytes`` bytes of UTF-8."""
    p = Path(path)
    try:
        if p.is_dir():
            raise BadInput(f"{p}: is a folder, not a {what}")
        size = os.stat(p).st_size
        if size > limits.max_bytes:
            raise BadInput(
                f"{p}: {size:,} bytes, over the limit of {limits.max_bytes:,} "
                "(raise it with --max-file-bytes)"
            )
        with open(p, "rb") as f:
            raw = f.read(limits.max_bytes + 1)
    except OSError as exc:
        raise BadInput(f"{p}: cannot read it: {exc.strerror or exc}") from exc
    if len(raw) > limits.max_bytes:  # it grew while we looked
        raise BadInput(f"{p}: over the limit of {limits.max_bytes:,} bytes (--max-file-bytes)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{p}: not UTF-8 text (byte {exc.start})") from exc


def depth_of(value: object, limit: int) -> int:
    """The nesting depth of a parsed JSON value (stops counting past ``limit``)."""
    deepest = 0
    todo: list[tuple[object, int]] = [(value, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, dict | list):
            deepest = max(deepest, d)
            if deepest > limit:
                return deepest
            items = v.values() if isinstance(v, dict) else v
            todo.extend((x, d + 1) for x in items)
    return deepest


def parse_json(text: str, limits: Limits, where: str) -> Any:
    """``json.loads`` of one document, refusing what is not JSON or nests too deeply."""
    try:
        value = json.loads(text)
    except RecursionError as exc:
        raise BadInput(
            f"{where}: nested deeper than {limits.max_depth} (--max-file-depth)"
        ) from exc
    except ValueError as exc:  # JSONDecodeError, and integers of more than 4,300 digits
        raise BadInput(f"{where}: not JSON: {_cut(str(exc))}") from exc
    if depth_of(value, limits.max_depth) > limits.max_depth:
        raise BadInput(f"{where}: nested deeper than {limits.max_depth} (--max-file-depth)")
    return value


def read_json(path: str | Path, limits: Limits, what: str = "file") -> Any:
    return parse_json(read_text(path, limits, what), limits, str(path))


def read_lines(path: str | Path, limits: Limits, what: str = "file") -> list[str]:
    """The file's lines, each at most ``limits.max_line`` characters, at most
    ``limits.max_steps`` of them (plus a header line)."""
    text = read_text(path, limits, what)
    lines = text.splitlines()
    if len(lines) > limits.max_steps + 1:
        raise BadInput(
            f"{path}: {len(lines):,} lines, over the limit of {limits.max_steps:,} "
            "(raise it with --max-file-steps)"
        )
    for n, line in enumerate(lines, 1):
        if len(line) > limits.max_line:
            raise BadInput(
                f"{path}:{n}: a line of {len(line):,} characters, over the limit of "
                f"{limits.max_line:,} (raise it with --max-file-line)"
            )
    return lines


# -- shapes ------------------------------------------------------------------------------------


def _int(v: object) -> bool:
    return type(v) is int


def check_pools(pools: object, limits: Limits, where: str) -> list[tuple[int, bool, bool]]:
    """``[[num_blocks, caching, events], ...]`` within the limits."""
    if not isinstance(pools, list) or not pools:
        raise BadInput(
            f"{where}: 'pools' must be a non-empty list of [num_blocks, caching, events]"
        )
    if len(pools) > limits.max_pools:
        raise BadInput(
            f"{where}: {len(pools):,} pools, over the limit of {limits.max_pools:,} "
            "(raise it with --max-file-pools)"
        )
    out = []
    for i, p in enumerate(pools):
        if not (isinstance(p, list) and len(p) == 3 and _int(p[0])) or not all(
            isinstance(x, bool) for x in p[1:]
        ):
            raise BadInput(
                f"{where}: pool {i} must be [num_blocks, caching, events], got {_cut(repr(p))}"
            )
        out.append(check_blocks(p[0], limits, f"{where}: pool {i}", p[1], p[2]))
    return out


def check_blocks(
    n: object, limits: Limits, where: str, caching: bool = True, events: bool = False
) -> tuple[int, bool, bool]:
    if not _int(n) or n < 1:  # type: ignore[operator]
        raise BadInput(f"{where}: num_blocks must be an integer >= 1, got {_cut(repr(n))}")
    if n > limits.max_blocks:  # type: ignore[operator]
        raise BadInput(
            f"{where}: {n:,} blocks, over the limit of {limits.max_blocks:,} "
            "(raise it with --max-file-blocks)"
        )
    return n, caching, events  # type: ignore[return-value]


def check_op(call: object, n_pools: int, where: str) -> Op:
    """A call as the trace format writes it, naming only pools the file has."""
    if not isinstance(call, dict):
        raise BadInput(f"{where}: a call must be an object, got {_cut(repr(call))}")
    try:
        op = op_from_json(call)
    except Exception as exc:  # unknown op, unknown field, a tag of the wrong shape
        raise BadInput(f"{where}: not a call: {_cut(f'{type(exc).__name__}: {exc}')}") from exc
    if not _int(op.pool) or not 0 <= op.pool < n_pools:
        raise BadInput(f"{where}: names pool {_cut(repr(op.pool))}; the file has {n_pools}")
    for f in fields(op):
        value = getattr(op, f.name)
        for v in value if isinstance(value, tuple) else (value,):
            if isinstance(v, BlockRef) and not 0 <= v.pool < n_pools:
                raise BadInput(f"{where}: a block of pool {v.pool}; the file has {n_pools}")
    return op


def check_outcome(d: object, where: str) -> None:
    if d is None:
        return
    if not isinstance(d, dict) or not isinstance(d.get("fired", []), list):
        raise BadInput(f"{where}: an outcome must be an object, got {_cut(repr(d))}")
    try:
        outcome_from_json(d)
    except Exception as exc:
        raise BadInput(f"{where}: not an outcome: {_cut(f'{type(exc).__name__}: {exc}')}") from exc


def check_trace(d: object, limits: Limits, where: str) -> SavedTrace:
    """A parsed ``kvpool-trace/1`` document, checked field by field."""
    if not isinstance(d, dict):
        raise BadInput(f"{where}: not a {TRACE_SCHEMA} trace (a JSON object)")
    if d.get("schema") != TRACE_SCHEMA:
        raise BadInput(
            f"{where}: not a {TRACE_SCHEMA} trace (schema {_cut(repr(d.get('schema')))})"
        )
    pools = check_pools(d.get("pools"), limits, where)
    target, level, violation = d.get("target", ""), d.get("level", "exact"), d.get("violation")
    if not isinstance(target, str):
        raise BadInput(f"{where}: 'target' must be a string")
    if level not in LEVELS:
        raise BadInput(
            f"{where}: 'level' must be one of {', '.join(LEVELS)}, got {_cut(repr(level))}"
        )
    if violation is not None and not isinstance(violation, dict):
        raise BadInput(f"{where}: 'violation' must be an object or null")
    steps = d.get("steps")
    if not isinstance(steps, list):
        raise BadInput(f"{where}: 'steps' must be a list")
    if len(steps) > limits.max_steps:
        raise BadInput(
            f"{where}: {len(steps):,} steps, over the limit of {limits.max_steps:,} "
            "(raise it with --max-file-steps)"
        )
    for n, step in enumerate(steps, 1):
        at = f"{where}: step {n}"
        if not isinstance(step, dict):
            raise BadInput(f"{at}: must be an object")
        if "script" in step:
            sc = step["script"]
            if not isinstance(sc, dict) or not _int(sc.get("watcher", -1)):
                raise BadInput(f"{at}: a watcher script must be {{watcher, raise, call}}")
            if not isinstance(step.get("note", ""), str):
                raise BadInput(f"{at}: 'note' must be a string")
            if sc.get("call") is not None:
                check_op(sc["call"], len(pools), at)
            continue
        check_op(step.get("call"), len(pools), at)
        check_outcome(step.get("expected"), at)
        check_outcome(step.get("observed"), at)
        nested = step.get("nested", [])
        if not isinstance(nested, list):
            raise BadInput(f"{at}: 'nested' must be a list")
        for m, x in enumerate(nested, 1):
            if not isinstance(x, dict):
                raise BadInput(f"{at}: nested call {m} must be an object")
            check_op(x.get("call"), len(pools), f"{at}, nested call {m}")
            check_outcome(x.get("expected"), f"{at}, nested call {m}")
            check_outcome(x.get("observed"), f"{at}, nested call {m}")
    try:
        return SavedTrace.from_json(d)
    except Exception as exc:  # pragma: no cover - every field was checked above
        raise BadInput(f"{where}: {_cut(f'{type(exc).__name__}: {exc}')}") from exc


def load_trace(path: str | Path, limits: Limits = DEFAULT_LIMITS) -> SavedTrace:
    """A saved trace from ``path``, checked against ``limits`` (:class:`BadInput` if not)."""
    return check_trace(read_json(path, limits, "trace"), limits, str(path))
