// The tools' own RFC 3339 reading and writing (common/rfc3339.h): what Google's APIs send and
// accept, round trips at nanosecond precision, and every malformed shape refused.
#include <gtest/gtest.h>

#include <limits>

#include "common/rfc3339.h"

namespace falcon::tools {
namespace {

constexpr std::int64_t kSecond = 1'000'000'000;
// 2026-04-13T08:00:00Z
constexpr std::int64_t kApril13 = 1'776'067'200LL * kSecond;

TEST(Rfc3339, ReadsUtcWithNanoseconds) {
  EXPECT_EQ(parse_rfc3339_nanos("2026-04-13T08:00:00Z"), kApril13);
  EXPECT_EQ(parse_rfc3339_nanos("2026-04-13T08:00:00.123456789Z"), kApril13 + 123'456'789);
  EXPECT_EQ(parse_rfc3339_nanos("1970-01-01T00:00:00Z"), 0);
}

TEST(Rfc3339, ReadsFractionsOfAnyLength) {
  EXPECT_EQ(parse_rfc3339_nanos("2026-04-13T08:00:00.5Z"), kApril13 + 500'000'000);
  EXPECT_EQ(parse_rfc3339_nanos("2026-04-13T08:00:00.000001Z"), kApril13 + 1'000);
  // Digits past the ninth are below a nanosecond: dropped, not rounded.
  EXPECT_EQ(parse_rfc3339_nanos("2026-04-13T08:00:00.1234567899999Z"), kApril13 + 123'456'789);
}

TEST(Rfc3339, AppliesOffsets) {
  EXPECT_EQ(parse_rfc3339_nanos("2026-04-13T10:00:00+02:00"), kApril13);
  EXPECT_EQ(parse_rfc3339_nanos("2026-04-13T02:30:00.25-05:30"), kApril13 + 250'000'000);
  EXPECT_EQ(parse_rfc3339_nanos("2026-04-13T08:00:00-00:00"), kApril13);
  // Across a day and a year boundary.
  EXPECT_EQ(parse_rfc3339_nanos("2027-01-01T00:30:00+01:00"),
            parse_rfc3339_nanos("2026-12-31T23:30:00Z"));
}

TEST(Rfc3339, AcceptsLowerCaseTAndZAndABareDate) {
  EXPECT_EQ(parse_rfc3339_nanos("2026-04-13t08:00:00z"), kApril13);
  EXPECT_EQ(parse_rfc3339_nanos("2026-04-13"), kApril13 - 8 * 3600 * kSecond);
}

TEST(Rfc3339, ChecksTheCalendar) {
  EXPECT_TRUE(parse_rfc3339_nanos("2024-02-29T00:00:00Z"));   // leap year
  EXPECT_FALSE(parse_rfc3339_nanos("2026-02-29T00:00:00Z"));  // not one
  EXPECT_FALSE(parse_rfc3339_nanos("2100-02-29T00:00:00Z"));  // a century
  EXPECT_TRUE(parse_rfc3339_nanos("2000-02-29T00:00:00Z"));   // a fourth century
  EXPECT_FALSE(parse_rfc3339_nanos("2026-04-31T00:00:00Z"));
  EXPECT_FALSE(parse_rfc3339_nanos("2026-13-01T00:00:00Z"));
  EXPECT_FALSE(parse_rfc3339_nanos("2026-00-10T00:00:00Z"));
  EXPECT_FALSE(parse_rfc3339_nanos("2026-01-00T00:00:00Z"));
  EXPECT_FALSE(parse_rfc3339_nanos("2026-04-13T24:00:00Z"));
  EXPECT_FALSE(parse_rfc3339_nanos("2026-04-13T08:60:00Z"));
  EXPECT_FALSE(parse_rfc3339_nanos("2026-06-30T23:59:60Z"));  // no leap second
  EXPECT_FALSE(parse_rfc3339_nanos("2026-04-13T08:00:00+24:00"));
  EXPECT_FALSE(parse_rfc3339_nanos("2026-04-13T08:00:00+02:60"));
}

TEST(Rfc3339, RefusesMalformedText) {
  for (const char* text :
       {"", "2026", "2026-04-13T", "2026-04-13T08:00:00", "2026-04-13 08:00:00Z",
        "2026-4-13T08:00:00Z", "2026-04-13T8:00:00Z", "2026-04-13T08:00Z", "2026-04-13T08:00:00.Z",
        "2026-04-13T08:00:00,5Z", "2026-04-13T08:00:00ZZ", "2026-04-13T08:00:00Z ",
        " 2026-04-13T08:00:00Z", "2026-04-13T08:00:00+0200", "2026-04-13T08:00:00+02",
        "+2026-04-13", "2026-04-13T08:00:00.5x", "2026-04-13X", "２０２６-04-13"}) {
    EXPECT_FALSE(parse_rfc3339_nanos(text)) << text;
  }
}

TEST(Rfc3339, RefusesInstantsAnInt64CannotHold) {
  EXPECT_EQ(parse_rfc3339_nanos("2262-04-11T23:47:16.854775807Z"),
            std::numeric_limits<std::int64_t>::max());
  EXPECT_FALSE(parse_rfc3339_nanos("2262-04-11T23:47:16.854775808Z"));
  EXPECT_EQ(parse_rfc3339_nanos("1677-09-21T00:12:43.145224192Z"),
            std::numeric_limits<std::int64_t>::min());
  EXPECT_FALSE(parse_rfc3339_nanos("1677-09-21T00:12:43.145224191Z"));
  EXPECT_FALSE(parse_rfc3339_nanos("9999-12-31T23:59:59Z"));
  EXPECT_FALSE(parse_rfc3339_nanos("0000-01-01"));
}

TEST(Rfc3339, FormatsWithTheDigitsAskedFor) {
  const std::int64_t t = kApril13 + 123'456'789;
  EXPECT_EQ(format_rfc3339_nanos(t), "2026-04-13T08:00:00.123456789Z");
  EXPECT_EQ(format_rfc3339(t, 9), "2026-04-13T08:00:00.123456789Z");
  EXPECT_EQ(format_rfc3339(t, 6), "2026-04-13T08:00:00.123456Z");
  EXPECT_EQ(format_rfc3339(t, 3), "2026-04-13T08:00:00.123Z");
  EXPECT_EQ(format_rfc3339(t, 0), "2026-04-13T08:00:00Z");
  EXPECT_EQ(format_rfc3339(kApril13 + 999'999'999, 3), "2026-04-13T08:00:00.999Z");  // truncated
  EXPECT_EQ(format_rfc3339_nanos(0), "1970-01-01T00:00:00.000000000Z");
}

TEST(Rfc3339, FormatsInstantsBefore1970) {
  EXPECT_EQ(format_rfc3339_nanos(-1), "1969-12-31T23:59:59.999999999Z");
  EXPECT_EQ(format_rfc3339(-kSecond / 2, 0), "1969-12-31T23:59:59Z");
  EXPECT_EQ(format_rfc3339_nanos(std::numeric_limits<std::int64_t>::min()),
            "1677-09-21T00:12:43.145224192Z");
  EXPECT_EQ(format_rfc3339_nanos(std::numeric_limits<std::int64_t>::max()),
            "2262-04-11T23:47:16.854775807Z");
}

TEST(Rfc3339, RoundTripsEveryInstant) {
  for (std::int64_t t :
       {std::int64_t{0}, std::int64_t{1}, std::int64_t{-1}, kApril13 + 7,
        std::int64_t{951'782'400} * kSecond - 1,  // 2000-02-28T23:59:59.999999999
        std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()}) {
    EXPECT_EQ(parse_rfc3339_nanos(format_rfc3339_nanos(t)), t) << t;
  }
  // A year of instants a prime number of seconds and nanoseconds apart.
  for (std::int64_t t = kApril13; t < kApril13 + 366LL * 86'400 * kSecond;
       t += 7'919LL * kSecond + 104'729) {
    ASSERT_EQ(parse_rfc3339_nanos(format_rfc3339_nanos(t)), t) << format_rfc3339_nanos(t);
  }
}

TEST(Rfc3339, ConvertsToAndFromSystemClock) {
  const auto t = parse_rfc3339("2026-04-13T08:00:00.000000042Z");
  ASSERT_TRUE(t);
  EXPECT_EQ(to_nanos(*t), kApril13 + 42);
  EXPECT_FALSE(parse_rfc3339("yesterday"));
}

}  // namespace
}  // namespace falcon::tools
