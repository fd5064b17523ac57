"""The course's attention kernels compiled for an H100 (sm_90a) on any machine, with or without a GPU: each
kernel's registers, stack (spills) and a hash of its SASS. Run it before and after a change that should leave
the machine code alone (a shared `@triton.jit` helper, a rename): equal hashes are equal code, and no timing
is needed; a different hash asks for a timed before/after on a GPU (benchmarks/NOTES.md has one).

    python benchmarks/kernel_sass.py                  # every kernel below
    python benchmarks/kernel_sass.py mla_tuned_tma    # some of them
    python benchmarks/kernel_sass.py --sass DIR       # also write each kernel's SASS to DIR (to diff)

Arguments are specialised as Triton's JIT specialises them on the benchmarks' tensors: every pointer 16-byte
aligned, and every integer the kernel does not exempt (`do_not_specialize`) a multiple of 16 (strides, head
counts). Without that, the compiler cannot prove a row of K/V aligned: it emits 2-byte loads, more registers
and spills, code the GPU never runs (the figures in benchmarks/NOTES.md before 2026-12-06's correction).

It needs a triton with its CUDA backend (Linux wheels: ptxas and cuobjdump come with it), 3.4 or newer for
`triton.knobs`. The shapes are the benchmarks' (Llama-style decode and prefill, DeepSeek-style MLA), bf16,
with the launch options each launcher uses there.
"""
import argparse
import functools
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

SMS = 132                                      # an H100 SXM's SMs: what the choosers size splits by
H, H_KV, D, S, B, N = 32, 8, 128, 16, 8, 4096  # Llama-style heads, the benchmarks' 8 x 4096 decode
PAGED = dict(q_ptr="*bf16", k_cache_ptr="*bf16", v_cache_ptr="*bf16", k_scale="fp32", v_scale="fp32",
             out_ptr="*bf16", part_out_ptr="*fp32", part_lse_ptr="*fp32", scale_log2="fp32")
MLA_TYPES = dict(q_ptr="*bf16", kv_ptr="*bf16", out_ptr="*bf16", lse_ptr="*fp32", scale_log2="fp32")
TMA_TYPES = dict(MLA_TYPES, kv_c_desc="tensordesc<bf16[64,256]>", kv_r_desc="tensordesc<bf16[64,64]>")
GQA = dict(NUM_HEADS=H, NUM_KV_HEADS=H_KV, GROUP=H // H_KV, HEAD_DIM=D, BLOCK_SIZE=S, DOT_PRECISION="tf32")


def load_kernels() -> SimpleNamespace:
    """The kernel modules, decorated for the compiler. Only in a process of its own: the interpreter must not
    have been chosen before (TRITON_INTERPRET is read when a kernel is decorated), and the backend is told
    that a GPU is present, which compiling needs and this process never launches on."""
    os.environ["TRITON_INTERPRET"] = "0"
    os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")   # line numbers in the code would change the hash
    import torch
    import triton.language as tl

    torch.cuda.is_available = lambda: True
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from pagedkv_lib.kernels import backend
    if backend.configure() != backend.CUDA:
        raise SystemExit("kernel_sass.py runs as a script of its own: the kernels here were decorated for "
                         "Triton's interpreter already")
    from pagedkv_lib.kernels import (
        triton_cascade_attention,
        triton_decode_attention,
        triton_mla_decode,
        triton_mla_decode_tuned,
        triton_prefill_attention,
    )
    return SimpleNamespace(decode=triton_decode_attention, prefill=triton_prefill_attention,
                           cascade=triton_cascade_attention, mla=triton_mla_decode,
                           mla_tuned=triton_mla_decode_tuned, bf16=tl.bfloat16, torch=torch)


DECODE_SPLITS = {1: 1, 2: 4, 3: None}          # per version: one pass, four splits, the planned chunks


def decode_job(k, version: int) -> tuple:
    c = k.decode.choose_config(B, H, H_KV, D, N, DECODE_SPLITS[version], num_sms=SMS, interpreted=False,
                               version=version)
    constexprs = dict(GQA, DOT_DTYPE=k.bf16, BLOCK_G=c.block_g, BLOCK_N=c.block_n, BLOCK_D=c.block_d,
                      K_SCALE_PTR=False, V_SCALE_PTR=False, USE_PDL=False,
                      NUM_SLOTS=c.num_splits, BLOCK_B=16)                      # the last two: v2's, v3's
    return k.decode.KERNELS[version], PAGED, constexprs, dict(num_warps=c.num_warps, num_stages=c.num_stages)


def prefill_job(k) -> tuple:
    c = k.prefill.choose_prefill_config(H, H_KV, D, k.torch.bfloat16, interpreted=False)
    constexprs = dict(GQA, DOT_DTYPE=k.bf16, BLOCK_M=c.block_m, BLOCK_Q=c.block_m // (H // H_KV),
                      BLOCK_N=c.block_n, BLOCK_D=D, BLOCK_B=16, K_SCALE_PTR=False, V_SCALE_PTR=False)
    options = dict(num_warps=c.num_warps, num_stages=c.num_stages)
    return k.prefill._prefill_attention_kernel, PAGED, constexprs, options


def cascade_job(k) -> tuple:
    c = k.cascade.choose_cascade_config(64, H, H_KV, D, N, num_sms=SMS, interpreted=False)
    constexprs = dict(GQA, DOT_DTYPE=k.bf16, NUM_SLOTS=c.num_splits + 1, FIRST_SLOT=1, BLOCK_M=c.block_m,
                      BLOCK_N=c.block_n, BLOCK_D=c.block_d)
    options = dict(num_warps=c.num_warps, num_stages=c.num_stages)
    return k.cascade._shared_prefix_kernel, PAGED, constexprs, options


def mla_job(k) -> tuple:                       # launch_mla_decode's default tiles, two splits
    constexprs = dict(BLOCK_SIZE=64, BLOCK_H=16, BLOCK_C=512, BLOCK_R=64, BLOCK_N=32, NUM_SPLITS=2,
                      DOT_PRECISION="tf32", DOT_DTYPE=k.bf16)
    return k.mla._mla_decode_kernel, MLA_TYPES, constexprs, dict(num_warps=4, num_stages=2)


def mla_tuned_job(k, tma: bool) -> tuple:      # TUNED: the tuned kernel's measured best
    t = k.mla_tuned.TUNED
    constexprs = dict(C=512, R=64, BLOCK_SIZE=64, BLOCK_H=t["block_h"], BLOCK_N=t["block_n"], NUM_SPLITS=2,
                      USE_TMA=tma, DOT_PRECISION="tf32", DOT_DTYPE=k.bf16)
    return (k.mla_tuned._mla_decode_tuned_kernel, TMA_TYPES if tma else MLA_TYPES, constexprs,
            dict(num_warps=t["num_warps"], num_stages=t["num_stages"]))


KERNELS = {  # name: (modules) -> (kernel, argument types (beside compile_for_h100's), constexprs, options)
    "decode_v1": functools.partial(decode_job, version=1),
    "decode_v2": functools.partial(decode_job, version=2),
    "decode_v3": functools.partial(decode_job, version=3),
    "prefill": prefill_job,
    "cascade": cascade_job,
    "mla": mla_job,
    "mla_tuned": functools.partial(mla_tuned_job, tma=False),
    "mla_tuned_tma": functools.partial(mla_tuned_job, tma=True),
}


def compile_for_h100(kernel, types: dict, constexprs: dict, options: dict):
    """triton.compile of `kernel` for sm_90a: arguments in `constexprs` are constants, the others typed by
    `types` (default: *i32 for a name ending in _ptr, a block table or lengths; else i32)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature, constants, attrs = {}, {}, {}
    for i, name in enumerate(kernel.arg_names):
        if name in constexprs:
            signature[name] = "constexpr"
            constants[(i,)] = constexprs[name]
        else:
            signature[name] = types.get(name, "*i32" if name.endswith("_ptr") else "i32")
            pointer, integer = signature[name].startswith("*"), signature[name] == "i32"
            if pointer or integer and not kernel.params[i].do_not_specialize:
                attrs[(i,)] = [["tt.divisibility", 16]]   # module docstring: the JIT's specialisation
    return triton.compile(ASTSource(kernel, signature, constants, attrs), target=GPUTarget("cuda", 90, 32),
                          options=options)


def sass_and_usage(cubin: bytes) -> tuple[str, str]:
    """The SASS without addresses, and cuobjdump's resource line (REG, STACK, SHARED, LOCAL)."""
    import triton

    tool = triton.knobs.nvidia.cuobjdump.path
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass, usage = (subprocess.run([tool, flag, f.name], capture_output=True, text=True, check=True).stdout
                       for flag in ("-sass", "-res-usage"))
    sass = re.sub(r"/\*[0-9a-f]+\*/", "", sass)
    found = re.search(r"REG:\d+ STACK:\d+ SHARED:\d+ LOCAL:\d+", usage)
    return sass, found.group(0) if found else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", choices=[[], *KERNELS], help="kernels (default: all)")
    parser.add_argument("--sass", type=Path, help="write NAME.sass here")
    args = parser.parse_args()
    modules = load_kernels()
    for name in args.names or KERNELS:
        compiled = compile_for_h100(*KERNELS[name](modules))
        sass, usage = sass_and_usage(compiled.asm["cubin"])
        if args.sass:
            args.sass.mkdir(parents=True, exist_ok=True)
            (args.sass / f"{name}.sass").write_text(sass)
        print(f"{name:14s} {usage:40s} sass {hashlib.sha256(sass.encode()).hexdigest()[:16]}")


if __name__ == "__main__":
    main()
