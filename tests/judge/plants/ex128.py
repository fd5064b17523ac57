# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 128: each a copy of solutions/128_*.py with one classic mistake, the verdict it
must get and words the hint (or message) of its first failing case must contain (see plants/__init__.py)."""
from plants import RE, WA, Plant  # noqa: F401

PLANTS = {
    'prefill_says_decode': Plant([
        ('    return ModelInputs(True, ',
         '    return ModelInputs(False, '),
    ], WA, 'True from prepare_prefill'),
    'decode_slot_one_too_far': Plant([
        ('+ s.last_block_num_tokens - 1 for s in seqs]',
         '+ s.last_block_num_tokens for s in seqs]'),
    ], WA, 'one slot too far'),
    'positions_from_zero': Plant([
        ('positions += range(start, end)',
         'positions += range(0, end - start)'),
    ], WA, 'positions run from num_cached_tokens'),
    'slots_from_position_zero': Plant([
        ('for p in range(start, end)]',
         'for p in range(0, end - start)]'),
    ], WA, 'starting at num_cached_tokens'),
    'block_tables_always': Plant([
        ('    if cu_k[-1] > cu_q[-1]:\n',
         '    if True:\n'),
    ], WA, 'pass block_tables only when'),
    'block_tables_never': Plant([
        ('    if cu_k[-1] > cu_q[-1]:\n',
         '    if False:\n'),
    ], WA, 'pass the block tables'),
    'slot_mapping_int64': Plant([
        ('torch.tensor(slot_mapping, dtype=torch.int32',
         'torch.tensor(slot_mapping, dtype=torch.int64'),
    ], WA, 'is int32; input_ids and positions are int64'),
    'cu_seqlens_q_of_contexts': Plant([
        ('cu_q.append(cu_q[-1] + end - start)',
         'cu_q.append(cu_q[-1] + end)'),
    ], WA, "running sums of this step's query lengths"),
    'cu_seqlens_k_of_queries': Plant([
        ('cu_k.append(cu_k[-1] + end)',
         'cu_k.append(cu_k[-1] + end - start)'),
    ], WA, 'running sums of the whole context lengths'),
    'max_seqlen_q_as_a_tensor': Plant([
        ('    max_q = max(b - a for a, b in zip(cu_q, cu_q[1:]))',
         '    max_q = torch.tensor(max(b - a for a, b in zip(cu_q, cu_q[1:])))'),
    ], WA, 'the longest query chunk'),
    'max_seqlen_k_of_queries': Plant([
        ('    max_k = max(b - a for a, b in zip(cu_k, cu_k[1:]))',
         '    max_k = max(b - a for a, b in zip(cu_q, cu_q[1:]))'),
    ], WA, 'the longest context'),
    'prefill_passes_context_lens': Plant([
        ('torch.tensor(cu_k, dtype=torch.int32, device=device), max_q, max_k, None, block_tables)',
         'torch.tensor(cu_k, dtype=torch.int32, device=device), max_q, max_k, torch.tensor([s.num_tokens for s in seqs], dtype=torch.int32), block_tables)'),
    ], WA, 'prefill passes context_lens = None'),
    'tables_padded_with_zero': Plant([
        ('[-1] * (width - len(s.block_table))',
         '[0] * (width - len(s.block_table))'),
    ], WA, 'padded with -1'),
    'chunk_ignored': Plant([
        ('end = seq.num_tokens if seq.num_scheduled_tokens is None else start + seq.num_scheduled_tokens',
         'end = seq.num_tokens'),
    ], WA, 'token_ids[start:end]'),
    'input_ids_include_cached': Plant([
        ('input_ids += seq.token_ids[start:end]',
         'input_ids += seq.token_ids[:end]'),
    ], WA, 'token_ids[start:end]'),
    'clears_the_chunk_size': Plant([
        ('        cu_k.append(cu_k[-1] + end)\n',
         '        cu_k.append(cu_k[-1] + end)\n        seq.num_scheduled_tokens = None\n'),
    ], WA, 'only reads the sequences'),
    'decode_first_token': Plant([
        ('torch.tensor([s.last_token for s in seqs]',
         'torch.tensor([s.token_ids[0] for s in seqs]'),
    ], WA, 'decode: the last token'),
    'decode_position_is_len': Plant([
        ('torch.tensor([len(s) - 1 for s in seqs]',
         'torch.tensor([len(s) for s in seqs]'),
    ], WA, 'decode: position len(seq) - 1'),
    'decode_passes_cu_seqlens': Plant([
        ('torch.tensor(slots, dtype=torch.int32, device=device), None, None, 1,',
         'torch.tensor(slots, dtype=torch.int32, device=device), torch.arange(len(seqs) + 1, dtype=torch.int32), None, 1,'),
    ], WA, 'cu_seqlens_q and cu_seqlens_k are None'),
    'decode_context_lens_without_the_new_token': Plant([
        ('torch.tensor([len(s) for s in seqs], dtype=torch.int32,',
         'torch.tensor([len(s) - 1 for s in seqs], dtype=torch.int32,'),
    ], WA, 'the new token included'),
}
