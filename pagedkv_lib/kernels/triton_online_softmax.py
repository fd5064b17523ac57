"""The online softmax's update for one tile of keys, the step every attention kernel of the course repeats:
decode (`attend_range`), prefill (both stages), the shared-prefix cascade and MLA's teaching kernel. MLA's
tuned kernel writes the same lines in its own order (its `_attend_tile` says why).

Scores are in the log2 domain (the softmax scale times LOG2E folded in, `exp2` below, as FlashAttention's
kernels do). For each of R query rows the kernel keeps a running max m, a running sum l of exp2(s - m) and an
accumulator acc of those weights times the values. A tile of scores s [R, N] moves the max to m' and
rescales what came before by alpha = exp2(m - m'):

    m'   = max(m, max_j s_j)
    p    = exp2(s - m')                          [R, N]
    l'   = l * alpha + sum_j p_j
    acc' = acc * alpha + p v                     the caller's product: its operand types and halves

Triton inlines a `@triton.jit` helper: each caller compiles to the SASS it had with the lines written out
(`python benchmarks/kernel_sass.py` before and after; benchmarks/NOTES.md, "One online-softmax step").
"""
from .backend import MISSING_TRITON

try:
    import triton
    import triton.language as tl
except ImportError as exc:  # triton is optional off Linux
    raise ImportError(MISSING_TRITON) from exc


@triton.jit
def online_softmax_step(s, m_i, l_i):
    """One tile: scores s [R, N] (masked keys -inf) against the running max m_i and sum l_i [R]. Returns the
    new max [R], the weights p [R, N], alpha [R] (the caller rescales its accumulator by it before adding
    p v) and the new sum [R]. A row whose scores so far are all -inf gets NaN (-inf minus -inf): every
    kernel's first tile gives each row at least one key it sees, or skips a range that has none."""
    m_new = tl.maximum(m_i, tl.max(s, axis=1))                        # [R]
    alpha = tl.exp2(m_i - m_new)                                      # [R] rescales the old state
    p = tl.exp2(s - m_new[:, None])                                   # [R, N]
    l_new = l_i * alpha + tl.sum(p, axis=1)                           # [R]
    return m_new, p, alpha, l_new
