// The server's flag files (--flagfile), read as Abseil reads them but with bounds: a hostile or
// mistaken flag file is refused with a line naming it instead of hanging or filling memory. And
// the values of a flag given several times (--table), which Abseil keeps only the last of.
// Thread-compatible functions; no state.
#ifndef EMB_SERVICE_COMMON_FLAG_FILES_H_
#define EMB_SERVICE_COMMON_FLAG_FILES_H_

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "service/common/regular_file.h"

namespace emb::service {

// The most bytes of one --flagfile, and how deep flag files may include others.
inline constexpr size_t kMaxFlagfileBytes = size_t{1} << 20;
inline constexpr int kMaxFlagfileDepth = 8;
// The most flag files read in all, and their bytes in all, each include counted (a file included
// twice is read twice): a fan-out without a cycle (30 files a level, 6 levels deep) stays under
// the depth bound and would read 30^6 files.
inline constexpr int kMaxFlagfileReads = 256;
inline constexpr size_t kMaxFlagfileTotalBytes = size_t{4} << 20;

// What the flag files expanded so far have read.
struct FlagfileReads {
  int files = 0;
  size_t bytes = 0;
};

// `args` with each --flagfile=F1[,F2...] (or --flagfile F1) replaced by its files' flags, as
// Abseil reads them: one flag per line, blank lines and lines starting with # skipped, nested
// flag files followed. Every flag file must be a regular file of at most kMaxFlagfileBytes (a
// directory, a FIFO or /dev/zero is refused at once), and may not include itself, directly or
// through others, nor nest deeper than kMaxFlagfileDepth; and all of them together are at most
// kMaxFlagfileReads files and kMaxFlagfileTotalBytes: INVALID_ARGUMENT naming the file (and the
// bound). `chain`: the real paths of the flag files being expanded, outermost first; `reads`:
// what they read so far.
inline absl::StatusOr<std::vector<std::string>> ExpandFlagfiles(
    const std::vector<std::string>& args, std::vector<std::string>* chain, FlagfileReads* reads) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string files;
    if (absl::StartsWith(args[i], "--flagfile=")) {
      files = args[i].substr(strlen("--flagfile="));
    } else if (args[i] == "--flagfile" && i + 1 < args.size()) {
      files = args[++i];
    } else {
      out.push_back(args[i]);
      continue;
    }
    for (absl::string_view file : absl::StrSplit(files, ',', absl::SkipEmpty())) {
      const std::string path(file);
      if (reads->files >= kMaxFlagfileReads) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--flagfile=", path, ": flag files would be read more than ", kMaxFlagfileReads,
            " times in all (each include counted; the bound on flag files read)"));
      }
      absl::StatusOr<std::string> text = ReadRegularFile(path, kMaxFlagfileBytes);
      if (!text.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--flagfile=", text.status().message()));
      }
      ++reads->files;
      reads->bytes += text->size();
      if (reads->bytes > kMaxFlagfileTotalBytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--flagfile=", path, ": flag files hold more than ", kMaxFlagfileTotalBytes,
            " bytes in all (each include counted; the bound "
            "on flag file bytes read)"));
      }
      char* real = realpath(path.c_str(), nullptr);
      const std::string real_path = real != nullptr ? real : path;
      std::free(real);
      if (std::find(chain->begin(), chain->end(), real_path) != chain->end()) {
        return absl::InvalidArgumentError(absl::StrCat("--flagfile=", path, ": includes itself (",
                                                       absl::StrJoin(*chain, " -> "), " -> ",
                                                       real_path, ")"));
      }
      if (static_cast<int>(chain->size()) >= kMaxFlagfileDepth) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--flagfile=", path, ": flag files nest over ", kMaxFlagfileDepth, " deep"));
      }
      std::vector<std::string> lines;
      for (absl::string_view line : absl::StrSplit(*text, '\n')) {
        const absl::string_view flag = absl::StripAsciiWhitespace(line);
        if (!flag.empty() && flag[0] != '#') {
          lines.emplace_back(flag);
        }
      }
      chain->push_back(real_path);
      absl::StatusOr<std::vector<std::string>> nested = ExpandFlagfiles(lines, chain, reads);
      chain->pop_back();
      if (!nested.ok()) {
        return nested.status();
      }
      out.insert(out.end(), nested->begin(), nested->end());
    }
  }
  return out;
}

// Every value of a flag given several times (Abseil keeps only the last): --NAME=V or --NAME V,
// in `args` (the command line with its flag files expanded).
inline std::vector<std::string> RepeatedFlag(const std::vector<std::string>& args,
                                             const std::string& name) {
  std::vector<std::string> values;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      break;
    }
    for (const std::string dashes : {"--", "-"}) {
      if (arg == dashes + name && i + 1 < args.size()) {
        values.push_back(args[++i]);
      } else if (arg.rfind(dashes + name + "=", 0) == 0) {
        values.push_back(arg.substr(dashes.size() + name.size() + 1));
      }
    }
  }
  return values;
}

}  // namespace emb::service

#endif  // EMB_SERVICE_COMMON_FLAG_FILES_H_
