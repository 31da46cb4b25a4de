// embedding-server: serves embedding lookups over gRPC. See README.md for the flags and metrics.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "service/common/byte_size.h"
#include "service/common/flag_files.h"
#include "service/common/flags_usage.h"
#include "service/common/log.h"
#include "service/common/regular_file.h"
#include "service/server/server.h"

ABSL_FLAG(std::string, table, "",
          "A table to serve, as NAME=PATH[#TENSOR][,OPTION=VALUE]...; repeat the flag for "
          "several tables. Formats: .npy (2-D, C order, little-endian float32 or float16) and "
          ".safetensors (float32, float16, bfloat16, or row-wise int8/int4 as a U8 tensor with "
          "__metadata__ emb_layout; #TENSOR picks one tensor). Options, in any order, each at "
          "most once: quantize=int8|int4 stores a float table row-wise quantized (FBGEMM's fused "
          "rows; answers are dequantized); gpu_budget=SIZE (GPU) is the device memory the table "
          "may take, bytes or with K, M, G, T (KiB...TiB), e.g. 4G: a table over it is served "
          "from pinned host memory with a GPU cache of its most looked-up rows (the host tier); "
          "hot_ids=PATH (GPU, host tier) is a 1-D int64 or int32 .npy of row ids, hottest "
          "first, put into the cache at start-up. PATH may be a version "
          "directory (PATH/1/, PATH/2/, ...). The first is the default table unless "
          "--default_table says otherwise. None: a demo table.");
ABSL_FLAG(std::string, default_table, "",
          "Name of the table that an empty LookUpRequest.table "
          "selects; empty: the first --table.");
ABSL_FLAG(std::string, demo_table, "100000x128",
          "ROWSxDIM of the seeded float32 demo table served when no --table is given.");
ABSL_FLAG(uint64_t, demo_seed, 42, "Seed of the demo table's values (uniform in [-1, 1)).");
ABSL_FLAG(std::string, shard, "",
          "K/N: serve only shard K (from 0) of N of every table's rows (a table's own shard= "
          "option wins): the contiguous block of ceil(rows / N) rows from K * ceil(rows / N). "
          "Ids stay global; ids of other shards are OUT_OF_RANGE. Empty: whole tables.");
ABSL_FLAG(std::string, grpc_address, "0.0.0.0:50051", "Address for gRPC (port 0: any free port).");
ABSL_FLAG(std::string, metrics_address, "0.0.0.0:9464",
          "Address for the Prometheus /metrics endpoint (port 0: any free port).");
ABSL_FLAG(std::string, device, "auto",
          "Where tables live and gathers run: auto (cuda:0 if a GPU is visible, else cpu), cpu, "
          "cuda or cuda:N; or several, each table on all of them as --placement says: a list "
          "(cuda:0,cuda:1) or all (every visible GPU).");
ABSL_FLAG(std::string, placement, "replicas",
          "How a table is laid out over the devices of a --device list, unless its --table "
          "option placement= says: replicas (the whole table on each device; each batch goes to "
          "the least busy) or rows (the rows split into one block a device, for a table larger "
          "than one device; each batch's ids gathered where their rows live).");
ABSL_FLAG(int64_t, max_batch_ids, 65536,
          "Most ids in one coalesced batch (one gather); also sizes the GPU buffers.");
ABSL_FLAG(int64_t, max_queue_delay_us, 0,
          "How long a batch may wait for more requests after its first arrived, in microseconds. "
          "0: run what is queued as soon as the worker is free (requests arriving meanwhile "
          "join the next batch).");
ABSL_FLAG(int64_t, max_queue_ids, 1 << 20,
          "Most ids queued per table; past it LookUp answers RESOURCE_EXHAUSTED at once.");
ABSL_FLAG(int64_t, max_request_ids, 65536,
          "Most ids in one LookUp (INVALID_ARGUMENT beyond); at most --max_batch_ids.");
ABSL_FLAG(int64_t, max_features_per_call, 1024,
          "Most features in one LookUpFeatures call (INVALID_ARGUMENT beyond).");
ABSL_FLAG(int64_t, max_feature_call_ids, int64_t{1} << 19,
          "Most ids of all features of one LookUpFeatures call (INVALID_ARGUMENT beyond); each "
          "feature is also held to --max_request_ids. Raises the gRPC receive limit with it.");
ABSL_FLAG(int64_t, max_response_bytes, 128 << 20,
          "Largest LookUp answer in bytes (INVALID_ARGUMENT beyond); sets the gRPC send limit.");
ABSL_FLAG(int32_t, answer_threads, -1,
          "Threads per table that finish the calls after each batch's first (serializing and "
          "sending their answers); -1: a quarter of the cores (at most 8).");
ABSL_FLAG(int32_t, inline_batches, 4,
          "GPU, with --max_queue_delay_us=0: a call that finds its table's queue empty and fewer "
          "than this many batches in flight starts its batch on the gRPC thread instead of "
          "queueing it for the batcher thread (at most --inflight_batches; 0: never).");
ABSL_FLAG(int64_t, answer_pool_bytes, int64_t{1} << 30,
          "Most bytes of answer buffers kept for reuse (pinned memory for GPU tables); answers "
          "beyond it use memory allocated per call, which a GPU table fills through a host copy.");
ABSL_FLAG(int32_t, max_concurrent_streams, 128,
          "Calls in progress that one client connection may have (HTTP/2 "
          "SETTINGS_MAX_CONCURRENT_STREAMS); more wait on a well-behaved client. gRPC applies it "
          "only to clients that acknowledge its SETTINGS: the memory any client can hold is "
          "bounded by --max_unsent_answer_bytes_per_connection instead. 0: no limit.");
ABSL_FLAG(int64_t, max_unsent_answer_bytes, int64_t{2} << 30,
          "Most bytes of answers held for calls whose answers are not yet sent, all connections "
          "together (from admission: queued, gathered, or waiting for a client that does not "
          "read); a LookUp past it waits until answers are sent (up to --max_concurrent_streams "
          "calls a connection; past that it is refused RESOURCE_EXHAUSTED), or until its "
          "deadline. At least --max_unsent_answer_bytes_per_connection.");
ABSL_FLAG(int64_t, max_unsent_answer_bytes_per_connection, int64_t{256} << 20,
          "The same bound for each client connection, whatever the client does (gRPC applies "
          "--max_concurrent_streams only to clients that acknowledge its SETTINGS); calls past "
          "it wait likewise. Must hold one answer of --max_response_bytes rounded up to a power "
          "of two.");
ABSL_FLAG(double, deadline_admission_fraction, 0,
          "Refuse a LookUp (RESOURCE_EXHAUSTED, at once) when its answer is predicted to be sent "
          "after this fraction of the time left before its deadline: the answers its connection "
          "already waits for, at the rate that connection's answers have been draining. 0 (the "
          "default): off, so no call is refused on a prediction (one that would have been "
          "answered in time on a loaded host was). Under overload with short deadlines, 0.5 kept "
          "the most answers in time (docs/decisions.md).");
ABSL_FLAG(int64_t, deadline_admission_socket_bytes, 0,
          "Admission by deadline: bytes assumed to wait in the socket buffers of a connection "
          "whose answers queue (past gRPC, where the server cannot see them), added to the bytes "
          "ahead of a call when it is judged.");
ABSL_FLAG(double, max_call_seconds, 60,
          "The longest a LookUp may stay in the server when its client sets no deadline or a "
          "later one: its deadline for admission and in the queue.");
ABSL_FLAG(int64_t, grpc_memory_bytes, int64_t{1} << 30,
          "Memory gRPC itself may use (its resource quota: read buffers, calls, headers; not the "
          "answers); past it gRPC closes idle connections and cancels streams.");
ABSL_FLAG(int32_t, inflight_batches, 4,
          "GPU: batches in flight per table, each on its own stream with its own buffers.");
ABSL_FLAG(int64_t, completion_poll_us, 500,
          "GPU: microseconds a completion thread that has just answered a batch keeps polling for "
          "the next one before it sleeps (one thread at a time), while batches start 100 us or "
          "more apart. Spares a thread wake-up per batch (about 30 us of the p50 of one call at a "
          "time on the H200 host) for a busy core; 0: never poll.");
ABSL_FLAG(std::string, gpu_memory_budget, "0",
          "GPU: the device memory all tables together may take (rows, host tiers' caches and "
          "batch buffers), bytes or with K, M, G, T (KiB...TiB), e.g. 60G. Tables are placed in "
          "order, the default first; each takes at most what the ones before it left (and its "
          "own gpu_budget=), and one that does not fit goes to the host tier. 0: no such bound, "
          "each table may take what the device has free.");
ABSL_FLAG(bool, host_tier, true,
          "GPU: serve a table that does not fit in the GPU memory it may use from pinned host "
          "memory, with a GPU cache of its most looked-up rows; false: refuse it at start-up.");
ABSL_FLAG(int32_t, load_readers, 0,
          "GPU: threads that read a table file into pinned staging buffers at start-up while the "
          "copies to the device run; 0 picks min(8, hardware threads).");
ABSL_FLAG(int64_t, zero_copy_max_bytes, 1 << 20,
          "GPU: a batch whose answer is at most this many bytes runs as one kernel that reads its "
          "ids from and writes its rows to mapped pinned host memory; larger ones copy ids in and "
          "rows out with the copy engines.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate (chain) of the server: with --tls_key, the gRPC port speaks TLS. "
          "Empty: plaintext. The metrics port stays plain HTTP.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key (unencrypted) of --tls_cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA certificate(s): with --tls_cert and --tls_key, mutual TLS; every client must "
          "present a certificate signed by one of them.");
ABSL_FLAG(std::string, admin_address, "",
          "HOST:PORT of the admin listener (EmbeddingAdminService: row updates). Empty: no admin "
          "service; the tables take no writes. Needs mutual TLS (--admin_tls_*) and "
          "--admin_allowed_identities, or --admin_insecure on a literal loopback address.");
ABSL_FLAG(std::string, admin_tls_cert, "", "PEM certificate (chain) of the admin listener.");
ABSL_FLAG(std::string, admin_tls_key, "", "PEM private key (unencrypted) of --admin_tls_cert.");
ABSL_FLAG(std::string, admin_tls_client_ca, "",
          "PEM CA certificate(s) that admin client certificates must be signed by.");
ABSL_FLAG(std::vector<std::string>, admin_allowed_identities, {},
          "Comma-separated client identities that may write: a client certificate's SAN entries "
          "(DNS, URI, email, IP), or its CN where it has no SAN. Any other caller gets "
          "PERMISSION_DENIED.");
ABSL_FLAG(bool, admin_insecure, false,
          "Serve the admin listener in plaintext to every caller, without an identity check: "
          "only on a literal loopback --admin_address (127.0.0.0/8, [::1] or localhost; tests, a "
          "sidecar in the same pod).");
ABSL_FLAG(double, version_poll_seconds, 0,
          "How often each table served from a version directory (--table=NAME=DIR) is checked "
          "for a newer version, which is then loaded beside the served one and swapped in; 0: "
          "never (EmbeddingAdminService.LoadVersion still loads one).");
ABSL_FLAG(int64_t, admin_max_message_bytes, int64_t{64} << 20,
          "The largest UpdateRows message the admin listener reads, in bytes.");
ABSL_FLAG(double, drain_seconds, 5,
          "On SIGTERM, SIGINT (Ctrl-C) or SIGHUP: seconds to keep serving with health "
          "NOT_SERVING before shutdown, so that load balancers stop sending calls; 0: shut down at "
          "once (Ctrl-C then ends the server promptly, as on a developer's machine).");
ABSL_FLAG(double, shutdown_timeout_seconds, 10,
          "After draining: seconds to finish calls in progress before they are cancelled.");

namespace {

using emb::service::ExpandFlagfiles;
using emb::service::FlagfileReads;
using emb::service::LogError;
using emb::service::LogInfo;
using emb::service::RepeatedFlag;

bool ParseRowsByDim(const std::string& text, int64_t* rows, int64_t* dim) {
  std::vector<std::string> parts = absl::StrSplit(text, 'x');
  return parts.size() == 2 && absl::SimpleAtoi(parts[0], rows) && absl::SimpleAtoi(parts[1], dim) &&
         *rows > 0 && *dim > 0;
}

// A lost GPU context (a sticky CUDA error) cannot be recovered in this process: the server has
// already said NOT_SERVING; exit so that the orchestrator restarts it.
[[noreturn]] void ExitOnDeviceLoss(const std::string& why) {
  LogError("stopping: the GPU context is lost (", why,
           "); exiting with status 1 so that the orchestrator restarts the server");
  std::_Exit(1);
}

absl::StatusOr<emb::service::ServerConfig> ConfigFromFlags(
    const std::vector<std::string>& table_flags) {
  emb::service::ServerConfig c;
  for (const std::string& flag : table_flags) {
    absl::StatusOr<emb::service::TableSpec> spec = emb::service::ParseTableSpec(flag);
    if (!spec.ok()) {
      return spec.status();
    }
    c.tables.push_back(*spec);
  }
  c.default_table = absl::GetFlag(FLAGS_default_table);
  if (!ParseRowsByDim(absl::GetFlag(FLAGS_demo_table), &c.demo_rows, &c.demo_dim)) {
    return absl::InvalidArgumentError(absl::StrCat("--demo_table=", absl::GetFlag(FLAGS_demo_table),
                                                   ": expected ROWSxDIM, e.g. 100000x128"));
  }
  c.demo_seed = absl::GetFlag(FLAGS_demo_seed);
  if (const std::string shard = absl::GetFlag(FLAGS_shard); !shard.empty()) {
    absl::StatusOr<emb::service::ShardSpec> spec = emb::service::ParseShardSpec(shard, "--shard");
    if (!spec.ok()) {
      return spec.status();
    }
    c.shard = *spec;
  }
  c.grpc_address = absl::GetFlag(FLAGS_grpc_address);
  c.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  c.device = absl::GetFlag(FLAGS_device);
  c.placement = absl::GetFlag(FLAGS_placement);
  c.batcher.max_batch_ids = absl::GetFlag(FLAGS_max_batch_ids);
  c.batcher.max_queue_delay = absl::Microseconds(absl::GetFlag(FLAGS_max_queue_delay_us));
  c.batcher.max_queue_ids = absl::GetFlag(FLAGS_max_queue_ids);
  c.limits.max_request_ids = absl::GetFlag(FLAGS_max_request_ids);
  c.limits.max_response_bytes = absl::GetFlag(FLAGS_max_response_bytes);
  c.limits.max_features_per_call = absl::GetFlag(FLAGS_max_features_per_call);
  c.limits.max_feature_call_ids = absl::GetFlag(FLAGS_max_feature_call_ids);
  c.limits.max_unsent_answer_bytes = absl::GetFlag(FLAGS_max_unsent_answer_bytes);
  c.limits.max_unsent_answer_bytes_per_connection =
      absl::GetFlag(FLAGS_max_unsent_answer_bytes_per_connection);
  c.limits.deadline_admission_fraction = absl::GetFlag(FLAGS_deadline_admission_fraction);
  c.limits.deadline_admission_socket_bytes = absl::GetFlag(FLAGS_deadline_admission_socket_bytes);
  if (c.limits.deadline_admission_socket_bytes < 0) {
    return absl::InvalidArgumentError("--deadline_admission_socket_bytes must not be negative");
  }
  if (!(c.limits.deadline_admission_fraction >= 0 && c.limits.deadline_admission_fraction <= 1)) {
    return absl::InvalidArgumentError(
        "--deadline_admission_fraction must be in [0, 1] (0: no admission by deadline)");
  }
  if (!(absl::GetFlag(FLAGS_max_call_seconds) > 0)) {
    return absl::InvalidArgumentError("--max_call_seconds must be positive");
  }
  c.limits.max_call_time = absl::Seconds(absl::GetFlag(FLAGS_max_call_seconds));
  if (absl::GetFlag(FLAGS_grpc_memory_bytes) <= 0) {
    return absl::InvalidArgumentError("--grpc_memory_bytes must be positive");
  }
  c.grpc_memory_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_grpc_memory_bytes));
  c.store.inflight_batches = absl::GetFlag(FLAGS_inflight_batches);
  c.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  c.store.completion_poll = absl::Microseconds(absl::GetFlag(FLAGS_completion_poll_us));
  if (absl::GetFlag(FLAGS_zero_copy_max_bytes) < 0) {
    return absl::InvalidArgumentError("--zero_copy_max_bytes must not be negative");
  }
  c.store.zero_copy_max_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_zero_copy_max_bytes));
  if (absl::GetFlag(FLAGS_load_readers) < 0) {
    return absl::InvalidArgumentError("--load_readers must not be negative (0: automatic)");
  }
  c.store.load_readers = absl::GetFlag(FLAGS_load_readers);
  absl::StatusOr<size_t> budget =
      emb::service::ParseByteSize(absl::GetFlag(FLAGS_gpu_memory_budget));
  if (!budget.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu_memory_budget: ", budget.status().message(), " (0: no bound)"));
  }
  c.gpu_memory_budget_bytes = *budget;
  c.store.host_tier = absl::GetFlag(FLAGS_host_tier);
  c.store.on_device_lost = ExitOnDeviceLoss;
  c.batcher.answer_threads = absl::GetFlag(FLAGS_answer_threads);
  c.batcher.inline_batches = absl::GetFlag(FLAGS_inline_batches);
  if (absl::GetFlag(FLAGS_answer_pool_bytes) < 0) {
    return absl::InvalidArgumentError("--answer_pool_bytes must not be negative");
  }
  c.answer_pool_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_answer_pool_bytes));
  c.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  c.tls_key = absl::GetFlag(FLAGS_tls_key);
  c.tls_client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  c.admin_address = absl::GetFlag(FLAGS_admin_address);
  c.admin_tls_cert = absl::GetFlag(FLAGS_admin_tls_cert);
  c.admin_tls_key = absl::GetFlag(FLAGS_admin_tls_key);
  c.admin_tls_client_ca = absl::GetFlag(FLAGS_admin_tls_client_ca);
  c.admin_allowed_identities = absl::GetFlag(FLAGS_admin_allowed_identities);
  c.admin_insecure = absl::GetFlag(FLAGS_admin_insecure);
  c.admin_max_message_bytes = absl::GetFlag(FLAGS_admin_max_message_bytes);
  const double poll = absl::GetFlag(FLAGS_version_poll_seconds);
  if (!(poll >= 0) || poll > 86400) {
    return absl::InvalidArgumentError("--version_poll_seconds must be in [0, 86400] (0: never)");
  }
  c.version_poll = absl::Seconds(poll);
  if (c.batcher.answer_threads == -1) {
    c.batcher.answer_threads =
        std::min(8, static_cast<int>(std::thread::hardware_concurrency()) / 4);
  }
  for (const auto& [name, seconds] :
       {std::pair<const char*, double>{"--drain_seconds", absl::GetFlag(FLAGS_drain_seconds)},
        {"--shutdown_timeout_seconds", absl::GetFlag(FLAGS_shutdown_timeout_seconds)}}) {
    if (!(seconds >= 0 && seconds <= 86400)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "=", seconds, ": must be in [0, 86400] seconds"));
    }
  }
  return c;
}

// Raises the soft limit of open files to the hard one, as servers do: each connection takes a
// descriptor, and gRPC 1.51's listener stops accepting for good after one accept4() fails with
// EMFILE (docs/reliability.md). Logs the limit either way.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return;
  }
  const rlim_t before = limit.rlim_cur;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      limit.rlim_cur = before;
    }
  }
  LogInfo("open files: limit ", static_cast<uint64_t>(limit.rlim_cur),
          before != limit.rlim_cur
              ? absl::StrCat(" (raised from ", static_cast<uint64_t>(before), ")")
              : std::string());
}

const char* SignalName(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
  }
  return "a stop signal";
}

}  // namespace

int main(int argc, char** argv) {
  // Flag files first, before Abseil follows them: a FIFO, /dev/zero or a file that includes itself
  // would otherwise hang or loop for ever.
  std::vector<std::string> chain;
  FlagfileReads reads;
  const absl::StatusOr<std::vector<std::string>> args =
      ExpandFlagfiles(std::vector<std::string>(argv + 1, argv + argc), &chain, &reads);
  if (!args.ok()) {
    LogError("stopping: ", args.status().message());
    return 1;
  }
  emb::service::ParseFlags(
      argc, argv,
      "Serves embedding table lookups over gRPC (embedding.v1.EmbeddingService).\n"
      "  embedding-server --table=words=/data/words.npy --device=cuda\n"
      "With no --table it serves a seeded demo table.",
      "service/main.cc");
  // Debian's Abseil is built with Mutex deadlock detection on, which keeps a global lock graph
  // updated on every lock; the request path takes several locks per call.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const std::vector<std::string> table_flags = RepeatedFlag(*args, "table");

  // Block the stop signals in every thread; one thread waits for them. SIGTERM, SIGINT and SIGHUP
  // all mean stop: during start-up, at once (exit 0, before health ever says SERVING); once
  // serving, after the drain (docs/operations.md).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // The state the signal thread shares with main, on the heap: the thread is detached and may
  // first run after main has returned (a start-up failure), so it must not touch main's stack.
  struct StopState {
    absl::Mutex mu;
    bool serving ABSL_GUARDED_BY(mu) = false;
    int signal ABSL_GUARDED_BY(mu) = 0;
  };
  auto stop = std::make_shared<StopState>();
  std::thread([stop, stop_signals] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    absl::MutexLock lock(&stop->mu);
    if (!stop->serving) {
      LogInfo("received ", SignalName(signal),
              " during start-up: stopping before serving (exit status 0)");
      std::_Exit(0);
    }
    stop->signal = signal;
  }).detach();  // it ends the process during start-up, or returns after the signal

  RaiseOpenFileLimit();
  absl::StatusOr<emb::service::ServerConfig> config = ConfigFromFlags(table_flags);
  if (!config.ok()) {
    LogError("stopping: ", config.status().message());
    return 1;
  }
  config->before_serving = [stop] {
    absl::MutexLock lock(&stop->mu);
    stop->serving = true;  // a signal from here on drains; one before ended start-up
  };
  absl::StatusOr<std::unique_ptr<emb::service::EmbeddingServer>> server =
      emb::service::EmbeddingServer::Start(*config);
  if (!server.ok()) {
    LogError("stopping: ", server.status().message());
    return 1;
  }
  int signal = 0;
  {
    absl::MutexLock lock(&stop->mu);
    stop->mu.Await(absl::Condition(
        +[](StopState* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->signal != 0; }, stop.get()));
    signal = stop->signal;
  }
  const double drain = absl::GetFlag(FLAGS_drain_seconds);
  // Health changes before the log line says so: whoever reads the log may then rely on it.
  (*server)->SetNotServing();
  LogInfo("received ", SignalName(signal), ": health NOT_SERVING, serving on for ", drain,
          " s, then shutting down");
  absl::SleepFor(absl::Seconds(drain));
  LogInfo("shutting down: no new calls; finishing calls in progress (timeout ",
          absl::GetFlag(FLAGS_shutdown_timeout_seconds), " s)");
  (*server)->Shutdown(absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_shutdown_timeout_seconds)));
  server->reset();
  LogInfo("stopped cleanly");
  return 0;
}
