"""Refinement of the linked free queue (``impl/free_queue.py``'s algorithm) to the spec's sequence.

Concrete state: ``nxt``/``prv`` maps over node ids (blocks are ids >= 0; the
sentinels are HEAD = -1 and TAIL = -2; NONE = -3 is a missing link), modelled
after the implementation's pointer updates, statement by statement. Abstract
state: a sequence ``s[0..n)`` with its inverse ``pos`` (-1 outside).
``R(list, s)`` is the abstraction relation (it includes INV-LIST: sentinels at
both ends, links mirror each other, outsiders have no links).

Single-block operations are proved for every list (unbounded); the n-block ones
by a loop invariant J: J holds before the loop, one iteration preserves it, and
J at exit plus the statements after the loop give R with the spec's sequence.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import z3  # type: ignore[import-untyped]

from .model import isolated_check, named

HEAD, TAIL, NONE = -1, -2, -3
A = z3.Array


def _arr(name: str) -> z3.ArrayRef:
    return z3.Array(name, z3.IntSort(), z3.IntSort())


@dataclass
class Lst:
    nxt: Any
    prv: Any


@dataclass
class Seq:
    s: Any
    n: Any
    pos: Any


def R(c: Lst, a: Seq, *, outsiders_unlinked: bool = True) -> z3.BoolRef:
    """The list ``c`` represents the sequence ``a`` (and is well formed: INV-LIST).
    Without ``outsiders_unlinked``, a block outside the list may keep links (the pool's
    ``touch`` keeps a borrowed one while it runs: ``pypool.R_core``)."""
    i, b = z3.Ints("ri rb")
    s, n, pos = a.s, a.n, a.pos
    outside = z3.And(pos[b] == -1, c.nxt[b] == NONE, c.prv[b] == NONE)
    if not outsiders_unlinked:
        outside = pos[b] == -1
    return z3.And(
        n >= 0,
        z3.ForAll([i], z3.Implies(z3.And(i >= 0, i < n), z3.And(s[i] >= 0, pos[s[i]] == i))),
        z3.ForAll(
            [b],
            z3.Implies(
                b >= 0,
                z3.Or(
                    z3.And(pos[b] >= 0, pos[b] < n, s[pos[b]] == b),
                    outside,
                ),
            ),
        ),
        c.nxt[HEAD] == z3.If(n == 0, TAIL, s[0]),
        c.prv[TAIL] == z3.If(n == 0, HEAD, s[n - 1]),
        z3.ForAll(
            [i],
            z3.Implies(
                z3.And(i >= 0, i < n),
                z3.And(
                    c.nxt[s[i]] == z3.If(i == n - 1, TAIL, s[i + 1]),
                    c.prv[s[i]] == z3.If(i == 0, HEAD, s[i - 1]),
                ),
            ),
        ),
    )


def _fresh() -> tuple[Lst, Seq]:
    return Lst(_arr("nxt"), _arr("prv")), Seq(_arr("s"), z3.Int("n"), _arr("pos"))


# -- the implementation's algorithm, statement by statement (bugs by name) --------------------


def popleft(c: Lst, bugs: frozenset[str]) -> tuple[Lst, Any]:
    nxt, prv = c.nxt, c.prv
    node = nxt[HEAD]
    after = nxt[node]
    prv = z3.Store(prv, node, NONE)
    nxt = z3.Store(nxt, node, NONE)
    nxt = z3.Store(nxt, HEAD, after)
    if "popleft-lost-prev" not in bugs:
        prv = z3.Store(prv, after, HEAD)
    return Lst(nxt, prv), node


def remove(c: Lst, x: Any, bugs: frozenset[str]) -> Lst:
    nxt, prv = c.nxt, c.prv
    p, q = prv[x], nxt[x]
    nxt = z3.Store(nxt, p, q)
    prv = z3.Store(prv, q, p)
    if "remove-keeps-links" not in bugs:
        prv = z3.Store(prv, x, NONE)
        nxt = z3.Store(nxt, x, NONE)
    return Lst(nxt, prv)


def append(c: Lst, x: Any, bugs: frozenset[str]) -> Lst:
    nxt, prv = c.nxt, c.prv
    if "append-at-head" in bugs:  # LIFO/FIFO swap: link in after HEAD
        first = nxt[HEAD]
        nxt = z3.Store(nxt, HEAD, x)
        prv = z3.Store(prv, x, HEAD)
        nxt = z3.Store(nxt, x, first)
        prv = z3.Store(prv, first, x)
        return Lst(nxt, prv)
    last = prv[TAIL]
    nxt = z3.Store(nxt, last, x)
    prv = z3.Store(prv, x, last)
    nxt = z3.Store(nxt, x, TAIL)
    prv = z3.Store(prv, TAIL, x)
    return Lst(nxt, prv)


# -- the spec's sequence operations ----------------------------------------------------------


def seq_popleft(a: Seq) -> Seq:
    i, b = z3.Ints("pi pb")
    return Seq(
        z3.Lambda([i], a.s[i + 1]),
        a.n - 1,
        z3.Lambda([b], z3.If(a.pos[b] >= 1, a.pos[b] - 1, z3.IntVal(-1))),
    )


def seq_remove(a: Seq, x: Any) -> Seq:
    i, b = z3.Ints("mi mb")
    p = a.pos[x]
    return Seq(
        z3.Lambda([i], z3.If(i < p, a.s[i], a.s[i + 1])),
        a.n - 1,
        z3.Lambda([b], z3.If(b == x, -1, z3.If(a.pos[b] > p, a.pos[b] - 1, a.pos[b]))),
    )


def seq_append_all(a: Seq, bl: Any, m: Any, blpos: Any) -> Seq:
    """s ++ bl[0..m)."""
    i, b = z3.Ints("ai ab")
    return Seq(
        z3.Lambda([i], z3.If(i < a.n, a.s[i], bl[i - a.n])),
        a.n + m,
        z3.Lambda([b], z3.If(a.pos[b] >= 0, a.pos[b], z3.If(blpos[b] >= 0, a.n + blpos[b], -1))),
    )


def seq_prepend_all(a: Seq, bl: Any, m: Any, blpos: Any) -> Seq:
    """bl[0..m) ++ s."""
    i, b = z3.Ints("qi qb")
    return Seq(
        z3.Lambda([i], z3.If(i < m, bl[i], a.s[i - m])),
        a.n + m,
        z3.Lambda([b], z3.If(a.pos[b] >= 0, a.pos[b] + m, z3.If(blpos[b] >= 0, blpos[b], -1))),
    )


def _unlinked_group(a: Seq, bl: Any, m: Any, blpos: Any) -> z3.BoolRef:
    """bl[0..m) are distinct blocks outside the list (what ``_check_unlinked`` checks)."""
    i, b = z3.Ints("gi gb")
    return z3.And(
        m >= 0,
        z3.ForAll(
            [i],
            z3.Implies(
                z3.And(i >= 0, i < m), z3.And(bl[i] >= 0, blpos[bl[i]] == i, a.pos[bl[i]] == -1)
            ),
        ),
        z3.ForAll(
            [b],
            z3.Or(blpos[b] == -1, z3.And(b >= 0, blpos[b] >= 0, blpos[b] < m, bl[blpos[b]] == b)),
        ),
    )


@dataclass
class RefResult:
    name: str
    op: str
    step: str  # "whole", "init", "preserve", "exit"
    status: str
    seconds: float
    model: z3.ModelRef | None = None
    info: object = None


def single_ops(
    bugs: frozenset[str] = frozenset(), timeout_ms: int = 30000, only: str | None = None
) -> list[RefResult]:
    out = []
    c, a = _fresh()
    x = z3.Int("x")
    cases: dict[str, tuple[list[Any], Any]] = {}
    c2, got = popleft(c, bugs)
    a2 = seq_popleft(a)
    cases["popleft"] = ([R(c, a), a.n > 0], z3.And(got == a.s[0], R(c2, a2)))
    cases["remove"] = ([R(c, a), x >= 0, a.pos[x] >= 0], R(remove(c, x, bugs), seq_remove(a, x)))
    i, b = z3.Ints("xi xb")
    one = z3.Lambda([i], x)
    onepos = z3.Lambda([b], z3.If(b == x, 0, -1))
    cases["append"] = (
        [R(c, a), x >= 0, a.pos[x] == -1],
        R(append(c, x, bugs), seq_append_all(a, one, 1, onepos)),
    )
    for op, (hyp, goal) in cases.items():
        if only and op != only:
            continue
        with named(f"{op} refines seq (whole)"):
            st, dt, m = isolated_check(hyp, goal, timeout_ms)
        out.append(RefResult("REFINE", op, "whole", st, dt, m, (c, a, x)))
    return out


# -- n-block operations, by loop invariant ------------------------------------------------


def _frame(c0: Lst, c: Lst, moved: Any) -> z3.BoolRef:
    """Every node for which ``moved`` is false keeps both links."""
    v = z3.Int("fv")
    return z3.ForAll(
        [v], z3.Implies(z3.Not(moved(v)), z3.And(c.nxt[v] == c0.nxt[v], c.prv[v] == c0.prv[v]))
    )


def n_block_ops(
    bugs: frozenset[str] = frozenset(), timeout_ms: int = 30000, only: str | None = None
) -> list[RefResult]:
    out: list[RefResult] = []
    c0, a = _fresh()
    bl, blpos = _arr("bl"), _arr("blpos")
    m, j = z3.Ints("m j")
    cur = Lst(_arr("nxt_j"), _arr("prv_j"))
    pre = [R(c0, a), _unlinked_group(a, bl, m, blpos)]

    def chain(c: Lst, start: Any, k: Any) -> z3.BoolRef:
        """bl[0..k) is linked in order after ``start`` (next links of bl[0..k-1) only)."""
        i = z3.Int("ci")
        return z3.And(
            z3.Implies(k > 0, c.nxt[start] == bl[0]),
            z3.ForAll(
                [i],
                z3.Implies(
                    z3.And(i >= 0, i < k),
                    z3.And(
                        c.prv[bl[i]] == z3.If(i == 0, start, bl[i - 1]),
                        z3.Implies(i < k - 1, c.nxt[bl[i]] == bl[i + 1]),
                    ),
                ),
            ),
        )

    def in_first(k: Any) -> Any:
        return lambda v: z3.And(blpos[v] >= 0, blpos[v] < k)

    # append_n: last = tail.prev; for b in bl: last.next = b; b.prev = last; last = b
    #           then last.next = tail; tail.prev = last
    last0 = c0.prv[TAIL]
    lastj = z3.If(j == 0, last0, bl[j - 1])
    J = z3.And(
        j >= 0,
        j <= m,
        chain(cur, last0, j),
        z3.Implies(j == 0, cur.nxt[last0] == c0.nxt[last0]),
        cur.prv[last0] == c0.prv[last0],
        z3.Implies(j > 0, cur.nxt[bl[j - 1]] == NONE),
        _frame(c0, cur, lambda v: z3.Or(v == last0, in_first(j)(v))),
    )
    body_n = z3.Store(cur.nxt, lastj, bl[j])
    body_p = z3.Store(cur.prv, bl[j], lastj)
    if "append-n-skip-prev" in bugs:
        body_p = cur.prv
    J1 = z3.substitute(J, (j, j + 1), (cur.nxt, body_n), (cur.prv, body_p))
    J0 = z3.substitute(J, (j, z3.IntVal(0)), (cur.nxt, c0.nxt), (cur.prv, c0.prv))
    endn = z3.Store(cur.nxt, lastj, TAIL)
    endp = z3.Store(cur.prv, TAIL, lastj)
    post = R(
        Lst(z3.If(m > 0, endn, c0.nxt), z3.If(m > 0, endp, c0.prv)), seq_append_all(a, bl, m, blpos)
    )
    goals = {
        "init": (pre, J0),
        "preserve": ([*pre, J, j < m], J1),
        "exit": ([*pre, J, j == m], post),
    }
    if not only or only == "append_n":
        for step, (hyp, g) in goals.items():
            with named(f"append_n refines seq ({step})"):
                st, dt, mdl = isolated_check(hyp, g, timeout_ms)
            out.append(RefResult("REFINE", "append_n", step, st, dt, mdl))

    # prepend_n: prev = head; for b in bl: prev.next = b; b.prev = prev; prev = b
    #            then prev.next = old_first; old_first.prev = prev
    first0 = c0.nxt[HEAD]
    prevj = z3.If(j == 0, z3.IntVal(HEAD), bl[j - 1])
    Jp = z3.And(
        j >= 0,
        j <= m,
        chain(cur, z3.IntVal(HEAD), j),
        z3.Implies(j == 0, cur.nxt[HEAD] == c0.nxt[HEAD]),
        cur.prv[HEAD] == c0.prv[HEAD],
        z3.Implies(j > 0, cur.nxt[bl[j - 1]] == NONE),
        _frame(c0, cur, lambda v: z3.Or(v == HEAD, in_first(j)(v))),
    )
    order = z3.If(j == 0, bl[m - 1], bl[j]) if "prepend-n-reversed" in bugs else bl[j]
    pn = z3.Store(cur.nxt, prevj, order)
    pp = z3.Store(cur.prv, order, prevj)
    Jp1 = z3.substitute(Jp, (j, j + 1), (cur.nxt, pn), (cur.prv, pp))
    Jp0 = z3.substitute(Jp, (j, z3.IntVal(0)), (cur.nxt, c0.nxt), (cur.prv, c0.prv))
    en = z3.Store(cur.nxt, prevj, first0)
    ep = z3.Store(cur.prv, first0, prevj)
    postp = R(
        Lst(z3.If(m > 0, en, c0.nxt), z3.If(m > 0, ep, c0.prv)), seq_prepend_all(a, bl, m, blpos)
    )
    goals = {
        "init": (pre, Jp0),
        "preserve": ([*pre, Jp, j < m], Jp1),
        "exit": ([*pre, Jp, j == m], postp),
    }
    if not only or only == "prepend_n":
        for step, (hyp, g) in goals.items():
            with named(f"prepend_n refines seq ({step})"):
                st, dt, mdl = isolated_check(hyp, g, timeout_ms)
            out.append(RefResult("REFINE", "prepend_n", step, st, dt, mdl))

    # popleft_n(k): node = head.next; repeat k: out.append(node); nx = node.next;
    #               node.prev = node.next = None; node = nx.
    #               Then head.next = node; node.prev = head
    k = z3.Int("k")
    node = z3.Int("node")
    Jq = z3.And(
        j >= 0,
        j <= k,
        node == z3.If(j < a.n, a.s[j], TAIL),
        _frame(c0, cur, lambda v: z3.And(v >= 0, a.pos[v] >= 0, a.pos[v] < j)),
        z3.ForAll(
            [z3.Int("qv")],
            z3.Implies(
                z3.And(z3.Int("qv") >= 0, a.pos[z3.Int("qv")] >= 0, a.pos[z3.Int("qv")] < j),
                z3.And(cur.nxt[z3.Int("qv")] == NONE, cur.prv[z3.Int("qv")] == NONE),
            ),
        ),
    )
    qn = z3.Store(cur.nxt, node, NONE)
    qp = z3.Store(cur.prv, node, NONE)
    adv = cur.nxt[node]
    if "popleft-n-skip" in bugs:
        adv = z3.If(j == 0, c0.nxt[adv], adv)
    Jq1 = z3.substitute(Jq, (j, j + 1), (cur.nxt, qn), (cur.prv, qp), (node, adv))
    Jq0 = z3.substitute(
        Jq, (j, z3.IntVal(0)), (cur.nxt, c0.nxt), (cur.prv, c0.prv), (node, c0.nxt[HEAD])
    )
    fn = z3.Store(cur.nxt, HEAD, node)
    fp = z3.Store(cur.prv, node, HEAD)
    i2, b2 = z3.Ints("ki kb")
    after = Seq(
        z3.Lambda([i2], a.s[i2 + k]),
        a.n - k,
        z3.Lambda([b2], z3.If(a.pos[b2] >= k, a.pos[b2] - k, z3.IntVal(-1))),
    )
    postq = R(Lst(z3.If(k > 0, fn, c0.nxt), z3.If(k > 0, fp, c0.prv)), after)
    preq = [R(c0, a), k >= 0, k <= a.n]
    goals = {
        "init": (preq, Jq0),
        "preserve": ([*preq, Jq, j < k], Jq1),
        "exit": ([*preq, Jq, j == k], postq),
    }
    if not only or only == "popleft_n":
        for step, (hyp, g) in goals.items():
            with named(f"popleft_n refines seq ({step})"):
                st, dt, mdl = isolated_check(hyp, g, timeout_ms)
            out.append(RefResult("REFINE", "popleft_n", step, st, dt, mdl))
    return out


REF_MUTANTS: dict[str, tuple[str, str]] = {
    "popleft-lost-prev": ("popleft", "popleft forgets to point the new front's prev at HEAD"),
    "remove-keeps-links": ("remove", "remove leaves the removed block's own links set"),
    "append-at-head": ("append", "append links the block in at the front (LIFO/FIFO swap)"),
    "append-n-skip-prev": ("append_n", "append_n never sets the appended blocks' prev"),
    "prepend-n-reversed": ("prepend_n", "prepend_n links the group's last block first"),
    "popleft-n-skip": ("popleft_n", "popleft_n skips a block on its first step"),
}


# -- mutants: refuted on a concrete list by running the (buggy) statements -------------------


def concrete_refute(bug: str, timeout_ms: int = 20000) -> tuple[str, float, str, int | None]:
    """Run the operation with ``bug`` on the list 0,1,2 (blocks 5,6 outside); z3 checks R.

    Returns (status, seconds, what breaks, the block z3 chose for ``remove``)."""
    op = REF_MUTANTS[bug][0]
    bugs = frozenset([bug])
    base = [0, 1, 2]
    nxt = z3.K(z3.IntSort(), z3.IntVal(NONE))
    prv = z3.K(z3.IntSort(), z3.IntVal(NONE))
    chain = [HEAD, *base, TAIL]
    for u, v in itertools.pairwise(chain):
        nxt = z3.Store(nxt, u, v)
        prv = z3.Store(prv, v, u)
    s = z3.K(z3.IntSort(), z3.IntVal(0))
    pos = z3.K(z3.IntSort(), z3.IntVal(-1))
    for i, b in enumerate(base):
        s = z3.Store(s, i, b)
        pos = z3.Store(pos, b, i)
    c, a = Lst(nxt, prv), Seq(s, z3.IntVal(3), pos)
    group = [5, 6]
    bl = z3.Store(z3.Store(z3.K(z3.IntSort(), z3.IntVal(0)), 0, 5), 1, 6)
    blpos = z3.Store(z3.Store(z3.K(z3.IntSort(), z3.IntVal(-1)), 5, 0), 6, 1)
    x = z3.Int("x")
    hyp: list[Any] = []
    if op == "popleft":
        c2, got = popleft(c, bugs)
        goal = z3.And(got == 0, R(c2, seq_popleft(a)))
    elif op == "remove":
        hyp = [z3.Or(x == 0, x == 1, x == 2)]
        goal = R(remove(c, x, bugs), seq_remove(a, x))
    elif op == "append":
        one = z3.Store(z3.K(z3.IntSort(), z3.IntVal(0)), 0, 5)
        onepos = z3.Store(z3.K(z3.IntSort(), z3.IntVal(-1)), 5, 0)
        goal = R(append(c, z3.IntVal(5), bugs), seq_append_all(a, one, 1, onepos))
    elif op == "append_n":
        n_, p_ = c.nxt, c.prv
        last: Any = p_[TAIL]
        for b in group:
            n_ = z3.Store(n_, last, b)
            if bug != "append-n-skip-prev":
                p_ = z3.Store(p_, b, last)
            last = z3.IntVal(b)
        n_, p_ = z3.Store(n_, last, TAIL), z3.Store(p_, TAIL, last)
        goal = R(Lst(n_, p_), seq_append_all(a, bl, 2, blpos))
    elif op == "prepend_n":
        n_, p_ = c.nxt, c.prv
        first = n_[HEAD]
        prev: Any = z3.IntVal(HEAD)
        for b in reversed(group) if bug == "prepend-n-reversed" else group:
            n_, p_ = z3.Store(n_, prev, b), z3.Store(p_, b, prev)
            prev = z3.IntVal(b)
        n_, p_ = z3.Store(n_, prev, first), z3.Store(p_, first, prev)
        goal = R(Lst(n_, p_), seq_prepend_all(a, bl, 2, blpos))
    else:  # popleft_n(2)
        n_, p_ = c.nxt, c.prv
        node: Any = n_[HEAD]
        for step in range(2):
            nx = n_[node]
            if step == 0 and bug == "popleft-n-skip":
                nx = n_[nx]
            n_, p_ = z3.Store(n_, node, NONE), z3.Store(p_, node, NONE)
            node = nx
        n_, p_ = z3.Store(n_, HEAD, node), z3.Store(p_, node, HEAD)
        i2, b2 = z3.Ints("ki kb")
        after = Seq(
            z3.Lambda([i2], a.s[i2 + 2]),
            a.n - 2,
            z3.Lambda([b2], z3.If(a.pos[b2] >= 2, a.pos[b2] - 2, z3.IntVal(-1))),
        )
        goal = R(Lst(n_, p_), after)
    st, dt, m = isolated_check(hyp, goal, timeout_ms)
    if st == "refuted" and m is not None:
        chosen = m.eval(x, model_completion=True).as_long() if op == "remove" else None
        where = f" (x = {chosen})" if chosen is not None else ""
        return (
            "refuted",
            dt,
            f"list 0,1,2; {op}{where}: the linked list no longer represents the spec's sequence",
            chosen,
        )
    return st, dt, "", None
