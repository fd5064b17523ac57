# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 133: each a copy of solutions/133_*.py with one classic mistake, the verdict it
must get and words the hint (or message) of its first failing case must contain (see plants/__init__.py)."""
from plants import RE, WA, Plant  # noqa: F401
from plants.ex131 import PLANTS as EX131

ATTENTION_IN_PYTORCH = (  # the rows of the sequences b >= first computed in PyTorch after the launch
    '    for b in range({first}, B):\n'
    '        q0, q1, n = int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1]), int(seq_lens[b])\n'
    '        blocks = block_tables[b, : -(-n // S)].long()\n'
    '        k = k_cache[blocks].reshape(-1, H_kv, D)[:n].double().repeat_interleave(H // H_kv, 1)\n'
    '        v = v_cache[blocks].reshape(-1, H_kv, D)[:n].double().repeat_interleave(H // H_kv, 1)\n'
    '        s = torch.einsum("thd,nhd->htn", q[q0:q1].double(), k) * scale\n'
    '        pos = n - (q1 - q0) + torch.arange(q1 - q0)\n'
    '        s = s.masked_fill(torch.arange(n)[None, :] > pos[:, None], float("-inf"))\n'
    '        out[q0:q1] = torch.einsum("htn,nhd->thd", s.softmax(-1), v).to(out.dtype)\n'
)
LAUNCHED = '        BLOCK_D=max(16, triton.next_power_of_2(D)),\n    )\n'

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
    ], WA, 'acc was not rescaled'),
    'plain_pytorch': Plant([
        ('    BLOCK_Q = 16\n',
         '    for b in range(B):\n'
         '        n, c0, c1 = int(seq_lens[b]), int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1])\n'
         '        blocks = block_tables[b, : -(-n // S)].long()\n'
         '        k = k_cache[blocks].flatten(0, 1)[:n].float().repeat_interleave(H // H_kv, 1)\n'
         '        v = v_cache[blocks].flatten(0, 1)[:n].float().repeat_interleave(H // H_kv, 1)\n'
         '        s = torch.einsum("thd,nhd->htn", q[c0:c1].float(), k) * scale\n'
         '        pos = torch.arange(n - (c1 - c0), n)\n'
         '        s = s.masked_fill(torch.arange(n)[None, None, :] > pos[None, :, None], float("-inf"))\n'
         '        out[c0:c1] = torch.einsum("htn,nhd->thd", s.softmax(-1), v).to(out.dtype)\n'
         '    return out\n'),
    ], WA, 'no Triton kernel was launched'),
    'table_rows_m_apart': EX131['table_rows_m_apart'],       # the launchers' arguments read the same
    'scale_ignored': EX131['scale_ignored'],
    'accumulates_in_the_input_dtype': Plant([
        ('acc = tl.zeros([BLOCK_Q, BLOCK_D], tl.float32)',
         'acc = tl.zeros([BLOCK_Q, BLOCK_D], out_ptr.dtype.element_ty)'),
        ('acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")',
         'acc = (acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")).to(out_ptr.dtype.element_ty)'),
    ], WA, 'keep m, l and acc in fp32'),
    'p_v_in_the_input_dtype': Plant([
        ('acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")',
         'acc = acc * alpha[:, None] + tl.dot(p.to(k_cache_ptr.dtype.element_ty), v.to(k_cache_ptr.dtype.element_ty))'),
    ], WA, 'fp32 operands'),
    'p_rounded_to_the_input_dtype': Plant([
        ('tl.dot(p, v, input_precision="ieee")',
         'tl.dot(p.to(q_ptr.dtype.element_ty).to(tl.float32), v, input_precision="ieee")'),
    ], WA, 'fp32 operands'),
    'head_dim_tile_under_16': Plant([
        ('BLOCK_D=max(16, triton.next_power_of_2(D)),',
         'BLOCK_D=triton.next_power_of_2(D),'),
    ], RE, 'every dimension (M, N and K) of every tl.dot is at least 16'),
    'computes_in_pytorch_after_an_empty_kernel': Plant([
        ('    tl.store(out_ptr + rows[:, None] + offs_d[None, :], out.to(out_ptr.dtype.element_ty),\n'
         '             mask=q_mask[:, None] & d_mask[None, :])                 # write BLOCK_Q*D\n',
         ''),
        (LAUNCHED, LAUNCHED + ATTENTION_IN_PYTORCH.format(first=0)),
    ], WA, 'written outside the kernel'),
    'last_sequence_in_pytorch': Plant([
        ('    grid = (B, H, triton.cdiv(max_q_len, BLOCK_Q))',
         '    grid = (B - 1, H, triton.cdiv(max_q_len, BLOCK_Q))'),
        (LAUNCHED, LAUNCHED + ATTENTION_IN_PYTORCH.format(first='B - 1')),
    ], WA, 'written outside the kernel'),
}
