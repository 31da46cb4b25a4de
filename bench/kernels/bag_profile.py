#!/usr/bin/env python3
"""One launch each of the bag kernel and cuEmbed on one pooled case, and of the int8 dequantizing
gather, for a profiler (ncu) to look at: no timing, no torch.compile. Same libraries and cases as
bag_benchmark.py.

  ncu --clock-control none -k regex:'BagKernel|EmbeddingLookUpKernel|GatherKernel' \\
      python3 bench/kernels/bag_profile.py --lib .gpu/libemb_bag_capi.so \\
      --cuembed-lib .gpu/libemb_cuembed_capi.so [--case 1]
"""

import argparse
import ctypes

import torch

import bag_benchmark as bb


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--gather-lib", default="")
    ap.add_argument("--cuembed-lib", default="")
    ap.add_argument("--case", type=int, default=1, help="index into bag_benchmark.POOLED_CASES")
    args = ap.parse_args()
    libs = bb.load_libs(args)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    bags, per_bag, dim, rows = bb.POOLED_CASES[args.case]
    n = bags * per_bag
    weight = torch.randn(rows, dim, device="cuda", generator=gen)
    ids = torch.randint(0, rows, (n,), device="cuda", dtype=torch.int64, generator=gen)
    offsets = torch.arange(0, n + 1, per_bag, device="cuda", dtype=torch.int64)
    out = torch.empty(bags, dim, device="cuda", dtype=torch.float32)
    bb.check_rc(libs["bags"].emb_bags(bb.ptr(weight), bb.FLOAT32, rows, dim, bb.ptr(ids),
                                      bb.ptr(offsets), bags, n, None, None, bb.ptr(out), bb.FLOAT32,
                                      stream), "emb_bags")
    if libs["cuembed"] is not None:
        bb.check_rc(libs["cuembed"].emb_cuembed_forward(bb.ptr(weight), dim, bb.ptr(ids),
                                                        bb.ptr(offsets), bags, None, 0,
                                                        bb.ptr(out), stream),
                    "emb_cuembed_forward")
    # The int8 gather of the first gather case: 65,536 ids of 1M rows x 128.
    rows, dim, n = 1 << 20, 128, 65536
    q8 = bb.quantize_int8(torch.randn(rows, dim, device="cuda", generator=gen))
    ids = torch.randint(0, rows, (n,), device="cuda", dtype=torch.int64, generator=gen)
    out16 = torch.empty(n, dim, device="cuda", dtype=torch.float16)
    bb.check_rc(libs["bags"].emb_bags(bb.ptr(q8), bb.INT8_ROWWISE, rows, dim, bb.ptr(ids), None,
                                      n, n, None, None, bb.ptr(out16), bb.FLOAT16, stream),
                "emb_bags")
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
