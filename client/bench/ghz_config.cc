#include "client/bench/ghz_config.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace emb::client {
namespace {

using google::protobuf::Value;

// Keys that change only how ghz finds the method or labels and writes its report.
const std::set<std::string>& IgnoredKeys() {
  static const auto* keys = new std::set<std::string>{"name",          "tags",
                                                      "format",        "output",
                                                      "proto",         "protoset",
                                                      "import-paths",  "connect-timeout",
                                                      "keepalive",     "cpus",
                                                      "debug",         "reflect-metadata",
                                                      "metadata",      "max-send-message-size",
                                                      "count-errors",  "lb-strategy",
                                                      "duration-stop", "enable-compression"};
  return *keys;
}

absl::Status KeyError(absl::string_view key, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("ghz config key \"", key, "\": ", what));
}

absl::StatusOr<std::string> GetString(absl::string_view key, const Value& v) {
  if (v.kind_case() != Value::kStringValue) {
    return KeyError(key, "must be a string");
  }
  return v.string_value();
}

absl::StatusOr<int64_t> GetCount(absl::string_view key, const Value& v, int64_t min, int64_t max) {
  if (v.kind_case() != Value::kNumberValue || v.number_value() != std::floor(v.number_value()) ||
      v.number_value() < static_cast<double>(min) || v.number_value() > static_cast<double>(max)) {
    return KeyError(key, absl::StrCat("must be an integer in [", min, ", ", max, "]"));
  }
  return static_cast<int64_t>(v.number_value());
}

absl::StatusOr<absl::Duration> GetDuration(absl::string_view key, const Value& v) {
  absl::Duration d;
  if (v.kind_case() != Value::kStringValue || !absl::ParseDuration(v.string_value(), &d) ||
      d < absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return KeyError(key, "must be a Go duration string such as \"30s\" or \"1m30s\"");
  }
  return d;
}

absl::StatusOr<std::string> ToJson(const Value& v) {
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(v, &out).ok()) {
    return absl::InternalError("cannot print call data as JSON");
  }
  return out;
}

absl::Status SetKey(const std::string& key, const Value& v, GhzConfig* c) {
  if (key == "call") {
    absl::StatusOr<std::string> s = GetString(key, v);
    if (!s.ok()) {
      return s.status();
    }
    std::string call = *s;
    // ghz takes 'package.Service/Method' or 'package.Service.Method'.
    if (call == "embedding.v1.EmbeddingService.LookUp") {
      call = std::string(kLookUpCall);
    }
    if (call != kLookUpCall) {
      return KeyError(key, absl::StrCat("bench makes only ", kLookUpCall, " calls, not ", *s));
    }
    c->call = call;
  } else if (key == "host" || key == "cacert" || key == "cert" || key == "key" || key == "cname") {
    absl::StatusOr<std::string> s = GetString(key, v);
    if (!s.ok()) {
      return s.status();
    }
    *(key == "host"     ? &c->host
      : key == "cacert" ? &c->cacert
      : key == "cert"   ? &c->cert
      : key == "key"    ? &c->key
                        : &c->cname) = *s;
  } else if (key == "insecure" || key == "skipTLS" || key == "async") {
    if (v.kind_case() != Value::kBoolValue) {
      return KeyError(key, "must be true or false");
    }
    if (key == "insecure") {
      c->insecure = v.bool_value();
    } else if (v.bool_value()) {
      return KeyError(key, "true is not supported by embedding-client bench");
    }
  } else if (key == "total" || key == "concurrency" || key == "connections" || key == "rps") {
    absl::StatusOr<int64_t> n =
        GetCount(key, v, key == "rps" ? 0 : 1, key == "total" ? int64_t{1} << 53 : 1 << 20);
    if (!n.ok()) {
      return n.status();
    }
    if (key == "total") {
      c->total = *n;
    } else if (key == "concurrency") {
      c->concurrency = static_cast<int>(*n);
    } else if (key == "connections") {
      c->connections = static_cast<int>(*n);
    } else {
      c->rps = static_cast<double>(*n);
    }
  } else if (key == "duration" || key == "timeout") {
    absl::StatusOr<absl::Duration> d = GetDuration(key, v);
    if (!d.ok()) {
      return d.status();
    }
    *(key == "duration" ? &c->duration : &c->timeout) = *d;
  } else if (key == "max-recv-message-size") {
    absl::StatusOr<int64_t> n =
        v.kind_case() == Value::kNumberValue
            ? GetCount(key, v, 1, (int64_t{1} << 31) - 1)
            : (v.kind_case() == Value::kStringValue ? ParseByteSize(v.string_value())
                                                    : KeyError(key, "must be a size"));
    if (!n.ok()) {
      return n.status();
    }
    c->max_recv_message_bytes = *n;
  } else if (key == "load-schedule" || key == "concurrency-schedule") {
    if (v.kind_case() != Value::kStringValue || v.string_value() != "const") {
      return KeyError(key, "only \"const\" is supported by embedding-client bench");
    }
  } else if (key == "data") {
    c->data.clear();
    if (v.kind_case() == Value::kStructValue) {
      absl::StatusOr<std::string> json = ToJson(v);
      if (!json.ok()) {
        return json.status();
      }
      c->data.push_back(*std::move(json));
    } else if (v.kind_case() == Value::kListValue && v.list_value().values_size() > 0) {
      for (const Value& m : v.list_value().values()) {
        if (m.kind_case() != Value::kStructValue) {
          return KeyError(key, "an array of data must hold only objects");
        }
        absl::StatusOr<std::string> json = ToJson(m);
        if (!json.ok()) {
          return json.status();
        }
        c->data.push_back(*std::move(json));
      }
    } else {
      return KeyError(key, "must be an object or a non-empty array of objects");
    }
  } else if (IgnoredKeys().count(key) == 0) {
    return KeyError(key, "unknown, or not supported by embedding-client bench");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  if (in) {
    text << in.rdbuf();
  }
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path));
  }
  return text.str();
}

}  // namespace

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  size_t unit_at = 0;
  while (unit_at < t.size() &&
         (absl::ascii_isdigit(static_cast<unsigned char>(t[unit_at])) || t[unit_at] == '.')) {
    ++unit_at;
  }
  double number;
  const std::string unit = absl::AsciiStrToLower(absl::StripAsciiWhitespace(t.substr(unit_at)));
  if (!absl::SimpleAtod(t.substr(0, unit_at), &number)) {
    return absl::InvalidArgumentError(absl::StrCat("not a byte size: \"", text, "\""));
  }
  double scale;
  if (unit.empty() || unit == "b") {
    scale = 1;
  } else if (unit == "k" || unit == "kb") {
    scale = 1e3;
  } else if (unit == "m" || unit == "mb") {
    scale = 1e6;
  } else if (unit == "g" || unit == "gb") {
    scale = 1e9;
  } else if (unit == "ki" || unit == "kib") {
    scale = 1024.0;
  } else if (unit == "mi" || unit == "mib") {
    scale = 1024.0 * 1024;
  } else if (unit == "gi" || unit == "gib") {
    scale = 1024.0 * 1024 * 1024;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown size unit in \"", text, "\""));
  }
  const double bytes = number * scale;
  if (!(bytes >= 1) || bytes > 9e18) {
    return absl::InvalidArgumentError(absl::StrCat("byte size out of range: \"", text, "\""));
  }
  return static_cast<int64_t>(bytes);
}

absl::StatusOr<GhzConfig> ParseGhzConfig(absl::string_view json) {
  google::protobuf::Struct root;
  if (auto s = google::protobuf::util::JsonStringToMessage(std::string(json), &root); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ghz config is not a JSON object: ", s.ToString()));
  }
  GhzConfig config;
  for (const auto& [key, value] : root.fields()) {
    if (absl::Status s = SetKey(key, value, &config); !s.ok()) {
      return s;
    }
  }
  if (config.call.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ghz config has no \"call\" (\"", kLookUpCall, "\")"));
  }
  if (config.data.empty()) {
    return absl::InvalidArgumentError("ghz config has no \"data\"");
  }
  return config;
}

absl::StatusOr<GhzConfig> ReadGhzConfig(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return text.status();
  }
  absl::StatusOr<GhzConfig> config = ParseGhzConfig(*text);
  if (!config.ok()) {
    return absl::Status(config.status().code(),
                        absl::StrCat(path, ": ", config.status().message()));
  }
  return config;
}

absl::Status ApplyGhzConfig(const GhzConfig& file, const std::set<std::string>& flags_given,
                            BenchConfig* config) {
  auto given = [&](const char* flag) { return flags_given.count(flag) > 0; };
  std::vector<std::string> conflicts;
  for (const char* flag : {"ids_per_request", "id_distribution", "zipf_exponent"}) {
    if (given(flag)) {
      conflicts.push_back(absl::StrCat("--", flag));
    }
  }
  if (!conflicts.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(absl::StrJoin(conflicts, ", "),
                     ": with --config the ids come from the config's call data"));
  }
  if (!given("target") && !file.host.empty()) {
    config->target = file.host;
  }
  if (!given("concurrency")) {
    config->concurrency = file.concurrency;
  }
  if (!given("connections")) {
    config->connections = file.connections;
  }
  if (!given("rps")) {
    config->rps = file.rps;
  }
  if (!given("max_inflight")) {
    config->max_inflight = config->concurrency;  // ghz: each worker makes one call at a time
  }
  if (!given("requests") && !given("duration")) {
    if (file.duration > absl::ZeroDuration()) {
      config->requests = 0;
      config->duration = file.duration;
    } else {
      config->requests = file.total;
    }
  }
  if (!given("timeout")) {
    config->timeout = file.timeout;
  }
  if (!given("warmup")) {
    config->warmup = absl::ZeroDuration();
  }
  if (!given("max_recv_message_size")) {
    config->max_recv_message_bytes = file.max_recv_message_bytes;
  }
  const bool tls_flags = given("tls") || given("tls_ca") || given("tls_cert") || given("tls_key") ||
                         given("tls_server_name");
  if (!tls_flags) {
    if (file.insecure) {
      config->tls.reset();
    } else {
      TlsOptions tls;
      tls.server_name = file.cname;
      for (auto [path, out] : {std::make_pair(&file.cacert, &tls.root_certs),
                               std::make_pair(&file.cert, &tls.cert_chain),
                               std::make_pair(&file.key, &tls.private_key)}) {
        if (path->empty()) {
          continue;
        }
        absl::StatusOr<std::string> pem = ReadFile(*path);
        if (!pem.ok()) {
          return absl::InvalidArgumentError(pem.status().message());
        }
        *out = *std::move(pem);
      }
      config->tls = std::move(tls);
    }
  }
  config->call_data = file.data;
  return absl::OkStatus();
}

}  // namespace emb::client
