"""Replay a refinement counterexample on a plain Python linked list, with the same bug.

z3 refutes each refinement mutant of :mod:`kvpool.proofs.refinement` on a concrete
list; this module confirms the refutation without z3. It keeps the free queue as
two dicts (``nxt``/``prv`` over node ids, with the same HEAD/TAIL sentinels and NONE
for a missing link), runs the operation with the same seeded bug, statement for
statement as the implementation does it, and walks the result: does the list still
represent the sequence the spec gives (one chain from HEAD to TAIL, prev links
mirroring next links, blocks outside the list without links)? The correct
operations must pass the same check, so a confirmation means the bug, not the
checker.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from .refinement import HEAD, NONE, REF_MUTANTS, TAIL

START = (0, 1, 2)
"""The list z3's counterexample starts from (``concrete_refute``)."""
GROUP = (5, 6)
"""Blocks outside the list that the n-block operations link in."""


@dataclass
class PyList:
    nxt: dict[int, int] = field(default_factory=dict)
    prv: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(cls, blocks: tuple[int, ...]) -> PyList:
        lst = cls()
        chain = [HEAD, *blocks, TAIL]
        for u, v in itertools.pairwise(chain):
            lst.nxt[u], lst.prv[v] = v, u
        return lst

    def n(self, b: int) -> int:
        return self.nxt.get(b, NONE)

    def p(self, b: int) -> int:
        return self.prv.get(b, NONE)


def run(op: str, lst: PyList, bug: str | None, x: int | None = None) -> tuple[int, ...]:
    """Apply ``op`` (with ``bug``, or none) to ``lst`` in place; the sequence the spec gives."""
    nxt, prv = lst.nxt, lst.prv
    seq = list(START)
    if op == "popleft":
        node = lst.n(HEAD)
        after = lst.n(node)
        prv[node] = nxt[node] = NONE
        nxt[HEAD] = after
        if bug != "popleft-lost-prev":
            prv[after] = HEAD
        return tuple(seq[1:])
    if op == "remove":
        if x is None:
            raise ValueError("remove needs the block z3 chose")
        p, q = lst.p(x), lst.n(x)
        nxt[p], prv[q] = q, p
        if bug != "remove-keeps-links":
            prv[x] = nxt[x] = NONE
        return tuple(b for b in seq if b != x)
    if op == "append":
        b = GROUP[0]
        if bug == "append-at-head":
            first = lst.n(HEAD)
            nxt[HEAD], prv[b], nxt[b], prv[first] = b, HEAD, first, b
        else:
            last = lst.p(TAIL)
            nxt[last], prv[b], nxt[b], prv[TAIL] = b, last, TAIL, b
        return (*seq, b)
    if op == "append_n":
        last = lst.p(TAIL)
        for b in GROUP:
            nxt[last] = b
            if bug != "append-n-skip-prev":
                prv[b] = last
            last = b
        nxt[last], prv[TAIL] = TAIL, last
        return (*seq, *GROUP)
    if op == "prepend_n":
        first, prev = lst.n(HEAD), HEAD
        for b in reversed(GROUP) if bug == "prepend-n-reversed" else GROUP:
            nxt[prev], prv[b] = b, prev
            prev = b
        nxt[prev], prv[first] = first, prev
        return (*GROUP, *seq)
    if op == "popleft_n":  # two blocks
        node = lst.n(HEAD)
        for step in range(2):
            after = lst.n(node)
            if step == 0 and bug == "popleft-n-skip":
                after = lst.n(after)
            prv[node] = nxt[node] = NONE
            node = after
        nxt[HEAD], prv[node] = node, HEAD
        return tuple(seq[2:])
    raise ValueError(f"unknown queue operation {op!r}")


def represents(lst: PyList, seq: tuple[int, ...]) -> str | None:
    """Why ``lst`` does not represent ``seq`` (None when it does, INV-LIST included)."""
    walked: list[int] = []
    node = lst.n(HEAD)
    while node != TAIL and len(walked) <= len(seq) + 2:
        if node == NONE:
            return f"the walk from HEAD falls off the list after {walked}"
        walked.append(node)
        node = lst.n(node)
    if tuple(walked) != seq:
        return f"the walk from HEAD gives {walked}, the spec's sequence is {list(seq)}"
    chain = [HEAD, *seq, TAIL]
    for u, v in itertools.pairwise(chain):
        if lst.p(v) != u:
            return f"block {v}'s prev link is {lst.p(v)}, not {u} (links do not mirror)"
    for b in {*START, *GROUP} - set(seq):
        if lst.n(b) != NONE or lst.p(b) != NONE:
            return f"block {b} is outside the list but keeps its links"
    return None


def confirm(bug: str, x: int | None = None) -> str:
    """Replay refinement mutant ``bug``; ``"confirmed: <why>"`` or ``"NOT confirmed ..."``."""
    op = REF_MUTANTS[bug][0]
    good = PyList.of(START)
    sound = represents(good, run(op, good, None, x))
    if sound is not None:  # the checker itself is wrong: nothing can be confirmed
        return f"NOT confirmed: the correct {op} fails the replay too ({sound})"
    buggy = PyList.of(START)
    why = represents(buggy, run(op, buggy, bug, x))
    where = f"({x})" if x is not None else ""
    if why is None:
        return f"NOT confirmed: {op}{where} with {bug} still represents the sequence"
    return f"confirmed: list 0,1,2; {op}{where}: {why}"
