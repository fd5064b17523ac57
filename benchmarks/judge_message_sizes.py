"""How large the judge's legitimate messages are: the largest case message and the whole result stream of each
exercise's reference, on its CPU cases and on its CUDA cases where it has some. Measured on the oracle's
observations, encoded as a child sends them: the parent computes them on the CPU whatever the device (a
kernel exercise's oracle is its PyTorch reference), and a correct submission's observation has their form
and size. protocol.MAX_MESSAGE_BYTES and MAX_RESULT_BYTES are set a few times above the largest figures.

    python benchmarks/judge_message_sizes.py [--seed 0]
"""
from __future__ import annotations

import argparse

import torch

from pagedkv_lib.judge import protocol, registry
from pagedkv_lib.judge.protocol import CaseDone, encode


def sizes(module, oracle, seed: int, device: str) -> list[int]:
    """The bytes of each case's message, the oracle's observation encoded as a child sends it."""
    return [len(encode(CaseDone(i, 0.0, module.run(oracle, case))))
            for i, case in enumerate(module.build(seed, device))]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(f"{'id':>3}  {'cpu largest':>12}  {'cpu stream':>12}  {'cuda largest':>12}  {'cuda stream':>12}")
    worst = {"cpu": [0, 0], "cuda": [0, 0]}
    for ex in registry.EXERCISES.values():
        module, oracle = ex.cases(), ex.oracle_namespace()
        row = []
        for device in ("cpu", "cuda"):
            if device in ex.devices:
                found = sizes(module, oracle, args.seed, device)
                row += [max(found), sum(found)]
                worst[device] = [max(worst[device][0], max(found)), max(worst[device][1], sum(found))]
        print(f"{ex.id:>3}  " + "  ".join(f"{n:>12,}" for n in row), flush=True)
    for device, (message, stream) in worst.items():
        print(f"{device}: largest message {message:,} bytes (cap {protocol.MAX_MESSAGE_BYTES[device]:,}), "
              f"largest stream {stream:,} bytes (cap {protocol.MAX_RESULT_BYTES[device]:,})")

if __name__ == "__main__":
    main()
