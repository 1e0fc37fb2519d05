"""KV-cache events, and what their consumers make of them.

A consumer (a KV-aware router) reads the log as the set of keys a pool can
serve. :func:`replay` is that reading; INV-EVENTS says it must equal the keys
the pool's cache index holds (every key of every block: primary keys and
further entries alike).

Each event carries ``keys``, the index keys it announces (what :func:`replay`
reads), and vLLM 0.33.0's own fields (``block_hashes``, ``parent_block_hash``,
``token_ids``, ...). The vLLM operations (``cache_full_blocks``,
``cache_partial_block``, ...) fill those fields exactly as vLLM does; the
key-level ``cache_blocks`` leaves them ``None``. Sequences are tuples where vLLM
uses lists, so that every event is plain hashable data.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BlockStored:
    """Blocks started holding ``keys`` (one event per caching call, keys in call order)."""

    keys: tuple[Hashable, ...]
    block_hashes: tuple[bytes, ...] | None = None
    parent_block_hash: bytes | None = None
    token_ids: tuple[int, ...] | None = None
    block_size: int | None = None
    lora_id: int | None = None
    medium: str | None = None
    lora_name: str | None = None
    extra_keys: tuple[tuple[object, ...] | None, ...] | None = None
    group_idx: int | None = None
    session_id: Hashable | None = None
    lookahead_token_ids: tuple[tuple[int, ...], ...] | None = None


@dataclass(frozen=True, slots=True)
class BlockRemoved:
    """The last block holding ``key`` dropped it.

    For a key in vLLM's form, ``block_hashes``/``medium``/``group_idx`` are vLLM's
    fields for it; for an opaque key they stay ``None``.
    """

    key: Hashable
    block_hashes: tuple[bytes, ...] | None = None
    medium: str | None = None
    group_idx: int | None = None


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
