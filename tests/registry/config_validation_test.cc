// Every validation rule of repos.yaml: one test each, asserting that the message names the file,
// line, column and field path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "falcon/config.h"
#include "falcon/errors.h"

namespace falcon {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr const char* kValidCluster = R"(clusters:
  tpu-v4-prod:
    provider: gke
    project: primatrix-tpu
    zone: us-central2-b
    cluster_id: tpu-v4-cluster
    accelerator_types:
      - type: tpu-v4-64
        device_class: tpu
        priority: 1
)";

std::vector<std::string> problems_of(const std::string& yaml) {
  try {
    parse_fabric_config(yaml, "repos.yaml");
  } catch (const ClusterConfigError& e) {
    return e.problems();
  }
  ADD_FAILURE() << "expected ClusterConfigError for:\n" << yaml;
  return {};
}

// Replaces the first occurrence of `from` in the valid sample.
std::string valid_with(const std::string& from, const std::string& to) {
  std::string text = kValidCluster;
  const auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return text.replace(pos, from.size(), to);
}

TEST(ConfigValidation, AcceptsTheSpecSampleWithDefaults) {
  const FabricConfig config = parse_fabric_config(kValidCluster, "repos.yaml");
  ASSERT_THAT(config.clusters, SizeIs(1));
  const ClusterConfig& c = config.clusters[0];
  EXPECT_EQ(c.name, "tpu-v4-prod");
  EXPECT_EQ(c.default_namespace, "default");
  EXPECT_EQ(c.max_queue_depth, 5);
  EXPECT_EQ(c.probe_timeout_s, 15);
  EXPECT_TRUE(c.labels.empty());
  EXPECT_EQ(c.gcs_bucket, "");
  EXPECT_EQ(config.xpk.binary, "xpk");
  EXPECT_EQ(config.selection.max_parallel_probes, 16);
  EXPECT_EQ(config.gcp.logging_reads_per_minute, 60);
}

TEST(ConfigValidation, YamlSyntaxErrorNamesLineAndColumn) {
  EXPECT_THAT(problems_of("clusters:\n  a: [1, 2\n"),
              Contains(AllOf(HasSubstr("repos.yaml:"), HasSubstr("YAML syntax error"))));
}

TEST(ConfigValidation, ClustersMissing) {
  EXPECT_THAT(problems_of("xpk:\n  binary: xpk\n"),
              Contains(HasSubstr("repos.yaml:1:1: clusters: missing")));
}

TEST(ConfigValidation, ClustersNotAMap) {
  EXPECT_THAT(problems_of("clusters:\n  - a\n  - b\n"),
              Contains(HasSubstr("repos.yaml:2:3: clusters: must be a map")));
}

TEST(ConfigValidation, DocumentNotAMap) {
  EXPECT_THAT(problems_of("- just\n- a list\n"), Contains(HasSubstr("must be a map")));
}

TEST(ConfigValidation, ClusterNameWithUppercaseOrUnderscore) {
  EXPECT_THAT(problems_of(valid_with("tpu-v4-prod:", "TPU_prod:")),
              Contains(HasSubstr("repos.yaml:2:3: clusters.TPU_prod: cluster name must be")));
}

TEST(ConfigValidation, ClusterNameLongerThan63) {
  const std::string name(64, 'a');
  EXPECT_THAT(problems_of(valid_with("tpu-v4-prod:", name + ":")),
              Contains(HasSubstr("clusters." + name + ": cluster name must be")));
}

TEST(ConfigValidation, ClusterNameGivenTwice) {
  std::string twice = std::string(kValidCluster) + std::string(kValidCluster).substr(10);
  EXPECT_THAT(problems_of(twice),
              Contains(HasSubstr("repos.yaml:11:3: clusters.tpu-v4-prod: cluster name given "
                                 "twice (first at line 2)")));
}

TEST(ConfigValidation, MissingProject) {
  EXPECT_THAT(problems_of(valid_with("    project: primatrix-tpu\n", "")),
              Contains(HasSubstr("repos.yaml:2:3: clusters.tpu-v4-prod.project: missing")));
}

TEST(ConfigValidation, MissingZone) {
  EXPECT_THAT(problems_of(valid_with("    zone: us-central2-b\n", "")),
              Contains(HasSubstr("clusters.tpu-v4-prod.zone: missing")));
}

TEST(ConfigValidation, MissingClusterId) {
  EXPECT_THAT(problems_of(valid_with("    cluster_id: tpu-v4-cluster\n", "")),
              Contains(HasSubstr("clusters.tpu-v4-prod.cluster_id: missing")));
}

TEST(ConfigValidation, EmptyProject) {
  EXPECT_THAT(problems_of(valid_with("project: primatrix-tpu", "project: \"\"")),
              Contains(HasSubstr("repos.yaml:4:14: clusters.tpu-v4-prod.project: must not be "
                                 "empty")));
}

TEST(ConfigValidation, ClusterIdThatXpkWouldReject) {
  EXPECT_THAT(problems_of(valid_with("cluster_id: tpu-v4-cluster", "cluster_id: Tpu_Cluster")),
              Contains(HasSubstr("clusters.tpu-v4-prod.cluster_id: 'Tpu_Cluster' is not a name "
                                 "xpk accepts")));
}

TEST(ConfigValidation, ProviderOtherThanGke) {
  EXPECT_THAT(problems_of(valid_with("provider: gke", "provider: eks")),
              Contains(HasSubstr("repos.yaml:3:15: clusters.tpu-v4-prod.provider: 'eks' is not "
                                 "supported (only gke)")));
}

TEST(ConfigValidation, AcceleratorTypesMissing) {
  const std::string yaml = "clusters:\n  c1:\n    project: p\n    zone: z\n    cluster_id: c\n";
  EXPECT_THAT(problems_of(yaml), Contains(HasSubstr("clusters.c1.accelerator_types: missing")));
}

TEST(ConfigValidation, AcceleratorTypesEmpty) {
  const std::string yaml =
      "clusters:\n  c1:\n    project: p\n    zone: z\n    cluster_id: c\n"
      "    accelerator_types: []\n";
  EXPECT_THAT(problems_of(yaml),
              Contains(HasSubstr("repos.yaml:6:24: clusters.c1.accelerator_types: must list at "
                                 "least one accelerator")));
}

TEST(ConfigValidation, AcceleratorWithoutType) {
  EXPECT_THAT(problems_of(valid_with("      - type: tpu-v4-64\n        device_class: tpu",
                                     "      - device_class: tpu")),
              Contains(HasSubstr("clusters.tpu-v4-prod.accelerator_types[0].type: missing")));
}

TEST(ConfigValidation, AcceleratorWithUnknownDeviceClass) {
  EXPECT_THAT(problems_of(valid_with("device_class: tpu", "device_class: fpga")),
              Contains(HasSubstr("repos.yaml:9:23: "
                                 "clusters.tpu-v4-prod.accelerator_types[0].device_class: 'fpga' "
                                 "is not one of tpu, gpu, cpu")));
}

TEST(ConfigValidation, AcceleratorPriorityZero) {
  EXPECT_THAT(problems_of(valid_with("priority: 1", "priority: 0")),
              Contains(HasSubstr("repos.yaml:10:19: "
                                 "clusters.tpu-v4-prod.accelerator_types[0].priority: must be an "
                                 "integer >= 1, got 0")));
}

TEST(ConfigValidation, AcceleratorPriorityNotAnInteger) {
  EXPECT_THAT(problems_of(valid_with("priority: 1", "priority: high")),
              Contains(HasSubstr("accelerator_types[0].priority: must be an integer, got 'high'")));
}

TEST(ConfigValidation, SameAcceleratorTypeTwiceInOneCluster) {
  const std::string yaml = std::string(kValidCluster) +
                           "      - type: tpu-v4-64\n        device_class: tpu\n"
                           "        priority: 2\n";
  EXPECT_THAT(problems_of(yaml),
              Contains(HasSubstr("clusters.tpu-v4-prod.accelerator_types[1].type: 'tpu-v4-64' is "
                                 "listed twice")));
}

TEST(ConfigValidation, GcsBucketWithoutScheme) {
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "    gcs_bucket: falcon-logs\n"),
              Contains(HasSubstr("repos.yaml:11:17: clusters.tpu-v4-prod.gcs_bucket: "
                                 "'falcon-logs' must start with gs://")));
}

TEST(ConfigValidation, NegativeMaxQueueDepth) {
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "    max_queue_depth: -1\n"),
              Contains(HasSubstr("clusters.tpu-v4-prod.max_queue_depth: must be >= 0, got -1")));
}

TEST(ConfigValidation, ZeroMaxQueueDepthIsAllowed) {
  auto config = parse_fabric_config(std::string(kValidCluster) + "    max_queue_depth: 0\n", "r");
  EXPECT_EQ(config.clusters[0].max_queue_depth, 0);
}

TEST(ConfigValidation, NonPositiveProbeTimeout) {
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "    probe_timeout_s: 0\n"),
              Contains(HasSubstr("clusters.tpu-v4-prod.probe_timeout_s: must be > 0, got 0")));
}

TEST(ConfigValidation, LabelsNotAStringMap) {
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "    labels: [env, prod]\n"),
              Contains(HasSubstr("clusters.tpu-v4-prod.labels: must be a map of strings")));
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "    labels:\n      env: {a: b}\n"),
              Contains(HasSubstr("clusters.tpu-v4-prod.labels.env: must be a string, got a map")));
}

TEST(ConfigValidation, WrongTypeForAStringField) {
  EXPECT_THAT(problems_of(valid_with("zone: us-central2-b", "zone: [a, b]")),
              Contains(HasSubstr("clusters.tpu-v4-prod.zone: must be a string, got a list")));
}

TEST(ConfigValidation, WrongTypeForAnIntegerField) {
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "    max_queue_depth: five\n"),
              Contains(HasSubstr("max_queue_depth: must be an integer, got 'five'")));
}

TEST(ConfigValidation, UnknownKeyWithSuggestion) {
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "    max_queue_dept: 3\n"),
              Contains(HasSubstr("repos.yaml:11:5: clusters.tpu-v4-prod.max_queue_dept: unknown "
                                 "key (did you mean 'max_queue_depth'?)")));
}

TEST(ConfigValidation, UnknownKeyWithoutCloseMatchListsAllowed) {
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "    colour: blue\n"),
              Contains(HasSubstr("clusters.tpu-v4-prod.colour: unknown key (allowed:")));
}

TEST(ConfigValidation, UnknownTopLevelSection) {
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "selector:\n  max_parallel_probes: 4\n"),
              Contains(HasSubstr("selector: unknown key (did you mean 'selection'?)")));
}

TEST(ConfigValidation, ReportsEveryProblemNotJustTheFirst) {
  const std::string yaml =
      "clusters:\n  a:\n    zone: z\n    cluster_id: c\n    accelerator_types: []\n"
      "  b:\n    project: p\n    zone: z\n    cluster_id: c\n"
      "    accelerator_types:\n      - type: x\n        device_class: asic\n";
  const auto problems = problems_of(yaml);
  EXPECT_THAT(problems, Contains(HasSubstr("clusters.a.project: missing")));
  EXPECT_THAT(problems, Contains(HasSubstr("clusters.a.accelerator_types: must list")));
  EXPECT_THAT(problems, Contains(HasSubstr("clusters.b.accelerator_types[0].device_class")));
}

TEST(ConfigValidation, OptionalSectionsAreParsed) {
  const std::string yaml = std::string(kValidCluster) +
                           "xpk:\n  binary: /opt/xpk/bin/xpk\n  extra_args: [--skip-validation]\n"
                           "  env: {TELEMETRY_ENABLED: 'false'}\n  namespace_flag: supported\n"
                           "gcp:\n  logging_endpoint: http://127.0.0.1:9000\n"
                           "  logging_reads_per_minute: 120\n  upload_chunk_bytes: 524288\n"
                           "selection:\n  max_parallel_probes: 4\n";
  const FabricConfig config = parse_fabric_config(yaml, "repos.yaml");
  EXPECT_EQ(config.xpk.binary, "/opt/xpk/bin/xpk");
  EXPECT_EQ(config.xpk.extra_args, std::vector<std::string>{"--skip-validation"});
  EXPECT_EQ(config.xpk.env.at("TELEMETRY_ENABLED"), "false");
  EXPECT_EQ(config.xpk.namespace_flag, "supported");
  EXPECT_EQ(config.gcp.logging_endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(config.gcp.logging_reads_per_minute, 120);
  EXPECT_EQ(config.gcp.upload_chunk_bytes, 524288);
  EXPECT_EQ(config.selection.max_parallel_probes, 4);
}

TEST(ConfigValidation, BadSettingsValues) {
  const std::string yaml = std::string(kValidCluster) +
                           "xpk:\n  namespace_flag: maybe\n"
                           "gcp:\n  upload_chunk_bytes: 1000\n  logging_endpoint: localhost:9\n"
                           "selection:\n  max_parallel_probes: 0\n";
  const auto problems = problems_of(yaml);
  EXPECT_THAT(problems, Contains(HasSubstr("xpk.namespace_flag: 'maybe' is not one of")));
  EXPECT_THAT(problems, Contains(HasSubstr("gcp.upload_chunk_bytes: must be a multiple of")));
  EXPECT_THAT(problems, Contains(HasSubstr("gcp.logging_endpoint: 'localhost:9' must be a URL")));
  EXPECT_THAT(problems, Contains(HasSubstr("selection.max_parallel_probes: must be between")));
}

TEST(ConfigValidation, RelativeXpkBinaryIsResolvedAgainstTheConfigFolder) {
  const std::string yaml = std::string(kValidCluster) + "xpk:\n  binary: ./bin/xpk\n";
  EXPECT_EQ(parse_fabric_config(yaml, "/etc/falcon/repos.yaml").xpk.binary,
            "/etc/falcon/./bin/xpk");
  // A bare name is looked up in PATH, not resolved.
  EXPECT_EQ(parse_fabric_config(std::string(kValidCluster) + "xpk:\n  binary: xpk\n",
                                "/etc/falcon/repos.yaml")
                .xpk.binary,
            "xpk");
}

TEST(ConfigValidation, UnreadableFileNamesThePath) {
  try {
    load_fabric_config("/nonexistent/repos.yaml");
    FAIL() << "expected ClusterConfigError";
  } catch (const ClusterConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/repos.yaml: cannot read the configuration"));
  }
}

}  // namespace
}  // namespace falcon
