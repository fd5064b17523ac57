"""Cases of exercise 129, the prefix-caching block manager: scripts checked step by step.

After every op the harness records the return value, every sequence's block_table and num_cached_tokens,
and every attribute the stub says the judge reads: the blocks' ref counts, hashes and token ids, the free
queue (in order), used_block_ids and hash_to_block_id.

Clauses of the contract -> the fixed script that holds each (ex129_data.FIXED):
    compute_hash: xxh64, prefix bytes unless -1      compute_hash_values (prefix 0 and 2**64 - 1 too)
    hashes chained, full blocks only                 share_a_prefix, short_prompt_is_never_hashed
    hashed only through self.compute_hash            hash_collision_needs_token_check (weak hash)
    a hit needs hash AND token ids                   hash_collision_needs_token_check
    hits capped: the last token is computed          full_prompt_hit_is_capped
    can_allocate: misses plus free hits              can_allocate_counts_free_hits, can_allocate_hits_in_use
    allocate: a hit in use gains a reference         share_a_prefix, identical_prompts_in_one_step
    allocate: a free hit leaves the queue in place   freed_blocks_are_hit_again
    allocate: misses from the FRONT of the queue     share_a_prefix
    a reused block is reset, its stale entry gone    stale_entry_after_reuse
    ... only if the entry still points at it         stale_entry_of_a_rehashed_block
    deallocate: last block first, to the END,        deallocate_in_reverse, freed_blocks_are_hit_again
        keeping hash and entry; num_cached_tokens 0
    used_block_ids: the blocks with ref_count > 0    share_a_prefix
    can_append / may_append at (len - 1) % S == 0    can_append_needs_a_block, may_append_block_size_1
    may_append hashes a block it fills, chained      decode_fills_a_block_then_hit
"""
from __future__ import annotations

import random

from pagedkv_lib.core.sequence import Sequence
from pagedkv_lib.judge.cases.compare import show
from pagedkv_lib.judge.outcome import Outcome

from . import Case
from .script import compare_steps, run_script

KEYS = ("ret", "seqs", "refs", "free", "used", "h2b", "hashes", "tokens")
MISSING = {"__opaque__": "missing attribute"}


def weak_hash(cls, token_ids, prefix=-1):
    """Collides whenever two blocks have the same token sum (and the same prefix)."""
    return (sum(token_ids) + 1000003 * (prefix + 1)) % 2**20


def build(seed: int, device: str = "cpu") -> list[Case]:
    from .ex129_data import FIXED, fuzz  # simulated on the library: in the judge only

    rng = random.Random(f"129/{seed}")
    scripts = [(f"fixed/{name}", weak, ops) for name, weak, ops in FIXED]
    scripts += [(f"random/{i}", *fuzz(rng, 30)) for i in range(5)]
    cases = []
    for name, weak, ops in scripts:
        lines = ["compute_hash is overridden: blocks with the same token sum collide"] if weak else []
        cases.append(Case(name, {"ops": ops, "weak": weak}, lines))
    return cases


def run(ns, case: Case) -> dict:
    cls = ns["BlockManager"]
    if case.args["weak"]:
        cls = type("BlockManager", (cls,), {"compute_hash": classmethod(weak_hash)})

    def apply(state, op):
        kind, seqs = op[0], state.setdefault("seqs", {})
        if kind == "manager":
            state["bm"], state["bs"] = cls(op[1], op[2]), op[2]
        elif kind == "seq":
            seqs[op[1]] = Sequence(list(op[2]), state["bs"], seq_id=len(seqs))
        elif kind == "compute_hash":
            return cls.compute_hash(list(op[1]), op[2])
        elif kind == "append_token":
            seqs[op[1]].append_token(op[2])
        else:
            return getattr(state["bm"], kind)(seqs[op[1]])
        return None

    def snapshot(state, op):
        bm = state.get("bm")
        if bm is None:
            return {}
        blocks = getattr(bm, "blocks", None)
        free, h2b = getattr(bm, "free_block_ids", MISSING), getattr(bm, "hash_to_block_id", MISSING)
        used = getattr(bm, "used_block_ids", MISSING)
        return {"seqs": {k: [list(s.block_table), s.num_cached_tokens] for k, s in state["seqs"].items()},
                "refs": [b.ref_count for b in blocks] if blocks is not None else MISSING,
                "hashes": [b.hash for b in blocks] if blocks is not None else MISSING,
                "tokens": [list(b.token_ids) for b in blocks] if blocks is not None else MISSING,
                "free": list(free) if free is not MISSING else MISSING,
                "used": sorted(used) if used is not MISSING else MISSING,
                "h2b": dict(h2b) if h2b is not MISSING else MISSING}

    return run_script(case.args["ops"], apply, snapshot)


def render(op, step) -> str:
    kind = op[0]
    if kind == "manager":
        line = f"bm = BlockManager(num_blocks={op[1]}, block_size={op[2]})"
    elif kind == "seq":
        line = f"{op[1]} = Sequence({show(op[2])})"
    elif kind == "compute_hash":
        line = f"BlockManager.compute_hash({show(op[1])}, prefix={op[2]})"
    elif kind == "append_token":
        line = f"{op[1]}.append_token({op[2]})"
    else:
        line = f"bm.{kind}({op[1]})"
    if step is not None and kind in ("can_allocate", "can_append", "compute_hash"):
        line += f"  -> {step['ret']}"
    if step is not None and kind in ("allocate", "may_append"):
        table, cached = step["seqs"][op[1]]
        line += f"   ({op[1]}.block_table {table}, num_cached_tokens {cached})"
    return line


def check(case: Case, expected: dict, got: dict) -> Outcome:
    from pagedkv_lib.core.block_manager import BlockManager  # the oracle: in the judge only

    ops = case.args["ops"]
    hints = _hints(ops, case.args["weak"], BlockManager.compute_hash)
    return compare_steps(ops, expected, got, KEYS, render, hints) or Outcome()


def _hints(ops, weak: bool, unchained):
    def hint(i: int, key: str, e: dict, g: dict) -> str:
        kind = ops[i][0]
        if g.get(key) == MISSING:
            return ("keep attributes blocks, free_block_ids, used_block_ids, hash_to_block_id (the judge "
                    "reads them)")
        if kind == "compute_hash":
            return _hash_hint(ops[i], g.get("ret"), unchained)
        if kind == "can_allocate":
            return _can_allocate_hint(key, e, g)
        if key == "used":
            return "used_block_ids holds exactly the blocks whose ref_count is above 0"
        if key == "tokens":
            return "a full, hashed block keeps its token_ids with its hash (Block.update); a partial one none"
        if kind in ("can_append", "may_append") and key in ("ret", "seqs", "refs", "free"):
            return ("a decode needs a new block when (len(seq) - 1) % block_size == 0 (nano-vllm's "
                    "len(seq) % block_size == 1 never holds at block_size 1)")
        if kind == "deallocate" and key == "free":
            return "deallocate frees the LAST block first (reversed(block_table)), each to the queue's END"
        if kind == "deallocate" and key == "seqs":
            return "deallocate empties seq.block_table and sets seq.num_cached_tokens = 0"
        if key == "seqs" and kind == "allocate":
            num_tokens = len(next(op[2] for op in ops[:i] if op[:2] == ("seq", ops[i][1])))
            return _allocate_hint(ops[i][1], num_tokens, e, g)
        if key == "h2b":
            return _h2b_hint(kind, e, g, weak, ops[0][2])
        if key == "hashes":
            return "a block's hash is -1 unless full and hashed; a reused block is reset (hash -1, no tokens)"
        if key == "refs":
            return "a hit in use gains a reference; a fresh or reused block starts at 1; deallocate drops one"
        return "allocate from the FRONT of free_block_ids; a freed hit is taken out of the queue where it is"

    return hint


def _hash_hint(op, got, unchained) -> str:
    _, token_ids, prefix = op
    if prefix == 0:
        return "0 is a real prefix (a hash can be 0): only prefix == -1 means none"
    if prefix != -1 and got == unchained(list(token_ids)):
        return "chain the prefix: update with prefix.to_bytes(8, 'little') first, unless prefix == -1"
    return ("xxh64 over prefix.to_bytes(8, 'little') unless prefix == -1, then "
            "np.array(token_ids, dtype=np.int64).tobytes(); return .intdigest()")


def _can_allocate_hint(key: str, e: dict, g: dict) -> str:
    if key != "ret":
        return "can_allocate only asks: it changes nothing"
    if e["ret"] is True and g.get("ret") is False:
        return "a hit in use needs no free block: only misses and hits in the free queue take one"
    return "a hit that sits in the free queue needs a free block too: allocate takes it out of the queue"


def _h2b_hint(kind: str, e: dict, g: dict, weak: bool, block_size: int) -> str:
    got, exp = g["h2b"], e["h2b"]
    if kind == "deallocate":
        return "freed blocks keep their hash and hash_to_block_id entry: they can be hit until reused"
    if weak and isinstance(got, dict) and any(h >= 2**20 for h in set(got) - set(exp)):
        return "hash only through self.compute_hash: the judge overrides it to force collisions"
    if kind == "may_append":
        filled = next((b for h, b in exp.items() if h not in got), None) if isinstance(got, dict) else None
        if isinstance(got, dict) and filled in got.values():
            return "chain the filled block's hash on the hash of the block before it (-1 for the first block)"
        return ("when a decode fills the last block (len(seq) % block_size == 0), hash it and map its hash "
                "to it in hash_to_block_id")
    if isinstance(got, dict):
        hashes = g["hashes"] if isinstance(g["hashes"], list) else []
        tokens = g["tokens"] if isinstance(g["tokens"], list) else []
        if any(0 <= got[h] < len(tokens) and len(tokens[got[h]]) < block_size for h in set(got) - set(exp)):
            return "only FULL blocks get a hash: a partial block keeps hash -1 and no entry"
        stale = [h for h in set(got) - set(exp) if 0 <= got[h] < len(hashes) and hashes[got[h]] != h]
        if stale:
            return ("a stale entry: when a freed block is reused, delete its old hash from hash_to_block_id "
                    "(if the entry still points at it)")
        lost = [h for h in set(exp) - set(got) if 0 <= exp[h] < len(hashes) and hashes[exp[h]] == h]
        if lost:
            return ("an entry that points at ANOTHER block is not stale: delete a reused block's old hash "
                    "only if hash_to_block_id still maps it to this block")
    return ("hashes are chained: block i's hash is compute_hash(its token ids, prefix = block i-1's "
            "hash), through self.compute_hash, for FULL blocks only")


def _allocate_hint(name: str, num_tokens: int, e: dict, g: dict) -> str:
    e_cached, got = e["seqs"][name][1], g["seqs"].get(name)
    g_cached = got[1] if isinstance(got, list) and len(got) == 2 else None
    if isinstance(got, list) and got[0] == e["seqs"][name][0] and g_cached != e_cached:
        return "seq.num_cached_tokens grows by block_size for every hit"
    if isinstance(g_cached, int) and g_cached >= num_tokens:
        return ("cap the hit: at most num_tokens - 1 tokens come from the cache, so look only at blocks "
                "0 .. (num_tokens - 1) // block_size - 1 (a fully cached prompt leaves nothing to compute)")
    if isinstance(g_cached, int) and g_cached > e_cached:
        return "a false hit: a hit needs the hash AND the token ids to match (hashes can collide)"
    if isinstance(g_cached, int) and g_cached < e_cached:
        return ("a missed hit: look each FULL block up by its chained hash in hash_to_block_id (a freed "
                "block can be hit until it is reused)")
    return "hits first (shared or taken back from the queue), then fresh blocks from the FRONT of the queue"
