"""The teaching tools: docs checking, generated figures, and ``kvpool play``.

Each check here is shown failing on a seeded fault, so a green run means something.
"""

from __future__ import annotations

import importlib.util
import io
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from rich.console import Console

from kvpool.impl import BlockPool
from kvpool.oracle import render
from kvpool.oracle.play import Player, Session, UsageError, main, parse, would_break
from kvpool.spec import FreeBlocks, GetNewBlocks, Touch, UnpinBlocks, World
from kvpool.spec.state import PoolState

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)", re.M)


def _docs_conftest() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_conftest", DOCS / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fence_languages(text: str) -> list[str]:
    """The language of every fenced block that opens (closing fences are skipped)."""
    out: list[str] = []
    open_fence: str | None = None
    for match in FENCE.finditer(text):
        fence, lang = match.group(1), match.group(2)
        if open_fence is None:
            out.append(lang)
            open_fence = fence
        elif fence.startswith(open_fence) and not lang:
            open_fence = None
    return out


# -- every block in docs/ runs -----------------------------------------------------------


def test_every_docs_code_block_is_one_that_runs() -> None:
    """Only python and console blocks are allowed, and Sybil runs both kinds."""
    pages = sorted(DOCS.glob("*.md"))
    assert len(pages) >= 10
    bad = {
        page.name: langs
        for page in pages
        if (
            langs := [
                lang
                for lang in fence_languages(page.read_text())
                if lang not in ("python", "console")
            ]
        )
    }
    assert bad == {}, f"blocks that would not run in make test: {bad}"


def test_fence_scanner_sees_a_block_that_would_not_run() -> None:
    page = "text\n```python\nx = 1\n```\n\n```sh\nrm -rf /\n```\n"
    assert fence_languages(page) == ["python", "sh"]


def test_console_checker_fails_on_wrong_output_and_wrong_exit() -> None:
    conftest = _docs_conftest()

    class FakeExample:
        def __init__(self, parsed: str) -> None:
            self.parsed = parsed

    ok = FakeExample("$ echo hello\nhello\n$ false\n[exit 1]\n")
    assert conftest.evaluate_console(ok) is None
    wrong_output = conftest.evaluate_console(FakeExample("$ echo hello\ngoodbye\n"))
    assert wrong_output is not None and "goodbye" in wrong_output
    wrong_exit = conftest.evaluate_console(FakeExample("$ false\n"))
    assert wrong_exit is not None and "exited 1" in wrong_exit


def test_console_sessions_split_heredocs() -> None:
    conftest = _docs_conftest()
    session = "$ cat <<'EOF'\na\nEOF\na\n$ echo b\nb\n"
    assert conftest.split_session(session) == [("cat <<'EOF'\na\nEOF", "a"), ("echo b", "b")]


# -- figures are the spec's ---------------------------------------------------------------


def test_figures_in_docs_are_what_the_spec_draws_today() -> None:
    """``make docs`` output is committed; this fails when the spec and the pictures part."""
    drawn = render.figures()
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in (DOCS / "figures").glob("*.svg")}
    assert set(drawn) == set(on_disk)
    stale = [name for name in drawn if drawn[name] != on_disk[name]]
    assert stale == [], f"run `make docs` to redraw {stale}"


@pytest.fixture
def spec_frees_everything_to_the_back(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A seeded spec bug: free_blocks ignores the FRONT/BACK rule."""

    def release(ps: PoolState, ids: list[int], evict_first: bool) -> None:
        for b in ids:
            ps.ref[b] -= 1
            if ps.ref[b] == 0:
                ps.free[b] = None

    monkeypatch.setattr(World, "_release", staticmethod(release))
    yield


@pytest.mark.usefixtures("spec_frees_everything_to_the_back")
def test_figure_check_catches_a_changed_spec() -> None:
    drawn = render.figures()
    on_disk = (DOCS / "figures" / "op_free_blocks.svg").read_text(encoding="utf-8")
    assert drawn["op_free_blocks.svg"] != on_disk


def test_lifecycle_has_no_edge_from_free_to_cached() -> None:
    edges = render.lifecycle()
    assert ("free", "free+cached") not in edges
    assert edges[("free+cached", "in use+cached")] == {"touch"}
    assert all(a != b for a, b in edges)


def test_lifecycle_exploration_catches_a_spec_that_breaks_an_invariant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def touch_without_unlinking(world: World, op: Touch) -> object:
        ps = world.pool(op.pool)
        for ref in op.blocks:
            ps.ref[ref.block] += 1  # type: ignore[union-attr]
        from kvpool.spec import Outcome

        return Outcome()

    from kvpool.spec import state

    monkeypatch.setitem(state._HANDLERS, Touch, touch_without_unlinking)
    with pytest.raises(AssertionError, match="INV-FREE"):
        render.lifecycle()


# -- kvpool play ----------------------------------------------------------------------------


def run_player(commands: str, factory: object = BlockPool, n: int = 5) -> tuple[bool, str]:
    out = io.StringIO()
    console = Console(file=out, width=120, no_color=True, highlight=False)
    player = Player(Session(n, True, True, factory), console, compact=True)  # type: ignore[arg-type]
    for line in commands.splitlines():
        if not player.command(line):
            break
    return player.ok, out.getvalue()


def test_play_parses_the_commands_of_the_help() -> None:
    assert parse("get 3") == GetNewBlocks(3)
    assert parse("free! 1 2") == FreeBlocks([1, 2], evict_first=True)
    assert parse("unpin 3 w1") == UnpinBlocks([3], 1)
    assert parse("  # a comment") is None
    for bad in ("unpin 3", "cache 1", "get x", "frobnicate"):
        with pytest.raises(UsageError):
            parse(bad)


def test_play_on_the_reference_pool_agrees_and_draws() -> None:
    ok, out = run_player("get 3\ncache 1 a\nfree 1 2\nunpin 3 w1\nget 4\nundo\nreset")
    assert ok, out
    assert "HEAD <-> 2 <-> 4 <-> 1:a <-> TAIL" in out
    assert "watcher w1 fired for block 3" in out
    assert "took back get_new_blocks(4)" in out
    assert "DISAGREE" not in out


class BackPool(BlockPool):
    """Seeded bug: every freed block goes to the back."""

    def free_blocks(self, ordered_blocks, evict_first=False):  # type: ignore[no-untyped-def]
        released = []
        for block in ordered_blocks:
            block.ref_cnt -= 1
            if block.ref_cnt == 0:
                released.append(block)
        self.free_block_queue.append_n(released)


def test_play_reports_a_pool_that_disagrees_with_the_spec() -> None:
    ok, out = run_player("get 2\nfree 1 2\nget 1", factory=BackPool)
    assert not ok
    assert "SPEC AND POOL DISAGREE" in out
    assert "the spec returned (1,), the pool (3,)" in out


def test_play_main_exit_status(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("get 2\nfree 2 2\nquit\nget 1\n"))
    assert main(["-n", "4", "--compact"]) == 0
    out = capsys.readouterr().out
    assert "refused: RefCountUnderflow" in out
    assert "get_new_blocks(1)" not in out  # quit stopped the script
    assert main(["--impl", "no.such.module:Pool"]) == 2


def test_would_break_names_the_invariants_a_missing_check_protects() -> None:
    world = World.single(4)
    world.run([GetNewBlocks(2), FreeBlocks([2])])
    broken = would_break(world.pools[0], FreeBlocks([2]))
    assert broken is not None
    assert {v.invariant for v in broken} == {"INV-REF", "INV-FREE"}
    assert would_break(world.pools[0], GetNewBlocks(9)) is None


# -- the bug zoo's trace finder --------------------------------------------------------------


def test_zoo_finds_no_trace_against_the_reference_pool() -> None:
    from kvpool.oracle.zoo import PoolSubject, shortest_trace

    assert shortest_trace(lambda: PoolSubject(BlockPool, (4, True, True)), depth=3) is None


def test_zoo_finds_the_shortest_trace_for_a_seeded_bug() -> None:
    from kvpool.oracle.zoo import PoolSubject, draw_trace, shortest_trace

    views = shortest_trace(lambda: PoolSubject(BackPool, (4, True, True)))
    assert views is not None
    # BackPool also lost the double-free check: one call on a fresh pool exposes it.
    assert [v.op for v in views] == [FreeBlocks((1,))]
    assert "the outcome differs" in views[-1].problems
    assert "INV-REF on block 1: ref_cnt is -1" in views[-1].problems
    drawing = draw_trace(views)
    assert "spec returns   refused: RefCountUnderflow" in drawing
    assert "bug returns    None" in drawing


def test_the_bug_zoo_page_lists_every_catalogued_mutant() -> None:
    """docs/08-bug-zoo.md is generated; a mutant added to a catalogue must appear on it."""
    page = (DOCS / "08-bug-zoo.md").read_text(encoding="utf-8")
    on_page = set(re.findall(r"^(?:### |\* )`([^`]+)`", page, re.M))
    from kvpool.mutants import MUTANTS as POOL_MUTANTS
    from kvpool.oracle.findings import FINDINGS
    from kvpool.proofs.mutants import MUTANTS

    names = {m.name for m in (*MUTANTS, *POOL_MUTANTS)} | {f.name for f in FINDINGS}
    missing = names - on_page
    assert missing == set(), f"run `make docs` to add {sorted(missing)} to the bug zoo"


# -- the copy of the semantics ------------------------------------------------------------


def _without_header(text: str) -> str:
    """The copy's text after its leading HTML comment (which says where it comes from)."""
    if text.startswith("<!--"):
        text = text.split("-->", 1)[1].lstrip("\n")
    return text


def test_the_semantics_copy_in_docs_has_a_header_and_content() -> None:
    copy = (DOCS / "semantics.md").read_text(encoding="utf-8")
    assert copy.startswith("<!--") and "shared/design/semantics.md" in copy.split("-->")[0]
    body = _without_header(copy)
    assert body.startswith("# Reference semantics")
    for name in ("INV-REF", "INV-FREE", "INV-NULL", "INV-WATCH", "INV-CACHE", "INV-LIST"):
        assert name in body


def _recorded_and_actual_sha256(text: str) -> tuple[str | None, str]:
    """The sha256 the copy's header records, and that of the text after the header."""
    import hashlib
    import re

    recorded = re.search(r"sha256 of the text after this comment:\s*([0-9a-f]{64})", text)
    actual = hashlib.sha256(_without_header(text).encode("utf-8")).hexdigest()
    return (recorded.group(1) if recorded else None), actual


def test_the_semantics_page_is_edited_only_with_its_recorded_hash() -> None:
    """docs/semantics.md is normative now (issue 13): any edit must update its header's hash."""
    text = (DOCS / "semantics.md").read_text(encoding="utf-8")
    assert "normative" in text.split("-->")[0]
    recorded, actual = _recorded_and_actual_sha256(text)
    assert recorded, "docs/semantics.md's header must record the sha256 of its text"
    assert actual == recorded, "docs/semantics.md was edited without updating its sha256"
    # an edit of one word is seen
    edited = _recorded_and_actual_sha256(text.replace("INV-REF", "INV-REFS", 1))
    assert edited[0] == recorded and edited[1] != recorded
    # docs/semantics.md is normative and extends the shared design text, so it is not
    # compared with shared/design/semantics.md: the recorded hash is the check.


def test_play_drives_any_target_even_one_without_state(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # a pool with vLLM's API and none of kvpool's internals: results are compared
    monkeypatch.setattr("sys.stdin", io.StringIO("get 2\nfree 1 2\nget 1\n"))
    assert main(["-n", "4", "--compact", "--impl", "oracle_targets:MinimalPool"]) == 0
    out = capsys.readouterr().out
    assert "it exposes no state: results are compared" in out
    assert "get_new_blocks(1)  ->  (1,)" in out and "DISAGREE" not in out
    # the same by its target name, and a seeded bug behind a target name is caught
    monkeypatch.setattr("sys.stdin", io.StringIO("get 2\nfree 1 2\nget 1\n"))
    assert main(["-n", "4", "--compact", "--impl", "python:oracle_targets:LifoFifoSwapped"]) == 1
    assert "SPEC AND POOL DISAGREE" in capsys.readouterr().out
