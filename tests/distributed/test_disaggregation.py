"""Two processes for real (slow): the launcher ends every rank when one fails or hangs; a request prefilled on
rank 0 and moved to rank 1 (refused once, prefix blocks reused, streamed per layer) decodes the same tokens
as the no-cache reference; the timing program returns its figures."""
from __future__ import annotations

import multiprocessing
import random
import time

import pytest

from pagedkv_lib.distributed.disaggregation import prefill_decode_rank
from pagedkv_lib.distributed.rank_launcher import RankFailed, launch_ranks
from pagedkv_lib.distributed.transfer_timing import transfer_timing_rank
from pagedkv_lib.engine import ModelConfig, Qwen3ForCausalLM, greedy_reference

pytestmark = pytest.mark.slow


def fails_on_rank_1(ctx):
    """A rank program whose rank 1 raises while rank 0 waits for it in a collective."""
    import torch
    import torch.distributed as dist

    if ctx.rank == 1:
        raise RuntimeError("planted failure on rank 1")
    dist.recv(torch.empty(1), 1)
    return {}


def hangs(ctx):
    time.sleep(600)


def test_a_failing_rank_is_reported_and_every_process_ended():
    start = time.monotonic()
    with pytest.raises(RankFailed, match="(?s)rank 1 \\(gloo\\) failed first.*planted failure on rank 1"):
        launch_ranks(fails_on_rank_1, world_size=2, timeout_s=60, backend="gloo")
    assert time.monotonic() - start < 45 and not multiprocessing.active_children()


def test_a_rank_past_the_deadline_is_ended():
    with pytest.raises(RankFailed, match="not done within 8 s"):
        launch_ranks(hangs, world_size=2, timeout_s=8, backend="gloo")
    assert not multiprocessing.active_children()


def test_137_a_request_prefilled_on_rank_0_decodes_on_rank_1_like_the_reference():
    rng = random.Random(0)
    prompt = [rng.randrange(512) for _ in range(45)]
    prefill_side, decode_side = launch_ranks(
        prefill_decode_rank, world_size=2, timeout_s=120, backend="gloo", prompt=prompt, system_len=20,
        max_tokens=8, block_size=8, num_blocks=16, prefill_busy_blocks=3, decode_busy_blocks=10)
    reference = greedy_reference(Qwen3ForCausalLM(ModelConfig(seed=0)), prompt, 8)
    for p, d in zip(prefill_side, decode_side, strict=True):
        assert p["tokens"] == d["tokens"] == reference
        assert d["table"][:2] == [0, 1] and len(d["table"]) == 6 and d["num_blocks_received"] == 4
        assert any("refused" in e for e in p["events"]) and any("refused" in e for e in d["events"])
        assert p["bytes_sent"] == d["bytes_received"] == 4 * 2 * 4 * 8 * 2 * 32 * 4  # L, 2, n, S, H_kv, D, 4


def test_the_timing_program_reports_bytes_and_both_times():
    _, rank1 = launch_ranks(transfer_timing_rank, world_size=2, timeout_s=120, backend="gloo",
                            context_lens=[16, 40], block_size=16, repeats=1)
    assert [r["bytes"] for r in rank1["rows"]] == [1 * 16 * 2048, 3 * 16 * 2048]        # whole blocks move
    assert all(r["transfer_s"] > 0 and r["recompute_s"] > 0 for r in rank1["rows"])
