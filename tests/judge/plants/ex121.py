# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 121: each a copy of solutions/121_*.py with one classic mistake, the verdict it
must get and words the hint (or message) of its first failing case must contain (see plants/__init__.py)."""
from plants import RE, WA, Plant  # noqa: F401

PLANTS = {
    'forgets_k_and_v': Plant([
        ('return 2 * num_layers',
         'return num_layers'),
    ], WA, 'the factor 2'),
    'forgets_dtype_bytes': Plant([
        ('    return 2 * num_layers * num_kv_heads * head_dim * dtype_bytes',
         '    return 2 * num_layers * num_kv_heads * head_dim'),
    ], WA, 'multiply by it'),
    'one_layer_only': Plant([
        ('    return 2 * num_layers * num_kv_heads * head_dim * dtype_bytes',
         '    return 2 * num_kv_heads * head_dim * dtype_bytes'),
    ], WA, 'multiply by num_layers'),
    'adds_layers_and_heads': Plant([
        ('    return 2 * num_layers * num_kv_heads * head_dim * dtype_bytes',
         '    return 2 * (num_layers + num_kv_heads) * head_dim * dtype_bytes'),
    ], WA, '2 (K and V) x num_layers'),
    'kv_bytes_as_a_float': Plant([
        ('    return 2 * num_layers * num_kv_heads * head_dim * dtype_bytes',
         '    return 2.0 * num_layers * num_kv_heads * head_dim * dtype_bytes'),
    ], WA, 'return an int'),
    'context_not_rounded_to_blocks': Plant([
        ('(num_blocks * block_size * bytes_per_token)',
         '(context_len * bytes_per_token)'),
    ], WA, 'pays for whole blocks'),
    'forgets_block_size': Plant([
        ('(num_blocks * block_size * bytes_per_token)',
         '(num_blocks * bytes_per_token)'),
    ], WA, 'budget_bytes // (ceil(context_len / block_size)'),
    'one_block_too_many': Plant([
        ('num_blocks = -(-context_len // block_size)',
         'num_blocks = context_len // block_size + 1'),
    ], WA, 'one block too many'),
    'float_division_reserved': Plant([
        ('return budget_bytes // (max_len * bytes_per_token)',
         'return int(budget_bytes / (max_len * bytes_per_token))'),
    ], WA, 'float division rounds'),
    'float_division_paged': Plant([
        ('return budget_bytes // (num_blocks * block_size * bytes_per_token)',
         'return int(budget_bytes / (num_blocks * block_size * bytes_per_token))'),
    ], WA, 'float division rounds'),
    'returns_a_float': Plant([
        ('return budget_bytes // (max_len * bytes_per_token)',
         'return budget_bytes / (max_len * bytes_per_token) // 1'),
    ], WA, 'return an int'),
    'ceiling_of_requests': Plant([
        ('return budget_bytes // (max_len * bytes_per_token)',
         'return -(-budget_bytes // (max_len * bytes_per_token))'),
    ], WA, 'floor, not a ceiling'),
    'paged_ceiling_of_requests': Plant([
        ('return budget_bytes // (num_blocks * block_size * bytes_per_token)',
         'return -(-budget_bytes // (num_blocks * block_size * bytes_per_token))'),
    ], WA, 'floor, not a ceiling'),
    'reserved_ignores_max_len': Plant([
        ('return budget_bytes // (max_len * bytes_per_token)',
         'return budget_bytes // (4096 * bytes_per_token)'),
    ], WA, 'each request reserves max_len slots'),
}
