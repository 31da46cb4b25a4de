#include "service/tables/json_reader.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

namespace emb::service {
namespace {

class JsonParser {
 public:
  explicit JsonParser(absl::string_view text) : s_(text) {}

  bool Parse(Json* out) {
    if (!Value(out, 0)) {
      return false;
    }
    SkipSpace();
    return pos_ == s_.size();
  }

 private:
  void SkipSpace() {
    while (pos_ < s_.size() && absl::ascii_isspace(static_cast<unsigned char>(s_[pos_]))) {
      ++pos_;
    }
  }
  bool Eat(char c) {
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool String(std::string* out) {
    if (!Eat('"')) {
      return false;
    }
    while (pos_ < s_.size() && s_[pos_] != '"') {
      if (s_[pos_] == '\\') {  // keep escapes verbatim: names with escapes are not ours to read
        out->push_back(s_[pos_++]);
        if (pos_ >= s_.size()) {
          return false;
        }
      }
      out->push_back(s_[pos_++]);
    }
    return pos_++ < s_.size();
  }
  bool Value(Json* out, int depth) {
    if (depth > 16) {
      return false;
    }
    SkipSpace();
    if (pos_ >= s_.size()) {
      return false;
    }
    const char c = s_[pos_];
    if (c == '"') {
      out->kind = Json::kString;
      return String(&out->str);
    }
    if (c == '{') {
      out->kind = Json::kObject;
      ++pos_;
      if (Eat('}')) {
        return true;
      }
      do {
        std::string key;
        if (!String(&key) || !Eat(':') || !Value(&out->fields[key], depth + 1)) {
          return false;
        }
      } while (Eat(','));
      return Eat('}');
    }
    if (c == '[') {
      out->kind = Json::kArray;
      ++pos_;
      if (Eat(']')) {
        return true;
      }
      do {
        out->items.emplace_back();
        if (!Value(&out->items.back(), depth + 1)) {
          return false;
        }
      } while (Eat(','));
      return Eat(']');
    }
    for (absl::string_view word : {"true", "false", "null"}) {
      if (s_.substr(pos_, word.size()) == word) {
        out->kind = word == "null" ? Json::kNull : Json::kBool;
        out->str = std::string(word);
        pos_ += word.size();
        return true;
      }
    }
    const size_t start = pos_;
    while (pos_ < s_.size() && (absl::ascii_isdigit(static_cast<unsigned char>(s_[pos_])) ||
                                std::strchr("+-.eE", s_[pos_]) != nullptr)) {
      ++pos_;
    }
    out->kind = Json::kNumber;
    out->str = std::string(s_.substr(start, pos_ - start));
    return pos_ > start;
  }

  absl::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

std::optional<Json> ParseJson(absl::string_view text) {
  Json value;
  if (!JsonParser(text).Parse(&value)) {
    return std::nullopt;
  }
  return value;
}

bool JsonInt(const Json& j, int64_t* out) {
  return j.kind == Json::kNumber && absl::SimpleAtoi(j.str, out);
}

}  // namespace emb::service
