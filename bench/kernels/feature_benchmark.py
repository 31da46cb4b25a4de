#!/usr/bin/env python3
"""Benchmarks the table-batched lookup (libemb_feature_capi.so, through ctypes) against PyTorch.

One batch of B samples and F features, each feature over its own float32 table, fixed-length bags
(pooling factor L ids each, uniform random ids) summed, in the KeyedJaggedTensor layout; the
answer is [B, sum of dims] (the KeyedTensor layout). In one process on one GPU, each method timed
with triton.testing.do_bench (median; do_bench zeroes a 256 MB buffer before each call, so L2 is
flushed and the rows come from HBM), or CUDA events where triton is missing:

  fused      ours, LaunchFeatureLookup: every feature in one kernel (emb_feature_lookup)
  per_table  ours, one LaunchLookup per feature, one after another, each into its own [B, dim]
             block (emb_feature_lookup_per_table; no concatenation)
  eager      PyTorch eager: F.embedding_bag per table, then torch.cat
  compile    torch.compile of the same function
  floor      ours, one LaunchLookup of all F x B bags of the same ids from ONE table (same rows
             read, same answer bytes, one launch): equal dims only
  baseline   with --baseline-lib, another build's fused kernel (other -D knobs), timed beside ours

Before timing, the fused answer and the per-table blocks are checked against eager's (allclose;
"exact" says whether the bits agree too); an answer that fails is reported and not ranked.

Needs torch (CUDA) and triton; no gRPC. Usage, from a bundle made by shared/tools/bundle-libs
(libemb_feature_capi.so and its libraries in one folder):
  LD_LIBRARY_PATH=.gpu python3 bench/kernels/feature_benchmark.py \\
      --lib .gpu/libemb_feature_capi.so --out feature_bench.md [--quick]
"""

import argparse
import ctypes
import datetime
import json
import os
import sys
import time

import torch
import torch._dynamo
import torch.nn.functional as F

from bag_benchmark import Budget, check_rc, compare, ptr, write_outputs  # beside this file
from gather_benchmark import load_cudart, prepare_run  # beside this file

FLOAT32 = 1
POOL_SUM = 1
ROWS = 100_000
# Mixed dims: 26 tables, as a DLRM-like model's spread of widths.
MIXED_DIMS = [16] * 6 + [32] * 6 + [64] * 6 + [128] * 4 + [256] * 4


def build_cases(quick):
    """(name, dims, batch, pooling factor) of each case."""
    cases = []
    for batch in (512, 4096):
        for L in (1, 20):
            cases.append((f"26 x 100k x 128, B {batch}, L {L}", [128] * 26, batch, L))
    cases.append(("26 mixed dims 16..256, B 4096, L 20", MIXED_DIMS, 4096, 20))
    cases.append(("26 mixed dims 16..256, B 512, L 1", MIXED_DIMS, 512, 1))
    if quick:
        return [cases[0], cases[1], cases[5]]
    return cases


def load_lib(path):
    load_cudart()
    lib = ctypes.CDLL(path)
    vp, i32, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64
    pi32, pi64 = ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int64)
    lib.emb_feature_plan.argtypes = [i32, ctypes.POINTER(vp), pi32, pi64, pi64, i32, pi32, pi32,
                                     pi32, pi64, i64, i64, i32]
    lib.emb_feature_plan.restype = vp
    lib.emb_feature_plan_free.argtypes = [vp]
    lib.emb_feature_plan_free.restype = None
    lib.emb_feature_lookup.argtypes = [vp, vp, vp, vp, vp, vp, vp]
    lib.emb_feature_lookup.restype = i32
    lib.emb_feature_lookup_per_table.argtypes = [vp, vp, vp, vp, vp, pi64, vp, vp]
    lib.emb_feature_lookup_per_table.restype = i32
    return lib


def c_array(ctype, values):
    return (ctype * len(values))(*values)


class FeaturePlan:
    """A plan of pooled-sum features, feature f over tables[f] (owned by the caller)."""

    def __init__(self, lib, tables, batch):
        self.lib = lib
        dims = [t.shape[1] for t in tables]
        cols = [sum(dims[:f]) for f in range(len(dims))]
        n = len(tables)
        self.plan = lib.emb_feature_plan(
            n, c_array(ctypes.c_void_p, [t.data_ptr() for t in tables]),
            c_array(ctypes.c_int, [FLOAT32] * n), c_array(ctypes.c_int64, [t.shape[0] for t in tables]),
            c_array(ctypes.c_int64, dims), n, c_array(ctypes.c_int, list(range(n))),
            c_array(ctypes.c_int, [POOL_SUM] * n), c_array(ctypes.c_int, [0] * n),
            c_array(ctypes.c_int64, cols), batch, sum(dims), FLOAT32)
        if not self.plan:
            raise RuntimeError("emb_feature_plan failed")

    def __del__(self):
        if getattr(self, "plan", None):
            self.lib.emb_feature_plan_free(self.plan)


def time_us(fn):
    """fn's median time: triton.testing.do_bench, or CUDA events where triton is missing."""
    try:
        import triton.testing
    except ImportError:
        return events_us(fn)
    return triton.testing.do_bench(fn, return_mode="median") * 1e3


def events_us(fn, warmup=5, reps=20):
    """Median of `reps` CUDA-event timings of fn, each after a 256 MB write that flushes L2."""
    flush = torch.empty(64 << 20, dtype=torch.float32, device="cuda")
    times = []
    for i in range(warmup + reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(end) * 1e3)
    return sorted(times)[len(times) // 2]


def torch_lookup(ids_list, tables, offsets):
    """PyTorch's KeyedTensor of sum-pooled features: embedding_bag per table, then cat."""
    return torch.cat([F.embedding_bag(i, w, offsets, mode="sum", include_last_offset=True)
                      for i, w in zip(ids_list, tables)], dim=1)


def run_case(case, lib, budget, stream, gen, results, baseline_lib=None):
    name, dims, batch, L = case
    n_features = len(dims)
    row = {"case": name, "batch": batch, "pooling": L, "features": n_features, "dims": dims,
           "us": {}, "check": {}, "notes": []}
    tables = [torch.randn(ROWS, d, device="cuda", generator=gen) for d in dims]
    per_feature = batch * L
    ids = torch.randint(0, ROWS, (n_features * per_feature,), device="cuda", dtype=torch.int64,
                        generator=gen)
    offsets = torch.arange(0, n_features * per_feature + 1, L, device="cuda", dtype=torch.int64)
    ids_list = [ids[f * per_feature:(f + 1) * per_feature] for f in range(n_features)]
    feature_offsets = torch.arange(0, per_feature + 1, L, device="cuda", dtype=torch.int64)
    width = sum(dims)
    pooled = torch.empty(batch, width, device="cuda", dtype=torch.float32)
    blocks = torch.empty(batch * width, device="cuda", dtype=torch.float32)
    h_ids = c_array(ctypes.c_int64, [per_feature] * n_features)
    plan = FeaturePlan(lib, tables, batch)
    base_plan = FeaturePlan(baseline_lib, tables, batch) if baseline_lib else None

    def fused():
        check_rc(lib.emb_feature_lookup(plan.plan, ptr(ids), ptr(offsets), None, ptr(pooled), None,
                                        stream), "emb_feature_lookup")

    def per_table():
        check_rc(lib.emb_feature_lookup_per_table(plan.plan, ptr(ids), ptr(offsets), None, None,
                                                  h_ids, ptr(blocks), stream),
                 "emb_feature_lookup_per_table")

    def eager():
        return torch_lookup(ids_list, tables, feature_offsets)

    ref = eager()
    tol = dict(rtol=1e-4, atol=1e-5 * max(float(ref.abs().max()), 1.0))
    fns = {}
    pooled.fill_(float("nan"))
    fused()
    row["check"]["fused"] = compare(pooled, ref, **tol)
    fns["fused"] = fused
    if base_plan is not None:
        def baseline():
            check_rc(baseline_lib.emb_feature_lookup(base_plan.plan, ptr(ids), ptr(offsets), None,
                                                     ptr(pooled), None, stream), "baseline")
        pooled.fill_(float("nan"))
        baseline()
        row["check"]["baseline"] = compare(pooled, ref, **tol)
        fns["baseline"] = baseline
    blocks.fill_(float("nan"))
    per_table()
    got, col, start = torch.empty_like(ref), 0, 0
    for d in dims:
        got[:, col:col + d] = blocks[start:start + batch * d].view(batch, d)
        col, start = col + d, start + batch * d
    row["check"]["per_table"] = compare(got, ref, **tol)
    fns["per_table"] = per_table
    row["check"]["eager"] = (True, True)
    fns["eager"] = eager
    compiled, got, note = budget.compile(torch_lookup, ids_list, tables, feature_offsets)
    row["notes"].append(f"compile {note}")
    if compiled is not None:
        row["check"]["compile"] = compare(got, ref, **tol)
        fns["compile"] = lambda: compiled(ids_list, tables, feature_offsets)
    floor_plan = None
    if len(set(dims)) == 1:
        floor_plan = FeaturePlan(lib, tables[:1], n_features * batch)
        floor_ids = c_array(ctypes.c_int64, [n_features * per_feature])

        def floor():
            check_rc(lib.emb_feature_lookup_per_table(floor_plan.plan, ptr(ids), ptr(offsets),
                                                      None, None, floor_ids, ptr(blocks), stream),
                     "floor")
        fns["floor"] = floor
        row["check"]["floor"] = (True, True)  # another table's rows: not comparable
    for k, fn in fns.items():
        row["us"][k] = time_us(fn)
    finish_row(row)
    results.append(row)
    print(summary_line(row), flush=True)
    del plan, base_plan, floor_plan, tables, ids, offsets, pooled, blocks, ref, got
    torch.cuda.empty_cache()


def finish_row(row):
    """Ours (fused) against the best correct torch method, the per-table launches and the floor."""
    us, ok = row["us"], row["check"]
    torch_ok = {k: us[k] for k in ("eager", "compile") if k in us and ok.get(k, (False,))[0]}
    if torch_ok:
        row["best_torch"] = min(torch_ok, key=torch_ok.get)
        row["vs_torch"] = torch_ok[row["best_torch"]] / us["fused"]
    if ok["per_table"][0]:
        row["vs_per_table"] = us["per_table"] / us["fused"]
    if "floor" in us:
        row["vs_floor"] = us["floor"] / us["fused"]
    if "baseline" in us:
        row["vs_baseline"] = us["baseline"] / us["fused"]
    if not ok["fused"][0]:
        row["notes"].append("FUSED DIFFERS FROM TORCH")
    if not ok["per_table"][0]:
        row["notes"].append("PER-TABLE DIFFERS FROM TORCH")


def summary_line(row):
    cells = " ".join(f"{k} {v:.1f}" for k, v in row["us"].items())
    return f"{row['case']:40s} us: {cells}  {'; '.join(row['notes'])}"


def cell(row, k):
    if k not in row["us"]:
        return "n/a"
    return f"{row['us'][k]:.1f}{'' if row['check'].get(k, (True,))[0] else ' (WRONG)'}"


def ratio(row, k):
    return f"{row[k]:.2f}x" if k in row else "n/a"


def render(meta, results):
    lines = [f"GPU: {meta['gpu']} ({meta['nvidia_smi']}); torch {meta['torch']} (CUDA "
             f"{meta['cuda']}), triton {meta['triton']}; {meta['date']}",
             f"Command: {meta['command']}",
             f"Timing: {meta['timing']}. Each answer checked against torch eager once (allclose) "
             "before timing; WRONG marks one that failed, and it is not ranked. Ratios: the other "
             "method's time / fused (> 1: fused faster). Tables: float32, 100,000 rows each, one "
             "per feature; sum pooling, fixed pooling factor L, uniform random ids.", "",
             "| case | fused | per-table | torch eager | torch.compile | one-table floor | "
             "vs best torch | vs per-table | vs floor | baseline | vs baseline | "
             "fused exact vs eager |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in results:
        exact = ("yes" if r["check"]["fused"][1] else "no (allclose)" if r["check"]["fused"][0]
                 else "WRONG")
        best = f"{ratio(r, 'vs_torch')} ({r['best_torch']})" if "best_torch" in r else "n/a"
        lines.append(f"| {r['case']} | {cell(r, 'fused')} | {cell(r, 'per_table')} | "
                     f"{cell(r, 'eager')} | {cell(r, 'compile')} | {cell(r, 'floor')} | {best} | "
                     f"{ratio(r, 'vs_per_table')} | {ratio(r, 'vs_floor')} | "
                     f"{cell(r, 'baseline')} | {ratio(r, 'vs_baseline')} | {exact} |")
    notes = [f"{r['case']}: {'; '.join(r['notes'])}" for r in results if r["notes"]]
    if notes or meta["errors"]:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in notes + meta["errors"]]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="libemb_feature_capi.so")
    ap.add_argument("--out", required=True, help="markdown path; JSON goes next to it")
    ap.add_argument("--quick", action="store_true", help="three cases only")
    ap.add_argument("--baseline-lib", default="",
                    help="another build's libemb_feature_capi.so: its fused kernel timed beside")
    ap.add_argument("--compile-budget-s", type=float, default=300.0,
                    help="stop compiling once torch.compile took this long in all")
    args = ap.parse_args()

    lib = load_lib(args.lib)
    baseline_lib = load_lib(args.baseline_lib) if args.baseline_lib else None
    try:
        import triton
        triton_version, timing = triton.__version__, ("triton.testing.do_bench, median; L2 "
                                                      "flushed before every call")
    except ImportError:
        triton_version, timing = "missing", "CUDA events, median of 20 after 5 warm-ups"
    dev = torch.cuda.current_device()
    smi = prepare_run("name,driver_version,clocks.max.sm")
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "gpu": torch.cuda.get_device_name(dev), "nvidia_smi": smi, "torch": torch.__version__,
            "cuda": torch.version.cuda, "triton": triton_version, "timing": timing,
            "command": " ".join(sys.argv), "errors": []}
    print(f"# {meta['gpu']} | torch {meta['torch']} | triton {meta['triton']}", flush=True)

    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    budget = Budget(args.compile_budget_s)
    results = []
    with torch.no_grad():
        for case in build_cases(args.quick):
            try:
                run_case(case, lib, budget, stream, gen, results, baseline_lib)
            except Exception as e:  # noqa: BLE001
                meta["errors"].append(f"case {case[0]} failed: {e!r}")
                print(meta["errors"][-1], flush=True)
                torch.cuda.empty_cache()
            write_outputs(args.out, render(meta, results), meta, results)
    print(render(meta, results))
    wrong = [r for r in results if not (r["check"]["fused"][0] and r["check"]["per_table"][0])]
    sys.exit(1 if wrong or meta["errors"] else 0)


if __name__ == "__main__":
    main()
