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
              Contains(HasSubstr("clusters.'" + name.substr(0, 24) +
                                 "...' (64 bytes): cluster name must be")));
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
                                 "clusters.tpu-v4-prod.accelerator_types[0].priority: must be "
                                 "between 1 and 1000, got 0")));
}

TEST(ConfigValidation, AcceleratorPriorityNotAnInteger) {
  EXPECT_THAT(problems_of(valid_with("priority: 1", "priority: high")),
              Contains(HasSubstr("accelerator_types[0].priority: must be an integer, got 'high'")));
}

TEST(ConfigValidation, SameAcceleratorTypeTwiceInOneCluster) {
  const std::string yaml = std::string(kValidCluster) +
                           "      - type: v4-64\n        device_class: tpu\n"
                           "        priority: 2\n";
  EXPECT_THAT(problems_of(yaml),
              Contains(HasSubstr("clusters.tpu-v4-prod.accelerator_types[1].type: 'v4-64' is "
                                 "listed twice")));
}

TEST(ConfigValidation, GcsBucketWithoutScheme) {
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "    gcs_bucket: falcon-logs\n"),
              Contains(HasSubstr("repos.yaml:11:17: clusters.tpu-v4-prod.gcs_bucket: "
                                 "'falcon-logs' is not a gs:// URI")));
}

TEST(ConfigValidation, NegativeMaxQueueDepth) {
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "    max_queue_depth: -1\n"),
              Contains(HasSubstr(
                  "clusters.tpu-v4-prod.max_queue_depth: must be between 0 and 1000000, got -1")));
}

TEST(ConfigValidation, ZeroMaxQueueDepthIsAllowed) {
  auto config = parse_fabric_config(std::string(kValidCluster) + "    max_queue_depth: 0\n", "r");
  EXPECT_EQ(config.clusters[0].max_queue_depth, 0);
}

TEST(ConfigValidation, NonPositiveProbeTimeout) {
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "    probe_timeout_s: 0\n"),
              Contains(HasSubstr(
                  "clusters.tpu-v4-prod.probe_timeout_s: must be between 1 and 604800, got 0")));
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
  EXPECT_EQ(config.xpk.namespace_flag, NamespaceFlag::kSupported);
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

TEST(ConfigValidation, LogExportPathSettingsAreReadAndChecked) {
  const FabricConfig defaults = parse_fabric_config(kValidCluster, "repos.yaml");
  EXPECT_EQ(defaults.gcp.log_archive, "");
  EXPECT_FALSE(defaults.gcp.log_copy);
  EXPECT_EQ(defaults.gcp.log_copy_source, "global/_Default");
  EXPECT_EQ(defaults.gcp.log_archive_lag_s, 10800);
  const FabricConfig config = parse_fabric_config(
      std::string(kValidCluster) +
          "gcp:\n  log_archive: gs://archive\n  log_archive_lag_s: 7200\n  log_copy: true\n"
          "  log_copy_staging: gs://staging/falcon\n  log_copy_source: us-central1/team-logs\n"
          "  log_copy_poll_s: 10\n  log_copy_permission_wait_s: 60\n",
      "repos.yaml");
  EXPECT_EQ(config.gcp.log_archive, "gs://archive");
  EXPECT_EQ(config.gcp.log_archive_lag_s, 7200);
  EXPECT_TRUE(config.gcp.log_copy);
  EXPECT_EQ(config.gcp.log_copy_staging, "gs://staging/falcon");
  EXPECT_EQ(config.gcp.log_copy_source, "us-central1/team-logs");
  EXPECT_EQ(config.gcp.log_copy_poll_s, 10);
  EXPECT_EQ(config.gcp.log_copy_permission_wait_s, 60);
  const auto problems = problems_of(std::string(kValidCluster) +
                                    "gcp:\n  log_archive: s3://x\n  log_copy: maybe\n"
                                    "  log_copy_source: _Default\n  log_copy_poll_s: 0\n");
  EXPECT_THAT(problems, Contains(HasSubstr("gcp.log_archive")));
  EXPECT_THAT(problems, Contains(HasSubstr("gcp.log_copy:")));
  EXPECT_THAT(problems,
              Contains(HasSubstr("gcp.log_copy_source: '_Default' is not LOCATION/BUCKET_ID")));
  EXPECT_THAT(problems, Contains(HasSubstr("gcp.log_copy_poll_s: must be between")));
}

TEST(ConfigValidation, BreakerSettingsAreReadAndChecked) {
  const BreakerSettings defaults =
      parse_fabric_config(kValidCluster, "repos.yaml").selection.breaker;
  EXPECT_EQ(defaults, (BreakerSettings{.failures = 3, .cooldown_s = 60, .cooldown_max_s = 900}));
  const FabricConfig config = parse_fabric_config(
      std::string(kValidCluster) +
          "selection:\n  breaker:\n    failures: 5\n    cooldown_s: 30\n    cooldown_max_s: 120\n",
      "repos.yaml");
  EXPECT_EQ(config.selection.breaker,
            (BreakerSettings{.failures = 5, .cooldown_s = 30, .cooldown_max_s = 120}));
  const auto problems = problems_of(
      std::string(kValidCluster) +
      "selection:\n  breaker:\n    failures: 0\n    cooldown_s: 600\n    cooldown_max_s: 60\n"
      "    cooldown: 1\n");
  EXPECT_THAT(problems, Contains(HasSubstr("selection.breaker.failures: must be between")));
  EXPECT_THAT(
      problems,
      Contains(HasSubstr("selection.breaker.cooldown_max_s: must be at least cooldown_s (600)")));
  EXPECT_THAT(problems, Contains(HasSubstr("selection.breaker.cooldown: unknown key")));
}

TEST(ConfigValidation, SelectionPolicyWeightsAndSignalsAreRead) {
  const SelectionSettings defaults = parse_fabric_config(kValidCluster, "repos.yaml").selection;
  EXPECT_EQ(defaults.policy, SelectionPolicy::kPriority);
  EXPECT_EQ(defaults.weights, ScoreWeights{});
  EXPECT_EQ(defaults.signals, SignalSettings{});
  const SelectionSettings s =
      parse_fabric_config(std::string(kValidCluster) +
                              "selection:\n"
                              "  policy: score\n"
                              "  policy_by_accelerator:\n"
                              "    tpu-v4-64: least-wait\n"
                              "  weights: {priority: 0, queue: 2.5, wait: 3, recent_wait: 0,\n"
                              "            health: 4, latency: 0.25}\n"
                              "  signals: {window_s: 600, wait_scale_s: 120,\n"
                              "            latency_scale_ms: 500, prior_drain_per_min: 0.5}\n",
                          "repos.yaml")
          .selection;
  EXPECT_EQ(s.policy, SelectionPolicy::kScore);
  EXPECT_EQ(s.policy_for("v4-64"), SelectionPolicy::kLeastWait);      // xpk's spelling
  EXPECT_EQ(s.policy_for("tpu-v4-64"), SelectionPolicy::kLeastWait);  // the spec's
  EXPECT_EQ(s.policy_for("v4-128"), SelectionPolicy::kScore);
  EXPECT_EQ(
      s.weights,
      (ScoreWeights{
          .priority = 0, .queue = 2.5, .wait = 3, .recent_wait = 0, .health = 4, .latency = 0.25}));
  EXPECT_EQ(s.signals, (SignalSettings{.window_s = 600,
                                       .wait_scale_s = 120,
                                       .latency_scale_ms = 500,
                                       .prior_drain_per_min = 0.5}));
}

TEST(ConfigValidation, BadSelectionPolicyAndWeightsNameFileLineAndField) {
  // kValidCluster is 10 lines: `selection:` is line 11.
  const auto problems = problems_of(std::string(kValidCluster) +
                                    "selection:\n"
                                    "  policy: fastest\n"
                                    "  weights:\n"
                                    "    speed: 1\n"
                                    "    health: -1\n"
                                    "    queue: lots\n"
                                    "  policy_by_accelerator:\n"
                                    "    tpu-v9-64: score\n"
                                    "    v4-64: random\n"
                                    "  signals:\n"
                                    "    window_s: 5\n");
  EXPECT_THAT(problems,
              Contains(HasSubstr("repos.yaml:12:11: selection.policy: 'fastest' is not one of "
                                 "priority, score, least-wait")));
  EXPECT_THAT(problems,
              Contains(HasSubstr("repos.yaml:14:5: selection.weights.speed: unknown key")));
  EXPECT_THAT(problems, Contains(HasSubstr(
                            "repos.yaml:15:13: selection.weights.health: must be between 0 and "
                            "1000, got -1")));
  EXPECT_THAT(problems, Contains(HasSubstr("repos.yaml:16:12: selection.weights.queue: must be a "
                                           "number")));
  EXPECT_THAT(problems, Contains(HasSubstr("repos.yaml:18:5: "
                                           "selection.policy_by_accelerator.tpu-v9-64:")));
  EXPECT_THAT(problems, Contains(HasSubstr("repos.yaml:19:12: "
                                           "selection.policy_by_accelerator.v4-64: 'random' is "
                                           "not one of priority, score, least-wait")));
  EXPECT_THAT(problems,
              Contains(HasSubstr("repos.yaml:21:15: selection.signals.window_s: must be between")));
}

TEST(ConfigValidation, AllZeroWeightsAreRefused) {
  const auto problems = problems_of(
      std::string(kValidCluster) +
      "selection:\n  weights: {priority: 0, queue: 0, wait: 0, recent_wait: 0, health: 0, "
      "latency: 0}\n");
  EXPECT_THAT(problems, Contains(HasSubstr("repos.yaml:12:12: selection.weights: at least one "
                                           "weight must be positive")));
}

TEST(ConfigValidation, FragmentationSettingsAreReadAndChecked) {
  const SelectionSettings defaults = parse_fabric_config(kValidCluster, "repos.yaml").selection;
  EXPECT_EQ(defaults.fragmentation, FragmentationSettings{});
  EXPECT_EQ(defaults.weights.capacity, 1.0);
  const SelectionSettings s =
      parse_fabric_config(std::string(kValidCluster) +
                              "selection:\n"
                              "  weights: {capacity: 2.5}\n"
                              "  fragmentation: {low: 0.2, high: 0.5, weight_low: 0.9,\n"
                              "                  weight_mid: 0.5, weight_high: 0.1,\n"
                              "                  require_fit: false}\n",
                          "repos.yaml")
          .selection;
  EXPECT_EQ(s.weights.capacity, 2.5);
  EXPECT_EQ(s.fragmentation, (FragmentationSettings{.low = 0.2,
                                                    .high = 0.5,
                                                    .weight_low = 0.9,
                                                    .weight_mid = 0.5,
                                                    .weight_high = 0.1,
                                                    .require_fit = false}));
  EXPECT_EQ(s.fragmentation.weight_for(0.49), 0.5);
  // `selection:` is line 11.
  const auto problems = problems_of(std::string(kValidCluster) +
                                    "selection:\n"
                                    "  fragmentation:\n"
                                    "    low: 0.7\n"
                                    "    high: 0.4\n"
                                    "    weight_mid: 2\n"
                                    "    require_fit: maybe\n"
                                    "    weight: 1\n");
  EXPECT_THAT(problems, Contains(HasSubstr("repos.yaml:16:18: selection.fragmentation.require_fit: "
                                           "must be true or false, got 'maybe'")));
  EXPECT_THAT(problems, Contains(HasSubstr("repos.yaml:15:17: selection.fragmentation.weight_mid: "
                                           "must be between 0 and 1, got 2")));
  EXPECT_THAT(problems, Contains(HasSubstr("selection.fragmentation.high: must be above low "
                                           "(0.7), got 0.4")));
  EXPECT_THAT(problems,
              Contains(HasSubstr("repos.yaml:17:5: selection.fragmentation.weight: unknown key")));
}

TEST(ConfigValidation, ServeSectionDefaults) {
  const ServeSettings serve = parse_fabric_config(kValidCluster, "repos.yaml").serve;
  EXPECT_EQ(serve.listen, "127.0.0.1:8787");
  EXPECT_EQ(serve.state, "");
  EXPECT_EQ(serve.tokens_file, "");
  EXPECT_EQ(serve.probe_interval_s, 30);
  EXPECT_DOUBLE_EQ(serve.probe_jitter, 0.1);
  EXPECT_EQ(serve.max_probe_age_s, 60);
  EXPECT_EQ(serve.select_reuse_ms, 1000);
  EXPECT_EQ(serve.record_repeats, RepeatRecords::kNone);
  EXPECT_EQ(serve.access_log, AccessLog::kAll);
  EXPECT_EQ(serve.unreachable_backoff_max_s, 600);
  EXPECT_EQ(serve.max_parallel_probes, 8);
  EXPECT_EQ(serve.probe_retention_full_h, 24);
  EXPECT_EQ(serve.probe_bucket_min, 60);
  EXPECT_EQ(serve.probe_drop_after_h, 0);
  EXPECT_EQ(serve.selection_retention_h, 24);
  EXPECT_EQ(serve.shutdown_grace_s, 10);
  EXPECT_EQ(serve.http_threads, 16);
  EXPECT_EQ(serve.http_loops, 2);
  EXPECT_EQ(serve.probe_nice, 10);
  EXPECT_TRUE(serve.allowed_hosts.empty());
  EXPECT_TRUE(serve.allowed_origins.empty());
  EXPECT_EQ(serve.limits, ServeLimits{});
  EXPECT_FALSE(serve.limits.max_connections);  // unset: its default depends on TLS
  EXPECT_EQ(serve.limits.connection_limit(false), 16384);
  EXPECT_EQ(serve.limits.connection_limit(true), 1024);
  EXPECT_EQ(serve.limits.max_header_bytes_in_flight, 32 << 20);
  EXPECT_EQ(serve.limits.max_tls_handshakes, 256);
  EXPECT_EQ(serve.limits.max_body_bytes, 1 << 20);
  EXPECT_EQ(serve.limits.max_requests_per_token, 8);
  EXPECT_DOUBLE_EQ(serve.limits.header_timeout_s, 10.0);
}

// serve.limits and the browser keys (docs/serve.md#security): read, and every bad value named.
TEST(ConfigValidation, ServeLimitsAndBrowserKeys) {
  const std::string yaml =
      std::string(kValidCluster) +
      "serve:\n  allowed_hosts: [falcon.example.com, 'lb.internal:8443', '*']\n"
      "  allowed_origins: ['https://dash.example.com']\n"
      "  limits:\n    max_connections: 2000\n    max_connections_per_address: 50\n"
      "    max_body_bytes: 65536\n    header_timeout_s: 2.5\n    max_streams_per_token: 2\n"
      "    max_exports: 1\n    max_queued_exports: 0\n    max_header_bytes_in_flight: 4096\n"
      "    max_tls_handshakes: 64\n";
  const ServeSettings serve = parse_fabric_config(yaml, "repos.yaml").serve;
  EXPECT_EQ(serve.allowed_hosts,
            (std::vector<std::string>{"falcon.example.com", "lb.internal:8443", "*"}));
  EXPECT_EQ(serve.allowed_origins, (std::vector<std::string>{"https://dash.example.com"}));
  EXPECT_EQ(serve.limits.max_connections, 2000);
  EXPECT_EQ(serve.limits.connection_limit(true), 2000);  // set: the same over TLS
  EXPECT_EQ(serve.limits.max_connections_per_address, 50);
  EXPECT_EQ(serve.limits.max_header_bytes_in_flight, 4096);
  EXPECT_EQ(serve.limits.max_tls_handshakes, 64);
  EXPECT_EQ(serve.limits.max_body_bytes, 65536);
  EXPECT_DOUBLE_EQ(serve.limits.header_timeout_s, 2.5);
  EXPECT_EQ(serve.limits.max_streams_per_token, 2);
  EXPECT_EQ(serve.limits.max_exports, 1);
  EXPECT_EQ(serve.limits.max_queued_exports, 0);

  const auto bad = [](const std::string& section) {
    return problems_of(std::string(kValidCluster) + "serve:\n" + section);
  };
  EXPECT_THAT(bad("  limits:\n    max_connections: 0\n"),
              Contains(HasSubstr("serve.limits.max_connections: must be between 1 and")));
  EXPECT_THAT(bad("  limits:\n    max_connections: 10\n    max_connections_per_address: 20\n"),
              Contains(HasSubstr("serve.limits.max_connections_per_address: must be at most "
                                 "max_connections (10), got 20")));
  EXPECT_THAT(bad("  limits:\n    max_connections_per_address: 2000\n"),
              Contains(HasSubstr("serve.limits.max_connections_per_address: must be at most "
                                 "max_connections (1024, its default over TLS: set it to allow "
                                 "more), got 2000")));
  EXPECT_THAT(bad("  limits:\n    max_tls_handshakes: 0\n"),
              Contains(HasSubstr("serve.limits.max_tls_handshakes: must be between 1 and")));
  EXPECT_THAT(bad("  limits:\n    max_header_bytes_in_flight: 100\n"),
              Contains(HasSubstr("serve.limits.max_header_bytes_in_flight: must be between 1024 "
                                 "and")));
  EXPECT_THAT(bad("  limits:\n    max_body_bytes: 100\n"),
              Contains(HasSubstr("serve.limits.max_body_bytes: must be between 1024 and")));
  EXPECT_THAT(bad("  limits:\n    max_body_bytes: 2048\n    max_body_bytes_in_flight: 1024\n"),
              Contains(HasSubstr("serve.limits.max_body_bytes_in_flight: must be at least "
                                 "max_body_bytes (2048), got 1024")));
  EXPECT_THAT(bad("  limits:\n    idle_timeout_s: 0\n"),
              Contains(HasSubstr("serve.limits.idle_timeout_s: must be between 0.01 and")));
  EXPECT_THAT(bad("  limits:\n    max_conections: 5\n"),
              Contains(HasSubstr("serve.limits.max_conections: unknown key (did you mean "
                                 "'max_connections'?)")));
  EXPECT_THAT(bad("  limits: 5\n"), Contains(HasSubstr("serve.limits: must be a map")));
  EXPECT_THAT(bad("  allowed_hosts: ['evil/path']\n"),
              Contains(HasSubstr("serve.allowed_hosts[0]: 'evil/path' is not a host or "
                                 "host:port (or *)")));
  EXPECT_THAT(bad("  allowed_hosts: falcon.example.com\n"),
              Contains(HasSubstr("serve.allowed_hosts: must be a list of strings")));
  EXPECT_THAT(bad("  allowed_origins: ['dash.example.com']\n"),
              Contains(HasSubstr("serve.allowed_origins[0]: 'dash.example.com' is not an origin")));
  EXPECT_THAT(bad("  allowed_origins: ['https://dash.example.com/path']\n"),
              Contains(HasSubstr("is not an origin (http[s]://host[:port], no path)")));
}

TEST(ConfigValidation, ServeSectionIsParsed) {
  const std::string yaml = std::string(kValidCluster) +
                           "serve:\n  listen: '[::1]:0'\n  state: postgresql://falcon@db/falcon\n"
                           "  tokens_file: tokens.yaml\n  probe_interval_s: 15\n"
                           "  probe_jitter: 0.25\n  max_probe_age_s: 45\n  select_reuse_ms: 0\n"
                           "  record_repeats: written\n  access_log: errors\n"
                           "  unreachable_backoff_max_s: 300\n  max_parallel_probes: 32\n"
                           "  probe_retention_full_h: 12\n  probe_bucket_min: 30\n"
                           "  probe_drop_after_h: 720\n  selection_retention_h: 0\n"
                           "  shutdown_grace_s: 5\n"
                           "  http_threads: 128\n  http_loops: 4\n  probe_nice: 0\n";
  const ServeSettings serve = parse_fabric_config(yaml, "/etc/falcon/repos.yaml").serve;
  EXPECT_EQ(serve.listen, "[::1]:0");
  EXPECT_EQ(serve.state, "postgresql://falcon@db/falcon");
  EXPECT_EQ(serve.tokens_file, "tokens.yaml");  // a bare name stays as written
  EXPECT_EQ(serve.probe_interval_s, 15);
  EXPECT_DOUBLE_EQ(serve.probe_jitter, 0.25);
  EXPECT_EQ(serve.max_probe_age_s, 45);
  EXPECT_EQ(serve.select_reuse_ms, 0);
  EXPECT_EQ(serve.record_repeats, RepeatRecords::kWritten);
  EXPECT_EQ(serve.access_log, AccessLog::kErrors);
  EXPECT_EQ(serve.unreachable_backoff_max_s, 300);
  EXPECT_EQ(serve.max_parallel_probes, 32);
  EXPECT_EQ(serve.probe_retention_full_h, 12);
  EXPECT_EQ(serve.probe_bucket_min, 30);
  EXPECT_EQ(serve.probe_drop_after_h, 720);
  EXPECT_EQ(serve.selection_retention_h, 0);
  EXPECT_EQ(serve.shutdown_grace_s, 5);
  EXPECT_EQ(serve.http_threads, 128);
  EXPECT_EQ(serve.http_loops, 4);
  EXPECT_EQ(serve.probe_nice, 0);
}

TEST(ConfigValidation, ServeRelativePathsAreResolvedAgainstTheConfigFolder) {
  const std::string yaml = std::string(kValidCluster) +
                           "serve:\n  state: state/falcon.db\n  tokens_file: secrets/tokens\n";
  const ServeSettings serve = parse_fabric_config(yaml, "/etc/falcon/repos.yaml").serve;
  EXPECT_EQ(serve.state, "/etc/falcon/state/falcon.db");
  EXPECT_EQ(serve.tokens_file, "/etc/falcon/secrets/tokens");
  // A URL is taken as written.
  EXPECT_EQ(parse_fabric_config(std::string(kValidCluster) + "serve:\n  state: sqlite:///a/b.db\n",
                                "/etc/falcon/repos.yaml")
                .serve.state,
            "sqlite:///a/b.db");
}

TEST(ConfigValidation, BadServeValuesNameFileAndField) {
  const std::string yaml = std::string(kValidCluster) +
                           "serve:\n  listen: localhost\n  probe_interval_s: 0\n"
                           "  probe_jitter: 0.7\n  max_probe_age_s: -1\n"
                           "  max_parallel_probes: 300\n  probe_bucket_min: 0\n"
                           "  probe_retention_full_h: 48\n  probe_drop_after_h: 24\n"
                           "  probe_intervall_s: 3\n";
  const auto problems = problems_of(yaml);
  EXPECT_THAT(problems, Contains(HasSubstr("repos.yaml:12:11: serve.listen: 'localhost' is not "
                                           "host:port")));
  EXPECT_THAT(problems, Contains(HasSubstr("serve.probe_interval_s: must be between 1 and")));
  EXPECT_THAT(problems,
              Contains(HasSubstr("serve.probe_jitter: must be between 0 and 0.5, got 0.7")));
  EXPECT_THAT(problems, Contains(HasSubstr("serve.max_probe_age_s: must be between 1 and")));
  EXPECT_THAT(problems,
              Contains(HasSubstr("serve.max_parallel_probes: must be between 1 and 256")));
  EXPECT_THAT(problems, Contains(HasSubstr("serve.probe_bucket_min: must be between 1 and")));
  EXPECT_THAT(problems, Contains(HasSubstr("serve.probe_drop_after_h: must be 0 (keep) or at least "
                                           "probe_retention_full_h (48), got 24")));
  EXPECT_THAT(problems,
              Contains(HasSubstr(
                  "serve.probe_intervall_s: unknown key (did you mean 'probe_interval_s'?)")));
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "serve:\n  selection_retention_h: -1\n"),
              Contains(HasSubstr("serve.selection_retention_h: must be between 0 and 87600")));
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "serve:\n  select_reuse_ms: 60001\n"),
              Contains(HasSubstr("serve.select_reuse_ms: must be between 0 and 60000")));
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "serve:\n  probe_jitter: lots\n"),
              Contains(HasSubstr("serve.probe_jitter: must be a number, got 'lots'")));
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "serve:\n  listen: '1.2.3.4:70000'\n"),
              Contains(HasSubstr("serve.listen: '1.2.3.4:70000' is not host:port")));
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "serve: [1]\n"),
              Contains(HasSubstr("serve: must be a map, got a list")));
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "serve:\n  http_loops: 0\n"),
              Contains(HasSubstr("serve.http_loops: must be between 1 and 64")));
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "serve:\n  probe_nice: 20\n"),
              Contains(HasSubstr("serve.probe_nice: must be between 0 and 19")));
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "serve:\n  record_repeats: sometimes\n"),
              Contains(HasSubstr(
                  "serve.record_repeats: 'sometimes' is not one of none, written, durable")));
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "serve:\n  access_log: some\n"),
              Contains(HasSubstr("serve.access_log: 'some' is not one of all, errors, none")));
  // The setting it replaced names its replacement.
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "serve:\n  durable_repeats: false\n"),
              Contains(HasSubstr("serve.durable_repeats: replaced by serve.record_repeats")));
}

TEST(ConfigValidation, ProbeBackendIsGlobalWithAPerClusterOverride) {
  EXPECT_EQ(parse_fabric_config(kValidCluster, "repos.yaml").probe.backend, ProbeBackend::kXpk);
  EXPECT_EQ(parse_fabric_config(kValidCluster, "repos.yaml").clusters[0].probe_backend,
            std::nullopt);
  const std::string yaml = valid_with("    cluster_id: tpu-v4-cluster\n",
                                      "    cluster_id: tpu-v4-cluster\n    probe:\n"
                                      "      backend: kube\n") +
                           "probe:\n  backend: xpk\n";
  const FabricConfig config = parse_fabric_config(yaml, "repos.yaml");
  EXPECT_EQ(config.probe.backend, ProbeBackend::kXpk);
  EXPECT_EQ(config.clusters[0].probe_backend, ProbeBackend::kKube);
  EXPECT_EQ(
      parse_fabric_config(std::string(kValidCluster) + "probe:\n  backend: kube\n", "repos.yaml")
          .probe.backend,
      ProbeBackend::kKube);
}

TEST(ConfigValidation, BadProbeBackends) {
  const std::string yaml = valid_with("    cluster_id: tpu-v4-cluster\n",
                                      "    cluster_id: tpu-v4-cluster\n    probe:\n"
                                      "      backend: kubectl\n      period: 3\n") +
                           "probe:\n  backend: http\n";
  const auto problems = problems_of(yaml);
  EXPECT_THAT(problems, Contains(HasSubstr(
                            "repos.yaml:8:16: clusters.tpu-v4-prod.probe.backend: 'kubectl' is "
                            "not one of xpk, kube")));
  EXPECT_THAT(
      problems,
      Contains(HasSubstr("clusters.tpu-v4-prod.probe.period: unknown key (allowed: backend)")));
  EXPECT_THAT(problems, Contains(HasSubstr("probe.backend: 'http' is not one of xpk, kube")));
  EXPECT_THAT(problems_of(valid_with("    cluster_id: tpu-v4-cluster\n",
                                     "    cluster_id: tpu-v4-cluster\n    probe: kube\n")),
              Contains(HasSubstr("clusters.tpu-v4-prod.probe: must be a map, got a scalar")));
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

// --- Accelerator types: xpk's table, both spellings (issue 11).

TEST(ConfigValidation, AcceleratorTypesComeOutInXpksSpelling) {
  const std::string yaml = std::string(kValidCluster) +
                           "      - {type: v4-128, device_class: tpu, priority: 2}\n"
                           "      - {type: h100-80gb-8, device_class: gpu, priority: 3}\n"
                           "      - {type: n2-standard-32-4, device_class: cpu, priority: 4}\n";
  const ClusterConfig c = parse_fabric_config(yaml, "repos.yaml").clusters[0];
  ASSERT_THAT(c.accelerator_slots, SizeIs(4));
  EXPECT_EQ(c.accelerator_slots[0], (AcceleratorSlot{"v4-64", DeviceClass::kTpu, 1}));
  EXPECT_EQ(c.accelerator_slots[1], (AcceleratorSlot{"v4-128", DeviceClass::kTpu, 2}));
  EXPECT_EQ(c.accelerator_slots[2], (AcceleratorSlot{"h100-80gb-8", DeviceClass::kGpu, 3}));
  EXPECT_EQ(c.accelerator_slots[3], (AcceleratorSlot{"n2-standard-32-4", DeviceClass::kCpu, 4}));
  EXPECT_NE(c.find_slot("tpu-v4-64"), nullptr);
  EXPECT_NE(c.find_slot("v4-64"), nullptr);
  EXPECT_EQ(c.find_slot("tpu-v4-8"), nullptr);
}

TEST(ConfigValidation, AcceleratorTypeXpkRefusesNamesTheClosestValidOnes) {
  EXPECT_THAT(problems_of(valid_with("type: tpu-v4-64", "type: tpu-v4-65")),
              Contains(HasSubstr("repos.yaml:8:15: clusters.tpu-v4-prod.accelerator_types[0].type: "
                                 "'tpu-v4-65' is not an accelerator type xpk 1.13.1 accepts "
                                 "(closest valid types: v4-64, v4-6656, v4-6528, ")));
  EXPECT_THAT(problems_of(valid_with("type: tpu-v4-64", "type: tpu-v5e-48")),
              Contains(HasSubstr("'tpu-v5e-48' is not an accelerator type xpk 1.13.1 accepts ")));
}

// The spec's example repos.yaml names tpu-v5e-256: xpk's v5litepod-256.
TEST(ConfigValidation, TheSpecsV5eSpellingIsXpksV5litepod) {
  const FabricConfig config =
      parse_fabric_config(valid_with("type: tpu-v4-64", "type: tpu-v5e-256"), "repos.yaml");
  ASSERT_EQ(config.clusters.size(), 1u);
  EXPECT_EQ(config.clusters[0].accelerator_slots.at(0).type, "v5litepod-256");
}

TEST(ConfigValidation, GpuTypeTypoSuggestsGpuTypesOnly) {
  const auto problems = problems_of(valid_with("type: tpu-v4-64\n        device_class: tpu",
                                               "type: nvidia-a100-80g\n        device_class: gpu"));
  EXPECT_THAT(problems, Contains(HasSubstr("'nvidia-a100-80g' is not an accelerator type xpk "
                                           "1.13.1 accepts (closest valid types: h100-80gb-8, "
                                           "a100-40gb-8, ")));
}

TEST(ConfigValidation, GkeAcceleratorLabelSuggestsXpksNamesOfIt) {
  EXPECT_THAT(problems_of(valid_with("type: tpu-v4-64\n        device_class: tpu",
                                     "type: nvidia-h100-80gb\n        device_class: gpu")),
              Contains(HasSubstr("'nvidia-h100-80gb' is not an accelerator type xpk 1.13.1 "
                                 "accepts (closest valid types: h100-80gb-8)")));
}

TEST(ConfigValidation, AcceleratorOfAnotherClassThanDeviceClass) {
  EXPECT_THAT(problems_of(valid_with("type: tpu-v4-64", "type: h100-80gb-8")),
              Contains(HasSubstr("accelerator_types[0].type: 'h100-80gb-8' is a gpu type in xpk "
                                 "1.13.1, but device_class is tpu")));
}

TEST(ConfigValidation, BothSpellingsOfOneTypeAreTheSameSlot) {
  const std::string yaml =
      std::string(kValidCluster) + "      - {type: v4-64, device_class: tpu, priority: 2}\n";
  EXPECT_THAT(problems_of(yaml), Contains(HasSubstr("accelerator_types[1].type: 'v4-64' is listed "
                                                    "twice (also at "
                                                    "clusters.tpu-v4-prod.accelerator_types[0])")));
}

// --- Zones and locations (issue 11).

constexpr const char* kRegionalCluster = R"(clusters:
  c:
    project: p-1
    zone: %ZONE%
    %LOCATION%
    cluster_id: c
    accelerator_types: [{type: v5p-8, device_class: tpu}]
)";

std::string located(const std::string& zone, const std::string& location) {
  std::string s = kRegionalCluster;
  s.replace(s.find("%ZONE%"), 6, zone);
  s.replace(s.find("%LOCATION%"), 10, location.empty() ? "" : "location: " + location);
  return s;
}

TEST(ConfigValidation, LocationDefaultsToZone) {
  EXPECT_EQ(parse_fabric_config(located("us-central2-b", ""), "r").clusters[0].location,
            "us-central2-b");
  EXPECT_EQ(parse_fabric_config(located("us-central1", ""), "r").clusters[0].location,
            "us-central1");
}

TEST(ConfigValidation, RegionalClusterReachedThroughAZoneOrTheRegion) {
  const ClusterConfig c = parse_fabric_config(located("us-east5-a", "us-east5"), "r").clusters[0];
  EXPECT_EQ(c.zone, "us-east5-a");
  EXPECT_EQ(c.location, "us-east5");
  EXPECT_NO_THROW(parse_fabric_config(located("us-east5", "us-east5"), "r"));
}

TEST(ConfigValidation, ZonalClusterWithARegionAsZoneIsRefused) {
  EXPECT_THAT(problems_of(located("us-east1", "us-east1-d")),
              Contains(HasSubstr("clusters.c.location: the cluster is zonal (us-east1-d) but zone "
                                 "is the region us-east1: xpk would ask gcloud for the cluster in "
                                 "us-east1 and get a 404; set zone: us-east1-d")));
  EXPECT_THAT(problems_of(located("us-east1-b", "us-east1-d")),
              Contains(HasSubstr("the cluster is zonal (us-east1-d) but zone is us-east1-b")));
}

TEST(ConfigValidation, LocationOutsideTheZonesRegion) {
  EXPECT_THAT(problems_of(located("us-east1-b", "europe-west4")),
              Contains(HasSubstr("clusters.c.location: 'europe-west4' is not in the region of "
                                 "zone 'us-east1-b'")));
}

TEST(ConfigValidation, ZoneOrLocationThatIsNoGcpLocation) {
  EXPECT_THAT(problems_of(located("z", "")),
              Contains(HasSubstr("clusters.c.zone: 'z' is not a GCP zone or region")));
  EXPECT_THAT(problems_of(located("us-east1-b", "US-EAST1")),
              Contains(HasSubstr("clusters.c.location: 'US-EAST1' is not a GCP zone or region")));
}

// --- Hostile input (issue 11): bounded, never a crash, short quotes.

TEST(ConfigValidation, HugeValueIsRefusedWithAShortQuote) {
  for (const std::string field : {"zone: us-central2-b", "project: primatrix-tpu",
                                  "cluster_id: tpu-v4-cluster", "type: tpu-v4-64"}) {
    const std::string key = field.substr(0, field.find(':'));
    const auto problems = problems_of(valid_with(field, key + ": " + std::string(50'000, 'a')));
    ASSERT_THAT(problems, SizeIs(1)) << key;
    EXPECT_THAT(problems[0], HasSubstr("...' (50000 bytes) is too long: at most")) << key;
    EXPECT_LT(problems[0].size(), 250u) << problems[0];
  }
}

TEST(ConfigValidation, HugeKeysAndLabelsAreBounded) {
  const auto key =
      problems_of(std::string(kValidCluster) + "    " + std::string(50'000, 'k') + ": 1\n");
  ASSERT_THAT(key, SizeIs(1));
  EXPECT_LT(key[0].size(), 400u) << key[0];
  const auto label = problems_of(std::string(kValidCluster) +
                                 "    labels: {env: " + std::string(50'000, 'v') + "}\n");
  ASSERT_THAT(label, SizeIs(1));
  EXPECT_THAT(label[0], HasSubstr("labels.env: 'vvv"));
  EXPECT_LT(label[0].size(), 250u) << label[0];
}

TEST(ConfigValidation, ControlCharactersAreShownEscaped) {
  const auto problems =
      problems_of(valid_with("zone: us-central2-b", "zone: \"us-central2-b\\n\""));
  ASSERT_THAT(problems, SizeIs(1));
  EXPECT_THAT(problems[0], HasSubstr("'us-central2-b\\n' is not a GCP zone or region"));
}

TEST(ConfigValidation, OversizedFileIsRefusedUnread) {
  const std::string yaml = std::string(kValidCluster) + "# " + std::string(kMaxConfigBytes, 'x');
  EXPECT_THAT(problems_of(yaml), Contains(HasSubstr("repos.yaml: (document): the file is " +
                                                    std::to_string(yaml.size()) +
                                                    " bytes; at most 1048576 are read")));
}

// dispatch.preempt_after_s and its companions (docs/dispatch.md "Preemption"): absent means
// falcon never nominates to preempt.
TEST(ConfigValidation, DispatchPreemptionKeys) {
  const FabricConfig plain = parse_fabric_config(kValidCluster, "repos.yaml");
  EXPECT_FALSE(plain.dispatch.preempt_after_s.has_value());
  EXPECT_EQ(plain.dispatch.preempt_min_priority, 750);
  EXPECT_TRUE(plain.dispatch.preempting_workers.empty());
  EXPECT_EQ(plain.dispatch.preempt_confirm_s, 120);
  const FabricConfig set =
      parse_fabric_config(std::string(kValidCluster) +
                              "dispatch:\n  preempt_after_s: 480\n  preempt_min_priority: 1000\n"
                              "  preempting_workers: [worker-us]\n  preempt_confirm_s: 45\n",
                          "repos.yaml");
  EXPECT_EQ(set.dispatch.preempt_after_s, std::optional<double>(480));
  EXPECT_EQ(set.dispatch.preempt_min_priority, 1000);
  EXPECT_EQ(set.dispatch.preempting_workers, std::vector<std::string>{"worker-us"});
  EXPECT_EQ(set.dispatch.preempt_confirm_s, 45);
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "dispatch:\n  preempt_after_s: -1\n"),
              Contains(HasSubstr("dispatch.preempt_after_s: must be between 0 and")));
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "dispatch:\n  preempt_confirm_s: 0\n"),
              Contains(HasSubstr("dispatch.preempt_confirm_s: must be between 1 and")));
}

// dispatch.keep_room: on unless set false; anything but a boolean is refused by name.
TEST(ConfigValidation, DispatchKeepRoom) {
  EXPECT_TRUE(parse_fabric_config(kValidCluster, "repos.yaml").dispatch.keep_room);
  EXPECT_FALSE(parse_fabric_config(std::string(kValidCluster) + "dispatch:\n  keep_room: false\n",
                                   "repos.yaml")
                   .dispatch.keep_room);
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "dispatch:\n  keep_room: sometimes\n"),
              Contains(HasSubstr("dispatch.keep_room")));
}

TEST(ConfigValidation, DeeplyNestedYamlIsASyntaxErrorNotACrash) {
  const std::string yaml = "clusters: " + std::string(100'000, '[');
  EXPECT_THAT(problems_of(yaml), Contains(HasSubstr("YAML syntax error")));
}

TEST(ConfigValidation, TooManyItemsInAList) {
  std::string args = "xpk:\n  extra_args: [";
  for (int i = 0; i < 300; ++i) args += "a,";
  args += "b]\n";
  EXPECT_THAT(problems_of(std::string(kValidCluster) + args),
              Contains(HasSubstr("xpk.extra_args: has 301 items; at most 256 are allowed")));
}

TEST(ConfigValidation, IntegersBeyondAnyBoundAreRefusedNotWrapped) {
  EXPECT_THAT(
      problems_of(std::string(kValidCluster) + "    max_queue_depth: 99999999999999999999\n"),
      Contains(HasSubstr("max_queue_depth: must be an integer, got '99999999999999999999'")));
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "    probe_timeout_s: 4294967297\n"),
              Contains(HasSubstr("probe_timeout_s: must be between 1 and 604800, got 4294967297")));
}

TEST(ConfigValidation, NamespaceFlagIsAnEnum) {
  for (const auto& [text, flag] :
       {std::pair{"auto", NamespaceFlag::kAuto}, std::pair{"supported", NamespaceFlag::kSupported},
        std::pair{"unsupported", NamespaceFlag::kUnsupported}}) {
    EXPECT_EQ(parse_fabric_config(
                  std::string(kValidCluster) + "xpk:\n  namespace_flag: " + text + "\n", "r")
                  .xpk.namespace_flag,
              flag);
    EXPECT_STREQ(to_string(flag), text);
  }
  EXPECT_EQ(parse_fabric_config(kValidCluster, "r").xpk.namespace_flag, NamespaceFlag::kAuto);
}

TEST(ConfigValidation, GcsBucketUsesTheOneGsParser) {
  EXPECT_THAT(problems_of(std::string(kValidCluster) + "    gcs_bucket: gs://Falcon-Logs\n"),
              Contains(HasSubstr("clusters.tpu-v4-prod.gcs_bucket: 'gs://Falcon-Logs': the bucket "
                                 "name 'Falcon-Logs' may contain only lowercase letters")));
  EXPECT_EQ(
      parse_fabric_config(std::string(kValidCluster) + "    gcs_bucket: gs://falcon-logs/x/\n", "r")
          .clusters[0]
          .gcs_bucket,
      "gs://falcon-logs/x/");
}

}  // namespace
}  // namespace falcon
