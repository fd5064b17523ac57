"""Which draft tokens a verification step keeps: greedy acceptance of a chain or of a tree.

Greedy (temperature 0), the rule the engine runs: the verification forward gives the target model's
argmax g_0 .. g_k at the k + 1 positions (the last token, then each draft); draft d_i is accepted while
d_1 = g_0, ..., d_i = g_(i-1), and the step emits the accepted drafts plus the BONUS token g_a, the target's
own choice after the last accepted one. So a step emits between 1 and k + 1 tokens, and every one of them
is the token plain greedy decoding would have emitted: the output is identical, only the number of steps
changes. vLLM's `rejection_greedy_sample_kernel` (`vllm/v1/sample/rejection_sampler.py` at 0097a7b).

Sampling (temperature > 0), described here and not run by the engine (it refuses temperature > 0 while
speculating): the rule of Leviathan et al. (arXiv:2211.17192) and Chen et al. (arXiv:2302.01318), as vLLM's
`rejection_random_sample_kernel` implements it. With p the target's and q the drafter's distribution at a
position, draft token x is accepted when a uniform u satisfies u <= p(x) / q(x); on the first rejection the
step emits a "recovered" token drawn from max(0, p - q) renormalised and stops; if all k are accepted a
bonus token is drawn from p. Each emitted token is then distributed exactly as p. An n-gram drafter has no
q: vLLM treats it as one-hot at the draft (q(x) = 1), so x is accepted with probability p(x) and the
recovered token is drawn from p with x's probability set to 0 (`sample_recovered_tokens_kernel`, IS_NGRAM).
"""
from __future__ import annotations


def accept_greedy(draft_token_ids: list[int], target_token_ids: list[int]) -> list[int]:
    """The tokens a greedy verification emits: the drafts that agree with the target's argmax, in order,
    then the bonus token. target_token_ids holds k + 1 argmaxes for k drafts."""
    if len(target_token_ids) != len(draft_token_ids) + 1:
        raise ValueError(f"target_token_ids: expected k + 1 = {len(draft_token_ids) + 1} argmaxes for "
                         f"{len(draft_token_ids)} drafts, got {len(target_token_ids)}")
    out = []
    for draft, target in zip(draft_token_ids, target_token_ids, strict=False):
        if draft != target:
            break
        out.append(draft)
    out.append(target_token_ids[len(out)])
    return out


def accept_tree_greedy(parents: list[int], token_ids: list[int], target_token_ids: list[int]) -> list[int]:
    """Greedy acceptance over a draft tree: node 0 is the last verified token (parent -1), node i > 0 a draft
    whose parent is parents[i] < i; target_token_ids[i] is the argmax at node i. Walk from the root to the
    child whose token equals the current node's argmax, as deep as it goes; emit the path's drafts and the
    argmax at its last node (the bonus). A chain (parents = [-1, 0, 1, ...]) gives accept_greedy's answer."""
    if not (len(parents) == len(token_ids) == len(target_token_ids)) or not parents or parents[0] != -1:
        raise ValueError(f"parents, token_ids, target_token_ids: expected equal lengths and "
                         f"parents[0] == -1, got lengths {len(parents)}, {len(token_ids)}, "
                         f"{len(target_token_ids)}, parents {parents}")
    if any(not 0 <= p < i for i, p in enumerate(parents) if i):
        raise ValueError(f"parents: expected 0 <= parents[i] < i for every node i > 0, got {parents}")
    node, out = 0, []
    while True:
        child = next((c for c in range(1, len(parents))
                      if parents[c] == node and token_ids[c] == target_token_ids[node]), None)
        if child is None:
            out.append(target_token_ids[node])
            return out
        out.append(token_ids[child])
        node = child
