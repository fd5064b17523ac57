"""Transfer or recompute (notebook 17): the break-even bandwidth and the crossover length agree with the two
costs they compare, on made-up rates (no stored benchmark needed)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from pagedkv_lib.studies.swap_or_recompute import PREFILL_SHAPES, load_cost_model
from pagedkv_lib.studies.transfer_cost import (
    LINKS,
    break_even_gbs,
    transfer_crossover_tokens,
    transfer_seconds,
    transfer_table,
)

RATES = replace(load_cost_model(link="nominal"), matmul_tflops=600.0, attention_tflops=300.0)  # made up


def test_transfer_moves_the_bytes_once_at_the_link_rate():
    llama = PREFILL_SHAPES["LLaMA-2-7B"]
    assert transfer_seconds(llama, 4096, 50.0) == pytest.approx(4096 * 524_288 / 50e9)
    with pytest.raises(ValueError, match="bandwidth > 0"):
        transfer_seconds(llama, 1, 0.0)


@pytest.mark.parametrize("name", list(PREFILL_SHAPES))
def test_at_the_break_even_bandwidth_both_ways_cost_the_same(name):
    shape = PREFILL_SHAPES[name]
    for n in (1, 512, 8192):
        gbs = break_even_gbs(RATES, shape, n)
        assert transfer_seconds(shape, n, gbs) == pytest.approx(RATES.recompute_seconds(shape, n))


@pytest.mark.parametrize("name", list(PREFILL_SHAPES))
def test_transfer_wins_exactly_above_the_crossover(name):
    shape = PREFILL_SHAPES[name]
    for link in LINKS:
        cross = transfer_crossover_tokens(RATES, shape, link.gbs)
        for n in (max(1, int(cross * 0.9)), int(cross * 1.1) + 1):
            if n < cross:
                assert transfer_seconds(shape, n, link.gbs) > RATES.recompute_seconds(shape, n)
            else:
                assert transfer_seconds(shape, n, link.gbs) <= RATES.recompute_seconds(shape, n)


def test_a_7b_gqa_model_moves_cheaper_over_every_link_and_the_table_says_so():
    qwen = PREFILL_SHAPES["Qwen2.5-7B"]
    assert all(transfer_crossover_tokens(RATES, qwen, link.gbs) == 0 for link in LINKS)
    row = next(line for line in transfer_table(RATES).splitlines() if line.startswith("Qwen2.5-7B"))
    assert row.count("always") == len(LINKS)
