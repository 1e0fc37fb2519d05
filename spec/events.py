"""KV-cache events, and what their consumers make of them.

A consumer (a KV-aware router) reads the log as the set of keys a pool can
serve. :func:`replay` is that reading; INV-EVENTS says it must equal the keys
the pool's cache index holds.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BlockStored:
    """Blocks started holding ``keys`` (one event per ``cache_blocks`` call, keys in call order)."""

    keys: tuple[Hashable, ...]


@dataclass(frozen=True, slots=True)
class BlockRemoved:
    """The last block holding ``key`` dropped it."""

    key: Hashable


@dataclass(frozen=True, slots=True)
class AllBlocksCleared:
    """``reset_prefix_cache`` emptied the index."""


Event = BlockStored | BlockRemoved | AllBlocksCleared


def apply_event(view: set[Hashable], event: Event) -> None:
    """Update a consumer's view of the servable keys by one event."""
    if isinstance(event, BlockStored):
        view.update(event.keys)
    elif isinstance(event, BlockRemoved):
        view.discard(event.key)
    else:
        view.clear()


def replay(events: Iterable[Event]) -> set[Hashable]:  # pragma: no cover (a helper, no op)
    """The set of keys a consumer believes servable after reading ``events`` from the start."""
    view: set[Hashable] = set()
    for event in events:
        apply_event(view, event)
    return view
