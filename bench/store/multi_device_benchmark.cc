// A table over several devices (MultiDeviceStore) against the same table on one GPU, side by side
// in one process, through the stores (no gRPC): rows split over the devices and replicas on each,
// for batches of uniform ids. Prints one markdown table: per case, ids/s with --threads callers
// each running one batch at a time, p50 and p99 of the batch time, and the ratio to the one-GPU
// store. The first batch of every case is checked against the one-GPU store's answer, byte for
// byte. Exits 1 on any failure.
//
//   multi_device_benchmark [--devices=cuda:0,cuda:1] [--rows=4194304] [--dim=128] [--batch=65536]
//                          [--threads=4] [--batches=200]
// --devices takes --device's forms (cuda:0,cuda:1; all; cuda:0,cuda:0 puts both parts on one GPU,
// which measures what the split costs without a second GPU's bandwidth). The table is a float32
// demo table; answers are float32 in pinned answer memory the devices write into.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "bench/common/bench_flags.h"
#include "service/common/host_allocator.h"
#include "service/common/status_macros.h"
#include "service/store/device.h"
#include "service/store/multi_device_store.h"
#include "service/store/store_factory.h"
#include "service/tables/table_source.h"

namespace emb::service {
namespace {

using Clock = std::chrono::steady_clock;

struct Result {
  double ids_per_second = 0;
  double p50_us = 0;
  double p99_us = 0;
};

// One batch on `store` into `out` (pinned, mapped), waited for.
absl::Status RunBatch(EmbeddingStore& store, const std::vector<int64_t>& ids, const HostBlock& out,
                      size_t bytes) {
  const AnswerSpan span{absl::MakeSpan(static_cast<std::byte*>(out.host), bytes),
                        static_cast<std::byte*>(out.device)};
  absl::Status status;
  absl::Notification done;
  store.LookUp(ids, DataType::kFloat32, absl::MakeConstSpan(&span, 1),
               [&](const absl::Status& s, const StageTimes&) {
                 status = s;
                 done.Notify();
               });
  done.WaitForNotification();
  return status;
}

// `threads` callers, each running batches of its own ids one at a time, `batches` in all.
absl::StatusOr<Result> Measure(EmbeddingStore& store, const HostAllocator* memory,
                               const std::vector<std::vector<int64_t>>& pool, int threads,
                               int64_t batches) {
  const size_t bytes = pool.front().size() * static_cast<size_t>(store.info().dim) * sizeof(float);
  std::vector<std::vector<double>> times(threads);
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  absl::Status first_error;
  std::vector<std::thread> workers;
  workers.reserve(threads);
  const Clock::time_point start = Clock::now();
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const HostBlock out = memory->Allocate(bytes);
      for (int64_t b = next++; b < batches && !failed; b = next++) {
        const Clock::time_point s = Clock::now();
        if (absl::Status st = RunBatch(store, pool[b % pool.size()], out, bytes); !st.ok()) {
          if (!failed.exchange(true)) {
            first_error = st;
          }
          break;
        }
        times[t].push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
      }
      memory->Release(out.host);
    });
  }
  for (std::thread& w : workers) {
    w.join();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (failed) {
    return first_error;
  }
  std::vector<double> all;
  for (const auto& t : times) {
    all.insert(all.end(), t.begin(), t.end());
  }
  std::sort(all.begin(), all.end());
  Result r;
  r.ids_per_second =
      static_cast<double>(batches) * static_cast<double>(pool.front().size()) / seconds;
  r.p50_us = all[all.size() / 2];
  r.p99_us = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  return r;
}

// The answer of `store` to `ids`, as bytes.
absl::StatusOr<std::string> Answer(EmbeddingStore& store, const HostAllocator* memory,
                                   const std::vector<int64_t>& ids) {
  const size_t bytes = ids.size() * static_cast<size_t>(store.info().dim) * sizeof(float);
  const HostBlock out = memory->Allocate(bytes);
  absl::Status status = RunBatch(store, ids, out, bytes);
  std::string answer(static_cast<const char*>(out.host), bytes);
  memory->Release(out.host);
  RETURN_IF_ERROR(status);
  return answer;
}

int Run(int argc, char** argv) {
  bench::Flags flags(argc, argv);
  const std::string device_list = flags.Get("devices", "cuda:0,cuda:1");
  const int64_t rows = flags.Int("rows", 4194304, 2);
  const int64_t dim = flags.Int("dim", 128, 1);
  const int64_t batch = flags.Int("batch", 65536, 1);
  const int threads = static_cast<int>(flags.Int("threads", 4, 1));
  const int64_t batches = flags.Int("batches", 200, 1);
  if (!flags.status().ok()) {
    std::fprintf(stderr, "%s\n", std::string(flags.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<std::vector<Device>> devices = ResolveDevices(device_list);
  if (!devices.ok() || devices->size() < 2) {
    std::fprintf(stderr, "--devices=%s: %s\n", device_list.c_str(),
                 devices.ok() ? "name two or more devices"
                              : std::string(devices.status().message()).c_str());
    return 2;
  }
  std::shared_ptr<const HostAllocator> memory = CreateAnswerMemory(devices->front());
  if (memory == nullptr) {
    std::fprintf(stderr, "--devices=%s: the first device must be a GPU\n", device_list.c_str());
    return 2;
  }
  std::unique_ptr<TableSource> source = TableSource::Demo("bench", rows, dim, 1);
  StoreOptions options;
  options.max_batch_ids = batch;
  options.inflight_batches = std::max(4, threads);

  std::mt19937_64 rng(5);
  std::vector<std::vector<int64_t>> pool(16, std::vector<int64_t>(static_cast<size_t>(batch)));
  for (auto& ids : pool) {
    for (int64_t& id : ids) {
      id = static_cast<int64_t>(rng() % static_cast<uint64_t>(rows));
    }
  }
  std::vector<std::string> names;
  names.reserve(devices->size());
  for (const Device& d : *devices) {
    names.push_back(d.name());
  }
  absl::StatusOr<std::unique_ptr<EmbeddingStore>> one =
      CreateStore(*source, devices->front(), options);
  if (!one.ok()) {
    std::fprintf(stderr, "one device: %s\n", one.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::string> want = Answer(**one, memory.get(), pool.front());
  absl::StatusOr<Result> base = want.ok() ? Measure(**one, memory.get(), pool, threads, batches)
                                          : absl::StatusOr<Result>(want.status());
  if (!base.ok()) {
    std::fprintf(stderr, "one device: %s\n", base.status().ToString().c_str());
    return 1;
  }
  one->reset();  // its memory back before the parts load
  std::printf(
      "table %lld x %lld float32 (%.2f GB), batches of %lld uniform ids, %d callers, "
      "%lld batches a case\n\n",
      static_cast<long long>(rows), static_cast<long long>(dim),
      static_cast<double>(source->bytes()) / 1e9, static_cast<long long>(batch), threads,
      static_cast<long long>(batches));
  std::printf("| case | devices | ids/s | p50 (us) | p99 (us) | vs one GPU |\n");
  std::printf("|---|---|---:|---:|---:|---:|\n");
  auto row = [&](const std::string& name, const std::string& where, const Result& r) {
    std::printf("| %s | %s | %.3g | %.0f | %.0f | %.2fx |\n", name.c_str(), where.c_str(),
                r.ids_per_second, r.p50_us, r.p99_us, r.ids_per_second / base->ids_per_second);
  };
  row("one GPU", devices->front().name(), *base);
  int failures = 0;
  // The row split put together on the device (as the server does) and in host memory.
  struct Case {
    std::string name;
    Placement placement;
    MultiDeviceStore::AssemblyFactory assembly;
  };
  const Case cases[] = {
      {"rows", Placement::kRowSharded, RowAssemblyOn(*devices, options)},
      {"rows, put together on the host", Placement::kRowSharded, HostRowAssembly(options)},
      {"replicas", Placement::kReplicated, nullptr},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::unique_ptr<MultiDeviceStore>> multi = MultiDeviceStore::Create(
        *source, c.placement, names,
        [&](const TableSource& part, int k) { return CreateStore(part, (*devices)[k], options); },
        c.assembly);
    if (!multi.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.name.c_str(), multi.status().ToString().c_str());
      ++failures;
      continue;
    }
    absl::StatusOr<std::string> got = Answer(**multi, memory.get(), pool.front());
    if (!got.ok() || *got != *want) {
      std::fprintf(stderr, "%s: the answer differs from one GPU's (%s)\n", c.name.c_str(),
                   got.ok() ? "bytes" : got.status().ToString().c_str());
      ++failures;
      continue;
    }
    absl::StatusOr<Result> r = Measure(**multi, memory.get(), pool, threads, batches);
    if (!r.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.name.c_str(), r.status().ToString().c_str());
      ++failures;
      continue;
    }
    row(c.name, (*multi)->info().device, *r);
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace emb::service

int main(int argc, char** argv) { return emb::service::Run(argc, argv); }
