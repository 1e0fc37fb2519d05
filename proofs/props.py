"""The properties the proofs check, over the encoding of :mod:`kvpool.proofs.model`.

* :func:`literal` -- every INV-* of ``spec/invariants.py``, in the spec's own
  terms (counts, "exactly once"), for a concrete N (bounded model checking).
* :func:`strong` -- the strengthened invariant for the unbounded proofs, one
  named part per invariant. ``PERM`` is the strengthening: the queue ``q[0..L)``
  is the prefix of a permutation ``q`` of the non-null blocks whose inverse is
  ``pos``, and exactly the blocks at positions ``< L`` have ``ref_cnt == 0``. It
  gives INV-FREE (each free block exactly once, nothing else) and INV-CONSERVE
  (the in-use blocks are enumerated one-to-one by the positions ``L..N-2``, so
  there are ``N-1-L`` of them). INV-WATCH is strengthened to its per-block form
  (registrations on b == firings on b + watchers pending on b), whose sum over
  the blocks is the spec's global count.
* :func:`step_props` -- what each operation's result must be (ordering rules and
  results), over one transition.
"""

from __future__ import annotations

from typing import Any

import z3  # type: ignore[import-untyped]

from .model import ERR, OPK, Config, Finite, Result, State, iv, state_eq

STRONG_PARTS = {
    "INV-REF": ("INV-REF",),
    "PERM": ("INV-FREE", "INV-CONSERVE"),
    "INV-NULL": ("INV-NULL",),
    "WATCH-PER-BLOCK": ("INV-WATCH",),
    "INV-CACHE": ("INV-CACHE",),
    "INV-EVENTS": ("INV-EVENTS",),
}


def _ref(cfg: Config, s: State) -> z3.BoolRef:
    d = cfg.dom
    return d.forall(0, d.N, lambda b: d.sel(s.ref, b) >= 0)


def _null(cfg: Config, s: State) -> z3.BoolRef:
    d = cfg.dom
    return z3.And(
        [d.sel(s.ref, 0) == 0, d.sel(s.key, 0) == 0]
        + [z3.Not(d.sel(x, 0)) for x in s.idx]
        + [z3.Not(d.sel(p, 0)) for p in s.pend]
    )


def _cache(cfg: Config, s: State) -> z3.BoolRef:
    d = cfg.dom

    def agree(b: Any) -> z3.BoolRef:
        kb = d.sel(s.key, b)
        return z3.And(
            [kb >= 0, kb <= cfg.K, z3.Implies(z3.Not(cfg.caching), kb == 0)]
            + [d.sel(s.idx[k - 1], b) == (kb == k) for k in range(1, cfg.K + 1)]
        )

    return d.forall(0, d.N, agree)


def _events(cfg: Config, s: State) -> z3.BoolRef:
    d = cfg.dom
    on = z3.And(
        [
            s.view[k - 1] == d.exists(0, d.N, lambda b, k=k: d.sel(s.idx[k - 1], b))  # type: ignore[misc]
            for k in range(1, cfg.K + 1)
        ]
    )
    off = z3.And([s.nev == 0] + [z3.Not(v) for v in s.view])
    return z3.If(cfg.events, on, off)


def events_seq(cfg: Config, s: State) -> dict[str, z3.BoolRef]:
    """INV-EVENTS over the event log as a sequence (``Config.seq_log``), and its tie to the
    encoding's view and count.

    * ``INV-EVENTS``: with events on, replaying the log from the start (``hist``: every
      event ever logged, in order; a left fold of ``apply_event``) yields exactly the keys
      the index holds; with events off nothing was ever logged. Contents and order both
      count: the fold's result is decided, key by key, by the last event about the key.
    * ``EVENT-LOG``: the log ``take_events`` returns next is ``hist[taken:]``, its length
      is the count ``nev``, and the view the rest of the encoding keeps is that replay.
    """
    from .model import replay_key

    d = cfg.dom
    h, tk = s.hist, s.taken
    if h is None or tk is None:
        raise TypeError("the event log is a sequence only with Config.seq_log")
    held = [
        replay_key(cfg, h, k) == d.exists(0, d.N, lambda b, k=k: d.sel(s.idx[k - 1], b))  # type: ignore[misc]
        for k in range(1, cfg.K + 1)
    ]
    log = [tk >= 0, tk <= z3.Length(h), s.nev == z3.Length(h) - tk]
    log += [s.view[k - 1] == replay_key(cfg, h, k) for k in range(1, cfg.K + 1)]
    return {
        "INV-EVENTS": z3.If(cfg.events, z3.And(held), z3.Length(h) == 0),
        "EVENT-LOG": z3.And(log),
    }


def literal(cfg: Config, s: State) -> dict[str, z3.BoolRef]:
    """Every spec invariant, stated as the spec states it (concrete N only: it counts)."""
    d = cfg.dom
    if not isinstance(d, Finite):
        raise TypeError("literal invariants count blocks: they need a concrete N")
    N, L = d.N, s.L
    n = d.n
    free_ok = z3.And(
        [L >= 0, z3.Sum([z3.If(s.inq[b], iv(1), iv(0)) for b in range(n)]) == L]
        + [s.inq[b] == z3.And(b >= 1, s.ref[b] == 0) for b in range(n)]
        + [
            z3.Implies(z3.And(s.inq[b], s.inq[c]), s.pos[b] != s.pos[c])
            for b in range(n)
            for c in range(b + 1, n)
        ]
    )
    pending = d.sum(0, N, lambda b: z3.Sum([z3.If(d.sel(p, b), iv(1), iv(0)) for p in s.pend]))
    in_use = d.sum(1, N, lambda b: z3.If(d.sel(s.ref, b) > 0, iv(1), iv(0)))
    assert s.registered is not None and s.fired is not None
    return {
        "INV-REF": _ref(cfg, s),
        "INV-FREE": free_ok,
        "INV-NULL": z3.And(_null(cfg, s), z3.Not(s.inq[0])),
        "INV-WATCH": s.registered == s.fired + pending,
        "INV-CACHE": _cache(cfg, s),
        "INV-EVENTS": _events(cfg, s),
        "INV-CONSERVE": L + in_use + 1 == N,
    }


def literal_unbounded(cfg: Config, s: State) -> dict[str, z3.BoolRef]:
    """The spec invariants that need no count, for a symbolic N (the rest: see :func:`strong`)."""
    d = cfg.dom
    N, L = d.N, s.L
    i, j = z3.Ints("li lj")
    distinct = z3.ForAll(
        [i, j], z3.Implies(z3.And(i >= 0, i < j, j < L), d.sel(s.q, i) != d.sel(s.q, j))
    )
    free_ok = z3.And(
        L >= 0,
        d.forall(
            0,
            L,
            lambda i: z3.And(
                d.sel(s.q, i) >= 1, d.sel(s.q, i) < N, d.sel(s.ref, d.sel(s.q, i)) == 0
            ),
        ),
        distinct,
        d.forall(
            1,
            N,
            lambda b: z3.Implies(
                d.sel(s.ref, b) == 0, d.exists(0, L, lambda i: d.sel(s.q, i) == b)
            ),
        ),
    )
    return {
        "INV-REF": _ref(cfg, s),
        "INV-FREE": free_ok,
        "INV-NULL": z3.And(_null(cfg, s), d.forall(0, L, lambda i: d.sel(s.q, i) != 0)),
        "INV-CACHE": _cache(cfg, s),
        "INV-EVENTS": _events(cfg, s),
    }


def stepping_stones(cfg: Config, s: State) -> dict[str, z3.BoolRef]:
    """Intermediate facts that the lemmas ``S ==> INV-X`` go through, by INV-X.

    INV-FREE says every free block is *somewhere* in the queue: an existential,
    for which z3 must guess the index. Asked directly, it guesses right or times
    out depending on its random seed and even on what the process did before (in
    one process 2 seeds in 8 timed out at 20 s; once CI timed out at the default
    seed, which passes here). Through
    the stone below it is never asked to guess: ``pos[b]`` is named as the index,
    and both steps (S ==> stone, S and stone ==> INV-FREE) were proved at every
    one of 24 seeds in under 0.2 s.
    """
    d = cfg.dom
    return {
        "INV-FREE": d.forall(
            1,
            d.N,
            lambda b: z3.Implies(
                d.sel(s.ref, b) == 0,
                z3.And(
                    d.sel(s.pos, b) >= 0,
                    d.sel(s.pos, b) < s.L,
                    d.sel(s.q, d.sel(s.pos, b)) == b,
                ),
            ),
        )
    }


def strong(cfg: Config, s: State) -> dict[str, z3.BoolRef]:
    """The strengthened invariant, by part (see the module docstring)."""
    d = cfg.dom
    N = d.N
    perm_ = perm(cfg, s)  # (built before watch: the quantified variables keep their names)
    watch = d.forall(
        0,
        N,
        lambda b: (
            d.sel(s.reg, b)
            == d.sel(s.fb, b) + z3.Sum([z3.If(d.sel(p, b), iv(1), iv(0)) for p in s.pend])
        ),
    )
    return {
        "INV-REF": _ref(cfg, s),
        "PERM": perm_,
        "INV-NULL": _null(cfg, s),
        "WATCH-PER-BLOCK": watch,
        "INV-CACHE": _cache(cfg, s),
        "INV-EVENTS": _events(cfg, s),
    }


def perm(cfg: Config, s: Any) -> z3.BoolRef:
    """S's PERM part: ``q`` a permutation of the non-null blocks over the positions
    ``0..N-2``, ``pos`` its inverse, the blocks at positions ``< L`` exactly those with
    ref_cnt 0 (it reads ``s.q``, ``s.pos``, ``s.L``, ``s.ref`` only)."""
    d = cfg.dom
    N, L = d.N, s.L
    return z3.And(
        L >= 0,
        L <= N - 1,
        d.forall(
            0,
            N - 1,
            lambda i: z3.And(
                d.sel(s.q, i) >= 1,
                d.sel(s.q, i) < N,
                d.sel(s.pos, d.sel(s.q, i)) == i,
                (d.sel(s.ref, d.sel(s.q, i)) == 0) == (i < L),
            ),
        ),
        d.forall(
            1,
            N,
            lambda b: z3.And(
                d.sel(s.pos, b) >= 0, d.sel(s.pos, b) < N - 1, d.sel(s.q, d.sel(s.pos, b)) == b
            ),
        ),
    )


def watch_per_block_finite(cfg: Config, s: State) -> z3.BoolRef:
    """INV-WATCH per block, for a concrete N: on each block, registrations == firings +
    watchers pending there, and the spec's global counters are the sums of the per-block
    ghosts. It implies INV-WATCH's global count by linear arithmetic, and each of its
    conjuncts changes only where a step touches a block."""
    d = cfg.dom
    n = d.n  # type: ignore[attr-defined]
    assert s.registered is not None and s.fired is not None
    per = [
        d.sel(s.reg, b)
        == d.sel(s.fb, b) + z3.Sum([z3.If(d.sel(p, b), iv(1), iv(0)) for p in s.pend])
        for b in range(n)
    ]
    sums = [
        s.registered == z3.Sum([d.sel(s.reg, b) for b in range(n)]),
        s.fired == z3.Sum([d.sel(s.fb, b) for b in range(n)]),
    ]
    return z3.And(per + sums)


def ghost(cfg: Config, s: State) -> dict[str, z3.BoolRef]:
    """BMC's helper lemma: the queue's order keys lie in ``lo..hi`` (so a new key is fresh)."""
    d = cfg.dom
    n = d.n  # type: ignore[attr-defined]
    return {
        "RANK-BOUNDS": z3.And(
            [z3.Implies(s.inq[b], z3.And(s.lo <= s.pos[b], s.pos[b] <= s.hi)) for b in range(n)]
        )
    }


def step_props(
    cfg: Config, s: State, a: Any, r: Result, t: State, finite: bool = True
) -> dict[str, z3.BoolRef]:
    """What the semantics say one operation returns and does, stated apart from the encoding."""
    d = cfg.dom
    N, L = d.N, s.L
    kind, ok = a.kind, r.err == 0
    out: dict[str, z3.BoolRef] = {}

    # ORD-HANDOUT: the returned blocks were queued, come in queue order, and every block
    # left in the queue was behind all of them; they are now in use, keyless, ref 1.
    n = a.n
    ret = [d.sel(r.ret, i) for i in range(d.n)]  # type: ignore[attr-defined]

    def rk(st: State, b: Any) -> Any:
        return d.sel(st.pos, b)

    c = [L - n == t.L]
    for i in range(d.n):  # type: ignore[attr-defined]
        x = ret[i]
        here = [
            x >= 1,
            x < N,
            d.sel(s.inq, x),
            z3.Not(d.sel(t.inq, x)),
            d.sel(t.ref, x) == 1,
            d.sel(t.key, x) == 0,
        ]
        if i + 1 < d.n:  # type: ignore[attr-defined]
            here.append(z3.Implies(i + 1 < n, rk(s, x) < rk(s, ret[i + 1])))
        here.append(d.forall(0, N, lambda b, x=x: z3.Implies(d.sel(t.inq, b), rk(s, x) < rk(s, b))))  # type: ignore[misc]
        c.append(z3.Implies(i < n, z3.And(here)))
    handed = [z3.Or([z3.And(i < n, ret[i] == b) for i in range(d.n)]) for b in range(d.n)]  # type: ignore[attr-defined]
    c += [d.sel(t.inq, b) == z3.And(d.sel(s.inq, b), z3.Not(handed[b])) for b in range(d.n)]  # type: ignore[attr-defined]
    out["ORD-HANDOUT"] = z3.Implies(z3.And(kind == OPK["GetNewBlocks"], ok), z3.And(c))

    # WATCH-FIRE
    def fire_ok(b: Any) -> z3.BoolRef:
        handed = z3.And(
            kind == OPK["GetNewBlocks"],
            ok,
            z3.Or([z3.And(i < n, d.sel(r.ret, i) == b) for i in range(d.n)]),  # type: ignore[attr-defined]
        )
        reset = z3.And(kind == OPK["ResetPrefixCache"], r.value == 1)
        c = []
        for w in range(cfg.W):
            before, after, fired = d.sel(s.pend[w], b), d.sel(t.pend[w], b), d.sel(r.fire[w], b)
            c.append(fired == z3.And(before, z3.Not(after)))
            c.append(z3.Implies(fired, z3.Or(handed, reset)))
            c.append(z3.Implies(z3.And(before, z3.Or(handed, reset)), fired))
        return z3.And(c)

    out["WATCH-FIRE"] = d.forall(1, N, fire_ok)
    if not finite:
        return out

    # ORD-RELEASE: computed from the entries, not from the encoding's queue moves.
    M = cfg.M
    live = [z3.And(j < a.m, a.e[j] != 0) for j in range(M)]
    zero, front = [], []
    for j in range(M):
        x = a.e[j]
        later = z3.Or([z3.And(live[i], a.e[i] == x) for i in range(j + 1, M)] + [z3.BoolVal(False)])
        cnt = z3.Sum([z3.If(z3.And(live[i], a.e[i] == x), iv(1), iv(0)) for i in range(M)])
        zero.append(z3.And(live[j], z3.Not(later), d.sel(s.ref, x) == cnt))
        front.append(z3.Or(d.sel(s.key, x) == 0, z3.Not(cfg.caching), a.ef))
    # FRONT ++ old queue ++ BACK, as order relations between the blocks' order keys
    old = [d.sel(s.inq, b) for b in range(d.n)]  # type: ignore[attr-defined]
    joined = [z3.Or([z3.And(zero[j], a.e[j] == b) for j in range(M)]) for b in range(d.n)]  # type: ignore[attr-defined]
    c = [d.sel(t.inq, b) == z3.Or(old[b], joined[b]) for b in range(d.n)]  # type: ignore[attr-defined]
    for b in range(d.n):  # type: ignore[attr-defined]
        for b2 in range(d.n):  # type: ignore[attr-defined]
            if b != b2:
                c.append(
                    z3.Implies(z3.And(old[b], old[b2], rk(s, b) < rk(s, b2)), rk(t, b) < rk(t, b2))
                )
    group = [(j, z3.And(zero[j], front[j])) for j in range(M)]
    tailg = [(j, z3.And(zero[j], z3.Not(front[j]))) for j in range(M)]
    seq = group + [(-1, None)] + tailg  # the required order: FRONT, then old, then BACK  # noqa: RUF100, E741, RUF009, RUF005
    for p_, (j, cj) in enumerate(seq):
        for jj, cjj in seq[p_ + 1 :]:
            if j == -1 or jj == -1:
                continue
            c.append(z3.Implies(z3.And(cj, cjj), rk(t, a.e[j]) < rk(t, a.e[jj])))
    for j, cj in group:
        c.append(
            z3.Implies(
                cj,
                d.forall(
                    0,
                    N,
                    lambda b, j=j: z3.Implies(d.sel(s.inq, b), rk(t, a.e[j]) < rk(t, b)),  # type: ignore[misc]
                ),
            )
        )
    for j, cj in tailg:
        c.append(
            z3.Implies(
                cj,
                d.forall(
                    0,
                    N,
                    lambda b, j=j: z3.Implies(d.sel(s.inq, b), rk(t, b) < rk(t, a.e[j])),  # type: ignore[misc]
                ),
            )
        )
    out["ORD-RELEASE"] = z3.Implies(z3.And(kind == OPK["FreeBlocks"], ok), z3.And(c))

    # ORD-UNPIN: the entries reaching ref_cnt 0 join the tail in list order (keyed or
    # not), after every block already queued; the queue's old order is kept.
    ulive = [j < a.m for j in range(M)]
    ureach = []
    for j in range(M):
        x = a.e[j]
        later = z3.Or(
            [z3.And(ulive[i], a.e[i] == x) for i in range(j + 1, M)] + [z3.BoolVal(False)]
        )
        cnt = z3.Sum([z3.If(z3.And(ulive[i], a.e[i] == x), iv(1), iv(0)) for i in range(M)])
        ureach.append(z3.And(ulive[j], z3.Not(later), d.sel(s.ref, x) == cnt))
    ujoined = [z3.Or([z3.And(ureach[j], a.e[j] == b) for j in range(M)]) for b in range(d.n)]  # type: ignore[attr-defined]
    c = [d.sel(t.inq, b) == z3.Or(old[b], ujoined[b]) for b in range(d.n)]  # type: ignore[attr-defined]
    for b in range(d.n):  # type: ignore[attr-defined]
        for b2 in range(d.n):  # type: ignore[attr-defined]
            if b != b2:
                c.append(
                    z3.Implies(z3.And(old[b], old[b2], rk(s, b) < rk(s, b2)), rk(t, b) < rk(t, b2))
                )
    for j in range(M):
        for jj in range(j + 1, M):
            c.append(z3.Implies(z3.And(ureach[j], ureach[jj]), rk(t, a.e[j]) < rk(t, a.e[jj])))
        c.append(
            z3.Implies(
                ureach[j],
                d.forall(
                    0,
                    N,
                    lambda b, j=j: z3.Implies(d.sel(s.inq, b), rk(t, b) < rk(t, a.e[j])),  # type: ignore[misc]
                ),
            )
        )
    out["ORD-UNPIN"] = z3.Implies(z3.And(kind == OPK["UnpinBlocks"], ok), z3.And(c))

    # ERR-ATOMIC: a refused call changes nothing (every field of the state, ghosts too).
    out["ERR-ATOMIC"] = z3.Implies(z3.Not(ok), state_eq(d, s, t))

    # RES-CACHED
    k, v = a.qk, r.value
    none_holds = d.forall(1, N, lambda b: d.sel(s.key, b) != k)
    oldest = d.forall(
        1, N, lambda b: z3.Implies(d.sel(s.key, b) == k, d.sel(s.kst, v) <= d.sel(s.kst, b))
    )
    out["RES-CACHED"] = z3.Implies(
        kind == OPK["GetCachedBlock"],
        z3.And(
            (v == -1) == none_holds,
            z3.Implies(v != -1, z3.And(v >= 1, v < N, d.sel(s.key, v) == k, oldest)),
        ),
    )
    out["RES-RESET"] = z3.Implies(
        kind == OPK["ResetPrefixCache"],
        (r.value == 1) == d.forall(1, N, lambda b: d.sel(s.ref, b) == 0),
    )
    nfree = d.sum(1, N, lambda b: z3.If(d.sel(s.ref, b) == 0, iv(1), iv(0)))
    out["RES-NUMFREE"] = z3.Implies(kind == OPK["GetNumFreeBlocks"], r.value == nfree)
    _ = ERR
    return out
