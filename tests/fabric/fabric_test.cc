// ClusterFabric's own logic, with fakes behind FabricDependencies (no process, no network):
// the exit code filled in by get_workload_status, handles recovered by name, reload, and one xpk
// adapter per configuration shared by the prober and the workload manager.
#include "falcon/fabric.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fabric/fabric_impl.h"
#include "falcon/errors.h"
#include "falcon/state_store.h"
#include "logs/gke_log_env.h"
#include "support/fake_clock.h"
#include "support/fake_command_runner.h"
#include "support/fake_http_client.h"
#include "support/temp_dir.h"
#include "xpk/xpk_outputs.h"

namespace falcon {
namespace {

using testing::FakeClock;
using testing::FakeCommandRunner;
using testing::FakeHttpClient;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr const char* kClusterA = R"(  tpu-a:
    provider: gke
    project: falcon-bench
    zone: us-central2-b
    cluster_id: tpu-v4-cluster
    accelerator_types:
      - type: tpu-v4-64
        device_class: tpu
        priority: 1
    default_namespace: default
    gcs_bucket: gs://falcon-a
    max_queue_depth: 5
    probe_timeout_s: 15
)";

constexpr const char* kClusterB = R"(  tpu-b:
    provider: gke
    project: falcon-bench
    zone: us-central2-b
    cluster_id: tpu-b
    accelerator_types:
      - type: tpu-v4-64
        device_class: tpu
        priority: 1
    default_namespace: default
    gcs_bucket: gs://falcon-b
    max_queue_depth: 5
    probe_timeout_s: 15
)";

HttpResponse json_response(int status, const nlohmann::json& body) {
  return testing::json_response(status, body.dump());
}

class FabricTest : public ::testing::Test {
 protected:
  FabricTest() {
    runner_->attach_clock(clock_);
    std::ofstream(tmp_.path() / "token") << "test-token\n";
    write_config({kClusterA});
  }

  void write_config(const std::vector<std::string>& clusters,
                    const std::string& namespace_flag = "auto") {
    std::ofstream out(config_path(), std::ios::trunc);
    out << "clusters:\n";
    for (const auto& c : clusters) out << c;
    out << fmt::format(
        "xpk:\n  state_dir: {}\n  namespace_flag: {}\n"
        "gcp:\n  access_token_file: {}\n  logging_endpoint: http://logging.test\n",
        (tmp_.path() / "state").string(), namespace_flag, (tmp_.path() / "token").string());
  }
  std::string config_path() const { return (tmp_.path() / "repos.yaml").string(); }
  std::unique_ptr<ClusterFabric> fabric() {
    return std::make_unique<ClusterFabric>(config_path(),
                                           FabricDependencies{runner_, http_, clock_});
  }

  testing::TempDir tmp_;
  std::shared_ptr<FakeCommandRunner> runner_ = std::make_shared<FakeCommandRunner>();
  std::shared_ptr<FakeHttpClient> http_ = std::make_shared<FakeHttpClient>();
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
};

WorkloadHandle handle(const std::string& workload) {
  return {.workload_name = workload,
          .cluster = "tpu-a",
          .namespace_ = "default",
          .submitted_at = "2026-06-01T09:00:00.000Z"};
}

TEST_F(FabricTest, ACompletedWorkloadExitedZeroWithoutReadingLogs) {
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  const auto status = fabric()->get_workload_status(handle("train-c"));
  EXPECT_EQ(status.state, "COMPLETED");
  EXPECT_EQ(status.exit_code, 0);
  EXPECT_EQ(http_->count("*"), 0u);
}

TEST_F(FabricTest, AFailedWorkloadsExitCodeComesFromItsLogs) {
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  testing::GkePlace place;
  place.project = "falcon-bench";
  place.cluster_id = "tpu-v4-cluster";
  place.workload = "train-d";
  place.namespace_ = "default";
  http_->on("POST", "/v2/entries:list", [&](const HttpRequest&) {
    nlohmann::json body;
    body["entries"] = nlohmann::json::array(
        {testing::gke_entry(place, {.slice = 0, .worker = 1, .text = "EXIT_CODE=3\n"})});
    return json_response(200, body);
  });
  const auto status = fabric()->get_workload_status(handle("train-d"));
  EXPECT_EQ(status.state, "FAILED");
  EXPECT_EQ(status.exit_code, 3);
  ASSERT_EQ(http_->count("POST", "/v2/entries:list"), 1u);
  // The query starts before the submission (clock skew margin), not at it.
  const auto body = nlohmann::json::parse(http_->requests().back().body);
  EXPECT_THAT(body["filter"].get<std::string>(), HasSubstr("2026-06-01T08:50:00"));
}

TEST_F(FabricTest, AFailedWorkloadWhoseLogsCannotBeReadKeepsItsStateAndANullCode) {
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  http_->on("POST", "/v2/entries:list", [](const HttpRequest&) {
    return json_response(
        403,
        {{"error",
          {{"code", 403}, {"message", "Permission denied"}, {"status", "PERMISSION_DENIED"}}}});
  });
  const auto status = fabric()->get_workload_status(handle("train-d"));
  EXPECT_EQ(status.state, "FAILED");
  EXPECT_EQ(status.exit_code, std::nullopt);
}

TEST_F(FabricTest, RunningWorkloadsHaveNoExitCodeAndUnlistedOnesAreNotFound) {
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  auto f = fabric();
  EXPECT_EQ(f->get_workload_status(handle("train-e")).exit_code, std::nullopt);
  EXPECT_THROW(f->get_workload_status(handle("never-submitted")), WorkloadNotFoundError);
  EXPECT_EQ(http_->count("*"), 0u);
}

TEST_F(FabricTest, HandlesByNameRecoverWhatFalconSubmitted) {
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  auto f = fabric();
  WorkloadSpec spec;
  spec.name = "llama-8b-bench";
  spec.docker_image = "gcr.io/p/img:1";
  spec.command = {"python3", "train.py"};
  spec.accelerator_type = "tpu-v4-64";
  const WorkloadHandle submitted = f->submit_workload("tpu-a", spec);

  const WorkloadHandle found = f->handle_for("tpu-a", "llama-8b-bench");
  EXPECT_EQ(found, submitted);
  EXPECT_EQ(found.submitted_at, "2026-04-13T08:00:00.000Z");  // the fake clock at submit
  // Another fabric (another process, later) finds it too.
  EXPECT_EQ(fabric()->handle_for("tpu-a", "llama-8b-bench"), submitted);
  // A name falcon did not submit: the cluster's default namespace, no submission time.
  const WorkloadHandle other = f->handle_for("tpu-a", "someone-elses");
  EXPECT_EQ(other.namespace_, "default");
  EXPECT_EQ(other.submitted_at, "");
  EXPECT_THROW(f->handle_for("nope", "x"), UnknownClusterError);
}

// Issue 30: select, submit and record in one call; the submission's one record names the
// decision and keeps the spec (a managed workload is submitted again from it).
TEST_F(FabricTest, SelectAndSubmitRecordsTheSubmissionWithItsDecisionAndSpec) {
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  auto f = fabric();
  WorkloadSpec spec;
  spec.name = "placed";
  spec.docker_image = "gcr.io/p/img:1";
  spec.command = {"python3", "train.py"};
  spec.accelerator_type = "tpu-v4-64";
  const PlacedWorkload placed = f->select_and_submit(spec);
  EXPECT_EQ(placed.selection.selected_cluster, "tpu-a");
  EXPECT_EQ(placed.handle.cluster, "tpu-a");
  ASSERT_NE(placed.selection.selection_id, 0);
  const auto row = f->state_store()->find_submission("tpu-a", "placed");
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->selection_id, placed.selection.selection_id);
  ASSERT_TRUE(row->spec.has_value());
  EXPECT_EQ(row->spec->command, spec.command);
  // A named cluster: no decision.
  spec.name = "named";
  f->submit_workload("tpu-a", spec);
  EXPECT_EQ(f->state_store()->find_submission("tpu-a", "named")->selection_id, 0);
  spec.accelerator_type = "tpu-v9-1";
  EXPECT_THROW(f->select_and_submit(spec), NoAvailableClusterError);
}

// Issue 30: a probe's listing records the state of each of falcon's own submissions it shows,
// so that nobody has to ask `job status` for the state store (and the dashboard) to know it.
TEST_F(FabricTest, AProbeRecordsTheStatesOfFalconsSubmissionsItLists) {
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  auto f = fabric();
  for (const char* name : {"train-c", "train-e", "not-listed"}) {
    WorkloadSpec spec;
    spec.name = name;
    spec.docker_image = "gcr.io/p/img:1";
    spec.command = {"python3", "train.py"};
    spec.accelerator_type = "tpu-v4-64";
    f->submit_workload("tpu-a", spec);
  }
  const auto store = f->state_store();
  EXPECT_EQ(store->find_submission("tpu-a", "train-e")->state, std::nullopt);

  clock_->advance(std::chrono::seconds(5));
  ASSERT_TRUE(f->get_cluster_status("tpu-a").reachable);
  EXPECT_EQ(store->find_submission("tpu-a", "train-e")->state, "RUNNING");
  EXPECT_EQ(store->find_submission("tpu-a", "train-c")->state, "COMPLETED");
  EXPECT_EQ(store->find_submission("tpu-a", "not-listed")->state, std::nullopt);
  // A workload falcon did not submit is not recorded.
  EXPECT_THAT(store->list_workload_events("tpu-a", "train-d"), SizeIs(0));

  // The health loop's probe (probe_cluster) too; an unchanged state is not recorded again.
  clock_->advance(std::chrono::seconds(5));
  f->probe_cluster(f->get_cluster("tpu-a"));
  EXPECT_THAT(store->list_workload_events("tpu-a", "train-e"), SizeIs(1));
  EXPECT_THAT(store->list_workload_events("tpu-a", "train-c"), SizeIs(1));
}

TEST_F(FabricTest, ReloadSwapsTheConfigurationAndKeepsTheOldOneOnFailure) {
  auto f = fabric();
  EXPECT_THAT(f->list_clusters(), SizeIs(1));
  EXPECT_THROW(f->get_cluster("tpu-b"), UnknownClusterError);

  write_config({kClusterA, kClusterB});
  f->reload();
  EXPECT_THAT(f->list_clusters(), SizeIs(2));
  EXPECT_EQ(f->get_cluster("tpu-b").cluster_id, "tpu-b");
  EXPECT_THAT(f->config()->clusters, SizeIs(2));

  std::ofstream(config_path(), std::ios::trunc) << "clusters: [this is not a map\n";
  EXPECT_THROW(f->reload(), ClusterConfigError);
  EXPECT_THAT(f->list_clusters(), SizeIs(2));
  EXPECT_THAT(f->config()->clusters, SizeIs(2));
  EXPECT_EQ(f->get_cluster("tpu-b").cluster_id, "tpu-b");
}

TEST_F(FabricTest, OneXpkAdapterPerConfigurationAsksXpksHelpOnce) {
  // namespace_flag auto with a non-default namespace: xpk's --help decides, once per adapter.
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  runner_->on({"workload", "create", "--help"},
              FakeCommandRunner::ok("usage: xpk workload create [--namespace NAMESPACE]\n"));
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  auto f = fabric();
  WorkloadSpec spec;
  spec.docker_image = "gcr.io/p/img:1";
  spec.command = {"true"};
  spec.accelerator_type = "tpu-v4-64";
  spec.namespace_ = "team-a";
  for (const char* name : {"first", "second"}) {
    spec.name = name;
    EXPECT_EQ(f->submit_workload("tpu-a", spec).namespace_, "team-a");
  }
  EXPECT_TRUE(f->get_cluster_status("tpu-a").reachable);  // the prober, through the same adapter
  EXPECT_THAT(runner_->calls_matching({"--help"}), SizeIs(1));
  EXPECT_THAT(runner_->calls_matching({"--namespace=team-a"}), SizeIs(2));

  // A reload builds a new adapter (the binary may have changed): it asks again, once.
  f->reload();
  spec.name = "third";
  f->submit_workload("tpu-a", spec);
  EXPECT_THAT(runner_->calls_matching({"--help"}), SizeIs(2));
  // Another fabric in the same process has its own adapter: no process-wide answer.
  auto g = fabric();
  spec.name = "fourth";
  g->submit_workload("tpu-a", spec);
  EXPECT_THAT(runner_->calls_matching({"--help"}), SizeIs(3));
}

// `falcon doctor` on one probed cluster: a kube probe that could not read the ClusterQueues
// warns, with the grant that fixes it, instead of passing as ok.
TEST(DoctorClusterCheck, ACapacityThatCouldNotBeReadWarnsWithTheGrant) {
  ClusterConfig c;
  c.name = "tpu-a";
  c.cluster_id = "gke-a";
  c.project = "proj";
  c.zone = "us-central2-b";
  ClusterProbeResult r{"tpu-a", true, 1, 2, std::nullopt, "2026-04-13T08:00:00.000Z"};
  DoctorCheck check = cluster_check(c, r);
  EXPECT_EQ(check.status, "ok");
  EXPECT_EQ(check.detail, "reachable: 1 queued, 2 running");
  r.capacity_error =
      "the Kubernetes API of cluster 'tpu-a' answered 403 to the ClusterQueue list: forbidden";
  check = cluster_check(c, r);
  EXPECT_EQ(check.name, "cluster tpu-a");
  EXPECT_EQ(check.status, "warn");
  EXPECT_EQ(check.detail,
            "reachable: 1 queued, 2 running; capacity not known: the Kubernetes API of cluster "
            "'tpu-a' answered 403 to the ClusterQueue list: forbidden");
  EXPECT_THAT(check.fix, HasSubstr("clusterqueues in cluster gke-a"));
  r.reachable = false;
  r.error = "probe timed out after 15s";
  EXPECT_EQ(cluster_check(c, r).status, "fail");
}

}  // namespace
}  // namespace falcon
