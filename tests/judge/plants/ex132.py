# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 132: each a copy of solutions/132_*.py with one classic mistake, the verdict it
must get and words the hint (or message) of its first failing case must contain (see plants/__init__.py)."""
from plants import RE, WA, Plant  # noqa: F401

PLANTS = {
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
}
