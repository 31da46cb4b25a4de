#include "service/rpc/unsent_answers.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/gauge.h"
#include "tests/testing/status_matchers.h"

namespace emb::service {
namespace {

using ::emb::testing::IsOk;
using ::emb::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr size_t kMiB = size_t{1} << 20;

UnsentAnswers::Claim TakeOk(UnsentAnswers& u, const std::string& connection, size_t bytes) {
  UnsentAnswers::Bound bound;
  absl::StatusOr<UnsentAnswers::Claim> claim = u.Take(connection, bytes, &bound);
  EXPECT_THAT(claim.status(), IsOk());
  EXPECT_EQ(bound, UnsentAnswers::Bound::kNone);
  return claim.ok() ? *std::move(claim) : UnsentAnswers::Claim();
}

TEST(UnsentAnswers, RefusesAClaimPastItsConnectionsBound) {
  prometheus::Gauge held;
  UnsentAnswers u({.total = 100 * kMiB, .per_connection = 10 * kMiB}, &held);
  UnsentAnswers::Claim a = TakeOk(u, "ipv4:127.0.0.1:1000", 4 * kMiB);
  UnsentAnswers::Claim b = TakeOk(u, "ipv4:127.0.0.1:1000", 6 * kMiB);  // exactly the bound
  UnsentAnswers::Bound bound;
  EXPECT_THAT(u.Take("ipv4:127.0.0.1:1000", 1, &bound).status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("hold 10485760 bytes"), HasSubstr("bound of 10485760"),
                             HasSubstr("--max_unsent_answer_bytes_per_connection"),
                             HasSubstr("retry with back-off"))));
  EXPECT_EQ(bound, UnsentAnswers::Bound::kConnection);
  // Another connection has its own room.
  UnsentAnswers::Claim c = TakeOk(u, "ipv4:127.0.0.1:1001", 10 * kMiB);
  EXPECT_EQ(u.held_bytes(), 20 * kMiB);
  EXPECT_EQ(u.held_bytes("ipv4:127.0.0.1:1000"), 10 * kMiB);
  EXPECT_EQ(held.Value(), static_cast<double>(20 * kMiB));
}

TEST(UnsentAnswers, RefusesAClaimPastTheBoundOfAllConnections) {
  UnsentAnswers u({.total = 10 * kMiB, .per_connection = 8 * kMiB}, nullptr);
  UnsentAnswers::Claim a = TakeOk(u, "a", 8 * kMiB);
  UnsentAnswers::Bound bound;
  EXPECT_THAT(
      u.Take("b", 3 * kMiB, &bound).status(),
      StatusIs(absl::StatusCode::kResourceExhausted,
               AllOf(HasSubstr("hold 8388608 bytes"), HasSubstr("bound of 10485760"),
                     HasSubstr("--max_unsent_answer_bytes)"), HasSubstr("retry with back-off"))));
  EXPECT_EQ(bound, UnsentAnswers::Bound::kTotal);
  UnsentAnswers::Claim b = TakeOk(u, "b", 2 * kMiB);
  EXPECT_EQ(u.held_bytes(), 10 * kMiB);
}

TEST(UnsentAnswers, AClaimPastABoundOnItsOwnIsRefused) {
  UnsentAnswers u({.total = 10 * kMiB, .per_connection = 4 * kMiB}, nullptr);
  UnsentAnswers::Bound bound;
  EXPECT_THAT(u.Take("a", 4 * kMiB + 1, &bound).status(),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(bound, UnsentAnswers::Bound::kConnection);
  EXPECT_EQ(u.held_bytes(), 0u);
  EXPECT_EQ(u.connections_for_test(), 0u);
}

TEST(UnsentAnswers, ReleasingAClaimMakesRoomAndForgetsAnEmptyConnection) {
  prometheus::Gauge held;
  UnsentAnswers u({.total = 10 * kMiB, .per_connection = 10 * kMiB}, &held);
  {
    UnsentAnswers::Claim a = TakeOk(u, "a", 6 * kMiB);
    UnsentAnswers::Claim moved = std::move(a);  // the claim moves; the bytes stay claimed once
    UnsentAnswers::Bound bound;
    EXPECT_FALSE(u.Take("b", 6 * kMiB, &bound).ok());
    EXPECT_EQ(u.connections_for_test(), 1u);
    EXPECT_EQ(held.Value(), static_cast<double>(6 * kMiB));
  }
  EXPECT_EQ(u.held_bytes(), 0u);
  EXPECT_EQ(u.connections_for_test(), 0u);
  EXPECT_EQ(held.Value(), 0.0);
  UnsentAnswers::Claim b = TakeOk(u, "b", 6 * kMiB);
  UnsentAnswers::Claim c = TakeOk(u, "b", 4 * kMiB);
  b = UnsentAnswers::Claim();  // assigning over a claim gives it back
  EXPECT_EQ(u.held_bytes("b"), 4 * kMiB);
}

TEST(UnsentAnswers, ZeroBytesClaimNothing) {
  UnsentAnswers u({.total = kMiB, .per_connection = kMiB}, nullptr);
  UnsentAnswers::Claim a = TakeOk(u, "a", 0);
  EXPECT_EQ(a.bytes(), 0u);
  EXPECT_EQ(u.connections_for_test(), 0u);
}

TEST(UnsentAnswers, AClaimMayOutliveTheBoundAndItsGauge) {
  auto held = std::make_unique<prometheus::Gauge>();
  auto u = std::make_unique<UnsentAnswers>(
      UnsentAnswers::Bounds{.total = kMiB, .per_connection = kMiB}, held.get());
  UnsentAnswers::Claim a = TakeOk(*u, "a", kMiB);
  u.reset();
  held.reset();
  a = UnsentAnswers::Claim();  // as gRPC releasing an answer after the server has gone
}

TEST(UnsentAnswers, ConcurrentClaimsStayWithinTheBounds) {
  prometheus::Gauge held;
  constexpr size_t kPerConnection = 64 * kMiB;
  UnsentAnswers u({.total = 160 * kMiB, .per_connection = kPerConnection}, &held);
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::vector<size_t> most_seen(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&u, &most_seen, t] {
      const std::string connection = "c" + std::to_string(t % 3);  // two threads share one
      std::vector<UnsentAnswers::Claim> claims;
      for (int i = 0; i < 20000; ++i) {
        UnsentAnswers::Bound bound;
        absl::StatusOr<UnsentAnswers::Claim> c = u.Take(connection, (i % 7 + 1) * kMiB, &bound);
        if (c.ok()) {
          claims.push_back(*std::move(c));
        }
        if (!claims.empty() && (claims.size() > 5 || !c.ok())) {
          claims.erase(claims.begin());
        }
        most_seen[t] = std::max(most_seen[t], u.held_bytes());
        if (u.held_bytes(connection) > kPerConnection) {
          ADD_FAILURE() << connection << " holds " << u.held_bytes(connection);
          return;
        }
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  for (size_t m : most_seen) {
    EXPECT_LE(m, 160 * kMiB);
  }
  EXPECT_EQ(u.held_bytes(), 0u);
  EXPECT_EQ(held.Value(), 0.0);
  EXPECT_EQ(u.connections_for_test(), 0u);
}

}  // namespace
}  // namespace emb::service
