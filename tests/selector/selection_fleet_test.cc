// Selection against the local fleet (issue 15), through a real ClusterFabric: a flapping
// cluster trips its circuit breaker and recovers (one half-open trial, closed on success), and
// fragmentation, read from the cluster's Kueue ClusterQueue by the kube backend, rules a
// cluster out. The fabric's clock is the fleet's manual clock, so cool-downs are simulated
// seconds and nothing sleeps.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "falcon/circuit_breaker.h"
#include "falcon/clock.h"
#include "falcon/errors.h"
#include "falcon/fabric.h"
#include "fleet/fleet_config.h"
#include "fleet/fleet_service.h"
#include "support/run_falcon.h"
#include "support/temp_dir.h"

namespace falcon {
namespace {

using ::testing::HasSubstr;

// The fleet's simulated wall time; real monotonic time for timeouts.
class FleetTime final : public Clock {
 public:
  explicit FleetTime(fleet::SimClock& sim) : sim_(sim) {}
  std::chrono::system_clock::time_point now() const override {
    return std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::nanoseconds(sim_.now_ns())));
  }
  std::chrono::steady_clock::time_point steady_now() const override {
    return std::chrono::steady_clock::now();
  }
  void sleep_for(std::chrono::nanoseconds d) const override { std::this_thread::sleep_for(d); }

 private:
  fleet::SimClock& sim_;
};

// flap: down for the first 300 s of every 600 s. frag: four 32-chip blocks. whole: one 128.
constexpr const char* kFleet = R"(
time_scale: 0
defaults: {duration_s: 3600, steps: 1}
clusters:
  flap:
    project: proj
    zone: us-central2-b
    cluster_id: flap
    capacity: {tpu-v4-64: 4, tpu-v4-32: 8}
    behaviour: {flap: {period_s: 600, down_s: 300}}
  frag:
    project: proj
    zone: us-central2-b
    cluster_id: frag
    capacity: {tpu-v4-64: 4, tpu-v4-32: 8}
    topology: {tpu-v4-podslice: [32, 32, 32, 32]}
  whole:
    project: proj
    zone: us-central2-b
    cluster_id: whole
    capacity: {tpu-v4-64: 4, tpu-v4-32: 8}
    topology: {tpu-v4-podslice: [128]}
)";

class SelectionFleetTest : public ::testing::Test {
 protected:
  SelectionFleetTest() {
    fleet::FleetServiceOptions options;
    options.time_scale = 0;
    options.require_auth = false;
    fleet_ =
        std::make_unique<fleet::FleetService>(fleet::parse_fleet_config(kFleet, "t.yaml"), options);
    fleet_->start();
  }
  ~SelectionFleetTest() override { fleet_->stop(); }

  // A fabric over `clusters` ("name:priority" each) with `policy` and the `backend` prober.
  std::unique_ptr<ClusterFabric> fabric(const std::vector<std::pair<std::string, int>>& clusters,
                                        const std::string& policy, const std::string& backend) {
    std::string y = "clusters:\n";
    for (const auto& [name, priority] : clusters) {
      y += fmt::format(
          "  {0}:\n    project: proj\n    zone: us-central2-b\n    cluster_id: {0}\n"
          "    accelerator_types: [{{type: tpu-v4-64, device_class: tpu, priority: {1}}}]\n"
          "    probe_timeout_s: 30\n",
          name, priority);
    }
    y += fmt::format(
        "probe: {{backend: {}}}\nselection:\n  policy: {}\n"
        "  breaker: {{failures: 3, cooldown_s: 60, cooldown_max_s: 600}}\n"
        "xpk:\n  binary: {}\n  gcloud_binary: {}\n  state_dir: {}\n"
        "  env: {{FALCON_FLEET_URL: \"{}\"}}\n",
        backend, policy, testing::built_binary("fleet-xpk"), testing::built_binary("fleet-gcloud"),
        (dir_.path() / "state").string(), fleet_->url());
    const auto path = dir_.write("repos.yaml", y);
    FabricDependencies deps;
    deps.clock = std::make_shared<FleetTime>(fleet_->clock());
    auto f = std::make_unique<ClusterFabric>(path.string(), deps);
    if (backend == "kube") {
      for (const auto& w : f->warm_up()) EXPECT_TRUE(w.ok) << w.cluster << ": " << *w.error;
    }
    return f;
  }

  void advance(std::chrono::seconds d) {
    fleet_->clock().advance(d);
    fleet_->simulator().advance();
  }

  const CandidateScore& score_of(const ClusterSelection& s, const std::string& cluster) {
    for (const auto& c : s.scores) {
      if (c.cluster == cluster) return c;
    }
    ADD_FAILURE() << "no score for " << cluster;
    return s.scores.front();
  }

  testing::TempDir dir_;
  std::unique_ptr<fleet::FleetService> fleet_;
};

TEST_F(SelectionFleetTest, AFlappingClusterTripsItsBreakerAndRecovers) {
  const auto f = fabric({{"flap", 1}, {"whole", 2}}, "priority", "xpk");
  auto store = f->state_store();
  const auto breaker = [&]() { return store->get_breaker(breaker_key("flap")).value(); };

  // Down (0..300 s): three failed probes in a row open the breaker; `whole` is chosen meanwhile.
  for (int i = 0; i < 3; ++i) {
    const auto s = f->select_cluster("tpu-v4-64");
    EXPECT_EQ(s.selected_cluster, "whole");
    EXPECT_THAT(score_of(s, "flap").skip_reason, HasSubstr("unreachable"));
    advance(std::chrono::seconds(5));
  }
  EXPECT_EQ(breaker().state, kBreakerOpen);
  EXPECT_EQ(breaker().trips, 1);

  // Open: skipped without a probe, with the breaker's reason.
  const auto calls = [&]() {
    return fleet_->simulator().state()["clusters"][0]["kubectl_calls"].get<int>();
  };
  const int before = calls();
  const auto skipped = f->select_cluster("tpu-v4-64");
  EXPECT_THAT(score_of(skipped, "flap").skip_reason, HasSubstr("circuit breaker open"));
  EXPECT_EQ(calls(), before);

  // The cool-down (60 s) passes while the cluster is still down: the half-open trial fails and
  // the breaker opens again for twice as long.
  advance(std::chrono::seconds(61));
  const auto trial = f->select_cluster("tpu-v4-64");
  EXPECT_EQ(trial.selected_cluster, "whole");
  EXPECT_GT(calls(), before);  // the one trial probed it
  EXPECT_EQ(breaker().state, kBreakerOpen);
  EXPECT_EQ(breaker().trips, 2);
  advance(std::chrono::seconds(61));  // within the 120 s cool-down: still refused
  EXPECT_THAT(score_of(f->select_cluster("tpu-v4-64"), "flap").skip_reason,
              HasSubstr("circuit breaker open"));

  // Back up (after 300 s) and past the cool-down: the trial succeeds and the breaker closes;
  // flap (priority 1) is chosen again.
  advance(std::chrono::seconds(200));
  const auto recovered = f->select_cluster("tpu-v4-64");
  EXPECT_EQ(recovered.selected_cluster, "flap");
  EXPECT_EQ(breaker().state, kBreakerClosed);
  EXPECT_TRUE(score_of(recovered, "flap").eligible);
}

TEST_F(SelectionFleetTest, FragmentationRulesAClusterOut) {
  // frag: eight 16-chip slices (v4-32) fill its four 32-chip blocks (first fit); every other
  // one ends: 64 chips free, in four runs of 16.
  for (int i = 0; i < 8; ++i) {
    fleet::CreateRequest r;
    r.workload = fmt::format("small-{}", i);
    r.device_type = "v4-32";
    r.tpu_type_flag = true;
    ASSERT_EQ(fleet_->simulator().create("frag", r, false).result, fleet::CreateResult::kCreated);
  }
  for (int i = 0; i < 8; i += 2) {
    ASSERT_TRUE(fleet_->simulator().remove("frag", fmt::format("small-{}", i)).deleted);
  }
  // A v4-64 slice needs 32 contiguous chips: only `whole` can take it now.
  const auto score = fabric({{"frag", 1}, {"whole", 2}}, "score", "kube");
  const auto s = score->select_cluster("tpu-v4-64");
  EXPECT_EQ(s.selected_cluster, "whole");
  const CandidateScore& frag = score_of(s, "frag");
  EXPECT_FALSE(frag.eligible);
  EXPECT_THAT(frag.skip_reason, HasSubstr("cannot fit a slice of 32 chips: fragmented, largest "
                                          "free block 16 of 64 chips free (fragmentation 0.75)"));
  EXPECT_EQ(frag.signals.free_chips, 64);
  EXPECT_EQ(frag.signals.fragmentation, 0.75);
  const CandidateScore& whole = score_of(s, "whole");
  EXPECT_EQ(whole.signals.free_chips, 128);
  EXPECT_EQ(whole.signals.fragmentation, 0);
  // The probe carried the ClusterQueue's flavors; the decision is recorded with its reason.
  ASSERT_EQ(s.probe_results.size(), 2u);
  EXPECT_FALSE(s.probe_results[0].capacity.empty());
  const auto recorded = score->state_store()->get_selection(s.selection_id);
  ASSERT_TRUE(recorded);
  EXPECT_THAT(recorded->selection.scores[0].skip_reason, HasSubstr("fragmented"));

  // The spec's priority policy does not look at capacity: frag (priority 1) is chosen and the
  // job would queue there.
  const auto spec = fabric({{"frag", 1}, {"whole", 2}}, "priority", "kube");
  EXPECT_EQ(spec->select_cluster("tpu-v4-64").selected_cluster, "frag");

  // With every cluster unable to fit, the selection fails and says why for each.
  for (int i = 0; i < 4; ++i) {
    fleet::CreateRequest r;
    r.workload = fmt::format("big-{}", i);
    r.device_type = "v4-64";
    r.tpu_type_flag = true;
    ASSERT_EQ(fleet_->simulator().create("whole", r, false).result, fleet::CreateResult::kCreated);
  }
  try {
    score->select_cluster("tpu-v4-64");
    FAIL() << "a selection with no cluster that fits succeeded";
  } catch (const NoAvailableClusterError& e) {
    EXPECT_THAT(e.what(), HasSubstr("frag: cannot fit a slice of 32 chips: fragmented"));
    EXPECT_THAT(e.what(), HasSubstr("whole: cannot fit a slice of 32 chips: 0 of 128 chips free"));
  }
}

}  // namespace
}  // namespace falcon
