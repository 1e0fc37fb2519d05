"""One z3 encoding of the spec's pool, read two ways.

The transition relation is written once, over a small array interface
(:class:`Dom`). :class:`Finite` reads it with a concrete pool size N: arrays
are Python lists of z3 terms and quantifiers over blocks become finite
conjunctions -- this is what bounded model checking unrolls and what the
differential tests evaluate on concrete states. :class:`Unbounded` reads the
same code with a symbolic N: arrays are z3 arrays built with lambdas, and the
quantifiers are real quantifiers -- this is what the inductive proofs use.

State (one pool; block 0 is the null block):

* ``ref[b]``, ``key[b]`` (0 = no key, keys are 1..K), ``kst[b]`` (when b took
  its key: the index's "oldest first" order), ``idx[k][b]`` (the cache index,
  kept apart from ``key`` so that INV-CACHE says something);
* the free queue ``q[0..L)``. ``q`` is a permutation of the non-null blocks
  over positions ``0..N-2``: the queue is its prefix of length ``L`` and the
  in-use blocks fill the rest in a ghost order; ``pos`` is its inverse. This
  ghost is the strengthening that makes INV-FREE and INV-CONSERVE inductive;
* ``pend[w][b]`` (watcher id w pending on b), ``wst[w][b]`` (registration
  order), ``bst[b]`` (the order blocks first got a pending watcher),
  ``reg[b]``/``fb[b]`` (ghost per-block registrations and firings) and the
  spec's global ``registered``/``fired`` counters (finite reading only);
* ``view[k]`` (a consumer's replay of the event log), ``nev`` (events not yet
  taken: TakeEvents is compared on the number of events; their keys are
  covered by ``view``).

Mutants are names in ``bugs``: each re-creates one bug of the catalogue in the
encoding (and :mod:`kvpool.proofs.mutants` re-creates it in the executable spec).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeAlias, TypeVar

import z3  # type: ignore[import-untyped]

from .rewrite import simplify

Term: TypeAlias = Any  # a z3 expression (ArithRef, BoolRef, ArrayRef) or a list of them
IntT: TypeAlias = Any  # an integer-sorted z3 term (Int or, in BMC, a bit-vector)
BoolT: TypeAlias = Any

OPS: tuple[str, ...] = (
    "GetNewBlocks",
    "FreeBlocks",
    "Touch",
    "UnpinBlocks",
    "CacheBlocks",
    "GetCachedBlock",
    "EvictBlocks",
    "ResetPrefixCache",
    "GetNumFreeBlocks",
    "GetUsage",
    "IsBlockWritable",
    "TakeEvents",
)
OPK: dict[str, int] = {name: i for i, name in enumerate(OPS)}

ERRORS: tuple[str, ...] = (
    "",
    "InsufficientFreeBlocks",
    "InvalidArgument",
    "RefCountUnderflow",
    "ForeignBlock",
    "NullBlockMisuse",
    "CachingDisabled",
    "AlreadyCached",
    "BlockNotInUse",
)
ERR: dict[str, int] = {name: i for i, name in enumerate(ERRORS)}


_WIDTH: list[int | None] = [None]


class int_sort:
    """Within ``with int_sort(w):`` the encoding's integers are w-bit bit-vectors (signed).

    ``None`` (the default) means mathematical integers, which every proof uses: bit-vectors
    were measured (N=6, k=3) and were slower than linear arithmetic for this encoding
    (sums of counters bit-blast badly). The switch stays so that the comparison can be re-run.
    """

    def __init__(self, width: int | None) -> None:
        self.width = width

    def __enter__(self) -> None:
        self.saved = _WIDTH[0]
        _WIDTH[0] = self.width

    def __exit__(self, *exc: object) -> None:
        _WIDTH[0] = self.saved


def iv(x: int) -> IntT:
    w = _WIDTH[0]
    return z3.BitVecVal(x, w) if w else z3.IntVal(x)


def mkint(name: str) -> IntT:
    w = _WIDTH[0]
    return z3.BitVec(name, w) if w else z3.Int(name)


def isort() -> z3.SortRef:
    w = _WIDTH[0]
    return z3.BitVecSort(w) if w else z3.IntSort()


def to_int(v: Any) -> int:
    """A model value of an encoded integer, as a Python int."""
    if z3.is_bv_value(v):
        return int(v.as_signed_long())
    return int(v.as_long())


# -- the two readings of "an array over blocks" --------------------------------------------


class Dom:
    """Arrays indexed by block ids or queue positions, and quantifiers over ranges of them."""

    N: Any

    def sel(self, a: Term, i: Any) -> Any:
        raise NotImplementedError

    def mk(self, f: Callable[[Any], Any], sort: z3.SortRef) -> Term:
        raise NotImplementedError

    def forall(self, lo: Any, hi: Any, f: Callable[[Any], BoolT]) -> BoolT:
        raise NotImplementedError

    def exists(self, lo: Any, hi: Any, f: Callable[[Any], BoolT]) -> BoolT:
        raise NotImplementedError

    def sum(self, lo: Any, hi: Any, f: Callable[[Any], IntT]) -> IntT | None:
        raise NotImplementedError

    def fresh(self, name: str, sort: z3.SortRef) -> Term:
        raise NotImplementedError

    def eq(self, a: Term, b: Term) -> BoolT:
        raise NotImplementedError

    def ite(self, c: BoolT, a: Term, b: Term) -> Term:
        raise NotImplementedError

    def store(self, a: Term, i: Any, v: Any, sort: z3.SortRef) -> Term:
        return self.mk(lambda j: z3.If(j == i, v, self.sel(a, j)), sort)


class Finite(Dom):
    """A concrete N: arrays are lists of N terms, quantifiers are finite."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError("N must be >= 1")
        self.n = n
        self.N = iv(n)

    def sel(self, a: Term, i: Any) -> Any:
        if isinstance(i, int):
            return a[i]
        i = simplify(i)
        if z3.is_int_value(i) or z3.is_bv_value(i):
            k = to_int(i)
            return a[k] if 0 <= k < len(a) else a[-1]
        out = a[-1]
        for j in range(len(a) - 2, -1, -1):
            out = z3.If(i == j, a[j], out)
        return out

    def mk(self, f: Callable[[Any], Any], sort: z3.SortRef) -> Term:
        return [simplify(f(iv(j))) for j in range(self.n)]

    def _range(self, lo: Any, hi: Any, f: Callable[[Any], BoolT]) -> list[BoolT]:
        out = []
        for j in range(self.n):
            g = simplify(z3.And(iv(j) >= lo, iv(j) < hi))
            if z3.is_false(g):
                continue
            out.append((g, f(iv(j))))
        return out

    def forall(self, lo: Any, hi: Any, f: Callable[[Any], BoolT]) -> BoolT:
        return z3.And([z3.Implies(g, x) for g, x in self._range(lo, hi, f)] + [z3.BoolVal(True)])

    def exists(self, lo: Any, hi: Any, f: Callable[[Any], BoolT]) -> BoolT:
        return z3.Or([z3.And(g, x) for g, x in self._range(lo, hi, f)] + [z3.BoolVal(False)])

    def sum(self, lo: Any, hi: Any, f: Callable[[Any], IntT]) -> IntT | None:
        return z3.Sum([z3.If(g, x, iv(0)) for g, x in self._range(lo, hi, f)] + [iv(0)])

    def fresh(self, name: str, sort: z3.SortRef) -> Term:
        srt = isort() if isinstance(sort, str) else sort
        return [z3.Const(f"{name}_{j}", srt) for j in range(self.n)]

    def eq(self, a: Term, b: Term) -> BoolT:
        return z3.And([x == y for x, y in zip(a, b, strict=True)])

    def ite(self, c: BoolT, a: Term, b: Term) -> Term:
        return [z3.If(c, x, y) for x, y in zip(a, b, strict=True)]


class Unbounded(Dom):
    """A symbolic N: arrays are z3 arrays (lambdas), quantifiers are quantifiers."""

    def __init__(self, n: IntT | None = None) -> None:
        self.N = n if n is not None else z3.Int("N")
        self._k = 0

    def _var(self) -> IntT:
        self._k += 1
        return mkint(f"i!{self._k}")

    def sel(self, a: Term, i: Any) -> Any:
        return z3.Select(a, i)

    def mk(self, f: Callable[[Any], Any], sort: z3.SortRef) -> Term:
        i = self._var()
        return z3.Lambda([i], f(i))

    def forall(self, lo: Any, hi: Any, f: Callable[[Any], BoolT]) -> BoolT:
        i = self._var()
        return z3.ForAll([i], z3.Implies(z3.And(i >= lo, i < hi), f(i)))

    def exists(self, lo: Any, hi: Any, f: Callable[[Any], BoolT]) -> BoolT:
        i = self._var()
        return z3.Exists([i], z3.And(i >= lo, i < hi, f(i)))

    def sum(self, lo: Any, hi: Any, f: Callable[[Any], IntT]) -> IntT | None:
        return None  # no sums over a symbolic range: the per-block ghosts stand in

    def fresh(self, name: str, sort: z3.SortRef) -> Term:
        return z3.Array(name, z3.IntSort(), z3.IntSort() if isinstance(sort, str) else sort)

    def eq(self, a: Term, b: Term) -> BoolT:
        return a == b

    def ite(self, c: BoolT, a: Term, b: Term) -> Term:
        return z3.If(c, a, b)


# -- state, operation, result -------------------------------------------------------------

I: Any = "int"  # the encoding's integer sort, resolved by isort()  # noqa: RUF100, E741, RUF009, RUF005
B = z3.BoolSort()


@dataclass
class State:
    ref: Term
    key: Term
    kst: Term
    idx: list[Term]  # per key 1..K
    pend: list[Term]  # per watcher id 0..W-1
    wst: list[Term]
    bst: Term
    reg: Term
    fb: Term
    q: Term
    pos: Term
    inq: Term
    L: IntT
    lo: IntT
    hi: IntT
    clock: IntT
    view: list[BoolT]
    nev: IntT
    registered: IntT | None
    fired: IntT | None
    hist: Any = None
    """With ``Config.seq_log`` (the finite reading): every event ever logged, in order, as a
    z3 sequence of :data:`EVENT` (the event log from the start)."""
    taken: IntT | None = None
    """With ``Config.seq_log``: how many events of ``hist`` ``take_events`` has returned;
    the log (what the next ``take_events`` returns) is ``hist[taken:]``."""


ARRAY_FIELDS = {
    "ref": I,
    "key": I,
    "kst": I,
    "bst": I,
    "reg": I,
    "fb": I,
    "q": I,
    "pos": I,
    "inq": B,
}


@dataclass
class Args:
    kind: IntT
    n: IntT
    m: IntT
    e: list[IntT]
    ef: BoolT
    w: IntT
    km: IntT
    ks: list[IntT]
    qk: IntT
    ib: IntT


@dataclass
class Result:
    err: IntT
    value: IntT
    usage: Any
    ret: Term  # GetNewBlocks: the blocks handed out, by position
    fire: list[Term]  # fire[w][b]: watcher w fired for block b
    fire_key: Term  # per block: the order blocks' watchers fire in
    events: Any = None  # with seq_log: the events TakeEvents returns, in order
    at_fire: State | None = None
    """The state the call's watchers run on (the firing point): a watcher may call back
    into the pool, so each firing is a nested operation applied to this state."""


@dataclass
class Config:
    dom: Dom
    K: int = 2  # keys 1..K
    W: int = 2  # watcher ids 0..W-1
    M: int = 2  # entries per block list
    caching: BoolT = z3.BoolVal(True)  # noqa: RUF100, E741, RUF009, RUF005
    events: BoolT = z3.BoolVal(True)  # noqa: RUF100, E741, RUF009, RUF005
    bugs: frozenset[str] = frozenset()
    seq_log: bool = False
    """Model the event log as a sequence (``State.hist``/``taken``; finite reading only)."""


# -- the event log as a sequence ----------------------------------------------------------


def _event_sort(M: int) -> z3.DatatypeSortRef:
    ev = z3.Datatype(f"Event{M}")
    # BlockStored(keys): the call's keys in order in s0..s{M-1}, 0 past the last one
    ev.declare("stored", *[(f"s{j}", z3.IntSort()) for j in range(M)])
    ev.declare("removed", ("rk", z3.IntSort()))
    ev.declare("cleared")
    return ev.create()


_EVENTS: dict[int, z3.DatatypeSortRef] = {}


def event_sort(M: int) -> z3.DatatypeSortRef:
    """The events of the encoding (keys are 1..K, as everywhere in it), per list size M."""
    if M not in _EVENTS:
        _EVENTS[M] = _event_sort(M)
    return _EVENTS[M]


def ev_stored(cfg: Config, ks: Sequence[Any], m: Any) -> Any:
    ev = event_sort(cfg.M)
    return ev.stored(*[z3.If(j < m, ks[j], 0) for j in range(cfg.M)])


def ev_mentions(cfg: Config, e: Any, k: Any) -> BoolT:
    """Replaying ``e`` decides whether ``k`` is servable (spec.events.apply_event)."""
    ev = event_sort(cfg.M)
    fields_ = [getattr(ev, f"s{j}")(e) == k for j in range(cfg.M)]
    return z3.Or(
        z3.And(ev.is_stored(e), z3.Or(fields_)),
        z3.And(ev.is_removed(e), ev.rk(e) == k),
        ev.is_cleared(e),
    )


def replay_key(cfg: Config, hist: Any, k: int) -> BoolT:
    """Key ``k`` is in the set a consumer holds after replaying ``hist`` from the start:
    a left fold of spec.events.apply_event, key by key (the last event about k decides)."""
    return _fold(cfg, k, z3.BoolVal(False), hist)


def _apply(cfg: Config, k: int, acc: BoolT, e: Any) -> BoolT:
    return z3.If(ev_mentions(cfg, e, iv(k)), event_sort(cfg.M).is_stored(e), acc)


def _fold(cfg: Config, k: int, acc: BoolT, h: Any) -> BoolT:
    """``foldl(apply, acc, h)``, unfolded by its definition over the shape of the term
    ``h`` (a concatenation folds part after part, an ``If`` folds each branch, a unit is
    one application): what a step appends is then plain terms, and only the log the step
    started from stays a ``seq.foldl`` (the same term as in the hypothesis)."""
    if z3.is_app_of(h, z3.Z3_OP_SEQ_CONCAT):
        for part in h.children():
            acc = _fold(cfg, k, acc, part)
        return acc
    if z3.is_app_of(h, z3.Z3_OP_ITE):
        c, x, y = h.children()
        return z3.If(c, _fold(cfg, k, acc, x), _fold(cfg, k, acc, y))
    if z3.is_app_of(h, z3.Z3_OP_SEQ_UNIT):
        return _apply(cfg, k, acc, h.arg(0))
    if z3.is_app_of(h, z3.Z3_OP_SEQ_EMPTY):
        return acc
    ev = event_sort(cfg.M)
    a, e = z3.Bool("acc!"), z3.Const("ev!", ev)
    # The folded function is a named function applied, not its body: fixedn's cases
    # simplify their goals, and a goal's fold must stay the very term of the hypothesis's
    # (a lambda's body may be rewritten by simplify, differently as term ids differ, and
    # two folds of equal but distinct functions need induction to be shown equal).
    return z3.SeqFoldLeft(z3.Lambda([a, e], _step_fn(cfg, k)(a, e)), acc, h)


_STEP_FNS: dict[tuple[int, int], Any] = {}


def _step_fn(cfg: Config, k: int) -> Any:
    """``apply_event`` for key ``k``, as a z3 function defined once (per M and k)."""
    if (cfg.M, k) not in _STEP_FNS:
        ev = event_sort(cfg.M)
        f = z3.RecFunction(f"replay{cfg.M}_{k}", z3.BoolSort(), ev, z3.BoolSort())
        a, e = z3.Bool("acc!"), z3.Const("ev!", ev)
        z3.RecAddDefinition(f, [a, e], _apply(cfg, k, a, e))
        _STEP_FNS[cfg.M, k] = f
    return _STEP_FNS[cfg.M, k]


def log_push(cfg: Config, s: State, c: BoolT, e: Any) -> State:
    """``e`` logged at the end of the log where ``c`` holds (nothing without seq_log)."""
    if s.hist is None:
        return s
    nothing = z3.Empty(s.hist.sort())
    return replace(s, hist=z3.Concat(s.hist, z3.If(c, z3.Unit(e), nothing)))


def fresh_state(cfg: Config, name: str, globals_: bool = True) -> State:
    d = cfg.dom
    return State(
        ref=d.fresh(f"{name}.ref", I),
        key=d.fresh(f"{name}.key", I),
        kst=d.fresh(f"{name}.kst", I),
        idx=[d.fresh(f"{name}.idx{k}", B) for k in range(1, cfg.K + 1)],
        pend=[d.fresh(f"{name}.pend{w}", B) for w in range(cfg.W)],
        wst=[d.fresh(f"{name}.wst{w}", I) for w in range(cfg.W)],
        bst=d.fresh(f"{name}.bst", I),
        reg=d.fresh(f"{name}.reg", I),
        fb=d.fresh(f"{name}.fb", I),
        q=d.fresh(f"{name}.q", I),
        pos=d.fresh(f"{name}.pos", I),
        inq=d.fresh(f"{name}.inq", B),
        L=mkint(f"{name}.L"),
        lo=mkint(f"{name}.lo"),
        hi=mkint(f"{name}.hi"),
        clock=mkint(f"{name}.clock"),
        view=[z3.Bool(f"{name}.view{k}") for k in range(1, cfg.K + 1)],
        nev=mkint(f"{name}.nev"),
        registered=mkint(f"{name}.registered") if globals_ else None,
        fired=mkint(f"{name}.fired") if globals_ else None,
        hist=z3.Const(f"{name}.hist", z3.SeqSort(event_sort(cfg.M))) if cfg.seq_log else None,
        taken=mkint(f"{name}.taken") if cfg.seq_log else None,
    )


def fresh_args(cfg: Config, name: str) -> Args:
    return Args(
        kind=mkint(f"{name}.kind"),
        n=mkint(f"{name}.n"),
        m=mkint(f"{name}.m"),
        e=[mkint(f"{name}.e{j}") for j in range(cfg.M)],
        ef=z3.Bool(f"{name}.ef"),
        w=mkint(f"{name}.w"),
        km=mkint(f"{name}.km"),
        ks=[mkint(f"{name}.k{j}") for j in range(cfg.M)],
        qk=mkint(f"{name}.qk"),
        ib=mkint(f"{name}.ib"),
    )


def args_domain(cfg: Config, a: Args) -> BoolT:
    """The operations the encoding ranges over (entry N stands for an id that is not a block)."""
    N = cfg.dom.N
    c = [
        a.kind >= 0,
        a.kind < len(OPS),
        a.n >= -1,
        a.n <= N,
        a.m >= 0,
        a.m <= cfg.M,
        a.km >= 0,
        a.km <= cfg.M,
        a.w >= 0,
        a.w < cfg.W,
        a.qk >= 1,
        a.qk <= cfg.K,
        a.ib >= 0,
        a.ib <= N,
    ]
    for j in range(cfg.M):
        c += [a.e[j] >= 0, a.e[j] <= N, a.ks[j] >= 1, a.ks[j] <= cfg.K]
    return z3.And(c)


def state_fields(s: State) -> list[tuple[str, Term]]:
    return [(f.name, getattr(s, f.name)) for f in fields(s)]


def merge(d: Dom, c: BoolT, a: State, b: State) -> State:
    """``a`` where ``c`` holds, else ``b``."""
    out: dict[str, Any] = {}
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if x is None:
            out[f.name] = None
        elif f.name in ("idx", "pend", "wst"):
            out[f.name] = [d.ite(c, u, v) for u, v in zip(x, y, strict=True)]
        elif f.name == "view":
            out[f.name] = [z3.If(c, u, v) for u, v in zip(x, y, strict=True)]
        elif f.name in ARRAY_FIELDS:
            out[f.name] = d.ite(c, x, y)
        else:
            out[f.name] = z3.If(c, x, y)
    return State(**out)


def state_eq(d: Dom, a: State, b: State) -> BoolT:
    c: list[BoolT] = []
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if x is None:
            continue
        if f.name in ("idx", "pend", "wst"):
            c += [d.eq(u, v) for u, v in zip(x, y, strict=True)]
        elif f.name == "view":
            c += [u == v for u, v in zip(x, y, strict=True)]
        elif f.name in ARRAY_FIELDS:
            c.append(d.eq(x, y))
        else:
            c.append(x == y)
    return z3.And(c)


def initial(cfg: Config) -> State:
    """The pool as built: every non-null block free, in id order."""
    d = cfg.dom
    N = d.N
    zero = d.mk(lambda b: iv(0), I)
    no = d.mk(lambda b: z3.BoolVal(False), B)
    globals_ = isinstance(d, Finite)
    return State(
        ref=zero,
        key=zero,
        kst=zero,
        idx=[no for _ in range(cfg.K)],
        pend=[no for _ in range(cfg.W)],
        wst=[zero for _ in range(cfg.W)],
        bst=zero,
        reg=zero,
        fb=zero,
        q=d.mk(lambda i: i + 1, I),
        pos=d.mk(lambda b: b - 1, I),
        inq=d.mk(lambda b: b >= 1, B),
        L=N - 1,
        lo=iv(0),
        hi=N - 2,
        clock=iv(0),
        view=[z3.BoolVal(False) for _ in range(cfg.K)],
        nev=iv(0),
        registered=iv(0) if globals_ else None,
        fired=iv(0) if globals_ else None,
        hist=z3.Empty(z3.SeqSort(event_sort(cfg.M))) if cfg.seq_log else None,
        taken=iv(0) if cfg.seq_log else None,
    )


# -- the queue's elementary moves (on q, pos, L) ---------------------------------------------


def _is_block(d: Dom, b: Any) -> BoolT:
    return z3.And(b >= 1, b < d.N)


# In the finite reading the queue is kept as the spec's ordered set is: a membership
# flag ``inq[b]`` and an order key ``pos[b]`` (smaller is nearer the front; prepending
# takes ``lo - 1``, appending ``hi + 1``). Every move is then local to the blocks it
# moves, which bit-level and arithmetic solvers alike handle far better than shifting
# a position array. The unbounded reading keeps the permutation ``q``/``pos``.


def positions(d: Dom, s: State) -> Term:
    """Per block: its position in the queue (meaningful for blocks in the queue)."""
    if not isinstance(d, Finite):
        return s.pos
    out = []
    for b in range(d.n):
        out.append(
            z3.Sum(
                [
                    z3.If(z3.And(s.inq[c], s.pos[c] < s.pos[b]), iv(1), iv(0))
                    for c in range(d.n)
                    if c != b
                ]
                + [iv(0)]
            )
        )
    return out


def in_queue(d: Dom, s: State, b: Any) -> BoolT:
    if isinstance(d, Finite):
        return d.sel(s.inq, b)
    p = d.sel(s.pos, b)
    return z3.And(p >= 0, p < s.L)


def at(d: Dom, s: State, i: Any, ps: Term | None = None) -> Any:
    """The block at queue position ``i`` (-1 if none, finite reading)."""
    if not isinstance(d, Finite):
        return d.sel(s.q, i)
    ps = positions(d, s) if ps is None else ps
    out: Any = iv(-1)
    for b in range(d.n - 1, -1, -1):
        out = z3.If(z3.And(s.inq[b], ps[b] == i), iv(b), out)
    return out


def q_take_front(d: Dom, s: State, n: IntT, lifo: bool) -> State:
    """The first ``n`` of the queue leave it (rotated into the in-use part)."""
    L = s.L
    if isinstance(d, Finite):
        ps = positions(d, s)
        taken = [z3.And(s.inq[b], ps[b] >= L - n if lifo else ps[b] < n) for b in range(d.n)]
        inq = [z3.And(s.inq[b], z3.Not(taken[b])) for b in range(d.n)]
        return replace(s, inq=inq, L=L - n)
    if lifo:  # bug: the last n leave; they already sit at the end of the prefix
        return replace(s, L=L - n)
    q = d.mk(
        lambda i: z3.If(
            i < L - n, d.sel(s.q, i + n), z3.If(i < L, d.sel(s.q, i - (L - n)), d.sel(s.q, i))
        ),
        I,
    )

    def npos(b: Any) -> Any:
        p = d.sel(s.pos, b)
        return z3.If(p < n, p + L - n, z3.If(p < L, p - n, p))

    return replace(s, q=q, pos=d.mk(npos, I), L=L - n)


def q_remove(d: Dom, s: State, x: Any) -> State:
    """Block ``x`` (in the queue) leaves it; the blocks behind it move up."""
    L = s.L
    if isinstance(d, Finite):
        return replace(s, inq=d.store(s.inq, x, z3.BoolVal(False), B), L=L - 1)
    p = d.sel(s.pos, x)
    q = d.mk(
        lambda i: z3.If(
            i == L - 1, x, z3.If(z3.And(p <= i, i < L - 1), d.sel(s.q, i + 1), d.sel(s.q, i))
        ),
        I,
    )

    def npos(b: Any) -> Any:
        pb = d.sel(s.pos, b)
        return z3.If(b == x, L - 1, z3.If(z3.And(p < pb, pb < L), pb - 1, pb))

    return replace(s, q=q, pos=d.mk(npos, I), L=L - 1)


def q_append(d: Dom, s: State, x: Any) -> State:
    """Block ``x`` (in use) joins at the back."""
    L = s.L
    if isinstance(d, Finite):
        return replace(
            s,
            inq=d.store(s.inq, x, z3.BoolVal(True), B),
            pos=d.store(s.pos, x, s.hi + 1, I),
            hi=s.hi + 1,
            L=L + 1,
        )
    p = d.sel(s.pos, x)
    y = d.sel(s.q, L)
    q = d.mk(lambda i: z3.If(i == L, x, z3.If(i == p, y, d.sel(s.q, i))), I)
    pos = d.mk(lambda b: z3.If(b == x, L, z3.If(b == y, p, d.sel(s.pos, b))), I)
    return replace(s, q=q, pos=pos, L=L + 1)


def q_prepend(d: Dom, s: State, x: Any) -> State:
    """Block ``x`` (in use) joins at the front."""
    L = s.L
    if isinstance(d, Finite):
        return replace(
            s,
            inq=d.store(s.inq, x, z3.BoolVal(True), B),
            pos=d.store(s.pos, x, s.lo - 1, I),
            lo=s.lo - 1,
            L=L + 1,
        )
    p = d.sel(s.pos, x)
    y = d.sel(s.q, L)
    q = d.mk(
        lambda i: z3.If(
            i == 0, x, z3.If(i <= L, d.sel(s.q, i - 1), z3.If(i == p, y, d.sel(s.q, i)))
        ),
        I,
    )

    def npos(b: Any) -> Any:
        pb = d.sel(s.pos, b)
        return z3.If(b == x, 0, z3.If(pb < L, pb + 1, z3.If(b == y, p, pb)))

    return replace(s, q=q, pos=d.mk(npos, I), L=L + 1)


def guarded(d: Dom, c: BoolT, f: Callable[[State], State], s: State) -> State:
    return merge(d, c, f(s), s)


# -- keys and events ------------------------------------------------------------------------


def _holder_left(cfg: Config, idx_k: Term) -> BoolT:
    d = cfg.dom
    return d.exists(1, d.N, lambda b: d.sel(idx_k, b))


def drop_keys(cfg: Config, s: State, dropping: Callable[[Any], BoolT]) -> State:
    """Every block where ``dropping`` holds forgets its key (all at once: get_new_blocks)."""
    d = cfg.dom
    key = d.mk(lambda b: z3.If(dropping(b), iv(0), d.sel(s.key, b)), I)
    idx = []
    view = []
    nev = s.nev
    for k in range(1, cfg.K + 1):
        old = s.idx[k - 1]
        new = d.mk(
            lambda b, old=old, k=k: z3.And(  # type: ignore[misc]
                d.sel(old, b), z3.Not(z3.And(dropping(b), d.sel(s.key, b) == k))
            ),
            B,
        )
        idx.append(new)
        dropped = d.exists(1, d.N, lambda b, k=k: z3.And(dropping(b), d.sel(s.key, b) == k))  # type: ignore[misc]
        if "removed-per-block" in cfg.bugs:
            gone = dropped
        else:
            gone = z3.And(dropped, z3.Not(_holder_left(cfg, new)))
        log = z3.And(cfg.events, gone)
        view.append(z3.And(s.view[k - 1], z3.Not(log)))
        nev = nev + z3.If(log, iv(1), iv(0))
    return replace(s, key=key, idx=idx, view=view, nev=nev)


def _log_handout(cfg: Config, s: State, t: State, ret: Term, n: IntT) -> State:
    """get_new_blocks' BlockRemoved events, in hand-out order: block ``ret[i]`` announces
    its key when it is the last block holding it (no later block handed out holds it, and
    no block keeps it)."""
    d = cfg.dom
    ev = event_sort(cfg.M)
    size: int = d.n  # type: ignore[attr-defined]
    keys = [d.sel(s.key, d.sel(ret, i)) for i in range(size)]
    for i in range(size):
        kx = keys[i]
        later = z3.Or([z3.And(j < n, keys[j] == kx) for j in range(i + 1, size)] + [False])
        left = z3.Or(
            [z3.And(kx == k, _holder_left(cfg, t.idx[k - 1])) for k in range(1, cfg.K + 1)]
        )
        if "removed-per-block" in cfg.bugs:  # (as its view and count: one per key)
            left = z3.BoolVal(False)
        emit = z3.And(cfg.events, i < n, kx != 0, z3.Not(later), z3.Not(left))
        t = log_push(cfg, t, emit, ev.removed(kx))
    return t


def drop_key(cfg: Config, s: State, x: Any, evict: bool) -> State:
    """Block ``x`` forgets its key; the key is announced removed if x was its last holder."""
    d = cfg.dom
    kx = d.sel(s.key, x)
    key = d.store(s.key, x, iv(0), I)
    idx = []
    view = []
    logs: list[BoolT] = []
    nev = s.nev
    for k in range(1, cfg.K + 1):
        old = s.idx[k - 1]
        if evict and "evict-keeps-index" in cfg.bugs:
            new = old
        else:
            new = d.mk(
                lambda b, old=old, k=k: z3.And(  # type: ignore[misc]
                    d.sel(old, b), z3.Not(z3.And(b == x, kx == k))
                ),
                B,
            )
        idx.append(new)
        if "removed-per-block" in cfg.bugs:
            gone = kx == k
        else:
            gone = z3.And(kx == k, z3.Not(_holder_left(cfg, new)))
        log = z3.And(cfg.events, gone)
        view.append(z3.And(s.view[k - 1], z3.Not(log)))
        nev = nev + z3.If(log, iv(1), iv(0))
        logs.append(log)
    t = replace(s, key=key, idx=idx, view=view, nev=nev)
    if evict and "event-dropped" in cfg.bugs:  # the mutant: counted and replayed, not logged
        return t
    return log_push(cfg, t, z3.Or(logs), event_sort(cfg.M).removed(kx))


# -- the transition -------------------------------------------------------------------------


def _first_error(checks: Sequence[tuple[BoolT, int]]) -> IntT:
    """The error of the first failing check, 0 if none fails."""
    out: IntT = iv(0)
    for cond, code in reversed(checks):
        out = z3.If(cond, iv(code), out)
    return out


def _entries_error(cfg: Config, a: Args, null_refused: bool, ids: list[IntT]) -> IntT:
    N = cfg.dom.N
    out: IntT = iv(0)
    for j in reversed(range(cfg.M)):
        e = ids[j]
        here: IntT = z3.If(e >= N, iv(ERR["InvalidArgument"]), iv(0))
        if null_refused:
            here = z3.If(e >= N, here, z3.If(e == 0, iv(ERR["NullBlockMisuse"]), iv(0)))
        out = z3.If(z3.And(j < a.m, here != 0), here, out)
    return out


def _underflow(cfg: Config, s: State, a: Args) -> BoolT:
    """Some block is listed more often than its ref_cnt (null entries are skipped)."""
    d = cfg.dom
    bad = []
    for j in range(cfg.M):
        ej = a.e[j]
        cnt = z3.Sum([z3.If(z3.And(i < a.m, a.e[i] == ej), iv(1), iv(0)) for i in range(cfg.M)])
        bad.append(z3.And(j < a.m, ej != 0, d.sel(s.ref, ej) < cnt))
    return z3.Or(bad)


def _pending_any(cfg: Config, s: State, b: Any) -> BoolT:
    return z3.Or([cfg.dom.sel(p, b) for p in s.pend])


def _pending_count(cfg: Config, s: State, b: Any) -> IntT:
    return z3.Sum([z3.If(cfg.dom.sel(p, b), iv(1), iv(0)) for p in s.pend])


def op_get_new_blocks(cfg: Config, s: State, a: Args) -> tuple[State, IntT, Result]:
    d = cfg.dom
    n = a.n
    err = z3.If(
        n < 0, iv(ERR["InvalidArgument"]), z3.If(n > s.L, iv(ERR["InsufficientFreeBlocks"]), iv(0))
    )
    lifo = "lifo-handout" in cfg.bugs

    ps = positions(d, s)

    def taken(b: Any) -> BoolT:
        p = d.sel(ps, b)
        inside = z3.And(_is_block(d, b), in_queue(d, s, b))
        if lifo:
            return z3.And(inside, p >= s.L - n, p < s.L)
        return z3.And(inside, p >= 0, p < n)

    ret = d.mk(lambda i: z3.If(i < n, at(d, s, (s.L - 1 - i) if lifo else i, ps), iv(-1)), I)
    t = q_take_front(d, s, n, lifo)
    t = drop_keys(cfg, t, taken)
    if t.hist is not None:
        t = _log_handout(cfg, s, t, ret, n)
    t = replace(t, ref=d.mk(lambda b: z3.If(taken(b), iv(1), d.sel(s.ref, b)), I))
    fire = [d.mk(lambda b, p=p: z3.And(taken(b), d.sel(p, b)), B) for p in s.pend]  # type: ignore[misc]
    kept = "watcher-kept" in cfg.bugs
    pend = (
        s.pend
        if kept
        else [d.mk(lambda b, p=p: z3.And(z3.Not(taken(b)), d.sel(p, b)), B) for p in s.pend]  # type: ignore[misc]
    )
    fb = d.mk(lambda b: d.sel(s.fb, b) + z3.If(taken(b), _pending_count(cfg, s, b), iv(0)), I)
    fired = s.fired
    if fired is not None:
        total = d.sum(1, d.N, lambda b: z3.If(taken(b), _pending_count(cfg, s, b), iv(0)))
        fired = fired + total
    t = replace(t, pend=pend, fb=fb, fired=fired)
    res = Result(err, n, None, ret, fire, ps)
    return t, err, res


def op_free_blocks(cfg: Config, s: State, a: Args) -> tuple[State, IntT]:
    d = cfg.dom
    ierr = _entries_error(cfg, a, False, a.e)
    uf = z3.BoolVal(False) if "no-underflow-check" in cfg.bugs else _underflow(cfg, s, a)
    err = z3.If(ierr != 0, ierr, z3.If(uf, iv(ERR["RefCountUnderflow"]), iv(0)))
    t = s
    front: list[tuple[BoolT, IntT]] = []
    back: list[tuple[BoolT, IntT]] = []
    ef = z3.BoolVal(False) if "evict-first-ignored" in cfg.bugs else a.ef
    for j in range(cfg.M):
        x = a.e[j]
        live = z3.And(j < a.m, x != 0)
        r = d.sel(t.ref, x) - 1
        t = replace(t, ref=d.ite(live, d.store(t.ref, x, r, I), t.ref))
        zero = z3.And(live, r == 0)
        to_front = z3.Or(d.sel(t.key, x) == 0, z3.Not(cfg.caching), ef)
        front.append((z3.And(zero, to_front), x))
        back.append((z3.And(zero, z3.Not(to_front)), x))
    order = front if "front-reversed" in cfg.bugs else list(reversed(front))
    for c, x in order:
        t = guarded(d, c, lambda u, x=x: q_prepend(d, u, x), t)  # type: ignore[misc]
    for c, x in back:
        t = guarded(d, c, lambda u, x=x: q_append(d, u, x), t)  # type: ignore[misc]
    return t, err


def op_touch(cfg: Config, s: State, a: Args) -> tuple[State, IntT]:
    d = cfg.dom
    err = _entries_error(cfg, a, False, a.e)
    t = s
    for j in range(cfg.M):
        x = a.e[j]
        live = z3.And(j < a.m, x != 0) if "touch-null" not in cfg.bugs else j < a.m
        r = d.sel(t.ref, x)
        if "touch-no-remove" not in cfg.bugs:
            t = guarded(d, z3.And(live, r == 0, x != 0), lambda u, x=x: q_remove(d, u, x), t)  # type: ignore[misc]
        t = replace(t, ref=d.ite(live, d.store(t.ref, x, r + 1, I), t.ref))
    return t, err


def op_unpin_blocks(cfg: Config, s: State, a: Args) -> tuple[State, IntT]:
    d = cfg.dom
    ierr = _entries_error(cfg, a, True, a.e)
    err = z3.If(ierr != 0, ierr, z3.If(_underflow(cfg, s, a), iv(ERR["RefCountUnderflow"]), iv(0)))
    t = s
    released: list[tuple[BoolT, IntT]] = []
    for j in range(cfg.M):
        x = a.e[j]
        live = j < a.m
        r = d.sel(t.ref, x) - 1
        t = replace(t, ref=d.ite(live, d.store(t.ref, x, r, I), t.ref))
        already = z3.Or([z3.And(a.w == w, d.sel(t.pend[w], x)) for w in range(cfg.W)])
        if "unpin-dup-watcher" in cfg.bugs:
            already = z3.BoolVal(False)
        new = z3.And(live, z3.Not(already))
        first = z3.Not(_pending_any(cfg, t, x))
        pend = [
            d.ite(z3.And(new, a.w == w), d.store(t.pend[w], x, z3.BoolVal(True), B), t.pend[w])
            for w in range(cfg.W)
        ]
        wst = [
            d.ite(
                z3.And(new, a.w == w, z3.Not(d.sel(t.pend[w], x))),
                d.store(t.wst[w], x, t.clock, I),
                t.wst[w],
            )
            for w in range(cfg.W)
        ]
        bst = d.ite(z3.And(live, first), d.store(t.bst, x, t.clock, I), t.bst)
        reg = d.ite(new, d.store(t.reg, x, d.sel(t.reg, x) + 1, I), t.reg)
        registered = None if t.registered is None else t.registered + z3.If(new, iv(1), iv(0))
        t = replace(
            t, pend=pend, wst=wst, bst=bst, reg=reg, registered=registered, clock=t.clock + 1
        )
        if "unpin-append-always" in cfg.bugs:
            released.append((live, x))
        else:
            released.append((z3.And(live, r == 0), x))
    if "unpin-reversed" in cfg.bugs:  # the mutant: released blocks queued last first
        released.reverse()
    for c, x in released:
        t = guarded(d, c, lambda u, x=x: q_append(d, u, x), t)  # type: ignore[misc]
    return t, err


def op_cache_blocks(cfg: Config, s: State, a: Args) -> tuple[State, IntT]:
    d = cfg.dom
    checks: list[tuple[BoolT, int]] = [(a.m != a.km, ERR["InvalidArgument"])]
    if "cache-when-off" not in cfg.bugs:
        checks.append((z3.Not(cfg.caching), ERR["CachingDisabled"]))
    eerr = _entries_error(cfg, a, True, a.e)
    per: IntT = iv(0)
    for j in reversed(range(cfg.M)):
        x = a.e[j]
        dup = z3.Or([a.e[i] == x for i in range(j)] + [z3.BoolVal(False)])
        here = z3.If(
            d.sel(s.ref, x) < 1,
            iv(ERR["BlockNotInUse"]),
            z3.If(
                d.sel(s.key, x) != 0,
                iv(ERR["AlreadyCached"]),
                z3.If(dup, iv(ERR["InvalidArgument"]), iv(0)),
            ),
        )
        per = z3.If(z3.And(j < a.m, here != 0), here, per)
    err = _first_error(checks)
    err = z3.If(err != 0, err, z3.If(eerr != 0, eerr, per))
    t = s
    for j in range(cfg.M):
        x, k = a.e[j], a.ks[j]
        live = j < a.m
        key = d.store(t.key, x, k, I)
        kst = d.store(t.kst, x, t.clock, I)
        idx = t.idx
        if "cache-skips-index" not in cfg.bugs:
            idx = [
                d.ite(k == kk, d.store(t.idx[kk - 1], x, z3.BoolVal(True), B), t.idx[kk - 1])
                for kk in range(1, cfg.K + 1)
            ]
        t = merge(d, live, replace(t, key=key, kst=kst, idx=idx, clock=t.clock + 1), t)
    logs = z3.And(cfg.events, a.m > 0)
    view = list(t.view)
    if "stored-event-missing" not in cfg.bugs:
        for kk in range(1, cfg.K + 1):
            hit = z3.Or([z3.And(j < a.m, a.ks[j] == kk) for j in range(cfg.M)])
            view[kk - 1] = z3.Or(view[kk - 1], z3.And(logs, hit))
        t = replace(t, view=view, nev=t.nev + z3.If(logs, iv(1), iv(0)))
        e = ev_stored(cfg, a.ks, a.m)
        if t.hist is not None and t.taken is not None and "event-out-of-order" in cfg.bugs:
            # the mutant: the call's event goes in before the events not yet taken
            h, tk = t.hist, t.taken
            early = z3.Concat(z3.SubSeq(h, 0, tk), z3.Unit(e), z3.SubSeq(h, tk, z3.Length(h) - tk))
            t = replace(t, hist=z3.If(logs, early, h))
        else:
            t = log_push(cfg, t, logs, e)
    return t, err


def cached_block(cfg: Config, s: State, k: IntT) -> IntT:
    """The oldest block holding ``k`` in the index, or -1."""
    d = cfg.dom
    if not isinstance(d, Finite):
        return iv(-1)
    newest = "cached-newest" in cfg.bugs
    best: IntT = iv(-1)
    for b in range(1, d.n):
        held = z3.Or([z3.And(k == kk, s.idx[kk - 1][b]) for kk in range(1, cfg.K + 1)])
        older = s.kst[b] > d.sel(s.kst, best) if newest else s.kst[b] < d.sel(s.kst, best)
        best = z3.If(z3.And(held, z3.Or(best == -1, older)), iv(b), best)
    return best


def op_evict_blocks(cfg: Config, s: State, a: Args) -> tuple[State, IntT]:
    err = _entries_error(cfg, a, True, a.e)
    t = s
    for j in range(cfg.M):
        t = guarded(cfg.dom, j < a.m, lambda u, j=j: drop_key(cfg, u, a.e[j], True), t)  # type: ignore[misc]
    return t, err


def op_reset(cfg: Config, s: State) -> tuple[State, BoolT]:
    d = cfg.dom
    ok = z3.BoolVal(True) if "reset-ignores-use" in cfg.bugs else s.L == d.N - 1
    no = d.mk(lambda b: z3.BoolVal(False), B)
    fb = d.mk(lambda b: d.sel(s.fb, b) + _pending_count(cfg, s, b), I)
    fired = s.fired
    if fired is not None:
        fired = fired + d.sum(0, d.N, lambda b: _pending_count(cfg, s, b))
    t = replace(
        s,
        key=d.mk(lambda b: iv(0), I),
        idx=[no for _ in range(cfg.K)],
        pend=[no for _ in range(cfg.W)],
        fb=fb,
        fired=fired,
        view=[z3.And(v, z3.Not(cfg.events)) for v in s.view],
        nev=s.nev + z3.If(cfg.events, iv(1), iv(0)),
    )
    t = log_push(cfg, t, cfg.events, event_sort(cfg.M).cleared)
    return merge(d, ok, t, s), ok


def transition(cfg: Config, s: State, a: Args) -> tuple[State, Result]:
    """The state after ``a``, and its result. A refused call leaves the state as it was."""
    d = cfg.dom
    K = a.kind
    g, gerr, gres = op_get_new_blocks(cfg, s, a)
    f, ferr = op_free_blocks(cfg, s, a)
    t, terr = op_touch(cfg, s, a)
    u, uerr = op_unpin_blocks(cfg, s, a)
    c, cerr = op_cache_blocks(cfg, s, a)
    e, eerr = op_evict_blocks(cfg, s, a)
    r, rok = op_reset(cfg, s)
    ibad = a.ib >= d.N
    werr = z3.If(ibad, iv(ERR["InvalidArgument"]), iv(0))
    take = replace(s, nev=iv(0))
    taken_events = None
    if s.hist is not None and s.taken is not None:
        take = replace(take, taken=z3.Length(s.hist))
        taken_events = z3.SubSeq(s.hist, s.taken, z3.Length(s.hist) - s.taken)
    err = z3.If(
        OPK["GetNewBlocks"] == K,
        gerr,
        z3.If(
            OPK["FreeBlocks"] == K,
            ferr,
            z3.If(
                OPK["Touch"] == K,
                terr,
                z3.If(
                    OPK["UnpinBlocks"] == K,
                    uerr,
                    z3.If(
                        OPK["CacheBlocks"] == K,
                        cerr,
                        z3.If(
                            OPK["EvictBlocks"] == K,
                            eerr,
                            z3.If(OPK["IsBlockWritable"] == K, werr, iv(0)),
                        ),
                    ),
                ),
            ),
        ),
    )
    nxt = s
    for kind, cand in (
        ("GetNewBlocks", g),
        ("FreeBlocks", f),
        ("Touch", t),
        ("UnpinBlocks", u),
        ("CacheBlocks", c),
        ("EvictBlocks", e),
        ("ResetPrefixCache", r),
        ("TakeEvents", take),
    ):
        applies = err == 0
        if kind == "FreeBlocks" and "free-partial-on-refusal" in cfg.bugs:
            # bug: a free refused for an over-free still releases the blocks it listed
            applies = z3.Or(applies, err == ERR["RefCountUnderflow"])
        nxt = merge(d, z3.And(OPK[kind] == K, applies), cand, nxt)
    writable = z3.And(a.ib != 0, d.sel(s.ref, a.ib) == 1, d.sel(s.key, a.ib) == 0)
    numfree = s.L + 1 if "numfree-counts-null" in cfg.bugs else s.L
    value = z3.If(
        OPK["GetNewBlocks"] == K,
        a.n,
        z3.If(
            OPK["GetCachedBlock"] == K,
            cached_block(cfg, s, a.qk),
            z3.If(
                OPK["ResetPrefixCache"] == K,
                z3.If(rok, iv(1), iv(0)),
                z3.If(
                    OPK["GetNumFreeBlocks"] == K,
                    numfree,
                    z3.If(
                        OPK["IsBlockWritable"] == K,
                        z3.If(writable, iv(1), iv(0)),
                        z3.If(OPK["TakeEvents"] == K, s.nev, iv(0)),
                    ),
                ),
            ),
        ),
    )
    usage = None  # get_usage == 1 - L/(N-1): the decoder computes it from L
    gnb = z3.And(OPK["GetNewBlocks"] == K, err == 0)
    rs = z3.And(OPK["ResetPrefixCache"] == K, rok)
    no = d.mk(lambda b: z3.BoolVal(False), B)
    fire = [d.ite(gnb, gf, d.ite(rs, s.pend[w], no)) for w, gf in enumerate(gres.fire)]
    fire_key = d.ite(gnb, gres.fire_key, s.bst)
    return nxt, Result(
        err, value, usage, gres.ret, fire, fire_key, taken_events, _at_fire(cfg, s, nxt, gnb, rs)
    )


def _at_fire(cfg: Config, s: State, t: State, gnb: BoolT, rs: BoolT) -> State:
    """The state the call's watchers run on: the completed post-state ``t`` (semantics:
    "watchers run only after the state is complete and consistent"). The mutants move the
    firing point earlier, into the middle of the call."""
    d = cfg.dom
    at = t
    if "fire-before-detach" in cfg.bugs:  # still pending, not yet counted as fired
        early = replace(t, pend=s.pend, fb=s.fb, fired=s.fired)
        at = merge(d, gnb, early, at)
    if "fire-mid-handout" in cfg.bugs:  # out of the queue, ref_cnt not yet 1
        at = merge(d, gnb, replace(t, ref=s.ref), at)
    if "fire-before-log" in cfg.bugs:  # reset: before AllBlocksCleared is logged
        at = merge(d, rs, replace(t, view=s.view, nev=s.nev, hist=s.hist), at)
    return at


Record = tuple[str, list[z3.BoolRef], z3.BoolRef, str]
"""One query asked of z3: the obligation's name, its hypotheses, its goal, z3's answer."""

_RECORDERS: list[list[Record]] = []
_NAMES: list[str] = []


@contextlib.contextmanager
def named(name: str) -> Iterator[None]:
    """The queries asked inside the block are recorded under ``name``."""
    _NAMES.append(name)
    try:
        yield
    finally:
        _NAMES.pop()


@contextlib.contextmanager
def recording() -> Iterator[list[Record]]:
    """Every query :func:`isolated_check` and :func:`isolated_checks` ask inside the
    block, with z3's answer, in order (so a second solver can re-check the proved ones)."""
    rec: list[Record] = []
    _RECORDERS.append(rec)
    try:
        yield rec
    finally:
        _RECORDERS.remove(rec)


def _record(hyp: list[z3.BoolRef], goal: z3.BoolRef, status: str) -> None:
    for rec in _RECORDERS:
        rec.append((_NAMES[-1] if _NAMES else "?", list(hyp), goal, status))


_TOKEN = re.compile(r'\|[^|]*\||"(?:[^"]|"")*"|[^\s()|";]+')
"""An SMT-LIB token: a quoted symbol, a string literal, or a simple symbol/numeral/keyword."""
_DECLARED = re.compile(r"^\(declare-fun (\|[^|]*\||[^\s()|]+) ", re.M)
CANON = "kv!"
"""The canonical names' prefix: the i-th fresh-form name declared is ``kv!i`` (lengthened
if the text already has a token that starts with it)."""


@dataclass
class Isolated:
    """Formulas of the main context, re-made in a context of their own (:func:`isolate`)."""

    ctx: z3.Context
    exprs: list[Any]
    """The formulas, in ``ctx``, in order, with their constants and functions renamed."""
    text: str
    """The SMT-LIB script parsed. Its let-names and which terms it names with a let vary
    with the process (the printer's choice follows the main context's reference counts
    and term ids); ``exprs`` do not: the same obligation gives the same formulas, with
    the same term numbers, in any process."""
    names: dict[str, str]
    """The caller's name of each constant or function -> its canonical name."""


def _smt2(exprs: Sequence[z3.ExprRef]) -> str:
    """The formulas as an SMT-LIB script (declarations, then one assert each), printed by
    z3's benchmark printer (``Z3_benchmark_to_smtlib_string``: ~100x faster than the
    solver's pretty printer on the fixed-N steps; its let-names carry term ids, which the
    parser drops, and it prints no quantifier weights or skolem ids, which the proofs do
    not set)."""
    ctx = exprs[0].ctx
    *first, last = exprs
    arr = (z3.Ast * max(len(first), 1))(*[e.as_ast() for e in first])
    out = z3.Z3_benchmark_to_smtlib_string(
        ctx.ref(), "", "", "unknown", "", len(first), arr, last.as_ast()
    )
    return _unwrap_distinct(str(out))


_WRAPPED = "(and (distinct "


def _unwrap_distinct(text: str) -> str:
    """The benchmark printer writes ``distinct`` as ``(and (distinct ..) true)``, which
    would parse into another formula: each is written back as ``(distinct ..)``."""
    out: list[str] = []
    i = 0
    while (j := text.find(_WRAPPED, i)) >= 0:
        k, depth = j + len("(and "), 0
        while True:  # the end of "(distinct ..)": its parenthesis closed
            c = text[k]
            if c == "|":
                k = text.index("|", k + 1)
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        if not text.startswith(" true)", k + 1):
            raise RuntimeError("isolate: a distinct printed in an unexpected form")
        out += [text[i:j], text[j + len("(and ") : k + 1]]
        i = k + 1 + len(" true)")
    out.append(text[i:])
    return "".join(out)


_FRESH = re.compile(r"\|?.*![0-9]+\|?")
"""The form of the names z3 makes from a counter (``FreshInt("x")`` is ``x!N``)."""


def canonical_text(text: str) -> tuple[str, dict[str, str]]:
    """``text`` with each declared name (``declare-fun``: uninterpreted constants and
    functions) of the fresh-name form ``prefix!N`` renamed ``kv!0``, ``kv!1``.. in order
    of declaration (z3 prints them in order of first appearance in its traversal of the
    formulas), and the renaming. The other names are the code's own strings, the same in
    every process, and stay: z3's search depends on names too (they hash), and one of
    multikey's refutations found in 0.1 s under the code's names was "unknown" at every
    seed with every name renamed. Unchanged (no renaming) where a name is declared twice
    (overloaded by sort); a renaming the parser refuses is undone by :func:`isolate`."""
    declared = _DECLARED.findall(text)
    if len(set(declared)) != len(declared):
        return text, {}
    fresh = [n for n in declared if _FRESH.fullmatch(n)]
    if not fresh:
        return text, {}
    prefix = CANON
    tokens = set(_TOKEN.findall(text))
    while any(t.startswith(prefix) for t in tokens):
        prefix += "!"
    names = {n: f"{prefix}{i}" for i, n in enumerate(fresh)}
    return _TOKEN.sub(lambda m: names.get(m.group(0), m.group(0)), text), {
        n.strip("|"): c for n, c in names.items()
    }


_SORT = re.compile(r"^\(declare-sort (\|[^|]*\||[^\s()|]+) 0\)\n", re.M)

USER_SORTS: tuple[str, ...] = ("Key", "Watcher")
"""The uninterpreted sorts the proofs declare (symsorts' keys and watcher ids). z3 numbers
an uninterpreted sort by the order its name was first declared in a context, and a model
translated back keeps the number: these are declared first, in this order, in the main
context (when this module is imported) and in every isolated context, so that the two
number them alike. An obligation with another uninterpreted sort is isolated by
``translate`` (its answer may then depend on the process)."""
_MAIN_SORTS = [z3.DeclareSort(n) for n in USER_SORTS]


def _parse(text: str, ctx: z3.Context) -> list[Any]:
    """The asserted formulas of ``text`` (whose uninterpreted sorts are among
    :data:`USER_SORTS`), parsed in ``ctx``, the sorts made as :func:`z3.DeclareSort`
    makes them (the parser's ``declare-sort`` makes a sort a model does not share with
    the caller's)."""
    sorts = {n: z3.DeclareSort(n, ctx) for n in USER_SORTS}
    return list(z3.parse_smt2_string(_SORT.sub("", text), sorts=sorts, ctx=ctx))


def isolate(exprs: Sequence[z3.ExprRef]) -> Isolated:
    """``exprs`` (at least one formula) re-made in a fresh context with canonical names.

    Not with ``translate``: z3's translation lifts the target context's counter of fresh
    names to the source's (``ast_translation`` calls ``update_fresh_id``), and the main
    context's counter grows with everything the process did (a ``FreshInt``, a model
    translated back from an earlier check). The names z3 makes while solving (Skolem
    constants, instantiations, array witnesses) then differ from process to process, so
    do their hashes and z3's search: one quantified refutation was "refuted" in a fresh
    process and "unknown" after one ``z3.FreshInt()`` (benchmarks/isolation.py). The
    formulas are printed as SMT-LIB instead, the declared names z3 made from a counter
    renamed by order of appearance (:func:`canonical_text`), and the text parsed into a
    new context, whose state then depends on the formulas alone."""
    printed = _smt2(exprs)
    ctx = z3.Context()
    if any(n.strip("|") not in USER_SORTS for n in _SORT.findall(printed)):
        return Isolated(ctx, [e.translate(ctx) for e in exprs], printed, {})
    text, names = canonical_text(printed)
    scratch = _scratch(text)
    try:
        parsed = _parse(text, scratch)
    except z3.Z3Exception:  # a renaming the parser refuses: the printed names, unchanged
        text, names = printed, {}
        parsed = _parse(text, scratch)
    if len(parsed) != len(exprs):
        raise RuntimeError(f"isolate: {len(exprs)} formulas printed, {len(parsed)} parsed")
    # Parsed in a scratch context, then translated into the context z3 solves in: the
    # parser numbers terms as the text lists them, and which subterms the printer names
    # with a let (listed first) follows the main context's reference counts; the
    # translation numbers them by a walk of the formulas alone. (z3's search is ordered
    # by term numbers: the same formulas numbered otherwise were "unknown" at 3 s, and
    # refuted in 0.1 s.) The scratch context's fresh-name counter, which the translation
    # passes on, is the parser's: the same for the same formulas.
    return Isolated(ctx, [e.translate(ctx) for e in parsed], text, names)


_SCRATCH: list[z3.Context] = []


def _scratch(text: str) -> z3.Context:
    """The context ``text`` is parsed in: one kept for the process (a context costs more
    to make than most obligations cost to print and parse), or a new one for a text that
    defines a datatype or a recursive function (a context takes each definition once).
    Its term numbers do not matter (the translation renumbers), and parsing makes no
    fresh names, so its counter stays where it started (tests/test_proofs_isolation.py
    compares the counter after other obligations were parsed in it)."""
    if "(declare-datatype" in text or "(define-fun" in text:
        return z3.Context()
    if not _SCRATCH:
        _SCRATCH.append(z3.Context())
    return _SCRATCH[0]


def _decls(exprs: Sequence[z3.ExprRef], wanted: dict[str, str]) -> dict[str, Any]:
    """The uninterpreted declarations of ``exprs`` whose names are in ``wanted``."""
    out: dict[str, Any] = {}
    for e in subterms(exprs):
        d = e.decl()
        if d.kind() == z3.Z3_OP_UNINTERPRETED and d.name() in wanted:
            out[d.name()] = d
    return out


class RenamedModel(z3.ModelRef):  # type: ignore[misc]
    """A model of an :func:`isolate`'d obligation, read with the caller's names: a term
    given to :meth:`eval` has its constants and functions renamed as the obligation's were
    (the model itself, printed, shows the canonical names)."""

    def __init__(self, m: z3.ModelRef, exprs: Sequence[z3.ExprRef], names: dict[str, str]):
        super().__init__(m.model, m.ctx)
        consts: list[tuple[Any, Any]] = []
        funs: list[tuple[Any, Any]] = []
        for name, d in _decls(exprs, names).items():
            dom = [d.domain(i) for i in range(d.arity())]
            new = z3.Function(names[name], *dom, d.range())
            if not dom:
                consts.append((d(), new()))
            else:
                args = [z3.Var(i, s) for i, s in enumerate(dom)]  # Var(i): the i-th argument
                funs.append((d, new(*args)))
        ref = m.ctx.ref()
        self._n = len(consts)
        self._from = (z3.Ast * max(self._n, 1))(*[a.as_ast() for a, _ in consts])
        self._to = (z3.Ast * max(self._n, 1))(*[b.as_ast() for _, b in consts])
        self._nf = len(funs)
        self._ffrom = (z3.FuncDecl * max(self._nf, 1))(*[f.as_func_decl() for f, _ in funs])
        self._fto = (z3.Ast * max(self._nf, 1))(*[b.as_ast() for _, b in funs])
        self._keep = (consts, funs, ref)

    def renamed(self, t: Any) -> Any:
        """``t`` with the obligation's names replaced by their canonical names."""
        ref = self.ctx.ref()
        a = t.as_ast()
        if self._n:
            a = z3.Z3_substitute(ref, a, self._n, self._from, self._to)
        if self._nf:
            a = z3.Z3_substitute_funs(ref, a, self._nf, self._ffrom, self._fto)
        return z3.z3._to_expr_ref(a, self.ctx)

    def eval(self, t: Any, model_completion: bool = False) -> Any:
        return super().eval(self.renamed(t), model_completion)

    def evaluate(self, t: Any, model_completion: bool = False) -> Any:
        return self.eval(t, model_completion)


def _model_back(sol: z3.Solver, exprs: Sequence[z3.ExprRef], names: dict[str, str]) -> z3.ModelRef:
    m = sol.model().translate(z3.main_ctx())
    for srt in m.sorts():
        if srt.name() in USER_SORTS and srt != z3.DeclareSort(srt.name()):
            raise RuntimeError(
                f"the sort {srt.name()!r} was declared in the main z3 context before "
                "kvpool.proofs.model was imported: a model's values of it cannot be read"
            )
    return RenamedModel(m, exprs, names) if names else m


def isolated_check(
    hyp: list[z3.BoolRef], goal: z3.BoolRef, timeout_ms: int, seed: int = 0
) -> tuple[str, float, z3.ModelRef | None]:
    """Does ``hyp`` imply ``goal``? "proved", "refuted" (with a model) or "unknown".

    On quantified formulas z3's answer can depend on everything the context has seen
    before (term ids order its search, names hash), so the same obligation could be proved
    in one process and "unknown" in another that built or solved other formulas first.
    The obligation is re-made in a context of its own with canonical names
    (:func:`isolate`): the answer depends on the obligation, ``seed`` and the time alone.
    A model comes back in the main context, read with the caller's names
    (:class:`RenamedModel`), for the callers' decoders. ``seed`` is z3's random seed: an
    obligation whose answer changes with it is fragile (:func:`robust_check` asks again).
    """
    res, dt, model = isolated_model([*hyp, z3.Not(goal)], timeout_ms, seed)
    status = {"unsat": "proved", "sat": "refuted"}.get(res, "unknown")
    _record(hyp, goal, status)
    return status, dt, model


def isolated_model(
    formulas: list[z3.BoolRef], timeout_ms: int, seed: int = 0
) -> tuple[str, float, z3.ModelRef | None]:
    """Are ``formulas`` satisfiable together? "sat" with a model (read with the caller's
    names), "unsat" or "unknown", and the seconds: asked as :func:`isolated_check` asks
    (:func:`isolate`), not recorded (a witness search, not an obligation)."""
    if not formulas:
        formulas = [z3.BoolVal(True)]
    iso = isolate(formulas)
    sol = z3.Solver(ctx=iso.ctx)
    sol.set("timeout", timeout_ms)
    sol.set("random_seed", seed)
    for a in iso.exprs:
        sol.add(a)
    t0 = time.perf_counter()
    res = sol.check()
    dt = time.perf_counter() - t0
    if res == z3.sat:
        return "sat", dt, _model_back(sol, formulas, iso.names)
    return ("unsat" if res == z3.unsat else "unknown"), dt, None


LADDER_SEEDS = 3
""":func:`ladder` asks at z3 seeds 0..LADDER_SEEDS-1 at most (:func:`robust_check`'s default)."""

A = TypeVar("A")


def ladder(
    ask: Callable[[int, int], tuple[A, float]],
    until: Callable[[A], bool],
    budget_ms: int,
    seeds: int = LADDER_SEEDS,
    first_seed: int = 0,
    cap_ms: int | None = None,
    total_ms: int | None = None,
) -> tuple[list[A], float]:
    """``ask(limit_ms, seed)`` (an answer and its seconds) asked up a ladder: z3 seed
    ``first_seed`` with a time limit of ``budget_ms``, then the next seed with twice the
    time (at most ``cap_ms``: ``cap_ms=budget_ms`` keeps every rung at ``budget_ms``), and
    so on for ``seeds`` rungs, until ``until`` accepts an answer, or until the rungs asked
    have taken ``total_ms`` (the last rung's limit is what is left of it). Every answer, in
    the order asked (the last is the accepted one, if one was), and the seconds of all.

    The one place that asks again. Each z3 answer depends on the obligation alone
    (:func:`isolate`), so what is left to vary is z3's seed (a quantified query's
    "unknown" may change with it; so may which model a satisfiable one gets) and the
    wall-clock limit under load: the seeds and the doubling absorb those. A caller states
    its query (``ask``: one obligation, a sweep of pool sizes, a list of goals) and what
    it accepts (``until``: an answer that is not "unknown", a refutation whose
    counterexample the spec confirms)."""
    if seeds < 1 or budget_ms < 1:
        raise ValueError("ladder: seeds and budget_ms must be >= 1")
    answers: list[A] = []
    total = 0.0
    for k in range(seeds):
        limit = budget_ms << k
        if cap_ms is not None:
            limit = min(limit, cap_ms)
        if total_ms is not None:
            left = total_ms - int(total * 1000)
            if left <= 0:
                break
            limit = min(limit, left)
        answer, dt = ask(max(limit, 1), first_seed + k)
        answers.append(answer)
        total += dt
        if until(answer):
            break
    return answers, total


def robust_check(
    hyp: list[z3.BoolRef],
    goal: z3.BoolRef,
    budget_ms: int,
    seeds: int = LADDER_SEEDS,
    first_seed: int = 0,
    cap_ms: int | None = None,
    total_ms: int | None = None,
    until: Callable[[str, z3.ModelRef | None], bool] | None = None,
) -> tuple[str, float, z3.ModelRef | None]:
    """:func:`isolated_check` asked up :func:`ladder`'s rungs until an answer that is not
    "unknown" (or, with ``until``, one it accepts): the last answer, the seconds of all
    the rungs, the model."""
    ok = until if until is not None else (lambda st, m: st != "unknown")

    def ask(limit: int, seed: int) -> tuple[tuple[str, z3.ModelRef | None], float]:
        status, dt, m = isolated_check(hyp, goal, limit, seed)
        return (status, m), dt

    answers, total = ladder(ask, lambda a: ok(*a), budget_ms, seeds, first_seed, cap_ms, total_ms)
    status, m = answers[-1] if answers else ("unknown", None)
    return status, total, m


def hypothesis_model(
    hyp: list[z3.BoolRef],
    prefer: list[list[z3.BoolRef]],
    timeout_ms: int,
    seeds: int = 4,
) -> tuple[str, float, z3.ModelRef | None]:
    """A model of ``hyp`` (a witness that an obligation's hypothesis is satisfiable):
    "sat" with it, "unsat" (the hypothesis is vacuous) or "unknown", and the seconds.
    Each constraint list of ``prefer`` is tried in turn (the last is usually ``[]``,
    any model), each at z3 seeds 0..seeds-1 until one is not unknown."""
    status, dt, m = "unknown", 0.0, None
    for extra in prefer:
        # "refuted" of False is a model of the hypothesis; every rung has timeout_ms
        status, took, m = robust_check(
            [*hyp, *extra], z3.BoolVal(False), timeout_ms, seeds, cap_ms=timeout_ms
        )
        dt += took
        if status == "refuted":
            break
    return {"refuted": "sat", "proved": "unsat"}.get(status, "unknown"), dt, m


def isolated_checks(
    hyp: list[z3.BoolRef], goals: list[z3.BoolRef], timeout_ms: int, seed: int = 0
) -> list[tuple[str, float, z3.ModelRef | None]]:
    """:func:`isolated_check` of each goal under the same ``hyp``, in one context of their
    own: ``hyp`` is asserted once, each goal asked under a push/pop, in order, until the
    first one that is not proved (the answers so far are returned). The answers depend on
    ``hyp`` and the goals alone, as with :func:`isolated_check` (one :func:`isolate` of
    the hypotheses and every goal)."""
    exprs = [*hyp, *[z3.Not(g) for g in goals]]
    if not exprs:
        return []
    iso = isolate(exprs)
    sol = z3.Solver(ctx=iso.ctx)
    sol.set("timeout", timeout_ms)
    sol.set("random_seed", seed)
    for a in iso.exprs[: len(hyp)]:
        sol.add(a)
    out: list[tuple[str, float, z3.ModelRef | None]] = []
    for g, ng in zip(goals, iso.exprs[len(hyp) :], strict=True):
        sol.push()
        sol.add(ng)
        t0 = time.perf_counter()
        res = sol.check()
        dt = time.perf_counter() - t0
        _record(hyp, g, "proved" if res == z3.unsat else "refuted" if res == z3.sat else "unknown")
        if res == z3.unsat:
            out.append(("proved", dt, None))
        elif res == z3.sat:
            out.append(("refuted", dt, _model_back(sol, [*hyp, z3.Not(g)], iso.names)))
        else:
            out.append(("unknown", dt, None))
        sol.pop()
        if res != z3.unsat:
            break
    return out


@dataclass
class Goal:
    """z3's answer to one case of a named obligation: a part of S, an invariant or a rule
    (``name``), the case asked (a loop's init, step or exit, a call kind, ...), "proved",
    "refuted" (with a model) or "unknown", the seconds, and what a decoder needs
    (``ctx``: the obligation, or the terms its model is read at); ``op``, the call kind,
    where the case does not name it. Where the goal is to be exported (the fixed-N
    induction, the event log, several keys, two pools): ``query``, the query whose unsat
    is the proof (the hypotheses and the negated goal), and ``queries``, every query whose
    unsat is (part of) the proof when it was asked conjunct by conjunct (``query`` is then
    one of them)."""

    name: str
    case: str
    status: str
    seconds: float
    model: z3.ModelRef | None = None
    ctx: Any = None
    op: str = ""
    query: list[Any] = field(default_factory=list)
    queries: list[list[Any]] = field(default_factory=list)

    def all_queries(self) -> list[list[Any]]:
        """Every query whose unsat is the proof: all of them must be unsat."""
        return self.queries or [self.query]


def goals_status(goals: Sequence[Any]) -> tuple[str, list[Any]]:
    """A row's status from its goals, and the goals not proved: "proved" only if there
    are goals and every one is (a row with none proves nothing), else "refuted" if z3
    refuted one, else "unknown"."""
    bad = [g for g in goals if g.status != "proved"]
    if goals and not bad:
        return "proved", bad
    return ("refuted" if any(g.status == "refuted" for g in bad) else "unknown"), bad


def not_proved(g: Any) -> str:
    """A goal not proved, as a row's replay names it: its case and its answer."""
    return f"not proved: {g.case} ({g.status})"


def not_proved_op(g: Any) -> str:
    """:func:`not_proved` with the goal's call kind before its case."""
    return f"not proved: {g.op} {g.case} ({g.status})"


def goal_row(
    obligation: str,
    goals: Sequence[Any],
    bounds: str,
    invariants: tuple[str, ...],
    why: Callable[[Any], str] = not_proved,
    most: int | None = None,
    kind: str = "inductive",
    technique: str = "z3 induction",
) -> dict[str, Any]:
    """One row (``runner.ObligationResult(**row)``) from ``goals``: its status
    :func:`goals_status`'s, its seconds theirs summed, its replay the first ``most`` of
    the goals not proved (all: None), each as ``why`` says."""
    status, bad = goals_status(goals)
    return dict(
        obligation=obligation,
        kind=kind,
        technique=technique,
        invariants=invariants,
        bounds=bounds,
        status=status,
        seconds=sum(g.seconds for g in goals),
        replay="; ".join(why(g) for g in bad[:most]),
    )


def name_rows(
    goals: Sequence[Any],
    names: Sequence[str],
    obligation: Callable[[str], str],
    bounds: Callable[[str, list[Any]], str],
    invariants: Callable[[str], tuple[str, ...]] = lambda name: (name,),
    why: Callable[[Any], str] = not_proved,
    most: int | None = None,
    kind: str = "inductive",
    technique: str = "z3 induction",
) -> list[dict[str, Any]]:
    """One row per name of ``names`` (:func:`goal_row`), from the goals bearing that name
    (``g.name``), in their order; ``obligation``, ``bounds`` and ``invariants`` say the
    row's text from the name (and, ``bounds``, its goals)."""
    out = []
    for name in names:
        mine = [g for g in goals if g.name == name]
        out.append(
            goal_row(
                obligation(name),
                mine,
                bounds(name, mine),
                invariants(name),
                why,
                most,
                kind,
                technique,
            )
        )
    return out


def any_refuted(goals: Sequence[Any]) -> bool:
    return any(g.status == "refuted" for g in goals)


def all_proved(goals: Sequence[Any]) -> bool:
    return all(g.status == "proved" for g in goals)


def goals_ladder(
    ask: Callable[[int, int], list[Any]],
    until: Callable[[list[Any]], bool],
    budget_ms: int,
    seeds: int = LADDER_SEEDS,
    cap_ms: int | None = None,
) -> tuple[list[Any], float]:
    """:func:`ladder` of ``ask(limit_ms, seed)``, a list of goals (each with its seconds):
    the last list asked and the seconds of every list."""
    answers, dt = ladder(
        lambda limit, seed: _timed(ask(limit, seed)), until, budget_ms, seeds, cap_ms=cap_ms
    )
    return answers[-1], dt


def _timed(goals: list[Any]) -> tuple[list[Any], float]:
    return goals, sum(g.seconds for g in goals)


@dataclass
class Replayed:
    """A goal asked on a rung of :func:`replay_ladder`, and, if it was refuted, its
    counterexample's trace and the verdict of its replay (else ``[]`` and "")."""

    goal: Any
    trace: list[str]
    verdict: str

    @property
    def confirmed(self) -> bool:
        """The replay confirmed the counterexample (its verdict starts with "confirmed")."""
        return self.verdict.startswith("confirmed")


def replay_ladder(
    ask: Callable[[int, int], Any],
    judge: Callable[[Any], tuple[list[str], str]],
    budget_ms: int,
    seeds: int = LADDER_SEEDS,
    stop_proved: bool = False,
) -> tuple[Replayed | None, Replayed, float]:
    """A mutant's counterexample search: :func:`ladder` of ``ask(limit_ms, seed)`` (one
    goal), every rung at ``budget_ms``; a refutation is judged as it comes
    (``judge(goal)``: it is decoded and replayed on the spec, the trace and a verdict),
    until a verdict starts with "confirmed" (``stop_proved``: or a goal is proved; other
    seeds cannot refute what z3 proved). The last refutation judged (None: none was),
    the last rung's answer, and the seconds of all."""

    def attempt(limit: int, seed: int) -> tuple[Replayed, float]:
        g = ask(limit, seed)
        if g.status == "refuted" and g.model is not None:
            return Replayed(g, *judge(g)), g.seconds
        return Replayed(g, [], ""), g.seconds

    def done(r: Replayed) -> bool:
        return r.confirmed or (stop_proved and r.goal.status == "proved")

    tries, dt = ladder(attempt, done, budget_ms, seeds, cap_ms=budget_ms)
    judged = [r for r in tries if r.goal.status == "refuted" and r.goal.model is not None]
    return (judged[-1] if judged else None), tries[-1], dt


def blank_mutant_row(
    obligation: str,
    invariants: tuple[str, ...],
    bounds: str,
    status: str = "unknown",
    replay: str = "",
) -> dict[str, Any]:
    """A mutant's row (``runner.ObligationResult(**row)``), before anything is asked: no
    seconds, no trace."""
    return dict(
        obligation=obligation,
        kind="mutant",
        technique="z3 induction",
        invariants=invariants,
        bounds=bounds,
        status=status,
        seconds=0.0,
        trace=[],
        replay=replay,
    )


def judged_row(row: dict[str, Any], hit: Replayed | None, prefix: str = "") -> bool:
    """A mutant's ``row`` from the counterexample :func:`replay_ladder` judged last: its
    trace, "expected-refuted" if its replay confirmed it (else "NOT-confirmed"), and as
    the replay ``prefix`` and the verdict. False, and the row left as it is: none was."""
    if hit is None:
        return False
    row["trace"] = hit.trace
    row["status"] = "expected-refuted" if hit.confirmed else "NOT-confirmed"
    row["replay"] = prefix + hit.verdict
    return True


def constants(exprs: Sequence[z3.ExprRef]) -> dict[str, z3.ExprRef]:
    """The uninterpreted constants of ``exprs`` (quantified bodies included), by name."""
    return {
        str(e): e
        for e in subterms(exprs)
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED
    }


def nodes(exprs: Sequence[z3.ExprRef]) -> Iterator[z3.ExprRef]:
    """Each distinct term in ``exprs`` once, quantifiers and lambdas (and their bodies)
    included, depth first (:func:`subterms` yields applications only)."""
    seen: set[int] = set()
    todo: list[z3.ExprRef] = list(exprs)
    while todo:
        e = todo.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        yield e
        if z3.is_quantifier(e):
            todo.append(e.body())
        elif z3.is_app(e):
            todo.extend(e.children())


def subterms(exprs: Sequence[z3.ExprRef], left_first: bool = False) -> Iterator[z3.ExprRef]:
    """Each distinct application in ``exprs`` once (a quantifier's body walked, bound
    variables skipped), depth first; ``left_first``: the leftmost argument's terms first
    (the order a reader meets them), else the rightmost's."""
    seen: set[int] = set()
    todo: list[z3.ExprRef] = list(reversed(exprs)) if left_first else list(exprs)
    while todo:
        e = todo.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        if z3.is_quantifier(e):
            todo.append(e.body())
        elif z3.is_app(e):
            yield e
            todo.extend(reversed(e.children()) if left_first else e.children())
