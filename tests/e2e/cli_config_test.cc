// End to end: the falcon binary's config and cluster-list commands, global options and exit
// codes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/run_falcon.h"
#include "support/temp_dir.h"

namespace falcon {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_falcon;

const std::string kSample = std::string(FALCON_SOURCE_DIR) + "/examples/repos.yaml";

TEST(CliConfig, ValidateGoodFilePrintsOkAndExitsZero) {
  const auto r = run_falcon({"config", "validate", kSample});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "ok: 2 clusters\n");
}

TEST(CliConfig, ValidateUsesConfigFlagAndEnvironment) {
  auto r = run_falcon({"--config", kSample, "config", "validate"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  r = run_falcon({"config", "validate"}, {{"FALCON_CONFIG", kSample}});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "ok: 2 clusters\n");
}

TEST(CliConfig, ValidateBadFilePrintsEveryProblemOnStderrAndExitsTwo) {
  testing::TempDir dir;
  const auto path = dir.write("repos.yaml",
                              "clusters:\n  a:\n    zone: z\n    cluster_id: c\n"
                              "    accelerator_types:\n      - {type: x, device_class: fpga}\n"
                              "    max_queue_dept: 3\n")
                        .string();
  const auto r = run_falcon({"config", "validate", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.stdout_text, "");
  EXPECT_THAT(r.stderr_text, HasSubstr(path + ":2:3: clusters.a.project: missing"));
  EXPECT_THAT(r.stderr_text, HasSubstr("clusters.a.accelerator_types[0].device_class: 'fpga'"));
  EXPECT_THAT(r.stderr_text, HasSubstr("clusters.a.max_queue_dept: unknown key (did you mean "
                                       "'max_queue_depth'?)"));
  // One problem per line.
  EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 3);
}

TEST(CliConfig, ValidateMissingFileExitsTwo) {
  const auto r = run_falcon({"config", "validate", "/nonexistent/repos.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("/nonexistent/repos.yaml: cannot read the configuration"));
}

TEST(CliConfig, JsonErrorIsPrintedOnStdoutToo) {
  const auto r = run_falcon({"--json", "config", "validate", "/nonexistent/repos.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  const auto j = nlohmann::json::parse(r.stdout_text);
  EXPECT_EQ(j["error"]["type"], "ClusterConfigError");
  EXPECT_THAT(j["error"]["message"].get<std::string>(), HasSubstr("cannot read"));
  EXPECT_EQ(j["error"]["problems"].size(), 1u);
  EXPECT_THAT(r.stderr_text, HasSubstr("cannot read"));
}

TEST(CliClusterList, PrintsAReadableTable) {
  const auto r = run_falcon({"--config", kSample, "cluster", "list"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("NAME"));
  EXPECT_THAT(r.stdout_text, HasSubstr("CLUSTER_ID"));
  EXPECT_THAT(r.stdout_text, HasSubstr("tpu-v4-prod"));
  EXPECT_THAT(r.stdout_text, HasSubstr("primatrix-tpu"));
  EXPECT_THAT(r.stdout_text, HasSubstr("tpu-v4-64 (tpu, p1), tpu-v4-128 (tpu, p1)"));
  EXPECT_THAT(r.stdout_text, HasSubstr("env=prod,team=pretrain"));
  EXPECT_THAT(r.stdout_text, HasSubstr("nvidia-a100-80g (gpu, p1)"));
}

TEST(CliClusterList, JsonIsAnArrayOfClusterConfigWithSpecFieldNames) {
  // --json is accepted after the subcommand too.
  const auto r = run_falcon({"--config", kSample, "cluster", "list", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const auto j = nlohmann::json::parse(r.stdout_text);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["name"], "tpu-v4-prod");
  EXPECT_EQ(j[0]["accelerator_slots"][1]["type"], "tpu-v4-128");
  EXPECT_EQ(j[1]["default_namespace"], "benchmark");
  EXPECT_FALSE(j[0].contains("accelerator_types"));
}

TEST(CliClusterList, BadConfigExitsTwo) {
  const auto r = run_falcon({"--config", "/nonexistent.yaml", "cluster", "list"});
  EXPECT_EQ(r.exit_code, 2);
}

TEST(CliGlobal, VersionAndHelp) {
  auto r = run_falcon({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.stdout_text, HasSubstr("falcon "));
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--help"},
                                               {"cluster", "--help"},
                                               {"job", "logs", "--help"},
                                               {"config", "validate", "--help"}}) {
    r = run_falcon(args);
    EXPECT_EQ(r.exit_code, 0) << args.back();
    EXPECT_THAT(r.stdout_text, HasSubstr("Usage")) << args.back();
  }
}

TEST(CliGlobal, UsageErrorsExitTwo) {
  EXPECT_EQ(run_falcon({}).exit_code, 2);
  EXPECT_EQ(run_falcon({"cluster", "frobnicate"}).exit_code, 2);
  EXPECT_EQ(run_falcon({"--config", kSample, "cluster", "select"}).exit_code, 2);
  const auto r = run_falcon(
      {"--config", kSample, "job", "list", "--cluster", "tpu-v4-prod", "--state", "DONE"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("--state: 'DONE' is not one of"));
}

TEST(CliGlobal, UnknownClusterExitsThreeWithJsonError) {
  const auto r =
      run_falcon({"--config", kSample, "--json", "job", "status", "--cluster", "nope", "w"});
  EXPECT_EQ(r.exit_code, 3);
  const auto j = nlohmann::json::parse(r.stdout_text);
  EXPECT_EQ(j["error"]["type"], "UnknownClusterError");
  EXPECT_EQ(j["error"]["cluster"], "nope");
  EXPECT_THAT(r.stderr_text, HasSubstr("unknown cluster 'nope'"));
  EXPECT_THAT(r.stderr_text, Not(HasSubstr("internal error")));
}

}  // namespace
}  // namespace falcon
