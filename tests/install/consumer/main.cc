// A user's program against the installed emb::client: lists the tables, looks up the ids given as
// [2, n/2], checks the answer's shape and that a second call returns the same bytes, checks that an
// id past the table is OUT_OF_RANGE, and writes the float32 rows to OUT for the caller to compare.
//   consumer TARGET OUT ID...   (an even number of ids)
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/embedding_client.h"
#include "kernels/data_type.h"
#include "proto/convert/data_type_proto.h"

namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "consumer: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5 || (argc - 3) % 2 != 0) {
    return Fail("usage: consumer TARGET OUT ID... (an even number of ids)");
  }
  std::vector<int64_t> ids;
  for (int i = 3; i < argc; ++i) {
    ids.push_back(std::stoll(argv[i]));
  }
  const std::vector<int64_t> shape = {2, static_cast<int64_t>(ids.size()) / 2};
  const absl::Duration timeout = absl::Seconds(10);
  auto client = emb::client::EmbeddingClient::Connect(argv[1]);

  auto tables = client->ListTables(timeout);
  if (!tables.ok() || tables->empty()) {
    return Fail("ListTables: " + tables.status().ToString());
  }
  const emb::client::TableInfo& table = tables->front();
  std::printf("table %s: %lld x %lld %s\n", table.name.c_str(), static_cast<long long>(table.rows),
              static_cast<long long>(table.dim), emb::DataTypeName(table.dtype));

  auto first = client->LookUp("", ids, shape, emb::DataType::kFloat32, timeout);
  auto second = client->LookUp("", ids, shape, emb::DataType::kFloat32, timeout);
  if (!first.ok() || !second.ok()) {
    return Fail("LookUp: " + first.status().ToString() + " / " + second.status().ToString());
  }
  if (first->shape != std::vector<int64_t>{shape[0], shape[1], table.dim}) {
    return Fail("the answer's shape is not [2, n/2, dim]");
  }
  if (first->dtype != emb::DataType::kFloat32 ||
      emb::ToProto(first->dtype) != embedding::v1::DATA_TYPE_FLOAT32) {
    return Fail("the answer is not float32");
  }
  if (first->data.size() != ids.size() * table.dim * emb::ElementSize(first->dtype)) {
    return Fail("the answer's byte count does not match its shape");
  }
  if (first->data != second->data) {
    return Fail("two calls with the same ids gave different bytes");
  }

  const std::vector<int64_t> past_end = {table.rows};
  auto out_of_range = client->LookUp("", past_end, {}, std::nullopt, timeout);
  if (out_of_range.status().code() != absl::StatusCode::kOutOfRange) {
    return Fail("id " + std::to_string(table.rows) + " gave: " + out_of_range.status().ToString());
  }

  std::ofstream out(argv[2], std::ios::binary);
  out.write(first->data.data(), static_cast<std::streamsize>(first->data.size()));
  if (!out.flush()) {
    return Fail(std::string("cannot write ") + argv[2]);
  }
  std::printf(
      "consumer: %zu rows of %lld floats, the same on a second call; id %lld OUT_OF_RANGE\n",
      ids.size(), static_cast<long long>(table.dim), static_cast<long long>(table.rows));
  return 0;
}
