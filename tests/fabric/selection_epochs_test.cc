// SelectionEpochs: one sequence, marks per accelerator type, gates apart from newer data.
#include "fabric/selection_epochs.h"

#include <gtest/gtest.h>

namespace falcon {
namespace {

ClusterConfig cluster(const std::string& name, std::vector<std::string> types) {
  ClusterConfig c;
  c.name = name;
  for (auto& t : types) c.accelerator_slots.push_back({t, DeviceClass::kTpu, 1});
  return c;
}

class SelectionEpochsTest : public ::testing::Test {
 protected:
  SelectionEpochsTest() {
    epochs_.set_clusters({cluster("tpu-a", {"tpu-v4-64"}), cluster("tpu-b", {"v4-64", "v5p-8"}),
                          cluster("tpu-c", {"v5litepod-256"})});
  }
  SelectionEpochs epochs_;
};

TEST_F(SelectionEpochsTest, NothingChangedSinceTheEpochADecisionRead) {
  const std::uint64_t e = epochs_.now();
  EXPECT_EQ(epochs_.since("tpu-v4-64", e), SelectionChange::kNone);
  EXPECT_EQ(epochs_.since("v5litepod-256", e), SelectionChange::kNone);
  // Loading the configuration was a gate for a decision made before it.
  EXPECT_EQ(epochs_.since("tpu-v4-64", e - 1), SelectionChange::kGate);
}

TEST_F(SelectionEpochsTest, AClustersInputMarksOnlyTheTypesItOffersInEitherSpelling) {
  const std::uint64_t e = epochs_.now();
  epochs_.touch_cluster("tpu-c", SelectionEpochs::Input::kData);
  EXPECT_EQ(epochs_.since("tpu-v4-64", e), SelectionChange::kNone);
  EXPECT_EQ(epochs_.since("v4-64", e), SelectionChange::kNone);
  EXPECT_EQ(epochs_.since("v5litepod-256", e), SelectionChange::kNewerData);

  const std::uint64_t e2 = epochs_.now();
  epochs_.touch_cluster("tpu-b", SelectionEpochs::Input::kGate);
  EXPECT_EQ(epochs_.since("tpu-v4-64", e2), SelectionChange::kGate);  // tpu-b offers v4-64
  EXPECT_EQ(epochs_.since("v5p-8", e2), SelectionChange::kGate);
  EXPECT_EQ(epochs_.since("v5litepod-256", e2), SelectionChange::kNone);
  // A gate after newer data is a gate; newer data after a gate does not hide it.
  epochs_.touch_cluster("tpu-a", SelectionEpochs::Input::kData);
  EXPECT_EQ(epochs_.since("tpu-v4-64", e2), SelectionChange::kGate);
}

TEST_F(SelectionEpochsTest, ASlotsBreakerMarksItsTypeOnly) {
  const std::uint64_t e = epochs_.now();
  epochs_.touch_type("v5p-8", SelectionEpochs::Input::kGate);
  EXPECT_EQ(epochs_.since("v5p-8", e), SelectionChange::kGate);
  EXPECT_EQ(epochs_.since("tpu-v4-64", e), SelectionChange::kNone);
}

TEST_F(SelectionEpochsTest, TypesNoClusterOffersAndClustersNotKnownAreNeverMissed) {
  const std::uint64_t e = epochs_.now();
  // A type nobody offers shares one mark that every input moves.
  epochs_.touch_cluster("tpu-a", SelectionEpochs::Input::kData);
  EXPECT_EQ(epochs_.since("h100-80gb-8", e), SelectionChange::kNewerData);
  // An input of a cluster this configuration does not name touches every type.
  const std::uint64_t e2 = epochs_.now();
  epochs_.touch_cluster("gone", SelectionEpochs::Input::kGate);
  EXPECT_EQ(epochs_.since("tpu-v4-64", e2), SelectionChange::kGate);
  EXPECT_EQ(epochs_.since("v5litepod-256", e2), SelectionChange::kGate);
}

TEST_F(SelectionEpochsTest, AReloadIsAGateForEveryTypeAndLearnsNewOffers) {
  const std::uint64_t e = epochs_.now();
  epochs_.set_clusters({cluster("tpu-a", {"tpu-v4-64", "v5litepod-256"})});
  EXPECT_EQ(epochs_.since("tpu-v4-64", e), SelectionChange::kGate);
  EXPECT_EQ(epochs_.since("v5p-8", e), SelectionChange::kGate);  // kept, marked
  const std::uint64_t e2 = epochs_.now();
  epochs_.touch_cluster("tpu-a", SelectionEpochs::Input::kData);
  EXPECT_EQ(epochs_.since("v5litepod-256", e2), SelectionChange::kNewerData);
  EXPECT_EQ(epochs_.since("v5p-8", e2), SelectionChange::kNone);  // tpu-b is gone
}

}  // namespace
}  // namespace falcon
