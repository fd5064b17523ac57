# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 133: each a copy of solutions/133_*.py with one classic mistake, the verdict it
must get and words the hint (or message) of its first failing case must contain (see plants/__init__.py)."""
from plants import RE, WA, Plant  # noqa: F401

PLANTS = {
    'top_left_causal': Plant([
        ('pos = seq_len - q_len + offs_q ',
         'pos = offs_q '),
    ], WA, 'LAST q_len'),
    'rows_of_the_next_sequence': Plant([
        ('             mask=q_mask[:, None] & d_mask[None, :])                 # write BLOCK_Q*D',
         '             mask=d_mask[None, :])'),
    ], WA, 'next sequence'),
    'last_block_tail_read': Plant([
        ('    in_ctx = tok < end\n',
         '    in_ctx = tok // BLOCK_SIZE <= (end - 1) // BLOCK_SIZE\n'),
    ], WA, 'NaN'),
    'follows_the_padding': Plant([
        ('mask=in_ctx, other=0)',
         ')'),
        ('kv_mask = in_ctx[:, None] & d_mask[None, :]',
         'kv_mask = (tok >= 0)[:, None] & d_mask[None, :]'),
    ], WA, 'NaN'),
    'gqa_h_mod_h_kv': Plant([
        ('kv_head = head // (NUM_HEADS // NUM_KV_HEADS)',
         'kv_head = head % NUM_KV_HEADS'),
    ], WA, 'h % H_kv'),
    'no_rescale': Plant([
        ('acc = acc * alpha[:, None] +',
         'acc = acc +'),
    ], WA, 'online softmax'),
}
