#include "service/batch/batcher.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu_gather.h"
#include "kernels/data_type.h"
#include "service/metrics/metrics.h"
#include "service/store/cpu_store.h"
#include "service/store/embedding_store.h"
#include "service/tables/table_source.h"
#include "service/write/table_writer.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/status_matchers.h"

namespace emb::service::batcher_test {
namespace {

using ::emb::testing::FakeClock;
using ::emb::testing::IsOk;
using ::emb::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kRows = 1000;
constexpr int64_t kDim = 24;
// Long enough that a batch never flushes by time within a test: only a full batch or Shutdown()
// makes it run.
constexpr absl::Duration kForever = absl::Hours(1);

// A store that takes its table's description and its updates from `inner`; subclasses say how
// LookUp runs.
class WrappingStore : public EmbeddingStore {
 public:
  explicit WrappingStore(EmbeddingStore* inner)
      : EmbeddingStore(inner->info(), inner->max_batch_ids()), inner_(inner) {}

  absl::StatusOr<std::unique_ptr<PreparedRows>> PrepareRows(
      absl::Span<const int64_t> ids, DataType rows_type,
      absl::Span<const std::byte> rows) override {
    return inner_->PrepareRows(ids, rows_type, rows);
  }
  absl::Status WriteRows(PreparedRows& rows) override { return inner_->WriteRows(rows); }

 protected:
  EmbeddingStore* const inner_;
};

// Wraps a store: records each LookUp's id count and answer type and, while the gate is closed,
// holds every LookUp (on the batcher's thread) until Open().
class GateStore final : public WrappingStore {
 public:
  struct Call {
    size_t ids;
    DataType out_type;
    bool operator==(const Call& o) const { return ids == o.ids && out_type == o.out_type; }
  };

  GateStore(EmbeddingStore* inner, bool open) : WrappingStore(inner), open_(open) {}

  using EmbeddingStore::LookUp;
  void LookUp(const LookUpBatch& batch, Done done) override {
    {
      absl::MutexLock lock(&mu_);
      calls_.push_back(Call{batch.ids.size(), batch.out_type});
      mu_.Await(absl::Condition(&open_));
    }
    inner_->LookUp(batch, std::move(done));
  }

  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  // Blocks until `n` LookUps have started (and, while the gate is closed, are being held).
  void WaitForCalls(size_t n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return calls_.size() >= n; };
    mu_.Await(absl::Condition(&reached));
  }
  std::vector<Call> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  mutable absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_);
  std::vector<Call> calls_ ABSL_GUARDED_BY(mu_);
};

void PrintTo(const GateStore::Call& c, std::ostream* os) {
  *os << "{" << c.ids << " ids, " << DataTypeName(c.out_type) << "}";
}

// A store whose every LookUp fails.
class FailingStore final : public WrappingStore {
 public:
  explicit FailingStore(EmbeddingStore* inner) : WrappingStore(inner) {}
  using EmbeddingStore::LookUp;
  void LookUp(const LookUpBatch&, Done done) override {
    done(absl::InternalError("cudaErrorMemoryAllocation: out of memory"), StageTimes{});
  }
};

// Wraps a store and records the thread of each LookUp. Asynchronous, it keeps each LookUp
// pending (as a GPU store's enqueued batch) until Finish() gathers it, on the caller of Finish();
// synchronous, it gathers at once.
class ThreadRecordingStore final : public WrappingStore {
 public:
  ThreadRecordingStore(EmbeddingStore* inner, bool asynchronous, int max_inflight_batches = 1)
      : WrappingStore(inner),
        asynchronous_(asynchronous),
        max_inflight_batches_(max_inflight_batches) {}

  bool asynchronous() const override { return asynchronous_; }
  int max_inflight_batches() const override { return max_inflight_batches_; }

  using EmbeddingStore::LookUp;
  void LookUp(const LookUpBatch& batch, Done done) override {
    if (!asynchronous_) {
      Record(std::this_thread::get_id());
      inner_->LookUp(batch, std::move(done));
      return;
    }
    absl::MutexLock lock(&mu_);
    threads_.push_back(std::this_thread::get_id());
    pending_.push_back(Pending{batch, std::move(done)});
  }

  // Waits until `n` LookUps have come, then gathers the pending ones.
  void Finish(size_t n) {
    std::vector<Pending> batches;
    {
      absl::MutexLock lock(&mu_);
      auto reached = [this, n]()
                         ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return threads_.size() >= n; };
      mu_.Await(absl::Condition(&reached));
      batches.swap(pending_);
    }
    for (Pending& p : batches) {
      inner_->LookUp(p.batch, std::move(p.done));
    }
  }
  std::vector<std::thread::id> threads() const {
    absl::MutexLock lock(&mu_);
    return threads_;
  }

 private:
  struct Pending {
    LookUpBatch batch;  // its spans stay valid until `done` runs
    Done done;
  };
  void Record(std::thread::id id) {
    absl::MutexLock lock(&mu_);
    threads_.push_back(id);
  }

  const bool asynchronous_;
  const int max_inflight_batches_;
  mutable absl::Mutex mu_;
  std::vector<std::thread::id> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<Pending> pending_ ABSL_GUARDED_BY(mu_);
};

// Host memory from new[], each block recorded until released. A block's device address is its
// host address plus kDeviceOffset, as if a device saw it there.
class RecordingAllocator final : public HostAllocator {
 public:
  static constexpr uintptr_t kDeviceOffset = 1 << 20;

  HostBlock Allocate(size_t bytes) const override {
    void* p = new std::byte[bytes];
    absl::MutexLock lock(&mu_);
    blocks_.push_back(p);
    return HostBlock{p, reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) + kDeviceOffset)};
  }
  void Release(void* p) const override {
    {
      absl::MutexLock lock(&mu_);
      blocks_.erase(std::find(blocks_.begin(), blocks_.end(), p));
    }
    delete[] static_cast<std::byte*>(p);
  }
  // Whether `p` is the start of a block from this allocator that is not yet released.
  bool Allocated(const void* p) const {
    absl::MutexLock lock(&mu_);
    return std::find(blocks_.begin(), blocks_.end(), p) != blocks_.end();
  }

 private:
  mutable absl::Mutex mu_;
  mutable std::vector<void*> blocks_ ABSL_GUARDED_BY(mu_);
};

// A store that records the answer spans each LookUp got, then lets `inner` gather.
class SpanRecordingStore final : public WrappingStore {
 public:
  explicit SpanRecordingStore(EmbeddingStore* inner) : WrappingStore(inner) {}
  using EmbeddingStore::LookUp;
  void LookUp(const LookUpBatch& batch, Done done) override {
    {
      absl::MutexLock lock(&mu_);
      spans_.insert(spans_.end(), batch.outs.begin(), batch.outs.end());
    }
    inner_->LookUp(batch, std::move(done));
  }
  std::vector<AnswerSpan> spans() const {
    absl::MutexLock lock(&mu_);
    return spans_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<AnswerSpan> spans_ ABSL_GUARDED_BY(mu_);
};

// One caller: its ids, its answer buffer and what `done` reported.
struct Call {
  Call(std::vector<int64_t> ids_in, DataType type) : ids(std::move(ids_in)), out_type(type) {}

  // A request that answers into this call; `this` must outlive it.
  Batcher::Request Request(absl::Time deadline = absl::InfiniteFuture()) {
    Batcher::Request r;
    r.ids = ids;
    r.out_type = out_type;
    r.out = &out;
    r.deadline = deadline;
    r.done = [this](const absl::Status& s) {
      status = s;
      if (done_count.fetch_add(1) == 0) {
        done.Notify();
      }
    };
    return r;
  }

  std::vector<int64_t> ids;
  DataType out_type;
  AnswerBuffer out;  // the answer; stays empty unless the call succeeds
  absl::Status status;
  std::atomic<int> done_count{0};
  absl::Notification done;
};

std::vector<int64_t> Iota(int64_t first, int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    ids[static_cast<size_t>(i)] = (first + i * 37) % kRows;
  }
  return ids;
}

class BatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    source_ = TableSource::Demo("t", kRows, kDim, /*seed=*/2024);
    auto rows = source_->ReadAll();
    ASSERT_THAT(rows, IsOk());
    table_ = std::move(*rows);
    StoreOptions options;
    options.max_batch_ids = 1 << 16;
    auto store = CpuStore::Create(*source_, options);
    ASSERT_THAT(store, IsOk());
    store_ = std::move(*store);
    table_metrics_ = metrics_.AddTable("t", "float32", "cpu", kRows, kDim,
                                       static_cast<int64_t>(source_->bytes()));
  }

  // Rows `ids` of the table converted to `type`, from the CPU reference gather.
  std::vector<std::byte> Expected(absl::Span<const int64_t> ids, DataType type) const {
    std::vector<std::byte> out(ids.size() * kDim * ElementSize(type));
    kernels::CpuGather(table_->data(), DataType::kFloat32, kDim, ids, type, out.data());
    return out;
  }

  // Empty when `call` got OK and exactly its own rows; otherwise what went wrong.
  std::string CheckRows(const Call& call) const {
    if (call.done_count.load() != 1) {
      return absl::StrCat("done ran ", call.done_count.load(), " times");
    }
    if (!call.status.ok()) {
      return call.status.ToString();
    }
    const std::vector<std::byte> want = Expected(call.ids, call.out_type);
    const size_t size = ElementSize(call.out_type);
    if (call.out.size() != want.size()) {
      return absl::StrCat("answer has ", call.out.size(), " bytes, want ", want.size());
    }
    for (size_t e = 0; e < want.size() / size; ++e) {
      if (std::memcmp(want.data() + e * size, call.out.data() + e * size, size) != 0) {
        const size_t row = e / kDim;
        return absl::StrCat(DataTypeName(call.out_type), " answer differs at position ", row,
                            " (id ", call.ids[row], "), element ", e % kDim, " of ",
                            call.ids.size(), " rows");
      }
    }
    return "";
  }

  static bool Untouched(const Call& call) { return call.out.empty(); }

  Metrics metrics_;  // fresh per test
  TableMetrics table_metrics_{};
  std::unique_ptr<TableSource> source_;
  std::unique_ptr<HostRows> table_;
  std::unique_ptr<CpuStore> store_;
  FakeClock clock_;
};

// --- Concurrency --------------------------------------------------------------------------------

TEST_F(BatcherTest, ManyThreadsEachGetTheirOwnRows) {
  constexpr int kThreads = 16;
  constexpr int kRounds = 25;
  constexpr int kBurst = 4;  // requests a thread has in flight at once
  constexpr int64_t kMaxBatchIds = 1024;
  GateStore counting(store_.get(), /*open=*/true);
  BatcherOptions options;
  options.max_batch_ids = kMaxBatchIds;
  options.max_queue_delay = absl::Microseconds(300);
  Batcher batcher(&counting, options, table_metrics_);  // real clock

  std::atomic<int64_t> total_requests{0};
  std::atomic<int64_t> total_ids{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      std::uniform_int_distribution<int64_t> length(1, 300);
      std::uniform_int_distribution<int64_t> id(0, kRows - 1);
      const DataType types[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
      for (int round = 0; round < kRounds; ++round) {
        std::vector<std::unique_ptr<Call>> calls;
        for (int i = 0; i < kBurst; ++i) {
          std::vector<int64_t> ids(static_cast<size_t>(length(rng)));
          for (int64_t& x : ids) {
            x = id(rng);
          }
          auto call = std::make_unique<Call>(std::move(ids), types[rng() % 3]);
          if (absl::Status s = batcher.Submit(call->Request()); !s.ok()) {
            ADD_FAILURE() << "thread " << t << " round " << round << ": " << s;
            continue;
          }
          total_requests += 1;
          total_ids += static_cast<int64_t>(call->ids.size());
          calls.push_back(std::move(call));
        }
        for (auto& call : calls) {
          call->done.WaitForNotification();
        }
        for (auto& call : calls) {
          EXPECT_EQ(CheckRows(*call), "") << "thread " << t << " round " << round;
        }
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  batcher.Shutdown();

  const std::vector<GateStore::Call> calls = counting.calls();
  size_t largest = 0;
  size_t ids_seen = 0;
  for (const GateStore::Call& c : calls) {
    largest = std::max(largest, c.ids);
    ids_seen += c.ids;
  }
  EXPECT_LE(largest, static_cast<size_t>(kMaxBatchIds));
  EXPECT_EQ(ids_seen, static_cast<size_t>(total_ids.load()));
  const auto batches = table_metrics_.batch_requests->Collect().histogram;
  EXPECT_EQ(batches.sample_count, calls.size());
  EXPECT_EQ(batches.sample_sum, static_cast<double>(total_requests.load()));
  // Some batch held more than one request: fewer batches than requests.
  EXPECT_LT(calls.size(), static_cast<size_t>(total_requests.load()));
  EXPECT_EQ(table_metrics_.ids->Value(), static_cast<double>(total_ids.load()));
  EXPECT_EQ(batcher.queued_ids_for_test(), 0);
}

// --- Where batches start ------------------------------------------------------------------------

TEST_F(BatcherTest, IdleBatcherStartsAnAsynchronousBatchOnTheSubmittingThread) {
  ThreadRecordingStore async(store_.get(), /*asynchronous=*/true);
  Batcher batcher(&async, BatcherOptions{}, table_metrics_, &clock_);
  Call a(Iota(3, 9), DataType::kFloat16);
  ASSERT_THAT(batcher.Submit(a.Request()), IsOk());
  // Submit returned with the batch enqueued on the store, not yet answered.
  EXPECT_THAT(async.threads(), ElementsAre(std::this_thread::get_id()));
  EXPECT_FALSE(a.done.HasBeenNotified());
  async.Finish(1);
  ASSERT_TRUE(a.done.HasBeenNotified());
  EXPECT_EQ(CheckRows(a), "");
  EXPECT_EQ(table_metrics_.ids->Value(), 9.0);

  // Idle again: the next request starts on this thread too.
  Call b(Iota(5, 4), DataType::kFloat32);
  ASSERT_THAT(batcher.Submit(b.Request()), IsOk());
  async.Finish(2);
  EXPECT_EQ(CheckRows(b), "");
  EXPECT_THAT(async.threads(), ElementsAre(std::this_thread::get_id(), std::this_thread::get_id()));
}

TEST_F(BatcherTest, InlineBatchesStartOnTheSubmittingThreadUpToTheStoresSlots) {
  ThreadRecordingStore async(store_.get(), /*asynchronous=*/true, /*max_inflight_batches=*/2);
  BatcherOptions options;
  options.inline_batches = 3;  // more than the store's two slots: two it is
  Batcher batcher(&async, options, table_metrics_, &clock_);
  std::vector<std::unique_ptr<Call>> calls;
  for (int64_t n : {4, 5, 6}) {
    calls.push_back(std::make_unique<Call>(Iota(n, n), DataType::kFloat32));
    ASSERT_THAT(batcher.Submit(calls.back()->Request()), IsOk());
  }
  async.Finish(3);  // the third waits for the worker, which starts it
  batcher.Shutdown();
  const std::vector<std::thread::id> threads = async.threads();
  ASSERT_EQ(threads.size(), 3u);
  EXPECT_EQ(threads[0], std::this_thread::get_id());
  EXPECT_EQ(threads[1], std::this_thread::get_id());
  EXPECT_NE(threads[2], std::this_thread::get_id());
  for (const auto& call : calls) {
    EXPECT_EQ(CheckRows(*call), "") << call->ids.size() << " ids";
  }
}

TEST_F(BatcherTest, ABatchWhoseCallsAreStillFinishingLeavesItsSlotToTheNextRequest) {
  ThreadRecordingStore async(store_.get(), /*asynchronous=*/true);  // one slot
  Batcher batcher(&async, BatcherOptions{}, table_metrics_, &clock_);
  Call a(Iota(7, 3), DataType::kFloat32);
  absl::Notification finishing;  // a's call is being finished (gRPC sending its answer)
  absl::Notification release;
  Batcher::Request request = a.Request();
  request.done = [&, done = std::move(request.done)](const absl::Status& s) mutable {
    finishing.Notify();
    release.WaitForNotification();
    done(s);
  };
  ASSERT_THAT(batcher.Submit(std::move(request)), IsOk());
  std::thread answerer([&] { async.Finish(1); });  // the store answers a's batch on its thread
  finishing.WaitForNotification();
  EXPECT_EQ(table_metrics_.inflight_batches->Value(), 0.0);

  // The store has answered a's batch: b starts its own on this thread, not behind a's finish.
  Call b(Iota(11, 4), DataType::kFloat32);
  ASSERT_THAT(batcher.Submit(b.Request()), IsOk());
  EXPECT_THAT(async.threads(), ElementsAre(std::this_thread::get_id(), std::this_thread::get_id()));
  release.Notify();
  async.Finish(2);
  answerer.join();
  batcher.Shutdown();
  EXPECT_EQ(CheckRows(a), "");
  EXPECT_EQ(CheckRows(b), "");
}

TEST_F(BatcherTest, RequestsBehindABatchInFlightGoToTheWorker) {
  ThreadRecordingStore async(store_.get(), /*asynchronous=*/true);
  Batcher batcher(&async, BatcherOptions{}, table_metrics_, &clock_);
  Call first(Iota(0, 2), DataType::kFloat32);
  ASSERT_THAT(batcher.Submit(first.Request()), IsOk());  // in flight until Finish

  std::vector<std::unique_ptr<Call>> behind;
  int64_t ids = 0;
  for (int64_t n : {3, 1, 6, 2}) {
    behind.push_back(std::make_unique<Call>(Iota(n * 13, n), DataType::kFloat32));
    ASSERT_THAT(batcher.Submit(behind.back()->Request()), IsOk());
    ids += n;
  }
  // The worker batches the queued requests as it finds them: all of their ids, in one to four
  // batches, each started on the worker's thread.
  std::vector<std::thread::id> threads;
  size_t calls = 2;
  for (;; ++calls) {
    async.Finish(calls);
    threads = async.threads();
    if (table_metrics_.ids->Value() == static_cast<double>(2 + ids)) {
      break;
    }
  }
  ASSERT_GE(threads.size(), 2u);
  EXPECT_EQ(threads[0], std::this_thread::get_id());
  for (size_t i = 1; i < threads.size(); ++i) {
    EXPECT_NE(threads[i], std::this_thread::get_id()) << "batch " << i;
  }
  batcher.Shutdown();
  EXPECT_EQ(CheckRows(first), "");
  for (const auto& call : behind) {
    EXPECT_EQ(CheckRows(*call), "") << call->ids.size() << " ids";
  }
}

TEST_F(BatcherTest, BatchesStartOnTheWorkerWithAQueueDelayOrASynchronousStore) {
  ThreadRecordingStore async(store_.get(), /*asynchronous=*/true);
  ThreadRecordingStore sync(store_.get(), /*asynchronous=*/false);
  BatcherOptions delayed;
  delayed.max_queue_delay = absl::Microseconds(50);
  Batcher async_delayed(&async, delayed, table_metrics_);  // real clock: the delay must pass
  Batcher sync_batcher(&sync, BatcherOptions{}, table_metrics_, &clock_);
  Call a(Iota(1, 5), DataType::kFloat32);
  Call b(Iota(2, 5), DataType::kBFloat16);
  ASSERT_THAT(async_delayed.Submit(a.Request()), IsOk());
  ASSERT_THAT(sync_batcher.Submit(b.Request()), IsOk());
  async.Finish(1);
  ASSERT_TRUE(a.done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_TRUE(b.done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(CheckRows(a), "");
  EXPECT_EQ(CheckRows(b), "");
  ASSERT_EQ(async.threads().size(), 1u);
  EXPECT_NE(async.threads()[0], std::this_thread::get_id());
  ASSERT_EQ(sync.threads().size(), 1u);
  EXPECT_NE(sync.threads()[0], std::this_thread::get_id());
}

// --- Batch forming ------------------------------------------------------------------------------

TEST_F(BatcherTest, BatchNeverExceedsMaxBatchIds) {
  GateStore gate(store_.get(), /*open=*/false);
  BatcherOptions options;
  options.max_batch_ids = 10;
  Batcher batcher(&gate, options, table_metrics_, &clock_);
  Call blocker(Iota(0, 1), DataType::kFloat32);
  ASSERT_THAT(batcher.Submit(blocker.Request()), IsOk());
  gate.WaitForCalls(1);  // the worker holds the blocker's batch; the rest queue behind it

  std::vector<std::unique_ptr<Call>> calls;
  for (int64_t n : {4, 4, 4, 3, 7, 10}) {
    calls.push_back(std::make_unique<Call>(Iota(n * 11, n), DataType::kFloat32));
    EXPECT_THAT(batcher.Submit(calls.back()->Request()), IsOk());
  }
  EXPECT_EQ(batcher.queued_ids_for_test(), 32);
  gate.Open();
  batcher.Shutdown();

  const DataType f32 = DataType::kFloat32;
  EXPECT_THAT(gate.calls(),
              ElementsAre(GateStore::Call{1, f32}, GateStore::Call{8, f32}, GateStore::Call{7, f32},
                          GateStore::Call{7, f32}, GateStore::Call{10, f32}));
  EXPECT_EQ(CheckRows(blocker), "");
  for (const auto& call : calls) {
    EXPECT_EQ(CheckRows(*call), "") << call->ids.size() << " ids";
  }
}

// Pooled requests (sums, weighted sums, means) queued among plain ones of the same answer type go
// in the same batch, the plain ids first, and each caller gets its own rows or bags.
TEST_F(BatcherTest, PooledAndPlainRequestsShareABatchAndEachGetsItsOwnAnswer) {
  GateStore gate(store_.get(), /*open=*/false);
  Batcher batcher(&gate, BatcherOptions{}, table_metrics_, &clock_);
  Call blocker(Iota(0, 1), DataType::kFloat16);
  ASSERT_THAT(batcher.Submit(blocker.Request()), IsOk());
  gate.WaitForCalls(1);  // the rest queue behind the blocker's batch

  struct Pooled {
    std::unique_ptr<Call> call;
    std::vector<int64_t> offsets;
    std::vector<float> weights;
    bool mean;
  };
  std::vector<Pooled> pooled;
  std::vector<std::unique_ptr<Call>> plain;
  auto add_plain = [&](int64_t first, int64_t n) {
    plain.push_back(std::make_unique<Call>(Iota(first, n), DataType::kFloat16));
    ASSERT_THAT(batcher.Submit(plain.back()->Request()), IsOk());
  };
  auto add_pooled = [&](std::vector<int64_t> offsets, bool weighted, bool mean) {
    Pooled p{std::make_unique<Call>(Iota(offsets.size() * 13, offsets.back()), DataType::kFloat16),
             std::move(offsets),
             {},
             mean};
    if (weighted) {
      for (size_t i = 0; i < p.call->ids.size(); ++i) {
        p.weights.push_back(0.25f * static_cast<float>(i % 7) - 0.5f);
      }
    }
    Batcher::Request r = p.call->Request();
    r.pooled = true;
    r.offsets = p.offsets;
    r.weights = p.weights;
    r.mean = mean;
    ASSERT_THAT(batcher.Submit(std::move(r)), IsOk());
    pooled.push_back(std::move(p));
  };
  add_pooled({0, 3, 3, 10}, /*weighted=*/true, /*mean=*/false);  // before any plain request
  add_plain(5, 4);
  add_pooled({0, 1, 6}, false, /*mean=*/true);
  add_pooled({0, 0}, false, false);  // one empty bag: zeros
  add_plain(50, 3);
  add_pooled({0, 2, 9}, false, false);
  gate.Open();
  batcher.Shutdown();

  // One batch for all of them: 7 plain ids and 10 + 6 + 0 + 9 pooled.
  EXPECT_THAT(gate.calls(), ElementsAre(GateStore::Call{1, DataType::kFloat16},
                                        GateStore::Call{32, DataType::kFloat16}));
  EXPECT_EQ(CheckRows(blocker), "");
  for (const auto& call : plain) {
    EXPECT_EQ(CheckRows(*call), "");
  }
  for (const Pooled& p : pooled) {
    std::vector<float> scales;
    for (size_t b = 0; p.mean && b + 1 < p.offsets.size(); ++b) {
      const int64_t len = p.offsets[b + 1] - p.offsets[b];
      scales.push_back(len > 0 ? 1.0f / static_cast<float>(len) : 0.0f);
    }
    const size_t bags = p.offsets.size() - 1;
    std::vector<std::byte> want(bags * kDim * 2);
    kernels::CpuPooledGather(table_->data(), DataType::kFloat32, kDim,
                             kernels::Bags{p.call->ids, p.offsets, p.weights, scales},
                             DataType::kFloat16, want.data());
    ASSERT_THAT(p.call->status, IsOk());
    ASSERT_EQ(p.call->out.size(), want.size());
    EXPECT_EQ(std::memcmp(p.call->out.data(), want.data(), want.size()), 0)
        << bags << " bags, mean " << p.mean << ", " << p.weights.size() << " weights";
    if (p.offsets.back() == 0) {  // the empty bag
      EXPECT_EQ(std::count(want.begin(), want.end(), std::byte{0}),
                static_cast<std::ptrdiff_t>(want.size()));
    }
  }
}

TEST_F(BatcherTest, MoreIdsThanABatchIsInvalidArgument) {
  BatcherOptions options;
  options.max_batch_ids = 10;
  Batcher batcher(store_.get(), options, table_metrics_, &clock_);
  Call call(Iota(0, 11), DataType::kFloat32);
  EXPECT_THAT(batcher.Submit(call.Request()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("11 ids")));
  batcher.Shutdown();
  EXPECT_EQ(call.done_count.load(), 0);
}

TEST_F(BatcherTest, AnswerTypesNeverShareABatch) {
  GateStore gate(store_.get(), /*open=*/false);
  Batcher batcher(&gate, BatcherOptions{}, table_metrics_, &clock_);
  Call blocker(Iota(0, 1), DataType::kFloat32);
  ASSERT_THAT(batcher.Submit(blocker.Request()), IsOk());
  gate.WaitForCalls(1);

  Call b(Iota(1, 3), DataType::kFloat16);
  Call c(Iota(2, 2), DataType::kFloat32);
  Call d(Iota(3, 4), DataType::kBFloat16);
  Call e(Iota(4, 5), DataType::kFloat16);
  Call f(Iota(5, 1), DataType::kFloat32);
  for (Call* call : {&b, &c, &d, &e, &f}) {
    EXPECT_THAT(batcher.Submit(call->Request()), IsOk());
  }
  gate.Open();
  batcher.Shutdown();

  // Oldest first; each batch takes the queued requests of its first request's type.
  EXPECT_THAT(
      gate.calls(),
      ElementsAre(GateStore::Call{1, DataType::kFloat32}, GateStore::Call{8, DataType::kFloat16},
                  GateStore::Call{3, DataType::kFloat32}, GateStore::Call{4, DataType::kBFloat16}));
  for (Call* call : {&blocker, &b, &c, &d, &e, &f}) {
    EXPECT_EQ(CheckRows(*call), "") << DataTypeName(call->out_type);
  }
}

TEST_F(BatcherTest, FlushesAsSoonAsTheQueueHoldsAFullBatch) {
  GateStore counting(store_.get(), /*open=*/true);
  BatcherOptions options;
  options.max_batch_ids = 10;
  options.max_queue_delay = kForever;
  Batcher batcher(&counting, options, table_metrics_, &clock_);
  Call a(Iota(0, 4), DataType::kFloat32);
  Call b(Iota(1, 4), DataType::kFloat32);
  Call c(Iota(2, 3), DataType::kFloat32);
  EXPECT_THAT(batcher.Submit(a.Request()), IsOk());
  EXPECT_THAT(batcher.Submit(b.Request()), IsOk());
  EXPECT_THAT(batcher.Submit(c.Request()), IsOk());  // 11 ids queued: a full batch is waiting

  a.done.WaitForNotification();
  b.done.WaitForNotification();
  EXPECT_EQ(CheckRows(a), "");
  EXPECT_EQ(CheckRows(b), "");
  // c did not fit; alone it waits for the queue delay (or Shutdown).
  EXPECT_FALSE(c.done.HasBeenNotified());
  batcher.Shutdown();
  EXPECT_EQ(CheckRows(c), "");
  EXPECT_THAT(counting.calls(), ElementsAre(GateStore::Call{8, DataType::kFloat32},
                                            GateStore::Call{3, DataType::kFloat32}));
  const auto batches = table_metrics_.batch_requests->Collect().histogram;
  EXPECT_EQ(batches.sample_count, 2u);
  EXPECT_EQ(batches.sample_sum, 3.0);
}

TEST_F(BatcherTest, AnswersALoneRequestAfterTheQueueDelay) {
  BatcherOptions options;
  options.max_queue_delay = absl::Milliseconds(1);
  // Declared before the batcher, so that it outlives it whatever happens.
  Call a(Iota(7, 5), DataType::kBFloat16);
  Batcher batcher(store_.get(), options, table_metrics_);  // real clock: the delay must pass
  EXPECT_THAT(batcher.Submit(a.Request()), IsOk());
  ASSERT_TRUE(a.done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(CheckRows(a), "");
}

// --- Dropped requests ---------------------------------------------------------------------------

TEST_F(BatcherTest, DropsARequestWhoseDeadlinePassedInTheQueue) {
  GateStore gate(store_.get(), /*open=*/false);
  Batcher batcher(&gate, BatcherOptions{}, table_metrics_, &clock_);
  Call blocker(Iota(0, 2), DataType::kFloat32);
  ASSERT_THAT(batcher.Submit(blocker.Request()), IsOk());
  gate.WaitForCalls(1);

  Call late(Iota(1, 5), DataType::kFloat32);
  Call before(Iota(2, 3), DataType::kFloat32);
  Call after(Iota(3, 6), DataType::kFloat32);
  const absl::Time t = clock_.Now() + absl::Seconds(1);
  EXPECT_THAT(batcher.Submit(before.Request()), IsOk());
  EXPECT_THAT(batcher.Submit(late.Request(t)), IsOk());
  EXPECT_THAT(batcher.Submit(after.Request(t + absl::Seconds(10))), IsOk());
  clock_.Advance(absl::Seconds(2));  // past t, before t + 10 s
  gate.Open();
  batcher.Shutdown();

  EXPECT_EQ(late.done_count.load(), 1);
  EXPECT_THAT(late.status, StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("table 't'")));
  EXPECT_TRUE(Untouched(late));
  EXPECT_EQ(table_metrics_.dropped_deadline->Value(), 1.0);
  EXPECT_EQ(table_metrics_.dropped_cancelled->Value(), 0.0);
  // The others in its batch still get their rows, and the dropped ids never reach the store.
  EXPECT_EQ(CheckRows(blocker), "");
  EXPECT_EQ(CheckRows(before), "");
  EXPECT_EQ(CheckRows(after), "");
  EXPECT_THAT(gate.calls(), ElementsAre(GateStore::Call{2, DataType::kFloat32},
                                        GateStore::Call{9, DataType::kFloat32}));
}

TEST_F(BatcherTest, DeadlineNotYetPassedIsServed) {
  Batcher batcher(store_.get(), BatcherOptions{}, table_metrics_, &clock_);
  Call a(Iota(0, 3), DataType::kFloat16);
  EXPECT_THAT(batcher.Submit(a.Request(clock_.Now() + absl::Milliseconds(1))), IsOk());
  batcher.Shutdown();
  EXPECT_EQ(CheckRows(a), "");
  EXPECT_EQ(table_metrics_.dropped_deadline->Value(), 0.0);
}

TEST_F(BatcherTest, DropsACancelledRequest) {
  GateStore gate(store_.get(), /*open=*/false);
  Batcher batcher(&gate, BatcherOptions{}, table_metrics_, &clock_);
  Call blocker(Iota(0, 2), DataType::kFloat16);
  ASSERT_THAT(batcher.Submit(blocker.Request()), IsOk());
  gate.WaitForCalls(1);

  Call cancelled(Iota(1, 5), DataType::kFloat16);
  Call live(Iota(2, 4), DataType::kFloat16);
  std::atomic<bool> cancelled_flag{false};
  const std::atomic<bool> live_flag{false};
  Batcher::Request r = cancelled.Request();
  r.cancelled = &cancelled_flag;
  EXPECT_THAT(batcher.Submit(std::move(r)), IsOk());
  Batcher::Request l = live.Request();
  l.cancelled = &live_flag;
  EXPECT_THAT(batcher.Submit(std::move(l)), IsOk());
  cancelled_flag.store(true);  // as gRPC's OnCancel does, while the request waits in the queue
  gate.Open();
  batcher.Shutdown();

  EXPECT_EQ(cancelled.done_count.load(), 1);
  EXPECT_THAT(cancelled.status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_TRUE(Untouched(cancelled));
  EXPECT_EQ(table_metrics_.dropped_cancelled->Value(), 1.0);
  EXPECT_EQ(table_metrics_.dropped_deadline->Value(), 0.0);
  EXPECT_EQ(CheckRows(blocker), "");
  EXPECT_EQ(CheckRows(live), "");
  EXPECT_THAT(gate.calls(), ElementsAre(GateStore::Call{2, DataType::kFloat16},
                                        GateStore::Call{4, DataType::kFloat16}));
}

TEST_F(BatcherTest, CancelledRequestTakesNoRoomInItsBatch) {
  GateStore gate(store_.get(), /*open=*/false);
  BatcherOptions options;
  options.max_batch_ids = 10;
  Batcher batcher(&gate, options, table_metrics_, &clock_);
  Call blocker(Iota(0, 1), DataType::kFloat32);
  ASSERT_THAT(batcher.Submit(blocker.Request()), IsOk());
  gate.WaitForCalls(1);

  // Queued behind the blocker: 8 ids cancelled, then 2 + 8 live ids. Counting the cancelled ids,
  // the next batch would hold the 2 only; without them, it holds all 10 live ids.
  Call cancelled(Iota(1, 8), DataType::kFloat32);
  Call small(Iota(10, 2), DataType::kFloat32);
  Call large(Iota(20, 8), DataType::kFloat32);
  const std::atomic<bool> flag{true};
  Batcher::Request r = cancelled.Request();
  r.cancelled = &flag;
  ASSERT_THAT(batcher.Submit(std::move(r)), IsOk());
  ASSERT_THAT(batcher.Submit(small.Request()), IsOk());
  ASSERT_THAT(batcher.Submit(large.Request()), IsOk());
  gate.Open();
  batcher.Shutdown();

  EXPECT_THAT(cancelled.status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_TRUE(Untouched(cancelled));
  EXPECT_EQ(table_metrics_.dropped_cancelled->Value(), 1.0);
  EXPECT_EQ(CheckRows(small), "");
  EXPECT_EQ(CheckRows(large), "");
  EXPECT_THAT(gate.calls(), ElementsAre(GateStore::Call{1, DataType::kFloat32},
                                        GateStore::Call{10, DataType::kFloat32}));
  EXPECT_EQ(batcher.queued_ids_for_test(), 0);
}

TEST_F(BatcherTest, CancelledRequestOfAnotherTypeDoesNotSetTheBatchType) {
  GateStore gate(store_.get(), /*open=*/false);
  Batcher batcher(&gate, BatcherOptions{}, table_metrics_, &clock_);
  Call blocker(Iota(0, 1), DataType::kFloat32);
  ASSERT_THAT(batcher.Submit(blocker.Request()), IsOk());
  gate.WaitForCalls(1);

  Call cancelled(Iota(1, 3), DataType::kFloat16);  // first in the queue, then cancelled
  Call live(Iota(5, 4), DataType::kBFloat16);
  const std::atomic<bool> flag{true};
  Batcher::Request r = cancelled.Request();
  r.cancelled = &flag;
  ASSERT_THAT(batcher.Submit(std::move(r)), IsOk());
  ASSERT_THAT(batcher.Submit(live.Request()), IsOk());
  gate.Open();
  batcher.Shutdown();

  EXPECT_THAT(cancelled.status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(CheckRows(live), "");
  EXPECT_THAT(gate.calls(), ElementsAre(GateStore::Call{1, DataType::kFloat32},
                                        GateStore::Call{4, DataType::kBFloat16}));
}

TEST_F(BatcherTest, BatchOfOnlyDroppedRequestsNeverReachesTheStore) {
  GateStore gate(store_.get(), /*open=*/false);
  Batcher batcher(&gate, BatcherOptions{}, table_metrics_, &clock_);
  Call blocker(Iota(0, 1), DataType::kFloat32);
  ASSERT_THAT(batcher.Submit(blocker.Request()), IsOk());
  gate.WaitForCalls(1);
  Call late(Iota(1, 5), DataType::kFloat32);
  EXPECT_THAT(batcher.Submit(late.Request(clock_.Now())), IsOk());
  clock_.Advance(absl::Seconds(1));
  gate.Open();
  batcher.Shutdown();  // also checks that the empty batch is not left in flight

  EXPECT_THAT(late.status, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(gate.calls(), ElementsAre(GateStore::Call{1, DataType::kFloat32}));
}

// --- Back-pressure and shutdown -----------------------------------------------------------------

TEST_F(BatcherTest, FullQueueIsResourceExhausted) {
  GateStore gate(store_.get(), /*open=*/false);
  BatcherOptions options;
  options.max_queue_ids = 10;
  Batcher batcher(&gate, options, table_metrics_, &clock_);
  Call blocker(Iota(0, 5), DataType::kFloat32);
  ASSERT_THAT(batcher.Submit(blocker.Request()), IsOk());
  gate.WaitForCalls(1);  // taken off the queue: it no longer counts

  Call first(Iota(1, 6), DataType::kFloat32);
  Call rejected(Iota(2, 5), DataType::kFloat32);
  Call fits(Iota(3, 4), DataType::kFloat32);
  EXPECT_THAT(batcher.Submit(first.Request()), IsOk());
  EXPECT_THAT(batcher.Submit(rejected.Request()),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("queue is full")));
  EXPECT_EQ(batcher.queued_ids_for_test(), 6);
  EXPECT_THAT(batcher.Submit(fits.Request()), IsOk());  // exactly max_queue_ids
  EXPECT_EQ(batcher.queued_ids_for_test(), 10);
  EXPECT_EQ(table_metrics_.queue_ids->Value(), 10.0);
  gate.Open();
  batcher.Shutdown();

  EXPECT_EQ(rejected.done_count.load(), 0);
  EXPECT_TRUE(Untouched(rejected));
  EXPECT_EQ(CheckRows(blocker), "");
  EXPECT_EQ(CheckRows(first), "");
  EXPECT_EQ(CheckRows(fits), "");
  EXPECT_EQ(table_metrics_.queue_ids->Value(), 0.0);
}

TEST_F(BatcherTest, SubmitAfterShutdownIsUnavailable) {
  Batcher batcher(store_.get(), BatcherOptions{}, table_metrics_, &clock_);
  batcher.Shutdown();
  Call call(Iota(0, 3), DataType::kFloat32);
  EXPECT_THAT(batcher.Submit(call.Request()), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(call.done_count.load(), 0);
}

TEST_F(BatcherTest, ShutdownRunsEveryQueuedRequest) {
  GateStore counting(store_.get(), /*open=*/true);
  BatcherOptions options;
  options.max_queue_delay = kForever;  // nothing runs until Shutdown()
  Batcher batcher(&counting, options, table_metrics_, &clock_);
  std::vector<std::unique_ptr<Call>> calls;
  const DataType types[] = {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16};
  for (int i = 0; i < 9; ++i) {
    calls.push_back(std::make_unique<Call>(Iota(i, 1 + 13 * i), types[i % 3]));
    EXPECT_THAT(batcher.Submit(calls.back()->Request()), IsOk());
  }
  batcher.Shutdown();
  for (const auto& call : calls) {
    EXPECT_EQ(CheckRows(*call), "") << call->ids.size() << " ids";
  }
  EXPECT_EQ(counting.calls().size(), 3u);  // one batch per answer type
  EXPECT_EQ(batcher.queued_ids_for_test(), 0);
  EXPECT_EQ(table_metrics_.inflight_batches->Value(), 0.0);
}

TEST_F(BatcherTest, ShutdownTwiceIsHarmless) {
  Batcher batcher(store_.get(), BatcherOptions{}, table_metrics_, &clock_);
  Call call(Iota(0, 3), DataType::kFloat32);
  EXPECT_THAT(batcher.Submit(call.Request()), IsOk());
  batcher.Shutdown();
  batcher.Shutdown();  // and once more from the destructor
  EXPECT_EQ(CheckRows(call), "");
}

TEST_F(BatcherTest, StoreErrorReachesEveryCallerInTheBatch) {
  FailingStore failing(store_.get());
  BatcherOptions options;
  options.max_queue_delay = kForever;
  Batcher batcher(&failing, options, table_metrics_, &clock_);
  Call a(Iota(0, 3), DataType::kFloat32);
  Call b(Iota(1, 2), DataType::kFloat32);
  EXPECT_THAT(batcher.Submit(a.Request()), IsOk());
  EXPECT_THAT(batcher.Submit(b.Request()), IsOk());
  batcher.Shutdown();
  for (Call* call : {&a, &b}) {
    EXPECT_EQ(call->done_count.load(), 1);
    EXPECT_THAT(call->status,
                StatusIs(absl::StatusCode::kInternal, HasSubstr("cudaErrorMemoryAllocation")));
    EXPECT_TRUE(Untouched(*call));
  }
  EXPECT_EQ(table_metrics_.ids->Value(), 0.0);
}

// --- Answers ------------------------------------------------------------------------------------

TEST_F(BatcherTest, EachCallerOfABatchGetsItsRowsInItsOwnPooledBuffer) {
  AnswerBufferPool pool;  // outlives the calls' answers
  BatcherOptions options;
  options.max_queue_delay = kForever;
  options.answer_threads = 3;
  options.answer_pool = &pool;
  Batcher batcher(store_.get(), options, table_metrics_, &clock_);
  std::vector<std::unique_ptr<Call>> calls;
  for (DataType type : kAllDataTypes) {
    for (int64_t n : {1, 7, 300, 999, 64}) {
      calls.push_back(std::make_unique<Call>(Iota(n, n), type));
      ASSERT_THAT(batcher.Submit(calls.back()->Request()), IsOk());
    }
  }
  batcher.Shutdown();  // one batch per answer type, five callers each
  for (const auto& call : calls) {
    EXPECT_EQ(CheckRows(*call), "")
        << DataTypeName(call->out_type) << ", " << call->ids.size() << " ids";
    EXPECT_TRUE(call->out.pooled());
  }
  EXPECT_EQ(pool.stats().allocated, static_cast<int64_t>(calls.size()));
}

// The server's pool for a device hands the store each caller's span with the device's address of
// it, so the store need not look it up.
TEST_F(BatcherTest, AnswersComeFromTheGivenPoolWithTheirDeviceAddresses) {
  auto allocator = std::make_shared<RecordingAllocator>();
  AnswerBufferPool pool(AnswerBufferPool::kDefaultMaxBytes, allocator);
  BatcherOptions options;
  options.answer_pool = &pool;
  SpanRecordingStore recording(store_.get());
  Batcher batcher(&recording, options, table_metrics_, &clock_);
  Call call(Iota(5, 300), DataType::kBFloat16);
  ASSERT_THAT(batcher.Submit(call.Request()), IsOk());
  call.done.WaitForNotification();
  EXPECT_EQ(CheckRows(call), "");
  EXPECT_TRUE(allocator->Allocated(call.out.data()));
  EXPECT_TRUE(call.out.pooled());
  const std::vector<AnswerSpan> spans = recording.spans();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].host.data(), call.out.data());
  EXPECT_EQ(spans[0].host.size(), call.out.size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(spans[0].device),
            reinterpret_cast<uintptr_t>(call.out.data()) + RecordingAllocator::kDeviceOffset);
}

TEST_F(BatcherTest, WithoutAPoolAnswersComeFromOrdinaryMemoryNoDeviceSees) {
  SpanRecordingStore recording(store_.get());
  Batcher batcher(&recording, BatcherOptions{}, table_metrics_, &clock_);
  Call call(Iota(5, 300), DataType::kFloat16);
  ASSERT_THAT(batcher.Submit(call.Request()), IsOk());
  call.done.WaitForNotification();
  EXPECT_EQ(CheckRows(call), "");
  const std::vector<AnswerSpan> spans = recording.spans();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].host.data(), call.out.data());
  EXPECT_EQ(spans[0].device, nullptr);
}

TEST_F(BatcherTest, AFinishedAnswersBufferServesTheNextCall) {
  AnswerBufferPool pool;
  BatcherOptions options;
  options.answer_pool = &pool;
  Batcher batcher(store_.get(), options, table_metrics_, &clock_);
  const std::byte* first = nullptr;
  for (int round = 0; round < 3; ++round) {
    Call call(Iota(round, 500), DataType::kFloat32);
    ASSERT_THAT(batcher.Submit(call.Request()), IsOk());
    call.done.WaitForNotification();
    EXPECT_EQ(CheckRows(call), "");
    if (round == 0) {
      first = call.out.data();
    }
    EXPECT_EQ(call.out.data(), first) << "round " << round;
  }  // each call's answer goes back to the pool as the call ends
  const AnswerBufferPool::Stats s = pool.stats();
  EXPECT_EQ(s.allocated, 1);
  EXPECT_EQ(s.reused, 2);
}

// --- Row updates, through the table's writer (TableWriter), which pauses the batcher
// ---------------

// One update message, float32 rows; its `done` records the outcome. `this` must outlive the
// update.
struct UpdateCall {
  UpdateCall(std::vector<int64_t> ids_in, std::vector<float> rows_in, int64_t seq)
      : ids(std::move(ids_in)), rows(std::move(rows_in)), sequence(seq) {}

  TableWriter::Update Update() {
    TableWriter::Update u;
    u.ids = ids;
    u.rows_type = DataType::kFloat32;
    u.rows = absl::MakeConstSpan(reinterpret_cast<const std::byte*>(rows.data()),
                                 rows.size() * sizeof(float));
    u.sequence = sequence;
    u.done = [this](absl::StatusOr<int64_t> written) {
      result = std::move(written);
      done.Notify();
    };
    return u;
  }

  std::vector<int64_t> ids;
  std::vector<float> rows;
  int64_t sequence;
  absl::StatusOr<int64_t> result = absl::UnknownError("not run");
  absl::Notification done;
};

// `n` rows of kDim random floats.
std::vector<float> RandomRows(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  std::vector<float> rows(n * kDim);
  for (float& v : rows) {
    v = value(rng);
  }
  return rows;
}

// The float32 elements of `call`'s answer (of a float32 lookup).
std::vector<float> AnswerFloats(const Call& call) {
  std::vector<float> out(call.out.size() / sizeof(float));
  std::memcpy(out.data(), call.out.data(), call.out.size());
  return out;
}

// Wraps a store and fails every UpdateRows.
class UpdateFailingStore final : public WrappingStore {
 public:
  explicit UpdateFailingStore(EmbeddingStore* inner) : WrappingStore(inner) {}
  using EmbeddingStore::LookUp;
  void LookUp(const LookUpBatch& batch, Done done) override {
    inner_->LookUp(batch, std::move(done));
  }
  absl::Status WriteRows(PreparedRows&) override {
    return absl::InternalError("write updated rows on cuda:0: cudaErrorLaunchFailure");
  }
};

// Blocks until the batcher is paused (the writer waits at a boundary).
void WaitForPause(const Batcher& batcher) {
  while (batcher.pauses_for_test() == 0) {
    std::this_thread::yield();
  }
}

TEST_F(BatcherTest, UpdatedRowsAreWhatEveryLaterLookUpReadsInEveryAnswerType) {
  Batcher batcher(store_.get(), BatcherOptions{}, table_metrics_, &clock_);
  TableWriter writer(store_.get(), &batcher, table_metrics_, WriterOptions{}, &clock_);
  // Ids 5 and 700 come twice: their last rows win.
  UpdateCall update({5, 17, 700, 5, 999, 0, 700}, RandomRows(7, 1), /*seq=*/3);
  ASSERT_THAT(writer.Submit(update.Update()), IsOk());
  update.done.WaitForNotification();
  ASSERT_THAT(update.result, IsOk());
  EXPECT_EQ(*update.result, 5);  // distinct ids
  EXPECT_EQ(writer.last_sequence(), 3);
  EXPECT_EQ(writer.updated_rows(), 5);

  // The reference: the original table with the rows written in order.
  std::vector<float> table(static_cast<size_t>(kRows * kDim));
  std::memcpy(table.data(), table_->data(), table.size() * sizeof(float));
  for (size_t i = 0; i < update.ids.size(); ++i) {
    std::copy_n(update.rows.begin() + static_cast<std::ptrdiff_t>(i * kDim), kDim,
                table.begin() + update.ids[i] * kDim);
  }
  const std::vector<int64_t> ids = {0, 1, 5, 17, 18, 700, 999, 5};
  for (DataType type : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    Call call(ids, type);
    ASSERT_THAT(batcher.Submit(call.Request()), IsOk());
    call.done.WaitForNotification();
    ASSERT_THAT(call.status, IsOk());
    std::vector<std::byte> want(ids.size() * kDim * ElementSize(type));
    kernels::CpuGather(reinterpret_cast<const std::byte*>(table.data()), DataType::kFloat32, kDim,
                       ids, type, want.data());
    ASSERT_EQ(call.out.size(), want.size());
    const size_t size = ElementSize(type);
    for (size_t e = 0; e < want.size() / size; ++e) {
      ASSERT_EQ(std::memcmp(call.out.data() + e * size, want.data() + e * size, size), 0)
          << DataTypeName(type) << " row " << e / kDim << " (id " << ids[e / kDim] << "), element "
          << e % kDim;
    }
  }
}

TEST_F(BatcherTest, UpdateWhoseSequenceDoesNotIncreaseAppliesNothing) {
  Batcher batcher(store_.get(), BatcherOptions{}, table_metrics_, &clock_);
  TableWriter writer(store_.get(), &batcher, table_metrics_, WriterOptions{}, &clock_);
  UpdateCall first({1, 2}, RandomRows(2, 2), /*seq=*/10);
  ASSERT_THAT(writer.Submit(first.Update()), IsOk());
  first.done.WaitForNotification();
  ASSERT_THAT(first.result, IsOk());
  for (int64_t seq : {10, 9, 0, -1}) {
    UpdateCall stale({2, 3}, RandomRows(2, 3), seq);
    ASSERT_THAT(writer.Submit(stale.Update()), IsOk());
    stale.done.WaitForNotification();
    EXPECT_THAT(stale.result,
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr(absl::StrCat("sequence ", seq,
                                                " for table 't' does not "
                                                "increase: the last applied is 10"))));
  }
  EXPECT_EQ(writer.last_sequence(), 10);
  EXPECT_EQ(writer.updated_rows(), 2);
  Call call({2, 3}, DataType::kFloat32);
  ASSERT_THAT(batcher.Submit(call.Request()), IsOk());
  call.done.WaitForNotification();
  const std::vector<float> got = AnswerFloats(call);
  // Row 2 is the first update's, row 3 the table's own.
  EXPECT_TRUE(std::equal(got.begin(), got.begin() + kDim, first.rows.begin() + kDim));
  EXPECT_EQ(std::memcmp(got.data() + kDim, table_->data() + 3 * kDim * sizeof(float),
                        kDim * sizeof(float)),
            0);
}

TEST_F(BatcherTest, UpdateWaitsForTheBatchInFlightAndGoesBeforeLaterLookUps) {
  GateStore gate(store_.get(), /*open=*/false);
  Batcher batcher(&gate, BatcherOptions{}, table_metrics_, &clock_);
  TableWriter writer(&gate, &batcher, table_metrics_, WriterOptions{}, &clock_);
  Call before({42}, DataType::kFloat32);
  ASSERT_THAT(batcher.Submit(before.Request()), IsOk());
  gate.WaitForCalls(1);  // its batch is in the store, held
  UpdateCall update({42}, RandomRows(1, 4), /*seq=*/1);
  ASSERT_THAT(writer.Submit(update.Update()), IsOk());
  WaitForPause(batcher);  // the writer waits for the batch in flight
  Call after({42}, DataType::kFloat32);
  ASSERT_THAT(batcher.Submit(after.Request()), IsOk());
  // The batch in flight holds the table: the update cannot have been applied.
  EXPECT_FALSE(update.done.HasBeenNotified());
  gate.Open();
  before.done.WaitForNotification();
  update.done.WaitForNotification();
  after.done.WaitForNotification();
  ASSERT_THAT(update.result, IsOk());
  // The batch that was in flight read the old row; the lookup queued behind the update, the new.
  EXPECT_EQ(CheckRows(before), "");
  EXPECT_EQ(AnswerFloats(after), update.rows);
}

TEST_F(BatcherTest, StoreThatFailsAnUpdateKeepsTheSequence) {
  UpdateFailingStore failing(store_.get());
  Batcher batcher(&failing, BatcherOptions{}, table_metrics_, &clock_);
  TableWriter writer(&failing, &batcher, table_metrics_, WriterOptions{}, &clock_);
  UpdateCall update({1}, RandomRows(1, 5), /*seq=*/1);
  ASSERT_THAT(writer.Submit(update.Update()), IsOk());
  update.done.WaitForNotification();
  EXPECT_THAT(update.result,
              StatusIs(absl::StatusCode::kInternal, HasSubstr("cudaErrorLaunchFailure")));
  EXPECT_EQ(writer.last_sequence(), 0);
  EXPECT_EQ(writer.updated_rows(), 0);
}

// A message the writer cannot prepare (rows that do not fit the ids) is answered with why, and
// writes nothing; the next one is written.
TEST_F(BatcherTest, UpdateThatCannotBePreparedIsAnsweredAndTheNextIsWritten) {
  Batcher batcher(store_.get(), BatcherOptions{}, table_metrics_, &clock_);
  TableWriter writer(store_.get(), &batcher, table_metrics_, WriterOptions{}, &clock_);
  UpdateCall bad({1, 2}, RandomRows(1, 8), /*seq=*/1);  // one row for two ids
  ASSERT_THAT(writer.Submit(bad.Update()), IsOk());
  UpdateCall good({3}, RandomRows(1, 9), /*seq=*/2);
  ASSERT_THAT(writer.Submit(good.Update()), IsOk());
  bad.done.WaitForNotification();
  good.done.WaitForNotification();
  EXPECT_THAT(bad.result, StatusIs(absl::StatusCode::kInternal, HasSubstr("bytes of rows")));
  ASSERT_THAT(good.result, IsOk());
  EXPECT_EQ(writer.last_sequence(), 2);
  EXPECT_EQ(writer.updated_rows(), 1);
}

// Shutdown writes the message the writer has taken (it waits at the boundary for the batch in
// flight), answers the one queued behind it UNAVAILABLE without writing it, and refuses later
// ones.
TEST_F(BatcherTest, WriterShutdownWritesWhatItTookAndRefusesTheRest) {
  GateStore gate(store_.get(), /*open=*/false);
  Batcher batcher(&gate, BatcherOptions{}, table_metrics_, &clock_);
  TableWriter writer(&gate, &batcher, table_metrics_, WriterOptions{}, &clock_);
  Call held({7}, DataType::kFloat32);
  ASSERT_THAT(batcher.Submit(held.Request()), IsOk());
  gate.WaitForCalls(1);
  UpdateCall taken({7}, RandomRows(1, 6), /*seq=*/1);
  ASSERT_THAT(writer.Submit(taken.Update()), IsOk());
  WaitForPause(batcher);  // taken, prepared, and waiting for the batch in flight
  UpdateCall queued({8}, RandomRows(1, 10), /*seq=*/2);
  ASSERT_THAT(writer.Submit(queued.Update()), IsOk());
  std::thread stopper([&] { writer.Shutdown(); });
  queued.done.WaitForNotification();
  EXPECT_THAT(queued.result, StatusIs(absl::StatusCode::kUnavailable,
                                      HasSubstr("was not started; nothing of it was written")));
  EXPECT_FALSE(taken.done.HasBeenNotified());
  gate.Open();
  stopper.join();
  ASSERT_TRUE(taken.done.HasBeenNotified());
  EXPECT_THAT(taken.result, IsOk());
  EXPECT_EQ(writer.last_sequence(), 1);
  UpdateCall late({7}, RandomRows(1, 7), /*seq=*/3);
  EXPECT_THAT(writer.Submit(late.Update()), StatusIs(absl::StatusCode::kUnavailable));
  held.done.WaitForNotification();
}

// While WithUpdatesPaused runs, a submitted message is not written (the table stays at the
// sequence it was given); it is once the call returns.
TEST_F(BatcherTest, WithUpdatesPausedHoldsWritesUntilItReturns) {
  Batcher batcher(store_.get(), BatcherOptions{}, table_metrics_, &clock_);
  TableWriter writer(store_.get(), &batcher, table_metrics_, WriterOptions{}, &clock_);
  UpdateCall update({4}, RandomRows(1, 11), /*seq=*/5);
  absl::Notification inside;
  absl::Notification release;
  std::thread saver([&] {
    EXPECT_THAT(writer.WithUpdatesPaused([&](int64_t sequence) {
      EXPECT_EQ(sequence, 0);
      inside.Notify();
      release.WaitForNotification();
      EXPECT_EQ(writer.last_sequence(), 0);  // not written meanwhile
      return absl::OkStatus();
    }),
                IsOk());
  });
  inside.WaitForNotification();
  ASSERT_THAT(writer.Submit(update.Update()), IsOk());
  release.Notify();
  saver.join();
  update.done.WaitForNotification();
  ASSERT_THAT(update.result, IsOk());
  EXPECT_EQ(writer.last_sequence(), 5);
}

// At most max_queued writes wait; one more is refused with the limit, and nothing is lost.
TEST_F(BatcherTest, WriterRefusesAWriteBeyondItsQueue) {
  GateStore gate(store_.get(), /*open=*/false);
  Batcher batcher(&gate, BatcherOptions{}, table_metrics_, &clock_);
  WriterOptions options;
  options.max_queued = 2;
  TableWriter writer(&gate, &batcher, table_metrics_, options, &clock_);
  Call held({1}, DataType::kFloat32);
  ASSERT_THAT(batcher.Submit(held.Request()), IsOk());
  gate.WaitForCalls(1);
  std::vector<std::unique_ptr<UpdateCall>> calls;
  for (int64_t seq = 1; seq <= 4; ++seq) {
    calls.push_back(
        std::make_unique<UpdateCall>(std::vector<int64_t>{seq}, RandomRows(1, 20 + seq), seq));
  }
  ASSERT_THAT(writer.Submit(calls[0]->Update()), IsOk());
  WaitForPause(batcher);  // the first is taken; two more may wait
  ASSERT_THAT(writer.Submit(calls[1]->Update()), IsOk());
  ASSERT_THAT(writer.Submit(calls[2]->Update()), IsOk());
  EXPECT_THAT(writer.Submit(calls[3]->Update()),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("2 writes wait for table 't''s writer already, its limit (2")));
  gate.Open();
  for (int k = 0; k < 3; ++k) {
    calls[static_cast<size_t>(k)]->done.WaitForNotification();
    EXPECT_THAT(calls[static_cast<size_t>(k)]->result, IsOk()) << k;
  }
  EXPECT_EQ(writer.last_sequence(), 3);
  held.done.WaitForNotification();
}

// One writer rewrites every row of the table with its sequence number, as fast as it can, while
// readers look up random ids. Every answer must be whole rows of one update (every element of
// every row the same value), never older than the last update the reader saw answered before its
// lookup started, and never older than the reader's previous answer.
TEST_F(BatcherTest, ReadersNeverSeeAMixedOrOlderUpdate) {
  constexpr int kReaders = 4;
  constexpr int64_t kUpdates = 150;
  constexpr int64_t kMinReads = 20;
  BatcherOptions options;
  options.max_batch_ids = 4096;
  options.max_queue_delay = absl::Microseconds(50);
  Batcher batcher(store_.get(), options, table_metrics_);  // real clock
  TableWriter writer(store_.get(), &batcher, table_metrics_, WriterOptions{});
  std::vector<int64_t> all(kRows);
  for (int64_t i = 0; i < kRows; ++i) {
    all[static_cast<size_t>(i)] = i;
  }
  std::atomic<int64_t> acknowledged{0};
  auto write = [&](int64_t seq) {
    UpdateCall u(
        all, std::vector<float>(static_cast<size_t>(kRows * kDim), static_cast<float>(seq)), seq);
    ASSERT_THAT(writer.Submit(u.Update()), IsOk());
    u.done.WaitForNotification();
    ASSERT_THAT(u.result, IsOk());
    acknowledged.store(seq, std::memory_order_release);
  };
  write(1);
  std::atomic<bool> writing{true};
  std::vector<std::string> errors(kReaders);
  std::vector<std::atomic<int64_t>> reads(kReaders);
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      std::mt19937_64 rng(77 + r);
      std::uniform_int_distribution<int64_t> id(0, kRows - 1);
      std::uniform_int_distribution<int64_t> length(1, 200);
      // Sequences up to 2048 are exact in both (bfloat16's 8 bits would stop at 256).
      const DataType types[] = {DataType::kFloat32, DataType::kFloat16};
      float previous = 0;
      while (writing.load(std::memory_order_acquire) && errors[r].empty()) {
        std::vector<int64_t> ids(static_cast<size_t>(length(rng)));
        for (int64_t& i : ids) {
          i = id(rng);
        }
        const DataType type = types[reads[r].load() % 2];
        const auto floor = static_cast<float>(acknowledged.load(std::memory_order_acquire));
        Call call(ids, type);
        if (!batcher.Submit(call.Request()).ok()) {
          errors[r] = "Submit failed";
          break;
        }
        call.done.WaitForNotification();
        if (!call.status.ok()) {
          errors[r] = call.status.ToString();
          break;
        }
        const float first = LoadAsFloat(call.out.data(), type, 0);
        for (size_t e = 0; e < ids.size() * kDim; ++e) {
          if (LoadAsFloat(call.out.data(), type, static_cast<int64_t>(e)) != first) {
            errors[r] = absl::StrCat("answer mixes updates: element ", e, " is ",
                                     LoadAsFloat(call.out.data(), type, static_cast<int64_t>(e)),
                                     ", element 0 is ", first);
            break;
          }
        }
        if (first < floor || first < previous) {
          errors[r] = absl::StrCat("read update ", first, " after update ",
                                   std::max(floor, previous), " was seen");
        }
        previous = first;
        ++reads[r];
      }
    });
  }
  // At least kUpdates updates, and on until every reader has read kMinReads times.
  auto fewest_reads = [&] {
    int64_t fewest = INT64_MAX;
    for (const auto& n : reads) {
      fewest = std::min(fewest, n.load());
    }
    return fewest;
  };
  int64_t seq = 1;
  while (seq < kUpdates || fewest_reads() < kMinReads) {
    if (seq >= 2048) {
      ADD_FAILURE() << "the readers did not get " << kMinReads << " reads each";
      break;
    }
    write(++seq);
  }
  writing.store(false, std::memory_order_release);
  for (std::thread& t : readers) {
    t.join();
  }
  for (int r = 0; r < kReaders; ++r) {
    EXPECT_EQ(errors[r], "") << "reader " << r << " after " << reads[r] << " reads";
  }
  EXPECT_EQ(writer.last_sequence(), seq);
  EXPECT_EQ(writer.updated_rows(), seq * kRows);
}

}  // namespace
}  // namespace emb::service::batcher_test
