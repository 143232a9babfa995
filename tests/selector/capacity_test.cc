// Capacity and fragmentation (issue 15, docs/selection.md "Capacity and fragmentation"): the
// slice of an accelerator type, the capacity signals from a probe's flavors, the fit rule, the
// fragmentation weight bands in the score, its validation in repos.yaml, and the ClusterQueue
// parser of the kube backend on the real Kueue shapes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "falcon/config.h"
#include "falcon/scoring.h"
#include "kube/cluster_queues.h"

namespace falcon {
namespace {

using ::testing::HasSubstr;

AcceleratorCapacity flavor(const std::string& name, const std::string& device_type,
                           const std::string& accelerator, double nominal, double used,
                           std::optional<double> largest) {
  return AcceleratorCapacity{.flavor = name,
                             .device_type = device_type,
                             .accelerator = accelerator,
                             .resource = "google.com/tpu",
                             .nominal = nominal,
                             .used = used,
                             .largest_free_block = largest};
}

ClusterProbeResult probe_with(std::vector<AcceleratorCapacity> capacity) {
  ClusterProbeResult p;
  p.cluster = std::string("c");  // not a literal: GCC 12 -O2's false -Wrestrict
  p.reachable = true;
  p.queue_depth = 0;
  p.running_count = 0;
  p.capacity = std::move(capacity);
  return p;
}

TEST(SliceShape, ChipsAndAcceleratorFromXpksTable) {
  const auto v4 = slice_shape("tpu-v4-64");
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->device_type, "v4-64");
  EXPECT_EQ(v4->accelerator, "tpu-v4-podslice");
  EXPECT_EQ(v4->chips, 32);  // 8 VMs x 4 chips
  EXPECT_EQ(slice_shape("v4-8")->chips, 4);
  EXPECT_EQ(slice_shape("h100-80gb-8")->chips, 8);
  EXPECT_FALSE(slice_shape("n2-standard-32-4"));  // CPU: no accelerator chips
  EXPECT_FALSE(slice_shape("tpu-v4-48"));
}

TEST(CapacitySignals, FragmentationIsOneMinusLargestBlockOverFree) {
  ClusterSignals s;
  // 128 chips, 48 used: 80 free, the largest free run 32.
  apply_capacity(s, probe_with({flavor("tpu-v4-podslice", "", "tpu-v4-podslice", 128, 48, 32)}),
                 "v4-32");
  EXPECT_EQ(s.slice_chips, 16);
  EXPECT_EQ(s.nominal_chips, 128);
  EXPECT_EQ(s.free_chips, 80);
  EXPECT_EQ(s.largest_free_block, 32);
  EXPECT_DOUBLE_EQ(*s.fragmentation, 1.0 - 32.0 / 80.0);
  EXPECT_FALSE(capacity_misfit(s));
  // A slice of 64 chips does not fit in a 32-chip run although 80 chips are free.
  ClusterSignals big;
  apply_capacity(big, probe_with({flavor("tpu-v4-podslice", "", "tpu-v4-podslice", 128, 48, 32)}),
                 "v4-128");
  const auto why = capacity_misfit(big);
  ASSERT_TRUE(why);
  EXPECT_THAT(*why, HasSubstr("cannot fit a slice of 64 chips: fragmented, largest free block "
                              "32 of 80 chips free (fragmentation 0.60)"));
}

// A slice larger than every block of the cluster never fits there, however much is free: the
// misfit says so first, and never_fits tells it from a want of room now.
TEST(CapacitySignals, ASliceLargerThanEveryBlockNeverFits) {
  auto blocks = flavor("tpu-v4-podslice", "", "tpu-v4-podslice", 128, 0, 32);
  blocks.largest_block = 32;  // four blocks of 32
  ClusterSignals s;
  apply_capacity(s, probe_with({blocks}), "v4-128");
  EXPECT_EQ(s.largest_block, 32);
  EXPECT_EQ(never_fits(s).value_or(""),
            "can never fit a slice of 64 chips: its largest block has 32");
  EXPECT_EQ(capacity_misfit(s), never_fits(s));
  // A smaller slice fits; one with no room now is a misfit but may fit later.
  ClusterSignals small;
  apply_capacity(small, probe_with({blocks}), "v4-64");
  EXPECT_FALSE(capacity_misfit(small));
  blocks.used = 128;
  blocks.largest_free_block = 0;
  ClusterSignals full;
  apply_capacity(full, probe_with({blocks}), "v4-64");
  EXPECT_TRUE(capacity_misfit(full));
  EXPECT_FALSE(never_fits(full));
  // Fewer chips in all than the slice: never.
  ClusterSignals tiny;
  apply_capacity(tiny, probe_with({flavor("1xv4-64", "v4-64", "tpu-v4-podslice", 16, 0, 16)}),
                 "v4-64");
  EXPECT_EQ(never_fits(tiny).value_or(""), "can never fit a slice of 32 chips: 16 chips in all");
  // A flavor that does not say its blocks leaves the largest block unknown: it may fit.
  ClusterSignals unknown;
  apply_capacity(unknown, probe_with({blocks, flavor("x", "", "tpu-v4-podslice", 64, 0, 64)}),
                 "v4-128");
  EXPECT_FALSE(unknown.largest_block);
  EXPECT_FALSE(never_fits(unknown));
}

TEST(CapacitySignals, FlavorsOfTheTypeItselfComeFirstAndUnknownStaysNull) {
  ClusterSignals s;
  apply_capacity(s,
                 probe_with({flavor("1xv4-64", "v4-64", "tpu-v4-podslice", 32, 32, std::nullopt),
                             flavor("2xv4-128", "v4-128", "tpu-v4-podslice", 128, 0, 64)}),
                 "tpu-v4-64");
  EXPECT_EQ(s.free_chips, 0);
  EXPECT_FALSE(s.largest_free_block);  // the v4-64 flavor publishes no blocks
  EXPECT_FALSE(s.fragmentation);
  EXPECT_THAT(capacity_misfit(s).value_or(""),
              HasSubstr("cannot fit a slice of 32 chips: 0 of 32 chips free"));
  // No flavor for the accelerator (the xpk backend, or another accelerator): all null.
  ClusterSignals none;
  apply_capacity(none, probe_with({}), "v4-64");
  apply_capacity(none, probe_with({flavor("1xv5p-8", "v5p-8", "tpu-v5p-slice", 4, 0, 4)}), "v4-64");
  EXPECT_EQ(none, ClusterSignals{});
  EXPECT_FALSE(capacity_misfit(none));
}

TEST(FragmentationWeight, BandsOfTheSurveyTable) {
  const FragmentationSettings f;
  EXPECT_EQ(f.weight_for(0.0), 1.0);
  EXPECT_EQ(f.weight_for(0.29), 1.0);
  EXPECT_EQ(f.weight_for(0.3), 0.7);
  EXPECT_EQ(f.weight_for(0.59), 0.7);
  EXPECT_EQ(f.weight_for(0.6), 0.3);
  EXPECT_EQ(f.weight_for(1.0), 0.3);
}

CandidateInput candidate(const std::string& name, double free, double largest, int priority = 1) {
  CandidateInput c;
  c.cluster = name;
  c.priority = priority;
  c.signals.queue_depth = 0;
  c.signals.running = 1;
  c.signals.health = 1.0;
  c.signals.latency_ms = 0;
  c.signals.drain_per_min = 1.0;
  apply_capacity(
      c.signals,
      probe_with({flavor("tpu-v4-podslice", "", "tpu-v4-podslice", 128, 128 - free, largest)}),
      "v4-32");
  return c;
}

TEST(FragmentationInTheScore, MultipliesTheScoreByItsBandWeight) {
  const SelectionSettings settings;
  // Both 64 free chips; a: one 64-chip run (fragmentation 0), b: runs of 16 (0.75).
  const auto ranked = rank_candidates(SelectionPolicy::kScore, settings,
                                      {candidate("b", 64, 16), candidate("a", 64, 64)});
  ASSERT_TRUE(ranked.winner);
  EXPECT_EQ(*ranked.winner, 1u);
  const CandidateScore& b = ranked.scores[0];
  const CandidateScore& a = ranked.scores[1];
  // The same weighted mean; b's is multiplied by 0.3.
  EXPECT_NEAR(*b.total, *a.total * 0.3, 1e-9);
  double sum = 0;
  for (const auto& t : b.terms) sum += t.contribution;
  EXPECT_NEAR(sum, *b.total, 1e-9);  // the contributions add up to the score
  const auto frag = std::find_if(b.terms.begin(), b.terms.end(),
                                 [](const SignalTerm& t) { return t.signal == "fragmentation"; });
  ASSERT_NE(frag, b.terms.end());
  EXPECT_DOUBLE_EQ(*frag->value, 0.75);
  EXPECT_DOUBLE_EQ(*frag->normalized, 0.3);
  EXPECT_THAT(b.verdict, HasSubstr("lost to a"));
  EXPECT_THAT(b.verdict, HasSubstr("fragmentation"));
}

TEST(FitRule, ScoreAndLeastWaitRuleOutAClusterThatCannotFitPriorityDoesNot) {
  SelectionSettings settings;
  // a (priority 1): 32 chips free in runs of 8: no 16-chip slice fits. b (priority 2): room.
  const std::vector<CandidateInput> in = {candidate("a", 32, 8, 1), candidate("b", 64, 64, 2)};
  for (auto policy : {SelectionPolicy::kScore, SelectionPolicy::kLeastWait}) {
    const auto r = rank_candidates(policy, settings, in);
    ASSERT_TRUE(r.winner);
    EXPECT_EQ(in[*r.winner].cluster, "b");
    EXPECT_FALSE(r.scores[0].eligible);
    EXPECT_THAT(r.scores[0].skip_reason,
                HasSubstr("cannot fit a slice of 16 chips: fragmented, largest free block 8"));
    EXPECT_THAT(r.scores[0].verdict, HasSubstr("skipped: cannot fit"));
  }
  const auto spec = rank_candidates(SelectionPolicy::kPriority, settings, in);
  EXPECT_EQ(in[*spec.winner].cluster, "a");  // the spec's rule does not look at capacity
  settings.fragmentation.require_fit = false;
  const auto loose = rank_candidates(SelectionPolicy::kLeastWait, settings, in);
  EXPECT_TRUE(loose.scores[0].eligible);
}

TEST(FitRule, ReplayAppliesItToRecordedSignals) {
  ClusterSelection recorded;
  recorded.accelerator = "v4-32";
  recorded.selected_cluster = "a";
  recorded.policy = "priority";
  for (const auto& c : {candidate("a", 32, 8, 1), candidate("b", 64, 64, 2)}) {
    CandidateScore s;
    s.cluster = c.cluster;
    s.priority = c.priority;
    s.eligible = true;
    s.signals = c.signals;
    recorded.scores.push_back(s);
  }
  const nlohmann::json j = recorded;  // the signals survive JSON
  const auto back = j.get<ClusterSelection>();
  EXPECT_EQ(back.scores[0].signals, recorded.scores[0].signals);
  const auto replayed = replay_selection(back, SelectionPolicy::kScore, SelectionSettings{},
                                         std::chrono::system_clock::now());
  EXPECT_EQ(replayed.selected_cluster, "b");
}

// docs/selection.md "Capacity and fragmentation", worked example: the numbers printed there.
TEST(CapacityWorkedExample, TheNumbersOfTheDocs) {
  const auto make = [](const std::string& name, double nominal, double used, double largest) {
    CandidateInput c;
    c.cluster = name;
    c.priority = 1;
    c.signals.queue_depth = 0;
    c.signals.running = 2;
    c.signals.health = 1.0;
    c.signals.latency_ms = 100;
    apply_capacity(
        c.signals,
        probe_with({flavor("tpu-v4-podslice", "", "tpu-v4-podslice", nominal, used, largest)}),
        "tpu-v4-64");
    return c;
  };
  const std::vector<CandidateInput> in = {make("tpu-c", 128, 80, 16), make("tpu-a", 256, 96, 128),
                                          make("tpu-b", 128, 32, 32)};
  EXPECT_NEAR(*in[0].signals.fragmentation, 1 - 16.0 / 48, 1e-12);
  EXPECT_NEAR(*in[1].signals.fragmentation, 0.2, 1e-12);
  EXPECT_NEAR(*in[2].signals.fragmentation, 1 - 32.0 / 96, 1e-12);
  const SelectionSettings settings;
  const auto score = rank_candidates(SelectionPolicy::kScore, settings, in);
  EXPECT_EQ(score.scores[0].skip_reason,
            "cannot fit a slice of 32 chips: fragmented, largest free block 16 of 48 chips free "
            "(fragmentation 0.67)");
  EXPECT_NEAR(*score.scores[1].total, 0.892, 5e-4);
  EXPECT_NEAR(*score.scores[2].total, 0.272, 5e-4);  // 0.906 x 0.3
  EXPECT_EQ(in[*score.winner].cluster, "tpu-a");
  // Without the fragmentation weight tpu-b would win: its free share is larger.
  SelectionSettings flat;
  flat.fragmentation.weight_mid = flat.fragmentation.weight_high = 1.0;
  const auto unweighted = rank_candidates(SelectionPolicy::kScore, flat, in);
  EXPECT_NEAR(*unweighted.scores[2].total, 0.906, 5e-4);
  EXPECT_EQ(in[*unweighted.winner].cluster, "tpu-b");
  // priority: file order among equals, tpu-c, which cannot take the slice now.
  EXPECT_EQ(in[*rank_candidates(SelectionPolicy::kPriority, settings, in).winner].cluster, "tpu-c");
  // least-wait: every queue empty (0 s): a tie, to the best fit, tpu-b's 32-chip block (tpu-a's
  // 128-chip block stays whole).
  const auto least = rank_candidates(SelectionPolicy::kLeastWait, settings, in);
  EXPECT_EQ(in[*least.winner].cluster, "tpu-b");
  EXPECT_EQ(least.scores[1].verdict,
            "lost to tpu-b: tie; looser fit: a slice of 32 chips leaves 96 of its largest free "
            "block unused, 0 on tpu-b");
}

// Best fit breaks ties only: a shorter predicted wait still wins over a tighter fit, a candidate
// whose blocks are not known comes after one whose are, and priority does not look at it.
TEST(BestFit, BreaksTiesOnlyAndPrefersKnownBlocks) {
  const SelectionSettings settings;
  auto c = [](const std::string& name, double free, double largest, int queue) {
    CandidateInput in = candidate(name, free, largest, 1);
    in.signals.queue_depth = queue;
    return in;
  };
  // loose (64 free in one block) has an empty queue; tight (16 of 16) has one queued.
  std::vector<CandidateInput> in = {c("loose", 64, 64, 0), c("tight", 16, 16, 1)};
  EXPECT_EQ(in[*rank_candidates(SelectionPolicy::kLeastWait, settings, in).winner].cluster,
            "loose");
  in[1].signals.queue_depth = 0;
  EXPECT_EQ(in[*rank_candidates(SelectionPolicy::kLeastWait, settings, in).winner].cluster,
            "tight");
  EXPECT_EQ(in[*rank_candidates(SelectionPolicy::kPriority, settings, in).winner].cluster, "loose");
  in[1].signals.largest_free_block.reset();
  in[1].signals.fragmentation.reset();
  const auto unknown = rank_candidates(SelectionPolicy::kLeastWait, settings, in);
  EXPECT_EQ(in[*unknown.winner].cluster, "loose");
  EXPECT_EQ(unknown.scores[1].verdict,
            "lost to loose: tie; its free blocks are not known, loose's are");
}

// --- The kube backend's reading of Kueue's ClusterQueue (kueue.x-k8s.io/v1beta1).

TEST(ClusterQueues, QuantitiesAsKubernetesWritesThem) {
  EXPECT_EQ(kube::parse_quantity("32"), 32);
  EXPECT_EQ(kube::parse_quantity("1.5"), 1.5);
  EXPECT_EQ(kube::parse_quantity("4k"), 4000);
  EXPECT_EQ(kube::parse_quantity("2Ki"), 2048);
  EXPECT_EQ(kube::parse_quantity("500m"), 0.5);
  EXPECT_FALSE(kube::parse_quantity("lots"));
  EXPECT_FALSE(kube::parse_quantity("3x"));
  EXPECT_FALSE(kube::parse_quantity(""));
}

TEST(ClusterQueues, NominalQuotaUsageAndPublishedBlocks) {
  const auto list = nlohmann::json::parse(R"({
    "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueueList",
    "items": [{
      "kind": "ClusterQueue",
      "metadata": {"name": "cluster-queue",
                   "annotations": {"falcon.dev/free-blocks": "{\"tpu-v4-podslice\": [16, 8]}",
                                   "falcon.dev/blocks": "{\"tpu-v4-podslice\": [64, 32, 32]}"}},
      "spec": {"resourceGroups": [
        {"coveredResources": ["google.com/tpu"],
         "flavors": [{"name": "2xv4-64", "resources": [{"name": "google.com/tpu", "nominalQuota": 64}]},
                     {"name": "tpu-v4-podslice", "resources": [{"name": "google.com/tpu", "nominalQuota": "128"}]}]},
        {"coveredResources": ["cpu", "memory"],
         "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "1k"}]}]},
        {"coveredResources": ["google.com/tpu"],
         "flavors": [{"name": "spot-pool", "resources": [{"name": "google.com/tpu", "nominalQuota": 8}]}]}]},
      "status": {
        "flavorsUsage": [{"name": "2xv4-64", "resources": [{"name": "google.com/tpu", "total": "32"}]},
                         {"name": "tpu-v4-podslice", "resources": [{"name": "google.com/tpu", "total": "96", "borrowed": "0"}]}],
        "flavorsReservation": [{"name": "2xv4-64", "resources": [{"name": "google.com/tpu", "total": "64"}]}]}
    }]})");
  const auto caps = kube::parse_cluster_queues(list);
  ASSERT_EQ(caps.size(), 2u);  // cpu is no accelerator; "spot-pool" names no accelerator
  EXPECT_EQ(caps[0].flavor, "2xv4-64");
  EXPECT_EQ(caps[0].device_type, "v4-64");
  EXPECT_EQ(caps[0].accelerator, "tpu-v4-podslice");
  EXPECT_EQ(caps[0].nominal, 64);
  EXPECT_EQ(caps[0].used, 64);  // the reservation is larger than the usage
  EXPECT_FALSE(caps[0].largest_free_block);
  EXPECT_EQ(caps[1].flavor, "tpu-v4-podslice");
  EXPECT_EQ(caps[1].device_type, "");
  EXPECT_EQ(caps[1].nominal, 128);
  EXPECT_EQ(caps[1].used, 96);
  EXPECT_EQ(caps[1].largest_free_block, 16);
  EXPECT_FALSE(caps[0].largest_block);
  EXPECT_EQ(caps[1].largest_block, 64);
  EXPECT_THROW(kube::parse_cluster_queues(nlohmann::json::parse(R"({"kind": "Status"})")),
               std::invalid_argument);
  // A member of another type than Kueue's reads as absent; only a list without items throws,
  // and only std::invalid_argument (these threw the JSON library's type_error).
  EXPECT_THROW(kube::parse_cluster_queues(nlohmann::json::parse(R"({"kind": {"a": 1}})")),
               std::invalid_argument);
  EXPECT_TRUE(kube::parse_cluster_queues(nlohmann::json::parse(
                                             R"({"items": [{"spec": "x", "status": 5,
                                                 "metadata": {"annotations": [1]}},
                                                {"spec": {"resourceGroups": {"flavors": 1}},
                                                 "status": {"flavorsUsage": "x"}}]})"))
                  .empty());
}

}  // namespace
}  // namespace falcon
