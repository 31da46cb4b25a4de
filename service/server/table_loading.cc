// EmbeddingServer's tables at start-up: each file opened and checked (OpenTables), then each
// table loaded onto its devices, with its batcher and metrics (LoadTables).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "kernels/data_type.h"
#include "service/batch/answer_buffer.h"
#include "service/batch/batcher.h"
#include "service/common/clock.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/metrics/device_loss_metrics.h"
#include "service/metrics/metrics.h"
#include "service/rpc/embedding_service.h"
#include "service/server/cache_metrics.h"
#include "service/server/server.h"
#include "service/server/server_internal.h"
#include "service/store/device.h"
#include "service/store/embedding_store.h"
#include "service/store/multi_device_store.h"
#include "service/store/store_factory.h"
#include "service/store/store_options.h"
#include "service/tables/hot_ids.h"
#include "service/tables/table_source.h"
#include "service/tables/table_spec.h"
#include "service/tables/table_versions.h"
#include "service/write/table_writer.h"

namespace emb::service {
namespace {

// `status` of opening the table file `path`; where the file is missing and its path holds
// ",WORD=", which looks like a misspelt option of --table, with a hint saying so.
absl::Status WithOptionHint(const absl::Status& status, absl::string_view path) {
  const size_t comma = path.rfind(',');
  if (status.code() != absl::StatusCode::kNotFound || comma == absl::string_view::npos) {
    return status;
  }
  const absl::string_view option = path.substr(comma + 1);
  const size_t eq = option.find('=');
  if (eq == absl::string_view::npos || eq == 0 ||
      !std::all_of(option.begin(), option.begin() + eq,
                   [](char ch) { return absl::ascii_islower(ch) || ch == '_'; })) {
    return status;
  }
  return absl::NotFoundError(
      absl::StrCat(status.message(), " (is ',", option.substr(0, eq),
                   "=' meant as an option? --table takes quantize=, gpu_budget=, hot_ids=, shard=, "
                   "placement= and devices=; anything else "
                   "after a comma is part of the path)"));
}
}  // namespace

absl::StatusOr<Placement> ParsePlacement(absl::string_view text, absl::string_view what) {
  if (text == "replicas") {
    return Placement::kReplicated;
  }
  if (text == "rows") {
    return Placement::kRowSharded;
  }
  return absl::InvalidArgumentError(absl::StrCat(what, "=", text, ": expected replicas or rows"));
}

std::string DeviceNames(const std::vector<Device>& devices) {
  return absl::StrJoin(devices, ",",
                       [](std::string* out, const Device& d) { out->append(d.name()); });
}

// Opens every table file and checks its header, and reads each table's hot ids; nothing else is
// read.
absl::StatusOr<std::vector<EmbeddingServer::OpenedTable>> EmbeddingServer::OpenTables(
    const ServerConfig& c) {
  std::vector<OpenedTable> tables;
  if (c.tables.empty()) {
    int64_t bytes = 0;
    if (c.demo_rows <= 0 || c.demo_dim <= 0 ||
        __builtin_mul_overflow(c.demo_rows, c.demo_dim * int64_t{sizeof(float)}, &bytes)) {
      return absl::InvalidArgumentError(absl::StrCat("--demo_table=", c.demo_rows, "x", c.demo_dim,
                                                     ": ROWS and DIM must be positive and the "
                                                     "table's bytes must fit in 64 bits"));
    }
    OpenedTable demo;
    if (c.shard.has_value()) {
      ASSIGN_OR_RETURN(demo.source, TableSource::DemoShard("demo", c.demo_rows, c.demo_dim,
                                                           c.demo_seed, *c.shard));
    } else {
      demo.source = TableSource::Demo("demo", c.demo_rows, c.demo_dim, c.demo_seed);
    }
    tables.push_back(std::move(demo));
  }
  for (TableSpec spec : c.tables) {
    if (!spec.shard.has_value()) {
      spec.shard = c.shard;
    }
    for (const OpenedTable& t : tables) {
      if (t.source->name() == spec.name) {
        return absl::InvalidArgumentError(absl::StrCat("table '", spec.name, "' given twice"));
      }
    }
    OpenedTable table;
    table.gpu_budget_bytes = spec.gpu_budget_bytes;
    table.placement = spec.placement;
    table.devices_option = spec.devices;
    table.hot_ids_path = spec.hot_ids_path;
    if (IsDirectory(spec.path)) {
      // A version directory: what an earlier run's save left half-written goes first (a save
      // of another server sharing the directory holds its own locked, and it stays).
      if (absl::StatusOr<StaleTemporaries> stale = RemoveStaleTemporaries(spec.path); stale.ok()) {
        for (const std::string& path : stale->removed) {
          LogInfo("table '", spec.name, "': removed ", path,
                  ", the temporary directory of a save that did not finish");
        }
        for (const std::string& line : stale->kept) {
          LogInfo("table '", spec.name, "': left ", line);
        }
      }
      // Then the newest version that opens; each newer one refused is logged.
      std::vector<std::string> skipped;
      absl::StatusOr<std::unique_ptr<TableSource>> source = OpenNewestVersion(spec, &skipped);
      for (const std::string& line : skipped) {
        LogError(line);
      }
      RETURN_IF_ERROR(source.status());
      table.source = *std::move(source);
    } else {
      absl::StatusOr<std::unique_ptr<TableSource>> source = TableSource::Open(spec);
      if (!source.ok()) {
        return WithOptionHint(source.status(), spec.path);
      }
      table.source = *std::move(source);
    }
    if (!spec.hot_ids_path.empty()) {
      absl::StatusOr<std::vector<int64_t>> ids =
          ReadHotIds(spec.hot_ids_path, table.source->ids().whole());
      if (!ids.ok()) {
        // The message starts with the file's path.
        return absl::Status(
            ids.status().code(),
            absl::StrCat("table '", spec.name, "': hot_ids=", ids.status().message()));
      }
      table.hot_ids = *std::move(ids);
    }
    tables.push_back(std::move(table));
  }
  if (!c.default_table.empty()) {
    auto it = std::find_if(tables.begin(), tables.end(),
                           [&](const auto& t) { return t.source->name() == c.default_table; });
    if (it == tables.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--default_table=", c.default_table, " names no --table",
                       c.tables.empty() ? " (without --table the only table is 'demo')" : ""));
    }
    std::rotate(tables.begin(), it, it + 1);  // the default table first, the rest in flag order
  }
  return tables;
}

absl::Status EmbeddingServer::LoadTables(const ServerConfig& config,
                                         const std::vector<Device>& all_devices,
                                         std::vector<OpenedTable>& tables) {
  StoreOptions options = config.store;
  options.max_batch_ids = config.batcher.max_batch_ids;
  // Each device's stores report its loss to its own DeviceLossMetrics.
  auto on_device_lost = [this, report = config.store.on_device_lost](const Device& device) {
    DeviceLossMetrics* loss = nullptr;
    for (size_t i = 0; i < device_losses_.size(); ++i) {
      if (device_losses_[i]->device() == device.name()) {
        loss = device_losses_[i].get();
      }
    }
    return [this, report, loss](const std::string& why) {
      SetNotServing();  // before the report, which ends the process
      // Until the process ends, once a scrape has recorded the loss (WaitUntilScraped), new
      // calls get UNAVAILABLE, which clients retry elsewhere as they would once the process is
      // gone.
      service_->RefuseCalls();
      loss->SetLost(why);
      loss->WaitUntilScraped();
      report(why);
    };
  };
  // Answers in pinned memory that every GPU of the process sees (portable), or ordinary memory
  // where no table is on a GPU.
  const auto first_gpu =
      std::find_if(all_devices.begin(), all_devices.end(), [](const Device& d) { return d.cuda; });
  const bool any_cuda = first_gpu != all_devices.end();
  answer_pool_ = std::make_unique<AnswerBufferPool>(
      config.answer_pool_bytes, CreateAnswerMemory(any_cuda ? *first_gpu : all_devices.front()));
  BatcherOptions batcher_options = config.batcher;
  batcher_options.answer_pool = answer_pool_.get();
  if (!any_cuda && (config.gpu_memory_budget_bytes > 0 || !config.store.host_tier)) {
    LogInfo("--gpu_memory_budget and --host_tier have no effect on ", DeviceNames(all_devices),
            ": the CPU store serves every table from host memory");
  }
  // What --gpu_memory_budget leaves on each device for the tables not placed yet, and what the
  // others took.
  std::vector<std::pair<std::string, size_t>> device_left;
  device_left.reserve(all_devices.size());
  for (const Device& d : all_devices) {
    device_left.emplace_back(d.name(), config.gpu_memory_budget_bytes);
  }
  auto left_on = [&](const Device& d) -> size_t& {
    return std::find_if(device_left.begin(), device_left.end(),
                        [&](const auto& e) { return e.first == d.name(); })
        ->second;
  };
  std::vector<std::string> placed;
  for (OpenedTable& t : tables) {
    const TableSource& source = *t.source;
    const std::vector<Device>& devices = t.devices;
    const bool on_gpu =
        std::any_of(devices.begin(), devices.end(), [](const Device& d) { return d.cuda; });
    ASSIGN_OR_RETURN(
        const Placement placement,
        t.placement.empty()
            ? ParsePlacement(config.placement, "--placement")
            : ParsePlacement(t.placement, absl::StrCat("table '", source.name(), "': placement")));
    // One device's store of `part` (the table, or its slice of the rows).
    auto load_on = [&](const TableSource& part,
                       const Device& device) -> absl::StatusOr<std::unique_ptr<EmbeddingStore>> {
      StoreOptions part_options = options;
      part_options.on_device_lost = on_device_lost(device);
      size_t& left = left_on(device);
      if (device.cuda) {
        part_options.gpu_budget_bytes = t.gpu_budget_bytes;
        if (config.gpu_memory_budget_bytes > 0) {
          // With nothing left, a budget of one byte: the table goes to the host tier, where the
          // store refuses it naming the GPU memory it would still need.
          const size_t budget = std::max<size_t>(left, 1);
          part_options.gpu_budget_bytes =
              t.gpu_budget_bytes > 0 ? std::min(t.gpu_budget_bytes, budget) : budget;
        }
        part_options.hot_ids = part.ids().LocalRowsOf(t.hot_ids);
      } else if (t.gpu_budget_bytes > 0 || !t.hot_ids_path.empty()) {
        LogInfo("table '", source.name(), "': gpu_budget= and hot_ids= are checked but have no ",
                "effect on ", device.name(), ": the CPU store serves the table from host memory");
      }
      absl::StatusOr<std::unique_ptr<EmbeddingStore>> created =
          CreateStore(part, device, part_options);
      if (!created.ok()) {
        if (device.cuda && config.gpu_memory_budget_bytes > 0 &&
            created.status().code() == absl::StatusCode::kResourceExhausted) {
          return absl::ResourceExhaustedError(absl::StrCat(
              created.status().message(), " (--gpu_memory_budget=", config.gpu_memory_budget_bytes,
              " left it ", left, " bytes on ", device.name(),
              placed.empty() ? "" : absl::StrCat(" after ", absl::StrJoin(placed, ", ")), ")"));
        }
        return created.status();
      }
      left -= std::min(left, (*created)->info().device_bytes);
      placed.push_back(absl::StrCat("'", source.name(), "' took ", (*created)->info().device_bytes,
                                    " on ", device.name()));
      return created;
    };
    const absl::Time start = options.clock->Now();
    std::unique_ptr<EmbeddingStore> store;
    MultiDeviceStore* multi = nullptr;
    if (devices.size() == 1) {
      ASSIGN_OR_RETURN(store, load_on(source, devices.front()));
    } else {
      std::vector<std::string> names;
      names.reserve(devices.size());
      for (const Device& d : devices) {
        names.push_back(d.name());
      }
      StoreOptions assembly_options = options;
      assembly_options.on_device_lost = on_device_lost(devices.front());
      ASSIGN_OR_RETURN(
          std::unique_ptr<MultiDeviceStore> m,
          MultiDeviceStore::Create(
              source, placement, names,
              [&](const TableSource& part, int k) { return load_on(part, devices[k]); },
              RowAssemblyOn(devices, assembly_options)));
      // A row split's assembly (staging rows and batch buffers on the first device) takes from
      // that device's budget as the parts do.
      if (const size_t assembly = m->assembly_bytes(); assembly > 0) {
        size_t& left = left_on(devices.front());
        if (config.gpu_memory_budget_bytes > 0 && assembly > left) {
          return absl::ResourceExhaustedError(
              absl::StrCat("table '", source.name(), "': the row split's assembly needs ", assembly,
                           " bytes on ", devices.front().name(),
                           " but --gpu_memory_budget=", config.gpu_memory_budget_bytes, " left it ",
                           left, " after ", absl::StrJoin(placed, ", ")));
        }
        left -= std::min(left, assembly);
        placed.push_back(absl::StrCat("'", source.name(), "' (its assembly) took ", assembly,
                                      " on ", devices.front().name()));
      }
      multi = m.get();
      store = std::move(m);
    }
    const double seconds = SecondsSince(options.clock, start);
    const TableInfo& table = store->info();
    std::string where = "in host memory";
    if (!table.parts.empty()) {
      where = absl::StrCat(PlacementName(table.placement), " over ", table.parts.size(),
                           " devices (", table.device_bytes, " bytes of GPU memory in all)");
    } else if (on_gpu && table.host_tier) {
      where = absl::StrCat("in pinned host memory with a GPU cache of ", table.cache_rows,
                           " rows (", table.device_bytes, " bytes of GPU memory)");
    } else if (on_gpu) {
      where = absl::StrCat("on the device (", table.device_bytes, " bytes of GPU memory)");
    }
    LogInfo(absl::StrFormat(
        "table '%s' loaded: %d rows x %d dims%s, %s%s, %d bytes, %.3f s, %.2f GB/s, device %s, "
        "%s, from %s%s",
        source.name(), source.rows(), source.dim(),
        source.shard().has_value()
            ? absl::StrFormat(" (shard %d/%d: rows %d..%d of %d)", source.shard()->index,
                              source.shard()->count, source.ids().first(), source.ids().last(),
                              source.ids().whole())
            : "",
        DataTypeName(source.dtype()),
        source.stored_dtype() != source.dtype()
            ? absl::StrCat(" (quantized from ", DataTypeName(source.stored_dtype()), ")")
            : "",
        source.bytes(), seconds,
        seconds > 0 ? static_cast<double>(source.bytes()) / seconds / 1e9 : 0.0, table.device,
        where, source.origin(),
        source.version() > 0
            ? absl::StrFormat(" (version %d, sequence %d)", source.version(), source.sequence())
            : ""));
    for (size_t k = 0; k < table.parts.size(); ++k) {
      const DevicePart& part = table.parts[k];
      LogInfo(absl::StrFormat("table '%s' part %d on %s: rows %d..%d, %s, %d bytes of GPU memory",
                              table.name, k, part.device, part.ids.first(), part.ids.last(),
                              part.host_tier         ? "in pinned host memory with a GPU cache"
                              : part.device == "cpu" ? "in host memory"
                                                     : "on the device",
                              part.device_bytes));
    }
    if (on_gpu && !table.host_tier && !t.hot_ids_path.empty()) {
      LogInfo("table '", table.name, "': hot_ids=", t.hot_ids_path,
              " has no effect: every row is on the device");
    }
    if (multi != nullptr) {
      std::vector<PartMetrics> parts;
      for (size_t k = 0; k < table.parts.size(); ++k) {
        parts.push_back(metrics_->AddTablePart(table.name, table.parts[k].device,
                                               static_cast<int>(k), table.parts[k].device_bytes));
      }
      multi->set_part_observer([parts](int k, const StageTimes& times, size_t ids) {
        parts[k].gather_seconds->Observe(times.gather);
        parts[k].ids->Increment(static_cast<double>(ids));
      });
    }
    AddCacheMetrics(*store, *scrape_metrics_);
    TableMetrics tm =
        metrics_->AddTable(table.name, DataTypeName(table.dtype), table.device, table.rows,
                           table.dim, static_cast<int64_t>(table.bytes()));
    tm.queue_limit_ids->Set(static_cast<double>(config.batcher.max_queue_ids));
    tm.device_bytes->Set(static_cast<double>(table.device_bytes));
    ServedTable served;
    tm.update_sequence->Set(static_cast<double>(source.sequence()));
    if (source.version() > 0) {
      served.versions = std::make_unique<TableVersions>();
      served.versions->dir = source.versions_dir();
      served.versions->tensor = source.tensor().empty() ? source.name() : source.tensor();
      served.versions->open_tensor = source.tensor();
      if (IsQuantized(source.dtype())) {
        served.versions->quantize = source.dtype();  // every version is served quantized
      }
      served.versions->version.store(source.version());
      tm.version->Set(static_cast<double>(source.version()));
    }
    served.batcher = std::make_unique<Batcher>(store.get(), batcher_options, tm, options.clock);
    WriterOptions writer_options;
    writer_options.initial_sequence = source.sequence();
    served.writer = std::make_unique<TableWriter>(store.get(), served.batcher.get(), tm,
                                                  writer_options, options.clock);
    served.store = std::move(store);
    served.metrics = tm;
    tables_.push_back(std::move(served));
  }
  return absl::OkStatus();
}

}  // namespace emb::service
