// ClusterFabric against the local fleet: the spec's integration rows, through real fleet-xpk
// subprocesses and real HTTP to the fleet's Logging and Storage endpoints.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "falcon/errors.h"
#include "falcon/fabric.h"
#include "gcp_server/gcp_server.h"
#include "support/local_fleet.h"

namespace falcon {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

WorkloadSpec spec_named(const std::string& name, const std::string& accelerator = "tpu-v4-64") {
  WorkloadSpec spec;
  spec.name = name;
  spec.docker_image = "gcr.io/falcon/bench:1";
  spec.command = {"python3", "train.py", "--steps", "20"};
  spec.accelerator_type = accelerator;
  return spec;
}

std::vector<std::string> read_all(LogLines lines) {
  std::vector<std::string> out;
  for (const std::string& line : lines) out.push_back(line);
  return out;
}

class FabricFleetTest : public ::testing::Test {
 protected:
  testing::LocalFleet fleet_;
};

// Spec acceptance: ClusterFabric / 初始化
TEST_F(FabricFleetTest, InitialisesEveryModuleFromTheReposYamlPath) {
  ClusterFabric fabric(fleet_.repos_path());  // the real POSIX runner, libcurl, system clock
  const auto clusters = fabric.list_clusters();
  ASSERT_THAT(clusters, SizeIs(4));
  EXPECT_EQ(clusters[3].cluster_id, "gpu-cluster-x");
  EXPECT_EQ(fabric.config()->source_path, fleet_.repos_path());
  // Registry, prober, workload manager and log retriever each answer.
  EXPECT_EQ(fabric.get_cluster("tpu-b").zone, "us-central2-b");
  EXPECT_TRUE(fabric.get_cluster_status("tpu-b").reachable);
  const auto workloads = fabric.list_workloads("tpu-a", std::nullopt);
  EXPECT_THAT(workloads, SizeIs(4));
  EXPECT_TRUE(
      read_all(fabric.stream_pod_log(fabric.handle_for("tpu-b", "nothing-here"), 0, {})).empty());
}

TEST_F(FabricFleetTest, ConstructionFailsFastOnABadConfiguration) {
  EXPECT_THROW(ClusterFabric("/nonexistent/repos.yaml"), ClusterConfigError);
}

// Spec acceptance: ClusterFabric / 端到端提交
TEST_F(FabricFleetTest, SelectSubmitAndPollStatusEndToEnd) {
  ClusterFabric fabric(fleet_.repos_path());
  const ClusterSelection selection = fabric.select_cluster("tpu-v4-64");
  EXPECT_EQ(selection.selected_cluster, "tpu-b");
  EXPECT_THAT(selection.candidates, ElementsAre("tpu-a", "tpu-down", "tpu-b"));
  ASSERT_THAT(selection.probe_results, SizeIs(3));
  EXPECT_EQ(selection.probe_results[0].queue_depth, 3);  // full: 3 > max 2
  EXPECT_FALSE(selection.probe_results[1].reachable);
  EXPECT_EQ(selection.reason, "selected tpu-b: reachable, queue_depth=0 <= max=5");

  const WorkloadHandle handle =
      fabric.submit_workload(selection.selected_cluster, spec_named("e2e-train"));
  EXPECT_EQ(handle.cluster, "tpu-b");
  EXPECT_EQ(handle.namespace_, "default");
  EXPECT_FALSE(handle.submitted_at.empty());

  WorkloadStatus status = fabric.get_workload_status(handle);
  EXPECT_EQ(status.state, "RUNNING");
  EXPECT_TRUE(status.start_time.has_value());
  EXPECT_FALSE(status.end_time.has_value());

  fleet_.advance(std::chrono::seconds(101));
  status = fabric.get_workload_status(handle);
  EXPECT_EQ(status.state, "COMPLETED");
  EXPECT_TRUE(status.end_time.has_value());
  EXPECT_EQ(status.exit_code, 0);

  // Then the business layer's data collection: rank 0's log, and the archive.
  const auto lines = read_all(fabric.stream_pod_log(handle, 0, {}));
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(lines.front(), HasSubstr("XPK Start"));
  EXPECT_EQ(lines.back(), "EXIT_CODE=0");
  LogFilter tail;
  tail.tail_lines = 2;
  EXPECT_THAT(read_all(fabric.stream_pod_log(handle, 0, tail)), SizeIs(2));

  const LogExportResult exported =
      fabric.export_pod_logs(handle, {}, "gs://falcon-logs/sessions/s-1/logs/");
  EXPECT_EQ(exported.workload_name, "e2e-train");
  EXPECT_EQ(exported.cluster, "tpu-b");
  EXPECT_THAT(exported.exported_ranks, ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(exported.gcs_uris.at(2), "gs://falcon-logs/sessions/s-1/logs/rank-2.log");

  EXPECT_TRUE(fabric.cancel_workload(handle));
  EXPECT_THROW(fabric.get_workload_status(handle), WorkloadNotFoundError);
}

// The facade's log reads share the read quota through <state_dir>/quota: one bucket file per
// project, private to the user, which every falcon process of the same state directory uses.
TEST_F(FabricFleetTest, LogReadsShareTheQuotaThroughTheStateDirectory) {
  const std::filesystem::path quota = std::filesystem::path(fleet_.state_dir()) / "quota";
  ClusterFabric fabric(fleet_.repos_path());
  const WorkloadHandle handle = fabric.submit_workload("tpu-b", spec_named("quota-reader"));
  EXPECT_FALSE(std::filesystem::exists(quota / "logging-reads-proj-tpu"));
  fleet_.advance(std::chrono::seconds(101));
  ASSERT_FALSE(read_all(fabric.stream_pod_log(handle, 0, {})).empty());
  EXPECT_TRUE(std::filesystem::is_regular_file(quota / "logging-reads-proj-tpu"));
  EXPECT_EQ(std::filesystem::status(quota).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_all);
  EXPECT_EQ(std::filesystem::status(quota / "logging-reads-proj-tpu").permissions() &
                std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

// Spec acceptance: ClusterFabric / 集群名称解析
TEST_F(FabricFleetTest, ClusterNamesResolveThroughTheRegistry) {
  ClusterFabric fabric(fleet_.repos_path());
  // Registry name gpu-x is GKE cluster gpu-cluster-x in project proj-gpu.
  const WorkloadHandle handle =
      fabric.submit_workload("gpu-x", spec_named("gpu-bench", "a100-40gb-8"));
  EXPECT_EQ(handle.cluster, "gpu-x");
  bool found = false;
  for (const auto& row : fleet_.service().simulator().list("gpu-x").rows) {
    found = found || row.name == "gpu-bench";
  }
  EXPECT_TRUE(found) << "the workload did not reach cluster gpu-cluster-x";
  for (const auto& row : fleet_.service().simulator().list("tpu-b").rows) {
    EXPECT_NE(row.name, "gpu-bench");
  }
  // xpk ran with a kubeconfig of its own in the runtime directory, removed after.
  EXPECT_TRUE(std::filesystem::is_empty(fleet_.runtime_dir()));
  // Calls by name find what falcon submitted.
  EXPECT_EQ(fabric.handle_for("gpu-x", "gpu-bench").submitted_at, handle.submitted_at);
}

// Spec acceptance: ClusterFabric / 不存在的集群 (the spec's KeyError is UnknownClusterError)
TEST_F(FabricFleetTest, UnknownClusterNamesRaiseUnknownClusterError) {
  ClusterFabric fabric(fleet_.repos_path());
  const WorkloadHandle ghost{"w", "no-such-cluster", "default", "2026-04-13T00:00:00.000Z"};
  EXPECT_THROW(fabric.submit_workload("no-such-cluster", spec_named("w")), UnknownClusterError);
  EXPECT_THROW(fabric.get_cluster_status("no-such-cluster"), UnknownClusterError);
  EXPECT_THROW(fabric.list_workloads("no-such-cluster", std::nullopt), UnknownClusterError);
  EXPECT_THROW(fabric.get_workload_status(ghost), UnknownClusterError);
  EXPECT_THROW(fabric.cancel_workload(ghost), UnknownClusterError);
  EXPECT_THROW(fabric.stream_pod_log(ghost, 0, {}), UnknownClusterError);
  EXPECT_THROW(fabric.export_pod_logs(ghost, {}, "gs://b/x"), UnknownClusterError);
  EXPECT_THROW(fabric.handle_for("no-such-cluster", "w"), UnknownClusterError);
  try {
    fabric.get_cluster("no-such-cluster");
    FAIL();
  } catch (const UnknownClusterError& e) {
    EXPECT_THAT(e.what(), HasSubstr("registered: tpu-a, tpu-down, tpu-b, gpu-x"));
  }
}

// Spec acceptance: ClusterFabric / 错误透传
TEST_F(FabricFleetTest, ErrorsFromInsidePassThroughUnchanged) {
  ClusterFabric fabric(fleet_.repos_path());
  // Selector: nothing offers this accelerator.
  try {
    fabric.select_cluster("tpu-v9-9999");
    FAIL();
  } catch (const NoAvailableClusterError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no cluster supports tpu-v9-9999"));
  }
  // Workload manager: xpk refuses a second workload of the same name (its prompt meets a
  // closed stdin), and the WorkloadSubmitError carries what xpk printed.
  fabric.submit_workload("tpu-b", spec_named("twice"));
  try {
    fabric.submit_workload("tpu-b", spec_named("twice"));
    FAIL();
  } catch (const WorkloadSubmitError& e) {
    EXPECT_EQ(e.workload(), "twice");
    EXPECT_FALSE(e.stderr_text().empty());
  }
  // Cancelling a workload the cluster does not have.
  EXPECT_THROW(fabric.cancel_workload(fabric.handle_for("tpu-b", "never-submitted")),
               WorkloadNotFoundError);
  // An unreachable cluster's list fails as an xpk command failure.
  EXPECT_THROW(fabric.list_workloads("tpu-down", std::nullopt), XpkCommandError);
  // Cloud Logging refusing the read.
  fleet_.service().gcp().faults().fail_next("logging.list", 403);
  try {
    read_all(fabric.stream_pod_log(fabric.handle_for("tpu-b", "twice"), 0, {}));
    FAIL();
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.http_status(), 403);
    EXPECT_EQ(e.status(), "PERMISSION_DENIED");
  }
}

TEST_F(FabricFleetTest, ReloadKeepsTheOldConfigurationWhenTheNewOneIsBroken) {
  ClusterFabric fabric(fleet_.repos_path());
  const std::string original = testing::read_file(fleet_.repos_path());
  {
    std::ofstream out(fleet_.repos_path(), std::ios::trunc);
    out << "clusters: [oops\n";
  }
  EXPECT_THROW(fabric.reload(), ClusterConfigError);
  EXPECT_THAT(fabric.list_clusters(), SizeIs(4));
  {
    std::ofstream out(fleet_.repos_path(), std::ios::trunc);
    out << original;
  }
  fabric.reload();
  EXPECT_THAT(fabric.list_clusters(), SizeIs(4));
}

}  // namespace
}  // namespace falcon
