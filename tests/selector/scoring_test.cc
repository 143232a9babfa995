// The selection signals, the score formula, least-wait's prediction, the verdicts and replay
// (issue 15, docs/selection.md) on hand-built histories and the fake clock; the history as the
// state store holds it (SQLite); and the selector deciding by policy with a history loader.
#include "falcon/scoring.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "falcon/circuit_breaker.h"
#include "falcon/errors.h"
#include "falcon/selector.h"
#include "support/fake_clock.h"
#include "support/temp_dir.h"
#include "util/time_format.h"

namespace falcon {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using testing::FakeClock;
using ::testing::HasSubstr;

const StoreTime kNow = FakeClock().now();  // 2026-04-13T08:00:00Z

ClusterProbeResult probe(int queue, int running = 1, StoreTime at = kNow) {
  ClusterProbeResult p;
  p.cluster = "tpu-a";
  p.reachable = true;
  p.queue_depth = queue;
  p.running_count = running;
  p.probed_at = format_iso8601(at);
  return p;
}

ProbeRecord record(StoreTime at, bool reachable, std::optional<int> queue, int duration_ms) {
  ProbeRecord r;
  r.result.cluster = "tpu-a";
  r.result.reachable = reachable;
  r.result.queue_depth = reachable ? queue : std::nullopt;
  r.result.running_count = reachable ? std::optional<int>(1) : std::nullopt;
  if (!reachable) r.result.error = "timed out";
  r.result.probed_at = format_iso8601(at);
  r.backend = "xpk";
  r.duration_ms = duration_ms;
  return r;
}

WorkloadEvent event(const std::string& workload, const char* state, StoreTime at) {
  return WorkloadEvent{.cluster = "tpu-a", .workload = workload, .state = state, .observed_at = at};
}

// --- Signals.

TEST(Signals, QueueAndRunningComeFromTheProbe) {
  const ClusterSignals s = compute_signals(probe(3, 7), 120.0, {}, kNow, {});
  EXPECT_EQ(s.queue_depth, 3);
  EXPECT_EQ(s.running, 7);
  EXPECT_EQ(s.drain_per_min, std::nullopt);  // no history
  EXPECT_EQ(s.recent_wait_s, std::nullopt);
  EXPECT_DOUBLE_EQ(*s.health, 1.0);  // this probe only
  EXPECT_EQ(s.health_samples, 1);
  EXPECT_DOUBLE_EQ(*s.latency_ms, 120.0);  // no history: this probe's duration
}

TEST(Signals, HealthIsTheShareOfSuccessfulProbesAndSubmitsInTheWindow) {
  ClusterHistory h;
  h.probes = {record(kNow - minutes(40), false, {}, 100),  // before the 30 min window
              record(kNow - minutes(20), false, {}, 100), record(kNow - minutes(10), true, 1, 100),
              record(kNow - minutes(5), true, 1, 100)};
  h.submits = 3;
  h.submit_failures = 2;
  const ClusterSignals s = compute_signals(probe(1), 50.0, h, kNow, {});
  // ok: 2 probes + this one + 3 submits = 6; all: 3 probes + this one + 3 + 2 = 9
  EXPECT_EQ(s.health_samples, 9);
  EXPECT_DOUBLE_EQ(*s.health, 6.0 / 9.0);
}

TEST(Signals, LatencyIsTheMeanProbeDurationOfTheWindow) {
  ClusterHistory h;
  h.probes = {record(kNow - minutes(40), true, 0, 9000),  // outside
              record(kNow - minutes(20), true, 0, 100), record(kNow - minutes(10), false, {}, 500)};
  const ClusterSignals s = compute_signals(probe(0), 5.0, h, kNow, {});
  EXPECT_DOUBLE_EQ(*s.latency_ms, 300.0);  // the history's, not this (cached) probe's 5 ms
}

TEST(Signals, DrainCountsQueueDecreasesBetweenProbesOverTheCoveredSpan) {
  ClusterHistory h;
  // 20 minutes of history: 6 -> 4 -> 5 -> 2, then this probe at 1: decreases 2 + 3 + 1 = 6.
  h.probes = {record(kNow - minutes(20), true, 6, 10), record(kNow - minutes(15), true, 4, 10),
              record(kNow - minutes(10), true, 5, 10), record(kNow - minutes(5), true, 2, 10)};
  const ClusterSignals s = compute_signals(probe(1), {}, h, kNow, {});
  EXPECT_DOUBLE_EQ(*s.drain_per_min, 6.0 / 20.0);
}

TEST(Signals, DrainCountsAdmissionEventsWhenTheyExceedTheProbesView) {
  ClusterHistory h;
  h.probes = {record(kNow - minutes(10), true, 1, 10)};
  h.events = {event("w1", kStateQueued, kNow - minutes(10)),
              event("w1", kStateRunning, kNow - minutes(8)),
              event("w2", kStateQueued, kNow - minutes(7)),
              event("w2", kStateCompleted, kNow - minutes(2)),  // RUNNING not observed: counted
              event("w3", kStateRunning, kNow - minutes(1)),
              event("w3", kStateCompleted, kNow - seconds(30))};  // after RUNNING: not again
  const ClusterSignals s = compute_signals(probe(1), {}, h, kNow, {});
  EXPECT_DOUBLE_EQ(*s.drain_per_min, 3.0 / 10.0);
}

TEST(Signals, DrainIsUnknownWithoutTwoSamplesOrUnderAMinute) {
  ClusterHistory h;
  EXPECT_EQ(compute_signals(probe(1), {}, h, kNow, {}).drain_per_min, std::nullopt);
  h.probes = {record(kNow - seconds(30), true, 3, 10)};  // covers 30 s only
  EXPECT_EQ(compute_signals(probe(1), {}, h, kNow, {}).drain_per_min, std::nullopt);
  h.probes = {record(kNow - minutes(30), true, 3, 10)};  // covers the window, no decrease
  h.probes.front().result.queue_depth = 1;
  EXPECT_DOUBLE_EQ(*compute_signals(probe(1), {}, h, kNow, {}).drain_per_min, 0.0);
}

TEST(Signals, RecentWaitIsTheMeanQueuedToRunningTimeOfTheWindowsAdmissions) {
  ClusterHistory h;
  h.events = {event("w1", kStateRunning, kNow - minutes(20)),
              event("w2", kStateRunning, kNow - minutes(10)),
              event("w3", kStateRunning, kNow - minutes(5))};  // queued time unknown: left out
  h.queued_since = {{"w1", kNow - minutes(22)}, {"w2", kNow - minutes(14)}};
  const ClusterSignals s = compute_signals(probe(0), {}, h, kNow, {});
  EXPECT_DOUBLE_EQ(*s.recent_wait_s, (120.0 + 240.0) / 2);
}

TEST(Signals, ASmallerWindowForgetsOlderHistory) {
  ClusterHistory h;
  h.events = {event("w1", kStateRunning, kNow - minutes(20))};
  h.queued_since = {{"w1", kNow - minutes(22)}};
  const SignalSettings ten_minutes{.window_s = 600};
  const ClusterSignals s = compute_signals(probe(0), {}, h, kNow, ten_minutes);
  EXPECT_EQ(s.recent_wait_s, std::nullopt);
  EXPECT_EQ(s.drain_per_min, std::nullopt);
}

// --- Predicted wait.

TEST(PredictedWait, FollowsQueueOverDrainWithAPriorAndAnUpperBound) {
  const SignalSettings g;  // window 1800 s, prior 1/min
  ClusterSignals s;
  EXPECT_EQ(predicted_wait_s(s, g), std::nullopt);  // queue unknown
  s.queue_depth = 0;
  EXPECT_DOUBLE_EQ(*predicted_wait_s(s, g), 0.0);
  s.queue_depth = 3;
  s.drain_per_min = 2.0;
  EXPECT_DOUBLE_EQ(*predicted_wait_s(s, g), 4 / 2.0 * 60);  // (3 + 1) / 2 per min = 120 s
  s.drain_per_min = 0.0;                                    // none in 30 min: one per window
  EXPECT_DOUBLE_EQ(*predicted_wait_s(s, g), 4 * 1800.0);
  s.drain_per_min.reset();  // no history: the prior
  EXPECT_DOUBLE_EQ(*predicted_wait_s(s, g), 4 * 60.0);
}

TEST(PredictedWait, AddsTheClustersAdmissionDelay) {
  const SignalSettings g;
  ClusterSignals s;
  s.admission_delay_s = 90;
  EXPECT_EQ(predicted_wait_s(s, g), std::nullopt);  // queue unknown: still unknown
  s.queue_depth = 0;
  EXPECT_DOUBLE_EQ(*predicted_wait_s(s, g), 90.0);  // room now, pods start 90 s later
  s.queue_depth = 1;
  s.drain_per_min = 1.0;
  EXPECT_DOUBLE_EQ(*predicted_wait_s(s, g), 120.0 + 90.0);
  ClusterProbeResult p = probe(0);
  p.admission_delay_s = 45;
  EXPECT_EQ(compute_signals(p, 10.0, {}, kNow, {}).admission_delay_s, 45.0);
}

// --- Ranking.

CandidateInput input(const std::string& name, int priority, int queue, double drain, double health,
                     double latency_ms) {
  CandidateInput c;
  c.cluster = name;
  c.priority = priority;
  c.max_queue_depth = 5;
  c.signals.queue_depth = queue;
  c.signals.running = 4;
  c.signals.drain_per_min = drain;
  c.signals.health = health;
  c.signals.health_samples = 10;
  c.signals.latency_ms = latency_ms;
  return c;
}

const SignalTerm& term(const CandidateScore& s, const std::string& name) {
  for (const auto& t : s.terms) {
    if (t.signal == name) return t;
  }
  throw std::logic_error("no term " + name);
}

// The worked example of docs/selection.md.
std::vector<CandidateInput> worked_example() {
  auto a = input("tpu-a", 1, 4, 0.5, 0.9, 800);  // preferred, but a slow queue
  auto b = input("tpu-b", 2, 1, 2.0, 1.0, 200);  // second choice, drains fast
  auto c = input("tpu-c", 1, 6, 1.0, 1.0, 100);  // full
  c.skip_reason = "queue full: queue_depth=6 > max=5";
  a.signals.recent_wait_s = 600;
  return {a, b, c};
}

TEST(ScorePolicy, TheFormulaOfTheWorkedExample) {
  const SelectionSettings settings;  // default weights: 1, 1, 2, 1, 2, 0.5 (sum 7.5)
  const RankedCandidates r = rank_candidates(SelectionPolicy::kScore, settings, worked_example());
  ASSERT_EQ(r.scores.size(), 3u);
  const CandidateScore& a = r.scores[0];
  const CandidateScore& b = r.scores[1];
  // tpu-a: priority 1/1; queue 1 - 4/6; wait: (4+1)/0.5 per min = 600 s -> 1/(1+1) = 0.5;
  // recent wait 600 s -> 0.5; health 0.9; latency 1/(1+0.8).
  EXPECT_DOUBLE_EQ(*term(a, "priority").normalized, 1.0);
  EXPECT_DOUBLE_EQ(*term(a, "queue").normalized, 1.0 - 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(*term(a, "wait").value, 600.0);
  EXPECT_DOUBLE_EQ(*term(a, "wait").normalized, 0.5);
  EXPECT_DOUBLE_EQ(*term(a, "recent_wait").normalized, 0.5);
  EXPECT_DOUBLE_EQ(*term(a, "health").normalized, 0.9);
  EXPECT_DOUBLE_EQ(*term(a, "latency").normalized, 1.0 / 1.8);
  const double a_total =
      (1.0 * 1.0 + 1.0 * (1.0 / 3.0) + 2.0 * 0.5 + 1.0 * 0.5 + 2.0 * 0.9 + 0.5 / 1.8) / 7.5;
  EXPECT_NEAR(*a.total, a_total, 1e-12);
  EXPECT_NEAR(term(a, "wait").contribution, 2.0 * 0.5 / 7.5, 1e-12);
  // tpu-b: priority 1/2; queue 1 - 1/6; wait (1+1)/2 per min = 60 s -> 1/1.1; recent wait
  // unknown -> 0.5; health 1; latency 1/1.2.
  const double b_total = (0.5 + 5.0 / 6.0 + 2.0 / 1.1 + 0.5 + 2.0 + 0.5 / 1.2) / 7.5;
  EXPECT_NEAR(*b.total, b_total, 1e-12);
  double sum = 0;
  for (const auto& t : b.terms) sum += t.contribution;
  EXPECT_NEAR(sum, *b.total, 1e-12);  // the contributions add up to the total
  ASSERT_TRUE(r.winner);
  EXPECT_EQ(*r.winner, 1u);  // b_total 0.809 > a_total 0.655
  EXPECT_EQ(b.rank, 1);
  EXPECT_EQ(a.rank, 2);
  EXPECT_EQ(r.scores[2].rank, 0);
  EXPECT_EQ(b.verdict, fmt::format("selected: score {:.3f}", b_total));
  EXPECT_THAT(a.verdict,
              HasSubstr(fmt::format("lost to tpu-b: score {:.3f} < {:.3f}", a_total, b_total)));
  EXPECT_THAT(a.verdict, HasSubstr("most behind on wait"));
  EXPECT_EQ(r.scores[2].verdict, "skipped: queue full: queue_depth=6 > max=5");
  EXPECT_THAT(r.summary, HasSubstr("selected tpu-b: reachable, queue_depth=1 <= max=5; policy "
                                   "score: 0.809, best of 2"));
}

TEST(ScorePolicy, WeightsDecideAndATieGoesToPriorityOrder) {
  SelectionSettings settings;
  settings.weights = ScoreWeights{
      .priority = 0, .queue = 0, .wait = 0, .recent_wait = 0, .health = 0, .latency = 1};
  auto fast = input("fast", 3, 0, 1, 1, 100);
  auto slow = input("slow", 1, 0, 1, 1, 900);
  RankedCandidates r = rank_candidates(SelectionPolicy::kScore, settings, {slow, fast});
  EXPECT_EQ(r.scores[*r.winner].cluster, "fast");
  EXPECT_DOUBLE_EQ(term(r.scores[0], "priority").contribution, 0.0);  // weight 0
  slow.signals.latency_ms = 100;                                      // now equal
  r = rank_candidates(SelectionPolicy::kScore, settings, {fast, slow});
  EXPECT_EQ(r.scores[*r.winner].cluster, "slow");  // priority 1 < 3
  EXPECT_THAT(r.scores[0].verdict, HasSubstr("lost to slow: tie; priority 3 > 1"));
}

TEST(ScorePolicy, UnknownSignalsCountAsHalf) {
  CandidateInput c;
  c.cluster = "new";
  c.signals.queue_depth = 0;
  const RankedCandidates r = rank_candidates(SelectionPolicy::kScore, SelectionSettings{}, {c});
  EXPECT_DOUBLE_EQ(*term(r.scores[0], "health").normalized, 0.5);
  EXPECT_DOUBLE_EQ(*term(r.scores[0], "latency").normalized, 0.5);
  EXPECT_DOUBLE_EQ(*term(r.scores[0], "recent_wait").normalized, 0.5);
  EXPECT_DOUBLE_EQ(*term(r.scores[0], "wait").normalized, 1.0);  // empty queue: no wait
}

TEST(LeastWaitPolicy, PicksTheSmallestPredictedWait) {
  const RankedCandidates r =
      rank_candidates(SelectionPolicy::kLeastWait, SelectionSettings{}, worked_example());
  EXPECT_EQ(*r.winner, 1u);
  EXPECT_DOUBLE_EQ(*r.scores[1].total, 60.0);
  EXPECT_DOUBLE_EQ(*r.scores[0].total, 600.0);
  EXPECT_THAT(
      r.scores[0].verdict,
      HasSubstr("lost to tpu-b: predicted wait 10.0m > 60s (queue_depth 4, drain 0.5/min)"));
  EXPECT_THAT(r.summary, HasSubstr("policy least-wait: predicted wait 60s, least of 2"));
}

TEST(LeastWaitPolicy, EqualWaitsFallBackToPriorityOrder) {
  auto a = input("a", 2, 0, 1, 1, 1);
  auto b = input("b", 1, 0, 1, 1, 1);
  const RankedCandidates r =
      rank_candidates(SelectionPolicy::kLeastWait, SelectionSettings{}, {a, b});
  EXPECT_EQ(r.scores[*r.winner].cluster, "b");
  EXPECT_THAT(r.scores[0].verdict, HasSubstr("tie; priority 2 > 1"));
}

TEST(LeastWaitPolicy, AmongClustersWithRoomTheOneThatAdmitsAtOnceWins) {
  // Both have room; "slow" (better by priority and fit) provisions nodes for a minute first.
  auto slow = input("slow", 1, 0, 1, 1, 1);
  auto fast = input("fast", 2, 0, 1, 1, 1);
  slow.signals.admission_delay_s = 60;
  fast.signals.admission_delay_s = 0;
  const RankedCandidates r =
      rank_candidates(SelectionPolicy::kLeastWait, SelectionSettings{}, {slow, fast});
  EXPECT_EQ(r.scores[*r.winner].cluster, "fast");
  EXPECT_THAT(r.scores[0].verdict,
              HasSubstr("predicted wait 60s > 0s (queue_depth 0, drain 1/min, admission delay "
                        "60s)"));
  EXPECT_DOUBLE_EQ(*term(r.scores[0], "admission_delay").value, 60.0);
}

TEST(PriorityPolicy, TheSpecsOrderWithEveryLoserExplained) {
  const RankedCandidates r =
      rank_candidates(SelectionPolicy::kPriority, SelectionSettings{}, worked_example());
  EXPECT_EQ(*r.winner, 0u);
  EXPECT_EQ(r.summary, "selected tpu-a: reachable, queue_depth=4 <= max=5");
  EXPECT_EQ(r.scores[0].verdict, "selected: priority 1, queue_depth 4");
  EXPECT_EQ(r.scores[1].verdict, "lost to tpu-a: priority 2 > 1");
  EXPECT_EQ(r.scores[0].total, std::nullopt);
  auto x = input("x", 1, 2, 1, 1, 1);
  auto y = input("y", 1, 1, 1, 1, 1);
  const RankedCandidates t =
      rank_candidates(SelectionPolicy::kPriority, SelectionSettings{}, {x, y});
  EXPECT_EQ(t.scores[0].verdict, "lost to y: same priority 1, queue_depth 2 > 1");
}

TEST(PriorityPolicy, EqualQueuesGoToFewerRunningThenToFileOrder) {
  // A burst of placements on equals: the first in file order is busier, the second wins.
  auto busy = input("busy", 1, 0, 1, 1, 1);
  auto idle = input("idle", 1, 0, 1, 1, 1);
  busy.signals.running = 9;
  idle.signals.running = 2;
  const RankedCandidates r =
      rank_candidates(SelectionPolicy::kPriority, SelectionSettings{}, {busy, idle});
  EXPECT_EQ(r.scores[*r.winner].cluster, "idle");
  EXPECT_EQ(r.scores[0].verdict, "lost to idle: same priority 1 and queue_depth 0, running 9 > 2");
  // Slot priority still comes first, and a full tie still goes to file order.
  auto preferred = input("preferred", 1, 0, 1, 1, 1);
  preferred.signals.running = 15;
  auto second = input("second", 2, 0, 1, 1, 1);
  second.signals.running = 0;
  const RankedCandidates p =
      rank_candidates(SelectionPolicy::kPriority, SelectionSettings{}, {second, preferred});
  EXPECT_EQ(p.scores[*p.winner].cluster, "preferred");
  const RankedCandidates tie =
      rank_candidates(SelectionPolicy::kPriority, SelectionSettings{},
                      {input("a", 1, 0, 1, 1, 1), input("b", 1, 0, 1, 1, 1)});
  EXPECT_EQ(tie.scores[*tie.winner].cluster, "a");
  EXPECT_EQ(tie.scores[1].verdict,
            "lost to a: full tie (priority 1, queue_depth 0, running 4), later in file order");
}

TEST(Ranking, NoEligibleCandidateHasNoWinner) {
  auto c = input("c", 1, 9, 1, 1, 1);
  c.skip_reason = "unreachable: timed out";
  const RankedCandidates r = rank_candidates(SelectionPolicy::kScore, SelectionSettings{}, {c});
  EXPECT_FALSE(r.winner);
  EXPECT_EQ(r.scores[0].verdict, "skipped: unreachable: timed out");
  EXPECT_EQ(r.scores[0].total, std::nullopt);
}

// --- Replay.

ClusterSelection recorded_priority_decision() {
  const RankedCandidates r =
      rank_candidates(SelectionPolicy::kPriority, SelectionSettings{}, worked_example());
  ClusterSelection s;
  s.selected_cluster = "tpu-a";
  s.accelerator = "v4-64";
  s.candidates = {"tpu-a", "tpu-b", "tpu-c"};
  s.reason = r.summary;
  s.decided_at = "2026-04-12T08:00:00.000Z";
  s.selection_id = 42;
  s.policy = "priority";
  s.scores = r.scores;
  return s;
}

TEST(Replay, ADecisionReplaysIdenticallyUnderItsOwnPolicyThroughJson) {
  const ClusterSelection recorded = recorded_priority_decision();
  const nlohmann::json j = recorded;  // as `cluster select --json` prints it
  const ClusterSelection back = j.get<ClusterSelection>();
  EXPECT_EQ(back, recorded);
  const ClusterSelection same =
      replay_selection(back, SelectionPolicy::kPriority, SelectionSettings{}, kNow);
  EXPECT_EQ(same.selected_cluster, "tpu-a");
  EXPECT_EQ(same.scores, recorded.scores);
  EXPECT_EQ(same.reason, recorded.reason);
  EXPECT_EQ(same.selection_id, 0);
  EXPECT_EQ(same.decided_at, format_iso8601(kNow));
}

TEST(Replay, AnotherPolicyChangesTheDecisionAndKeepsSkippedCandidatesOut) {
  const ClusterSelection replayed = replay_selection(
      recorded_priority_decision(), SelectionPolicy::kLeastWait, SelectionSettings{}, kNow);
  EXPECT_EQ(replayed.selected_cluster, "tpu-b");
  EXPECT_EQ(replayed.policy, "least-wait");
  EXPECT_FALSE(replayed.scores[2].eligible);
  EXPECT_EQ(replayed.scores[2].verdict, "skipped: queue full: queue_depth=6 > max=5");
}

TEST(Replay, RefusesARecordWithoutScores) {
  ClusterSelection old = recorded_priority_decision();
  old.scores.clear();
  try {
    replay_selection(old, SelectionPolicy::kScore, SelectionSettings{}, kNow);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("selection 42 for v4-64 has no candidate scores"));
  }
  ClusterSelection twice = recorded_priority_decision();
  twice.scores[1].cluster = "tpu-a";
  EXPECT_THROW(replay_selection(twice, SelectionPolicy::kScore, SelectionSettings{}, kNow),
               std::invalid_argument);
}

// --- The history as the state store keeps it.

TEST(ClusterHistoryFromStore, ReadsProbesEventsQueuedTimesSubmitsAndSubmitFailures) {
  falcon::testing::TempDir tmp;
  auto store = open_state_store((tmp.path() / "falcon.db").string());
  store->record_probes({record(kNow - minutes(40), true, 9, 10),  // outside the window
                        record(kNow - minutes(20), true, 3, 10),
                        record(kNow - minutes(10), true, 1, 10)});
  SubmissionRow row;
  row.handle = {"w1", "tpu-a", "default", format_iso8601(kNow - minutes(25))};
  row.accelerator_type = "v4-64";
  store->record_submission(row);
  store->record_workload_event(event("w1", kStateQueued, kNow - minutes(24)));
  store->record_workload_event(event("w1", kStateRunning, kNow - minutes(15)));
  store->record_workload_event(event("w2", kStateQueued, kNow - minutes(14)));
  store->record_workload_event(event("w2", kStateRunning, kNow - minutes(12)));
  BreakerState b{
      .key = breaker_key("tpu-a", "v4-64"), .consecutive_failures = 2, .updated_at = kNow};
  ASSERT_TRUE(store->compare_and_set_breaker(b));

  const ClusterHistory h = load_cluster_history(*store, "tpu-a", "tpu-v4-64", kNow, minutes(30));
  ASSERT_EQ(h.probes.size(), 2u);
  EXPECT_EQ(h.events.size(), 4u);
  EXPECT_EQ(h.queued_since.at("w1"), kNow - minutes(25));  // the submission time
  EXPECT_EQ(h.queued_since.at("w2"), kNow - minutes(14));  // its first QUEUED observation
  EXPECT_EQ(h.submits, 1);
  EXPECT_EQ(h.submit_failures, 2);
  const ClusterSignals s = compute_signals(probe(0), {}, h, kNow, {});
  EXPECT_DOUBLE_EQ(*s.recent_wait_s, (600.0 + 120.0) / 2);
  // 3 -> 1 -> 0 is 3 decreases (2 admission events): 3 over the 24 minutes covered (from the
  // first event).
  EXPECT_DOUBLE_EQ(*s.drain_per_min, 3.0 / 24.0);
}

// --- The selector decides by the accelerator's policy with the loader's history.

class TableProber : public ClusterProber {
 public:
  explicit TableProber(std::map<std::string, int> queues) : queues_(std::move(queues)) {}
  ClusterProbeResult probe(const ClusterConfig& cluster) const override {
    ClusterProbeResult r;
    r.cluster = cluster.name;
    r.reachable = true;
    r.queue_depth = queues_.at(cluster.name);
    r.running_count = 2;
    r.probed_at = format_iso8601(kNow);
    return r;
  }

 private:
  std::map<std::string, int> queues_;
};

ClusterConfig cluster(const std::string& name) {
  ClusterConfig c;
  c.name = name;
  c.accelerator_slots = {{.type = "v4-64", .device_class = DeviceClass::kTpu, .priority = 1}};
  return c;
}

TEST(SelectorPolicies, ThePolicyOfTheAcceleratorDecidesOnHistorySignals) {
  // tpu-a: preferred, queue 3 that drained 1 in 30 min; tpu-b: queue 4 draining 4/min.
  const TableProber prober({{"tpu-a", 3}, {"tpu-b", 4}});
  ClusterRegistry registry;  // unused: select_among gets the candidates
  auto clock = std::make_shared<FakeClock>();
  auto history = [](const ClusterConfig& c, const std::string& accelerator, StoreTime now) {
    EXPECT_EQ(accelerator, "tpu-v4-64");  // as asked; breaker_key canonicalizes it
    ClusterHistory h;
    if (c.name == "tpu-a") {
      h.probes = {record(now - minutes(30), true, 4, 10)};
    } else {
      h.probes = {record(now - minutes(10), true, 44, 10)};
    }
    return std::make_shared<const ClusterHistory>(std::move(h));
  };
  SelectionSettings settings;
  settings.policy_by_accelerator["v4-64"] = SelectionPolicy::kLeastWait;
  const ClusterSelector selector(registry, prober, settings, clock, {}, history);
  const ClusterSelection s =
      selector.select_among("tpu-v4-64", {{cluster("tpu-a"), 1}, {cluster("tpu-b"), 2}});
  EXPECT_EQ(s.selected_cluster, "tpu-b");
  EXPECT_EQ(s.policy, "least-wait");
  ASSERT_EQ(s.scores.size(), 2u);
  EXPECT_DOUBLE_EQ(*s.scores[0].signals.drain_per_min, 1.0 / 30.0);
  EXPECT_DOUBLE_EQ(*s.scores[1].signals.drain_per_min, 4.0);
  EXPECT_THAT(s.scores[0].verdict, HasSubstr("lost to tpu-b: predicted wait"));

  // Without a policy for the type, the spec's priority order.
  const ClusterSelector spec(registry, prober, SelectionSettings{}, clock, {}, history);
  const ClusterSelection p =
      spec.select_among("tpu-v4-64", {{cluster("tpu-a"), 1}, {cluster("tpu-b"), 2}});
  EXPECT_EQ(p.selected_cluster, "tpu-a");
  EXPECT_EQ(p.policy, "priority");
  EXPECT_EQ(p.reason, "selected tpu-a: reachable, queue_depth=3 <= max=5");
}

TEST(SelectorPolicies, AFailedSelectionCarriesEveryCandidatesVerdict) {
  const TableProber prober({{"tpu-a", 9}});
  ClusterRegistry registry;
  auto clock = std::make_shared<FakeClock>();
  auto throwing = [](const ClusterConfig&, const std::string&,
                     StoreTime) -> std::shared_ptr<const ClusterHistory> {
    throw std::runtime_error("store down");  // the signals come from the probe alone
  };
  SelectionSettings settings;
  settings.policy = SelectionPolicy::kScore;
  const ClusterSelector selector(registry, prober, settings, clock, {}, throwing);
  try {
    selector.select_among("v4-64", {{cluster("tpu-a"), 1}});
    FAIL() << "expected NoAvailableClusterError";
  } catch (const NoAvailableClusterError& e) {
    EXPECT_EQ(e.policy(), "score");
    ASSERT_EQ(e.scores().size(), 1u);
    EXPECT_EQ(e.scores()[0].verdict, "skipped: queue full: queue_depth=9 > max=5");
    EXPECT_EQ(e.scores()[0].signals.queue_depth, 9);
    nlohmann::json j;
    e.add_details(j);
    EXPECT_EQ(j["scores"][0]["cluster"], "tpu-a");
  }
}

}  // namespace
}  // namespace falcon
