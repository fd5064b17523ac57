"""NgramProposer: draft tokens by prompt lookup, no draft model (vLLM's
`vllm/v1/spec_decode/ngram_proposer.py` at adce4e9; Saxena's prompt-lookup decoding).

Take the last n tokens of the sequence, for n from `prompt_lookup_max` down to `prompt_lookup_min`; find
the EARLIEST earlier place where the same n tokens occur; propose the (up to) k tokens that followed them
there. The longest n that matches wins. Text that repeats itself (code edits, quoting the prompt, a chat
that restates its history, a small model stuck in a loop) is drafted well; fresh text gets no draft, and
a step without drafts is a plain decode. vLLM finds the match with a KMP pass over the reversed tokens in
numba; this is the plain O(len * n) scan, which finds the same match.
"""
from __future__ import annotations

from pagedkv_lib.core.validation import check_positive_int


class NgramProposer:
    def __init__(self, num_speculative_tokens: int, prompt_lookup_min: int = 1, prompt_lookup_max: int = 3):
        check_positive_int("num_speculative_tokens", num_speculative_tokens)
        check_positive_int("prompt_lookup_min", prompt_lookup_min)
        check_positive_int("prompt_lookup_max", prompt_lookup_max)
        if prompt_lookup_min > prompt_lookup_max:
            raise ValueError(f"prompt_lookup_min: expected <= prompt_lookup_max ({prompt_lookup_max}), "
                             f"got {prompt_lookup_min}")
        self.k = num_speculative_tokens
        self.min_n = prompt_lookup_min
        self.max_n = prompt_lookup_max

    def propose(self, token_ids: list[int], max_num_tokens: int | None = None) -> list[int]:
        """Up to min(k, max_num_tokens) draft tokens that continue `token_ids`; [] when nothing matches."""
        k = self.k if max_num_tokens is None else min(self.k, max_num_tokens)
        total = len(token_ids)
        if k <= 0:
            return []
        for n in range(min(self.max_n, total - 1), self.min_n - 1, -1):
            suffix = token_ids[total - n:]
            for start in range(total - n):                   # earlier occurrences, earliest first
                if token_ids[start:start + n] == suffix:
                    return list(token_ids[start + n:start + n + k])
        return []
