"""pagedkv_lib.studies.prefix_cache_comparison: the workloads are what they claim, the replays keep their
invariants, and the comparison's findings hold where they are claimed (notebook 15)."""
from __future__ import annotations

import pytest

from pagedkv_lib.core.block_pool import BlockPool
from pagedkv_lib.studies import prefix_cache_comparison as pcc


def test_each_chat_turn_extends_the_last():
    turns = pcc.chat_turns(num_conversations=2, num_turns=3)
    by_name = {r.name: r for r in turns}
    for r in turns:
        if r.after is not None:
            prev = by_name[r.after]
            assert r.prompt[: len(prev.prompt) + len(prev.output)] == prev.prompt + prev.output
            assert len(r.prompt) > len(prev.prompt) + len(prev.output)


def test_few_shot_and_system_prompts_share_their_headers():
    few = pcc.few_shot(num_requests=20)
    headers = {r.prompt[:390] for r in few}
    assert 1 < len(headers) <= 4
    system = pcc.shared_system_prompt(num_requests=5)
    assert len({r.prompt[:100] for r in system}) == 1 and len({r.prompt[:101] for r in system}) > 1


@pytest.mark.parametrize("workload", list(pcc.WORKLOADS))
def test_without_memory_pressure_the_tree_at_block_size_16_finds_what_the_hash_chain_finds(workload):
    requests = pcc.WORKLOADS[workload]()
    roomy = 4 * sum(len(r.prompt) + len(r.output) for r in requests)
    hashed, tree, tokens = (pcc.replay(requests, m, roomy) for m in ("hash/16", "radix/16", "radix/1"))
    assert hashed.cached_tokens == tree.cached_tokens and hashed.preemptions == tree.preemptions == 0
    assert tokens.computed_tokens == pcc.ideal_computed(requests) <= tree.computed_tokens


@pytest.mark.parametrize("manager", list(pcc.MANAGERS))
def test_a_replay_under_pressure_serves_every_request_and_accounts_for_every_token(manager):
    requests = pcc.few_shot(num_requests=24)
    stats = pcc.replay(requests, manager, pool_tokens=1024)
    admitted_once = sum(len(r.prompt) for r in requests)
    assert stats.admissions >= len(requests) and stats.prompt_tokens >= admitted_once
    assert 0 <= stats.cached_tokens < stats.prompt_tokens and len(stats.held_slots) == stats.steps
    assert all(h + c <= 1024 for h, c in zip(stats.held_slots, stats.cached_slots))
    assert stats.computed_tokens >= pcc.ideal_computed(requests)


def test_the_findings_notebook_15_prints():
    runs = {w: pcc.compare(w) for w in pcc.WORKLOADS}
    chat, few, system = runs["chat"], runs["few_shot"], runs["system"]
    assert chat["radix/1"].computed_tokens < chat["hash/16"].computed_tokens           # granularity
    assert system["radix/1"].computed_tokens == pcc.ideal_computed(pcc.shared_system_prompt())
    assert system["radix/1"].mean_held < system["hash/16"].mean_held                   # no partial blocks
    assert few["hash/16"].hit_rate > few["radix/1"].hit_rate                           # whole-node eviction
    assert few["radix/1 trim"].hit_rate > few["radix/1"].hit_rate


def test_the_trimming_cache_frees_only_what_it_is_asked_for_from_the_end_of_the_oldest_leaf():
    pool = BlockPool(16)
    cache = pcc.TailEvictingRadixCache(pool, 1)
    cache.insert([1, 2, 3, 4, 5, 6], pool.allocate(6))          # blocks 0..5
    cache.insert([9, 8], pool.allocate(2))                      # blocks 6, 7: newer
    assert cache.evict(2) == 2 and list(pool.free_block_ids)[-2:] == [5, 4]
    assert cache.cached_sequences() == [[1, 2, 3, 4], [9, 8]] and cache.evictable_size() == 6
    assert cache.evict(5) == 5 and cache.cached_sequences() == [[9]]


def test_the_table_has_a_row_per_workload_and_manager():
    text = pcc.comparison_table(workloads=("system",))
    assert len(text.splitlines()) == 1 + len(pcc.MANAGERS)
    with pytest.raises(ValueError, match="manager: expected one of"):
        pcc.replay(pcc.shared_system_prompt(num_requests=2), "lru", 512)
    with pytest.raises(ValueError, match="workload: expected one of"):
        pcc.compare("code")
