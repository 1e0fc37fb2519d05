"""Drive vLLM 0.33.0's real ``Scheduler`` on one pool kind, offline, and record each step.

vLLM's ``Scheduler`` needs a ``VllmConfig``, whose ``ModelConfig`` reads a Hugging Face
config. Nothing here touches the hub: :func:`model_dir` writes a tiny ``config.json`` into a
temporary directory, naming an architecture (:class:`TinyForCausalLM`) registered in vLLM's
``ModelRegistry`` from this module, so vLLM inspects the class in this process instead of
importing one of its own model files (which need packages the CPU venv lacks); the tokenizer
is skipped (``skip_tokenizer_init=True``). No model ever runs: :meth:`Serving.step` calls
``schedule()``, then ``update_from_output()`` with a ``ModelRunnerOutput`` made up here (one
sampled token per request whose prompt is fully computed).

``Serving("vllm", ...)`` builds the scheduler on vLLM's own ``BlockPool``; ``Serving("kvpool",
...)`` builds it with ``kvpool.vllm_plugin.install()`` in force, so the ``KVCacheManager``
the scheduler builds allocates from ``kvpool.impl.BlockPool``. Each step appends to ``log``
what the scheduler decided (new, resumed, running and preempted requests with their block
ids and computed tokens, tokens scheduled, finished requests), every request's block table,
status, preemption count, computed and output tokens, the step's prefix-cache stats and
KV-cache usage, the pool (free queue in order, ref counts, every block's key) and the events
the scheduler published that step. Aborts and prefix-cache resets are recorded as steps too.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import torch
from harness import BLOCK, event_data
from torch import nn
from vllm import ModelRegistry
from vllm.config import (
    CacheConfig,
    DeviceConfig,
    KVEventsConfig,
    ModelConfig,
    SchedulerConfig,
    VllmConfig,
)
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core import kv_cache_coordinator
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.request import Request, RequestStatus
from vllm.v1.structured_output import StructuredOutputManager

import kvpool.mutants as mutants
import kvpool.vllm_plugin as plugin

os.environ["HF_HUB_OFFLINE"] = "1"  # a slip that would reach for the hub fails at once
os.environ["TRANSFORMERS_OFFLINE"] = "1"
MAX_MODEL_LEN = 1024
ARCH = "KvpoolTinyForCausalLM"
init_none_hash(sha256)
_HASHER = get_request_block_hasher(BLOCK, sha256)


class TinyForCausalLM(nn.Module):
    """The least a class needs for vLLM to register it as a text-generation model.

    vLLM's checks read the signatures only (``vllm_config`` in ``__init__``,
    ``embed_input_ids``, ``forward(input_ids, positions)``, ``compute_logits``); the
    scheduler never builds or runs the model, so none of them does anything."""

    def __init__(self, *, vllm_config: VllmConfig | None = None, prefix: str = "") -> None:
        super().__init__()

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("the scheduler tests never run a model")

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("the scheduler tests never run a model")

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("the scheduler tests never run a model")


# A llama-shaped config; only what ModelConfig reads matters (no weights are ever loaded).
TINY_CONFIG = {
    "architectures": [ARCH],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 2,
    "vocab_size": 60000,
    "max_position_embeddings": 2 * MAX_MODEL_LEN,
    "torch_dtype": "float32",
    "rms_norm_eps": 1e-6,
}


@cache
def model_dir() -> Path:
    """A directory holding only the tiny ``config.json`` (made once per process)."""
    path = Path(tempfile.mkdtemp(prefix="kvpool-vllm-model-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    (path / "config.json").write_text(json.dumps(TINY_CONFIG))
    return path


@cache
def model_config() -> ModelConfig:
    """vLLM's ModelConfig for the tiny model, built offline (once per process: ~10 s)."""
    ModelRegistry.register_model(ARCH, TinyForCausalLM)
    return ModelConfig(
        model=str(model_dir()),
        skip_tokenizer_init=True,
        max_model_len=MAX_MODEL_LEN,
        dtype="float32",
    )


def vllm_config(num_blocks: int, max_num_seqs: int, max_num_batched_tokens: int) -> VllmConfig:
    cache_config = CacheConfig(block_size=BLOCK, enable_prefix_caching=True)
    cache_config.num_gpu_blocks = num_blocks
    return VllmConfig(
        model_config=model_config(),
        cache_config=cache_config,
        scheduler_config=SchedulerConfig(
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            max_model_len=MAX_MODEL_LEN,
            is_encoder_decoder=False,
        ),
        device_config=DeviceConfig(device="cpu"),  # no GPU platform to detect here
        kv_events_config=KVEventsConfig(enable_kv_cache_events=True, publisher="null"),
    )


class RecordingPublisher:
    """Stands in for vLLM's event publisher: keeps what the scheduler publishes."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def publish(self, batch: Any) -> None:
        self.events.extend(batch.events)

    def take(self) -> list[Any]:
        out, self.events = self.events, []
        return out

    def shutdown(self) -> None:
        pass


def _ids(block_ids: tuple[list[int], ...] | None) -> tuple[tuple[int, ...], ...] | None:
    return None if block_ids is None else tuple(tuple(g) for g in block_ids)


@dataclass
class Serving:
    """One scheduler on one pool kind, driven step by step."""

    kind: str
    num_blocks: int = 12
    max_num_seqs: int = 4
    max_num_batched_tokens: int = 64
    mutant: str | None = None
    """A bug from ``kvpool.mutants`` put into the kvpool pool (``kind="kvpool"`` only)."""
    log: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        config = vllm_config(self.num_blocks, self.max_num_seqs, self.max_num_batched_tokens)
        spec = FullAttentionSpec(block_size=BLOCK, num_kv_heads=1, head_size=1, dtype=torch.float32)
        kv_config = KVCacheConfig(
            num_blocks=self.num_blocks,
            kv_cache_tensors=[],
            kv_cache_groups=[KVCacheGroupSpec(["layer0"], spec)],
        )
        if self.mutant is not None and self.kind != "kvpool":
            raise ValueError("a mutant is a bug in kvpool's pool")
        expected: type[Any] | str = "vllm.v1.core.block_pool"
        if self.kind == "kvpool":
            plugin.install()
            expected = "kvpool.impl.pool"
            if self.mutant is not None:
                # The class vLLM's KVCacheCoordinator builds its pool from; uninstall()
                # puts vLLM's back, as for kvpool's own class.
                expected = mutants.get(self.mutant).pool_class()
                kv_cache_coordinator.BlockPool = expected  # type: ignore[misc]
        try:
            self.scheduler = Scheduler(
                config,
                kv_cache_config=kv_config,
                structured_output_manager=StructuredOutputManager(config),
                block_size=BLOCK,
                log_stats=True,
            )
        finally:
            plugin.uninstall()
        self.pool = self.scheduler.kv_cache_manager.block_pool
        built = type(self.pool)
        if (built is not expected) if isinstance(expected, type) else built.__module__ != expected:
            raise AssertionError(f"{self.kind} scheduler built on {built}")
        self.publisher = RecordingPublisher()
        self.scheduler.kv_event_publisher = self.publisher  # type: ignore[assignment]
        self.requests: dict[str, Request] = {}
        self.finished: list[str] = []

    # -- what a client and the model runner do ------------------------------------------

    def add(self, rid: str, tokens: list[int], max_tokens: int) -> None:
        params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
        req = Request(rid, tokens, params, None, block_hasher=_HASHER)
        self.requests[rid] = req
        self.scheduler.add_request(req)

    def abort(self, rid: str) -> None:
        self.scheduler.finish_requests(rid, RequestStatus.FINISHED_ABORTED)
        self._record(("abort", rid), None)

    def reset(self, *, preempt_running: bool = False) -> bool:
        """The scheduler's ``reset_prefix_cache`` (refused while requests hold blocks unless
        ``preempt_running``, which preempts them all first)."""
        done = self.scheduler.reset_prefix_cache(reset_running_requests=preempt_running)
        self._record(("reset", preempt_running, done), None)
        return done

    def step(self, token: Callable[[str, int], int] = lambda rid, n: 30000 + n) -> None:
        """One engine step: schedule, then a made-up model output for what was scheduled.

        A request whose prompt is fully computed after this step gets one sampled token,
        ``token(request id, its number of output tokens so far)``; a chunked prefill gets none.
        """
        out = self.scheduler.schedule()
        sampled: list[list[int]] = []
        req_ids = list(out.num_scheduled_tokens)
        for rid in req_ids:
            req = self.requests[rid]
            # schedule() has already added this step's tokens to num_computed_tokens
            done = req.num_computed_tokens
            sampled.append([token(rid, req.num_output_tokens)] if done >= req.num_tokens else [])
        runner = ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index={rid: i for i, rid in enumerate(req_ids)},
            sampled_token_ids=sampled,
        )
        engine_outputs = self.scheduler.update_from_output(out, runner)
        stats = None
        for outputs in engine_outputs.values():
            for o in outputs.outputs:
                if o.finish_reason is not None:
                    self.finished.append(o.request_id)
            if outputs.scheduler_stats is not None:
                stats = outputs.scheduler_stats
        if stats is None or stats.prefix_cache_stats is None:  # log_stats=True: never
            raise AssertionError("the scheduler returned no stats")
        p = stats.prefix_cache_stats
        self._record(
            ("step", len(self.log)),
            out,
            prefix_stats=(
                p.requests,
                p.queries,
                p.hits,
                p.preempted_requests,
                p.preempted_queries,
                p.preempted_hits,
            ),
            usage=stats.kv_cache_usage,
        )

    def run(self, max_steps: int = 200) -> None:
        """Step until every request has finished."""
        for _ in range(max_steps):
            if not self.scheduler.has_requests():
                return
            self.step()
        raise AssertionError(f"{self.kind}: requests left after {max_steps} steps")

    # -- observation ----------------------------------------------------------------------

    def pool_state(self) -> dict[str, Any]:
        pool = self.pool
        return {
            "free": [b.block_id for b in pool.free_block_queue.get_all_free_blocks()],
            "num_free": pool.get_num_free_blocks(),
            "ref": [b.ref_cnt for b in pool.blocks[1:]],
            "keys": [(b.block_hash, b.block_hash_num_tokens) for b in pool.blocks],
        }

    def _record(self, what: tuple[Any, ...], out: SchedulerOutput | None, **extra: Any) -> None:
        sched = self.scheduler
        entry: dict[str, Any] = {"step": what, **extra}
        if out is not None:
            cached = out.scheduled_cached_reqs
            entry["new"] = [
                (r.req_id, _ids(r.block_ids), r.num_computed_tokens) for r in out.scheduled_new_reqs
            ]
            entry["cached"] = [
                (rid, rid in cached.resumed_req_ids, _ids(b), n)
                for rid, b, n in zip(
                    cached.req_ids, cached.new_block_ids, cached.num_computed_tokens, strict=True
                )
            ]
            entry["tokens"] = sorted(out.num_scheduled_tokens.items())
            entry["preempted"] = sorted(out.preempted_req_ids or ())
            entry["finished"] = sorted(out.finished_req_ids)
        entry["running"] = [r.request_id for r in sched.running]
        entry["waiting"] = [r.request_id for r in sched.waiting]
        entry["tables"] = {
            rid: _ids(sched.kv_cache_manager.get_block_ids(rid))
            for rid in sorted(
                sched.kv_cache_manager.coordinator.single_type_managers[0].req_to_blocks
            )
        }
        entry["requests"] = {
            rid: (r.status.name, r.num_preemptions, r.num_computed_tokens, r.num_output_tokens)
            for rid, r in sorted(self.requests.items())
        }
        entry.update(self.pool_state())
        entry["events"] = [event_data(e) for e in self.publisher.take()]
        self.log.append(entry)


def first_difference(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> str | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        for name in x:
            if x[name] != y.get(name):
                where = f"step {i} {x['step']}: {name} differs"
                return f"{where}\n vllm:   {x[name]}\n other:  {y.get(name)}"
    if len(a) != len(b):
        return f"{len(a)} steps on one, {len(b)} on the other"
    return None
