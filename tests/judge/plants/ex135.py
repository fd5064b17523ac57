# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 135, the Triton primer's puzzles (plants/__init__.py says what a Plant is)."""
from plants import RE, WA, Plant

ROW_LOAD = 'x = tl.load(x_ptr + r * x_stride + start + offs, mask=inside, other=float("-inf")).to(tl.float32)\n'
PASS_1 = f'        inside = start + offs < n\n        {ROW_LOAD}        m_new'

PLANTS = {
    'gather_unmasked_tail': Plant([
        ('    mask = offs < W ',
         '    mask = offs < BLOCK '),
    ], WA, 'lanes W..BLOCK-1 of the last program'),
    'scale_row_mask_one_too_wide': Plant([
        ('mask = (rows[:, None] < M) & (cols[None, :] < N)',
         'mask = (rows[:, None] <= M) & (cols[None, :] < N)'),
    ], WA, 'lets row M through'),
    'gather_stores_at_the_index': Plant([
        ('tl.store(out_ptr + t.to(tl.int64) * W + offs, row, mask=mask)',
         'tl.store(out_ptr + i.to(tl.int64) * W + offs, row, mask=mask)'),
    ], WA, 'the store addressed out by index[t]'),
    'gather_follows_minus_one': Plant([
        ('    safe = tl.maximum(i, 0).to(tl.int64)',
         '    safe = i.to(tl.int64)'),
        ('    row = tl.where(i >= 0, row, 0.0)                                  # index -1: zeros\n',
         ''),
    ], WA, 'index -1 was followed'),
    'gather_minus_one_row_left_unwritten': Plant([
        ('    i = tl.load(index_ptr + t)                                        # read 1 index\n',
         '    i = tl.load(index_ptr + t)\n    if i < 0:\n        return\n'),
    ], WA, 'must be written with zeros'),
    'gather_assumes_contiguous_rows': Plant([
        ('safe * src_stride + offs',
         'safe * W + offs'),
    ], WA, 'src.stride(0) ='),
    'scale_assumes_contiguous_x': Plant([
        ('x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn',
         'x_ptr + rows[:, None] * N + cols[None, :]'),
    ], WA, 'address x[i, j] at'),
    'scale_grid_rounds_down': Plant([
        ('grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))',
         'grid = (M // BLOCK_M, N // BLOCK_N)'),
    ], WA, 'the grid needs triton.cdiv(M, BLOCK_M)'),
    'softmax_max_without_other': Plant([
        (PASS_1,
         PASS_1.replace(', other=float("-inf"))', ')')),
    ], WA, 'masked lanes entered the max or the sum'),
    'softmax_mask_with_the_columns': Plant([
        (PASS_1,
         PASS_1.replace('offs < n', 'offs < C')),
    ], WA, 'read past its length'),
    'softmax_without_the_max': Plant([
        ('total = total * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)',
         'total = total + tl.sum(tl.exp(x), axis=0)'),
        ('tl.exp(x - m) / total',
         'tl.exp(x) / total'),
    ], WA, "subtract the row's max first"),
    'softmax_one_step_only': Plant([
        ('    for start in range(0, n, BLOCK):\n        inside',
         '    for start in range(0, BLOCK, BLOCK):\n        inside'),
    ], WA, 'missed part of the row'),
    'softmax_no_zeros_after_the_length': Plant([
        ('    for start in range(n, C, BLOCK):                                  # the rest of the row: zeros\n'
         '        tl.store(out_ptr + r * C + start + offs, tl.zeros([BLOCK], tl.float32), mask=start + offs < C)\n',
         ''),
    ], WA, 'write zeros after the row'),
    'softmax_row_stride_assumed': Plant([
        ('row_softmax_kernel[(R,)](x, x.stride(0), lengths',
         'row_softmax_kernel[(R,)](x, C, lengths'),
    ], WA, "x's rows are x.stride(0)"),
    'scores_tile_under_16_rows': Plant([
        ('    BLOCK_M = max(16, triton.next_power_of_2(M))',
         '    BLOCK_M = triton.next_power_of_2(M)'),
    ], RE, 'at least 16'),
    'scores_assumes_contiguous_k': Plant([
        ('k, k.stride(0), k.stride(1), out',
         'k, D, 1, out'),
    ], WA, 'address k[j, d] at'),
    'scale_in_pytorch': Plant([
        ('    BLOCK_M, BLOCK_N = 16, 16\n',
         '    out.copy_(x.float() * w.float())\n    return\n'),
    ], WA, 'no Triton kernel was launched'),
    'scores_without_tl_dot': Plant([
        ('    s = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)))          # [BLOCK_M, BLOCK_N]\n',
         '    s = tl.sum(q.to(tl.float32)[:, None, :] * k.to(tl.float32)[None, :, :], axis=2)\n'),
    ], WA, 'ran no tl.dot', counts_dots=True),
    'scores_q_loaded_past_d': Plant([
        ('    q_mask = (offs_m[:, None] < M) & (offs_d[None, :] < D)\n',
         '    q_mask = offs_m[:, None] < M\n'),
    ], WA, 'was read from memory'),
    'gather_in_pytorch_after_an_empty_kernel': Plant([
        ('    tl.store(out_ptr + t.to(tl.int64) * W + offs, row, mask=mask)     # write W\n',
         ''),
        ('    gather_rows_kernel[(T,)](src, src.stride(0), index, out, W, BLOCK=triton.next_power_of_2(W))\n',
         '    gather_rows_kernel[(T,)](src, src.stride(0), index, out, W, BLOCK=triton.next_power_of_2(W))\n'
         '    out.copy_(src[index.long()])\n'
         '    out[index < 0] = 0\n'),
    ], WA, 'written outside the kernel'),
    'softmax_zeros_from_pytorch': Plant([
        ('    for start in range(n, C, BLOCK):                                  # the rest of the row: zeros\n'
         '        tl.store(out_ptr + r * C + start + offs, tl.zeros([BLOCK], tl.float32), mask=start + offs < C)\n',
         ''),
        ('    row_softmax_kernel[(R,)](x, x.stride(0), lengths, out, C, BLOCK=32)\n',
         '    out.zero_()\n'
         '    row_softmax_kernel[(R,)](x, x.stride(0), lengths, out, C, BLOCK=32)\n'),
    ], WA, 'written outside the kernel'),
}
