// The health loop on a fake clock with a fake probe function: schedule, jitter, back-off,
// bounded concurrency, stop(), the cache (fresh), cluster changes and the probe history.
#include "serve/health_monitor.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "falcon/state_store.h"
#include "support/fake_clock.h"
#include "support/temp_dir.h"
#include "util/time_format.h"

namespace falcon {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;
using testing::TempDir;

ClusterConfig cluster(const std::string& name) {
  ClusterConfig c;
  c.name = name;
  c.project = std::string("p");  // not a literal: GCC 12 -O2's false -Wrestrict
  c.zone = "us-central2-b";
  c.location = c.zone;
  c.cluster_id = name;
  return c;
}

std::vector<ClusterConfig> clusters(std::initializer_list<const char*> names) {
  std::vector<ClusterConfig> out;
  for (const char* n : names) out.push_back(cluster(n));
  return out;
}

ServeSettings settings(int interval_s = 30, double jitter = 0.0, int cap_s = 600) {
  ServeSettings s;
  s.probe_interval_s = interval_s;
  s.probe_jitter = jitter;
  s.unreachable_backoff_max_s = cap_s;
  return s;
}

// A probe function whose clusters are reachable unless marked down; counts calls per cluster and
// takes `cost` of fake time.
struct FakeProbes {
  std::shared_ptr<FakeClock> clock;
  std::chrono::milliseconds cost{0};
  mutable std::mutex mutex;
  std::set<std::string> down;
  std::map<std::string, int> calls;

  HealthMonitor::ProbeFunction fn() {
    return [this](const ClusterConfig& c) {
      bool reachable;
      {
        std::lock_guard lock(mutex);
        ++calls[c.name];
        reachable = !down.count(c.name);
      }
      clock->advance(cost);
      ClusterProbeResult r;
      r.cluster = c.name;
      r.reachable = reachable;
      if (reachable) {
        r.queue_depth = 1;
        r.running_count = 2;
      } else {
        r.error = "probe timed out after 15s";
      }
      return r;
    };
  }
  int count(const std::string& name) const {
    std::lock_guard lock(mutex);
    auto it = calls.find(name);
    return it == calls.end() ? 0 : it->second;
  }
  void set_down(const std::string& name, bool is_down) {
    std::lock_guard lock(mutex);
    if (is_down) {
      down.insert(name);
    } else {
      down.erase(name);
    }
  }
};

class HealthMonitorTest : public ::testing::Test {
 protected:
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  FakeProbes probes{clock};

  std::unique_ptr<HealthMonitor> make(ServeSettings s,
                                      std::shared_ptr<StateStore> store = nullptr) {
    return std::make_unique<HealthMonitor>(probes.fn(), std::move(store), clock, s);
  }

  // Seconds of fake time, stepped by one, until run_due probes something (at most `limit`).
  int seconds_until_next_probe(HealthMonitor& m, int limit = 100000) {
    for (int s = 1; s <= limit; ++s) {
      clock->advance(1s);
      if (m.run_due() > 0) return s;
    }
    return -1;
  }
};

TEST_F(HealthMonitorTest, ProbesNewClustersAtOnceThenEveryInterval) {
  auto m = make(settings(30));
  m->set_clusters(clusters({"a", "b", "c"}));
  EXPECT_EQ(m->run_due(), 3);
  EXPECT_EQ(m->run_due(), 0);
  clock->advance(29s);
  EXPECT_EQ(m->run_due(), 0);
  clock->advance(1s);
  EXPECT_EQ(m->run_due(), 3);
  EXPECT_EQ(probes.count("a"), 2);
  EXPECT_EQ(m->stats().loop_probes, 6);
  const auto snap = m->snapshot();
  ASSERT_EQ(snap.size(), 3u);
  EXPECT_EQ(snap[0].result.cluster, "a");
  EXPECT_EQ(snap[2].result.cluster, "c");
  EXPECT_EQ(snap[0].backend, "xpk");
  EXPECT_EQ(snap[0].result.queue_depth, 1);
  EXPECT_EQ(snap[0].next_probe_at, "");  // the loop is not running
}

TEST_F(HealthMonitorTest, JitterKeepsIntervalsWithinBoundsAndIsSeedable) {
  auto intervals = [&](std::uint64_t seed) {
    auto m = make(settings(100, 0.2));
    m->set_jitter_seed(seed);
    m->set_clusters(clusters({"a"}));
    m->run_due();
    std::vector<int> out;
    for (int i = 0; i < 30; ++i) out.push_back(seconds_until_next_probe(*m));
    return out;
  };
  const auto first = intervals(7);
  for (int s : first) {
    EXPECT_GE(s, 80);
    EXPECT_LE(s, 121);  // 120 s, plus the one-second step
  }
  EXPECT_GT(std::set<int>(first.begin(), first.end()).size(), 5u) << "intervals do not vary";
  EXPECT_EQ(intervals(7), first);
  EXPECT_NE(intervals(8), first);
}

TEST_F(HealthMonitorTest, UnreachableClusterBacksOffDoublingUpToTheCap) {
  auto m = make(settings(10, 0.0, 60));
  probes.set_down("a", true);
  m->set_clusters(clusters({"a"}));
  ASSERT_EQ(m->run_due(), 1);
  EXPECT_EQ(m->latest("a")->consecutive_failures, 1);
  EXPECT_EQ(seconds_until_next_probe(*m), 20);
  EXPECT_EQ(seconds_until_next_probe(*m), 40);
  EXPECT_EQ(seconds_until_next_probe(*m), 60);
  EXPECT_EQ(seconds_until_next_probe(*m), 60);
  EXPECT_EQ(m->latest("a")->consecutive_failures, 5);
  EXPECT_FALSE(m->latest("a")->result.reachable);
  EXPECT_EQ(m->latest("a")->result.error, "probe timed out after 15s");
}

TEST_F(HealthMonitorTest, RecoveryResetsTheBackoff) {
  auto m = make(settings(10, 0.0, 600));
  probes.set_down("a", true);
  m->set_clusters(clusters({"a"}));
  m->run_due();
  EXPECT_EQ(seconds_until_next_probe(*m), 20);
  EXPECT_EQ(seconds_until_next_probe(*m), 40);
  probes.set_down("a", false);
  EXPECT_EQ(seconds_until_next_probe(*m), 80);  // this probe finds it reachable again
  EXPECT_EQ(m->latest("a")->consecutive_failures, 0);
  EXPECT_TRUE(m->latest("a")->result.reachable);
  EXPECT_EQ(seconds_until_next_probe(*m), 10);
}

TEST_F(HealthMonitorTest, AtMostMaxParallelProbesRunAtOnce) {
  std::mutex mutex;
  std::condition_variable cv;
  int active = 0;
  int max_active = 0;
  int started = 0;
  auto probe = [&](const ClusterConfig& c) {
    std::unique_lock lock(mutex);
    ++active;
    ++started;
    max_active = std::max(max_active, active);
    cv.notify_all();
    // Hold the first probes until three run at once, then a while longer for a fourth (it must
    // not start while three run): a pool wider than the bound would show one at once.
    cv.wait_for(lock, 20s, [&] { return started >= 3; });
    cv.wait_for(lock, 300ms, [&] { return started > 3; });
    --active;
    ClusterProbeResult r;
    r.cluster = c.name;
    r.reachable = true;
    r.queue_depth = 0;
    r.running_count = 0;
    return r;
  };
  ServeSettings s = settings();
  s.max_parallel_probes = 3;
  HealthMonitor m(probe, nullptr, clock, s);
  m.set_clusters(clusters({"c1", "c2", "c3", "c4", "c5", "c6", "c7"}));
  EXPECT_EQ(m.run_due(), 7);
  EXPECT_EQ(max_active, 3);
}

TEST_F(HealthMonitorTest, StopReturnsPromptlyWhileTheLoopWaits) {
  auto m = make(settings(3600));
  m->set_clusters(clusters({"a", "b"}));
  m->start();
  m->start();  // idempotent
  // The loop probes both at once, then waits an hour of fake time.
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  while (clock->waiters() == 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  ASSERT_EQ(clock->waiters(), 1);
  EXPECT_EQ(probes.count("a"), 1);
  EXPECT_NE(m->latest("a")->next_probe_at, "");  // running: the next probe is known
  const auto before = std::chrono::steady_clock::now();
  m->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - before, 2s);
  EXPECT_EQ(clock->waiters(), 0);
  m->stop();  // idempotent
  EXPECT_EQ(m->latest("a")->next_probe_at, "");
}

TEST_F(HealthMonitorTest, LoopProbesAgainWhenTheFakeClockPassesTheInterval) {
  auto m = make(settings(30));
  m->set_clusters(clusters({"a"}));
  m->start();
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  while (clock->waiters() == 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  clock->advance(30s);
  while (probes.count("a") < 2 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  EXPECT_EQ(probes.count("a"), 2);
  m->stop();
}

// The loop's probes run at serve.probe_nice (threads and the processes they start inherit it);
// a probe run on the caller's thread (run_due here, an on-demand probe in a select) keeps the
// caller's priority.
TEST_F(HealthMonitorTest, LoopProbesRunAtTheProbeNiceValue) {
  const auto my_nice = [] {
    errno = 0;
    const int n = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
    EXPECT_EQ(errno, 0);
    return n;
  };
  const int caller = my_nice();
  ASSERT_LT(caller, 19) << "the test needs a nice value below the one it configures";
  ServeSettings s = settings(30);
  s.probe_nice = std::min(caller + 7, 19);
  std::mutex mutex;
  std::vector<int> seen;
  auto m = std::make_unique<HealthMonitor>(
      [&](const ClusterConfig& c) {
        {
          std::lock_guard lock(mutex);
          seen.push_back(my_nice());
        }
        ClusterProbeResult r;
        r.cluster = c.name;
        r.reachable = true;
        return r;
      },
      nullptr, clock, s);
  m->set_clusters(clusters({"a", "b", "c"}));
  EXPECT_EQ(m->run_due(), 3);  // on this thread
  m->start();
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  while (clock->waiters() == 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  clock->advance(30s);
  const auto probed = [&] {
    std::lock_guard lock(mutex);
    return seen.size();
  };
  while (probed() < 6 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  m->stop();
  std::lock_guard lock(mutex);
  ASSERT_EQ(seen.size(), 6u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(seen[i], caller) << i;
  for (int i = 3; i < 6; ++i) EXPECT_EQ(seen[i], s.probe_nice) << i;
  EXPECT_EQ(my_nice(), caller);  // the caller's thread is untouched
}

TEST_F(HealthMonitorTest, FreshAnswersFromTheCacheOrProbes) {
  auto m = make(settings(30));
  m->set_clusters(clusters({"a"}));
  m->run_due();
  clock->advance(5s);
  const MonitoredProbe hit = m->fresh(cluster("a"), 60s);
  EXPECT_TRUE(hit.from_cache);
  EXPECT_EQ(hit.age_ms, 5000);
  EXPECT_EQ(probes.count("a"), 1);
  clock->advance(61s);  // the loop has not run: the cached probe is 66 s old
  const MonitoredProbe miss = m->fresh(cluster("a"), 60s);
  EXPECT_FALSE(miss.from_cache);
  EXPECT_EQ(miss.age_ms, 0);
  EXPECT_EQ(probes.count("a"), 2);
  const auto st = m->stats();
  EXPECT_EQ(st.cache_hits, 1);
  EXPECT_EQ(st.cache_misses, 1);
  EXPECT_EQ(st.on_demand_probes, 1);
  EXPECT_EQ(st.loop_probes, 1);
  // A fresh probe reschedules the loop's: nothing is due for another interval.
  EXPECT_EQ(m->run_due(), 0);
  // An unwatched cluster is probed (and not listed as watched).
  EXPECT_FALSE(m->fresh(cluster("z"), 60s).from_cache);
  EXPECT_TRUE(m->fresh(cluster("z"), 60s).from_cache);
  EXPECT_EQ(probes.count("z"), 1);
  EXPECT_FALSE(m->latest("z").has_value());
  EXPECT_EQ(m->snapshot().size(), 1u);
}

// A probe's age counts from when it began: one that began before a change the caller knows of
// (a workload admitted 1 s ago) and finished after it may have read the cluster before the
// change, and is not taken as newer than that change.
TEST_F(HealthMonitorTest, AProbeIsAsOldAsItsStartNotItsEnd) {
  probes.cost = 2s;
  auto m = make(settings(30));
  m->set_clusters(clusters({"a"}));
  m->run_due();  // began at t0, finished at t0 + 2 s
  EXPECT_EQ(m->latest("a")->age_ms, 2000);
  // The change was 1 s ago, after the probe began: it is probed again.
  const MonitoredProbe again = m->fresh(cluster("a"), 1s);
  EXPECT_FALSE(again.from_cache);
  EXPECT_EQ(probes.count("a"), 2);
  EXPECT_FALSE(m->cached("a", 1s).has_value());  // that one began 2 s ago too
  // A change 3 s ago came before it began: the cache answers.
  EXPECT_TRUE(m->fresh(cluster("a"), 3s).from_cache);
  EXPECT_EQ(probes.count("a"), 2);
}

// cached() answers what fresh() would answer from the cache, and never probes or waits.
TEST_F(HealthMonitorTest, CachedAnswersOnlyFreshEnoughResultsAndNeverProbes) {
  auto m = make(settings(30));
  m->set_clusters(clusters({"a"}));
  EXPECT_FALSE(m->cached("a", 60s).has_value());  // not probed yet
  m->run_due();
  clock->advance(5s);
  const auto hit = m->cached("a", 60s);
  ASSERT_TRUE(hit.has_value());
  EXPECT_TRUE(hit->from_cache);
  EXPECT_EQ(hit->age_ms, 5000);
  EXPECT_EQ(hit->result.cluster, "a");
  EXPECT_FALSE(m->cached("a", 4s).has_value());  // older than asked
  EXPECT_FALSE(m->cached("unknown", 60s).has_value());
  EXPECT_EQ(probes.count("a"), 1);
  const auto st = m->stats();
  EXPECT_EQ(st.cache_hits, 1);
  EXPECT_EQ(st.cache_misses, 0);
  EXPECT_EQ(st.on_demand_probes, 0);
}

TEST_F(HealthMonitorTest, ConcurrentFreshCallersShareOneProbe) {
  std::mutex mutex;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> calls{0};
  auto probe = [&](const ClusterConfig& c) {
    ++calls;
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return release; });
    ClusterProbeResult r;
    r.cluster = c.name;
    r.reachable = true;
    r.queue_depth = 3;
    r.running_count = 0;
    return r;
  };
  HealthMonitor m(probe, nullptr, clock, settings());
  m.set_clusters(clusters({"a"}));
  std::vector<MonitoredProbe> results(4);
  std::vector<std::thread> threads;
  threads.emplace_back([&] { results[0] = m.fresh(cluster("a"), 60s); });
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  while (calls == 0 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  for (int i = 1; i < 4; ++i) {
    threads.emplace_back([&, i] { results[i] = m.fresh(cluster("a"), 60s); });
  }
  while (m.stats().cache_misses < 4 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  {
    std::lock_guard lock(mutex);
    release = true;
  }
  cv.notify_all();
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls, 1);
  for (const auto& r : results) {
    EXPECT_EQ(r.result.queue_depth, 3);
    EXPECT_FALSE(r.from_cache);
  }
  EXPECT_EQ(m.stats().on_demand_probes, 1);
  EXPECT_EQ(m.stats().cache_misses, 4);
}

TEST_F(HealthMonitorTest, SetClustersAddsAndRemoves) {
  auto m = make(settings(30));
  m->set_clusters(clusters({"a", "b"}));
  EXPECT_EQ(m->run_due(), 2);
  clock->advance(10s);
  m->set_clusters(clusters({"b", "c"}));
  EXPECT_FALSE(m->latest("a").has_value());
  ASSERT_TRUE(m->latest("b").has_value());   // kept its result
  EXPECT_FALSE(m->latest("c").has_value());  // not probed yet
  EXPECT_EQ(m->run_due(), 1);                // c is due at once, b keeps its schedule
  EXPECT_EQ(probes.count("c"), 1);
  EXPECT_EQ(probes.count("b"), 1);
  clock->advance(20s);
  EXPECT_EQ(m->run_due(), 1);  // b
  EXPECT_EQ(probes.count("a"), 1);
  const auto snap = m->snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].result.cluster, "b");
  EXPECT_EQ(snap[1].result.cluster, "c");
}

// Every store call fails, as a database gone away would.
class FailingStore final : public StateStore {
 public:
  [[noreturn]] static void fail(const char* op) {
    throw StateStoreError("sqlite", "sqlite:///gone.db", op, "disk I/O error");
  }
  std::string backend() const override { return "sqlite"; }
  std::string location() const override { return "sqlite:///gone.db"; }
  int schema_version() const override { return kStateSchemaVersion; }
  std::int64_t record_submission(const SubmissionRow&) override { fail("record_submission"); }
  bool record_submission_intent(const SubmissionRow&) override { fail("intent"); }
  std::int64_t record_delete_intent(const std::string&, const std::string&, StoreTime) override {
    fail("record_delete_intent");
  }
  bool finish_delete(std::int64_t, const std::string&, const std::string&, StoreTime) override {
    fail("finish_delete");
  }
  std::int64_t record_nomination(const NominationRecord&) override { fail("record_nomination"); }
  bool finish_nomination(std::int64_t, const std::string&, const std::string&, StoreTime) override {
    fail("finish_nomination");
  }
  std::vector<NominationRecord> list_nominations(const std::string&, int) override {
    fail("list_nominations");
  }
  std::vector<DeleteRecord> list_deletes(const std::string&, const std::string&, int) override {
    fail("list_deletes");
  }
  bool forget_submission(const std::string&, const std::string&, const std::string&) override {
    fail("forget");
  }
  std::optional<SubmissionRow> find_submission(const std::string&, const std::string&) override {
    fail("find_submission");
  }
  SubmissionPage list_submissions(const SubmissionQuery&) override { fail("list"); }
  SubmissionsImportResult import_submissions_jsonl(const std::filesystem::path&) override {
    fail("import");
  }
  std::int64_t record_selection(const ClusterSelection&) override { fail("record_selection"); }
  std::int64_t record_repeated_selection(std::int64_t, const std::string&) override {
    fail("record_repeated_selection");
  }
  std::optional<SelectionRecord> get_selection(std::int64_t) override { fail("get_selection"); }
  std::vector<SelectionRecord> list_selections(int, const std::optional<std::string>&) override {
    fail("list_selections");
  }
  std::vector<SelectionSummary> list_selection_summaries(
      int, const std::optional<std::string>&) override {
    fail("list_selection_summaries");
  }
  std::int64_t prune_selections(StoreTime, std::int64_t) override { fail("prune_selections"); }
  std::vector<std::int64_t> record_probes(const std::vector<ProbeRecord>&) override {
    fail("record_probes");
  }
  std::vector<ProbeRecord> latest_probes() override { fail("latest_probes"); }
  std::optional<ProbeRecord> latest_probe(const std::string&) override { fail("latest_probe"); }
  std::vector<ProbeRecord> probe_history(const std::string&, StoreTime, StoreTime, int) override {
    fail("probe_history");
  }
  DownsampleResult downsample_probes(const ProbeRetention&, StoreTime) override {
    fail("downsample_probes");
  }
  std::optional<std::int64_t> record_workload_event(const WorkloadEvent&) override {
    fail("record_workload_event");
  }
  std::vector<WorkloadEvent> list_workload_events(const std::string&, const std::string&,
                                                  int) override {
    fail("list_workload_events");
  }
  std::vector<WorkloadEvent> cluster_events(const std::string&, StoreTime, StoreTime,
                                            int) override {
    fail("cluster_events");
  }
  std::int64_t start_export(const ExportRecord&) override { fail("start_export"); }
  bool begin_export(std::int64_t, StoreTime) override { fail("begin_export"); }
  bool update_export_progress(std::int64_t, const std::string&) override { fail("update"); }
  bool finish_export(std::int64_t, const std::string&, const std::string&, StoreTime) override {
    fail("finish_export");
  }
  std::optional<ExportRecord> get_export(std::int64_t) override { fail("get_export"); }
  std::vector<ExportRecord> list_exports(int, const std::optional<std::string>&) override {
    fail("list_exports");
  }
  void put_recovery(const RecoveryRecord&) override { fail("put_recovery"); }
  std::optional<RecoveryRecord> get_recovery(const std::string&) override { fail("get"); }
  std::vector<RecoveryRecord> list_recoveries(int, const std::optional<std::string>&) override {
    fail("list_recoveries");
  }
  bool create_managed(const ManagedWorkloadRecord&) override { fail("create_managed"); }
  bool update_managed(ManagedWorkloadRecord&, const std::optional<LeaseFence>&) override {
    fail("update_managed");
  }
  bool delete_managed(const std::string&) override { fail("delete_managed"); }
  std::optional<ManagedWorkloadRecord> get_managed(const std::string&) override {
    fail("get_managed");
  }
  std::vector<ManagedWorkloadRecord> list_managed(int, const std::vector<ManagedState>&,
                                                  const std::string&) override {
    fail("list_managed");
  }
  std::optional<BreakerState> get_breaker(const std::string&) override { fail("get_breaker"); }
  std::vector<BreakerState> list_breakers() override { fail("list_breakers"); }
  bool compare_and_set_breaker(const BreakerState&) override { fail("cas"); }
  std::optional<Lease> acquire_lease(const std::string&, const std::string&,
                                     std::chrono::milliseconds, StoreTime) override {
    fail("acquire_lease");
  }
  std::optional<Lease> renew_lease(const std::string&, const std::string&,
                                   std::chrono::milliseconds, StoreTime) override {
    fail("renew_lease");
  }
  bool release_lease(const std::string&, const std::string&, StoreTime) override {
    fail("release_lease");
  }
  std::optional<Lease> get_lease(const std::string&) override { fail("get_lease"); }
};

TEST_F(HealthMonitorTest, StoreFailuresAreCountedAndTheLoopGoesOn) {
  auto m = make(settings(30), std::make_shared<FailingStore>());
  m->set_clusters(clusters({"a", "b"}));
  EXPECT_EQ(m->run_due(), 2);
  clock->advance(1s);
  EXPECT_FALSE(m->fresh(cluster("a"), 0ms).from_cache);
  clock->advance(30s);
  EXPECT_EQ(m->run_due(), 2);
  const auto st = m->stats();
  EXPECT_EQ(st.store_failures, 5);
  EXPECT_EQ(st.downsample_failures, 1);
  EXPECT_TRUE(m->latest("b")->result.reachable);  // the cache still has it
  // /readyz says why: the store's own error.
  ASSERT_TRUE(m->store_problem().has_value());
  EXPECT_THAT(*m->store_problem(), ::testing::HasSubstr("disk I/O error"));
}

TEST_F(HealthMonitorTest, ProbesAreWrittenToTheHistoryWithBackendAndDuration) {
  TempDir dir;
  std::shared_ptr<StateStore> store = open_state_store(default_state_url(dir.path()));
  probes.cost = 250ms;
  auto m = make(settings(30), store);
  probes.set_down("b", true);
  m->set_clusters(clusters({"a", "b"}));
  m->run_due();
  clock->advance(30s);
  m->run_due();
  const auto history = store->probe_history("a", clock->now() - 1h, clock->now() + 1h);
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[0].backend, "xpk");
  EXPECT_GE(history[0].duration_ms, 250);
  EXPECT_TRUE(history[0].result.reachable);
  EXPECT_EQ(history[0].result.queue_depth, 1);
  const auto b = store->latest_probe("b");
  ASSERT_TRUE(b.has_value());
  EXPECT_FALSE(b->result.reachable);
  EXPECT_EQ(b->result.error, "probe timed out after 15s");
  EXPECT_EQ(m->stats().store_failures, 0);
  EXPECT_EQ(m->store_problem(), std::nullopt);
  EXPECT_EQ(m->stats().downsample_runs, 1);
}

TEST_F(HealthMonitorTest, HistoryIsDownsampledPeriodicallyWithTheRetentionSettings) {
  TempDir dir;
  std::shared_ptr<StateStore> store = open_state_store(default_state_url(dir.path()));
  ServeSettings s = settings(60);
  s.probe_retention_full_h = 1;
  s.probe_bucket_min = 60;
  auto m = make(s, store);
  m->set_clusters(clusters({"a"}));
  // Three hours of probes every minute: 181 probes.
  m->run_due();
  for (int i = 0; i < 180; ++i) {
    clock->advance(60s);
    m->run_due();
  }
  EXPECT_EQ(m->stats().loop_probes, 181);
  EXPECT_EQ(m->stats().downsample_runs, 13);  // at the start, then every 15 minutes
  // The last hour is whole; the two hours before it are thinned to about one probe per hour.
  const auto history = store->probe_history("a", clock->now() - 4h, clock->now() + 1s, 100000);
  EXPECT_LT(history.size(), 181u - 100u);
  EXPECT_GE(history.size(), 60u);
}

// A decision for cluster "a", made at `at`.
ClusterSelection decision_at(StoreTime at) {
  ClusterSelection s;
  s.selected_cluster = "a";
  s.accelerator = "tpu-v4-64";
  s.candidates = {"a"};
  s.reason = "selected a";
  s.decided_at = format_iso8601(at);
  return s;
}

TEST_F(HealthMonitorTest, OldDecisionsArePrunedWithTheStoreMaintenance) {
  TempDir dir;
  std::shared_ptr<StateStore> store = open_state_store(default_state_url(dir.path()));
  const auto old = store->record_selection(decision_at(clock->now() - 3h));
  const auto young = store->record_selection(decision_at(clock->now() - 30min));
  ServeSettings settings_1h = settings(60);
  settings_1h.selection_retention_h = 1;
  auto m = make(settings_1h, store);
  m->set_clusters(clusters({"a"}));
  m->run_due();
  EXPECT_EQ(m->stats().downsample_runs, 1);
  EXPECT_EQ(m->stats().selections_pruned, 1);
  EXPECT_FALSE(store->get_selection(old));
  EXPECT_TRUE(store->get_selection(young));
  // 45 minutes on, the next passes find the younger one over the hour.
  for (int i = 0; i < 45; ++i) {
    clock->advance(60s);
    m->run_due();
  }
  EXPECT_EQ(m->stats().selections_pruned, 2);
  EXPECT_FALSE(store->get_selection(young));
}

TEST_F(HealthMonitorTest, ABacklogOfOldDecisionsIsPrunedAPassAtATimeAMinuteApart) {
  TempDir dir;
  std::shared_ptr<StateStore> store = open_state_store(default_state_url(dir.path()));
  const ClusterSelection s = decision_at(clock->now() - 3h);
  const auto base = store->record_selection(s);
  // More repeats than one pass prunes, written in one transaction.
  const std::int64_t backlog = HealthMonitor::kPruneRowsPerPass + 40;
  std::vector<std::pair<std::int64_t, std::string>> repeats(backlog, {base, s.decided_at});
  store->record_repeated_selections(repeats);
  ServeSettings settings_1h = settings(3600);
  settings_1h.selection_retention_h = 1;
  auto m = make(settings_1h, store);
  m->set_clusters(clusters({"a"}));
  m->run_due();
  EXPECT_EQ(m->stats().selections_pruned, HealthMonitor::kPruneRowsPerPass);
  // The rest a minute later, not after kDownsampleEvery.
  clock->advance(HealthMonitor::kPruneAgainAfter - 1s);
  m->run_due();
  EXPECT_EQ(m->stats().downsample_runs, 1);
  clock->advance(1s);
  m->run_due();
  EXPECT_EQ(m->stats().downsample_runs, 2);
  EXPECT_EQ(m->stats().selections_pruned, backlog + 1);  // the repeats, then what they repeated
  EXPECT_TRUE(store->list_selections(10).empty());
  // Nothing left: the next pass is kDownsampleEvery on.
  clock->advance(HealthMonitor::kPruneAgainAfter);
  m->run_due();
  EXPECT_EQ(m->stats().downsample_runs, 2);
}

TEST_F(HealthMonitorTest, ARetentionOfZeroKeepsEveryDecision) {
  TempDir dir;
  std::shared_ptr<StateStore> store = open_state_store(default_state_url(dir.path()));
  const auto old = store->record_selection(decision_at(clock->now() - 24h * 400));
  ServeSettings keep = settings(60);
  keep.selection_retention_h = 0;
  auto m = make(keep, store);
  m->set_clusters(clusters({"a"}));
  m->run_due();
  EXPECT_EQ(m->stats().downsample_runs, 1);
  EXPECT_EQ(m->stats().selections_pruned, 0);
  EXPECT_TRUE(store->get_selection(old));
}

TEST(MonitoredProbeJson, HasEveryFieldAndNullForAnUnknownNextProbe) {
  MonitoredProbe p;
  p.result.cluster = "a";
  p.backend = "xpk";
  p.duration_ms = 12;
  p.age_ms = 3400;
  p.consecutive_failures = 2;
  const nlohmann::json j = p;
  EXPECT_EQ(j.at("result").at("cluster"), "a");
  EXPECT_EQ(j.at("backend"), "xpk");
  EXPECT_EQ(j.at("duration_ms"), 12);
  EXPECT_EQ(j.at("age_ms"), 3400);
  EXPECT_EQ(j.at("consecutive_failures"), 2);
  EXPECT_TRUE(j.at("next_probe_at").is_null());
  EXPECT_EQ(j.at("from_cache"), false);
}

}  // namespace
}  // namespace falcon
