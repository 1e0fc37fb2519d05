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

from .rewrite import simplify

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
    none: Any = None
    """A local that may still be None (``x: list | None = None``, then ``x = []`` on some
    paths): where this holds it is None (``None``: never)."""


@dataclass
class FuncV:
    """A callable argument (a watcher), by identity: ``callable`` of it is true."""

    t: Any


@dataclass
class ClassV:
    name: str


@dataclass
class ExcV:
    code: Any


class SelfV:
    pass


@dataclass
class ObjV:
    """An object ``self`` holds (``Translation(self_values=...)``): its methods are
    contracts named ``"<name>.<method>"``; its attribute ``counter`` is the heap's counter."""

    name: str
    counter: str = ""


@dataclass
class NodeClassV:
    """``type(x)`` of a node: the block class (``Translation(node_class=...)``), or
    ``NoneType`` for None."""

    t: Any


@dataclass
class IdDictV:
    """``{id(x): x for x in ...}``: the entries, each once, in first-seen order."""

    items: ListV


Value = Node | IntV | BoolV | ListV | ClassV | ExcV | SelfV | ObjV | IdDictV | NodeClassV | FuncV


@dataclass
class Effect:
    """What a call of a contract does: ``pre`` must hold at the call (an obligation),
    ``post`` may be assumed after it, the state after is ``heap`` (fresh where ``post``
    constrains it), and it raises ``code`` (an exception code, 0 for none)."""

    pre: Any
    post: Any
    heap: Heap
    ret: Value | None = None
    code: Any = 0


@dataclass
class Contract:
    """A callee used through its pre/post, never its body. ``params``: its parameters
    (after ``self``); ``effect(heap, args, fresh)`` (``fresh(name)``: a new z3 name)."""

    params: tuple[str, ...]
    effect: Callable[[Heap, dict[str, Value], Callable[[str], str]], Effect]


def _ite(c: Any, a: Value, b: Value) -> Value:
    if isinstance(a, Node | IntV) and isinstance(b, Node | IntV):
        return type(a)(z3.If(c, a.t, b.t))
    if isinstance(a, BoolV) and isinstance(b, BoolV):
        return BoolV(z3.If(c, a.t, b.t))
    if isinstance(a, FuncV) and isinstance(b, FuncV):
        return FuncV(z3.If(c, a.t, b.t))
    if isinstance(a, ListV) and isinstance(b, ListV):
        if a.none is None and b.none is None:
            return ListV(z3.If(c, a.arr, b.arr), z3.If(c, a.n, b.n))
        return ListV(z3.If(c, a.arr, b.arr), z3.If(c, a.n, b.n), z3.If(c, _none(a), _none(b)))
    if isinstance(a, ExcV) and isinstance(b, ExcV):
        return ExcV(z3.If(c, a.code, b.code))
    if type(a) is type(b) and isinstance(a, ClassV | SelfV):
        return a
    return a  # a local bound on one path only: its other value is never read


def _none(v: ListV) -> Any:
    return z3.BoolVal(False) if v.none is None else v.none


@dataclass
class Heap:
    nxt: Any
    prv: Any
    cnt: Any
    fields: dict[str, Any] = field(default_factory=dict)
    """Further block attributes (name -> array over node ids), as ``Translation(fields=...)``."""
    ghost: tuple[Any, ...] = ()
    """Ghost state a contract reads and writes (the code never does), merged like the rest."""


def merge(g: Any, a: Heap, b: Heap) -> Heap:
    """``a`` where ``g`` holds, else ``b``."""
    if set(a.fields) != set(b.fields) or len(a.ghost) != len(b.ghost):
        raise ValueError("heaps of another shape")
    return Heap(
        z3.If(g, a.nxt, b.nxt),
        z3.If(g, a.prv, b.prv),
        z3.If(g, a.cnt, b.cnt),
        {k: z3.If(g, v, b.fields[k]) for k, v in a.fields.items()},
        tuple(z3.If(g, x, y) for x, y in zip(a.ghost, b.ghost, strict=True)),
    )


Cut = Callable[[Heap, Heap], tuple[Any, Heap]]
"""After an inlined method returns: ``cut(heap at the run's entry, heap now)`` gives a
claim, proved there (an obligation), and a heap the claim says equals the one now (its
ghost may differ: the code never reads a ghost), which the rest of the run goes on from."""


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

    def __init__(
        self,
        source: str,
        cls: str = "",
        *,
        fields: dict[str, str] | None = None,
        self_values: dict[str, Value] | None = None,
        contracts: dict[str, Contract] | None = None,
        cuts: dict[str, Cut] | None = None,
        node_class: str = "",
        consts: dict[str, Value] | None = None,
        tuple_fields: tuple[str, ...] = (),
        self_fields: tuple[str, ...] = (),
    ) -> None:
        """``fields``: block attributes beyond the links (name -> "int" or "bool"), read
        and written in ``Heap.fields``; ``self_values``: what ``self.<name>`` is (a
        constant, or an :class:`ObjV`); ``contracts``: methods used through their
        contract (``"_m"`` for ``self._m``, ``"obj._m"`` for ``self.obj._m``); ``cuts``:
        a :data:`Cut` after each return of the named methods (inlined as written);
        ``node_class``: the class name every node that is not None has (``type(x)``);
        ``contracts`` may also name a module function (``"_f"`` for ``_f(...)``);
        ``consts``: module-level names and their values (``MAX_BLOCKS``);
        ``tuple_fields``: block attributes that hold tuples (``_pending``): with them a
        tuple expression is a new object, an int id with :attr:`tlen` and :attr:`tget`
        (fresh: no such attribute held it at the run's entry), and ``()`` an empty list;
        ``self_fields``: int attributes of ``self`` (``heap.fields["self.<name>"]``)."""
        self.source = source
        self.fields = dict(fields or {})
        self.self_values = dict(self_values or {})
        self.contracts = dict(contracts or {})
        self.cuts = dict(cuts or {})
        self.node_class = node_class
        self.consts = dict(consts or {})  # module-level names the model gives a value
        self.tuple_fields = tuple_fields
        self.self_fields = self_fields
        self.tlen = z3.Function("tuple_len", z3.IntSort(), z3.IntSort())
        self.tget = z3.Function("tuple_get", z3.IntSort(), z3.IntSort(), z3.IntSort())
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
        self.heap0 = heap
        self.exc: Any = z3.IntVal(0)
        self.bound = bound
        self.invariants = invariants
        self.pc: list[Any] = []
        self.brk: Any = z3.BoolVal(False)
        self.cont: Any = z3.BoolVal(False)  # a ``continue`` ran in this iteration
        self.handling: list[Any] = []  # the exception codes of the handlers we are in
        self.frames: list[_Frame] = []
        self.obligations: list[Obligation] = []
        self.assumptions: list[Any] = []
        self.hyps: list[Any] = []  # loop-local hypotheses (inside a preserve step)
        self._k = 0
        self.method = ""
        self.tuples: list[Any] = []  # the ids of the tuples this run created

    # -- guards -----------------------------------------------------------------------

    @property
    def frame(self) -> _Frame:
        return self.frames[-1]

    def active(self) -> Any:
        return z3.And(
            self.exc == 0,
            z3.Not(self.frame.returned),
            z3.Not(self.brk),
            z3.Not(self.cont),
            *self.pc,
        )

    def raise_if(self, cond: Any, code: Any) -> None:
        c = z3.And(self.active(), cond)
        self.exc = z3.If(c, code if z3.is_expr(code) else z3.IntVal(code), self.exc)

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
        # the callee runs only where the call does: the caller's break, continue and
        # return are part of its guard (as a path condition: they are the caller's)
        self.pc.append(self.active() if self.frames else z3.BoolVal(True))
        saved = (self.brk, self.cont)
        self.brk = self.cont = z3.BoolVal(False)
        self.frames.append(_Frame(env))
        self.block(f.body)
        fr = self.frames.pop()
        self.brk, self.cont = saved
        self.pc.pop()
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
        elif isinstance(s, ast.Continue):
            self.cont = z3.Or(self.cont, self.active())
        elif isinstance(s, ast.Return):
            v = self.expr(s.value) if s.value is not None else None
            g = self.active()
            fr = self.frame
            if v is not None:
                fr.ret = v if fr.ret is None else _ite(g, v, fr.ret)
            fr.returned = z3.Or(fr.returned, g)
        elif isinstance(s, ast.Raise) and s.exc is None:
            if not self.handling:
                raise Unsupported("bare raise outside an except clause", s.lineno)
            self.raise_if(z3.BoolVal(True), self.handling[-1])  # the one being handled
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
            if isinstance(old, Node) and isinstance(v, ListV):  # ``x = []`` where x was None
                g = self.active()
                none = z3.And(z3.Not(g), old.t == NONE)
                self.frame.env[t.id] = ListV(v.arr, v.n, z3.If(g, _none(v), none))
                return
            self.frame.env[t.id] = v if old is None else _ite(self.active(), v, old)
        elif isinstance(t, ast.Tuple) and isinstance(v, Node) and self.tr.tuple_fields:
            for i, tt in enumerate(t.elts):  # unpacking a tuple object
                self.assign(tt, Node(self.tr.tget(v.t, i)))
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
            is_counter = isinstance(obj, SelfV) and t.attr == COUNTER
            if isinstance(obj, ObjV) and obj.counter and t.attr == obj.counter:
                is_counter = True
            if is_counter:
                if not isinstance(v, IntV | Node):
                    raise Unsupported("a non-integer counter", t.lineno)
                self.heap = replace(h, cnt=z3.If(self.active(), v.t, h.cnt))
            elif isinstance(obj, SelfV) and t.attr in self.tr.self_fields:
                if not isinstance(v, IntV | Node):
                    raise Unsupported(f"self.{t.attr} set to a non-integer", t.lineno)
                key = f"self.{t.attr}"
                fields = {**h.fields, key: z3.If(self.active(), v.t, h.fields[key])}
                self.heap = replace(h, fields=fields)
            elif isinstance(obj, Node) and t.attr in LINKS:
                if not isinstance(v, Node):
                    raise Unsupported(f"a link set to a non-node ({type(v).__name__})", t.lineno)
                self.raise_if(obj.t == NONE, self.tr.code(AttributeError))
                g = self.active()
                arr = getattr(h, LINKS[t.attr])
                new = z3.If(g, z3.Store(arr, obj.t, v.t), arr)
                self.heap = replace(h, **{LINKS[t.attr]: new})
            elif isinstance(obj, Node) and t.attr in self.tr.fields:
                want = BoolV if self.tr.fields[t.attr] == "bool" else (IntV, Node)
                if not isinstance(v, want):
                    raise Unsupported(f".{t.attr} set to a {type(v).__name__}", t.lineno)
                self.raise_if(obj.t == NONE, self.tr.code(AttributeError))
                g = self.active()
                arr = h.fields[t.attr]
                fields = {**h.fields, t.attr: z3.If(g, z3.Store(arr, obj.t, v.t), arr)}
                self.heap = replace(h, fields=fields)
            else:
                raise Unsupported(f"assignment to .{t.attr}", t.lineno)
        else:
            raise Unsupported(f"assignment to {type(t).__name__}", t.lineno)

    def cond(self, e: ast.expr) -> Any:
        return self._truth(self.expr(e), e.lineno)

    def if_(self, s: ast.If) -> None:
        c = simplify(self.cond(s.test))
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
            self.handling.append(raised)
            self.block(h.body)
            self.handling.pop()
            self.pc.pop()
            handled = z3.Or(handled, m)
        in_handler = self.exc
        self.pc.pop()
        # a handled exception gives way to what its handler raised; an unhandled one propagates
        self.exc = z3.If(entry, z3.If(handled, in_handler, raised), outer)

    def for_(self, s: ast.For) -> None:
        if (
            s.orelse
            and s.iter
            and any(isinstance(n, ast.Break | ast.Continue) for x in s.orelse for n in ast.walk(x))
        ):
            raise Unsupported("break/continue in a for's else", s.lineno)
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
            if isinstance(lv, Node) and self.tr.tuple_fields and not rev:  # a tuple object
                lv = ListV(
                    z3.Lambda([z3.Int("tj")], self.tr.tget(lv.t, z3.Int("tj"))), self.tr.tlen(lv.t)
                )
            if not isinstance(lv, ListV):
                raise Unsupported(f"for over {type(lv).__name__}", s.lineno)
            length = lv.n

            def elem(j: Any) -> Value:
                return Node(z3.Select(lv.arr, lv.n - 1 - j if rev else j))

        if key in self.invariants:
            if s.orelse:
                raise Unsupported("for ... else proved by invariant", s.lineno)
            self.loop_by_invariant(s, key, length, elem)
            return
        saved_brk, saved_cont = self.brk, self.cont
        self.brk = z3.BoolVal(False)
        for j in range(self.bound):
            self.cont = z3.BoolVal(False)
            self.pc.append(z3.IntVal(j) < length)
            self.assign(s.target, elem(z3.IntVal(j)))
            self.block(s.body)
            self.pc.pop()
        self.cont = saved_cont
        # a bounded unrolling must have finished the loop: that is an obligation
        self.obligations.append(
            Obligation(
                f"{key} ends within {self.bound} iterations",
                [*self.hyps],
                z3.Not(z3.And(self.active(), length > self.bound)),
            )
        )
        broke, self.brk = self.brk, saved_brk
        if s.orelse:  # runs when the loop ended without a break
            self.pc.append(z3.Not(broke))
            self.block(s.orelse)
            self.pc.pop()

    def loop_by_invariant(
        self, s: ast.For, key: str, length: Any, elem: Callable[[Any], Value]
    ) -> None:
        inv = self.invariants[key].inv
        if any(isinstance(n, ast.Break | ast.Continue | ast.Return | ast.Try) for n in ast.walk(s)):
            raise Unsupported(
                "break/continue/return/try inside a loop proved by invariant", s.lineno
            )
        if self.heap.ghost:
            raise Unsupported("a loop proved by invariant over a state with ghosts", s.lineno)
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
            {
                k: z3.Array(f"{k}!{self._k}", z3.IntSort(), v.range())
                for k, v in heap0.fields.items()
            },
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
        self.heap = merge(entry, hheap, heap0)
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
            if e.id in self.tr.consts:
                return self.tr.consts[e.id]
            if e.id in ("list", "int") or (e.id == self.tr.node_class and e.id):
                return ClassV(e.id)
            raise Unsupported(f"name {e.id!r}", e.lineno, "not a local of the method")
        if isinstance(e, ast.Attribute):
            obj = self.expr(e.value)
            if e.attr == "__class__":
                return _class_of(obj, e.lineno)
            if isinstance(obj, SelfV):
                if e.attr in self.tr.self_values:
                    return self.tr.self_values[e.attr]
                if e.attr in SENTINELS:
                    return Node(z3.IntVal(SENTINELS[e.attr]))
                if e.attr == COUNTER:
                    return IntV(self.heap.cnt)
                if e.attr in self.tr.self_fields:
                    return IntV(self.heap.fields[f"self.{e.attr}"])
            if isinstance(obj, ObjV) and obj.counter and e.attr == obj.counter:
                return IntV(self.heap.cnt)
            if isinstance(obj, Node) and e.attr in LINKS:
                self.raise_if(obj.t == NONE, self.tr.code(AttributeError))
                return Node(z3.Select(getattr(self.heap, LINKS[e.attr]), obj.t))
            if isinstance(obj, Node) and e.attr in self.tr.fields:
                self.raise_if(obj.t == NONE, self.tr.code(AttributeError))
                val = z3.Select(self.heap.fields[e.attr], obj.t)
                if e.attr in self.tr.tuple_fields:
                    return Node(val)  # a tuple object, or None
                return BoolV(val) if self.tr.fields[e.attr] == "bool" else IntV(val)
            raise Unsupported(f"attribute .{e.attr}", e.lineno)
        if isinstance(e, ast.Tuple) and self.tr.tuple_fields:
            return self.new_tuple(e)
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
        if isinstance(e, ast.IfExp):
            return self.if_exp(e)
        if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Slice):
            return self.slice(e, e.slice)
        if isinstance(e, ast.DictComp):
            return self.id_dict(e)
        if isinstance(e, ast.Subscript):
            lv, idx = self.expr(e.value), self.expr(e.slice)
            if isinstance(lv, Node) and isinstance(idx, IntV) and self.tr.tuple_fields:
                n = self.tr.tlen(lv.t)
                self.raise_if(z3.Or(idx.t < 0, idx.t >= n), self.tr.code(IndexError))
                return Node(self.tr.tget(lv.t, idx.t))
            if not isinstance(lv, ListV) or not isinstance(idx, IntV):
                raise Unsupported("subscript of a non-list", e.lineno)
            self.raise_if(z3.Or(idx.t < 0, idx.t >= lv.n), self.tr.code(IndexError))
            return Node(z3.Select(lv.arr, idx.t))
        if isinstance(e, ast.Call):
            return self.call_expr(e)
        raise Unsupported(f"expression {type(e).__name__}", e.lineno)

    # -- comprehensions and slices (over lists of at most ``bound`` entries) --------------

    def _items(self, gen: ast.comprehension, line: int) -> tuple[ListV, bool]:
        """The list a comprehension runs over, and whether it is ``enumerate``d."""
        if gen.is_async:
            raise Unsupported("async comprehension", line)
        it, enum = gen.iter, False
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "enumerate":
            if len(it.args) != 1 or it.keywords:
                raise Unsupported("enumerate with a start", line)
            it, enum = it.args[0], True
        lv = self.expr(it)
        if not isinstance(lv, ListV):
            raise Unsupported(f"a comprehension over a {type(lv).__name__}", line)
        # a bounded unrolling must cover the list: an obligation, as for a loop
        self.obligations.append(
            Obligation(
                f"{self.method}:{ast.unparse(gen.iter)} has at most {self.bound} entries",
                [*self.hyps, *self.assumptions],
                z3.Implies(self.active(), lv.n <= self.bound),
            )
        )
        return lv, enum

    def _each(self, gen: ast.comprehension, line: int, body: Callable[[int, Any], None]) -> None:
        """Run ``body(j, guard)`` for each position j of the comprehension's list, with its
        target bound and ``guard`` the condition that the entry exists and passes the ifs."""
        lv, enum = self._items(gen, line)
        saved = dict(self.frame.env)
        for j in range(self.bound):
            x: Value = Node(z3.Select(lv.arr, j))
            if enum:
                if not (isinstance(gen.target, ast.Tuple) and len(gen.target.elts) == 2):
                    raise Unsupported("enumerate into other than a pair", line)
                self._bind_target(gen.target.elts[0], IntV(z3.IntVal(j)), line)
                self._bind_target(gen.target.elts[1], x, line)
            else:
                self._bind_target(gen.target, x, line)
            guard: Any = z3.IntVal(j) < lv.n
            self.pc.append(guard)
            for cond in gen.ifs:
                guard = z3.And(guard, self.cond(cond))
            body(j, guard)
            self.pc.pop()
        self.frame.env = saved

    def _bind_target(self, t: ast.expr, v: Value, line: int) -> None:
        if not isinstance(t, ast.Name):
            raise Unsupported("a comprehension target that is not a name", line)
        self.frame.env[t.id] = v

    def next_of(self, e: ast.Call) -> Value:
        """``next((elt for x in xs if c), default)``: the first hit's ``elt``, else default."""
        gen, default = e.args
        if not isinstance(gen, ast.GeneratorExp) or len(gen.generators) != 1:
            raise Unsupported("next() of other than a one-loop generator", e.lineno)
        hits: list[tuple[Any, Value]] = []
        self._each(gen.generators[0], e.lineno, lambda j, g: hits.append((g, self.expr(gen.elt))))
        out: Value = self.expr(default)
        for g, v in reversed(hits):
            out = _ite(g, v, out)
        return out

    def id_dict(self, e: ast.DictComp) -> IdDictV:
        """``{id(x): x for x in xs if c}``: each entry once (by identity), first-seen order."""
        gen = e.generators[0] if len(e.generators) == 1 else None
        k, v = e.key, e.value
        if (
            gen is None
            or not isinstance(gen.target, ast.Name)
            or not (isinstance(k, ast.Call) and isinstance(k.func, ast.Name) and k.func.id == "id")
            or len(k.args) != 1
            or not isinstance(k.args[0], ast.Name)
            or not isinstance(v, ast.Name)
            or not k.args[0].id == v.id == gen.target.id
        ):
            raise Unsupported("a dict comprehension other than {id(x): x for x in ...}", e.lineno)
        arr: Any = z3.K(z3.IntSort(), z3.IntVal(NONE))
        n: Any = z3.IntVal(0)
        seen: list[tuple[Any, Any]] = []

        def add(j: int, g: Any) -> None:
            nonlocal arr, n
            x = self.expr(v)
            assert isinstance(x, Node)
            new = z3.And(g, *[z3.Not(z3.And(h, y == x.t)) for h, y in seen])
            arr = z3.If(new, z3.Store(arr, n, x.t), arr)
            n = z3.If(new, n + 1, n)
            seen.append((g, x.t))

        self._each(gen, e.lineno, add)
        return IdDictV(ListV(arr, n))

    def slice(self, e: ast.Subscript, sl: ast.Slice) -> ListV:
        """``xs[a:b]`` (no step), clamped as Python clamps it."""
        lv = self.expr(e.value)
        if sl.step is not None or not isinstance(lv, ListV):
            raise Unsupported("a slice with a step, or of a non-list", e.lineno)

        def bound_of(x: ast.expr | None, dflt: Any) -> Any:
            if x is None:
                return dflt
            v = self.expr(x)
            if not isinstance(v, IntV):
                raise Unsupported("a slice bound that is not an int", e.lineno)
            t = z3.If(v.t < 0, v.t + lv.n, v.t)
            return z3.If(t < 0, 0, z3.If(t > lv.n, lv.n, t))

        lo, hi = bound_of(sl.lower, z3.IntVal(0)), bound_of(sl.upper, lv.n)
        i = z3.Int(f"sl!{self._k}")
        self._k += 1
        arr = lv.arr if sl.lower is None else z3.Lambda([i], z3.Select(lv.arr, i + lo))
        return ListV(arr, z3.If(hi > lo, hi - lo, 0))

    def new_tuple(self, e: ast.Tuple) -> Value:
        """A tuple expression: a new object (``()``: an empty list). A starred element may
        come first (``(*t, x)``): the new tuple is ``t``'s entries, then the others."""
        if not e.elts:
            return ListV(z3.K(z3.IntSort(), z3.IntVal(NONE)), z3.IntVal(0))
        tlen, tget = self.tr.tlen, self.tr.tget
        new = self.fresh("tuple")
        facts = [new != NONE, *[new != u for u in self.tuples]]
        b = z3.Int("tb")
        for f in self.tr.tuple_fields:
            facts.append(z3.ForAll([b], self.heap0.fields[f][b] != new))
        elts, start = list(e.elts), z3.IntVal(0)
        if isinstance(elts[0], ast.Starred):
            src = self.expr(elts[0].value)
            if not isinstance(src, Node):
                raise Unsupported("a starred element that is not a tuple", e.lineno)
            i = z3.Int("ti")
            start = tlen(src.t)
            facts.append(
                z3.ForAll(
                    [i], z3.Implies(z3.And(i >= 0, i < start), tget(new, i) == tget(src.t, i))
                )
            )
            elts = elts[1:]
        for j, x in enumerate(elts):
            if isinstance(x, ast.Starred):
                raise Unsupported("a starred element after the first", e.lineno)
            v = self.expr(x)
            if not isinstance(v, Node | FuncV | IntV):
                raise Unsupported(f"a tuple of {type(v).__name__}", e.lineno)
            facts.append(tget(new, start + j) == v.t)
        facts.append(tlen(new) == start + len(elts))
        self.tuples.append(new)
        self.hyps.extend(facts)  # facts about a fresh object: true on every path
        self.assumptions.extend(facts)
        return Node(new)

    def if_exp(self, e: ast.IfExp) -> Value:
        """``a if c else b``: only the branch taken runs (a branch decided by the model's
        kinds, such as ``type(x) is list``, is the only one translated)."""
        c = simplify(self.cond(e.test))
        if z3.is_true(c):
            return self.expr(e.body)  # type: ignore[no-any-return]
        if z3.is_false(c):
            return self.expr(e.orelse)  # type: ignore[no-any-return]
        self.pc.append(c)
        a = self.expr(e.body)
        self.pc.pop()
        self.pc.append(z3.Not(c))
        b = self.expr(e.orelse)
        self.pc.pop()
        if type(a) is not type(b):
            raise Unsupported("a conditional expression of two kinds", e.lineno)
        return _ite(c, a, b)

    def _truth(self, v: Value, line: int) -> Any:
        if isinstance(v, BoolV):
            return v.t
        if isinstance(v, Node):  # a block is true, None false
            return v.t != NONE
        if isinstance(v, ObjV):
            return z3.BoolVal(True)
        if isinstance(v, ListV):
            return v.n > 0 if v.none is None else z3.And(z3.Not(v.none), v.n > 0)
        if isinstance(v, IntV):
            return v.t != 0
        if isinstance(v, FuncV):
            return z3.BoolVal(True)
        raise Unsupported(f"truth value of {type(v).__name__}", line)

    def boolop(self, e: ast.BoolOp) -> Value:
        if self.tr.tuple_fields and isinstance(e.op, ast.Or) and len(e.values) == 2:
            first = self.expr(e.values[0])
            if isinstance(first, ListV):  # ``xs or ()``: the value, not its truth
                t = self._truth(first, e.lineno)
                self.pc.append(z3.Not(t))
                other = self.expr(e.values[1])
                self.pc.pop()
                if not isinstance(other, ListV):
                    raise Unsupported("``or`` of a list and a non-list", e.lineno)
                return ListV(z3.If(t, first.arr, other.arr), z3.If(t, first.n, other.n))
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
        if isinstance(a, NodeClassV) and isinstance(b, ClassV):
            same = z3.And(a.t != NONE, z3.BoolVal(b.name == self.tr.node_class))
            if isinstance(op, ast.Is | ast.Eq):
                return same
            if isinstance(op, ast.IsNot | ast.NotEq):
                return z3.Not(same)
        if isinstance(a, ClassV) and isinstance(b, ClassV):
            if isinstance(op, ast.Is | ast.Eq):
                return z3.BoolVal(a.name == b.name)
            if isinstance(op, ast.IsNot | ast.NotEq):
                return z3.BoolVal(a.name != b.name)
        if isinstance(a, ListV) and isinstance(b, Node) and isinstance(op, ast.Is | ast.IsNot):
            none = z3.And(_none(a), b.t == NONE)  # ``xs is None``
            return none if isinstance(op, ast.Is) else z3.Not(none)
        if isinstance(a, FuncV):
            a = Node(a.t)
        if isinstance(b, FuncV):
            b = Node(b.t)
        if isinstance(a, BoolV) and isinstance(b, BoolV):  # ``flag is True`` and the like
            if isinstance(op, ast.Is | ast.Eq):
                return a.t == b.t
            if isinstance(op, ast.IsNot | ast.NotEq):
                return a.t != b.t
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

    def _bind(self, params: list[str], e: ast.Call, what: str) -> dict[str, Value]:
        if any(k.arg is None for k in e.keywords) or any(
            isinstance(a, ast.Starred) for a in e.args
        ):
            raise Unsupported(f"*args/**kwargs in a call of {what}", e.lineno)
        names = params[: len(e.args)] + [str(k.arg) for k in e.keywords]
        if len(e.args) > len(params) or sorted(names) != sorted(params):
            raise Unsupported(f"call of {what} with other arguments than {params}", e.lineno)
        vals = [self.expr(a) for a in e.args] + [self.expr(k.value) for k in e.keywords]
        return dict(zip(names, vals, strict=True))

    def contract_call(self, key: str, e: ast.Call) -> Value | None:
        c = self.tr.contracts[key]
        args = self._bind(list(c.params), e, key)
        self._k += 1
        k = self._k
        eff = c.effect(self.heap, args, lambda name: f"{name}!{key}!{k}")
        g = self.active()
        self.obligations.append(
            Obligation(
                f"{self.method}: pre of {key} (call {k})",
                [*self.hyps, *self.assumptions],
                z3.Implies(g, eff.pre),
            )
        )
        self.assumptions.append(z3.Implies(g, eff.post))
        self.heap = merge(g, eff.heap, self.heap)
        self.raise_if(z3.BoolVal(True) if not z3.is_expr(eff.code) else eff.code != 0, eff.code)
        return eff.ret

    def cut(self, name: str) -> None:
        claim, heap = self.tr.cuts[name](self.heap0, self.heap)
        g = self.active()
        self.obligations.append(
            Obligation(
                f"{self.method}: after {name}",
                [*self.hyps, *self.assumptions],
                z3.Implies(g, claim),
            )
        )
        self.assumptions.append(z3.Implies(g, claim))
        self.heap = merge(g, heap, self.heap)

    def call_expr(self, e: ast.Call) -> Any:
        f = e.func
        if isinstance(f, ast.Name) and f.id == "next" and len(e.args) == 2 and not e.keywords:
            return self.next_of(e)
        if isinstance(f, ast.Attribute):
            obj = self.expr(f.value)
            if isinstance(obj, SelfV) and f.attr in self.tr.contracts:
                return self.contract_call(f.attr, e)
            if isinstance(obj, ObjV):
                key = f"{obj.name}.{f.attr}"
                if key not in self.tr.contracts:
                    raise Unsupported(f"call of {key}() (no contract for it)", e.lineno)
                return self.contract_call(key, e)
            if isinstance(obj, SelfV) and f.attr in self.tr.funcs:
                target = self.tr.funcs[f.attr]
                params = [a.arg for a in target.args.args][1:]
                if target.args.kwonlyargs:
                    raise Unsupported(f"call of self.{f.attr} (keyword-only)", e.lineno)
                ret = self.call(target, self._bind(params, e, f"self.{f.attr}"), e.lineno)
                if f.attr in self.tr.cuts:
                    self.cut(f.attr)
                return ret
            if isinstance(obj, IdDictV) and f.attr == "values" and not e.args and not e.keywords:
                return obj.items
        if isinstance(f, ast.Name) and f.id in self.tr.contracts:  # a module function's
            return self.contract_call(f.id, e)
        if e.keywords:
            raise Unsupported("keyword arguments", e.lineno)
        if isinstance(f, ast.Name):
            if f.id == "callable" and len(e.args) == 1:
                return BoolV(z3.BoolVal(isinstance(self.expr(e.args[0]), FuncV)))
            if f.id == "len" and len(e.args) == 1:
                v = self.expr(e.args[0])
                if isinstance(v, ListV):
                    return IntV(v.n)
            if f.id == "type" and len(e.args) == 1:
                v = self.expr(e.args[0])
                if isinstance(v, Node) and self.tr.node_class:
                    return NodeClassV(v.t)
                return _class_of(v, e.lineno)
            if f.id == "list" and len(e.args) == 1:
                v = self.expr(e.args[0])
                if isinstance(v, ListV):  # a copy: lists are values here
                    return v
            if f.id == "isinstance" and len(e.args) == 2 and isinstance(e.args[1], ast.Name):
                v = self.expr(e.args[0])
                if isinstance(v, ExcV):
                    cls = self.tr._exc_class(e.args[1].id, e.lineno)
                    hits = [
                        v.code == i + 1 for i, c in enumerate(self.tr.codes) if issubclass(c, cls)
                    ]
                    return BoolV(z3.Or(*hits) if hits else z3.BoolVal(False))
            raise Unsupported(f"call of {f.id}()", e.lineno)
        if isinstance(f, ast.Attribute):
            obj = self.expr(f.value)
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
