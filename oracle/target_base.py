"""The base of every target: what a target is, what it can do, and how it fails.

:class:`Target` (a factory of pools, its capabilities, how to read its state), the
capability names (:data:`METHODS`, :data:`EVICT_FIRST`, :data:`DROP_POOL`,
:data:`MULTI_POOL`) and the errors a target string or a target raises. Each kind of
target (:mod:`.cmd_target`, :mod:`.vllm_target`, the spec and Python ones) builds on
this module, and :mod:`.targets` turns a target string into one of them.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kvpool.spec.invariants import Violation
from kvpool.spec.state import PoolState

from .driver import CALLS, Driver, PoolFactory

METHODS: dict[str, str] = {cls.__name__: call[0] for cls, call in CALLS.items()}
"""Capability (an op class name) -> the pool method it needs."""

EVICT_FIRST = "evict_first"
"""The capability ``free_blocks(blocks, evict_first=...)`` (vLLM 0.33 lacks it)."""
DROP_POOL = "DropPool"
MULTI_POOL = "multi_pool"
"""Several pools in one run: cross-pool frees (and DropPool)."""
GROUP_LOOKUP = "GetCachedBlockGroups"
"""``get_cached_block(block_hash, group_ids)``: the method is the key-level lookup's too, so
this capability is probed on its signature (a second parameter), or an adapter's
``kvpool_methods()`` names :data:`GROUP_LOOKUP_METHOD`."""
GROUP_LOOKUP_METHOD = "get_cached_block_groups"

MULTIKEY_OPS: tuple[str, ...] = (
    "CacheFullBlocks",
    "CachePartialBlock",
    "MoveBlockHashes",
    GROUP_LOOKUP,
    "EmitCachedBlockEvents",
)
"""vLLM 0.33.0's calls on blocks with several keys (a target lacking one is not given it)."""


CAPABILITIES: tuple[str, ...] = (*METHODS, EVICT_FIRST, DROP_POOL, MULTI_POOL)
"""Every capability a target can have (and ``kvpool conform --skip`` can take away)."""


class TargetError(ValueError):
    """A target string that names nothing the oracle can build (a usage error)."""


class TargetBroken(Exception):
    """The named target exists but raised while being loaded or built: a finding about the
    target (exit 1), reported with the target's own traceback (:attr:`details`)."""

    def __init__(self, message: str, cause: BaseException) -> None:
        super().__init__(message)
        self.details = "".join(traceback.format_exception(cause)).rstrip()


@dataclass
class Target:
    """A buildable target: its factory, what it can do, and how to read its state."""

    name: str
    factory: PoolFactory
    capabilities: frozenset[str]
    state_check: Callable[[Driver, int], PoolState] | None = None
    target_invariants: Callable[[Driver, int], list[Violation]] | None = None
    skipped: list[str] = field(default_factory=list)
    """What is not tested, and why (capabilities it lacks, state it does not expose)."""
    close: Callable[[], None] | None = None
    defaults: dict[str, Any] = field(default_factory=dict)
    """Run settings its capabilities fix (``events``/``caching`` off); options override."""


ALL_CAPS = frozenset([*METHODS, EVICT_FIRST, DROP_POOL, MULTI_POOL])


def _needs(cap: str) -> str:
    if cap == GROUP_LOOKUP:
        return "get_cached_block(block_hash, group_ids)"
    return METHODS.get(cap, cap)


def describe_skips(caps: frozenset[str], state: bool) -> list[str]:
    out = [f"{c}: the target has no {_needs(c)}" for c in sorted(ALL_CAPS - caps)]
    if not state:
        out.append(
            "whole-state comparison and INV-* on the target: it exposes no state "
            "(add kvpool_state())"
        )
    return out


__all__ = [
    "ALL_CAPS",
    "CAPABILITIES",
    "DROP_POOL",
    "EVICT_FIRST",
    "GROUP_LOOKUP",
    "GROUP_LOOKUP_METHOD",
    "METHODS",
    "MULTIKEY_OPS",
    "MULTI_POOL",
    "Target",
    "TargetBroken",
    "TargetError",
    "describe_skips",
]
