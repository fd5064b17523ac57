# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 126: each a copy of solutions/126_*.py with one classic mistake, the verdict it
must get and words the hint (or message) of its first failing case must contain (see plants/__init__.py)."""
from plants import RE, WA, Plant  # noqa: F401

PLANTS = {
    'causal_mask_from_position_0': Plant([
        ('pos = torch.arange(n - q_len, n)',
         'pos = torch.arange(q_len)'),
    ], WA, 'not i'),
    'no_causal_mask': Plant([
        ('        scores = scores.masked_fill(~mask, float("-inf"))\n',
         ''),
    ], WA, 'must not see keys after'),
    'gqa_h_mod_h_kv': Plant([
        ('k = k.repeat_interleave(group, dim=1) ',
         'k = k.repeat(1, group, 1) '),
        ('v = v.repeat_interleave(group, dim=1) ',
         'v = v.repeat(1, group, 1) '),
    ], WA, 'h % H_kv'),
    'masks_the_tail_but_keeps_it_in_v': Plant([
        ('k = k_cache[blocks].reshape(-1, H_kv, D)[:n]',
         'k = k_cache[blocks].reshape(-1, H_kv, D)'),
        ('v = v_cache[blocks].reshape(-1, H_kv, D)[:n]',
         'v = v_cache[blocks].reshape(-1, H_kv, D)'),
        ('torch.arange(n)[None, :]',
         'torch.arange(k.shape[0])[None, :]'),
    ], WA, '0 x NaN = NaN'),
    'mask_diagonal_strict': Plant([
        ('<= pos[:, None]',
         '< pos[:, None]'),
    ], WA, 'one key too few'),
    'one_token_too_many': Plant([
        ('n, q_len = int(seq_lens[b]), cu[b + 1] - cu[b]',
         'n, q_len = int(seq_lens[b]) + 1, cu[b + 1] - cu[b]'),
    ], WA, 'one token too many'),
    'scale_ignored': Plant([
        ('k) * scale',
         'k) * D**-0.5'),
    ], WA, 'use the `scale` argument'),
    'exp_without_the_max': Plant([
        ('scores.softmax(-1)',
         '(scores.exp() / scores.exp().sum(-1, keepdim=True))'),
    ], WA, 'subtract the row'),
}
