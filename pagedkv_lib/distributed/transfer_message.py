"""The control messages of a KV transfer between two ranks, as int64 tensors any backend can send.

A transfer of one request between a prefill rank (P) and a decode rank (D), in `disaggregation.py`:

    P -> D   TransferHeader   what is coming: the request, its length, the model's cache shape
    D -> P   TransferReply    refused (pool full: P keeps its blocks and waits), or accepted with the
                              blocks D already holds (its prefix hit); D allocated the rest before replying
    P -> D   the K/V          one tensor [2, n, S, H_kv, D] per layer, in layer order (or one [2, L, n, ...])
    P -> D   TransferDone     the token the prefill sampled: D starts decoding from it

Each message is a frozen dataclass whose fields are ints, sent as one int64 tensor of fixed length (NCCL
sends CUDA tensors only, so they go to the rank's device); nothing is pickled. A header whose cache shape
differs from the receiver's is refused with an error naming both (vLLM's NIXL connector compares such
fields in a handshake before any transfer).
"""
from __future__ import annotations

from dataclasses import astuple, dataclass, fields

import torch
import torch.distributed as dist

DTYPE_CODES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3}


@dataclass(frozen=True)
class TransferHeader:
    request_id: int
    num_tokens: int
    num_layers: int
    block_size: int
    num_kv_heads: int
    head_dim: int
    dtype_code: int            # DTYPE_CODES

    def cache_shape(self) -> tuple:
        return (self.num_layers, self.block_size, self.num_kv_heads, self.head_dim, self.dtype_code)


@dataclass(frozen=True)
class TransferReply:
    request_id: int
    accepted: int              # 1: blocks allocated, send; 0: pool full, ask again later
    num_cached_blocks: int     # full blocks D already holds: P sends the blocks after them


@dataclass(frozen=True)
class TransferDone:
    request_id: int
    first_token: int           # sampled from the prefill's last position


def header_for(request_id: int, num_tokens: int, kv_cache: torch.Tensor) -> TransferHeader:
    """The header of a request of `num_tokens` tokens held in kv_cache [2, L, N, S, H_kv, D]."""
    _, L, _, S, H_kv, D = kv_cache.shape
    return TransferHeader(request_id, num_tokens, L, S, H_kv, D, DTYPE_CODES[kv_cache.dtype])


def check_header(header: TransferHeader, kv_cache: torch.Tensor) -> None:
    """The sender's cache shape and dtype must be the receiver's."""
    mine = header_for(header.request_id, header.num_tokens, kv_cache)
    if header.cache_shape() != mine.cache_shape():
        names = ("num_layers", "block_size", "num_kv_heads", "head_dim", "dtype_code")
        raise ValueError(f"transfer header: the sender's cache {dict(zip(names, header.cache_shape()))} "
                         f"differs from this receiver's {dict(zip(names, mine.cache_shape()))}")


def send_message(message, dst: int, device) -> None:
    dist.send(torch.tensor(astuple(message), dtype=torch.int64, device=device), dst)


def recv_message(kind: type, src: int, device):
    """The next message of type `kind` from rank `src`."""
    buffer = torch.empty(len(fields(kind)), dtype=torch.int64, device=device)   # [fields]
    dist.recv(buffer, src)
    return kind(*buffer.tolist())
