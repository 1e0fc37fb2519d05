"""The free queue refines the spec's sequence, proved on ``impl/free_queue.py``'s own source.

:mod:`kvpool.proofs.pysource` translates each method from the source text;
this module states what each must do, in the terms of
:mod:`kvpool.proofs.refinement` (the abstraction ``R`` from the linked list to the
spec's sequence, and the sequence operations), plus the counter
(``num_free_blocks == len(s)``) and both sentinels' outer links
(``head.prev is None``, ``tail.next is None``): the relation :func:`RC`.

* The unchecked methods the pool calls (``_popleft_n``, ``_remove``,
  ``_append_n``, ``_prepend_n``): for every list and every group, their loops by
  the invariants below.
* The checked public methods (``popleft``, ``popleft_n``, ``remove``, ``append``,
  ``append_n``, ``prepend_n``): any argument the model has (a block in the list
  or not, a sentinel, ``None``, a group with repeats) either does what the spec
  says, or raises the named ``PoolError`` and leaves every link and the counter as
  they were (the rollback). ``popleft``/``popleft_n`` for every n (they reuse
  ``_popleft_n``'s loop invariant); ``append_n``/``prepend_n`` for groups of at
  most :data:`GROUP_BOUND` entries (their loops, with a ``raise`` and a ``try``,
  are unrolled, and "the loop is done by then" is an obligation).

Each obligation is a z3 unsat over every list of any length (quantified).
:func:`witness` shows that each method's hypotheses are satisfiable, decodes
the model into a real :class:`FreeKVCacheBlockQueue`, and replays the call.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import z3  # type: ignore[import-untyped]

from kvpool.spec.errors import InsufficientFreeBlocks, InvalidArgument

from .model import isolated_check, named
from .pysource import (
    HEAD,
    NONE,
    TAIL,
    Heap,
    IntV,
    ListV,
    LoopInvariant,
    Node,
    Translation,
    Value,
)
from .refinement import (
    Lst,
    R,
    Seq,
    _unlinked_group,
    seq_append_all,
    seq_popleft,
    seq_prepend_all,
    seq_remove,
)

GROUP_BOUND = 3
"""``append_n``/``prepend_n`` (checked) are proved for groups of at most this many entries."""


def RC(h: Heap, a: Seq) -> z3.BoolRef:
    """``R`` plus the counter and the sentinels' outer links."""
    return z3.And(R(Lst(h.nxt, h.prv), a), h.cnt == a.n, h.prv[HEAD] == NONE, h.nxt[TAIL] == NONE)


def _arr(name: str) -> z3.ArrayRef:
    return z3.Array(name, z3.IntSort(), z3.IntSort())


@dataclass
class Ctx:
    heap: Heap
    a: Seq
    tr: Translation

    def unchanged(self, h: Heap) -> z3.BoolRef:
        return z3.And(h.nxt == self.heap.nxt, h.prv == self.heap.prv, h.cnt == self.heap.cnt)

    def code(self, exc: type[BaseException]) -> int:
        return self.tr.code(exc)


def _drop(a: Seq, k: Any) -> Seq:
    i, b = z3.Ints("di db")
    return Seq(
        z3.Lambda([i], a.s[i + k]),
        a.n - k,
        z3.Lambda([b], z3.If(a.pos[b] >= k, a.pos[b] - k, z3.IntVal(-1))),
    )


def _prefix(ret: Value | None, a: Seq, k: Any) -> z3.BoolRef:
    if not isinstance(ret, ListV):
        return z3.BoolVal(False)
    i = z3.Int("pfx")
    return z3.And(
        ret.n == k, z3.ForAll([i], z3.Implies(z3.And(i >= 0, i < k), ret.arr[i] == a.s[i]))
    )


def _frame(h0: Heap, h: Heap, moved: Callable[[Any], Any]) -> z3.BoolRef:
    v = z3.Int("fv")
    return z3.ForAll(
        [v], z3.Implies(z3.Not(moved(v)), z3.And(h.nxt[v] == h0.nxt[v], h.prv[v] == h0.prv[v]))
    )


# -- loop invariants (the only hand-written part of a proof; the loops are the source's) ------


def _inv_popleft(c: Ctx) -> LoopInvariant:
    a, h0 = c.a, c.heap

    def inv(j: Any, env: dict[str, Value], h: Heap) -> Any:
        node, out, k = env["node"], env["out"], env["n"]
        assert isinstance(node, Node) and isinstance(out, ListV) and isinstance(k, IntV | Node)
        i, v = z3.Ints("qi qv")
        return z3.And(
            j >= 0,
            j <= k.t,
            node.t == z3.If(j < a.n, a.s[j], TAIL),
            h.cnt == h0.cnt,
            out.n == j,
            z3.ForAll([i], z3.Implies(z3.And(i >= 0, i < j), out.arr[i] == a.s[i])),
            _frame(h0, h, lambda u: z3.And(u >= 0, a.pos[u] >= 0, a.pos[u] < j)),
            z3.ForAll(
                [v],
                z3.Implies(
                    z3.And(v >= 0, a.pos[v] >= 0, a.pos[v] < j),
                    z3.And(h.nxt[v] == NONE, h.prv[v] == NONE),
                ),
            ),
        )

    return LoopInvariant(inv)


def _chain(h: Heap, bl: Any, start: Any, k: Any) -> z3.BoolRef:
    i = z3.Int("ci")
    return z3.And(
        z3.Implies(k > 0, h.nxt[start] == bl[0]),
        z3.ForAll(
            [i],
            z3.Implies(
                z3.And(i >= 0, i < k),
                z3.And(
                    h.prv[bl[i]] == z3.If(i == 0, start, bl[i - 1]),
                    z3.Implies(i < k - 1, h.nxt[bl[i]] == bl[i + 1]),
                ),
            ),
        ),
    )


def _inv_link(c: Ctx, bl: Any, blpos: Any, start: Any, cursor: str) -> LoopInvariant:
    """``for b in blocks: cur.next = b; b.prev = cur; cur = b`` after ``start``."""
    h0 = c.heap

    def inv(j: Any, env: dict[str, Value], h: Heap) -> Any:
        cur = env[cursor]
        assert isinstance(cur, Node)
        return z3.And(
            j >= 0,
            cur.t == z3.If(j == 0, start, bl[j - 1]),
            h.cnt == h0.cnt,
            _chain(h, bl, start, j),
            z3.Implies(j == 0, h.nxt[start] == h0.nxt[start]),
            h.prv[start] == h0.prv[start],
            z3.Implies(j > 0, h.nxt[bl[j - 1]] == NONE),
            _frame(h0, h, lambda v: z3.Or(v == start, z3.And(blpos[v] >= 0, blpos[v] < j))),
        )

    return LoopInvariant(inv)


# -- the checks ---------------------------------------------------------------------------


@dataclass
class Check:
    method: str
    hyps: list[Any]
    args: dict[str, Value]
    goal: Callable[[Any], Any]  # Result -> goal
    invariants: dict[str, LoopInvariant] = field(default_factory=dict)
    bound: int = GROUP_BOUND
    what: str = ""


@dataclass
class SourceResult:
    """One obligation about the source (fields as :class:`refinement.RefResult`)."""

    name: str
    op: str
    step: str
    status: str
    seconds: float
    model: z3.ModelRef | None = None
    info: object = None


def _bounded_group(c: Ctx, bl: Any, m: Any, bound: int) -> tuple[Any, Any]:
    """(good, blpos) for a group of at most ``bound`` arbitrary entries."""
    a = c.a
    good = [m >= 0]
    for i in range(bound):
        ok = z3.And(bl[i] >= 0, a.pos[bl[i]] == -1, *[bl[i] != bl[k] for k in range(i)])
        good.append(z3.Implies(i < m, ok))
    b = z3.Int("gb")
    pos: Any = z3.IntVal(-1)
    for i in reversed(range(bound)):
        pos = z3.If(z3.And(i < m, b == bl[i]), z3.IntVal(i), pos)
    return z3.And(*good), z3.Lambda([b], pos)


def checks(tr: Translation) -> dict[str, Check]:
    heap = Heap(_arr("nxt"), _arr("prv"), z3.Int("cnt"))
    a = Seq(_arr("s"), z3.Int("n"), _arr("pos"))
    c = Ctx(heap, a, tr)
    pre = [RC(heap, a)]
    x, k, m = z3.Ints("x k m")
    bl, blpos = _arr("bl"), _arr("blpos")
    ins, inv_ = tr.code(InsufficientFreeBlocks), tr.code(InvalidArgument)
    pop_inv = {"_popleft_n:range(n)": _inv_popleft(c)}
    out: dict[str, Check] = {}

    out["_popleft_n"] = Check(
        "_popleft_n",
        [*pre, k >= 0, k <= a.n],
        {"n": IntV(k)},
        lambda r: z3.And(r.exc == 0, RC(r.heap, _drop(a, k)), _prefix(r.ret, a, k)),
        pop_inv,
        what="every list, every n",
    )
    out["_remove"] = Check(
        "_remove",
        [*pre, x >= 0, a.pos[x] >= 0],
        {"block": Node(x)},
        lambda r: z3.And(r.exc == 0, RC(r.heap, seq_remove(a, x))),
        what="every list",
    )
    grp = _unlinked_group(a, bl, m, blpos)
    out["_append_n"] = Check(
        "_append_n",
        [*pre, grp],
        {"blocks": ListV(bl, m)},
        lambda r: z3.And(r.exc == 0, RC(r.heap, seq_append_all(a, bl, m, blpos))),
        {"_append_n:blocks": _inv_link(c, bl, blpos, heap.prv[TAIL], "last")},
        what="every list, every group",
    )
    out["_prepend_n"] = Check(
        "_prepend_n",
        [*pre, grp],
        {"blocks": ListV(bl, m)},
        lambda r: z3.And(r.exc == 0, RC(r.heap, seq_prepend_all(a, bl, m, blpos))),
        {"_prepend_n:blocks": _inv_link(c, bl, blpos, z3.IntVal(HEAD), "prev")},
        what="every list, every group",
    )
    out["popleft"] = Check(
        "popleft",
        [*pre],
        {},
        lambda r: z3.If(
            a.n == 0,
            z3.And(r.exc == ins, c.unchanged(r.heap)),
            z3.And(
                r.exc == 0,
                isinstance(r.ret, Node) and r.ret.t == a.s[0],
                RC(r.heap, seq_popleft(a)),
            ),
        ),
        pop_inv,
        what="every list",
    )
    out["popleft_n"] = Check(
        "popleft_n",
        [*pre],
        {"n": IntV(k)},
        lambda r: z3.If(
            k < 0,
            z3.And(r.exc == inv_, c.unchanged(r.heap)),
            z3.If(
                k > a.n,
                z3.And(r.exc == ins, c.unchanged(r.heap)),
                z3.And(r.exc == 0, RC(r.heap, _drop(a, k)), _prefix(r.ret, a, k)),
            ),
        ),
        pop_inv,
        what="every list, every int n",
    )
    out["remove"] = Check(
        "remove",
        [*pre, x >= NONE],
        {"block": Node(x)},
        lambda r: z3.If(
            z3.And(x >= 0, a.pos[x] >= 0),
            z3.And(r.exc == 0, RC(r.heap, seq_remove(a, x))),
            z3.And(r.exc == inv_, c.unchanged(r.heap)),
        ),
        what="every list; any block, sentinel or None",
    )
    B = GROUP_BOUND
    good, gpos = _bounded_group(c, bl, m, B)
    entries = [z3.Implies(i < m, bl[i] >= NONE) for i in range(B)]
    for meth, seq_op in (("append_n", seq_append_all), ("prepend_n", seq_prepend_all)):
        out[meth] = Check(
            meth,
            [*pre, m >= 0, m <= B, *entries],
            {"blocks": ListV(bl, m)},
            lambda r, seq_op=seq_op: z3.If(  # type: ignore[misc]
                good,
                z3.And(r.exc == 0, RC(r.heap, seq_op(a, bl, m, gpos))),
                z3.And(r.exc == inv_, c.unchanged(r.heap)),
            ),
            what=f"every list; groups of <= {B} entries (in or out, repeats, sentinels, None)",
        )
    one = z3.Store(z3.K(z3.IntSort(), z3.IntVal(NONE)), 0, x)
    good1, pos1 = _bounded_group(c, one, z3.IntVal(1), 1)
    out["append"] = Check(
        "append",
        [*pre, x >= NONE],
        {"block": Node(x)},
        lambda r: z3.If(
            good1,
            z3.And(r.exc == 0, RC(r.heap, seq_append_all(a, one, 1, pos1))),
            z3.And(r.exc == inv_, c.unchanged(r.heap)),
        ),
        what="every list; any block, sentinel or None",
    )
    for ch in out.values():
        ch.info = (c, x, k, m, bl, blpos)  # type: ignore[attr-defined]
    return out


def obligations(
    tr: Translation, method: str, unroll: int | None = None, ch: Check | None = None
) -> list[tuple[str, list[Any], Any]]:
    """Every obligation of ``method``'s proof: (step, hypotheses, goal).

    ``unroll``: unroll every loop that many times instead of using its invariant
    (how a counterexample is looked for on a concrete list)."""
    ch = ch or checks(tr)[method]
    c = ch.info[0]  # type: ignore[attr-defined]
    if unroll is None:
        res = tr.run(ch.method, ch.args, c.heap, ch.bound, ch.invariants)
    else:
        res = tr.run(ch.method, ch.args, c.heap, unroll, {})
    out = [(o.name, [*ch.hyps, *o.hyps], o.goal) for o in res.obligations]
    out.append(("post", [*ch.hyps, *res.assumptions], ch.goal(res)))
    return out


METHODS = (
    "_popleft_n",
    "_remove",
    "_append_n",
    "_prepend_n",
    "popleft",
    "popleft_n",
    "remove",
    "append",
    "append_n",
    "prepend_n",
)
"""Every method of ``FreeKVCacheBlockQueue`` proved from its source."""


SOURCE = Path(__file__).resolve().parent.parent / "impl" / "free_queue.py"
"""The file proved: read as text (proofs import spec only, never impl)."""


def real_source() -> str:
    return SOURCE.read_text()


def prove(
    source: str | None = None,
    methods: tuple[str, ...] = METHODS,
    timeout_ms: int = 30000,
    stop_at_first_failure: bool = False,
) -> list[SourceResult]:
    """Translate ``source`` (default: the real ``free_queue.py``) and prove each method."""
    src = real_source() if source is None else source
    tr = Translation(src, cls="FreeKVCacheBlockQueue")
    rows: list[SourceResult] = []
    for meth in methods:
        for step, hyps, goal in obligations(tr, meth):
            with named(f"{meth} ({step})"):
                st, dt, mdl = isolated_check(hyps, goal, timeout_ms)
            rows.append(SourceResult("REFINE-SRC", meth, step, st, dt, mdl))
            if stop_at_first_failure and st != "proved":
                return rows
    return rows


def timed(f: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    return f(), time.perf_counter() - t0


# -- mutants of the source: each must be refuted -------------------------------------------

Patch = tuple[str, str]

SOURCE_MUTANTS: dict[str, tuple[str, tuple[Patch, ...]]] = {
    "append-n-skip-prev": (
        "_append_n never sets the appended blocks' prev link",
        (
            (
                "            b.prev_free_block = last\n            last = b\n",
                "            last = b\n",
            ),
        ),
    ),
    "append-n-reversed": (
        "_append_n links a group in reverse list order",
        (
            (
                "        for b in blocks:\n"
                "            # Chain each block after the current last one.",
                "        for b in reversed(blocks):\n"
                "            # Chain each block after the current last one.",
            ),
        ),
    ),
    "prepend-miscounts": (
        "_prepend_n counts a group of two or more one block short",
        (
            (
                "        old_first.prev_free_block = prev  # type: ignore[union-attr]\n"
                "        self.num_free_blocks += len(blocks)\n",
                "        old_first.prev_free_block = prev  # type: ignore[union-attr]\n"
                "        self.num_free_blocks += len(blocks)\n"
                "        if len(blocks) > 1:\n"
                "            self.num_free_blocks -= 1\n",
            ),
        ),
    ),
    "pop-keeps-link": (
        "_popleft_n hands a block out still pointing back at the head",
        (
            (
                "            last.prev_free_block = None  # type: ignore[union-attr]\n",
                "            last.prev_free_block = head  # type: ignore[union-attr]\n",
            ),
        ),
    ),
    "append-n-no-rollback": (
        "append_n raises on a linked block but leaves the chained prefix linked in",
        (
            (
                "            self._unlink_chained(blocks, before, tail, end, head_next)"
                "  # type: ignore[arg-type]\n"
                "            raise _refusal(exc) from None\n",
                "            raise _refusal(exc) from None\n",
            ),
        ),
    ),
    "prepend-n-head-unchecked": (
        "prepend_n lets the head sentinel through as a block",
        (
            (
                "        if head.prev_free_block is not None:\n"
                "            self._unlink_chained(blocks, head, front, prev, front)"
                "  # type: ignore[arg-type]\n"
                '            raise InvalidArgument(f"{head!r} is a sentinel of the free queue")\n',
                "",
            ),
        ),
    ),
    "unlink-keeps-head-next": (
        "the rollback restores the links of the chained blocks but not the head's next",
        (("        head.next_free_block = head_next\n", ""),),
    ),
    "remove-unchecked": (
        "remove unlinks a block that is in no list (or a sentinel) instead of refusing it",
        (
            (
                "        if before is None or after is None:\n"
                "            raise InvalidArgument("
                'f"remove() called on an invalid block: {block!r}")\n',
                "",
            ),
        ),
    ),
    "popleft-n-count-unchecked": (
        "popleft_n checks n >= 0 but not n <= num_free_blocks",
        (
            (
                "ok = n.__class__ is int and 0 <= n <= self.num_free_blocks",
                "ok = n.__class__ is int and 0 <= n",
            ),
        ),
    ),
}
"""The proof's own source mutants (the catalogue's queue mutants are refuted too: tests)."""


class PatchDoesNotApply(Exception):
    """A mutant's text is not found exactly once in the source."""


def patched(patches: tuple[Patch, ...], source: str | None = None) -> str:
    src = real_source() if source is None else source
    for old, new in patches:
        if src.count(old) != 1:
            raise PatchDoesNotApply(f"found {src.count(old)} times: {old!r}")
        src = src.replace(old, new)
    return src


CONCRETE_LISTS = (0, 1, 2, 3)
"""A refutation is looked for on the lists 0..L-1 for these L (blocks up to 6 exist)."""
MAX_BLOCK = 6
UNROLL = 8
"""Loops unrolled this often on a concrete list (n <= L + 1 <= 4; groups <= 3)."""


def _concrete(L: int) -> tuple[Any, Any, Any, Any]:
    nxt = z3.K(z3.IntSort(), z3.IntVal(NONE))
    prv = z3.K(z3.IntSort(), z3.IntVal(NONE))
    chain = [HEAD, *range(L), TAIL]
    for u, v in itertools.pairwise(chain):
        nxt, prv = z3.Store(nxt, u, v), z3.Store(prv, v, u)
    s = z3.K(z3.IntSort(), z3.IntVal(0))
    pos = z3.K(z3.IntSort(), z3.IntVal(-1))
    for i in range(L):
        s, pos = z3.Store(s, i, i), z3.Store(pos, i, i)
    return nxt, prv, s, pos


@dataclass
class Case:
    """A decoded counterexample: the list 0..L-1, a method and its arguments."""

    L: int
    method: str
    args: dict[str, Any]
    step: str = ""

    def __str__(self) -> str:
        a = ", ".join(f"{k}={v!r}" for k, v in self.args.items())
        what = "a witness" if self.step == "witness" else f"fails {self.step!r}"
        return f"list {list(range(self.L))}; {self.method}({a}): {what}"


def _node_name(v: int) -> object:
    return {HEAD: "HEAD", TAIL: "TAIL", NONE: None}.get(v, v)


def refute_concrete(
    src: str, method: str, timeout_ms: int = 30000
) -> tuple[SourceResult | None, Case | None]:
    """Look for a counterexample to ``method``'s proof on the small concrete lists."""
    tr = Translation(src, cls="FreeKVCacheBlockQueue")
    ch = checks(tr)[method]
    c, x, k, m, bl, blpos = ch.info  # type: ignore[attr-defined]
    _, gpos = _bounded_group(c, bl, m, GROUP_BOUND)
    total = 0.0
    for L in CONCRETE_LISTS:
        nxt, prv, s, pos = _concrete(L)
        pin = [
            c.heap.nxt == nxt,
            c.heap.prv == prv,
            c.heap.cnt == L,
            c.a.n == L,
            c.a.s == s,
            c.a.pos == pos,
            x >= NONE,
            x <= MAX_BLOCK,
            k >= -1,
            k <= L + 1,
            m >= 0,
            m <= GROUP_BOUND,
            *[z3.And(bl[i] >= NONE, bl[i] <= MAX_BLOCK) for i in range(GROUP_BOUND)],
            blpos == gpos,  # the group's positions, written out (m <= GROUP_BOUND)
        ]
        for step, hyps, goal in obligations(tr, method, UNROLL, ch):
            if "ends within" in step:  # a concrete list of <= 3: enough unrolling is sure
                continue
            st, dt, mdl = isolated_check([*pin, *hyps], goal, timeout_ms)
            total += dt
            if st == "refuted" and mdl is not None:

                def val(t: Any, mdl: Any = mdl) -> int:
                    return int(mdl.eval(t, model_completion=True).as_long())

                names = [a.arg for a in tr.funcs[method].args.args][1:]
                args: dict[str, Any] = {}
                for p in names:
                    if p == "block":
                        args[p] = _node_name(val(x))
                    elif p == "n":
                        args[p] = val(k)
                    elif p == "blocks":
                        args[p] = [_node_name(val(bl[i])) for i in range(val(m))]
                row = SourceResult("REFINE-SRC", method, step, "refuted", total, mdl)
                return row, Case(L, method, args, step)
    return None, None


def refute(
    patches: tuple[Patch, ...], timeout_ms: int = 30000
) -> tuple[SourceResult | None, Case | None]:
    """A counterexample to the proof of the patched source (None: it still goes through).

    The methods whose text the patch changes are tried first, then the rest."""
    src = patched(patches)
    base = real_source()
    funcs = _functions(src)
    hit = {
        f
        for f, seg in funcs.items()
        if any(new.strip() and new.strip() in seg for _, new in patches)
    }
    hit |= {
        f for f, seg in _functions(base).items() if any(old.strip() in seg for old, _ in patches)
    }
    while True:  # the methods that call a changed helper are changed too
        more = {f for f, seg in funcs.items() if any(f"self.{h}(" in seg for h in hit)} - hit
        if not more:
            break
        hit |= more
    touched = [m for m in METHODS if m in hit]
    order = tuple(touched) + tuple(m for m in METHODS if m not in touched)
    for meth in order:
        row, case = refute_concrete(src, meth, timeout_ms)
        if row is not None:
            return row, case
    return None, None


def _functions(src: str) -> dict[str, str]:
    import ast

    return {
        n.name: ast.get_source_segment(src, n) or ""
        for n in ast.walk(ast.parse(src))
        if isinstance(n, ast.FunctionDef)
    }


# -- decoded cases replayed on a real queue class ------------------------------------------


def expected(case: Case) -> tuple[str | None, list[int], object]:
    """What the spec's sequence says: (error class name or None, sequence after, value)."""
    seq = list(range(case.L))
    meth, args = case.method.lstrip("_"), case.args
    if meth == "popleft":
        return ("InsufficientFreeBlocks", seq, None) if not seq else (None, seq[1:], seq[0])
    if meth == "popleft_n":
        n = args["n"]
        if n < 0:
            return "InvalidArgument", seq, None
        if n > len(seq):
            return "InsufficientFreeBlocks", seq, None
        return None, seq[n:], seq[:n]
    if meth == "remove":
        b = args["block"]
        if isinstance(b, int) and b in seq:
            return None, [x for x in seq if x != b], None
        return "InvalidArgument", seq, None
    group = [args["block"]] if meth == "append" else list(args["blocks"])
    good = all(isinstance(b, int) and b not in seq for b in group) and len(set(group)) == len(group)
    if not good:
        return "InvalidArgument", seq, None
    return None, (group + seq if meth == "prepend_n" else seq + group), None


def replay(case: Case, queue_cls: type, block_cls: type) -> str:
    """Run ``case`` on ``queue_cls``: "agrees" with the spec's sequence, or what differs."""
    blocks = [block_cls(i) for i in range(MAX_BLOCK + 1)]
    q = queue_cls([])
    head, tail = q.fake_free_list_head, q.fake_free_list_tail
    chain = [head, *blocks[: case.L], tail]
    for u, v in itertools.pairwise(chain):
        u.next_free_block, v.prev_free_block = v, u
    q.num_free_blocks = case.L

    def obj(v: object) -> object:
        if isinstance(v, int):
            return blocks[v]
        return {"HEAD": head, "TAIL": tail}.get(v) if isinstance(v, str) else None

    def links() -> list[tuple[object, object]]:
        return [(b.prev_free_block, b.next_free_block) for b in [head, tail, *blocks]]

    args = {
        k: ([obj(x) for x in v] if k == "blocks" else obj(v) if k == "block" else v)
        for k, v in case.args.items()
    }
    before, cnt = links(), q.num_free_blocks
    err, seq, value = expected(case)
    try:
        got = getattr(q, case.method)(*args.values())
        raised = None
    except Exception as exc:  # the case may make the code raise anything
        got, raised = None, type(exc).__name__
    if raised != err:
        return f"raises {raised}, the spec says {err}"
    if err is not None:
        if links() != before or q.num_free_blocks != cnt:
            return f"raises {err} but changed the links or the counter"
        return "agrees"
    walk: list[int] = []
    node = head.next_free_block
    while node is not tail and node is not None and len(walk) <= len(blocks):
        if node.prev_free_block is not ((walk and blocks[walk[-1]]) or head):
            return f"block {node.block_id}'s prev link does not mirror the walk {walk}"
        walk.append(node.block_id)
        node = node.next_free_block
    if walk != seq:
        return f"the walk from the head gives {walk}, the spec's sequence is {seq}"
    if node is not tail or tail.prev_free_block is not ((walk and blocks[walk[-1]]) or head):
        return "the walk does not end at the tail, mirrored"
    if head.prev_free_block is not None or tail.next_free_block is not None:
        return "a sentinel's outer link is set"
    if q.num_free_blocks != len(seq):
        return f"num_free_blocks is {q.num_free_blocks}, the list has {len(seq)}"
    for b in blocks:
        if b.block_id not in seq and (b.prev_free_block or b.next_free_block):
            return f"block {b.block_id} is outside the list but keeps a link"
    if value is not None:
        ids = [b.block_id for b in got] if isinstance(value, list) else got.block_id
        if ids != value:
            return f"returns {ids}, the spec says {value}"
    return "agrees"


def witness(method: str, L: int = 2, timeout_ms: int = 30000) -> Case | None:
    """A model of ``method``'s hypotheses on the list 0..L-1 (they are satisfiable), decoded.

    The case a proof speaks of exists: replaying it on the real queue must agree."""
    tr = Translation(real_source(), cls="FreeKVCacheBlockQueue")
    ch = checks(tr)[method]
    c, x, k, m, bl, blpos = ch.info  # type: ignore[attr-defined]
    _, gpos = _bounded_group(c, bl, m, GROUP_BOUND)
    nxt, prv, s, pos = _concrete(L)
    sol = z3.Solver()
    sol.set("timeout", timeout_ms)
    sol.add(c.heap.nxt == nxt, c.heap.prv == prv, c.heap.cnt == L)
    sol.add(c.a.n == L, c.a.s == s, c.a.pos == pos, x >= NONE, x <= MAX_BLOCK)
    sol.add(k >= 0, k <= L, m >= 1, m <= GROUP_BOUND, blpos == gpos)
    sol.add(*[z3.And(bl[i] >= NONE, bl[i] <= MAX_BLOCK) for i in range(GROUP_BOUND)])
    sol.add(*ch.hyps)
    if sol.check() != z3.sat:
        return None
    mdl = sol.model()

    def val(t: Any) -> int:
        return int(mdl.eval(t, model_completion=True).as_long())

    args: dict[str, Any] = {}
    for p in [a.arg for a in tr.funcs[method].args.args][1:]:
        if p == "block":
            args[p] = _node_name(val(x))
        elif p == "n":
            args[p] = val(k)
        elif p == "blocks":
            args[p] = [_node_name(val(bl[i])) for i in range(val(m))]
    return Case(L, method, args, "witness")


def rows(timeout_ms: int = 30000) -> list[dict[str, Any]]:
    """The source proofs and their mutants: ``runner.ObligationResult(**row)`` rows."""
    out = []
    what = {
        m: ch.what for m, ch in checks(Translation(real_source(), "FreeKVCacheBlockQueue")).items()
    }
    for r in prove(timeout_ms=timeout_ms):
        out.append(
            dict(
                obligation=f"{r.op} refines seq, from source ({r.step})",
                kind="refinement",
                technique="refinement (from source)",
                invariants=("INV-LIST",),
                bounds=what[r.op],
                status=r.status,
                seconds=r.seconds,
            )
        )
    for name, (idea, patches) in SOURCE_MUTANTS.items():
        row, case = refute(patches, timeout_ms)
        out.append(
            dict(
                obligation=f"free_queue.py refines seq [{name}]",
                kind="mutant",
                technique="refinement (from source)",
                invariants=("INV-LIST",),
                bounds=idea,
                status="expected-refuted" if row is not None else "NOT-refuted",
                seconds=row.seconds if row is not None else 0.0,
                trace=[str(case)] if case else [],
            )
        )
    return out
