"""What tests, notebooks, benchmarks and the judge check the library against: paged batches built to expose
paging bugs (paged_batch) and the independent reference, SDPA on contiguous K/V in float64 (sdpa_reference);
for a sliding-window KV cache group, the positions its queries read (window_reference); decode batches whose
sequences share a prefix's blocks (shared_prefix_batch); MLA latents in a paged cache of several layers
(mla_batch).
"""
