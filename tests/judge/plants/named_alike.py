"""Exceptions by type, not by name: for each error clause of every exercise (the audit: `raise` and the
classes named in solutions/ and cases/ are 127's double free, 134's invalid scales, 136's unlock and bad
insert; every other "may raise" clause is one the judge never exercises), a class merely NAMED as the
promised builtin, not a subclass of it, raised in its place. NAMED_ALIKE[exercise id][name] = Plant, as in
plants/exNNN.py: each must be rejected with the verdict and hint words given.
"""
from plants import RE, WA, Plant

ALIKE = 'type("ValueError", (Exception,), {})'           # a class named ValueError, built on Exception
REBOUND = f"import builtins\nbuiltins.ValueError = {ALIKE}\n"    # and put where the name ValueError is found
WHATEVER_ITS_NAME = "is another class, whatever its name"

NAMED_ALIKE = {
    127: {
        "double_free_raises_a_named_alike": Plant([
            ('raise ValueError(f"free: block', f'raise {ALIKE}(f"free: block'),
        ], WA, WHATEVER_ITS_NAME),
        "double_free_raises_a_rebound_builtin": Plant([
            ('from __future__ import annotations\n', 'from __future__ import annotations\n' + REBOUND),
        ], WA, WHATEVER_ITS_NAME),
    },
    134: {
        "store_raises_a_rebound_builtin": Plant([
            ('from __future__ import annotations\n', 'from __future__ import annotations\n' + REBOUND),
        ], RE, "ValueError"),
    },
    136: {
        "unlock_raises_a_named_alike": Plant([
            ('raise ValueError("dec_lock_ref: a node', f'raise {ALIKE}("dec_lock_ref: a node'),
        ], WA, WHATEVER_ITS_NAME),
        "bad_insert_raises_a_named_alike": Plant([
            ('raise ValueError(f"insert: expected', f'raise {ALIKE}(f"insert: expected'),
        ], WA, WHATEVER_ITS_NAME),
    },
}
