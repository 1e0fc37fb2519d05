"""The trace format: spec values, calls and outcomes as JSON, and saved traces.

The bottom of the oracle's own layers (it imports only :mod:`kvpool.spec`): a trace
file is JSON (schema ``kvpool-trace/1``): the pools, then each step's call, the spec's
outcome and the target's, and the calls watchers made from inside it. Values that JSON
has no type for are tagged (:func:`enc`, :func:`dec`); ``cmd:`` targets use the same
tags on the wire.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from kvpool.spec.errors import ErrorKind
from kvpool.spec.events import AllBlocksCleared, BlockRemoved, BlockStored
from kvpool.spec.ops import (
    ALL_OP_CLASSES,
    BlockRef,
    Firing,
    GetNewBlocks,
    Lora,
    MMFeature,
    Op,
    Outcome,
    Request,
    TakeEvents,
)

TRACE_SCHEMA = "kvpool-trace/1"
LEVELS = ("safety", "exact", "robust")


def block_refs(op: Op) -> list[BlockRef]:
    """Every block a call names, in field order (``blocks`` entries, ``block``...)."""
    refs: list[BlockRef] = []
    for f in fields(op):
        value = getattr(op, f.name)
        refs.extend(
            v for v in (value if isinstance(value, tuple) else (value,)) if isinstance(v, BlockRef)
        )
    return refs


def result_rule(op: object) -> str:
    """The rule a call breaks when it returns another value than the spec's.

    One name whoever finds it (the search, ``replay``, ``check-log``): ``result
    differs: ids`` for ``get_new_blocks``, ``: events`` for ``take_events``,
    ``: value`` for any other call.
    """
    what = (
        "ids"
        if isinstance(op, GetNewBlocks)
        else "events"
        if isinstance(op, TakeEvents)
        else "value"
    )
    return f"result differs: {what}"


# -- JSON encoding of spec values ---------------------------------------------------------

_EVENTS = {
    "BlockStored": BlockStored,
    "BlockRemoved": BlockRemoved,
    "AllBlocksCleared": AllBlocksCleared,
}
_OPS = {cls.__name__: cls for cls in ALL_OP_CLASSES}
_STORED_FIELDS = tuple(f.name for f in fields(BlockStored) if f.name != "keys")
_REMOVED_FIELDS = tuple(f.name for f in fields(BlockRemoved) if f.name != "key")
_REQUEST_FIELDS = tuple(f.name for f in fields(Request))


def _event_fields(e: BlockStored | BlockRemoved, names: tuple[str, ...]) -> dict[str, Any]:
    """vLLM's event fields an event has set (none for the key-level ones)."""
    return {n: enc(getattr(e, n)) for n in names if getattr(e, n) is not None}


def _tagged(tag: str, value: Any, extra: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"t": tag, "v": value}
    if extra:
        out["f"] = extra
    return out


def _fields_of(v: dict[str, Any], names: tuple[str, ...]) -> dict[str, object]:
    extra = v.get("f") or {}
    if not isinstance(extra, dict) or not set(extra) <= set(names):
        raise ValueError(f"unknown event fields in {extra!r}")
    return {k: dec(x) for k, x in extra.items()}


def enc(v: object) -> Any:
    """A spec value as JSON: plain scalars as themselves, everything else tagged."""
    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        return {"t": "float", "v": repr(v)}
    if isinstance(v, BlockRef):
        return {"t": "ref", "v": [v.pool, v.block]}
    if isinstance(v, Firing):
        return {"t": "firing", "v": list(v)}
    if isinstance(v, bytes):
        return {"t": "bytes", "v": v.hex()}
    if isinstance(v, BlockStored):
        return _tagged("BlockStored", [enc(k) for k in v.keys], _event_fields(v, _STORED_FIELDS))
    if isinstance(v, BlockRemoved):
        return _tagged("BlockRemoved", enc(v.key), _event_fields(v, _REMOVED_FIELDS))
    if isinstance(v, Request):
        # (a request of token ids has no prompt_embeds: left out, as in files written before)
        return {
            "t": "request",
            "v": {
                n: enc(getattr(v, n))
                for n in _REQUEST_FIELDS
                if n != "prompt_embeds" or v.prompt_embeds is not None
            },
        }
    if isinstance(v, Lora):
        return {"t": "lora", "v": [v.adapter_id, v.name, v.path]}
    if isinstance(v, MMFeature):
        return {"t": "mm", "v": [v.identifier, v.offset, v.length]}
    if isinstance(v, AllBlocksCleared):
        return {"t": "AllBlocksCleared"}
    if isinstance(v, tuple):
        return {"t": "tuple", "v": [enc(x) for x in v]}
    if isinstance(v, list):
        return {"t": "list", "v": [enc(x) for x in v]}
    if isinstance(v, dict):
        return {"t": "dict", "v": [[enc(k), enc(x)] for k, x in v.items()]}
    if isinstance(v, ErrorKind):
        return v.value
    return {"t": "repr", "v": repr(v)}


def dec(v: Any) -> object:
    if not isinstance(v, dict):
        return v
    t = v.get("t")
    x: Any = v.get("v")
    if t == "float":
        return float(x)
    if t == "ref":
        return BlockRef(int(x[0]), int(x[1]))
    if t == "firing":
        return Firing(*x)
    if t == "bytes":
        return bytes.fromhex(x)
    if t == "BlockStored":
        return BlockStored(tuple(dec(k) for k in x), **_fields_of(v, _STORED_FIELDS))  # type: ignore[arg-type]
    if t == "BlockRemoved":
        return BlockRemoved(dec(x), **_fields_of(v, _REMOVED_FIELDS))  # type: ignore[arg-type]
    if t == "request":
        if not isinstance(x, dict) or not set(x) <= set(_REQUEST_FIELDS):
            raise ValueError("a request is an object of Request's fields")
        return Request(**{k: dec(i) for k, i in x.items()})  # type: ignore[arg-type]
    if t == "lora":
        adapter_id, name, path = x
        return Lora(adapter_id, name, path)
    if t == "mm":
        identifier, offset, length = x
        return MMFeature(identifier, offset, length)
    if t == "AllBlocksCleared":
        return AllBlocksCleared()
    if t == "tuple":
        return tuple(dec(i) for i in x)
    if t == "list":
        return [dec(i) for i in x]
    if t == "dict":
        return {dec(k): dec(i) for k, i in x}
    return x  # a repr: kept as text


def op_to_json(op: Op) -> dict[str, Any]:
    fields = {k: enc(getattr(op, k)) for k in op.__dataclass_fields__}
    return {"op": type(op).__name__, **fields}


def op_from_json(d: dict[str, Any]) -> Op:
    name = d.get("op")
    if name not in _OPS:
        raise ValueError(f"unknown operation {name!r}")
    cls = _OPS[name]
    args = {k: dec(v) for k, v in d.items() if k != "op"}
    return cls(**args)  # type: ignore[arg-type]


def outcome_to_json(out: Outcome | None) -> dict[str, Any] | None:
    if out is None:
        return None
    return {
        "value": enc(out.value),
        "error": out.error.value if out.error else None,
        "fired": [list(f) for f in out.fired],
    }


def outcome_from_json(d: dict[str, Any] | None) -> Outcome | None:
    if d is None:
        return None
    return Outcome(
        value=dec(d.get("value")),
        error=ErrorKind(d["error"]) if d.get("error") else None,
        fired=tuple(Firing(*f) for f in d.get("fired", ())),
    )


@dataclass
class SavedTrace:
    """A trace as saved: pools, steps, and watcher scripts (step index -> action)."""

    pools: list[tuple[int, bool, bool]]
    steps: list[dict[str, Any]]
    target: str = ""
    level: str = "exact"
    violation: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": TRACE_SCHEMA,
            "target": self.target,
            "level": self.level,
            "pools": [list(p) for p in self.pools],
            "steps": self.steps,
            "violation": self.violation,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SavedTrace:
        if d.get("schema") != TRACE_SCHEMA:
            raise ValueError(f"not a {TRACE_SCHEMA} trace (schema {d.get('schema')!r})")
        return cls(
            pools=[(int(n), bool(c), bool(e)) for n, c, e in d["pools"]],
            steps=list(d["steps"]),
            target=d.get("target", ""),
            level=d.get("level", "exact"),
            violation=d.get("violation"),
        )

    @classmethod
    def load(cls, path: str | Path) -> SavedTrace:
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")
        return p


__all__ = [
    "LEVELS",
    "TRACE_SCHEMA",
    "SavedTrace",
    "dec",
    "enc",
    "op_from_json",
    "op_to_json",
    "outcome_from_json",
    "outcome_to_json",
]
