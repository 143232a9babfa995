// The library's side of `falcon job logs --follow` and `--since` (issue 12): the stop rule on the
// injected clock and the age parser, both driven in simulated time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>

#include "falcon/log_retriever.h"
#include "support/fake_clock.h"

namespace falcon {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FakeClock;
using ::testing::HasSubstr;

TEST(FollowUntilFinished, AsksAtMostEveryCheckAndLingersAfterTheEnd) {
  auto clock = std::make_shared<FakeClock>();
  int asked = 0;
  bool finished = false;
  const auto stop = follow_until_finished(
      clock,
      [&] {
        ++asked;
        return finished;
      },
      {}, seconds(10), seconds(15));
  EXPECT_FALSE(stop());
  EXPECT_EQ(asked, 1);
  clock->advance(seconds(14));
  EXPECT_FALSE(stop());
  EXPECT_EQ(asked, 1);  // not yet 15 s since the last check
  finished = true;
  clock->advance(seconds(1));
  EXPECT_FALSE(stop());  // seen finished now: linger
  EXPECT_EQ(asked, 2);
  clock->advance(milliseconds(9'999));
  EXPECT_FALSE(stop());
  clock->advance(milliseconds(1));
  EXPECT_TRUE(stop());
  EXPECT_EQ(asked, 2);
}

TEST(FollowUntilFinished, AnInterruptStopsAtOnce) {
  auto clock = std::make_shared<FakeClock>();
  bool interrupted = false;
  const auto stop = follow_until_finished(
      clock, [] { return false; }, [&] { return interrupted; }, seconds(10));
  EXPECT_FALSE(stop());
  interrupted = true;
  EXPECT_TRUE(stop());
}

TEST(FollowUntilFinished, TheLingerIsAPollAndTheVisibilityDelay) {
  FollowOptions options;
  options.poll_interval = milliseconds(2'500);
  options.visibility_delay = milliseconds(2'000);
  EXPECT_EQ(follow_linger(options), milliseconds(4'500));
}

}  // namespace
}  // namespace falcon
