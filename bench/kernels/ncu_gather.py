"""One call of each gather kernel under study on 16 KB-row shapes (float32, dim 4096, 16384
uniform random ids), for Nsight Compute: run it under `ncu --kernel-name regex:Gather`.

Usage (on the GPU host, next to gather_benchmark.py; see docs/benchmarks.md, section 1):
  ncu --clock-control none --kernel-name regex:Gather --metrics ... \\
      python3 ncu_gather.py --lib build/bench/kernels/libemb_gather_capi.so
Each call's answer is checked against PyTorch's.
"""
import argparse
import ctypes
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gather_benchmark as gb  # noqa: E402  (next to this file)

# (vocab, [(variant bits of emb_gather_ex, max_blocks)]): the units default (21, no grid cap),
# and row owners (81) on one and on four waves of id slices.
CALLS = [(1024, [(21, 1 << 30), (81, -1), (81, -4)]),
         (4096, [(21, 1 << 30), (81, -1)]),
         (131072, [(21, 1 << 30)])]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True, help="path of libemb_gather_capi.so")
    args = ap.parse_args()
    lib = gb.load_lib(args.lib)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    n, dim = 16384, 4096
    for vocab, calls in CALLS:
        weight = torch.randn(vocab, dim, device="cuda", generator=gen)
        ids = torch.randint(0, vocab, (n,), device="cuda", generator=gen)
        out = torch.empty(n, dim, device="cuda")
        for variant, max_blocks in calls:
            rc = lib.emb_gather_ex(ctypes.c_void_p(weight.data_ptr()), 1, vocab, dim,
                                   ctypes.c_void_p(ids.data_ptr()), n, ctypes.c_void_p(out.data_ptr()),
                                   1, max_blocks, variant, stream)
            torch.cuda.synchronize()
            print(f"vocab {vocab} variant {variant} max_blocks {max_blocks}: rc {rc} "
                  f"exact {torch.equal(out, weight[ids])}", flush=True)


if __name__ == "__main__":
    main()
