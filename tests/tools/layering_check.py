#!/usr/bin/env python3
"""Fails on an #include that runs against the layering in docs/architecture.md.

Every C++/CUDA source under kernels/, proto/convert/, client/, service/ and bench/ belongs to a
layer (the longest matching entry of LAYERS). An include is checked when it names a part of this
project (kernels/, service/..., client/, proto/convert/, bench/, the generated embedding/ and
grpc/health/ API) or a library that only some layers may use (gRPC, protobuf, Prometheus, CUDA,
OpenSSL); any other include (the C++ and POSIX headers, Abseil) is free. bench/ may include
anything but the tests; nothing else may include bench/. The build enforces the project part
too (cmake/emb_helpers.cmake, emb_expose); this check also covers the libraries, and names the
file, the line and the rule.

  layering_check.py ROOT                  check the tree; exit 1 listing every violation
  layering_check.py --verdict FILE INC    "allowed" or "forbidden: why", for one include
"""
import pathlib
import re
import sys

# Families of headers, by the prefix of the name in #include "..." or <...>.
FAMILIES = {
    "kernels/data_type.h": "data_type",  # before kernels/: the longest prefix wins
    # The quantized row layouts and their host quantization: plain host code beside the types.
    "kernels/quantize.h": "data_type",
    "kernels/quantize_rows.h": "data_type",
    # The lookup's insides (the gather plans and launchers, the bag kernel and its -D knobs):
    # kernels/ itself and bench/ only (emb::kernels_testing); the service calls LaunchLookup.
    "kernels/gather_plan.h": "kernels_testing",
    "kernels/vector_access.cuh": "kernels_testing",
    "kernels/gather/": "kernels_testing",
    "kernels/bags/": "kernels_testing",
    "kernels/": "kernels",
    "proto/convert/": "proto_convert",
    "embedding/": "api",  # generated from proto/embedding/
    "grpc/health/": "api",  # generated from proto/grpc/health/
    "client/": "client",
    "service/common/": "common",
    "service/ids/": "ids",
    "service/tables/": "tables",
    "service/metrics/": "metrics",
    "service/store/": "store",
    "service/batch/": "batch",
    "service/write/": "write",
    "service/rpc/request_validation.h": "validation",
    "service/rpc/grpc_status.h": "validation",
    "service/rpc/": "rpc",
    "service/server/": "server",
    "service/": "service_other",
    "bench/": "bench",
    "tests/": "tests",
    "grpcpp/": "grpc",
    "grpc/": "grpc",
    "google/protobuf/": "protobuf",
    "prometheus/": "prometheus",
    "cuda": "cuda",  # cuda_runtime.h, cuda_runtime_api.h, cuda_fp16.h, ...
    "openssl/": "openssl",
}

# Layer (by the source's path prefix) -> the families it may include. Lower layers first.
GRPC = {"api", "grpc", "protobuf"}
LAYERS = {
    "kernels/": {"data_type", "kernels", "kernels_testing", "cuda"},
    "proto/convert/": {"data_type", "api"},
    "client/": {"data_type", "proto_convert", "client"} | GRPC,
    # The CLI (main.cc and its commands, cli/), a program like service/main.cc: also the
    # binaries' shared flags set-up.
    "client/main.cc": {"data_type", "proto_convert", "client", "common"} | GRPC,
    "client/cli/": {"data_type", "proto_convert", "client", "common"} | GRPC,
    "service/common/": {"common"},
    "service/ids/": {"ids"},
    "service/tables/": {"common", "ids", "data_type", "tables"},
    "service/metrics/": {"common", "metrics", "prometheus"},
    "service/store/": {"common", "ids", "data_type", "kernels", "tables", "store", "cuda"},
    "service/batch/": {"common", "ids", "data_type", "store", "metrics", "batch", "prometheus"},
    "service/write/": {"common", "ids", "data_type", "store", "metrics", "batch", "write",
                       "prometheus"},
    "service/rpc/request_validation": {"common", "ids", "data_type", "proto_convert",
                                       "validation"} | GRPC,
    "service/rpc/grpc_status": {"validation", "grpc"},
    "service/rpc/": {"common", "ids", "data_type", "proto_convert", "tables", "store", "metrics",
                     "batch", "write", "validation", "rpc", "prometheus"} | GRPC,
    "service/server/": {"common", "ids", "data_type", "tables", "store", "metrics", "batch", "write",
                        "validation", "rpc", "server", "prometheus", "openssl"} | GRPC,
    "service/main.cc": {"common", "server"},
    # What measures rather than serves: benchmarks, probes, the reference server.
    "bench/": set(FAMILIES.values()) - {"tests"},
}

SOURCE_SUFFIXES = {".h", ".cc", ".cu", ".cuh"}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def longest_prefix(table, name):
    best = None
    for prefix in table:
        if name.startswith(prefix) and (best is None or len(prefix) > len(best)):
            best = prefix
    return best


def verdict(source, include):
    """None when `source` (a path relative to the root) may include `include`, else why not."""
    layer = longest_prefix(LAYERS, source)
    if layer is None:
        return None  # not a layered source (tests, tools)
    family_prefix = longest_prefix(FAMILIES, include)
    if family_prefix is None:
        return None  # the standard library, POSIX, Abseil
    family = FAMILIES[family_prefix]
    if family in LAYERS[layer]:
        return None
    return f"{layer} may not include {family} headers ({family_prefix}...)"


def check_tree(root):
    root = pathlib.Path(root)
    problems = []
    for top in ("kernels", "proto", "client", "service", "bench"):
        for path in sorted((root / top).rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
                continue
            source = path.relative_to(root).as_posix()
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                match = INCLUDE.match(line)
                if match:
                    why = verdict(source, match.group(1))
                    if why:
                        problems.append(f"{source}:{number}: #include {match.group(1)}: {why}")
    return problems


def main(argv):
    if len(argv) == 4 and argv[1] == "--verdict":
        why = verdict(argv[2], argv[3])
        print("allowed" if why is None else f"forbidden: {why}")
        return 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    problems = check_tree(argv[1])
    for p in problems:
        print(p)
    if problems:
        print(f"layering_check: {len(problems)} include(s) against the layering "
              "(docs/architecture.md)")
        return 1
    print("layering_check: every include follows the layering")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
