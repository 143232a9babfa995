#include "falcon/values.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "falcon/exit_codes.h"

#include "support/fake_clock.h"

namespace falcon {
namespace {

using testing::FakeClock;
using ::testing::HasSubstr;
using ::testing::Not;

// The message of the InvalidValueError `f` throws; fails the test when it throws nothing.
template <typename F>
std::string problem(F&& f) {
  try {
    f();
  } catch (const InvalidValueError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InvalidValueError";
  return "";
}

TEST(Values, AnInvalidValueIsAUsageErrorNamingItsField) {
  const InvalidValueError e("--rank", "'x' is not a whole number from 0 to 100000");
  EXPECT_STREQ(e.what(), "--rank: 'x' is not a whole number from 0 to 100000");
  EXPECT_EQ(e.field(), "--rank");
  EXPECT_STREQ(e.type_name(), "InvalidValueError");
  nlohmann::json details;
  e.add_details(details);
  EXPECT_EQ(details["field"], "--rank");
  const ErrorAnswer* answer = find_error_answer("InvalidValueError");
  ASSERT_NE(answer, nullptr);
  EXPECT_EQ(answer->exit_code, kExitUsage);
  EXPECT_EQ(answer->http_status, 400);
}

TEST(Values, WorkloadNamesFollowXpksRule) {
  for (const std::string& good :
       std::vector<std::string>{"a", "bench-1", "x1-y2", std::string(40, 'a')}) {
    EXPECT_NO_THROW(check_workload_name("workload", good)) << good;
  }
  for (const std::string& bad :
       std::vector<std::string>{"", "1abc", "Abc", "a_b", "a-", "-a", std::string(41, 'a')}) {
    EXPECT_THROW(check_workload_name("workload", bad), InvalidValueError) << bad;
  }
  EXPECT_THAT(problem([] { check_workload_name("workload", "Bad_Name"); }),
              HasSubstr("workload: 'Bad_Name' is not a workload name"));
}

TEST(Values, ClusterNamesAreDnsLabels) {
  EXPECT_NO_THROW(check_cluster_name("--cluster", "tpu-v4-east"));
  EXPECT_NO_THROW(check_cluster_name("--cluster", "1st"));
  EXPECT_THROW(check_cluster_name("--cluster", "Tpu"), InvalidValueError);
  EXPECT_THROW(check_cluster_name("--cluster", std::string(64, 'a')), InvalidValueError);
}

TEST(Values, EchoedValuesAreShortAndEscaped) {
  // A terminal escape sequence never reaches the terminal; a huge value is cut and sized.
  const std::string escape = problem([] { check_cluster_name("cluster", "c\x1b[2Jx"); });
  EXPECT_THAT(escape, HasSubstr("'c\\x1b[2Jx'"));
  EXPECT_THAT(escape, Not(HasSubstr("\x1b")));
  const std::string huge =
      problem([] { check_workload_name("workload", std::string(100000, 'a')); });
  EXPECT_LT(huge.size(), 400u);
  EXPECT_THAT(huge, HasSubstr("(100000 bytes)"));
  const std::string lines = problem([] { parse_index("--rank", "1\n2", kMaxRank); });
  EXPECT_THAT(lines, HasSubstr("'1\\n2'"));
}

TEST(Values, IndexesAreWholeNumbersInRange) {
  EXPECT_EQ(parse_index("--rank", "0", kMaxRank), 0);
  EXPECT_EQ(parse_index("--rank", "100000", kMaxRank), 100000);
  for (const char* bad :
       {"", "-1", "+1", "1.5", "1e3", "100001", "2147483647", "99999999999999999999999", " 1"}) {
    EXPECT_THROW(parse_index("--rank", bad, kMaxRank), InvalidValueError) << bad;
  }
  // The bound is the layer's, said in a few digits (not a 309-digit double).
  EXPECT_EQ(problem([] { parse_index("--slice", "-1", kMaxSlice); }),
            "--slice: '-1' is not a whole number from 0 to 100000");
  EXPECT_EQ(check_index("slice", 7, kMaxSlice), 7);
  EXPECT_EQ(problem([] { check_index("slice", 2147483647, kMaxSlice); }),
            "slice: 2147483647 is not a whole number from 0 to 100000");
}

TEST(Values, SinceTakesTimesAndAgesCountedBackFromNow) {
  const FakeClock clock;  // 2026-04-13T08:00:00Z
  EXPECT_EQ(check_since("--since", "2026-04-13T07:00:00Z", clock.now()), "2026-04-13T07:00:00Z");
  EXPECT_EQ(check_since("--since", "90s", clock.now()), "2026-04-13T07:58:30.000Z");
  EXPECT_EQ(check_since("--since", "30m", clock.now()), "2026-04-13T07:30:00.000Z");
  EXPECT_EQ(check_since("--since", "6h", clock.now()), "2026-04-13T02:00:00.000Z");
  EXPECT_EQ(check_since("--since", "2d", clock.now()), "2026-04-11T08:00:00.000Z");
  EXPECT_NO_THROW(check_since("--since", "20000d", clock.now()));
}

TEST(Values, SinceSaysWhyATimeIsRefused) {
  const FakeClock clock;
  for (const char* bad : {"", "m", "5", "5w", "-5m", "5 m", "last tuesday", "1e3s"}) {
    EXPECT_THAT(problem([&] { check_since("--since", bad, clock.now()); }),
                HasSubstr("is neither an RFC 3339 time"))
        << bad;
  }
  // A well-formed time the layer cannot hold is out of range, not "not RFC 3339".
  EXPECT_THAT(problem([&] { check_since("--since", "9999-12-31T23:59:59Z", clock.now()); }),
              HasSubstr("'9999-12-31T23:59:59Z' is out of range"));
  // Ages before 1970, and ages whose seconds would overflow, are errors, not wrong windows.
  for (const char* old :
       {"106752d", "20600d", "99999999999999999999999d", "9223372036854775807s"}) {
    EXPECT_THAT(problem([&] { check_since("--since", old, clock.now()); }),
                HasSubstr("before 1970"))
        << old;
  }
}

}  // namespace
}  // namespace falcon
