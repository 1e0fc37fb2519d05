"""Differential testing of the encoding against the executable spec, on both readings.

The z3 transition relation is evaluated on concrete states and operations by
substitution; the next state and the result it gives must equal what
``kvpool.spec.World.apply`` does. Both readings are compared:

* ``finite``: the terms the bounded model checker unrolls (arrays are lists);
* ``unbounded``: the terms induction uses (z3 arrays, lambdas, quantifiers), with
  N made concrete and each quantifier expanded over the blocks 0..N-1 (every
  quantifier of the encoding ranges over block ids or queue positions below N).

States are reachable ones: random operation sequences run on the executable spec
from the initial state, and at each state reached every operation kind is compared.
All the outputs of one step are evaluated in one substitution (:class:`_Subst`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from typing import Any

import z3  # type: ignore[import-untyped]

from kvpool.spec import (
    BlockRemoved,
    BlockStored,
    ErrorKind,
    Event,
    Firing,
    Op,
    Outcome,
    PoolState,
    World,
)

from .model import (
    ERRORS,
    OPK,
    OPS,
    Args,
    Config,
    Finite,
    Result,
    State,
    Unbounded,
    event_sort,
    fresh_args,
    fresh_state,
    int_sort,
    to_int,
    transition,
)
from .mutants import MUTANTS
from .rewrite import simplify
from .trace import ConcreteArgs, decode_events, decode_state, key_name, to_op


@dataclass
class Stepper:
    """One symbolic step for a concrete N, ready to be evaluated on concrete inputs."""

    cfg: Config
    pre: State
    args: Args
    post: State
    res: Result

    reading: str = "finite"
    outputs: list[tuple[Any, Any]] | None = None

    @classmethod
    def build(
        cls,
        n: int,
        K: int = 2,
        W: int = 2,
        M: int = 2,
        bugs: frozenset[str] = frozenset(),
        width: int | None = None,
        reading: str = "finite",
    ) -> Stepper:
        if reading not in READINGS:
            raise ValueError(f"reading must be one of {READINGS}, got {reading!r}")
        with int_sort(width):
            dom: Any = Finite(n) if reading == "finite" else Unbounded(z3.IntVal(n))
            cfg = Config(
                dom,
                K=K,
                W=W,
                M=M,
                caching=z3.Bool("caching"),
                events=z3.Bool("events"),
                bugs=bugs,
                # the finite reading carries the event log as a sequence: its contents
                # and order are compared with the spec's log
                seq_log=reading == "finite",
            )
            pre = fresh_state(cfg, "pre", globals_=reading == "finite")
            a = fresh_args(cfg, "arg")
            post, res = transition(cfg, pre, a)
        st = cls(cfg, pre, a, post, res, reading)
        st.outputs = st._outputs(n)
        return st

    def sel(self, a: Any, i: int) -> Any:
        return a[i] if self.reading == "finite" else z3.Select(a, i)

    def _outputs(self, n: int) -> list[Any]:
        """Every term the comparison reads, quantifiers expanded (unbounded reading)."""
        s, r, sel = self.post, self.res, self.sel
        out: list[Any] = []
        for arr in [s.ref, s.key, s.kst, s.bst, s.reg, s.fb, s.q, s.pos, s.inq]:
            out += [sel(arr, b) for b in range(n)]
        for arr in [*s.idx, *s.pend, *s.wst, *r.fire, self.pre.wst[0], self.pre.wst[-1]]:
            out += [sel(arr, b) for b in range(n)]
        out += [sel(r.fire_key, b) for b in range(n)] + [sel(r.ret, i) for i in range(n)]
        out += [sel(self.pre.reg, b) for b in range(n)] + [sel(self.pre.fb, b) for b in range(n)]
        out += [s.L, s.lo, s.hi, s.clock, *s.view, s.nev, r.err, r.value, self.pre.L]
        if s.registered is not None:
            out += [s.registered, s.fired]
        if self.reading == "unbounded":
            memo: dict[int, tuple[Any, Any]] = {}
            return [(t, _expand(t, n, memo)) for t in out]
        return [(t, t) for t in out]


READINGS = ("finite", "unbounded")
DEFAULT_BUDGET = 1200
"""(state, op) pairs per reading at the default budget (``make proofs``)."""
DEFAULT_SIZES = (2, 3, 4)
DEFAULT_SEED = 7


def _expand(e: Any, n: int, memo: dict[int, tuple[Any, Any]]) -> Any:
    """``e`` with each ForAll/Exists replaced by its instances 0..n-1 (lambdas kept)."""
    k = e.get_id()
    if k in memo:  # (the term is kept with its image: an id is reused once a term is freed)
        return memo[k][1]
    if z3.is_quantifier(e):
        if e.is_lambda():
            vs = [z3.Const(f"lam!{k}!{i}", e.var_sort(i)) for i in range(e.num_vars())]
            body = _expand(z3.substitute_vars(e.body(), *reversed(vs)), n, memo)
            out = z3.Lambda(vs, body)
        else:
            if e.num_vars() != 1:
                raise ValueError("a quantifier over more than one variable")
            inst = [_expand(z3.substitute_vars(e.body(), z3.IntVal(j)), n, memo) for j in range(n)]
            out = z3.And(*inst) if e.is_forall() else z3.Or(*inst)
    elif z3.is_app(e) and e.num_args() > 0:
        kids = [_expand(c, n, memo) for c in e.children()]
        same = all(a.eq(b) for a, b in zip(kids, e.children(), strict=True))
        out = e if same else e.decl()(*kids)
    else:
        out = e
    memo[k] = (e, out)
    return out


class _Subst:
    """A stand-in for a z3 model: evaluation by substitution and simplification.

    With ``outputs``, all of them are evaluated in one substitution (the transition's
    terms share most of their structure: one pass instead of one per cell).

    Every call goes through :func:`_substitute` (z3's own ``substitute`` less its
    Python-side checks, which its C side repeats) and the outputs are packed into one
    term once per list of outputs (:func:`_packed`): the same terms, substituted and
    simplified as before, at a fraction of the Python work per (state, op) pair."""

    def __init__(
        self, pairs: list[tuple[Any, Any]], outputs: list[tuple[Any, Any]] | None = None
    ) -> None:
        self.pairs = pairs
        self.table: dict[int, Any] = {}
        n = len(pairs)
        self._from, self._to = (z3.Ast * n)(), (z3.Ast * n)()
        for i, (a, b) in enumerate(pairs):
            self._from[i], self._to[i] = a.as_ast(), b.as_ast()
        if outputs:  # (term, the term to evaluate for it: quantifiers expanded)
            vals = simplify(self._substitute(_packed(outputs)))
            for (t, _), v in zip(outputs, _unpack(vals, len(outputs)), strict=True):
                if v is not None:
                    self.table[t.get_id()] = z3.BoolVal(v.as_long() == 1) if z3.is_bool(t) else v

    def _substitute(self, x: Any) -> Any:
        """``z3.substitute(x, *self.pairs)`` (z3's C side checks that the sorts agree)."""
        ctx = x.ctx
        raw = z3.Z3_substitute(ctx.ref(), x.as_ast(), len(self.pairs), self._from, self._to)
        return z3.z3._to_expr_ref(raw, ctx)

    def eval(self, x: Any, model_completion: bool = True) -> Any:
        got = self.table.get(x.get_id())
        if got is not None:
            return got
        return simplify(self._substitute(x))


_PACK = z3.Function("pack!", z3.IntSort(), z3.IntSort(), z3.IntSort())

_PACKED: dict[int, tuple[list[tuple[Any, Any]], Any]] = {}
"""id(outputs) -> (outputs, their packed term): the list is kept, so its id is not reused."""


def _packed(outputs: list[tuple[Any, Any]]) -> Any:
    """The outputs (booleans as 0/1) as one term, built once per list of outputs (a
    stepper's outputs are the same terms at every (state, op) pair)."""
    got = _PACKED.get(id(outputs))
    if got is None or got[0] is not outputs:
        ints = [z3.If(e, 1, 0) if z3.is_bool(e) else e for _, e in outputs]
        got = _PACKED[id(outputs)] = (outputs, _pack(ints))
    return got[1]


def _pack(ts: list[Any]) -> Any:
    """One term holding every output (as arguments of an uninterpreted function)."""
    out = z3.IntVal(0)
    for t in ts:
        out = _PACK(t if not z3.is_bv(t) else z3.BV2Int(t, is_signed=True), out)
    return out


def _unpack(v: Any, k: int) -> list[Any]:
    """The values :func:`_pack`'s term simplified to (None: not an integer literal), read
    through z3's C API: no Python wrapper for the nodes walked, only for the values."""
    ctx = v.ctx
    ref, node, pack = ctx.ref(), v.as_ast(), _PACK.ast
    vals: list[Any] = []
    while (
        len(vals) < k
        and z3.Z3_get_ast_kind(ref, node) == z3.Z3_APP_AST
        and z3.Z3_is_eq_func_decl(ref, z3.Z3_get_app_decl(ref, node), pack)
    ):
        x = z3.Z3_get_app_arg(ref, node, 0)
        # (z3.is_int_value's test: of sort Int, and a numeral)
        is_int = z3.Z3_get_sort_kind(ref, z3.Z3_get_sort(ref, x)) == z3.Z3_INT_SORT
        vals.append(z3.IntNumRef(x, ctx) if is_int and z3.Z3_is_numeral_ast(ref, x) else None)
        node = z3.Z3_get_app_arg(ref, node, 1)
    vals.reverse()
    return vals + [None] * (k - len(vals))


def encode(st: Stepper, ps: PoolState, c: ConcreteArgs) -> _Subst:
    """Substitution pairs giving the encoding's variables the values of ``ps`` and ``c``."""
    cfg, s, a = st.cfg, st.pre, st.args
    N = ps.num_blocks
    keys: dict[Hashable, int] = {key_name(k): k for k in range(1, cfg.K + 1)}
    pairs: list[tuple[Any, Any]] = []
    arrays: dict[int, tuple[Any, dict[int, int | bool]]] = {}

    def put(var: Any, val: int | bool) -> None:
        if isinstance(val, bool):
            pairs.append((var, z3.BoolVal(val)))
        elif z3.is_bv(var):
            pairs.append((var, z3.BitVecVal(val, var.size())))
        else:
            pairs.append((var, z3.IntVal(val)))

    def cell(arr: Any, b: int, val: int | bool) -> None:
        if st.reading == "finite":
            put(arr[b], val)
        else:
            arrays.setdefault(arr.get_id(), (arr, {}))[1][b] = val

    kst = [0] * N
    stamp = 0
    for holders in ps.index.values():
        for b in holders:
            kst[b] = stamp
            stamp += 1
    order = list(ps.free) + [b for b in range(1, N) if b not in ps.free]
    pos = [-1] * N
    for p, b in enumerate(order):
        pos[b] = p
    bst = [0] * N
    wst = [[0] * N for _ in range(cfg.W)]
    for rank, (b, ws) in enumerate(ps.pending.items()):
        bst[b] = rank
        for j, w in enumerate(ws):
            wst[w][b] = j
    for b in range(N):
        cell(s.ref, b, ps.ref[b])
        k = ps.key[b]
        cell(s.key, b, keys[k] if k is not None else 0)
        cell(s.kst, b, kst[b])
        cell(s.bst, b, bst[b])
        cell(s.reg, b, len(ps.pending.get(b, ())))
        cell(s.fb, b, 0)
        cell(s.pos, b, pos[b])
        cell(s.inq, b, b in ps.free)
        cell(s.q, b, order[b] if b < len(order) else 0)
        for kk in range(1, cfg.K + 1):
            cell(s.idx[kk - 1], b, b in ps.index.get(key_name(kk), {}))
        for w in range(cfg.W):
            cell(s.pend[w], b, w in ps.pending.get(b, ()))
            cell(s.wst[w], b, wst[w][b])
    put(s.L, len(ps.free))
    put(s.lo, 0)
    put(s.hi, len(ps.free) - 1)
    # the clock is past every stamp the state holds: key, first-watcher and watcher order
    put(s.clock, max(stamp, len(ps.pending), cfg.W) + 1)
    for kk in range(1, cfg.K + 1):
        put(s.view[kk - 1], key_name(kk) in ps.view)
    put(s.nev, len(ps.log))
    if s.registered is not None and s.fired is not None:
        put(s.registered, ps.registered)
        put(s.fired, ps.fired)
    if s.hist is not None:
        # the history before the log: what the consumer had replayed when it last took
        # the log, as BlockStored events of the view's keys the log does not mention
        told = [k for k in range(1, cfg.K + 1) if key_name(k) in ps.view]
        told = [k for k in told if not any(_mentions(e, key_name(k)) for e in ps.log)]
        before = [
            BlockStored(tuple(key_name(k) for k in told[i : i + cfg.M]))
            for i in range(0, len(told), cfg.M)
        ]
        pairs.append((s.hist, _seq(cfg, [*before, *ps.log], keys)))
        put(s.taken, len(before))
    put(cfg.caching, ps.caching)
    put(cfg.events, ps.events_on)
    put(a.kind, c.kind)
    put(a.n, c.n)
    put(a.m, c.m)
    put(a.ef, c.ef)
    put(a.w, c.w)
    put(a.km, c.km)
    put(a.qk, c.qk)
    put(a.ib, c.ib)
    for j in range(cfg.M):
        put(a.e[j], c.e[j])
        put(a.ks[j], c.ks[j])
    for arr, vals in arrays.values():
        rng = arr.sort().range()
        conc = z3.K(arr.sort().domain(), z3.BoolVal(False) if rng == z3.BoolSort() else 0)
        for b, v in vals.items():
            conc = z3.Store(conc, b, z3.BoolVal(v) if isinstance(v, bool) else z3.IntVal(v))
        pairs.append((arr, conc))
    return _Subst(pairs, st.outputs)


def _mentions(e: Event, k: Hashable) -> bool:
    if isinstance(e, BlockStored):
        return k in e.keys
    return not isinstance(e, BlockRemoved) or e.key == k


def _seq(cfg: Config, events: list[Event], keys: dict[Hashable, int]) -> Any:
    """The encoding's value of a list of the spec's events."""
    ev = event_sort(cfg.M)
    out = z3.Empty(z3.SeqSort(ev))
    for e in events:
        if isinstance(e, BlockStored):
            ids = [keys[k] for k in e.keys] + [0] * (cfg.M - len(e.keys))
            x = ev.stored(*[z3.IntVal(i) for i in ids])
        elif isinstance(e, BlockRemoved):
            x = ev.removed(z3.IntVal(keys[e.key]))
        else:
            x = ev.cleared
        out = z3.Concat(out, z3.Unit(x))
    return simplify(out)


def _int(m: _Subst, x: Any) -> int:
    return to_int(m.eval(x))


def _bool(m: _Subst, x: Any) -> bool:
    return z3.is_true(m.eval(x))  # type: ignore[no-any-return]


def encoded_outcome(st: Stepper, m: _Subst, c: ConcreteArgs, ps: PoolState) -> Outcome:
    """The outcome the encoding gives, in the spec's terms."""
    r = st.res
    err = _int(m, r.err)
    if err:
        return Outcome(error=ErrorKind(ERRORS[err]))
    kind = OPS[c.kind]
    value: object = None
    if kind == "GetNewBlocks":
        value = tuple(_int(m, st.sel(r.ret, i)) for i in range(c.n))
    elif kind == "GetCachedBlock" and st.reading == "unbounded":
        value = None  # the unbounded reading does not model the lookup (see compare_step)
    elif kind == "GetCachedBlock":
        v = _int(m, r.value)
        value = None if v == -1 else v
    elif kind in ("ResetPrefixCache", "IsBlockWritable"):
        value = bool(_int(m, r.value))
    elif kind == "TakeEvents" and r.events is not None:
        value = tuple(decode_events(m.eval(r.events)))
    elif kind in ("GetNumFreeBlocks", "TakeEvents"):
        value = _int(m, r.value)
    elif kind == "GetUsage":
        total = ps.num_blocks - 1
        value = round(0.0 if not total else 1.0 - _int(m, st.pre.L) / total, 12)
    fired: list[tuple[int, int, Firing]] = []
    N = ps.num_blocks
    for b in range(N):
        for w in range(st.cfg.W):
            if _bool(m, st.sel(r.fire[w], b)):
                fired.append(
                    (
                        _int(m, st.sel(r.fire_key, b)),
                        _int(m, st.sel(st.pre.wst[w], b)),
                        Firing(w, 0, b),
                    )
                )
    fired.sort()
    return Outcome(value=value, fired=tuple(f for _, _, f in fired))


def comparable(ps: PoolState, contents: bool = False) -> tuple[object, ...]:
    """Everything the encoding models: the log's events themselves with ``contents`` (the
    finite reading, whose log is a sequence), else their number (the unbounded reading)."""
    return (
        tuple(ps.ref),
        tuple(ps.key),
        tuple(ps.free),
        tuple(sorted((k, tuple(h)) for k, h in ps.index.items())),
        tuple((b, tuple(ws)) for b, ws in ps.pending.items()),
        frozenset(ps.view),
        ps.registered,
        ps.fired,
        tuple(ps.log) if contents else len(ps.log),
    )


def spec_comparable_outcome(o: Outcome, kind: str, contents: bool = False) -> Outcome:
    if kind == "TakeEvents" and o.ok and contents:
        return Outcome(value=tuple(o.value), fired=o.fired)  # type: ignore[arg-type]
    if kind == "TakeEvents" and o.ok:
        return Outcome(value=len(o.value), fired=o.fired)  # type: ignore[arg-type]
    if kind == "GetUsage" and o.ok:
        return Outcome(value=round(o.value, 12), fired=o.fired)  # type: ignore[call-overload]
    return Outcome(value=o.value, error=o.error, fired=o.fired)


def random_args(rng: random.Random, n_blocks: int, K: int, W: int, M: int) -> ConcreteArgs:
    kind = rng.randrange(len(OPS))
    m = rng.randint(0, M)
    # mostly real blocks; sometimes the null block or an id that is not a block
    e = tuple(
        rng.choice([0, n_blocks] + [rng.randrange(1, n_blocks)] * 6) if n_blocks > 1 else 0
        for _ in range(M)
    )
    km = m if rng.random() < 0.9 else rng.randint(0, M)
    return ConcreteArgs(
        kind=kind,
        n=rng.choice([-1, 0, 1, 1, 2, 2, 3, n_blocks]) if kind == OPK["GetNewBlocks"] else 0,
        m=m,
        e=e,
        ef=rng.random() < 0.3,
        w=rng.randrange(W),
        km=km,
        ks=tuple(rng.randint(1, K) for _ in range(M)),
        qk=rng.randint(1, K),
        ib=rng.choice([0, n_blocks] + [rng.randrange(1, n_blocks)] * 4) if n_blocks > 1 else 0,
    )


def state_args(
    rng: random.Random, ps: PoolState, K: int, W: int, M: int, kind: int | None = None
) -> ConcreteArgs:
    """Arguments that make sense on ``ps`` (blocks in use to free, free ones to touch, ...).

    Random arguments are mostly refused (a block not in use, a key nobody holds); these
    reach the paths where the encoding's bugs live."""
    n = ps.num_blocks
    kind = rng.randrange(len(OPS)) if kind is None else kind
    name = OPS[kind]
    in_use = [b for b in range(1, n) if ps.ref[b] > 0]
    keyed = [b for b in range(1, n) if ps.key[b] is not None]
    pool: list[int] = {
        "FreeBlocks": in_use,
        "UnpinBlocks": in_use,
        "CacheBlocks": [b for b in in_use if ps.key[b] is None],
        "Touch": list(ps.free) + in_use,
        "EvictBlocks": keyed,
    }.get(name, list(range(1, n)))
    # Mostly as many blocks as the call can take: the order in which one call queues
    # several released blocks (front, back, unpin) is only visible with two or more.
    want = M if rng.random() < 0.7 else rng.randint(1, M)
    m = min(len(pool), want) if pool else 0
    picked = rng.sample(pool, m) if m else []
    if name == "FreeBlocks" and rng.random() < 0.5:
        # keyed blocks first: where evict_first decides between the front and the back
        picked.sort(key=lambda b: ps.key[b] is None)
    if name == "Touch" and picked and rng.random() < 0.25:
        picked[rng.randrange(len(picked))] = 0  # touch skips the null block
    twice = [b for b in in_use if ps.ref[b] >= 2]
    if name == "UnpinBlocks" and twice and M >= 2 and rng.random() < 0.4:
        b = rng.choice(twice)  # one block twice in one call: one watcher, not two
        picked = [b, b, *picked[2:]]
        m = len(picked)
    e = tuple(picked + [0] * (M - m))
    watching = sorted({w for b in picked for w in ps.pending.get(b, ())})
    same = rng.random() < 0.5  # one key for the whole group: two holders of a key
    k0 = rng.randint(1, K)
    ks = tuple(k0 if same else rng.randint(1, K) for _ in range(M))
    held = [k for k in range(1, K + 1) if key_name(k) in ps.index]
    return ConcreteArgs(
        kind=kind,
        n=rng.randint(1, len(ps.free)) if ps.free and name == "GetNewBlocks" else 0,
        m=m,
        e=e,
        # evict_first matters for a keyed block (it goes to the front instead of the back)
        ef=rng.random() < (0.7 if any(ps.key[b] is not None for b in picked) else 0.3),
        # a watcher already waiting on a picked block: it must not be registered twice
        w=rng.choice(watching) if watching and rng.random() < 0.5 else rng.randrange(W),
        km=m,
        ks=ks,
        qk=rng.choice(held) if held else rng.randint(1, K),
        ib=rng.randrange(n),
    )


@dataclass
class Mismatch:
    state: PoolState
    op: Op
    spec: tuple[object, ...]
    encoded: tuple[object, ...]

    def __str__(self) -> str:
        where = f"{self.op!r} on {self.state.describe()}"
        return f"{where}:\n  spec    {self.spec}\n  encoded {self.encoded}"


def compare_step(st: Stepper, ps: PoolState, c: ConcreteArgs) -> Mismatch | None:
    """One (state, op) pair on one reading: the encoding's step against the spec's."""
    n, cfg = ps.num_blocks, st.cfg
    op = to_op(c, n)
    m = encode(st, ps, c)
    enc_out = encoded_outcome(st, m, c, ps)
    after = decode_state(
        m, st.post, n, cfg.K, cfg.W, ps.caching, ps.events_on, st.sel, st.reading == "finite"
    )
    if st.reading == "unbounded":  # its counters are per-block ghosts: compare the change
        pre_reg = sum(_int(m, st.sel(st.pre.reg, b)) for b in range(n))
        pre_fb = sum(_int(m, st.sel(st.pre.fb, b)) for b in range(n))
        after.registered += ps.registered - pre_reg
        after.fired += ps.fired - pre_fb
    contents = st.post.hist is not None
    if contents:
        hist = decode_events(m.eval(st.post.hist))
        after.log = hist[_int(m, st.post.taken) :]
    else:
        after.log = [None] * _int(m, st.post.nev)  # type: ignore[list-item]
    w2 = World([ps.copy()], [True])
    spec_out = spec_comparable_outcome(w2.apply(op), OPS[c.kind], contents)
    if st.reading == "unbounded" and OPS[c.kind] == "GetCachedBlock":
        spec_out = Outcome(error=spec_out.error, fired=spec_out.fired)
    spec_view = (spec_out, comparable(w2.pools[0], contents))
    enc_view = (enc_out, comparable(after, contents))
    if spec_view != enc_view:
        return Mismatch(ps, op, spec_view, enc_view)
    return None


RUN_WEIGHTS = {
    "GetNewBlocks": 4,
    "CacheBlocks": 3,
    "Touch": 3,
    "UnpinBlocks": 3,
    "FreeBlocks": 2,
    "EvictBlocks": 1,
}
"""How often a run's step is each operation (others 1): the ones that build state."""


def reachable_states(
    rng: random.Random, n: int, K: int, W: int, M: int, max_steps: int = 16
) -> list[PoolState]:
    """States the spec reaches from its initial state by a random run (each one on it).

    Most steps use :func:`state_args`, so runs cache keys, pin and unpin, and leave
    watchers pending; some use arbitrary arguments (refusals are steps too)."""
    world = World.single(n, caching=rng.random() < 0.8, events=rng.random() < 0.7)
    out = [world.pools[0].copy()]
    for _ in range(rng.randint(1, max_steps)):
        ps = world.pools[0]
        kind = rng.choices(range(len(OPS)), weights=[RUN_WEIGHTS.get(o, 1) for o in OPS])[0]
        if rng.random() < 0.85:
            c = state_args(rng, ps, K, W, M, kind)
        else:
            c = random_args(rng, n, K, W, M)
        world.apply(to_op(c, n))
        out.append(world.pools[0].copy())
    return out


def run(
    samples: int,
    seed: int = 0,
    sizes: tuple[int, ...] = (1, 2, 4, 6),
    bugs: frozenset[str] = frozenset(),
    reading: str = "finite",
    stop_at_first: bool = False,
) -> tuple[int, list[Mismatch]]:
    """Compare ``samples`` (reachable state, op) pairs on ``reading``: (compared, mismatches).

    At each reachable state every operation kind is compared once (a state is drawn
    from a random run of the spec; the arguments are random)."""
    rng = random.Random(seed)
    steppers = {n: Stepper.build(n, bugs=bugs, reading=reading) for n in sizes}
    mism: list[Mismatch] = []
    done = 0
    while done < samples:
        n = rng.choice(sizes)
        st = steppers[n]
        cfg = st.cfg
        states = reachable_states(rng, n, cfg.K, cfg.W, cfg.M)
        ps = states[rng.randrange(len(states))]
        for kind in rng.sample(range(len(OPS)), len(OPS)):
            if done >= samples:
                break
            if rng.random() < 0.75:
                c = state_args(rng, ps, cfg.K, cfg.W, cfg.M, kind)
            else:
                c = random_args(rng, n, cfg.K, cfg.W, cfg.M)
                c = replace(c, kind=kind, n=c.n if kind == OPK["GetNewBlocks"] else 0)
            bad = compare_step(st, ps, c)
            done += 1
            if bad is not None:
                mism.append(bad)
                if stop_at_first:
                    return done, mism
    return done, mism


ENCODING_MUTANTS: tuple[str, ...] = tuple(dict.fromkeys(m.name for m in MUTANTS))
"""Every spec mutant is also a switch in the encoding (``Config.bugs``): the 16 first,
then those added for ORD-UNPIN and ERR-ATOMIC (``unpin-reversed`` among them)."""

UNBOUNDED_BLIND = frozenset({"cached-newest"})
"""Mutants the unbounded reading cannot see: it does not model the value a lookup
returns (induction needs only the state), and ``cached-newest`` changes only that."""


def catches(bug: str, reading: str, samples: int = DEFAULT_BUDGET) -> tuple[int, Mismatch | None]:
    """Pairs compared until the encoding with ``bug`` first disagrees with the spec."""
    done, mism = run(
        samples,
        seed=DEFAULT_SEED,
        sizes=DEFAULT_SIZES,
        bugs=frozenset([bug]),
        reading=reading,
        stop_at_first=True,
    )
    return done, (mism[0] if mism else None)


def catch_row(
    where: str, prefix: str, bug: str, run: Callable[[], tuple[int, list[str]]]
) -> dict[str, Any]:
    """One differential's row for an encoding mutant: ``run()`` gives the pairs compared
    and the disagreement found (empty: none), "caught" or "missed". ``where`` names the
    differential in the obligation, ``prefix`` in the bounds (``kvpool.verify`` reads the
    mutant's name from the brackets, the reading from before the colon)."""
    import time

    t0 = time.perf_counter()
    done, trace = run()
    return dict(
        obligation=f"differential ({where}) catches [{bug}]",
        kind="differential",
        technique="differential",
        invariants=(),
        bounds=f"{prefix}: [{bug}] caught after {done} pairs"
        if trace
        else f"{prefix}: [{bug}] not caught in {done} pairs",
        status="caught" if trace else "missed",
        seconds=time.perf_counter() - t0,
        trace=trace,
    )


def mutant_rows(samples: int = DEFAULT_BUDGET) -> list[dict[str, Any]]:
    """Each encoding mutant on each reading that can see it: caught, or a failure."""

    def run(bug: str, reading: str) -> Callable[[], tuple[int, list[str]]]:
        def go() -> tuple[int, list[str]]:
            done, bad = catches(bug, reading, samples)
            return done, [str(bad)] if bad else []

        return go

    return [
        catch_row(f"{reading} reading", reading, bug, run(bug, reading))
        for reading in READINGS
        for bug in ENCODING_MUTANTS
        if not (reading == "unbounded" and bug in UNBOUNDED_BLIND)
    ]


def keys_of(ps: PoolState) -> dict[Hashable, int]:
    return {key_name(k): k for k in range(1, 3)}


def rows(samples: int = DEFAULT_BUDGET) -> list[dict[str, Any]]:
    """Both readings at ``samples`` pairs each: ``runner.ObligationResult(**row)`` rows."""
    import time

    from kvpool.spec import INVARIANTS

    out = []
    for reading in READINGS:
        t0 = time.perf_counter()
        done, mism = run(samples, seed=DEFAULT_SEED, sizes=DEFAULT_SIZES, reading=reading)
        out.append(
            dict(
                obligation=f"z3 transition ({reading} reading) == spec.World.apply",
                kind="differential",
                technique="differential",
                invariants=tuple(INVARIANTS),
                bounds=f"{reading} reading, {done} reachable states x ops, N in {DEFAULT_SIZES}",
                status="agree" if not mism else "disagree",
                seconds=time.perf_counter() - t0,
                trace=[str(x) for x in mism[:3]],
            )
        )
    return out
