"""Every vLLM release: the stand-ins, the API probe, the state reader per layout, the matrix.

Synthetic vLLM-shaped "releases" (tests/releases/, built on tests/forks/shaped.py) stand
for the API epochs, loaded from a temporary cache exactly as a downloaded release is;
vLLM 0.33.0 is the real one (cached by ``make conform-vllm``; downloaded once if not).
The run over every release on the registry is ``make conform-releases``, not this file.
"""

from __future__ import annotations

import subprocess
import sys
import types
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest

from kvpool.oracle import vllm_target
from kvpool.oracle.conformance import conform
from kvpool.oracle.exits import BadInput
from kvpool.oracle.matrix import Cell, Row, render_errata, render_matrix, select, splice
from kvpool.oracle.targets import _probed
from kvpool.oracle.vllm_target import (
    FILES,
    NoSuchRelease,
    VllmPool,
    _Codec,
    fetch_sources,
    load_vllm,
    probe_api,
    vllm_state,
)

HERE = Path(__file__).parent / "releases"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KVPOOL_CACHE", str(tmp_path))
    return tmp_path


def release(cache: Path, version: str, epoch: str) -> types.ModuleType:
    """Put a synthetic release's two files where a download would leave them, and load it."""
    src = cache / f"vllm-{version}" / "src"
    for name, part in zip(FILES, ("kv_cache_utils", "block_pool"), strict=True):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text((HERE / f"{epoch}_{part}.py").read_text())
    vllm_target._LOADED.pop(version, None)
    return load_vllm(version)


def target_of(module: types.ModuleType, version: str) -> Any:
    api = probe_api(module.BlockPool)
    codec = _Codec()

    def factory(n: int, caching: bool, events: bool) -> VllmPool:
        return VllmPool(module, n, caching, events, codec, api)

    return _probed(f"vllm=={version}", factory)


def test_stand_ins_leave_no_vllm_or_torch_module_behind(cache: Path) -> None:
    before = {m for m in sys.modules if m.split(".")[0] in ("vllm", "torch")}
    module = release(cache, "9.8.0", "old")
    after = {m for m in sys.modules if m.split(".")[0] in ("vllm", "torch")}
    assert after == before
    assert module.BlockPool.__module__ == "_kvpool_vllm_9_8_0.block_pool"


def test_the_0_8_epoch_is_probed_and_driven(cache: Path) -> None:
    module = release(cache, "9.8.1", "old")
    api = probe_api(module.BlockPool)
    assert "hash_block_size" not in api.init_params
    assert not api.lookup_groups and not api.touch_per_group
    assert api.hash_type is not None and api.hash_type.__name__ == "BlockHashType"
    target = target_of(module, "9.8.1")
    assert "TakeEvents" not in target.capabilities and target.defaults["events"] is False
    report = conform(target, "safety", examples=25)
    assert report.conforms, report.message


def test_touch_per_group_is_probed_and_the_probe_matters(cache: Path) -> None:
    module = release(cache, "9.11.0", "grouped")
    api = probe_api(module.BlockPool)
    assert api.touch_per_group and api.lookup_groups
    assert "hash_block_size" not in api.init_params
    assert conform(target_of(module, "9.11.0"), "safety", examples=25).conforms
    # The same pool driven as if touch were flat crashes: the probe is what drives it.
    wrong = type(api)(**{**api.__dict__, "touch_per_group": False})
    pool = VllmPool(module, 4, True, False, _Codec(), wrong)
    (b,) = pool.get_new_blocks(1)
    with pytest.raises(TypeError, match="per-group"):
        pool.touch([b])


def _blocks(n: int) -> list[Any]:
    return [
        types.SimpleNamespace(block_id=i, ref_cnt=0, block_hash=None, next_free_block=None)
        for i in range(n)
    ]


def _adapter(inner: Any) -> Any:
    pool = types.SimpleNamespace(inner=inner, codec=_Codec(), fired=0, taken_view=set())
    pool.translate = lambda e: vllm_target.spec_event(e, lambda h, g: pool.codec.decode(h))
    return pool


def test_state_reader_reads_the_0_8_layout() -> None:
    """A head pointer without sentinels; a plain dict index of tuple hashes; no watchers."""
    blocks = _blocks(4)
    blocks[2].next_free_block, blocks[3].next_free_block = blocks[3], None
    codec = _Codec()
    key = type("BlockHashType", (tuple,), {"hash_value": property(lambda s: s[0])})
    h = key((codec.encode("a"), (0,)))
    blocks[1].ref_cnt, blocks[1].block_hash = 1, h
    inner = types.SimpleNamespace(
        blocks=blocks,
        num_gpu_blocks=4,
        enable_caching=True,
        free_block_queue=types.SimpleNamespace(free_list_head=blocks[2], num_free_blocks=2),
        cached_block_hash_to_block={h: {1: blocks[1]}},
    )
    pool = _adapter(inner)
    pool.codec = codec
    ps = vllm_state(pool)  # type: ignore[arg-type]
    assert list(ps.free) == [2, 3]
    assert ps.index == {"a": {1: None}} and ps.key[1] == "a"
    assert ps.pending == {} and not ps.events_on


def test_state_reader_reads_the_0_34_index_of_block_ids() -> None:
    """0.34 keeps one block id per key in ``_cache`` and the rest in ``_dup_ids``."""
    blocks = _blocks(4)
    head = types.SimpleNamespace(next_free_block=None)
    tail = types.SimpleNamespace()
    head.next_free_block = tail
    codec = _Codec()
    a = codec.encode("a") + b"\0\0\0\0"
    for b in (1, 2):
        blocks[b].ref_cnt, blocks[b].block_hash = 1, a
    blocks[3].ref_cnt = 1
    index = types.SimpleNamespace(_cache={a: 1}, _dup_ids={a: {1: None, 2: None}})
    inner = types.SimpleNamespace(
        blocks=blocks,
        num_gpu_blocks=4,
        enable_caching=True,
        free_block_queue=types.SimpleNamespace(fake_free_list_head=head, fake_free_list_tail=tail),
        cached_block_hash_to_block=index,
        _reuse_watchers={3: print},
    )
    pool = _adapter(inner)
    pool.codec = codec
    ps = vllm_state(pool)  # type: ignore[arg-type]
    assert ps.index == {"a": {1: None, 2: None}}
    assert ps.pending == {3: [id(print)]}
    assert ps.free == OrderedDict()


def test_real_0_33_0_is_probed_as_its_epoch() -> None:
    module = load_vllm("0.33.0")
    api = probe_api(module.BlockPool)
    assert "hash_block_size" in api.init_params and api.lookup_groups
    assert not api.touch_per_group and api.hash_type is None and not api.evict_first
    assert {"unpin_blocks", "is_block_writable", "take_events"} <= api.methods
    pool = vllm_target.vllm_factory("0.33.0")(4, True, True)
    assert pool.kvpool_multi_pool()  # its blocks know their pool


def test_fetch_keeps_only_the_two_files(cache: Path) -> None:
    root = cache / "vllm-9.9.0"
    for name in FILES:
        (root / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "src" / name).write_text("")
    (root / "wheels").mkdir()
    (root / "wheels" / "vllm-9.9.0-py3-none-any.whl").write_bytes(b"x" * 100)
    assert fetch_sources("9.9.0") == root / "src"
    assert not (root / "wheels").exists()


def test_two_fetches_at_once_download_once(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two processes (here threads, each with its own open lock file, as workers have)
    fetching the same release at once: one downloads, the other waits and finds the
    files. The seeded bug, no lock: the second downloads too, into the scratch directory
    the first is still using (and the first's cleanup deletes it under the second)."""
    import threading
    import time
    import zipfile

    downloads: list[str] = []

    def pip(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        downloads.append(cmd[-1])
        time.sleep(0.3)  # (the download takes a while: the other fetch arrives meanwhile)
        dest = Path(cmd[cmd.index("--dest") + 1])
        with zipfile.ZipFile(dest / "vllm-9.9.1-py3-none-any.whl", "w") as wheel:
            for name in FILES:
                wheel.writestr(name, "# " + name)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", pip)
    got: list[Path] = []
    threads = [threading.Thread(target=lambda: got.append(fetch_sources("9.9.1"))) for _ in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    src = cache / "vllm-9.9.1" / "src"
    assert got == [src, src] and len(downloads) == 1
    assert all((src / name).read_text() == "# " + name for name in FILES)
    assert not (cache / "vllm-9.9.1" / "wheels").exists()


def test_a_release_the_registry_lacks_is_bad_input() -> None:
    assert issubclass(NoSuchRelease, BadInput)
    available = ["0.8.0", "0.9.0", "0.10.0"]
    assert select(available, "0.9.0", "latest") == ["0.9.0", "0.10.0"]
    with pytest.raises(BadInput, match=r"0\.9\.9"):
        select(available, "0.9.9", "latest")
    with pytest.raises(BadInput, match="newer"):
        select(available, "0.10.0", "0.8.0")


def test_matrix_pages_group_releases_and_link_each_finding() -> None:
    found = Cell(
        "safety", False, "INV-NULL", "INV-NULL: ...", ["  pools: p0 N=1", "! 1. FreeBlocks"]
    )
    rows = [
        Row("0.8.0", True, api="x", cells={"safety": found}),
        Row("0.8.1", True, api="x", cells={"safety": Cell("safety", False, "INV-NULL")}),
        Row("0.9.0", False, error="SyntaxError"),
        Row("0.10.0", True, api="y", cells={"safety": Cell("safety", True)}),
    ]
    page = render_matrix(rows, ["safety"], "kvpool matrix ...", 1.0)
    assert "| 0.9.0 | cannot load: SyntaxError | - |" in page
    assert "[INV-NULL (1 calls)](#m-0-8-0-safety)" in page
    assert "    ! 1. FreeBlocks" in page
    assert "- `safety`: 1 of 3 conform; found INV-NULL x2." in page
    errata = splice("# Errata\n\nold text\n", render_errata(rows, ["safety"]))
    assert "| 0.8.0 to 0.8.1 | [INV-NULL (1 calls)](matrix.md#m-0-8-0-safety) |" in errata
    assert "| 0.9.0 | cannot load |" in errata and "| 0.10.0 | conforms |" in errata
    assert splice(errata, render_errata(rows[:1], ["safety"])).count("matrix:begin") == 1


@pytest.mark.deep
def test_kvpool_own_pool_is_driven_by_the_vllm_path_like_vllm() -> None:
    """One path for vLLM-API pools: kvpool.impl.BlockPool, with vLLM 0.33.0's API, through
    the same adapter and probe as a release conforms; a catalogue mutant of it does not."""
    from kvpool import mutants
    from kvpool.impl import BlockPool
    from kvpool.oracle.vllm_target import class_factory

    target = _probed("impl-as-vllm", class_factory(BlockPool))
    assert isinstance(target.factory(2, True, False), VllmPool)
    assert target.state_check is not None and "UnpinBlocks" in target.capabilities
    report = conform(target, "exact", examples=30, max_blocks=6)
    assert report.conforms, report.message
    swapped = mutants.get("lifo-fifo-swapped").pool_class()
    bad = conform(_probed("mutant-as-vllm", class_factory(swapped)), "exact", 30, max_blocks=6)
    assert not bad.conforms


def test_cache_partial_block_without_replace_existing_hashes_is_not_made() -> None:
    """0.27-0.32's cache_partial_block has no ``replace_existing_hashes``: the probe leaves
    the call out (the matrix had it crash 0.27.1 on an argument the oracle passed, an
    oracle artifact reported as the target's crash); 0.33's form keeps it."""
    module = load_vllm("0.33.0")
    assert "cache_partial_block" in probe_api(module.BlockPool).multikey

    class Older(module.BlockPool):  # type: ignore[misc, name-defined]
        def cache_partial_block(  # the 0.27-0.32 signature
            self, request: Any, block: Any, num_tokens: int, kv_cache_group_id: int, block_size: int
        ) -> Any:
            return super().cache_partial_block(
                request, block, num_tokens, kv_cache_group_id, block_size
            )

    api = probe_api(Older)
    assert "cache_partial_block" not in api.multikey
    assert "move_block_hashes" in api.multikey  # the rest of the epoch is still made


def test_a_stored_event_without_the_newer_fields_is_read_not_a_crash() -> None:
    """0.29's BlockStored has no ``session_id`` (and older ones lack more): reading such an
    event gives None for what is missing, as the spec's event has for a plain request. It
    was an AttributeError in the state read, reported as the release's crash."""
    module = load_vllm("0.33.0")
    pool = vllm_target.VllmPool(module, 4, True, True)

    class BlockStored:  # a 0.29-shaped event: no session_id, no lookahead_token_ids
        def __init__(self) -> None:
            self.block_hashes = [b"h" * 32]
            self.parent_block_hash = None
            self.token_ids = [1, 2]
            self.block_size = 16
            self.lora_id = None
            self.medium = "GPU"
            self.lora_name = None
            self.extra_keys = None
            self.group_idx = 0

    spec = pool.translate(BlockStored())
    assert getattr(spec, "session_id", "missing") is None
    assert getattr(spec, "lookahead_token_ids", "missing") is None
    assert spec.block_size == 16  # type: ignore[attr-defined]
