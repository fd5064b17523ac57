# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 138: each a copy of solutions/138_*.py with one classic mistake, the verdict it
must get and words the hint (or message) of its first failing case must contain (see plants/__init__.py)."""
from plants import RE, WA, Plant  # noqa: F401

# A query RoPE part left unrotated and a cached key rotated again by the query's angles give the same scores
# (both sides turned alike): the hint names both, and so both plants expect the same words.
BOTH_ROPE_CAUSES = "cannot tell apart: (1) the query's RoPE part not rotated"
# In the first case that catches them Dn = C: the hint names both scales.
SCALE_DN_OR_C = "scaled by 1 / sqrt(Dn) or 1 / sqrt(C) (all one number here"

PLANTS = {
    'rope_applied_to_the_latent': Plant([
        ('    out = q.new_empty(B, H, w_uv.shape[1]) ',
         '    R = W - C\n    q_c = torch.cat((apply_rope_interleaved(q_c[..., :R], cos[:, None], sin[:, None]), q_c[..., R:]), -1)\n    out = q.new_empty(B, H, w_uv.shape[1]) '),
    ], WA, 'RoPE applied to the latent query as well'),
    'query_rope_forgotten': Plant([
        ('q_pe = apply_rope_interleaved(q[..., Dn:], cos[:, None], sin[:, None])',
         'q_pe = q[..., Dn:]'),
    ], WA, BOTH_ROPE_CAUSES),
    'rope_key_rotated_again': Plant([
        ('k_pe = rows[:, None, C:].expand(-1, H, W - C)',
         'k_pe = apply_rope_interleaved(rows[:, None, C:], cos[b], sin[b]).expand(-1, H, W - C)'),
    ], WA, BOTH_ROPE_CAUSES),
    'rope_in_halves': Plant([
        ('q_pe = apply_rope_interleaved(q[..., Dn:], cos[:, None], sin[:, None])',
         'first, second = q[..., Dn:].chunk(2, dim=-1)\n    q_pe = torch.cat((first * cos[:, None] - second * sin[:, None], second * cos[:, None] + first * sin[:, None]), -1)'),
    ], WA, 'rotated in halves'),
    'rope_key_not_shared_across_heads': Plant([
        ('k_pe = rows[:, None, C:].expand(-1, H, W - C)',
         'k_pe = rows[:, C:].repeat(H, 1).reshape(n, H, W - C)'),
    ], WA, 'not shared across heads'),
    'w_uk_transposed': Plant([
        ('torch.einsum("bhd,hdc->bhc", q[..., :Dn], w_uk)',
         'torch.einsum("bhd,hcd->bhc", q[..., :Dn], w_uk)'),
    ], WA, 'absorbed transposed'),
    'scale_of_the_latent_dimension': Plant([
        ('scale = (Dn + W - C) ** -0.5',
         'scale = W ** -0.5'),
    ], WA, 'scaled by 1 / sqrt(C + R), not by'),
    'scale_of_the_latent_alone': Plant([
        ('scale = (Dn + W - C) ** -0.5',
         'scale = C ** -0.5'),
    ], WA, SCALE_DN_OR_C),
    'scale_of_the_nope_dim_alone': Plant([
        ('scale = (Dn + W - C) ** -0.5',
         'scale = Dn ** -0.5'),
    ], WA, SCALE_DN_OR_C),
    'scale_forgotten': Plant([
        ('scale = (Dn + W - C) ** -0.5',
         'scale = 1.0'),
    ], WA, 'scaled by 1 (no scale at all)'),
    'softmax_over_the_heads': Plant([
        ('(scores * scale).softmax(dim=-1)',
         '(scores * scale).softmax(dim=0)'),
    ], WA, 'no usual mistake matches'),
    'last_partial_page_dropped': Plant([
        ('blocks = block_tables[b, : -(-n // S)].long()',
         'blocks = block_tables[b, : n // S].long()'),
    ], WA, 'the last partial page dropped'),
    'tail_of_last_block_not_cut': Plant([
        ('rows = kv_cache[blocks].reshape(-1, W)[:n]',
         'rows = kv_cache[blocks].reshape(-1, W)'),
    ], WA, "the last block's unused tail read"),
    'masks_the_scores_but_not_the_rows': Plant([
        ('rows = kv_cache[blocks].reshape(-1, W)[:n]',
         'rows = kv_cache[blocks].reshape(-1, W)'),
        ('k_pe)   # [H, n]',
         'k_pe)\n        scores[:, n:] = float("-inf")'),
    ], WA, '0 x NaN'),
    'reads_the_padding_block': Plant([
        ('blocks = block_tables[b, : -(-n // S)].long()',
         'blocks = block_tables[b].long()'),
        ('rows = kv_cache[blocks].reshape(-1, W)[:n]',
         'rows = kv_cache[blocks].reshape(-1, W)[: len(blocks) * S]'),
    ], WA, 'through the -1 padding'),
    'absorbed_weights_kept_between_calls': Plant([
        ('    B, H, _ = q.shape',
         '    global _KEPT\n    if "_KEPT" not in globals():\n        _KEPT = (w_uk, w_uv)\n    w_uk, w_uv = _KEPT\n    B, H, _ = q.shape'),
    ], WA, "layer 0's w_uk and w_uv give"),
    'latent_rows_kept_between_calls': Plant([
        ('    B, H, _ = q.shape',
         '    global _ROWS\n    if "_ROWS" not in globals():\n        _ROWS = kv_cache\n    kv_cache = _ROWS\n    B, H, _ = q.shape'),
    ], WA, "layer 0's kv_cache gives"),
    'cleans_the_cache_in_place': Plant([
        ('    B, H, _ = q.shape',
         '    kv_cache.nan_to_num_(0.0)\n    B, H, _ = q.shape'),
    ], WA, 'every argument is read-only'),
    'returns_float64': Plant([
        ('out = q.new_empty(B, H, w_uv.shape[1])',
         'out = torch.empty(B, H, w_uv.shape[1], dtype=torch.float64)'),
    ], WA, "the query's shape and dtype"),
    'values_up_projected': Plant([
        ('        out[b] = torch.einsum("hc,hvc->hv", latent_out, w_uv)',
         '        v = torch.einsum("nc,hvc->hnv", rows[:, :C], w_uv)\n'
         '        out[b] = torch.einsum("hn,hnv->hv", (scores * scale).softmax(dim=-1), v)'),
    ], WA, 'never up-project the cache'),
    'library_rope_borrowed': Plant([
        ('q_pe = apply_rope_interleaved(q[..., Dn:], cos[:, None], sin[:, None])',
         'from pagedkv_lib.core.mla_attention import split_query\n    q_pe = split_query(q, w_uk, cos, sin)[1]'),
    ], RE, "the library's implementation"),
}
