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
* **WATCH-FIRE** of the list-taking calls (:func:`watch_goals`): each loop, on this
  state (:func:`sbody`), keeps every watcher pending that was (the calls fire none, so
  none may stop pending; unpin_blocks is the one that changes the pending sets).
* **S's parts INV-REF, PERM, INV-NULL, INV-CACHE, INV-EVENTS** for the five list-taking
  calls (:func:`part_goals`): :func:`strong` states them over the sorts (INV-CACHE: for
  every block and every key, the index holds the block under the key iff it is the
  block's key; INV-EVENTS: for every key, the consumer's view holds it iff some block
  does; INV-NULL: no key, no watcher on block 0), and each call's loop (:func:`sbody`,
  symlists' body on this state) preserves each, loop init, step and exit, as in
  symlists. :func:`agreement_goals` ties the sorted loop to symlists': on states related
  key by key and watcher by watcher (the sorts holding exactly two of each), one entry's
  guard, body and finish give related states, for every N.
* **ORD-RELEASE, ORD-UNPIN** (:func:`rule_goals`): symlists' ghosts, shape and loop facts
  on this state and its loop; their mutants refuted with the loop unrolled to 3 entries
  and replayed on the buggy spec.

* **WATCH-PER-BLOCK** (:data:`WATCH_PART`, :func:`watch_part_rows`): the count of the
  watchers pending on a block through the block's pending watchers listed (a ghost
  bijection with ``0..np[b]``).

Which command runs what (:func:`rows`): ``make verify`` RES-CACHED, ERR-ATOMIC and
WATCH-FIRE (about 1.5 CPU s); ``make proofs-deep`` the rest too (about 30 CPU s more,
over ``make verify``'s budget; ``state``). Not done with sorts: the counts INV-CONSERVE
and INV-WATCH (their ghost sums over the blocks are :mod:`~kvpool.proofs.counting`'s),
and every call kind that takes no list (:mod:`~kvpool.proofs.induction`,
:mod:`~kvpool.proofs.steprules`, :mod:`~kvpool.proofs.counting`): those keep K = W = 2.
Each hypothesis here has a model (:func:`witness_row`, :func:`watch_part_rows`), decoded
into a spec state that passes ``check_pool`` (the invariants its hypothesis claims).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

import z3  # type: ignore[import-untyped]

from . import props, symlists
from .model import (
    OPK,
    Config,
    Finite,
    Goal,
    State,
    Unbounded,
    all_proved,
    any_refuted,
    blank_mutant_row,
    cached_block,
    fresh_state,
    goal_row,
    goals_ladder,
    goals_status,
    hypothesis_model,
    isolated_check,
    iv,
    name_rows,
    named,
    not_proved_op,
    q_append,
    q_remove,
    robust_check,
)

I = z3.IntSort()  # noqa: E741
B = z3.BoolSort()
KEY = z3.DeclareSort("Key")
WATCHER = z3.DeclareSort("Watcher")

SORTS_MARK = "keys and watcher ids uninterpreted sorts"
"""What a row's bounds say when it is proved here (``make verify``'s cells read it)."""
SORTS_BOUNDS = f"every N, every list length; {SORTS_MARK}"
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
    np: Any  # Int -> Int: how many watchers are pending on the block (ghost)
    wat: Any  # Int -> Int -> Watcher: the block's pending watchers listed (ghost)
    wpos: Any  # Int -> Watcher -> Int: a pending watcher's place in that list (ghost)


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
        np=z3.Const(f"{name}.np", arr),
        wat=z3.Array(f"{name}.wat", I, z3.ArraySort(I, WATCHER)),
        wpos=z3.Array(f"{name}.wpos", I, z3.ArraySort(WATCHER, I)),
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
) -> list[Goal]:
    """RES-CACHED's obligations proved (``refute``: looked for at N = 1..6)."""
    out: list[Goal] = []
    for r, case, hyp, goal, ctx in cached_obligations(bugs):
        if cases is not None and case not in cases:
            continue
        with named(f"symsorts: {r} / {case}"):
            status, dt, m = symlists._ask(hyp, goal, ctx[0], timeout_ms, refute, seed)
        out.append(Goal(r, case, status, dt, m, ctx, op="GetCachedBlock"))
        if refute and status == "refuted":
            return out
    return out


def scan_agreement_goals(
    ns: tuple[int, ...] = (1, 2, 3, 4), timeout_ms: int = 30000, bugs: frozenset[str] = frozenset()
) -> list[Goal]:
    """At each N of ``ns``: the recurrence's ``Best[N]`` (``bugs`` go into it only) is
    ``model.cached_block`` of the same state (its keys 1..2 and per-key index arrays,
    the state here reading key j as the j-th of two distinct constants of sort Key)."""
    out: list[Goal] = []
    for n in ns:
        cfg = Config(Finite(n), K=2, W=2)
        ms = fresh_state(cfg, "f")
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
        out.append(Goal("agreement", f"N={n}", status, dt, m, None, op="GetCachedBlock"))
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
    row = blank_mutant_row(
        f"RES-CACHED, scan over the blocks [{SCAN_MUTANT}]", ("RES-CACHED",), SORTS_BOUNDS
    )
    step = symlists.refuted_step(
        row,
        lambda limit, seed: cached_goals(("scan step",), bugs, limit, True, seed),
        timeout_ms,
        3,
    )
    if step is None:
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


def atomic_obligations(
    op: str, bugs: frozenset[str] = frozenset(), max_m: int | None = None
) -> list[tuple[str, str, list[Any], Any, Any]]:
    """:func:`symlists.atomic_obligations` on the sorted state: loop init, step, exit."""
    N = z3.Int("N")
    a = fresh_sargs("a")
    s = fresh_sstate("s")
    base = [N >= 1, a.kind == OPK[op], a.m >= 0, a.km >= 0, cache_inv(N, s)]
    if max_m is not None:
        base.append(a.m <= max_m)

    def inv(ok: Any, left: SState) -> Any:
        return z3.Implies(z3.Not(ok), seq(left, s))

    out: list[tuple[str, str, list[Any], Any, Any]] = []
    out.append(("ERR-ATOMIC", "loop init", base, inv(sclosed(op, a, bugs), s), (N, s, a)))
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
) -> list[Goal]:
    out: list[Goal] = []
    for op in ops:
        for r, case, hyp, goal, ctx in atomic_obligations(op, bugs, max_m):
            if cases is not None and case not in cases:
                continue
            with named(f"symsorts: {r} / {op} / {case}"):
                status, dt, m = symlists._ask(hyp, goal, ctx[0], timeout_ms, refute, seed)
            out.append(Goal(r, case, status, dt, m, ctx, op=op))
            if refute and status == "refuted":
                return out
    return out


def unpin_body(
    s: SState, a: symlists.LArgs, j: Any, bugs: frozenset[str], L0: Any = None
) -> SState:
    """unpin_blocks' entry ``j`` (:func:`symlists.body`, sorted): one reference less, the
    watcher ``a.w`` (of sort Watcher) pending on the block unless it already is, the
    block queued at the back if it reaches ref_cnt 0."""
    x = z3.Select(a.E, j)
    w = a.w
    r = z3.Select(s.ref, x) - 1
    pw = z3.Select(s.pend, w)
    already = z3.Select(pw, x)
    if "unpin-dup-watcher" in bugs:  # registered again though already pending
        already = z3.BoolVal(False)
    wb = z3.Const("u_w", WATCHER)
    first = z3.Not(z3.Exists([wb], z3.Select(z3.Select(s.pend, wb), x)))
    pend = z3.Store(s.pend, w, z3.Store(pw, x, True))
    if WATCH_MUTANT in bugs:  # the new watcher replaces the ones pending on the block
        pend = z3.Lambda([wb], z3.Store(z3.Select(s.pend, wb), x, wb == w))
        pend = z3.If(already, s.pend, pend)
    wst = z3.If(already, s.wst, z3.Store(s.wst, w, z3.Store(z3.Select(s.wst, w), x, s.clock)))
    t = replace(
        s,
        ref=Unbounded().store(s.ref, x, r, I),  # (a lambda, as symlists.body: see sbody)
        pend=pend,
        wst=wst,
        bst=z3.If(first, z3.Store(s.bst, x, s.clock), s.bst),
        reg=z3.If(already, s.reg, z3.Store(s.reg, x, z3.Select(s.reg, x) + 1)),
        clock=s.clock + 1,
        # the new watcher goes at the end of the block's list of pending watchers
        np=z3.If(already, s.np, z3.Store(s.np, x, z3.Select(s.np, x) + 1)),
        wat=z3.If(
            already,
            s.wat,
            z3.Store(s.wat, x, z3.Store(z3.Select(s.wat, x), z3.Select(s.np, x), w)),
        ),
        wpos=z3.If(
            already,
            s.wpos,
            z3.Store(s.wpos, x, z3.Store(z3.Select(s.wpos, x), w, z3.Select(s.np, x))),
        ),
    )
    queued: Any = q_append(Unbounded(), t, x)  # type: ignore[arg-type]
    if "unpin-reversed" in bugs and L0 is not None:  # each ahead of the ones before it
        queued = symlists.q_insert(Unbounded(), t, x, L0)  # type: ignore[arg-type]
    released = z3.BoolVal(True) if "unpin-append-always" in bugs else r == 0
    return smerge(released, queued, t)


WATCH_MUTANT = symlists.WATCH_MUTANT


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
    op: str = "UnpinBlocks", bugs: frozenset[str] = frozenset()
) -> list[tuple[str, str, list[Any], Any, Any]]:
    """WATCH-FIRE of a list-taking call as a loop on the sorted state (init, step, exit):
    the call fires no watcher, so every watcher pending before it still is after it
    (:func:`symlists.watch_obligations`, sorted)."""
    N = z3.Int("N")
    a = fresh_sargs("a")
    s = fresh_sstate("s")
    base = [N >= 1, a.kind == OPK[op], sclosed(op, a, bugs), a.m >= 0, a.km >= 0]
    base.append(cache_inv(N, s))
    out: list[tuple[str, str, list[Any], Any, Any]] = []
    out.append(("WATCH-FIRE", "loop init", base, _kept(N, s, s, 0), (N, s, a)))
    u, j, f, L0 = fresh_sstate("sj"), z3.Int("j"), z3.Int("f"), z3.Int("L0")
    x = z3.Select(a.E, j)
    hyp = [*base, j >= 0, j < a.m, x >= 0, x <= N, guard(op, N, u, x, bugs)]
    hyp += [*_facts(op, f, L0, u), _kept(N, s, u, 0)]
    nxt, _f = sbody(op, N, u, f, L0, a, j, bugs)
    out.append(("WATCH-FIRE", "loop step", hyp, _kept(N, s, nxt, 0), (N, u, a, j)))
    um = fresh_sstate("sm")
    post = sfinish(op, um, a, bugs)
    out.append(
        ("WATCH-FIRE", "loop exit", [*base, _kept(N, s, um, 0)], _kept(N, s, post, 1), (N, s, a))
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
    ops: tuple[str, ...] = symlists.LIST_OPS,
) -> list[Goal]:
    out: list[Goal] = []
    for op in ops:
        for r, case, hyp, goal, ctx in watch_obligations(op, bugs):
            if cases is not None and case not in cases:
                continue
            with named(f"symsorts: {r} / {op} / {case}"):
                status, dt, m = symlists._ask(hyp, goal, ctx[0], timeout_ms, refute, seed)
            out.append(Goal(r, case, status, dt, m, ctx, op=op))
            if refute and status == "refuted":
                return out
    return out


# -- witnesses, mutants, rows ----------------------------------------------------------------


def witness_goals(timeout_ms: int = 20000, n: int = 3) -> list[Goal]:
    """Each hypothesis of :func:`obligations` has a model at N = n (RES-CACHED: two blocks
    holding the queried key preferred; a loop step: a list of >= 3 entries and j = 2)."""
    out: list[Goal] = []
    for r, op, case, hyp, _goal, ctx in obligations(parts=False):  # (parts: below)
        N, s = ctx[0], ctx[1]
        if op == "GetCachedBlock":
            prefer = [held(s, ctx[2], 1), held(s, ctx[2], 2)]
            prefer += [ctx[4] == 2] if case == "scan step" else []
        else:
            prefer = [ctx[2].m >= 3, *([ctx[3] == 2] if case == "loop step" else [])]
        st, dt, m = hypothesis_model([*hyp, n == N], [prefer, []], timeout_ms)
        out.append(Goal(r, case, st, dt, m, ctx, op=op))
    return out


def obligations(
    bugs: frozenset[str] = frozenset(), parts: bool = True
) -> list[tuple[str, str, str, list[Any], Any, Any]]:
    """Every obligation of this module as (rule, call kind, case, hypotheses, goal, ctx):
    the z3 queries, for a second solver (``parts``: S's parts' and the ordering rules'
    too; the agreements are :func:`agreement_obligations` and
    :func:`scan_agreement_goals`)."""
    out = [(r, "GetCachedBlock", c, h, g, x) for r, c, h, g, x in cached_obligations(bugs)]
    for op in symlists.LIST_OPS:
        out += [(r, op, c, h, g, x) for r, c, h, g, x in atomic_obligations(op, bugs)]
    for op in symlists.LIST_OPS:
        out += [(r, op, c, h, g, x) for r, c, h, g, x in watch_obligations(op, bugs)]
    for op in symlists.LIST_OPS if parts else ():
        out += [(r, op, c, h, g, x) for r, c, h, g, x in part_obligations(op, bugs)]
    for rule, op in symlists.RULE_OPS.items() if parts else ():
        out += [(r, op, c, h, g, x) for r, c, h, g, x in rule_obligations(rule, bugs)]
    return out


def witness_row(timeout_ms: int = 20000, n: int = 3, state: bool = True) -> dict[str, Any]:
    """Every hypothesis has a model at N = n; its state's keys and index (what the
    hypotheses hold of it: INV-CACHE), decoded into a spec state, pass ``check_pool``;
    RES-CACHED's ghost scan ``Best[N]`` is what the spec's get_cached_block returns there.
    With ``state``, S's parts' and the ordering rules' hypotheses too (whole states)."""
    from kvpool.spec import GetCachedBlock, World, check_pool

    ws = witness_goals(timeout_ms, n)
    parts = part_witness_goals(timeout_ms, n) if state else []
    rules = rule_witness_goals(timeout_ms, n) if state else []
    problems = part_witness_problems(parts, n)
    problems += part_witness_problems(rules, n, RULE_WITNESS_PARTS)
    parts += rules
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
        bounds=f"N={n}: one model per hypothesis ({len(ws) + len(parts)}), decoded and "
        "checked (S's: the whole state; the others': keys and index), the scan's value the "
        "spec's get_cached_block",
        status="witnessed" if not problems else "NOT-witnessed",
        seconds=sum(w.seconds for w in [*ws, *parts]),
        replay="; ".join(problems[:3]),
    )


def _step_mutant_row(
    rule: str,
    bug: str,
    ask: Callable[[int, int], list[Goal]],
    short: Callable[[int, int], list[Goal]] | None,
    note: str,
    timeout_ms: int,
) -> dict[str, Any]:
    """A mutant whose loop step must be refuted here (``ask(limit_ms, seed)``: asked at z3
    seeds 0..2, each with ``timeout_ms``, until refuted or proved) and, with ``short``,
    proved with lists of <= 2 entries (asked once: :func:`symlists.short_proved`); its
    decoded replay is symlists' row of the same mutant (K = W = 2): ``note`` says so."""
    row = blank_mutant_row(f"{rule}, keys and watchers as sorts [{bug}]", (rule,), SORTS_BOUNDS)
    step, dt = goals_ladder(
        ask, lambda gs: any_refuted(gs) or all_proved(gs), timeout_ms, 3, cap_ms=timeout_ms
    )
    row["seconds"] += dt
    if any_refuted(step):
        row["status"], row["replay"] = "expected-refuted", f"loop step refuted; {note}"
    elif all_proved(step):
        row["status"] = "NOT-refuted"
        return row
    refuted = row["status"] == "expected-refuted"
    if refuted and short is not None and symlists.short_proved(row, short, timeout_ms, 1):
        row["replay"] += "; with lists <= 2 the step is proved"
    return row


def mutant_rows(timeout_ms: int = 30000, state: bool = True) -> list[dict[str, Any]]:
    """RES-CACHED's mutant (decoded and replayed here), and the loop mutants of
    ERR-ATOMIC and WATCH-FIRE, whose steps on the sorted state must fail; with ``state``
    S's parts' and the ordering rules' mutants too."""
    atomic = frozenset([symlists.ATOMIC_MUTANT])
    watch = frozenset([WATCH_MUTANT])
    replayed = "the counterexample's replay: symlists' row of this mutant (K = W = 2)"
    return [
        *(part_mutant_rows(timeout_ms) + rule_mutant_rows(timeout_ms) if state else []),
        cached_mutant_row(timeout_ms),
        _step_mutant_row(
            "ERR-ATOMIC",
            symlists.ATOMIC_MUTANT,
            lambda limit, seed: atomic_goals(
                ("FreeBlocks",), ("loop step",), atomic, limit, True, seed=seed
            ),
            lambda limit, seed: atomic_goals(
                ("FreeBlocks",), ("loop step",), atomic, limit, max_m=2, seed=seed
            ),
            replayed,
            timeout_ms,
        ),
        _step_mutant_row(
            "WATCH-FIRE",
            WATCH_MUTANT,
            lambda limit, seed: watch_goals(
                ("loop step",), watch, limit, True, seed, ops=("UnpinBlocks",)
            ),
            None,
            replayed,
            timeout_ms,
        ),
    ]


def proof_rows(timeout_ms: int = 60000, state: bool = True) -> list[dict[str, Any]]:
    """One row per rule proved here, the sorted loops' agreement with symlists', and the
    scan's with model.cached_block; with ``state`` the ordering rules and S's parts
    too."""
    out: list[dict[str, Any]] = []
    parts: list[tuple[str, str, Callable[..., list[Goal]]]] = [
        ("RES-CACHED", "RES-CACHED, get_cached_block's scan by its recurrence", cached_goals),
        ("ERR-ATOMIC", "ERR-ATOMIC, list calls as loops, keys and watchers as sorts", atomic_goals),
        ("WATCH-FIRE", "WATCH-FIRE, list calls as loops, keys and watchers as sorts", watch_goals),
    ]
    if state:
        parts += [
            (
                "ORD-RELEASE",
                "ORD-RELEASE, its call as a loop, keys and watchers as sorts",
                rule_goals,
            ),
            ("ORD-UNPIN", "ORD-UNPIN, its call as a loop, keys and watchers as sorts", rule_goals),
        ]
    asked: dict[Callable[..., list[Goal]], list[Goal]] = {}
    for rule, title, fn in parts:
        if fn not in asked:  # (rule_goals answers both ordering rules: asked once)
            asked[fn] = fn(timeout_ms=timeout_ms)
        gs = [g for g in asked[fn] if g.name == rule]
        bounds = f"{SORTS_BOUNDS}; {len(gs)} queries"
        out.append(goal_row(title, gs, bounds, (rule,), not_proved_op))
    if state:
        per_call = f"{SORTS_BOUNDS}; {len(symlists.LIST_OPS)} list calls x loop init/step/exit"
        out += name_rows(
            part_goals(timeout_ms=timeout_ms),
            SORTED_PARTS,
            lambda part: f"S and T => {part}, list calls as loops, keys and watchers as sorts",
            lambda part, mine: per_call,
            claims,
            not_proved_op,
        )
    loops = agreement_goals(timeout_ms=timeout_ms)
    bad = [g for g in loops if g.status != "proved"]
    out.append(
        dict(
            obligation="sorted list loops == symlists' loops (keys, watcher ids: 2 each)",
            kind="differential",
            technique="z3 induction",
            invariants=(),
            bounds="every N, one entry of each list call: guards, bodies and finish agree on "
            "states related key by key and watcher by watcher",
            status="agree"
            if not bad
            else "disagree"
            if any(g.status == "refuted" for g in bad)
            else "unknown",
            seconds=sum(g.seconds for g in loops),
            replay="; ".join(f"{g.op}: {g.status}" for g in bad),
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


def rows(timeout_ms: int = 60000, mutants: bool = True, state: bool = True) -> list[dict[str, Any]]:
    """Every row of this module: the proofs, the agreements, the witnesses, and
    (``mutants``) the mutants. Without ``state`` (``make verify``: its budget) RES-CACHED,
    ERR-ATOMIC and WATCH-FIRE only; with it (``make proofs-deep``) S's parts, the
    ordering rules and :data:`WATCH_PART` too (about 10 CPU s more, and 20 for
    WATCH_PART's witnesses)."""
    out = [*proof_rows(timeout_ms, state), witness_row(state=state)]
    out += mutant_rows(timeout_ms // 4, state) if mutants else []
    return out + (watch_part_rows(timeout_ms) if state else [])


# -- the strengthened invariant's parts and the list calls' loops, with the sorts ------------


@dataclass
class SArgs:
    """A list-taking call on the sorted state: :class:`symlists.LArgs` with the keys
    ``KS`` of sort Key and the watcher ``w`` of sort Watcher; ``caching``, ``events`` the
    pool's switches."""

    kind: Any
    m: Any
    E: Any
    KS: Any
    km: Any
    ef: Any
    w: Any
    caching: Any
    events: Any


def fresh_sargs(name: str) -> SArgs:
    return SArgs(
        z3.Int(f"{name}.kind"),
        z3.Int(f"{name}.m"),
        z3.Array(f"{name}.E", I, I),
        z3.Array(f"{name}.KS", I, KEY),
        z3.Int(f"{name}.km"),
        z3.Bool(f"{name}.ef"),
        z3.Const(f"{name}.w", WATCHER),
        z3.Bool("caching"),
        z3.Bool("events"),
    )


SORTED_PARTS: tuple[str, ...] = ("INV-REF", "PERM", "INV-NULL", "INV-CACHE", "INV-EVENTS")
"""The parts of S stated with the sorts (``make verify``)."""
WATCH_PART = "WATCH-PER-BLOCK"
"""S's part that counts the watchers pending on a block, a cardinality over a sort of
unknown size: stated with the block's pending watchers listed (``wat[b][0..np[b])``,
the spec's own list) and each one's place in the list (``wpos``), a bijection between the
pending set and ``0..np[b]``, so that ``np[b]`` is that count. Its loops are proved in
well under a second, but z3 took tens of CPU seconds to find its hypotheses' models
next to the rest of S: ``make proofs-deep`` only (:func:`watch_part_rows`)."""

SORTED_SUPPORT: dict[str, tuple[str, ...]] = {
    p: symlists.SUPPORT[p] for p in (*SORTED_PARTS, WATCH_PART)
}


def claims(part: str) -> tuple[str, ...]:
    """The invariants a sorted part's row stands for: :data:`props.STRONG_PARTS`' but
    INV-CONSERVE (a count: its every-N proof is :mod:`~kvpool.proofs.counting`'s ghost
    sums, on K = W = 2, not redone here)."""
    return tuple(i for i in props.STRONG_PARTS[part] if i != "INV-CONSERVE")


def strong(N: Any, s: SState, a: SArgs) -> dict[str, Any]:
    """S's parts, sorted (:func:`kvpool.proofs.props.strong` with the per-key and
    per-watcher arrays over the sorts)."""
    d = Unbounded(N)
    cfg = Config(d, K=0, W=0)
    b, k, w = z3.Int("s_b"), z3.Const("s_k", KEY), z3.Const("s_w", WATCHER)
    x = z3.Int("s_x")
    rng = z3.And(b >= 0, b < N)

    def wpos(blk: Any, wt: Any) -> Any:
        return z3.Select(z3.Select(s.wpos, blk), wt)

    return {
        "INV-REF": z3.ForAll([b], z3.Implies(rng, z3.Select(s.ref, b) >= 0)),
        "PERM": props.perm(cfg, s),
        "INV-NULL": z3.And(
            z3.Select(s.ref, 0) == 0,
            z3.Not(z3.Select(s.keyed, 0)),
            z3.ForAll([k], z3.Not(held(s, k, 0))),
            z3.ForAll([w], z3.Not(z3.Select(z3.Select(s.pend, w), 0))),
        ),
        "WATCH-PER-BLOCK": z3.And(
            z3.ForAll(
                [b],
                z3.Implies(
                    rng,
                    z3.And(
                        z3.Select(s.np, b) >= 0,
                        z3.Select(s.reg, b) == z3.Select(s.fb, b) + z3.Select(s.np, b),
                    ),
                ),
            ),
            z3.ForAll(
                [b, w],
                z3.Implies(
                    z3.And(rng, z3.Select(z3.Select(s.pend, w), b)),
                    z3.And(
                        wpos(b, w) >= 0,
                        wpos(b, w) < z3.Select(s.np, b),
                        z3.Select(z3.Select(s.wat, b), wpos(b, w)) == w,
                    ),
                ),
            ),
            z3.ForAll(
                [b, x],
                z3.Implies(
                    z3.And(rng, x >= 0, x < z3.Select(s.np, b)),
                    z3.And(
                        z3.Select(z3.Select(s.pend, z3.Select(z3.Select(s.wat, b), x)), b),
                        wpos(b, z3.Select(z3.Select(s.wat, b), x)) == x,
                    ),
                ),
            ),
        ),
        "INV-CACHE": z3.ForAll(
            [b],
            z3.Implies(
                rng,
                z3.And(
                    z3.Implies(z3.Not(a.caching), z3.Not(z3.Select(s.keyed, b))),
                    z3.ForAll(
                        [k],
                        held(s, k, b) == z3.And(z3.Select(s.keyed, b), z3.Select(s.key, b) == k),
                    ),
                ),
            ),
        ),
        "INV-EVENTS": z3.If(
            a.events,
            z3.ForAll(
                [k],
                z3.Select(s.view, k) == z3.Exists([x], z3.And(x >= 0, x < N, held(s, k, x))),
            ),
            z3.And(s.nev == 0, z3.ForAll([k], z3.Not(z3.Select(s.view, k)))),
        ),
    }


def _holder_left(N: Any, idx_k: Any) -> Any:
    b = z3.Int("h_b")
    return z3.Exists([b], z3.And(b >= 1, b < N, z3.Select(idx_k, b)))


def sbody(
    op: str, N: Any, u: SState, f: Any, L0: Any, a: SArgs, j: Any, bugs: frozenset[str]
) -> tuple[SState, Any]:
    """One entry of the call's loop on the sorted state (:func:`symlists.body`): the
    state after entry ``j``, and FRONT's count so far (free_blocks)."""
    d = Unbounded(N)
    x = z3.Select(a.E, j)
    t = u
    if op == "FreeBlocks":
        live = x != 0
        r = z3.Select(t.ref, x) - 1
        t = replace(t, ref=z3.If(live, d.store(t.ref, x, r, I), t.ref))
        zero = z3.And(live, r == 0)
        if "free-third-unqueued" in bugs:
            zero = z3.And(zero, j != 2)
        ef = z3.BoolVal(False) if "evict-first-ignored" in bugs else a.ef
        to_front = z3.Or(z3.Not(z3.Select(t.keyed, x)), z3.Not(a.caching), ef)
        at = iv(0) if "front-reversed" in bugs else f
        front: Any = symlists.q_insert(d, t, x, at)  # type: ignore[arg-type]
        back: Any = q_append(d, t, x)  # type: ignore[arg-type]
        t = smerge(z3.And(zero, to_front), front, smerge(z3.And(zero, z3.Not(to_front)), back, t))
        return t, f + z3.If(z3.And(zero, to_front), iv(1), iv(0))
    if op == "Touch":
        live = z3.BoolVal(True) if "touch-null" in bugs else x != 0
        r = z3.Select(t.ref, x)
        if "touch-no-remove" not in bugs:
            out: Any = q_remove(d, t, x)  # type: ignore[arg-type]
            t = smerge(z3.And(live, r == 0, x != 0), out, t)
        t = replace(t, ref=z3.If(live, d.store(t.ref, x, r + 1, I), t.ref))
        return t, f
    if op == "UnpinBlocks":
        sa = symlists.LArgs(a.kind, a.m, a.E, a.KS, a.km, a.ef, a.w)
        return unpin_body(t, sa, j, bugs, L0), f
    if op == "CacheBlocks":
        k = z3.Select(a.KS, j)
        idx = t.idx
        if "cache-skips-index" not in bugs:
            idx = z3.Store(t.idx, k, z3.Store(z3.Select(t.idx, k), x, True))
        view = t.view
        if "stored-event-missing" not in bugs:
            view = z3.If(a.events, z3.Store(t.view, k, True), t.view)
        t = replace(
            t,
            keyed=z3.Store(t.keyed, x, True),
            key=z3.Store(t.key, x, k),
            kst=z3.Store(t.kst, x, t.clock),
            idx=idx,
            view=view,
            clock=t.clock + 1,
        )
        return t, f
    if op == "EvictBlocks":
        had = z3.Select(t.keyed, x)
        kx = z3.Select(t.key, x)
        old = z3.Select(t.idx, kx)
        new = old if "evict-keeps-index" in bugs else z3.Store(old, x, False)
        idx = z3.If(had, z3.Store(t.idx, kx, new), t.idx)
        gone = had if "removed-per-block" in bugs else z3.And(had, z3.Not(_holder_left(N, new)))
        log = z3.And(a.events, gone)
        t = replace(
            t,
            keyed=z3.Store(t.keyed, x, False),
            idx=idx,
            view=z3.If(log, z3.Store(t.view, kx, False), t.view),
            nev=t.nev + z3.If(log, iv(1), iv(0)),
        )
        return t, f
    raise ValueError(f"not a list-taking call: {op}")


def sfinish(op: str, t: SState, a: SArgs, bugs: frozenset[str]) -> SState:
    """cache_blocks logs one BlockStored for the whole call (:func:`symlists.finish`)."""
    if op == "CacheBlocks" and "stored-event-missing" not in bugs:
        return replace(t, nev=t.nev + z3.If(z3.And(a.events, a.m > 0), iv(1), iv(0)))
    return t


def sclosed(op: str, a: SArgs, bugs: frozenset[str]) -> Any:
    if op == "CacheBlocks":
        return z3.And(a.m == a.km, *([] if "cache-when-off" in bugs else [a.caching]))
    return z3.BoolVal(True)


def _facts(op: str, f: Any, L0: Any, t: SState) -> list[Any]:
    """:func:`symlists.loop_facts` on the sorted state."""
    if op == "FreeBlocks":
        return [f >= 0, f <= t.L]
    if op == "UnpinBlocks":
        return [L0 >= 0, L0 <= t.L]
    return []


def part_obligations(
    op: str,
    bugs: frozenset[str] = frozenset(),
    max_m: int | None = None,
    full: bool = False,
    parts: tuple[str, ...] = SORTED_PARTS,
) -> list[tuple[str, str, list[Any], Any, Any]]:
    """Each sorted part's loop init, step and exit for ``op`` (:func:`symlists.obligations`
    with the sorts), as (part, case, hypotheses, goal, ctx). The init's and exit's
    hypotheses hold :data:`SORTED_PARTS` (:data:`WATCH_PART`'s: itself and INV-NULL); a
    step's, its part's support (all of :data:`SORTED_PARTS` with ``full``)."""
    N = z3.Int("N")
    a = fresh_sargs("a")
    base = [N >= 1, a.kind == OPK[op], sclosed(op, a, bugs), a.m >= 0, a.km >= 0]
    if max_m is not None:
        base.append(a.m <= max_m)
    out: list[tuple[str, str, list[Any], Any, Any]] = []
    s = fresh_sstate("s")
    S0 = strong(N, s, a)

    def whole(S: dict[str, Any], p: str) -> list[Any]:
        return [S[p], S["INV-NULL"]] if p == WATCH_PART else [S[q] for q in SORTED_PARTS]

    for p in parts:  # (the loop's own facts: PERM's row proves them)
        goal = z3.And(S0[p], *([] if p == WATCH_PART else _facts(op, iv(0), s.L, s)))
        out.append((p, "loop init", [*base, *whole(S0, p)], goal, (N, s, a)))
    u, f, L0, j = fresh_sstate("sj"), z3.Int("f"), z3.Int("L0"), z3.Int("j")
    x = z3.Select(a.E, j)
    Sj = strong(N, u, a)
    step = [*base, j >= 0, j < a.m, x >= 0, x <= N, *_facts(op, f, L0, u)]
    step.append(guard(op, N, u, x, bugs))
    t, f2 = sbody(op, N, u, f, L0, a, j, bugs)
    St = strong(N, t, a)
    for p in parts:
        sup = whole(Sj, p) if full else [Sj[q] for q in SORTED_SUPPORT[p]]
        goal = z3.And(St[p], *([] if p == WATCH_PART else _facts(op, f2, L0, t)))
        out.append((p, "loop step", [*step, *sup], goal, (N, u, a, j)))
    um = fresh_sstate("sm")
    Sm = strong(N, um, a)
    post = sfinish(op, um, a, bugs)
    Sp = strong(N, post, a)
    ex = [*base, *_facts(op, z3.Int("fm"), z3.Int("L0m"), um)]
    for p in parts:
        out.append((p, "loop exit", [*ex, *whole(Sm, p)], Sp[p], (N, um, a)))
    if "hyp-false" in bugs:
        out = [(p, c, [*h, z3.BoolVal(False)], g, y) for p, c, h, g, y in out]
    return out


PROVE_SEEDS = 8
"""A sorted part's query still unknown is asked again at the next z3 seed, up to this
many, each with :data:`PROVE_SLICE_MS` (an unsat at any seed is a proof). Its proofs take
well under a second when they come; at some seeds PERM's touch and unpin_blocks steps ran
into symlists' 10 s slice (as symlists' own PERM steps do at other seeds)."""
PROVE_SLICE_MS = 2000


def _prove(
    hyp: list[Any], goal: Any, timeout_ms: int, seed: int
) -> tuple[str, float, z3.ModelRef | None]:
    # (the ladder without doubling: every rung a slice, all of them within timeout_ms)
    return robust_check(
        hyp,
        goal,
        PROVE_SLICE_MS,
        PROVE_SEEDS,
        first_seed=seed,
        cap_ms=PROVE_SLICE_MS,
        total_ms=timeout_ms,
    )


def part_goals(
    parts: tuple[str, ...] = SORTED_PARTS,
    ops: tuple[str, ...] = symlists.LIST_OPS,
    cases: tuple[str, ...] | None = None,
    bugs: frozenset[str] = frozenset(),
    timeout_ms: int = 60000,
    refute: bool = False,
    max_m: int | None = None,
    seed: int = 0,
) -> list[Goal]:
    out: list[Goal] = []
    for op in ops:
        for p, case, hyp, goal, ctx in part_obligations(op, bugs, max_m, parts=parts):
            if cases is not None and case not in cases:
                continue
            with named(f"symsorts: {p} / {op} / {case}"):
                if refute:
                    status, dt, m = symlists._ask(hyp, goal, ctx[0], timeout_ms, refute, seed)
                else:
                    status, dt, m = _prove(hyp, goal, timeout_ms, seed)
            out.append(Goal(p, case, status, dt, m, ctx, op=op))
            if refute and status == "refuted":
                return out
    return out


# -- the sorted loops against symlists' (K = W = 2) -----------------------------------------


def _related(cfg: Config, s2: State, s: SState, keys: list[Any], ws: list[Any]) -> Any:
    """The sorted state ``s`` is symlists' ``s2`` with key j (1..K) read as ``keys[j-1]``
    and watcher id i as ``ws[i]``."""
    b = z3.Int("rel_b")
    key_of = [z3.Select(s2.key, b) == j for j in range(1, len(keys) + 1)]
    c = [
        s.ref == s2.ref,
        s.kst == s2.kst,
        s.bst == s2.bst,
        s.reg == s2.reg,
        s.fb == s2.fb,
        s.q == s2.q,
        s.pos == s2.pos,
        s.L == s2.L,
        s.clock == s2.clock,
        s.nev == s2.nev,
        z3.ForAll(
            [b],
            z3.Implies(
                z3.And(b >= 0, b <= cfg.dom.N),
                z3.And(
                    z3.Select(s2.key, b) >= 0,
                    z3.Select(s2.key, b) <= len(keys),
                    z3.Select(s.keyed, b) == (z3.Select(s2.key, b) != 0),
                    *[
                        z3.Implies(kj, z3.Select(s.key, b) == k)
                        for kj, k in zip(key_of, keys, strict=True)
                    ],
                ),
            ),
        ),
    ]
    c += [z3.Select(s.idx, k) == x for k, x in zip(keys, s2.idx, strict=True)]
    c += [z3.Select(s.view, k) == v for k, v in zip(keys, s2.view, strict=True)]
    c += [z3.Select(s.pend, w) == p for w, p in zip(ws, s2.pend, strict=True)]
    c += [z3.Select(s.wst, w) == x for w, x in zip(ws, s2.wst, strict=True)]
    return z3.And(c)


def agreement_obligations(
    bugs: frozenset[str] = frozenset(),
) -> list[tuple[str, str, list[Any], Any, Any]]:
    """Per list call: on states related as :func:`_related` says (the sorts holding exactly
    two keys and two watcher ids), the sorted loop's guard, body and finish are
    symlists' (``bugs`` go into the sorted loop only)."""
    out: list[tuple[str, str, list[Any], Any, Any]] = []
    for op in symlists.LIST_OPS:
        cfg = symlists._cfg(frozenset())
        N = cfg.dom.N
        s2 = fresh_state(cfg, "k2", globals_=False)
        s = fresh_sstate("u")
        a2, a = symlists.fresh_largs("a2"), fresh_sargs("a")
        keys = [z3.Const(f"key{j}", KEY) for j in (1, 2)]
        ws = [z3.Const(f"wat{i}", WATCHER) for i in (0, 1)]
        k, w = z3.Const("any_k", KEY), z3.Const("any_w", WATCHER)
        j, f, L0 = z3.Int("j"), z3.Int("f"), z3.Int("L0")
        hyp = [
            N >= 1,
            keys[0] != keys[1],
            z3.ForAll([k], z3.Or(k == keys[0], k == keys[1])),
            ws[0] != ws[1],
            z3.ForAll([w], z3.Or(w == ws[0], w == ws[1])),
            _related(cfg, s2, s, keys, ws),
            a.E == a2.E,
            a.m == a2.m,
            a.km == a2.km,
            a.ef == a2.ef,
            a2.w >= 0,
            a2.w < 2,
            a.w == z3.If(a2.w == 0, ws[0], ws[1]),
            j >= 0,
            j < a.m,
            symlists.domain(cfg, a2, j),
            z3.Select(a.KS, j) == z3.If(z3.Select(a2.KS, j) == 1, keys[0], keys[1]),
        ]
        lp = symlists.Loop(s2, f, L0)
        x = z3.Select(a.E, j)
        t2 = symlists.body(cfg, op, lp, a2, j)
        t, f2 = sbody(op, N, s, f, L0, a, j, bugs)
        goal = z3.And(
            symlists.closed_checks(cfg, op, a2) == sclosed(op, a, bugs),
            symlists.guard(cfg, op, lp, x) == guard(op, N, s, x, bugs),
            _related(cfg, t2.s, t, keys, ws),
            t2.f == f2,
            _related(
                cfg,
                symlists.finish(cfg, op, lp, a2),
                sfinish(op, s, a, bugs),
                keys,
                ws,
            ),
        )
        out.append(("agreement", op, hyp, goal, (N, s, a, j)))
    return out


def _conjuncts(g: Any) -> list[Any]:
    out: list[Any] = []
    for c in g.children() if z3.is_and(g) else [g]:
        out += _conjuncts(c) if z3.is_and(c) else [c]
    return out


def agreement_goals(
    bugs: frozenset[str] = frozenset(),
    timeout_ms: int = 60000,
    refute: bool = False,
    ops: tuple[str, ...] = symlists.LIST_OPS,
) -> list[Goal]:
    """Each call's agreement proved (one query). With ``refute`` (a bug's search): each
    conjunct of the goal asked apart at N = 3, z3 seeds 0..3 (time doubling, to 4x),
    until one is refuted (the whole goal's equalities of arrays built from lambdas leave
    z3 "unknown" on a model)."""
    out: list[Goal] = []
    for r, op, hyp, goal, ctx in agreement_obligations(bugs):
        if op not in ops:
            continue
        name = f"symsorts: sorted loop == symlists' loop (K = W = 2) / {op}"
        if not refute:
            with named(name):
                status, dt, m = isolated_check(hyp, goal, timeout_ms)
            out.append(Goal(r, "one entry", status, dt, m, ctx, op=op))
            continue
        status, dt, m, seen = "proved", 0.0, None, set()
        for c in _conjuncts(goal):
            with named(f"{name} / a conjunct at N=3"):
                # each seed doubles the time: z3's limit is wall-clock, and a loaded
                # machine (CI's two workers) left this unknown at 5 s
                st, took, m = robust_check(
                    [*hyp, ctx[0] == 3], c, timeout_ms, 4, cap_ms=4 * timeout_ms
                )
            dt += took
            seen.add(st)
            if st == "refuted":
                status = "refuted"
                break
        if status != "refuted":
            status = "unknown" if "unknown" in seen else "proved"
        out.append(Goal(r, "one entry", status, dt, m, ctx, op=op))
    return out


def decode_sstate(mdl: z3.ModelRef, n: int, s: SState) -> Any:
    """A model's sorted state as a spec PoolState of n blocks: keys and watcher ids named
    by the model's elements of their sorts (watchers numbered in order of first
    appearance), each key's holders in kst order, each block's watchers in wst order;
    the global registration counters are the per-block ghosts' sums."""
    from kvpool.spec import PoolState

    def ev(x: Any) -> Any:
        return mdl.eval(x, model_completion=True)

    caching = z3.is_true(ev(z3.Bool("caching")))
    events = z3.is_true(ev(z3.Bool("events")))
    ps = PoolState.initial(n, caching, events)
    ps.ref = [int(ev(z3.Select(s.ref, b)).as_long()) for b in range(n)]
    L = int(ev(s.L).as_long())
    ps.free = OrderedDict.fromkeys(int(ev(z3.Select(s.q, i)).as_long()) for i in range(max(L, 0)))
    kst = [int(ev(z3.Select(s.kst, b)).as_long()) for b in range(n)]
    keys = list(mdl.get_universe(KEY) or [])
    names = {str(k): f"key{i}" for i, k in enumerate(keys)}
    for b in range(n):
        if z3.is_true(ev(z3.Select(s.keyed, b))):
            ps.key[b] = names.get(str(ev(z3.Select(s.key, b))), "key?")
    for k in keys:
        holders = [b for b in range(n) if z3.is_true(ev(held(s, k, b)))]
        if holders:
            ps.index[names[str(k)]] = dict.fromkeys(sorted(holders, key=lambda b: (kst[b], b)))
        if events and z3.is_true(ev(z3.Select(s.view, k))):
            ps.view.add(names[str(k)])
    wats = list(mdl.get_universe(WATCHER) or [])
    bst = [int(ev(z3.Select(s.bst, b)).as_long()) for b in range(n)]
    for b in sorted(range(n), key=lambda b: (bst[b], b)):
        on = [w for w in wats if z3.is_true(ev(z3.Select(z3.Select(s.pend, w), b)))]
        on.sort(key=lambda w: int(ev(z3.Select(z3.Select(s.wst, w), b)).as_long()))
        if on:
            ps.pending[b] = [[str(x) for x in wats].index(str(w)) for w in on]
    ps.registered = sum(int(ev(z3.Select(s.reg, b)).as_long()) for b in range(n))
    ps.fired = sum(int(ev(z3.Select(s.fb, b)).as_long()) for b in range(n))
    return ps


def part_witness_goals(
    timeout_ms: int = 20000, n: int = 3, parts: tuple[str, ...] = SORTED_PARTS
) -> list[Goal]:
    """Each distinct sorted part hypothesis (all of the sorted S, per call and case; or
    :data:`WATCH_PART`'s own) has a model at N = n: a list of >= 3 entries and j = 2
    preferred."""
    out: list[Goal] = []
    for op in symlists.LIST_OPS:
        seen: set[str] = set()
        for p, case, hyp, _goal, ctx in part_obligations(op, full=True, parts=parts):
            if case in seen:
                continue
            seen.add(case)
            a, u = ctx[2], ctx[1]
            prefer = [a.m >= 3, *([ctx[3] == 2] if case == "loop step" else [])]
            # a block holding a key and a watcher pending on a block, if it can be
            rich = [z3.Select(u.keyed, 1), z3.Select(z3.Select(u.pend, z3.Const("w!", WATCHER)), 2)]
            hyps = [*hyp, n == ctx[0]]
            st, dt, m = hypothesis_model(hyps, [[*prefer, *rich], prefer, []], timeout_ms)
            out.append(Goal(p, case, st, dt, m, ctx, op=op))
    return out


RULE_WITNESS_PARTS = SORTED_PARTS
"""The sorted parts a rule's witness is a model of (:func:`rule_obligations` with
``full``)."""


def rule_witness_goals(timeout_ms: int = 20000, n: int = 3) -> list[Goal]:
    """Each sorted rule hypothesis (all of the sorted S) has a model at N = n, the ghosts
    pinned to their closed form on a list of 3 entries, as symlists' witnesses do (z3
    finds no model of their recurrences alone in minutes): still models of them."""
    out: list[Goal] = []
    cfg = symlists._cfg(frozenset())
    for rule, op in symlists.RULE_OPS.items():
        for r, case, hyp, _goal, ctx in rule_obligations(rule, full=True):
            N, a, j, g, pre_state = ctx[0], ctx[2], ctx[3], ctx[4], ctx[5]
            closed = symlists._ghosts(cfg, op, pre_state, a, upto=symlists.UNROLL)
            pins = [a.m == symlists.UNROLL, g.Cnt == closed.Cnt]
            pins += [g.pre[c] == closed.pre[c] for c in g.pre]
            prefer = [*pins, *([j == 2] if j is not None else [])]
            st, dt, m = hypothesis_model([*hyp, n == N], [prefer, pins], timeout_ms)
            out.append(Goal(r, case, st, dt, m, ctx, op=op))
    return out


def part_witness_problems(
    ws: list[Goal], n: int, parts: tuple[str, ...] = SORTED_PARTS
) -> list[str]:
    """The witnesses' states decoded must pass the spec's invariants that the sorted S
    claims (all but INV-WATCH, whose count is not stated with the sorts)."""
    from kvpool.spec import check_pool

    claimed = {inv for p in parts for inv in props.STRONG_PARTS[p]}
    problems: list[str] = []
    for w in ws:
        if w.status != "sat" or w.model is None:
            problems.append(f"{w.name} / {w.op} / {w.case}: hypothesis {w.status}")
            continue
        ps = decode_sstate(w.model, n, w.ctx[1])
        bad = [v for v in check_pool(ps) if v.invariant in claimed]
        if bad:
            problems.append(f"{w.op} / {w.case}: decoded state breaks {bad[0]}")
    return problems


def part_mutant_rows(timeout_ms: int = 30000) -> list[dict[str, Any]]:
    """symlists' mutants of the list calls whose part is stated with the sorts: each must
    fail that part's loop step on the sorted state (the long-list one proved with lists
    of <= 2 there); the decoded replay of each is symlists' row (K = W = 2)."""
    rows = []
    note = "the counterexample's replay: symlists' row of this mutant (K = W = 2)"
    for bug, (part, op) in symlists.LIST_MUTANTS.items():
        if part not in SORTED_PARTS:
            continue
        b = frozenset([bug])

        def ask(
            limit: int, seed: int, part: str = part, op: str = op, b: frozenset[str] = b
        ) -> Any:
            return part_goals((part,), (op,), ("loop step",), b, limit, True, seed=seed)

        def short(
            limit: int, seed: int, part: str = part, op: str = op, b: frozenset[str] = b
        ) -> Any:
            return part_goals((part,), (op,), ("loop step",), b, limit, max_m=2, seed=seed)

        row = _step_mutant_row(
            part, bug, ask, short if bug == symlists.LONG_LIST_MUTANT else None, note, timeout_ms
        )
        row["invariants"] = claims(part)
        rows.append(row)
    return rows


# -- ORD-RELEASE and ORD-UNPIN with the sorts ------------------------------------------------


def rule_obligations(
    rule: str, bugs: frozenset[str] = frozenset(), full: bool = False
) -> list[tuple[str, str, list[Any], Any, Any]]:
    """:func:`symlists.rule_obligations` on the sorted state: the same ghosts, shape and
    loop facts (:func:`symlists._ghosts`, ``_shape``, ``_tracks``), the sorted loop's
    body; the loop step from PERM and INV-REF (sorted; all of the sorted S with
    ``full``)."""
    op = symlists.RULE_OPS[rule]
    cfg = symlists._cfg(bugs)
    N = cfg.dom.N
    a = fresh_sargs("a")
    s = fresh_sstate("s")
    sa: Any = a
    ss: Any = s
    g = symlists._ghosts(cfg, op, ss, sa)
    base = [N >= 1, a.kind == OPK[op], a.m >= 0, a.km >= 0, *g.recs]
    S = strong(N, s, a)
    # (``full``: the sorted S but WATCH_PART, whose watcher lists left z3 without a
    # model for minutes next to the ghosts; the hypothesis needs neither)
    pre = [S[p] for p in SORTED_PARTS] if full else [S["PERM"], S["INV-REF"]]
    out: list[tuple[str, str, list[Any], Any, Any]] = []

    def at(u: Any, f: Any, j: Any) -> list[Any]:
        lp: Any = symlists.Loop(u, f, s.L)
        return [
            *symlists._shape(cfg, op, ss, sa, g, lp, j),
            *symlists._tracks(cfg, op, ss, g, lp, j),
        ]

    out.append(
        (rule, "loop init", [*base, *pre], z3.And(at(s, iv(0), iv(0))), (N, s, a, None, g, s))
    )
    sj, f, j = fresh_sstate("sj"), z3.Int("f"), z3.Int("j")
    x = z3.Select(a.E, j)
    Sj = strong(N, sj, a)
    hyp = [*base, *pre, j >= 0, j < a.m, x >= 0, x <= N, *_facts(op, f, s.L, sj)]
    hyp.append(guard(op, N, sj, x, bugs))
    hyp += [Sj[p] for p in SORTED_PARTS] if full else [Sj["PERM"], Sj["INV-REF"]]
    hyp += at(sj, f, j)
    t, f2 = sbody(op, N, sj, f, s.L, a, j, bugs)
    out.append((rule, "loop step", hyp, z3.And(at(t, f2, j + 1)), (N, sj, a, j, g, s)))
    sm, fm = fresh_sstate("sm"), z3.Int("fm")
    last: Any = sfinish(op, sm, a, bugs)
    post = symlists.Loop(last, fm, s.L)
    goal = z3.And(symlists._shape(cfg, op, ss, sa, g, post, a.m))
    out.append((rule, "loop exit", [*base, *pre, *at(sm, fm, a.m)], goal, (N, s, a, None, g, s)))
    if "hyp-false" in bugs:
        out = [(r, c, [*h, z3.BoolVal(False)], gl, y) for r, c, h, gl, y in out]
    return out


def rule_goals(
    rules: tuple[str, ...] = tuple(symlists.RULE_OPS),
    cases: tuple[str, ...] | None = None,
    bugs: frozenset[str] = frozenset(),
    timeout_ms: int = 60000,
    seed: int = 0,
) -> list[Goal]:
    out: list[Goal] = []
    for rule in rules:
        for r, case, hyp, goal, ctx in rule_obligations(rule, bugs):
            if cases is not None and case not in cases:
                continue
            with named(f"symsorts: {r} / {case}"):
                status, dt, m = _prove(hyp, goal, timeout_ms, seed)
            out.append(Goal(r, case, status, dt, m, ctx, op=symlists.RULE_OPS[rule]))
    return out


def unrolled(
    op: str, N: Any, s: SState, a: SArgs, n: int, bugs: frozenset[str]
) -> tuple[SState, Any]:
    """The sorted call on at most ``n`` entries, its loop unrolled: the accepted call's
    post-state, and whether it is accepted."""
    u, f = s, iv(0)
    ok = [sclosed(op, a, bugs)]
    for j in range(n):
        live = iv(j) < a.m
        ok.append(z3.Implies(live, guard(op, N, u, z3.Select(a.E, j), bugs)))
        t, f2 = sbody(op, N, u, f, s.L, a, iv(j), bugs)
        u, f = smerge(live, t, u), z3.If(live, f2, f)
    return sfinish(op, u, a, bugs), z3.And(ok)


def unrolled_rule_goal(
    rule: str, bugs: frozenset[str], timeout_ms: int = 30000, seed: int = 0
) -> Goal:
    """The rule of an accepted call on at most :data:`symlists.UNROLL` entries, the sorted
    loop unrolled, from a state satisfying the sorted S (the ghosts in closed form):
    a refutation is a concrete state and call, for the replay."""
    op, n = symlists.RULE_OPS[rule], symlists.UNROLL
    cfg = symlists._cfg(bugs)
    N = cfg.dom.N
    s, a = fresh_sstate("s"), fresh_sargs("a")
    ss: Any = s
    sa: Any = a
    t: Any
    t, ok = unrolled(op, N, s, a, n, bugs)
    g = symlists._ghosts(cfg, op, ss, sa, upto=n)
    hyp = [a.kind == OPK[op], a.m >= 0, a.m <= n, ok, *strong(N, s, a).values()]
    hyp += [z3.And(z3.Select(a.E, j) >= 0, z3.Select(a.E, j) <= N) for j in range(n)]
    last: Any = symlists.Loop(t, iv(0), s.L)  # (the shape reads its state only)
    goal = z3.And(symlists._shape(cfg, op, ss, sa, g, last, a.m))
    status, dt, m = "unknown", 0.0, None
    for size in RULE_REFUTE_NS:
        with named(f"symsorts: {rule} / unrolled <= {n} / N={size}"):
            status, took, m = isolated_check([*hyp, size == N], goal, timeout_ms, seed)
        dt += took
        if status == "refuted":
            break
    return Goal(rule, f"unrolled <= {n}", status, dt, m, (N, s, a), op=op)


RULE_REFUTE_NS = (3, 4)
"""The pool sizes an ordering mutant's counterexample is looked for at (each of the three
needs two blocks: N = 3). symlists' N = 1..6 cost up to 7 CPU s here (the sorted state
carries more arrays); at N = 3 first, about 1.5."""


def decode_call(mdl: z3.ModelRef, op: str, a: SArgs, n: int) -> Any:
    """A model's call, in the spec's terms (the watcher numbered as :func:`decode_sstate`
    numbers the model's Watcher elements)."""
    from kvpool.spec import BlockRef, FreeBlocks, UnpinBlocks

    def ev(x: Any) -> Any:
        return mdl.eval(x, model_completion=True)

    m = int(ev(a.m).as_long())
    ids = tuple(BlockRef(0, int(ev(z3.Select(a.E, j)).as_long())) for j in range(m))
    if op == "FreeBlocks":
        return FreeBlocks(ids, z3.is_true(ev(a.ef)))
    wats = [str(w) for w in (mdl.get_universe(WATCHER) or [])]
    w = str(ev(a.w))
    return UnpinBlocks(ids, wats.index(w) if w in wats else len(wats))


def rule_mutant_rows(timeout_ms: int = 30000) -> list[dict[str, Any]]:
    """symlists' ORD-RELEASE and ORD-UNPIN mutants on the sorted loop, unrolled to 3
    entries: refuted, decoded, and replayed on the buggy spec, whose free queue must
    differ from the semantics'. (The loop step is not asked with a mutant, as in
    symlists: with the ghosts' recurrences z3 finds no model.)"""
    return [rule_mutant_row(bug, rule, timeout_ms) for bug, rule in symlists.RULE_MUTANTS.items()]


def rule_mutant_row(bug: str, rule: str, timeout_ms: int = 30000) -> dict[str, Any]:
    """One mutant of :func:`rule_mutant_rows`: ``bug``, breaking ``rule``."""
    return symlists.unrolled_rule_row(
        f"{rule}, keys and watchers as sorts [{bug}]",
        rule,
        SORTS_BOUNDS,
        lambda limit, seed: unrolled_rule_goal(rule, frozenset([bug]), limit, seed),
        lambda g: _replay_rule(bug, symlists.RULE_OPS[rule], g),
        timeout_ms,
    )


def _replay_rule(bug: str, op: str, g: Goal) -> tuple[list[str], str]:
    """An unrolled counterexample on the sorted state decoded (S but INV-WATCH must hold
    in it), its call replayed on the buggy spec and on the spec
    (:func:`symlists.queue_verdict`)."""
    from kvpool.spec import check_pool

    assert g.model is not None  # (replay_ladder judges refutations, each with its model)
    N, s, a = g.ctx
    n = int(g.model.eval(N, model_completion=True).as_long())
    ps, call = decode_sstate(g.model, n, s), decode_call(g.model, op, a, n)
    trace = [f"state: N={n} {ps.describe()}", repr(call)]
    if [v for v in check_pool(ps) if v.invariant != "INV-WATCH"]:
        return trace, "decoded state breaks S"
    return trace, symlists.queue_verdict(bug, ps, call)


# -- WATCH-PER-BLOCK with the sorts (make proofs-deep) --------------------------------------

WATCH_MUTANTS: tuple[str, ...] = ("unpin-dup-watcher", WATCH_MUTANT)
"""unpin_blocks registering a watcher already pending (symlists' WATCH-PER-BLOCK mutant),
and the new watcher replacing the ones pending (WATCH-FIRE's): each breaks the count."""


def watch_part_rows(timeout_ms: int = 60000) -> list[dict[str, Any]]:
    """:data:`WATCH_PART` for the five list calls: its proof row, its witnesses (decoded:
    INV-WATCH and INV-NULL of the state must hold, the count the ghosts' sums), and its
    two mutants' loop steps refuted."""
    gs = part_goals((WATCH_PART,), timeout_ms=timeout_ms)
    status, bad = goals_status(gs)
    out: list[dict[str, Any]] = [
        dict(
            obligation=f"S and T => {WATCH_PART}, list calls as loops, keys and watchers as "
            "sorts (watcher lists)",
            kind="inductive",
            technique="z3 induction",
            invariants=(),  # (INV-WATCH's count is counting.py's, K = W = 2)
            bounds=f"{SORTS_BOUNDS}; {len(symlists.LIST_OPS)} list calls x loop init/step/exit",
            status=status,
            seconds=sum(g.seconds for g in gs),
            replay="; ".join(f"not proved: {g.op} {g.case} ({g.status})" for g in bad),
        )
    ]
    ws = part_witness_goals(5000, 3, (WATCH_PART,))
    problems = part_witness_problems(ws, 3, (WATCH_PART, "INV-NULL"))
    out.append(
        dict(
            obligation=f"H satisfiable ({WATCH_PART}, keys and watchers as sorts, N=3)",
            kind="witness",
            technique="z3 induction",
            invariants=(),
            bounds=f"N=3: one model per hypothesis ({len(ws)}), decoded, INV-WATCH and "
            "INV-NULL checked",
            status="witnessed" if not problems else "NOT-witnessed",
            seconds=sum(w.seconds for w in ws),
            replay="; ".join(problems[:3]),
        )
    )
    for bug in WATCH_MUTANTS:
        b = frozenset([bug])

        def ask(limit: int, seed: int, b: frozenset[str] = b) -> Any:
            return part_goals(
                (WATCH_PART,), ("UnpinBlocks",), ("loop step",), b, limit, True, seed=seed
            )

        note = "its replay: symlists' row (K = W = 2)"
        out.append(_step_mutant_row(WATCH_PART, bug, ask, None, note, timeout_ms // 4))
    return out
