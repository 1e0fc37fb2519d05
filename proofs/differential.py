"""Differential testing of the encoding against the executable spec.

The z3 transition relation (the very terms the bounded model checker unrolls)
is evaluated on concrete states and operations by substitution; the next state
and the result it gives must equal what ``kvpool.spec.World.apply`` does.
States are reached by random operation sequences on the executable spec.
"""

from __future__ import annotations

import random
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import z3  # type: ignore[import-untyped]

from kvpool.spec import ErrorKind, Firing, Op, Outcome, PoolState, World

from .model import (
    ERRORS,
    OPK,
    OPS,
    Args,
    Config,
    Finite,
    Result,
    State,
    fresh_args,
    fresh_state,
    int_sort,
    to_int,
    transition,
)
from .trace import ConcreteArgs, decode_state, key_name, to_op


@dataclass
class Stepper:
    """One symbolic step for a concrete N, ready to be evaluated on concrete inputs."""

    cfg: Config
    pre: State
    args: Args
    post: State
    res: Result

    @classmethod
    def build(
        cls,
        n: int,
        K: int = 2,
        W: int = 2,
        M: int = 2,
        bugs: frozenset[str] = frozenset(),
        width: int | None = None,
    ) -> Stepper:
        with int_sort(width):
            cfg = Config(
                Finite(n),
                K=K,
                W=W,
                M=M,
                caching=z3.Bool("caching"),
                events=z3.Bool("events"),
                bugs=bugs,
            )
            pre = fresh_state(cfg, "pre")
            a = fresh_args(cfg, "arg")
            post, res = transition(cfg, pre, a)
        return cls(cfg, pre, a, post, res)


class _Subst:
    """A stand-in for a z3 model: evaluation by substitution and simplification."""

    def __init__(self, pairs: list[tuple[Any, Any]]) -> None:
        self.pairs = pairs

    def eval(self, x: Any, model_completion: bool = True) -> Any:
        return z3.simplify(z3.substitute(x, *self.pairs))


def encode(st: Stepper, ps: PoolState, c: ConcreteArgs) -> _Subst:
    """Substitution pairs giving the encoding's variables the values of ``ps`` and ``c``."""
    cfg, s, a = st.cfg, st.pre, st.args
    N = ps.num_blocks
    keys: dict[Hashable, int] = {key_name(k): k for k in range(1, cfg.K + 1)}
    pairs: list[tuple[Any, Any]] = []

    def put(var: Any, val: int | bool) -> None:
        if isinstance(val, bool):
            pairs.append((var, z3.BoolVal(val)))
        elif z3.is_bv(var):
            pairs.append((var, z3.BitVecVal(val, var.size())))
        else:
            pairs.append((var, z3.IntVal(val)))

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
        put(s.ref[b], ps.ref[b])
        k = ps.key[b]
        put(s.key[b], keys[k] if k is not None else 0)
        put(s.kst[b], kst[b])
        put(s.bst[b], bst[b])
        put(s.reg[b], len(ps.pending.get(b, ())))
        put(s.fb[b], 0)
        put(s.pos[b], pos[b])
        put(s.inq[b], b in ps.free)
        put(s.q[b], order[b] if b < len(order) else 0)
        for kk in range(1, cfg.K + 1):
            put(s.idx[kk - 1][b], b in ps.index.get(key_name(kk), {}))
        for w in range(cfg.W):
            put(s.pend[w][b], w in ps.pending.get(b, ()))
            put(s.wst[w][b], wst[w][b])
    put(s.L, len(ps.free))
    put(s.lo, 0)
    put(s.hi, len(ps.free) - 1)
    put(s.clock, stamp)
    for kk in range(1, cfg.K + 1):
        put(s.view[kk - 1], key_name(kk) in ps.view)
    put(s.nev, len(ps.log))
    assert s.registered is not None and s.fired is not None
    put(s.registered, ps.registered)
    put(s.fired, ps.fired)
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
    return _Subst(pairs)


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
        value = tuple(_int(m, r.ret[i]) for i in range(c.n))
    elif kind == "GetCachedBlock":
        v = _int(m, r.value)
        value = None if v == -1 else v
    elif kind in ("ResetPrefixCache", "IsBlockWritable"):
        value = bool(_int(m, r.value))
    elif kind in ("GetNumFreeBlocks", "TakeEvents"):
        value = _int(m, r.value)
    elif kind == "GetUsage":
        total = ps.num_blocks - 1
        value = round(0.0 if not total else 1.0 - _int(m, st.pre.L) / total, 12)
    fired: list[tuple[int, int, Firing]] = []
    N = ps.num_blocks
    for b in range(N):
        for w in range(st.cfg.W):
            if _bool(m, r.fire[w][b]):
                fired.append((_int(m, r.fire_key[b]), _int(m, st.pre.wst[w][b]), Firing(w, 0, b)))
    fired.sort()
    return Outcome(value=value, fired=tuple(f for _, _, f in fired))


def comparable(ps: PoolState) -> tuple[object, ...]:
    """Everything the encoding models (event contents are compared through the view)."""
    return (
        tuple(ps.ref),
        tuple(ps.key),
        tuple(ps.free),
        tuple(sorted((k, tuple(h)) for k, h in ps.index.items())),
        tuple((b, tuple(ws)) for b, ws in ps.pending.items()),
        frozenset(ps.view),
        ps.registered,
        ps.fired,
        len(ps.log),
    )


def spec_comparable_outcome(o: Outcome, kind: str) -> Outcome:
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


@dataclass
class Mismatch:
    state: PoolState
    op: Op
    spec: tuple[object, ...]
    encoded: tuple[object, ...]

    def __str__(self) -> str:
        where = f"{self.op!r} on {self.state.describe()}"
        return f"{where}:\n  spec    {self.spec}\n  encoded {self.encoded}"


def run(
    samples: int,
    seed: int = 0,
    sizes: tuple[int, ...] = (1, 2, 4, 6),
    bugs: frozenset[str] = frozenset(),
) -> tuple[int, list[Mismatch]]:
    """Compare ``samples`` random (state, op) pairs; returns (compared, mismatches)."""
    rng = random.Random(seed)
    steppers = {n: Stepper.build(n, bugs=bugs) for n in sizes}
    mism: list[Mismatch] = []
    done = 0
    while done < samples:
        n = rng.choice(sizes)
        st = steppers[n]
        cfg = st.cfg
        world = World.single(n, caching=rng.random() < 0.8, events=rng.random() < 0.7)
        for _ in range(rng.randint(0, 12)):
            world.apply(to_op(random_args(rng, n, cfg.K, cfg.W, cfg.M), n))
            if done >= samples:
                break
            ps = world.pools[0].copy()
            c = random_args(rng, n, cfg.K, cfg.W, cfg.M)
            op = to_op(c, n)
            m = encode(st, ps, c)
            enc_out = encoded_outcome(st, m, c, ps)
            after = decode_state(
                m, st.post, n, cfg.K, cfg.W, ps.caching, ps.events_on, lambda a, i: a[i]
            )
            after.log = [None] * _int(m, st.post.nev)  # type: ignore[list-item]
            w2 = World([ps.copy()], [True])
            spec_out = spec_comparable_outcome(w2.apply(op), OPS[c.kind])
            spec_view = (spec_out, comparable(w2.pools[0]))
            enc_view = (enc_out, comparable(after))
            if spec_view != enc_view:
                mism.append(Mismatch(ps, op, spec_view, enc_view))
            done += 1
    return done, mism


def keys_of(ps: PoolState) -> dict[Hashable, int]:
    return {key_name(k): k for k in range(1, 3)}
