"""The two ways in: vLLM's plugin loader with KVPOOL_VLLM_PLUGIN=1, and install()/uninstall()."""

from __future__ import annotations

import os
import subprocess
import sys

import kvpool.vllm_plugin as plugin

PROBE = (
    "from vllm.plugins import load_general_plugins; load_general_plugins(); "
    "import vllm.v1.core.kv_cache_coordinator as c; print(c.BlockPool.__module__)"
)


def _probe(flag: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != plugin.ENV_FLAG}
    if flag is not None:
        env[plugin.ENV_FLAG] = flag
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip().splitlines()[-1]


def test_vllms_plugin_loader_installs_kvpools_pool_when_asked() -> None:
    assert _probe("1") == "kvpool.impl.pool"


def test_the_entry_point_alone_changes_nothing() -> None:
    assert _probe(None) == "vllm.v1.core.block_pool"


def test_install_rebinds_every_site_and_uninstall_restores_them() -> None:
    import vllm.v1.core.block_pool as core
    import vllm.v1.hisparse.block_pool as hisparse

    from kvpool.impl import BlockPool

    original = core.BlockPool
    state = plugin.install()
    try:
        assert state.skipped == {}
        assert len(state.patched) == len(plugin.SITES) + 3  # two subclasses, one bound twice
        assert core.BlockPool is BlockPool
        assert issubclass(hisparse.SharedEventQueueBlockPool, BlockPool)
        assert plugin.install() is state  # idempotent
    finally:
        plugin.uninstall()
    assert core.BlockPool is original
    assert not issubclass(hisparse.SharedEventQueueBlockPool, BlockPool)
