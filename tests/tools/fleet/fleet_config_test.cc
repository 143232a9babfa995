// The fleet file: the shipped example loads, defaults apply, and every kind of mistake is
// reported with the file, the line and the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "fleet/fleet_config.h"
#include "support/temp_dir.h"

namespace falcon::fleet {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr const char* kMinimal = R"(
clusters:
  small:
    project: p
    zone: us-central2-b
    cluster_id: small-cluster
    capacity: {tpu-v4-8: 1}
)";

// The problems parse_fleet_config reports for `yaml`, joined; fails the test when it accepts it.
std::string problems_of(const std::string& yaml) {
  try {
    parse_fleet_config(yaml, "fleet.yaml");
  } catch (const FleetConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted:\n" << yaml;
  return "";
}

TEST(FleetConfig, LoadsTheShippedExample) {
  const FleetConfig config = load_fleet_config(FALCON_SOURCE_DIR "/examples/local-fleet.yaml");
  ASSERT_EQ(config.clusters.size(), 4u);
  EXPECT_EQ(config.clusters[0].name, "tpu-v4-prod");
  EXPECT_EQ(config.clusters[0].capacity.at("tpu-v4-64"), 1);
  EXPECT_EQ(config.clusters[0].workloads.size(), 2u);
  EXPECT_EQ(config.clusters[0].workloads[1].count, 6);
  EXPECT_EQ(config.clusters[0].workloads[0].env.at("FLEET_DURATION_S"), "86400");
  EXPECT_TRUE(config.clusters[1].behaviour.unreachable);
  EXPECT_EQ(config.clusters[3].cluster_id, "gpu-cluster");
  EXPECT_EQ(config.xpk.version, "v1.13.1");
  EXPECT_EQ(config.workers_per_slice.at("tpu-v4-64"), 8);
  // The demo's export bucket exists from the start, so doctor's bucket check passes on a fresh
  // fleet (issue 31).
  EXPECT_EQ(config.buckets, std::vector<std::string>{"falcon-logs"});
}

TEST(FleetConfig, BucketsAreAListOfBucketNames) {
  EXPECT_TRUE(parse_fleet_config(kMinimal, "fleet.yaml").buckets.empty());
  const FleetConfig config =
      parse_fleet_config(std::string(kMinimal) + "buckets: [logs-a, logs.b]\n", "fleet.yaml");
  EXPECT_EQ(config.buckets, (std::vector<std::string>{"logs-a", "logs.b"}));
  EXPECT_THAT(problems_of(std::string(kMinimal) + "buckets: [Logs]\n"),
              HasSubstr("a bucket name is 3 to 63"));
  EXPECT_THAT(problems_of(std::string(kMinimal) + "buckets: logs\n"),
              HasSubstr("must be a list of bucket names"));
}

TEST(FleetConfig, AppliesDocumentedDefaults) {
  const FleetConfig config = parse_fleet_config(kMinimal, "fleet.yaml");
  EXPECT_EQ(config.xpk.version, "v1.13.1");
  EXPECT_EQ(config.xpk.table_style, TableStyle::kV19);
  EXPECT_FALSE(config.xpk.supports_namespace);
  EXPECT_TRUE(config.xpk.progress_lines);
  EXPECT_EQ(config.time_scale, 60.0);
  EXPECT_EQ(config.defaults.duration_s, 600.0);
  EXPECT_EQ(config.defaults.outcome, Outcome::kSucceed);
  EXPECT_EQ(config.defaults.exit_code, 1);
  EXPECT_EQ(config.defaults.steps, 100);
  EXPECT_EQ(config.defaults.log_lines_per_step, 1);
  EXPECT_EQ(config.logs.omit_completion_index_every, 0);
  const FleetCluster& c = config.clusters.at(0);
  EXPECT_EQ(c.location, "us-central2-b");  // the zone
  EXPECT_EQ(c.behaviour.probe_latency_ms, 0);
  EXPECT_FALSE(c.behaviour.unreachable);
  EXPECT_EQ(c.behaviour.flaky.every, 0);
  EXPECT_EQ(c.behaviour.slow_latency_ms, 30000);
}

TEST(FleetConfig, ReadsEveryKey) {
  const FleetConfig config = parse_fleet_config(R"(
xpk: {version: v1.7.2, table_style: v1.7, supports_namespace: true, progress_lines: false}
time_scale: 0
defaults: {duration_s: 1.5, outcome: fail, exit_code: 3, steps: 7, log_lines_per_step: 2}
logs: {omit_completion_index_every: 3}
workers_per_slice: {v4-64: 8, default: 2}
clusters:
  a:
    project: p
    zone: us-east5-a
    cluster_id: a-1
    location: us-east5
    capacity: {tpu-v4-64: 2}
    behaviour: {probe_latency_ms: 5, command_latency_ms: 6, unreachable: true,
                flaky: {probability: 0.25, seed: 9}, slow: true, slow_latency_ms: 7,
                admission_delay_s: 4, kueue: false, preemption: LowerPriority,
                clusterqueues: forbidden}
    workloads:
      - {name: w, count: 2, device_type: tpu-v4-64, num_slices: 2, priority: high,
         namespace: team, env: {FLEET_STEPS: "3"}, duration_s: 10, outcome: succeed,
         exit_code: 0}
)",
                                                "fleet.yaml");
  EXPECT_EQ(config.xpk.version_number(), 107);
  EXPECT_FALSE(config.xpk.prompts_on_duplicate());
  EXPECT_FALSE(config.xpk.filter_by_substring());
  EXPECT_EQ(config.xpk.table_style, TableStyle::kV17);
  EXPECT_TRUE(config.xpk.supports_namespace);
  EXPECT_FALSE(config.xpk.progress_lines);
  EXPECT_EQ(config.time_scale, 0.0);
  EXPECT_EQ(config.defaults.duration_s, 1.5);
  EXPECT_EQ(config.defaults.outcome, Outcome::kFail);
  EXPECT_EQ(config.defaults.exit_code, 3);
  EXPECT_EQ(config.logs.omit_completion_index_every, 3);
  EXPECT_EQ(config.workers_per_slice.at("default"), 2);
  const FleetCluster& c = config.clusters.at(0);
  EXPECT_EQ(c.location, "us-east5");
  EXPECT_EQ(c.behaviour.flaky.probability, 0.25);
  EXPECT_EQ(c.behaviour.flaky.seed, 9u);
  EXPECT_TRUE(c.behaviour.slow);
  EXPECT_EQ(c.behaviour.admission_delay_s, 4);
  EXPECT_FALSE(c.behaviour.kueue);
  EXPECT_TRUE(c.behaviour.preempt_lower_priority);
  EXPECT_FALSE(c.behaviour.cluster_queues_readable);
  const InitialWorkload& w = c.workloads.at(0);
  EXPECT_EQ(w.count, 2);
  EXPECT_EQ(w.num_slices, 2);
  EXPECT_EQ(w.namespace_, "team");
  EXPECT_EQ(w.env.at("FLEET_STEPS"), "3");
  EXPECT_EQ(w.env.at("FLEET_DURATION_S"), "10");
  EXPECT_EQ(w.env.at("FLEET_OUTCOME"), "succeed");
  EXPECT_EQ(w.env.at("FLEET_EXIT_CODE"), "0");
}

// The two-word behaviours: Kueue's withinClusterQueue setting, and whether the API grants
// ClusterQueues. A third word names both choices; the defaults are Never and readable.
TEST(FleetConfig, TwoWordBehavioursNameTheirChoices) {
  const auto problems_with = [](const std::string& behaviour) {
    return problems_of(R"(clusters:
  a:
    project: p
    zone: us-east5-a
    cluster_id: a-1
    capacity: {tpu-v4-8: 1}
    behaviour: {)" + behaviour +
                       "}\n");
  };
  EXPECT_THAT(problems_with("preemption: Always"),
              HasSubstr("clusters.a.behaviour.preemption: must be Never or LowerPriority"));
  EXPECT_THAT(problems_with("clusterqueues: hidden"),
              HasSubstr("clusters.a.behaviour.clusterqueues: must be forbidden or readable"));
  const ClusterBehaviour defaults =
      parse_fleet_config(kMinimal, "fleet.yaml").clusters.at(0).behaviour;
  EXPECT_FALSE(defaults.preempt_lower_priority);
  EXPECT_TRUE(defaults.cluster_queues_readable);
}

TEST(FleetConfig, MissingRequiredFieldsNameFileLineAndField) {
  const std::string problems = problems_of(R"(clusters:
  broken:
    zone: us-central2-b
    capacity: {tpu-v4-8: 1}
)");
  EXPECT_THAT(problems, HasSubstr("fleet.yaml:3:5: clusters.broken.project: missing required key"));
  EXPECT_THAT(problems, HasSubstr("clusters.broken.cluster_id: missing required key"));
}

TEST(FleetConfig, RejectsUnknownKeysWithTheirPosition) {
  const std::string problems = problems_of(std::string(kMinimal) + "\nunexpected: 1\n");
  EXPECT_THAT(problems, AllOf(HasSubstr("fleet.yaml:9:1: unexpected: unknown key"),
                              HasSubstr("expected one of: xpk, time_scale")));
  EXPECT_THAT(problems_of(R"(clusters:
  c:
    project: p
    zone: z
    cluster_id: c
    capacity: {t: 1}
    behaviour: {probe_latency: 5}
)"),
              HasSubstr("fleet.yaml:7:17: clusters.c.behaviour.probe_latency: unknown key"));
}

TEST(FleetConfig, RejectsWrongTypesAndRanges) {
  const std::string problems = problems_of(R"(
xpk: {table_style: v2.0, version: "1.13"}
time_scale: fast
defaults: {outcome: maybe, exit_code: 0, steps: -1}
clusters:
  c:
    project: p
    zone: z
    cluster_id: c
    capacity: {tpu-v4-8: many}
    behaviour: {unreachable: sometimes, flaky: {every: 2, probability: 0.5}}
)");
  EXPECT_THAT(problems, HasSubstr("xpk.table_style: must be v1.9 or v1.7, got 'v2.0'"));
  EXPECT_THAT(problems, HasSubstr("xpk.version: must look like v1.13.1, got '1.13'"));
  EXPECT_THAT(problems, HasSubstr("time_scale: must be a number, got 'fast'"));
  EXPECT_THAT(problems, HasSubstr("defaults.outcome: must be succeed or fail, got 'maybe'"));
  EXPECT_THAT(problems, HasSubstr("defaults.exit_code: must be between 1 and 255, got 0"));
  EXPECT_THAT(problems, HasSubstr("defaults.steps: must be between 0 and"));
  EXPECT_THAT(problems, HasSubstr("clusters.c.capacity.tpu-v4-8: must be an integer, got 'many'"));
  EXPECT_THAT(problems, HasSubstr("clusters.c.behaviour.unreachable: must be true or false"));
  EXPECT_THAT(problems, HasSubstr("clusters.c.behaviour.flaky: set either every or probability"));
}

TEST(FleetConfig, RejectsClustersXpkCouldNotAddress) {
  const std::string problems = problems_of(R"(clusters:
  one:
    project: p
    zone: z
    cluster_id: Same_Name
    capacity: {t: 1}
  two:
    project: p
    zone: z2
    cluster_id: shared
    capacity: {t: 1}
  three:
    project: p
    zone: z3
    cluster_id: shared
    capacity: {t: 1}
)");
  EXPECT_THAT(problems, HasSubstr("clusters.one.cluster_id: 'Same_Name' is not a valid cluster "
                                  "name for xpk"));
  EXPECT_THAT(problems, HasSubstr("clusters.three.cluster_id: cluster 'shared' in project 'p' "
                                  "is already defined by 'two'"));
}

TEST(FleetConfig, RejectsInitialWorkloadsTheClusterCannotRun) {
  const std::string problems = problems_of(R"(clusters:
  c:
    project: p
    zone: z
    cluster_id: c
    capacity: {tpu-v4-8: 1}
    workloads:
      - {name: ok, device_type: tpu-v4-8}
      - {name: gpu, device_type: a100-40gb-8}
      - {name: Bad, device_type: tpu-v4-8}
      - {name: ok, device_type: tpu-v4-8}
      - {name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, count: 10, device_type: tpu-v4-8}
      - {device_type: tpu-v4-8, priority: urgent}
)");
  EXPECT_THAT(problems, HasSubstr("clusters.c.workloads[1].device_type: the cluster has no "
                                  "capacity entry for 'a100-40gb-8'"));
  EXPECT_THAT(problems, HasSubstr("clusters.c.workloads[2].name: 'Bad' is not a valid xpk "
                                  "workload name"));
  EXPECT_THAT(problems, HasSubstr("clusters.c.workloads[3].name: duplicate workload 'ok'"));
  EXPECT_THAT(problems, HasSubstr("clusters.c.workloads[4].name: "
                                  "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-10' is not a valid"));
  EXPECT_THAT(problems, HasSubstr("clusters.c.workloads[5].name: missing required key"));
  EXPECT_THAT(problems, HasSubstr("clusters.c.workloads[5].priority: must be one of very-low"));
}

constexpr const char* kWithManager = R"(
clusters:
  mk:
    project: p
    zone: us-central2-b
    cluster_id: mk
    capacity: {}
  a:
    project: p
    zone: us-central2-b
    cluster_id: a
    capacity: {tpu-v4-8: 1}
  b:
    project: p
    zone: us-central2-b
    cluster_id: b
    capacity: {tpu-v4-8: 1}
)";

TEST(FleetConfig, ManagerSectionHasDocumentedDefaults) {
  EXPECT_FALSE(parse_fleet_config(kMinimal, "fleet.yaml").manager.has_value());
  const FleetConfig config = parse_fleet_config(
      std::string(kWithManager) + "manager: {cluster: mk, workers: [b, a]}\n", "fleet.yaml");
  ASSERT_TRUE(config.manager.has_value());
  const ManagerSpec& m = *config.manager;
  EXPECT_EQ(m.cluster, "mk");
  EXPECT_EQ(m.dispatcher, "kueue.x-k8s.io/multikueue-dispatcher-all-at-once");
  EXPECT_TRUE(m.all_at_once());
  EXPECT_EQ(m.step_size, 3);
  EXPECT_EQ(m.round_s, 300);
  EXPECT_EQ(m.admission_check, "multikueue");
  EXPECT_EQ(m.config, "multikueue-config");
  EXPECT_EQ(m.workers, (std::vector<std::string>{"b", "a"}));  // configuration order
  EXPECT_TRUE(config.clusters.at(0).capacity.empty());         // {} allowed for the manager
}

TEST(FleetConfig, ManagerSectionReadsEveryKey) {
  const FleetConfig config = parse_fleet_config(std::string(kWithManager) + R"(manager:
  cluster: mk
  dispatcher: kueue.x-k8s.io/multikueue-dispatcher-incremental
  step_size: 1
  round_s: 60
  admission_check: mk-check
  config: mk.config
  workers: [a, b]
)",
                                                "fleet.yaml");
  const ManagerSpec& m = config.manager.value();
  EXPECT_TRUE(m.incremental());
  EXPECT_EQ(m.step_size, 1);
  EXPECT_EQ(m.round_s, 60);
  EXPECT_EQ(m.admission_check, "mk-check");
  EXPECT_EQ(m.config, "mk.config");
  const FleetConfig external =
      parse_fleet_config(std::string(kWithManager) +
                             "manager: {cluster: mk, workers: [a], dispatcher: falcon.dev/x}\n",
                         "fleet.yaml");
  EXPECT_TRUE(external.manager->external());
}

TEST(FleetConfig, RejectsAManagerSectionThatNamesWhatTheFleetLacks) {
  const std::string problems = problems_of(std::string(kWithManager) + R"(manager:
  cluster: ghost
  dispatcher: incremental
  step_size: 0
  round_s: 0
  admission_check: Multi_Kueue
  workers: [a, a, nowhere, mk]
  extra: 1
)");
  EXPECT_THAT(problems, HasSubstr("fleet.yaml:19:12: manager.cluster: 'ghost' is not a cluster of "
                                  "clusters:"));
  EXPECT_THAT(problems, HasSubstr("manager.dispatcher: 'incremental' is not a dispatcher name"));
  EXPECT_THAT(problems, HasSubstr("manager.step_size: must be between 1 and 100, got 0"));
  EXPECT_THAT(problems, HasSubstr("manager.round_s: must be between 1 and 86400, got 0"));
  EXPECT_THAT(problems, HasSubstr("manager.admission_check: 'Multi_Kueue' is not a Kubernetes "
                                  "object name"));
  EXPECT_THAT(problems, HasSubstr("manager.workers[1]: 'a' is listed twice"));
  EXPECT_THAT(problems, HasSubstr("manager.workers[2]: 'nowhere' is not a cluster of clusters:"));
  EXPECT_THAT(problems, HasSubstr("manager.extra: unknown key"));
  // The manager's own cluster is not a worker; workers are required; an empty capacity is the
  // manager's privilege.
  EXPECT_THAT(problems_of(std::string(kWithManager) + "manager: {cluster: a, workers: [a, b]}\n"),
              AllOf(HasSubstr("manager.workers[0]: 'a' is the manager cluster, not a worker"),
                    HasSubstr("clusters.mk.capacity: must name at least one device type")));
  EXPECT_THAT(problems_of(std::string(kWithManager) + "manager: {cluster: mk}\n"),
              HasSubstr("manager.workers: missing required key"));
  EXPECT_THAT(problems_of(std::string(kWithManager) + "manager: {cluster: mk, workers: []}\n"),
              HasSubstr("manager.workers: must be a non-empty list of fleet cluster names"));
}

TEST(FleetConfig, ReportsYamlSyntaxErrorsWithPosition) {
  EXPECT_THAT(problems_of("clusters:\n  c: {project: p\n"),
              HasSubstr("fleet.yaml:3:1: invalid YAML"));
  EXPECT_THAT(problems_of("- just\n- a list\n"),
              HasSubstr("fleet.yaml: the fleet file must be a mapping with a clusters: section"));
  EXPECT_THAT(problems_of("xpk: {}\n"), HasSubstr("clusters: missing required key"));
}

TEST(FleetConfig, NamesAnUnreadableFile) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "missing.yaml").string();
  try {
    load_fleet_config(path);
    FAIL() << "loaded a missing file";
  } catch (const FleetConfigError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": cannot read the fleet file");
  }
}

}  // namespace
}  // namespace falcon::fleet
