"""The KV cache across processes and GPUs (notebook 17, exercise 137), on `torch.distributed`.

The layer after `engine` (it runs the mini engine's model on two instances) and before `studies`:

    rank_launcher.py     launch_ranks: start a process group (gloo on CPUs, nccl with a GPU per rank), run a
                         rank program in each process, collect what each returns (JSON), always clean up
    tp_shard.py          tensor parallelism and the cache: the KV heads of each rank (replicated when
                         H_kv < tp), the query heads, a rank's shard of the cache
    tp_decode.py         decode attention on each rank's shard, outputs gathered over the group
    kv_transfer.py       one sequence from one pool to another: gather by table, the receiver's own
                         allocation, scatter, the new table (transfer_kv, graded by exercise 137)
    block_layout.py      the two block layouts, [N, S, H_kv, D] (NHD) and [N, H_kv, S, D] (HND)
    transfer_message.py  the header and the reply of a transfer, as int64 tensors a backend can send
    serving_instance.py  one instance: the mini engine's model, its own pool and cache; prefill layer by
                         layer, greedy decode
    disaggregation.py    prefill on rank 0, decode on rank 1: the handshake, per-layer streaming, the
                         receiver's prefix blocks and a full pool
    transfer_timing.py   measured: moving a context's K/V between the ranks vs recomputing its prefill
Shapes: docs/conventions.md.
"""
