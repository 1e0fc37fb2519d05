"""Entry points into the real free queue small enough for CrossHair to explore every path.

The pool's entry points (:mod:`.harness`) build a state from a symbolic setup
sequence; loops over it give CrossHair more paths than any budget, so their honest
verdict is "no counterexample within budget". Here the scope is bounded instead: a
queue over ``BLOCKS`` blocks, every subset of them in every order as the starting
queue, and every argument of the operation under test. Each symbolic int is made
concrete by :func:`.harness.pick` (one branch per value), so the paths are finite and
CrossHair can finish them all and say "Confirmed over all paths": for every queue of
at most ``BLOCKS`` blocks, the real ``FreeKVCacheBlockQueue`` method keeps its
docstring contracts and the class invariants (INV-LIST), and leaves exactly the
sequence the spec's operation gives. That is exhaustive within the bound (the small
scope hypothesis: list bugs show on small lists), not a proof for every size; the z3
refinement proof of ``kvpool.proofs`` covers every size, on a model.

Each entry point builds real blocks (CrossHair cannot build a ``KVCacheBlock``, and its
proxies would mislead the ``is`` tests the list lives on), calls the method through
:func:`.harness.call` (docstring contracts checked) and compares the walk of the queue
with the spec's sequence, a Python list.
"""

from __future__ import annotations

import os
from itertools import permutations

from kvpool.impl import FreeKVCacheBlockQueue, KVCacheBlock, PoolError, inv_list_of
from kvpool.impl.bridge import walk_free_queue

from . import harness
from .bugs import QUEUES
from .harness import MUTANT, HarnessViolation, pick, untraced

QUEUE: type[FreeKVCacheBlockQueue] = QUEUES.get(MUTANT, FreeKVCacheBlockQueue)

BLOCKS = int(os.environ.get("KVPOOL_CONTRACTS_BLOCKS", "3"))
"""Blocks 1..BLOCKS (0 is never in a queue: it is the null block). The runner sets
KVPOOL_CONTRACTS_BLOCKS per profile: 3 in `make test`, 4 in `make contracts`."""


def arrangements(ids: list[int]) -> list[list[int]]:
    """Every ordered selection of ``ids``: each subset in each of its orders."""
    out: list[list[int]] = []
    for k in range(len(ids) + 1):
        for chosen in permutations(ids, k):
            out.append(list(chosen))
    return out


QUEUES_IN_SCOPE = arrangements(list(range(1, BLOCKS + 1)))
"""Every queue of at most BLOCKS blocks (16 for 3 blocks): the starting states."""


def _choice(x: int, options: list[list[int]]) -> list[int]:
    """``options[x mod len]``, one CrossHair branch per option."""
    return options[pick(x % len(options), 0, len(options) - 1)]


def _start(state: int) -> tuple[FreeKVCacheBlockQueue, list[KVCacheBlock], list[int]]:
    """The ``state``-th queue in scope, every block, and the spec's sequence for it."""
    seq = _choice(state, QUEUES_IN_SCOPE)
    blocks = [KVCacheBlock(i) for i in range(BLOCKS + 1)]
    with untraced():
        queue = FreeKVCacheBlockQueue([blocks[b] for b in seq])
        queue.__class__ = QUEUE  # a seeded bug, under KVPOOL_CONTRACTS_MUTANT
    return queue, blocks, list(seq)


def _expect(
    queue: FreeKVCacheBlockQueue, blocks: list[KVCacheBlock], seq: list[int], what: str
) -> None:
    """The queue walks exactly the spec's sequence ``seq``, and INV-LIST holds."""
    got = [b.block_id for b in walk_free_queue(queue, BLOCKS + 1)[0]]
    if got != seq:
        raise HarnessViolation(f"{what}: the queue walks {got}, the spec's sequence is {seq}")
    broken = inv_list_of(queue, blocks)
    if broken:
        raise HarnessViolation(f"{what}: {broken[0]}")


def _must_refuse(
    queue: FreeKVCacheBlockQueue, blocks: list[KVCacheBlock], seq: list[int], name: str, arg: object
) -> None:
    """A call outside the operation's precondition: refused, and the queue unchanged."""
    try:
        harness.call(queue, name, arg)
    except PoolError:
        _expect(queue, blocks, seq, f"a refused {name}")
        return
    raise HarnessViolation(f"{name}({arg!r}) accepted on the queue {seq}")


# Each operation has two bodies in kvpool.impl: the checked public method (what a user
# calls; it refuses bad input) and the unchecked ``_`` method the pool calls on its hot
# path once it has validated. Both are run on every queue in scope, each on a fresh copy;
# the unchecked one only within its precondition, which the pool guarantees.


def queue_popleft_n(state: int, n: int) -> None:
    """Every queue of at most BLOCKS blocks, every count: the first n leave, in order.

    The leading asserts bound the scope (CrossHair reads them as preconditions).
    """
    assert 0 <= state < len(QUEUES_IN_SCOPE)
    assert 0 <= n <= BLOCKS + 1
    n = pick(n, 0, BLOCKS + 1)
    for name in ("popleft_n", "_popleft_n"):
        queue, blocks, seq = _start(state)
        if n > len(seq):
            if name == "popleft_n":
                _must_refuse(queue, blocks, seq, name, n)
            continue
        out = harness.call(queue, name, n)
        if [b.block_id for b in out] != seq[:n]:
            raise HarnessViolation(f"{name}({n}) returned {[b.block_id for b in out]}")
        _expect(queue, blocks, seq[n:], f"{name}({n})")


def queue_remove(state: int, which: int) -> None:
    """Every queue, every block (in it or not): remove unlinks it and only it.

    The leading asserts bound the scope (CrossHair reads them as preconditions).
    """
    assert 0 <= state < len(QUEUES_IN_SCOPE)
    assert 1 <= which <= BLOCKS
    which = pick(which, 1, BLOCKS)
    for name in ("remove", "_remove"):
        queue, blocks, seq = _start(state)
        if which not in seq:
            if name == "remove":
                _must_refuse(queue, blocks, seq, name, blocks[which])
            continue
        harness.call(queue, name, blocks[which])
        _expect(queue, blocks, [b for b in seq if b != which], f"{name}({which})")


def _add_n(method: str, state: int, extra: int) -> None:
    for name in (method, f"_{method}"):  # no precondition to leave: any unqueued blocks
        queue, blocks, seq = _start(state)
        # Any ordered selection of the blocks not queued: what append_n / prepend_n may take.
        new = _choice(extra, arrangements([b for b in range(1, BLOCKS + 1) if b not in seq]))
        harness.call(queue, name, [blocks[b] for b in new])
        _expect(queue, blocks, seq + new if method == "append_n" else new + seq, f"{name}({new})")


def queue_append_n(state: int, extra: int) -> None:
    """Every queue, every list of unqueued blocks: they join the back, in list order.

    The leading asserts bound the scope (CrossHair reads them as preconditions).
    """
    assert 0 <= state < len(QUEUES_IN_SCOPE)
    assert 0 <= extra < len(QUEUES_IN_SCOPE)
    _add_n("append_n", state, extra)


def queue_prepend_n(state: int, extra: int) -> None:
    """Every queue, every list of unqueued blocks: they join the front, in list order.

    The leading asserts bound the scope (CrossHair reads them as preconditions).
    """
    assert 0 <= state < len(QUEUES_IN_SCOPE)
    assert 0 <= extra < len(QUEUES_IN_SCOPE)
    _add_n("prepend_n", state, extra)
