// CertDir: the certificates of tests/testing/make_test_certs.sh (made with the openssl command) in
// a fresh temporary folder, removed with the object. The test target must define
// EMB_MAKE_TEST_CERTS as the script's path. Header-only; thread-compatible.
#ifndef EMB_TESTS_TESTING_CERT_DIR_H_
#define EMB_TESTS_TESTING_CERT_DIR_H_

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/table_files.h"

namespace emb::testing {

class CertDir {
 public:
  CertDir() {
    const std::string command =
        std::string(EMB_MAKE_TEST_CERTS) + " '" + dir_.path() + "' >/dev/null 2>&1";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
  }

  std::string Path(const std::string& name) const { return dir_.File(name); }
  std::string Read(const std::string& name) const {
    std::ifstream in(Path(name), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_FALSE(text.str().empty()) << Path(name);
    return text.str();
  }
  // Writes `text` to a new file `name` here and returns its path.
  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(Path(name), std::ios::binary) << text;
    return Path(name);
  }

 private:
  TempDir dir_;
};

}  // namespace emb::testing

#endif  // EMB_TESTS_TESTING_CERT_DIR_H_
