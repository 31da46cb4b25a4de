#!/usr/bin/env python3
"""Benchmarks our CUDA gather (libemb_gather_capi.so, through ctypes) against PyTorch.

For each case, in one run on one GPU: our gather, eager torch.nn.functional.embedding,
torch.compile of it, and the floor = (answer bytes + id bytes + distinct rows x row bytes) /
device-to-device copy bandwidth (a large torch copy, bytes read + written per second).

Timing: CUDA events around one call, median of --reps calls after --warmup calls, rotating among
--id-sets random id sets (and, for ours, as many answer buffers). Before each timed call the GPU
is kept busy (torch.cuda._sleep) so that host launch overhead stays off the clock, and L2 is
flushed by reading a buffer several times its size, so every case starts cold: the table's rows
come from HBM once, as the floor counts them.

Each case is also timed the way kernel leaderboards time it, with triton.testing.do_bench
(median, L2 flushed between calls by do_bench itself), for ours, eager, torch.compile and, given
--liger, Liger-Kernel's Triton embedding forward (src/liger_kernel/ops/experimental/embedding.py
of linkedin/Liger-Kernel: pass the path of a copy kept outside the repository, never committed;
without it the Liger column says "skipped" and why).

Needs torch (CUDA), triton for torch.compile and do_bench; no gRPC. Usage (the library is built
as build/bench/kernels/libemb_gather_capi.so; scripts/gpu-check runs it from a bundle):
  LD_LIBRARY_PATH=DIR python3 bench/kernels/gather_benchmark.py --lib DIR/libemb_gather_capi.so \
      --out bench.md [--liger PATH/embedding.py]
"""

import argparse
import ctypes
import datetime
import glob
import json
import math
import os
import statistics
import subprocess
import sys
import time
import types

import torch
import torch._dynamo
import torch.nn.functional as F

DTYPES = {"float32": (torch.float32, 1), "float16": (torch.float16, 2), "bfloat16": (torch.bfloat16, 3)}


# The kernel variants of emb_gather_ex (gather_capi.cc, gather_variant.h): bits 0-1 unroll level,
# bit 2 interleaved, bit 3 plain stores, bit 4 L2 evict_last table loads, bits 5-6 path (0 units,
# 1 slice owners, 2 row owners; the owners paths ignore bit 2), bit 7 (with path 0) column passes.
UNITS, SLICES, OWNERS = 0, 32, 64
PASSES = 128  # bit 7: units in column passes
VARIANTS = ([v for v in range(32)]
            + [OWNERS + v for v in range(32) if (v & 3) < 3 and not v & 4]
            + [SLICES + v for v in range(32) if not v & 4]
            + [PASSES + v for v in (4 + 16, 1 + 4 + 16, 1 + 4 + 8 + 16, 2 + 4 + 16, 3 + 4 + 16, 1 + 4)])
PATH_NAMES = {1: "units", 3: "owners", 4: "slices", 5: "passes"}
PATH_OF_VARIANT = {SLICES: 4, OWNERS: 3}


def variant_label(v, suffix=""):
    kind = "c" if v & PASSES else {UNITS: "u", SLICES: "s", OWNERS: "o"}[v & 96]
    spans = "" if v & 96 else ("i" if v & 4 else "s")
    return f"{kind}{v & 3}{spans}{'p' if v & 8 else 'c'}{'L' if v & 16 else ''}{suffix}"


def grid_options(v):
    """(label suffix, max_blocks) of the grids a variant is timed on: every variant on one resident
    wave (units: a persistent grid; row owners: id slices for one wave); interleaved units also
    without a cap (one tile per block: the default's shape); row owners also with id slices for
    four waves."""
    if v & 96 == UNITS:
        return [("", -1), ("-nocap", 1 << 30)] if v & 4 else [("", -1)]
    if v & 96 == OWNERS:
        return [("", -1), ("-w4", -4)]
    return [("", -1)]


def build_cases(quick):
    cases = []
    vocabs = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
    for batch, seq, hidden in [(8, 2048, 4096), (32, 512, 768)]:
        for vocab in vocabs:
            cases.append(("float32", vocab, batch, seq, hidden))
    for dt in ["float16", "bfloat16"]:
        cases.append((dt, 131072, 8, 2048, 4096))
        cases.append((dt, 1024, 32, 512, 768))
        cases.append((dt, 131072, 32, 512, 768))
    for dt, vocab, dim in [("float32", 4096, 300), ("float32", 131072, 300), ("float32", 4096, 1000),
                           ("float32", 131072, 1000), ("float16", 131072, 300),
                           ("bfloat16", 131072, 1000)]:
        cases.append((dt, vocab, 32, 512, dim))
    if quick:
        cases = cases[::7]
    return cases


def load_cudart():
    """Our libraries need libcudart.so.13: reuse the one torch loaded (same soname) if any; else
    the wheel's copy next to torch; else rely on LD_LIBRARY_PATH (bag_benchmark.py uses it too)."""
    torch.cuda.init()
    try:
        ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        sp = os.path.dirname(os.path.dirname(torch.__file__))
        for cand in glob.glob(os.path.join(sp, "nvidia", "**", "libcudart.so.13"), recursive=True):
            ctypes.CDLL(cand, mode=ctypes.RTLD_GLOBAL)
            break


def prepare_run(smi_fields):
    """What nvidia-smi says of the GPU (the fields asked), and torch.compile allowed enough
    recompiles for every case (bag_benchmark.py uses it too)."""
    try:
        smi = subprocess.run(["nvidia-smi", f"--query-gpu={smi_fields}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e:  # noqa: BLE001
        smi = f"nvidia-smi failed: {e}"
    for knob in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                 "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 1024)
    return smi


def load_lib(path):
    load_cudart()
    lib = ctypes.CDLL(path)
    lib.emb_gather_ex.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_int64,
                                  ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int,
                                  ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    lib.emb_gather_ex.restype = ctypes.c_int
    lib.emb_gather_path.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_int64,
                                    ctypes.c_int64, ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.emb_gather_path.restype = ctypes.c_int
    lib.emb_gather_tuning.argtypes = [ctypes.POINTER(ctypes.c_int)] * 3
    lib.emb_gather_tuning.restype = ctypes.c_int
    return lib


class Timer:
    def __init__(self, reps, warmup, l2_bytes):
        self.reps = reps
        self.warmup = warmup
        # Reading 4x L2 evicts the table and writes back the previous answer's dirty lines.
        self.flush = torch.ones(max(4 * l2_bytes, 256 << 20) // 4, dtype=torch.float32, device="cuda")
        self.flush_out = torch.empty((), dtype=torch.float32, device="cuda")
        self.sleep_cycles = 200_000  # ~100 us at 2 GHz: the host queues the call meanwhile

    def time_us(self, fn, n_sets):
        for i in range(self.warmup):
            fn(i % n_sets)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(self.reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(self.reps)]
        for i in range(self.reps):
            torch.cuda._sleep(self.sleep_cycles)
            torch.sum(self.flush, dim=0, out=self.flush_out)
            starts[i].record()
            fn(i % n_sets)
            ends[i].record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends))


def load_liger(path):
    """Liger's forward, (weight, ids) -> rows, from a copy of its embedding.py; (None, why) when
    there is none. Its one import from the rest of Liger (ensure_contiguous) is stubbed."""
    if not path:
        return None, "skipped: --liger not given"
    if not os.path.isfile(path):
        return None, f"skipped: {path} not found"
    utils = types.ModuleType("liger_kernel.ops.utils")
    utils.ensure_contiguous = lambda fn: fn  # the benchmark passes contiguous tensors
    for name in ("liger_kernel", "liger_kernel.ops"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["liger_kernel.ops.utils"] = utils
    namespace = {"__name__": "liger_embedding"}
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), namespace)  # noqa: S102 (a local benchmark copy)
    fn = namespace["LigerEmbeddingFunction"]

    def forward(weight, ids):
        with torch.no_grad():
            return fn.apply(weight, ids)
    return forward, f"Liger-Kernel forward from {path}"


def do_bench_us(fn, n_sets):
    """triton.testing.do_bench's median (it flushes L2 before every call), rotating id sets."""
    import triton.testing
    calls = [0]

    def call():
        fn(calls[0] % n_sets)
        calls[0] += 1
    return triton.testing.do_bench(call, return_mode="median") * 1e3


def measure_bandwidths(timer):
    n = 1 << 30  # bytes per buffer
    src = torch.empty(n // 4, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    out = {}
    t = timer.time_us(lambda i: dst.copy_(src), 1)
    out["copy_GBps"] = 2 * n / t / 1e3  # read + write
    t = timer.time_us(lambda i: dst.fill_(1.5), 1)
    out["write_GBps"] = n / t / 1e3
    s = torch.empty((), dtype=torch.float32, device="cuda")
    t = timer.time_us(lambda i: torch.sum(src, dim=0, out=s), 1)
    out["read_GBps"] = n / t / 1e3
    del src, dst
    torch.cuda.empty_cache()
    return out


def measure_fixed_costs(timer, lib):
    """What a call costs with (almost) no bytes to move, timed like the cases: one id of a 3 KB
    row through our gather, and a 64-byte torch copy. The launch, the dependent id and row
    loads and the drain are in it; no case can run faster."""
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    w = torch.randn(16, 768, device="cuda")
    ids = torch.tensor([3], device="cuda", dtype=torch.int64)
    out = torch.empty(1, 768, device="cuda")

    def one(i):
        rc = lib.emb_gather_ex(ctypes.c_void_p(w.data_ptr()), 1, 16, 768, ctypes.c_void_p(ids.data_ptr()),
                               1, ctypes.c_void_p(out.data_ptr()), 1, 0, -1, stream)
        if rc != 0:
            raise RuntimeError(f"emb_gather: cudaError {rc}")
    a = torch.ones(16, device="cuda")
    b = torch.empty_like(a)
    return {"gather_one_id": timer.time_us(one, 1), "copy_64_bytes": timer.time_us(lambda i: b.copy_(a), 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", required=True, help="markdown path; JSON goes next to it")
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--id-sets", type=int, default=4)
    ap.add_argument("--compile-budget-s", type=float, default=150.0,
                    help="skip torch.compile for the remaining cases once compiling took this long")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-sweep", action="store_true", help="time only the default variant")
    ap.add_argument("--liger", default="",
                    help="path of a copy of Liger-Kernel's ops/experimental/embedding.py")
    ap.add_argument("--no-do-bench", action="store_true", help="skip the triton do_bench timings")
    ap.add_argument("--baseline-lib", default="",
                    help="a second libemb_gather_capi.so (another build, e.g. before a change): its "
                         "default gather is checked against eager and timed beside ours, in the "
                         "same process and harness (column 'baseline')")
    ap.add_argument("--do-bench-rounds", type=int, default=1,
                    help="do_bench rounds per case, the kernels taking turns; the median is kept")
    args = ap.parse_args()
    args.liger_fn, liger_note = load_liger(args.liger)

    t_start = time.time()
    lib = load_lib(args.lib)
    args.baseline = load_lib(args.baseline_lib) if args.baseline_lib else None
    dev = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(dev)
    l2_bytes = getattr(props, "L2_cache_size", 50 << 20)
    sms, bps, tpb = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    rc = lib.emb_gather_tuning(ctypes.byref(sms), ctypes.byref(bps), ctypes.byref(tpb))
    if rc != 0:
        sys.exit(f"emb_gather_tuning failed: cudaError {rc}")
    smi = prepare_run("name,driver_version,memory.total,clocks.max.sm,clocks.max.mem")

    timer = Timer(args.reps, args.warmup, l2_bytes)
    bw = measure_bandwidths(timer)
    fixed = measure_fixed_costs(timer, lib)
    copy_bw = bw["copy_GBps"] * 1e9
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name(dev), "nvidia_smi": smi, "torch": torch.__version__,
        "cuda": torch.version.cuda, "sms": props.multi_processor_count, "l2_bytes": l2_bytes,
        "gather_tuning": {"num_sms": sms.value, "blocks_per_sm": bps.value, "threads_per_block": tpb.value},
        "bandwidth_GBps": bw, "fixed_us": fixed, "reps": args.reps, "id_sets": args.id_sets,
        "command": " ".join(sys.argv), "liger": liger_note,
    }
    print(f"# {meta['gpu']} | torch {meta['torch']} | {smi}", flush=True)
    print(f"# copy {bw['copy_GBps']:.0f} GB/s (read+write), write-only {bw['write_GBps']:.0f} GB/s, "
          f"read-only {bw['read_GBps']:.0f} GB/s; gather grid {sms.value} SMs x {bps.value} blocks "
          f"x {tpb.value} threads", flush=True)
    print(f"# fixed costs (us): {fixed}", flush=True)

    results = []
    budget = {"compile_spent": 0.0}
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    for case in build_cases(args.quick):
        try:
            run_case(case, args, lib, timer, copy_bw, stream, gen, results, meta, t_start, budget)
        except Exception as e:  # noqa: BLE001
            print(f"case {case} failed: {e!r}", flush=True)
            torch.cuda.empty_cache()

    print(render_markdown(meta, results, t_start))
    if args.baseline is not None:
        print(render_baseline(results))
    write_outputs(args.out, meta, results, t_start)


def run_case(case, args, lib, timer, copy_bw, stream, gen, results, meta, t_start, budget):
    (dt, vocab, batch, seq, dim) = case
    tdtype, tcode = DTYPES[dt]
    esize = torch.empty((), dtype=tdtype).element_size()
    n = batch * seq
    weight = torch.randn(vocab, dim, device="cuda", generator=gen).to(tdtype)
    id_sets = [torch.randint(0, vocab, (batch, seq), device="cuda", dtype=torch.int64, generator=gen)
               for _ in range(args.id_sets)]
    outs = [torch.empty(batch, seq, dim, device="cuda", dtype=tdtype) for _ in range(args.id_sets)]
    distinct = statistics.mean(torch.unique(ids).numel() for ids in id_sets)
    floor_bytes = n * dim * esize + n * 8 + distinct * dim * esize
    floor_us = floor_bytes / copy_bw * 1e6
    name = f"{dt} vocab={vocab} ({batch},{seq},{dim})"

    def ours(i, max_blocks=0, variant=-1):
        rc = lib.emb_gather_ex(ctypes.c_void_p(weight.data_ptr()), tcode, vocab, dim,
                               ctypes.c_void_p(id_sets[i].data_ptr()), n,
                               ctypes.c_void_p(outs[i].data_ptr()), tcode, max_blocks, variant,
                               stream)
        if rc != 0:
            raise RuntimeError(f"emb_gather: cudaError {rc}")

    def path_of(variant):
        return lib.emb_gather_path(ctypes.c_void_p(weight.data_ptr()), tcode, vocab, dim, n,
                                   ctypes.c_void_p(outs[0].data_ptr()), tcode, variant)

    def baseline(i):
        rc = args.baseline.emb_gather_ex(ctypes.c_void_p(weight.data_ptr()), tcode, vocab, dim,
                                         ctypes.c_void_p(id_sets[i].data_ptr()), n,
                                         ctypes.c_void_p(outs[i].data_ptr()), tcode, 0, -1, stream)
        if rc != 0:
            raise RuntimeError(f"baseline emb_gather: cudaError {rc}")

    # Correctness first: ours (and the baseline) must equal eager bit for bit.
    ref = F.embedding(id_sets[0], weight)
    baseline_exact = None
    if args.baseline is not None:
        outs[0].fill_(float("nan"))
        baseline(0)
        baseline_exact = bool(torch.equal(outs[0], ref))
    outs[0].fill_(float("nan"))
    ours(0)
    exact = bool(torch.equal(outs[0], ref))

    row = {"case": name, "dtype": dt, "vocab": vocab, "batch": batch, "seq": seq, "dim": dim,
           "ids": n, "distinct_rows": distinct, "floor_bytes": floor_bytes, "floor_us": floor_us,
           "exact": exact, "path": PATH_NAMES.get(path_of(-1), "?")}
    row["ours_us"] = timer.time_us(ours, args.id_sets)
    if args.baseline is not None:
        row["baseline_exact"] = baseline_exact
        row["baseline_us"] = timer.time_us(baseline, args.id_sets)
    # The variant sweep: every variant on one resident wave (a persistent grid), interleaved ones
    # also without a grid cap (one tile per block: the default's shape). Each is checked against
    # eager once.
    sweep = {}
    if not args.no_sweep:
        for v in VARIANTS:
            # Skip an owners variant that would fall back to units (it would time a units
            # kernel), and owners where ids < rows (each block would read every row, mostly
            # unused).
            if v & 96 and (path_of(v) != PATH_OF_VARIANT[v & 96] or n < vocab):
                continue
            for suffix, mb in grid_options(v):
                outs[0].fill_(float("nan"))
                ours(0, mb, v)
                if not torch.equal(outs[0], ref):
                    row["exact"] = exact = False
                    print(f"variant {variant_label(v, suffix)} differs from eager", flush=True)
                sweep[variant_label(v, suffix)] = timer.time_us(
                    lambda i, mb=mb, v=v: ours(i, mb, v), args.id_sets)
    row["sweep_us"] = sweep
    if sweep:
        best = min(sweep, key=sweep.get)
        row["best_variant"], row["best_us"] = best, sweep[best]
    else:
        row["best_variant"], row["best_us"] = "default", row["ours_us"]
    row["eager_us"] = timer.time_us(lambda i: F.embedding(id_sets[i], weight), args.id_sets)

    row["compile_us"] = None
    row["compile_s"] = None
    if budget["compile_spent"] < args.compile_budget_s:
        try:
            torch._dynamo.reset()
            fn = torch.compile(lambda ids, w: F.embedding(ids, w), dynamic=False)
            t0 = time.time()
            got = fn(id_sets[0], weight)
            torch.cuda.synchronize()
            row["compile_s"] = time.time() - t0
            budget["compile_spent"] += row["compile_s"]
            row["compile_exact"] = bool(torch.equal(got, ref))
            del got
            row["compile_us"] = timer.time_us(lambda i: fn(id_sets[i], weight), args.id_sets)
        except Exception as e:  # noqa: BLE001
            row["compile_error"] = repr(e)[:300]
            budget["compile_spent"] = args.compile_budget_s  # don't retry a broken torch.compile
            print(f"torch.compile failed: {row['compile_error']}", flush=True)
    # The leaderboards' harness: do_bench for ours and each peer, side by side.
    if not args.no_do_bench:
        fns = {"ours": ours, "eager": lambda i: F.embedding(id_sets[i], weight)}
        if args.baseline is not None:
            fns["baseline"] = baseline
        if row["compile_us"]:
            fns["compile"] = lambda i: fn(id_sets[i], weight)
        if args.liger_fn is not None:
            got = args.liger_fn(weight, id_sets[0])
            row["liger_exact"] = bool(torch.equal(got, ref))
            del got
            fns["liger"] = lambda i: args.liger_fn(weight, id_sets[i])
        # Each round times every kernel once, starting with a different one each round, so that a
        # slow moment of the GPU falls on all of them; a kernel's figure is its rounds' median.
        names = list(fns)
        rounds = {name: [] for name in names}
        for k in range(args.do_bench_rounds):
            for name in names[k % len(names):] + names[:k % len(names)]:
                rounds[name].append(do_bench_us(fns[name], args.id_sets))
        row["do_bench_us"] = {name: statistics.median(ts) for name, ts in rounds.items()}
        row["do_bench_rounds_us"] = rounds
    # A plain copy moving as many bytes as the floor counts (half read, half written): what
    # any kernel of this size achieves, launch and ramp-up included.
    half = int(floor_bytes // 2) // 16 * 4
    src = torch.ones(half, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    row["same_bytes_copy_us"] = timer.time_us(lambda i: dst.copy_(src), 1)
    del src, dst
    row["ours_over_floor"] = row["ours_us"] / floor_us
    row["ours_GBps"] = floor_bytes / row["ours_us"] / 1e3
    results.append(row)
    cu = f"{row['compile_us']:.1f}" if row["compile_us"] else "n/a"
    print(f"{name:36s} ours {row['ours_us']:8.1f} (best {row['best_variant']} {row['best_us']:8.1f}) eager "
          f"{row['eager_us']:8.1f} compile {cu:>8s} floor {floor_us:8.1f} "
          f"ratio {row['ours_over_floor']:.3f} copy-same-bytes {row['same_bytes_copy_us']:.1f} exact {exact} "
          f"compile_s {row['compile_s'] if row['compile_s'] is None else round(row['compile_s'], 1)}",
          flush=True)
    write_outputs(args.out, meta, results, t_start)
    del weight, id_sets, outs, ref
    torch.cuda.empty_cache()


def render_baseline(results):
    """Ours against --baseline-lib's default gather, case by case (both harnesses)."""
    lines = ["", "Ours against the baseline library (same process; ratio < 1: ours faster)", "",
             "| case | path | ours us | baseline us | ratio | do_bench ours | do_bench baseline | ratio | exact |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    ratios, db_ratios = [], []
    for r in results:
        if "baseline_us" not in r:
            continue
        ratio = r["ours_us"] / r["baseline_us"]
        ratios.append(ratio)
        db = r.get("do_bench_us", {})
        if "ours" in db and "baseline" in db:
            db_ratio = db["ours"] / db["baseline"]
            db_ratios.append(db_ratio)
            db_cells = f"{db['ours']:.1f} | {db['baseline']:.1f} | {db_ratio:.3f}"
        else:
            db_cells = "n/a | n/a | n/a"
        lines.append(f"| {r['case']} | {r['path']} | {r['ours_us']:.1f} | {r['baseline_us']:.1f} | "
                     f"{ratio:.3f} | {db_cells} | {r['exact'] and r['baseline_exact']} |")
    if ratios:
        lines.append(f"| geomean | | | | {geomean(ratios):.3f} | | | "
                     f"{geomean(db_ratios) if db_ratios else float('nan'):.3f} | |")
    return "\n".join(lines)


def render_markdown(meta, results, t_start):
    bw = meta["bandwidth_GBps"]
    lines = [
        f"GPU: {meta['gpu']} ({meta['nvidia_smi']}); torch {meta['torch']} (CUDA {meta['cuda']}); "
        f"{meta['date']}",
        f"Copy bandwidth {bw['copy_GBps']:.0f} GB/s (bytes read + written / time, 1 GiB torch copy); "
        f"write-only {bw['write_GBps']:.0f} GB/s; read-only {bw['read_GBps']:.0f} GB/s.",
        f"Gather launch: {meta['gather_tuning']}. Median of {meta['reps']} timed calls, "
        f"{meta['id_sets']} id sets, L2 flushed before each; run took {time.time() - t_start:.0f} s.",
        f"Fixed costs, timed the same way: {fmt_fixed(meta.get('fixed_us', {}))}.",
        "",
        "| case | path | ours us | eager us | compile us | floor us | ours/floor | vs eager | vs compile | ours GB/s | best variant us | same-bytes copy us | ours/copy | exact |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in results:
        cu = r["compile_us"]
        exact = "yes" if r["exact"] and r.get("compile_exact", True) else "NO"
        cells = [r["case"], r.get("path", "?"), f"{r['ours_us']:.1f}", f"{r['eager_us']:.1f}",
                 f"{cu:.1f}" if cu else "n/a", f"{r['floor_us']:.1f}", f"{r['ours_over_floor']:.3f}",
                 f"{r['eager_us'] / r['ours_us']:.2f}x", f"{cu / r['ours_us']:.2f}x" if cu else "n/a",
                 f"{r['ours_GBps']:.0f}", f"{r['best_variant']} {r['best_us']:.1f}",
                 f"{r['same_bytes_copy_us']:.1f}", f"{r['ours_us'] / r['same_bytes_copy_us']:.2f}", exact]
        lines.append("| " + " | ".join(cells) + " |")
    swept = [r for r in results if r["sweep_us"]]
    if swept:
        lines.append("")
        lines.append("Best of each path per case (us): " + "; ".join(
            f"{r['case']}: " + ", ".join(
                f"{lab} {r['sweep_us'][lab]:.1f}" for lab in best_per_family(r["sweep_us"]))
            for r in swept))
        labels = sorted(set.intersection(*(set(r["sweep_us"]) for r in swept)))
        score = {}
        for lab in labels:
            logs = [math.log(r["sweep_us"][lab] / r["best_us"]) for r in swept]
            score[lab] = (math.exp(sum(logs) / len(logs)), max(r["sweep_us"][lab] / r["best_us"] for r in swept))
        ranked = sorted(score, key=lambda k: score[k][0])
        lines.append("")
        lines.append("Units variants (u<unroll level><i interleaved|s spans><c .cs|p plain stores>[L evict_last table]"
                     "[-nocap]), time / best-per-case: geomean, max. Best ten: "
                     + "; ".join(f"{k} {score[k][0]:.3f} {score[k][1]:.3f}" for k in ranked[:10]))
        lines.append("Worst five: " + "; ".join(f"{k} {score[k][0]:.3f}" for k in ranked[-5:]))
    lines += render_do_bench(meta, results)
    worst = max(results, key=lambda r: r["ours_over_floor"]) if results else None
    if worst:
        lines.append("")
        lines.append(f"Worst ours/floor: {worst['ours_over_floor']:.3f} ({worst['case']}); "
                     f"cases within 1.05x: {sum(r['ours_over_floor'] <= 1.05 for r in results)}/{len(results)}; "
                     f"faster than eager: {sum(r['eager_us'] > r['ours_us'] for r in results)}/{len(results)}, "
                     f"than compile: {sum(bool(r['compile_us']) and r['compile_us'] > r['ours_us'] for r in results)}/{len(results)}; "
                     f"geomean ours/floor {geomean(r['ours_over_floor'] for r in results):.3f}, "
                     f"ours/copy {geomean(r['ours_us'] / r['same_bytes_copy_us'] for r in results):.3f}, "
                     f"eager/ours {geomean(r['eager_us'] / r['ours_us'] for r in results):.3f}.")
    return "\n".join(lines)


def render_do_bench(meta, results):
    rows = [r for r in results if r.get("do_bench_us")]
    if not rows:
        return []
    rounds = rows[0].get("do_bench_rounds_us")
    n = len(rounds["ours"]) if rounds else 1
    lines = ["", "triton.testing.do_bench (median, L2 flushed by do_bench"
             + (f"; median of {n} rounds, the kernels taking turns" if n > 1 else "")
             + f"), us. Liger: "
             f"{meta.get('liger', 'n/a')}. best peer = the fastest of eager, compile and Liger.", "",
             "| case | ours | eager | compile | Liger | best peer | ours/best peer | floor | ours/floor "
             "| rounds ours won |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    ratios, floors, wins = [], [], 0
    for r in rows:
        db = r["do_bench_us"]
        peers = {k: v for k, v in db.items() if k not in ("ours", "baseline")}
        best = min(peers, key=peers.get)
        ratio = db["ours"] / peers[best]
        ratios.append(ratio)
        floors.append(db["ours"] / r["floor_us"])
        wins += ratio < 1
        cell = lambda k: f"{db[k]:.1f}" if k in db else "n/a"  # noqa: E731
        lines.append(f"| {r['case']} | {db['ours']:.1f} | {cell('eager')} | {cell('compile')} | "
                     f"{cell('liger')}{'' if r.get('liger_exact', True) else ' (NOT exact)'} | "
                     f"{best} {peers[best]:.1f} | {ratio:.3f} | {r['floor_us']:.1f} | "
                     f"{db['ours'] / r['floor_us']:.3f} | {rounds_won(r)} |")
    lines.append("")
    lines.append(f"do_bench: ours faster than the best peer in {wins}/{len(rows)} cases; geomean "
                 f"ours/best peer {geomean(ratios):.3f}, ours/floor {geomean(floors):.3f}.")
    return lines


def rounds_won(row):
    """'k of n': the do_bench rounds in which ours beat every peer timed in the same round."""
    rounds = row.get("do_bench_rounds_us")
    if not rounds:
        return "n/a"
    ours = rounds["ours"]
    peers = [ts for name, ts in rounds.items() if name not in ("ours", "baseline")]
    won = sum(all(ours[k] < ts[k] for ts in peers) for k in range(len(ours)))
    return f"{won} of {len(ours)}"


def geomean(xs):
    xs = list(xs)
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def best_per_family(sweep):
    best = {}
    for lab, t in sweep.items():
        fam = lab[0]
        if fam not in best or t < sweep[best[fam]]:
            best[fam] = lab
    return [best[f] for f in sorted(best)]


def fmt_fixed(fixed):
    return ", ".join(f"{k} {v:.1f} us" for k, v in fixed.items()) or "n/a"


def write_outputs(out, meta, results, t_start):
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        f.write(render_markdown(meta, results, t_start) + "\n")
    base = out[:-3] if out.endswith(".md") else out
    with open(base + ".json", "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
