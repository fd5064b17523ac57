# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 134: each a copy of solutions/134_*.py with one classic mistake, the verdict it
must get and words the hint (or message) of its first failing case must contain (see plants/__init__.py)."""
from plants import RE, WA, Plant  # noqa: F401

PLANTS = {
    'multiplies_by_the_scale_when_storing': Plant([
        ('q = (x[keep].float() / scale)',
         'q = (x[keep].float() * scale)'),
    ], WA, 'divide by the scale when storing'),
    'divides_in_the_key_dtype': Plant([
        ('q = (x[keep].float() / scale)',
         'q = (x[keep] / scale)'),
    ], WA, 'divide in float32'),
    'saturates_at_240': Plant([
        ('.clamp(-FP8_MAX, FP8_MAX)            # [T\'',
         '.clamp(-240.0, 240.0)            # [T\''),
    ], WA, "e4m3fn's maximum"),
    'saturates_before_dividing': Plant([
        ('q = (x[keep].float() / scale).clamp(-FP8_MAX, FP8_MAX)',
         'q = x[keep].float().clamp(-FP8_MAX, FP8_MAX) / scale'),
    ], WA, 'saturate after dividing'),
    'minus_one_not_skipped': Plant([
        ('keep = slot_mapping >= 0 ',
         'keep = slot_mapping >= -1 '),
    ], WA, 'a slot of -1 must be skipped'),
    'no_scale_check': Plant([
        ('    for name, scale in (("k_scale", k_scale), ("v_scale", v_scale)):\n        if not 0 < scale < float("inf"):\n            raise ValueError(f"{name}: expected a finite scale > 0, got {scale}")\n',
         ''),
    ], WA, 'raise ValueError'),
    'dequant_divides': Plant([
        ('(rows.float() * scale)',
         '(rows.float() / scale)'),
    ], WA, 'multiply by the scale when reading'),
    'dequant_scale_twice': Plant([
        ('(rows.float() * scale)',
         '(rows.float() * scale * scale)'),
    ], WA, 'apply the scale once'),
    'reads_past_the_context': Plant([
        ('.reshape(-1, *cache.shape[2:])[:context_len]',
         '.reshape(-1, *cache.shape[2:])'),
    ], WA, 'cut the last block'),
    'ignores_dtype': Plant([
        ('return (rows.float() * scale).to(dtype)',
         'return rows.float() * scale'),
    ], WA, 'requested dtype'),
    'block_table_ignored': Plant([
        ('blocks = block_table[: -(-context_len // S)].long()',
         'blocks = torch.arange(-(-context_len // S))'),
    ], WA, 'the table gives the order'),
    'multiplies_by_the_reciprocal': Plant([
        ('q = (x[keep].float() / scale)',
         'q = (x[keep].float() * (1 / scale))'),
    ], WA, 'x * (1 / scale) is not x / scale'),
    'scale_check_lets_nan_through': Plant([
        ('        if not 0 < scale < float("inf"):\n            raise ValueError(f"{name}',
         '        if scale <= 0 or scale == float("inf"):\n            raise ValueError(f"{name}'),
    ], WA, 'NaN <= 0 is False'),
    'scale_check_lets_inf_through': Plant([
        ('        if not 0 < scale < float("inf"):\n            raise ValueError(f"{name}',
         '        if not scale > 0:\n            raise ValueError(f"{name}'),
    ], WA, 'an infinite scale must raise'),
    'dequant_checks_only_zero': Plant([
        ('    if not 0 < scale < float("inf"):\n        raise ValueError(f"scale:',
         '    if scale == 0:\n        raise ValueError(f"scale:'),
    ], WA, 'check it and raise ValueError first'),
    'checks_each_scale_as_it_writes': Plant([
        ('    for name, scale in (("k_scale", k_scale), ("v_scale", v_scale)):\n        if not 0 < scale < float("inf"):\n            raise ValueError(f"{name}: expected a finite scale > 0, got {scale}")\n',
         ''),
        ('        q = (x[keep].float() / scale)',
         '        if not 0 < scale < float("inf"):\n            raise ValueError(f"expected a finite scale > 0, got {scale}")\n        q = (x[keep].float() / scale)'),
    ], WA, 'nothing may be written'),
    'divides_the_key_in_place': Plant([
        ('q = (x[keep].float() / scale)',
         'q = x.float().div_(scale)[keep]'),
    ], WA, 'only the caches may be written'),
}
