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

TEST(FollowUntilFinished, TheLingerIsAPollAndFiveSeconds) {
  FollowOptions options;
  options.poll_interval = milliseconds(2'500);
  EXPECT_EQ(follow_linger(options), milliseconds(7'500));
}

TEST(ResolveSince, TimesStayAndAgesCountBackFromNow) {
  const FakeClock clock;  // 2026-04-13T08:00:00Z
  EXPECT_EQ(resolve_since("2026-04-13T07:00:00Z", clock.now()), "2026-04-13T07:00:00Z");
  EXPECT_EQ(resolve_since("90s", clock.now()), "2026-04-13T07:58:30.000Z");
  EXPECT_EQ(resolve_since("30m", clock.now()), "2026-04-13T07:30:00.000Z");
  EXPECT_EQ(resolve_since("6h", clock.now()), "2026-04-13T02:00:00.000Z");
  EXPECT_EQ(resolve_since("2d", clock.now()), "2026-04-11T08:00:00.000Z");
}

TEST(ResolveSince, RejectsWhatItCannotRepresent) {
  const FakeClock clock;
  for (const char* bad : {"", "m", "5", "5w", "-5m", "5 m", "last tuesday", "1e3s"}) {
    EXPECT_THROW(resolve_since(bad, clock.now()), std::invalid_argument) << bad;
  }
  // Ages before 1970, and ages whose seconds would overflow, are errors, not wrong windows.
  for (const char* old :
       {"106752d", "20600d", "99999999999999999999999d", "9223372036854775807s"}) {
    try {
      resolve_since(old, clock.now());
      ADD_FAILURE() << old;
    } catch (const std::invalid_argument& e) {
      EXPECT_THAT(e.what(), HasSubstr("before 1970")) << old;
    }
  }
  EXPECT_NO_THROW(resolve_since("20000d", clock.now()));
}

}  // namespace
}  // namespace falcon
