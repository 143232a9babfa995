// The table of xpk 1.13.1's accelerator types: names, both spellings, what xpk would suggest.
#include "falcon/accelerator_types.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace falcon {
namespace {

using ::testing::ElementsAre;

TEST(AcceleratorTypes, TableIsSortedAndNamesXpksTypes) {
  const auto& table = xpk_accelerator_types();
  EXPECT_TRUE(std::is_sorted(table.begin(), table.end(),
                             [](const auto& a, const auto& b) { return a.name < b.name; }));
  // Counted from xpk 1.13.1's UserFacingNameToSystemCharacteristics.
  EXPECT_EQ(table.size(), 2057u);
  for (const char* name : {"v4-8", "v4-64", "v4-2x4x4", "v4-4096", "v5p-8", "v5litepod-16",
                           "v6e-256", "tpu7x-128", "h100-80gb-8", "a100-40gb-8", "l4-1", "b200-8",
                           "gb200-4", "n2-standard-32-4", "m1-megamem-96-1"}) {
    EXPECT_NE(find_xpk_accelerator_type(name), nullptr) << name;
  }
  for (const char* name : {"tpu-v4-64", "v4-65", "v5e-256", "nvidia-a100-80g", "v4-", ""}) {
    EXPECT_EQ(find_xpk_accelerator_type(name), nullptr) << name;
  }
}

TEST(AcceleratorTypes, EntriesSayWhatTheTypeIs) {
  const XpkAcceleratorType* v4 = find_xpk_accelerator_type("v4-64");
  ASSERT_NE(v4, nullptr);
  EXPECT_EQ(v4->device_class, DeviceClass::kTpu);
  EXPECT_EQ(v4->vms_per_slice, 8);  // 32 chips, 4 per VM
  EXPECT_EQ(v4->chips_per_vm, 4);
  EXPECT_EQ(v4->gke_accelerator, "tpu-v4-podslice");
  EXPECT_EQ(find_xpk_accelerator_type("v4-2x4x4")->vms_per_slice, 8);
  EXPECT_EQ(find_xpk_accelerator_type("v6e-1")->vms_per_slice, 1);
  const XpkAcceleratorType* h100 = find_xpk_accelerator_type("h100-80gb-8");
  EXPECT_EQ(h100->device_class, DeviceClass::kGpu);
  EXPECT_EQ(h100->chips_per_vm, 8);
  const XpkAcceleratorType* cpu = find_xpk_accelerator_type("n2-standard-32-4");
  EXPECT_EQ(cpu->device_class, DeviceClass::kCpu);
  EXPECT_EQ(cpu->vms_per_slice, 4);
}

TEST(AcceleratorTypes, BothSpellingsHaveOneCanonicalForm) {
  EXPECT_EQ(canonical_accelerator_type("tpu-v4-64"), "v4-64");
  EXPECT_EQ(canonical_accelerator_type("v4-64"), "v4-64");
  EXPECT_EQ(canonical_accelerator_type("tpu-v5p-8"), "v5p-8");
  EXPECT_EQ(canonical_accelerator_type("tpu7x-128"), "tpu7x-128");  // xpk's own tpu7x name
  EXPECT_EQ(canonical_accelerator_type("h100-80gb-8"), "h100-80gb-8");
  EXPECT_EQ(canonical_accelerator_type("tpu-h100-80gb-8"), std::nullopt);  // not a TPU
  EXPECT_EQ(canonical_accelerator_type("tpu-v4-65"), std::nullopt);
  EXPECT_EQ(canonical_accelerator_type("tpu-"), std::nullopt);
  // The spec's own example: Cloud TPU v5e is xpk's v5litepod.
  EXPECT_EQ(canonical_accelerator_type("tpu-v5e-256"), "v5litepod-256");
  EXPECT_EQ(canonical_accelerator_type("v5e-16"), "v5litepod-16");
  EXPECT_EQ(canonical_accelerator_type("tpu-v5e-48"), std::nullopt);  // no such slice
  EXPECT_EQ(canonical_accelerator_type("v5e-"), std::nullopt);
}

// As real xpk 1.13.1 answers `--tpu-type=tpu-v4-128` (reference/xpk.md).
TEST(AcceleratorTypes, ClosestMatchesAsXpksArgparseWordsThem) {
  EXPECT_THAT(closest_xpk_accelerator_types("tpu-v4-128", DeviceClass::kTpu),
              ElementsAre("tpu7-128", "v4-128", "tpu7x-128", "v4-1280", "tpu7x-1280"));
  EXPECT_THAT(closest_xpk_accelerator_types("h100-80gb", std::nullopt, 2),
              ElementsAre("h100-80gb-8", "h100-mega-80gb-8"));
}

TEST(AcceleratorTypes, SuggestionsForPeoplePutOneEditAwayFirst) {
  EXPECT_THAT(suggest_xpk_accelerator_types("v4-65", DeviceClass::kTpu, 3),
              ElementsAre("v4-64", "v4-6656", "v4-6528"));
  EXPECT_THAT(suggest_xpk_accelerator_types("v5litepod-15", DeviceClass::kTpu, 1),
              ElementsAre("v5litepod-16"));
  EXPECT_THAT(suggest_xpk_accelerator_types("v5e-256", DeviceClass::kTpu, 2),
              ElementsAre("v6e-256", "v5p-256"));
}

TEST(AcceleratorTypes, VersionIsNamed) { EXPECT_EQ(kXpkAcceleratorTableVersion, "1.13.1"); }

}  // namespace
}  // namespace falcon
