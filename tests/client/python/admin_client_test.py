"""The Python admin client (client/python/embedding_client/) against an in-process gRPC server
that keeps the UpdateRows contract of embedding_admin.proto on a small float32 table (one
message at a time, in order, one ack each; the first bad message ends the stream with a status
and applies nothing), SaveTable (each version keeps the rows and the sequence saved) and
LoadVersion (serves a saved version again: 0 the newest, unpinned; any other pinned), and the
row encoding in each dtype, element by element on random data.
Needs the generated stubs on sys.path (admin_client_test.sh). The real server's side is
tests/tools/admin_update_check.sh, tests/tools/save_table_check.sh and
tests/tools/load_version_check.sh."""

import threading
import unittest
from concurrent import futures

import grpc
import numpy as np

import embedding_client as ec
from embedding.v1 import embedding_admin_pb2 as admin_pb
from embedding.v1 import embedding_admin_pb2_grpc as admin_pb_grpc
from embedding.v1 import embedding_service_pb2 as pb
from embedding.v1 import embedding_service_pb2_grpc as pb_grpc

ROWS, DIM = 100, 4


def widen(data, dtype):
    """The float32 values of `data` (bytes of `dtype`), as the server widens them."""
    if dtype == pb.DATA_TYPE_FLOAT16:
        return np.frombuffer(data, "<f2").astype(np.float32)
    if dtype == pb.DATA_TYPE_BFLOAT16:
        return (np.frombuffer(data, "<u2").astype(np.uint32) << 16).view(np.float32)
    return np.frombuffer(data, "<f4").copy()


class FakeAdmin(admin_pb_grpc.EmbeddingAdminServiceServicer):
    def __init__(self, mode="serve"):
        self.mode = mode  # serve, wrong_ack, never_ack
        self.lock = threading.Lock()
        self.table = np.zeros((ROWS, DIM), np.float32)
        self.last = 0
        self.applied = []
        self.requests = []
        self.saved = []          # (rows, sequence) of version k at [k - 1]
        self.save_requests = []  # their table fields
        self.load_requests = []  # (table, version) of each LoadVersion
        self.has_versions = True
        self.release_saves = threading.Event()

    def UpdateRows(self, request_iterator, context):
        for r in request_iterator:
            with self.lock:
                self.requests.append(r)
                if self.mode == "never_ack":
                    continue
                if r.table not in ("", "t"):
                    context.abort(grpc.StatusCode.NOT_FOUND, "no table '%s'" % r.table)
                if r.sequence <= self.last:
                    context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                  "sequence %d <= %d" % (r.sequence, self.last))
                if any(i < 0 or i >= ROWS for i in r.ids):
                    context.abort(grpc.StatusCode.OUT_OF_RANGE, "id out of range")
                values = widen(r.rows, r.dtype).reshape(len(r.ids), DIM)
                self.table[list(r.ids)] = values
                self.last = r.sequence
                self.applied.append(r.sequence)
            offset = 1 if self.mode == "wrong_ack" else 0
            yield admin_pb.UpdateRowsResponse(table="t", sequence=r.sequence + offset,
                                              rows=len(set(r.ids)))


    def SaveTable(self, request, context):
        if self.mode == "never_ack":  # a save that does not end until released
            self.release_saves.wait()
            context.abort(grpc.StatusCode.UNAVAILABLE, "released")
        with self.lock:
            self.save_requests.append(request.table)
            if request.table not in ("", "t"):
                context.abort(grpc.StatusCode.NOT_FOUND, "no table '%s'" % request.table)
            if not self.has_versions:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                              "table 't' was not loaded from a version directory")
            self.saved.append((self.table.copy(), self.last))
            version = len(self.saved)
            return admin_pb.SaveTableResponse(
                table="t", version=version, sequence=self.last,
                path="/versions/t/%d/t.safetensors" % version, bytes=ROWS * DIM * 4 + 128 + version)


    def LoadVersion(self, request, context):
        if self.mode == "never_ack":  # a load that does not end until released
            self.release_saves.wait()
            context.abort(grpc.StatusCode.UNAVAILABLE, "released")
        with self.lock:
            self.load_requests.append((request.table, request.version))
            if request.table not in ("", "t"):
                context.abort(grpc.StatusCode.NOT_FOUND, "no table '%s'" % request.table)
            if not self.has_versions:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                              "table 't' was not loaded from a version directory")
            version = request.version or len(self.saved)
            if not 1 <= version <= len(self.saved):
                context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                              "table 't' has no version %d" % request.version)
            rows, self.last = self.saved[version - 1]
            self.table = rows.copy()
            return admin_pb.LoadVersionResponse(table="t", version=version, sequence=self.last,
                                                pinned=request.version != 0)


class FakeLookUp(pb_grpc.EmbeddingServiceServicer):
    def ListTables(self, request, context):
        return pb.ListTablesResponse(tables=[
            pb.TableInfo(name="t", rows=ROWS, dim=DIM, dtype=pb.DATA_TYPE_FLOAT32, device="cpu",
                         is_default=True, sequence=1 << 40, updated_rows=12345, version=3 << 33,
                         version_pinned=True),
            pb.TableInfo(name="u", rows=1, dim=1, dtype=pb.DATA_TYPE_FLOAT16, device="cpu")])


class Server:
    def __init__(self, admin=None, lookup=None):
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        if admin:
            admin_pb_grpc.add_EmbeddingAdminServiceServicer_to_server(admin, self.server)
        if lookup:
            pb_grpc.add_EmbeddingServiceServicer_to_server(lookup, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.target = "127.0.0.1:%d" % self.port

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.server.stop(None)


def random_update(rng, n):
    return rng.permutation(ROWS)[:n], rng.standard_normal((n, DIM)).astype(np.float32)


class UpdateRequestTest(unittest.TestCase):
    def test_each_dtype_encodes_the_rows_as_the_server_converts(self):
        rng = np.random.default_rng(1)
        rows = (rng.standard_normal((50, DIM)) * 100).astype(np.float32)
        rows[0, :3] = [1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-8]  # ties round to even
        ids = np.arange(50)
        r = ec.update_request(ids, rows, 7, table="t")
        self.assertEqual((r.table, list(r.ids), r.sequence), ("t", list(range(50)), 7))
        self.assertEqual(r.dtype, pb.DATA_TYPE_FLOAT32)
        np.testing.assert_array_equal(widen(r.rows, r.dtype).reshape(rows.shape), rows)
        half = ec.update_request(ids, rows, 7, dtype="float16")
        self.assertEqual(half.dtype, pb.DATA_TYPE_FLOAT16)
        got = widen(half.rows, half.dtype).reshape(rows.shape)
        np.testing.assert_array_equal(got, rows.astype(np.float16).astype(np.float32))
        self.assertEqual(got[0, 0], 1.0)
        self.assertEqual(got[0, 1], 1 + 4 * 2**-11)
        # float16 arrays go as they are, with no dtype given.
        self.assertEqual(ec.update_request(ids, rows.astype(np.float16), 7).dtype,
                         pb.DATA_TYPE_FLOAT16)
        bf = ec.update_request(ids, rows, 7, dtype="bfloat16")
        self.assertEqual(bf.dtype, pb.DATA_TYPE_BFLOAT16)
        got = widen(bf.rows, bf.dtype).reshape(rows.shape)
        # Round to nearest even, independently: the float32 value's nearest bfloat16 neighbours.
        bits = rows.view(np.uint32)
        low = (bits & 0xFFFF0000).view(np.float32)
        high = ((bits & 0xFFFF0000) + 0x10000).view(np.float32)
        nearer_low = (np.abs(rows - low) < np.abs(high - rows)) | (
            (np.abs(rows - low) == np.abs(high - rows)) & (((bits >> 16) & 1) == 0))
        np.testing.assert_array_equal(got, np.where(nearer_low, low, high))
        self.assertEqual(got[0, 2], 1.0)
        # uint16 rows with dtype="bfloat16" are the bits themselves.
        raw = ec.update_request(ids, np.frombuffer(bf.rows, "<u2").reshape(rows.shape), 7,
                                dtype="bfloat16")
        self.assertEqual(raw.rows, bf.rows)
        # float64 rows convert only when asked.
        self.assertEqual(ec.update_request(ids, rows.astype(np.float64), 7, dtype=np.float32).rows,
                         r.rows)

    def test_bad_arguments_are_value_errors(self):
        rows = np.zeros((2, DIM), np.float32)
        for ids, rs, dtype in (([1, 2], rows.astype(np.float64), None),  # float64, no dtype
                               ([1, 2], rows, "float64"),
                               ([1, 2], rows, "int8"),
                               ([1, 2], rows[0], None),                  # 1-D rows
                               ([1, 2, 3], rows, None),                  # 3 ids, 2 rows
                               ([[1, 2]], rows, None),                   # 2-D ids
                               ([1.5, 2.0], rows, None),                 # float ids
                               ([1, 2], rows.astype(np.int32), "float32")):
            with self.assertRaises(ValueError, msg=(ids, rs.dtype, dtype)):
                ec.update_request(ids, rs, 1, dtype=dtype)
        r = ec.update_request([], np.zeros((0, DIM), np.float32), 3)
        self.assertEqual((list(r.ids), r.rows), ([], b""))


class AdminClientTest(unittest.TestCase):
    def test_update_rows_returns_the_ack_and_the_rows_arrive(self):
        fake = FakeAdmin()
        rng = np.random.default_rng(2)
        with Server(admin=fake) as server, ec.EmbeddingAdminClient(server.target) as admin:
            ids, rows = random_update(rng, 17)
            ack = admin.update_rows(ids, rows, sequence=5)
            self.assertEqual(ack, ec.UpdateAck("t", 5, 17))
            np.testing.assert_array_equal(fake.table[ids], rows)
            ids, rows = random_update(rng, 9)
            admin.update_rows(ids, rows, sequence=6, dtype="float16")
            np.testing.assert_array_equal(fake.table[ids],
                                          rows.astype(np.float16).astype(np.float32))

    def test_errors_are_rpc_errors_and_apply_nothing(self):
        fake = FakeAdmin()
        rng = np.random.default_rng(3)
        with Server(admin=fake) as server, ec.EmbeddingAdminClient(server.target) as admin:
            with self.assertRaises(grpc.RpcError) as e:
                admin.update_rows(*random_update(rng, 2), sequence=1, table="nope")
            self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
            self.assertIn("no table 'nope'", e.exception.details())
            ids, rows = random_update(rng, 2)
            ids[1] = ROWS
            with self.assertRaises(grpc.RpcError) as e:
                admin.update_rows(ids, rows, sequence=1)
            self.assertEqual(e.exception.code(), grpc.StatusCode.OUT_OF_RANGE)
        self.assertEqual(fake.applied, [])

    def test_pipelined_writer_acks_in_order(self):
        fake = FakeAdmin()
        rng = np.random.default_rng(4)
        expected = {}
        with Server(admin=fake) as server, ec.EmbeddingAdminClient(server.target) as admin:
            with admin.open_writer(max_unacked=8) as w:
                for seq in range(1, 301):
                    ids, rows = random_update(rng, 1 + seq % 7)
                    w.send(ids, rows, sequence=10 * seq)
                    expected.update(zip(ids.tolist(), rows))
                first = [w.next_ack() for _ in range(100)]
                rest = w.finish()
                with self.assertRaises(RuntimeError):
                    w.next_ack()
        acks = first + rest
        self.assertEqual([a.sequence for a in acks], [10 * s for s in range(1, 301)])
        self.assertEqual([a.rows for a in acks], [1 + s % 7 for s in range(1, 301)])
        for i, row in expected.items():
            np.testing.assert_array_equal(fake.table[i], row)

    def test_first_bad_message_ends_the_stream_after_the_earlier_acks(self):
        fake = FakeAdmin()
        rng = np.random.default_rng(5)
        good = [random_update(rng, 3) for _ in range(4)]
        with Server(admin=fake) as server, ec.EmbeddingAdminClient(server.target) as admin:
            w = admin.open_writer()
            for seq, (ids, rows) in enumerate(good, 1):
                w.send(ids, rows, sequence=seq)
            w.send(*random_update(rng, 3), sequence=4)  # not increasing
            for seq in range(1, 5):
                self.assertEqual(w.next_ack().sequence, seq)
            with self.assertRaises(grpc.RpcError) as e:
                w.next_ack()
            self.assertEqual(e.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
            self.assertIn("sequence 4 <= 4", e.exception.details())
            with self.assertRaises(grpc.RpcError):
                w.send(*random_update(rng, 3), sequence=9)
            with self.assertRaises(grpc.RpcError):
                w.finish()
        self.assertEqual(fake.applied, [1, 2, 3, 4])
        expected = {}
        for ids, rows in good:
            expected.update(zip(ids.tolist(), rows))  # the last write of each id
        for i, row in expected.items():
            np.testing.assert_array_equal(fake.table[i], row)

    def test_update_stream_yields_acks_then_raises(self):
        fake = FakeAdmin()
        rng = np.random.default_rng(6)
        updates = [random_update(rng, 2) for _ in range(5)]
        messages = [dict(ids=i, rows=r, sequence=s) for s, (i, r) in enumerate(updates, 1)]
        with Server(admin=fake) as server, ec.EmbeddingAdminClient(server.target) as admin:
            acks = list(admin.update_stream(iter(messages)))
            self.assertEqual([a.sequence for a in acks], [1, 2, 3, 4, 5])
            bad = [dict(ids=[1], rows=np.ones((1, DIM), np.float32), sequence=6),
                   dict(ids=[2], rows=np.ones((1, DIM), np.float32), sequence=6, table="x")]
            got = []
            with self.assertRaises(grpc.RpcError) as e:
                for ack in admin.update_stream(bad):
                    got.append(ack.sequence)
            self.assertEqual(got, [6])
            self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
            # A message the client cannot encode: the ones before it are applied, then its
            # ValueError is raised in the caller's thread.
            got = []
            with self.assertRaises(ValueError):
                for ack in admin.update_stream([
                        dict(ids=[3], rows=np.ones((1, DIM), np.float32), sequence=7),
                        dict(ids=[4], rows=np.ones((1, DIM), np.float64), sequence=8)]):
                    got.append(ack.sequence)
            self.assertEqual(got, [7])
        self.assertEqual(fake.applied, [1, 2, 3, 4, 5, 6, 7])
        expected = {}
        for ids, rows in updates:
            expected.update(zip(ids.tolist(), rows))
        expected[1] = expected[3] = np.ones(DIM, np.float32)  # sequences 6 and 7
        for i, row in expected.items():
            np.testing.assert_array_equal(fake.table[i], row)

    def test_an_ack_of_another_sequence_is_an_error(self):
        with Server(admin=FakeAdmin("wrong_ack")) as server, \
                ec.EmbeddingAdminClient(server.target) as admin:
            with self.assertRaisesRegex(RuntimeError, "acknowledged sequence 4; expected 3"):
                admin.update_rows([1], np.ones((1, DIM), np.float32), sequence=3)

    def test_the_timeout_is_the_streams_deadline(self):
        with Server(admin=FakeAdmin("never_ack")) as server, \
                ec.EmbeddingAdminClient(server.target) as admin:
            with self.assertRaises(grpc.RpcError) as e:
                admin.update_rows([1], np.ones((1, DIM), np.float32), sequence=1, timeout=0.3)
            self.assertEqual(e.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)

    def test_a_dropped_writer_cancels_its_stream(self):
        fake = FakeAdmin("never_ack")
        with Server(admin=fake) as server, ec.EmbeddingAdminClient(server.target) as admin:
            w = admin.open_writer(timeout=60)
            w.send([1], np.ones((1, DIM), np.float32), sequence=1)
            call = w._call
            del w
            # The stream ends now, cancelled, not at its deadline a minute later.
            self.assertEqual(call.code(), grpc.StatusCode.CANCELLED)

    def test_list_tables_reports_sequence_updated_rows_and_version(self):
        with Server(lookup=FakeLookUp()) as server, ec.EmbeddingClient(server.target) as c:
            t, u = c.list_tables()
            versions = c.versions()
        self.assertEqual(t["sequence"], 1 << 40)
        self.assertEqual(t["updated_rows"], 12345)
        self.assertEqual(t["version"], 3 << 33)
        self.assertIs(t["version_pinned"], True)
        self.assertIs(u["version_pinned"], False)
        self.assertTrue(t["is_default"])
        self.assertEqual((u["name"], u["version"], u["sequence"]), ("u", 0, 0))
        self.assertEqual(versions, {"t": (3 << 33, 1 << 40, True), "u": (0, 0, False)})
        self.assertIsInstance(versions["t"], ec.TableVersion)
        self.assertEqual((versions["t"].version, versions["t"].sequence, versions["t"].pinned),
                         (3 << 33, 1 << 40, True))

    def test_save_table_returns_the_version_written(self):
        fake = FakeAdmin()
        rng = np.random.default_rng(7)
        with Server(admin=fake) as server, ec.EmbeddingAdminClient(server.target) as admin:
            ids, rows = random_update(rng, 20)
            admin.update_rows(ids, rows, sequence=41)
            first = admin.save_table()
            self.assertIsInstance(first, ec.SavedVersion)
            self.assertEqual(first, ec.SavedVersion("t", 1, 41, "/versions/t/1/t.safetensors",
                                                    ROWS * DIM * 4 + 129))
            self.assertEqual((first.version, first.sequence), (1, 41))
            more, more_rows = random_update(rng, 5)
            admin.update_rows(more, more_rows, sequence=50)
            second = admin.save_table("t", timeout=10)
            self.assertEqual(second, ec.SavedVersion("t", 2, 50, "/versions/t/2/t.safetensors",
                                                     ROWS * DIM * 4 + 130))
        self.assertEqual(fake.save_requests, ["", "t"])
        model = np.zeros((ROWS, DIM), np.float32)
        model[ids] = rows
        np.testing.assert_array_equal(fake.saved[0][0], model)
        model[more] = more_rows
        np.testing.assert_array_equal(fake.saved[1][0], model)

    def test_save_table_errors_are_rpc_errors(self):
        fake = FakeAdmin()
        with Server(admin=fake) as server, ec.EmbeddingAdminClient(server.target) as admin:
            with self.assertRaises(grpc.RpcError) as e:
                admin.save_table("nope")
            self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
            self.assertIn("no table 'nope'", e.exception.details())
            fake.has_versions = False
            with self.assertRaises(grpc.RpcError) as e:
                admin.save_table()
            self.assertEqual(e.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        self.assertEqual(fake.saved, [])

    def test_save_table_timeout_is_the_calls_deadline(self):
        fake = FakeAdmin("never_ack")
        with Server(admin=fake) as server, ec.EmbeddingAdminClient(server.target) as admin:
            try:
                with self.assertRaises(grpc.RpcError) as e:
                    admin.save_table(timeout=0.3)
                self.assertEqual(e.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
            finally:
                fake.release_saves.set()

    def test_load_version_serves_and_pins_the_version(self):
        fake = FakeAdmin()
        rng = np.random.default_rng(8)
        with Server(admin=fake) as server, ec.EmbeddingAdminClient(server.target) as admin:
            ids, rows = random_update(rng, 20)
            admin.update_rows(ids, rows, sequence=7)
            admin.save_table()                       # version 1
            more, more_rows = random_update(rng, 30)
            admin.update_rows(more, more_rows, sequence=1 << 35)
            admin.save_table()                       # version 2
            rollback = admin.load_version(1)
            self.assertIsInstance(rollback, ec.LoadedVersion)
            self.assertEqual(rollback, ec.LoadedVersion("t", 1, 7, True))
            self.assertEqual((rollback.version, rollback.sequence, rollback.pinned), (1, 7, True))
            model = np.zeros((ROWS, DIM), np.float32)
            model[ids] = rows
            np.testing.assert_array_equal(fake.table, model)
            newest = admin.load_version(table="t", timeout=10)
            self.assertEqual(newest, ec.LoadedVersion("t", 2, 1 << 35, False))
            model[more] = more_rows
            np.testing.assert_array_equal(fake.table, model)
            pinned = admin.load_version(np.int64(2), "t")  # NumPy integers are versions too
            self.assertEqual(pinned, ec.LoadedVersion("t", 2, 1 << 35, True))
        self.assertEqual(fake.load_requests, [("", 1), ("t", 0), ("t", 2)])

    def test_load_version_errors(self):
        fake = FakeAdmin()
        with Server(admin=fake) as server, ec.EmbeddingAdminClient(server.target) as admin:
            admin.save_table()
            with self.assertRaises(grpc.RpcError) as e:
                admin.load_version(1, "nope")
            self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
            self.assertIn("no table 'nope'", e.exception.details())
            with self.assertRaises(grpc.RpcError) as e:
                admin.load_version(5)
            self.assertEqual(e.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
            self.assertIn("no version 5", e.exception.details())
            fake.has_versions = False
            with self.assertRaises(grpc.RpcError) as e:
                admin.load_version()
            self.assertEqual(e.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
            for bad in (-1, 1.5, "2", True, None):
                with self.assertRaises(ValueError, msg=repr(bad)):
                    admin.load_version(bad)
        self.assertEqual(fake.load_requests, [("nope", 1), ("", 5), ("", 0)])  # ValueError: none

    def test_load_version_timeout_is_the_calls_deadline(self):
        fake = FakeAdmin("never_ack")
        with Server(admin=fake) as server, ec.EmbeddingAdminClient(server.target) as admin:
            try:
                with self.assertRaises(grpc.RpcError) as e:
                    admin.load_version(1, timeout=0.3)
                self.assertEqual(e.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
            finally:
                fake.release_saves.set()


if __name__ == "__main__":
    unittest.main()
