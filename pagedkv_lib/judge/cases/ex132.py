"""Cases of exercise 132, one scheduling step: multi-step workloads driven by an engine loop.

Each case is a workload: a pool (num_blocks, block_size), the limits, and requests (prompt, max_tokens,
arrival step). `run` plays the engine around the graded `schedule`: before step t the requests arriving at t
join the back of `waiting`; then `schedule(...)`; then the engine's postprocess appends one token to every
scheduled sequence (a fixed function of its id and length) and finishes those that reached max_tokens
(deallocate, FINISHED, removed from running). After each call the whole observable state is recorded: the
scheduled ids, is_prefill, the queues in order, every sequence's status, block table and num_cached_tokens,
the free block ids in order and the ref counts. Prompts share prefixes so that admissions hit the prefix
cache, and pools are small so that decodes run them dry and preempt. A run stops when a step schedules
nothing (the state can no longer change) or after MAX_STEPS.

Clauses of the contract -> the fixed case that holds each:
    admit FIFO from waiting[0]; stop at a refusal      head_never_fits_blocks_the_queue,
                                                       head_over_token_budget
    budget: every token counts, cached or not          budget_counts_cached_tokens, token_budget
    a prompt that exactly fills the budget fits        prompt_exactly_fills_the_budget
    len(running) < max_num_seqs, running included      max_num_seqs
    admitted: RUNNING, to the back of running          one_request, docstring_example
    a prefill step decodes nobody                      one_request
    decode from the front; preempt the NEWEST          pool_dry_mid_decode, docstring_example
        not yet taken, else seq itself                 preempt_self_when_alone, several_preemptions_one_step
    preempt: deallocate, WAITING, to the FRONT         docstring_example, pool_dry_mid_decode
    may_append only after can_append                   docstring_example
    running: exactly the scheduled, in order           docstring_example
    ([], False) when nothing can run; a bool           head_never_fits_blocks_the_queue, one_request
    prefix hits through allocate (recompute too)       shared_system_prompt, recompute_hits_own_blocks
"""
from __future__ import annotations

import random
from collections import deque

from pagedkv_lib.core.block_manager import BlockManager
from pagedkv_lib.core.sequence import Sequence
from pagedkv_lib.judge.cases.compare import show
from pagedkv_lib.judge.outcome import Outcome, wrong

from . import Case
from .ex132_hints import hint

MAX_STEPS = 80
FIELDS = ("scheduled", "is_prefill", "running", "waiting", "status", "block_tables", "num_cached_tokens",
          "free_block_ids", "ref_counts")


def _req(prompt, max_tokens, arrival=0):
    return {"prompt": list(prompt), "max_tokens": max_tokens, "arrival": arrival}


def _case(name, block_size, num_blocks, requests, max_num_seqs=8, max_num_batched_tokens=256):
    args = {"block_size": block_size, "num_blocks": num_blocks, "max_num_seqs": max_num_seqs,
            "max_num_batched_tokens": max_num_batched_tokens, "requests": requests}
    lines = [f"  pool: {num_blocks} blocks of {block_size}; max_num_seqs {max_num_seqs}, "
             f"max_num_batched_tokens {max_num_batched_tokens}"]
    for i, r in enumerate(requests):
        lines.append(f"  seq {i}: prompt of {len(r['prompt'])} tokens {show(r['prompt'])}, "
                     f"max_tokens {r['max_tokens']}, arrives before step {r['arrival']}")
    return Case(name, args, lines)


def _fixed() -> list[Case]:
    sys12 = list(range(100, 112))
    return [
        _case("fixed/one_request", 4, 8, [_req([1, 2, 3, 4, 5], 4)]),
        _case("fixed/docstring_example", 4, 7,   # A, B, C of 8 tokens; the 9th token asks for a third block
              [_req(range(10 * i, 10 * i + 8), 3) for i in range(3)]),
        _case("fixed/token_budget", 4, 32, [_req(range(20 * i, 20 * i + 10), 2) for i in range(4)],
              max_num_batched_tokens=25),
        _case("fixed/max_num_seqs", 2, 32, [_req([i, i + 1, i + 2], 3 + i) for i in range(5)],
              max_num_seqs=2),
        _case("fixed/head_never_fits_blocks_the_queue", 4, 4, [_req(range(20), 2), _req([1, 2], 2)]),
        _case("fixed/head_over_token_budget", 4, 16, [_req(range(30), 2), _req([1, 2], 2)],
              max_num_batched_tokens=20),
        _case("fixed/pool_dry_mid_decode", 4, 6,
              [_req(range(10 * i, 10 * i + 7), 9) for i in range(3)]),
        _case("fixed/preempt_self_when_alone", 2, 5, [_req(range(9), 4), _req(range(50, 53), 6)]),
        _case("fixed/several_preemptions_one_step", 2, 8,
              [_req(range(10 * i, 10 * i + 4), 6) for i in range(4)]),
        _case("fixed/shared_system_prompt", 4, 10,
              [_req(sys12 + [i], 6, arrival=0 if i < 2 else 3) for i in range(4)]),
        _case("fixed/identical_prompts_same_step", 4, 12, [_req(sys12, 4), _req(sys12, 4), _req(sys12, 5)]),
        _case("fixed/budget_counts_cached_tokens", 4, 16, [_req(sys12 + [i], 3) for i in range(3)],
              max_num_batched_tokens=30),
        _case("fixed/prompt_exactly_fills_the_budget", 4, 16, [_req(range(10), 2), _req(range(20, 26), 2),
                                                               _req([1, 2], 2)], max_num_batched_tokens=16),
        _case("fixed/recompute_hits_own_blocks", 4, 6, [_req(range(8), 10), _req(range(40, 47), 10)]),
        _case("fixed/block_size_1", 1, 12, [_req(range(10 * i, 10 * i + 3), 5) for i in range(3)]),
        _case("fixed/late_arrivals", 4, 8,
              [_req(range(10 * i, 10 * i + 5), 6, arrival=2 * i) for i in range(4)]),
    ]


def _random(rng: random.Random, i: int) -> Case:
    """A workload an engine could finish (as EngineConfig requires): every request fits the pool alone, and
    the token budget holds the longest one, so a preempted request can always come back."""
    block_size = rng.choice([1, 2, 4, 8])
    num_blocks = max(3, rng.randint(16, 48) // block_size)
    pool = num_blocks * block_size
    prefixes = [[rng.randrange(1000) for _ in range(rng.randint(1, 2 * block_size + 2))] for _ in range(2)]
    requests = []
    for _ in range(rng.randint(3, 8)):
        prompt = rng.choice(prefixes + [[]]) + [rng.randrange(1000) for _ in range(rng.randint(1, 8))]
        prompt = prompt[: pool - 1]
        max_tokens = rng.randint(1, min(10, pool - len(prompt)))
        requests.append(_req(prompt, max_tokens, rng.choice([0, 0, 1, 3, 6])))
    longest = max(len(r["prompt"]) + r["max_tokens"] for r in requests)
    return _case(f"random/{i}", block_size, num_blocks, requests, max_num_seqs=rng.randint(1, 6),
                 max_num_batched_tokens=rng.randint(longest, 3 * longest))


def build(seed: int, device: str = "cpu") -> list[Case]:
    rng = random.Random(f"132/{seed}")
    return _fixed() + [_random(rng, i) for i in range(16)]


# ----------------------------------------------------------------------------------------------------------
# the engine loop around the graded function (runs in the child for the submission, here for the oracle)

def _next_token(seq: Sequence) -> int:
    return 1000 + (7 * seq.seq_id + 13 * len(seq)) % 97


def _ids(queue) -> list:
    return [getattr(s, "seq_id", repr(s)[:40]) for s in queue]


def _state(seqs, waiting, running, bm: BlockManager) -> dict:
    """Plain data only: whatever a submission stored in these fields is shown, never trusted."""
    return {
        "running": _ids(running), "waiting": _ids(waiting),
        "status": [getattr(s.status, "name", repr(s.status)[:40]) for s in seqs],
        "block_tables": [_plain(s.block_table) for s in seqs],
        "num_cached_tokens": [_plain(s.num_cached_tokens) for s in seqs],
        "free_block_ids": _plain(bm.free_block_ids), "ref_counts": [_plain(b.ref_count) for b in bm.blocks],
    }


def _plain(value):
    """ints and lists of ints as they are; anything else as a short text (which never equals an int)."""
    if type(value) is int:
        return value
    if isinstance(value, (list, tuple, deque)):
        return [v if type(v) is int else repr(v)[:40] for v in value]
    return repr(value)[:40]


def run(ns, case: Case) -> dict:
    a = case.args
    bm = BlockManager(a["num_blocks"], a["block_size"])
    seqs: list[Sequence] = []
    waiting: deque[Sequence] = deque()
    running: deque[Sequence] = deque()
    steps = []
    for t in range(MAX_STEPS):
        for i, r in enumerate(a["requests"]):
            if r["arrival"] == t:
                seqs.append(Sequence(r["prompt"], a["block_size"], seq_id=i))
                waiting.append(seqs[-1])
        if not waiting and not running:
            if all(r["arrival"] < t for r in a["requests"]):
                break
            continue                                   # idle until the next arrival
        before = {"waiting": _ids(waiting), "running": _ids(running), "free": len(bm.free_block_ids),
                  "lens": {s.seq_id: len(s) for s in list(waiting) + list(running)}}
        try:
            ret = ns["schedule"](waiting, running, bm, a["max_num_seqs"], a["max_num_batched_tokens"])
        except (NotImplementedError, MemoryError, RecursionError):
            raise                                      # the whole case: not implemented, memory limit, ...
        except Exception as exc:                       # this step: a runtime error, with the learner's trace
            steps.append({"before": before, "error": Outcome.of_exception(exc).to_dict()})
            break
        step = {"before": before, **_returned(ret), **_state(seqs, waiting, running, bm)}
        steps.append(step)
        if "bad_return" in step or not step["scheduled"]:
            break
        try:
            _postprocess(ret[0], a["requests"], running, bm)
        except Exception as exc:
            step["postprocess"] = f"{type(exc).__name__}: {exc}"[:300]
            break
    return {"steps": steps}


def _returned(ret) -> dict:
    if not (type(ret) is tuple and len(ret) == 2):
        return {"bad_return": f"expected a tuple (scheduled, is_prefill), got {type(ret).__name__}"}
    scheduled, is_prefill = ret
    if type(scheduled) is not list or not all(isinstance(s, Sequence) for s in scheduled):
        return {"bad_return": f"expected scheduled as a list of Sequences, got {type(scheduled).__name__} "
                              f"{show(_ids(scheduled) if hasattr(scheduled, '__iter__') else scheduled)}"}
    if type(is_prefill) is not bool:
        return {"bad_return": f"expected is_prefill as a bool, got {type(is_prefill).__name__}"}
    return {"scheduled": _ids(scheduled), "is_prefill": is_prefill}


def _postprocess(scheduled, requests, running, bm) -> None:
    """The engine's part: one token each; a sequence done with max_tokens finishes and frees its blocks."""
    for seq in scheduled:
        seq.append_token(_next_token(seq))
        if seq.num_completion_tokens >= requests[seq.seq_id]["max_tokens"]:
            seq.status = seq.status.FINISHED
            bm.deallocate(seq)
            if seq in running:
                running.remove(seq)


# ----------------------------------------------------------------------------------------------------------
# comparison and hints

def check(case: Case, expected: dict, got: dict) -> Outcome:
    exp_steps, got_steps = expected["steps"], got["steps"]
    for t, e in enumerate(exp_steps):
        history = _history(exp_steps[:t])
        if t >= len(got_steps):
            return wrong(f"step {t}: your run stopped after {len(got_steps)} steps, "
                         f"expected {len(exp_steps)}",
                         "a step that schedules nothing ends the run: return ([], False) only when nobody "
                         "can run", history)
        g = got_steps[t]
        where = f"step {t} (before it: waiting {e['before']['waiting']}, running {e['before']['running']}, "\
                f"{e['before']['free']} free blocks)"
        if "error" in g:
            outcome = Outcome.from_child(g["error"])
            outcome.message = f"{where}: schedule raised {outcome.message}"
            outcome.hint = outcome.hint or ("call the BlockManager only as the contract says: allocate after "
                                            "can_allocate, may_append after can_append, deallocate once")
            outcome.details = history + outcome.details
            return outcome
        if "bad_return" in g:
            return wrong(f"{where}: {g['bad_return']}", "return (scheduled, is_prefill): a list and a bool",
                         history)
        for name in FIELDS:
            if g[name] != e[name]:
                return wrong(f"{where}: {name}: expected {show(e[name])}, got {show(g[name])}",
                             hint(name, e, g, case.args), history + _lens(e))
        if "postprocess" in g:
            return wrong(f"{where}: the engine could not finish the step: {g['postprocess']}",
                         "scheduled sequences must be RUNNING, in running, and hold their blocks", history)
    if len(got_steps) > len(exp_steps):
        return wrong(f"your run went on for {len(got_steps)} steps, expected {len(exp_steps)}",
                     "when nothing can run, return ([], False)", _history(exp_steps))
    return Outcome()


def _history(steps) -> list:
    lines = []
    for t, s in enumerate(steps[-6:], start=max(0, len(steps) - 6)):
        kind = "prefill" if s["is_prefill"] else "decode"
        pre = [i for i in s["before"]["running"] if i not in s["running"]] if not s["is_prefill"] else []
        lines.append(f"  step {t}: {kind} {s['scheduled']}" + (f", preempted {pre}" if pre else ""))
    return lines


def _lens(e) -> list:
    return [f"  lengths before the step: {e['before']['lens']}"]
