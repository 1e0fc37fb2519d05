"""The pool's other hot paths, proved from ``impl/pool.py``'s own source.

:mod:`kvpool.proofs.pypool` proves ``touch``; this module does the same for
``free_blocks`` (``_undo_release`` inlined from the same text), ``unpin_blocks``
(``_undo_unpin`` inlined) and ``get_new_blocks``, on the same state (the free queue
related by :func:`pyrefine.RC` to the spec's sequence of any length; the blocks'
``ref_cnt``, ``_pool`` mark and ``is_null`` flag) plus what they write: the key
``_block_hash`` (an int: :data:`NONE` is None), the pending watchers ``_pending`` (a tuple
object: an int id, its length and entries the translation's uninterpreted ``tlen`` and
``tget``), ``_pending_order``, and the pool's ``_next_pending_order`` and
``_watch_registered``. :data:`OBLIGATIONS` has, per method, the function that returns its
z3 queries.

The callees are used through contracts, never their bodies:

* the queue's ``_prepend_n``, ``_append_n`` (:func:`group_contract`) and ``_popleft_n``:
  exactly what ``pyrefine`` proves of them from ``impl/free_queue.py``'s source for
  every list and every group (the "refinement (from source)" column of ``make
  verify``): ``RC`` before, ``RC`` of the new sequence after. Proved, not stated;
* *stated* (their bodies read weak references, class objects, the cache index or call
  watchers): ``_holds`` is true exactly of this pool's blocks; every modelled entry is
  some pool's block (``_is_some_block``); ``_forward`` is called only on another pool's
  null block and returns ``forwarded`` unchanged; ``_own`` as in ``pypool``;
  ``_check_releasable`` raises ``RefCountUnderflow`` when a block is listed more often
  than referenced; ``_drop_key`` leaves the block without a key; ``_detach_watchers``
  leaves the blocks without watchers; ``_fire`` changes nothing modelled (a watcher that
  calls back is a nested operation of its own, as in the spec).

Each obligation is a z3 unsat for every queue (any length, any order) and every count:

* ``free_blocks``: every key, caching on or off, ``evict_first`` either way, lists of at
  most :data:`L` entries (refused calls also :data:`L_REFUSED`), each this pool's block or
  a null block (repeats allowed). A valid call does the spec's step
  (``World._op_free_blocks``, ``_release``); a double free raises ``RefCountUnderflow``
  and leaves every count, link, the counter, key, watcher, mark and flag as it was.
  Another pool's non-null block (forwarded to its own pool), a gone pool's block, a
  non-block entry, a non-list argument and a non-bool ``evict_first`` are not modelled.
* ``unpin_blocks``: lists of at most :data:`L_UNPIN` entries, any pool's blocks, at most
  :data:`W` pending watchers per block at the call. A valid call does the spec's step
  (watchers in registration order, each once; blocks numbered in first-watched order;
  the counters); a refused call raises the spec's error and leaves the state as it was.
* ``get_new_blocks``: counts up to :data:`L_GET` (valid), every int (refused).

Metrics are off. Seeded bugs (:data:`HOT_MUTANTS`) are refuted on small concrete pools
(:func:`refute`), and a counterexample replays on a pool class (:func:`replay`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import z3  # type: ignore[import-untyped]

from kvpool.spec import FreeBlocks, GetNewBlocks, PoolState, UnpinBlocks, World
from kvpool.spec.errors import (
    ForeignBlock,
    InsufficientFreeBlocks,
    InvalidArgument,
    NullBlockMisuse,
    RefCountUnderflow,
)
from kvpool.spec.ops import BlockRef
from kvpool.spec.state import MAX_COUNT

from .model import isolated_check, named
from .pypool import (
    CONCRETE_QUEUES,
    FOREIGN,
    FOREIGN_NULL,
    MARK,
    N_OWN,
    State,
    _arr,
    _finite,
    _flat,
    _ghost,
    _own_effect,
    _pin,
    _same,
    _seq,
    _seq_if,
    patched,
    pool_invariant,
)
from .pypool import real_source as real_source
from .pyrefine import RC, Patch, _drop, _prefix
from .pyrefine import SOURCE as QUEUE_SOURCE
from .pysource import (
    NONE,
    BoolV,
    Contract,
    Effect,
    FuncV,
    Heap,
    IntV,
    ListV,
    Node,
    ObjV,
    Translation,
    Value,
)
from .refinement import Seq, _unlinked_group, seq_append_all, seq_prepend_all

L = 2
"""Lists of at most this many entries (as ``touch``'s)."""
L_REFUSED = 3
"""The refused calls' obligations also at this bound."""
L_GET = 3
"""``get_new_blocks``' valid calls: counts up to this (its loops unrolled this often)."""

METHODS = ("free_blocks", "unpin_blocks", "get_new_blocks")
"""The hot paths this module proves."""

FIELDS = {
    "ref_cnt": "int",
    "_pool": "int",
    "is_null": "bool",
    "_block_hash": "int",
    "_pending": "int",
}
"""The block attributes modelled: ``_block_hash`` is the key's id (:data:`NONE`: no key),
``_pending`` the identity of the watchers' tuple (:data:`NONE`: no watcher)."""


# -- the queue's group contracts (pyrefine proves them from free_queue.py's source) -----------


def _group_pos(arr: Any, n: Any, bound: int) -> Any:
    """``b`` -> its position among ``arr[0..n)`` (the first), -1 if none (at most ``bound``)."""
    b = z3.Int("gp")
    pos: Any = z3.IntVal(-1)
    for i in reversed(range(bound)):
        pos = z3.If(z3.And(i < n, b == arr[i]), z3.IntVal(i), pos)
    return z3.Lambda([b], pos)


def group_contract(seq_op: Callable[[Seq, Any, Any, Any], Seq], bound: int) -> Contract:
    """``_prepend_n``/``_append_n``: pre ``RC`` and ``blocks`` (at most ``bound``) distinct
    blocks outside the list; post ``RC`` of the list with the group put in by ``seq_op``."""

    def effect(h: Heap, args: dict[str, Value], fresh: Callable[[str], str]) -> Effect:
        bl = args["blocks"]
        if not isinstance(bl, ListV):
            raise TypeError("a group that is not a list")
        a = _seq(h.ghost)
        pos = _group_pos(bl.arr, bl.n, bound)
        a2 = seq_op(a, bl.arr, bl.n, pos)
        h2 = Heap(_arr(fresh("nxt")), _arr(fresh("prv")), z3.Int(fresh("cnt")), h.fields)
        h2.ghost = _ghost(a2)
        return Effect(
            pre=z3.And(RC(h, a), bl.n <= bound, _unlinked_group(a, bl.arr, bl.n, pos)),
            post=RC(h2, a2),
            heap=h2,
        )

    return Contract(("blocks",), effect)


def _pure(ret: Callable[[Heap, dict[str, Value]], tuple[Any, Value]]) -> Any:
    def effect(h: Heap, args: dict[str, Value], fresh: Callable[[str], str]) -> Effect:
        pre, val = ret(h, args)
        return Effect(pre=pre, post=z3.BoolVal(True), heap=h, ret=val)

    return effect


def _node(v: Value) -> Any:
    if not isinstance(v, Node):
        raise TypeError("a block argument that is not a node")
    return v.t


def _holds(h: Heap, args: dict[str, Value]) -> tuple[Any, Value]:
    return z3.BoolVal(True), BoolV(h.fields["_pool"][_node(args["block"])] == MARK)


def _is_some_block(h: Heap, args: dict[str, Value]) -> tuple[Any, Value]:
    return _node(args["entry"]) >= 0, BoolV(z3.BoolVal(True))


def _forward(h: Heap, args: dict[str, Value]) -> tuple[Any, Value]:
    b = _node(args["block"])
    return z3.And(b >= 0, h.fields["is_null"][b]), args["forwarded"]


def _popleft_n_effect(h: Heap, args: dict[str, Value], fresh: Callable[[str], str]) -> Effect:
    """``_popleft_n(n)``: pre ``RC`` and ``0 <= n <= len``; post ``RC`` of the sequence
    less its first ``n``, which it returns in order (``pyrefine``'s ``_popleft_n`` check,
    proved from the source for every list and every n)."""
    k = args["n"]
    if not isinstance(k, IntV | Node):
        raise TypeError("_popleft_n of a non-integer")
    a = _seq(h.ghost)
    a2 = _drop(a, k.t)
    h2 = Heap(_arr(fresh("nxt")), _arr(fresh("prv")), z3.Int(fresh("cnt")), h.fields)
    h2.ghost = _ghost(a2)
    ret = ListV(_arr(fresh("ret")), k.t)
    return Effect(
        pre=z3.And(RC(h, a), k.t >= 0, k.t <= a.n),
        post=z3.And(RC(h2, a2), _prefix(ret, a, k.t)),
        heap=h2,
        ret=ret,
    )


def _set_field(h: Heap, name: str, arr: Any) -> Heap:
    return Heap(h.nxt, h.prv, h.cnt, {**h.fields, name: arr}, h.ghost)


def _drop_key_effect(h: Heap, args: dict[str, Value], fresh: Callable[[str], str]) -> Effect:
    """``_drop_key(block)`` (stated): called on a block with a key, it leaves the block with
    none and changes nothing else modelled (the index and the event log are not)."""
    b = _node(args["block"])
    key = h.fields["_block_hash"]
    return Effect(
        pre=z3.And(b >= 0, key[b] != NONE),
        post=z3.BoolVal(True),
        heap=_set_field(h, "_block_hash", z3.Store(key, b, NONE)),
    )


def _detach_effect(bound: int) -> Any:
    def effect(h: Heap, args: dict[str, Value], fresh: Callable[[str], str]) -> Effect:
        """``_detach_watchers(blocks)`` (stated): each listed block's ``_pending`` is None
        after it; nothing else modelled changes; it returns the firings (opaque here)."""
        bl = args["blocks"]
        if not isinstance(bl, ListV):
            raise TypeError("_detach_watchers of a non-list")
        pend = h.fields["_pending"]
        for i in range(bound):
            pend = z3.If(i < bl.n, z3.Store(pend, bl.arr[i], NONE), pend)
        return Effect(
            pre=bl.n <= bound,
            post=z3.BoolVal(True),
            heap=_set_field(h, "_pending", pend),
            ret=Node(z3.IntVal(NONE)),
        )

    return effect


def _fire(h: Heap, args: dict[str, Value]) -> tuple[Any, Value]:
    """``_fire(firings, handed_out)`` (stated): calls the watchers once the state is
    complete; what a watcher does when it calls back into the pool is an operation of its
    own (the spec's nested operations), so here it changes nothing modelled."""
    return z3.BoolVal(True), Node(z3.IntVal(NONE))


def translation(source: str, caching: Any, bound: int = L) -> Translation:
    return Translation(
        source,
        cls="BlockPool",
        fields=FIELDS,
        self_values={
            "_weak_self": Node(z3.IntVal(MARK)),
            "free_block_queue": ObjV("free_block_queue", "num_free_blocks"),
            "metrics_collector": Node(z3.IntVal(NONE)),
            "enable_caching": BoolV(caching),
            "blocks": ObjV("blocks"),
        },
        contracts={
            "free_block_queue._prepend_n": group_contract(seq_prepend_all, bound),
            "free_block_queue._append_n": group_contract(seq_append_all, bound),
            "_holds": Contract(("blocks", "block"), _pure(_holds)),
            "_is_some_block": Contract(("entry",), _pure(_is_some_block)),
            "_forward": Contract(("block", "forwarded"), _pure(_forward)),
            "free_block_queue._popleft_n": Contract(("n",), _popleft_n_effect),
            "_drop_key": Contract(("block",), _drop_key_effect),
            "_detach_watchers": Contract(("blocks",), _detach_effect(bound)),
            "_fire": Contract(("firings", "handed_out"), _pure(_fire)),
        },
        node_class="KVCacheBlock",
        consts={"MAX_BLOCKS": IntV(z3.IntVal(MAX_COUNT))},
    )


# -- the state ----------------------------------------------------------------------------------


def fresh_state(fields: dict[str, str] = FIELDS) -> State:
    """The pool's state with ``fields`` (each an array over node ids) and the entries."""
    fs = {
        k: _arr(k if k != "_pool" else "mark", z3.BoolSort() if v == "bool" else None)
        for k, v in fields.items()
    }
    fs["ref_cnt"] = _arr("ref")
    a = Seq(_arr("s"), z3.Int("n"), _arr("pos"))
    heap = Heap(_arr("nxt"), _arr("prv"), z3.Int("cnt"), fs, _ghost(a))
    return State(heap, a, _arr("bl"), z3.Int("m"))


def entries(st: State, bound: int) -> list[Any]:
    """At most ``bound`` entries, each this pool's block or some pool's null block."""
    return [
        st.m >= 0,
        st.m <= bound,
        *[
            z3.Implies(
                i < st.m,
                z3.And(st.bl[i] >= 0, z3.Or(st.mark[st.bl[i]] == MARK, st.is_null[st.bl[i]])),
            )
            for i in range(bound)
        ],
    ]


# -- the spec's step, on the sequence (spec/state.py, World._op_free_blocks, _release) ---------


def _push(arr: Any, n: Any, c: Any, b: Any) -> tuple[Any, Any]:
    return z3.If(c, z3.Store(arr, n, b), arr), z3.If(c, n + 1, n)


def spec_free(st: State, caching: Any, evict_first: Any, bound: int) -> tuple[Any, Seq, Any]:
    """(refused, sequence after, ref after) of ``FreeBlocks(bl[:m], evict_first)``: null
    blocks skipped; a block listed more often than referenced refuses the call
    (``_check_multiplicity``: the running count goes below 0 at some entry); else each
    block reaching 0 joins FRONT (no key, caching off, or ``evict_first``) or BACK, FRONT
    goes in as a group before the sequence (its first entry the new head), BACK after."""
    ref, key, is_null, bl = st.ref, st.heap.fields["_block_hash"], st.is_null, st.bl
    refused: Any = z3.BoolVal(False)
    r = ref
    empty = z3.K(z3.IntSort(), z3.IntVal(NONE))
    fr, kf, bk, kb = empty, z3.IntVal(0), empty, z3.IntVal(0)
    for i in range(bound):
        b = bl[i]
        take = z3.And(i < st.m, z3.Not(is_null[b]))
        refused = z3.Or(refused, z3.And(take, r[b] < 1))
        r = z3.If(take, z3.Store(r, b, r[b] - 1), r)
        zero = z3.And(take, r[b] == 0)
        front = z3.Or(key[b] == NONE, z3.Not(caching), evict_first)
        fr, kf = _push(fr, kf, z3.And(zero, front), b)
        bk, kb = _push(bk, kb, z3.And(zero, z3.Not(front)), b)
    a1 = seq_prepend_all(st.a, fr, kf, _group_pos(fr, kf, bound))
    a2 = seq_append_all(a1, bk, kb, _group_pos(bk, kb, bound))
    return refused, _seq_if(refused, st.a, a2), z3.If(refused, ref, r)


# -- the obligations -------------------------------------------------------------------------


def _parts(
    parts: list[tuple[str, Any, Any]],
) -> list[tuple[str, Any]]:
    out = []
    for name, case, goal in parts:
        conj = _flat(goal)
        for i, g in enumerate(conj):
            out.append(
                (name if len(conj) == 1 else f"{name} [{i + 1}/{len(conj)}]", z3.Implies(case, g))
            )
    return out


def free_goal(
    tr: Translation, st: State, res: Any, caching: Any, ef: Any, bound: int
) -> list[tuple[str, Any]]:
    refused, seq, r = spec_free(st, caching, ef, bound)
    h, h0 = res.heap, st.heap
    rcu = tr.code(RefCountUnderflow)
    others = ("_pool", "is_null", "_block_hash", "_pending")
    return _parts(
        [
            ("refused: raises RefCountUnderflow", refused, res.exc == rcu),
            (
                "refused: ref counts, keys, watchers, marks, flags as they were",
                refused,
                _same(h, h0, "ref_cnt", *others),
            ),
            ("refused: every link and the counter as they were", refused, RC(h, st.a)),
            ("valid: returns", z3.Not(refused), res.exc == 0),
            ("valid: ref counts as the spec's", z3.Not(refused), h.fields["ref_cnt"] == r),
            (
                "valid: keys, watchers, marks and flags unchanged",
                z3.Not(refused),
                _same(h, h0, *others),
            ),
            ("valid: the queue is the spec's sequence", z3.Not(refused), RC(h, seq)),
        ]
    )


def entry_hypotheses(method: str, st: State, bound: int, refused_only: bool) -> list[Any]:
    """What ``method``'s proof assumes of the state and the call at its entry (every
    obligation's first hypotheses; the rest are the contracts' posts, each met by the
    callee's source or stated, and the loops' exits)."""
    caching, b = z3.Bool("caching"), z3.Int("kb")
    # with caching off no block holds a key (the spec's pools: nothing can give one)
    keys = z3.ForAll([b], z3.Or(caching, st.heap.fields["_block_hash"][b] == NONE))
    if method == "free_blocks":
        refused = spec_free(st, caching, z3.Bool("evict_first"), bound)[0]
        return [
            *pool_invariant(st),
            keys,
            *entries(st, bound),
            *([refused] if refused_only else []),
        ]
    if method == "get_new_blocks":
        k = z3.Int("num_blocks")
        return [
            *pool_invariant(st),
            keys,
            z3.Or(k < 0, k > st.a.n) if refused_only else k <= bound,
        ]
    if method == "unpin_blocks":
        tr = unpin_translation(real_source(), bound)
        return unpin_entry(tr, st, z3.Int("w"), bound, refused_only)
    raise ValueError(f"not proved from source here: {method}")


def state_for(method: str) -> State:
    """A fresh state of the shape ``method``'s proof runs on."""
    return unpin_state() if method == "unpin_blocks" else fresh_state()


def free_blocks_obligations(
    source: str | None = None, bound: int = L, refused_only: bool = False
) -> list[tuple[str, list[Any], Any]]:
    """Every obligation of ``free_blocks``' proof at ``bound``: (step, hypotheses, goal).
    ``refused_only``: the refused calls' (and the contracts' and bounds' on the way)."""
    caching, ef = z3.Bool("caching"), z3.Bool("evict_first")
    tr = translation(real_source() if source is None else source, caching, bound)
    st = fresh_state()
    hyps = entry_hypotheses("free_blocks", st, bound, refused_only)
    res = tr.run(
        "free_blocks",
        {"ordered_blocks": ListV(st.bl, st.m), "evict_first": BoolV(ef)},
        st.heap,
        bound=bound,
    )
    out = [(o.name, [*hyps, *o.hyps], o.goal) for o in res.obligations]
    for name, goal in free_goal(tr, st, res, caching, ef, bound):
        if refused_only and not name.startswith("refused"):
            continue
        out.append((f"post: {name}", [*hyps, *res.assumptions], goal))
    return out


# -- get_new_blocks: the eviction path --------------------------------------------------------


def spec_get_new(
    tr: Translation, st: State, k: Any, bound: int
) -> tuple[Any, Any, Seq, dict[str, Any]]:
    """(refused, error code, sequence after, fields after) of ``GetNewBlocks(k)``: a
    negative count or one past ``MAX_COUNT`` is ``InvalidArgument``, one past the free
    sequence ``InsufficientFreeBlocks``; else the first ``k`` blocks leave the sequence,
    each with ``ref_cnt`` 1, no key (``_drop_key``) and no pending watcher (they fire).
    The fields after are written for ``k <= bound``."""
    a = st.a
    inv, ins = tr.code(InvalidArgument), tr.code(InsufficientFreeBlocks)
    code = z3.If(k < 0, inv, z3.If(k > a.n, z3.If(k > MAX_COUNT, inv, ins), 0))
    f = dict(st.heap.fields)
    for i in range(bound):
        b, take = a.s[i], i < k
        f["ref_cnt"] = z3.If(take, z3.Store(f["ref_cnt"], b, 1), f["ref_cnt"])
        f["_block_hash"] = z3.If(take, z3.Store(f["_block_hash"], b, NONE), f["_block_hash"])
        f["_pending"] = z3.If(take, z3.Store(f["_pending"], b, NONE), f["_pending"])
    return code != 0, code, _drop(a, k), f


def get_new_goal(tr: Translation, st: State, res: Any, k: Any, bound: int) -> list[tuple[str, Any]]:
    refused, code, seq, f = spec_get_new(tr, st, k, bound)
    h, h0 = res.heap, st.heap
    valid = z3.Not(refused)
    return _parts(
        [
            ("refused: raises the spec's error", refused, res.exc == code),
            (
                "refused: ref counts, keys, watchers, marks, flags as they were",
                refused,
                _same(h, h0, *FIELDS),
            ),
            ("refused: every link and the counter as they were", refused, RC(h, st.a)),
            ("valid: returns", valid, res.exc == 0),
            ("valid: returns the first k blocks of the sequence", valid, _prefix(res.ret, st.a, k)),
            ("valid: ref counts as the spec's", valid, h.fields["ref_cnt"] == f["ref_cnt"]),
            ("valid: keys as the spec's", valid, h.fields["_block_hash"] == f["_block_hash"]),
            ("valid: pending watchers as the spec's", valid, h.fields["_pending"] == f["_pending"]),
            ("valid: marks and flags unchanged", valid, _same(h, h0, "_pool", "is_null")),
            ("valid: the queue is the spec's sequence", valid, RC(h, seq)),
        ]
    )


def get_new_blocks_obligations(
    source: str | None = None, bound: int = L, refused_only: bool = False
) -> list[tuple[str, list[Any], Any]]:
    """Every obligation of ``get_new_blocks``' proof: (step, hypotheses, goal). The count
    is any int up to ``bound`` (negative ones too); ``refused_only``: the refused calls'
    instead, for *every* int count (no bound: a refusal runs no loop)."""
    caching = z3.Bool("caching")
    tr = translation(real_source() if source is None else source, caching, bound)
    st = fresh_state()
    k = z3.Int("num_blocks")
    hyps = entry_hypotheses("get_new_blocks", st, bound, refused_only)
    res = tr.run("get_new_blocks", {"num_blocks": IntV(k)}, st.heap, bound=bound)
    out = [(o.name, [*hyps, *o.hyps], o.goal) for o in res.obligations]
    for name, goal in get_new_goal(tr, st, res, k, bound):
        if refused_only and not name.startswith("refused"):
            continue
        out.append((f"post: {name}", [*hyps, *res.assumptions], goal))
    return out


# -- unpin_blocks: watchers as tuple objects ---------------------------------------------------

L_UNPIN = 2
"""``unpin_blocks``: lists of at most this many entries."""
W = 2
"""Each block's pending watchers at the call's entry: at most this many (the loops over a
tuple, which may grow by one per entry, are unrolled ``L_UNPIN + 1`` times)."""
UNPIN_FIELDS = {**FIELDS, "_pending_order": "int"}
SELF_FIELDS = ("_next_pending_order", "_watch_registered")


def _check_releasable_effect(tr: Translation, bound: int) -> Any:
    def effect(h: Heap, args: dict[str, Value], fresh: Callable[[str], str]) -> Effect:
        """``_check_releasable(blocks)`` (stated): raises ``RefCountUnderflow`` if a block
        is listed more often than its ``ref_cnt``; changes nothing."""
        bl = args["blocks"]
        if not isinstance(bl, ListV):
            raise TypeError("_check_releasable of a non-list")
        r, under = h.fields["ref_cnt"], z3.BoolVal(False)
        for i in range(bound):
            b = bl.arr[i]
            under = z3.Or(under, z3.And(i < bl.n, r[b] < 1))
            r = z3.If(i < bl.n, z3.Store(r, b, r[b] - 1), r)
        code = z3.If(under, tr.code(RefCountUnderflow), 0)
        return Effect(pre=bl.n <= bound, post=z3.BoolVal(True), heap=h, code=code)

    return effect


def unpin_translation(source: str, bound: int) -> Translation:
    tr = Translation(
        source,
        cls="BlockPool",
        fields=UNPIN_FIELDS,
        self_values={
            "_weak_self": Node(z3.IntVal(MARK)),
            "free_block_queue": ObjV("free_block_queue", "num_free_blocks"),
        },
        node_class="KVCacheBlock",
        tuple_fields=("_pending",),
        self_fields=SELF_FIELDS,
    )
    tr.contracts = {
        "free_block_queue._append_n": group_contract(seq_append_all, bound),
        "_own": Contract(("blocks", "null_ok"), _own_effect(tr, bound)),
        "_check_releasable": Contract(("blocks",), _check_releasable_effect(tr, bound)),
    }
    return tr


def unpin_state() -> State:
    st = fresh_state(UNPIN_FIELDS)
    for f in SELF_FIELDS:
        st.heap.fields[f"self.{f}"] = z3.Int(f)
    return st


@dataclass
class Watchers:
    """The spec's pending watchers, per block: how many, and each (by position)."""

    n: Any  # node -> count (0: none)
    get: Any  # node -> (position -> watcher)


def watchers_of(tr: Translation, pend: Any) -> Watchers:
    b, i = z3.Ints("wb wi")
    return Watchers(
        z3.Lambda([b], z3.If(pend[b] == NONE, 0, tr.tlen(pend[b]))),
        z3.Lambda([b], z3.Lambda([i], tr.tget(pend[b], i))),
    )


def spec_unpin(
    tr: Translation, st: State, w: Any, bound: int
) -> tuple[Any, Any, Seq, Watchers, Any, Any, Any]:
    """(error code, ref after, sequence after, watchers after, number of watchers added,
    blocks first watched now -> their order number, next order number) of
    ``UnpinBlocks(bl[:m], w)`` (``World._op_unpin_blocks``): ``_own_blocks`` with
    ``null="refuse"`` (the first null block or another pool's block names the refusal),
    then ``_check_multiplicity``; else per entry in order its count goes down by one, it
    gets ``w`` unless it has it (watchers in registration order; a block's first watcher
    numbers it in first-watched order), and the blocks reaching 0 join the back."""
    ref, mark, is_null, bl = st.ref, st.mark, st.is_null, st.bl
    code: Any = z3.IntVal(0)
    for i in reversed(range(bound)):
        e = bl[i]
        bad = z3.And(i < st.m, z3.Or(is_null[e], mark[e] != MARK))
        code = z3.If(bad, z3.If(is_null[e], tr.code(NullBlockMisuse), tr.code(ForeignBlock)), code)
    spec = watchers_of(tr, st.heap.fields["_pending"])
    wn, wget = spec.n, spec.get
    r, under = ref, z3.BoolVal(False)
    added: Any = z3.IntVal(0)
    nxt = st.heap.fields["self._next_pending_order"]
    order = z3.K(z3.IntSort(), z3.IntVal(-1))
    empty = z3.K(z3.IntSort(), z3.IntVal(NONE))
    rel, kr = empty, z3.IntVal(0)
    for i in range(bound):
        b, take = bl[i], i < st.m
        under = z3.Or(under, z3.And(take, r[b] < 1))
        r = z3.If(take, z3.Store(r, b, r[b] - 1), r)
        has = z3.Or(*[z3.And(j < wn[b], wget[b][j] == w) for j in range(W + bound)])
        add = z3.And(take, z3.Not(has))
        first = z3.And(add, wn[b] == 0)
        order = z3.If(first, z3.Store(order, b, nxt), order)
        nxt = z3.If(first, nxt + 1, nxt)
        wget = z3.If(add, z3.Store(wget, b, z3.Store(wget[b], wn[b], w)), wget)
        wn = z3.If(add, z3.Store(wn, b, wn[b] + 1), wn)
        added = z3.If(add, added + 1, added)
        rel, kr = _push(rel, kr, z3.And(take, r[b] == 0), b)
    code = z3.If(code != 0, code, z3.If(under, tr.code(RefCountUnderflow), 0))
    seq = seq_append_all(st.a, rel, kr, _group_pos(rel, kr, bound))
    return code, r, seq, Watchers(wn, wget), added, order, nxt


def unpin_entry(tr: Translation, st: State, w: Any, bound: int, refused_only: bool) -> list[Any]:
    """At most ``bound`` entries, each any block of any pool; at most :data:`W` watchers
    per block; the watcher is not None."""
    b = z3.Int("ub")
    pend = st.heap.fields["_pending"]
    hyps = [
        *pool_invariant(st),
        st.m >= 0,
        st.m <= bound,
        *[z3.Implies(i < st.m, st.bl[i] >= 0) for i in range(bound)],
        w != NONE,
        z3.ForAll(
            [b], z3.Or(pend[b] == NONE, z3.And(tr.tlen(pend[b]) >= 1, tr.tlen(pend[b]) <= W))
        ),
    ]
    code = spec_unpin(tr, st, w, bound)[0]
    return [*hyps, code != 0 if refused_only else code == 0]


def unpin_goal(
    tr: Translation, st: State, res: Any, w: Any, bound: int, refused_only: bool
) -> list[tuple[str, Any]]:
    code, r, seq, spec, added, order, nxt = spec_unpin(tr, st, w, bound)
    h, h0 = res.heap, st.heap
    pend, pend0 = h.fields["_pending"], h0.fields["_pending"]
    ordr, ordr0 = h.fields["_pending_order"], h0.fields["_pending_order"]
    b, i = z3.Ints("gb gi")
    kept_order = z3.ForAll([b], z3.Implies(pend0[b] != NONE, ordr[b] == ordr0[b]))
    refused, valid = code != 0, code == 0
    parts = [
        ("refused: raises the spec's error", refused, res.exc == code),
        (
            "refused: ref counts, watchers, keys, marks, flags as they were",
            refused,
            _same(h, h0, "ref_cnt", "_pending", "_block_hash", "_pool", "is_null"),
        ),
        (
            "refused: the watch counters and the order of watched blocks as they were",
            refused,
            z3.And(_same(h, h0, *[f"self.{f}" for f in SELF_FIELDS]), kept_order),
        ),
        ("refused: every link and the counter as they were", refused, RC(h, st.a)),
    ]
    if not refused_only:
        watched = z3.ForAll(
            [b],
            z3.Implies(
                b >= 0,
                z3.And(
                    (pend[b] == NONE) == (spec.n[b] == 0),
                    z3.Implies(
                        pend[b] != NONE,
                        z3.And(
                            tr.tlen(pend[b]) == spec.n[b],
                            z3.ForAll(
                                [i],
                                z3.Implies(
                                    z3.And(i >= 0, i < spec.n[b]),
                                    tr.tget(pend[b], i) == spec.get[b][i],
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        )
        new_order = z3.ForAll([b], z3.Implies(order[b] >= 0, ordr[b] == order[b]))
        counters = z3.And(
            h.fields["self._next_pending_order"] == nxt,
            h.fields["self._watch_registered"] == h0.fields["self._watch_registered"] + added,
        )
        parts += [
            ("valid: returns", valid, res.exc == 0),
            ("valid: ref counts as the spec's", valid, h.fields["ref_cnt"] == r),
            ("valid: pending watchers as the spec's", valid, watched),
            ("valid: watched blocks in the spec's order", valid, z3.And(kept_order, new_order)),
            ("valid: the watch counters as the spec's", valid, counters),
            (
                "valid: keys, marks and flags unchanged",
                valid,
                _same(h, h0, "_block_hash", "_pool", "is_null"),
            ),
            ("valid: the queue is the spec's sequence", valid, RC(h, seq)),
        ]
    return _parts(parts)


def unpin_blocks_obligations(
    source: str | None = None, bound: int = L_UNPIN, refused_only: bool = False
) -> list[tuple[str, list[Any], Any]]:
    """Every obligation of ``unpin_blocks``' proof at ``bound``: (step, hypotheses, goal);
    ``refused_only``: the refused calls' instead of the valid ones'."""
    tr = unpin_translation(real_source() if source is None else source, bound)
    st = unpin_state()
    w = z3.Int("w")
    hyps = unpin_entry(tr, st, w, bound, refused_only)
    res = tr.run(
        "unpin_blocks",
        {"blocks": ListV(st.bl, st.m), "on_reuse": FuncV(w)},
        st.heap,
        bound=bound + 1,
    )
    out = [(o.name, [*hyps, *o.hyps], o.goal) for o in res.obligations]
    for name, goal in unpin_goal(tr, st, res, w, bound, refused_only):
        out.append((f"post: {name}", [*hyps, *res.assumptions], goal))
    return out


OBLIGATIONS: dict[str, Callable[..., list[tuple[str, list[Any], Any]]]] = {
    "unpin_blocks": unpin_blocks_obligations,
    "free_blocks": free_blocks_obligations,
    "get_new_blocks": get_new_blocks_obligations,
}
"""Per method, the function that returns its z3 queries: ``f(source, bound,
refused_only)`` -> [(step, hypotheses, goal)]."""


PROOF_BOUNDS: dict[str, tuple[tuple[int, bool], ...]] = {
    "free_blocks": ((L, False), (L_REFUSED, True)),
    "get_new_blocks": ((L_GET, False), (L_GET, True)),
    "unpin_blocks": ((L_UNPIN, False), (L_UNPIN, True)),
}
"""Per method, (bound, refused calls only) of each run of its proof."""


def bounds_label(method: str) -> str:
    if method == "unpin_blocks":
        return (
            f"every queue, count and watcher; lists of <= {L_UNPIN} entries (any pool's "
            f"blocks, null blocks, repeats), <= {W} pending watchers per block at the call"
        )
    if method == "get_new_blocks":
        return (
            f"every queue, key and watcher, caching on or off; num_blocks <= {L_GET} "
            "(valid calls), every int (refused calls)"
        )
    return (
        "every queue and key, caching on or off, evict_first either way; "
        + ", ".join(
            f"lists of <= {b} entries{' (refused calls)' if r else ''}"
            for b, r in PROOF_BOUNDS[method]
        )
        + " (this pool's blocks, null blocks, repeats)"
    )


@dataclass
class HotResult:
    op: str
    step: str
    status: str
    seconds: float
    model: z3.ModelRef | None = None
    bound: int = L


def prove(
    methods: tuple[str, ...] = METHODS,
    source: str | None = None,
    timeout_ms: int = 120000,
    stop_at_first_failure: bool = False,
) -> list[HotResult]:
    """Translate ``source`` (default: the real ``pool.py``) and prove each of ``methods``
    at each of its :data:`PROOF_BOUNDS`."""
    rows: list[HotResult] = []
    for meth in methods:
        for bound, refused_only in PROOF_BOUNDS[meth]:
            for step, hyps, goal in obligations(source, meth, bound, refused_only):
                with named(f"pool {meth} L={bound} ({step})"):
                    st, dt, mdl = isolated_check(hyps, goal, timeout_ms)
                rows.append(HotResult(meth, step, st, dt, mdl, bound))
                if stop_at_first_failure and st != "proved":
                    return rows
    return rows


def obligations(
    source: str | None = None,
    method: str = "free_blocks",
    bound: int = L,
    refused_only: bool = False,
) -> list[tuple[str, list[Any], Any]]:
    if method not in OBLIGATIONS:
        raise ValueError(f"not proved from source here: {method}")
    return OBLIGATIONS[method](source, bound, refused_only)


# -- seeded bugs: each must be refuted, on a small concrete pool ------------------------------

HOT_MUTANTS: dict[str, tuple[str, str, tuple[Patch, ...]]] = {
    "evict-first-ignored": (
        "free_blocks",
        "free_blocks puts a keyed block at the back even with evict_first or caching off",
        (
            (
                "                        if all_front or block._block_hash is None:\n",
                "                        if block._block_hash is None:\n",
            ),
        ),
    ),
    "undo-release-short": (
        "free_blocks",
        "_undo_release gives back the references of all entries before the refused one "
        "but the last",
        (("        for block in blocks[:stop]:\n", "        for block in blocks[: stop - 1]:\n"),),
    ),
    "unpin-watcher-twice": (
        "unpin_blocks",
        "unpin_blocks adds its watcher to a block that has it already (not first)",
        (
            (
                "                        if w is on_reuse:\n                            break\n",
                "                        pass\n",
            ),
        ),
    ),
    "undo-unpin-keeps-watcher": (
        "unpin_blocks",
        "a refused unpin_blocks leaves its watcher on the blocks that had none",
        (
            (
                "            if block._pending is single:\n                block._pending = None\n",
                "",
            ),
        ),
    ),
    "watched-last-only": (
        "get_new_blocks",
        "get_new_blocks fires the watchers only if the last block it hands out has some",
        (
            (
                "                    self._drop_key(block)\n"
                "                block.ref_cnt = 1\n"
                "                if block._pending is not None:\n"
                "                    watched = True\n",
                "                    self._drop_key(block)\n"
                "                block.ref_cnt = 1\n"
                "                watched = block._pending is not None\n",
            ),
        ),
    ),
}
"""(method, idea, patches to ``impl/pool.py``) of each seeded bug this module's proofs
must refute."""


@dataclass
class HotCase:
    """A decoded counterexample: the pool's state and the call."""

    method: str
    free: tuple[int, ...]
    ref: dict[int, int]
    entries: list[int]
    caching: bool = True
    evict_first: bool = False
    keyed: tuple[int, ...] = ()
    watched: tuple[int, ...] = ()
    num_blocks: int = 0
    step: str = ""
    pending: dict[int, tuple[int, ...]] = field(default_factory=dict)
    watcher: int = 0

    def __str__(self) -> str:
        names = {FOREIGN: "F", FOREIGN_NULL: "F0"}
        ents = ", ".join(str(names.get(e, e)) for e in self.entries)
        state = f"free {list(self.free)}, ref {self.ref}, caching={self.caching}"
        state += f", keyed {list(self.keyed)}"
        if self.method == "free_blocks":
            call = f"free_blocks([{ents}], evict_first={self.evict_first})"
        elif self.method == "unpin_blocks":
            state += f", watchers {self.pending}"
            call = f"unpin_blocks([{ents}], watcher {self.watcher})"
        else:
            state += f", watched {list(self.watched)}"
            call = f"get_new_blocks({self.num_blocks})"
        return f"{state}; {call}: fails {self.step!r}"


def _run_queue(tq: Translation, method: str) -> Contract:
    """The queue's ``method`` run from its source (exact on a concrete pool) in place of
    its contract."""
    params = tuple(a.arg for a in tq.funcs[method].args.args[1:])

    def effect(h: Heap, args: dict[str, Value], fresh: Callable[[str], str]) -> Effect:
        res = tq.run(method, args, Heap(h.nxt, h.prv, h.cnt))
        after = Heap(res.heap.nxt, res.heap.prv, res.heap.cnt, h.fields, h.ghost)
        return Effect(z3.BoolVal(True), z3.BoolVal(True), after, res.ret, res.exc)

    return Contract(params, effect)


def _setup(
    method: str, source: str, bound: int
) -> tuple[State, dict[str, Any], list[tuple[str, Any]], list[Any]]:
    """The state, the call's arguments and options, the goals (quantifiers instantiated
    over a concrete pool's nodes) and further hypotheses of ``method`` on ``source``, the
    queue's methods run from ``free_queue.py``'s source."""
    opts = {"caching": z3.Bool("caching"), "evict_first": z3.Bool("evict_first")}
    opts["num_blocks"] = z3.Int("num_blocks")
    st = fresh_state()
    tr = translation(source, opts["caching"], bound)
    tq = Translation(QUEUE_SOURCE.read_text(), cls="FreeKVCacheBlockQueue")
    for k in list(tr.contracts):
        if k.startswith("free_block_queue."):
            tr.contracts[k] = _run_queue(tq, k.split(".", 1)[1])
    more: list[Any] = []
    if method == "free_blocks":
        args: dict[str, Value] = {
            "ordered_blocks": ListV(st.bl, st.m),
            "evict_first": BoolV(opts["evict_first"]),
        }
        res = tr.run(method, args, st.heap, bound=bound)
        goals = free_goal(tr, st, res, opts["caching"], opts["evict_first"], bound)
        key = st.heap.fields["_block_hash"]
        more = [z3.Or(opts["caching"], key[b] == NONE) for b in range(6)]
    elif method == "unpin_blocks":
        w = opts["watcher"] = z3.Int("w")
        st = unpin_state()
        tr = unpin_translation(source, bound)
        tr.contracts["free_block_queue._append_n"] = _run_queue(tq, "_append_n")
        args = {"blocks": ListV(st.bl, st.m), "on_reuse": FuncV(w)}
        res = tr.run(method, args, st.heap, bound=bound + 1)
        goals = unpin_goal(tr, st, res, w, bound, False)
        pend, vals = st.heap.fields["_pending"], range(NONE, FOREIGN_NULL + 2)
        more = [w >= 0, w <= 2, *[_finite(a, vals) for a in res.assumptions]]
        for b in vals:
            n = tr.tlen(pend[b])
            more.append(z3.Or(pend[b] == NONE, z3.And(n >= 1, n <= W)))
            more += [
                z3.Implies(j < n, z3.And(tr.tget(pend[b], j) >= 0, tr.tget(pend[b], j) <= 2))
                for j in range(W)
            ]
        opts["tr"] = tr
    elif method == "get_new_blocks":
        k = opts["num_blocks"]
        res = tr.run(method, {"num_blocks": IntV(k)}, st.heap, bound=bound)
        goals = get_new_goal(tr, st, res, k, bound)
        key = st.heap.fields["_block_hash"]
        more = [k >= -1, k <= bound, *[z3.Or(opts["caching"], key[b] == NONE) for b in range(6)]]
    else:
        raise ValueError(f"no refutation for {method}")
    vals = range(NONE, FOREIGN_NULL + 2)
    obs = [(f"post: {n}", _finite(g, vals)) for n, g in goals]
    obs += [(o.name, _finite(o.goal, vals)) for o in res.obligations]
    return st, opts, obs, more


def refute(
    method: str, patches: tuple[Patch, ...], timeout_ms: int = 30000, bound: int | None = None
) -> tuple[str | None, HotCase | None]:
    """A counterexample to ``method``'s proof on the patched source, on a small concrete
    pool (blocks 0..3 as :func:`pypool.refute` has them, each free sequence of
    :data:`pypool.CONCRETE_QUEUES`), decoded; (None, None) if none is found there."""
    if bound is None:  # unpin_blocks' tuple loops unroll one more: its own bound
        bound = L_UNPIN if method == "unpin_blocks" else L_REFUSED
    st, opts, obs, more = _setup(method, patched(patches), bound)
    key, pend = st.heap.fields["_block_hash"], st.heap.fields["_pending"]
    ents = entries(st, bound)
    if method == "unpin_blocks":  # any block of any pool
        ents = [
            st.m >= 0,
            st.m <= bound,
            *[z3.Implies(i < st.m, st.bl[i] >= 0) for i in range(bound)],
        ]
    pendings: tuple[dict[int, tuple[int, ...]], ...] = ({},)
    if method == "unpin_blocks":
        pendings = CONCRETE_PENDING
    for free, pending in ((f, p) for p in pendings for f in CONCRETE_QUEUES):
        pin = [*_pin(st, free, bound), *ents, *more]
        if method == "unpin_blocks":
            pin += _pin_pending(opts["tr"], pend, pending)
        for step, goal in obs:
            status, _, mdl = isolated_check(pin, goal, timeout_ms)
            if status == "refuted" and mdl is not None:

                def val(t: Any, mdl: Any = mdl) -> Any:
                    v = mdl.eval(t, model_completion=True)
                    return z3.is_true(v) if z3.is_bool(v) else int(v.as_long())

                on = bool(val(opts["caching"]))
                watchers: dict[int, tuple[int, ...]] = {}
                if method == "unpin_blocks":
                    tr = opts["tr"]
                    for b in range(1, N_OWN):
                        if val(pend[b]) != NONE:
                            n = val(tr.tlen(pend[b]))
                            watchers[b] = tuple(val(tr.tget(pend[b], j)) for j in range(n))
                return step, HotCase(
                    method,
                    free,
                    {b: val(st.ref[b]) for b in range(1, N_OWN)},
                    [val(st.bl[i]) for i in range(val(st.m))] if method != "get_new_blocks" else [],
                    on,
                    bool(val(opts["evict_first"])),
                    tuple(b for b in range(1, N_OWN) if on and val(key[b]) != NONE),
                    tuple(b for b in free if method == "get_new_blocks" and val(pend[b]) != NONE),
                    val(opts["num_blocks"]),
                    step,
                    watchers,
                    val(opts["watcher"]) if "watcher" in opts else 0,
                )
    return None, None


CONCRETE_PENDING: tuple[dict[int, tuple[int, ...]], ...] = (
    {},
    {1: (0,), 2: (0, 1)},
    {1: (1, 0), 3: (2,)},
)
"""``unpin_blocks``' counterexamples are looked for with these pending watchers (block ->
watcher ids; the call's watcher is any of 0..2): left free, z3 answered unknown."""


def _pin_pending(tr: Translation, pend: Any, pending: dict[int, tuple[int, ...]]) -> list[Any]:
    arr = z3.K(z3.IntSort(), z3.IntVal(NONE))
    out = []
    for b, ws in pending.items():
        t = 10 + b  # the tuple's id
        arr = z3.Store(arr, b, t)
        out += [tr.tlen(t) == len(ws), *[tr.tget(t, j) == w for j, w in enumerate(ws)]]
    return [pend == arr, *out]


# -- a decoded case replayed on the spec and on a real pool class (given) -----------------------


@dataclass
class HotObserved:
    """What a call did: its error, counts, free walk and counter, keyed blocks, the blocks
    whose watchers fired (in order) and those still watched; link faults as notes."""

    error: str | None
    ref: dict[int, int]
    free: list[int]
    num_free: int
    keyed: list[int]
    fired: list[int]
    watched: list[int]
    notes: list[str]
    watchers: dict[int, tuple[int, ...]] = field(default_factory=dict)
    """Each watched block's watcher ids, in registration order."""
    order: list[int] = field(default_factory=list)
    """The watched blocks in first-watched order."""


class _Watcher:
    """A watcher with an id (what the spec calls it), recording the blocks it fires for."""

    def __init__(self, wid: int, fired: list[int]) -> None:
        self.wid, self.fired = wid, fired

    def __call__(self, block: Any) -> None:
        self.fired.append(block.block_id)


WATCHER = 7
"""The watcher id of a case's pending watchers (one per watched block)."""


def _refs(case: HotCase) -> tuple[BlockRef, ...]:
    return tuple(
        BlockRef(1, 1) if e == FOREIGN else BlockRef(1, 0) if e == FOREIGN_NULL else BlockRef(0, e)
        for e in case.entries
    )


def expected(case: HotCase) -> HotObserved:
    """The spec's answer: ``World.apply`` of the call on the case's state."""
    ps = PoolState.initial(N_OWN, caching=case.caching)
    ps.ref = [0, *[case.ref[b] for b in range(1, N_OWN)]]
    ps.free = OrderedDict.fromkeys(case.free)
    for b in case.keyed:
        ps.key[b] = f"k{b}"
        ps.index[f"k{b}"] = {b: None}
    for b in case.watched:
        ps.pending[b] = [WATCHER]
    world = World.of(ps, PoolState.initial(2))
    for b, ws in case.pending.items():
        ps.pending[b] = list(ws)
    op: Any = (
        FreeBlocks(_refs(case), case.evict_first)
        if case.method == "free_blocks"
        else UnpinBlocks(_refs(case), case.watcher)
        if case.method == "unpin_blocks"
        else GetNewBlocks(case.num_blocks)
    )
    out = world.apply(op)
    after = world.pools[0]
    return HotObserved(
        out.error.name if out.error is not None else None,
        {b: after.ref[b] for b in range(N_OWN)},
        list(after.free),
        len(after.free),
        [b for b in range(N_OWN) if after.key[b] is not None],
        [f.block for f in out.fired],
        sorted(after.pending),
        [],
        {b: tuple(ws) for b, ws in after.pending.items()},
        list(after.pending),
    )


def observe(case: HotCase, pool_cls: type) -> HotObserved:
    """Build the case's state on ``pool_cls`` by its own calls (the counts of blocks in use
    and the pending watchers set by hand), make the call, and read what it did."""
    pool = pool_cls(num_gpu_blocks=N_OWN, enable_caching=case.caching)
    other = pool_cls(num_gpu_blocks=2)
    blocks = pool.blocks
    pool.get_new_blocks(N_OWN - 1)
    for b in case.keyed:
        pool.cache_blocks([blocks[b]], [f"k{b}"])
    pool.free_blocks([blocks[b] for b in case.free], evict_first=True)  # the front, in order
    for b in range(1, N_OWN):
        if b not in case.free:
            blocks[b].ref_cnt = case.ref[b]
    fired: list[int] = []
    funcs = {w: _Watcher(w, fired) for w in range(WATCHER + 1)}
    for i, b in enumerate(case.watched):
        blocks[b]._pending = (funcs[WATCHER],)
        blocks[b]._pending_order = i
    for i, (b, ws) in enumerate(case.pending.items()):
        blocks[b]._pending = tuple(funcs[w] for w in ws)
        blocks[b]._pending_order = i
    pool._next_pending_order = len(case.watched) + len(case.pending)
    ents = [
        other.blocks[1] if e == FOREIGN else other.blocks[0] if e == FOREIGN_NULL else blocks[e]
        for e in case.entries
    ]
    try:
        if case.method == "free_blocks":
            pool.free_blocks(ents, case.evict_first)
        elif case.method == "unpin_blocks":
            pool.unpin_blocks(ents, funcs[case.watcher])
        else:
            pool.get_new_blocks(case.num_blocks)
        error = None
    except Exception as exc:  # a broken class may raise anything
        kind = getattr(exc, "kind", None)
        error = kind.name if kind is not None else type(exc).__name__
    q = pool.free_block_queue
    walk: list[int] = []
    notes: list[str] = []
    node, prev = q.fake_free_list_head.next_free_block, q.fake_free_list_head
    while node is not None and node is not q.fake_free_list_tail and len(walk) <= N_OWN:
        if node.prev_free_block is not prev:
            notes.append(f"block {node.block_id}'s prev link does not mirror the walk")
        walk.append(node.block_id)
        prev, node = node, node.next_free_block
    if q.fake_free_list_tail.prev_free_block is not prev:
        notes.append("the tail's prev link is not the walk's last block")
    for blk in blocks:
        if blk.block_id not in walk and (blk.prev_free_block or blk.next_free_block):
            notes.append(f"block {blk.block_id} is outside the free queue but keeps a link")
    return HotObserved(
        error,
        {b: blocks[b].ref_cnt for b in range(N_OWN)},
        walk,
        q.num_free_blocks,
        [b for b in range(N_OWN) if blocks[b].block_hash is not None],
        fired,
        [b for b in range(N_OWN) if blocks[b]._pending is not None],
        notes,
        {
            b: tuple(getattr(f, "wid", -1) for f in blocks[b]._pending)
            for b in range(N_OWN)
            if blocks[b]._pending is not None
        },
        [blk.block_id for blk in pool._watched_blocks()],
    )


def replay(case: HotCase, pool_cls: type) -> str:
    """Run ``case`` on ``pool_cls``: "agrees" with the spec's step, or what differs."""
    want, got = expected(case), observe(case, pool_cls)
    for what in (
        "error",
        "ref",
        "free",
        "num_free",
        "keyed",
        "fired",
        "watched",
        "watchers",
        "order",
    ):
        g, w = getattr(got, what), getattr(want, what)
        if g != w:
            return f"{what}: {g}, the spec says {w}"
    if got.notes:
        return "; ".join(got.notes)
    return "agrees"
