// The simulator's state machine on a manual clock: queueing while full, admission order,
// completion and failure with JobSet's messages, env overrides, capacity release, TTL, the
// kubectl failures of unreachable and flaky clusters, and state save/restore. Then the scaled
// clock: durations shrink by the scale and every time reported is a wall-clock time, never
// ahead of now.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "common/rfc3339.h"
#include "fleet/fleet_control.h"
#include "sim_fixture.h"

namespace falcon::fleet {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::SimHarness;
using testing::small_fleet;

TEST(FleetSimulator, QueuesWhileCapacityIsFullAndRunsWhenASlotFrees) {
  SimHarness h(small_fleet());
  ASSERT_EQ(h.create("first").result, CreateResult::kCreated);
  h.advance_s(10);
  ASSERT_EQ(h.create("second").result, CreateResult::kCreated);

  EXPECT_EQ(h.state_of("first"), "RUNNING");
  const WorkloadRow queued = *h.row("second");
  EXPECT_EQ(queued.state, "QUEUED");
  EXPECT_EQ(queued.status, "QuotaReserved");
  EXPECT_EQ(queued.message,
            "couldn't assign flavors to pod set slice-job: insufficient unused "
            "quota for google.com/tpu in flavor tpu-v4-8, 4 more needed");
  EXPECT_EQ(queued.vms_needed, 1);
  EXPECT_EQ(queued.vms_running, std::nullopt);

  h.advance_s(89);  // first ends at t=100
  EXPECT_EQ(h.state_of("first"), "RUNNING");
  EXPECT_EQ(h.state_of("second"), "QUEUED");
  h.advance_s(1);
  EXPECT_EQ(h.state_of("first"), "COMPLETED");
  const WorkloadRow admitted = *h.row("second");
  EXPECT_EQ(admitted.state, "RUNNING");
  EXPECT_EQ(admitted.vms_running, 1);
  EXPECT_EQ(admitted.status_time, h.row("first")->status_time);  // admitted when first ended
}

// Issue 27: the fleet's jobs write a checkpoint at each step's end; one started with falcon's
// storage fence checks it first and writes nothing once a newer copy's epoch is stored.
TEST(FleetSimulator, CheckpointsAreWrittenPerStepAndStopOnceTheFenceMovesOn) {
  SimHarness h(small_fleet("", ""));  // 100 s runs of 5 steps: checkpoints at 20, 40, 60, 80 s
  std::int64_t stored = 1;
  h.sim.set_fence_reader([&](const std::string& uri) -> std::optional<std::int64_t> {
    EXPECT_EQ(uri, "gs://fence/train/epoch");
    return stored;
  });
  h.create("plain");
  h.create("fenced", "tpu-v4-64",
           {{"FALCON_FENCE_URI", "gs://fence/train/epoch"}, {"FALCON_FENCE_EPOCH", "1"}});
  const auto workload = [&](const std::string& name) {
    const nlohmann::json state = h.sim.state();
    for (const auto& w : state["clusters"][0]["workloads"]) {
      if (w["name"] == name) return w;
    }
    return nlohmann::json();
  };
  h.advance_s(45);
  EXPECT_EQ(workload("plain")["checkpoints_ns"].size(), 2u);
  EXPECT_EQ(workload("fenced")["checkpoints_ns"].size(), 2u);
  EXPECT_EQ(workload("fenced")["fence_refusals"], 0);
  stored = 2;  // a replacement started with epoch 2
  h.advance_s(30);
  EXPECT_EQ(workload("plain")["checkpoints_ns"].size(), 3u);
  EXPECT_EQ(workload("fenced")["checkpoints_ns"].size(), 2u);  // refused at 60 s
  EXPECT_EQ(workload("fenced")["fence_refusals"], 1);
  EXPECT_EQ(h.state_of("fenced"), "RUNNING");  // until it is deleted
  h.advance_s(10);
  EXPECT_EQ(workload("plain")["checkpoints_ns"].size(), 4u);
  EXPECT_EQ(workload("fenced")["checkpoints_ns"].size(), 2u);
}

TEST(FleetSimulator, CompletedAndFailedRowsCarryJobSetMessages) {
  SimHarness h(small_fleet());
  h.create("good", "tpu-v4-64");
  h.create("bad", "tpu-v4-64", {{"FLEET_OUTCOME", "fail"}});
  h.advance_s(100);

  const WorkloadRow good = *h.row("good");
  EXPECT_EQ(good.state, "COMPLETED");
  EXPECT_EQ(good.status, "Finished");
  EXPECT_EQ(good.message, "jobset completed successfully");
  EXPECT_EQ(good.vms_needed, 8);
  EXPECT_EQ(good.vms_running, 8);
  EXPECT_EQ(good.vms_done, 8);

  const WorkloadRow bad = *h.row("bad");
  EXPECT_EQ(bad.state, "FAILED");
  EXPECT_EQ(bad.status, "Finished");
  EXPECT_EQ(bad.message,
            "jobset failed due to reaching max number of restarts (first failed "
            "job: bad-slice-job-0)");
  EXPECT_EQ(bad.vms_running, 8);
  EXPECT_EQ(bad.vms_done, std::nullopt);
}

TEST(FleetSimulator, EnvOverridesDurationOutcomeAndExitCode) {
  SimHarness h(small_fleet());
  h.create("quick", "tpu-v4-64", {{"FLEET_DURATION_S", "30"}, {"FLEET_EXIT_CODE", "3"}});
  h.advance_s(29.9);
  EXPECT_EQ(h.state_of("quick"), "RUNNING");
  h.advance_s(0.1);
  EXPECT_EQ(h.state_of("quick"), "FAILED");  // a non-zero exit code alone means failure
  const auto rank0 = h.texts_of("quick", 0, 0);
  ASSERT_FALSE(rank0.empty());
  EXPECT_EQ(rank0.back(), "EXIT_CODE=3");
  EXPECT_EQ(h.texts_of("quick", 0, 1).back(), "EXIT_CODE=143");  // killed with the JobSet

  const nlohmann::json state = h.sim.state();
  EXPECT_EQ(state["clusters"][0]["workloads"][0]["exit_code"], 3);
}

TEST(FleetSimulator, ReportsUnparseableEnvOverridesInTheStateDump) {
  SimHarness h(small_fleet());
  h.create("odd", "tpu-v4-8", {{"FLEET_DURATION_S", "soon"}, {"FLEET_OUTCOME", "meh"}});
  const nlohmann::json w = h.sim.state()["clusters"][0]["workloads"][0];
  EXPECT_EQ(w["duration_s"], 100.0);  // the fleet default
  EXPECT_EQ(w["outcome"], "succeed");
  EXPECT_THAT(w["env_warnings"].dump(), HasSubstr("FLEET_DURATION_S=soon: ignored"));
  EXPECT_THAT(w["env_warnings"].dump(), HasSubstr("FLEET_OUTCOME=meh: ignored"));
}

TEST(FleetSimulator, AdmitsHigherPriorityFirstThenOlder) {
  SimHarness h(small_fleet());
  h.create("running");
  h.create("low-old", "tpu-v4-8", {}, "low");
  h.create("high-new", "tpu-v4-8", {}, "high");
  h.create("high-newer", "tpu-v4-8", {}, "high");
  h.advance_s(100);
  EXPECT_EQ(h.state_of("high-new"), "RUNNING");
  EXPECT_EQ(h.state_of("high-newer"), "QUEUED");
  EXPECT_EQ(h.state_of("low-old"), "QUEUED");
  h.advance_s(100);
  EXPECT_EQ(h.state_of("high-newer"), "RUNNING");
  h.advance_s(100);
  EXPECT_EQ(h.state_of("low-old"), "RUNNING");
}

// A workload of the state dump, by name.
nlohmann::json dumped(SimHarness& h, const std::string& name) {
  const nlohmann::json state = h.sim.state();
  for (const auto& w : state["clusters"][0]["workloads"]) {
    if (w["name"] == name) return w;
  }
  ADD_FAILURE() << "no workload " << name;
  return {};
}

// Kueue's `withinClusterQueue: LowerPriority`: a pending workload that does not fit evicts
// running ones of lower priority (never of equal priority); the evicted one is requeued and
// resumes from its last checkpoint.
TEST(FleetSimulator, LowerPriorityPreemptionEvictsAndResumesFromTheLastCheckpoint) {
  SimHarness h(small_fleet("    behaviour: {preemption: LowerPriority}\n"));
  EXPECT_EQ(h.sim.cluster_queue("c").object["spec"]["preemption"]["withinClusterQueue"],
            "LowerPriority");
  h.create("low", "tpu-v4-8", {{"FLEET_CHECKPOINT_S", "20"}}, "low");
  h.advance_s(30);
  h.create("same", "tpu-v4-8", {}, "low");
  h.advance_s(1);
  EXPECT_EQ(h.state_of("low"), "RUNNING");  // not preempted by its equal
  EXPECT_EQ(h.state_of("same"), "QUEUED");

  h.create("high", "tpu-v4-8", {}, "high");  // t=31
  EXPECT_EQ(h.state_of("high"), "RUNNING");
  EXPECT_EQ(h.state_of("low"), "QUEUED");
  const nlohmann::json low = dumped(h, "low");
  EXPECT_EQ(low["evictions"], 1);
  EXPECT_THAT(low["evict_message"].get<std::string>(),
              HasSubstr("Preempted to accommodate a workload (UID: "));
  EXPECT_EQ(low["run_ns"], 80'000'000'000);  // 100 s less the checkpoint at 20 s

  h.advance_s(100);  // high ends at 131; the older of the two low ones goes first
  EXPECT_EQ(h.state_of("high"), "COMPLETED");
  EXPECT_EQ(h.state_of("low"), "RUNNING");
  EXPECT_EQ(h.state_of("same"), "QUEUED");
  h.advance_s(79);
  EXPECT_EQ(h.state_of("low"), "RUNNING");
  h.advance_s(1);  // 80 s after its restart
  EXPECT_EQ(h.state_of("low"), "COMPLETED");
  EXPECT_EQ(h.state_of("same"), "RUNNING");
}

// Without FLEET_CHECKPOINT_S a preempted run starts over; with `preemption` unset (Never) a
// higher-priority workload waits.
TEST(FleetSimulator, PreemptionWithoutCheckpointsStartsOverAndNeverMeansWait) {
  SimHarness h(small_fleet("    behaviour: {preemption: LowerPriority}\n"));
  h.create("low", "tpu-v4-8", {}, "low");
  h.advance_s(50);
  h.create("high", "tpu-v4-8", {}, "high");
  EXPECT_EQ(dumped(h, "low")["run_ns"], 100'000'000'000);

  SimHarness never(small_fleet());
  EXPECT_EQ(never.sim.cluster_queue("c").object["spec"]["preemption"]["withinClusterQueue"],
            "Never");
  never.create("low", "tpu-v4-8", {}, "low");
  never.advance_s(50);
  never.create("high", "tpu-v4-8", {}, "high");
  EXPECT_EQ(never.state_of("low"), "RUNNING");
  EXPECT_EQ(never.state_of("high"), "QUEUED");
}

// Of the lower-priority workloads in the blocks, the fewest that make a contiguous run for the
// preemptor's slice: the lowest priority and most recent are taken first, then each is spared
// when the slice fits without it.
TEST(FleetSimulator, PreemptionEvictsTheFewestThatMakeAContiguousRun) {
  SimHarness h(parse_fleet_config(R"(
time_scale: 0
defaults: {duration_s: 1000, steps: 5}
clusters:
  c:
    project: p
    zone: us-central2-b
    cluster_id: c-1
    capacity: {tpu-v4-32: 4, tpu-v4-64: 1}
    topology: {tpu-v4-podslice: [32, 32]}
    behaviour: {preemption: LowerPriority}
)",
                                  "fleet.yaml"));
  // 16-chip slices: a and b fill block 0, c and d block 1.
  h.create("a", "tpu-v4-32", {}, "low");
  h.advance_s(10);
  h.create("b", "tpu-v4-32", {}, "low");
  h.advance_s(10);
  h.create("c", "tpu-v4-32", {}, "medium");
  h.advance_s(10);
  h.create("d", "tpu-v4-32", {}, "low");
  h.advance_s(10);
  // A 32-chip slice: d alone frees no block (c is medium); d, b and a do; d is spared.
  h.create("big", "tpu-v4-64", {}, "high");
  EXPECT_EQ(h.state_of("big"), "RUNNING");
  EXPECT_EQ(h.state_of("a"), "QUEUED");
  EXPECT_EQ(h.state_of("b"), "QUEUED");
  EXPECT_EQ(h.state_of("c"), "RUNNING");
  EXPECT_EQ(h.state_of("d"), "RUNNING");
  // Nothing of higher priority to preempt for: a medium 32-chip slice waits behind big.
  h.create("mid", "tpu-v4-64", {}, "medium");
  EXPECT_EQ(h.state_of("mid"), "QUEUED");
  EXPECT_EQ(h.state_of("d"), "RUNNING");
}

TEST(FleetSimulator, DeletingARunningWorkloadFreesItsSlotAndStopsItsPods) {
  SimHarness h(small_fleet());
  h.create("victim");
  h.create("waiting");
  h.advance_s(50);
  const DeleteOutcome out = h.sim.remove("c", "victim");
  EXPECT_TRUE(out.deleted);
  EXPECT_FALSE(out.failure);
  EXPECT_EQ(h.state_of("victim"), "ABSENT");
  EXPECT_EQ(h.state_of("waiting"), "RUNNING");
  const auto texts = h.texts_of("victim", 0, 0);
  ASSERT_GE(texts.size(), 3u);
  EXPECT_EQ(texts.front().rfind("XPK Start: ", 0), 0u);
  EXPECT_EQ(texts[texts.size() - 2].rfind("XPK End: ", 0), 0u);
  EXPECT_EQ(texts.back(), "EXIT_CODE=143");
  h.advance_s(100);
  EXPECT_EQ(h.texts_of("victim", 0, 0).size(), texts.size());  // nothing after deletion

  EXPECT_FALSE(h.sim.remove("c", "victim").deleted);  // kubectl's NotFound
}

TEST(FleetSimulator, RunningRowsShowQuotaReservedInV19AndAdmittedInV17) {
  // Kueue sets both conditions in one pass; v1.9+ picks the first of the tied maxima.
  SimHarness v19(small_fleet());
  v19.create("w");
  EXPECT_EQ(v19.row("w")->status, "QuotaReserved");
  EXPECT_EQ(v19.row("w")->message, "Quota reserved in ClusterQueue cluster-queue");

  SimHarness v17(small_fleet("", "xpk: {table_style: v1.7}\n"));
  v17.create("w");
  EXPECT_EQ(v17.row("w")->status, "Admitted");
  EXPECT_EQ(v17.row("w")->message, "The workload is admitted");
}

TEST(FleetSimulator, AdmissionDelayShowsAdmittedOnceItPasses) {
  SimHarness h(small_fleet("    behaviour: {admission_delay_s: 5}\n"));
  h.create("w", "tpu-v4-64");
  EXPECT_EQ(h.row("w")->status, "QuotaReserved");
  EXPECT_TRUE(h.entries_of("w", 0, 0).empty());  // pods have not started
  h.advance_s(5);
  EXPECT_EQ(h.row("w")->status, "Admitted");
  h.advance_s(100);
  EXPECT_EQ(h.state_of("w"), "COMPLETED");  // the run starts after the delay
}

TEST(FleetSimulator, CpuWorkloadsCountNoAcceleratorVmsInV19) {
  SimHarness h(small_fleet());
  h.create("cpu", "n2-standard-32-4");
  const WorkloadRow row = *h.row("cpu");
  EXPECT_EQ(row.vms_needed, 0);
  EXPECT_EQ(row.vms_running, 0);
  EXPECT_EQ(h.sim.state()["clusters"][0]["workloads"][0]["pods"].size(), 4u);
}

TEST(FleetSimulator, FinishedRowsDisappearAfterTheirTtl) {
  SimHarness h(small_fleet());
  CreateRequest req;
  req.workload = "short-lived";
  req.device_type = "tpu-v4-8";
  req.ttl_seconds_after_finished = 60;
  h.sim.create("c", req, false);
  h.advance_s(100);
  EXPECT_EQ(h.state_of("short-lived"), "COMPLETED");
  h.advance_s(59);
  EXPECT_EQ(h.state_of("short-lived"), "COMPLETED");
  h.advance_s(1);
  EXPECT_EQ(h.state_of("short-lived"), "ABSENT");
}

TEST(FleetSimulator, RefusesDuplicatesUnlessOverwritingAndUnknownDeviceTypes) {
  SimHarness h(small_fleet());
  EXPECT_EQ(h.create("w").result, CreateResult::kCreated);
  EXPECT_EQ(h.create("w").result, CreateResult::kAlreadyExists);
  EXPECT_EQ(h.create("w", "tpu-v4-8", {}, "medium", true).result, CreateResult::kReplaced);
  EXPECT_EQ(h.create("x", "v5litepod-16").result, CreateResult::kNoCapacityForDevice);
  EXPECT_EQ(h.create("y", "v4-64").result, CreateResult::kCreated);  // same type as tpu-v4-64
  EXPECT_EQ(h.sim.list("c").rows.size(), 2u);
}

TEST(FleetSimulator, UnreachableClusterFailsEveryKubectlCall) {
  SimHarness h(small_fleet("    behaviour: {unreachable: true}\n"));
  const ListResult list = h.sim.list("c");
  ASSERT_TRUE(list.failure);
  EXPECT_THAT(list.failure->stderr_text, HasSubstr("Unable to connect to the server: dial tcp "));
  EXPECT_THAT(list.failure->stderr_text, HasSubstr(":443: i/o timeout\n"));
  EXPECT_TRUE(h.create("w").failure);
  EXPECT_TRUE(h.sim.remove("c", "w").failure);
  EXPECT_TRUE(h.sim.exists("c", "w", "default").failure);
  EXPECT_EQ(h.sim.state()["clusters"][0]["kubectl_failures"], 3);
}

TEST(FleetSimulator, FlakyEveryNthCallIsDeterministic) {
  SimHarness h(small_fleet("    behaviour: {flaky: {every: 3}}\n"));
  std::vector<bool> failed;
  for (int i = 0; i < 7; ++i) failed.push_back(h.sim.list("c").failure.has_value());
  EXPECT_THAT(failed, ElementsAre(false, false, true, false, false, true, false));
  EXPECT_FALSE(h.sim.exists("c", "w", "default").failure.has_value());  // not a counted call
}

TEST(FleetSimulator, FlakyProbabilityRepeatsForTheSameSeed) {
  const auto pattern = [](int seed) {
    SimHarness h(small_fleet(
        "    behaviour: {flaky: {probability: 0.5, seed: " + std::to_string(seed) + "}}\n"));
    std::string out;
    for (int i = 0; i < 32; ++i) out += h.sim.list("c").failure ? 'x' : '.';
    return out;
  };
  EXPECT_EQ(pattern(7), pattern(7));
  EXPECT_NE(pattern(7), pattern(8));
  EXPECT_NE(pattern(7).find('x'), std::string::npos);
  EXPECT_NE(pattern(7).find('.'), std::string::npos);
}

TEST(FleetSimulator, ResolvesClustersTheWayXpkNamesThem) {
  SimHarness h(small_fleet());
  EXPECT_EQ(h.sim.resolve("p", "us-central2-b", "c-1"), "c");
  EXPECT_EQ(h.sim.resolve("p", "us-central2", "c-1"), "c");  // a region works as --zone
  EXPECT_EQ(h.sim.resolve("p", "", "c-1"), "c");
  EXPECT_EQ(h.sim.resolve("other", "us-central2-b", "c-1"), std::nullopt);
  EXPECT_EQ(h.sim.resolve("p", "us-central2-b", "c"), std::nullopt);  // the fleet name is not it
}

TEST(FleetSimulator, InitialWorkloadsFillTheQueue) {
  SimHarness h(small_fleet(R"(    workloads:
      - {name: long, device_type: tpu-v4-8, duration_s: 86400}
      - {name: wait, count: 3, device_type: tpu-v4-8}
)"));
  const ListResult r = h.sim.list("c");
  ASSERT_EQ(r.rows.size(), 4u);
  EXPECT_EQ(h.state_of("long"), "RUNNING");
  for (const char* name : {"wait-1", "wait-2", "wait-3"}) EXPECT_EQ(h.state_of(name), "QUEUED");
}

TEST(FleetSimulator, LogsGrowWithSimulatedTimeOnly) {
  SimHarness h(small_fleet());
  h.create("w", "tpu-v4-64");
  h.advance_s(1);
  EXPECT_EQ(h.entries_of("w", 0, 0).size(), 1u);  // XPK Start, within the first half second
  h.advance_s(49);
  const auto mid = h.texts_of("w", 0, 0);
  EXPECT_EQ(mid.size(), 3u);  // start, steps 1 and 2 (at 5% + 93% * j/5 of the run)
  EXPECT_THAT(mid[1], HasSubstr("step=1 loss="));
  h.advance_s(50);
  EXPECT_EQ(h.texts_of("w", 0, 0).size(), 8u);  // start, 5 steps, XPK End, EXIT_CODE=0
  EXPECT_EQ(h.sim.log_entries_written(), h.sink->size());
}

TEST(FleetSimulator, StateRestoresIntoAFreshSimulator) {
  SimHarness h(small_fleet());
  h.create("done", "tpu-v4-8", {{"FLEET_DURATION_S", "10"}});
  h.create("running", "tpu-v4-64");
  h.create("queued", "tpu-v4-8");
  h.advance_s(20);
  const nlohmann::json saved = h.sim.state();

  SimHarness again(small_fleet());
  again.clock->advance(std::chrono::seconds(20));
  again.sim.restore(saved);
  const ListResult before = h.sim.list("c");
  const ListResult after = again.sim.list("c");
  ASSERT_EQ(after.rows.size(), before.rows.size());
  for (std::size_t i = 0; i < before.rows.size(); ++i) {
    EXPECT_EQ(after.rows[i].name, before.rows[i].name);
    EXPECT_EQ(after.rows[i].state, before.rows[i].state);
    EXPECT_EQ(after.rows[i].status, before.rows[i].status);
  }
  // Restored pods carry on where they were: no line is written twice.
  const auto pods = saved["clusters"][0]["workloads"][1]["pods"];
  EXPECT_EQ(again.sim.state()["clusters"][0]["workloads"][1]["pods"][0]["lines_emitted"],
            pods[0]["lines_emitted"]);
  EXPECT_THROW(again.sim.restore(nlohmann::json::array()), std::invalid_argument);
}

TEST(SimClock, ManualModeMovesOnlyWhenAdvanced) {
  auto real = std::make_shared<falcon::testing::FakeClock>();
  SimClock clock(real, 0);
  const std::int64_t start = clock.now_ns();
  EXPECT_EQ(tools::format_rfc3339_nanos(start), "2026-04-13T08:00:00.000000000Z");
  real->advance(std::chrono::hours(1));
  EXPECT_EQ(clock.now_ns(), start);
  clock.advance(std::chrono::seconds(5));
  EXPECT_EQ(clock.now_ns(), start + 5'000'000'000);
  clock.advance(std::chrono::seconds(-5));
  EXPECT_EQ(clock.now_ns(), start + 5'000'000'000);
}

TEST(SimClock, ScaledModeIsTheWallClockAndShrinksDurations) {
  auto real = std::make_shared<falcon::testing::FakeClock>();
  SimClock clock(real, 60);
  const std::int64_t start = clock.now_ns();
  EXPECT_EQ(tools::format_rfc3339_nanos(start), "2026-04-13T08:00:00.000000000Z");
  real->advance(std::chrono::seconds(2));
  EXPECT_EQ(clock.now_ns(), start + 2'000'000'000);  // the wall clock, not 120 s ahead
  EXPECT_EQ(clock.span_ns(240'000'000'000), 4'000'000'000);
  EXPECT_EQ(SimClock(real, 0.5).span_ns(3'000'000'000), 6'000'000'000);
  EXPECT_EQ(SimClock(real, 0).span_ns(240'000'000'000), 240'000'000'000);
  // A jump would put the fleet's times ahead of the wall clock.
  EXPECT_THROW(clock.advance(std::chrono::seconds(30)), std::logic_error);
  EXPECT_EQ(clock.now_ns(), start + 2'000'000'000);
  EXPECT_THROW(SimClock(real, -1), std::invalid_argument);
}

// Every log entry's timestamp, in nanoseconds.
std::vector<std::int64_t> entry_times(const MemoryLogSink& sink) {
  std::vector<std::int64_t> out;
  for (const auto& e : sink.entries()) {
    const auto t = tools::parse_rfc3339_nanos(e["timestamp"].get<std::string>());
    EXPECT_TRUE(t) << e.dump();
    out.push_back(t.value_or(0));
  }
  return out;
}

std::int64_t latest(const std::vector<std::int64_t>& times) {
  return times.empty() ? 0 : *std::max_element(times.begin(), times.end());
}

TEST(ScaledFleet, A240SecondRunAtScale60TakesFourWallSecondsAndReportsWallTimes) {
  SimHarness h(small_fleet(), 60);
  const std::int64_t t0 = h.clock->now_ns();
  h.create("job", "tpu-v4-64", {{"FLEET_DURATION_S", "240"}});
  for (int tenth = 1; tenth <= 39; ++tenth) {
    h.pass_wall_s(0.1);
    ASSERT_EQ(h.state_of("job"), "RUNNING") << tenth;
    ASSERT_LE(latest(entry_times(*h.sink)), h.clock->now_ns()) << tenth;
  }
  h.pass_wall_s(0.1);  // 4 s of wall time: the run is over
  const std::int64_t end = t0 + 4'000'000'000;
  EXPECT_EQ(h.clock->now_ns(), end);
  const WorkloadRow row = *h.row("job");
  EXPECT_EQ(row.state, "COMPLETED");
  EXPECT_EQ(row.created, "2026-04-13T08:00:00Z");
  EXPECT_EQ(row.status, "Finished");
  EXPECT_EQ(row.status_time, "2026-04-13T08:00:04Z");
  const nlohmann::json w = h.sim.state()["clusters"][0]["workloads"][0];
  EXPECT_EQ(w["started_ns"], t0);
  EXPECT_EQ(w["finished_ns"], end);
  EXPECT_EQ(w["duration_s"], 240.0);  // the simulated duration is kept
  // Every pod's whole log, end markers included, is written and lies within [t0, end].
  const std::vector<std::int64_t> times = entry_times(*h.sink);
  ASSERT_EQ(times.size(), w["pods"].size() * 8u);  // start, 5 steps, XPK End, EXIT_CODE
  EXPECT_GE(*std::min_element(times.begin(), times.end()), t0);
  EXPECT_EQ(latest(times), end);
  const auto texts = h.texts_of("job", 0, 0);
  EXPECT_EQ(texts.front(), "XPK Start: Mon Apr 13 08:00:00 UTC 2026");
  EXPECT_EQ(texts[texts.size() - 2], "XPK End: Mon Apr 13 08:00:04 UTC 2026");
  EXPECT_EQ(texts.back(), "EXIT_CODE=0");
}

TEST(ScaledFleet, AdmissionDelayAndTtlAreScaledToo) {
  SimHarness h(small_fleet("    behaviour: {admission_delay_s: 60}\n"), 60);
  CreateRequest req;
  req.workload = "w";
  req.device_type = "tpu-v4-8";
  req.env = {{"FLEET_DURATION_S", "120"}};
  req.ttl_seconds_after_finished = 3600;
  h.sim.create("c", req, false);
  h.pass_wall_s(0.9);
  EXPECT_EQ(h.row("w")->status, "QuotaReserved");
  h.pass_wall_s(0.1);  // 60 simulated seconds
  EXPECT_EQ(h.row("w")->status, "Admitted");
  h.pass_wall_s(1.9);
  EXPECT_EQ(h.state_of("w"), "RUNNING");
  h.pass_wall_s(0.1);  // the 120 s run took 2 s after its admission
  EXPECT_EQ(h.state_of("w"), "COMPLETED");
  EXPECT_EQ(h.row("w")->status_time, "2026-04-13T08:00:03Z");
  h.pass_wall_s(59.9);
  EXPECT_EQ(h.state_of("w"), "COMPLETED");
  h.pass_wall_s(0.1);  // one simulated hour of TTL is a wall-clock minute
  EXPECT_EQ(h.state_of("w"), "ABSENT");
  EXPECT_LE(latest(entry_times(*h.sink)), h.clock->now_ns());
}

TEST(ScaledFleet, DeletedAndOverwrittenRunsEndTheirLogsAtNow) {
  SimHarness h(small_fleet(), 60);
  const std::int64_t t0 = h.clock->now_ns();
  h.create("victim", "tpu-v4-64", {{"FLEET_DURATION_S", "600"}});
  h.pass_wall_s(5);
  ASSERT_TRUE(h.sim.remove("c", "victim").deleted);
  EXPECT_EQ(h.texts_of("victim", 0, 0).back(), "EXIT_CODE=143");
  EXPECT_EQ(latest(entry_times(*h.sink)), h.clock->now_ns());

  h.create("twice", "tpu-v4-8", {{"FLEET_DURATION_S", "600"}});
  h.create("queued", "tpu-v4-8");  // waits for the only v4-8 slot
  h.pass_wall_s(2);
  ASSERT_EQ(h.create("twice", "tpu-v4-8", {}, "medium", true).result, CreateResult::kReplaced);
  ASSERT_EQ(h.create("queued", "tpu-v4-8", {}, "medium", true).result, CreateResult::kReplaced);
  const std::vector<std::int64_t> times = entry_times(*h.sink);
  EXPECT_LE(latest(times), h.clock->now_ns());
  // Replacing a workload that never ran writes nothing for it (no lines at time zero).
  EXPECT_GE(*std::min_element(times.begin(), times.end()), t0);
}

TEST(ScaledFleet, GeneratedLogsEndAtNowUnlessGivenAStart) {
  SimHarness h(small_fleet(), 60);
  h.pass_wall_s(1);
  GenerateRequest req;
  req.cluster = "c";
  req.workload = "bulk";
  req.ranks = {0, 1};
  req.lines_per_rank = 1000;
  ASSERT_EQ(h.sim.generate_logs(req).written, 2000u);
  std::vector<std::int64_t> times = entry_times(*h.sink);
  EXPECT_EQ(latest(times), h.clock->now_ns());
  EXPECT_LT(*std::min_element(times.begin(), times.end()), h.clock->now_ns() - 900'000'000);

  req.workload = "dated";
  req.start_ns = 1'000'000'000;  // an explicit start is kept as given
  h.sim.generate_logs(req);
  const auto dated = h.entries_of("dated", 0, 0);
  ASSERT_FALSE(dated.empty());
  EXPECT_EQ(dated.front()["timestamp"].get<std::string>().rfind("1970-01-01T00:00:01.", 0), 0u);
}

TEST(ScaledFleet, TheClockCannotBeAdvancedThroughTheControlApi) {
  SimHarness h(small_fleet(), 60);
  FleetControl control(h.sim, "http://127.0.0.1:1");
  try {
    control.handle("clock:advance", {{"seconds", 60}});
    FAIL() << "clock:advance succeeded on a scaled clock";
  } catch (const ControlError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_THAT(e.what(), HasSubstr("needs a manual clock (time_scale 0)"));
  }
  SimHarness manual(small_fleet());
  FleetControl manual_control(manual.sim, "http://127.0.0.1:1");
  const nlohmann::json moved = manual_control.handle("clock:advance", {{"seconds", 60}});
  EXPECT_EQ(moved["now"], "2026-04-13T08:01:00.000000000Z");
}

}  // namespace
}  // namespace falcon::fleet
