// The circuit breaker's state machine (issue 15) on the fake clock, and CircuitBreakers over a
// real SQLite store: two users of one store see one breaker, and exactly one gets the trial.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "falcon/circuit_breaker.h"
#include "falcon/state_store.h"
#include "support/fake_clock.h"
#include "support/temp_dir.h"

namespace falcon {
namespace {

using std::chrono::seconds;
using testing::FakeClock;

const BreakerSettings kSettings{.failures = 3, .cooldown_s = 60, .cooldown_max_s = 900};

TEST(BreakerCooldown, DoublesWithEachTripUpToTheCap) {
  EXPECT_EQ(breaker_cooldown(kSettings, 1), seconds(60));
  EXPECT_EQ(breaker_cooldown(kSettings, 2), seconds(120));
  EXPECT_EQ(breaker_cooldown(kSettings, 4), seconds(480));
  EXPECT_EQ(breaker_cooldown(kSettings, 5), seconds(900));
  EXPECT_EQ(breaker_cooldown(kSettings, 1000), seconds(900));
}

TEST(BreakerStateMachine, OpensAfterKConsecutiveFailuresOnly) {
  FakeClock clock;
  BreakerState s{.key = "tpu-a"};
  s = breaker_after_failure(s, kSettings, clock.now());
  s = breaker_after_failure(s, kSettings, clock.now());
  s = breaker_after_success(s, kSettings, clock.now());  // the run is broken
  EXPECT_EQ(s.consecutive_failures, 0);
  s = breaker_after_failure(s, kSettings, clock.now());
  s = breaker_after_failure(s, kSettings, clock.now());
  EXPECT_EQ(s.state, kBreakerClosed);
  EXPECT_TRUE(breaker_admission(s, kSettings, clock.now()).allowed);
  s = breaker_after_failure(s, kSettings, clock.now());
  EXPECT_EQ(s.state, kBreakerOpen);
  EXPECT_EQ(s.trips, 1);
  EXPECT_EQ(s.opened_until, clock.now() + seconds(60));
  const auto refused = breaker_admission(s, kSettings, clock.now() + seconds(59));
  EXPECT_FALSE(refused.allowed);
  EXPECT_NE(refused.reason.find("circuit breaker open until 2026-04-13T08:01:00"),
            std::string::npos)
      << refused.reason;
}

TEST(BreakerStateMachine, HalfOpenLetsOneTrialThroughAndClosesOnSuccess) {
  FakeClock clock;
  BreakerState s{.key = "tpu-a"};
  for (int i = 0; i < 3; ++i) s = breaker_after_failure(s, kSettings, clock.now());
  clock.advance(seconds(60));
  const auto trial = breaker_admission(s, kSettings, clock.now());
  ASSERT_TRUE(trial.allowed);
  ASSERT_TRUE(trial.claim.has_value());
  EXPECT_EQ(trial.claim->state, kBreakerHalfOpen);
  s = *trial.claim;
  // While the trial runs, everyone else is refused.
  EXPECT_FALSE(breaker_admission(s, kSettings, clock.now() + seconds(1)).allowed);
  s = breaker_after_success(s, kSettings, clock.now());
  EXPECT_EQ(s.state, kBreakerClosed);
  EXPECT_EQ(s.consecutive_failures, 0);
  EXPECT_EQ(s.trips, 1);  // remembered: a quick relapse gets a longer cool-down
  EXPECT_TRUE(breaker_admission(s, kSettings, clock.now()).allowed);
}

TEST(BreakerStateMachine, AFailedTrialReopensWithALongerCooldown) {
  FakeClock clock;
  BreakerState s{.key = "tpu-a"};
  for (int i = 0; i < 3; ++i) s = breaker_after_failure(s, kSettings, clock.now());
  clock.advance(seconds(60));
  s = *breaker_admission(s, kSettings, clock.now()).claim;
  s = breaker_after_failure(s, kSettings, clock.now());
  EXPECT_EQ(s.state, kBreakerOpen);
  EXPECT_EQ(s.trips, 2);
  EXPECT_EQ(s.opened_until, clock.now() + seconds(120));
  // A relapse soon after closing trips a third time: 240 s.
  clock.advance(seconds(120));
  s = *breaker_admission(s, kSettings, clock.now()).claim;
  s = breaker_after_success(s, kSettings, clock.now());
  for (int i = 0; i < 3; ++i) s = breaker_after_failure(s, kSettings, clock.now());
  EXPECT_EQ(s.trips, 3);
  EXPECT_EQ(s.opened_until, clock.now() + seconds(240));
}

TEST(BreakerStateMachine, TripsAreForgottenAfterStayingClosedForTheCap) {
  FakeClock clock;
  BreakerState s{.key = "tpu-a"};
  for (int i = 0; i < 3; ++i) s = breaker_after_failure(s, kSettings, clock.now());
  clock.advance(seconds(60));
  s = breaker_after_success(*breaker_admission(s, kSettings, clock.now()).claim, kSettings,
                            clock.now());
  clock.advance(seconds(899));
  s = breaker_after_success(s, kSettings, clock.now());
  EXPECT_EQ(s.trips, 1);
  clock.advance(seconds(1));
  s = breaker_after_success(s, kSettings, clock.now());
  EXPECT_EQ(s.trips, 0);
  for (int i = 0; i < 3; ++i) s = breaker_after_failure(s, kSettings, clock.now());
  EXPECT_EQ(s.opened_until, clock.now() + seconds(60));
}

TEST(BreakerStateMachine, ALapsedTrialLetsTheNextCallerTry) {
  FakeClock clock;
  BreakerState s{.key = "tpu-a"};
  for (int i = 0; i < 3; ++i) s = breaker_after_failure(s, kSettings, clock.now());
  clock.advance(seconds(60));
  s = *breaker_admission(s, kSettings, clock.now()).claim;  // its caller dies
  clock.advance(seconds(60));
  const auto next = breaker_admission(s, kSettings, clock.now());
  EXPECT_TRUE(next.allowed);
  EXPECT_TRUE(next.claim.has_value());
}

TEST(BreakerKey, UsesTheCanonicalAcceleratorSpelling) {
  EXPECT_EQ(breaker_key("tpu-a"), "tpu-a");
  EXPECT_EQ(breaker_key("tpu-a", "tpu-v4-64"), "tpu-a/v4-64");
  EXPECT_EQ(breaker_key("tpu-a", "v4-64"), "tpu-a/v4-64");
}

class CircuitBreakersTest : public ::testing::Test {
 protected:
  std::shared_ptr<StateStore> open() const {
    return open_state_store("sqlite://" + (tmp_.path() / "falcon.db").string());
  }
  testing::TempDir tmp_;
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
};

TEST_F(CircuitBreakersTest, TwoProcessesShareOneBreakerAndOneTrial) {
  const CircuitBreakers cli(open(), kSettings, clock_);
  const CircuitBreakers replica(open(), kSettings, clock_);
  EXPECT_EQ(cli.admit("tpu-a"), std::nullopt);
  cli.record_failure("tpu-a");
  replica.record_failure("tpu-a");
  cli.record_failure("tpu-a");
  ASSERT_TRUE(replica.admit("tpu-a").has_value());
  EXPECT_NE(replica.admit("tpu-a")->find("circuit breaker open until"), std::string::npos);
  EXPECT_EQ(replica.get("tpu-a").state, kBreakerOpen);
  clock_->advance(seconds(60));
  EXPECT_EQ(replica.admit("tpu-a"), std::nullopt);  // the trial is the replica's
  ASSERT_TRUE(cli.admit("tpu-a").has_value());      // not the CLI's
  EXPECT_NE(cli.admit("tpu-a")->find("half-open"), std::string::npos);
  replica.record_success("tpu-a");
  EXPECT_EQ(cli.get("tpu-a").state, kBreakerClosed);
  EXPECT_EQ(cli.admit("tpu-a"), std::nullopt);
}

TEST_F(CircuitBreakersTest, ASuccessOnAQuietBreakerWritesNothing) {
  const auto store = open();
  const CircuitBreakers b(store, kSettings, clock_);
  b.record_success("tpu-a");
  EXPECT_FALSE(store->get_breaker("tpu-a").has_value());
  b.record_failure("tpu-a");
  const auto version = store->get_breaker("tpu-a")->version;
  b.record_success("tpu-a");  // resets the count: one write
  b.record_success("tpu-a");  // nothing left to reset
  EXPECT_EQ(store->get_breaker("tpu-a")->version, version + 1);
}

TEST(DescribeBreaker, SaysWhatACallerWillMeet) {
  FakeClock clock;
  BreakerState s{.key = "tpu-a"};
  EXPECT_EQ(describe_breaker(s, clock.now()), "closed");
  s = breaker_after_failure(s, kSettings, clock.now());
  EXPECT_EQ(describe_breaker(s, clock.now()), "closed (1 failure)");
  for (int i = 0; i < 2; ++i) s = breaker_after_failure(s, kSettings, clock.now());
  EXPECT_EQ(describe_breaker(s, clock.now()),
            "open until 2026-04-13T08:01:00.000Z (trip 1, 3 failures)");
  EXPECT_EQ(describe_breaker(s, clock.now() + seconds(60)), "open (trial due, trip 1)");
}

}  // namespace
}  // namespace falcon
