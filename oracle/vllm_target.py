"""vLLM's real ``BlockPool`` as an oracle target, loaded without torch or vLLM's configs.

:func:`load_vllm` returns vLLM's own ``block_pool`` module, either from an installed
vLLM (when ``import vllm.v1.core.block_pool`` works and the version matches) or from
the wheel on PyPI: ``pip download --no-deps vllm==X`` into a cache directory
(``$KVPOOL_CACHE``, default ``~/.cache/kvpool``), of which only
``vllm/v1/core/kv_cache_utils.py`` and ``vllm/v1/core/block_pool.py`` are read.
Their heavy imports (torch, ``vllm.config``, the request class, metrics, events,
logging) are replaced by small stand-ins while the two files execute; the stand-ins
are put in ``sys.modules`` only for the duration of that execution and removed
afterwards, so no module named ``vllm`` is left behind for other code. The loaded
modules live under the private names ``_kvpool_vllm_<version>.*``.

:class:`VllmPool` adapts vLLM's API to the one the :class:`~kvpool.oracle.Driver`
speaks, by calling vLLM's own methods: a key is cached with ``cache_full_blocks``
(through a stand-in request whose ``block_hashes`` are the keys' bytes), found with
``get_cached_block(hash, [group])``, evicted with ``evict_blocks``. Nothing of the
pool's behaviour is re-implemented here: the adapter only translates arguments and
results. :func:`vllm_state` reads a vLLM pool as a spec ``PoolState``.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import shutil
import subprocess
import sys
import types
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from pathlib import Path
from typing import Any

from kvpool.spec.errors import InvalidArgument
from kvpool.spec.events import AllBlocksCleared, BlockRemoved, BlockStored, Event, apply_event
from kvpool.spec.state import PoolState

from .exits import BadInput
from .workload import FakeRequest

DEFAULT_VLLM_VERSION = "0.33.0"
FILES = ("vllm/v1/core/kv_cache_utils.py", "vllm/v1/core/block_pool.py")


class VllmUnavailable(RuntimeError):
    """vLLM's block pool could not be found, downloaded or loaded."""


def cache_dir() -> Path:
    return Path(os.environ.get("KVPOOL_CACHE", Path.home() / ".cache" / "kvpool"))


# -- finding the source ----------------------------------------------------------------


def _installed(version: str) -> types.ModuleType | None:
    """vLLM's block_pool module from an installed vLLM of ``version``, if it imports."""
    try:
        from importlib.metadata import version as dist_version

        if dist_version("vllm") != version:
            return None
        return importlib.import_module("vllm.v1.core.block_pool")
    except Exception:
        return None


def _find_wheel(where: Path, version: str) -> Path | None:
    wheels = sorted(where.glob(f"vllm-{version}-*.whl"))
    return wheels[0] if wheels else None


class NoSuchRelease(VllmUnavailable, BadInput):
    """The registry has no vLLM release of that version (a usage error, exit 2)."""


_MISSING = ("No matching distribution", "Could not find a version")


def fetch_sources(version: str = DEFAULT_VLLM_VERSION, *, quiet: bool = True) -> Path:
    """The directory holding vLLM ``version``'s block-pool sources, downloading once.

    Only the two source files are kept: the wheel (230-490 MB) is downloaded into a
    scratch directory of the cache, the two files are extracted, and the wheel is
    deleted. A wheel left over by an older kvpool is deleted once its files are out.
    """
    root = cache_dir() / f"vllm-{version}"
    src = root / "src"
    wheels = root / "wheels"
    if all((src / f).is_file() for f in FILES):
        shutil.rmtree(wheels, ignore_errors=True)
        return src
    wheels.mkdir(parents=True, exist_ok=True)
    try:
        wheel = _find_wheel(wheels, version)
        if wheel is None:
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--no-cache-dir",
            ]
            cmd += ["--ignore-requires-python", "--dest", str(wheels), f"vllm=={version}"]
            if quiet:
                cmd.append("--quiet")
            done = subprocess.run(cmd, capture_output=quiet, text=True, check=False)
            wheel = _find_wheel(wheels, version)
            if done.returncode != 0 or wheel is None:
                detail = (done.stderr or "")[-2000:] if quiet else ""
                if any(m in detail for m in _MISSING):
                    raise NoSuchRelease(f"no vLLM release {version!r} on the registry")
                raise VllmUnavailable(f"pip download vllm=={version} failed: {detail}")
        with zipfile.ZipFile(wheel) as archive:
            names = set(archive.namelist())
            missing = [n for n in FILES if n not in names]
            if missing:
                raise VllmUnavailable(f"vLLM {version}'s wheel has no {', '.join(missing)}")
            for name in FILES:
                target = src / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(name))
    finally:
        shutil.rmtree(wheels, ignore_errors=True)
    return src


# -- stand-ins for vLLM's heavy imports ------------------------------------------------


class _Event:
    """Stand-in for vLLM's msgspec event structs: keeps the keyword arguments as attributes."""

    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__dict__})"


def _stub_modules() -> dict[str, types.ModuleType]:
    def mod(name: str, **attrs: Any) -> types.ModuleType:
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        return m

    class _Anything:
        """A name vLLM imports for typing or for code paths the oracle never takes."""

        def __init__(self, *a: Any, **k: Any) -> None:
            pass

    def _unused(*a: Any, **k: Any) -> Any:
        raise NotImplementedError("not available in kvpool's isolated vLLM load")

    def _quiet_logger(name: str) -> logging.Logger:
        log = logging.getLogger(f"kvpool.vllm.{name}")
        log.setLevel(logging.ERROR)
        return log

    events = mod(
        "vllm.distributed.kv_events",
        MEDIUM_GPU="GPU",
        KVCacheEvent=_Event,
        AllBlocksCleared=type("AllBlocksCleared", (_Event,), {}),
        BlockRemoved=type("BlockRemoved", (_Event,), {}),
        BlockStored=type("BlockStored", (_Event,), {}),
    )
    return {
        "vllm": mod("vllm", __path__=[]),
        "vllm.envs": mod("vllm.envs", VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=False),
        "vllm.config": mod("vllm.config", VllmConfig=_Anything),
        "vllm.logger": mod("vllm.logger", init_logger=_quiet_logger),
        "vllm.multimodal": mod("vllm.multimodal", __path__=[]),
        "vllm.multimodal.utils": mod("vllm.multimodal.utils", get_mm_features_in_window=_unused),
        "vllm.utils": mod("vllm.utils", __path__=[]),
        "vllm.utils.hashing": mod("vllm.utils.hashing", xxhash=_unused, xxhash_cbor=_unused),
        "vllm.utils.math_utils": mod("vllm.utils.math_utils", cdiv=lambda a, b: -(a // -b)),
        "vllm.v1": mod("vllm.v1", __path__=[]),
        "vllm.v1.core": mod("vllm.v1.core", __path__=[]),
        "vllm.v1.kv_cache_interface": mod(
            "vllm.v1.kv_cache_interface",
            KVCacheConfig=_Anything,
            KVCacheGroupSpec=_Anything,
            KVCacheSpec=_Anything,
            MambaSpec=_Anything,
            UniformTypeKVCacheSpecs=_Anything,
            iter_layer_specs=_unused,
        ),
        "vllm.v1.kv_cache_spec_registry": mod(
            "vllm.v1.kv_cache_spec_registry", KVCacheSpecRegistry=_Anything
        ),
        "vllm.v1.request": mod("vllm.v1.request", Request=_Anything),
        "vllm.v1.utils": mod("vllm.v1.utils", tensor_data=_unused),
        "vllm.v1.core.kv_cache_metrics": mod(
            "vllm.v1.core.kv_cache_metrics", KVCacheMetricsCollector=_Anything
        ),
        "vllm.distributed": mod("vllm.distributed", __path__=[]),
        "vllm.distributed.kv_events": events,
    }


@contextlib.contextmanager
def _borrowed_modules(modules: dict[str, types.ModuleType]) -> Iterator[None]:
    """Put ``modules`` in ``sys.modules`` for the block only; restore what was there."""
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old


_LOADED: dict[str, types.ModuleType] = {}


def _exec(private: str, public: str, path: Path, borrowed: dict[str, types.ModuleType]) -> Any:
    module = types.ModuleType(private)
    module.__file__ = str(path)
    sys.modules[private] = module  # dataclasses look their module up while executing
    borrowed[public] = module
    with _borrowed_modules(borrowed):
        code = compile(path.read_text(encoding="utf-8"), str(path), "exec")
        exec(code, module.__dict__)
    return module


def load_vllm(version: str = DEFAULT_VLLM_VERSION) -> types.ModuleType:
    """vLLM ``version``'s ``block_pool`` module (installed, or loaded in isolation)."""
    if version in _LOADED:
        return _LOADED[version]
    module = _installed(version)
    if module is None:
        src = fetch_sources(version)
        tag = "_kvpool_vllm_" + version.replace(".", "_")
        borrowed = _stub_modules()
        try:
            _exec(
                f"{tag}.kv_cache_utils",
                "vllm.v1.core.kv_cache_utils",
                src / FILES[0],
                borrowed,
            )
            module = _exec(f"{tag}.block_pool", "vllm.v1.core.block_pool", src / FILES[1], borrowed)
        except Exception as exc:
            raise VllmUnavailable(f"could not load vLLM {version}'s block pool: {exc}") from exc
    module.__dict__.setdefault("__kvpool_version__", version)
    _LOADED[version] = module
    return module


# -- the adapter ---------------------------------------------------------------------------


class _Codec:
    """Keys (any hashable) <-> the bytes vLLM keeps, one code per key, shared by a run."""

    def __init__(self) -> None:
        self.code: dict[Hashable, bytes] = {}
        self.key: dict[bytes, Hashable] = {}

    def encode(self, key: object) -> bytes:
        try:
            code = self.code.get(key)
        except TypeError as exc:
            raise InvalidArgument(f"key {key!r} is not hashable") from exc
        if key is None:
            raise InvalidArgument("None is no key")
        if code is None:
            code = self.code[key] = b"k%06d" % len(self.code)
            self.key[code] = key
        return code

    def decode(self, code: object) -> Hashable:
        if isinstance(code, bytes | bytearray):
            raw = bytes(code)
            return self.key.get(raw, self.key.get(raw[:-4], raw))
        return code


GROUP = 0
BLOCK_SIZE = 1


class _Counted:
    """Wraps a watcher so the adapter can count firings (vLLM keeps no such count)."""

    __slots__ = ("adapter", "fn")

    def __init__(self, fn: Callable[[Any], None], adapter: VllmPool) -> None:
        self.fn = fn
        self.adapter = adapter

    def __call__(self, block: Any) -> None:
        self.adapter.fired += 1
        self.fn(block)


class VllmPool:
    """vLLM's ``BlockPool`` behind the API the oracle's Driver calls."""

    def __init__(
        self,
        module: types.ModuleType,
        num_gpu_blocks: int,
        enable_caching: bool = True,
        enable_kv_cache_events: bool = False,
        codec: _Codec | None = None,
    ) -> None:
        self.inner = module.BlockPool(
            num_gpu_blocks,
            enable_caching,
            hash_block_size=BLOCK_SIZE,
            enable_kv_cache_events=enable_kv_cache_events,
        )
        self.module = module
        self.codec = codec or _Codec()
        self.blocks = self.inner.blocks
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        self.enable_kv_cache_events = enable_kv_cache_events
        self.fired = 0
        self.taken_view: set[Hashable] = set()

    # straight through
    def get_new_blocks(self, num_blocks: int) -> list[Any]:
        return list(self.inner.get_new_blocks(num_blocks))

    def free_blocks(self, blocks: Iterable[Any]) -> None:
        self.inner.free_blocks(blocks)

    def touch(self, blocks: list[Any]) -> None:
        self.inner.touch(blocks)

    def unpin_blocks(self, blocks: list[Any], on_reuse: Any) -> None:
        fn = _Counted(on_reuse, self) if callable(on_reuse) else on_reuse
        self.inner.unpin_blocks(blocks, fn)

    def reset_prefix_cache(self) -> bool:
        return bool(self.inner.reset_prefix_cache())

    def get_num_free_blocks(self) -> int:
        return int(self.inner.get_num_free_blocks())

    def get_usage(self) -> float:
        return float(self.inner.get_usage())

    def is_block_writable(self, block: Any) -> bool:
        return bool(self.inner.is_block_writable(block))

    def evict_blocks(self, block_ids: list[Any]) -> None:
        self.inner.evict_blocks(block_ids)

    # the prefix cache, through vLLM's own methods
    def cache_blocks(self, blocks: list[Any], keys: list[Any]) -> None:
        codes = [self.codec.encode(k) for k in keys]
        request = FakeRequest("kvpool", [0] * (len(codes) * BLOCK_SIZE), codes)
        self.inner.cache_full_blocks(request, blocks, 0, len(blocks), BLOCK_SIZE, GROUP)

    def get_cached_block(self, key: object) -> Any:
        code = self.codec.encode(key)
        hit = self.inner.get_cached_block(code, [GROUP])
        return None if not hit else hit[0]

    def take_events(self) -> list[Event]:
        events = [self.translate(e) for e in self.inner.take_events()]
        for e in events:
            apply_event(self.taken_view, e)
        return events

    def translate(self, event: Any) -> Event:
        return spec_event(event, lambda h, group: self.codec.decode(h))

    def __repr__(self) -> str:
        version = self.module.__dict__.get("__kvpool_version__", "?")
        return f"vLLM {version} BlockPool(N={self.num_gpu_blocks})"


def spec_event(event: Any, key_of: Callable[[Any, int], Hashable]) -> Event:
    """vLLM's KV event as the spec's; ``key_of(block_hash, group)`` names a key."""
    name = type(event).__name__
    group = int(getattr(event, "group_idx", 0) or 0)
    if name == "BlockStored":
        return BlockStored(tuple(key_of(h, group) for h in event.block_hashes or ()))
    if name == "BlockRemoved":
        (h,) = event.block_hashes
        return BlockRemoved(key_of(h, group))
    return AllBlocksCleared()


def _watcher_id(fn: Any) -> int:
    fn = getattr(fn, "fn", fn)
    wid = getattr(fn, "watcher_id", None)
    return wid if type(wid) is int else id(fn)


def vllm_state(pool: VllmPool) -> PoolState:
    """Read a vLLM pool as the spec state it represents (only through its own data)."""
    inner, codec = pool.inner, pool.codec
    blocks = inner.blocks
    free: OrderedDict[int, None] = OrderedDict()
    node = inner.free_block_queue.fake_free_list_head.next_free_block
    tail = inner.free_block_queue.fake_free_list_tail
    while node is not None and node is not tail and len(free) <= len(blocks):
        free[node.block_id] = None
        node = node.next_free_block
    index: dict[Hashable, dict[int, None]] = {}
    for code, held in inner.cached_block_hash_to_block._cache.items():
        holders = list(held.values()) if isinstance(held, dict) else [held]
        index[codec.decode(code)] = {b.block_id: None for b in holders}
    pending = {bid: [_watcher_id(w)] for bid, w in inner._reuse_watchers.items()}
    log = [pool.translate(e) for e in inner.kv_event_queue] if inner.enable_kv_cache_events else []
    view = set(pool.taken_view)
    for e in log:
        apply_event(view, e)
    return PoolState(
        num_blocks=inner.num_gpu_blocks,
        caching=bool(inner.enable_caching),
        events_on=bool(inner.enable_kv_cache_events),
        ref=[b.ref_cnt for b in blocks],
        key=[None if b.block_hash is None else codec.decode(b.block_hash) for b in blocks],
        free=free,
        index=index,
        pending=pending,
        log=log,
        view=view,
        registered=pool.fired + len(pending),
        fired=pool.fired,
    )


def vllm_factory(version: str = DEFAULT_VLLM_VERSION) -> Callable[[int, bool, bool], VllmPool]:
    """``factory(num_blocks, caching, events)`` building vLLM ``version``'s real pools."""
    module = load_vllm(version)
    codec = _Codec()

    def factory(num_blocks: int, caching: bool, events: bool) -> VllmPool:
        return VllmPool(module, num_blocks, caching, events, codec)

    factory.__name__ = f"vllm_{version.replace('.', '_')}"
    return factory
