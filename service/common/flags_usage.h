// The Abseil flags set-up of the service's binaries: --help lists the binary's own flags (those
// defined in its main file), not the libraries' (gRPC's, Abseil's).
#ifndef EMB_SERVICE_COMMON_FLAGS_USAGE_H_
#define EMB_SERVICE_COMMON_FLAGS_USAGE_H_

#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace emb::service {

// Sets the usage message, limits --help and --helpshort to the flags of `main_file` (the path's
// end, e.g. "service/main.cc"), then parses the command line: ParseCommandLine's result.
inline std::vector<char*> ParseFlags(int argc, char** argv, absl::string_view usage,
                                     absl::string_view main_file) {
  absl::SetProgramUsageMessage(usage);
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [file = std::string(main_file)](absl::string_view path) {
    return absl::EndsWith(path, file);
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
  return absl::ParseCommandLine(argc, argv);
}

}  // namespace emb::service

#endif  // EMB_SERVICE_COMMON_FLAGS_USAGE_H_
