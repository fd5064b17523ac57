# ruff: noqa: E501  (planted bugs quote whole lines of the solutions)
"""Planted bugs: each a copy of a reference solution with one classic mistake, the verdict it must get and
words the first failing case's hint (or message) must contain: the hint names the cause.

BUGS[id][name] = Plant(edits, verdict, hint[, interpreter_only]): edits are (text in the solution, its buggy replacement) pairs,
each text occurring exactly once in the solution, or (text, replacement, n) for a text that occurs n times,
all replaced (the test says so when a solution changes). Every clause of every contract has a plant that
breaks it alone, and every hint a case module gives has a plant that gets it; two plants with different
hint words name different causes, and neither's hint may hold the other's words.
tests/test_judge_plants.py runs them all.
"""
from typing import NamedTuple

WA, RE = "wrong answer", "runtime error"


class Plant(NamedTuple):
    edits: list
    verdict: str
    hint: str
    interpreter_only: bool = False    # valid Triton that only some interpreters reject: elsewhere it passes


BUGS = {
    121: {
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
    },
    122: {
        'offset_plus_one': Plant([
            ('+ p % block_size for p',
             '+ p % block_size + 1 for p'),
        ], WA, 'off by one'),
        'table_indexed_by_offset': Plant([
            ('return [block_table[p // block_size]',
             'return [block_table[p % block_size]'),
        ], WA, 'not p % block_size'),
        'block_and_offset_swapped': Plant([
            ('return [block_table[p // block_size] * block_size + p % block_size',
             'return [block_table[p % block_size] * block_size + p // block_size'),
        ], WA, '(swapped?)'),
        'ignores_the_table': Plant([
            ('return [block_table[p // block_size] * block_size + p % block_size',
             'return [p'),
        ], WA, 'look the physical block up'),
        'forgets_block_size': Plant([
            ('return [block_table[p // block_size] * block_size +',
             'return [block_table[p // block_size] +'),
        ], WA, 'multiply the physical block id'),
        'next_block_on_boundary': Plant([
            ('return [block_table[p // block_size]',
             'return [block_table[(p + 1) // block_size]'),
        ], WA, 'slot = block_table['),
        'returns_a_tensor': Plant([
            ('    return [block_table',
             '    import torch\n    return torch.tensor([block_table'),
            ('for p in positions]',
             'for p in positions])'),
        ], WA, 'plain Python list'),
        'sorts_positions_in_place': Plant([
            ('    return [block_table',
             '    positions.sort()\n    return [block_table'),
        ], WA, 'positions is read-only'),
        'pads_the_table_in_place': Plant([
            ('    return [block_table',
             '    block_table.append(-1)\n    return [block_table'),
        ], WA, 'block_table is read-only'),
        'assumes_sorted_positions': Plant([
            ('for p in positions]',
             'for p in sorted(positions)]'),
        ], WA, 'positions come in any order'),
        'drops_repeated_positions': Plant([
            ('for p in positions]',
             'for p in dict.fromkeys(positions)]'),
        ], WA, 'repeats included'),
        'last_block_from_the_table_end': Plant([
            ('return [block_table[p // block_size]',
             'return [block_table[p // block_size if p // block_size < max(p // block_size for p in positions) else -1]'),
        ], WA, 'may end with -1 padding'),
        'block_size_as_a_power_of_two': Plant([
            ('return [block_table[p // block_size] * block_size + p % block_size',
             'return [block_table[p >> (block_size.bit_length() - 1)] * block_size + (p & (block_size - 1))'),
        ], WA, 'not a power of two'),
        'no_positions_crashes': Plant([
            ('    return [block_table',
             '    last_block = max(positions) // block_size  # noqa: F841\n    return [block_table'),
        ], RE, 'empty'),
    },
    123: {
        'first_block_from_offset_0': Plant([
            ('lo = max(start, i * block_size) - i * block_size',
             'lo = 0'),
        ], WA, 'starts mid-block'),
        'last_block_always_full': Plant([
            ('hi = min(end, (i + 1) * block_size) - i * block_size',
             'hi = block_size'),
        ], WA, 'the last block is cut at end'),
        'drops_partial_last_block': Plant([
            ('range(start // block_size, -(-end // block_size))',
             'range(start // block_size, end // block_size)'),
        ], WA, 'the last block may be partial'),
        'end_inclusive': Plant([
            ('hi = min(end, (i + 1)',
             'hi = min(end + 1, (i + 1)'),
        ], WA, 'end is exclusive'),
        'last_block_cut_at_end_mod_block_size': Plant([
            ('hi = min(end, (i + 1) * block_size) - i * block_size',
             'hi = end % block_size if (i + 1) * block_size >= end else block_size'),
        ], WA, 'is a multiple of block_size'),
        'one_block_past_the_end': Plant([
            ('range(start // block_size, -(-end // block_size))',
             'range(start // block_size, end // block_size + 1)'),
        ], RE, 'index out of range'),
        'empty_range_gives_a_slot': Plant([
            ('    slots: list[int] = []\n',
             '    slots: list[int] = []\n    if start == end:\n        return [block_table[start // block_size] * block_size + start % block_size]\n'),
        ], WA, 'no positions, return []'),
        'offset_plus_one': Plant([
            ('slots.extend(range(base + lo, base + hi))',
             'slots.extend(range(base + lo + 1, base + hi + 1))'),
        ], WA, 'off by one'),
        'block_size_as_a_power_of_two': Plant([
            ('slots.extend(range(base + lo, base + hi))',
             'slots.extend(block_table[p >> (block_size.bit_length() - 1)] * block_size + (p & (block_size - 1)) for p in range(i * block_size + lo, i * block_size + hi))'),
        ], WA, 'not a power of two'),
        'pops_the_table': Plant([
            ('        base = block_table[i] * block_size',
             '        base = block_table[i] * block_size\n        if i == len(block_table) - 1 and block_table[i] == -1:\n            block_table.pop()'),
            ('    return slots\n',
             '    while block_table and block_table[-1] == -1:\n        block_table.pop()\n    return slots\n'),
        ], WA, 'block_table is read-only'),
    },
    124: {
        'minus_one_not_skipped': Plant([
            ('keep = slot_mapping >= 0',
             'keep = slot_mapping >= -1'),
        ], WA, 'writes the LAST row'),
        'minus_one_clamped_to_slot_0': Plant([
            ('    keep = slot_mapping >= 0                                          # [T]\n    slots = slot_mapping[keep].long()',
             '    keep = slot_mapping >= -1\n    slots = slot_mapping.clamp(min=0).long()'),
        ], WA, '(slot -1) was written to slot 0'),
        'k_and_v_swapped': Plant([
            ('[slots] = key[keep]',
             '[slots] = value_'),
            ('[slots] = value[keep]',
             '[slots] = key[keep]'),
            ('value_',
             'value[keep]'),
        ], WA, '(swapped?)'),
        'not_in_place': Plant([
            ('    k_cache.view(-1',
             '    k_cache = k_cache.clone()\n    k_cache.view(-1'),
        ], WA, 'in place'),
        'value_never_written': Plant([
            ('    v_cache.view(-1, H_kv, D)[slots] = value[keep]\n',
             ''),
        ], WA, 'value was not written into v_cache'),
        'assumes_contiguous_key': Plant([
            ('= key[keep]',
             '= key.view(-1).view(-1, H_kv, D)[keep]'),
        ], RE, 'not contiguous'),
        'slot_split_wrong': Plant([
            ('    k_cache.view(-1, H_kv, D)[slots] = key[keep]',
             '    k_cache[slots // H_kv, slots % H_kv] = key[keep]'),
        ], RE, 'out of bounds'),
        'block_and_offset_as_a_power_of_two': Plant([
            ('    k_cache.view(-1, H_kv, D)[slots] = key[keep]                     # rows of [N * S, H_kv, D]\n    v_cache.view(-1, H_kv, D)[slots] = value[keep]',
             '    S = k_cache.shape[1]\n    k = S.bit_length() - 1\n    k_cache[slots >> k, slots & (S - 1)] = key[keep]\n    v_cache[slots >> k, slots & (S - 1)] = value[keep]'),
        ], WA, 'not slot'),
        'writes_in_fp32': Plant([
            ('= key[keep]',
             '= key[keep].float()'),
        ], RE, 'dtypes match'),
        'clears_the_cache_first': Plant([
            ('    keep = slot_mapping >= 0 ',
             '    k_cache.zero_()\n    v_cache.zero_()\n    keep = slot_mapping >= 0 '),
        ], WA, 'its row must stay untouched'),
        'keeps_the_rows_of_padded_tokens': Plant([
            ('= key[keep]',
             '= key[: len(slots)]'),
            ('= value[keep]',
             '= value[: len(slots)]'),
        ], WA, 'keep the rows and the slots aligned'),
        'rounds_through_fp16': Plant([
            ('= key[keep]',
             '= key[keep].half().to(key.dtype)'),
        ], WA, 'goes to slot'),
        'marks_padding_in_slot_mapping': Plant([
            ('    keep = slot_mapping >= 0 ',
             '    slot_mapping[slot_mapping < 0] = -2\n    keep = slot_mapping >= 0 '),
        ], WA, 'only the caches may be written'),
    },
    125: {
        'gqa_h_mod_h_kv': Plant([
            ('k = k.repeat_interleave(group, dim=1) ',
             'k = k.repeat(1, group, 1) '),
            ('v = v.repeat_interleave(group, dim=1) ',
             'v = v.repeat(1, group, 1) '),
        ], WA, 'h % H_kv'),
        'tail_of_last_block_not_cut': Plant([
            ('k = k_cache[blocks].reshape(-1, H_kv, D)[:n]',
             'k = k_cache[blocks].reshape(-1, H_kv, D)'),
            ('v = v_cache[blocks].reshape(-1, H_kv, D)[:n]',
             'v = v_cache[blocks].reshape(-1, H_kv, D)'),
        ], WA, "the last block's unused tail was read"),
        'masks_the_scores_but_not_v': Plant([
            ('k = k_cache[blocks].reshape(-1, H_kv, D)[:n]',
             'k = k_cache[blocks].reshape(-1, H_kv, D)'),
            ('v = v_cache[blocks].reshape(-1, H_kv, D)[:n]',
             'v = v_cache[blocks].reshape(-1, H_kv, D)'),
            ('* scale  # [H, n]',
             '* scale\n        scores[:, n:] = float("-inf")'),
        ], WA, '0 x NaN = NaN'),
        'scale_ignored': Plant([
            ('k) * scale',
             'k) * D**-0.5'),
        ], WA, 'use the `scale` argument'),
        'one_token_too_few': Plant([
            ('n = int(context_lens[b])',
             'n = int(context_lens[b]) - 1 or 1'),
        ], WA, 'one key too few'),
        'one_token_too_many': Plant([
            ('n = int(context_lens[b])',
             'n = int(context_lens[b]) + 1'),
        ], WA, 'one token too many'),
        'softmax_over_heads': Plant([
            ('scores.softmax(dim=-1)',
             'scores.softmax(dim=0)'),
        ], WA, 'softmax(q . k * scale) . v in fp32'),
        'every_context_as_long_as_the_first': Plant([
            ('n = int(context_lens[b])',
             'n = int(context_lens[0])'),
        ], WA, 'softmax(q . k * scale) . v in fp32'),
        'exp_without_the_max': Plant([
            ('scores.softmax(dim=-1)',
             '(scores.exp() / scores.exp().sum(-1, keepdim=True))'),
        ], WA, 'subtract the row'),
        'cleans_the_cache_in_place': Plant([
            ('    out = torch.empty_like(q) ',
             '    k_cache.nan_to_num_(0.0)\n    v_cache.nan_to_num_(0.0)\n    out = torch.empty_like(q) '),
        ], WA, 'every argument is read-only'),
        'returns_fp32': Plant([
            ('    out = torch.empty_like(q) ',
             '    out = torch.empty_like(q, dtype=torch.float32) '),
        ], WA, "the query's shape and dtype"),
    },
    126: {
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
    },
    127: {
        'starts_with_one_reference': Plant([
            ('        self.ref_counts = [0] * num_blocks',
             '        self.ref_counts = [1] * num_blocks'),
        ], WA, 'the pool starts with every block free'),
        'freed_blocks_to_the_front': Plant([
            ('self.free_block_ids.append(b)',
             'self.free_block_ids.appendleft(b)'),
        ], WA, 'freed blocks joined at its END'),
        'allocates_in_reverse_order': Plant([
            ('        blocks = [self.free_block_ids.popleft() for _ in range(n)]',
             '        blocks = [self.free_block_ids.popleft() for _ in range(n)][::-1]'),
        ], WA, 'in queue order'),
        'partial_allocation_on_failure': Plant([
            ('        if n > len(self.free_block_ids):\n            return None\n        blocks = [self.free_block_ids.popleft() for _ in range(n)]',
             '        blocks = [self.free_block_ids.popleft()\n                  for _ in range(min(n, len(self.free_block_ids)))]\n        if len(blocks) < n:\n            return None'),
        ], WA, 'a failed allocate changes nothing'),
        'returns_the_blocks_it_found': Plant([
            ('        if n > len(self.free_block_ids):\n            return None\n',
             '        n = min(n, len(self.free_block_ids))\n'),
        ], WA, 'returns None when fewer than n blocks are free'),
        'allocate_leaves_zero_references': Plant([
            ('            self.ref_counts[b] = 1\n',
             '            pass\n'),
        ], WA, 'with exactly 1 reference'),
        'copy_on_write_without_copy': Plant([
            ('        kv_cache[:, :, new[0]] = kv_cache[:, :, block_table[-1]]',
             ''),
        ], WA, 'K AND V of EVERY layer'),
        'copies_k_only': Plant([
            ('kv_cache[:, :, new[0]] = kv_cache[:, :, block_table[-1]]',
             'kv_cache[0, :, new[0]] = kv_cache[0, :, block_table[-1]]'),
        ], WA, 'K AND V of EVERY layer'),
        'copies_layer_0_only': Plant([
            ('kv_cache[:, :, new[0]] = kv_cache[:, :, block_table[-1]]',
             'kv_cache[:, 0, new[0]] = kv_cache[:, 0, block_table[-1]]'),
        ], WA, 'K AND V of EVERY layer'),
        'old_block_keeps_its_reference': Plant([
            ('        pool.free([block_table[-1]])\n',
             ''),
        ], WA, 'drop one reference to the old block'),
        'double_free_not_detected': Plant([
            ('if blocks.count(b) > self.ref_counts[b]:',
             'if False:'),
        ], WA, 'must raise ValueError'),
        'double_free_raises_runtime_error': Plant([
            ('                raise ValueError(f"free: block',
             '                raise RuntimeError(f"free: block'),
        ], WA, 'raise ValueError, and only for a double free'),
        'repeated_id_called_a_double_free': Plant([
            ('if blocks.count(b) > self.ref_counts[b]:',
             'if blocks.count(b) > 1 or self.ref_counts[b] == 0:'),
        ], WA, 'this free is valid'),
        'failed_free_changes_some': Plant([
            ('        for b in set(blocks):\n            if blocks.count(b) > self.ref_counts[b]:',
             "        for b in blocks:\n            self.ref_counts[b] -= 1\n        for b in blocks:\n            self.ref_counts[b] += 1\n            if self.ref_counts[b] == 0:\n                raise ValueError('double free')\n        for b in set(blocks):\n            if False:"),
        ], WA, 'a failed free changes nothing'),
        'repeated_id_dropped_once': Plant([
            ('        for b in blocks:\n            self.ref_counts[b] -= 1',
             '        for b in dict.fromkeys(blocks):\n            self.ref_counts[b] -= 1'),
        ], WA, 'one reference per block'),
        'joins_the_queue_too_early': Plant([
            ('            if self.ref_counts[b] == 0:\n                self.free_block_ids.append(b)',
             '            if self.ref_counts[b] <= 1 and b not in self.free_block_ids:\n                self.free_block_ids.append(b)'),
        ], WA, 'when its count reaches 0, not before'),
        'free_empties_its_argument': Plant([
            ('        for b in blocks:\n            self.ref_counts[b] -= 1',
             '        while blocks:\n            b = blocks.pop(0)\n            self.ref_counts[b] -= 1'),
        ], WA, 'free must not modify the list'),
        'fork_returns_the_same_list': Plant([
            ('        return list(block_table)',
             '        return block_table'),
        ], WA, 'must return a NEW list'),
        'fork_adds_no_reference': Plant([
            ('            self.ref_counts[b] += 1\n        return list',
             '            pass\n        return list'),
        ], WA, 'fork adds one reference'),
        'slot_off_by_one': Plant([
            ('return block_table[-1] * block_size + num_tokens % block_size',
             'return block_table[-1] * block_size + num_tokens % block_size + 1'),
        ], WA, 'off by one'),
        'copy_on_write_never': Plant([
            ('    elif pool.ref_count(block_table[-1]) > 1:',
             '    elif False:'),
        ], WA, 'is shared (ref'),
        'new_block_one_token_late': Plant([
            ('if num_tokens % block_size == 0:',
             'if num_tokens % block_size == 1:'),
        ], WA, 'falls inside the last block'),
        'shared_block_copied_before_a_new_one': Plant([
            ('    if num_tokens % block_size == 0:                               # the new token opens a block',
             '    if num_tokens % block_size == 0 and pool.ref_count(block_table[-1]) == 1 if block_table else num_tokens % block_size == 0:'),
        ], WA, 'starts a new block'),
        'frees_the_old_block_before_allocating': Plant([
            ('copy before writing\n        new = pool.allocate(1)',
             'copy before writing\n        pool.free([block_table[-1]])\n        new = pool.allocate(1)'),
            ('        pool.free([block_table[-1]])\n        block_table[-1] = new[0]',
             '        block_table[-1] = new[0]'),
        ], WA, 'changes nothing (table, pool, kv_cache)'),
    },
    128: {
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
    },
    129: {
        'hash_map_under_another_name': Plant([
            ('self.hash_to_block_id', 'self.hash_map', 6),
        ], WA, 'the judge reads them'),
        'compute_hash_ignores_prefix': Plant([
            ('        if prefix != -1:\n            h.update(prefix.to_bytes(8, "little"))\n',
             ''),
        ], WA, 'chain the prefix'),
        'prefix_zero_treated_as_none': Plant([
            ('if prefix != -1:',
             'if prefix > 0:'),
        ], WA, '0 is a real prefix'),
        'tokens_hashed_as_int32': Plant([
            ('h.update(np.array(token_ids, dtype=np.int64)',
             'h.update(np.array(token_ids, dtype=np.int32)'),
        ], WA, 'np.array(token_ids, dtype=np.int64).tobytes()'),
        'hash_not_chained_in_allocate': Plant([
            ('h = self.compute_hash(token_ids, h) if len',
             'h = self.compute_hash(token_ids) if len'),
            ('            h = self.compute_hash(token_ids, h)\n            block_id',
             '            h = self.compute_hash(token_ids)\n            block_id'),
        ], WA, 'hashes are chained'),
        'lookup_not_chained': Plant([
            ('            h = self.compute_hash(token_ids, h)\n            block_id',
             '            h = self.compute_hash(token_ids)\n            block_id'),
        ], WA, 'a missed hit'),
        'hashes_without_self_compute_hash': Plant([
            ('h = self.compute_hash(token_ids, h) if len',
             'h = BlockManager.compute_hash(token_ids, h) if len'),
        ], WA, 'hash only through self.compute_hash'),
        'hashes_partial_blocks': Plant([
            ('h = self.compute_hash(token_ids, h) if len(token_ids) == self.block_size else -1',
             'h = self.compute_hash(token_ids, h)'),
        ], WA, 'only FULL blocks get a hash'),
        'hit_without_token_check': Plant([
            ('if block_id == -1 or self.blocks[block_id].token_ids != token_ids:',
             'if block_id == -1:'),
        ], WA, 'a false hit'),
        'stale_entry_kept': Plant([
            ('        if block.hash != -1 and self.hash_to_block_id.get(block.hash) == block_id:\n            del self.hash_to_block_id[block.hash]\n',
             ''),
        ], WA, 'a stale entry'),
        'deletes_the_entry_of_another_block': Plant([
            ('        if block.hash != -1 and self.hash_to_block_id.get(block.hash) == block_id:\n            del self.hash_to_block_id[block.hash]\n',
             '        if block.hash != -1:\n            self.hash_to_block_id.pop(block.hash, None)\n'),
        ], WA, 'ANOTHER block'),
        'reused_block_keeps_its_hash': Plant([
            ('        block.reset()\n',
             '        block.ref_count = 1\n'),
        ], WA, 'a reused block is reset'),
        'full_prompt_hit_not_capped': Plant([
            ('range((seq.num_tokens - 1) // self.block_size)',
             'range(seq.num_tokens // self.block_size)'),
        ], WA, 'cap the hit'),
        'hits_not_counted_as_cached': Plant([
            ('                seq.num_cached_tokens += self.block_size',
             '                pass'),
        ], WA, 'grows by block_size for every hit'),
        'hit_in_use_gains_no_reference': Plant([
            ('                block.ref_count += 1',
             '                pass'),
        ], WA, 'a hit in use gains a reference'),
        'free_hit_left_in_the_queue': Plant([
            ('            if i < len(hits) and hits[i] in self.used_block_ids:',
             '            if i < len(hits) and hits[i] in self.free_block_ids:\n                block = self.blocks[hits[i]]\n                block.ref_count = 1\n                self.used_block_ids.add(hits[i])\n            elif i < len(hits) and hits[i] in self.used_block_ids:'),
        ], WA, 'a freed hit is taken out of the queue'),
        'miss_from_the_back': Plant([
            ('else self.free_block_ids[0])',
             'else self.free_block_ids[-1])'),
        ], WA, 'fresh blocks from the FRONT'),
        'deallocate_not_reversed': Plant([
            ('for block_id in reversed(seq.block_table):',
             'for block_id in seq.block_table:'),
        ], WA, 'frees the LAST block first'),
        'deallocate_keeps_num_cached_tokens': Plant([
            ('        seq.num_cached_tokens = 0\n',
             ''),
        ], WA, 'sets seq.num_cached_tokens = 0'),
        'deallocate_keeps_used_block_ids': Plant([
            ('                self.used_block_ids.remove(block_id)\n',
             ''),
        ], WA, 'used_block_ids holds exactly'),
        'freed_blocks_forget_their_hash': Plant([
            ('                self.free_block_ids.append(block_id)',
             '                self.free_block_ids.append(block_id)\n                self.hash_to_block_id.pop(block.hash, None)'),
        ], WA, 'freed blocks keep their hash'),
        'can_allocate_ignores_free_hits': Plant([
            ('reused_free = sum(1 for b in hits if self.blocks[b].ref_count == 0)',
             'reused_free = 0'),
        ], WA, 'sits in the free queue needs a free block'),
        'can_allocate_counts_every_hit': Plant([
            ('reused_free = sum(1 for b in hits if self.blocks[b].ref_count == 0)',
             'reused_free = len(hits)'),
        ], WA, 'a hit in use needs no free block'),
        'can_allocate_sets_the_cached_tokens': Plant([
            ('        reused_free = sum(',
             '        seq.num_cached_tokens = len(hits) * self.block_size\n        reused_free = sum('),
        ], WA, 'it changes nothing'),
        'may_append_nano_vllm_test': Plant([
            ('        if (len(seq) - 1) % self.block_size == 0:\n            block_table',
             '        if len(seq) % self.block_size == 1:\n            block_table'),
        ], WA, '(len(seq) - 1) % block_size == 0'),
        'can_append_nano_vllm_test': Plant([
            ('return len(self.free_block_ids) >= ((len(seq) - 1) % self.block_size == 0)',
             'return len(self.free_block_ids) >= (len(seq) % self.block_size == 1)'),
        ], WA, '(len(seq) - 1) % block_size == 0'),
        'may_append_does_not_hash': Plant([
            ('            self.hash_to_block_id[h] = last.block_id',
             '            pass'),
        ], WA, 'hash it and map its hash'),
        'may_append_hash_not_chained': Plant([
            ('            h = self.compute_hash(token_ids, prefix)',
             '            h = self.compute_hash(token_ids)'),
        ], WA, "chain the filled block's hash"),
        'may_append_forgets_the_token_ids': Plant([
            ('            last.update(h, token_ids)',
             '            last.hash = h'),
        ], WA, 'keeps its token_ids with its hash'),
    },
    130: {
        'writes_slot_minus_one': Plant([
            ('    if slot < 0:',
             '    if slot < -1:'),
        ], WA, 'slot of -1 must be skipped'),
        'ignores_the_row_stride': Plant([
            ('token.to(tl.int64) * key_stride',
             'token.to(tl.int64) * ROW'),
        ], WA, 'key.stride(0)'),
        'value_stride_from_key': Plant([
            ('value, value.stride(0), k_cache',
             'value, key.stride(0), k_cache'),
        ], WA, 'value.stride(0)'),
        'writes_a_copy': Plant([
            ('        key, key.stride(0), value, value.stride(0), k_cache, v_cache, slot_mapping,',
             '        key, key.stride(0), value, value.stride(0), k_cache.clone(), v_cache.clone(), slot_mapping,'),
        ], WA, 'in place'),
        'row_not_masked': Plant([
            ('    mask = offs < ROW ',
             '    mask = offs < BLOCK '),
        ], WA, 'mask the row: offsets ROW'),
        'minus_one_in_the_mask': Plant([
            ('    if slot < 0:                                                     # a padding token: nothing to write\n        return\n',
             ''),
            ('    mask = offs < ROW ',
             '    mask = (offs < ROW) & (slot >= 0) '),
        ], RE, 'return early for slot < 0', interpreter_only=True),
        'k_and_v_swapped': Plant([
            ('tl.store(k_cache_ptr + slot * ROW + offs, key,',
             'tl.store(k_cache_ptr + slot * ROW + offs, value,'),
        ], WA, 'swapped'),
    },
    131: {
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
    },
    132: {
        'skips_ahead_past_a_head_that_does_not_fit': Plant([
            ('    while waiting and len(running) < max_num_seqs:\n        seq = waiting[0]\n',
             '    for seq in list(waiting):\n        if len(running) >= max_num_seqs:\n            break\n'),
            ('            break\n        block_manager.allocate(seq)',
             '            continue\n        block_manager.allocate(seq)'),
            ('running.append(waiting.popleft())',
             'waiting.remove(seq)\n        running.append(seq)'),
        ], WA, 'FIFO: admit from waiting[0] only'),
        'budget_counts_only_uncached_tokens': Plant([
            ('        num_batched_tokens += len(seq)\n',
             '        num_batched_tokens += len(seq) - seq.num_cached_tokens\n'),
        ], WA, 'cached or not (num_batched_tokens += len(seq))'),
        'budget_exact_fit_refused': Plant([
            ('if num_batched_tokens + len(seq) > max_num_batched_tokens',
             'if num_batched_tokens + len(seq) >= max_num_batched_tokens'),
        ], WA, 'exactly fills the token budget'),
        'max_num_seqs_counts_only_admissions': Plant([
            ('while waiting and len(running) < max_num_seqs:',
             'while waiting and len(scheduled) < max_num_seqs:'),
        ], WA, 'the sequences already running included'),
        'max_num_seqs_off_by_one': Plant([
            ('while waiting and len(running) < max_num_seqs:',
             'while waiting and len(running) < max_num_seqs - 1:'),
        ], WA, 'running may hold max_num_seqs sequences'),
        'admitted_stays_waiting': Plant([
            ('        seq.status = SequenceStatus.RUNNING\n',
             ''),
        ], WA, 'RUNNING when admitted'),
        'prefill_and_decode_mixed': Plant([
            ('    if scheduled:\n        return scheduled, True\n',
             ''),
        ], WA, 'a prefill step decodes nobody'),
        'preempts_the_oldest': Plant([
            ('                preempt(running.pop())',
             '                preempt(running.popleft())'),
        ], WA, 'NEWEST'),
        'preempts_itself_first': Plant([
            ('            if running:\n                preempt(running.pop())',
             '            if False:\n                pass'),
        ], WA, 'NEWEST'),
        'requeues_at_the_back': Plant([
            ('        waiting.appendleft(s)',
             '        waiting.append(s)'),
        ], WA, 'to the FRONT of waiting'),
        'keeps_status_running': Plant([
            ('        s.status = SequenceStatus.WAITING\n',
             ''),
        ], WA, 'WAITING when preempted'),
        'preempts_without_freeing': Plant([
            ('        block_manager.deallocate(s)\n',
             '        s.block_table.clear()\n'),
        ], WA, 'block_manager.deallocate(s): without that'),
        'running_order_reversed': Plant([
            ('    running.extend(scheduled)',
             '    running.extendleft(scheduled)'),
        ], WA, 'in the order they were scheduled'),
        'appends_without_checking': Plant([
            ('        while not block_manager.can_append(seq):\n            if running:',
             '        while False:\n            if running:'),
        ], RE, 'call the BlockManager only as the contract says'),
        'decodes_without_may_append': Plant([
            ('            block_manager.may_append(seq)\n',
             ''),
        ], WA, 'change the pool only through'),
        'prefill_called_a_decode': Plant([
            ('        return scheduled, True\n',
             '        return scheduled, False\n'),
        ], WA, 'a step is a prefill exactly when it admitted someone'),
        'admits_one_per_step': Plant([
            ('        scheduled.append(seq)\n    if scheduled:',
             '        scheduled.append(seq)\n        break\n    if scheduled:'),
        ], WA, 'admit from waiting[0] while budget'),
        'resets_the_cached_tokens': Plant([
            ('        block_manager.allocate(seq)\n',
             '        block_manager.allocate(seq)\n        seq.num_cached_tokens = 0\n'),
        ], WA, 'finds the prefix hits'),
        'is_prefill_as_int': Plant([
            ('        return scheduled, True\n',
             '        return scheduled, 1\n'),
        ], WA, 'a list and a bool'),
        'nothing_to_run_called_a_prefill': Plant([
            ('    running.extend(scheduled)\n    return scheduled, False',
             '    running.extend(scheduled)\n    return scheduled, not scheduled and bool(waiting)'),
        ], WA, 'True only when a sequence was admitted'),
    },
    133: {
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
    },
    134: {
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
    },
}
