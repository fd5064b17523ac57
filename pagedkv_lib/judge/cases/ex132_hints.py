"""The hints of exercise 132: which rule of `schedule`'s contract a differing field of a step breaks."""
from __future__ import annotations

POOL_HINT = ("change the pool only through allocate / may_append / deallocate, once per sequence: preempt "
             "with block_manager.deallocate(seq), decode with may_append(seq) after can_append(seq)")


def hint(name: str, e: dict, g: dict, a: dict) -> str:
    """The rule of the contract that makes field `name` of a step differ (e expected, g got, a the case)."""
    before = e["before"]
    if name == "is_prefill":
        return ("a step is a prefill exactly when it admitted someone; then it returns at once and decodes "
                "nobody" if e["is_prefill"] else "is_prefill is True only when a sequence was admitted")
    if name == "scheduled":
        got, exp = g["scheduled"], e["scheduled"]
        admitted = [i for i in got if i in before["waiting"]]
        if e["is_prefill"] and len(got) > len(exp) and got[: len(exp)] == exp and \
                any(i in before["running"] or i in exp for i in got[len(exp):]):
            return "a prefill step decodes nobody: return (admitted, True) right after admitting"
        if admitted != exp and (admitted or e["is_prefill"]):
            return _admission_hint(admitted, exp, before, a)
    if name in ("scheduled", "waiting") and not e["is_prefill"]:
        if sorted(e["waiting"]) == sorted(g["waiting"]):
            return "a preempted sequence goes to the FRONT of waiting (appendleft): it is recomputed first"
        preempted_e = set(before["running"]) - set(e["running"])
        preempted_g = set(before["running"]) - set(g["running"]) if isinstance(g["running"], list) else set()
        if preempted_g > preempted_e and len(g["free_block_ids"]) <= len(e["free_block_ids"]):
            return ("preempting frees the sequence's blocks with block_manager.deallocate(s): without that "
                    "the pool stays dry and more sequences are preempted than needed")
        if preempted_g < preempted_e:
            return POOL_HINT
        return ("when can_append(seq) is False, preempt the NEWEST running sequence not yet taken this step "
                "(the end of running), and repeat; only when none is left, preempt seq itself")
    if name == "running":
        return "the scheduled sequences, in the order they were scheduled, and nothing else stay in running"
    if name == "status":
        i = next(i for i, (x, y) in enumerate(zip(e["status"], g["status"])) if x != y)
        return ("seq.status = RUNNING when admitted" if e["status"][i] == "RUNNING" else
                "seq.status = WAITING when preempted")
    if name == "num_cached_tokens":
        return "block_manager.allocate(seq) finds the prefix hits; deallocate resets num_cached_tokens"
    return POOL_HINT


def _admission_hint(admitted: list, expected: list, before: dict, a: dict) -> str:
    """Which admission rule `admitted` (the ids the submission admitted) breaks."""
    lens, budget, cap = before["lens"], a["max_num_batched_tokens"], a["max_num_seqs"]
    tokens = sum(lens[i] for i in admitted)
    if admitted and admitted != before["waiting"][: len(admitted)]:
        return ("FIFO: admit from waiting[0] only, and stop at the first sequence that cannot be admitted: "
                "nobody behind it is admitted either")
    if tokens > budget:
        return ("every token of an admitted prompt counts against max_num_batched_tokens, cached or not "
                "(num_batched_tokens += len(seq))")
    if len(before["running"]) + len(admitted) > cap:
        return "max_num_seqs bounds len(running), the sequences already running included, not this step's " \
               "admissions"
    if admitted == expected[: len(admitted)] and len(admitted) < len(expected):
        nxt = expected[len(admitted)]
        if tokens + lens[nxt] == budget:
            return ("a prompt that exactly fills the token budget fits: admit while num_batched_tokens + "
                    "len(seq) <= max_num_batched_tokens")
        if len(before["running"]) + len(admitted) + 1 == cap:
            return "running may hold max_num_seqs sequences: admit while len(running) < max_num_seqs"
    return "admit from waiting[0] while budget, max_num_seqs (counting running), can_allocate allow"
