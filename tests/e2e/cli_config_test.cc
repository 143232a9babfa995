// End to end: the falcon binary's config and cluster-list commands, global options and exit
// codes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

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
                              "clusters:\n  a:\n    zone: us-east1-b\n    cluster_id: c\n"
                              "    accelerator_types:\n      - {type: v4-8, device_class: fpga}\n"
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

// Issue 11: the spec's tpu-v4-64 style passed validation and xpk refused it at submit. Now a
// type xpk 1.13.1 cannot take is refused here, naming the closest valid ones.
TEST(CliConfig, ValidateRefusesAnAcceleratorTypeXpkCannotTake) {
  testing::TempDir dir;
  std::ifstream in(kSample);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.replace(text.find("type: tpu-v4-64"), 15, "type: tpu-v4-65");
  const auto r = run_falcon({"config", "validate", dir.write("repos.yaml", text).string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text,
              HasSubstr("clusters.tpu-v4-prod.accelerator_types[0].type: 'tpu-v4-65' is not an "
                        "accelerator type xpk 1.13.1 accepts (closest valid types: v4-64, "));
  EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
}

// Issue 11: a ~50k-character value overflowed the stack in a regular-expression check, and every
// command (they all load the config) crashed. Now: exit 2 and a one-line message.
TEST(CliConfig, HugeValueIsAUsageErrorNotACrash) {
  testing::TempDir dir;
  std::ifstream in(kSample);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.replace(text.find("zone: us-central2-b"), 19, "zone: " + std::string(50'000, 'a'));
  const std::string path = dir.write("repos.yaml", text).string();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"config", "validate", path},
        std::vector<std::string>{"--config", path, "cluster", "list"}}) {
    const auto r = run_falcon(args);
    EXPECT_EQ(r.exit_code, 2) << r.stderr_text.substr(0, 500);
    EXPECT_THAT(r.stderr_text, HasSubstr("clusters.tpu-v4-prod.zone: 'aaaa"));
    EXPECT_THAT(r.stderr_text, HasSubstr("(50000 bytes) is too long"));
    EXPECT_LT(r.stderr_text.size(), 400u) << r.stderr_text.substr(0, 500);
  }
}

// Issue 11: `--dest` goes through the one gs:// parser: a name Cloud Storage refuses, control
// characters included, is a usage error before anything is read.
TEST(CliExportLogs, DestThatCloudStorageRefusesIsAUsageError) {
  for (const auto& [dest, why] : std::vector<std::pair<std::string, std::string>>{
           {"gs://bkt/run\n1/", "contains a control character"},
           {"gs://Falcon-Logs/run/", "may contain only lowercase letters"},
           {"gs://bkt/../etc/", "'.' or '..' as a path part"},
           {"s3://bkt/run/", "is not a gs:// URI"}}) {
    const auto r = run_falcon({"--config", kSample, "job", "export-logs", "--cluster",
                               "tpu-v4-prod", "w", "--dest", dest});
    EXPECT_EQ(r.exit_code, 2) << dest;
    EXPECT_THAT(r.stderr_text, HasSubstr("--dest: ")) << dest;
    EXPECT_THAT(r.stderr_text, HasSubstr(why)) << dest;
    EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
  }
}

TEST(CliConfig, ValidateMissingFileExitsTwo) {
  const auto r = run_falcon({"config", "validate", "/nonexistent/repos.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("/nonexistent/repos.yaml: cannot read the configuration"));
  // ... and says how to name one.
  EXPECT_THAT(r.stderr_text, HasSubstr("--config FILE or FALCON_CONFIG"));
  EXPECT_THAT(r.stderr_text, HasSubstr("examples/repos.yaml"));
}

// The size of an oversized file is its own, not the bytes read of it.
TEST(CliConfig, AnOversizedFileIsRefusedWithItsRealSize) {
  testing::TempDir dir;
  const auto path = dir.path() / "big.yaml";
  {
    std::ofstream out(path);
    out << "clusters: {}\n#";
    out << std::string(3 * 1024 * 1024, 'x');
  }
  const auto size = std::filesystem::file_size(path);
  const auto r = run_falcon({"config", "validate", path.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text,
              HasSubstr("the file is " + std::to_string(size) + " bytes; at most 1048576"));
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
  EXPECT_THAT(r.stdout_text, HasSubstr("v4-64 (tpu, p1), v4-128 (tpu, p1)"));
  EXPECT_THAT(r.stdout_text, HasSubstr("env=prod,team=pretrain"));
  EXPECT_THAT(r.stdout_text, HasSubstr("a100-40gb-8 (gpu, p1)"));
  EXPECT_THAT(r.stdout_text, HasSubstr("BREAKER"));
}

TEST(CliClusterList, JsonIsAnArrayOfClusterConfigWithSpecFieldNames) {
  // --json is accepted after the subcommand too.
  const auto r = run_falcon({"--config", kSample, "cluster", "list", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const auto j = nlohmann::json::parse(r.stdout_text);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["name"], "tpu-v4-prod");
  EXPECT_EQ(j[0]["accelerator_slots"][1]["type"], "v4-128");  // xpk's spelling
  EXPECT_EQ(j[0]["location"], "us-central2-b");
  EXPECT_EQ(j[1]["default_namespace"], "benchmark");
  EXPECT_FALSE(j[0].contains("accelerator_types"));
  ASSERT_TRUE(j[0]["breakers"].is_array());  // [] when no state store can be opened
  if (!j[0]["breakers"].empty()) {
    EXPECT_EQ(j[0]["breakers"][0]["key"], "tpu-v4-prod");
  }
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
