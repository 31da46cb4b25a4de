"""The Python lookup client (client/python/embedding_client/) against an in-process gRPC server
that records each LookUpRequest: pooled lookups send pooling, offsets, lengths and weights as
given (NumPy arrays or lists) and come back in the server's shape; bad pooling arguments are
ValueErrors before anything is sent; list_tables names quantized types and reports bytes, and
where a table lives (host_tier, cache_rows, device_bytes); ShardedClient refuses ids outside the
table with the server's codes, as grpc.RpcError.
Needs the generated stubs on sys.path (embedding_client_test.sh). The real server's pooled
answers are checked by tests/client/pooled_lookup_check.sh."""

import threading
import unittest
from concurrent import futures

import grpc
import numpy as np

import embedding_client as ec
from embedding.v1 import embedding_service_pb2 as pb
from embedding.v1 import embedding_service_pb2_grpc as pb_grpc

DIM = 3


class FakeLookUp(pb_grpc.EmbeddingServiceServicer):
    """Answers DIM float32 elements per bag (offsets or lengths given), per row of the shape
    without its last axis (pooled without them), or per id; element j of row r is 10 r + j."""

    def __init__(self):
        self.lock = threading.Lock()
        self.requests = []

    def LookUp(self, request, context):
        with self.lock:
            self.requests.append(request)
        shape = list(request.shape) or [len(request.ids)]
        if request.pooling == pb.POOLING_UNSPECIFIED:
            out = shape
        elif request.offsets:
            out = [len(request.offsets) - 1]
        elif request.lengths:
            out = [len(request.lengths)]
        else:
            out = shape[:-1]
        rows = int(np.prod(out))
        values = (10 * np.arange(rows)[:, None] + np.arange(DIM)).astype("<f4")
        return pb.LookUpResponse(embeddings=values.tobytes(), shape=out + [DIM],
                                 dtype=pb.DATA_TYPE_FLOAT32)

    def ListTables(self, request, context):
        return pb.ListTablesResponse(tables=[
            pb.TableInfo(name="q8", rows=100, dim=20, dtype=pb.DATA_TYPE_INT8_ROWWISE,
                         device="cpu", is_default=True, bytes=100 * 28),
            pb.TableInfo(name="q4", rows=100, dim=20, dtype=pb.DATA_TYPE_INT4_ROWWISE,
                         device="cpu", bytes=100 * 14),
            pb.TableInfo(name="f", rows=1 << 32, dim=128, dtype=pb.DATA_TYPE_BFLOAT16,
                         device="cuda:0", bytes=(1 << 32) * 256, host_tier=True,
                         cache_rows=1 << 28, device_bytes=(1 << 36) + 12345),
            pb.TableInfo(name="m", rows=10, dim=4, dtype=pb.DATA_TYPE_FLOAT32,
                         device="cuda:0,cuda:1", bytes=160, device_bytes=300,
                         placement=pb.PLACEMENT_ROWS,
                         parts=[pb.DevicePart(device="cuda:0", first_row=0, rows=5,
                                              device_bytes=100),
                                pb.DevicePart(device="cuda:1", first_row=5, rows=5,
                                              device_bytes=200, host_tier=True)])])


class Server:
    def __init__(self, service):
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb_grpc.add_EmbeddingServiceServicer_to_server(service, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.target = "127.0.0.1:%d" % self.port

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.server.stop(None)


class PooledLookUpTest(unittest.TestCase):
    def setUp(self):
        self.fake = FakeLookUp()
        self.server = Server(self.fake)
        self.client = ec.EmbeddingClient(self.server.target)

    def tearDown(self):
        self.client.close()
        self.server.__exit__()

    def test_plain_lookup_sends_no_pooled_fields(self):
        rows = self.client.look_up([[1, 2], [3, 4]])
        self.assertEqual(rows.shape, (2, 2, DIM))
        [r] = self.fake.requests
        self.assertEqual(r.pooling, pb.POOLING_UNSPECIFIED)
        self.assertEqual((list(r.offsets), list(r.lengths), list(r.weights)), ([], [], []))

    def test_sum_with_offsets_and_weights_from_numpy(self):
        got = self.client.look_up(np.array([5, 6, 7, 8, 9]), pooling="sum",
                                  offsets=np.array([0, 2, 2, 5], np.int32),
                                  weights=np.array([0.5, 1, -2, 0.25, 3], np.float64))
        [r] = self.fake.requests
        self.assertEqual(r.pooling, pb.POOLING_SUM)
        self.assertEqual(list(r.ids), [5, 6, 7, 8, 9])
        self.assertEqual(list(r.offsets), [0, 2, 2, 5])
        self.assertEqual(list(r.lengths), [])
        self.assertEqual(list(r.weights), [0.5, 1.0, -2.0, 0.25, 3.0])
        self.assertEqual(got.shape, (3, DIM))
        self.assertEqual(got.dtype, np.float32)
        self.assertTrue(got.flags.writeable)
        np.testing.assert_array_equal(got[2], [20, 21, 22])

    def test_mean_with_lengths_from_a_list(self):
        got = self.client.look_up([1, 2, 3], table="t", pooling="mean", lengths=[2, 0, 1],
                                  dtype="float16")
        [r] = self.fake.requests
        self.assertEqual((r.table, r.pooling, r.dtype),
                         ("t", pb.POOLING_MEAN, pb.DATA_TYPE_FLOAT16))
        self.assertEqual(list(r.lengths), [2, 0, 1])
        self.assertEqual(list(r.offsets), [])
        self.assertEqual(got.shape, (3, DIM))

    def test_pooling_over_the_last_axis_answers_the_leading_shape(self):
        got = self.client.look_up(np.arange(24).reshape(2, 3, 4), pooling="mean")
        [r] = self.fake.requests
        self.assertEqual(list(r.shape), [2, 3, 4])
        self.assertEqual(got.shape, (2, 3, DIM))
        got = self.client.look_up([1, 2, 3], pooling="sum")  # one bag of every id
        self.assertEqual(got.shape, (DIM,))

    def test_bad_pooling_arguments_are_value_errors_before_sending(self):
        bad = [dict(pooling="max"), dict(pooling="SUM"), dict(pooling=1),
               dict(pooling="sum", offsets=[0.0, 1.5]), dict(pooling="sum", offsets=[[0, 1]]),
               dict(pooling="sum", lengths=["1"]), dict(pooling="sum", weights=["a"]),
               dict(pooling="sum", weights=[[1.0]])]
        for kwargs in bad:
            with self.assertRaises(ValueError, msg=repr(kwargs)):
                self.client.look_up([1], **kwargs)
        self.assertEqual(self.fake.requests, [])

    def test_empty_bags_and_empty_ids(self):
        got = self.client.look_up([], pooling="sum", offsets=[0, 0, 0])
        [r] = self.fake.requests
        self.assertEqual(list(r.offsets), [0, 0, 0])
        self.assertEqual(got.shape, (2, DIM))


class ListTablesTest(unittest.TestCase):
    def test_quantized_dtype_names_and_bytes(self):
        with Server(FakeLookUp()) as server, ec.EmbeddingClient(server.target) as c:
            q8, q4, f, _ = c.list_tables()
        self.assertEqual((q8["name"], q8["dtype"], q8["bytes"]), ("q8", "int8_rowwise", 2800))
        self.assertEqual((q4["dtype"], q4["bytes"]), ("int4_rowwise", 1400))
        self.assertEqual((f["dtype"], f["bytes"]), ("bfloat16", (1 << 32) * 256))

    def test_host_tier_cache_rows_and_device_bytes(self):
        with Server(FakeLookUp()) as server, ec.EmbeddingClient(server.target) as c:
            q8, _, f, _ = c.list_tables()
        self.assertEqual((f["host_tier"], f["cache_rows"], f["device_bytes"]),
                         (True, 1 << 28, (1 << 36) + 12345))
        self.assertEqual((q8["host_tier"], q8["cache_rows"], q8["device_bytes"]), (False, 0, 0))

    def test_placement_and_parts_of_a_table_over_several_devices(self):
        with Server(FakeLookUp()) as server, ec.EmbeddingClient(server.target) as c:
            q8, _, _, m = c.list_tables()
        self.assertEqual((q8["placement"], q8["parts"]), ("", []))
        self.assertEqual(m["placement"], "rows")
        self.assertEqual(m["parts"], [
            dict(device="cuda:0", first_row=0, rows=5, device_bytes=100, host_tier=False),
            dict(device="cuda:1", first_row=5, rows=5, device_bytes=200, host_tier=True)])


class ShardedClientTest(unittest.TestCase):
    """Issue 40: an id outside the table is the grpc.RpcError a server answers (as EmbeddingClient
    raises it), not an IndexError only; no call is made for it."""

    def test_ids_outside_the_table_are_rpc_errors_with_the_servers_codes(self):
        fake = FakeLookUp()
        with Server(fake) as server, ec.ShardedClient([server.target]) as c:
            for ids, code, details in (
                    ([5, 100], grpc.StatusCode.OUT_OF_RANGE,
                     "ids[1] = 100 is out of range for table 'q8' with 100 rows over 1 shards"),
                    ([[5, 6], [-1, 7]], grpc.StatusCode.INVALID_ARGUMENT,
                     "ids[2] = -1 is negative")):
                with self.assertRaises(grpc.RpcError, msg=repr(ids)) as raised:
                    c.look_up(ids)
                self.assertEqual(raised.exception.code(), code)
                self.assertIn(details, raised.exception.details())
                self.assertIsInstance(raised.exception, IndexError)  # as it was before
        self.assertEqual(fake.requests, [])


if __name__ == "__main__":
    unittest.main()
