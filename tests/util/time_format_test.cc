#include "util/time_format.h"

#include <chrono>
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

namespace falcon {
namespace {

constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

TEST(TimeFormat, ParsesOffsetsFractionsAndBareDates) {
  EXPECT_EQ(parse_rfc3339_nanos("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(parse_rfc3339_nanos("1970-01-01"), 0);
  EXPECT_EQ(parse_rfc3339_nanos("1970-01-01T00:00:00.5Z"), 500'000'000);
  EXPECT_EQ(parse_rfc3339_nanos("1970-01-01T00:00:00.0000000019999Z"), 1);
  EXPECT_EQ(parse_rfc3339_nanos("1970-01-01T01:00:00+01:00"), 0);
  EXPECT_EQ(parse_rfc3339_nanos("1969-12-31T23:00:00-01:00"), 0);
  EXPECT_EQ(parse_rfc3339_nanos("1969-12-31T23:59:59.75Z"), -250'000'000);
  EXPECT_EQ(parse_rfc3339_nanos("2026-02-30T00:00:00Z"), std::nullopt);
  EXPECT_EQ(parse_rfc3339_nanos("2026-04-13T08:00:00"), std::nullopt);
}

// Every instant int64 nanoseconds can hold parses exactly, up to the last nanosecond at both
// ends, including the day of the minimum whose midnight is itself out of range.
// RFC 3339's offsets are hours 00-23 and minutes 00-59 (found by the fleet's own parser, written
// independently of this one).
TEST(TimeFormat, RejectsOffsetsOutsideTheGrammar) {
  EXPECT_TRUE(parse_rfc3339("2026-04-13T08:00:00+23:59"));
  EXPECT_FALSE(parse_rfc3339("2026-04-13T08:00:00+24:00"));
  EXPECT_FALSE(parse_rfc3339("2026-04-13T08:00:00+02:60"));
  EXPECT_FALSE(is_rfc3339_form("2026-04-13T08:00:00-24:00"));
  // A well-formed time the layer cannot hold keeps its form (values.h says "out of range").
  EXPECT_FALSE(parse_rfc3339("9999-12-31T23:59:59Z"));
  EXPECT_TRUE(is_rfc3339_form("9999-12-31T23:59:59Z"));
}

TEST(TimeFormat, ParsesBothEndsOfTheRepresentableRange) {
  EXPECT_EQ(parse_rfc3339_nanos("1677-09-21T00:12:43.145224192Z"), kMin);
  EXPECT_EQ(parse_rfc3339_nanos("2262-04-11T23:47:16.854775807Z"), kMax);
  EXPECT_EQ(parse_rfc3339_nanos("1677-09-21T01:12:43.145224192+01:00"), kMin);
  EXPECT_EQ(parse_rfc3339_nanos("2262-04-11T22:47:16.854775807-01:00"), kMax);
  EXPECT_EQ(format_rfc3339_nanos(kMin), "1677-09-21T00:12:43.145224192Z");
  EXPECT_EQ(format_rfc3339_nanos(kMax), "2262-04-11T23:47:16.854775807Z");
}

// Found by fuzz/time_parser: dates before 1677-09-21 or after 2262-04-11 overflowed int64
// (undefined behaviour, in practice a wrapped, wrong instant). They are not values.
TEST(TimeFormat, RejectsInstantsOutsideTheRangeInsteadOfWrapping) {
  for (const char* text : {
           "1677-09-21T00:12:43.145224191Z",       // one nanosecond before the minimum
           "1677-09-21T00:00:00Z",                 // its midnight
           "1677-09-21",                           // the bare date
           "1677-09-21T00:12:43.145224192+00:01",  // in range only before the offset
           "0000-01-01T00:00:00Z",
           "2262-04-11T23:47:16.854775808Z",  // one nanosecond after the maximum
           "2262-04-12",
           "2262-04-11T23:47:16.854775807-00:01",
           "9999-12-31T23:59:60.999999999Z",
       }) {
    EXPECT_EQ(parse_rfc3339_nanos(text), std::nullopt) << text;
    EXPECT_EQ(parse_rfc3339(text), std::nullopt) << text;
  }
}

TEST(TimeFormat, MillisecondFormatTruncatesTowardThePastAtBothEnds) {
  using std::chrono::nanoseconds;
  using std::chrono::system_clock;
  const auto at = [](std::int64_t n) { return system_clock::time_point(nanoseconds(n)); };
  EXPECT_EQ(format_iso8601(at(-1)), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(format_iso8601(at(1'999'999)), "1970-01-01T00:00:00.001Z");
  EXPECT_EQ(format_iso8601(at(kMin)), "1677-09-21T00:12:43.145Z");
  EXPECT_EQ(format_iso8601(at(kMax)), "2262-04-11T23:47:16.854Z");
}

}  // namespace
}  // namespace falcon
