"""The serving simulation and the PagedAttention paper's numbers beside it (notebooks 1, 14 and 16).

    simulation   simulate_serving: paging (blocks as a request grows, preemption by recompute or swap) or
                 one of the paper's reservation policies, step by step, on memory arithmetic only
    reservation  simulate_reserving: the Orca policies' one buddy-allocated chunk per request, event by event
    result       ServingResult: what a run returns, per-step series and the paper's summaries
    measures     what the paper measured on a run: Fig. 2's breakdown, normalized latency, sustained rate
    paper        the paper's cells, the course's values beside them, and the static study of every workload
"""
