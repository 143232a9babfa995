// ClusterProber: the spec's acceptance rows (测试验收标准 2. ClusterProber) and the error paths.
#include "falcon/prober.h"

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "falcon/errors.h"
#include "support/fake_clock.h"
#include "support/fake_command_runner.h"
#include "support/temp_dir.h"
#include "util/time_format.h"
#include "xpk/xpk_cli.h"
#include "xpk/xpk_outputs.h"

namespace falcon {
namespace {

using ::testing::ElementsAre;
using testing::FakeClock;
using testing::FakeCommandRunner;
using ::testing::HasSubstr;

ClusterConfig tpu_cluster() {
  ClusterConfig c;
  c.name = "tpu-v4-prod";
  c.provider = "gke";
  c.project = "primatrix-tpu";
  c.zone = "us-central2-b";
  c.cluster_id = "tpu-v4-cluster";
  c.accelerator_slots = {{"tpu-v4-64", DeviceClass::kTpu, 1}};
  c.probe_timeout_s = 15;
  return c;
}

class ProberTest : public ::testing::Test {
 protected:
  ProberTest() {
    settings_.state_dir = (tmp_.path() / "state").string();
    settings_.runtime_dir = (tmp_.path() / "run").string();
    runner_->attach_clock(clock_);
  }
  ClusterProber prober() { return ClusterProber(runner_, settings_, clock_); }

  testing::TempDir tmp_;
  XpkSettings settings_;
  std::shared_ptr<FakeCommandRunner> runner_ = std::make_shared<FakeCommandRunner>();
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
};

// 正常探测: runs `xpk workload list` and counts QUEUED / RUNNING.
TEST_F(ProberTest, NormalProbeRunsWorkloadListAndCountsQueuedAndRunning) {
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  const auto result = prober().probe(tpu_cluster());

  EXPECT_EQ(result.cluster, "tpu-v4-prod");
  EXPECT_TRUE(result.reachable);
  EXPECT_EQ(result.queue_depth, 3);
  EXPECT_EQ(result.running_count, 3);
  EXPECT_EQ(result.error, std::nullopt);

  const auto calls = runner_->calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_THAT(calls[0].argv, ElementsAre("xpk", "workload", "list", "--cluster=tpu-v4-cluster",
                                         "--project=primatrix-tpu", "--zone=us-central2-b"));
  EXPECT_EQ(calls[0].timeout, std::chrono::seconds(15));
  // A kubeconfig of this call's own (private_kubeconfig.h), gone once the probe returned.
  const std::filesystem::path kubeconfig = calls[0].env.at("KUBECONFIG");
  EXPECT_EQ(kubeconfig.parent_path().parent_path(), tmp_.path() / "run");
  EXPECT_FALSE(std::filesystem::exists(kubeconfig.parent_path()));
}

TEST_F(ProberTest, CountsTheOldTabwriterFormatToo) {
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV17));
  const auto result = prober().probe(tpu_cluster());
  EXPECT_TRUE(result.reachable);
  EXPECT_EQ(result.queue_depth, 1);
  EXPECT_EQ(result.running_count, 1);
}

TEST_F(ProberTest, PassesXpkExtraArgsAndEnvironment) {
  settings_.binary = "/opt/xpk";
  settings_.extra_args = {"--skip-validation"};
  settings_.env = {{"TELEMETRY_ENABLED", "false"}};
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListHeaderOnly));
  prober().probe(tpu_cluster());
  const auto calls = runner_->calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].argv.front(), "/opt/xpk");
  EXPECT_EQ(calls[0].argv.back(), "--skip-validation");
  EXPECT_EQ(calls[0].env.at("TELEMETRY_ENABLED"), "false");
}

// 探测超时: no answer within probe_timeout_s -> reachable=false, error says it timed out.
TEST_F(ProberTest, ProbeTimeoutGivesUnreachableWithTimeoutError) {
  runner_->on({"workload", "list"},
              FakeCommandRunner::takes(std::chrono::seconds(20), testing::kListV113));
  const auto result = prober().probe(tpu_cluster());
  EXPECT_FALSE(result.reachable);
  EXPECT_EQ(result.error, "probe timed out after 15s");
  EXPECT_EQ(result.queue_depth, std::nullopt);
  EXPECT_EQ(result.running_count, std::nullopt);
  // The deadline is the cluster's own: a 10 s answer is within a 15 s timeout.
  runner_->on({"workload", "list"},
              FakeCommandRunner::takes(std::chrono::seconds(10), testing::kListV113));
  EXPECT_TRUE(prober().probe(tpu_cluster()).reachable);
}

// xpk 命令失败: non-zero exit -> reachable=false, error contains stderr.
TEST_F(ProberTest, FailedCommandGivesUnreachableWithStderr) {
  runner_->on({"workload", "list"},
              FakeCommandRunner::fails(1,
                                       "ERROR: (gcloud.container.clusters.get-credentials) "
                                       "ResponseError: code=403, message=Required "
                                       "\"container.clusters.get\" permission(s)\n",
                                       testing::kListFailureStdout));
  const auto result = prober().probe(tpu_cluster());
  EXPECT_FALSE(result.reachable);
  ASSERT_TRUE(result.error.has_value());
  EXPECT_THAT(*result.error, HasSubstr("cluster 'tpu-v4-prod'"));
  EXPECT_THAT(*result.error, HasSubstr("exit code 1"));
  EXPECT_THAT(*result.error, HasSubstr("ResponseError: code=403"));
  EXPECT_THAT(*result.error, HasSubstr("[XPK] XPK failed, error code 1"));
  EXPECT_EQ(result.queue_depth, std::nullopt);
}

TEST_F(ProberTest, KilledCommandGivesUnreachable) {
  runner_->on({"workload", "list"}, FakeCommandRunner::killed_by(SIGKILL));
  const auto result = prober().probe(tpu_cluster());
  EXPECT_FALSE(result.reachable);
  EXPECT_THAT(result.error.value_or(""), HasSubstr("killed by signal 9"));
}

// 空集群: no workloads -> 0 and 0, reachable. Both spellings of "nothing".
TEST_F(ProberTest, EmptyClusterGivesZeroAndZero) {
  for (const char* out : {testing::kListHeaderOnly, testing::kListV17Empty}) {
    runner_->on({"workload", "list"}, FakeCommandRunner::ok(out));
    const auto result = prober().probe(tpu_cluster());
    EXPECT_TRUE(result.reachable) << out;
    EXPECT_EQ(result.queue_depth, 0);
    EXPECT_EQ(result.running_count, 0);
    EXPECT_EQ(result.error, std::nullopt);
  }
}

TEST_F(ProberTest, ExitZeroWithoutAListIsUnreachableNotEmpty) {
  runner_->on({"workload", "list"}, FakeCommandRunner::ok("[XPK] Exiting XPK cleanly\n"));
  const auto result = prober().probe(tpu_cluster());
  EXPECT_FALSE(result.reachable);
  EXPECT_THAT(result.error.value_or(""), HasSubstr("printed no workload list"));
}

TEST_F(ProberTest, MissingBinaryIsUnreachableNamingIt) {
  settings_.binary = "xpk-not-installed";
  runner_->on({"workload"}, FakeCommandRunner::cannot_start("not found in PATH (/usr/bin)"));
  const auto result = prober().probe(tpu_cluster());
  EXPECT_FALSE(result.reachable);
  EXPECT_THAT(result.error.value_or(""), HasSubstr("xpk-not-installed"));
}

TEST_F(ProberTest, UnusableStateDirectoryIsUnreachableNotAThrow) {
  tmp_.write("state", "a file where the state directory should be");
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListHeaderOnly));
  const auto result = prober().probe(tpu_cluster());
  EXPECT_FALSE(result.reachable);
  EXPECT_THAT(result.error.value_or(""), HasSubstr("is not a directory"));
  EXPECT_TRUE(runner_->calls().empty());
}

// probed_at 时间: ISO 8601 UTC, the time the probe finished.
TEST_F(ProberTest, ProbedAtIsIso8601UtcWhenTheProbeFinished) {
  runner_->on({"workload", "list"},
              FakeCommandRunner::takes(std::chrono::milliseconds(1500), testing::kListV113));
  const auto result = prober().probe(tpu_cluster());
  EXPECT_EQ(result.probed_at, "2026-04-13T08:00:01.500Z");
  EXPECT_TRUE(parse_rfc3339(result.probed_at).has_value());
  const auto timed_out = prober().probe([] {
    auto c = tpu_cluster();
    c.probe_timeout_s = 1;
    return c;
  }());
  EXPECT_FALSE(timed_out.reachable);
  EXPECT_EQ(timed_out.probed_at, "2026-04-13T08:00:02.500Z");
}

// A kube backend that answers from a script and records what it was asked.
class ScriptedKube final : public ProbeSource {
 public:
  ClusterProbeResult probe(const ClusterConfig& cluster) const override {
    ++calls;
    ClusterProbeResult r;
    r.cluster = cluster.name;
    r.reachable = true;
    r.queue_depth = 7;
    r.running_count = 2;
    return r;
  }
  mutable int calls = 0;
};

TEST_F(ProberTest, BackendIsTheClustersOwnElseTheDefault) {
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  auto kube = std::make_shared<ScriptedKube>();
  const auto xpk = std::make_shared<const xpk::XpkCli>(runner_, settings_);
  const ClusterProber by_default(xpk, kube, ProbeBackend::kXpk, clock_);
  const ClusterProber kube_default(xpk, kube, ProbeBackend::kKube, clock_);

  ClusterConfig plain = tpu_cluster();
  ClusterConfig on_kube = tpu_cluster();
  on_kube.probe_backend = ProbeBackend::kKube;
  ClusterConfig on_xpk = tpu_cluster();
  on_xpk.probe_backend = ProbeBackend::kXpk;

  EXPECT_EQ(by_default.backend(plain), ProbeBackend::kXpk);
  EXPECT_EQ(by_default.backend(on_kube), ProbeBackend::kKube);
  EXPECT_EQ(kube_default.backend(plain), ProbeBackend::kKube);
  EXPECT_EQ(kube_default.backend(on_xpk), ProbeBackend::kXpk);
  EXPECT_STREQ(to_string(kube_default.backend(plain)), "kube");

  EXPECT_EQ(by_default.probe(plain).queue_depth, 3);  // xpk's table
  EXPECT_EQ(kube->calls, 0);
  const auto r = by_default.probe(on_kube);
  EXPECT_EQ(kube->calls, 1);
  EXPECT_EQ(r.queue_depth, 7);
  EXPECT_FALSE(r.probed_at.empty());  // set by the prober for every backend
  EXPECT_EQ(kube_default.probe(on_xpk).running_count, 3);
  EXPECT_EQ(runner_->calls().size(), 2u);
}

TEST_F(ProberTest, KubeWithoutAKubeBackendIsUnreachableSayingSo) {
  const ClusterProber prober(std::make_shared<const xpk::XpkCli>(runner_, settings_), nullptr,
                             ProbeBackend::kKube, clock_);
  const auto r = prober.probe(tpu_cluster());
  EXPECT_FALSE(r.reachable);
  EXPECT_THAT(r.error.value_or(""), HasSubstr("no kube backend"));
  EXPECT_TRUE(runner_->calls().empty());
}

}  // namespace
}  // namespace falcon
