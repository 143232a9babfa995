// The supervisor of managed workloads on the fake clock: the classifier (pure), SVRT phases,
// and the per-workload state machine over a simulated control plane and a real SQLite store:
// platform kills, application failures, unreachable clusters and fencing, evictions, transient
// submit failures with back-off, max_recoveries, and two replicas sharing the lease.
#include "serve/supervisor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "falcon/client.h"
#include "falcon/errors.h"
#include "falcon/workload_manager.h"
#include "serve/api_server.h"
#include "serve/prometheus_text.h"
#include "serve/sim_control.h"
#include "support/fake_clock.h"
#include "support/temp_dir.h"
#include "util/time_format.h"

namespace falcon {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;
using ::testing::HasSubstr;
using testing::SimControl;

SupervisorSettings fast_settings() {
  SupervisorSettings s;
  s.interval_s = 1;
  s.lease_ttl_s = 10;
  s.unreachable_grace_s = 5;
  s.readmit_grace_s = 5;
  s.fencing_lease_s = 20;
  s.backoff_s = 2;
  s.backoff_max_s = 8;
  s.max_submit_attempts = 4;
  return s;
}

// --- The classifier.

IncarnationObservation seen(StoreTime at, const std::string& state,
                            std::optional<int> exit_code = std::nullopt) {
  IncarnationObservation o;
  o.at = at;
  o.listed = true;
  o.state = state;
  o.exit_code = exit_code;
  return o;
}

IncarnationObservation unreachable(StoreTime at) {
  IncarnationObservation o;
  o.at = at;
  o.reachable = false;
  o.error = "dial tcp: i/o timeout";
  return o;
}

const StoreTime t0 = StoreTime(std::chrono::seconds(1776067200));

TEST(Classify, PlatformKillsAreInfrastructureAndOwnExitsAreApplication) {
  const auto s = fast_settings();
  for (int code : {137, 143}) {
    IncarnationMemory m;
    const auto c = classify(m, seen(t0, "FAILED", code), s, "tpu-a");
    EXPECT_EQ(c.verdict, Verdict::kInfrastructure) << code;
    EXPECT_THAT(c.cause, HasSubstr("EXIT_CODE=" + std::to_string(code)));
    EXPECT_EQ(c.violation_at, t0);
  }
  IncarnationMemory m;
  auto c = classify(m, seen(t0, "FAILED", 1), s, "tpu-a");
  EXPECT_EQ(c.verdict, Verdict::kApplication);
  EXPECT_THAT(c.cause, HasSubstr("EXIT_CODE=1"));
  EXPECT_EQ(classify(m, seen(t0, "COMPLETED"), s, "tpu-a").verdict, Verdict::kCompleted);
}

// No EXIT_CODE readable yet (Cloud Logging ingests late, a log read failed): pending for
// unreachable_grace_s, looked at again; then an application failure (the conservative side).
// A node failure whose exit code shows up late is still a node failure.
TEST(Classify, AFailureWithoutAReadableExitCodeWaitsForTheLogsThenIsTheApplications) {
  const auto s = fast_settings();  // unreachable_grace_s 5
  IncarnationMemory m;
  auto c = classify(m, seen(t0, "FAILED"), s, "tpu-a");
  EXPECT_EQ(c.verdict, Verdict::kPending);
  EXPECT_THAT(c.cause, HasSubstr("no exit code readable from its logs yet"));
  c = classify(m, seen(t0 + 4s, "FAILED"), s, "tpu-a");
  EXPECT_EQ(c.verdict, Verdict::kPending);
  c = classify(m, seen(t0 + 5s, "FAILED"), s, "tpu-a");
  EXPECT_EQ(c.verdict, Verdict::kApplication);
  EXPECT_THAT(c.cause, HasSubstr("no exit code could be read from its logs for 5.0s"));
  EXPECT_EQ(c.violation_at, t0);

  IncarnationMemory late;
  EXPECT_EQ(classify(late, seen(t0, "FAILED"), s, "tpu-a").verdict, Verdict::kPending);
  c = classify(late, seen(t0 + 2s, "FAILED", 137), s, "tpu-a");
  EXPECT_EQ(c.verdict, Verdict::kInfrastructure);
  EXPECT_EQ(c.violation_at, t0);  // the first look that saw it FAILED
}

TEST(Classify, AnUnreachableClusterIsAnIncidentOnlyAfterTheGraceCountedFromTheFirstFailure) {
  const auto s = fast_settings();
  IncarnationMemory m;
  EXPECT_EQ(classify(m, seen(t0, "RUNNING"), s, "tpu-a").verdict, Verdict::kHealthy);
  auto c = classify(m, unreachable(t0 + 1s), s, "tpu-a");
  EXPECT_EQ(c.verdict, Verdict::kPending);
  c = classify(m, unreachable(t0 + 5s), s, "tpu-a");
  EXPECT_EQ(c.verdict, Verdict::kPending);  // 4 s down
  c = classify(m, unreachable(t0 + 6s), s, "tpu-a");
  EXPECT_EQ(c.verdict, Verdict::kInfrastructure);
  EXPECT_EQ(c.violation_at, t0 + 1s);
  EXPECT_THAT(c.cause, HasSubstr("cluster tpu-a unreachable for 5.0s: dial tcp"));
  // Answering again resets the clock.
  EXPECT_EQ(classify(m, seen(t0 + 7s, "RUNNING"), s, "tpu-a").verdict, Verdict::kHealthy);
  EXPECT_EQ(classify(m, unreachable(t0 + 8s), s, "tpu-a").verdict, Verdict::kPending);
}

// Issue 27: no false failover. The supervisor's own list failing is not enough: while the
// health loop still sees the cluster answer, the outage counts from its last answer.
TEST(Classify, AClusterTheHealthLoopSawAnswerIsLostOnlyAfterTheGraceFromThatAnswer) {
  const auto s = fast_settings();  // unreachable_grace_s 5
  IncarnationMemory m;
  EXPECT_EQ(classify(m, seen(t0, "RUNNING"), s, "tpu-a").verdict, Verdict::kHealthy);
  IncarnationObservation o = unreachable(t0 + 1s);
  o.answered_elsewhere = t0 + 1s;
  EXPECT_EQ(classify(m, o, s, "tpu-a").verdict, Verdict::kPending);
  o = unreachable(t0 + 6s);        // 5 s after the first failed list...
  o.answered_elsewhere = t0 + 4s;  // ...but the health loop saw it answer 2 s ago
  EXPECT_EQ(classify(m, o, s, "tpu-a").verdict, Verdict::kPending);
  o = unreachable(t0 + 8s);
  o.answered_elsewhere = t0 + 4s;  // no answer since: 4 s
  EXPECT_EQ(classify(m, o, s, "tpu-a").verdict, Verdict::kPending);
  o = unreachable(t0 + 9s);
  o.answered_elsewhere = t0 + 4s;
  const Classification c = classify(m, o, s, "tpu-a");
  EXPECT_EQ(c.verdict, Verdict::kInfrastructure);
  EXPECT_EQ(c.violation_at, t0 + 4s);
  // An answer seen elsewhere "after" this look (clocks, ordering) never moves it past the look.
  IncarnationMemory n;
  o = unreachable(t0);
  o.answered_elsewhere = t0 + 30s;
  classify(n, o, s, "tpu-a");
  EXPECT_EQ(n.unreachable_since, t0);
}

TEST(Classify, QueuedAgainAfterRunningIsAnEvictionOnceNotReadmittedWithinTheGrace) {
  const auto s = fast_settings();
  IncarnationMemory m;
  EXPECT_EQ(classify(m, seen(t0, "QUEUED"), s, "a").verdict, Verdict::kHealthy);  // first wait
  EXPECT_EQ(classify(m, seen(t0 + 100s, "QUEUED"), s, "a").verdict, Verdict::kHealthy);
  EXPECT_EQ(classify(m, seen(t0 + 101s, "RUNNING"), s, "a").verdict, Verdict::kHealthy);
  EXPECT_EQ(m.running_since, t0 + 101s);
  EXPECT_EQ(classify(m, seen(t0 + 110s, "QUEUED"), s, "a").verdict, Verdict::kPending);
  // Readmitted in time: nothing happened.
  EXPECT_EQ(classify(m, seen(t0 + 112s, "RUNNING"), s, "a").verdict, Verdict::kHealthy);
  EXPECT_EQ(classify(m, seen(t0 + 120s, "QUEUED"), s, "a").verdict, Verdict::kPending);
  const auto c = classify(m, seen(t0 + 125s, "QUEUED"), s, "a");
  EXPECT_EQ(c.verdict, Verdict::kInfrastructure);
  EXPECT_EQ(c.violation_at, t0 + 120s);
  EXPECT_THAT(c.cause, HasSubstr("evicted"));
}

TEST(Classify, AWorkloadNoLongerListedIsGone) {
  IncarnationMemory m;
  IncarnationObservation o;
  o.at = t0;
  o.listed = false;
  const auto c = classify(m, o, fast_settings(), "tpu-a");
  EXPECT_EQ(c.verdict, Verdict::kInfrastructure);
  EXPECT_THAT(c.cause, HasSubstr("no longer listed"));
}

TEST(Svrt, PhasesAreTheDifferencesOfTheTimesAndNullUntilReached) {
  RecoveryRecord r;
  r.t_violation = t0;
  r.detected = t0 + 5s;
  r.decided = t0 + 6s;
  r.submitted = t0 + 8s;
  auto p = svrt_phases(r);
  EXPECT_DOUBLE_EQ(*p.detection, 5);
  EXPECT_DOUBLE_EQ(*p.decision, 1);
  EXPECT_DOUBLE_EQ(*p.submit, 2);
  EXPECT_FALSE(p.admission);
  EXPECT_FALSE(p.svrt);
  r.admitted = t0 + 20s;
  r.recovered = t0 + 50s;
  p = svrt_phases(r);
  EXPECT_DOUBLE_EQ(*p.admission, 12);
  EXPECT_DOUBLE_EQ(*p.stability, 30);
  EXPECT_DOUBLE_EQ(*p.svrt, 50);
  const nlohmann::json j = recovery_of(r);
  EXPECT_EQ(j["svrt_s"], 50.0);
  EXPECT_EQ(j["phases"]["admission_s"], 12.0);
  EXPECT_EQ(j["t_violation"], "2026-04-13T08:00:00.000Z");
  EXPECT_TRUE(j["to_cluster"].is_null());
}

// --- The state machine, over a simulated control plane.

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = open_state_store("sqlite://" + (dir_.path() / "falcon.db").string());
  }

  std::unique_ptr<Supervisor> make(const std::string& holder,
                                   SupervisorSettings s = fast_settings(), int parallel = 4) {
    return std::make_unique<Supervisor>(SupervisorOptions{.control = control_,
                                                          .store = store_,
                                                          .clock = clock_,
                                                          .settings = s,
                                                          .holder = holder,
                                                          .parallel = parallel});
  }

  WorkloadSpec spec(const std::string& name) {
    WorkloadSpec s;
    s.name = name;
    s.docker_image = "gcr.io/p/train:1";
    s.command = {"python3", "train.py"};
    s.accelerator_type = "v4-64";
    s.env = {{"STEPS", "100"}};
    return s;
  }

  void manage(const std::string& name,
              ManageOptions o = {
                  .max_recoveries = 3, .stable_after = 30s, .recover_on_failure = false}) {
    submit_managed(*control_, *store_, *clock_, "tpu-a", spec(name), o);
    control_->submits.clear();  // the tests count the supervisor's submits
  }

  ManagedWorkloadRecord record(const std::string& name) { return *store_->get_managed(name); }

  // Advances the clock by `step` and runs a pass, `n` times.
  void run(Supervisor& s, int n, std::chrono::milliseconds step = 1s) {
    for (int i = 0; i < n; ++i) {
      clock_->advance(step);
      s.run_once();
    }
  }

  testing::TempDir dir_;
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
  std::shared_ptr<SimControl> control_ = std::make_shared<SimControl>();
  std::shared_ptr<StateStore> store_;
};

TEST_F(SupervisorTest, APlatformKillIsRecoveredOnAnotherClusterAndMeasured) {
  auto sup = make("replica-a");
  manage("train");
  control_->set("tpu-a", "train", "RUNNING");
  run(*sup, 2);
  EXPECT_EQ(record("train").state, ManagedState::kRunning);

  control_->set("tpu-a", "train", "FAILED", 137);  // a node failed: workers exit 137
  const StoreTime killed_seen = clock_->now() + 1s;
  run(*sup, 1);
  // Detected, the old one cancelled (confirmed), tpu-a excluded, tpu-b chosen, submitted.
  ManagedWorkloadRecord m = record("train");
  EXPECT_EQ(m.state, ManagedState::kStarting);
  EXPECT_EQ(m.incarnation, "train-r1");
  EXPECT_EQ(m.cluster, "tpu-b");
  EXPECT_EQ(m.attempts, 1);
  // A node failure is the workload's, not the cluster's: tpu-a's breaker is not fed.
  EXPECT_THAT(control_->breaker_failures, ::testing::IsEmpty());
  ASSERT_EQ(control_->cancels.size(), 1u);
  EXPECT_EQ(control_->cancels[0], std::make_pair(std::string("tpu-a"), std::string("train")));
  const auto replacement = control_->spec_of("tpu-b", "train-r1");
  ASSERT_TRUE(replacement);
  EXPECT_EQ(replacement->env.at("FALCON_RECOVERY_COUNT"), "1");
  EXPECT_EQ(replacement->env.at("FALCON_PREVIOUS_WORKLOAD"), "train");
  EXPECT_EQ(replacement->env.at("STEPS"), "100");
  EXPECT_EQ(replacement->docker_image, "gcr.io/p/train:1");
  // Its submission is recorded with the decision that chose tpu-b (the last one made).
  EXPECT_EQ(control_->links.at({"tpu-b", "train-r1"}), control_->decisions);
  EXPECT_GT(control_->decisions, 0);

  auto incidents = store_->list_recoveries(10, "train");
  ASSERT_EQ(incidents.size(), 1u);
  EXPECT_EQ(incidents[0].classification, kIncidentInfrastructure);
  EXPECT_EQ(incidents[0].outcome, "open");
  EXPECT_EQ(incidents[0].t_violation, killed_seen);
  EXPECT_EQ(incidents[0].replacement, "train-r1");
  EXPECT_EQ(incidents[0].to_cluster, "tpu-b");
  EXPECT_TRUE(incidents[0].submitted);
  EXPECT_FALSE(incidents[0].admitted);

  run(*sup, 3);  // queued for 3 s
  control_->set("tpu-b", "train-r1", "RUNNING");
  run(*sup, 1);
  const StoreTime admitted = clock_->now();
  EXPECT_EQ(store_->get_recovery("train-1")->admitted, admitted);
  run(*sup, 29);
  EXPECT_EQ(store_->get_recovery("train-1")->outcome, "open");  // 29 s stable of 30
  run(*sup, 1);
  const RecoveryRecord r = *store_->get_recovery("train-1");
  EXPECT_EQ(r.outcome, "recovered");
  const SvrtPhases p = svrt_phases(r);
  EXPECT_DOUBLE_EQ(*p.detection, 0);
  EXPECT_DOUBLE_EQ(*p.admission, 4);
  EXPECT_DOUBLE_EQ(*p.stability, 30);
  EXPECT_DOUBLE_EQ(*p.svrt, 34);
  EXPECT_EQ(record("train").state, ManagedState::kRunning);
  EXPECT_EQ(control_->live_copies("train"), 1);

  serve::PrometheusText text;
  sup->write_metrics(text);
  EXPECT_THAT(text.text(), HasSubstr("\nfalcon_supervisor_leader 1\n"));
  EXPECT_THAT(
      text.text(),
      HasSubstr("falcon_recoveries_total{kind=\"infrastructure\",outcome=\"recovered\"} 1"));
  EXPECT_THAT(text.text(), HasSubstr("falcon_recovery_phase_seconds_sum{phase=\"svrt\"} 34"));
  EXPECT_THAT(text.text(),
              HasSubstr("falcon_recovery_phase_seconds_bucket{phase=\"stability\",le=\"30\"} 1"));

  control_->set("tpu-b", "train-r1", "COMPLETED", 0);
  run(*sup, 1);
  EXPECT_EQ(record("train").state, ManagedState::kCompleted);
}

// Issue 27, storage fencing: every copy starts with an epoch newer than every copy before it,
// the first one included; a fence that cannot be written starts no copy and is nobody's failure.
TEST_F(SupervisorTest, EveryCopyStartsWithANewerFenceEpochAndNoneStartsWithoutOne) {
  control_->fence = true;
  auto sup = make("replica-a");
  submit_managed(*control_, *store_, *clock_, "tpu-a", spec("train"),
                 {.max_recoveries = 3, .stable_after = 30s, .recover_on_failure = false});
  const auto first = control_->spec_of("tpu-a", "train");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->env.at("FALCON_FENCE_URI"), "gs://fence/train/epoch");
  EXPECT_EQ(first->env.at("FALCON_FENCE_EPOCH"), "1");
  // The stored spec, the template of replacements, carries no epoch of its own.
  EXPECT_FALSE(record("train").spec.env.contains("FALCON_FENCE_EPOCH"));
  control_->submits.clear();
  control_->set("tpu-a", "train", "RUNNING");
  run(*sup, 2);

  control_->fence_failures = 1;
  control_->set("tpu-a", "train", "FAILED", 137);
  run(*sup, 1);
  EXPECT_THAT(control_->submits, ::testing::IsEmpty());  // not started without its epoch
  EXPECT_THAT(control_->breaker_failures, ::testing::IsEmpty());
  EXPECT_EQ(store_->get_recovery("train-1")->attempts, 0);
  run(*sup, 1);
  const auto replacement = control_->spec_of("tpu-b", "train-r1");
  ASSERT_TRUE(replacement);
  EXPECT_EQ(replacement->env.at("FALCON_FENCE_URI"), "gs://fence/train/epoch");
  EXPECT_EQ(replacement->env.at("FALCON_FENCE_EPOCH"), "2");
  EXPECT_EQ(control_->fence_epochs.at("train"), 2);
}

// A fence that cannot be written refuses the first submit, and keeps no managed record.
TEST_F(SupervisorTest, AFirstSubmitWhoseFenceCannotBeWrittenStartsNothing) {
  control_->fence = true;
  control_->fence_failures = 1;
  EXPECT_THROW(submit_managed(*control_, *store_, *clock_, "tpu-a", spec("train"),
                              {.max_recoveries = 3, .stable_after = 30s}),
               LogRetrievalError);
  EXPECT_THAT(control_->submits, ::testing::IsEmpty());
  EXPECT_FALSE(store_->get_managed("train"));
}

// t_recovered is when the stability window was met, not when a (slow) pass noticed it.
// Issue 27: a pass reads every managed workload, page by page: the one after the first 1000
// names is supervised too.
TEST_F(SupervisorTest, AManagedWorkloadPastTheFirstThousandIsSupervised) {
  auto sup = make("replica-a");
  for (int i = 0; i < 1000; ++i) {
    ManagedWorkloadRecord done;
    done.name = fmt::format("a-{:04}", i);
    done.spec = spec(done.name);
    done.incarnation = done.name;
    done.cluster = "tpu-a";
    done.state = ManagedState::kCompleted;
    done.created_at = clock_->now();
    done.updated_at = done.created_at;
    ASSERT_TRUE(store_->create_managed(done));
  }
  manage("zz-last");
  control_->set("tpu-a", "zz-last", "RUNNING");
  run(*sup, 2);
  EXPECT_EQ(record("zz-last").state, ManagedState::kRunning);
}

TEST_F(SupervisorTest, RecoveredIsWhenTheWindowWasMetNotWhenAPassNoticed) {
  auto sup = make("a");
  manage("train");
  control_->set("tpu-a", "train", "RUNNING");
  run(*sup, 1);
  control_->set("tpu-a", "train", "FAILED", 137);
  run(*sup, 1);
  control_->set("tpu-b", "train-r1", "RUNNING");
  run(*sup, 1);
  const StoreTime admitted = clock_->now();
  run(*sup, 4, 7s);  // passes 7 s apart: the window (30 s) is met between two of them
  EXPECT_EQ(store_->get_recovery("train-1")->outcome, "open");
  run(*sup, 1, 7s);
  const RecoveryRecord r = *store_->get_recovery("train-1");
  EXPECT_EQ(r.outcome, "recovered");
  EXPECT_EQ(r.recovered, admitted + 30s);
  EXPECT_DOUBLE_EQ(*svrt_phases(r).stability, 30);
}

TEST_F(SupervisorTest, AnApplicationFailureIsRecordedButNotRecoveredUnlessAsked) {
  auto sup = make("a");
  manage("bad");
  manage("retry", {.max_recoveries = 2, .stable_after = 0s, .recover_on_failure = true});
  control_->set("tpu-a", "bad", "FAILED", 1);
  control_->set("tpu-a", "retry", "FAILED", 2);
  run(*sup, 1);
  EXPECT_EQ(record("bad").state, ManagedState::kFailed);
  const auto bad = store_->list_recoveries(10, "bad");
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].classification, kIncidentApplication);
  EXPECT_EQ(bad[0].outcome, "not_recovered");
  EXPECT_THAT(bad[0].cause, HasSubstr("EXIT_CODE=1"));
  ASSERT_EQ(control_->submits.size(), 1u);  // only retry-r1
  EXPECT_EQ(control_->submits[0].second, "retry-r1");

  EXPECT_EQ(record("retry").incarnation, "retry-r1");
  control_->set("tpu-b", "retry-r1", "RUNNING");
  run(*sup, 1);
  const auto retry = store_->list_recoveries(10, "retry");
  ASSERT_EQ(retry.size(), 1u);
  EXPECT_EQ(retry[0].classification, kIncidentApplication);
  EXPECT_EQ(retry[0].outcome, "recovered");  // stable_after 0: recovered when seen RUNNING
}

TEST_F(SupervisorTest, AnUnreachableClusterIsFencedBeforeTheReplacementAndCleanedUpLater) {
  auto sup = make("a");
  manage("train");
  control_->set("tpu-a", "train", "RUNNING");
  run(*sup, 1);
  control_->reach("tpu-a", false);
  run(*sup, 5);  // down for 4 s since the first failed look: within unreachable_grace_s (5)
  EXPECT_EQ(record("train").state, ManagedState::kRunning);
  EXPECT_TRUE(store_->list_recoveries(10).empty());
  run(*sup, 1);  // 5 s: an incident; the old one cannot be cancelled
  EXPECT_EQ(record("train").state, ManagedState::kRecovering);
  ASSERT_EQ(store_->list_recoveries(10).size(), 1u);
  EXPECT_THAT(control_->breaker_failures, ::testing::ElementsAre("tpu-a"));  // the cluster failed
  // Never two copies: nothing is submitted while the old one may still run, until the fencing
  // lease (20 s from the first failed look) has passed.
  run(*sup, 14);
  EXPECT_TRUE(control_->submits.empty());
  EXPECT_EQ(record("train").state, ManagedState::kRecovering);
  run(*sup, 1);
  ASSERT_EQ(control_->submits.size(), 1u);
  EXPECT_EQ(control_->submits[0], std::make_pair(std::string("tpu-b"), std::string("train-r1")));
  const RecoveryRecord r = store_->list_recoveries(10)[0];
  EXPECT_THAT(r.detail_json, HasSubstr("fenced: cluster tpu-a unreachable for 20s"));
  EXPECT_DOUBLE_EQ(*svrt_phases(r).detection, 5);
  EXPECT_DOUBLE_EQ(*svrt_phases(r).decision, 15);

  // tpu-a comes back with the old incarnation still there: it is cancelled at once.
  control_->reach("tpu-a", true);
  run(*sup, 1);
  EXPECT_FALSE(control_->spec_of("tpu-a", "train"));
  EXPECT_EQ(control_->live_copies("train"), 1);
}

TEST_F(SupervisorTest, AnEvictionNotReadmittedInTimeIsRecovered) {
  auto sup = make("a");
  manage("train");
  control_->set("tpu-a", "train", "RUNNING");
  run(*sup, 1);
  control_->set("tpu-a", "train", "QUEUED");  // preempted: back in the queue
  run(*sup, 5);
  EXPECT_EQ(record("train").state, ManagedState::kRunning);
  run(*sup, 1);
  EXPECT_EQ(record("train").incarnation, "train-r1");
  const auto r = store_->list_recoveries(10)[0];
  EXPECT_THAT(r.cause, HasSubstr("evicted"));
  EXPECT_FALSE(control_->spec_of("tpu-a", "train"));  // cancelled before the replacement
}

// A replacement placed on a cluster that cannot admit it (full: the priority policy sees queue
// depth, not free slots) is moved by the same incident once readmit_grace_s has passed, the stuck
// copy cancelled first; SVRT still counts from the original failure.
TEST_F(SupervisorTest, AReplacementNotAdmittedInTimeIsMovedByTheSameIncident) {
  auto sup = make("a");
  manage("train");
  control_->set("tpu-a", "train", "RUNNING");
  run(*sup, 1);
  control_->set("tpu-a", "train", "FAILED", 137);
  run(*sup, 1);
  ASSERT_EQ(record("train").incarnation, "train-r1");
  ASSERT_EQ(record("train").cluster, "tpu-b");
  const auto first = store_->list_recoveries(10, "train");
  ASSERT_EQ(first.size(), 1u);
  const StoreTime violation = *first[0].t_violation;

  // train-r1 stays QUEUED on tpu-b: readmit_grace_s (5 s) after its submit it is moved.
  run(*sup, 4);
  EXPECT_EQ(record("train").incarnation, "train-r1");
  EXPECT_EQ(control_->live_copies("train"), 1);
  run(*sup, 2);
  ManagedWorkloadRecord m = record("train");
  EXPECT_EQ(m.incarnation, "train-r2");
  EXPECT_EQ(m.cluster, "tpu-a");  // every cluster but the stuck one's
  EXPECT_EQ(m.attempts, 2);
  EXPECT_FALSE(control_->spec_of("tpu-b", "train-r1"));  // cancelled before the move
  EXPECT_EQ(control_->live_copies("train"), 1);
  EXPECT_EQ(control_->spec_of("tpu-a", "train-r2")->env.at("FALCON_PREVIOUS_WORKLOAD"), "train-r1");
  auto incidents = store_->list_recoveries(10, "train");
  ASSERT_EQ(incidents.size(), 1u);  // the same incident
  EXPECT_THAT(incidents[0].cause, HasSubstr("train-r1 not admitted on tpu-b within"));
  EXPECT_EQ(incidents[0].to_cluster, "tpu-a");
  EXPECT_EQ(incidents[0].replacement, "train-r2");

  control_->set("tpu-a", "train-r2", "RUNNING");
  run(*sup, 32);
  incidents = store_->list_recoveries(10, "train");
  ASSERT_EQ(incidents.size(), 1u);
  EXPECT_EQ(incidents[0].outcome, "recovered");
  EXPECT_EQ(*incidents[0].t_violation, violation);
  EXPECT_EQ(record("train").state, ManagedState::kRunning);

  // With max_recoveries spent, a replacement that waits is left to wait.
  manage("small", {.max_recoveries = 1, .stable_after = 30s, .recover_on_failure = false});
  control_->set("tpu-a", "small", "FAILED", 137);
  run(*sup, 1);
  ASSERT_EQ(record("small").incarnation, "small-r1");
  run(*sup, 10);
  EXPECT_EQ(record("small").incarnation, "small-r1");
  EXPECT_EQ(record("small").state, ManagedState::kStarting);
}

// Late binding: a workload that never ran, QUEUED on its cluster for move_queued_after_s,
// moves once another cluster can admit it now, and only then; the queued copy goes first.
TEST_F(SupervisorTest, AWorkloadQueuedTooLongMovesOnceAnotherClusterCanAdmitItNow) {
  SupervisorSettings settings = fast_settings();
  settings.move_queued_after_s = 20;
  control_->by_queue = true;  // the fewest QUEUED first, as the priority policy ranks
  auto sup = make("a", settings);
  manage("train");  // QUEUED on tpu-a
  control_->set("tpu-b", "other", "QUEUED");
  control_->set("tpu-c", "busy", "QUEUED");
  run(*sup, 19);
  EXPECT_EQ(record("train").incarnation, "train");
  run(*sup, 30);  // past the limit, but every other cluster has a queue: it stays
  EXPECT_EQ(record("train").incarnation, "train");
  EXPECT_TRUE(store_->list_recoveries(10, "train").empty());
  control_->set("tpu-c", "busy", "RUNNING");  // nothing queued on tpu-c any more
  // Checked at most every move_queued_after_s / 4 = 5 s: it moves within 6 passes (and then
  // waits on tpu-c, whose copy the test leaves QUEUED, so it is looked at as soon as it moves).
  for (int i = 0; i < 6 && record("train").incarnation == "train"; ++i) run(*sup, 1);
  const ManagedWorkloadRecord m = record("train");
  EXPECT_EQ(m.incarnation, "train-r1");
  EXPECT_EQ(m.cluster, "tpu-c");
  EXPECT_FALSE(control_->spec_of("tpu-a", "train"));  // cancelled before the move
  EXPECT_EQ(control_->live_copies("train"), 1);
  const auto incidents = store_->list_recoveries(10, "train");
  ASSERT_EQ(incidents.size(), 1u);
  EXPECT_THAT(incidents[0].cause, HasSubstr("never admitted, while tpu-c can admit it now"));
  EXPECT_TRUE(control_->breaker_failures.empty());  // a full cluster is not a failed one

  // 0 turns it off.
  settings.move_queued_after_s = 0;
  auto still = make("b", settings);
  manage("wait");
  control_->set("tpu-b", "other", "RUNNING");
  control_->set("tpu-c", "busy", "RUNNING");
  run(*still, 60);
  EXPECT_EQ(record("wait").incarnation, "wait");
}

// Every cluster a replacement of the incident waited on unadmitted stays excluded from the
// incident's later moves (with only the last one excluded, a replacement went back and forth
// between two full clusters while another had free slots); once none is left, they are
// candidates again.
TEST_F(SupervisorTest, AMovedReplacementDoesNotGoBackToAClusterItWaitedOn) {
  SupervisorSettings settings = fast_settings();
  auto sup = make("a", settings);
  control_->order = {"tpu-a", "tpu-b", "tpu-c", "tpu-d"};
  control_->sim["tpu-d"] = {};
  manage("train", {.max_recoveries = 10, .stable_after = 30s, .recover_on_failure = false});
  control_->set("tpu-a", "train", "RUNNING");
  run(*sup, 1);
  control_->set("tpu-a", "train", "FAILED", 137);
  run(*sup, 1);
  ASSERT_EQ(record("train").cluster, "tpu-b");  // tpu-a, the old cluster, excluded
  run(*sup, 6);  // train-r1 waits on tpu-b: moved, to tpu-a (now only tpu-b is full)
  ASSERT_EQ(record("train").incarnation, "train-r2");
  ASSERT_EQ(record("train").cluster, "tpu-a");
  run(*sup, 6);  // train-r2 waits on tpu-a too: not back to tpu-b
  EXPECT_EQ(record("train").incarnation, "train-r3");
  EXPECT_EQ(record("train").cluster, "tpu-c");
  run(*sup, 6);
  EXPECT_EQ(record("train").incarnation, "train-r4");
  EXPECT_EQ(record("train").cluster, "tpu-d");
  EXPECT_EQ(control_->live_copies("train"), 1);
  // Every cluster waited on: they are all candidates again (after a back-off).
  for (int i = 0; i < 20 && record("train").incarnation == "train-r4"; ++i) run(*sup, 1);
  EXPECT_EQ(record("train").incarnation, "train-r5");
  EXPECT_EQ(control_->live_copies("train"), 1);
  control_->set(record("train").cluster, "train-r5", "RUNNING");
  run(*sup, 31);
  EXPECT_EQ(store_->list_recoveries(10, "train")[0].outcome, "recovered");
}

// A create that fails on one cluster (flaky xpk) costs no back-off while another cluster can
// take the replacement: once the failed cluster's list confirms it did not make the workload,
// the next cluster is chosen in the same pass. Back-off only once no cluster is left to try;
// then every cluster is a candidate again. max_submit_attempts bounds the failed creates.
TEST_F(SupervisorTest, AFailedCreateTriesAnotherClusterAtOnceThenBacksOffThenGivesUp) {
  auto sup = make("a");
  manage("flaky");
  manage("doomed");
  control_->set("tpu-a", "flaky", "FAILED", 137);
  control_->failing_on["tpu-b"] = 1;  // flaky's replacement: its create on tpu-b fails
  const StoreTime seen = clock_->now() + 1s;
  run(*sup, 1);
  ManagedWorkloadRecord m = record("flaky");
  EXPECT_EQ(m.incarnation, "flaky-r1");
  EXPECT_EQ(m.cluster, "tpu-c");  // tpu-a is the old cluster, tpu-b failed its create
  EXPECT_EQ(control_->live_copies("flaky"), 1);
  const RecoveryRecord r = *store_->get_recovery("flaky-1");
  EXPECT_EQ(r.attempts, 2);
  EXPECT_EQ(*r.submitted, seen);  // no back-off
  EXPECT_EQ(r.to_cluster, "tpu-c");

  // Every create fails: tpu-b, tpu-c, then no cluster left (back-off 2 s), tpu-b, tpu-c: four
  // attempts, given up.
  control_->set("tpu-a", "doomed", "FAILED", 143);
  control_->failing_submits = 100;
  run(*sup, 1);
  EXPECT_EQ(record("doomed").state, ManagedState::kRecovering);
  EXPECT_EQ(store_->get_recovery("doomed-1")->attempts, 2);
  run(*sup, 1);
  EXPECT_EQ(record("doomed").state, ManagedState::kRecovering);  // within the back-off
  run(*sup, 1);
  EXPECT_EQ(record("doomed").state, ManagedState::kGaveUp);
  const RecoveryRecord d = *store_->get_recovery("doomed-1");
  EXPECT_EQ(d.outcome, "gave_up");
  EXPECT_EQ(d.attempts, 4);
  EXPECT_THAT(d.cause, HasSubstr("not submitted after 4 attempts"));
  EXPECT_EQ(control_->live_copies("doomed"), 0);
}

// Never two copies through a failed create: a create that failed but made the workload all the
// same (xpk timed out after the apply) is found on that cluster's list and adopted; a create
// whose cluster then stops answering is not followed by a create elsewhere until the cluster
// answers or fencing_lease_s has passed.
TEST_F(SupervisorTest, AFailedCreateIsConfirmedNotToHaveMadeTheWorkloadBeforeAnotherCluster) {
  auto sup = make("a");
  manage("made");
  control_->set("tpu-a", "made", "FAILED", 137);
  control_->failing_on["tpu-b"] = 1;
  control_->create_then_fail = true;
  run(*sup, 1);
  EXPECT_EQ(record("made").incarnation, "made-r1");
  EXPECT_EQ(record("made").cluster, "tpu-b");  // adopted where the failed create made it
  EXPECT_EQ(control_->live_copies("made"), 1);
  control_->create_then_fail = false;

  manage("silent");
  control_->set("tpu-a", "silent", "FAILED", 137);
  // tpu-b is chosen, its create fails and tpu-b stops answering right after.
  control_->reach("tpu-c", false);
  control_->failing_on["tpu-b"] = 1;
  control_->cut_after_failed_create = "tpu-b";
  run(*sup, 1);
  EXPECT_EQ(record("silent").state, ManagedState::kRecovering);
  EXPECT_EQ(control_->live_copies("silent"), 0);
  control_->reach("tpu-c", true);
  run(*sup, 19);  // fencing_lease_s (20 s) since the failed create: nothing submitted elsewhere
  EXPECT_EQ(record("silent").state, ManagedState::kRecovering);
  EXPECT_EQ(control_->live_copies("silent"), 0);
  run(*sup, 1);
  EXPECT_EQ(record("silent").incarnation, "silent-r1");
  EXPECT_EQ(record("silent").cluster, "tpu-c");
  EXPECT_EQ(control_->live_copies("silent"), 1);
}

// xpk stopped before its create step (its existence check could not reach the cluster, which
// died at that moment): proof that nothing was created, so the replacement goes to another
// cluster in the same pass, without the fencing wait of a create that may have landed.
TEST_F(SupervisorTest, ACreateThatMadeNothingGoesElsewhereAtOnceThoughItsClusterIsGone) {
  auto sup = make("a");
  manage("silent");
  control_->set("tpu-a", "silent", "FAILED", 137);
  control_->dies_on_create = "tpu-b";  // chosen, and dead by the time the create reaches it
  control_->not_created_when_unreachable = true;
  run(*sup, 1);
  const ManagedWorkloadRecord m = record("silent");
  EXPECT_EQ(m.state, ManagedState::kStarting);
  EXPECT_EQ(m.incarnation, "silent-r1");
  EXPECT_EQ(m.cluster, "tpu-c");
  EXPECT_EQ(control_->live_copies("silent"), 1);
  EXPECT_EQ(m.detail_json.find("\"fenced\""), std::string::npos);  // nothing to cancel later
  const RecoveryRecord r = store_->list_recoveries(10, "silent")[0];
  EXPECT_EQ(r.attempts, 2);
  EXPECT_DOUBLE_EQ(*svrt_phases(r).decision, 0);

  // A plain failure there (the create may have landed) still waits for the fencing lease.
  manage("unsure");
  control_->reach("tpu-b", true);
  control_->not_created_when_unreachable = false;
  control_->set("tpu-a", "unsure", "FAILED", 137);
  run(*sup, 1);
  EXPECT_EQ(record("unsure").state, ManagedState::kRecovering);
  EXPECT_EQ(control_->live_copies("unsure"), 0);
}

// At the start of a pass the fenced incarnations whose cluster answers again are cancelled
// before any workload is looked at (a fenced copy QUEUED on a revived cluster is admitted there
// at once, next to its replacement).
TEST_F(SupervisorTest, FencedCopiesAreCancelledFirstWhenTheirClusterAnswersAgain) {
  auto sup = make("a", fast_settings(), 1);  // one at a time, in name order
  manage("b-train");
  control_->set("tpu-a", "b-train", "RUNNING");
  run(*sup, 1);
  control_->reach("tpu-a", false);
  run(*sup, 21);  // unreachable_grace_s, then fencing_lease_s: fenced, replaced on tpu-b
  ASSERT_EQ(record("b-train").incarnation, "b-train-r1");
  ASSERT_NE(record("b-train").detail_json.find("\"fenced\""), std::string::npos);
  control_->set("tpu-b", "b-train-r1", "RUNNING");
  submit_managed(*control_, *store_, *clock_, "tpu-c", spec("a-train"),
                 {.max_recoveries = 3, .stable_after = 30s, .recover_on_failure = false});
  control_->set("tpu-c", "a-train", "RUNNING");
  run(*sup, 1);
  control_->ops.clear();
  // In one pass: tpu-a answers again, and a-train (first in name order) needs a replacement.
  control_->reach("tpu-a", true);
  control_->set("tpu-c", "a-train", "FAILED", 137);
  run(*sup, 1);
  ASSERT_GE(control_->ops.size(), 3u);
  EXPECT_EQ(control_->ops[0], "cancel tpu-a/b-train");
  EXPECT_EQ(control_->ops[1], "cancel tpu-c/a-train");
  EXPECT_EQ(control_->ops[2], "submit tpu-a/a-train-r1");
  EXPECT_EQ(record("b-train").detail_json.find("\"fenced\""), std::string::npos);
  EXPECT_EQ(control_->live_copies("b-train"), 1);
}

// A revived cluster admits a fenced copy it still queues at once: the sweep between passes
// deletes it as soon as that cluster's list answers, not at the next pass.
TEST_F(SupervisorTest, AFencedCopyIsDeletedByTheSweepTheMomentItsClusterAnswers) {
  auto sup = make("a");
  manage("train");
  control_->set("tpu-a", "train", "QUEUED");
  run(*sup, 1);
  control_->reach("tpu-a", false);
  run(*sup, 21);  // unreachable_grace_s, then fencing_lease_s: fenced, replaced on tpu-b
  ASSERT_EQ(record("train").incarnation, "train-r1");
  control_->ops.clear();
  // Still unreachable: nothing to delete, nothing forgotten.
  EXPECT_EQ(sup->sweep_fenced(), 0);
  EXPECT_TRUE(control_->ops.empty());
  // Another replica holding no lease never deletes.
  auto other = make("b");
  control_->reach("tpu-a", true);
  control_->set("tpu-a", "train", "RUNNING");  // admitted the moment it came back
  EXPECT_EQ(other->sweep_fenced(), 0);
  EXPECT_TRUE(control_->ops.empty());
  // The holder deletes it without a pass, once.
  EXPECT_EQ(sup->sweep_fenced(), 1);
  ASSERT_EQ(control_->ops.size(), 1u);
  EXPECT_EQ(control_->ops[0], "cancel tpu-a/train");
  EXPECT_EQ(control_->live_copies("train"), 1);
  EXPECT_EQ(sup->sweep_fenced(), 0);
  EXPECT_EQ(control_->ops.size(), 1u);
  // The next pass clears the record, whose copy is gone.
  run(*sup, 1);
  EXPECT_EQ(record("train").detail_json.find("\"fenced\""), std::string::npos);
}

// A sweep lists every cluster with fenced copies at once: one still down does not hold up the
// delete on one that answers again.
TEST_F(SupervisorTest, ASweepDeletesOnAClusterThatAnswersWhileAnotherIsStillDown) {
  auto sup = make("a");
  manage("train");
  submit_managed(*control_, *store_, *clock_, "tpu-b", spec("eval"),
                 {.max_recoveries = 3, .stable_after = 30s, .recover_on_failure = false});
  control_->set("tpu-a", "train", "QUEUED");
  control_->set("tpu-b", "eval", "QUEUED");
  run(*sup, 1);
  control_->reach("tpu-a", false);
  control_->reach("tpu-b", false);
  run(*sup, 21);  // both fenced and replaced on tpu-c
  ASSERT_EQ(record("train").incarnation, "train-r1");
  ASSERT_EQ(record("eval").incarnation, "eval-r1");
  control_->ops.clear();
  control_->reach("tpu-b", true);
  control_->set("tpu-b", "eval", "RUNNING");  // admitted the moment it came back
  EXPECT_EQ(sup->sweep_fenced(), 1);
  EXPECT_THAT(control_->ops, ::testing::ElementsAre("cancel tpu-b/eval"));
  EXPECT_EQ(control_->live_copies("eval"), 1);
  control_->reach("tpu-a", true);
  EXPECT_EQ(sup->sweep_fenced(), 1);
  EXPECT_EQ(control_->live_copies("train"), 1);
}

// The replacements of a killed cluster are decided and submitted together (their submits in
// flight at once), and spread as decisions made one after the other would: each decision counts
// the placements decided before it and not submitted yet.
TEST_F(SupervisorTest, TheReplacementsOfAKilledClusterAreSubmittedTogetherAndSpread) {
  auto sup = make("a", fast_settings(), 4);
  for (int i = 0; i < 6; ++i) manage(fmt::format("w{}", i));
  for (int i = 0; i < 6; ++i) control_->set("tpu-a", fmt::format("w{}", i), "RUNNING");
  run(*sup, 1);
  control_->by_queue = true;  // the fewest QUEUED first, as the priority policy ranks
  control_->hold_submits = 4;
  control_->submits_arrived = 0;  // the first submits (manage) do not count
  control_->max_in_flight = 0;
  control_->reach("tpu-a", false);
  run(*sup, 21);  // fenced after fencing_lease_s (20 s): all six replaced in one pass
  ASSERT_EQ(control_->submits.size(), 6u);
  EXPECT_GE(control_->max_in_flight, 4);
  // w0..w3 (the first four, taken by the four threads) were decided before any of them landed:
  // only the placements in flight spread them.
  std::map<std::string, int> held_on;
  std::map<std::string, int> on;
  for (const auto& [c, name] : control_->submits) {
    ++on[c];
    if (name < "w4") ++held_on[c];
  }
  EXPECT_EQ(held_on["tpu-b"], 2);
  EXPECT_EQ(held_on["tpu-c"], 2);
  EXPECT_LE(on["tpu-b"], 4);
  EXPECT_LE(on["tpu-c"], 4);
  control_->reach("tpu-a", true);  // the fenced old ones are cancelled
  run(*sup, 1);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(control_->live_copies(fmt::format("w{}", i)), 1) << i;
}

// A replacement that waited unadmitted on a cluster teaches the supervisor that cluster's room
// (what it ran then): later decisions leave it out while it is that full and another cluster
// can take the workload, and count it again once its list shows it running more.
TEST_F(SupervisorTest, AClusterThatLeftAReplacementWaitingIsLeftOutWhileItIsThatFull) {
  auto sup = make("a");
  control_->set("tpu-b", "other-1", "RUNNING");  // tpu-b's two slots are taken
  control_->set("tpu-b", "other-2", "RUNNING");
  manage("train");
  control_->set("tpu-a", "train", "RUNNING");
  run(*sup, 1);
  control_->set("tpu-a", "train", "FAILED", 137);
  run(*sup, 1);
  ASSERT_EQ(record("train").cluster, "tpu-b");  // first in order; it stays QUEUED there
  run(*sup, 6);                                 // moved after readmit_grace_s (5 s)
  ASSERT_EQ(record("train").incarnation, "train-r2");
  control_->set(record("train").cluster, "train-r2", "RUNNING");

  // Another workload on tpu-a fails: tpu-b would be first, but it still runs two.
  manage("next");
  control_->set("tpu-a", "next", "RUNNING");
  run(*sup, 1);
  control_->set("tpu-a", "next", "FAILED", 137);
  run(*sup, 1);
  EXPECT_EQ(record("next").incarnation, "next-r1");
  EXPECT_EQ(record("next").cluster, "tpu-c");
  ASSERT_FALSE(control_->hints_seen.empty());
  EXPECT_THAT(control_->hints_seen.back().no_room.at("tpu-b"), HasSubstr("room for 2"));

  // One of tpu-b's workloads ends: it has room again.
  control_->set("tpu-b", "other-1", "COMPLETED");
  control_->set("tpu-c", "next-r1", "RUNNING");
  manage("last");
  control_->set("tpu-a", "last", "RUNNING");
  run(*sup, 1);
  control_->set("tpu-a", "last", "FAILED", 137);
  run(*sup, 1);
  EXPECT_FALSE(control_->hints_seen.back().no_room.contains("tpu-b"));
  EXPECT_EQ(record("last").cluster, "tpu-b");
}

// An eviction readmitted within readmit_grace_s is not an incident, even when a pass is slow:
// each look is judged at the time its cluster's list was read, and a list older than interval_s
// is read again. (A pass slowed by log reads judged a workload by a list read seconds earlier,
// stamped with the later time: the readmission it had missed looked like readmit_grace_s of
// waiting, and the chaos benchmark's readmitted preemption was replaced.)
TEST_F(SupervisorTest, AReadmittedEvictionIsNotReplacedWhenAPassIsSlow) {
  auto sup = make("a");
  manage("app");    // looked at first in each pass (name order)
  manage("train");  // on the same cluster
  control_->set("tpu-a", "app", "RUNNING");
  control_->set("tpu-a", "train", "RUNNING");
  run(*sup, 1);
  control_->set("tpu-a", "train", "QUEUED");  // preempted, to be readmitted in 2 s
  run(*sup, 3);                               // seen QUEUED for 2 s
  EXPECT_EQ(record("train").state, ManagedState::kRunning);
  // The next pass reads tpu-a's list (train still QUEUED), then app's failure: reading its exit
  // code from the logs takes 6 s, during which train is readmitted.
  control_->set("tpu-a", "app", "FAILED", 1);
  control_->on_status = [this] {
    control_->on_status = nullptr;
    clock_->advance(6s);
    control_->set("tpu-a", "train", "RUNNING");
  };
  run(*sup, 1);
  EXPECT_EQ(record("app").state, ManagedState::kFailed);
  EXPECT_EQ(record("train").incarnation, "train");
  EXPECT_EQ(record("train").state, ManagedState::kRunning);
  EXPECT_TRUE(store_->list_recoveries(10, "train").empty());
  run(*sup, 10);
  EXPECT_TRUE(store_->list_recoveries(10, "train").empty());
  EXPECT_TRUE(control_->submits.empty());
}

// xpk prints "RoleBinding: ... already exists. Skipping its creation." on every create; a failed
// create was taken for the replacement existing already, so the supervisor "adopted" a workload
// that was never made, found it missing on its next look and opened another incident (the chaos
// benchmark's flaky creates burned one recovery per failed create this way).
// A store that cannot take a replacement's intent made nothing anywhere: not an attempt, not the
// cluster's failure; the next pass submits it.
TEST_F(SupervisorTest, AStoreRefusingTheIntentIsNeitherAnAttemptNorTheClustersFailure) {
  auto sup = make("a");
  manage("train");
  control_->set("tpu-a", "train", "FAILED", 137);
  control_->store_refusals = 1;
  run(*sup, 1);
  EXPECT_TRUE(control_->submits.empty());
  EXPECT_TRUE(control_->breaker_failures.empty());
  run(*sup, 1);
  ASSERT_EQ(control_->submits.size(), 1u);
  EXPECT_EQ(record("train").incarnation, "train-r1");
  const auto recovery = store_->get_recovery("train-1");
  ASSERT_TRUE(recovery.has_value());
  EXPECT_EQ(recovery->attempts, 1);  // the refused one did not count
}

TEST_F(SupervisorTest, AFailedCreateIsRetriedEvenWhenXpkSaysSomethingElseAlreadyExists) {
  auto sup = make("a");
  manage("train");
  control_->set("tpu-a", "train", "FAILED", 137);
  control_->failing_submits = 2;
  run(*sup, 1);
  EXPECT_TRUE(control_->submits.empty());
  EXPECT_EQ(record("train").state, ManagedState::kRecovering);
  run(*sup, 2);  // tpu-b and tpu-c failed: back-off 2 s, then tpu-b again
  ASSERT_EQ(control_->submits.size(), 1u);
  EXPECT_EQ(record("train").incarnation, "train-r1");
  EXPECT_TRUE(control_->spec_of(control_->submits[0].first, "train-r1"));
  EXPECT_EQ(record("train").attempts, 1);  // one recovery, three submit attempts
  EXPECT_EQ(store_->get_recovery("train-1")->attempts, 3);
  control_->set(control_->submits[0].first, "train-r1", "RUNNING");
  run(*sup, 2);
  EXPECT_EQ(store_->list_recoveries(10, "train").size(), 1u);  // no second incident
}

// A killed cluster takes every managed workload on it down at once: one failure in its breaker
// per pass, not one per workload (which opened it at once and kept it open far beyond the
// outage).
TEST_F(SupervisorTest, AnOutageFeedsTheClusterBreakerOncePerPassNotOncePerWorkload) {
  auto sup = make("a");
  for (const char* name : {"w1", "w2", "w3", "w4"}) {
    manage(name);
    control_->set("tpu-a", name, "RUNNING");
  }
  run(*sup, 1);
  control_->reach("tpu-a", false);
  run(*sup, 6);  // the grace (5 s) passes: four incidents in one pass
  EXPECT_EQ(store_->list_recoveries(10).size(), 4u);
  EXPECT_THAT(control_->breaker_failures, ::testing::ElementsAre("tpu-a"));
}

// No cluster can take the replacement (all down or excluded): the workload waits, deciding again
// with back-off, however long it takes; it does not give up after max_submit_attempts.
// While the old cluster does not answer its workload list, the fencing wait does not try to
// cancel there (each try was one xpk call per workload per pass during an outage); once it
// answers, the cancel goes through.
// Issue 27: a blip of the supervisor's own lists, while the health loop sees the cluster answer,
// is no failover however long it lasts; once the health loop loses it too, the grace runs from
// its last answer.
TEST_F(SupervisorTest, ABlipOfTheSupervisorsListsIsNoFailoverWhileTheHealthLoopSeesTheCluster) {
  auto sup = make("replica-a");
  manage("train");
  control_->set("tpu-a", "train", "RUNNING");
  run(*sup, 2);
  ASSERT_EQ(record("train").state, ManagedState::kRunning);
  control_->lists_fail.insert("tpu-a");
  auto health_loop_sees_it = [&](bool reachable) {
    ProbeSnapshot p;
    p.result.cluster = "tpu-a";
    p.result.reachable = reachable;
    p.result.probed_at = format_iso8601(clock_->now());
    std::lock_guard lock(control_->mutex);
    control_->probes["tpu-a"] = p;
  };
  for (int i = 0; i < 30; ++i) {  // 30 s of failed lists, grace 5 s
    health_loop_sees_it(true);
    run(*sup, 1);
  }
  EXPECT_EQ(record("train").state, ManagedState::kRunning);
  EXPECT_TRUE(store_->list_recoveries(10, "train").empty());
  EXPECT_TRUE(control_->submits.empty());

  // The health loop stops seeing it answer: lost 5 s after its last answer, the probe made
  // just before the last pass.
  const StoreTime last_answer = clock_->now() - 1s;
  health_loop_sees_it(false);
  run(*sup, 3);
  EXPECT_EQ(record("train").state, ManagedState::kRunning);
  EXPECT_TRUE(store_->list_recoveries(10, "train").empty());
  run(*sup, 1);
  const auto incidents = store_->list_recoveries(10, "train");
  ASSERT_EQ(incidents.size(), 1u);
  EXPECT_EQ(incidents[0].t_violation, last_answer);
}

TEST_F(SupervisorTest, FencingDoesNotCallAClusterThatDidNotAnswerThisPass) {
  auto sup = make("a");
  for (const char* name : {"w1", "w2", "w3"}) {
    manage(name);
    control_->set("tpu-a", name, "RUNNING");
  }
  run(*sup, 1);
  control_->reach("tpu-a", false);
  run(*sup, 10);  // incidents after 5 s, then fencing (lease 20 s)
  EXPECT_EQ(record("w1").state, ManagedState::kRecovering);
  EXPECT_EQ(control_->cancel_calls["tpu-a"], 0);
  control_->reach("tpu-a", true);
  run(*sup, 1);
  EXPECT_EQ(control_->cancel_calls["tpu-a"], 3);
  EXPECT_EQ(control_->live_copies("w1"), 1);
  EXPECT_EQ(record("w1").incarnation, "w1-r1");
  EXPECT_THAT(store_->get_recovery("w1-1")->detail_json, HasSubstr("cancel confirmed"));
}

TEST_F(SupervisorTest, NoAvailableClusterIsWaitedForNotGivenUpOn) {
  auto sup = make("a");
  manage("train");
  control_->set("tpu-a", "train", "RUNNING");
  run(*sup, 1);
  control_->reach("tpu-b", false);
  control_->reach("tpu-c", false);
  control_->set("tpu-a", "train", "FAILED", 137);
  run(*sup, 60);  // far more decisions than max_submit_attempts (4)
  EXPECT_EQ(record("train").state, ManagedState::kRecovering);
  EXPECT_TRUE(control_->submits.empty());
  const RecoveryRecord open = *store_->get_recovery("train-1");
  EXPECT_EQ(open.outcome, "open");
  EXPECT_FALSE(open.decided);
  control_->reach("tpu-c", true);
  // Within unreachable_grace_s (5 s), the cap of these decisions' back-off (not backoff_max_s,
  // 8 s); then no more passes (the replacement would wait QUEUED).
  for (int i = 0; i < 5 && control_->submits.empty(); ++i) run(*sup, 1);
  ASSERT_EQ(control_->submits.size(), 1u);
  EXPECT_EQ(control_->submits[0], std::make_pair(std::string("tpu-c"), std::string("train-r1")));
  EXPECT_EQ(record("train").incarnation, "train-r1");
  EXPECT_EQ(store_->get_recovery("train-1")->attempts, 1);
}

TEST_F(SupervisorTest, MaxRecoveriesIsABound) {
  auto sup = make("a");
  manage("train", {.max_recoveries = 1, .stable_after = 0s, .recover_on_failure = false});
  control_->set("tpu-a", "train", "FAILED", 137);
  run(*sup, 1);
  EXPECT_EQ(record("train").incarnation, "train-r1");
  control_->set("tpu-b", "train-r1", "FAILED", 137);
  run(*sup, 1);
  EXPECT_EQ(record("train").state, ManagedState::kGaveUp);
  const auto all = store_->list_recoveries(10, "train");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].outcome, "gave_up");
  EXPECT_THAT(all[0].cause, HasSubstr("max_recoveries (1) reached"));
  EXPECT_EQ(all[1].outcome, "failed_again");
}

TEST_F(SupervisorTest, OneOfTwoReplicasActsAndTheOtherTakesOverWhenItsLeaseLapses) {
  auto a = make("replica-a");
  auto b = make("replica-b");
  manage("train");
  EXPECT_TRUE(a->run_once());
  EXPECT_FALSE(b->run_once());
  control_->set("tpu-a", "train", "FAILED", 137);
  clock_->advance(1s);
  EXPECT_FALSE(b->run_once());  // b does nothing
  EXPECT_TRUE(control_->submits.empty());
  EXPECT_TRUE(a->run_once());
  EXPECT_EQ(control_->submits.size(), 1u);
  control_->set("tpu-b", "train-r1", "RUNNING");
  // a dies (stops renewing); b takes over once the lease (10 s) lapses, not before.
  clock_->advance(9s);
  EXPECT_FALSE(b->run_once());
  clock_->advance(1s);
  EXPECT_TRUE(b->run_once());
  EXPECT_TRUE(b->leader());
  serve::PrometheusText text;
  a->write_metrics(text);
  EXPECT_THAT(text.text(), HasSubstr("\nfalcon_supervisor_leader 1\n"));  // not told yet
  EXPECT_FALSE(a->run_once());
  serve::PrometheusText after;
  a->write_metrics(after);
  EXPECT_THAT(after.text(), HasSubstr("\nfalcon_supervisor_leader 0\n"));
  // a, back from a pause, found the lease gone and stopped acting.
  control_->set("tpu-b", "train-r1", "FAILED", 137);
  EXPECT_FALSE(a->run_once());
  EXPECT_EQ(control_->submits.size(), 1u);
  EXPECT_TRUE(b->run_once());
  EXPECT_EQ(control_->submits.size(), 2u);
  EXPECT_EQ(record("train").incarnation, "train-r2");
  // A graceful stop hands over at once.
  b->stop();
  EXPECT_TRUE(a->run_once());
}

TEST_F(SupervisorTest, ANewLeaderAdoptsAReplacementThePreviousOneSubmittedWithoutRecordingIt) {
  auto a = make("replica-a");
  manage("train");
  control_->set("tpu-a", "train", "FAILED", 137);
  control_->failing_submits = 2;
  a->run_once();  // detected, cancelled; the creates on tpu-b and tpu-c failed: back-off
  ManagedWorkloadRecord m = record("train");
  ASSERT_EQ(m.state, ManagedState::kRecovering);
  // As if a had submitted train-r1 to tpu-b and died before recording it.
  nlohmann::json d = nlohmann::json::parse(m.detail_json);
  m.phase = RecoveryPhase::kSubmitting;
  d["to_cluster"] = "tpu-b";
  m.detail_json = d.dump();
  store_->update_managed(m);
  control_->submit({.spec = spec("train-r1"), .cluster = "tpu-b"});
  const std::size_t before = control_->submits.size();
  clock_->advance(11s);  // a's lease lapses
  auto b = make("replica-b");
  EXPECT_TRUE(b->run_once());
  EXPECT_EQ(control_->submits.size(), before);  // adopted, not submitted twice
  EXPECT_EQ(record("train").incarnation, "train-r1");
  EXPECT_EQ(record("train").state, ManagedState::kStarting);
  EXPECT_EQ(control_->live_copies("train"), 1);
}

TEST_F(SupervisorTest, ManagedNamesAreUniqueAndShortEnoughForTheirReplacements) {
  manage("train");
  EXPECT_THROW(manage("train"), WorkloadSubmitError);
  EXPECT_THROW(manage(std::string(37, 'a')), InvalidWorkloadSpecError);
  // A submit that fails leaves no managed record behind.
  control_->failing_submits = 1;
  EXPECT_THROW(manage("other"), WorkloadSubmitError);
  EXPECT_FALSE(store_->get_managed("other"));
}

TEST_F(SupervisorTest, AFirstSubmitStillUnderWayIsNotTakenForALostWorkload) {
  auto sup = make("a");
  // As POST /v1/workloads leaves it while xpk creates the workload: recorded, not listed yet.
  ManagedWorkloadRecord m;
  m.name = "train";
  m.spec = spec("train");
  m.incarnation = "train";
  m.cluster = "tpu-a";
  m.state = ManagedState::kSubmitting;
  m.created_at = m.updated_at = clock_->now();
  ASSERT_TRUE(store_->create_managed(m));
  run(*sup, 5);
  EXPECT_EQ(record("train").state, ManagedState::kSubmitting);
  EXPECT_TRUE(store_->list_recoveries(10).empty());
  // Its server died during the submit: after the grace the missing workload is recovered.
  clock_->advance(kSubmittingGrace);
  run(*sup, 1);
  EXPECT_EQ(record("train").incarnation, "train-r1");
  EXPECT_THAT(store_->list_recoveries(10)[0].cause, HasSubstr("no longer listed"));
}

TEST_F(SupervisorTest, ADisabledSupervisorNeverTakesTheLease) {
  auto s = fast_settings();
  s.enabled = false;
  auto sup = make("a", s);
  manage("train");
  control_->set("tpu-a", "train", "FAILED", 137);
  EXPECT_FALSE(sup->run_once());
  EXPECT_FALSE(store_->get_lease(kSupervisorLease));
  EXPECT_EQ(record("train").state, ManagedState::kStarting);
}

// Issue 27: a managed workload's states are typed, and their moves are one table.
TEST(ManagedStates, NamesRoundTripAndTheMovesAreOneTable) {
  using S = ManagedState;
  const std::vector<S> all = {S::kSubmitting, S::kStarting, S::kRunning, S::kRecovering,
                              S::kCompleted,  S::kFailed,   S::kGaveUp,  S::kCancelled};
  for (S s : all) EXPECT_EQ(parse_managed_state(to_string(s)), s) << to_string(s);
  EXPECT_EQ(parse_managed_state("Running"), std::nullopt);
  EXPECT_EQ(to_string(S::kGaveUp), std::string("gave_up"));
  for (RecoveryPhase p : {RecoveryPhase::kNone, RecoveryPhase::kFencing, RecoveryPhase::kDeciding,
                          RecoveryPhase::kSubmitting, RecoveryPhase::kConfirming}) {
    EXPECT_EQ(parse_recovery_phase(to_string(p)), p);
  }
  // The life of a workload recovered once, then cancelled.
  EXPECT_TRUE(managed_transition_allowed(S::kSubmitting, S::kStarting));
  EXPECT_TRUE(managed_transition_allowed(S::kStarting, S::kRunning));
  EXPECT_TRUE(managed_transition_allowed(S::kRunning, S::kRecovering));
  EXPECT_TRUE(managed_transition_allowed(S::kRecovering, S::kStarting));
  EXPECT_TRUE(managed_transition_allowed(S::kStarting, S::kCancelled));
  // Nothing leaves an end: a cancel is not undone by a pass that decided before it.
  for (S end : {S::kCompleted, S::kFailed, S::kGaveUp, S::kCancelled}) {
    EXPECT_FALSE(is_active(end));
    for (S to : all) EXPECT_EQ(managed_transition_allowed(end, to), to == end) << to_string(to);
  }
  // Nor goes back to its first submit, or runs without having started.
  EXPECT_FALSE(managed_transition_allowed(S::kRunning, S::kSubmitting));
  EXPECT_FALSE(managed_transition_allowed(S::kSubmitting, S::kRunning));
  EXPECT_FALSE(managed_transition_allowed(S::kSubmitting, S::kRecovering));
}

}  // namespace
}  // namespace falcon
