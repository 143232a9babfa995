// The xpk layer through the real PosixCommandRunner, against scripted fake `xpk` and `gcloud`
// executables written into a TempDir: parallel probes, private kubeconfigs, timeouts that
// kill the whole process tree, prompts on a closed stdin, missing binaries.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <thread>

#include "falcon/errors.h"
#include "falcon/prober.h"
#include "falcon/registry.h"
#include "falcon/selector.h"
#include "falcon/workload_manager.h"
#include "support/temp_dir.h"
#include "xpk/credential_warmup.h"
#include "xpk/xpk_cli.h"

namespace falcon {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::SizeIs;

// Sleeps FAKE_XPK_DELAY seconds, logs "<verb> <cluster> <KUBECONFIG>" to FAKE_XPK_LOG, writes
// the cluster into its KUBECONFIG and reads it back after the delay (as xpk's get-credentials
// step rewrites the current context), then behaves like xpk v1.13.1. With FAKE_XPK_BARRIER=<dir>
// it first waits until FAKE_XPK_PARALLEL calls (itself included) have started: calls made one
// after another never get past it (the caller's timeout ends them).
constexpr const char* kFakeXpk = R"xpk(#!/bin/sh
verb="$2"
for a in "$@"; do
  case "$a" in
    --cluster=*) cluster="${a#--cluster=}" ;;
    --workload=*) workload="${a#--workload=}" ;;
  esac
done
if [ -n "$FAKE_XPK_BARRIER" ]; then
  : > "$FAKE_XPK_BARRIER/started.$$"
  while [ "$(ls "$FAKE_XPK_BARRIER" | wc -l)" -lt "$FAKE_XPK_PARALLEL" ]; do sleep 0.01; done
fi
echo "$verb $cluster $KUBECONFIG" >> "$FAKE_XPK_LOG"
echo "[XPK] Starting xpk v1.13.1"
echo "current-context: $cluster" > "$KUBECONFIG"
sleep "${FAKE_XPK_DELAY:-0}"
context=$(cat "$KUBECONFIG")
if [ "$context" != "current-context: $cluster" ]; then
  echo "kubeconfig was switched under us: $context" >&2
  exit 1
fi
case "$verb" in
  list)
    echo "[XPK] Workload List Output:"
    echo "Jobset Name   Created Time           Priority   TPU/GPU VMs Needed   TPU/GPU VMs Running/Ran   TPU/GPU VMs Done   Status          Status Message                                 Status Time         "
    echo "queued-1      2026-06-01T10:00:00Z   medium     4                    <none>                    <none>             QuotaReserved   Quota reserved in ClusterQueue cluster-queue   2026-06-01T10:00:02Z"
    echo "running-1     2026-06-01T10:00:00Z   medium     4                    4                         <none>             Admitted        The workload is admitted                       2026-06-01T10:00:02Z"
    echo "[XPK] Exiting XPK cleanly"
    ;;
  create)
    if [ -n "$FAKE_XPK_EXISTS" ]; then
      printf '[XPK] %s already exists, do you want to overwrite it? (y/N): ' "$workload"
      if ! read answer; then
        echo 'Traceback (most recent call last):' >&2
        echo 'EOFError: EOF when reading a line' >&2
        exit 1
      fi
    fi
    echo "jobset.jobset.x-k8s.io/$workload created"
    echo "[XPK] Exiting XPK cleanly"
    ;;
  delete)
    echo "[XPK] Task: \`Delete Workload\` terminated with code \`1\`"
    echo "Error from server (NotFound): jobsets.jobset.x-k8s.io \"$workload\" not found" >&2
    echo "[XPK] XPK failed, error code 1"
    exit 1
    ;;
esac
)xpk";

// Starts a grandchild that ignores SIGTERM, records its pid, and hangs.
constexpr const char* kHangingXpk = R"xpk(#!/bin/sh
(trap '' TERM; exec sleep 3600) &
echo $! > "$FAKE_XPK_GRANDCHILD"
echo "[XPK] Starting xpk v1.13.1"
wait
)xpk";

// A fake gcloud for warm-up: writes a kubeconfig naming the cluster.
constexpr const char* kFakeGcloud = R"xpk(#!/bin/sh
echo "Fetching cluster endpoint and auth data." >&2
echo "clusters: [$4] $5 $6" > "$KUBECONFIG"
echo "kubeconfig entry generated for $4." >&2
)xpk";

bool process_alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

bool wait_until_gone(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!process_alive(pid)) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return false;
}

std::vector<std::string> lines_of(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class FakeXpkTest : public ::testing::Test {
 protected:
  FakeXpkTest() {
    settings_.binary = dir_.write("bin/xpk", kFakeXpk, true).string();
    settings_.gcloud_binary = dir_.write("bin/gcloud", kFakeGcloud, true).string();
    settings_.state_dir = (dir_.path() / "state").string();
    settings_.runtime_dir = (dir_.path() / "run").string();
    settings_.env = {{"FAKE_XPK_LOG", log_path().string()}};
  }
  std::filesystem::path log_path() const { return dir_.path() / "xpk.log"; }

  // n clusters offering "tpu-v4-64", each cluster_id c-<name>.
  void load_registry(int n, int probe_timeout_s = 15) {
    std::string yaml = "clusters:\n";
    for (int i = 0; i < n; ++i) {
      const std::string name = "cluster-" + std::to_string(i);
      yaml += "  " + name + ":\n    provider: gke\n    project: p\n    zone: us-central2-b\n" +
              "    cluster_id: c-" + name +
              "\n    accelerator_types:\n      - {type: tpu-v4-64, device_class: tpu, priority: " +
              std::to_string(i + 1) + "}\n    probe_timeout_s: " + std::to_string(probe_timeout_s) +
              "\n";
    }
    registry_.load(dir_.write("repos.yaml", yaml).string());
  }

  testing::TempDir dir_;
  XpkSettings settings_;
  ClusterRegistry registry_;
  std::shared_ptr<CommandRunner> runner_ = make_posix_command_runner();
  std::shared_ptr<Clock> clock_ = make_system_clock();
};

TEST_F(FakeXpkTest, ProbesASlowClusterThroughARealProcess) {
  settings_.env["FAKE_XPK_DELAY"] = "0.1";
  load_registry(1);
  ClusterProber prober(runner_, settings_, clock_);
  const auto r = prober.probe(registry_.get_cluster("cluster-0"));
  EXPECT_TRUE(r.reachable) << r.error.value_or("");
  EXPECT_EQ(r.queue_depth, 1);
  EXPECT_EQ(r.running_count, 1);
}

// Every probe's xpk is running at the same time: each waits at a barrier for all the others, so
// probes run one after another would each time out. (bench/selection_bench measures the time.)
TEST_F(FakeXpkTest, ParallelProbesAllRunAtTheSameTime) {
  constexpr int kClusters = 4;
  const auto barrier = dir_.path() / "barrier";
  std::filesystem::create_directories(barrier);
  settings_.env["FAKE_XPK_BARRIER"] = barrier.string();
  settings_.env["FAKE_XPK_PARALLEL"] = std::to_string(kClusters);
  load_registry(kClusters);
  ClusterProber prober(runner_, settings_, clock_);
  ClusterSelector selector(registry_, prober, SelectionSettings{}, clock_);

  const auto selection = selector.select("tpu-v4-64");

  EXPECT_EQ(selection.selected_cluster, "cluster-0");
  ASSERT_THAT(selection.probe_results, SizeIs(kClusters));
  for (const auto& r : selection.probe_results) EXPECT_TRUE(r.reachable) << r.error.value_or("");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(barrier),
                          std::filesystem::directory_iterator()),
            kClusters);
}

TEST_F(FakeXpkTest, EachClustersCallsSeeTheirOwnKubeconfig) {
  settings_.env["FAKE_XPK_DELAY"] = "0.2";
  load_registry(3);
  ClusterProber prober(runner_, settings_, clock_);
  ClusterSelector selector(registry_, prober, SelectionSettings{}, clock_);
  const auto selection = selector.select("tpu-v4-64");
  // The fakes ran at the same time and each found its own context after the delay.
  for (const auto& r : selection.probe_results) EXPECT_TRUE(r.reachable) << r.error.value_or("");

  const auto log = lines_of(log_path());
  ASSERT_THAT(log, SizeIs(3));
  std::set<std::string> kubeconfigs;
  for (const auto& line : log) {
    std::istringstream in(line);
    std::string verb, cluster_id, kubeconfig;
    in >> verb >> cluster_id >> kubeconfig;
    const std::string name = cluster_id.substr(2);  // c-<name>
    // A private kubeconfig of that call, in the runtime directory.
    EXPECT_EQ(std::filesystem::path(kubeconfig).parent_path().parent_path(), dir_.path() / "run");
    kubeconfigs.insert(kubeconfig);
  }
  EXPECT_THAT(kubeconfigs, SizeIs(3));
}

TEST_F(FakeXpkTest, AProbeTimeoutKillsTheFakeXpkAndItsGrandchild) {
  settings_.binary = dir_.write("bin/hanging-xpk", kHangingXpk, true).string();
  const auto pid_file = dir_.path() / "grandchild.pid";
  settings_.env["FAKE_XPK_GRANDCHILD"] = pid_file.string();
  load_registry(1, /*probe_timeout_s=*/1);
  ClusterProber prober(runner_, settings_, clock_);

  // The grandchild holds the output pipes and outlives any test timeout: the probe returns only
  // because the timeout ends the whole process group instead of waiting for the pipes to close.
  const auto r = prober.probe(registry_.get_cluster("cluster-0"));
  EXPECT_FALSE(r.reachable);
  EXPECT_EQ(r.error, "probe timed out after 1s");

  const auto lines = lines_of(pid_file);
  ASSERT_THAT(lines, SizeIs(1));
  const pid_t grandchild = static_cast<pid_t>(std::stol(lines[0]));
  EXPECT_TRUE(wait_until_gone(grandchild)) << "grandchild " << grandchild << " survived";
}

TEST_F(FakeXpkTest, AnOverwritePromptFailsFastBecauseStdinIsClosed) {
  settings_.env["FAKE_XPK_EXISTS"] = "1";
  settings_.command_timeout_s = 60;
  load_registry(1);
  XpkWorkloadManager manager(runner_, settings_, clock_);
  WorkloadSpec spec;
  spec.name = "dup";
  spec.docker_image = "img";
  spec.command = {"true"};
  spec.accelerator_type = "tpu-v4-64";
  // Had the prompt waited for an answer, the command would have timed out after 60 s instead of
  // exiting 1 with the EOFError of a closed stdin.
  try {
    manager.submit(registry_.get_cluster("cluster-0"), spec);
    FAIL() << "expected WorkloadSubmitError";
  } catch (const WorkloadSubmitError& e) {
    EXPECT_EQ(e.exit_code(), 1);
    EXPECT_THAT(e.what(), ::testing::StartsWith("workload 'dup' already exists on cluster"));
    EXPECT_THAT(e.stderr_text(), HasSubstr("dup already exists, do you want to overwrite it?"));
  }
}

TEST_F(FakeXpkTest, SubmitThenCancelAMissingWorkloadThroughRealProcesses) {
  load_registry(1);
  XpkWorkloadManager manager(runner_, settings_, clock_);
  const auto cluster = registry_.get_cluster("cluster-0");
  WorkloadSpec spec;
  spec.name = "real-one";
  spec.docker_image = "img";
  spec.command = {"python3", "-c", "print('hi')"};
  spec.accelerator_type = "tpu-v4-64";
  const auto handle = manager.submit(cluster, spec);
  EXPECT_EQ(handle.workload_name, "real-one");
  EXPECT_TRUE(manager.find_submission("cluster-0", "real-one").has_value());
  EXPECT_THROW(manager.cancel(cluster, handle), WorkloadNotFoundError);
}

TEST_F(FakeXpkTest, AMissingXpkBinaryIsNamedInProbeAndSubmitErrors) {
  settings_.binary = (dir_.path() / "no" / "xpk").string();
  load_registry(1);
  const auto cluster = registry_.get_cluster("cluster-0");
  const auto r = ClusterProber(runner_, settings_, clock_).probe(cluster);
  EXPECT_FALSE(r.reachable);
  EXPECT_THAT(r.error.value_or(""), HasSubstr(settings_.binary));

  XpkWorkloadManager manager(runner_, settings_, clock_);
  WorkloadSpec spec;
  spec.name = "w";
  spec.docker_image = "img";
  spec.command = {"true"};
  spec.accelerator_type = "tpu-v4-64";
  try {
    manager.submit(cluster, spec);
    FAIL() << "expected WorkloadSubmitError";
  } catch (const WorkloadSubmitError& e) {
    EXPECT_THAT(e.what(), HasSubstr(settings_.binary));
  }
  settings_.binary = "falcon-test-no-such-xpk";
  EXPECT_THROW(XpkWorkloadManager(runner_, settings_, clock_).list_workloads(cluster, std::nullopt),
               CommandStartError);
}

TEST_F(FakeXpkTest, WarmUpWritesEachClustersOwnKubeconfig) {
  load_registry(3);
  const xpk::XpkCli xpk(runner_, settings_);
  const auto results = xpk::warm_up_credentials(xpk, *clock_, registry_.list_clusters(), 2);
  ASSERT_THAT(results, SizeIs(3));
  for (const auto& r : results) {
    EXPECT_TRUE(r.ok) << r.error.value_or("");
    const auto kubeconfig = dir_.path() / "state" / "kube" / r.cluster / "config";
    EXPECT_EQ(testing::read_file(kubeconfig),
              "clusters: [c-" + r.cluster + "] --project=p --location=us-central2-b\n");
  }
}

}  // namespace
}  // namespace falcon
