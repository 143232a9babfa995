// ClusterSelector: the spec's acceptance rows (测试验收标准 3. ClusterSelector), the tie-breaks,
// the bounded parallel pool, and probes that throw.
#include "falcon/selector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "falcon/errors.h"
#include "support/fake_clock.h"
#include "support/fake_command_runner.h"
#include "support/temp_dir.h"
#include "xpk/xpk_outputs.h"

namespace falcon {
namespace {

using ::testing::ElementsAre;
using testing::FakeClock;
using testing::FakeCommandRunner;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A prober that answers from a table, can throw, and can hold probes in rounds of `n` that are
// all in flight together (to observe the pool without sleeping).
class FakeProber : public ClusterProber {
 public:
  void answer(const std::string& cluster, bool reachable, std::optional<int> queue_depth,
              std::optional<std::string> error = std::nullopt) {
    ClusterProbeResult r;
    r.cluster = cluster;
    r.reachable = reachable;
    r.queue_depth = queue_depth;
    r.running_count = reachable ? std::optional<int>(1) : std::nullopt;
    r.error = std::move(error);
    r.probed_at = "2026-04-13T08:00:00.000Z";
    std::lock_guard lock(mutex_);
    answers_[cluster] = r;
  }
  void throw_for(const std::string& cluster) {
    std::lock_guard lock(mutex_);
    throwing_[cluster] = true;
  }
  void hold_until_concurrent(int n) {
    std::lock_guard lock(mutex_);
    hold_ = n;
  }

  ClusterProbeResult probe(const ClusterConfig& cluster) const override {
    std::unique_lock lock(mutex_);
    ++in_flight_;
    max_in_flight_ = std::max(max_in_flight_, in_flight_);
    probed_.push_back(cluster.name);
    probe_threads_.push_back(std::this_thread::get_id());
    if (hold_ > 0) {
      const long generation = generation_;
      if (++arrived_ >= hold_) {
        arrived_ = 0;
        ++generation_;
        cv_.notify_all();
      } else {
        cv_.wait_for(lock, std::chrono::seconds(10), [&] { return generation_ != generation; });
      }
    }
    --in_flight_;
    if (throwing_.count(cluster.name) != 0) throw std::runtime_error("prober exploded");
    auto it = answers_.find(cluster.name);
    if (it == answers_.end()) throw std::logic_error("no answer for " + cluster.name);
    return it->second;
  }

  // cached(cluster) answers this (on the asking thread) instead of a probe.
  void cache(const std::string& cluster, int queue_depth) {
    ClusterProbeResult r;
    r.cluster = cluster;
    r.reachable = true;
    r.queue_depth = queue_depth;
    r.running_count = 0;
    r.probed_at = "2026-04-13T07:59:00.000Z";
    std::lock_guard lock(mutex_);
    cached_[cluster] = r;
  }
  std::optional<ClusterProbeResult> cached(const ClusterConfig& cluster) const override {
    std::lock_guard lock(mutex_);
    cache_threads_.push_back(std::this_thread::get_id());
    const auto it = cached_.find(cluster.name);
    if (it == cached_.end()) return std::nullopt;
    return it->second;
  }
  std::vector<std::thread::id> cache_threads() const {
    std::lock_guard lock(mutex_);
    return cache_threads_;
  }
  std::vector<std::thread::id> probe_threads() const {
    std::lock_guard lock(mutex_);
    return probe_threads_;
  }

  int max_in_flight() const {
    std::lock_guard lock(mutex_);
    return max_in_flight_;
  }
  std::vector<std::string> probed() const {
    std::lock_guard lock(mutex_);
    return probed_;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  std::map<std::string, ClusterProbeResult> answers_;
  std::map<std::string, bool> throwing_;
  int hold_ = 0;
  mutable int arrived_ = 0;  // probes held in the current round
  mutable long generation_ = 0;
  mutable int in_flight_ = 0;
  mutable int max_in_flight_ = 0;
  mutable std::vector<std::string> probed_;
  std::map<std::string, ClusterProbeResult> cached_;
  mutable std::vector<std::thread::id> cache_threads_;
  mutable std::vector<std::thread::id> probe_threads_;
};

struct Entry {
  std::string name;
  std::string accelerator;
  int priority;
  int max_queue_depth = 5;
};

class SelectorTest : public ::testing::Test {
 protected:
  void load(const std::vector<Entry>& entries) {
    std::string yaml = "clusters:\n";
    for (const auto& e : entries) {
      yaml += "  " + e.name + ":\n    provider: gke\n    project: p-" + e.name +
              "\n    zone: us-central2-b\n    cluster_id: c-" + e.name +
              "\n    accelerator_types:\n      - type: " + e.accelerator +
              "\n        device_class: " + (e.accelerator == "a100-40gb-8" ? "gpu" : "tpu") +
              "\n        priority: " + std::to_string(e.priority) +
              "\n    max_queue_depth: " + std::to_string(e.max_queue_depth) + "\n";
    }
    registry_.load(tmp_.write("repos.yaml", yaml).string());
  }
  ClusterSelector selector(int max_parallel = 16) {
    SelectionSettings s;
    s.max_parallel_probes = max_parallel;
    return ClusterSelector(registry_, prober_, s, clock_);
  }

  testing::TempDir tmp_;
  ClusterRegistry registry_;
  FakeProber prober_;
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
};

// 单候选命中: the only candidate, reachable and not full, is selected with a reason.
TEST_F(SelectorTest, SingleCandidateIsSelectedWithReason) {
  load({{"tpu-a", "tpu-v4-64", 1}});
  prober_.answer("tpu-a", true, 2);
  const auto s = selector().select("tpu-v4-64");
  EXPECT_EQ(s.selected_cluster, "tpu-a");
  EXPECT_EQ(s.reason, "selected tpu-a: reachable, queue_depth=2 <= max=5");
  EXPECT_EQ(s.decided_at, "2026-04-13T08:00:00.000Z");
}

// 优先级排序: all probed, the best priority among the available wins.
TEST_F(SelectorTest, HighestPriorityAvailableClusterWinsAfterProbingAll) {
  load({{"low-pri", "tpu-v4-64", 3}, {"top-pri", "tpu-v4-64", 1}, {"mid-pri", "tpu-v4-64", 2}});
  prober_.answer("low-pri", true, 0);
  prober_.answer("top-pri", true, 4);
  prober_.answer("mid-pri", true, 0);
  const auto s = selector().select("tpu-v4-64");
  EXPECT_EQ(s.selected_cluster, "top-pri");
  EXPECT_THAT(s.candidates, ElementsAre("top-pri", "mid-pri", "low-pri"));
  EXPECT_EQ(s.probe_results.size(), 3u);
  EXPECT_EQ(prober_.probed().size(), 3u);
}

// 队列满跳过: queue_depth > max_queue_depth is skipped; the next priority is chosen.
TEST_F(SelectorTest, FullQueueIsSkippedForTheNextPriority) {
  load({{"tpu-a", "tpu-v4-64", 1, 5}, {"tpu-b", "tpu-v4-64", 2, 5}});
  prober_.answer("tpu-a", true, 6);
  prober_.answer("tpu-b", true, 1);
  const auto s = selector().select("tpu-v4-64");
  EXPECT_EQ(s.selected_cluster, "tpu-b");
  EXPECT_EQ(s.reason, "selected tpu-b: reachable, queue_depth=1 <= max=5");
}

TEST_F(SelectorTest, QueueDepthEqualToMaxIsStillEligible) {
  load({{"tpu-a", "tpu-v4-64", 1, 5}});
  prober_.answer("tpu-a", true, 5);
  EXPECT_EQ(selector().select("tpu-v4-64").reason,
            "selected tpu-a: reachable, queue_depth=5 <= max=5");
}

TEST_F(SelectorTest, UnreachableClusterIsSkipped) {
  load({{"tpu-a", "tpu-v4-64", 1}, {"tpu-b", "tpu-v4-64", 2}});
  prober_.answer("tpu-a", false, std::nullopt, "probe timed out after 15s");
  prober_.answer("tpu-b", true, 0);
  EXPECT_EQ(selector().select("tpu-v4-64").selected_cluster, "tpu-b");
}

TEST_F(SelectorTest, EqualPriorityPrefersTheShorterQueueThenFileOrder) {
  load({{"first", "tpu-v4-64", 1}, {"second", "tpu-v4-64", 1}, {"third", "tpu-v4-64", 1}});
  prober_.answer("first", true, 3);
  prober_.answer("second", true, 1);
  prober_.answer("third", true, 1);
  EXPECT_EQ(selector().select("tpu-v4-64").selected_cluster, "second");
}

// 全部失败: all unreachable -> NoAvailableClusterError with every probe result and why.
TEST_F(SelectorTest, AllFailingRaisesNoAvailableClusterErrorWithEveryProbeResult) {
  load({{"tpu-a", "tpu-v4-64", 1, 5}, {"tpu-b", "tpu-v4-64", 2, 5}, {"tpu-c", "tpu-v4-64", 3, 2}});
  prober_.answer("tpu-a", false, std::nullopt, "probe timed out after 15s");
  prober_.answer("tpu-b", false, std::nullopt, "xpk workload list failed: exit code 1:\nboom");
  prober_.answer("tpu-c", true, 7);
  try {
    selector().select("tpu-v4-64");
    FAIL() << "expected NoAvailableClusterError";
  } catch (const NoAvailableClusterError& e) {
    EXPECT_EQ(e.accelerator(), "tpu-v4-64");
    ASSERT_EQ(e.probe_results().size(), 3u);
    EXPECT_EQ(e.probe_results()[0].cluster, "tpu-a");
    EXPECT_EQ(e.probe_results()[1].cluster, "tpu-b");
    EXPECT_EQ(e.probe_results()[2].cluster, "tpu-c");
    EXPECT_EQ(std::string(e.what()),
              "no available cluster for tpu-v4-64 (3 candidates):\n"
              "  tpu-a: unreachable: probe timed out after 15s\n"
              "  tpu-b: unreachable: xpk workload list failed: exit code 1: boom\n"
              "  tpu-c: queue full: queue_depth=7 > max=2");
  }
}

// 无候选: no cluster offers the accelerator.
TEST_F(SelectorTest, NoCandidateRaisesNoAvailableClusterError) {
  load({{"tpu-a", "tpu-v4-64", 1}});
  try {
    selector().select("nvidia-h100-80g");
    FAIL() << "expected NoAvailableClusterError";
  } catch (const NoAvailableClusterError& e) {
    EXPECT_EQ(std::string(e.what()), "no cluster supports nvidia-h100-80g");
    EXPECT_THAT(e.probe_results(), IsEmpty());
  }
  EXPECT_THAT(prober_.probed(), IsEmpty());
}

// 决策记录完整: candidates, probe_results, selected_cluster and reason are all filled in.
TEST_F(SelectorTest, SelectionRecordIsComplete) {
  load({{"tpu-a", "tpu-v4-64", 1}, {"gpu-x", "a100-40gb-8", 1}, {"tpu-b", "tpu-v4-64", 1}});
  prober_.answer("tpu-a", false, std::nullopt, "probe timed out after 15s");
  prober_.answer("tpu-b", true, 0);
  const auto s = selector().select("tpu-v4-64");
  EXPECT_EQ(s.selected_cluster, "tpu-b");
  EXPECT_EQ(s.accelerator, "tpu-v4-64");
  EXPECT_THAT(s.candidates, ElementsAre("tpu-a", "tpu-b"));
  ASSERT_EQ(s.probe_results.size(), 2u);
  EXPECT_EQ(s.probe_results[0].cluster, "tpu-a");
  EXPECT_FALSE(s.probe_results[0].reachable);
  EXPECT_EQ(s.probe_results[1].cluster, "tpu-b");
  EXPECT_TRUE(s.probe_results[1].reachable);
  EXPECT_EQ(s.reason, "selected tpu-b: reachable, queue_depth=0 <= max=5");
  EXPECT_FALSE(s.decided_at.empty());
}

TEST_F(SelectorTest, AProbeThatThrowsIsAnUnreachableResultNotACrash) {
  load({{"tpu-a", "tpu-v4-64", 1}, {"tpu-b", "tpu-v4-64", 2}});
  prober_.throw_for("tpu-a");
  prober_.answer("tpu-b", true, 0);
  const auto s = selector().select("tpu-v4-64");
  EXPECT_EQ(s.selected_cluster, "tpu-b");
  EXPECT_FALSE(s.probe_results[0].reachable);
  EXPECT_EQ(s.probe_results[0].cluster, "tpu-a");
  EXPECT_THAT(s.probe_results[0].error.value_or(""), HasSubstr("prober exploded"));
  EXPECT_FALSE(s.probe_results[0].probed_at.empty());
}

TEST_F(SelectorTest, ProbesAllCandidatesAtOnceWhenThePoolIsWideEnough) {
  load({{"a", "v5p-8", 1}, {"b", "v5p-8", 1}, {"c", "v5p-8", 1}, {"d", "v5p-8", 1}});
  for (const char* n : {"a", "b", "c", "d"}) prober_.answer(n, true, 0);
  prober_.hold_until_concurrent(4);  // sequential probing would never get there
  selector(16).select("v5p-8");
  EXPECT_EQ(prober_.max_in_flight(), 4);
}

TEST_F(SelectorTest, NeverRunsMoreProbesAtOnceThanMaxParallelProbes) {
  load({{"a", "v5p-8", 1},
        {"b", "v5p-8", 1},
        {"c", "v5p-8", 1},
        {"d", "v5p-8", 1},
        {"e", "v5p-8", 1},
        {"f", "v5p-8", 1}});
  for (const char* n : {"a", "b", "c", "d", "e", "f"}) prober_.answer(n, true, 0);
  prober_.hold_until_concurrent(3);
  const auto s = selector(3).select("v5p-8");
  EXPECT_EQ(prober_.max_in_flight(), 3);
  EXPECT_EQ(s.probe_results.size(), 6u);
  EXPECT_EQ(prober_.probed().size(), 6u);
}

// Candidates the prober answers at once (a probe cache) are taken on the calling thread; a
// selection answered wholly so starts no thread and runs no probe.
TEST_F(SelectorTest, CachedAnswersAreTakenOnTheCallingThreadWithoutProbing) {
  load({{"tpu-a", "tpu-v4-64", 1}, {"tpu-b", "tpu-v4-64", 1}, {"tpu-c", "tpu-v4-64", 2}});
  prober_.cache("tpu-a", 4);
  prober_.cache("tpu-b", 1);
  prober_.cache("tpu-c", 0);
  const auto s = selector().select("tpu-v4-64");
  EXPECT_EQ(s.selected_cluster, "tpu-b");
  EXPECT_EQ(s.probe_results[0].probed_at, "2026-04-13T07:59:00.000Z");
  EXPECT_THAT(prober_.probed(), IsEmpty());
  ASSERT_EQ(prober_.cache_threads().size(), 3u);
  for (const auto& id : prober_.cache_threads()) EXPECT_EQ(id, std::this_thread::get_id());
}

// The others are probed as usual (on the pool), and the results keep candidate order.
TEST_F(SelectorTest, OnlyCandidatesWithoutACachedAnswerAreProbed) {
  load({{"tpu-a", "tpu-v4-64", 1}, {"tpu-b", "tpu-v4-64", 1}, {"tpu-c", "tpu-v4-64", 1}});
  prober_.cache("tpu-b", 3);
  prober_.answer("tpu-a", true, 5);
  prober_.answer("tpu-c", true, 2);
  prober_.hold_until_concurrent(2);  // both probes run at once: on the pool
  const auto s = selector().select("tpu-v4-64");
  EXPECT_EQ(s.selected_cluster, "tpu-c");
  EXPECT_THAT(prober_.probed(), ::testing::UnorderedElementsAre("tpu-a", "tpu-c"));
  ASSERT_EQ(s.probe_results.size(), 3u);
  EXPECT_EQ(s.probe_results[0].queue_depth, 5);
  EXPECT_EQ(s.probe_results[1].queue_depth, 3);
  EXPECT_EQ(s.probe_results[2].queue_depth, 2);
  EXPECT_EQ(prober_.max_in_flight(), 2);
}

TEST_F(SelectorTest, ReadsTheRegistryOnEverySelect) {
  load({{"tpu-a", "tpu-v4-64", 1}});
  prober_.answer("tpu-a", true, 0);
  prober_.answer("tpu-b", true, 0);
  const auto sel = selector();
  EXPECT_EQ(sel.select("tpu-v4-64").selected_cluster, "tpu-a");
  load({{"tpu-b", "tpu-v4-64", 1}});
  EXPECT_EQ(sel.select("tpu-v4-64").selected_cluster, "tpu-b");
}

// The whole chain with the real prober over a fake runner: a full cluster, an unreachable one
// and a good one, all listed through `xpk workload list`.
TEST_F(SelectorTest, WorksEndToEndWithTheRealProberOverAFakeRunner) {
  load({{"full", "tpu-v4-64", 1, 2}, {"down", "tpu-v4-64", 1}, {"good", "tpu-v4-64", 2}});
  auto runner = std::make_shared<FakeCommandRunner>();
  runner->on({"--cluster=c-full"}, FakeCommandRunner::ok(testing::kListV113));  // 3 queued
  runner->on({"--cluster=c-down"}, FakeCommandRunner::fails(1, "connection refused"));
  runner->on({"--cluster=c-good"}, FakeCommandRunner::ok(testing::kListHeaderOnly));
  XpkSettings xs;
  xs.state_dir = (tmp_.path() / "state").string();
  ClusterProber real(runner, xs, clock_);
  const auto s = ClusterSelector(registry_, real, SelectionSettings{}, clock_).select("tpu-v4-64");
  EXPECT_EQ(s.selected_cluster, "good");
  EXPECT_EQ(s.probe_results[0].queue_depth, 3);
  EXPECT_FALSE(s.probe_results[1].reachable);
  EXPECT_THAT(s.probe_results[1].error.value_or(""), HasSubstr("connection refused"));
}

}  // namespace
}  // namespace falcon
