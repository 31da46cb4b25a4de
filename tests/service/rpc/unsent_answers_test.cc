#include "service/rpc/unsent_answers.h"

#include <algorithm>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/gauge.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/status_matchers.h"

namespace emb::service::unsent_answers_test {
namespace {

using ::emb::testing::FakeClock;
using ::emb::testing::IsOk;
using ::emb::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr size_t kMiB = size_t{1} << 20;

UnsentAnswers::Claim TakeOk(UnsentAnswers& u, const std::string& connection, size_t bytes,
                            absl::Time deadline = absl::InfiniteFuture()) {
  UnsentAnswers::Bound bound;
  absl::StatusOr<UnsentAnswers::Claim> claim = u.Take(connection, bytes, &bound, deadline);
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

// Admission by deadline. The rate is learned from answers that queued behind others: here one of
// 1 MiB behind 1 MiB, released 100 ms after its claim: 20 MiB/s.
class DeadlineAdmission : public ::testing::Test {
 protected:
  static constexpr double kRate = 20.0 * kMiB;  // bytes a second

  // Connection `name` claims three 1 MiB answers; the second is sent 100 ms later. Leaves two
  // held, in `held_`.
  void LearnRate(const std::string& name) {
    for (int i = 0; i < 3; ++i) {
      held_.push_back(TakeOk(u_, name, kMiB));
    }
    clock_.Advance(absl::Milliseconds(100));
    held_.erase(held_.begin() + 1);
  }

  absl::Status TryTake(const std::string& name, size_t bytes, absl::Duration left,
                       UnsentAnswers::Bound* bound) {
    absl::StatusOr<UnsentAnswers::Claim> c = u_.Take(name, bytes, bound, clock_.Now() + left);
    if (c.ok()) {
      held_.push_back(*std::move(c));
    }
    return c.status();
  }

  FakeClock clock_;
  UnsentAnswers u_{{.total = 1024 * kMiB, .per_connection = 256 * kMiB, .deadline_fraction = 0.8},
                   nullptr,
                   &clock_};
  std::vector<UnsentAnswers::Claim> held_;
};

TEST_F(DeadlineAdmission, LearnsTheRateAConnectionsQueuedAnswersDrainAt) {
  LearnRate("a");
  EXPECT_DOUBLE_EQ(u_.drain_rate("a"), kRate);
  EXPECT_EQ(u_.drain_rate("b"), 0);
}

TEST_F(DeadlineAdmission, AnAnswerSentAloneTeachesNoRate) {
  UnsentAnswers::Claim lone = TakeOk(u_, "a", kMiB);
  UnsentAnswers::Claim keep = TakeOk(u_, "b", kMiB);  // keeps the map's entry for "b" only
  clock_.Advance(absl::Seconds(1));
  lone = UnsentAnswers::Claim();
  UnsentAnswers::Claim again = TakeOk(u_, "a", kMiB);
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(u_.drain_rate("a"), 0);
  // Nothing learned anywhere: a call with answers ahead and a short deadline is still admitted.
  UnsentAnswers::Bound bound;
  EXPECT_THAT(TryTake("a", kMiB, absl::Microseconds(1), &bound), IsOk());
}

TEST_F(DeadlineAdmission, RefusesAnAnswerThatWouldBeSentPastItsShareOfTheDeadline) {
  LearnRate("a");  // 2 MiB held
  // 3 MiB at 20 MiB/s: 150 ms, past 0.8 of 150 ms.
  UnsentAnswers::Bound bound;
  EXPECT_THAT(
      TryTake("a", kMiB, absl::Milliseconds(150), &bound),
      StatusIs(absl::StatusCode::kResourceExhausted,
               AllOf(HasSubstr("would be sent too late"), HasSubstr("hold 2097152 bytes"),
                     HasSubstr("20.9715 MB/s"), HasSubstr("about 150 ms"), HasSubstr("150 ms left"),
                     HasSubstr("--deadline_admission_fraction"))));
  EXPECT_EQ(bound, UnsentAnswers::Bound::kDeadline);
  EXPECT_EQ(u_.held_bytes("a"), 2 * kMiB);  // nothing claimed
  // Within 0.8 of 200 ms: admitted.
  EXPECT_THAT(TryTake("a", kMiB, absl::Milliseconds(200), &bound), IsOk());
  EXPECT_EQ(bound, UnsentAnswers::Bound::kNone);
  EXPECT_EQ(u_.held_bytes("a"), 3 * kMiB);
}

TEST_F(DeadlineAdmission, SmallAnswersSentBesideALargeOneDoNotMakeItLookSlow) {
  // gRPC sends small answers beside a large one; they finish long before it. Learned as bytes
  // released over time, the rate would be the small answers' (4 KiB a millisecond), and the
  // next large answer, with 20 s to go, would be refused.
  UnsentAnswers::Claim large = TakeOk(u_, "a", 64 * kMiB);
  for (int i = 0; i < 100; ++i) {
    UnsentAnswers::Claim small = TakeOk(u_, "a", 4096);
    clock_.Advance(absl::Milliseconds(1));
  }
  UnsentAnswers::Claim other = TakeOk(u_, "a", 4096);
  UnsentAnswers::Bound bound;
  EXPECT_THAT(TryTake("a", 64 * kMiB, absl::Seconds(20), &bound), IsOk());
  EXPECT_GT(u_.drain_rate("a"), 1e9);
}

TEST_F(DeadlineAdmission, SmallAnswersTeachNoRate) {
  // 4 KiB behind 4 KiB in 10 ms is the calls' own cost, not a rate: as one (0.8 MB/s), it would
  // refuse a 4 MiB answer with 4 s to go. Learned on no connection, the rate stays unknown.
  for (int i = 0; i < 10; ++i) {
    UnsentAnswers::Claim a = TakeOk(u_, "a", 4096);
    UnsentAnswers::Claim b = TakeOk(u_, "a", 4096);
    clock_.Advance(absl::Milliseconds(10));
  }
  EXPECT_EQ(u_.drain_rate("a"), 0);
  held_.push_back(TakeOk(u_, "a", 4096));
  held_.push_back(TakeOk(u_, "a", 4096));
  UnsentAnswers::Bound bound;
  EXPECT_THAT(TryTake("a", 4 * kMiB, absl::Seconds(4), &bound), IsOk());
}

TEST_F(DeadlineAdmission, ACallBehindFewerThanTwoAnswersIsAdmitted) {
  LearnRate("a");
  UnsentAnswers::Bound bound;
  // Nothing ahead, then one answer ahead: admitted however short the deadline, so that every
  // connection can queue the two answers its rate is learned from.
  EXPECT_THAT(TryTake("b", 64 * kMiB, absl::Milliseconds(1), &bound), IsOk());
  EXPECT_THAT(TryTake("b", 64 * kMiB, absl::Milliseconds(1), &bound), IsOk());
  EXPECT_THAT(TryTake("b", kMiB, absl::Milliseconds(1), &bound),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("too late")));
}

TEST_F(DeadlineAdmission, AConnectionWithoutARateOfItsOwnUsesTheLastOneLearned) {
  LearnRate("a");
  UnsentAnswers::Claim first = TakeOk(u_, "b", kMiB);
  UnsentAnswers::Claim second = TakeOk(u_, "b", kMiB);
  UnsentAnswers::Bound bound;
  // 3 MiB at 20 MiB/s: 150 ms, past 0.8 of 150 ms.
  EXPECT_THAT(TryTake("b", kMiB, absl::Milliseconds(150), &bound),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("too late")));
  EXPECT_EQ(bound, UnsentAnswers::Bound::kDeadline);
}

TEST_F(DeadlineAdmission, ACallWhoseDeadlineHasPassedIsRefused) {
  UnsentAnswers::Bound bound;
  EXPECT_THAT(TryTake("a", kMiB, absl::ZeroDuration(), &bound),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("deadline passed")));
  EXPECT_EQ(bound, UnsentAnswers::Bound::kDeadline);
  EXPECT_EQ(u_.connections_for_test(), 0u);
}

TEST_F(DeadlineAdmission, CallsWithoutADeadlineAreNotJudgedByOne) {
  LearnRate("a");
  UnsentAnswers::Bound bound;
  EXPECT_THAT(TryTake("a", 200 * kMiB, absl::InfiniteDuration(), &bound), IsOk());
}

TEST(UnsentAnswers, DeadlineFractionZeroTurnsAdmissionByDeadlineOff) {
  FakeClock clock;
  UnsentAnswers u({.total = 100 * kMiB, .per_connection = 100 * kMiB, .deadline_fraction = 0},
                  nullptr, &clock);
  std::vector<UnsentAnswers::Claim> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(TakeOk(u, "a", kMiB));
  }
  clock.Advance(absl::Seconds(1));
  held.pop_back();
  // 1 MiB a second learned, 3 MiB would take 3 s: admitted all the same, as is a passed deadline.
  held.push_back(TakeOk(u, "a", kMiB, clock.Now() + absl::Milliseconds(1)));
  held.push_back(TakeOk(u, "a", kMiB, clock.Now() - absl::Milliseconds(1)));
}

// Waiting for room (Admit): the calls that pass a bound wait and are admitted, in order, as
// answers ahead of them are sent; they leave the wait with an error only at their deadline, when
// cancelled, or when the bound goes away.
class Waiting : public ::testing::Test {
 protected:
  // One call's admission: what its callback got, once it has run.
  struct Outcome {
    absl::Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;
    absl::Status status ABSL_GUARDED_BY(mu);
    UnsentAnswers::Claim claim ABSL_GUARDED_BY(mu);
    UnsentAnswers::Bound waited_for ABSL_GUARDED_BY(mu) = UnsentAnswers::Bound::kNone;
    std::atomic<bool> cancelled{false};

    // Waits (on the condition, no sleep) for the callback and returns its status.
    absl::Status Await() {
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(&done));
      return status;
    }
    bool Done() {
      absl::MutexLock lock(&mu);
      return done;
    }
  };

  // Admits `bytes` on `connection`; expects the call to wait.
  std::unique_ptr<Outcome> AdmitWaiting(UnsentAnswers& u, const std::string& connection,
                                        size_t bytes,
                                        absl::Time deadline = absl::InfiniteFuture()) {
    auto outcome = std::make_unique<Outcome>();
    Outcome* o = outcome.get();
    UnsentAnswers::Bound bound;
    UnsentAnswers::Admission a = u.Admit(
        connection, bytes, deadline, &o->cancelled,
        [o](absl::StatusOr<UnsentAnswers::Claim> claim, UnsentAnswers::Bound waited_for) {
          absl::MutexLock lock(&o->mu);
          o->status = claim.status();
          if (claim.ok()) {
            o->claim = *std::move(claim);
          }
          o->waited_for = waited_for;
          o->done = true;
        },
        &bound);
    EXPECT_THAT(a.status, IsOk());
    EXPECT_TRUE(a.waiting);
    return outcome;
  }

  FakeClock clock_;
  prometheus::Gauge waiting_;
};

TEST_F(Waiting, ACallPastItsConnectionsBoundWaitsAndIsAdmittedWhenAnAnswerIsSent) {
  UnsentAnswers u({.total = 100 * kMiB, .per_connection = 10 * kMiB}, nullptr, &clock_, &waiting_);
  UnsentAnswers::Claim a = TakeOk(u, "c", 6 * kMiB);
  UnsentAnswers::Claim b = TakeOk(u, "c", 4 * kMiB);
  std::unique_ptr<Outcome> w = AdmitWaiting(u, "c", 5 * kMiB);
  EXPECT_EQ(u.waiting_calls(), 1u);
  EXPECT_EQ(waiting_.Value(), 1.0);
  EXPECT_FALSE(w->Done());
  // Another connection is not held up by it.
  UnsentAnswers::Claim other = TakeOk(u, "d", 10 * kMiB);
  b = UnsentAnswers::Claim();  // 4 MiB sent: not room enough for 5
  a = UnsentAnswers::Claim();  // 6 more: room
  EXPECT_THAT(w->Await(), IsOk());
  absl::MutexLock lock(&w->mu);
  EXPECT_EQ(w->claim.bytes(), 5 * kMiB);
  EXPECT_EQ(w->waited_for, UnsentAnswers::Bound::kConnection);
  EXPECT_EQ(u.held_bytes("c"), 5 * kMiB);
  EXPECT_EQ(u.waiting_calls(), 0u);
}

TEST_F(Waiting, ACallPastTheBoundOfAllConnectionsWaits) {
  UnsentAnswers u({.total = 10 * kMiB, .per_connection = 8 * kMiB}, nullptr, &clock_);
  UnsentAnswers::Claim a = TakeOk(u, "a", 8 * kMiB);
  std::unique_ptr<Outcome> w = AdmitWaiting(u, "b", 4 * kMiB);
  a = UnsentAnswers::Claim();
  EXPECT_THAT(w->Await(), IsOk());
  absl::MutexLock lock(&w->mu);
  EXPECT_EQ(w->waited_for, UnsentAnswers::Bound::kTotal);
}

TEST_F(Waiting, AConnectionsWaitingCallsAreAdmittedInOrderAndNewCallsQueueBehindThem) {
  UnsentAnswers u({.total = 100 * kMiB, .per_connection = 8 * kMiB}, nullptr, &clock_);
  UnsentAnswers::Claim a = TakeOk(u, "c", 8 * kMiB);
  std::unique_ptr<Outcome> first = AdmitWaiting(u, "c", 6 * kMiB);
  // 1 MiB would fit beside... nothing now, and it must not pass the call ahead of it anyway.
  std::unique_ptr<Outcome> second = AdmitWaiting(u, "c", 1 * kMiB);
  a = UnsentAnswers::Claim();
  EXPECT_THAT(first->Await(), IsOk());
  EXPECT_THAT(second->Await(), IsOk());
  EXPECT_EQ(u.held_bytes("c"), 7 * kMiB);
  // Behind a waiting call, a call that would fit waits too.
  std::unique_ptr<Outcome> third = AdmitWaiting(u, "c", 2 * kMiB);
  std::unique_ptr<Outcome> fourth = AdmitWaiting(u, "c", 1 * kMiB);
  {
    absl::MutexLock lock(&first->mu);
    first->claim = UnsentAnswers::Claim();
  }
  EXPECT_THAT(third->Await(), IsOk());
  EXPECT_THAT(fourth->Await(), IsOk());
}

TEST_F(Waiting, PastTheWaitingBoundACallIsRefusedSayingWhy) {
  UnsentAnswers u({.total = 100 * kMiB, .per_connection = 4 * kMiB, .waiting_per_connection = 2},
                  nullptr, &clock_);
  UnsentAnswers::Claim a = TakeOk(u, "c", 4 * kMiB);
  std::unique_ptr<Outcome> w1 = AdmitWaiting(u, "c", kMiB);
  std::unique_ptr<Outcome> w2 = AdmitWaiting(u, "c", kMiB);
  UnsentAnswers::Bound bound;
  UnsentAnswers::Admission refused = u.Admit(
      "c", kMiB, absl::InfiniteFuture(), nullptr,
      [](absl::StatusOr<UnsentAnswers::Claim>, UnsentAnswers::Bound) {
        ADD_FAILURE() << "a refused call's callback ran";
      },
      &bound);
  EXPECT_THAT(refused.status,
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("hold 4194304 bytes"), HasSubstr("retry with back-off"))));
  EXPECT_EQ(bound, UnsentAnswers::Bound::kConnection);
  EXPECT_FALSE(refused.waiting);
  // An answer that could never fit a bound does not wait either.
  EXPECT_THAT(u.Admit(
                   "d", 5 * kMiB, absl::InfiniteFuture(), nullptr,
                   [](absl::StatusOr<UnsentAnswers::Claim>, UnsentAnswers::Bound) {}, &bound)
                  .status,
              StatusIs(absl::StatusCode::kResourceExhausted));
  a = UnsentAnswers::Claim();
  EXPECT_THAT(w1->Await(), IsOk());
  EXPECT_THAT(w2->Await(), IsOk());
}

TEST_F(Waiting, ACallWhoseDeadlinePassesWhileItWaitsLeavesWithDeadlineExceeded) {
  UnsentAnswers u({.total = 100 * kMiB, .per_connection = 4 * kMiB}, nullptr, &clock_);
  UnsentAnswers::Claim a = TakeOk(u, "c", 4 * kMiB);
  std::unique_ptr<Outcome> w = AdmitWaiting(u, "c", kMiB, clock_.Now() + absl::Seconds(30));
  clock_.Advance(absl::Seconds(31));
  u.Wake();
  EXPECT_THAT(w->Await(), StatusIs(absl::StatusCode::kDeadlineExceeded,
                                   HasSubstr("deadline passed while it waited")));
  EXPECT_EQ(u.waiting_calls(), 0u);
  EXPECT_EQ(u.held_bytes("c"), 4 * kMiB);
}

TEST_F(Waiting, ACancelledCallLeavesTheWaitAndItsConnectionIsForgotten) {
  UnsentAnswers u({.total = 100 * kMiB, .per_connection = 4 * kMiB}, nullptr, &clock_);
  UnsentAnswers::Claim a = TakeOk(u, "c", 4 * kMiB);
  std::unique_ptr<Outcome> w = AdmitWaiting(u, "c", kMiB);
  w->cancelled.store(true);
  u.Wake();
  EXPECT_THAT(w->Await(), StatusIs(absl::StatusCode::kCancelled));
  a = UnsentAnswers::Claim();
  EXPECT_EQ(u.connections_for_test(), 0u);
}

TEST_F(Waiting, CallsStillWaitingWhenTheBoundGoesAreFinishedUnavailable) {
  auto u = std::make_unique<UnsentAnswers>(
      UnsentAnswers::Bounds{.total = 100 * kMiB, .per_connection = 4 * kMiB}, nullptr, &clock_);
  UnsentAnswers::Claim a = TakeOk(*u, "c", 4 * kMiB);
  std::unique_ptr<Outcome> w = AdmitWaiting(*u, "c", kMiB);
  u.reset();
  EXPECT_THAT(w->Await(), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(Waiting, ManyThreadsWaitingOnOneConnectionAreAllAdmittedWithinTheBound) {
  // Two answers of 1 to 3 MiB kept, then a third: past 5 MiB, some calls of every thread wait.
  constexpr size_t kPerConnection = 5 * kMiB;
  UnsentAnswers u({.total = 100 * kMiB, .per_connection = kPerConnection}, nullptr, &clock_);
  constexpr int kThreads = 4;
  constexpr int kCalls = 300;
  std::atomic<int> waited{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      // Each thread keeps its last two answers unsent; a call that waits has them sent first
      // (as gRPC sends a connection's answers whatever its callers do).
      std::deque<UnsentAnswers::Claim> unsent;
      for (int i = 0; i < kCalls; ++i) {
        Outcome o;
        UnsentAnswers::Bound bound;
        UnsentAnswers::Admission a = u.Admit(
            "c", (i % 3 + 1) * kMiB, absl::InfiniteFuture(), &o.cancelled,
            [&o](absl::StatusOr<UnsentAnswers::Claim> claim, UnsentAnswers::Bound) {
              absl::MutexLock lock(&o.mu);
              o.status = claim.status();
              if (claim.ok()) {
                o.claim = *std::move(claim);
              }
              o.done = true;
            },
            &bound);
        ASSERT_THAT(a.status, IsOk());
        if (a.waiting) {
          waited.fetch_add(1);
          unsent.clear();
          ASSERT_THAT(o.Await(), IsOk());
          absl::MutexLock lock(&o.mu);
          unsent.push_back(std::move(o.claim));
        } else {
          unsent.push_back(std::move(a.claim));
        }
        EXPECT_LE(u.held_bytes("c"), kPerConnection);
        if (unsent.size() > 2) {
          unsent.pop_front();
        }
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  EXPECT_EQ(u.held_bytes(), 0u);
  EXPECT_EQ(u.waiting_calls(), 0u);
  EXPECT_GT(waited.load(), 0);
}

}  // namespace
}  // namespace emb::service::unsent_answers_test
