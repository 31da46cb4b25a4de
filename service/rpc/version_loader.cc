#include "service/rpc/version_loader.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/rpc/grpc_status.h"
#include "service/tables/table_versions.h"

namespace emb::service {
namespace {

// The load itself, with the table's busy flag held.
absl::StatusOr<LoadedVersion> Load(ServedTable& table, int64_t version, bool pin, Clock* clock) {
  TableVersions& versions = *table.versions;
  const TableInfo& info = table.store->info();
  const TableSpec spec{info.name, versions.dir, versions.open_tensor, versions.quantize};
  if (version == 0) {
    ASSIGN_OR_RETURN(const std::vector<int64_t> all, ListVersions(versions.dir));
    if (all.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("table '", info.name, "': ", versions.dir, " holds no version"));
    }
    version = all.front();
  }
  const int64_t served = versions.version.load(std::memory_order_acquire);
  if (version == served) {
    versions.pinned.store(pin, std::memory_order_release);
    return LoadedVersion{served, table.writer->last_sequence(), false};
  }
  const absl::Time start = clock->Now();
  absl::StatusOr<std::unique_ptr<TableSource>> source = OpenVersion(spec, version);
  if (!source.ok()) {
    return absl::FailedPreconditionError(source.status().message());
  }
  LogInfo("table '", info.name, "': loading version ", version, " beside version ", served,
          ", which serves meanwhile");
  ASSIGN_OR_RETURN(std::unique_ptr<PreparedTable> prepared, table.store->PrepareTable(**source));
  RETURN_IF_ERROR(table.writer->SwapVersion(std::move(prepared), (*source)->sequence()));
  versions.version.store(version, std::memory_order_release);
  versions.pinned.store(pin, std::memory_order_release);
  table.metrics.version->Set(static_cast<double>(version));
  LogInfo(absl::StrFormat(
      "table '%s' serves version %d (sequence %d%s) in place of version %d, loaded in %.3f s",
      info.name, version, (*source)->sequence(), pin ? ", pinned" : "", served,
      SecondsSince(clock, start)));
  return LoadedVersion{version, (*source)->sequence(), true};
}

}  // namespace

absl::StatusOr<LoadedVersion> LoadTableVersion(ServedTable& table, int64_t version, bool pin,
                                               Clock* clock) {
  const std::string& name = table.store->info().name;
  if (table.versions == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "table '", EchoText(name),
        "' was not loaded from a version directory, so it has no versions: serve it as "
        "--table=NAME=DIR with the file in DIR/1/"));
  }
  if (table.versions->busy.exchange(true)) {
    return absl::AbortedError(absl::StrCat("a save or version load of table '", EchoText(name),
                                           "' is already running; retry when it ends"));
  }
  absl::StatusOr<LoadedVersion> loaded = Load(table, version, pin, clock);
  table.versions->busy.store(false);
  if (!loaded.ok()) {
    table.metrics.version_loads_refused->Increment();
    LogError("table '", name, "': version ", version == 0 ? "(newest)" : absl::StrCat(version),
             " not loaded, version ", table.versions->version.load(),
             " serves on: ", loaded.status().message());
  } else if (loaded->changed) {
    table.metrics.version_loads_ok->Increment();
  }
  return loaded;
}

}  // namespace emb::service
