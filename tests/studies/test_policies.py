"""pagedkv_lib.studies.policies: the paper's three reservations and paging, sized by hand; what fits."""
import numpy as np
import pytest

from pagedkv_lib.studies.memory import MODELS, GiB
from pagedkv_lib.studies.policies import Paged, Reserve, make_policy, next_pow2


def test_next_pow2():
    assert next_pow2([1, 2, 3, 4, 5, 25, 1000, 1024, 1025]).tolist() == [1, 2, 4, 4, 8, 32, 1024, 1024, 2048]


def test_reserved_slots_and_buddy_chunks_per_policy():
    p, o = np.array([3, 100, 1100]), np.array([25, 1, 900])
    assert Reserve("max", 2048).slots(p, o).tolist() == [2048, 2048, 2048]
    assert Reserve("pow2", 2048).slots(p, o).tolist() == [35, 101, 2048]     # 3 + 32; 1100 + 1024 capped
    assert Reserve("pow2", 2048).chunk(p, o).tolist() == [64, 128, 2048]
    assert Reserve("oracle", 2048).slots(p, o).tolist() == [28, 101, 2000]
    assert Reserve("oracle", 2048).chunk(p, o).tolist() == [32, 128, 2048]
    assert Reserve("oracle", 2048, buddy=False).chunk(p, o).tolist() == [28, 101, 2000]
    assert Paged(16).allocated([1, 16, 17]).tolist() == [16, 16, 32]


def test_fit_by_hand():
    p, o = np.array([3, 6, 10, 1]), np.array([5, 2, 20, 1])         # 8, 8, 30, 2 tokens
    assert Paged(4).fit(p, o, 47) == 2 and Paged(4).fit(p, o, 48) == 3   # 8 + 8 + 32 slots
    assert Reserve("oracle", 32, buddy=False).fit(p, o, 47) == 3         # 8 + 8 + 30 end to end
    assert Reserve("oracle", 32).fit(p, o, 47) == 2                      # 8 + 8, then 32 fits no region
    assert Reserve("oracle", 32).fit(p, o, 48) == 3                      # regions 32 + 16: 8 8 | 32 | -
    assert Reserve("oracle", 32).fit(p, o, 50) == 4                      # regions 32 + 16 + 2: the 2 fits
    assert Reserve("max", 32).fit(p, o, 100) == 3                        # floor(100 / 32) chunks of 32


@pytest.mark.parametrize("key, slack", [("orca_max", 0), ("paged", 0.05), ("orca_oracle", 0.1)])
def test_fp8_kv_holds_about_twice_the_requests_of_bf16(key, slack):
    """The requests of a workload that fit at once in 7 GiB of Qwen3-0.6B KV: halving the bytes per token
    doubles the slots. Equal chunks (Orca Max) then fit exactly twice as many; requests of different lengths
    about twice as many (the next ones are not the same lengths), buddy chunks a little less regularly."""
    rng = np.random.default_rng(0)
    p, o = rng.integers(4, 1000, 5000), rng.integers(4, 1000, 5000)
    policy = make_policy(key, max_len=2048)
    qwen = MODELS["Qwen3-0.6B"]
    slots = {d: 7 * GiB // qwen.with_kv_dtype(d).bytes_per_token for d in ("bf16", "fp8")}
    assert slots["fp8"] == 2 * slots["bf16"] == 131_072
    bf16, fp8 = policy.fit(p, o, slots["bf16"]), policy.fit(p, o, slots["fp8"])
    assert abs(fp8 - 2 * bf16) <= slack * 2 * bf16


@pytest.mark.parametrize("call, message", [
    (lambda: Reserve("min"), "kind: expected"),
    (lambda: make_policy("lru"), "key: expected one of"),
    (lambda: Reserve("max", 8).slots([5], [5]), "max_len: expected >= every prompt"),
    (lambda: Reserve("max", 8).slots([1, 2], [1]), "two 1-d arrays"),
    (lambda: Reserve("max", 8).slots([0], [1]), "lengths >= 1"),
    (lambda: Paged(0), "block_size"),
    (lambda: Paged(4).fit([1], [1], 0), "budget_tokens"),
])
def test_bad_inputs_say_expected_and_given(call, message):
    with pytest.raises(ValueError, match=message):
        call()
