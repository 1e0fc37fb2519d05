"""A witness for every hypothesis a proof rests on: the proofs are not vacuous.

Every obligation proved here is ``hypothesis => goal``, shown by ``unsat`` of
``hypothesis and not goal``. A hypothesis nothing satisfies makes that unsat, and so the
"proof", worth nothing. This module takes the queries a part asked (recorded by
:func:`kvpool.proofs.model.recording`), keeps each distinct hypothesis of the ones z3
proved, and asks z3 for a model of the hypothesis alone (with small bounds, so that the
model decodes). ``unsat`` there is a **vacuous** proof and fails the row; ``unknown`` is
not a witness either. The model is then decoded and checked without z3:

* the every-N induction (:mod:`kvpool.proofs.induction`): the state ``s`` (and the call
  ``a`` of a step) decoded into the spec's ``PoolState`` and ``Op``; the state must pass
  the spec's ``check_pool`` (every INV-* that S claims), and the call replayed on the spec
  must leave a state that passes it too; ``init => P``'s hypothesis is ``N >= 1``: the
  spec's pool of that N, built, must pass it;
* the list refinements (transcribed, :mod:`kvpool.proofs.refinement`, and from source,
  :mod:`kvpool.proofs.pyrefine`): the linked list at entry decoded into links over node ids,
  walked from HEAD: it must represent the decoded sequence exactly (INV-LIST: one chain to
  TAIL, prev links mirroring, blocks outside it unlinked, the counter when the hypothesis
  speaks of one); the call's arguments decoded, renamed onto the blocks 0..6 and, with a
  ``replay`` (the caller's: the proofs import no ``impl``), run on the real queue class,
  which must agree with the spec's sequence. A transcribed loop hypothesis (``preserve``,
  ``exit``) also has a mid-loop state: the loop of the transcription is run ``j`` times in
  Python from the decoded entry list, and must give the decoded mid-loop links.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import z3  # type: ignore[import-untyped]

from kvpool.spec import World, check_pool

from .model import (
    Config,
    Record,
    Unbounded,
    constants,
    fresh_args,
    fresh_state,
    isolated_model,
)
from .refinement import HEAD, NONE, TAIL

WITNESS_MS = 20000
"""z3's time limit on one hypothesis's model (most take well under a second)."""

ALONE_MS = 5000
"""z3's time limit on a hypothesis with no bounds (asked only when the bounded one found
no model: ``unsat`` is a vacuous proof)."""

Replay = Callable[[Any], str]
"""Runs a decoded :class:`kvpool.proofs.pyrefine.Case` on the real queue class; returns
"agrees" or what differs (``pyrefine.replay`` with the class bound)."""


@dataclass
class Hypothesis:
    """One distinct hypothesis among the proved queries, and the obligations that use it."""

    names: list[str]
    hyp: list[z3.BoolRef]


@dataclass
class Outcome:
    """A part's witnesses: counts, the problems found, and solver seconds."""

    proved: int = 0  # proved queries looked at
    distinct: int = 0  # distinct hypotheses among them
    witnessed: int = 0  # satisfiable, decoded and checked
    replayed: int = 0  # of those, also replayed (on the spec, or on the queue class)
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.distinct > 0 and self.witnessed == self.distinct and not self.problems


def distinct_hypotheses(records: list[Record]) -> tuple[int, list[Hypothesis]]:
    """The proved records' hypotheses, each once (z3 shares equal terms, so equal
    hypotheses have equal term ids; the records keep the terms alive)."""
    seen: dict[tuple[int, ...], Hypothesis] = {}
    proved = 0
    for name, hyp, _goal, status in records:
        if status != "proved":
            continue
        proved += 1
        key = tuple(sorted(h.get_id() for h in hyp))
        if key in seen:
            if name not in seen[key].names:
                seen[key].names.append(name)
        else:
            seen[key] = Hypothesis([name], list(hyp))
    return proved, list(seen.values())


def model_of(
    hyp: list[z3.BoolRef], bounds: list[z3.BoolRef], timeout_ms: int = WITNESS_MS
) -> tuple[str, float, z3.ModelRef | None]:
    """A model of ``hyp`` within ``bounds`` (in a context of its own): "sat" with the
    model, else "unsat" (vacuous, when the bounds are empty) or "unknown"."""
    return isolated_model([*hyp, *bounds], timeout_ms)


def finite_support(
    hyp: list[z3.BoolRef], lo: int, hi: int, ints: tuple[int, int] | None = None
) -> list[z3.BoolRef]:
    """Bounds that make a model of ``hyp`` easy to find and to decode: every integer
    constant in ``lo..hi``, every array over the integers equal to a default outside
    ``lo..hi`` and to a value of its own at each index inside (all symbolic); ``ints``
    bounds the integer constants instead, when given.

    A model within these bounds is a model of ``hyp`` (one particular assignment); the
    quantifiers over array cells are then over finitely many distinct cells, which z3's
    model-based instantiation settles, where the free arrays leave it unknown."""
    out: list[z3.BoolRef] = []
    for c in constants(hyp).values():
        srt = c.sort()
        if srt == z3.IntSort():
            ilo, ihi = ints or (lo, hi)
            out += [c >= ilo, c <= ihi]
        elif isinstance(srt, z3.ArraySortRef) and srt.domain() == z3.IntSort():
            rng = srt.range()
            arr: Any = z3.K(z3.IntSort(), z3.Const(f"{c}!default", rng))
            for i in range(lo, hi + 1):
                cell = z3.Const(f"{c}!at{i}", rng)
                arr = z3.Store(arr, i, cell)
                if rng == z3.IntSort():
                    out += [cell >= lo - 1, cell <= hi + 1]
            out.append(c == arr)
    return out


Decoder = Callable[[Hypothesis, z3.ModelRef], tuple[str, bool]]
"""Decode a model of a hypothesis and check it: (problem or "", replayed?)."""


def witness_all(
    records: list[Record],
    bounds: Callable[[Hypothesis], list[list[z3.BoolRef]]],
    decode: Decoder,
    timeout_ms: int = WITNESS_MS,
) -> Outcome:
    """A model of every distinct proved hypothesis in ``records``, decoded and checked.

    A hypothesis is asked within each set of ``bounds`` in turn (small enough to decode;
    the first with a model wins); if none gives one it is asked alone: ``unsat`` alone is
    a vacuous proof, a model beyond the bounds is satisfiable but not decoded, and both
    are problems."""
    out = Outcome()
    out.proved, hyps = distinct_hypotheses(records)
    out.distinct = len(hyps)
    for h in hyps:
        m = None
        for b in bounds(h):
            status, dt, m = model_of(h.hyp, b, timeout_ms)
            out.seconds += dt
            if status == "sat":
                break
        if m is None:
            alone, dt2, _ = model_of(h.hyp, [], ALONE_MS)
            out.seconds += dt2
            what = (
                "VACUOUS: the hypothesis is unsatisfiable"
                if alone == "unsat"
                else "no model within the decoding bounds"
                if alone == "sat"
                else f"no model found ({alone})"
            )
            out.problems.append(f"{h.names[0]}: {what}")
            continue
        try:
            problem, replayed = decode(h, m)
        except (ValueError, KeyError, IndexError, z3.Z3Exception) as exc:
            problem, replayed = f"the model does not decode: {exc}", False
        if problem:
            out.problems.append(f"{h.names[0]}: {problem}")
            continue
        out.witnessed += 1
        out.replayed += replayed
    return out


def summary(label: str, o: Outcome, replay_on: str) -> dict[str, Any]:
    """``runner.ObligationResult(**row)`` for a part's witnesses: the counts first (the
    runner's table cuts the bounds column), then the part."""
    replayed = f"{o.replayed} replayed on {replay_on}" if o.replayed else "none replayed"
    return dict(
        obligation=f"hypotheses satisfiable: {label}",
        kind="witness",
        technique="z3 (model of each hypothesis), decoded",
        invariants=(),
        bounds=(f"{o.witnessed}/{o.distinct} hypotheses of {o.proved} proofs, {replayed}: {label}"),
        status="witnessed" if o.ok else "NOT-witnessed",
        seconds=o.seconds,
        trace=[],
        replay="; ".join(o.problems[:4]) if o.problems else "",
    )


# -- the every-N induction ----------------------------------------------------------------

_STEP = re.compile(r"^S and T => (?P<part>.+) / (?P<op>\w+)$")
INDUCTION_BOUND = 4
"""A witness of the every-N induction is looked for with N <= this (it decodes to a pool)."""


def induction_decoder(K: int = 2, W: int = 2, M: int = 2) -> tuple[Decoder, Any]:
    """The decoder for :mod:`kvpool.proofs.induction`'s hypotheses, and its bounds."""
    from .trace import decode_state, read_args, to_op

    cfg = Config(Unbounded(), K=K, W=W, M=M, caching=z3.Bool("caching"), events=z3.Bool("events"))
    # (the same names give the same terms as the proof's own fresh state and call)
    s = fresh_state(cfg, "s", globals_=False)
    a = fresh_args(cfg, "a")
    N = cfg.dom.N

    def bounds(h: Hypothesis) -> list[list[z3.BoolRef]]:
        return [[N <= INDUCTION_BOUND, *finite_support(h.hyp, -1, INDUCTION_BOUND + 1, (-1, 16))]]

    def decode(h: Hypothesis, m: z3.ModelRef) -> tuple[str, bool]:
        n = int(m.eval(N, model_completion=True).as_long())
        caching = z3.is_true(m.eval(cfg.caching, model_completion=True))
        events = z3.is_true(m.eval(cfg.events, model_completion=True))
        name = h.names[0]
        if name.startswith("init => "):
            bad = check_pool(World.single(n, caching, events).pools[0])
            return (f"the pool of N={n} as built breaks {bad[0]}" if bad else ""), True
        ps = decode_state(m, s, n, K, W, caching, events, z3.Select, ranked=False)
        pre = check_pool(ps)
        if pre:
            return f"decoded state (N={n}) breaks {pre[0]}: {ps.describe()}", False
        step = _STEP.match(name)
        if step is None:  # S => INV-X: a state, no call
            return "", False
        op = to_op(read_args(m, a), n)
        if type(op).__name__ != step["op"]:
            return f"the decoded call {op!r} is not a {step['op']}", False
        world = World([ps.copy()], [True])
        world.apply(op)
        post = check_pool(world.pools[0])
        if post:
            return f"{op!r} on the spec from {ps.describe()} breaks {post[0]}", True
        return "", True

    return decode, bounds


# -- the list refinements -----------------------------------------------------------------

MAX_LIST = 3
"""A refinement witness is looked for on lists of at most this many blocks, groups of at
most this many, so that it renames onto the queue replay's blocks 0..6."""


@dataclass
class ListState:
    """A decoded linked list: links over node ids, the sequence, the call's arguments."""

    nxt: dict[int, int]
    prv: dict[int, int]
    seq: list[int]
    x: int
    k: int
    group: list[int]


def _ival(m: z3.ModelRef, t: Any) -> int:
    return int(m.eval(t, model_completion=True).as_long())


def read_list(m: z3.ModelRef, group_len: int | None = None) -> ListState:
    """The entry list, sequence and arguments of a refinement hypothesis's model (the
    proofs' own names: ``nxt``, ``prv``, ``s``, ``n``, ``x``, ``k``, ``m``, ``bl``)."""
    arr = z3.Array
    nxt, prv, s = (arr(n, z3.IntSort(), z3.IntSort()) for n in ("nxt", "prv", "s"))
    bl = arr("bl", z3.IntSort(), z3.IntSort())
    n = _ival(m, z3.Int("n"))
    if not 0 <= n <= MAX_LIST:
        raise ValueError(f"a list of {n} blocks")
    seq = [_ival(m, s[i]) for i in range(n)]
    mm = _ival(m, z3.Int("m")) if group_len is None else group_len
    if mm > MAX_LIST:
        raise ValueError(f"a group of {mm} blocks")
    group = [_ival(m, bl[i]) for i in range(max(0, min(mm, MAX_LIST)))]
    x, k = _ival(m, z3.Int("x")), _ival(m, z3.Int("k"))
    nodes = {HEAD, TAIL, *seq, *group, *([x] if x >= 0 else [])}
    return ListState(
        {v: _ival(m, nxt[v]) for v in nodes},
        {v: _ival(m, prv[v]) for v in nodes},
        seq,
        x,
        k,
        group,
    )


def list_problem(ls: ListState, cnt: int | None = None) -> str:
    """What keeps the decoded links from representing ``ls.seq`` (INV-LIST), or ""."""
    chain = [HEAD, *ls.seq, TAIL]
    if len(set(ls.seq)) != len(ls.seq) or any(b < 0 for b in ls.seq):
        return f"the sequence {ls.seq} is not one of distinct blocks"
    for u, v in itertools.pairwise(chain):
        if ls.nxt[u] != v or ls.prv[v] != u:
            return f"the links at {u}->{v} do not chain {ls.seq} from HEAD to TAIL"
    for b in ls.nxt:
        if b >= 0 and b not in ls.seq and (ls.nxt[b] != NONE or ls.prv[b] != NONE):
            return f"block {b} is outside the list but keeps a link"
    if cnt is not None and cnt != len(ls.seq):
        return f"the counter is {cnt}, the list has {len(ls.seq)} blocks"
    return ""


def to_case(ls: ListState, method: str, args: dict[str, Any]) -> Any:
    """The decoded call as a :class:`pyrefine.Case` on the list 0..L-1: blocks renamed
    (the list's in order, then any other block met in the arguments)."""
    from .pyrefine import MAX_BLOCK, Case

    ren: dict[int, int] = {b: i for i, b in enumerate(ls.seq)}

    def name(v: int) -> object:
        if v < 0:
            return {HEAD: "HEAD", TAIL: "TAIL"}.get(v)
        if v not in ren:
            ren[v] = len(ren)
            if ren[v] > MAX_BLOCK:
                raise ValueError("more blocks than the replay has")
        return ren[v]

    out = {
        p: ([name(b) for b in v] if p == "blocks" else name(v) if p == "block" else v)
        for p, v in args.items()
    }
    return Case(len(ls.seq), method, out, "witness")


def _entry(L: int, group: list[int]) -> ListState:
    """The list 0..L-1 and a group of blocks outside it, as the proofs' entry state."""
    seq = list(range(L))
    chain = [HEAD, *seq, TAIL]
    nxt = {u: v for u, v in itertools.pairwise(chain)}
    prv = {v: u for u, v in itertools.pairwise(chain)}
    nxt[TAIL] = prv[HEAD] = NONE
    for b in group:
        nxt[b] = prv[b] = NONE
    return ListState(nxt, prv, seq, NONE, L, list(group))


def _array(cells: dict[int, int], default: int = NONE) -> Any:
    arr: Any = z3.K(z3.IntSort(), z3.IntVal(default))
    for i, v in sorted(cells.items()):
        if v != default:
            arr = z3.Store(arr, i, v)
    return arr


def _pins(ls: ListState, group: bool = True) -> list[z3.BoolRef]:
    """The proofs' entry-state constants (``nxt``, ``prv``, ``s``, ``n``, ``pos``; with
    ``group`` also ``bl``, ``blpos``, ``m``) equal to ``ls``."""
    arr = z3.Array
    ii = z3.IntSort()
    pins = [
        arr("nxt", ii, ii) == _array(ls.nxt),
        arr("prv", ii, ii) == _array(ls.prv),
        arr("s", ii, ii) == _array(dict(enumerate(ls.seq)), 0),
        arr("pos", ii, ii) == _array({b: i for i, b in enumerate(ls.seq)}, -1),
        z3.Int("n") == len(ls.seq),
    ]
    if not group:
        return pins
    return [
        *pins,
        arr("bl", ii, ii) == _array(dict(enumerate(ls.group)), 0),
        arr("blpos", ii, ii) == _array({b: i for i, b in enumerate(ls.group)}, -1),
        z3.Int("m") == len(ls.group),
    ]


def _run_loop(op: str, ls: ListState, j: int) -> tuple[dict[int, int], dict[int, int]]:
    """The transcription's loop (:func:`refinement.n_block_ops`), ``j`` iterations from
    the decoded entry list: the links it leaves (over the decoded nodes)."""
    nxt, prv = dict(ls.nxt), dict(ls.prv)
    if op == "append_n":
        last = ls.prv[TAIL]
        for b in ls.group[:j]:
            nxt[last], prv[b] = b, last
            last = b
    elif op == "prepend_n":
        prev = HEAD
        for b in ls.group[:j]:
            nxt[prev], prv[b] = b, prev
            prev = b
    else:  # popleft_n
        node = ls.nxt[HEAD]
        for _ in range(j):
            after = nxt.get(node, NONE)
            nxt[node] = prv[node] = NONE
            node = after
    return nxt, prv


_TRANSCRIBED = re.compile(r"^(?P<op>\w+) refines seq \((?P<step>\w+)\)$")
_CLASS_METHOD = {
    "popleft": "popleft",
    "remove": "_remove",
    "append": "append",
    "append_n": "_append_n",
    "prepend_n": "_prepend_n",
    "popleft_n": "_popleft_n",
}
"""The queue class's method each transcribed operation stands for (its hypothesis is the
unchecked method's precondition; ``popleft``/``append`` on it behave as the unchecked)."""


def transcribed_decoder(replay: Replay | None) -> tuple[Decoder, Any]:
    """The decoder for :mod:`kvpool.proofs.refinement`'s hypotheses, and its bounds."""
    j, k = z3.Ints("j k")
    nj = z3.Array("nxt_j", z3.IntSort(), z3.IntSort())
    pj = z3.Array("prv_j", z3.IntSort(), z3.IntSort())
    node = z3.Int("node")

    def bounds(h: Hypothesis) -> list[list[z3.BoolRef]]:
        g = _TRANSCRIBED.match(h.names[0])
        op = g["op"] if g else ""
        out = []
        for L in (2, 1):
            ls = _entry(L, [L, L + 1])
            pins = _pins(ls)
            if op in ("append_n", "prepend_n", "popleft_n"):
                for jj in (1, 2, 0):
                    if op == "popleft_n":
                        ls.group = []
                    mn, mp = _run_loop(op, ls, jj)
                    cursor = ls.seq[jj] if jj < L else TAIL
                    out.append(
                        [*pins, j == jj, k == L, node == cursor, nj == _array(mn), pj == _array(mp)]
                    )
            else:
                out.append([*pins, *finite_support(h.hyp, NONE, 6)])
        return out

    def decode(h: Hypothesis, mdl: z3.ModelRef) -> tuple[str, bool]:
        g = _TRANSCRIBED.match(h.names[0])
        if g is None:
            return f"not an obligation of the transcribed refinement: {h.names[0]}", False
        op, step = g["op"], g["step"]
        ls = read_list(mdl, None if op in ("append_n", "prepend_n") else 0)
        problem = list_problem(ls)
        if problem:
            return f"the decoded list: {problem}", False
        if op in ("append_n", "prepend_n") and len(set(ls.group)) != len(ls.group):
            return f"the group {ls.group} repeats a block", False
        if step in ("preserve", "exit"):
            jj = _ival(mdl, j)
            nxt, prv = _run_loop(op, ls, jj)
            got_n = {v: _ival(mdl, nj[v]) for v in nxt}
            got_p = {v: _ival(mdl, pj[v]) for v in prv}
            if got_n != nxt or got_p != prv:
                return f"the loop after {jj} iterations is not the decoded mid-loop list", False
            if op == "popleft_n":
                want = ls.seq[jj] if jj < len(ls.seq) else TAIL
                if _ival(mdl, node) != want:
                    return f"the loop's cursor after {jj} iterations is not {want}", False
        args: dict[str, Any] = {}
        if op in ("remove", "append"):
            args = {"block": ls.x}
        elif op in ("append_n", "prepend_n"):
            args = {"blocks": ls.group}
        elif op == "popleft_n":
            args = {"n": _ival(mdl, k)}
        if replay is None:
            return "", False
        case = to_case(ls, _CLASS_METHOD[op], args)
        said = replay(case)
        return ("" if said == "agrees" else f"{case} on the queue class: {said}"), True

    return decode, bounds


_SOURCE = re.compile(r"^(?P<meth>\w+) \((?P<step>.+)\)$")


def source_decoder(replay: Replay | None) -> tuple[Decoder, Any]:
    """The decoder for :mod:`kvpool.proofs.pyrefine`'s hypotheses (the entry state: the
    heap, the counter, the sequence and the arguments; a loop's mid-state is made by the
    translation under names of its own and is witnessed, not decoded), and its bounds."""
    from .pyrefine import MAX_BLOCK

    cnt = z3.Int("cnt")

    def bounds(h: Hypothesis) -> list[list[z3.BoolRef]]:
        out = []
        for L in (2, 1, 0):
            pins = [*_pins(_entry(L, []), group=False), z3.Int("cnt") == L, z3.Int("m") <= MAX_LIST]
            out.append([*pins, *finite_support(h.hyp, NONE, MAX_BLOCK)])
        return out

    def decode(h: Hypothesis, mdl: z3.ModelRef) -> tuple[str, bool]:
        g = _SOURCE.match(h.names[0])
        if g is None:
            return f"not an obligation of the source refinement: {h.names[0]}", False
        meth = g["meth"]
        ls = read_list(mdl, None if meth.lstrip("_") in ("append_n", "prepend_n") else 0)
        problem = list_problem(ls, _ival(mdl, cnt))
        if problem:
            return f"the decoded heap: {problem}", False
        params = {
            "_popleft_n": ("n",),
            "popleft_n": ("n",),
            "_remove": ("block",),
            "remove": ("block",),
            "append": ("block",),
            "_append_n": ("blocks",),
            "_prepend_n": ("blocks",),
            "append_n": ("blocks",),
            "prepend_n": ("blocks",),
        }.get(meth, ())
        args: dict[str, Any] = {}
        for p in params:
            args[p] = ls.group if p == "blocks" else ls.x if p == "block" else ls.k
        if replay is None:
            return "", False
        case = to_case(ls, meth, args)
        said = replay(case)
        return ("" if said == "agrees" else f"{case} on the queue class: {said}"), True

    return decode, bounds
