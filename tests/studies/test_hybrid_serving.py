"""Prefix hits of hybrid models through the serving replay: the sliding-window rule never loses a hit, wins
under pressure, and every block comes back to the pool."""
from __future__ import annotations

from pagedkv_lib.core.kv_cache_coordinator import KVCacheCoordinator, KVCacheGroupSpec
from pagedkv_lib.studies.hybrid_serving import HybridBlockManager, hit_rates
from pagedkv_lib.studies.prefix_cache_comparison import ReplayStats, chat_turns, serve

SPEC = [KVCacheGroupSpec("full_attention"), KVCacheGroupSpec("sliding_window", 64)]


def run(num_blocks: int, rule: bool):
    requests = chat_turns(num_conversations=4, num_turns=3, user=(40, 120), answer=(30, 80))
    coord = KVCacheCoordinator(num_blocks, 16, SPEC, sliding_window_rule=rule)
    stats = serve(requests, HybridBlockManager(coord), 16, ReplayStats("t", num_blocks * 16))
    assert coord.pool.num_free() == num_blocks - 1                      # all back but the null block
    return stats


def test_the_rule_wins_under_pressure_and_ties_with_room():
    tight = [run(90, rule) for rule in (True, False)]
    roomy = [run(2000, rule) for rule in (True, False)]
    assert tight[0].hit_rate > tight[1].hit_rate
    assert roomy[0].hit_rate == roomy[1].hit_rate > 0
    assert roomy[0].hit_rate >= tight[0].hit_rate


def test_hit_rates_rows_cover_every_model_pool_and_rule():
    rows = hit_rates(model_names=("alternating, W 128",), pool_gib=(1.0,))
    assert [r["rule"] for r in rows] == [True, False]
    assert rows[0]["hit_rate"] >= rows[1]["hit_rate"]
