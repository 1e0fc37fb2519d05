"""The stress harness (tests/stress.py): a short profile here; ``make fuzz`` runs a million calls.

The harness checks every invariant and the spec differential after every call, and
that a refused or raising call changed nothing. These tests show that it runs clean on
the real pool, that every kind of call it claims to make was made, that it behaves the
same under ``python -O``, and that it catches seeded bugs of each family.
"""

from __future__ import annotations

import subprocess
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from stress import Stress

import kvpool.impl.pool as pool_module
from kvpool.impl import BlockPool, KVCacheBlock
from kvpool.mutants import CATALOGUE

HERE = Path(__file__).resolve().parent

KINDS = (
    "done",
    "refused",
    "called back",
    "interrupted by a watcher",
    "hostile forged",
    "hostile entry",
    "hostile iterable",
    "hostile key",
)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_short_profile_runs_clean_and_makes_every_kind_of_call(seed: int) -> None:
    report = Stress(seed).run(2_000)
    assert report.failures == []
    assert report.calls == 2_000
    missing = [k for k in KINDS if report.kinds[k] == 0]
    assert missing == [], f"the harness never made these calls: {missing}"


def test_the_harness_runs_the_same_under_python_dash_O() -> None:
    out = subprocess.run(
        [sys.executable, "-O", str(HERE / "stress.py"), "--calls", "800", "--seed", "7"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "(python -O); 0 failure(s)" in out.stdout


def _trusting_owner(block: object) -> BlockPool | None:
    """The ownership test before issue 14: a block's weak reference is taken on trust."""
    if type(block) is not KVCacheBlock or type(block.pool) is not weakref.ref:
        raise pool_module._NotABlock
    return block.pool()  # type: ignore[no-any-return]


def _patched(monkeypatch: pytest.MonkeyPatch, name: str, value: Any) -> type[BlockPool]:
    monkeypatch.setattr(pool_module, name, value)
    return BlockPool


SEEDED: dict[str, Callable[[pytest.MonkeyPatch], Any]] = {
    # ownership taken on trust: a copy or a hand-built block passes
    "trusting ownership": lambda mp: _patched(mp, "_owner", _trusting_owner),
    # catalogue bugs: a refusal that keeps its releases, a watcher error that stops the
    # others, a block listed twice in the free queue, an unlink that forgets its links
    "bad-entry-no-undo": lambda mp: CATALOGUE["bad-entry-no-undo"].pool_class(),
    "watcher-error-stops-others": lambda mp: CATALOGUE["watcher-error-stops-others"].pool_class(),
    "lifo-fifo-swapped": lambda mp: CATALOGUE["lifo-fifo-swapped"].pool_class(),
    "touch-foreign-accepted": lambda mp: CATALOGUE["touch-foreign-accepted"].pool_class(),
}


@pytest.mark.parametrize("bug", list(SEEDED))
def test_the_harness_catches_a_seeded_bug(bug: str, monkeypatch: pytest.MonkeyPatch) -> None:
    factory = SEEDED[bug](monkeypatch)
    found = [f for seed in range(3) for f in Stress(seed, factory).run(3_000).failures]
    assert found, f"the harness missed {bug}"
    assert found[0].startswith("seed ")
