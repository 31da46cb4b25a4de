"""EmbeddingAdminClient: row updates (update_request, RowWriter), saved versions and loading
them, on the server's admin listener."""

import collections
import numbers
import queue

import grpc
import numpy as np

from embedding.v1 import embedding_admin_pb2 as admin_pb
from embedding.v1 import embedding_admin_pb2_grpc as admin_pb_grpc

from ._common import (
    _DTYPES,
    _OneChannelClient,
    _dtype_name,
    UpdateAck,
    SavedVersion,
    LoadedVersion,
)


def _float_to_bfloat16_bits(values):
    """float32 values as bfloat16 bits (uint16), rounded to nearest even as the server rounds;
    NaN stays a (quiet) NaN."""
    bits = np.ascontiguousarray(values, dtype="<f4").view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, ((bits >> 16) | 0x40).astype(np.uint16), rounded)


def update_request(ids, rows, sequence, table="", dtype=None):
    """An UpdateRowsRequest for `ids` (1-D integers) and `rows` (a 2-D array, one row per id).

    dtype: the type the rows are sent in: "float32", "float16", "bfloat16" (numpy's float32 and
    float16 types are taken for their names) or None: the array's own, which must then be
    float32, float16 or ml_dtypes' bfloat16. Rows of another float type are converted
    (float16 and bfloat16 rounded to nearest even); for "bfloat16", a uint16 array is taken as
    the bits. Anything else is a ValueError, as are ids that are not 1-D integers and rows
    that are not 2-D with len(ids) rows.
    """
    ids = np.asarray(ids)
    if ids.size == 0:
        ids = ids.astype(np.int64)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError("ids must be a 1-D array of integers, not %s of shape %s"
                         % (ids.dtype, ids.shape))
    rows = np.asarray(rows)
    if rows.ndim != 2 or rows.shape[0] != ids.shape[0]:
        raise ValueError("rows must be 2-D with one row per id (%d ids), not of shape %s"
                         % (ids.shape[0], rows.shape))
    own = rows.dtype.name
    if dtype is None:
        if own not in _DTYPES:
            raise ValueError("rows are %s: pass float32, float16 or bfloat16 rows, or give "
                             "dtype= to convert them" % own)
        dtype = own
    dtype = _dtype_name(dtype)
    if dtype == "bfloat16":
        if own in ("uint16", "bfloat16"):
            data = np.ascontiguousarray(rows).view(np.uint16).astype("<u2", copy=False)
        elif np.issubdtype(rows.dtype, np.floating):
            data = _float_to_bfloat16_bits(rows.astype(np.float32)).astype("<u2", copy=False)
        else:
            raise ValueError("rows are %s: bfloat16 rows are floats, or their bits as uint16"
                             % own)
    else:
        if not np.issubdtype(rows.dtype, np.floating) and own != "bfloat16":
            raise ValueError("rows are %s, not floats" % own)
        if own == "bfloat16":
            rows = rows.astype(np.float32)
        data = np.ascontiguousarray(rows, dtype=_DTYPES[dtype][1])
    return admin_pb.UpdateRowsRequest(table=table, ids=ids.astype(np.int64).tolist(),
                                      rows=data.tobytes(), dtype=_DTYPES[dtype][0],
                                      sequence=int(sequence))


def _ack(response):
    return UpdateAck(response.table, response.sequence, response.rows)


class RowWriter:
    """One UpdateRows stream (EmbeddingAdminClient.open_writer). Messages are applied in the
    order sent, each answered by one ack, in order; the first the server refuses ends the stream
    with its status (as grpc.RpcError), the ones before it staying applied. Not thread-safe.

    send() does not wait for the ack; it waits only while `max_unacked` messages are
    unacknowledged on the wire (it then reads the oldest ack, kept for next_ack()).
    As a context manager: finish() on a clean exit, cancel() on an exception.
    """

    _END = object()

    def __init__(self, stub, timeout, max_unacked):
        if max_unacked < 1:
            raise ValueError("max_unacked must be at least 1, not %r" % (max_unacked,))
        self._max_unacked = max_unacked
        self._requests = queue.Queue()
        self._in_flight = collections.deque()  # sequences sent, not yet acked on the wire
        self._acks = collections.deque()       # read, not yet returned by next_ack
        self._finished = False
        self._call = stub.UpdateRows(iter(self._requests.get, self._END), timeout=timeout)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self.finish()
        else:
            self.cancel()

    def __del__(self):
        # A writer dropped without finish() or cancel(): end its stream rather than leave it
        # open until its deadline, with gRPC's thread waiting on the queue.
        try:
            if not self._finished:
                self.cancel()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass

    def _raise_if_ended(self):
        if self._call.done() and self._call.code() != grpc.StatusCode.OK:
            self._requests.put(self._END)  # lets gRPC's thread that reads the queue end
            raise self._call  # the stream's grpc.RpcError

    def _read(self):
        """Reads one ack into self._acks; raises the stream's RpcError if it ended."""
        try:
            response = next(self._call)
        except StopIteration:
            raise RuntimeError("the server ended the stream with %d messages unacknowledged"
                               % len(self._in_flight)) from None
        if not self._in_flight or response.sequence != self._in_flight[0]:
            self._call.cancel()
            raise RuntimeError("the server acknowledged sequence %d; expected %s"
                               % (response.sequence,
                                  self._in_flight[0] if self._in_flight else "none"))
        self._in_flight.popleft()
        self._acks.append(_ack(response))

    def send(self, ids, rows, sequence, table="", dtype=None):
        """Queues one update (update_request's arguments). Raises the stream's grpc.RpcError if
        it has ended (an earlier message was refused, the deadline passed), ValueError for bad
        arguments (nothing sent), RuntimeError after finish()."""
        self._send(update_request(ids, rows, sequence, table, dtype))

    def _send(self, request):
        if self._finished:
            raise RuntimeError("send after finish")
        self._raise_if_ended()
        while len(self._in_flight) >= self._max_unacked:
            self._read()
        self._in_flight.append(request.sequence)
        self._requests.put(request)

    def next_ack(self):
        """The UpdateAck of the oldest message whose ack was not returned yet, waiting for it.
        Raises the stream's grpc.RpcError if it ended before that message was applied, and
        RuntimeError if every message sent has been acknowledged."""
        if not self._acks:
            if not self._in_flight:
                raise RuntimeError("every message sent has been acknowledged")
            self._read()
        return self._acks.popleft()

    def write(self, ids, rows, sequence, table="", dtype=None):
        """send(), then its ack; only with no ack outstanding (RuntimeError otherwise)."""
        return self._write(update_request(ids, rows, sequence, table, dtype))

    def _write(self, request):
        if self._acks or self._in_flight:
            raise RuntimeError("write with %d acks outstanding; read them with next_ack first"
                               % (len(self._acks) + len(self._in_flight)))
        self._send(request)
        return self.next_ack()

    def finish(self):
        """Ends the stream and waits for the acks of every message sent; returns those that
        next_ack() has not returned, in order. Raises the stream's grpc.RpcError if it ended
        with an error (the acks that came before it are still returned by next_ack())."""
        if not self._finished:
            self._finished = True
            self._requests.put(self._END)
        while self._in_flight:
            self._read()
        try:
            response = next(self._call)  # the end of the stream, or its RpcError
        except StopIteration:
            pass
        else:
            raise RuntimeError("the server acknowledged sequence %d with no message in flight"
                               % response.sequence)
        acks, self._acks = list(self._acks), collections.deque()
        return acks

    def cancel(self):
        """Cancels the stream: messages not yet acknowledged may or may not be applied."""
        self._finished = True
        self._requests.put(self._END)
        self._call.cancel()


class EmbeddingAdminClient(_OneChannelClient):
    """A client of embedding.v1.EmbeddingAdminService, on the server's admin listener (its
    --admin_address). TLS arguments as EmbeddingClient's: the admin listener wants mutual TLS
    with a client certificate on its allow-list, unless the server runs it in plaintext on a
    loopback address (--admin_insecure). Thread-safe; a RowWriter is not."""

    def __init__(self, target, timeout=30.0, tls=None, tls_ca=None, tls_cert=None, tls_key=None,
                 tls_server_name=None):
        """timeout: the default deadline of each call (for a stream: of the whole stream)."""
        super().__init__(admin_pb_grpc.EmbeddingAdminServiceStub, target, timeout, tls, tls_ca,
                         tls_cert, tls_key, tls_server_name)

    def update_rows(self, ids, rows, sequence, table="", dtype=None, timeout=None):
        """Overwrites rows `ids` of `table` ("" the server's default) with `rows` (a 2-D numpy
        array, one row per id; see update_request for dtype) as update `sequence`, which must be
        greater than the table's last applied one (list_tables()' sequence). Returns its
        UpdateAck once the rows are visible to lookups. Errors are grpc.RpcError: NOT_FOUND
        (table), INVALID_ARGUMENT, OUT_OF_RANGE (an id), FAILED_PRECONDITION (the sequence),
        PERMISSION_DENIED (a client not on the allow-list), ...; ValueError for bad arguments."""
        request = update_request(ids, rows, sequence, table, dtype)
        with self.open_writer(timeout=timeout) as writer:
            return writer._write(request)

    def save_table(self, table="", timeout=None):
        """Has the server write `table` ("" the server's default) as it is now, its updates
        included, as the next version of the table's version directory; returns its
        SavedVersion once the version is complete on disk. Updates of the table wait while it is
        written; lookups go on. Errors are grpc.RpcError: NOT_FOUND (table),
        FAILED_PRECONDITION (the table was not loaded from a version directory, or it holds
        version 2^63-1), ABORTED (a save of the table is already queued or running),
        RESOURCE_EXHAUSTED (64 saves and loads wait already), INTERNAL (the write failed; no
        version was left), PERMISSION_DENIED, DEADLINE_EXCEEDED (the save may still complete),
        ..."""
        response = self._stub.SaveTable(admin_pb.SaveTableRequest(table=table),
                                        timeout=timeout or self._timeout)
        return SavedVersion(response.table, response.version, response.sequence, response.path,
                            response.bytes)

    def load_version(self, version=0, table="", timeout=None):
        """Has the server serve `version` of `table` ("" the server's default) from the table's
        version directory: loaded beside the served one, then swapped in between batches; returns
        its LoadedVersion once it is served. version=0: the newest there, unpinned; any other is
        served and pinned (a rollback): polling for newer versions leaves the table on it until
        a load_version(0). Errors are grpc.RpcError: NOT_FOUND (table), FAILED_PRECONDITION (no
        version directory, a missing or broken version, another shape or type, no room for both
        copies: the served version stays), ABORTED (a save or load of the table is running),
        RESOURCE_EXHAUSTED (64 saves and loads wait already), PERMISSION_DENIED,
        DEADLINE_EXCEEDED (the load may still complete), ...; ValueError,
        before sending, for a version that is not an integer >= 0."""
        if isinstance(version, bool) or not isinstance(version, numbers.Integral) or version < 0:
            raise ValueError("version must be 0 (the newest) or a version number, got %r"
                             % (version,))
        response = self._stub.LoadVersion(
            admin_pb.LoadVersionRequest(table=table, version=int(version)),
            timeout=timeout or self._timeout)
        return LoadedVersion(response.table, response.version, response.sequence,
                             response.pinned)

    def open_writer(self, timeout=None, max_unacked=256):
        """A RowWriter on a new UpdateRows stream, whose deadline is `timeout` from now."""
        return RowWriter(self._stub, timeout or self._timeout, max_unacked)

    def update_stream(self, messages, timeout=None):
        """Sends `messages` on one stream, as the iterable yields them, and yields each one's
        UpdateAck as it arrives, in order. Each message is a dict of update_request's arguments
        (ids, rows, sequence, and optionally table and dtype) or an UpdateRowsRequest. A refused
        message ends the stream: the generator raises its grpc.RpcError after the acks of the
        messages before it."""
        sent = collections.deque()
        error = []

        def requests():
            # An exception here would reach gRPC's thread, not the caller: keep it, end the
            # stream (the messages before it are applied and acknowledged) and raise it below.
            try:
                for m in messages:
                    request = (m if isinstance(m, admin_pb.UpdateRowsRequest)
                               else update_request(**m))
                    sent.append(request.sequence)
                    yield request
            except Exception as e:  # noqa: BLE001 (re-raised in the caller's thread)
                error.append(e)

        call = self._stub.UpdateRows(requests(), timeout=timeout or self._timeout)
        try:
            for response in call:
                expected = sent.popleft() if sent else None
                if response.sequence != expected:
                    raise RuntimeError("the server acknowledged sequence %d; expected %s"
                                       % (response.sequence, expected))
                yield _ack(response)
        finally:
            call.cancel()  # a no-op once the stream has ended
        if error:
            raise error[0]
