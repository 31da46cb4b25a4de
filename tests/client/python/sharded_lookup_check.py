"""ShardedClient (client/python/embedding_client/) against real servers: the whole demo table
at argv[1], its three shards at argv[2] (comma-separated, shard 0 first), and shard 1's pid at
argv[3], which this kills for the failure case; or, as "versions T0,T1", two shards serving
different versions of table 't'. Exits non-zero on any mismatch."""

import os
import signal
import sys

import grpc
import numpy as np

from embedding_client import EmbeddingClient, ShardedClient, ShardError


def versions(targets):
    """Shards of the same shape serving versions 2 and 1 (issue 41, item 7e): refused, naming
    both versions, never a mixed answer."""
    with ShardedClient(targets, timeout=30) as sharded:
        try:
            sharded.look_up([0, 99], table="t")
            raise AssertionError("rows of two versions were mixed in one answer")
        except ShardError as e:
            assert e.code() == grpc.StatusCode.FAILED_PRECONDITION, e.code()
            assert (f"shard 1 of 2 ({targets[1]}): table 't' there is version 1, but on shard 0 "
                    "version 2") in e.details(), e.details()
    print("python sharded_lookup_check versions: OK")


def main():
    if sys.argv[1] == "versions":
        versions(sys.argv[2].split(","))
        return
    whole_target, shard_targets, shard1_pid = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
    rng = np.random.default_rng(26)
    with EmbeddingClient(whole_target, timeout=30) as whole, \
            ShardedClient(shard_targets, timeout=30) as sharded:
        layout = sharded.layout()
        assert layout["whole_rows"] == 1000 and layout["block_rows"] == 334, layout
        assert layout["first_rows"] == [0, 334, 668], layout
        for shape, dtype in (((257,), None), ((8, 33), "float16"), ((4, 5, 6), "bfloat16")):
            ids = rng.integers(0, 1000, size=shape)
            ids.flat[:6] = [0, 333, 334, 667, 668, 999][:ids.size]
            want = whole.look_up(ids, dtype=dtype)
            got = sharded.look_up(ids, dtype=dtype)
            assert got.shape == want.shape, (got.shape, want.shape)
            assert got.dtype == want.dtype, (got.dtype, want.dtype)
            assert np.array_equal(got, want), f"shape {shape} {dtype}: rows differ"
        try:
            sharded.look_up([5, 1000])
            raise AssertionError("id 1000 was looked up")
        except grpc.RpcError as e:  # as EmbeddingClient raises a server's refusal
            assert e.code() == grpc.StatusCode.OUT_OF_RANGE, e.code()
            assert "ids[1] = 1000 is out of range" in e.details(), e.details()

        try:  # as a server answers a negative id (issue 41, item 7f)
            sharded.look_up([5, -1])
            raise AssertionError("id -1 was looked up")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e.code()
            assert "ids[1] = -1 is negative" in e.details(), e.details()

        os.kill(shard1_pid, signal.SIGKILL)
        try:
            sharded.look_up([0, 500, 999])
            raise AssertionError("a call touching a dead shard succeeded")
        except ShardError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE, e.code()
            assert f"shard 1 of 3 ({shard_targets[1]})" in e.details(), e.details()
        got = sharded.look_up([0, 999])  # shards 0 and 2 only
        assert np.array_equal(got, whole.look_up([0, 999]))
    print("python sharded_lookup_check: OK")


if __name__ == "__main__":
    main()
