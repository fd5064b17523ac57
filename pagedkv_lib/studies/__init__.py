"""The course's studies and simulations, not parts of an engine, and the GPU runs they read (results: where
benchmark results live, read back): KV memory arithmetic (memory), the workloads (workload), the paper's
reservation policies and paging (policies, buddy_allocator), where their memory goes (waste), external
fragmentation over time (fragmentation), a serving simulation and the paper's numbers beside the course's (the
package serving: simulation, reservation, result, measures, paper), what an FP8 KV cache costs in accuracy
(fp8_attention_error, fp8_greedy_agreement), and moving a prompt's K/V between instances vs recomputing it
(transfer_cost). Two choices engines make differently: the hash chain or the radix tree as a prefix cache,
under memory pressure (prefix_cache_comparison), and swapping or recomputing a preempted request
(swap_or_recompute). MLA's latent cache in bytes and FLOPs against GQA (mla_memory). Hybrid models: their KV
bytes per sequence and what fits (hybrid_memory), their prefix hits under pressure with and without the
sliding-window rule (hybrid_serving). What n-gram speculation buys the mini engine (speculation). What a CPU
tier under the GPU pool buys, and a load back against the recompute it replaces (cpu_offload).
"""
