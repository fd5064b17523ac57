# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 131: each a copy of solutions/131_*.py with one classic mistake, the verdict it
must get and words the hint (or message) of its first failing case must contain (see plants/__init__.py)."""
from plants import RE, WA, Plant  # noqa: F401

PLANTS = {
    'gqa_h_mod_h_kv': Plant([
        ('heads = kv_head * GROUP + offs_g',
         'heads = offs_g * NUM_KV_HEADS + kv_head'),
    ], WA, 'h % H_kv'),
    'tail_off_by_one': Plant([
        ('in_ctx = tok < context_len',
         'in_ctx = tok <= context_len'),
    ], WA, 'one token too many'),
    'follows_the_padding': Plant([
        ('mask=in_ctx, other=0)',
         ')'),
        ('kv_mask = in_ctx[:, None] & d_mask[None, :]',
         'kv_mask = (tok >= 0)[:, None] & d_mask[None, :]'),
    ], WA, 'mask the K/V loads'),
    'no_rescale': Plant([
        ('acc = acc * alpha[:, None] +',
         'acc = acc +'),
    ], WA, "scale l and acc by exp(m - m')"),
    'running_max_from_zero': Plant([
        ('m = tl.full([BLOCK_G], float("-inf"), tl.float32)',
         'm = tl.zeros([BLOCK_G], tl.float32)'),
    ], WA, 'starts at -inf, not 0'),
    'table_rows_m_apart': Plant([
        ('block_tables.stride(0), scale,',
         'block_tables.shape[1], scale,'),
    ], WA, 'not M ='),
    'scale_ignored': Plant([
        ('block_tables.stride(0), scale,',
         'block_tables.stride(0), D**-0.5,'),
    ], WA, 'use the `scale` argument'),
    'store_not_masked_by_head': Plant([
        ('out.to(out_ptr.dtype.element_ty), mask=q_mask)',
         'out.to(out_ptr.dtype.element_ty), mask=d_mask[None, :])'),
    ], WA, 'mask the store'),
    'store_not_masked_by_dim': Plant([
        ('out.to(out_ptr.dtype.element_ty), mask=q_mask)',
         'out.to(out_ptr.dtype.element_ty), mask=g_mask[:, None])'),
    ], WA, 'mask the store'),
    'returns_fp32': Plant([
        ('    out = torch.empty_like(q) ',
         '    out = torch.empty_like(q, dtype=torch.float32) '),
    ], WA, "the query's shape and dtype"),
}
