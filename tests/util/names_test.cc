// The name rules, written as loops: right answers, and no trouble with huge input.
#include "util/names.h"

#include <gtest/gtest.h>

#include <string>

namespace falcon {
namespace {

TEST(Names, DnsLabel) {
  EXPECT_TRUE(is_dns_label("default"));
  EXPECT_TRUE(is_dns_label("0team-a1"));
  EXPECT_FALSE(is_dns_label(""));
  EXPECT_FALSE(is_dns_label("Team"));
  EXPECT_FALSE(is_dns_label("team-"));
  EXPECT_FALSE(is_dns_label("-team"));
  EXPECT_FALSE(is_dns_label("te_am"));
  EXPECT_TRUE(is_dns_label(std::string(63, 'a')));
  EXPECT_FALSE(is_dns_label(std::string(64, 'a')));
  EXPECT_FALSE(is_dns_label(std::string(1'000'000, 'a')));
}

TEST(Names, XpkName) {
  EXPECT_TRUE(is_xpk_name("tpu-v4-cluster"));
  EXPECT_FALSE(is_xpk_name("4tpu"));  // must start with a letter
  EXPECT_TRUE(is_xpk_name(std::string(40, 'a')));
  EXPECT_FALSE(is_xpk_name(std::string(41, 'a')));
}

TEST(Names, GcpProjectId) {
  EXPECT_TRUE(is_gcp_project_id("primatrix-tpu"));
  EXPECT_TRUE(is_gcp_project_id("example.com:my-project"));
  EXPECT_FALSE(is_gcp_project_id("My-Project"));
  EXPECT_FALSE(is_gcp_project_id("1project"));
  EXPECT_FALSE(is_gcp_project_id(std::string(31, 'a')));
  EXPECT_FALSE(is_gcp_project_id(":p"));
  EXPECT_FALSE(is_gcp_project_id("bad_domain.com:p"));
}

TEST(Names, LocationKinds) {
  EXPECT_EQ(gcp_location_kind("us-central1"), LocationKind::kRegion);
  EXPECT_EQ(gcp_location_kind("northamerica-northeast2"), LocationKind::kRegion);
  EXPECT_EQ(gcp_location_kind("us-central2-b"), LocationKind::kZone);
  EXPECT_EQ(gcp_location_kind("europe-west4-a"), LocationKind::kZone);
  for (const std::string bad : {"", "z", "us", "us-central", "us-central2-", "us-central2-1",
                                "US-central1", "us-central2-b-c", "us_central1"}) {
    EXPECT_EQ(gcp_location_kind(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(gcp_location_kind("us-central1-" + std::string(100'000, 'a')), std::nullopt);
}

TEST(Names, RegionOf) {
  EXPECT_EQ(region_of("us-central2-b"), "us-central2");
  EXPECT_EQ(region_of("us-central1"), "us-central1");
}

TEST(Names, Utf8SequenceLength) {
  EXPECT_EQ(utf8_sequence_length("a", 0), 1u);
  EXPECT_EQ(utf8_sequence_length("é", 0), 2u);
  EXPECT_EQ(utf8_sequence_length("€", 0), 3u);
  EXPECT_EQ(utf8_sequence_length("\xf0\x9f\x98\x80", 0), 4u);
  EXPECT_EQ(utf8_sequence_length("\xc0\xaf", 0), 0u);      // overlong
  EXPECT_EQ(utf8_sequence_length("\xed\xa0\x80", 0), 0u);  // surrogate
  EXPECT_EQ(utf8_sequence_length("\xe2\x82", 0), 0u);      // truncated
  EXPECT_EQ(utf8_sequence_length("\xf5\x80\x80\x80", 0), 0u);
}

}  // namespace
}  // namespace falcon
