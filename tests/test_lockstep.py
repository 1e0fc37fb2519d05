"""The spec and kvpool.impl in lockstep, under Hypothesis' stateful testing.

Each test runs the lockstep machine (kvpool.oracle.machine) with the profile named
by ``KVPOOL_PROFILE`` (``ci`` by default: deterministic, a few hundred runs of a
few dozen steps; ``make fuzz`` uses ``deep``). Every step compares the returned
ids and their order, error kinds, watchers fired, events and the whole abstract
state, and checks every INV-* (INV-LIST included) on both sides.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from kvpool.impl import BlockPool, InsufficientFreeBlocks
from kvpool.oracle.machine import (
    ALL_OPS,
    MULTIKEY_OPS,
    LockstepConfig,
    build_machine,
    format_trace,
    hunt,
    impl_config,
    profile,
)

PROFILE = os.environ.get("KVPOOL_PROFILE", "ci")


def _settings(**changes: object) -> settings:
    base = profile(PROFILE)
    return settings(base, **changes) if PROFILE == "ci" else base


CONFIGS = {
    # everything drawn: 1..64 blocks, caching and events on or off, up to 3 pools,
    # invalid calls of every kind, raising and re-entrant watchers
    "robust": (impl_config(), {}),
    # valid calls only, several pools
    "exact": (impl_config(level="exact"), {"max_examples": 60}),
    # tiny pools (1 = only the null block) where edge cases live
    "tiny": (impl_config(min_blocks=1, max_blocks=3), {"max_examples": 60}),
    # one pool with caching and events on: the prefix cache and event log, deep
    "cache-events": (
        impl_config(caching=True, events=True, max_pools=1, max_blocks=12),
        {"max_examples": 60},
    ),
    # caching off: every release goes to the front, cache writes are refused
    "no-caching": (impl_config(caching=False, max_blocks=12), {"max_examples": 50}),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_impl_follows_the_spec(name: str) -> None:
    config, changes = CONFIGS[name]
    machine = build_machine(BlockPool, config)
    run_state_machine_as_test(machine, settings=_settings(**changes))


def test_whole_state_checked_every_k_steps() -> None:
    """check_every > 1 (the oracle's mode for big pools) still passes on the real pool."""
    machine = build_machine(BlockPool, impl_config(check_every=5))
    run_state_machine_as_test(machine, settings=_settings(max_examples=30))


class _ForgetsEvictFirst(BlockPool):
    """free_blocks ignores evict_first: a small subclass bug, visible only through order."""

    def free_blocks(self, ordered_blocks, evict_first=False):  # type: ignore[no-untyped-def]
        super().free_blocks(ordered_blocks)


def test_a_failure_names_the_rule_and_keeps_the_shrunk_trace() -> None:
    # the key-level calls (the bug is in free_blocks), as the search made them before
    # vLLM's multi-key calls, which shift which failure the search meets first
    config = impl_config(caching=True, max_blocks=8, capabilities=ALL_OPS - set(MULTIKEY_OPS))
    found = hunt(_ForgetsEvictFirst, config, profile("mutant"), max_shrinks=30)
    assert found.killed
    assert found.rule in ("state differs", "result differs: ids")
    assert found.rule is not None and found.message.startswith(found.rule)
    assert found.trace is not None
    assert any(getattr(op, "evict_first", False) is True for op in found.trace.ops())
    assert "evict_first=True" in format_trace(found.trace)


class _RefusesTheLastBlock(BlockPool):
    """get_new_blocks refuses to empty the queue: a wrong error kind on a valid call."""

    def get_new_blocks(self, num_blocks):  # type: ignore[no-untyped-def]
        if num_blocks and num_blocks == self.get_num_free_blocks():
            raise InsufficientFreeBlocks("keeps one back")
        return super().get_new_blocks(num_blocks)


def test_safety_level_ignores_order_but_not_errors() -> None:
    """At safety a different (still valid) order passes; a wrong error kind does not."""
    ordered = build_machine(
        _ForgetsEvictFirst, impl_config(level="safety", caching=True, max_blocks=8)
    )
    run_state_machine_as_test(ordered, settings=_settings(max_examples=50))
    config = LockstepConfig(level="safety", max_pools=1, max_blocks=8)
    found = hunt(_RefusesTheLastBlock, config, profile("mutant"), max_shrinks=30)
    assert found.killed and found.rule == "error kind differs"


def test_capabilities_limit_the_rules() -> None:
    """A target without unpin_blocks / cache ops is never called with them."""
    caps = frozenset({"GetNewBlocks", "FreeBlocks", "GetNumFreeBlocks", "DropPool"})

    class _Minimal(BlockPool):
        def unpin_blocks(self, *a, **k):  # type: ignore[no-untyped-def]
            raise AssertionError("unpin_blocks is not a capability")

        def cache_blocks(self, *a, **k):  # type: ignore[no-untyped-def]
            raise AssertionError("cache_blocks is not a capability")

    machine = build_machine(_Minimal, impl_config(capabilities=caps, max_blocks=8))
    run_state_machine_as_test(machine, settings=_settings(max_examples=30))
