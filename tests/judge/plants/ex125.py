# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 125: each a copy of solutions/125_*.py with one classic mistake, the verdict it
must get and words the hint (or message) of its first failing case must contain (see plants/__init__.py)."""
from plants import RE, WA, Plant  # noqa: F401

PLANTS = {
    'gqa_h_mod_h_kv': Plant([
        ('k = k.repeat_interleave(group, dim=1) ',
         'k = k.repeat(1, group, 1) '),
        ('v = v.repeat_interleave(group, dim=1) ',
         'v = v.repeat(1, group, 1) '),
    ], WA, 'h % H_kv'),
    'tail_of_last_block_not_cut': Plant([
        ('k = k_cache[blocks].reshape(-1, H_kv, D)[:n]',
         'k = k_cache[blocks].reshape(-1, H_kv, D)'),
        ('v = v_cache[blocks].reshape(-1, H_kv, D)[:n]',
         'v = v_cache[blocks].reshape(-1, H_kv, D)'),
    ], WA, "the last block's unused tail was read"),
    'masks_the_scores_but_not_v': Plant([
        ('k = k_cache[blocks].reshape(-1, H_kv, D)[:n]',
         'k = k_cache[blocks].reshape(-1, H_kv, D)'),
        ('v = v_cache[blocks].reshape(-1, H_kv, D)[:n]',
         'v = v_cache[blocks].reshape(-1, H_kv, D)'),
        ('* scale  # [H, n]',
         '* scale\n        scores[:, n:] = float("-inf")'),
    ], WA, '0 x NaN = NaN'),
    'scale_ignored': Plant([
        ('k) * scale',
         'k) * D**-0.5'),
    ], WA, 'use the `scale` argument'),
    'one_token_too_few': Plant([
        ('n = int(context_lens[b])',
         'n = int(context_lens[b]) - 1 or 1'),
    ], WA, 'one key too few'),
    'one_token_too_many': Plant([
        ('n = int(context_lens[b])',
         'n = int(context_lens[b]) + 1'),
    ], WA, 'one token too many'),
    'softmax_over_heads': Plant([
        ('scores.softmax(dim=-1)',
         'scores.softmax(dim=0)'),
    ], WA, 'softmax(q . k * scale) . v in fp32'),
    'every_context_as_long_as_the_first': Plant([
        ('n = int(context_lens[b])',
         'n = int(context_lens[0])'),
    ], WA, 'softmax(q . k * scale) . v in fp32'),
    'exp_without_the_max': Plant([
        ('scores.softmax(dim=-1)',
         '(scores.exp() / scores.exp().sum(-1, keepdim=True))'),
    ], WA, 'subtract the row'),
    'cleans_the_cache_in_place': Plant([
        ('    out = torch.empty_like(q) ',
         '    k_cache.nan_to_num_(0.0)\n    v_cache.nan_to_num_(0.0)\n    out = torch.empty_like(q) '),
    ], WA, 'every argument is read-only'),
    'returns_fp32': Plant([
        ('    out = torch.empty_like(q) ',
         '    out = torch.empty_like(q, dtype=torch.float32) '),
    ], WA, "the query's shape and dtype"),
}
