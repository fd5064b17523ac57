"""Cases of exercise 140, the rollback after a speculative step: scripts checked step by step.

An op is ("manager", N, block_size), ("seq", name, token_ids), ("allocate", name), ("append", name,
token_ids), ("may_append", name, k) (k lookahead slots), ("truncate", name, num_computed_tokens): the graded
call, ("deallocate", name) or ("fork", name, parent): a new sequence with the parent's tokens sharing its
blocks (pool.fork: one more reference each, as parallel sampling forks). Every op but truncate runs the
library's BlockManager (its module is not the answer: `rollback.truncate` is, and this module never
imports it). After every op the harness records each sequence's block_table, the slots of the computed
positions after a truncate (-1 where the table has no block), the blocks' ref counts, hashes and token
ids, the free queue in order and hash_to_block_id.

Clauses of the contract -> the fixed script that holds each:
    keep ceil(n / block_size) blocks, the last partial   last_computed_token_starts_a_block
    ... no more: none past an exact block boundary       reject_every_draft
    released blocks leave the table                      reject_every_draft, shared_prefix
    released last first, through pool.free               reject_every_draft (two blocks released)
    the kept prefix keeps its references                 shared_prefix
    a released block shared by a fork loses one          fork_shares_the_lookahead
    full blocks of computed tokens get a chained hash    accepted_drafts_fill_blocks
    ... and hash_to_block_id maps them; token ids kept   accepted_drafts_fill_blocks, then a hit
    ... replacing another sequence's entry of that hash  same_tokens_in_two_sequences
    a block hashed before is left alone, and its entry   same_tokens_in_two_sequences
    no hash on a partial block                           accepted_drafts_fill_blocks
    no hash on a block holding the unwritten bonus       every_draft_accepted
    ValueError, nothing changed, outside the range       bad_lengths (too long, a hashed block),
                                                         nothing_hashed_yet (0, True, 2.0: no hashed
                                                         block refuses them first), past_the_table
                                                         (len(seq), one more than the table holds)
    ... and none at the range's top                      bad_lengths (len(seq) itself)
    block_size 1                                         block_size_1
"""
from __future__ import annotations

import random

from pagedkv_lib.core.block_manager import BlockManager
from pagedkv_lib.core.sequence import Sequence
from pagedkv_lib.judge.cases.compare import show
from pagedkv_lib.judge.outcome import Outcome

from . import Case
from .script import compare_steps, run_script, wrong_class_hint

MAY_RAISE = {"truncate": ValueError}   # an invalid length; the class taken before any submission loads
KEYS = ("raised", "ret", "slots", "seqs", "refs", "free", "hashes", "tokens", "h2b")


def _step(name, drafts, accepted, bonus):
    """One verification: lookahead slots for the drafts, the accepted ones and the bonus appended, rollback
    to everything but the bonus."""
    return [("may_append", name, len(drafts)), ("append", name, [*drafts[:accepted], bonus]),
            ("truncate", name, None)]


def _admit(name, tokens, sampled=0):
    return [("seq", name, tokens), ("allocate", name), ("append", name, [sampled])]


def _decode(name, tokens):
    """Plain decode steps, one token each: room for the last token (may_append), then the sampled one."""
    return [op for t in tokens for op in (("may_append", name, 0), ("append", name, [t]))]


FIXED = [
    ("reject_every_draft", [("manager", 8, 2), *_admit("a", [1, 2, 3]), *_step("a", [4, 5, 6, 7], 0, 9)]),
    ("accepted_drafts_fill_blocks", [("manager", 10, 4), *_admit("a", [1, 2, 3]),
                                     *_step("a", [5, 6, 7, 8, 9, 10], 5, 11),
                                     *_admit("b", [1, 2, 3, 0, 5, 6, 7, 8, 9, 1])]),
    ("every_draft_accepted", [("manager", 8, 4), *_admit("a", [1, 2]), *_step("a", [3, 4, 5, 6], 4, 7),
                              *_step("a", [8, 9], 2, 10)]),
    ("last_computed_token_starts_a_block", [("manager", 8, 3), *_admit("a", [1, 2, 3, 4]),
                                            *_step("a", [6, 7, 8, 9], 1, 10)]),
    ("shared_prefix", [("manager", 12, 2), *_admit("a", [1, 2, 3, 4, 5]), *_admit("b", [1, 2, 3, 4, 6]),
                       *_step("a", [7, 8, 9, 10, 11], 1, 12), ("deallocate", "b")]),
    ("block_size_1", [("manager", 12, 1), *_admit("a", [1, 2]), *_step("a", [3, 4, 5], 2, 6),
                      *_step("a", [7], 0, 8)]),
    ("bad_lengths", [("manager", 10, 2), *_admit("a", [1, 2, 3, 4, 5]), ("may_append", "a", 3),
                     ("append", "a", [6]), ("truncate", "a", 0), ("truncate", "a", True),
                     ("truncate", "a", 8), ("truncate", "a", 5), ("truncate", "a", 7),
                     ("truncate", "a", 6)]),
    ("nothing_hashed_yet", [("manager", 8, 4), *_admit("a", [1, 2]), ("may_append", "a", 2),
                            ("append", "a", [5]), ("truncate", "a", 0), ("truncate", "a", True),
                            ("truncate", "a", 2.0), ("truncate", "a", None)]),
    ("past_the_table", [("manager", 8, 2), *_admit("a", [1, 2, 3], 4), *_step("a", [5, 6], 2, 7),
                        ("truncate", "a", 7), ("truncate", "a", 6)]),
    ("fork_shares_the_lookahead", [("manager", 12, 2), *_admit("a", [1, 2, 3], 4), ("may_append", "a", 3),
                                   ("fork", "b", "a"), ("append", "a", [5, 9]), ("truncate", "a", None),
                                   ("deallocate", "b")]),
    ("same_tokens_in_two_sequences", [("manager", 12, 2), *_admit("a", [1, 2, 3], 4),
                                      *_admit("b", [1, 2, 3], 4), ("may_append", "a", 3),
                                      *_decode("b", [5, 6, 7]), ("append", "a", [5, 6, 7]),
                                      ("truncate", "a", None), *_admit("c", [1, 2, 3, 4, 5, 6, 7])]),
]


def fuzz(rng: random.Random) -> list:
    """Sequences sharing a prefix, each step a verification with random drafts and acceptance (or a free),
    on a pool large enough never to run dry."""
    bs = rng.choice([1, 2, 3, 4])
    system = [rng.randrange(100) for _ in range(rng.randint(0, 3 * bs))]
    ops, lens, names = [("manager", 80, bs)], {}, iter(f"s{i}" for i in range(100))
    for _ in range(14):
        live = sorted(lens)
        if not live or rng.random() < 0.2:
            name = next(names)
            tokens = system + [rng.randrange(100) for _ in range(rng.randint(1, 2 * bs))]
            ops += _admit(name, tokens, rng.randrange(100))
            lens[name] = len(tokens) + 1
        elif rng.random() < 0.1:
            name = rng.choice(live)
            ops.append(("deallocate", name))
            del lens[name]
        else:
            name = rng.choice(live)
            drafts = [rng.randrange(100) for _ in range(rng.randint(0, 5))]
            accepted = rng.randint(0, len(drafts))
            ops += _step(name, drafts, accepted, rng.randrange(100))
            lens[name] += accepted + 1
    return ops


def build(seed: int, device: str = "cpu") -> list[Case]:
    rng = random.Random(f"140/{seed}")
    scripts = [(f"fixed/{name}", ops) for name, ops in FIXED]
    scripts += [(f"random/{i}", fuzz(rng)) for i in range(6)]
    return [Case(name, {"ops": ops}) for name, ops in scripts]


def run(ns, case: Case) -> dict:
    truncate = ns["truncate"]

    def apply(state, op):
        kind, seqs = op[0], state.setdefault("seqs", {})
        if kind == "manager":
            state["bm"], state["bs"] = BlockManager(op[1], op[2]), op[2]
        elif kind == "seq":
            seqs[op[1]] = Sequence(list(op[2]), state["bs"], seq_id=len(seqs))
        elif kind == "append":
            for t in op[2]:
                seqs[op[1]].append_token(t)
        elif kind == "may_append":
            state["bm"].may_append(seqs[op[1]], op[2])
        elif kind == "fork":
            parent = seqs[op[2]]
            seqs[op[1]] = Sequence(list(parent.token_ids), state["bs"], seq_id=len(seqs))
            seqs[op[1]].block_table = state["bm"].pool.fork(parent.block_table)
        elif kind == "truncate":
            seq = seqs[op[1]]
            return truncate(state["bm"], seq, len(seq) - 1 if op[2] is None else op[2])
        else:
            getattr(state["bm"], kind)(seqs[op[1]])
        return None

    def snapshot(state, op):
        bm = state.get("bm")
        if bm is None:
            return {}
        seqs, out = state["seqs"], {}
        if op[0] == "truncate":
            seq = seqs[op[1]]
            n = len(seq) - 1 if op[2] is None or op[2] is True or not isinstance(op[2], int) else op[2]
            out["slots"] = [_slot(seq.block_table, p, bm.block_size) for p in range(min(n, len(seq)))]
            out["len"] = len(seq)                                 # for the hints only: not in KEYS
        return {**out,
                "seqs": {k: list(s.block_table) for k, s in seqs.items()},
                "refs": list(bm.pool.ref_counts),
                "free": list(bm.free_block_ids),
                "hashes": [b.hash for b in bm.blocks],
                "tokens": [list(b.token_ids) for b in bm.blocks],
                "h2b": dict(bm.hash_to_block_id)}

    return run_script(case.args["ops"], apply, snapshot, may_raise=MAY_RAISE)


def _slot(block_table, p: int, block_size: int) -> int:
    i = p // block_size
    return block_table[i] * block_size + p % block_size if i < len(block_table) else -1


def render(op, step) -> str:
    kind = op[0]
    if kind == "manager":
        line = f"bm = BlockManager(num_blocks={op[1]}, block_size={op[2]})"
    elif kind == "seq":
        line = f"{op[1]} = Sequence({show(op[2])})"
    elif kind == "append":
        line = f"append {show(op[2])} to {op[1]}"
    elif kind == "may_append":
        line = f"bm.may_append({op[1]}, num_lookahead_tokens={op[2]})"
    elif kind == "fork":
        line = (f"{op[1]} = fork of {op[2]}: the same tokens, {op[1]}.block_table = "
                f"bm.pool.fork({op[2]}.block_table)")
    elif kind == "truncate":
        n = f"len({op[1]}) - 1" if op[2] is None else repr(op[2])
        line = f"truncate(bm, {op[1]}, {n})"
    else:
        line = f"bm.{kind}({op[1]})"
    if step is not None and kind in ("allocate", "may_append", "truncate"):
        line += f"   ({op[1]}.block_table {step['seqs'][op[1]]})"
    if step is not None and "raised" in step:
        line += f"  -> raises {step['raised']}"
    return line


def check(case: Case, expected: dict, got: dict) -> Outcome:
    ops = case.args["ops"]
    return compare_steps(ops, expected, got, KEYS, render, _hints(ops)) or Outcome()


def _hints(ops):
    def hint(i: int, key: str, e: dict, g: dict) -> str:
        if key in ("raised", "ret"):
            if "raised" in e:
                return _refusal_hint(ops[i], e, g, ops[0][2])
            return "a valid num_computed_tokens must not raise; truncate returns None"
        if "raised" in e:
            return "check every argument before changing anything: a refused call leaves all as it was"
        if key == "slots" and -1 in g["slots"]:
            return ("keep ceil(num_computed_tokens / block_size) blocks: the block of the last computed "
                    "token stays, even when it is partial")
        if key == "slots":
            return "block_table[:keep] stays as it is, in order; only the blocks after it go"
        if key == "seqs":
            return _table_hint(e, g, ops[i][1])
        if key == "refs":
            kept = e["seqs"][ops[i][1]]
            if any(g["refs"][b] < e["refs"][b] for b in kept):
                return ("a kept (shared prefix) block lost a reference: release only the blocks AFTER the "
                        "first keep, block_table[keep:], one pool.free each")
            if any(0 <= g["refs"][b] < e["refs"][b] for b in range(len(e["refs"]))):
                return ("a released block that another sequence shares (a fork's table) keeps that "
                        "sequence's reference: one pool.free per released block, not down to 0")
            return "each released block loses exactly one reference (pool.free), kept blocks none"
        if key == "free":
            return "release the LAST block of the table first (reversed(block_table[keep:])), with pool.free"
        if key in ("hashes", "h2b"):
            return _hash_hint(e, g, ops[0][2], e["seqs"][ops[i][1]])
        return "Block.update(hash, token_ids) stores a hashed block's token ids with its hash"

    return hint


def _refusal_hint(op, e: dict, g: dict, block_size: int) -> str:
    """Why a call the contract refuses was not refused (or not with a ValueError), from its argument."""
    n, table = op[2], e["seqs"][op[1]]
    num_hashed = sum(1 for b in table if e["hashes"][b] != -1)
    if wrong_class_hint(g.get("raised")):
        return wrong_class_hint(g.get("raised"))
    if type(n) is not int:
        return (f"num_computed_tokens must be an int: refuse {type(n).__name__} {n!r} with ValueError (a "
                f"bool or a float is not a count), even when it equals a valid one")
    if n < 1 and num_hashed == 0:
        return ("at least one token is computed (the prefill wrote one): refuse num_computed_tokens < 1 "
                "with ValueError")
    if 1 <= n < num_hashed * block_size:
        return ("verified blocks are never cut back: refuse (ValueError) a num_computed_tokens below the "
                "tokens of the table's hashed blocks")
    if len(table) * block_size < n <= e["len"]:
        return ("the table has slots for len(block_table) * block_size tokens only: refuse (ValueError) a "
                "num_computed_tokens above that, even when len(seq) holds that many")
    return ("raise ValueError, before changing anything, unless num_computed_tokens is an int in [max(1, "
            "hashed blocks * block_size), min(len(seq), len(block_table) * block_size)]")


def _table_hint(e: dict, g: dict, name: str) -> str:
    e_table, g_table = e["seqs"][name], g["seqs"].get(name, [])
    extra = g_table[len(e_table):]
    if len(g_table) > len(e_table) and all(g["refs"][b] > e["refs"][b] for b in extra):
        return ("keep ceil(num_computed_tokens / block_size) blocks and no more: at an exact block boundary "
                "no block is partial, and the blocks after it (rejected drafts only) are released")
    if len(g_table) > len(e_table):
        return "a released block is still in seq.block_table: delete block_table[keep:] after freeing"
    return "block_table[:keep] stays as it is; only the blocks after it go"


def _hash_hint(e: dict, g: dict, block_size: int, table: list) -> str:
    extra = [b for b, (eh, gh) in enumerate(zip(e["hashes"], g["hashes"], strict=True)) if eh == -1 != gh]
    if extra:
        if len(g["tokens"][extra[0]]) < block_size:
            return "only FULL blocks get a hash: a partial last block keeps hash -1"
        return ("the bonus token's K/V is not written yet: hash only blocks whose tokens all lie in the "
                "first num_computed_tokens (range(num_computed_tokens // block_size))")
    missing = [b for b, (eh, gh) in enumerate(zip(e["hashes"], g["hashes"], strict=True)) if gh == -1 != eh]
    if missing:
        return ("hash every full block of computed tokens that has none yet: accepted drafts can fill "
                "blocks")
    if e["hashes"] != g["hashes"]:
        return "chain the hash: compute_hash(seq.block(i), prefix = block i-1's hash, -1 for block 0)"
    moved = [h for h, b in e["h2b"].items() if h in g["h2b"] and g["h2b"][h] != b]
    if moved and e["h2b"][moved[0]] in table:
        return ("a newly hashed block replaces the hash_to_block_id entry of that hash, even one that maps "
                "another sequence's block: the newest block holding the hash is the one found")
    if moved:
        return ("a block that already had a hash is left alone, its hash_to_block_id entry too: that entry "
                "may map another sequence's block with the same tokens, and stays so")
    return "map each new hash to its block in hash_to_block_id"
