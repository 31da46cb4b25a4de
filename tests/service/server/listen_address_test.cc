#include "service/server/listen_address.h"

#include "gtest/gtest.h"

namespace emb::service::listen_address_test {
namespace {

// --admin_insecure serves writes to every caller: only on a literal loopback address (issue 41,
// item 7d: a name such as 127.example.com passed as loopback, and resolves wherever its owner
// points it).
TEST(IsLoopbackHost, TakesLiteralLoopbackAddressesOnly) {
  for (const char* host : {"127.0.0.1", "127.0.0.2", "127.255.255.254", "[::1]", "::1",
                           "[0:0:0:0:0:0:0:1]", "localhost"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host :
       {"127.example.com", "127.0.0.1.nip.io", "127.", "127", "127.0.1", "0177.0.0.1",
        "localhost.example.com", "LOCALHOST", "128.0.0.1", "0.0.0.0", "", "[::]",
        "::", "[::ffff:10.0.0.1]", "10.127.0.1", "[127.0.0.1]", "127.0.0.1 "}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

}  // namespace
}  // namespace emb::service::listen_address_test
