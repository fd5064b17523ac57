# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 131: each a copy of solutions/131_*.py with one classic mistake, the verdict it
must get and words the hint (or message) of its first failing case must contain (see plants/__init__.py)."""
from plants import RE, WA, Plant  # noqa: F401

ATTENTION_IN_PYTORCH = (  # out[b] for b >= first computed in PyTorch after the launch
    '    for b in range({first}, B):\n'
    '        n = int(context_lens[b])\n'
    '        blocks = block_tables[b, : -(-n // S)].long()\n'
    '        k = k_cache[blocks].reshape(-1, H_kv, D)[:n].double().repeat_interleave(group, 1)\n'
    '        v = v_cache[blocks].reshape(-1, H_kv, D)[:n].double().repeat_interleave(group, 1)\n'
    '        p = (torch.einsum("hd,nhd->hn", q[b].double(), k) * scale).softmax(-1)\n'
    '        out[b] = torch.einsum("hn,nhd->hd", p, v).to(out.dtype)\n'
)

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
    ], WA, 'cannot tell two causes apart'),     # its first failing case: NaN in every row, as a loop not run
    'no_rescale': Plant([
        ('acc = acc * alpha[:, None] +',
         'acc = acc +'),
    ], WA, 'acc was not rescaled'),
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
    'plain_pytorch': Plant([
        ('    group = H // H_kv\n',
         '    group = H // H_kv\n'
         '    for b in range(B):\n'
         '        n = int(context_lens[b])\n'
         '        blocks = block_tables[b, : -(-n // S)].long()\n'
         '        k = k_cache[blocks].flatten(0, 1)[:n].float().repeat_interleave(group, 1)\n'
         '        v = v_cache[blocks].flatten(0, 1)[:n].float().repeat_interleave(group, 1)\n'
         '        p = (torch.einsum("hd,nhd->hn", q[b].float(), k) * scale).softmax(-1)\n'
         '        out[b] = torch.einsum("hn,nhd->hd", p, v).to(out.dtype)\n'
         '    return out\n'),
    ], WA, 'no Triton kernel was launched'),
    'loop_bound_one_short': Plant([
        ('for start in range(0, context_len, BLOCK_N):',
         'for start in range(0, context_len - 1, BLOCK_N):'),
    ], WA, 'key loop never ran'),
    'tail_scores_not_masked': Plant([
        ('        s = tl.where(in_ctx[None, :], s, float("-inf"))\n',
         ''),
    ], WA, 'were scored 0, not -inf'),
    'scale_applied_twice': Plant([
        ('q = tl.load(q_ptr + q_offs, mask=q_mask, other=0.0).to(tl.float32)',
         'q = tl.load(q_ptr + q_offs, mask=q_mask, other=0.0).to(tl.float32) * scale'),
    ], WA, 'applied twice'),
    'accumulates_in_the_input_dtype': Plant([
        ('acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)',
         'acc = tl.zeros([BLOCK_G, BLOCK_D], out_ptr.dtype.element_ty)'),
        ('acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)',
         'acc = (acc * alpha[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)).to(out_ptr.dtype.element_ty)'),
    ], WA, 'keep m, l and acc in fp32'),
    'p_rounded_to_the_input_dtype': Plant([
        ('tl.sum(p[:, :, None] * v[None, :, :], axis=1)',
         'tl.sum(p.to(q_ptr.dtype.element_ty).to(tl.float32)[:, :, None] * v[None, :, :], axis=1)'),
    ], WA, 'fp32 operands'),
    'tl_dot_with_a_group_tile_under_16': Plant([     # BLOCK_G, BLOCK_D: next powers of two, as the kernel's were
        ('tl.sum(q[:, None, :] * k[None, :, :], axis=2) * scale',
         'tl.dot(q, tl.trans(k), input_precision="ieee") * scale'),
        ('tl.sum(p[:, :, None] * v[None, :, :], axis=1)',
         'tl.dot(p, v, input_precision="ieee")'),
    ], RE, 'every dimension (M, N and K) of every tl.dot is at least 16'),
    'key_loop_whole_tiles_only': Plant([
        ('for start in range(0, context_len, BLOCK_N):',
         'for start in range(0, context_len // BLOCK_N * BLOCK_N, BLOCK_N):'),
    ], WA, 'cannot tell two causes apart'),
    'scale_never_applied': Plant([
        ('s = tl.sum(q[:, None, :] * k[None, :, :], axis=2) * scale ',
         's = tl.sum(q[:, None, :] * k[None, :, :], axis=2) '),
    ], WA, 'the scale was never applied'),
    'kv_head_ignored': Plant([
        ('kv_offs = (slot * NUM_KV_HEADS + kv_head)[:, None] * HEAD_DIM',
         'kv_offs = (slot * NUM_KV_HEADS)[:, None] * HEAD_DIM'),
    ], WA, 'every query head read KV head 0'),
    'bf16_dot_without_a_cast': Plant([     # tl.dot on tiles padded to 16, p rounded to V's dtype, V not cast
        ('tl.sum(p[:, :, None] * v[None, :, :], axis=1)',
         'tl.dot(p.to(v.dtype), v)'),
        ('v = tl.load(v_cache_ptr + kv_offs, mask=kv_mask, other=0.0).to(tl.float32)',
         'v = tl.load(v_cache_ptr + kv_offs, mask=kv_mask, other=0.0)'),
        ('BLOCK_G=triton.next_power_of_2(group),',
         'BLOCK_G=max(16, triton.next_power_of_2(group)),'),
        ('BLOCK_D=triton.next_power_of_2(D),',
         'BLOCK_D=max(16, triton.next_power_of_2(D)),'),
    ], WA, 'fp32 operands'),
    'computes_in_pytorch_after_an_empty_kernel': Plant([
        ('    tl.store(out_ptr + q_offs, out.to(out_ptr.dtype.element_ty), mask=q_mask)        # write G*D\n',
         ''),
        ('        BLOCK_N=32, BLOCK_D=triton.next_power_of_2(D),\n    )\n',
         '        BLOCK_N=32, BLOCK_D=triton.next_power_of_2(D),\n    )\n' + ATTENTION_IN_PYTORCH.format(first=0)),
    ], WA, 'written outside the kernel'),
    'last_sequence_in_pytorch': Plant([
        ('    paged_attention_decode_kernel[(B, H_kv)](',
         '    paged_attention_decode_kernel[(B - 1, H_kv)]('),
        ('        BLOCK_N=32, BLOCK_D=triton.next_power_of_2(D),\n    )\n',
         '        BLOCK_N=32, BLOCK_D=triton.next_power_of_2(D),\n    )\n' + ATTENTION_IN_PYTORCH.format(first='B - 1')),
    ], WA, 'written outside the kernel'),
}
