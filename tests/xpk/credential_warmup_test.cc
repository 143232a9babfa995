// Credential warm-up (xpk/credential_warmup.h): gcloud get-credentials per cluster, in
// parallel, each into a private kubeconfig that becomes the cluster's warmed one on success.
#include "xpk/credential_warmup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "support/fake_clock.h"
#include "support/fake_command_runner.h"
#include "support/temp_dir.h"
#include "xpk/xpk_cli.h"

namespace falcon::xpk {
namespace {

using falcon::testing::FakeClock;
using falcon::testing::FakeCommandRunner;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

ClusterConfig cluster(const std::string& name, const std::string& id) {
  ClusterConfig c;
  c.name = name;
  c.project = "primatrix";
  c.zone = "us-central2-b";
  // A regional cluster: warm-up asks gcloud by location, not by the zone xpk gets.
  c.location = "us-central2";
  c.cluster_id = id;
  return c;
}

// A gcloud stand-in: writes `content` to $KUBECONFIG, as get-credentials does, then answers.
FakeCommandRunner::Response writes_kubeconfig(std::string content, int exit_code = 0) {
  FakeCommandRunner::Response r;
  r.handler = [content, exit_code](const CommandSpec& spec) {
    std::ofstream(spec.env.at("KUBECONFIG")) << content;
    CommandResult result;
    result.exit_code = exit_code;
    if (exit_code != 0) result.stderr_text = "ERROR: (gcloud.container.clusters.get-credentials)\n";
    return result;
  };
  return r;
}

class WarmupTest : public ::testing::Test {
 protected:
  WarmupTest() {
    settings_.state_dir = (tmp_.path() / "state").string();
    settings_.runtime_dir = (tmp_.path() / "run").string();
    runner_->attach_clock(clock_);
  }
  std::vector<WarmupResult> warm_up(const std::vector<ClusterConfig>& clusters, int parallel) {
    const XpkCli xpk(runner_, settings_);
    return warm_up_credentials(xpk, *clock_, clusters, parallel);
  }
  std::filesystem::path warmed(const std::string& name) {
    return kubeconfig_path(settings_.state_dir, name);
  }

  falcon::testing::TempDir tmp_;
  XpkSettings settings_;
  std::shared_ptr<FakeCommandRunner> runner_ = std::make_shared<FakeCommandRunner>();
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
};

TEST_F(WarmupTest, FetchesEachClustersCredentialsInParallel) {
  settings_.gcloud_binary = "/opt/gcloud";
  settings_.env = {{"CLOUDSDK_CORE_DISABLE_PROMPTS", "1"}};
  runner_->on({"get-credentials", "tpu-v4-cluster"}, writes_kubeconfig("tpu\n"));
  runner_->on({"get-credentials", "gpu-cluster"},
              FakeCommandRunner::fails(1,
                                       "ERROR: (gcloud.container.clusters.get-credentials) "
                                       "ResponseError: code=404, message=Not found\n"));
  runner_->hold_until_concurrent(2, std::chrono::seconds(10));
  const auto results =
      warm_up({cluster("tpu-v4-prod", "tpu-v4-cluster"), cluster("gpu-a100", "gpu-cluster")}, 4);
  EXPECT_EQ(runner_->max_in_flight(), 2);  // in parallel

  ASSERT_THAT(results, SizeIs(2));
  EXPECT_EQ(results[0].cluster, "tpu-v4-prod");
  EXPECT_TRUE(results[0].ok);
  EXPECT_EQ(results[0].error, std::nullopt);
  EXPECT_EQ(results[1].cluster, "gpu-a100");
  EXPECT_FALSE(results[1].ok);
  EXPECT_THAT(results[1].error.value_or(""), HasSubstr("cluster 'gpu-a100'"));
  EXPECT_THAT(results[1].error.value_or(""), HasSubstr("code=404"));

  const auto tpu_call = runner_->calls_matching({"tpu-v4-cluster"}).at(0);
  EXPECT_THAT(tpu_call.argv,
              ElementsAre("/opt/gcloud", "container", "clusters", "get-credentials",
                          "tpu-v4-cluster", "--project=primatrix", "--location=us-central2"));
  EXPECT_EQ(tpu_call.env.at("CLOUDSDK_CORE_DISABLE_PROMPTS"), "1");
  // gcloud wrote a private file of its own, which then became the cluster's warmed kubeconfig.
  const std::filesystem::path written = tpu_call.env.at("KUBECONFIG");
  EXPECT_EQ(written.parent_path().parent_path(), tmp_.path() / "run");
  EXPECT_EQ(falcon::testing::read_file(warmed("tpu-v4-prod")), "tpu\n");
  EXPECT_FALSE(std::filesystem::exists(written.parent_path()));
  EXPECT_FALSE(std::filesystem::exists(warmed("gpu-a100")));
}

TEST_F(WarmupTest, AFailedFetchKeepsThePreviousWarmedKubeconfig) {
  const auto c = cluster("tpu-v4-prod", "tpu-v4-cluster");
  runner_->on({"get-credentials"}, writes_kubeconfig("first\n"));
  ASSERT_TRUE(warm_up({c}, 1).at(0).ok);
  // gcloud fails after truncating its file: the warmed kubeconfig is not touched.
  runner_->on({"get-credentials"}, writes_kubeconfig("", 1));
  EXPECT_FALSE(warm_up({c}, 1).at(0).ok);
  EXPECT_EQ(falcon::testing::read_file(warmed("tpu-v4-prod")), "first\n");
  runner_->on({"get-credentials"}, writes_kubeconfig("second\n"));
  EXPECT_TRUE(warm_up({c}, 1).at(0).ok);
  EXPECT_EQ(falcon::testing::read_file(warmed("tpu-v4-prod")), "second\n");
  // Only the warmed file is left beside it (the copy made for the rename is gone).
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(warmed("tpu-v4-prod").parent_path())) {
    names.push_back(e.path().filename().string());
  }
  EXPECT_THAT(names, ElementsAre("config"));
}

TEST_F(WarmupTest, ReportsElapsedTimeAndAMissingGcloud) {
  const auto c = cluster("tpu-v4-prod", "tpu-v4-cluster");
  runner_->on({"get-credentials"}, FakeCommandRunner::takes(std::chrono::milliseconds(2500)));
  auto results = warm_up({c}, 1);
  ASSERT_THAT(results, SizeIs(1));
  EXPECT_TRUE(results[0].ok);
  EXPECT_EQ(results[0].elapsed, std::chrono::milliseconds(2500));

  runner_->on({"get-credentials"}, FakeCommandRunner::cannot_start("not found in PATH (/usr/bin)"));
  results = warm_up({c}, 1);
  EXPECT_FALSE(results[0].ok);
  EXPECT_THAT(results[0].error.value_or(""), HasSubstr("not found in PATH"));
  EXPECT_THAT(warm_up({}, 4), IsEmpty());
}

}  // namespace
}  // namespace falcon::xpk
