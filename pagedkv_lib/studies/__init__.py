"""The course's studies and simulations, not parts of an engine: KV memory arithmetic (memory), the
notebook-1 workload and its waste (workload), external fragmentation (fragmentation) and a serving
simulation (serving_sim); what an FP8 KV cache costs in accuracy (fp8_attention_error,
fp8_greedy_agreement).
"""
