"""vLLM 0.33.0's real pool: the recorded findings (docs/errata.md) are still found.

Needs vLLM's wheel: the cached copy in $KVPOOL_CACHE (default ~/.cache/kvpool), else
it is downloaded once from PyPI with pip (about 340 MB).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kvpool.oracle.conformance import SavedTrace, conform, replay
from kvpool.oracle.findings import FINDINGS
from kvpool.oracle.targets import resolve
from kvpool.oracle.tracelog import check_log, record
from kvpool.oracle.workload import serving_workload

VECTORS = Path(__file__).resolve().parent.parent / "vectors" / "findings"


@pytest.fixture(scope="module")
def vllm():  # type: ignore[no-untyped-def]
    return resolve("vllm==0.33.0")


def test_vllm_loads_in_isolation(vllm) -> None:  # type: ignore[no-untyped-def]
    assert not any(m == "vllm" or m.startswith("vllm.") for m in sys.modules)
    assert "torch" not in sys.modules
    assert "evict_first" not in vllm.capabilities
    assert {"UnpinBlocks", "CacheBlocks", "GetCachedBlock", "EvictBlocks"} <= vllm.capabilities


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.name)
def test_each_finding_is_still_found_and_reference_passes(vllm, finding) -> None:  # type: ignore[no-untyped-def]
    trace = finding.trace()
    found = replay(trace, vllm, trace.level)
    assert found.divergence is not None and found.divergence.rule == finding.rule
    assert replay(trace, resolve("reference"), trace.level).divergence is None
    saved = SavedTrace.load(VECTORS / f"{finding.name}.json")  # the file kept in the repo
    assert saved.to_json() == trace.to_json()


def test_the_search_finds_vllm_bad_input_at_robust(vllm) -> None:  # type: ignore[no-untyped-def]
    report = conform(vllm, "robust", examples=50)
    assert not report.conforms and report.trace is not None


def test_serving_workload_on_vllm_diverges_in_check_log(tmp_path: Path) -> None:
    from kvpool.oracle.vllm_target import load_vllm

    pool = load_vllm("0.33.0").BlockPool(12, True, hash_block_size=4, enable_kv_cache_events=True)
    log = tmp_path / "serve.log"
    rec = record(pool, log)
    serving_workload(rec, requests=300, seed=0)
    rec.close()
    result = check_log(log)
    assert result.divergence is not None and result.divergence.rule == "fired differs"
    assert result.context  # the calls that led there
