// What simulated pods write to Cloud Logging: the exact resource and labels GKE and xpk
// produce, pod names, streams and severities, the xpk markers, the completion-index fallback
// case, exact line counts, bulk generation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "common/rfc3339.h"
#include "fleet/pod_logs.h"
#include "sim_fixture.h"

namespace falcon::fleet {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using testing::SimHarness;
using testing::small_fleet;

TEST(PodLogs, EntriesCarryGkeResourceAndPodLabels) {
  SimHarness h(small_fleet());
  h.create("train-a", "tpu-v4-64");
  h.advance_s(100);
  const auto entries = h.entries_of("train-a", 0, 1);
  ASSERT_EQ(entries.size(), 8u);
  const nlohmann::json& e = entries.front();
  const std::string pod = e["resource"]["labels"]["pod_name"];
  EXPECT_THAT(pod, MatchesRegex("train-a-slice-job-0-1-[bcdfghjklmnpqrstvwxz2456789]{5}"));
  EXPECT_EQ(e["resource"], nlohmann::json({{"type", "k8s_container"},
                                           {"labels",
                                            {{"project_id", "p"},
                                             {"location", "us-central2-b"},
                                             {"cluster_name", "c-1"},
                                             {"namespace_name", "default"},
                                             {"pod_name", pod},
                                             {"container_name", "jax-tpu"}}}}));
  const nlohmann::json& labels = e["labels"];
  EXPECT_EQ(labels["k8s-pod/jobset_sigs_k8s_io/jobset-name"], "train-a");
  EXPECT_EQ(labels["k8s-pod/jobset_sigs_k8s_io/job-index"], "0");
  EXPECT_EQ(labels["k8s-pod/batch_kubernetes_io/job-completion-index"], "1");
  EXPECT_EQ(labels["k8s-pod/xpk_google_com/workload"], "train-a");
  EXPECT_EQ(labels["k8s-pod/jobset_sigs_k8s_io/restart-attempt"], "0");
  EXPECT_EQ(labels["k8s-pod/batch_kubernetes_io/job-name"], "train-a-slice-job-0");
  EXPECT_EQ(labels["logging.gke.io/top_level_controller_type"], "JobSet");
  EXPECT_THAT(labels["compute.googleapis.com/resource_name"].get<std::string>(),
              MatchesRegex("gke-c-1-np-0-[0-9a-f]{8}-[a-z0-9]{4}"));
  EXPECT_EQ(e["logName"], "projects/p/logs/stdout");
  EXPECT_EQ(e["severity"], "INFO");
  EXPECT_THAT(e["insertId"].get<std::string>(), MatchesRegex("[0-9a-z]{16}"));
  EXPECT_THAT(e["timestamp"].get<std::string>(),
              MatchesRegex("2026-04-13T08:00:[0-9]{2}\\.[0-9]{9}Z"));
  EXPECT_FALSE(e.contains("receiveTimestamp"));  // the Logging server sets it
  // The same pod name on every entry of the pod; every pod of the workload differs.
  std::set<std::string> pods;
  for (const auto& x : h.sink->entries()) pods.insert(x["resource"]["labels"]["pod_name"]);
  EXPECT_EQ(pods.size(), 8u);
}

TEST(PodLogs, PrintsXpkMarkersAndTrainingSteps) {
  SimHarness h(small_fleet());
  h.create("w", "tpu-v4-8");
  h.advance_s(100);
  const auto texts = h.texts_of("w", 0, 0);
  ASSERT_EQ(texts.size(), 8u);
  EXPECT_EQ(texts[0], "XPK Start: Mon Apr 13 08:00:00 UTC 2026");
  for (int step = 1; step <= 5; ++step) {
    EXPECT_THAT(texts[step], MatchesRegex("step=" + std::to_string(step) +
                                          " loss=[0-9]\\.[0-9]{4} step_time=[0-9]+\\.[0-9]{3}s "
                                          "tokens/s=[0-9]+\\.[0-9]"));
  }
  EXPECT_EQ(texts[6], "XPK End: Mon Apr 13 08:01:40 UTC 2026");
  EXPECT_EQ(texts[7], "EXIT_CODE=0");
  // Timestamps strictly increase within the pod.
  const auto entries = h.entries_of("w", 0, 0);
  for (std::size_t i = 1; i < entries.size(); ++i) {
    EXPECT_LT(*tools::parse_rfc3339_nanos(entries[i - 1]["timestamp"].get<std::string>()),
              *tools::parse_rfc3339_nanos(entries[i]["timestamp"].get<std::string>()));
  }
}

TEST(PodLogs, FailingPodWritesItsErrorToStderr) {
  SimHarness h(small_fleet());
  h.create("w", "tpu-v4-8", {{"FLEET_OUTCOME", "fail"}, {"FLEET_EXIT_CODE", "7"}});
  h.advance_s(100);
  const auto entries = h.entries_of("w", 0, 0);
  std::vector<std::string> errors;
  for (const auto& e : entries) {
    if (e["logName"] == "projects/p/logs/stderr") {
      EXPECT_EQ(e["severity"], "ERROR");
      errors.push_back(e["textPayload"]);
    }
  }
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0], "Traceback (most recent call last):");
  EXPECT_THAT(errors[2], HasSubstr("RuntimeError: simulated training failure"));
  EXPECT_EQ(entries.back()["textPayload"], "EXIT_CODE=7");
}

TEST(PodLogs, SlicesAndContainersFollowXpk) {
  SimHarness h(small_fleet());
  CreateRequest tpu;
  tpu.workload = "multi";
  tpu.device_type = "tpu-v4-64";
  tpu.tpu_type_flag = true;
  tpu.num_slices = 2;
  tpu.docker_name = "trainer";
  ASSERT_EQ(h.sim.create("c", tpu, false).result, CreateResult::kCreated);
  CreateRequest gpu;
  gpu.workload = "gpu";
  gpu.device_type = "a100-40gb-8";
  gpu.num_nodes = 2;
  ASSERT_EQ(h.sim.create("c", gpu, false).result, CreateResult::kCreated);
  h.advance_s(1);

  EXPECT_EQ(h.row("multi")->vms_needed, 16);  // 8 workers x 2 slices
  const auto slice1 = h.entries_of("multi", 1, 7);
  ASSERT_FALSE(slice1.empty());
  EXPECT_EQ(slice1[0]["labels"]["k8s-pod/jobset_sigs_k8s_io/job-index"], "1");
  EXPECT_EQ(slice1[0]["labels"]["k8s-pod/batch_kubernetes_io/job-completion-index"], "7");
  EXPECT_EQ(slice1[0]["resource"]["labels"]["container_name"], "trainer");

  EXPECT_EQ(h.row("gpu")->vms_needed, 2);  // one pod per node
  const auto gpu_pod = h.entries_of("gpu", 0, 1);
  ASSERT_FALSE(gpu_pod.empty());
  EXPECT_EQ(gpu_pod[0]["resource"]["labels"]["container_name"], "gpu-image");
}

TEST(PodLogs, SomePodsLackTheCompletionIndexLabel) {
  SimHarness h(small_fleet("", "logs: {omit_completion_index_every: 3}\n"));
  h.create("w", "tpu-v4-64");
  h.advance_s(1);  // past every pod's XPK Start line
  std::vector<int> without;
  for (int worker = 0; worker < 8; ++worker) {
    const auto e = h.entries_of("w", 0, worker).at(0);
    if (!e["labels"].contains("k8s-pod/batch_kubernetes_io/job-completion-index")) {
      without.push_back(worker);
      // The pod name still tells the rank.
      EXPECT_THAT(e["resource"]["labels"]["pod_name"].get<std::string>(),
                  HasSubstr("-slice-job-0-" + std::to_string(worker) + "-"));
    }
  }
  EXPECT_EQ(without, (std::vector<int>{2, 5}));
  h.create("env", "tpu-v4-64", {{"FLEET_OMIT_INDEX_EVERY", "1"}});
  h.advance_s(1);
  EXPECT_FALSE(h.entries_of("env", 0, 0)
                   .at(0)["labels"]
                   .contains("k8s-pod/batch_kubernetes_io/job-completion-index"));
}

TEST(PodLogs, LogLinesEnvGivesEveryPodExactlyThatManyLines) {
  SimHarness h(small_fleet());
  h.create("ok", "tpu-v4-64", {{"FLEET_LOG_LINES", "250"}});
  h.create("bad", "tpu-v4-64", {{"FLEET_LOG_LINES", "40"}, {"FLEET_OUTCOME", "fail"}});
  h.advance_s(100);
  EXPECT_EQ(h.entries_of("ok", 0, 0).size(), 250u);
  EXPECT_EQ(h.entries_of("ok", 0, 7).size(), 250u);
  EXPECT_EQ(h.entries_of("bad", 0, 0).size(), 40u);  // includes its three error lines
  EXPECT_EQ(h.entries_of("bad", 0, 3).size(), 40u);
}

TEST(PodLogs, PregeneratedWorkloadsWriteTheirWholeRunAtCreate) {
  SimHarness h(small_fleet());
  h.create("bulk", "tpu-v4-8", {{"FLEET_PREGENERATE_LOGS", "1"}, {"FLEET_LOG_LINES", "1000"}});
  EXPECT_EQ(h.entries_of("bulk", 0, 0).size(), 1000u);
  EXPECT_EQ(h.state_of("bulk"), "RUNNING");
  h.advance_s(100);
  EXPECT_EQ(h.state_of("bulk"), "COMPLETED");
  EXPECT_EQ(h.entries_of("bulk", 0, 0).size(), 1000u);  // nothing written twice
}

TEST(PodLogs, GenerateWritesExactCountsAndReusesExistingPodNames) {
  SimHarness h(small_fleet());
  h.create("live", "tpu-v4-64");
  const std::size_t before = h.sink->size();
  GenerateRequest req;
  req.cluster = "c";
  req.workload = "live";
  req.ranks = {0, 3};
  req.lines_per_rank = 25'000;
  const GenerateResult r = h.sim.generate_logs(req);
  EXPECT_EQ(r.written, 50'000u);
  EXPECT_EQ(h.sink->size(), before + 50'000u);
  const std::string pod0 = h.sim.state()["clusters"][0]["workloads"][0]["pods"][0]["name"];
  EXPECT_EQ(r.pod_names.at(0), pod0);
  EXPECT_THAT(r.pod_names.at(1), MatchesRegex("live-slice-job-0-3-[a-z0-9]{5}"));

  GenerateRequest other;
  other.cluster = "c";
  other.workload = "not-running";
  other.lines_per_rank = 10;
  other.omit_completion_index = true;
  const GenerateResult r2 = h.sim.generate_logs(other);
  EXPECT_EQ(r2.written, 10u);
  const auto entries = h.entries_of("not-running", 0, 0);
  ASSERT_EQ(entries.size(), 10u);
  EXPECT_FALSE(entries[0]["labels"].contains("k8s-pod/batch_kubernetes_io/job-completion-index"));
  EXPECT_EQ(entries[0]["textPayload"].get<std::string>().rfind("XPK Start: ", 0), 0u);

  GenerateRequest unknown = other;
  unknown.cluster = "nope";
  EXPECT_THROW(h.sim.generate_logs(unknown), std::invalid_argument);
}

TEST(PodLogs, HelpersMatchKubernetesAndDate) {
  // 2026-06-01T10:00:02Z, a Monday.
  EXPECT_EQ(format_date_command(*tools::parse_rfc3339_nanos("2026-06-01T10:00:02.5Z")),
            "Mon Jun  1 10:00:02 UTC 2026");
  EXPECT_EQ(format_k8s_time(*tools::parse_rfc3339_nanos("2026-06-01T10:00:02.999Z")),
            "2026-06-01T10:00:02Z");
  EXPECT_EQ(make_pod_name("w", 1, 2, 42), make_pod_name("w", 1, 2, 42));
  EXPECT_NE(make_pod_name("w", 1, 2, 42), make_pod_name("w", 1, 2, 43));
  PodScript s;
  s.start_ns = 0;
  s.end_ns = 10;  // shorter than its line count: timestamps still strictly increase
  s.steps = 20;
  for (std::size_t i = 1; i < s.line_count(); ++i) {
    EXPECT_LT(s.line(i - 1).time_ns, s.line(i).time_ns) << i;
  }
}

TEST(PodLogs, EveryLineIsWrittenByTheEndOfTheRun) {
  for (const bool failing : {false, true}) {
    PodScript s;
    s.start_ns = 1'000'000'000;
    s.end_ns = 5'000'000'000;
    s.steps = 50;
    s.lines_per_step = 3;
    s.failing = failing;
    const std::size_t n = s.line_count();
    EXPECT_EQ(s.line(n - 1).text, "EXIT_CODE=0");
    EXPECT_EQ(s.line(n - 1).time_ns, s.end_ns);  // the last line is at the end, not after it
    EXPECT_EQ(s.line(n - 2).time_ns, s.end_ns - 1);
    EXPECT_GE(s.line(0).time_ns, s.start_ns);
    for (std::size_t i = 1; i < n; ++i) {
      EXPECT_LT(s.line(i - 1).time_ns, s.line(i).time_ns) << i << (failing ? " failing" : "");
    }
  }
}

}  // namespace
}  // namespace falcon::fleet
