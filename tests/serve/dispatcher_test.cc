// The MultiKueue dispatcher's decisions (dispatcher.h) over a fake manager and a fake decision,
// with a real SQLite store and the fake clock: which Workloads wait for it, who is nominated
// (workers only, with room, high priority first, spread), intent before the patch, conflicts,
// a store that refuses, renomination, other dispatchers' nominations, and the manager's
// configured dispatcher name. And the parsing of the manager's objects (multikueue.h).
#include "serve/dispatcher.h"

#include <algorithm>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "falcon/scoring.h"
#include "kube/multikueue.h"
#include "state/sqlite_connection.h"
#include "support/fake_clock.h"
#include "support/temp_dir.h"

namespace falcon {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::FakeClock;

constexpr const char* kCheck = "multikueue";

class FakeManager final : public kube::ManagerApi {
 public:
  std::string server() const override { return "https://manager.test"; }
  kube::WorkloadList list_workloads() override { return {}; }
  void watch_workloads(const std::string&, const std::function<bool(const kube::ManagerEvent&)>&,
                       const std::function<bool()>&) override {}
  kube::MultiKueueWiring wiring() override { return wiring_; }
  void nominate(const kube::ManagerWorkload& w, const std::vector<std::string>& clusters,
                const std::string& field_manager) override {
    if (conflict) throw kube::KubeError(409, "Conflict", "the object has been modified");
    patches.push_back({w.name, clusters});
    managers.push_back(field_manager);
  }
  std::optional<std::string> kueue_dispatcher() override { return configured; }

  kube::MultiKueueWiring wiring_;
  std::optional<std::string> configured;
  bool conflict = false;
  std::vector<std::pair<std::string, std::vector<std::string>>> patches;
  std::vector<std::string> managers;
};

// A cluster as the fake decision sees it.
struct Room {
  int queue = 0;
  double free_block = 64;
  std::optional<double> largest_block;  // its largest block, free or not; unknown by default
  bool eligible = true;
};

class DispatcherTest : public ::testing::Test {
 protected:
  DispatcherTest() {
    store_ = open_state_store("sqlite://" + (dir_.path() / "falcon.db").string());
    manager_ = std::make_shared<FakeManager>();
    manager_->wiring_.workers_by_check[kCheck] = {"w-a", "w-b", "w-c"};
    manager_->wiring_.clusters = {"w-a", "w-b", "w-c"};
    room_ = {{"w-a", {}}, {"w-b", {}}, {"w-c", {}}, {"other", {}}};
    settings_.dispatcher_name = "falcon.dev/dispatcher";
    settings_.renominate_after_s = 60;
  }

  // Free blocks of 48, 32 and 16 chips on w-a, w-b and w-c ("other" out): a 64-chip slice fits
  // nowhere now, and its room comes first on w-a.
  void free_blocks_48_32_16() {
    room_["w-a"].free_block = 48;
    room_["w-b"].free_block = 32;
    room_["w-c"].free_block = 16;
    room_["other"].eligible = false;
  }

  std::unique_ptr<Dispatcher> make() {
    DispatcherOptions o;
    o.settings = settings_;
    o.manager = manager_;
    o.store = store_;
    o.clock = clock_;
    o.registry_clusters = [this] {
      std::vector<std::string> names;
      for (const auto& [name, r] : room_) names.push_back(name);
      return names;
    };
    o.decide = [this](const std::string& accelerator, const PlacementHints& hints) {
      hints_.push_back(hints);
      return decide(accelerator, hints);
    };
    o.on_event = [this](const std::string&, const std::string& m) { events_.push_back(m); };
    auto d = std::make_unique<Dispatcher>(std::move(o));
    d->refresh_wiring();
    return d;
  }

  // Ranks the clusters not left out by queue (with what is in flight), then name; records the
  // decision as the control plane would.
  Decision decide(const std::string& accelerator, const PlacementHints& hints) {
    std::vector<CandidateScore> scores;
    for (const auto& [name, r] : room_) {
      CandidateScore c;
      c.cluster = name;
      const auto in_flight = hints.in_flight.count(name) ? hints.in_flight.at(name) : 0;
      c.signals.queue_depth = r.queue + in_flight;
      c.signals.slice_chips = accelerator == "v4-128" ? 64 : 16;
      c.signals.nominal_chips = 128;
      c.signals.free_chips = r.free_block;
      c.signals.largest_free_block = r.free_block;
      c.signals.largest_block = r.largest_block;
      if (const auto out = hints.left_out.find(name); out != hints.left_out.end()) {
        c.skip_reason = out->second;
      } else if (!r.eligible) {
        c.skip_reason = "breaker open";
      } else if (const auto misfit = capacity_misfit(c.signals)) {
        c.skip_reason = *misfit;  // selection.fragmentation.require_fit
      }
      c.eligible = c.skip_reason.empty();
      scores.push_back(c);
    }
    std::stable_sort(scores.begin(), scores.end(), [](const auto& a, const auto& b) {
      return std::tie(b.eligible, *a.signals.queue_depth) <
             std::tie(a.eligible, *b.signals.queue_depth);
    });
    int rank = 0;
    for (auto& c : scores) c.rank = c.eligible ? ++rank : 0;
    if (rank == 0) {
      NoAvailableClusterError e("no cluster for " + accelerator, accelerator, {});
      e.set_scores("least-wait", scores);
      throw e;
    }
    Decision d;
    d.selection.accelerator = accelerator;
    d.selection.selected_cluster = scores.front().cluster;
    d.selection.scores = scores;
    d.selection.policy = "least-wait";
    d.selection.decided_at = "2026-12-04T10:00:00Z";
    d.selection.selection_id = store_->record_selection(d.selection);
    return d;
  }

  static kube::ManagerWorkload workload(const std::string& name, int priority = 0,
                                        const std::string& created = "2026-12-04T10:00:00Z") {
    kube::ManagerWorkload w;
    w.uid = "uid-" + name;
    w.namespace_ = "team";
    w.name = name;
    w.resource_version = "7";
    w.created = created;
    w.priority = priority;
    w.accelerator = "v4-32";
    w.checks = {{kCheck, "Pending"}};
    w.quota_reserved = true;
    return w;
  }

  static kube::ManagerEvent added(const kube::ManagerWorkload& w) { return {"ADDED", w}; }

  // A Workload of `priority` admitted on `worker`.
  static kube::ManagerWorkload admitted(const std::string& name, int priority,
                                        const std::string& worker) {
    auto w = workload(name, priority);
    w.cluster_name = worker;
    w.checks = {{kCheck, "Ready"}};
    return w;
  }

  // A Workload of priority 0 and `accelerator` admitted on `worker`.
  static kube::ManagerWorkload running_on(const std::string& name, const std::string& accelerator,
                                          const std::string& worker) {
    auto w = admitted(name, 0, worker);
    w.accelerator = accelerator;
    return w;
  }

  // How many of the dispatcher's events contain `text`.
  long events_with(const std::string& text) const {
    return std::count_if(events_.begin(), events_.end(),
                         [&](const std::string& e) { return e.find(text) != std::string::npos; });
  }

  testing::TempDir dir_;
  std::shared_ptr<StateStore> store_;
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
  std::shared_ptr<FakeManager> manager_;
  std::map<std::string, Room> room_;
  DispatchSettings settings_;
  std::vector<PlacementHints> hints_;
  std::vector<std::string> events_;  // the dispatcher's events, in order
};

TEST_F(DispatcherTest, NominatesTheBestWorkerWithRoomAndRecordsItFirst) {
  room_["w-a"].queue = 2;
  auto d = make();
  d->apply_list({{workload("train")}, "10"});
  d->pass();
  ASSERT_EQ(manager_->patches.size(), 1u);
  EXPECT_EQ(manager_->patches[0].second, std::vector<std::string>{"w-b"});
  EXPECT_EQ(manager_->managers[0], "falcon.dev/dispatcher");
  // Registry clusters that are not workers are never candidates, and say why.
  ASSERT_EQ(hints_.size(), 1u);
  EXPECT_EQ(hints_[0].left_out.at("other"),
            "not a worker of the Workload's MultiKueue configuration");
  const auto records = store_->list_nominations("uid-train");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].clusters, std::vector<std::string>{"w-b"});
  EXPECT_EQ(records[0].outcome, std::optional<std::string>(kNominationPatched));
  EXPECT_GT(records[0].selection_id, 0);
  EXPECT_TRUE(store_->get_selection(records[0].selection_id).has_value());
  const DispatchStatus s = d->status();
  EXPECT_EQ(s.nominations, 1);
  EXPECT_EQ(s.nominated, 1);
  EXPECT_FALSE(s.problem);
  // Nominated: not decided again in the next pass.
  d->pass();
  EXPECT_EQ(manager_->patches.size(), 1u);
}

TEST_F(DispatcherTest, HighPriorityFirstAndDecisionsMadeTogetherSpread) {
  room_["w-a"].queue = 0;
  room_["w-b"].queue = 0;
  room_["w-c"].queue = 3;
  room_["other"].eligible = false;
  auto d = make();
  d->apply_list(
      {{workload("low", 0, "2026-12-04T09:00:00Z"), workload("high", 100), workload("mid", 10)},
       "10"});
  d->pass();
  // high takes w-a, mid w-b (w-a now has one in flight), low finds no worker with room: held.
  ASSERT_EQ(manager_->patches.size(), 2u);
  EXPECT_EQ(manager_->patches[0].first, "high");
  EXPECT_EQ(manager_->patches[0].second, std::vector<std::string>{"w-a"});
  EXPECT_EQ(manager_->patches[1].first, "mid");
  EXPECT_EQ(manager_->patches[1].second, std::vector<std::string>{"w-b"});
  const DispatchStatus s = d->status();
  EXPECT_EQ(s.waiting, 1);
  EXPECT_NE(s.held.at("team/low").find("no worker has room"), std::string::npos);
  // Room appears (high was admitted on w-a): low is nominated there.
  auto high = workload("high", 100);
  high.cluster_name = "w-a";
  d->apply_event({"MODIFIED", high});
  d->pass();
  ASSERT_EQ(manager_->patches.size(), 3u);
  EXPECT_EQ(manager_->patches[2].first, "low");
  EXPECT_EQ(manager_->patches[2].second, std::vector<std::string>{"w-a"});
  EXPECT_EQ(d->status().admitted, 1);
}

TEST_F(DispatcherTest, AHeldWorkloadKeepsTheRoomItWaitsForFromLowerPriorities) {
  // A 64-chip slice of priority 100 fits nowhere now; w-a, with the largest free block, is where
  // room for it comes first. A 16-chip Workload of lower priority goes elsewhere; one of the same
  // priority may still take w-a.
  free_blocks_48_32_16();
  auto big = workload("big", 100);
  big.accelerator = "v4-128";
  auto peer = workload("peer", 100);
  auto small = workload("small", 0);
  auto d = make();
  d->apply_list({{small, big}, "10"});
  d->pass();
  // w-a would be small's first choice (the fake ranks ties by name).
  ASSERT_EQ(manager_->patches.size(), 1u);
  EXPECT_EQ(manager_->patches[0].first, "small");
  EXPECT_EQ(manager_->patches[0].second, std::vector<std::string>{"w-b"});
  EXPECT_EQ(hints_.back().left_out.at("w-a"),
            "kept for team/big (priority 100, v4-128), held until it has room here");
  EXPECT_EQ(d->status().held.at("team/big"), "no cluster for v4-128");
  d->apply_event(added(peer));
  d->pass();
  ASSERT_EQ(manager_->patches.size(), 2u);
  EXPECT_EQ(manager_->patches[1].first, "peer");
  EXPECT_EQ(manager_->patches[1].second, std::vector<std::string>{"w-a"});

  // Without hold_until_room nothing is held, so nothing is kept.
  settings_.hold_until_room = false;
  manager_->patches.clear();
  hints_.clear();
  auto lax = make();
  big.uid = "uid-big2";
  small.uid = "uid-small2";
  lax->apply_list({{small, big}, "11"});
  lax->pass();
  for (const auto& h : hints_) EXPECT_EQ(h.left_out.count("w-a"), 0u);
}

TEST_F(DispatcherTest, WithoutKeepRoomALowerPriorityTakesTheRoomTheFirstHeldWaitsFor) {
  // As above, with dispatch.keep_room false: big is still held (it fits nowhere), and small
  // takes w-a, its own first choice, though big's room comes first there.
  settings_.keep_room = false;
  free_blocks_48_32_16();
  auto big = workload("big", 100);
  big.accelerator = "v4-128";
  auto small = workload("small", 0);
  auto d = make();
  d->apply_list({{small, big}, "10"});
  d->pass();
  ASSERT_EQ(manager_->patches.size(), 1u);
  EXPECT_EQ(manager_->patches[0].first, "small");
  EXPECT_EQ(manager_->patches[0].second, std::vector<std::string>{"w-a"});
  for (const auto& h : hints_) EXPECT_EQ(h.left_out.count("w-a"), 0u);
  EXPECT_EQ(d->status().held.at("team/big"), "no cluster for v4-128");
}

TEST_F(DispatcherTest, WithoutHoldTheBestCandidateIsNominatedEvenWhenItMustQueue) {
  settings_.hold_until_room = false;
  settings_.width = 2;
  for (auto& [name, r] : room_) r.queue = 4;
  room_["w-c"].queue = 1;
  auto d = make();
  d->apply_list({{workload("train")}, "10"});
  d->pass();
  ASSERT_EQ(manager_->patches.size(), 1u);
  EXPECT_EQ(manager_->patches[0].second, (std::vector<std::string>{"w-c", "w-a"}));
}

TEST_F(DispatcherTest, LeavesOtherDispatchersAndOtherChecksAlone) {
  settings_.admission_checks = {kCheck};
  manager_->wiring_.workers_by_check["other-check"] = {"w-a"};
  auto d = make();
  auto foreign = workload("foreign");
  foreign.nominated = {"w-c"};
  auto other = workload("other");
  other.checks = {{"other-check", "Pending"}};
  auto ready = workload("ready");
  ready.checks = {{kCheck, "Ready"}};
  auto placed = workload("placed");
  placed.cluster_name = "w-a";
  auto no_quota = workload("no-quota");
  no_quota.quota_reserved = false;
  d->apply_list({{foreign, other, ready, placed, no_quota}, "10"});
  d->pass();
  EXPECT_TRUE(manager_->patches.empty());
  EXPECT_EQ(d->status().foreign, 1);
}

TEST_F(DispatcherTest, RenominatesWithoutTheWorkersThatDidNotAdmitIt) {
  auto d = make();
  d->apply_list({{workload("train")}, "10"});
  d->pass();
  ASSERT_EQ(manager_->patches.size(), 1u);
  const auto first = manager_->patches[0].second;
  auto w = workload("train");
  w.nominated = first;
  w.resource_version = "11";
  d->apply_event({"MODIFIED", w});
  clock_->advance(59s);
  d->pass();
  EXPECT_EQ(manager_->patches.size(), 1u);  // not yet
  clock_->advance(2s);
  d->pass();
  ASSERT_EQ(manager_->patches.size(), 2u);
  EXPECT_NE(manager_->patches[1].second, first);
  EXPECT_EQ(hints_.back().left_out.at(first[0]),
            "nominated before and did not admit the Workload in time");
  EXPECT_EQ(d->status().renominations, 1);
}

// dispatch.preempt_after_s: a Workload of high priority that no worker has had room for that
// long is nominated to the one worker where evicting the fewest Workloads of lower priority,
// then the least chip-time since their admission, makes room. Medium priority never preempts.
TEST_F(DispatcherTest, AHighPriorityWorkloadHeldLongEnoughPreemptsWhereItCostsLeast) {
  settings_.preempt_after_s = 120;
  for (auto& [name, r] : room_) r.free_block = 0;  // every worker full
  auto d = make();
  // w-a: two of priority 0; w-b: one of priority 0, admitted a minute later; w-c: one as high
  // as the preemptor (never a victim).
  d->apply_list({{admitted("a1", 0, "w-a"), admitted("a2", 0, "w-a"), admitted("c1", 1000, "w-c"),
                  workload("urgent", 1000), workload("mid", 500)},
                 "10"});
  clock_->advance(60s);
  d->apply_event({"ADDED", admitted("b1", 0, "w-b")});
  d->pass();
  EXPECT_TRUE(manager_->patches.empty());  // held 60 s: not yet
  EXPECT_EQ(d->status().held.count("team/urgent"), 1u);
  clock_->advance(60s);
  d->pass();
  ASSERT_EQ(manager_->patches.size(), 1u);
  EXPECT_EQ(manager_->patches[0].first, "urgent");
  // One victim on w-a or w-b; w-b's ran for less time.
  EXPECT_EQ(manager_->patches[0].second, std::vector<std::string>{"w-b"});
  const DispatchStatus s = d->status();
  EXPECT_EQ(s.preemptions, 1);
  EXPECT_EQ(s.held.count("team/mid"), 1u);  // priority 500 < preempt_min_priority
  const auto records = store_->list_nominations("uid-urgent");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].outcome, std::optional<std::string>(kNominationPatched));
  EXPECT_NE(records[0].detail.find("preempting on w-b"), std::string::npos) << records[0].detail;
  EXPECT_NE(records[0].detail.find("team/b1"), std::string::npos) << records[0].detail;

  // Only the workers named in preempting_workers preempt; an open breaker is never chosen.
  settings_.preempting_workers = {"w-a", "w-c"};
  manager_->patches.clear();
  auto named = make();
  named->apply_list(
      {{admitted("a1", 0, "w-a"), admitted("b1", 0, "w-b"), workload("urgent", 1000)}, "20"});
  clock_->advance(120s);
  named->pass();
  ASSERT_EQ(manager_->patches.size(), 1u);
  EXPECT_EQ(manager_->patches[0].second, std::vector<std::string>{"w-a"});
  room_["w-a"].eligible = false;
  manager_->patches.clear();
  auto broken = make();
  broken->apply_list({{admitted("a1", 0, "w-a"), workload("urgent", 1000)}, "30"});
  clock_->advance(120s);
  broken->pass();
  EXPECT_TRUE(manager_->patches.empty());
  EXPECT_EQ(broken->status().preemptions, 0);
}

// Kueue evicts for a Workload only Workloads holding chips of its accelerator: a lower-priority
// Workload of another accelerator on a worker makes no room there.
TEST_F(DispatcherTest, ALowerPriorityWorkloadOfAnotherAcceleratorIsNoVictim) {
  settings_.preempt_after_s = 120;
  for (auto& [name, r] : room_) r.free_block = 0;  // every worker full
  // Two of 8 GPUs each on w-a: as many as the 16 TPU chips it needs, but not TPU chips.
  auto g1 = admitted("g1", 0, "w-a");
  auto g2 = admitted("g2", 0, "w-a");
  g1.accelerator = g2.accelerator = "h100-80gb-8";
  auto d = make();
  d->apply_list({{g1, g2, workload("urgent", 1000)}, "10"});
  clock_->advance(120s);
  d->pass();
  EXPECT_TRUE(manager_->patches.empty());
  EXPECT_EQ(d->status().preemptions, 0);
  d->apply_event({"ADDED", admitted("b1", 0, "w-b")});
  d->pass();
  ASSERT_EQ(manager_->patches.size(), 1u);
  EXPECT_EQ(manager_->patches[0].second, std::vector<std::string>{"w-b"});
  const auto records = store_->list_nominations("uid-urgent");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].detail.find("team/g"), std::string::npos) << records[0].detail;
}

// A slice's chips are one run in one block: evicting a Workload whose slice is at least as
// large frees a run the preemptor fits in, where as many chips counted across smaller Workloads
// may lie in different blocks (Kueue would then find no room and evict nothing). Only the first
// is a worker to preempt on, whatever the count.
TEST_F(DispatcherTest, OnlyAVictimWithASliceAsLargeMakesRoomForIt) {
  settings_.preempt_after_s = 120;
  for (auto& [name, r] : room_) r.free_block = 0;  // every worker full
  auto big = workload("big", 1000);
  big.accelerator = "v4-128";  // 64 chips
  auto d = make();
  // w-a: four slices of 32 chips, 128 of lower priority in all; w-c: one of 64 at the same
  // priority as the preemptor.
  auto c1 = running_on("c1", "v4-128", "w-c");
  c1.priority = 1000;
  d->apply_list({{running_on("a1", "v4-64", "w-a"), running_on("a2", "v4-64", "w-a"),
                  running_on("a3", "v4-64", "w-a"), running_on("a4", "v4-64", "w-a"), c1, big},
                 "10"});
  clock_->advance(120s);
  d->pass();
  EXPECT_TRUE(manager_->patches.empty());
  EXPECT_EQ(d->status().preemptions, 0);
  EXPECT_EQ(d->status().held.count("team/big"), 1u);

  // A 64-chip slice of lower priority on w-b, and a later one: Kueue evicts the later first.
  d->apply_event(added(running_on("b1", "v4-128", "w-b")));
  clock_->advance(10s);
  d->apply_event(added(running_on("b2", "v4-128", "w-b")));
  d->pass();
  ASSERT_EQ(manager_->patches.size(), 1u);
  EXPECT_EQ(manager_->patches[0].second, std::vector<std::string>{"w-b"});
  const auto records = store_->list_nominations("uid-big");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_NE(records[0].detail.find("evicting team/b2 (64 chips, priority 0) frees a run"),
            std::string::npos)
      << records[0].detail;
}

// dispatch.preempt_confirm_s: the worker's Kueue may not preempt after all (another policy, the
// victim gone meanwhile). A preempting nomination whose worker takes no Workload back (evicts
// nothing) within preempt_confirm_s is decided again at once, not after renominate_after_s, and
// that worker is not nominated to preempt for as large a slice again until a Workload of that
// priority or higher leaves it (an admission frees nothing Kueue could not evict before), or
// renominate_after_s passes. A nomination whose worker did evict waits as any other.
TEST_F(DispatcherTest, APreemptionItsWorkerDoesNotBeginIsDecidedAgainAndNotRepeated) {
  settings_.preempt_after_s = 120;
  settings_.preempt_confirm_s = 30;
  settings_.renominate_after_s = 600;
  for (auto& [name, r] : room_) r.free_block = 0;  // every worker full
  room_["other"].eligible = false;
  auto d = make();
  // w-b's victim ran for less time than w-a's: w-b costs least. h1 on w-b is never a victim.
  d->apply_list({{admitted("a1", 0, "w-a"), admitted("c1", 1000, "w-c"),
                  admitted("h1", 1000, "w-b"), workload("urgent", 1000)},
                 "10"});
  clock_->advance(60s);
  d->apply_event(added(admitted("b1", 0, "w-b")));
  clock_->advance(60s);
  d->pass();
  ASSERT_EQ(manager_->patches.size(), 1u);
  EXPECT_EQ(manager_->patches[0].second, std::vector<std::string>{"w-b"});

  // w-b evicts nothing: at 29 s the nomination stands, at 30 s it is decided again, and w-b,
  // still the cheapest, is not chosen again: w-a is.
  clock_->advance(29s);
  d->pass();
  EXPECT_EQ(manager_->patches.size(), 1u);
  clock_->advance(1s);
  d->pass();
  ASSERT_EQ(manager_->patches.size(), 2u);
  EXPECT_EQ(manager_->patches[1].second, std::vector<std::string>{"w-a"});
  DispatchStatus s = d->status();
  EXPECT_EQ(s.preemptions, 2);
  EXPECT_EQ(s.preemptions_unconfirmed, 1);
  EXPECT_EQ(s.renominations, 1);
  EXPECT_EQ(events_with("team/urgent: w-b evicted nothing and did not admit it within 30 s"), 1);

  // w-a takes a1 back (its Kueue evicted it): the nomination is confirmed and waits its
  // renominate_after_s.
  clock_->advance(10s);
  auto taken_back = workload("a1", 0);
  taken_back.resource_version = "8";
  d->apply_event({"MODIFIED", taken_back});
  clock_->advance(20s);
  d->pass();
  EXPECT_EQ(manager_->patches.size(), 2u);
  EXPECT_EQ(d->status().preemptions_unconfirmed, 1);
  auto placed = admitted("urgent", 1000, "w-a");  // the room a1 left
  placed.resource_version = "9";
  d->apply_event({"MODIFIED", placed});

  // Another high Workload as large: w-b did not preempt for one and nothing left it since. A
  // Workload admitted there makes no room Kueue could not make before.
  d->apply_event(added(workload("urgent2", 1000)));
  clock_->advance(120s);
  d->pass();
  EXPECT_EQ(manager_->patches.size(), 2u);
  EXPECT_EQ(d->status().held.count("team/urgent2"), 1u);
  d->apply_event(added(admitted("b2", 0, "w-b")));
  d->pass();
  EXPECT_EQ(manager_->patches.size(), 2u);
  // h1, which Kueue could not evict for it, finishes: preempting there is worth trying again.
  auto h1_done = admitted("h1", 1000, "w-b");
  h1_done.finished = true;
  h1_done.resource_version = "9";
  d->apply_event({"MODIFIED", h1_done});
  d->pass();
  ASSERT_EQ(manager_->patches.size(), 3u);
  EXPECT_EQ(manager_->patches[2].first, "urgent2");
  EXPECT_EQ(manager_->patches[2].second, std::vector<std::string>{"w-b"});

  // w-b evicts nothing for it either: it stays there (no other worker can preempt) but w-b is
  // not counted on again until renominate_after_s has passed (work the manager did not place
  // may have changed it), nothing having changed there.
  clock_->advance(30s);
  d->pass();
  s = d->status();
  EXPECT_EQ(s.preemptions_unconfirmed, 2);
  EXPECT_EQ(s.preemptions, 3);
  clock_->advance(569s);
  d->pass();
  EXPECT_EQ(d->status().preemptions, 3);
  clock_->advance(1s);
  d->pass();
  EXPECT_EQ(d->status().preemptions, 4);  // w-b again, still the nomination in place
  EXPECT_EQ(manager_->patches.size(), 3u);
}

// A Workload whose preempting nomination went unconfirmed and that stays held keeps that
// nomination and is decided again every pass: it is counted, and its worker remembered, once,
// even while another Workload's unconfirmed nomination on the same worker is remembered after it.
TEST_F(DispatcherTest, AnUnconfirmedPreemptionIsCountedOnceWhileItsWorkloadWaits) {
  settings_.preempt_after_s = 120;
  settings_.preempt_confirm_s = 30;
  settings_.renominate_after_s = 600;
  settings_.preempting_workers = {"w-b"};
  for (auto& [name, r] : room_) r.free_block = 0;  // every worker full
  auto d = make();
  d->apply_list({{admitted("b1", 0, "w-b"), workload("urgent", 1000)}, "10"});
  clock_->advance(120s);
  d->pass();  // urgent held 120 s: preempting on w-b
  ASSERT_EQ(manager_->patches.size(), 1u);
  EXPECT_EQ(manager_->patches[0].first, "urgent");
  d->apply_event(added(workload("urgent2", 2000)));
  clock_->advance(30s);
  d->pass();  // unconfirmed: decided again, held, nominated there still
  clock_->advance(90s);
  d->pass();  // urgent2 held 120 s, of a priority above the one w-b did not preempt for
  ASSERT_EQ(manager_->patches.size(), 2u);
  EXPECT_EQ(manager_->patches[1].first, "urgent2");
  EXPECT_EQ(manager_->patches[1].second, std::vector<std::string>{"w-b"});
  clock_->advance(30s);
  d->pass();  // urgent2's unconfirmed too
  for (int i = 0; i < 3; ++i) {
    clock_->advance(1s);
    d->pass();
  }
  const DispatchStatus s = d->status();
  EXPECT_EQ(s.preemptions, 2);
  EXPECT_EQ(s.preemptions_unconfirmed, 2);
  EXPECT_EQ(events_with("evicted nothing"), 2);
}

// A worker whose largest block is smaller than the slice can never hold it, however much frees
// up there: a held Workload neither keeps it from lower priorities nor preempts there, even where
// evicting would cost least by count.
TEST_F(DispatcherTest, AWorkerWhoseBlocksAreTooSmallIsNeitherKeptNorPreemptedFor) {
  room_["w-a"].free_block = 32;  // the largest free block of all, in blocks of 32
  room_["w-a"].largest_block = 32;
  room_["w-b"].free_block = 16;
  room_["w-b"].largest_block = 128;
  room_["w-c"].free_block = 0;
  room_["other"].eligible = false;
  auto big = workload("big", 1000);
  big.accelerator = "v4-128";  // 64 chips
  auto small = workload("small", 0);
  auto d = make();
  d->apply_list({{small, big}, "10"});
  d->pass();
  ASSERT_EQ(manager_->patches.size(), 1u);
  EXPECT_EQ(manager_->patches[0].first, "small");
  EXPECT_EQ(manager_->patches[0].second, std::vector<std::string>{"w-a"});
  EXPECT_EQ(hints_.back().left_out.count("w-a"), 0u);
  EXPECT_EQ(hints_.back().left_out.at("w-b"),
            "kept for team/big (priority 1000, v4-128), held until it has room here");

  // Preempting: a victim as large as the slice on each; w-a's is first by name, but only w-b
  // can ever hold the slice.
  settings_.preempt_after_s = 120;
  manager_->patches.clear();
  for (auto& [name, r] : room_) r.free_block = 0;
  auto preempting = make();
  big.uid = "uid-big2";
  preempting->apply_list(
      {{running_on("a1", "v4-128", "w-a"), running_on("b1", "v4-128", "w-b"), big}, "20"});
  clock_->advance(120s);
  preempting->pass();
  ASSERT_EQ(manager_->patches.size(), 1u);
  EXPECT_EQ(manager_->patches[0].second, std::vector<std::string>{"w-b"});
}

TEST_F(DispatcherTest, ARestartedDispatcherTakesBackItsOwnNominationsWithTheirAge) {
  std::vector<std::string> first;
  {
    auto d = make();
    d->apply_list({{workload("train")}, "10"});
    d->pass();
    ASSERT_EQ(manager_->patches.size(), 1u);
    first = manager_->patches[0].second;
  }
  clock_->advance(50s);
  auto mine = workload("train");
  mine.nominated = first;
  auto theirs = workload("theirs");
  theirs.nominated = {"w-c"};
  auto d = make();
  d->apply_list({{mine, theirs}, "12"});
  d->pass();
  EXPECT_EQ(d->status().nominated, 1);
  EXPECT_EQ(d->status().foreign, 1);
  EXPECT_EQ(manager_->patches.size(), 1u);
  clock_->advance(11s);  // 61 s after the first run nominated it
  d->pass();
  ASSERT_EQ(manager_->patches.size(), 2u);
  EXPECT_EQ(manager_->patches[1].first, "train");
  EXPECT_NE(manager_->patches[1].second, first);
}

TEST_F(DispatcherTest, AConflictIsRecordedAndNothingIsTakenAsNominated) {
  manager_->conflict = true;
  auto d = make();
  d->apply_list({{workload("train")}, "10"});
  d->pass();
  const auto records = store_->list_nominations("uid-train");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].outcome, std::optional<std::string>(kNominationConflict));
  EXPECT_EQ(d->status().conflicts, 1);
  EXPECT_EQ(d->status().nominated, 0);
}

TEST_F(DispatcherTest, AStoreThatRefusesTheIntentMeansNoPatch) {
  auto d = make();
  d->apply_list({{workload("train")}, "10"});
  // The table goes away under the store: the intent cannot be written.
  state::SqliteConnection((dir_.path() / "falcon.db").string(), 1000ms)
      .query("DROP TABLE nominations", {});
  d->pass();
  EXPECT_TRUE(manager_->patches.empty());
  ASSERT_TRUE(d->problem());
  EXPECT_NE(d->problem()->find("cannot record nominations"), std::string::npos) << *d->problem();
  EXPECT_EQ(d->status().nominated, 0);
}

TEST_F(DispatcherTest, AManagerConfiguredForAnotherDispatcherIsAProblem) {
  manager_->configured = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once";
  auto d = make();
  d->apply_list({{}, "1"});
  ASSERT_TRUE(d->problem());
  EXPECT_NE(d->problem()->find("dispatches with kueue.x-k8s.io/multikueue-dispatcher-all-at-once"),
            std::string::npos);
  manager_->configured = "falcon.dev/dispatcher";
  d->refresh_wiring();
  EXPECT_FALSE(d->problem());
}

TEST_F(DispatcherTest, NotReadyUntilListed) {
  auto d = make();
  ASSERT_TRUE(d->problem());
  EXPECT_NE(d->problem()->find("not been listed"), std::string::npos);
}

TEST(ManagerObjects, WorkloadFieldsAndAcceleratorType) {
  const json object = json::parse(R"({
    "metadata": {"name": "train", "namespace": "team", "uid": "u1", "resourceVersion": "42",
                 "creationTimestamp": "2026-12-04T10:00:00Z"},
    "spec": {"priority": 1000, "priorityClassName": "high",
             "podSets": [{"name": "slice", "count": 4, "template": {"spec": {"nodeSelector": {
               "cloud.google.com/gke-tpu-accelerator": "tpu-v4-podslice",
               "cloud.google.com/gke-tpu-topology": "2x2x4"}}}}]},
    "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}],
               "admissionChecks": [{"name": "multikueue", "state": "Pending"}],
               "nominatedClusterNames": ["w-a"]}})");
  const kube::ManagerWorkload w = kube::parse_manager_workload(object);
  EXPECT_EQ(w.uid, "u1");
  EXPECT_EQ(w.resource_version, "42");
  EXPECT_EQ(w.priority, 1000);
  EXPECT_EQ(w.accelerator, "v4-32");
  EXPECT_TRUE(w.quota_reserved);
  EXPECT_FALSE(w.finished);
  EXPECT_EQ(w.check_state("multikueue"), "Pending");
  EXPECT_EQ(w.nominated, std::vector<std::string>{"w-a"});

  json labelled = object;
  labelled["metadata"]["labels"] = {{kube::kAcceleratorLabel, "tpu-v5e-16"}};
  EXPECT_EQ(kube::parse_manager_workload(labelled).accelerator, "v5litepod-16");
  labelled["metadata"]["labels"] = {{kube::kAcceleratorLabel, "tpu-v4-48"}};
  const auto bad = kube::parse_manager_workload(labelled);
  EXPECT_TRUE(bad.accelerator.empty());
  EXPECT_NE(bad.accelerator_problem.find("tpu-v4-48"), std::string::npos);

  json bare = object;
  bare["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"] = json::object();
  EXPECT_NE(kube::parse_manager_workload(bare).accelerator_problem.find("node selector"),
            std::string::npos);
  json nameless = object;
  nameless["metadata"].erase("uid");
  EXPECT_THROW(kube::parse_manager_workload(nameless), std::invalid_argument);
}

TEST(ManagerObjects, WiringMapsChecksToWorkersInOrder) {
  const json checks = json::parse(R"({"items": [
    {"metadata": {"name": "mk"}, "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
      "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "cfg"}}},
    {"metadata": {"name": "prov"}, "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"}}]})");
  const json configs = json::parse(
      R"({"items": [{"metadata": {"name": "cfg"}, "spec": {"clusters": ["w-b", "w-a"]}}]})");
  const json clusters = json::parse(R"({"items": [
    {"metadata": {"name": "w-a"}, "status": {"conditions": [{"type": "Active", "status": "True"}]}},
    {"metadata": {"name": "w-b"}, "status": {"conditions": [{"type": "Active", "status": "False",
      "reason": "ClientConnectionFailed", "message": "dial tcp: refused"}]}}]})");
  const auto wiring = kube::parse_multikueue_wiring(checks, configs, clusters);
  ASSERT_EQ(wiring.workers_by_check.size(), 1u);
  EXPECT_EQ(wiring.workers_by_check.at("mk"), (std::vector<std::string>{"w-b", "w-a"}));
  EXPECT_EQ(wiring.inactive.count("w-a"), 0u);
  EXPECT_NE(wiring.inactive.at("w-b").find("ClientConnectionFailed"), std::string::npos);
}

}  // namespace
}  // namespace falcon
