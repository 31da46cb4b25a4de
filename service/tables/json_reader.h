// A minimal JSON reader, enough for a safetensors header: objects, arrays, strings (with escapes),
// numbers kept as their text (so int64 values stay exact), true, false and null.
#ifndef EMB_SERVICE_TABLES_JSON_READER_H_
#define EMB_SERVICE_TABLES_JSON_READER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace emb::service {

struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  std::string str;  // kString; kNumber keeps its text so int64 values stay exact
  std::vector<Json> items;
  std::map<std::string, Json> fields;
};

// The value `text` holds, with nothing but whitespace after it; nullopt when it is not JSON.
std::optional<Json> ParseJson(absl::string_view text);

// A number that is an int64, into *out; false for anything else.
bool JsonInt(const Json& j, int64_t* out);

}  // namespace emb::service

#endif  // EMB_SERVICE_TABLES_JSON_READER_H_
