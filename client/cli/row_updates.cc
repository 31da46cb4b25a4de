#include "client/cli/row_updates.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "client/admin_client.h"
#include "client/cli/common.h"
#include "client/cli/flags.h"
#include "client/embedding_client.h"
#include "client/npy_file.h"
#include "kernels/data_type.h"

namespace emb::client::cli {

absl::StatusOr<std::vector<int64_t>> ReadIdsNpy(const std::string& path, absl::string_view name) {
  absl::StatusOr<NpyArray> array = ReadNpy(path);
  if (!array.ok()) {
    return array.status();
  }
  if (array->shape.size() != 1 || (array->descr != "<i8" && array->descr != "<i4")) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be a 1-D array of int64 (or int32), not '", array->descr,
                     "' of shape (", absl::StrJoin(array->shape, ", "), ")"));
  }
  std::vector<int64_t> ids(array->shape[0]);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (array->descr == "<i8") {
      std::memcpy(&ids[i], array->data.data() + 8 * i, 8);
    } else {
      int32_t v;
      std::memcpy(&v, array->data.data() + 4 * i, 4);
      ids[i] = v;
    }
  }
  return ids;
}

absl::StatusOr<RowsToSend> ReadRowsNpy(const std::string& path, absl::string_view name,
                                       size_t num_ids) {
  absl::StatusOr<NpyArray> array = ReadNpy(path);
  if (!array.ok()) {
    return array.status();
  }
  const std::string send_name = absl::GetFlag(FLAGS_rows_dtype);
  std::optional<DataType> send;
  if (DataType t; !send_name.empty()) {
    if (!ParseDataType(send_name.c_str(), &t) || !IsValueType(t)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rows_dtype must be float32, float16 or bfloat16, got \"", send_name, "\""));
    }
    send = t;
  }
  DataType file_type;
  if (array->descr == "<f4") {
    file_type = DataType::kFloat32;
  } else if (array->descr == "<f2") {
    file_type = DataType::kFloat16;
  } else if (send == DataType::kBFloat16 && (array->descr == "<u2" || array->descr == "<i2" ||
                                             array->descr == "|V2" || array->descr == "<V2")) {
    file_type = DataType::kBFloat16;  // the bits of bfloat16 values
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " holds '", array->descr,
        "'; rows must be float32 (<f4) or float16 (<f2), or 2-byte bfloat16 bits (uint16 or "
        "ml_dtypes' bfloat16) with --rows_dtype=bfloat16"));
  }
  if (array->shape.size() != 2 || array->shape[0] != static_cast<int64_t>(num_ids)) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be 2-D with one row per id (",
                                                   num_ids, " ids), not of shape (",
                                                   absl::StrJoin(array->shape, ", "), ")"));
  }
  RowsToSend rows;
  rows.dim = array->shape[1];
  rows.dtype = send.value_or(file_type);
  if (rows.dtype == file_type) {
    rows.bytes = std::move(array->data);
    return rows;
  }
  std::vector<float> values(array->data.size() / ElementSize(file_type));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = LoadAsFloat(array->data.data(), file_type, static_cast<int64_t>(i));
  }
  rows.bytes = EncodeRows(values, rows.dtype);
  return rows;
}

absl::StatusOr<TableInfo> TableOnTarget(const std::string& table,
                                        const std::optional<TlsOptions>& tls,
                                        absl::string_view why) {
  absl::StatusOr<std::vector<TableInfo>> tables =
      EmbeddingClient::Connect(LookUpTarget(), tls)->ListTables(absl::GetFlag(FLAGS_timeout).value);
  if (!tables.ok()) {
    return absl::Status(tables.status().code(), absl::StrCat(why, tables.status().message()));
  }
  std::vector<std::string> names;
  for (const TableInfo& t : *tables) {
    if (table.empty() ? t.is_default : t.name == table) {
      return t;
    }
    names.push_back(t.name);
  }
  return absl::NotFoundError(
      absl::StrCat("--target has no table \"", table, "\"; it has: ", absl::StrJoin(names, ", ")));
}

absl::Status WithSequenceSource(const absl::Status& status,
                                const std::optional<SequenceSource>& source,
                                const std::set<std::string>& flags_given) {
  if (status.code() != absl::StatusCode::kFailedPrecondition || !source.has_value()) {
    return status;
  }
  return absl::Status(
      status.code(),
      absl::StrCat(status.message(), "; the first sequence sent, ", source->sequence + 1,
                   ", was one more than table ", source->table, "'s sequence ", source->sequence,
                   " as ListTables on --target=", LookUpTarget(),
                   flags_given.count("target") == 0 ? " (its default)" : "",
                   " reports it: if that is not the lookup address of the server of "
                   "--admin_target=",
                   AdminTarget(), ", give its lookup address as --target, or give --sequence"));
}

}  // namespace emb::client::cli
