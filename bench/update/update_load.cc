// update_load: one UpdateRows stream against a server's admin port, as fast as the server
// answers or at a given rate, for the update benchmark (bench/update/update_benchmark.py).
//
// Each message rewrites --rows_per_message random rows of --table (float32 rows of the table's
// dim, every element the message's sequence number) with increasing sequences starting after the
// table's last applied one. Up to --window messages are in flight (sent, not yet answered); with
// --rows_per_second, messages are sent on a fixed schedule instead, as long as the window allows.
// Prints one JSON line: messages and rows answered, seconds, rows/s, and the time from sending a
// message to its answer (p50, p99, max, in microseconds).
//
//   update_load --target=HOST:PORT --admin_target=HOST:PORT [--table=T] [--rows_per_message=4096]
//               [--window=4] [--rows_per_second=0] [--duration_s=10]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/embedding_client.h"
#include "embedding/v1/embedding_admin.grpc.pb.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "The server's lookup port (for ListTables).");
ABSL_FLAG(std::string, admin_target, "127.0.0.1:50052", "The server's admin port (plaintext).");
ABSL_FLAG(std::string, table, "", "Table to write; empty: the default table.");
ABSL_FLAG(int64_t, rows_per_message, 4096, "Rows in each UpdateRows message.");
ABSL_FLAG(int32_t, window, 4, "Messages sent and not yet answered, at most.");
ABSL_FLAG(double, rows_per_second, 0, "Rows a second on a fixed schedule; 0: as fast as answered.");
ABSL_FLAG(double, duration_s, 10, "Seconds to send for.");

namespace {

using embedding::v1::UpdateRowsRequest;
using embedding::v1::UpdateRowsResponse;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  const auto i = static_cast<size_t>(std::lround(p * static_cast<double>(v.size() - 1)));
  return v[std::min(i, v.size() - 1)];
}

int Run() {
  auto lookup = emb::client::EmbeddingClient::Connect(absl::GetFlag(FLAGS_target));
  auto tables = lookup->ListTables(absl::Seconds(30));
  if (!tables.ok()) {
    std::fprintf(stderr, "ListTables: %s\n", tables.status().ToString().c_str());
    return 1;
  }
  const std::string wanted = absl::GetFlag(FLAGS_table);
  const emb::client::TableInfo* table = nullptr;
  for (const auto& t : *tables) {
    if (wanted.empty() ? t.is_default : t.name == wanted) {
      table = &t;
    }
  }
  if (table == nullptr) {
    std::fprintf(stderr, "no table '%s'\n", wanted.c_str());
    return 1;
  }
  const int64_t n = absl::GetFlag(FLAGS_rows_per_message);
  const size_t window = static_cast<size_t>(std::max(1, absl::GetFlag(FLAGS_window)));
  const double rate = absl::GetFlag(FLAGS_rows_per_second);
  const absl::Duration duration = absl::Seconds(absl::GetFlag(FLAGS_duration_s));

  auto stub = embedding::v1::EmbeddingAdminService::NewStub(grpc::CreateCustomChannel(
      absl::GetFlag(FLAGS_admin_target), grpc::InsecureChannelCredentials(),
      emb::client::DefaultChannelArguments()));
  grpc::ClientContext ctx;
  auto stream = stub->UpdateRows(&ctx);

  absl::Mutex mu;
  std::deque<absl::Time> sent;  // send times of the messages in flight, in order
  std::vector<double> ack_us;
  int64_t answered = 0;
  bool broken = false;
  std::thread reader([&] {
    UpdateRowsResponse r;
    while (stream->Read(&r)) {
      const absl::Time now = absl::Now();
      absl::MutexLock lock(&mu);
      ack_us.push_back(absl::ToDoubleMicroseconds(now - sent.front()));
      sent.pop_front();
      ++answered;
    }
    absl::MutexLock lock(&mu);
    broken = true;
  });

  // Messages are made ahead of time (a few distinct ones, reused with new sequences) so that the
  // sender measures the server, not the making of rows.
  std::mt19937_64 rng(1);
  std::vector<UpdateRowsRequest> messages(8);
  for (UpdateRowsRequest& m : messages) {
    m.set_table(table->name);
    for (int64_t i = 0; i < n; ++i) {
      m.add_ids(static_cast<int64_t>(rng() % static_cast<uint64_t>(table->rows)));
    }
    m.set_dtype(embedding::v1::DATA_TYPE_FLOAT32);
    m.mutable_rows()->resize(static_cast<size_t>(n * table->dim) * sizeof(float));
  }
  int64_t sequence = table->sequence;
  const absl::Time start = absl::Now();
  const absl::Time end = start + duration;
  int64_t sent_count = 0;
  for (;;) {
    const absl::Time now = absl::Now();
    if (now >= end) {
      break;
    }
    if (rate > 0) {
      const absl::Time due = start + absl::Seconds(static_cast<double>(sent_count * n) / rate);
      if (due > now) {
        absl::SleepFor(std::min(due - now, absl::Milliseconds(1)));
        continue;
      }
    }
    {
      absl::MutexLock lock(&mu);
      auto room = [&]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return broken || sent.size() < window; };
      mu.Await(absl::Condition(&room));
      if (broken) {
        break;
      }
      sent.push_back(absl::Now());
    }
    UpdateRowsRequest& m = messages[static_cast<size_t>(sent_count) % messages.size()];
    m.set_sequence(++sequence);
    auto* values = reinterpret_cast<float*>(m.mutable_rows()->data());
    std::fill(values, values + n * table->dim, static_cast<float>(sequence % 1000));
    if (!stream->Write(m)) {
      break;
    }
    ++sent_count;
  }
  {
    absl::MutexLock lock(&mu);
    auto drained = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return broken || sent.empty(); };
    mu.Await(absl::Condition(&drained));
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  stream->WritesDone();
  reader.join();
  const grpc::Status status = stream->Finish();
  absl::MutexLock lock(&mu);
  std::printf(
      "%s\n",
      absl::StrFormat(R"({"messages": %d, "rows": %d, "seconds": %.3f, "rows_per_s": %.0f, )"
                      R"("rows_per_message": %d, "window": %d, "offered_rows_per_s": %.0f, )"
                      R"("ack_us": {"p50": %.0f, "p99": %.0f, "max": %.0f}, "status": "%s"})",
                      answered, answered * n, seconds, static_cast<double>(answered * n) / seconds,
                      n, window, rate, Percentile(ack_us, 0.5), Percentile(ack_us, 0.99),
                      Percentile(ack_us, 1.0), status.ok() ? "OK" : status.error_message())
          .c_str());
  return status.ok() ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return Run();
}
