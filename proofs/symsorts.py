"""Keys and watcher ids as uninterpreted sorts, and RES-CACHED for every N.

The rest of the every-N induction (:mod:`~kvpool.proofs.induction`,
:mod:`~kvpool.proofs.counting`, :mod:`~kvpool.proofs.steprules`,
:mod:`~kvpool.proofs.symlists`) reads :mod:`kvpool.proofs.model`'s state, where the keys
are 1..K and the watcher ids 0..W-1 with K = W = 2: one index array per key, one pending
array per watcher id. Here they are z3 uninterpreted sorts (``Key``, ``Watcher``:
``DeclareSort``), of any size, finite or not, with nothing but equality on them:

* a block's key is ``keyed[b]`` (it holds one) and ``key[b]`` (which, of sort Key);
* the index is ``idx[k][b]`` (k of sort Key), the event view ``view[k]``;
* the pending watchers are ``pend[w][b]`` and their registration order ``wst[w][b]``
  (w of sort Watcher).

What is proved this way, for every N, every list length (the list-taking calls as the
loops of :mod:`~kvpool.proofs.symlists`) and any number of keys and watcher ids:

* **RES-CACHED** (:func:`cached_goals`): get_cached_block(k) is the encoding's scan over
  the blocks 1..N-1 in id order (``model.cached_block``: keep the holder of k with the
  smallest ``kst`` so far), here a ghost array defined by its recurrence over the blocks,
  ``Best[1] = -1``, ``Best[i+1] = i if i holds k and (Best[i] = -1 or kst[i] <
  kst[Best[i]]) else Best[i]``; the result is ``Best[N]``. Scan invariant ``P(i)``:
  ``Best[i] = -1`` iff no block of 1..i-1 holds k, else ``Best[i]`` is one of them
  holding k with the smallest kst. Scan init (``i = 1``), step (``i`` to ``i + 1``, every
  ``1 <= i < N``) and exit (``P(N)`` and INV-CACHE give RES-CACHED as
  :func:`kvpool.proofs.props.step_props` states it at fixed N: -1 iff no block holds k,
  else a block holding k whose kst is no larger than any other holder's).
  :func:`scan_agreement_goals` asks z3 that the recurrence's ``Best[N]`` is
  ``model.cached_block`` of the same state at N = 1..4 (keys 1..2 there).
* **ERR-ATOMIC** of the list-taking calls (:func:`atomic_goals`): the loop obligations of
  :func:`kvpool.proofs.symlists.atomic_obligations` on this state: a refused call leaves
  every field, the per-key and per-watcher arrays whole, as it was.
* **WATCH-FIRE** of unpin_blocks (:func:`watch_goals`): its loop, on this state, keeps
  every watcher pending that was (the one list-taking call that changes the pending
  sets; it fires none, so none may stop pending).

Not done with sorts: the strengthened invariant S and the counts (INV-WATCH counts the
watchers pending on a block, a cardinality a sort of unknown size gives no term for),
the ordering rules, and every other call kind: those keep K = W = 2. The hypotheses here
hold INV-CACHE and INV-NULL in the sorted form only (what the goals need); each has a
model (:func:`witness_goals`), decoded into a spec state that passes ``check_pool``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

import z3  # type: ignore[import-untyped]

from . import symlists
from .model import (
    OPK,
    Config,
    Finite,
    State,
    Unbounded,
    cached_block,
    goals_status,
    hypothesis_model,
    isolated_check,
    iv,
    named,
    q_append,
)

I = z3.IntSort()  # noqa: E741
B = z3.BoolSort()
KEY = z3.DeclareSort("Key")
WATCHER = z3.DeclareSort("Watcher")

SORTS_BOUNDS = "every N, every list length; keys and watcher ids uninterpreted sorts"
"""The bounds of a row proved here."""

SCAN_MUTANT = "cached-newest"
"""The catalogue's RES-CACHED bug: get_cached_block returns the newest holder."""


@dataclass
class SState:
    """The pool's state with keys and watcher ids of uninterpreted sorts (the fields
    :mod:`~kvpool.proofs.model`'s ``State`` has, those per key or per watcher id as
    arrays over the sort)."""

    ref: Any
    keyed: Any  # Int -> Bool
    key: Any  # Int -> Key
    kst: Any
    idx: Any  # Key -> Int -> Bool
    pend: Any  # Watcher -> Int -> Bool
    wst: Any  # Watcher -> Int -> Int
    bst: Any
    reg: Any
    fb: Any
    q: Any
    pos: Any
    L: Any
    clock: Any
    view: Any  # Key -> Bool
    nev: Any


def fresh_sstate(name: str) -> SState:
    arr = z3.ArraySort(I, I)
    return SState(
        ref=z3.Const(f"{name}.ref", arr),
        keyed=z3.Array(f"{name}.keyed", I, B),
        key=z3.Array(f"{name}.key", I, KEY),
        kst=z3.Const(f"{name}.kst", arr),
        idx=z3.Array(f"{name}.idx", KEY, z3.ArraySort(I, B)),
        pend=z3.Array(f"{name}.pend", WATCHER, z3.ArraySort(I, B)),
        wst=z3.Array(f"{name}.wst", WATCHER, arr),
        bst=z3.Const(f"{name}.bst", arr),
        reg=z3.Const(f"{name}.reg", arr),
        fb=z3.Const(f"{name}.fb", arr),
        q=z3.Const(f"{name}.q", arr),
        pos=z3.Const(f"{name}.pos", arr),
        L=z3.Int(f"{name}.L"),
        clock=z3.Int(f"{name}.clock"),
        view=z3.Array(f"{name}.view", KEY, B),
        nev=z3.Int(f"{name}.nev"),
    )


def seq(a: SState, b: SState) -> Any:
    """Every field of the two states equal."""
    return z3.And([getattr(a, f.name) == getattr(b, f.name) for f in fields(a)])


def smerge(c: Any, a: SState, b: SState) -> SState:
    return SState(**{f.name: z3.If(c, getattr(a, f.name), getattr(b, f.name)) for f in fields(a)})


def held(s: SState, k: Any, b: Any) -> Any:
    """Block ``b`` holds key ``k`` in the index."""
    return z3.Select(z3.Select(s.idx, k), b)


def cache_inv(N: Any, s: SState) -> Any:
    """INV-CACHE and INV-NULL's key part, sorted: the index holds exactly each block's
    key, and the null block holds none."""
    b, k = z3.Int("c_b"), z3.Const("c_k", KEY)
    return z3.And(
        z3.Not(z3.Select(s.keyed, 0)),
        z3.ForAll(
            [b, k],
            z3.Implies(
                z3.And(b >= 0, b < N),
                held(s, k, b) == z3.And(z3.Select(s.keyed, b), z3.Select(s.key, b) == k),
            ),
        ),
    )


# -- RES-CACHED for every N: the scan, by its recurrence -----------------------------------


def scan_step(best: Any, i: Any, here: Any, kst: Any, newest: bool) -> Any:
    """The scan's next value after block ``i`` (``here``: i holds the key)."""
    kb = z3.Select(kst, best)
    better = z3.Select(kst, i) > kb if newest else z3.Select(kst, i) < kb
    return z3.If(z3.And(here, z3.Or(best == -1, better)), i, best)


def scan_rec(N: Any, Best: Any, s: SState, k: Any, newest: bool) -> list[Any]:
    """``Best`` is the scan over the blocks 1..N-1, by its recurrence."""
    i = z3.Int("sc_i")
    return [
        z3.Select(Best, 1) == -1,
        z3.ForAll(
            [i],
            z3.Implies(
                z3.And(i >= 1, i < N),
                z3.Select(Best, i + 1)
                == scan_step(z3.Select(Best, i), i, held(s, k, i), s.kst, newest),
            ),
        ),
    ]


def scan_inv(s: SState, k: Any, Best: Any, i: Any) -> Any:
    """``P(i)``: the scan's value after the blocks 1..i-1."""
    v = z3.Select(Best, i)
    b = z3.Int("p_b")
    none = z3.ForAll([b], z3.Implies(z3.And(b >= 1, b < i), z3.Not(held(s, k, b))))
    oldest = z3.ForAll(
        [b],
        z3.Implies(
            z3.And(b >= 1, b < i, held(s, k, b)), z3.Select(s.kst, v) <= z3.Select(s.kst, b)
        ),
    )
    return z3.And(
        (v == -1) == none, z3.Implies(v != -1, z3.And(v >= 1, v < i, held(s, k, v), oldest))
    )


def res_cached(N: Any, s: SState, k: Any, v: Any) -> Any:
    """RES-CACHED over the blocks' keys, as ``props.step_props`` states it at fixed N."""
    b = z3.Int("r_b")

    def has(x: Any) -> Any:
        return z3.And(z3.Select(s.keyed, x), z3.Select(s.key, x) == k)

    none = z3.ForAll([b], z3.Implies(z3.And(b >= 1, b < N), z3.Not(has(b))))
    oldest = z3.ForAll(
        [b],
        z3.Implies(z3.And(b >= 1, b < N, has(b)), z3.Select(s.kst, v) <= z3.Select(s.kst, b)),
    )
    return z3.And((v == -1) == none, z3.Implies(v != -1, z3.And(v >= 1, v < N, has(v), oldest)))


def cached_obligations(
    bugs: frozenset[str] = frozenset(),
) -> list[tuple[str, str, list[Any], Any, Any]]:
    """RES-CACHED's scan init, step and exit as (rule, case, hypotheses, goal, ctx)."""
    N = z3.Int("N")
    s = fresh_sstate("s")
    k = z3.Const("k", KEY)
    Best = z3.Array("Best", I, I)
    newest = SCAN_MUTANT in bugs
    base = [N >= 1, cache_inv(N, s), *scan_rec(N, Best, s, k, newest)]
    i = z3.Int("i")
    ctx = (N, s, k, Best)
    out: list[tuple[str, str, list[Any], Any, Any]] = [
        ("RES-CACHED", "scan init", base, scan_inv(s, k, Best, iv(1)), ctx),
        (
            "RES-CACHED",
            "scan step",
            [*base, i >= 1, i < N, scan_inv(s, k, Best, i)],
            scan_inv(s, k, Best, i + 1),
            (*ctx, i),
        ),
        (
            "RES-CACHED",
            "scan exit",
            [*base, scan_inv(s, k, Best, N)],
            res_cached(N, s, k, z3.Select(Best, N)),
            ctx,
        ),
    ]
    if "hyp-false" in bugs:
        out = [(r, c, [*h, z3.BoolVal(False)], g, x) for r, c, h, g, x in out]
    return out


def cached_goals(
    cases: tuple[str, ...] | None = None,
    bugs: frozenset[str] = frozenset(),
    timeout_ms: int = 60000,
    refute: bool = False,
    seed: int = 0,
) -> list[symlists.Goal]:
    """RES-CACHED's obligations proved (``refute``: looked for at N = 1..6)."""
    out: list[symlists.Goal] = []
    for r, case, hyp, goal, ctx in cached_obligations(bugs):
        if cases is not None and case not in cases:
            continue
        with named(f"symsorts: {r} / {case}"):
            status, dt, m = symlists._ask(hyp, goal, ctx[0], timeout_ms, refute, seed)
        out.append(symlists.Goal(r, "GetCachedBlock", case, status, dt, m, ctx))
        if refute and status == "refuted":
            return out
    return out


def scan_agreement_goals(
    ns: tuple[int, ...] = (1, 2, 3, 4), timeout_ms: int = 30000, bugs: frozenset[str] = frozenset()
) -> list[symlists.Goal]:
    """At each N of ``ns``: the recurrence's ``Best[N]`` (``bugs`` go into it only) is
    ``model.cached_block`` of the same state (its keys 1..2 and per-key index arrays,
    the state here reading key j as the j-th of two distinct constants of sort Key)."""
    out: list[symlists.Goal] = []
    for n in ns:
        cfg = Config(Finite(n), K=2, W=2)
        ms = _finite_state(cfg, "f")
        qk = z3.Int("qk")
        keys = [z3.Const(f"key{j}", KEY) for j in (1, 2)]
        s = fresh_sstate("s")
        Best = z3.Array("Best", I, I)
        k = z3.If(qk == 1, keys[0], keys[1])
        hyp = [qk >= 1, qk <= 2, keys[0] != keys[1]]
        hyp += [z3.Select(s.kst, b) == ms.kst[b] for b in range(n)]
        hyp += [held(s, keys[j], b) == ms.idx[j][b] for j in range(2) for b in range(n)]
        hyp += scan_rec(iv(n), Best, s, k, SCAN_MUTANT in bugs)
        goal = z3.Select(Best, n) == cached_block(cfg, ms, qk)
        with named(f"symsorts: RES-CACHED scan == model.cached_block / N={n}"):
            status, dt, m = isolated_check(hyp, goal, timeout_ms)
        out.append(symlists.Goal("agreement", "GetCachedBlock", f"N={n}", status, dt, m, None))
    return out


def _finite_state(cfg: Config, name: str) -> State:
    from .model import fresh_state

    return fresh_state(cfg, name)


def cached_witness_goals(timeout_ms: int = 20000, n: int = 3) -> list[symlists.Goal]:
    """Each RES-CACHED hypothesis has a model at N = n (two blocks holding the queried key
    preferred)."""
    out: list[symlists.Goal] = []
    for r, case, hyp, _goal, ctx in cached_obligations():
        N, s, k = ctx[0], ctx[1], ctx[2]
        two = [held(s, k, 1), held(s, k, 2)]
        prefer = [*two, *([ctx[4] == 2] if case == "scan step" else [])]
        st, dt, m = hypothesis_model([*hyp, n == N], [prefer, []], timeout_ms)
        out.append(symlists.Goal(r, "GetCachedBlock", case, st, dt, m, ctx))
    return out


def decode_keys(mdl: z3.ModelRef, n: int, s: SState) -> tuple[Any, dict[str, str]]:
    """A model's blocks' keys and kst, as a spec PoolState of n blocks, every non-null one
    free (in id order), keys named by the model's Key elements, each key's holders in
    kst order (the index's insertion order)."""
    from kvpool.spec import PoolState

    ps = PoolState.initial(n, True, False)
    names: dict[str, str] = {}
    index: dict[str, list[int]] = {}
    kst: dict[int, int] = {}
    for b in range(1, n):
        kst[b] = int(mdl.eval(z3.Select(s.kst, b), model_completion=True).as_long())
        if z3.is_true(mdl.eval(z3.Select(s.keyed, b), model_completion=True)):
            kv = str(mdl.eval(z3.Select(s.key, b), model_completion=True))
            name = names.setdefault(kv, f"key{len(names)}")
            ps.key[b] = name
            index.setdefault(name, []).append(b)
    for name, holders in index.items():
        ps.index[name] = dict.fromkeys(sorted(holders, key=lambda b: (kst[b], b)))
    return ps, names


def cached_mutant_row(timeout_ms: int = 30000) -> dict[str, Any]:
    """RES-CACHED's mutant (the scan keeps the newest holder): its scan step refuted, and
    the whole scan at a fixed N (3, 4) refuted too, that state decoded and
    get_cached_block replayed on the buggy spec and on the spec, which must differ."""
    from kvpool.spec import GetCachedBlock, World, check_pool

    from .mutants import world_class

    bugs = frozenset([SCAN_MUTANT])
    row: dict[str, Any] = dict(
        obligation=f"RES-CACHED, scan over the blocks [{SCAN_MUTANT}]",
        kind="mutant",
        technique="z3 induction",
        invariants=("RES-CACHED",),
        bounds=SORTS_BOUNDS,
        status="unknown",
        seconds=0.0,
        trace=[],
        replay="",
    )
    step: list[symlists.Goal] = []
    for seed in range(3):
        step = cached_goals(("scan step",), bugs, timeout_ms, True, seed)
        row["seconds"] += sum(g.seconds for g in step)
        if any(g.status == "refuted" for g in step):
            break
    if not any(g.status == "refuted" for g in step):
        row["status"] = "NOT-refuted" if all(g.status == "proved" for g in step) else "unknown"
        return row
    for n in (3, 4):
        ob = cached_obligations(bugs)[2]  # the scan's exit: P(N) is not assumed here
        _r, _c, _hyp, goal, (N, s, k, Best) = ob
        hyp = [n == N, cache_inv(N, s), *scan_rec(N, Best, s, k, True)]
        with named(f"symsorts: RES-CACHED / scan at N={n} [{SCAN_MUTANT}]"):
            status, dt, mdl = isolated_check(hyp, goal, timeout_ms)
        row["seconds"] += dt
        if status != "refuted" or mdl is None:
            continue
        ps, names = decode_keys(mdl, n, s)
        qk = names.get(str(mdl.eval(k, model_completion=True)), "unheld")
        call = GetCachedBlock(qk)
        row["trace"] = [f"state: N={n} {ps.describe()}", repr(call)]
        if check_pool(ps):
            row["status"], row["replay"] = "NOT-confirmed", "decoded state breaks the invariants"
            continue
        good = World([ps.copy()], [True]).apply(call)
        bad = world_class(SCAN_MUTANT).from_state(SCAN_MUTANT, ps).apply(call)
        if good.value != bad.value:
            row["status"] = "expected-refuted"
            row["replay"] = (
                f"scan step refuted; at N={n}: confirmed: get_cached_block({qk!r}) is "
                f"{bad.value}, the semantics' {good.value}"
            )
            return row
        row["status"], row["replay"] = "NOT-confirmed", "NOT confirmed by replay"
    return row


# -- ERR-ATOMIC and WATCH-FIRE of the list-taking calls, with the sorts ----------------------


def guard(op: str, N: Any, s: SState, x: Any, bugs: frozenset[str]) -> Any:
    """Entry ``x`` is accepted on the loop's state (:func:`symlists.guard`, sorted)."""
    ok = [x >= 0, x < N]
    if op in ("UnpinBlocks", "CacheBlocks", "EvictBlocks"):
        ok.append(x != 0)
    if op == "FreeBlocks" and "no-underflow-check" not in bugs:
        ok.append(z3.Or(x == 0, z3.Select(s.ref, x) >= 1))
    if op == "UnpinBlocks":
        ok.append(z3.Select(s.ref, x) >= 1)
    if op == "CacheBlocks":
        ok += [z3.Select(s.ref, x) >= 1, z3.Not(z3.Select(s.keyed, x))]
    return z3.And(ok)


def closed_checks(op: str, a: symlists.LArgs, caching: Any) -> Any:
    return z3.And(a.m == a.km, caching) if op == "CacheBlocks" else z3.BoolVal(True)


def atomic_obligations(
    op: str, bugs: frozenset[str] = frozenset(), max_m: int | None = None
) -> list[tuple[str, str, list[Any], Any, Any]]:
    """:func:`symlists.atomic_obligations` on the sorted state: loop init, step, exit."""
    N = z3.Int("N")
    caching = z3.Bool("caching")
    a = symlists.fresh_largs("a")
    s = fresh_sstate("s")
    base = [N >= 1, a.kind == OPK[op], a.m >= 0, a.km >= 0, cache_inv(N, s)]
    if max_m is not None:
        base.append(a.m <= max_m)

    def inv(ok: Any, left: SState) -> Any:
        return z3.Implies(z3.Not(ok), seq(left, s))

    out: list[tuple[str, str, list[Any], Any, Any]] = []
    out.append(("ERR-ATOMIC", "loop init", base, inv(closed_checks(op, a, caching), s), (N, s, a)))
    u, v, okj, j = fresh_sstate("sj"), fresh_sstate("vj"), z3.Bool("okj"), z3.Int("j")
    x = z3.Select(a.E, j)
    g = guard(op, N, u, x, bugs)
    left = s
    if symlists.ATOMIC_MUTANT in bugs and op == "FreeBlocks":
        left = smerge(j >= 2, u, s)
    v2 = smerge(z3.And(okj, z3.Not(g)), left, v)
    hyp = [*base, j >= 0, j < a.m, x >= 0, x <= N, inv(okj, v)]
    out.append(("ERR-ATOMIC", "loop step", hyp, inv(z3.And(okj, g), v2), (N, u, a, j)))
    um, vm, okm = fresh_sstate("sm"), fresh_sstate("vm"), z3.Bool("okm")
    post = smerge(okm, um, vm)  # (an accepted call's post-state: the loop's last one)
    goal = z3.Implies(z3.Not(okm), seq(post, s))
    out.append(("ERR-ATOMIC", "loop exit", [*base, inv(okm, vm)], goal, (N, s, a)))
    if "hyp-false" in bugs:
        out = [(r, c, [*h, z3.BoolVal(False)], gl, y) for r, c, h, gl, y in out]
    return out


def atomic_goals(
    ops: tuple[str, ...] = symlists.LIST_OPS,
    cases: tuple[str, ...] | None = None,
    bugs: frozenset[str] = frozenset(),
    timeout_ms: int = 60000,
    refute: bool = False,
    max_m: int | None = None,
    seed: int = 0,
) -> list[symlists.Goal]:
    out: list[symlists.Goal] = []
    for op in ops:
        for r, case, hyp, goal, ctx in atomic_obligations(op, bugs, max_m):
            if cases is not None and case not in cases:
                continue
            with named(f"symsorts: {r} / {op} / {case}"):
                status, dt, m = symlists._ask(hyp, goal, ctx[0], timeout_ms, refute, seed)
            out.append(symlists.Goal(r, op, case, status, dt, m, ctx))
            if refute and status == "refuted":
                return out
    return out


def unpin_body(s: SState, a: symlists.LArgs, j: Any, bugs: frozenset[str]) -> SState:
    """unpin_blocks' entry ``j`` (:func:`symlists.body`, sorted): one reference less, the
    watcher ``a.w`` (of sort Watcher) pending on the block unless it already is, the
    block queued at the back if it reaches ref_cnt 0."""
    x = z3.Select(a.E, j)
    w = a.w
    r = z3.Select(s.ref, x) - 1
    pw = z3.Select(s.pend, w)
    already = z3.Select(pw, x)
    wb = z3.Const("u_w", WATCHER)
    first = z3.Not(z3.Exists([wb], z3.Select(z3.Select(s.pend, wb), x)))
    pend = z3.Store(s.pend, w, z3.Store(pw, x, True))
    if WATCH_MUTANT in bugs:  # the new watcher replaces the ones pending on the block
        pend = z3.Lambda([wb], z3.Store(z3.Select(s.pend, wb), x, wb == w))
        pend = z3.If(already, s.pend, pend)
    wst = z3.If(already, s.wst, z3.Store(s.wst, w, z3.Store(z3.Select(s.wst, w), x, s.clock)))
    t = replace(
        s,
        ref=z3.Store(s.ref, x, r),
        pend=pend,
        wst=wst,
        bst=z3.If(first, z3.Store(s.bst, x, s.clock), s.bst),
        reg=z3.If(already, s.reg, z3.Store(s.reg, x, z3.Select(s.reg, x) + 1)),
        clock=s.clock + 1,
    )
    queued: Any = q_append(Unbounded(), t, x)  # type: ignore[arg-type]
    return smerge(r == 0, queued, t)


WATCH_MUTANT = symlists.WATCH_MUTANT


def fresh_largs(name: str) -> symlists.LArgs:
    """:func:`symlists.fresh_largs` with the watcher of sort Watcher."""
    return replace(symlists.fresh_largs(name), w=z3.Const(f"{name}.w", WATCHER))


def _kept(N: Any, s: SState, u: SState, lo: int) -> Any:
    """Every watcher pending on a block (from ``lo``) before the call still is."""
    b, w = z3.Int("k_b"), z3.Const("k_w", WATCHER)
    return z3.ForAll(
        [w, b],
        z3.Implies(
            z3.And(b >= lo, b < N, z3.Select(z3.Select(s.pend, w), b)),
            z3.Select(z3.Select(u.pend, w), b),
        ),
    )


def watch_obligations(
    bugs: frozenset[str] = frozenset(),
) -> list[tuple[str, str, list[Any], Any, Any]]:
    """WATCH-FIRE of unpin_blocks as a loop on the sorted state (init, step, exit)."""
    N = z3.Int("N")
    a = fresh_largs("a")
    s = fresh_sstate("s")
    base = [N >= 1, a.kind == OPK["UnpinBlocks"], a.m >= 0, cache_inv(N, s)]
    out: list[tuple[str, str, list[Any], Any, Any]] = []
    out.append(("WATCH-FIRE", "loop init", base, _kept(N, s, s, 0), (N, s, a)))
    u, j = fresh_sstate("sj"), z3.Int("j")
    x = z3.Select(a.E, j)
    hyp = [*base, j >= 0, j < a.m, guard("UnpinBlocks", N, u, x, bugs), _kept(N, s, u, 0)]
    hyp.append(z3.And(u.L >= 0, u.L < N))
    nxt = unpin_body(u, a, j, bugs)
    out.append(("WATCH-FIRE", "loop step", hyp, _kept(N, s, nxt, 0), (N, u, a, j)))
    um = fresh_sstate("sm")
    out.append(
        ("WATCH-FIRE", "loop exit", [*base, _kept(N, s, um, 0)], _kept(N, s, um, 1), (N, s, a))
    )
    if "hyp-false" in bugs:
        out = [(r, c, [*h, z3.BoolVal(False)], gl, y) for r, c, h, gl, y in out]
    return out


def watch_goals(
    cases: tuple[str, ...] | None = None,
    bugs: frozenset[str] = frozenset(),
    timeout_ms: int = 60000,
    refute: bool = False,
    seed: int = 0,
) -> list[symlists.Goal]:
    out: list[symlists.Goal] = []
    for r, case, hyp, goal, ctx in watch_obligations(bugs):
        if cases is not None and case not in cases:
            continue
        with named(f"symsorts: {r} / UnpinBlocks / {case}"):
            status, dt, m = symlists._ask(hyp, goal, ctx[0], timeout_ms, refute, seed)
        out.append(symlists.Goal(r, "UnpinBlocks", case, status, dt, m, ctx))
        if refute and status == "refuted":
            return out
    return out


# -- witnesses, mutants, rows ----------------------------------------------------------------


def witness_goals(timeout_ms: int = 20000, n: int = 3) -> list[symlists.Goal]:
    """Each hypothesis of :func:`obligations` has a model at N = n (RES-CACHED: two blocks
    holding the queried key preferred; a loop step: a list of >= 3 entries and j = 2)."""
    out: list[symlists.Goal] = []
    for r, op, case, hyp, _goal, ctx in obligations():
        N, s = ctx[0], ctx[1]
        if op == "GetCachedBlock":
            prefer = [held(s, ctx[2], 1), held(s, ctx[2], 2)]
            prefer += [ctx[4] == 2] if case == "scan step" else []
        else:
            prefer = [ctx[2].m >= 3, *([ctx[3] == 2] if case == "loop step" else [])]
        st, dt, m = hypothesis_model([*hyp, n == N], [prefer, []], timeout_ms)
        out.append(symlists.Goal(r, op, case, st, dt, m, ctx))
    return out


def obligations(
    bugs: frozenset[str] = frozenset(),
) -> list[tuple[str, str, str, list[Any], Any, Any]]:
    """Every obligation of this module as (rule, call kind, case, hypotheses, goal, ctx):
    the z3 queries, for a second solver."""
    out = [(r, "GetCachedBlock", c, h, g, x) for r, c, h, g, x in cached_obligations(bugs)]
    for op in symlists.LIST_OPS:
        out += [(r, op, c, h, g, x) for r, c, h, g, x in atomic_obligations(op, bugs)]
    out += [(r, "UnpinBlocks", c, h, g, x) for r, c, h, g, x in watch_obligations(bugs)]
    return out


def witness_row(timeout_ms: int = 20000, n: int = 3) -> dict[str, Any]:
    """Every hypothesis has a model at N = n; its state's keys and index (what the
    hypotheses hold of it: INV-CACHE), decoded into a spec state, pass ``check_pool``;
    RES-CACHED's ghost scan ``Best[N]`` is what the spec's get_cached_block returns there."""
    from kvpool.spec import GetCachedBlock, World, check_pool

    ws = witness_goals(timeout_ms, n)
    problems: list[str] = []
    for w in ws:
        if w.status != "sat" or w.model is None:
            problems.append(f"{w.name} / {w.op} / {w.case}: hypothesis {w.status}")
            continue
        mdl, s = w.model, w.ctx[1]
        ps, names = decode_keys(mdl, n, s)
        bad = check_pool(ps)
        if bad:
            problems.append(f"{w.name} / {w.op} / {w.case}: decoded state breaks {bad[0]}")
            continue
        if w.op == "GetCachedBlock":
            qk = names.get(str(mdl.eval(w.ctx[2], model_completion=True)), "unheld")
            got = World([ps.copy()], [True]).apply(GetCachedBlock(qk)).value
            best = int(mdl.eval(z3.Select(w.ctx[3], n), model_completion=True).as_long())
            if (None if best == -1 else best) != got:
                problems.append(f"RES-CACHED / {w.case}: scan {best}, the spec's {got}")
    return dict(
        obligation=f"H satisfiable (keys and watchers as sorts, N={n})",
        kind="witness",
        technique="z3 induction",
        invariants=(),
        bounds=f"N={n}: one model per hypothesis ({len(ws)}), keys and index decoded and "
        "checked, the scan's value the spec's get_cached_block",
        status="witnessed" if not problems else "NOT-witnessed",
        seconds=sum(w.seconds for w in ws),
        replay="; ".join(problems[:3]),
    )


def _step_mutant_row(rule: str, bug: str, ask: Any, short: Any | None, note: str) -> dict[str, Any]:
    """A mutant whose loop step must be refuted here (and, with ``short``, proved with
    lists of <= 2 entries); its decoded replay is symlists' row of the same mutant (K = W
    = 2): ``note`` says so."""
    row: dict[str, Any] = dict(
        obligation=f"{rule}, keys and watchers as sorts [{bug}]",
        kind="mutant",
        technique="z3 induction",
        invariants=(rule,),
        bounds=SORTS_BOUNDS,
        status="unknown",
        seconds=0.0,
        trace=[],
        replay="",
    )
    for seed in range(3):
        step = ask(seed)
        row["seconds"] += sum(g.seconds for g in step)
        if any(g.status == "refuted" for g in step):
            row["status"], row["replay"] = "expected-refuted", f"loop step refuted; {note}"
            break
        if all(g.status == "proved" for g in step):
            row["status"] = "NOT-refuted"
            return row
    if row["status"] == "expected-refuted" and short is not None:
        gs = short()
        row["seconds"] += sum(g.seconds for g in gs)
        if not all(g.status == "proved" for g in gs):
            row["status"] = "NOT-confirmed"
            row["replay"] = "lists <= 2 should not show it, but the step is not proved there"
        else:
            row["replay"] += "; with lists <= 2 the step is proved"
    return row


def mutant_rows(timeout_ms: int = 30000) -> list[dict[str, Any]]:
    """RES-CACHED's mutant (decoded and replayed here), and the loop mutants of
    ERR-ATOMIC and WATCH-FIRE, whose steps on the sorted state must fail."""
    atomic = frozenset([symlists.ATOMIC_MUTANT])
    watch = frozenset([WATCH_MUTANT])
    replayed = "the counterexample's replay: symlists' row of this mutant (K = W = 2)"
    return [
        cached_mutant_row(timeout_ms),
        _step_mutant_row(
            "ERR-ATOMIC",
            symlists.ATOMIC_MUTANT,
            lambda seed: atomic_goals(
                ("FreeBlocks",), ("loop step",), atomic, timeout_ms, True, seed=seed
            ),
            lambda: atomic_goals(("FreeBlocks",), ("loop step",), atomic, timeout_ms, max_m=2),
            replayed,
        ),
        _step_mutant_row(
            "WATCH-FIRE",
            WATCH_MUTANT,
            lambda seed: watch_goals(("loop step",), watch, timeout_ms, True, seed),
            None,
            replayed,
        ),
    ]


def proof_rows(timeout_ms: int = 60000) -> list[dict[str, Any]]:
    """One row per rule proved here, and the scan's agreement with model.cached_block."""
    out: list[dict[str, Any]] = []
    parts: list[tuple[str, str, Callable[..., list[symlists.Goal]]]] = [
        ("RES-CACHED", "RES-CACHED, get_cached_block's scan by its recurrence", cached_goals),
        ("ERR-ATOMIC", "ERR-ATOMIC, list calls as loops, keys and watchers as sorts", atomic_goals),
        ("WATCH-FIRE", "WATCH-FIRE, unpin_blocks as a loop, watchers as a sort", watch_goals),
    ]
    for rule, title, fn in parts:
        gs = fn(timeout_ms=timeout_ms)
        status, bad = goals_status(gs)
        out.append(
            dict(
                obligation=title,
                kind="inductive",
                technique="z3 induction",
                invariants=(rule,),
                bounds=f"{SORTS_BOUNDS}; {len(gs)} queries",
                status=status,
                seconds=sum(g.seconds for g in gs),
                replay="; ".join(f"not proved: {g.op} {g.case} ({g.status})" for g in bad),
            )
        )
    ag = scan_agreement_goals(timeout_ms=timeout_ms)
    bad = [g for g in ag if g.status != "proved"]
    out.append(
        dict(
            obligation="RES-CACHED's scan == model.cached_block (N = 1..4)",
            kind="differential",
            technique="z3 induction",
            invariants=(),
            bounds="N = 1..4, keys 1..2 as two distinct constants of sort Key",
            status="agree"
            if not bad
            else "unknown"
            if all(g.status == "unknown" for g in bad)
            else "disagree",
            seconds=sum(g.seconds for g in ag),
            replay="; ".join(f"{g.case}: {g.status}" for g in bad),
        )
    )
    return out


def rows(timeout_ms: int = 60000, mutants: bool = True) -> list[dict[str, Any]]:
    """Every row of this module: the proofs, the scan's agreement, the witnesses, and
    (``mutants``) the mutants."""
    out = [*proof_rows(timeout_ms), witness_row()]
    return out + (mutant_rows(timeout_ms // 4) if mutants else [])
