#!/usr/bin/env python3
"""Benchmarks our bag kernel (libemb_bag_capi.so, through ctypes) against PyTorch and cuEmbed.

In one process on one GPU, every kernel timed with triton.testing.do_bench (median; do_bench
zeroes a 256 MB buffer before each call, so L2 is flushed and the table's rows come from HBM):

a. Pooled lookups over float32 tables, fixed-length bags given by offsets, uniform random ids:
   ours (emb_bags: sum, weighted sum, mean as scales 1/length), torch.nn.functional.embedding_bag
   eager (sum, per_sample_weights, mean), torch.compile of the same, and NVIDIA cuEmbed's
   EmbeddingForward (CSR; libemb_cuembed_capi.so, built only where a copy of its headers sits in
   .cuembed/) when --cuembed-lib is given. Speed-up = the best other's time / ours.
b. The dequantizing gather: int8_rowwise and int4_rowwise tables (FBGEMM's fused rows,
   kernels/quantize.h) gathered to float16 by ours (emb_bags without offsets), against a float16
   table's plain gather (ours: libemb_gather_capi.so's emb_gather; PyTorch: eager F.embedding),
   torch eager of the dequantizing gather (rows = q[ids]; rows[:, :dim].float() * scale + bias ->
   float16) and torch.compile of it. Microseconds and rows per second.

Every answer is checked against torch's once per case (allclose; "exact" says whether the bits
agree too) before it is timed; an answer that fails the check is reported and not ranked.

Needs torch (CUDA) and triton; no gRPC. Usage, from a bundle made by shared/tools/bundle-libs
(the .so files and their libraries in one folder):
  LD_LIBRARY_PATH=.gpu python3 .gpu/bag_benchmark.py --lib .gpu/libemb_bag_capi.so \\
      --gather-lib .gpu/libemb_gather_capi.so [--cuembed-lib .gpu/libemb_cuembed_capi.so] \\
      --out bag_bench.md [--quick]
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

from gather_benchmark import load_cudart, prepare_run  # beside this file

FLOAT32, FLOAT16, BFLOAT16, INT8_ROWWISE, INT4_ROWWISE = 1, 2, 3, 4, 5

# (bags, ids per bag, dim, rows) of the pooled section.
POOLED_CASES = [(4096, 32, 128, 1 << 20), (16384, 8, 128, 1 << 20), (8192, 64, 64, 4 << 20),
                (2048, 128, 256, 100_000)]
# (rows, dim, ids) of the dequantizing gather.
GATHER_CASES = [(1 << 20, 128, 65536), (4 << 20, 256, 65536), (131072, 4096, 16384)]
MODES = ["sum", "weighted_sum", "mean"]


def load_libs(args):
    load_cudart()
    vp, i32, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64
    libs = {}
    lib = ctypes.CDLL(args.lib)
    lib.emb_bags.argtypes = [vp, i32, i64, i64, vp, vp, i64, i64, vp, vp, vp, i32, vp]
    lib.emb_bags.restype = i32
    libs["bags"] = lib
    libs["gather"] = None
    if args.gather_lib:
        g = ctypes.CDLL(args.gather_lib)
        g.emb_gather.argtypes = [vp, i32, i64, i64, vp, i64, vp, i32, vp]
        g.emb_gather.restype = i32
        libs["gather"] = g
    libs["baseline"] = None
    if args.baseline_lib:
        b = ctypes.CDLL(args.baseline_lib)
        b.emb_bags.argtypes = lib.emb_bags.argtypes
        b.emb_bags.restype = i32
        libs["baseline"] = b
    libs["cuembed"], libs["cuembed_note"] = None, "skipped: --cuembed-lib not given"
    if args.cuembed_lib:
        if not os.path.isfile(args.cuembed_lib):
            libs["cuembed_note"] = f"skipped: {args.cuembed_lib} not found"
        else:
            try:
                c = ctypes.CDLL(args.cuembed_lib)
                c.emb_cuembed_forward.argtypes = [vp, i64, vp, vp, i64, vp, i32, vp, vp]
                c.emb_cuembed_forward.restype = i32
                libs["cuembed"] = c
                libs["cuembed_note"] = f"NVIDIA cuEmbed EmbeddingForward (CSR) from {args.cuembed_lib}"
            except OSError as e:
                libs["cuembed_note"] = f"skipped: loading {args.cuembed_lib} failed: {e}"
    return libs


def ptr(t):
    return None if t is None else ctypes.c_void_p(t.data_ptr())


def check_rc(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what}: cudaError {rc}")


def do_bench_us(fn):
    import triton.testing
    return triton.testing.do_bench(fn, return_mode="median") * 1e3


def compare(got, ref, rtol, atol):
    """(allclose, exact) of an answer against torch's."""
    ok = bool(torch.allclose(got.float(), ref.float(), rtol=rtol, atol=atol))
    return ok, bool(torch.equal(got, ref))


class Budget:
    """Stops compiling once torch.compile has taken `limit_s` seconds in all."""

    def __init__(self, limit_s):
        self.limit_s = limit_s
        self.spent = 0.0

    def compile(self, fn, *example):
        """A compiled `fn` run once on `example` (its result, and the function), or (None, why)."""
        if self.spent >= self.limit_s:
            return None, None, f"skipped: compile budget of {self.limit_s:.0f} s spent"
        import torch._dynamo
        torch._dynamo.reset()
        t0 = time.time()
        try:
            compiled = torch.compile(fn, dynamic=False)
            got = compiled(*example)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            self.spent += time.time() - t0
            return None, None, f"failed: {repr(e)[:200]}"
        self.spent += time.time() - t0
        return compiled, got, f"compiled in {time.time() - t0:.1f} s"


# ---- a. pooled lookups ----

def run_pooled_case(case, libs, budget, stream, gen, results):
    bags, per_bag, dim, rows = case
    n = bags * per_bag
    name = f"{bags}x{per_bag}, dim {dim}, {rows:,} rows"
    weight = torch.randn(rows, dim, device="cuda", generator=gen)
    ids = torch.randint(0, rows, (n,), device="cuda", dtype=torch.int64, generator=gen)
    offsets = torch.arange(0, n + 1, per_bag, device="cuda", dtype=torch.int64)
    psw = torch.rand(n, device="cuda", generator=gen) * 2 - 1
    scales = torch.full((bags,), 1.0 / per_bag, device="cuda", dtype=torch.float32)
    out = torch.empty(bags, dim, device="cuda", dtype=torch.float32)
    out_cu = torch.empty_like(out)
    lib, cu = libs["bags"], libs["cuembed"]

    for mode in MODES:
        row = {"section": "pooled", "case": name, "mode": mode, "bags": bags, "per_bag": per_bag,
               "dim": dim, "rows": rows, "us": {}, "check": {}, "notes": []}
        w = psw if mode == "weighted_sum" else None
        s = scales if mode == "mean" else None
        torch_mode = "mean" if mode == "mean" else "sum"

        def eager():
            return F.embedding_bag(ids, weight, offsets, mode=torch_mode, per_sample_weights=w,
                                   include_last_offset=True)

        def ours():
            check_rc(lib.emb_bags(ptr(weight), FLOAT32, rows, dim, ptr(ids), ptr(offsets), bags,
                                  bags * per_bag, ptr(w), ptr(s), ptr(out), FLOAT32, stream),
                     "emb_bags")

        ref = eager()
        mag = float(ref.abs().max())
        tol = dict(rtol=1e-4, atol=1e-5 * max(mag, 1.0))
        fns = {}
        out.fill_(float("nan"))
        ours()
        row["check"]["ours"] = compare(out, ref, **tol)
        fns["ours"] = ours
        if libs["baseline"] is not None:
            def baseline():
                check_rc(libs["baseline"].emb_bags(
                    ptr(weight), FLOAT32, rows, dim, ptr(ids), ptr(offsets), bags, bags * per_bag,
                    ptr(w), ptr(s), ptr(out), FLOAT32, stream), "baseline emb_bags")
            out.fill_(float("nan"))
            baseline()
            row["check"]["baseline"] = compare(out, ref, **tol)
            fns["baseline"] = baseline
        fns["eager"] = eager
        row["check"]["eager"] = (True, True)
        compiled, got, note = budget.compile(
            lambda i, wt, o, p: F.embedding_bag(i, wt, o, mode=torch_mode, per_sample_weights=p,
                                                include_last_offset=True),
            ids, weight, offsets, w)
        row["notes"].append(f"compile {note}")
        if compiled is not None:
            row["check"]["compile"] = compare(got, ref, **tol)
            fns["compile"] = lambda: compiled(ids, weight, offsets, w)
        if cu is not None:
            def cuembed():
                check_rc(cu.emb_cuembed_forward(ptr(weight), dim, ptr(ids), ptr(offsets), bags,
                                                ptr(w), 1 if mode == "mean" else 0, ptr(out_cu),
                                                stream), "emb_cuembed_forward")
            out_cu.fill_(float("nan"))
            try:
                cuembed()
                torch.cuda.synchronize()
                row["check"]["cuembed"] = compare(out_cu, ref, **tol)
                fns["cuembed"] = cuembed
            except RuntimeError as e:
                row["notes"].append(f"cuEmbed {e}")
        for k, fn in fns.items():
            row["us"][k] = do_bench_us(fn)
        finish_row(row)
        results.append(row)
        print(summary_line(row), flush=True)
    del weight, ids, offsets, psw, scales, out, out_cu
    torch.cuda.empty_cache()


def finish_row(row):
    """Ranks the correct kernels other than ours: best other and ours' speed-up against it."""
    others = {k: v for k, v in row["us"].items()
              if k not in ("ours", "baseline") and row["check"].get(k, (False, False))[0]}
    if others:
        best = min(others, key=others.get)
        row["best_other"] = best
        row["speedup"] = others[best] / row["us"]["ours"]
    if not row["check"]["ours"][0]:
        row["notes"].append("OURS DIFFERS FROM TORCH")


def summary_line(row):
    cells = " ".join(f"{k} {v:.1f}" for k, v in row["us"].items())
    sp = f"speed-up {row['speedup']:.2f}x vs {row['best_other']}" if "speedup" in row else ""
    return f"{row['case']:32s} {row['mode']:14s} us: {cells}  {sp}  {'; '.join(row['notes'])}"


# ---- b. the dequantizing gather ----

def quantize_int8(x):
    """FBGEMM's int8 fused rows: dim uint8, float32 scale, float32 bias."""
    lo = x.min(dim=1, keepdim=True).values
    hi = x.max(dim=1, keepdim=True).values
    scale = ((hi - lo) / 255).clamp_min(1e-12)
    q = torch.round((x - lo) / scale).clamp_(0, 255).to(torch.uint8)
    return torch.cat([q, scale.view(torch.uint8), lo.view(torch.uint8)], dim=1).contiguous()


def quantize_int4(x):
    """FBGEMM's int4 fused rows: dim / 2 bytes (low nibble first), float16 scale, float16 bias."""
    lo = x.min(dim=1, keepdim=True).values.half()
    hi = x.max(dim=1, keepdim=True).values
    scale = ((hi - lo.float()) / 15).clamp_min(1e-4).half()
    q = torch.round((x - lo.float()) / scale.float()).clamp_(0, 15).to(torch.uint8)
    packed = q[:, 0::2] | (q[:, 1::2] << 4)
    return torch.cat([packed, scale.view(torch.uint8), lo.view(torch.uint8)], dim=1).contiguous()


def dequant_int8(q, ids, dim):
    rows = q[ids]
    scale = rows[:, dim:dim + 4].contiguous().view(torch.float32)
    bias = rows[:, dim + 4:dim + 8].contiguous().view(torch.float32)
    return (rows[:, :dim].float() * scale + bias).half()


def dequant_int4(q, ids, dim):
    rows = q[ids]
    half = dim // 2
    packed = rows[:, :half]
    vals = torch.stack([packed & 0xF, packed >> 4], dim=-1).reshape(rows.shape[0], dim)
    scale = rows[:, half:half + 2].contiguous().view(torch.float16).float()
    bias = rows[:, half + 2:half + 4].contiguous().view(torch.float16).float()
    return (vals.float() * scale + bias).half()


def run_gather_case(case, libs, budget, stream, gen, results):
    rows, dim, n = case
    name = f"{rows:,} rows, dim {dim}, {n:,} ids"
    ids = torch.randint(0, rows, (n,), device="cuda", dtype=torch.int64, generator=gen)
    # The float table, made in slices to bound the float32 temporaries.
    f16 = torch.empty(rows, dim, device="cuda", dtype=torch.float16)
    q8 = torch.empty(rows, dim + 8, device="cuda", dtype=torch.uint8)
    q4 = torch.empty(rows, dim // 2 + 4, device="cuda", dtype=torch.uint8)
    step = max(1, (256 << 20) // (dim * 4))
    for r0 in range(0, rows, step):
        x = torch.randn(min(step, rows - r0), dim, device="cuda", generator=gen)
        f16[r0:r0 + x.shape[0]] = x.half()
        q8[r0:r0 + x.shape[0]] = quantize_int8(x)
        q4[r0:r0 + x.shape[0]] = quantize_int4(x)
        del x
    out = torch.empty(n, dim, device="cuda", dtype=torch.float16)
    lib, glib = libs["bags"], libs["gather"]

    def ours_bags(table, ttype, of=lib):
        def call():
            check_rc(of.emb_bags(ptr(table), ttype, rows, dim, ptr(ids), None, n, n, None, None,
                                 ptr(out), FLOAT16, stream), "emb_bags")
        return call

    tables = [("float16", f16, FLOAT16, lambda t, i: F.embedding(i, t)),
              ("int8_rowwise", q8, INT8_ROWWISE, lambda t, i: dequant_int8(t, i, dim)),
              ("int4_rowwise", q4, INT4_ROWWISE, lambda t, i: dequant_int4(t, i, dim))]
    for tname, table, ttype, torch_fn in tables:
        row = {"section": "gather", "case": name, "mode": tname, "rows": rows, "dim": dim,
               "ids": n, "table_bytes": table.numel() * table.element_size(), "us": {},
               "check": {}, "notes": []}
        ref = torch_fn(table, ids)
        tol = dict(rtol=1e-3, atol=1e-3)
        fns = {}
        if ttype == FLOAT16 and glib is not None:
            def ours():
                check_rc(glib.emb_gather(ptr(table), FLOAT16, rows, dim, ptr(ids), n, ptr(out),
                                         FLOAT16, stream), "emb_gather")
            row["notes"].append("ours: emb_gather")
        else:
            ours = ours_bags(table, ttype)
            row["notes"].append("ours: emb_bags, no offsets")
        out.fill_(float("nan"))
        ours()
        row["check"]["ours"] = compare(out, ref, **tol)
        fns["ours"] = ours
        if libs["baseline"] is not None and ttype != FLOAT16:
            out.fill_(float("nan"))
            fns["baseline"] = ours_bags(table, ttype, libs["baseline"])
            fns["baseline"]()
            row["check"]["baseline"] = compare(out, ref, **tol)
        row["check"]["eager"] = (True, True)
        fns["eager"] = lambda table=table, torch_fn=torch_fn: torch_fn(table, ids)
        compiled, got, note = budget.compile(torch_fn, table, ids)
        row["notes"].append(f"compile {note}")
        if compiled is not None:
            row["check"]["compile"] = compare(got, ref, **tol)
            fns["compile"] = lambda compiled=compiled, table=table: compiled(table, ids)
            del got
        for k, fn in fns.items():
            row["us"][k] = do_bench_us(fn)
        row["rows_per_s"] = {k: n / (us * 1e-6) for k, us in row["us"].items()}
        finish_row(row)
        results.append(row)
        print(summary_line(row), flush=True)
        del ref
    del ids, f16, q8, q4, out
    torch.cuda.empty_cache()


# ---- output ----

def cell(row, k):
    if k not in row["us"]:
        return "n/a"
    ok, exact = row["check"].get(k, (True, True))
    flag = "" if ok else " (WRONG)"
    return f"{row['us'][k]:.1f}{flag}"


def render(meta, results):
    lines = [f"GPU: {meta['gpu']} ({meta['nvidia_smi']}); torch {meta['torch']} (CUDA "
             f"{meta['cuda']}), triton {meta['triton']}; {meta['date']}",
             f"Command: {meta['command']}",
             "Timing: triton.testing.do_bench, median; L2 flushed before every call (do_bench "
             "zeroes a 256 MB buffer). Each answer checked against torch eager once (allclose) "
             "before timing; WRONG marks one that failed, and it is not ranked.",
             f"cuEmbed: {meta['cuembed']}.", ""]
    pooled = [r for r in results if r["section"] == "pooled"]
    if pooled:
        lines += ["a. Pooled lookups, float32 table and answer, fixed-length bags by offsets, "
                  "uniform random ids (us; speed-up = best other / ours)", "",
                  "| case | pooling | ours | torch eager | torch.compile | cuEmbed | best other "
                  "| speed-up | ours exact vs eager |",
                  "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | --- |"]
        for r in pooled:
            sp = f"{r['speedup']:.2f}x" if "speedup" in r else "n/a"
            lines.append(f"| {r['case']} | {r['mode']} | {cell(r, 'ours')} | {cell(r, 'eager')} | "
                         f"{cell(r, 'compile')} | {cell(r, 'cuembed')} | "
                         f"{r.get('best_other', 'n/a')} | {sp} | "
                         f"{'yes' if r['check']['ours'][1] else 'no (allclose)' if r['check']['ours'][0] else 'WRONG'} |")
        lines.append("")
    gathers = [r for r in results if r["section"] == "gather"]
    if gathers:
        lines += ["b. Dequantizing gather to float16 (us, and million rows/s): the quantized "
                  "tables against the float16 table's plain gather. torch eager/compile: "
                  "F.embedding for float16; q[ids], rows[:, :dim].float() * scale + bias -> "
                  "float16 for the quantized.", "",
                  "| case | table | table GB | ours | ours Mrows/s | ours / ours float16 | "
                  "torch eager | torch.compile | compile Mrows/s | speed-up vs best torch | "
                  "ours exact vs eager |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
        f16_us = {r["case"]: r["us"]["ours"] for r in gathers if r["mode"] == "float16"}
        for r in gathers:
            rps = r["rows_per_s"]
            sp = f"{r['speedup']:.2f}x" if "speedup" in r else "n/a"
            cps = f"{rps['compile'] / 1e6:.0f}" if "compile" in rps else "n/a"
            vs16 = (f"{r['us']['ours'] / f16_us[r['case']]:.2f}" if r["case"] in f16_us
                    else "n/a")
            lines.append(f"| {r['case']} | {r['mode']} | {r['table_bytes'] / 1e9:.2f} | "
                         f"{cell(r, 'ours')} | {rps['ours'] / 1e6:.0f} | {vs16} | "
                         f"{cell(r, 'eager')} | {cell(r, 'compile')} | {cps} | {sp} | "
                         f"{'yes' if r['check']['ours'][1] else 'no (allclose)' if r['check']['ours'][0] else 'WRONG'} |")
        lines.append("")
    based = [r for r in results if "baseline" in r["us"]]
    if based:
        lines += ["c. Ours against --baseline-lib's emb_bags (another build), same process and "
                  "harness (us; ratio = baseline / ours, > 1: ours faster)", "",
                  "| case | pooling or table | ours | baseline | ratio |",
                  "| --- | --- | ---: | ---: | ---: |"]
        for r in based:
            lines.append(f"| {r['case']} | {r['mode']} | {cell(r, 'ours')} | "
                         f"{cell(r, 'baseline')} | {r['us']['baseline'] / r['us']['ours']:.3f} |")
        lines.append("")
    notes = [f"{r['case']} {r['mode']}: {'; '.join(r['notes'])}" for r in results if r["notes"]]
    errors = meta.get("errors", [])
    if notes or errors:
        lines += ["Notes:", ""] + [f"- {n}" for n in notes + errors]
    return "\n".join(lines)


def write_outputs(path, text, meta, results):
    """`text` at `path` (markdown), and `meta` and `results` as JSON beside it."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "\n")
    base = path[:-3] if path.endswith(".md") else path
    with open(base + ".json", "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="libemb_bag_capi.so")
    ap.add_argument("--gather-lib", default="", help="libemb_gather_capi.so (the float16 gather)")
    ap.add_argument("--cuembed-lib", default="", help="libemb_cuembed_capi.so (optional)")
    ap.add_argument("--baseline-lib", default="",
                    help="another build's libemb_bag_capi.so, timed beside ours (section c)")
    ap.add_argument("--out", required=True, help="markdown path; JSON goes next to it")
    ap.add_argument("--quick", action="store_true", help="the first cases only")
    ap.add_argument("--compile-budget-s", type=float, default=300.0,
                    help="stop compiling once torch.compile took this long in all")
    args = ap.parse_args()

    libs = load_libs(args)
    import triton
    dev = torch.cuda.current_device()
    smi = prepare_run("name,driver_version,clocks.max.sm")
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "gpu": torch.cuda.get_device_name(dev), "nvidia_smi": smi, "torch": torch.__version__,
            "cuda": torch.version.cuda, "triton": triton.__version__,
            "command": " ".join(sys.argv), "cuembed": libs["cuembed_note"], "errors": []}
    print(f"# {meta['gpu']} | torch {meta['torch']} | triton {meta['triton']} | "
          f"cuEmbed: {meta['cuembed']}", flush=True)

    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    budget = Budget(args.compile_budget_s)
    results = []
    sections = [("pooled", run_pooled_case, POOLED_CASES[:2] if args.quick else POOLED_CASES),
                ("gather", run_gather_case, GATHER_CASES[:1] if args.quick else GATHER_CASES)]
    with torch.no_grad():
        for section, run_case, cases in sections:
            for case in cases:
                try:
                    run_case(case, libs, budget, stream, gen, results)
                except Exception as e:  # noqa: BLE001
                    meta["errors"].append(f"{section} case {case} failed: {e!r}")
                    print(meta["errors"][-1], flush=True)
                    torch.cuda.empty_cache()
                write_outputs(args.out, render(meta, results), meta, results)
    print(render(meta, results))
    wrong = [r for r in results if not r["check"]["ours"][0]]
    sys.exit(1 if wrong or meta["errors"] else 0)


if __name__ == "__main__":
    main()
