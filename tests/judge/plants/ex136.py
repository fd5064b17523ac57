# ruff: noqa: E501  (planted bugs quote whole lines of the solutions)
"""Planted bugs of exercise 136 (radix cache), each breaking one clause of the contract."""
from plants import WA, Plant

PLANTS = {
    'split_loses_the_tail': Plant([
        ('        head.children[self._child_key(child.key)] = child\n',
         ''),
    ], WA, 'a split keeps the tail'),
    'match_does_not_split': Plant([
        ('            ends_inside = n < len(child.key)\n            if ends_inside:\n                child = self._split_node(child, n)\n',
         '            ends_inside = n < len(child.key)\n'),
    ], WA, 'splits it there'),
    'split_without_the_locks': Plant([
        ('        head.lock_ref, head.last_access_time = child.lock_ref, child.last_access_time',
         '        head.last_access_time = child.last_access_time'),
    ], WA, "inherits the child's lock_ref"),
    'token_by_token_at_block_size_4': Plant([
        ('        key = list(token_ids[: len(token_ids) // self.block_size * self.block_size])',
         '        key = list(token_ids)'),
        ('        S, n = self.block_size, 0\n        while n + S <= min(len(a), len(b)) and a[n : n + S] == b[n : n + S]:\n            n += S\n        return n',
         '        n = 0\n        while n < min(len(a), len(b)) and a[n] == b[n]:\n            n += 1\n        return n'),
    ], WA, 'match whole blocks only'),
    'insert_returns_the_new_tokens': Plant([
        ('        return cached\n',
         '        return len(token_ids) - cached\n'),
    ], WA, 'the number of tokens that were already cached'),
    'leaf_adopts_every_block': Plant([
        ('            key, value = key[n:], value[n // self.block_size:]',
         '            key = key[n:]'),
    ], WA, 'the new leaf holds only'),
    'insert_checks_no_length': Plant([
        ('        if len(token_ids) != len(blocks) * self.block_size:\n            raise ValueError(',
         '        if False:\n            raise ValueError('),
    ], WA, 'insert raises ValueError'),
    'lru_by_insertion': Plant([
        ('            child.last_access_time = self.clock\n            node, cached = child, cached + n',
         '            node, cached = child, cached + n'),
        ('            child.last_access_time = self.clock\n            blocks += child.value',
         '            blocks += child.value'),
    ], WA, 'not by creation'),
    'match_does_not_refresh': Plant([
        ('            child.last_access_time = self.clock\n            blocks += child.value',
         '            blocks += child.value'),
    ], WA, 'match_prefix stamps last_access_time'),
    'evicts_inner_nodes': Plant([
        ('            if not node.children and node.lock_ref == 0:\n                leaves.append(node)',
         '            if node.lock_ref == 0:\n                leaves.append(node)'),
        ('        while stack:\n            node = stack.pop()\n            stack.extend(node.children.values())',
         '        while stack:\n            node = stack.pop(0)\n            stack.extend(node.children.values())'),
        ('            del parent.children[self._child_key(leaf.key)]',
         '            parent.children.pop(self._child_key(leaf.key), None)'),
    ], WA, 'evict only leaves'),
    'evicts_a_locked_node': Plant([
        ('            if not node.children and node.lock_ref == 0:\n                leaves.append(node)',
         '            if not node.children:\n                leaves.append(node)'),
        ('            if parent is not self.root_node and not parent.children and parent.lock_ref == 0:',
         '            if parent is not self.root_node and not parent.children:'),
    ], WA, 'never evict a locked node'),
    'parent_never_joins': Plant([
        ('                heapq.heappush(heap, (parent.last_access_time, tie, parent))\n',
         '                pass\n'),
    ], WA, 'it can be evicted in the same call'),
    'evicts_everything': Plant([
        ('        while freed < num_blocks and heap:',
         '        while heap:'),
    ], WA, 'stop as soon as'),
    'frees_blocks_last_first': Plant([
        ('            self.pool.free(leaf.value)',
         '            self.pool.free(leaf.value[::-1])'),
    ], WA, 'in key order'),
    'lock_only_the_node': Plant([
        ('            node.lock_ref += 1\n            node = node.parent',
         '            node.lock_ref += 1\n            break'),
        ('                self._protected -= len(node.value)\n            node = node.parent',
         '                self._protected -= len(node.value)\n            break'),
    ], WA, 'up to (not including) the root'),
    'unlock_goes_below_zero': Plant([
        ('            if walk.lock_ref == 0:\n                raise ValueError("dec_lock_ref: a node on the path holds no lock")\n',
         ''),
    ], WA, 'dec_lock_ref raises ValueError'),
    'sizes_in_tokens': Plant([
        ('        return self._evictable\n',
         '        return self._evictable * self.block_size\n'),
    ], WA, 'count BLOCKS (not tokens)'),
    'root_evicted': Plant([
        ('        self.root_node.lock_ref = 1\n',
         ''),
        ('            if parent is not self.root_node and not parent.children and parent.lock_ref == 0:',
         '            if not parent.children and parent.lock_ref == 0:'),
    ], WA, "the root's lock_ref is 1"),          # seen at once now: the snapshot holds the root's lock_ref
    'lock_walk_includes_the_root': Plant([
        ('        while node is not self.root_node:\n            if node.lock_ref == 0:\n                self._evictable -=',
         '        while node is not None:\n            if node.lock_ref == 0:\n                self._evictable -='),
    ], WA, "the root's lock_ref is 1"),
    'insert_checks_after_the_walk': Plant([
        ('        if len(token_ids) != len(blocks) * self.block_size:\n            raise ValueError(',
         '        if False:\n            raise ValueError('),
        ('        if key:\n            leaf = TreeNode(key, value, node)',
         '        if len(key) != len(value) * self.block_size:\n            raise ValueError("insert: wrong number of blocks")\n        if key:\n            leaf = TreeNode(key, value, node)'),
    ], WA, 'BEFORE the walk'),
    'match_stamps_only_the_last_node': Plant([
        ('            child.last_access_time = self.clock\n            blocks += child.value',
         '            blocks += child.value'),
        ('            if ends_inside:\n                break\n        return blocks, node',
         '            if ends_inside:\n                break\n        node.last_access_time = self.clock\n        return blocks, node'),
    ], WA, 'every node on its path, not only'),
    'split_keeps_the_old_stamp_above': Plant([
        ('            child.last_access_time = self.clock\n            blocks += child.value',
         '            if not ends_inside:\n                child.last_access_time = self.clock\n            blocks += child.value'),
    ], WA, 'upper half of a split was matched'),
    'match_cuts_the_callers_list': Plant([
        ('        key = list(token_ids[: len(token_ids) // self.block_size * self.block_size])',
         '        del token_ids[len(token_ids) // self.block_size * self.block_size:]\n        key = list(token_ids)'),
    ], WA, 'arguments are read-only'),
    'unlock_checks_while_walking_up': Plant([
        ('        walk = node\n        while walk is not self.root_node:\n            if walk.lock_ref == 0:\n                raise ValueError("dec_lock_ref: a node on the path holds no lock")\n            walk = walk.parent\n        while node is not self.root_node:\n            node.lock_ref -= 1\n',
         '        while node is not self.root_node:\n            if node.lock_ref == 0:\n                raise ValueError("dec_lock_ref: a node on the path holds no lock")\n            node.lock_ref -= 1\n'),
    ], WA, 'BEFORE it changes any'),
    'unlock_from_the_root_down': Plant([
        ('        walk = node\n        while walk is not self.root_node:\n            if walk.lock_ref == 0:\n                raise ValueError("dec_lock_ref: a node on the path holds no lock")\n            walk = walk.parent\n        while node is not self.root_node:\n            node.lock_ref -= 1\n            if node.lock_ref == 0:\n                self._evictable += len(node.value)\n                self._protected -= len(node.value)\n            node = node.parent\n',
         '        path = []\n        while node is not self.root_node:\n            path.append(node)\n            node = node.parent\n        for node in reversed(path):\n            if node.lock_ref == 0:\n                raise ValueError("dec_lock_ref: a node on the path holds no lock")\n            node.lock_ref -= 1\n            if node.lock_ref == 0:\n                self._evictable += len(node.value)\n                self._protected -= len(node.value)\n'),
    ], WA, 'BEFORE it changes any'),
    'evict_frees_one_leaf_for_zero': Plant([
        ('        while freed < num_blocks and heap:',
         '        while heap and (freed < num_blocks or not freed):'),
    ], WA, 'evict(0) frees nothing'),
}
