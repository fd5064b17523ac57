"""The CPU tier's connector, split as vLLM splits its offloading connector: a scheduler side that says what
to copy this step and a worker side that copies.

vLLM (vllm-project/vllm@7368908 vllm/distributed/kv_transfer/kv_connector/v1/offloading_connector.py):
`OffloadingConnectorScheduler.build_connector_meta` hands the worker, once per step, the requests to load and
to store; `OffloadingConnectorWorker.start_kv_transfers` submits the loads at the start of the step and the
stores queued by the step before (`prepare_store_kv` defers them "so that offloading starts AFTER transfers
related to token sampling"); `get_finished` reports finished jobs, and a block whose store is still running
is not freed (`request_finished` returns True while a store is in flight) nor reused after a preemption
(`handle_preemptions` waits for the store first). The copies themselves run on their own CUDA stream
(vllm/v1/kv_offload/cpu/gpu_worker.py) between GPU blocks and pinned CPU memory.

Here the scheduler side is the `TieredBlockManager` (core/tiered_block_manager.py), which queues a save when
it evicts a cached block and a load when a prompt hits the CPU tier; the engine takes them once per step
(`take_transfers`) as a `KVTransfers` and hands them to the worker side, `OffloadWorker`, which holds the CPU
tier's K/V, `cpu_cache` [N_cpu, 2, L, S, H_kv, D] (N_cpu = num_cpu_blocks; a slot's K and V of every layer
contiguous, so that a copy to or from pinned memory needs no host-side gather), and copies: every save,
then every load, in the order queued, from and into pinned memory on CUDA, so that the host only queues them.

The copies go on the step's own stream, just before its forward, not on a side stream: nothing could run
beside them. This tier writes back: a save copies out a cached block at the moment the pool reuses it, so
this step writes into that very block (its forward, or a load), and a load fills a block the forward
reads; the saved block may have been written by the step still in flight (overlap scheduling). Every copy
must therefore start after the previous step and end before this step's forward, which is the stream's
own order; a side stream would add a wait on each side and overlap nothing. vLLM's copies overlap because
it writes through: it stores a block once it is full and computed, deferred to the next step, whose forward
neither reads nor writes that block. (Unmeasured here: no GPU ran this engine's copies on one stream or two.)
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class KVTransfers:
    """One step's copies (vLLM's connector metadata): saves (gpu_block, cpu_slot), loads (cpu_slot,
    gpu_block), saves first."""

    saves: list[tuple[int, int]] = field(default_factory=list)
    loads: list[tuple[int, int]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.saves or self.loads)


class OffloadWorker:
    """The worker side: the CPU tier's tensor and the copies between it and the GPU cache `kv_cache`."""

    def __init__(self, kv_cache: torch.Tensor, num_cpu_blocks: int):
        self.kv_cache = kv_cache                                                # [2, L, N, S, H_kv, D]
        self.cuda = kv_cache.device.type == "cuda"
        shape = (num_cpu_blocks, *kv_cache.shape[:2], *kv_cache.shape[3:])
        # pinned on CUDA: an asynchronous copy from or into pageable memory would make the host wait
        self.cpu_cache = torch.zeros(shape, dtype=kv_cache.dtype,
                                     pin_memory=self.cuda)                      # [N_cpu, 2, L, S, H_kv, D]

    def copy(self, transfers: KVTransfers) -> None:
        """Queue the step's copies on the current stream: saves (GPU -> CPU), then loads (CPU -> GPU), one
        per (block, slot), all layers and K and V at once ([2, L, S, H_kv, D] each; the GPU side is strided,
        and PyTorch gathers or scatters it on the device). On a CPU the copies are plain, in place."""
        for gpu_block, cpu_slot in transfers.saves:
            self.cpu_cache[cpu_slot].copy_(self.kv_cache[:, :, gpu_block], non_blocking=self.cuda)
        for cpu_slot, gpu_block in transfers.loads:
            self.kv_cache[:, :, gpu_block].copy_(self.cpu_cache[cpu_slot], non_blocking=self.cuda)
