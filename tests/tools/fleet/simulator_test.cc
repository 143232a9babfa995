// The simulator's state machine on a manual clock: queueing while full, admission order,
// completion and failure with JobSet's messages, env overrides, capacity release, TTL, the
// kubectl failures of unreachable and flaky clusters, and state save/restore.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim_fixture.h"
#include "util/time_format.h"

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
  EXPECT_EQ(format_rfc3339_nanos(start), "2026-04-13T08:00:00.000000000Z");
  real->advance(std::chrono::hours(1));
  EXPECT_EQ(clock.now_ns(), start);
  clock.advance(std::chrono::seconds(5));
  EXPECT_EQ(clock.now_ns(), start + 5'000'000'000);
  clock.advance(std::chrono::seconds(-5));
  EXPECT_EQ(clock.now_ns(), start + 5'000'000'000);
}

TEST(SimClock, ScaledModeRunsFasterThanRealTime) {
  auto real = std::make_shared<falcon::testing::FakeClock>();
  SimClock clock(real, 60);
  const std::int64_t start = clock.now_ns();
  real->advance(std::chrono::seconds(2));
  EXPECT_EQ(clock.now_ns(), start + 120'000'000'000);
  clock.advance(std::chrono::seconds(30));
  EXPECT_EQ(clock.now_ns(), start + 150'000'000'000);
  EXPECT_THROW(SimClock(real, -1), std::invalid_argument);
}

}  // namespace
}  // namespace falcon::fleet
