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
it evicts a cached block and a load when a prompt hits the CPU tier; `OffloadScheduler.build_transfers`
takes them once per step as a `KVTransfers`. The worker side, `OffloadWorker`, holds the CPU tier's K/V,
`cpu_cache` [N_cpu, 2, L, S, H_kv, D] (N_cpu = num_cpu_blocks; a slot's K and V of every layer contiguous,
so that a copy to or from pinned memory needs no host-side gather), and copies: every save, then every
load, in the order queued. On CUDA the copies go on a side stream from and into pinned memory, so the host
is not blocked; the side stream first waits for the main stream (the blocks it saves were written by earlier
steps), and the main stream waits for the side stream's event before the forward, which writes into the
reused blocks and reads the loaded ones. On a CPU the copies are plain, in place.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from pagedkv_lib.core.tiered_block_manager import TieredBlockManager


@dataclass(frozen=True)
class KVTransfers:
    """One step's copies (vLLM's connector metadata): saves (gpu_block, cpu_slot), loads (cpu_slot,
    gpu_block), saves first."""

    saves: list[tuple[int, int]] = field(default_factory=list)
    loads: list[tuple[int, int]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.saves or self.loads)


class OffloadScheduler:
    """The scheduler side: what the block manager queued since the last step."""

    def __init__(self, block_manager: TieredBlockManager):
        self.block_manager = block_manager

    def build_transfers(self) -> KVTransfers:
        saves, loads = self.block_manager.take_transfers()
        return KVTransfers(saves, loads)


class OffloadWorker:
    """The worker side: the CPU tier's tensor and the copies between it and the GPU cache `kv_cache`."""

    def __init__(self, kv_cache: torch.Tensor, num_cpu_blocks: int):
        self.kv_cache = kv_cache                                                # [2, L, N, S, H_kv, D]
        self.cuda = kv_cache.device.type == "cuda"
        shape = (num_cpu_blocks, *kv_cache.shape[:2], *kv_cache.shape[3:])
        # pinned on CUDA: an asynchronous copy from or into pageable memory would make the host wait
        self.cpu_cache = torch.zeros(shape, dtype=kv_cache.dtype,
                                     pin_memory=self.cuda)                      # [N_cpu, 2, L, S, H_kv, D]
        self.stream = torch.cuda.Stream(kv_cache.device) if self.cuda else None
        self.done = torch.cuda.Event() if self.cuda else None

    def start(self, transfers: KVTransfers) -> None:
        """Issue the step's copies: saves (GPU -> CPU), then loads (CPU -> GPU)."""
        if not transfers:
            return
        if not self.cuda:
            self._copy(transfers)
            return
        self.stream.wait_stream(torch.cuda.current_stream(self.kv_cache.device))
        with torch.cuda.stream(self.stream):
            self._copy(transfers)
            self.done.record(self.stream)

    def _copy(self, transfers: KVTransfers) -> None:
        """One block copy per (block, slot), all layers and K and V at once ([2, L, S, H_kv, D] each; the
        GPU side is strided, and PyTorch gathers or scatters it on the device, on the side stream)."""
        for gpu_block, cpu_slot in transfers.saves:
            self.cpu_cache[cpu_slot].copy_(self.kv_cache[:, :, gpu_block], non_blocking=self.cuda)
        for cpu_slot, gpu_block in transfers.loads:
            self.kv_cache[:, :, gpu_block].copy_(self.cpu_cache[cpu_slot], non_blocking=self.cuda)

    def wait(self) -> None:
        """Make the step's forward wait for the copies (on the GPU, not the host)."""
        if self.cuda:
            torch.cuda.current_stream(self.kv_cache.device).wait_event(self.done)
