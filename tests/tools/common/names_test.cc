// The name rules the fake xpk and gcloud enforce (common/names.h).
#include <gtest/gtest.h>

#include "common/names.h"

namespace falcon::tools {
namespace {

TEST(XpkName, MatchesXpksPatternUpToFortyCharacters) {
  EXPECT_TRUE(is_xpk_name("a"));
  EXPECT_TRUE(is_xpk_name("llama-8b-bench-01"));
  EXPECT_TRUE(is_xpk_name("a--b"));
  EXPECT_TRUE(is_xpk_name(std::string(40, 'a')));
  EXPECT_FALSE(is_xpk_name(std::string(41, 'a')));
  for (const char* name :
       {"", "1abc", "-abc", "abc-", "ab_c", "Abc", "ab.c", "ab c", "abc\n", "a\xc3\xa9"}) {
    EXPECT_FALSE(is_xpk_name(name)) << name;
  }
  EXPECT_FALSE(is_xpk_name(std::string("ab\0c", 4)));
}

TEST(XpkName, ErrorIsXpksWords) {
  EXPECT_EQ(xpk_name_error("Bad_Name"),
            "Name must be less than 40 characters and match the pattern "
            "`[a-z]([-a-z0-9]*[a-z0-9])?` Name is currently Bad_Name");
}

TEST(GcpLocation, TellsRegionsFromZones) {
  for (const char* region : {"us-central1", "us-east5", "europe-west12", "northamerica-northeast2",
                             "me-central2", "asia-southeast1"}) {
    EXPECT_EQ(gcp_location_kind(region), LocationKind::kRegion) << region;
  }
  for (const char* zone : {"us-central2-b", "us-east5-a", "europe-west4-c", "us-central1-ai1a"}) {
    EXPECT_EQ(gcp_location_kind(zone), LocationKind::kZone) << zone;
  }
}

TEST(GcpLocation, RefusesOtherShapes) {
  for (const char* text : {"", "z", "Mars", "us", "us-central", "central1", "us-central1-",
                           "us-central1-1", "us-central1-b-c", "US-CENTRAL1", "us_central1",
                           "us-central1-abcde", "us-central1 ", "-us-central1", "us--central1"}) {
    EXPECT_FALSE(gcp_location_kind(text)) << text;
  }
  EXPECT_FALSE(gcp_location_kind("a-" + std::string(62, 'b') + "1"));  // 65 characters
}

TEST(GcpLocation, RegionOfAZoneDropsItsSuffix) {
  EXPECT_EQ(region_of("us-central2-b"), "us-central2");
  EXPECT_EQ(region_of("us-central1-ai1a"), "us-central1");
  EXPECT_EQ(region_of("us-east5"), "us-east5");
  EXPECT_EQ(region_of("Mars"), "Mars");
  EXPECT_EQ(region_of("z-b"), "z-b");
}

}  // namespace
}  // namespace falcon::tools
