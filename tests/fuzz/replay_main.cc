// A main() for the fuzz targets where libFuzzer is not linked (the plain and sanitizer builds):
// runs LLVMFuzzerTestOneInput once on each file named, or on each file in each directory named,
// so CTest replays the seed corpora and the regressions (tests/fuzz/CMakeLists.txt). Arguments
// that start with '-' (libFuzzer's flags) are ignored. Exit 0 when every input ran; a crash or a
// failed FUZZ_CHECK aborts.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool RunFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return false;
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::fprintf(stderr, "replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
  // A copy of exactly the input's size, so that reading past it is a heap overflow under ASan.
  std::vector<uint8_t> data(bytes.begin(), bytes.end());
  LLVMFuzzerTestOneInput(data.data(), data.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int inputs = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg = argv[i];
    if (argv[i][0] == '-') {
      continue;
    }
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file()) {
          files.push_back(entry.path());
        }
      }
    } else {
      files.push_back(arg);
    }
    for (const auto& file : files) {
      if (!RunFile(file)) {
        return 1;
      }
      ++inputs;
    }
  }
  std::fprintf(stderr, "replay: %d inputs ran\n", inputs);
  return 0;
}
