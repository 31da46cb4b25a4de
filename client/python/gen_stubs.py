"""Generates the Python gRPC stubs of proto/embedding/v1 with protoc and grpc_python_plugin.

Both services' files: embedding_service.proto (lookups) and embedding_admin.proto (row updates).

Used by build_backend.py when the package is built, and by scripts/gen-python-stubs (stubs to ship to a
host without protoc, e.g. the GPU host). Needs `protoc` and `grpc_python_plugin` on PATH
(Debian: protobuf-compiler, protobuf-compiler-grpc).

    python3 client/python/gen_stubs.py OUT_DIR [--proto-root DIR]
"""

import argparse
import os
import shutil
import subprocess
import sys

# The API's files; embedding_admin.proto imports embedding_service.proto.
PROTOS = ("embedding/v1/embedding_service.proto", "embedding/v1/embedding_admin.proto")
# The repository's proto/ folder, seen from client/python/.
DEFAULT_PROTO_ROOT = os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto"))


# An unpacked sdist of the package carries the proto files in proto/, next to this file.
SDIST_PROTO_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "proto")


def proto_root():
    """$EMB_PROTO_ROOT, else the repository's proto/ folder, else an sdist's proto/."""
    if "EMB_PROTO_ROOT" in os.environ:
        return os.environ["EMB_PROTO_ROOT"]
    if not os.path.isdir(DEFAULT_PROTO_ROOT) and os.path.isdir(SDIST_PROTO_ROOT):
        return SDIST_PROTO_ROOT
    return DEFAULT_PROTO_ROOT


def generate(root, out_dir):
    """Writes embedding/__init__.py, embedding/v1/__init__.py and the two stub modules of each
    of PROTOS (under `root`) into `out_dir`; returns their paths.
    Raises RuntimeError naming what is missing or what protoc said."""
    sources = [os.path.join(root, proto) for proto in PROTOS]
    for source in sources:
        if not os.path.isfile(source):
            raise RuntimeError("no %s (set EMB_PROTO_ROOT to the repository's proto/ folder)"
                               % source)
    protoc = shutil.which("protoc")
    plugin = shutil.which("grpc_python_plugin")
    if protoc is None or plugin is None:
        raise RuntimeError("protoc and grpc_python_plugin must be on PATH "
                           "(Debian: protobuf-compiler, protobuf-compiler-grpc)")
    os.makedirs(out_dir, exist_ok=True)
    result = subprocess.run(
        [protoc, "-I" + root, "--python_out=" + out_dir, "--grpc_out=" + out_dir,
         "--plugin=protoc-gen-grpc=" + plugin] + sources,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError("protoc failed: " + result.stdout)
    written = []
    for package in ("embedding", os.path.join("embedding", "v1")):
        init = os.path.join(out_dir, package, "__init__.py")
        open(init, "a").close()
        written.append(init)
    for proto in PROTOS:
        name = os.path.splitext(os.path.basename(proto))[0]
        for module in (name + "_pb2.py", name + "_pb2_grpc.py"):
            written.append(os.path.join(out_dir, "embedding", "v1", module))
    return written


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--proto-root", default=None, help="default: $EMB_PROTO_ROOT or proto/")
    args = parser.parse_args()
    try:
        generate(args.proto_root or proto_root(), args.out_dir)
    except RuntimeError as e:
        print("gen_stubs: %s" % e, file=sys.stderr)
        return 1
    print(args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
