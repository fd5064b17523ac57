# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 141 (two-tier prefix cache), each breaking one clause of the contract."""
from plants import RE, WA, Plant

PLANTS = {
    'lookup_continues_past_a_miss': Plant([
        ('            else:\n                break\n        return tiers', '            else:\n                continue\n        return tiers'),
    ], WA, 'breaks at its first miss'),
    'cpu_before_gpu': Plant([
        ('            if h in self.gpu_hash_to_block:\n                tiers.append("gpu")\n            elif h in self.cpu_lru:\n                tiers.append("cpu")',
         '            if h in self.cpu_lru:\n                tiers.append("cpu")\n            elif h in self.gpu_hash_to_block:\n                tiers.append("gpu")'),
    ], WA, 'before the CPU'),
    'evicted_block_forgotten': Plant([
        ('            if h not in self.cpu_lru:\n                self._write_out(block, h)\n', ''),
    ], WA, 'EVICTED from the GPU'),
    'written_out_again': Plant([
        ('            if h not in self.cpu_lru:\n                self._write_out(block, h)\n', '            if h in self.cpu_lru:\n                self.cpu_free.append(self.cpu_lru.pop(h))\n            self._write_out(block, h)\n'),
    ], WA, 'already on the CPU'),
    'loaded_block_removed_from_the_cpu': Plant([
        ('                self.loads.append((self.cpu_lru[h], block))', '                self.loads.append((self.cpu_lru[h], block))\n                self.cpu_free.append(self.cpu_lru.pop(h))'),
    ], WA, 'stays on the CPU'),
    'pinned_slot_evicted': Plant([
        ('            victim = next((v for v, s in self.cpu_lru.items() if self.cpu_pins[s] == 0), None)',
         '            victim = next(iter(self.cpu_lru), None)'),
    ], WA, 'still referenced'),
    'cpu_lru_not_refreshed_on_a_hit': Plant([
        ('                self.cpu_lru.move_to_end(h)\n', ''),
    ], WA, 'LRU order on the CPU'),
    'hits_refreshed_first_block_first': Plant([
        ('        for h, t in reversed(list(zip(block_hashes, tiers))):', '        for h, t in zip(block_hashes, tiers):'),
    ], WA, 'LRU order on the CPU'),
    'cpu_evicts_the_newest': Plant([
        ('            victim = next((v for v, s in self.cpu_lru.items() if self.cpu_pins[s] == 0), None)',
         '            victim = next((v for v, s in reversed(self.cpu_lru.items()) if self.cpu_pins[s] == 0), None)'),
    ], WA, 'LEAST recently used'),
    'free_hit_left_in_the_queue': Plant([
        ('        if self.gpu_ref_counts[block] == 0:\n            self.gpu_free.remove(block)\n', ''),
    ], WA, 'OUT of gpu_free'),
    'no_load_queued': Plant([
        ('                self.loads.append((self.cpu_lru[h], block))\n', '                pass\n'),
    ], WA, 'a CPU hit is loaded'),
    'hits_in_the_free_queue_not_counted': Plant([
        ('        needed = len(block_hashes) - len(gpu_hits) + sum(1 for b in gpu_hits if self.gpu_ref_counts[b] == 0)',
         '        needed = len(block_hashes) - len(gpu_hits)'),
    ], RE, 'GPU hits sitting in gpu_free need a block each'),
    'refuses_an_exact_fit': Plant([
        ('        if needed > len(self.gpu_free):', '        if needed >= len(self.gpu_free):'),
    ], WA, 'None only when fewer'),
    'evicted_hash_kept_on_the_gpu': Plant([
        ('            del self.gpu_hash_to_block[h]\n', ''),
    ], WA, 'leaves gpu_hash_to_block'),
    'free_first_block_first': Plant([
        ('        for block in reversed(block_table):', '        for block in block_table:'),
    ], WA, 'LAST block of the table first'),
    'transfers_not_emptied': Plant([
        ('        self.saves, self.loads = [], []\n', '        self.saves, self.loads = list(saves), list(loads)\n'),
    ], WA, 'empties'),
    'hits_taken_with_the_fresh_blocks': Plant([
        ('            if t == "gpu":\n                self._take(self.gpu_hash_to_block[h])\n            else:',
         '            if t == "gpu":\n                pass\n            else:'),
        ('                table.append(self.gpu_hash_to_block[h])\n',
         '                self._take(self.gpu_hash_to_block[h])\n                table.append(self.gpu_hash_to_block[h])\n'),
    ], RE, 'take every hit before any fresh block'),
    'lookup_refreshes_the_cpu_lru': Plant([
        ('            elif h in self.cpu_lru:\n                tiers.append("cpu")\n',
         '            elif h in self.cpu_lru:\n                tiers.append("cpu")\n                self.cpu_lru.move_to_end(h)\n'),
    ], WA, 'lookup changes nothing, not even'),
    'written_out_block_enters_as_the_oldest': Plant([
        ('        self.cpu_lru[h] = slot\n',
         '        self.cpu_lru[h] = slot\n        self.cpu_lru.move_to_end(h, last=False)\n'),
    ], WA, 'a written-out block enters cpu_lru'),
    'hit_reference_set_to_one': Plant([
        ('        self.gpu_ref_counts[block] += 1\n', '        self.gpu_ref_counts[block] = 1\n'),
    ], WA, 'raise its count by one'),
    'pins_never_dropped': Plant([
        ('        for slot, _ in loads:\n            self.cpu_pins[slot] -= 1\n', ''),
    ], WA, 'unpins them'),
}
