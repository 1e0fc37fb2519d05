"""The pool's hot paths, proved from ``impl/pool.py``'s own source (``touch`` so far).

:mod:`kvpool.proofs.pysource` translates ``BlockPool.touch`` from the text of
``impl/pool.py`` (with ``_undo_touch`` and ``_touch_checked``, the pool methods it
calls, inlined from the same text) over a state of

* the free queue as :mod:`kvpool.proofs.pyrefine` has it: links ``nxt``/``prv`` over
  node ids (blocks >= 0, HEAD = -1, TAIL = -2, None = -3) and the counter, related
  by :func:`pyrefine.RC` to the spec's sequence ``a`` of any length;
* three block attributes: ``ref_cnt`` (int), ``_pool`` (the pool's mark: this pool's
  :data:`MARK`, another pool's anything else) and ``is_null`` (bool).

The callees are used through contracts, never their bodies:

* the queue's ``_remove`` through :func:`remove_contract`, a contract that is itself
  proved here from ``impl/free_queue.py``'s source (:func:`prove_contracts`); it is
  *local* (the list from the head represents the sequence; a block outside it may
  hold a stale link, as a block ``touch`` unlinked holds the neighbour it borrowed);
* the pool's full check ``_own`` through :func:`own_contract`, which is *stated*, not
  proved (its source reads weak references and class objects): it changes nothing,
  refuses the first entry that is neither this pool's nor a null block (another
  pool's block: ``ForeignBlock``; the null block when not ``null_ok``:
  ``NullBlockMisuse``), and returns this pool's non-null blocks in order.

Each ``touch`` obligation is a z3 unsat for every queue (any length, any order), every
reference count and every list of at most :data:`L` entries (each this pool's block,
its null block, or another pool's block or null block; repeats allowed):

* a valid call (every entry this pool's or a null block) does exactly the spec's
  step (``World._op_touch``, written here on the sequence): every reference count,
  the sequence (so every link, the counter and the sentinels: ``RC``), the marks and
  the null flags are as the spec says;
* a refused call (another pool's non-null block at any position) raises
  ``ForeignBlock`` and leaves every reference count, link, the counter, mark and
  flag exactly as they were (the dancing-links undo, ``_undo_touch``);
* each call of a contract meets its precondition, and every bounded unrolling covers
  its list (obligations of their own).

Metrics (``metrics_collector``) are off in the model; a non-block entry (no ``_pool``
slot, ``InvalidArgument``) and a non-list argument (``_materialise``) are not modelled.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import z3  # type: ignore[import-untyped]

from kvpool.spec import PoolState, Touch, World
from kvpool.spec.errors import ForeignBlock, NullBlockMisuse
from kvpool.spec.ops import BlockRef

from .model import isolated_check, named
from .pyrefine import RC, Patch, PatchDoesNotApply
from .pyrefine import SOURCE as QUEUE_SOURCE
from .pysource import (
    HEAD,
    NONE,
    TAIL,
    BoolV,
    Contract,
    Effect,
    Heap,
    ListV,
    Node,
    ObjV,
    Translation,
    Value,
)
from .refinement import Lst, R, Seq, seq_remove

L = 2
"""Lists of at most this many entries, every obligation (the loops over them are
unrolled this often); :data:`L_REFUSED` for the refused calls'."""
L_REFUSED = 3
"""The refused calls' obligations also at this bound: two blocks unlinked before the
foreign entry, the least that puts the dancing-links undo's order to the test."""
MARK = 1
"""``self._weak_self``: the mark this pool's blocks carry in ``_pool``."""

SOURCE = Path(__file__).resolve().parent.parent / "impl" / "pool.py"
"""The file proved: read as text (proofs import spec only, never impl)."""

FIELDS = {"ref_cnt": "int", "_pool": "int", "is_null": "bool"}
METHODS = ("touch",)
"""The hot paths proved so far."""


def real_source() -> str:
    return SOURCE.read_text()


def _arr(name: str, rng: Any = None) -> Any:
    return z3.Array(name, z3.IntSort(), rng if rng is not None else z3.IntSort())


def _seq(g: tuple[Any, ...]) -> Seq:
    return Seq(*g)


def _ghost(a: Seq) -> tuple[Any, ...]:
    return (a.s, a.n, a.pos)


# -- the queue's state: the list represents the sequence, outsiders aside ---------------------


def R_core(h: Heap, a: Seq) -> z3.BoolRef:
    """``RC`` less "a block outside the list has no links": the list from the head is
    ``a`` (links mirrored, counter, sentinels' outer links)."""
    return z3.And(
        R(Lst(h.nxt, h.prv), a, outsiders_unlinked=False),
        h.cnt == a.n,
        h.prv[HEAD] == NONE,
        h.nxt[TAIL] == NONE,
    )


def _modifies(arr: Any, x: Any, p: Any, q: Any, vp: Any, vq: Any) -> Any:
    """``arr`` with ``x``'s entry None and ``p``'s and ``q``'s ``vp``, ``vq``: nothing else."""
    return z3.Store(z3.Store(z3.Store(arr, p, vp), q, vq), x, NONE)


def _remove_heap(h: Heap, x: Any, vals: tuple[Any, Any, Any, Any], cnt: Any) -> Heap:
    p, q = h.prv[x], h.nxt[x]
    return Heap(
        _modifies(h.nxt, x, p, q, vals[0], vals[1]),
        _modifies(h.prv, x, p, q, vals[2], vals[3]),
        cnt,
        h.fields,
    )


def _remove_effect(h: Heap, args: dict[str, Value], fresh: Callable[[str], str]) -> Effect:
    """``_remove(x)``'s contract: pre ``x`` is in the list the head starts (``R_core``:
    blocks outside it may keep links); post the list is the sequence less ``x``, ``x``
    has no links, and only ``x`` and its two neighbours (``x.prev``, ``x.next``) changed
    a link (a modifies clause: their new links are fresh, ``R_core`` fixes them)."""
    x = args["block"]
    if not isinstance(x, Node):
        raise TypeError("_remove of a non-node")
    a = _seq(h.ghost)
    vals = tuple(z3.Int(fresh(f"v{i}")) for i in range(4))
    h2 = _remove_heap(h, x.t, (vals[0], vals[1], vals[2], vals[3]), z3.Int(fresh("cnt")))
    a2 = seq_remove(a, x.t)
    h2.ghost = _ghost(a2)
    return Effect(
        pre=z3.And(R_core(h, a), x.t >= 0, a.pos[x.t] >= 0),
        post=R_core(h2, a2),
        heap=h2,
    )


remove_contract = Contract(("block",), _remove_effect)
"""``FreeKVCacheBlockQueue._remove``: pre the block is in the list the head starts;
post :func:`_remove_post` (the queue writes links and its counter only: a write to any
other attribute does not translate)."""


def _own_effect(
    tr: Translation, bound: int
) -> Callable[[Heap, dict[str, Value], Callable[[str], str]], Effect]:
    def effect(h: Heap, args: dict[str, Value], fresh: Callable[[str], str]) -> Effect:
        bl, null_ok = args["blocks"], args["null_ok"]
        if not isinstance(bl, ListV) or not isinstance(null_ok, BoolV):
            raise TypeError("_own(blocks: list, null_ok: bool)")
        mark, is_null = h.fields["_pool"], h.fields["is_null"]
        fb, nm = tr.code(ForeignBlock), tr.code(NullBlockMisuse)
        code: Any = z3.IntVal(0)
        out: Any = z3.K(z3.IntSort(), z3.IntVal(NONE))
        n: Any = z3.IntVal(0)
        for i in reversed(range(bound)):  # the first bad entry names the refusal
            e = bl.arr[i]
            here = z3.And(i < bl.n, z3.If(is_null[e], z3.Not(null_ok.t), mark[e] != MARK))
            code = z3.If(here, z3.If(is_null[e], nm, fb), code)
        for i in range(bound):
            e = bl.arr[i]
            keep = z3.And(i < bl.n, z3.Not(is_null[e]))
            out, n = z3.If(keep, z3.Store(out, n, e), out), z3.If(keep, n + 1, n)
        return Effect(
            pre=bl.n <= bound, post=z3.BoolVal(True), heap=h, ret=ListV(out, n), code=code
        )

    return effect


# -- the spec's step, on the sequence (spec/state.py, World._op_touch) -----------------------


def _seq_if(c: Any, x: Seq, y: Seq) -> Seq:
    return Seq(z3.If(c, x.s, y.s), z3.If(c, x.n, y.n), z3.If(c, x.pos, y.pos))


def spec_touch(
    a: Seq, ref: Any, mark: Any, is_null: Any, bl: Any, m: Any, bound: int
) -> tuple[Any, Seq, Any]:
    """(refused, sequence after, ref after) of ``Touch(bl[:m])``: ``_own_blocks`` with
    ``null="skip"`` refuses another pool's non-null block; then for each id in order, a
    block at ``ref == 0`` leaves the free sequence, and its count goes up by one."""
    refused = z3.Or(
        *[z3.And(i < m, z3.Not(is_null[bl[i]]), mark[bl[i]] != MARK) for i in range(bound)]
    )
    seq, r = a, ref
    for i in range(bound):
        b = bl[i]
        take = z3.And(i < m, z3.Not(is_null[b]))
        seq = _seq_if(z3.And(take, r[b] == 0), seq_remove(seq, b), seq)
        r = z3.If(take, z3.Store(r, b, r[b] + 1), r)
    return refused, seq, r


# -- the state and the check ---------------------------------------------------------------


@dataclass
class State:
    heap: Heap
    a: Seq
    bl: Any
    m: Any

    @property
    def ref(self) -> Any:
        return self.heap.fields["ref_cnt"]

    @property
    def mark(self) -> Any:
        return self.heap.fields["_pool"]

    @property
    def is_null(self) -> Any:
        return self.heap.fields["is_null"]


def fresh_state() -> State:
    fields = {
        "ref_cnt": _arr("ref"),
        "_pool": _arr("mark"),
        "is_null": _arr("is_null", z3.BoolSort()),
    }
    a = Seq(_arr("s"), z3.Int("n"), _arr("pos"))
    heap = Heap(_arr("nxt"), _arr("prv"), z3.Int("cnt"), fields, _ghost(a))
    return State(heap, a, _arr("bl"), z3.Int("m"))


def pool_invariant(st: State) -> list[Any]:
    """The spec's invariants on the modelled state: INV-LIST (``RC``), INV-REF, INV-NULL
    (block 0 is this pool's null block, never free, count 0), INV-FREE (exactly this
    pool's non-null blocks at count 0 are in the sequence)."""
    b = z3.Int("pb")
    ref, mark, is_null, pos = st.ref, st.mark, st.is_null, st.a.pos
    return [
        RC(st.heap, st.a),
        mark[0] == MARK,
        is_null[0],
        ref[0] == 0,
        z3.ForAll(
            [b],
            z3.Implies(
                z3.And(b >= 0, mark[b] == MARK),
                z3.And(ref[b] >= 0, is_null[b] == (b == 0)),
            ),
        ),
        z3.ForAll(
            [b],
            z3.Implies(
                b >= 0,
                (pos[b] >= 0) == z3.And(mark[b] == MARK, z3.Not(is_null[b]), ref[b] == 0),
            ),
        ),
    ]


def entries(st: State, bound: int) -> list[Any]:
    """At most ``bound`` entries, each a block (this pool's or another's)."""
    return [
        st.m >= 0,
        st.m <= bound,
        *[z3.Implies(i < st.m, st.bl[i] >= 0) for i in range(bound)],
    ]


def _restored(h0: Heap, h: Heap) -> tuple[Any, Heap]:
    """After ``_undo_touch``: every link (of every block and both sentinels: ``RC`` with
    the entry's sequence), the counter and every attribute (as whole arrays) are as at
    the call's entry (the claim, proved there); the run goes on from the entry's state."""
    same = [h.fields[k] == v for k, v in h0.fields.items()]
    return z3.And(RC(h, _seq(h0.ghost)), *same), h0


def translation(source: str, bound: int = L) -> Translation:
    tr = Translation(
        source,
        cls="BlockPool",
        fields=FIELDS,
        self_values={
            "_weak_self": Node(z3.IntVal(MARK)),
            "free_block_queue": ObjV("free_block_queue", "num_free_blocks"),
            "metrics_collector": Node(z3.IntVal(NONE)),
        },
        cuts={"_undo_touch": _restored},
        node_class="KVCacheBlock",  # every entry of the model is an exact block
    )
    tr.contracts = {
        "free_block_queue._remove": remove_contract,
        "_own": Contract(("blocks", "null_ok"), _own_effect(tr, bound)),
    }
    return tr


def _same(h: Heap, h0: Heap, *names: str) -> Any:
    return z3.And(*[h.fields[k] == h0.fields[k] for k in names])


def _flat(e: Any) -> list[Any]:
    return [y for x in e.children() for y in _flat(x)] if z3.is_and(e) else [e]


def touch_goal(tr: Translation, st: State, res: Any, bound: int) -> list[tuple[str, Any]]:
    """The goal's parts, each proved on its own (``RC`` split into its conjuncts)."""
    refused, seq, r = spec_touch(st.a, st.ref, st.mark, st.is_null, st.bl, st.m, bound)
    h, h0 = res.heap, st.heap
    fb = tr.code(ForeignBlock)
    parts = [
        ("refused: raises ForeignBlock", refused, res.exc == fb),
        (
            "refused: ref counts, marks, flags as they were",
            refused,
            _same(h, h0, "ref_cnt", "_pool", "is_null"),
        ),
        ("refused: every link and the counter as they were", refused, RC(h, st.a)),
        ("valid: returns", z3.Not(refused), res.exc == 0),
        ("valid: ref counts as the spec's", z3.Not(refused), h.fields["ref_cnt"] == r),
        ("valid: marks and flags unchanged", z3.Not(refused), _same(h, h0, "_pool", "is_null")),
        ("valid: the queue is the spec's sequence", z3.Not(refused), RC(h, seq)),
    ]
    out = []
    for name, case, goal in parts:
        conj = _flat(goal)
        for i, g in enumerate(conj):
            out.append(
                (name if len(conj) == 1 else f"{name} [{i + 1}/{len(conj)}]", z3.Implies(case, g))
            )
    return out


def obligations(
    source: str | None = None, method: str = "touch", bound: int = L, refused_only: bool = False
) -> list[tuple[str, list[Any], Any]]:
    """Every obligation of ``method``'s proof at ``bound``: (step, hypotheses, goal).
    ``refused_only``: the refused calls' (and the contracts' and bounds' on the way)."""
    if method != "touch":
        raise ValueError(f"not proved from source yet: {method}")
    tr = translation(real_source() if source is None else source, bound)
    st = fresh_state()
    hyps = [*pool_invariant(st), *entries(st, bound)]
    refused = spec_touch(st.a, st.ref, st.mark, st.is_null, st.bl, st.m, bound)[0]
    if refused_only:
        hyps.append(refused)
    res = tr.run("touch", {"blocks": ListV(st.bl, st.m)}, st.heap, bound=bound)
    out = [(o.name, [*hyps, *o.hyps], o.goal) for o in res.obligations]
    for name, goal in touch_goal(tr, st, res, bound):
        if refused_only and not name.startswith("refused"):
            continue
        out.append((f"post: {name}", [*hyps, *res.assumptions], goal))
    return out


PROOF_BOUNDS: tuple[tuple[int, bool], ...] = ((L, False), (L_REFUSED, True))
"""(bound, refused calls only) of each run of the proof."""


@dataclass
class PoolResult:
    op: str
    step: str
    status: str
    seconds: float
    model: z3.ModelRef | None = None
    bound: int = L


def prove(
    source: str | None = None,
    timeout_ms: int = 120000,
    bounds: tuple[tuple[int, bool], ...] = PROOF_BOUNDS,
    stop_at_first_failure: bool = False,
) -> list[PoolResult]:
    """Translate ``source`` (default: the real ``pool.py``) and prove each method at each
    of ``bounds``."""
    rows: list[PoolResult] = []
    for meth in METHODS:
        for bound, refused_only in bounds:
            for step, hyps, goal in obligations(source, meth, bound, refused_only):
                with named(f"pool {meth} L={bound} ({step})"):
                    st, dt, mdl = isolated_check(hyps, goal, timeout_ms)
                rows.append(PoolResult(meth, step, st, dt, mdl, bound))
                if stop_at_first_failure and st != "proved":
                    return rows
    return rows


def bounds_label(bounds: tuple[tuple[int, bool], ...] = PROOF_BOUNDS) -> str:
    return "every queue; " + ", ".join(
        f"lists of <= {b} entries{' (refused calls)' if r else ''}" for b, r in bounds
    )


# -- the contracts the proof uses, proved from free_queue.py's own source ----------------------


def prove_contracts(timeout_ms: int = 60000, source: str | None = None) -> list[PoolResult]:
    """``_remove`` meets :data:`remove_contract` on ``impl/free_queue.py``'s source."""
    src = QUEUE_SOURCE.read_text() if source is None else source
    tq = Translation(src, cls="FreeKVCacheBlockQueue")
    a = Seq(_arr("s"), z3.Int("n"), _arr("pos"))
    h = Heap(_arr("nxt"), _arr("prv"), z3.Int("cnt"), {}, _ghost(a))
    x = z3.Int("x")
    eff = _remove_effect(h, {"block": Node(x)}, lambda s: s + "!c")
    res = tq.run("_remove", {"block": Node(x)}, Heap(h.nxt, h.prv, h.cnt))
    got = res.heap
    # the contract's fresh values are the ones the source wrote
    p, q = h.prv[x], h.nxt[x]
    want = _remove_heap(h, x, (got.nxt[p], got.nxt[q], got.prv[p], got.prv[q]), got.cnt)
    goal = z3.And(
        res.exc == 0,
        got.nxt == want.nxt,
        got.prv == want.prv,
        R_core(got, seq_remove(a, x)),
    )
    with named("pool contract: FreeKVCacheBlockQueue._remove"):
        st, dt, mdl = isolated_check([eff.pre, *res.assumptions], goal, timeout_ms)
    return [PoolResult("_remove", "contract, from free_queue.py's source", st, dt, mdl)]


# -- seeded bugs in pool.py's touch: each must be refuted ------------------------------------

POOL_MUTANTS: dict[str, tuple[str, tuple[Patch, ...]]] = {
    "undo-forward": (
        "_undo_touch puts the unlinked blocks back oldest first (not the reverse order)",
        (("        for block in reversed(unlinked):\n", "        for block in unlinked:\n"),),
    ),
    "borrowed-link-kept": (
        "touch never clears the neighbour an unlinked block borrowed in prev_free_block",
        (
            (
                "                if block.prev_free_block is not None:\n"
                "                    block.prev_free_block = None\n",
                "                if block.prev_free_block is not None:\n                    pass\n",
            ),
        ),
    ),
    "repeat-not-counted": (
        "touch counts a reference only for a block it unlinks (a repeat, or a block in use, "
        "keeps its count)",
        (
            (
                "                    unlinked = True\n"
                "                block.ref_cnt = ref_cnt + 1\n",
                "                    unlinked = True\n"
                "                    block.ref_cnt = ref_cnt + 1\n",
            ),
        ),
    ),
    "undo-miscounts": (
        "_undo_touch relinks the blocks but leaves num_free_blocks short",
        (("        self.free_block_queue.num_free_blocks += len(unlinked)\n", ""),),
    ),
}
"""The proof's own mutants of ``touch`` (the catalogue's touch mutants are refuted too)."""


def patched(patches: tuple[Patch, ...], source: str | None = None) -> str:
    src = real_source() if source is None else source
    for old, new in patches:
        if src.count(old) != 1:
            raise PatchDoesNotApply(f"found {src.count(old)} times: {old!r}")
        src = src.replace(old, new)
    return src


N_OWN = 4
"""Concrete pools a counterexample is looked for on: blocks 0..3 (0 the null block),
another pool's block :data:`FOREIGN` and its null block :data:`FOREIGN_NULL`."""
FOREIGN, FOREIGN_NULL = 4, 5
CONCRETE_QUEUES: tuple[tuple[int, ...], ...] = ((1, 2, 3), (2, 3), (3, 1), ())
"""The free sequences tried (every other block of 1..3 is in use, count 1 or 2)."""


@dataclass
class Case:
    """A decoded counterexample: the free sequence, the counts, ``touch``'s entries."""

    free: tuple[int, ...]
    ref: dict[int, int]
    entries: list[int]
    step: str = ""

    def __str__(self) -> str:
        names = {FOREIGN: "F", FOREIGN_NULL: "F0"}
        ents = ", ".join(str(names.get(e, e)) for e in self.entries)
        return f"free {list(self.free)}, ref {self.ref}; touch([{ents}]): fails {self.step!r}"


def _pin(st: State, free: tuple[int, ...], bound: int) -> list[Any]:
    nxt = z3.K(z3.IntSort(), z3.IntVal(NONE))
    prv = z3.K(z3.IntSort(), z3.IntVal(NONE))
    for u, v in itertools.pairwise([HEAD, *free, TAIL]):
        nxt, prv = z3.Store(nxt, u, v), z3.Store(prv, v, u)
    s = z3.K(z3.IntSort(), z3.IntVal(0))
    pos = z3.K(z3.IntSort(), z3.IntVal(-1))
    for i, b in enumerate(free):
        s, pos = z3.Store(s, i, b), z3.Store(pos, b, i)
    mark = z3.K(z3.IntSort(), z3.IntVal(MARK + 1))
    null = z3.K(z3.IntSort(), z3.BoolVal(False))
    for b in range(N_OWN):
        mark = z3.Store(mark, b, MARK)
    null = z3.Store(z3.Store(null, 0, True), FOREIGN_NULL, True)
    used = [z3.Or(st.ref[b] == 1, st.ref[b] == 2) for b in range(1, N_OWN) if b not in free]
    return [
        st.heap.nxt == nxt,
        st.heap.prv == prv,
        st.heap.cnt == len(free),
        st.a.n == len(free),
        st.a.s == s,
        st.a.pos == pos,
        st.mark == mark,
        st.is_null == null,
        *[st.ref[b] == 0 for b in (0, *free)],
        *used,
        *[z3.Implies(i < st.m, st.bl[i] <= FOREIGN_NULL) for i in range(bound)],
    ]


def _run_queue(tq: Translation, method: str) -> Contract:
    """The queue's ``method`` run from its source (on a concrete pool: exact, and
    quantifier-free), in place of its contract."""

    def effect(h: Heap, args: dict[str, Value], fresh: Callable[[str], str]) -> Effect:
        res = tq.run(method, args, Heap(h.nxt, h.prv, h.cnt))
        after = Heap(res.heap.nxt, res.heap.prv, res.heap.cnt, h.fields, h.ghost)
        return Effect(z3.BoolVal(True), z3.BoolVal(True), after, None, res.exc)

    return Contract(("block",), effect)


def _finite(e: Any, vals: range) -> Any:
    """``e`` with each universal quantifier in a positive place replaced by its instances
    over ``vals`` (a weaker goal: a model that breaks it breaks ``e``)."""
    if z3.is_quantifier(e) and e.is_forall():
        out = []
        for combo in itertools.product(vals, repeat=e.num_vars()):
            body = z3.substitute_vars(e.body(), *[z3.IntVal(v) for v in reversed(combo)])
            out.append(_finite(body, vals))
        return z3.And(*out)
    if z3.is_and(e):
        return z3.And(*[_finite(x, vals) for x in e.children()])
    if z3.is_or(e):
        return z3.Or(*[_finite(x, vals) for x in e.children()])
    if z3.is_implies(e):
        return z3.Implies(e.arg(0), _finite(e.arg(1), vals))
    return e


def refute(
    patches: tuple[Patch, ...], timeout_ms: int = 30000, bound: int = L_REFUSED
) -> tuple[PoolResult | None, Case | None]:
    """A counterexample to the proof of the patched source on a small concrete pool (None:
    none found there), decoded. There the queue's ``_remove`` runs from its source (which
    meets its contract: a model of the concrete run is one of the contract's), and the
    goals' quantifiers are instantiated over the pool's nodes and positions."""
    src = patched(patches)
    st = fresh_state()
    tr = translation(src, bound)
    tq = Translation(QUEUE_SOURCE.read_text(), cls="FreeKVCacheBlockQueue")
    tr.contracts["free_block_queue._remove"] = _run_queue(tq, "_remove")
    res = tr.run("touch", {"blocks": ListV(st.bl, st.m)}, st.heap, bound=bound)
    vals = range(NONE, FOREIGN_NULL + 2)
    obs = [(f"post: {n}", _finite(g, vals)) for n, g in touch_goal(tr, st, res, bound)]
    obs += [(o.name, _finite(o.goal, vals)) for o in res.obligations]
    total = 0.0
    for free in CONCRETE_QUEUES:
        pin = [*_pin(st, free, bound), *entries(st, bound)]
        for step, goal in obs:
            status, dt, mdl = isolated_check(pin, goal, timeout_ms)
            total += dt
            if status == "refuted" and mdl is not None:

                def val(t: Any, mdl: Any = mdl) -> int:
                    return int(mdl.eval(t, model_completion=True).as_long())

                case = Case(
                    free,
                    {b: val(st.ref[b]) for b in range(1, N_OWN)},
                    [val(st.bl[i]) for i in range(val(st.m))],
                    step,
                )
                return PoolResult("touch", step, "refuted", total, mdl, bound), case
    return None, None


# -- a decoded case replayed on a real pool class (given: the proofs import no impl) ----------


@dataclass
class Observed:
    error: str | None
    ref: dict[int, int]
    free: list[int]
    num_free: int
    notes: list[str] = field(default_factory=list)


def expected(case: Case) -> Observed:
    """The spec's answer: ``World.apply(Touch(...))`` on the case's state."""
    ps = PoolState.initial(N_OWN)
    ps.ref = [0, *[case.ref[b] for b in range(1, N_OWN)]]
    ps.free = OrderedDict.fromkeys(case.free)
    world = World.of(ps, PoolState.initial(2))
    refs = [
        BlockRef(1, 1) if e == FOREIGN else BlockRef(1, 0) if e == FOREIGN_NULL else BlockRef(0, e)
        for e in case.entries
    ]
    out = world.apply(Touch(tuple(refs)))
    after = world.pools[0]
    return Observed(
        out.error.name if out.error is not None else None,
        {b: after.ref[b] for b in range(N_OWN)},
        list(after.free),
        len(after.free),
    )


def observe(case: Case, pool_cls: type) -> Observed:
    """Build the case's state on ``pool_cls`` (by its own calls, counts set by hand), call
    ``touch``, and read what it did: its error, counts, free walk, links."""
    pool = pool_cls(num_gpu_blocks=N_OWN)
    other = pool_cls(num_gpu_blocks=2)
    blocks = pool.blocks
    pool.get_new_blocks(N_OWN - 1)
    pool.free_blocks([blocks[b] for b in case.free])  # keyless: the front, in this order
    for b in range(1, N_OWN):
        if b not in case.free:
            blocks[b].ref_cnt = case.ref[b]
    ents = [
        other.blocks[1] if e == FOREIGN else other.blocks[0] if e == FOREIGN_NULL else blocks[e]
        for e in case.entries
    ]
    try:
        pool.touch(ents)
        error = None
    except Exception as exc:  # the case may make a broken class raise anything
        error = getattr(exc, "kind", None)
        error = error.name if error is not None else type(exc).__name__
    q = pool.free_block_queue
    walk: list[int] = []
    notes: list[str] = []
    node = q.fake_free_list_head.next_free_block
    prev = q.fake_free_list_head
    while node is not None and node is not q.fake_free_list_tail and len(walk) <= N_OWN:
        if node.prev_free_block is not prev:
            notes.append(f"block {node.block_id}'s prev link does not mirror the walk")
        walk.append(node.block_id)
        prev, node = node, node.next_free_block
    if q.fake_free_list_tail.prev_free_block is not prev:
        notes.append("the tail's prev link is not the walk's last block")
    for b in blocks:
        if b.block_id not in walk and (b.prev_free_block or b.next_free_block):
            notes.append(f"block {b.block_id} is outside the free queue but keeps a link")
    return Observed(
        error, {b: blocks[b].ref_cnt for b in range(N_OWN)}, walk, q.num_free_blocks, notes
    )


def replay(case: Case, pool_cls: type) -> str:
    """Run ``case`` on ``pool_cls``: "agrees" with the spec's step, or what differs."""
    want, got = expected(case), observe(case, pool_cls)
    if got.error != want.error:
        return f"raises {got.error}, the spec says {want.error}"
    if got.ref != want.ref:
        return f"ref counts {got.ref}, the spec says {want.ref}"
    if got.free != want.free:
        return f"the free walk gives {got.free}, the spec's sequence is {want.free}"
    if got.num_free != want.num_free:
        return f"num_free_blocks is {got.num_free}, the queue has {want.num_free}"
    if got.notes:
        return "; ".join(got.notes)
    return "agrees"
