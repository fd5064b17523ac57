"""One serving instance of a disaggregated setup: the mini engine's model, its OWN block pool and cache.

A prefill instance and a decode instance run the same weights (`ModelConfig.seed`) but number their blocks
independently. This class drives one sequence at a time by hand, so that a transfer can slip in between its
prefill and its decode; the model, the cache and the decode step are the engine's (`ModelRunner`):

    admit(token_ids, cached)     a Sequence whose table is `cached` (blocks already holding its first tokens)
                                 plus new blocks for the rest; None, allocating nothing, if the pool is short
    prefill(seq, on_layer)       the engine's prefill; on_layer(l) runs as soon as decoder layer l returns,
                                 its K/V in the cache (where a connector starts sending layer l while layer
                                 l + 1 computes: vLLM calls its connector's `save_kv_layer` there); returns
                                 the greedy first token
    decode(seq, first, n)        greedy decode from `first`, a block appended whenever a token starts one
Shapes: docs/conventions.md.
"""
from __future__ import annotations

from pagedkv_lib.core.block_manager import num_new_blocks
from pagedkv_lib.core.block_pool import BlockPool
from pagedkv_lib.core.sequence import Sequence
from pagedkv_lib.engine.config import EngineConfig, ModelConfig
from pagedkv_lib.engine.model_runner import ModelRunner


class ServingInstance:
    def __init__(self, model_config: ModelConfig, num_blocks: int, block_size: int, device="cpu"):
        tokens = num_blocks * block_size
        config = EngineConfig(model=model_config, block_size=block_size, num_kvcache_blocks=num_blocks,
                              max_model_len=min(tokens, model_config.max_position_embeddings),
                              max_num_batched_tokens=tokens, device=str(device), use_triton=False)
        self.block_size = block_size
        self.runner = ModelRunner(config)
        self.kv_cache = self.runner.kv_cache                              # [2, L, N, S, H_kv, D]
        self.pool = BlockPool(num_blocks)

    def admit(self, token_ids: list[int], cached: list[int] = ()) -> Sequence | None:
        """A sequence holding `cached` (full blocks of its first tokens, one more reference each) and new
        blocks for the rest; None, with nothing allocated, when the pool has too few free blocks."""
        seq = Sequence(token_ids, self.block_size)
        new = self.pool.allocate(seq.num_blocks - len(cached))
        if new is None:
            return None
        seq.block_table = self.pool.fork(list(cached)) + new
        seq.num_cached_tokens = len(cached) * self.block_size
        return seq

    def release(self, seq: Sequence) -> None:
        self.pool.free(seq.block_table)
        seq.block_table = []

    def prefill(self, seq: Sequence, on_layer=None) -> int:
        """Compute the uncached tokens of `seq` into the cache; the greedy next token. `on_layer(l)` runs
        when decoder layer l returns (a forward hook), i.e. as soon as its K/V are in the cache."""
        def hook(i):
            return lambda module, args, output: on_layer(i)

        layers = self.runner.model.layers if on_layer is not None else []
        hooks = [layer.register_forward_hook(hook(i)) for i, layer in enumerate(layers)]
        try:
            return self.runner.run([seq], True, [0.0])[0]
        finally:
            for handle in hooks:
                handle.remove()

    def decode(self, seq: Sequence, first_token: int, max_tokens: int) -> list[int]:
        """`max_tokens` greedy tokens, the first one given (the prefill's), each appended to `seq`."""
        out = [first_token]
        seq.append_token(first_token)
        while len(out) < max_tokens:
            if num_new_blocks(seq.num_tokens, self.block_size):                # the new token opens a block
                block = self.pool.allocate(1)
                if block is None:
                    raise RuntimeError(f"decode: no free block for token {seq.num_tokens - 1} "
                                       f"(pool of {self.pool.num_blocks} blocks)")
                seq.block_table.append(block[0])
            token = self.runner.run([seq], False, [0.0])[0]
            out.append(token)
            seq.append_token(token)
        return out
