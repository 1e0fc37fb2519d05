"""The PEP 316 contracts: present on every public method, free when off, biting when on.

The CrossHair runs (on the real code, and on mutants) are in test_contracts_crosshair.py.
"""

from __future__ import annotations

import ast
import dis
import inspect
import subprocess
import sys
import textwrap
import types

import pytest

import kvpool.impl.free_queue as free_queue_mod
import kvpool.impl.pool as pool_mod
from kvpool.contracts import harness, runtime
from kvpool.contracts.bugs import POOLS
from kvpool.impl import BlockPool, FreeKVCacheBlockQueue
from kvpool.spec import PoolState, World

PUBLIC = {
    FreeKVCacheBlockQueue: [
        "popleft", "popleft_n", "remove", "append", "append_n", "prepend_n",
        "get_all_free_blocks",
    ],
    BlockPool: [
        "get_new_blocks", "free_blocks", "touch", "unpin_blocks", "cache_blocks",
        "get_cached_block", "evict_blocks", "reset_prefix_cache", "take_events",
        "get_num_free_blocks", "get_usage", "is_block_writable",
    ],
}  # fmt: skip


@pytest.mark.parametrize(("cls", "name"), [(c, n) for c, ns in PUBLIC.items() for n in ns])
def test_every_public_method_has_a_postcondition(cls: type, name: str) -> None:
    clauses, _ = runtime.method_clauses(cls, name)
    assert any(c.kind == "post" for c in clauses), f"{cls.__name__}.{name} has no post:"


def test_class_invariants_name_inv_list_free_ref_null() -> None:
    tags = {
        c.tag for cls in (FreeKVCacheBlockQueue, BlockPool) for c in runtime.class_invariants(cls)
    }
    assert {"INV-LIST", "INV-FREE", "INV-REF", "INV-NULL"} <= tags
    spec_tags = {c.tag for c in runtime.class_invariants(PoolState)}
    assert {"INV-FREE", "INV-REF", "INV-NULL"} <= spec_tags
    assert runtime.method_clauses(World, "apply")[0]


def _strip_docstrings(source: str) -> types.CodeType:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Module)) and ast.get_docstring(
            node, clean=False
        ):
            node.body = node.body[1:] or [ast.Pass()]
    return compile(ast.fix_missing_locations(tree), "<stripped>", "exec")


def _functions(code: types.CodeType) -> dict[str, list[tuple[str, object]]]:
    out: dict[str, list[tuple[str, object]]] = {}
    stack = [code]
    while stack:
        c = stack.pop()
        out[c.co_qualname] = [
            (i.opname, i.argval if not isinstance(i.argval, types.CodeType) else "<code>")
            for i in dis.get_instructions(c)
            if i.opname not in ("RESUME",)
        ]
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return out


@pytest.mark.parametrize("module", [pool_mod, free_queue_mod])
def test_contracts_cost_nothing_the_bytecode_is_that_of_the_code_without_docstrings(
    module: types.ModuleType,
) -> None:
    source = inspect.getsource(module)
    with_docs = _functions(compile(source, "<with>", "exec"))
    without = _functions(_strip_docstrings(source))
    functions = [n for n in with_docs if n != "<module>" and not _is_class_body(module, n)]
    assert len(functions) > 10
    for name in functions:
        assert with_docs[name] == without[name], f"{name}: the docstring changed the bytecode"


def _is_class_body(module: types.ModuleType, qualname: str) -> bool:
    return isinstance(getattr(module, qualname, None), type)


def test_normal_use_never_imports_the_checker() -> None:
    code = "import sys, kvpool.impl, kvpool.spec; print('kvpool.contracts' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_enable_then_disable_restores_the_very_same_functions() -> None:
    before = {n: BlockPool.__dict__[n] for n in PUBLIC[BlockPool]}
    with runtime.checking():
        assert BlockPool.__dict__["get_new_blocks"] is not before["get_new_blocks"]
        assert runtime.enabled()
    assert {n: BlockPool.__dict__[n] for n in PUBLIC[BlockPool]} == before
    assert not runtime.enabled()


def test_runtime_mode_passes_a_correct_workload() -> None:
    with runtime.checking():
        pool = BlockPool(6, enable_kv_cache_events=True)
        a = pool.get_new_blocks(3)
        pool.cache_blocks(a[:2], [b"x", b"y"])
        pool.touch([a[0]])
        pool.free_blocks(a)
        pool.free_blocks([a[0]])
        pool.unpin_blocks(pool.get_new_blocks(1), lambda b: None)
        pool.evict_blocks([1, 2])
        assert pool.get_new_blocks(2)
        World.single(4).apply(harness.GetNewBlocks(2))


@pytest.mark.parametrize(
    ("corrupt", "tag"),
    [
        (lambda p: setattr(p.blocks[1], "ref_cnt", -1), "INV-REF"),
        (lambda p: setattr(p.null_block, "ref_cnt", 1), "INV-NULL"),
        (lambda p: setattr(p.free_block_queue, "num_free_blocks", 2), "INV-LIST"),
        (lambda p: setattr(p.blocks[2], "ref_cnt", 1), "INV-FREE"),
        (lambda p: setattr(p.blocks[3], "next_free_block", p.blocks[1]), "INV-LIST"),  # a cycle
    ],
)
def test_runtime_mode_reports_a_corrupted_pool_by_invariant(corrupt, tag) -> None:  # type: ignore[no-untyped-def]
    pool = BlockPool(5)
    corrupt(pool)
    with runtime.checking(), pytest.raises(runtime.ContractViolation) as info:
        pool.get_num_free_blocks()
    assert info.value.clause.tag == tag, str(info.value)


def test_runtime_mode_reports_a_broken_postcondition() -> None:
    pool = POOLS["pool-hands-out-twice-referenced"](4)
    with runtime.checking([type(pool)]), pytest.raises(runtime.ContractViolation) as info:
        pool.get_new_blocks(1)
    assert info.value.clause.kind in ("post", "inv")


def test_the_harness_passes_on_the_real_pool_for_concrete_inputs() -> None:
    for n in (1, 2, 4):
        for setup in ([], [0, 2, 1], [0, 0, 3, 4], [3, 0, 2, 1]):
            assert harness.get_new_blocks(n, setup, 2)
            assert harness.free_blocks(n, setup, [1, 1, 2], False)
            assert harness.free_blocks(n, setup, [1, 2], True)
            assert harness.touch(n, setup, [1, 2])
            assert harness.unpin_blocks(n, setup, [1], 0)
            assert harness.cache_blocks(n, setup, [1, 2], [0, 0])
            assert harness.evict_blocks(n, setup, [1, -1])
            assert harness.reset_prefix_cache(n, setup)
            assert harness.queries(n, setup, 1, 1)


@pytest.mark.parametrize("mutant", sorted(POOLS))
def test_the_harness_catches_every_mutant_on_some_concrete_input(
    mutant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(harness, "POOL", POOLS[mutant])
    entries = [
        lambda: harness.get_new_blocks(2, [0, 2, 1], 1),
        lambda: harness.free_blocks(4, [0, 0, 2], [1, 2], False),
        lambda: harness.free_blocks(3, [0], [1, 1], False),
        lambda: harness.touch(3, [0, 1], [1]),
        lambda: harness.get_new_blocks(3, [], 1),
        lambda: harness.free_blocks(4, [0, 0], [1, 2], False),
        lambda: harness.free_blocks(3, [], [1], False),
        lambda: harness.free_blocks(4, [0, 0, 2, 2], [1, 2], False),  # two keyed: BACK
    ]
    caught = 0
    for entry in entries:
        try:
            entry()
        except AssertionError:
            caught += 1
    assert caught, f"{mutant} passes every harness input"


def test_docs_of_runtime_mode_mention_how_to_turn_it_on() -> None:
    doc = textwrap.dedent(runtime.__doc__ or "")
    assert "enable()" in doc and "KVPOOL_CONTRACTS=1" in doc


def test_the_bounded_queue_entry_points_pass_every_input_when_run_plainly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The same scope CrossHair confirms, run as plain Python: every queue, every argument.
    from kvpool.contracts import bounded
    from kvpool.contracts.bugs import QUEUES

    states = range(len(bounded.QUEUES_IN_SCOPE))
    for s in states:
        for n in range(bounded.BLOCKS + 2):
            bounded.queue_popleft_n(s, n)
        for b in range(1, bounded.BLOCKS + 1):
            bounded.queue_remove(s, b)
        for extra in states:
            bounded.queue_append_n(s, extra)
            bounded.queue_prepend_n(s, extra)
    # and a queue mutant fails some input of its entry point
    monkeypatch.setattr(bounded, "QUEUE", QUEUES["queue-append-n-reversed"])
    with pytest.raises(AssertionError, match="_append_n"):
        for s in states:
            for extra in states:
                bounded.queue_append_n(s, extra)
