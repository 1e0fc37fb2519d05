"""Translate the free queue's Python source into z3: the code that runs is the code proved.

:func:`translate` reads a method of ``impl/free_queue.py`` (its text, parsed with
:mod:`ast`) and executes it symbolically over a heap of two arrays, ``nxt`` and
``prv`` (node -> node, as in :mod:`kvpool.proofs.refinement`: blocks are ids >= 0,
HEAD = -1 and TAIL = -2 are the sentinels, NONE = -3 is ``None``) and the counter
``cnt`` (``num_free_blocks``). Every path is kept in one state by guarded updates
(``x := If(guard, new, old)``); a raised exception is a code in the state, so
``try``/``except`` and rollback are translated as written.

The subset it reads (anything else is refused with :class:`Unsupported`, naming
the construct and its line, never skipped):

* reads and writes of ``next_free_block``/``prev_free_block`` on nodes (a read or
  write on ``None`` raises ``AttributeError``, as Python does), of
  ``self.num_free_blocks`` and the two sentinel attributes;
* locals, tuple and chained assignment, ``+=``/``-=``, ``if``/``elif``/``else``,
  ``and``/``or``/``not``, comparisons (``is``, ``==``, ``<``, chained);
* ``for`` over a list argument, ``reversed(list)`` or ``range(n)`` (unrolled up to
  a stated bound, or, for a loop given an invariant, proved by that invariant: it
  holds on entry, one iteration keeps it, and what follows the loop assumes it),
  ``break``, ``return``;
* lists: ``[]``, ``[x]``, ``append``, ``len``, ``x[i]``;
* ``raise C(...)`` for an exception class ``C`` of the module, or for a module
  function whose return annotation is one (the message is not evaluated: it only
  reads), ``try``/``except`` with handler types matched by subclass;
* calls of ``self._method(...)`` (inlined), ``type(x)``/``x.__class__`` compared
  with ``list``/``int`` (decided by the argument's declared kind).

A loop bound is never a silent truncation: when a loop is unrolled ``bound``
times, "the loop has finished" becomes an obligation of its own.
"""

from __future__ import annotations

import ast
import builtins
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import z3  # type: ignore[import-untyped]

HEAD, TAIL, NONE = -1, -2, -3
LINKS = {"next_free_block": "nxt", "prev_free_block": "prv"}
SENTINELS = {"fake_free_list_head": HEAD, "fake_free_list_tail": TAIL}
COUNTER = "num_free_blocks"


class Unsupported(Exception):
    """The source uses Python the translator does not model (construct and line named)."""

    def __init__(self, construct: str, line: int, why: str = "") -> None:
        self.construct, self.line = construct, line
        super().__init__(f"line {line}: {construct} is not supported{': ' + why if why else ''}")


# -- values ---------------------------------------------------------------------------------


@dataclass
class Node:
    """A node id (a block, a sentinel, or NONE for None); integers use the same sort."""

    t: Any


@dataclass
class IntV:
    t: Any


@dataclass
class BoolV:
    t: Any


@dataclass
class ListV:
    arr: Any
    n: Any


@dataclass
class ClassV:
    name: str


@dataclass
class ExcV:
    code: Any


class SelfV:
    pass


Value = Node | IntV | BoolV | ListV | ClassV | ExcV | SelfV


def _ite(c: Any, a: Value, b: Value) -> Value:
    if isinstance(a, Node | IntV) and isinstance(b, Node | IntV):
        return type(a)(z3.If(c, a.t, b.t))
    if isinstance(a, BoolV) and isinstance(b, BoolV):
        return BoolV(z3.If(c, a.t, b.t))
    if isinstance(a, ListV) and isinstance(b, ListV):
        return ListV(z3.If(c, a.arr, b.arr), z3.If(c, a.n, b.n))
    if isinstance(a, ExcV) and isinstance(b, ExcV):
        return ExcV(z3.If(c, a.code, b.code))
    if type(a) is type(b) and isinstance(a, ClassV | SelfV):
        return a
    return a  # a local bound on one path only: its other value is never read


@dataclass
class Heap:
    nxt: Any
    prv: Any
    cnt: Any


@dataclass
class Obligation:
    name: str
    hyps: list[Any]
    goal: Any


@dataclass
class LoopInvariant:
    """``inv(j, env, heap)``: the invariant after ``j`` iterations of a loop."""

    inv: Callable[[Any, dict[str, Value], Heap], Any]


@dataclass
class Result:
    heap: Heap
    exc: Any  # 0 = returned normally, else an exception code (see ``Translation.codes``)
    ret: Value | None
    obligations: list[Obligation]  # loop invariants and unroll bounds, to prove as they are
    assumptions: list[Any]  # what the code after a loop may assume (its invariant at exit)


@dataclass
class _Frame:
    env: dict[str, Value]
    ret: Value | None = None
    returned: Any = field(default_factory=lambda: z3.BoolVal(False))


class Translation:
    """One module's source, ready to translate any of its methods."""

    def __init__(self, source: str, cls: str = "") -> None:
        self.source = source
        tree = ast.parse(self.source)
        self.funcs: dict[str, ast.FunctionDef] = {}
        self.module_funcs: dict[str, ast.FunctionDef] = {}
        self.names: dict[str, Any] = {}
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and (not cls or node.name == cls):
                for f in node.body:
                    if isinstance(f, ast.FunctionDef):
                        self.funcs[f.name] = f
            elif isinstance(node, ast.FunctionDef):
                self.module_funcs[node.name] = node
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kvpool.spec"):
                mod = importlib.import_module(node.module or "")
                for al in node.names:
                    self.names[al.asname or al.name] = getattr(mod, al.name)
            if isinstance(node, ast.ClassDef):  # an exception class of the module's own
                bases = [
                    self.names.get(b.id) or getattr(builtins, b.id, None)
                    for b in node.bases
                    if isinstance(b, ast.Name)
                ]
                if bases and all(
                    isinstance(b, type) and issubclass(b, BaseException) for b in bases
                ):
                    self.names[node.name] = type(node.name, tuple(b for b in bases if b), {})
        if cls and not self.funcs:
            raise Unsupported(f"class {cls!r}", 0, "not found in the source")
        self.codes: list[type[BaseException]] = [AttributeError, IndexError]

    def code(self, exc: type[BaseException]) -> int:
        if exc not in self.codes:
            self.codes.append(exc)
        return self.codes.index(exc) + 1

    def code_of(self, name: str) -> int:
        return self.code(self._exc_class(name, 0))

    def _exc_class(self, name: str, line: int) -> type[BaseException]:
        obj = self.names.get(name)
        if obj is None:
            obj = getattr(builtins, name, None)
        if not (isinstance(obj, type) and issubclass(obj, BaseException)):
            raise Unsupported(f"exception {name!r}", line, "not an exception class")
        return obj

    def run(
        self,
        method: str,
        args: dict[str, Value],
        heap: Heap,
        bound: int = 3,
        invariants: dict[str, LoopInvariant] | None = None,
    ) -> Result:
        if method not in self.funcs:
            raise Unsupported(f"method {method!r}", 0, "not found in the class")
        ex = _Exec(self, heap, bound, invariants or {})
        ret = ex.call(self.funcs[method], args, 0)
        return Result(ex.heap, ex.exc, ret, ex.obligations, ex.assumptions)


def _names_assigned(stmts: list[ast.stmt]) -> set[str]:
    out: set[str] = set()
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                out.add(n.id)
            elif (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr == "append"
                and isinstance(n.func.value, ast.Name)
            ):
                out.add(n.func.value.id)
    return out


class _Exec:
    def __init__(
        self, tr: Translation, heap: Heap, bound: int, invariants: dict[str, LoopInvariant]
    ) -> None:
        self.tr = tr
        self.heap = heap
        self.exc: Any = z3.IntVal(0)
        self.bound = bound
        self.invariants = invariants
        self.pc: list[Any] = []
        self.brk: Any = z3.BoolVal(False)
        self.frames: list[_Frame] = []
        self.obligations: list[Obligation] = []
        self.assumptions: list[Any] = []
        self.hyps: list[Any] = []  # loop-local hypotheses (inside a preserve step)
        self._k = 0
        self.method = ""

    # -- guards -----------------------------------------------------------------------

    @property
    def frame(self) -> _Frame:
        return self.frames[-1]

    def active(self) -> Any:
        return z3.And(self.exc == 0, z3.Not(self.frame.returned), z3.Not(self.brk), *self.pc)

    def raise_if(self, cond: Any, code: int) -> None:
        c = z3.And(self.active(), cond)
        self.exc = z3.If(c, z3.IntVal(code), self.exc)

    def fresh(self, name: str) -> Any:
        self._k += 1
        return z3.Int(f"{name}!{self._k}")

    # -- calls ------------------------------------------------------------------------

    def call(self, f: ast.FunctionDef, args: dict[str, Value], line: int) -> Value | None:
        params = [a.arg for a in f.args.args]
        if f.args.vararg or f.args.kwarg or f.args.kwonlyargs:
            raise Unsupported("*args/**kwargs/keyword-only parameters", f.lineno)
        env: dict[str, Value] = {"self": SelfV()}
        for p in params[1:]:
            if p not in args:
                raise Unsupported(f"call of {f.name} without argument {p!r}", line)
            env[p] = args[p]
        saved_method, self.method = self.method, f.name
        self.frames.append(_Frame(env))
        self.block(f.body)
        fr = self.frames.pop()
        self.method = saved_method
        return fr.ret

    # -- statements -------------------------------------------------------------------

    def block(self, stmts: list[ast.stmt]) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s: ast.stmt) -> None:
        if isinstance(s, ast.Expr):
            if isinstance(s.value, ast.Constant):
                return  # a docstring
            self.expr(s.value)
        elif isinstance(s, ast.Pass):
            return
        elif isinstance(s, ast.Assign):
            v = self.expr(s.value)
            for t in s.targets:
                self.assign(t, v)
        elif isinstance(s, ast.AnnAssign):
            if s.value is None:
                raise Unsupported("annotation without a value", s.lineno)
            self.assign(s.target, self.expr(s.value))
        elif isinstance(s, ast.AugAssign):
            if not isinstance(s.op, ast.Add | ast.Sub):
                raise Unsupported(f"augmented {type(s.op).__name__}", s.lineno)
            cur = self.expr(_load(s.target))
            inc = self.expr(s.value)
            if not isinstance(cur, IntV | Node) or not isinstance(inc, IntV | Node):
                raise Unsupported("augmented assignment of a non-integer", s.lineno)
            val = cur.t + inc.t if isinstance(s.op, ast.Add) else cur.t - inc.t
            self.assign(s.target, IntV(val))
        elif isinstance(s, ast.If):
            self.if_(s)
        elif isinstance(s, ast.For):
            self.for_(s)
        elif isinstance(s, ast.Break):
            self.brk = z3.Or(self.brk, self.active())
        elif isinstance(s, ast.Return):
            v = self.expr(s.value) if s.value is not None else None
            g = self.active()
            fr = self.frame
            if v is not None:
                fr.ret = v if fr.ret is None else _ite(g, v, fr.ret)
            fr.returned = z3.Or(fr.returned, g)
        elif isinstance(s, ast.Raise):
            self.raise_if(z3.BoolVal(True), self.raised_code(s))
        elif isinstance(s, ast.Try):
            self.try_(s)
        else:
            raise Unsupported(f"statement {type(s).__name__}", s.lineno)

    def raised_code(self, s: ast.Raise) -> int:
        e = s.exc
        if e is None:
            raise Unsupported("bare raise", s.lineno)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name):
            name = e.func.id
            if name in self.tr.module_funcs:  # a factory: its return annotation says what
                ann = self.tr.module_funcs[name].returns
                if not isinstance(ann, ast.Name):
                    raise Unsupported(f"raise of {name}(...) without a class annotation", s.lineno)
                return self.tr.code(self.tr._exc_class(ann.id, s.lineno))
            return self.tr.code(self.tr._exc_class(name, s.lineno))
        if isinstance(e, ast.Name):
            return self.tr.code(self.tr._exc_class(e.id, s.lineno))
        raise Unsupported(f"raise of {ast.dump(e)[:40]}", s.lineno)

    def assign(self, t: ast.expr, v: Value) -> None:
        if isinstance(t, ast.Name):
            old = self.frame.env.get(t.id)
            self.frame.env[t.id] = v if old is None else _ite(self.active(), v, old)
        elif isinstance(t, ast.Tuple):
            if not isinstance(v, tuple):
                raise Unsupported("tuple assignment from a non-tuple", t.lineno)
            if len(v) != len(t.elts):
                raise Unsupported("tuple assignment of another length", t.lineno)
            for tt, vv in zip(t.elts, v, strict=True):
                self.assign(tt, vv)
        elif isinstance(t, ast.Attribute):
            obj = self.expr(t.value)
            h = self.heap
            if isinstance(obj, SelfV) and t.attr == COUNTER:
                if not isinstance(v, IntV | Node):
                    raise Unsupported("a non-integer counter", t.lineno)
                self.heap = replace(h, cnt=z3.If(self.active(), v.t, h.cnt))
            elif isinstance(obj, Node) and t.attr in LINKS:
                if not isinstance(v, Node):
                    raise Unsupported(f"a link set to a non-node ({type(v).__name__})", t.lineno)
                self.raise_if(obj.t == NONE, self.tr.code(AttributeError))
                g = self.active()
                arr = getattr(h, LINKS[t.attr])
                new = z3.If(g, z3.Store(arr, obj.t, v.t), arr)
                self.heap = replace(h, **{LINKS[t.attr]: new})
            else:
                raise Unsupported(f"assignment to .{t.attr}", t.lineno)
        else:
            raise Unsupported(f"assignment to {type(t).__name__}", t.lineno)

    def cond(self, e: ast.expr) -> Any:
        v = self.expr(e)
        if isinstance(v, BoolV):
            return v.t
        if isinstance(v, ListV):
            return v.n > 0
        if isinstance(v, IntV):
            return v.t != 0
        raise Unsupported(f"truth value of {type(v).__name__}", e.lineno)

    def if_(self, s: ast.If) -> None:
        c = z3.simplify(self.cond(s.test))
        if z3.is_true(c):
            self.block(s.body)
            return
        if z3.is_false(c):
            self.block(s.orelse)
            return
        self.pc.append(c)
        self.block(s.body)
        self.pc.pop()
        self.pc.append(z3.Not(c))
        self.block(s.orelse)
        self.pc.pop()

    def try_(self, s: ast.Try) -> None:
        if s.orelse or s.finalbody:
            raise Unsupported("try with else/finally", s.lineno)
        entry = self.active()
        outer = self.exc
        self.exc = z3.IntVal(0)
        self.pc.append(entry)
        self.block(s.body)
        raised = self.exc
        self.exc = z3.IntVal(0)
        handled: Any = z3.BoolVal(False)
        for h in s.handlers:
            matches = []
            for name in _handler_types(h):
                hc = self.tr._exc_class(name, h.lineno)
                # every class the body can raise is registered by now
                for i, c in enumerate(list(self.tr.codes)):
                    if issubclass(c, hc):
                        matches.append(raised == i + 1)
            m = z3.And(z3.Not(handled), z3.Or(*matches) if matches else z3.BoolVal(False))
            self.pc.append(m)
            if h.name:
                self.frame.env[h.name] = ExcV(raised)
            self.block(h.body)
            self.pc.pop()
            handled = z3.Or(handled, m)
        in_handler = self.exc
        self.pc.pop()
        # a handled exception gives way to what its handler raised; an unhandled one propagates
        self.exc = z3.If(entry, z3.If(handled, in_handler, raised), outer)

    def for_(self, s: ast.For) -> None:
        if s.orelse:
            raise Unsupported("for ... else", s.lineno)
        it = s.iter
        key = f"{self.method}:{ast.unparse(it)}"
        rev = False
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
            if len(it.args) != 1:
                raise Unsupported("range with more than one argument", s.lineno)
            n = self.expr(it.args[0])
            if not isinstance(n, IntV | Node):
                raise Unsupported("range of a non-integer", s.lineno)
            length = n.t

            def elem(j: Any) -> Value:
                return IntV(j)
        else:
            if isinstance(it, ast.Call) and isinstance(it.func, ast.Name):
                if it.func.id != "reversed" or len(it.args) != 1:
                    raise Unsupported(f"for over {ast.unparse(it)}", s.lineno)
                it, rev = it.args[0], True
            lv = self.expr(it)
            if not isinstance(lv, ListV):
                raise Unsupported(f"for over {type(lv).__name__}", s.lineno)
            length = lv.n

            def elem(j: Any) -> Value:
                return Node(z3.Select(lv.arr, lv.n - 1 - j if rev else j))

        if key in self.invariants:
            self.loop_by_invariant(s, key, length, elem)
            return
        saved_brk = self.brk
        self.brk = z3.BoolVal(False)
        for j in range(self.bound):
            self.pc.append(z3.IntVal(j) < length)
            self.assign(s.target, elem(z3.IntVal(j)))
            self.block(s.body)
            self.pc.pop()
        # a bounded unrolling must have finished the loop: that is an obligation
        self.obligations.append(
            Obligation(
                f"{key} ends within {self.bound} iterations",
                [*self.hyps],
                z3.Not(z3.And(self.active(), length > self.bound)),
            )
        )
        self.brk = saved_brk

    def loop_by_invariant(
        self, s: ast.For, key: str, length: Any, elem: Callable[[Any], Value]
    ) -> None:
        inv = self.invariants[key].inv
        if any(isinstance(n, ast.Break | ast.Return | ast.Try) for n in ast.walk(s)):
            raise Unsupported("break/return/try inside a loop proved by invariant", s.lineno)
        entry = self.active()
        env0, heap0 = dict(self.frame.env), self.heap
        self.obligations.append(
            Obligation(f"{key}: invariant holds on entry", [*self.hyps, entry], inv(0, env0, heap0))
        )
        # an arbitrary iteration: havoc what the body writes, assume the invariant
        changed = _names_assigned([s, *s.body])
        j = self.fresh("j")
        henv = dict(env0)
        for name in changed:
            old = env0.get(name)
            if isinstance(old, ListV):
                henv[name] = ListV(
                    z3.Array(f"{name}!arr{self._k}", z3.IntSort(), z3.IntSort()), self.fresh(name)
                )
            else:
                henv[name] = Node(self.fresh(name))
        hheap = Heap(
            z3.Array(f"nxt!{self._k}", z3.IntSort(), z3.IntSort()),
            z3.Array(f"prv!{self._k}", z3.IntSort(), z3.IntSort()),
            self.fresh("cnt"),
        )
        saved = (self.exc, self.pc, self.brk, self.heap, self.frame.env, self.hyps)
        self.exc, self.pc, self.brk, self.heap = z3.IntVal(0), [], z3.BoolVal(False), hheap
        self.frame.env = dict(henv)
        # an iteration runs only once the loop was entered: ``entry`` speaks of the state
        # before the loop (the havocked copies are fresh), so it may be assumed here
        step_hyps = [*saved[5], entry, j >= 0, j < length, inv(j, henv, hheap)]
        self.hyps = step_hyps
        self.assign(s.target, elem(j))
        self.block(s.body)
        self.obligations.append(
            Obligation(
                f"{key}: one iteration keeps the invariant",
                step_hyps,
                z3.And(self.exc == 0, inv(j + 1, self.frame.env, self.heap)),
            )
        )
        self.exc, self.pc, self.brk, self.heap, self.frame.env, self.hyps = saved
        # after the loop: the havocked state at j == length, where the loop was entered
        self.assumptions.append(z3.Implies(entry, inv(length, henv, hheap)))
        self.heap = Heap(
            z3.If(entry, hheap.nxt, heap0.nxt),
            z3.If(entry, hheap.prv, heap0.prv),
            z3.If(entry, hheap.cnt, heap0.cnt),
        )
        for name in changed:
            self.frame.env[name] = (
                _ite(entry, henv[name], env0[name]) if name in env0 else henv[name]
            )

    # -- expressions ------------------------------------------------------------------

    def expr(self, e: ast.expr | None) -> Any:
        if e is None:
            raise Unsupported("missing expression", 0)
        if isinstance(e, ast.Constant):
            if e.value is None:
                return Node(z3.IntVal(NONE))
            if isinstance(e.value, bool):
                return BoolV(z3.BoolVal(e.value))
            if isinstance(e.value, int):
                return IntV(z3.IntVal(e.value))
            raise Unsupported(f"constant {e.value!r}", e.lineno)
        if isinstance(e, ast.Name):
            if e.id in self.frame.env:
                return self.frame.env[e.id]
            if e.id in ("list", "int"):
                return ClassV(e.id)
            raise Unsupported(f"name {e.id!r}", e.lineno, "not a local of the method")
        if isinstance(e, ast.Attribute):
            obj = self.expr(e.value)
            if e.attr == "__class__":
                return _class_of(obj, e.lineno)
            if isinstance(obj, SelfV):
                if e.attr in SENTINELS:
                    return Node(z3.IntVal(SENTINELS[e.attr]))
                if e.attr == COUNTER:
                    return IntV(self.heap.cnt)
            if isinstance(obj, Node) and e.attr in LINKS:
                self.raise_if(obj.t == NONE, self.tr.code(AttributeError))
                return Node(z3.Select(getattr(self.heap, LINKS[e.attr]), obj.t))
            raise Unsupported(f"attribute .{e.attr}", e.lineno)
        if isinstance(e, ast.Tuple):
            return tuple(self.expr(x) for x in e.elts)
        if isinstance(e, ast.List):
            arr = z3.K(z3.IntSort(), z3.IntVal(NONE))
            for i, x in enumerate(e.elts):
                v = self.expr(x)
                if not isinstance(v, Node):
                    raise Unsupported("a list of non-nodes", e.lineno)
                arr = z3.Store(arr, i, v.t)
            return ListV(arr, z3.IntVal(len(e.elts)))
        if isinstance(e, ast.BoolOp):
            return self.boolop(e)
        if isinstance(e, ast.UnaryOp):
            v = self.expr(e.operand)
            if isinstance(e.op, ast.Not):
                return BoolV(z3.Not(self._truth(v, e.lineno)))
            if isinstance(e.op, ast.USub) and isinstance(v, IntV | Node):
                return IntV(-v.t)
            raise Unsupported(f"unary {type(e.op).__name__}", e.lineno)
        if isinstance(e, ast.BinOp):
            a, b = self.expr(e.left), self.expr(e.right)
            if isinstance(a, IntV | Node) and isinstance(b, IntV | Node):
                if isinstance(e.op, ast.Add):
                    return IntV(a.t + b.t)
                if isinstance(e.op, ast.Sub):
                    return IntV(a.t - b.t)
            raise Unsupported(f"binary {type(e.op).__name__}", e.lineno)
        if isinstance(e, ast.Compare):
            return self.compare(e)
        if isinstance(e, ast.Subscript):
            lv, idx = self.expr(e.value), self.expr(e.slice)
            if not isinstance(lv, ListV) or not isinstance(idx, IntV):
                raise Unsupported("subscript of a non-list", e.lineno)
            self.raise_if(z3.Or(idx.t < 0, idx.t >= lv.n), self.tr.code(IndexError))
            return Node(z3.Select(lv.arr, idx.t))
        if isinstance(e, ast.Call):
            return self.call_expr(e)
        raise Unsupported(f"expression {type(e).__name__}", e.lineno)

    def _truth(self, v: Value, line: int) -> Any:
        if isinstance(v, BoolV):
            return v.t
        if isinstance(v, ListV):
            return v.n > 0
        if isinstance(v, IntV):
            return v.t != 0
        raise Unsupported(f"truth value of {type(v).__name__}", line)

    def boolop(self, e: ast.BoolOp) -> BoolV:
        # short-circuit: a later operand runs only when the earlier ones did not decide
        result: Any = None
        decided: Any = z3.BoolVal(False)
        is_and = isinstance(e.op, ast.And)
        for x in e.values:
            self.pc.append(z3.Not(decided))
            t = self._truth(self.expr(x), e.lineno)
            self.pc.pop()
            result = t if result is None else z3.If(decided, result, t)
            decided = z3.Or(decided, z3.Not(t) if is_and else t)
        return BoolV(result)

    def compare(self, e: ast.Compare) -> BoolV:
        left = self.expr(e.left)
        out = []
        for op, r in zip(e.ops, e.comparators, strict=True):
            right = self.expr(r)
            out.append(self._cmp(op, left, right, e.lineno))
            left = right
        return BoolV(z3.And(*out) if len(out) > 1 else out[0])

    def _cmp(self, op: ast.cmpop, a: Value, b: Value, line: int) -> Any:
        if isinstance(a, ClassV) and isinstance(b, ClassV):
            if isinstance(op, ast.Is | ast.Eq):
                return z3.BoolVal(a.name == b.name)
            if isinstance(op, ast.IsNot | ast.NotEq):
                return z3.BoolVal(a.name != b.name)
        if isinstance(a, Node | IntV) and isinstance(b, Node | IntV):
            x, y = a.t, b.t
            ops: dict[type, Callable[[Any, Any], Any]] = {
                ast.Is: lambda p, q: p == q,
                ast.Eq: lambda p, q: p == q,
                ast.IsNot: lambda p, q: p != q,
                ast.NotEq: lambda p, q: p != q,
                ast.Lt: lambda p, q: p < q,
                ast.LtE: lambda p, q: p <= q,
                ast.Gt: lambda p, q: p > q,
                ast.GtE: lambda p, q: p >= q,
            }
            if type(op) in ops:
                return ops[type(op)](x, y)
        raise Unsupported(
            f"comparison {type(op).__name__} of {type(a).__name__} and {type(b).__name__}", line
        )

    def call_expr(self, e: ast.Call) -> Any:
        f = e.func
        if e.keywords:
            raise Unsupported("keyword arguments", e.lineno)
        if isinstance(f, ast.Name):
            if f.id == "len" and len(e.args) == 1:
                v = self.expr(e.args[0])
                if isinstance(v, ListV):
                    return IntV(v.n)
            if f.id == "type" and len(e.args) == 1:
                return _class_of(self.expr(e.args[0]), e.lineno)
            raise Unsupported(f"call of {f.id}()", e.lineno)
        if isinstance(f, ast.Attribute):
            obj = self.expr(f.value)
            if isinstance(obj, SelfV) and f.attr in self.tr.funcs:
                target = self.tr.funcs[f.attr]
                params = [a.arg for a in target.args.args][1:]
                if len(params) != len(e.args):
                    raise Unsupported(f"call of self.{f.attr} with another arity", e.lineno)
                vals = [self.expr(a) for a in e.args]
                return self.call(target, dict(zip(params, vals, strict=True)), e.lineno)
            if isinstance(obj, ListV) and f.attr == "append" and len(e.args) == 1:
                v = self.expr(e.args[0])
                if not isinstance(v, Node):
                    raise Unsupported("append of a non-node", e.lineno)
                new = ListV(z3.Store(obj.arr, obj.n, v.t), obj.n + 1)
                if not isinstance(f.value, ast.Name):
                    raise Unsupported("append to a list that is not a local", e.lineno)
                self.assign(f.value, new)
                return None
            raise Unsupported(f"call of .{f.attr}()", e.lineno)
        raise Unsupported("call", e.lineno)


def _handler_types(h: ast.ExceptHandler) -> list[str]:
    t = h.type
    if t is None:
        raise Unsupported("bare except", h.lineno)
    elts = t.elts if isinstance(t, ast.Tuple) else [t]
    out = []
    for x in elts:
        if not isinstance(x, ast.Name):
            raise Unsupported("an except clause naming a non-name", h.lineno)
        out.append(x.id)
    return out


def _class_of(v: Value, line: int) -> ClassV:
    if isinstance(v, ListV):
        return ClassV("list")
    if isinstance(v, IntV):
        return ClassV("int")
    raise Unsupported(f"the class of a {type(v).__name__}", line)


def _load(t: ast.expr) -> ast.expr:
    out = ast.parse(ast.unparse(t), mode="eval").body
    ast.copy_location(out, t)
    for n in ast.walk(out):
        n.lineno = getattr(t, "lineno", 0)  # type: ignore[attr-defined]
    return out
