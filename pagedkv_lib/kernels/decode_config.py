"""The launch configuration of the paged decode kernel: its tiles, and how its work is cut into programs.

Shapes: docs/conventions.md; here `chunk` is the tokens per work item of v3 and `num_items` the number of
work items (sequence chunks). Plain Python (no triton): notebooks and tests read the plans on any machine.

    v1  one program per (sequence, KV head) walks the whole context.
    v2  every context is cut at the same P token ranges, sized from the table width M * S (the host's bound
        on every context): enough programs when B is small, but a short context leaves its ranges empty and
        a long one is walked by its P programs alone.
    v3  length-aware: each sequence's ACTUAL context is cut into chunks of `chunk` tokens, `chunk` chosen
        from the batch's total tokens, so that every program gets about the same work however ragged the
        batch is.

The v3 plan, computed on the device from context_lens alone (no host sync, nothing that changes the grid):
    total = sum(len_b); chunk = clamp(cdiv(total, target_items), min_chunk, max_chunk), rounded up to BLOCK_N;
    if the batch is already balanced (enough programs, max len <= 9/8 mean len): chunk = max len, as in v1;
    sequence b gets floor(len_b / chunk) full chunks and, if len_b % chunk, one shorter last chunk.
Work items are numbered full chunks first (all the same size), shorter last chunks after them: programs
start in id order, so the big items go first and the small ones fill the tail (longest-first scheduling).
The grid needs a bound known on the host: chunk >= cdiv(total, target_items) or chunk = max_chunk gives
num_items <= max(target_items, B * M * S / max_chunk) + B, and chunk >= min_chunk gives
num_items <= B * cdiv(M * S, min_chunk); the grid is the smaller (`max_items`), surplus programs return.
Every program recomputes the plan in registers (`triton_decode_merge.chunk_plan`, the one implementation
the kernels run) from one vector load of context_lens (O(B), B <= 4096): no
more dependent loads than v1's load of its own length, and no extra launch. Nothing is read back and nothing
in the launch depends on the lengths, so a CUDA graph captured once replays correctly for any lengths within
the table. FlashInfer plans on the host instead (a graph must re-plan into fixed buffers before each replay);
FlashAttention-3 computes its splits in a small device kernel; v3 is the latter without the extra kernel.
Defaults: tuned on one H200 (benchmarks/NOTES.md).
"""
from dataclasses import dataclass, replace

WAVES = 3                     # aim for about WAVES * num_SMs programs (3 fit on an SM at BLOCK_N 64) ...
FP8_WAVES = 4                 # ... 4 for an fp8 cache (H200 sweep 2026-12-01: 8x4096 45.0 -> 40.2 us)
MIN_TOKENS_PER_SPLIT = 128    # v2: ... but give each split at least this many tokens
MAX_SPLITS = 64
MIN_TOKENS_PER_CHUNK = 128    # v3: the smallest chunk, rounded up to a multiple of BLOCK_N
MAX_CHUNK_BYTES = 512 * 1024  # v3: the largest chunk, in K + V bytes of one KV head (1024 tokens at bf16,
                              #     D = 128): one program streams ~17 GB/s, so this bounds the tail to ~30 us
BALANCED_PROGRAMS_PER_SM = 3  # v3: a batch with at least this many programs per SM ...
BALANCED_X8 = 9               # ... and max len <= 9/8 mean len is not split (v1's partition)
MAX_PLAN_SEQS = 4096          # v3 loads all of context_lens as one vector; above this many sequences, v2


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


@dataclass(frozen=True)
class DecodeConfig:
    version: int            # 1, 2 or 3
    block_n: int            # tokens per KV tile
    block_g: int            # query heads per program (>= 16: tl.dot needs 16 rows)
    block_d: int            # head_dim padded to a power of two
    num_warps: int
    num_stages: int
    num_splits: int = 1     # v2: P
    tokens_per_split: int = 0   # v2: a multiple of block_n
    target_items: int = 1   # v3: chunk >= cdiv(total tokens, target_items) ...
    min_chunk: int = 0      # v3: ... and min_chunk <= chunk <= max_chunk (multiples of block_n)
    max_chunk: int = 0
    balanced_x8: int = 0    # v3: chunk = max len when 8 * max len * B <= balanced_x8 * total (0: never)
    max_items: int = 0      # v3: the grid's bound on work items
    merge_per_head: bool = False  # v3: a merge program per query head (few sequences), not per KV head
    pdl: bool = False       # programmatic dependent launch (Hopper+): overlap a launch with the previous tail


def choose_config(B: int, H: int, H_kv: int, D: int, max_tokens: int, num_splits: int | None = None, *,
                  num_sms: int, interpreted: bool, version: int | None = None, cache_bytes: int = 2,
                  block_n: int | None = None, num_warps: int | None = None, num_stages: int | None = None,
                  waves: int | None = None, min_chunk: int | None = None, max_chunk: int | None = None,
                  balanced: bool = True, merge_per_head: bool | None = None,
                  pdl: bool = False) -> DecodeConfig:
    """Tiles and partition for B contexts of at most `max_tokens` tokens (the table width M * S).

    Deterministic in its arguments. version None: v1 if num_splits == 1, v2 if num_splits > 1, v3 if
    num_splits is None (v2 beyond MAX_PLAN_SEQS sequences). cache_bytes: bytes per cache element (1 for fp8:
    BLOCK_N 128 keeps the bytes per tile, and chunks hold twice the tokens). waves, min_chunk, max_chunk,
    balanced: the v3 plan (module constants by default). merge_per_head (v3): None merges per query head
    when B * H_kv < num_sms (a KV head's G heads in one program would leave SMs idle and take several
    steps; the first H200 run measured that merge ~4 us slower than v2's at 1x4096). pdl: Hopper and later
    only (the caller knows the device), never in the interpreter.
    """
    G = H // H_kv
    block_d = max(16, next_power_of_2(D))
    block_g = min(max(16, next_power_of_2(G)), max(16, 8192 // block_d))  # tl.dot needs M >= 16
    block_n = block_n or (32 if interpreted else 64 * 2 // cache_bytes)
    heads = H_kv * cdiv(G, block_g)                                   # programs per sequence chunk
    if version is None:
        version = 3 if num_splits is None and B <= MAX_PLAN_SEQS else 1 if num_splits == 1 else 2
    stages = num_stages or (3 if cache_bytes == 1 else 2)   # fp8: 3 stages (H200 sweep, benchmarks/NOTES.md)
    base = DecodeConfig(version, block_n, block_g, block_d, num_warps or 4, stages,
                        pdl=pdl and not interpreted)
    if version == 1:
        return base                                                   # its kernel walks each whole context
    if version == 2:
        auto = num_splits is None
        if auto:
            want = cdiv((waves or WAVES) * num_sms, B * heads)
            num_splits = max(1, min(want, MAX_SPLITS, max_tokens // MIN_TOKENS_PER_SPLIT))
        tokens_per_split = cdiv(cdiv(max_tokens, num_splits), block_n) * block_n
        if auto:
            num_splits = cdiv(max_tokens, tokens_per_split)           # drop splits that would be empty
        return replace(base, num_splits=num_splits, tokens_per_split=tokens_per_split)
    if B > MAX_PLAN_SEQS:
        raise ValueError(f"v3: expected at most {MAX_PLAN_SEQS} sequences, got {B}")
    min_chunk = cdiv(min_chunk or MIN_TOKENS_PER_CHUNK, block_n) * block_n
    max_chunk = max(min_chunk, cdiv(max_chunk or MAX_CHUNK_BYTES // (2 * D * cache_bytes), block_n) * block_n)
    balanced_x8 = BALANCED_X8 if balanced and B * heads >= BALANCED_PROGRAMS_PER_SM * num_sms else 0
    waves = waves or (FP8_WAVES if cache_bytes == 1 else WAVES)
    config = replace(base, target_items=cdiv(waves * num_sms, heads), min_chunk=min_chunk,
                     max_chunk=max_chunk, balanced_x8=balanced_x8,
                     merge_per_head=B * H_kv < num_sms if merge_per_head is None else merge_per_head)
    return replace(config, max_items=items_bound(config, B, max_tokens))


def items_bound(config: DecodeConfig, B: int, max_tokens: int) -> int:
    """v3: the most work items that B contexts of at most `max_tokens` tokens can make (module docstring)."""
    by_min = B * cdiv(max_tokens, config.min_chunk)
    by_target = max(config.target_items, cdiv(B * max_tokens, config.max_chunk)) + B
    return max(1, min(by_min, by_target))


def plan_chunks_reference(context_lens: list[int], config: DecodeConfig) -> tuple[int, list[tuple]]:
    """The v3 plan as plain Python, for figures and bounds on any machine: (chunk, the work items in program
    order as (seq, start, end, partial_slot)). The kernels compute it with triton_decode_merge.chunk_plan
    (which `triton_decode_merge.plan_chunks` reads back; a test keeps the two equal)."""
    total, longest, B = sum(context_lens), max(context_lens), len(context_lens)
    chunk = min(max(cdiv(total, config.target_items), config.min_chunk), config.max_chunk)
    if 8 * longest * B <= config.balanced_x8 * total:
        chunk = longest
    chunk = cdiv(chunk, config.block_n) * config.block_n
    counts = [cdiv(n, chunk) for n in context_lens]                   # chunks per sequence
    first = [sum(counts[:b]) for b in range(B)]                       # first partial slot per sequence
    full = [(b, j * chunk, (j + 1) * chunk, first[b] + j) for b, n in enumerate(context_lens)
            for j in range(n // chunk)]
    last = [(b, (n // chunk) * chunk, n, first[b] + n // chunk) for b, n in enumerate(context_lens)
            if n % chunk]
    return chunk, full + last
