// The fleet's own table of xpk 1.13.1's accelerator types (common/xpk_accelerators.h) and the
// "closest matches" argparse prints (common/closest_matches.h). The expected values were read
// from xpk 1.13.1's src/xpk/core/system_characteristics.py and Python 3.11's difflib.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "common/closest_matches.h"
#include "common/xpk_accelerators.h"

namespace falcon::tools {
namespace {

using ::testing::ElementsAre;

void expect_system(std::string_view name, DeviceClass device_class, int vms, int chips,
                   std::string_view label) {
  const XpkSystem* s = find_xpk_system(name);
  ASSERT_NE(s, nullptr) << name;
  EXPECT_EQ(s->name, name);
  EXPECT_EQ(s->device_class, device_class) << name;
  EXPECT_EQ(s->vms_per_slice, vms) << name;
  EXPECT_EQ(s->chips_per_vm, chips) << name;
  EXPECT_EQ(s->gke_accelerator, label) << name;
}

TEST(XpkAccelerators, HasXpksNamesAndNoOthers) {
  std::set<std::string> names;
  int tpu = 0, gpu = 0, cpu = 0;
  for (const XpkSystem& s : xpk_systems()) {
    EXPECT_TRUE(names.insert(s.name).second) << "twice: " << s.name;
    (s.device_class == DeviceClass::kTpu ? tpu : s.device_class == DeviceClass::kGpu ? gpu : cpu)++;
  }
  EXPECT_EQ(names.size(), 2057u);
  EXPECT_EQ(tpu, 2020);
  EXPECT_EQ(gpu, 14);
  EXPECT_EQ(cpu, 23);
  for (const char* absent : {"v4-4", "v4-16384", "v4-48", "v3-8", "v2-8", "v5e-8", "v5litepod-4",
                             "a100-80gb-8", "h100-80gb-16", "tpu-v4-64", "V4-8", ""}) {
    EXPECT_EQ(find_xpk_system(absent), nullptr) << absent;
  }
}

TEST(XpkAccelerators, TpuSlicesByTensorCoresAndByTopology) {
  const DeviceClass t = DeviceClass::kTpu;
  expect_system("v4-8", t, 1, 4, "tpu-v4-podslice");
  expect_system("v4-64", t, 8, 4, "tpu-v4-podslice");
  expect_system("v4-2x4x4", t, 8, 4, "tpu-v4-podslice");
  expect_system("v4-8x4x4", t, 32, 4, "tpu-v4-podslice");  // v4 cubes' sides in any order
  expect_system("v4-4096", t, 512, 4, "tpu-v4-podslice");
  expect_system("v4-8192", t, 1024, 4, "tpu-v4-podslice");
  expect_system("v5p-8", t, 1, 4, "tpu-v5p-slice");
  expect_system("v5p-17920", t, 2240, 4, "tpu-v5p-slice");
  EXPECT_EQ(find_xpk_system("v5p-8x4x4"), nullptr);  // v5p's in increasing order
  EXPECT_EQ(find_xpk_system("v4-4x2x4"), nullptr);   // not one of the four small shapes
  expect_system("v5litepod-8", t, 2, 4, "tpu-v5-lite-podslice");
  expect_system("v5litepod-256", t, 64, 4, "tpu-v5-lite-podslice");
  expect_system("v6e-1", t, 1, 1, "tpu-v6e-slice");
  expect_system("v6e-4", t, 1, 4, "tpu-v6e-slice");
  expect_system("v6e-16x16", t, 64, 4, "tpu-v6e-slice");
  expect_system("tpu7-2", t, 1, 1, "tpu7");
  expect_system("tpu7-128", t, 16, 4, "tpu7");
  expect_system("tpu7x-1x1x1", t, 1, 1, "tpu7x");
  expect_system("tpu7x-18432", t, 2304, 4, "tpu7x");
}

TEST(XpkAccelerators, GpuAndCpuTypes) {
  const DeviceClass g = DeviceClass::kGpu;
  expect_system("h100-80gb-8", g, 1, 8, "nvidia-h100-80gb");
  expect_system("h100-mega-80gb-8", g, 1, 8, "nvidia-h100-mega-80gb");
  expect_system("a100-40gb-2", g, 1, 2, "nvidia-tesla-a100");
  expect_system("l4-1", g, 1, 1, "nvidia-l4");
  expect_system("gb200-4-nolssd", g, 1, 4, "nvidia-gb200");
  const DeviceClass c = DeviceClass::kCpu;
  expect_system("n2-standard-32-4", c, 4, 32, "");
  expect_system("n2-standard-32-2048", c, 2048, 32, "");
  expect_system("n2-standard-4-256", c, 256, 4, "");
  expect_system("m1-megamem-96-1", c, 1, 96, "");
}

TEST(XpkAccelerators, NamesByClass) {
  EXPECT_EQ(xpk_system_names(DeviceClass::kTpu).size(), 2020u);
  EXPECT_THAT(xpk_system_names(DeviceClass::kGpu),
              ElementsAre("l4-1", "l4-2", "l4-4", "l4-8", "a100-40gb-1", "a100-40gb-2",
                          "a100-40gb-4", "a100-40gb-8", "gb200-4", "gb200-4-nolssd", "b200-8",
                          "h200-141gb-8", "h100-80gb-8", "h100-mega-80gb-8"));
  EXPECT_EQ(xpk_system_names(std::nullopt).size(), 2057u);
}

TEST(XpkAccelerators, SpecSpellingOfTpuTypes) {
  EXPECT_EQ(xpk_name_for("v4-64"), "v4-64");
  EXPECT_EQ(xpk_name_for("tpu-v4-64"), "v4-64");
  EXPECT_EQ(xpk_name_for("tpu-v5e-256"), "v5litepod-256");
  EXPECT_EQ(xpk_name_for("tpu-v5litepod-16"), "v5litepod-16");
  EXPECT_EQ(xpk_name_for("tpu-tpu7x-128"), "tpu7x-128");
  EXPECT_EQ(xpk_name_for("h100-80gb-8"), "h100-80gb-8");
  EXPECT_EQ(xpk_name_for("tpu-h100-80gb-8"), std::nullopt);  // the prefix is for TPUs
  EXPECT_EQ(xpk_name_for("tpu-v4-48"), std::nullopt);
  EXPECT_EQ(xpk_name_for("v5e-256"), std::nullopt);  // neither xpk's spelling nor the spec's
  EXPECT_EQ(xpk_name_for("tpu-"), std::nullopt);
  EXPECT_EQ(xpk_name_for(""), std::nullopt);
}

TEST(XpkAccelerators, ClosestMatchesAreArgparses) {
  EXPECT_THAT(xpk_closest_matches("tpu-v4-128", DeviceClass::kTpu),
              ElementsAre("tpu7-128", "v4-128", "tpu7x-128", "v4-1280", "tpu7x-1280"));
  EXPECT_THAT(xpk_closest_matches("v4-65", DeviceClass::kTpu),
              ElementsAre("v4-6656", "v4-6528", "v4-64", "v4-16", "v4-896"));
  EXPECT_THAT(xpk_closest_matches("tpu-v4-64", std::nullopt),
              ElementsAre("tpu7-64", "tpu7x-4864", "v4-64", "tpu7x-64", "v4-640"));
  EXPECT_THAT(
      xpk_closest_matches("a100-80gb-8", std::nullopt),
      ElementsAre("h100-80gb-8", "a100-40gb-8", "a100-40gb-4", "a100-40gb-2", "a100-40gb-1"));
  EXPECT_THAT(xpk_closest_matches("n2-standard-32-3", std::nullopt, 3),
              ElementsAre("n2-standard-32-32", "n2-standard-32-8", "n2-standard-32-4"));
  EXPECT_THAT(xpk_closest_matches("", DeviceClass::kTpu),
              ElementsAre("v6e-8x8", "v6e-8x16", "v6e-8", "v6e-64", "v6e-4x8"));
}

TEST(ClosestMatches, RatioIsDifflibs) {
  // difflib.SequenceMatcher(None, "abxcd", "abcd"): blocks "ab" and "cd".
  const MatchRatio r = sequence_match_ratio("abxcd", "abcd");
  EXPECT_EQ(r.twice_matches, 8u);
  EXPECT_EQ(r.total_length, 9u);
  EXPECT_EQ(sequence_match_ratio("", "").total_length, 0u);
  EXPECT_EQ(sequence_match_ratio("abc", "").twice_matches, 0u);
}

TEST(ClosestMatches, TiesGoToTheLargerCandidateWhateverTheOrder) {
  // Each shares one character with "ab": ratio 0.5 for all three.
  EXPECT_THAT(closest_matches("ab", {"xb", "ax", "bx"}, 3), ElementsAre("xb", "bx", "ax"));
  EXPECT_THAT(closest_matches("ab", {"ax", "bx", "xb"}, 2), ElementsAre("xb", "bx"));
  EXPECT_THAT(closest_matches("ab", {}, 5), ElementsAre());
}

TEST(ClosestMatches, ComparesCharactersNotBytes) {
  // "é" is one character to Python: "é-8" is as close to "e-8" as "x-8" is.
  EXPECT_THAT(closest_matches("\xc3\xa9-8", {"e-8", "x-88"}, 2), ElementsAre("e-8", "x-88"));
  const MatchRatio r = sequence_match_ratio("e-8", "\xc3\xa9-8");
  EXPECT_EQ(r.twice_matches, 4u);
  EXPECT_EQ(r.total_length, 6u);
}

}  // namespace
}  // namespace falcon::tools
