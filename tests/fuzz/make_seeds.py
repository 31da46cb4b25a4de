#!/usr/bin/python3
"""Writes the fuzzers' seed corpora into tests/fuzz/corpus/ (committed; rerun to remake them).

Small real inputs: .npy files written by numpy (every dtype the server takes, and some it refuses),
.safetensors files laid out by the format's specification (8-byte little-endian header length,
JSON header, data), --table flag strings, and LookUpRequests serialized by protoc --encode.
Needs Debian's python3 with python3-numpy, and protoc.
  tests/fuzz/make_seeds.py
"""
import io
import json
import os
import struct
import subprocess

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")


def write(kind, name, data):
    os.makedirs(os.path.join(CORPUS, kind), exist_ok=True)
    with open(os.path.join(CORPUS, kind, name), "wb") as f:
        f.write(data)


def npy(array, version=None):
    out = io.BytesIO()
    if version is None:
        np.save(out, array)
    else:
        np.lib.format.write_array(out, array, version=version)
    return out.getvalue()


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw bytes)], laid out in order."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the reference writer pads the header to 8 bytes
    return struct.pack("<Q", len(text)) + text + data


def main():
    rng = np.random.default_rng(7)
    rows = lambda r, c, t: (rng.standard_normal((r, c)) * 0.5).astype(t)

    # .npy: every dtype the server takes (float32, float16), then ones it refuses.
    write("npy", "f4_3x4.npy", npy(rows(3, 4, "<f4")))
    write("npy", "f2_5x2.npy", npy(rows(5, 2, "<f2")))
    write("npy", "f4_1x1.npy", npy(rows(1, 1, "<f4")))
    write("npy", "f4_v2_2x3.npy", npy(rows(2, 3, "<f4"), version=(2, 0)))
    write("npy", "f8_2x2.npy", npy(rows(2, 2, "<f8")))
    write("npy", "i4_2x2.npy", npy(np.arange(4, dtype="<i4").reshape(2, 2)))
    write("npy", "be_f4_2x2.npy", npy(rows(2, 2, ">f4")))
    write("npy", "fortran_f4_2x3.npy", npy(np.asfortranarray(rows(2, 3, "<f4"))))
    write("npy", "rank1_f4.npy", npy(rng.standard_normal(6).astype("<f4")))
    write("npy", "rank3_f4.npy", npy(rng.standard_normal((2, 2, 2)).astype("<f4")))

    # .safetensors: one tensor of each dtype, several tensors with metadata, a bad dtype.
    f32 = rows(4, 3, "<f4")
    f16 = rows(2, 5, "<f2")
    bf16 = (rows(3, 2, "<f4").view("<u4") >> 16).astype("<u2")  # bfloat16: the high halves
    write("safetensors", "f32_only.safetensors", safetensors([("emb", "F32", f32.shape, f32.tobytes())]))
    write("safetensors", "f16_only.safetensors", safetensors([("emb", "F16", f16.shape, f16.tobytes())]))
    write("safetensors", "bf16_only.safetensors", safetensors([("weight", "BF16", bf16.shape, bf16.tobytes())]))
    write("safetensors", "several.safetensors", safetensors(
        [("emb", "F32", f32.shape, f32.tobytes()), ("weight", "BF16", bf16.shape, bf16.tobytes()),
         ("bias", "F16", (5,), rows(1, 5, "<f2").tobytes())],
        metadata={"format": "pt", "note": "seed"}))
    write("safetensors", "i64.safetensors", safetensors(
        [("emb", "I64", (2, 2), np.arange(4, dtype="<i8").tobytes())]))

    # --table flags.
    for i, flag in enumerate(["words=/data/words.npy", "items=/data/model.safetensors#item_emb",
                              "t=a#b#c", "x=y#", "=/no/name.npy", "name=", "no_equals",
                              "a==b.npy", "demo=./t.npy#",
                              "t=/d/a,b.safetensors#w,quantize=int8",
                              "t=/d/t.npy,gpu_budget=4G,hot_ids=/d/hot.npy",
                              "t=/d/t.npy,hot_ids=/d/h,1.npy,quantize=int4,gpu_budget=1048576",
                              "t=/d/t.npy,gpu_budget=0", "t=/d/t.npy,gpu_budget=1M,gpu_budget=2M",
                              "t=/d/t.npy,gpu_bugdet=4G"]):
        write("table_spec", f"flag{i}", flag.encode())

    # LookUpRequests, serialized by protoc from text format.
    requests = {
        "ids": "ids: [1, 2, 3]",
        "shape": "ids: [0, 1, 2, 3] shape: [2, 2] dtype: DATA_TYPE_FLOAT32",
        "table_bf16": 'table: "words" ids: [5] dtype: DATA_TYPE_BFLOAT16',
        "empty": "",
        "negative": "ids: [-1]",
        "out_of_range": "ids: [99999999999]",
        "bad_shape": "ids: [1, 2, 3] shape: [2, 2]",
        "negative_dim": "ids: [1] shape: [-1, -1]",
        "zero_dim": "shape: [0, 5]",
        "bad_dtype": "ids: [1] dtype: 7",
        "big_shape": "ids: [1] shape: [4611686018427387904, 4]",
    }
    proto_dir = os.path.join(ROOT, "proto")
    for name, text in requests.items():
        data = subprocess.run(
            ["protoc", f"-I{proto_dir}", "--encode=embedding.v1.LookUpRequest",
             "embedding/v1/embedding_service.proto"],
            input=text.encode(), check=True, capture_output=True).stdout
        write("lookup_request", name, data)


if __name__ == "__main__":
    main()
