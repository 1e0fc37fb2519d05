"""The findings on vLLM 0.33.0's real pool, as minimal traces (see docs/errata.md).

Each :class:`Finding` is a short trace, the rule or invariant the oracle reports when
it replays the trace on vLLM, and how the finding arises: ``valid use``, ``bad input``
(a call the semantics refuses) or ``faulty callback`` (a watcher that raises or calls
back into the pool). ``tests/test_oracle_findings.py`` replays every one on vLLM
(the oracle must still report it) and on ``reference`` (which must pass it).
``python -m kvpool.oracle.findings DIR`` writes them as trace files.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvpool.spec.ops import (
    BlockRef,
    CacheBlocks,
    CachePartialBlock,
    EvictBlocks,
    FreeBlocks,
    GetNewBlocks,
    IsBlockWritable,
    Request,
    TakeEvents,
    Touch,
    UnpinBlocks,
)

from .traceformat import SavedTrace, op_to_json


@dataclass(frozen=True)
class Finding:
    name: str
    title: str
    arises_from: str
    """valid use | bad input | faulty callback"""
    rule: str
    """What the oracle reports when it replays the trace on vLLM 0.33.0."""
    pools: tuple[tuple[int, bool, bool], ...]
    steps: tuple[Any, ...]
    """Ops, or ("script", watcher, raise, op-or-None) for a watcher's behaviour."""

    def trace(self) -> SavedTrace:
        steps: list[dict[str, Any]] = []
        for s in self.steps:
            if isinstance(s, tuple) and s and s[0] == "script":
                _, wid, raises, op = s
                note = f"script watcher {wid}: {'raises ' if raises else ''}"
                note += f"calls {op!r}" if op is not None else ""
                steps.append(
                    {
                        "note": note,
                        "script": {
                            "watcher": wid,
                            "raise": raises,
                            "call": op_to_json(op) if op is not None else None,
                        },
                    }
                )
            else:
                steps.append({"call": op_to_json(s)})
        return SavedTrace(
            list(self.pools),
            steps,
            "vllm==0.33.0",
            "exact" if self.arises_from == "valid use" else "robust",
            {"rule": self.rule, "finding": self.name},
        )


P1 = ((8, True, False),)
P1E = ((8, True, True),)

_PREFIX = Request(tuple(b"p" + b"abcdef"[: i + 1] for i in range(6)))
"""A request of six prefix hashes: one block can hold a key for each (a primary key and
five further entries: partial prefixes inside the block)."""

FINDINGS: tuple[Finding, ...] = (
    Finding(
        "unpin-one-watcher",
        "a second unpin of a shared block drops the first watcher",
        "valid use",
        "state differs",
        P1,
        (GetNewBlocks(1), Touch((1,)), UnpinBlocks((1,), 0), UnpinBlocks((1,), 1), GetNewBlocks(7)),
    ),
    Finding(
        "removed-while-held",
        "BlockRemoved is logged while another block still holds the key",
        "valid use",
        "INV-EVENTS",
        P1E,
        (GetNewBlocks(2), CacheBlocks((1,), ("a",)), CacheBlocks((2,), ("a",)), EvictBlocks((1,))),
    ),
    Finding(
        "further-entries-unordered",
        "a block's further entries are a set: dropped (BlockRemoved) in hash order, not in "
        "the order they were added",
        "valid use",
        "state differs",
        P1E,
        (
            GetNewBlocks(1),
            *(CachePartialBlock(_PREFIX, 1, 16 * n, 0, 16) for n in (6, 5, 4, 3, 2, 1)),
            EvictBlocks((1,)),
            TakeEvents(),
        ),
    ),
    Finding(
        "watcher-sees-half-handout",
        "a reuse watcher runs before the block is handed out (ref_cnt 0, old key still cached)",
        "faulty callback",
        "result differs: value",
        P1,
        (
            ("script", 0, False, IsBlockWritable(BlockRef(0, 1))),
            GetNewBlocks(1),
            UnpinBlocks((1,), 0),
            GetNewBlocks(7),
        ),
    ),
    Finding(
        "watcher-error-escapes",
        "a raising watcher escapes get_new_blocks and loses the blocks it was handing out",
        "faulty callback",
        "target crashed",
        P1,
        (("script", 0, True, None), GetNewBlocks(1), UnpinBlocks((1,), 0), GetNewBlocks(7)),
    ),
    Finding(
        "negative-count",
        "get_new_blocks(-1) is accepted",
        "bad input",
        "error kind differs",
        P1,
        (GetNewBlocks(-1),),
    ),
    Finding(
        "double-free",
        "freeing a free block drives ref_cnt to -1 and queues it twice",
        "bad input",
        "error kind differs",
        P1,
        (FreeBlocks((1,)),),
    ),
    Finding(
        "over-free-in-one-call",
        "a block listed twice in one free_blocks call is released twice",
        "bad input",
        "error kind differs",
        P1,
        (GetNewBlocks(1), FreeBlocks((1, 1))),
    ),
    Finding(
        "touch-foreign",
        "touch accepts another pool's block and unlinks it from that "
        "pool's queue while counting it in its own",
        "bad input",
        "error kind differs",
        ((4, True, False), (4, True, False)),
        (Touch((BlockRef(1, 1),), pool=0),),
    ),
    Finding(
        "evict-negative-id",
        "evict_blocks([-1]) evicts the last block (Python indexing)",
        "bad input",
        "error kind differs",
        P1,
        (GetNewBlocks(7), CacheBlocks((7,), ("a",)), EvictBlocks((-1,))),
    ),
    Finding(
        "cache-free-block",
        "cache_blocks on a block nobody holds is accepted",
        "bad input",
        "error kind differs",
        P1,
        (CacheBlocks((1,), ("a",)),),
    ),
    Finding(
        "unpin-not-callable",
        "unpin_blocks accepts a watcher that is not callable",
        "bad input",
        "error kind differs",
        P1,
        (GetNewBlocks(1), UnpinBlocks((1,), "not callable")),
    ),
    Finding(
        "unpin-null-block",
        "unpin_blocks on the null block is an assert, not a typed error",
        "bad input",
        "target crashed",
        P1,
        (UnpinBlocks((0,), 0),),
    ),
)


def by_name(name: str) -> Finding:
    for f in FINDINGS:
        if f.name == name:
            return f
    raise LookupError(name)


def write(where: str | Path) -> list[Path]:
    out = []
    for f in FINDINGS:
        out.append(f.trace().save(Path(where) / f"{f.name}.json"))
    return out


if __name__ == "__main__":
    for p in write(sys.argv[1] if len(sys.argv) > 1 else "vectors/findings"):
        print(p)
