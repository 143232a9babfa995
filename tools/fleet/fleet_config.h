// The fleet file: which simulated GKE clusters exist, what they can run, how they misbehave, and
// how the fake xpk in front of them talks. Plain structs with documented defaults, validated in
// one place (parse_fleet_config). examples/local-fleet.yaml is a complete, commented example.
//
//   xpk:                        # the installed xpk being imitated (one binary for all clusters)
//     version: v1.13.1          # "[XPK] Starting xpk v1.13.1"; < v1.9 refuses duplicate names
//                               # instead of prompting, < v1.8 treats --filter-by-job as a regex
//     table_style: v1.9         # v1.9 ('{:<w}' + 3 spaces, "TPU/GPU VMs ...") | v1.7 (tabwriter)
//     supports_namespace: false # accept --namespace on `workload create` (stock xpk has none)
//     progress_lines: true      # "[XPK] Waiting for `...`, for 0 seconds...\r" on create/delete
//   time_scale: 60              # simulated seconds per real second: durations shrink by it,
//                               # reported times are the wall clock's; 0: moves only when told
//   defaults:                   # for every workload, unless its --env says otherwise
//     duration_s: 600           # simulated run time (FLEET_DURATION_S)
//     outcome: succeed          # succeed | fail (FLEET_OUTCOME)
//     exit_code: 1              # exit code of a failing workload (FLEET_EXIT_CODE)
//     steps: 100                # training steps each pod logs (FLEET_STEPS)
//     log_lines_per_step: 1     # lines per step (the first is the step_time line)
//   logs:
//     omit_completion_index_every: 0  # every Nth pod logs without the completion-index label
//   buckets: [falcon-logs]      # Cloud Storage buckets that exist from the start
//   workers_per_slice:          # pods per slice by device type, over the built-in table
//     tpu-v4-64: 8
//   clusters:                   # name -> cluster; name, project, zone, cluster_id as in repos.yaml
//     tpu-v4-prod:
//       project: falcon-local   # required
//       zone: us-central2-b     # required: a zone, or a region (as repos.yaml's zone)
//       cluster_id: tpu-v4-a    # required
//       location: ...           # where the GKE cluster is: its zone (zonal cluster) or its
//                               # region (regional); default: zone. gcloud finds the cluster
//                               # only there; also Cloud Logging's resource.labels.location
//       capacity: {tpu-v4-64: 2}  # workloads that run at once, per device type (required);
//                                 # xpk's names, or the spec's tpu- spelling of a TPU name
//       topology:                 # optional, slice-shaped capacity: chips in blocks (a TPU
//         tpu-v4-podslice: [128, 64]  # node pool / ICI domain) per GKE accelerator label; a
//                                 # workload of a type with that label is admitted only when
//                                 # each of its slices fits in a free contiguous run of one
//                                 # block (first fit), on top of `capacity`
//       behaviour: {probe_latency_ms: 0, command_latency_ms: 0, unreachable: false,
//                   flaky: {every: 0, probability: 0, seed: 1}, slow: false,
//                   slow_latency_ms: 30000, admission_delay_s: 0, kueue: true,
//                   flap: {period_s: 0, down_s: 0, offset_s: 0}}
//       workloads:              # present when the fleet starts
//         - {name: warm, count: 1, device_type: tpu-v4-64, num_slices: 1, priority: medium,
//            namespace: default, duration_s: <defaults>, outcome: <defaults>, env: {}}
//   manager:                    # optional: a MultiKueue manager (manager.h) in the fleet
//     cluster: mk-manager       # required: a cluster of `clusters:` whose Kubernetes API serves
//                               # the manager's objects (its capacity may be {})
//     dispatcher: kueue.x-k8s.io/multikueue-dispatcher-all-at-once  # Kueue's
//                               # multiKueue.dispatcherName: ...-all-at-once (default),
//                               # kueue.x-k8s.io/multikueue-dispatcher-incremental, or any
//                               # other name: an external dispatcher PATCHes the nominations
//     step_size: 3              # incremental: workers nominated per round (1..100)
//     round_s: 300              # incremental: simulated seconds per round (1..86400)
//     admission_check: multikueue        # the AdmissionCheck's name
//     config: multikueue-config          # the MultiKueueConfig's name
//     workers: [tpu-a, tpu-b]   # required: fleet clusters (not the manager), in configuration
//                               # order; their MultiKueueClusters have these names
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace falcon::fleet {

// Thrown by load_fleet_config / parse_fleet_config. what() lists every problem, one per line,
// each as `file:line:col: field.path: problem`.
class FleetConfigError : public std::runtime_error {
 public:
  explicit FleetConfigError(std::vector<std::string> problems);
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

enum class TableStyle { kV19, kV17 };
enum class Outcome { kSucceed, kFail };

const char* to_string(TableStyle style);  // "v1.9" | "v1.7"
const char* to_string(Outcome outcome);   // "succeed" | "fail"
// Accepts succeed/success/complete/completed and fail/failure/failed (any case).
std::optional<Outcome> parse_outcome(std::string_view text);

struct XpkProfile {
  std::string version = "v1.13.1";
  TableStyle table_style = TableStyle::kV19;
  bool supports_namespace = false;
  bool progress_lines = true;

  // major * 100 + minor of `version` ("v1.13.1" -> 113); 10000 when it does not parse.
  int version_number() const;
  // xpk >= 1.9 prompts on a duplicate name; older versions refuse it.
  bool prompts_on_duplicate() const { return version_number() >= 109; }
  // xpk >= 1.8 filters --filter-by-job by substring; older versions by regex (awk).
  bool filter_by_substring() const { return version_number() >= 108; }
};

struct FlakySpec {
  int every = 0;             // fail every Nth kubectl call on the cluster (0: never)
  double probability = 0.0;  // or fail each call with this probability, drawn from `seed`
  std::uint64_t seed = 1;
};

// A cluster that goes down and comes back on a schedule of simulated time: unreachable (as
// `unreachable: true`) while (t - fleet start + offset_s) mod period_s < down_s.
struct FlapSpec {
  int period_s = 0;  // 0: never
  int down_s = 0;
  int offset_s = 0;
};

struct ClusterBehaviour {
  int probe_latency_ms = 0;    // real time `workload list` spends fetching credentials
  int command_latency_ms = 0;  // the same for create and delete
  bool unreachable = false;    // the control plane never answers: every command exits 1
  FlakySpec flaky;
  bool slow = false;  // every command also waits slow_latency_ms (probe timeouts)
  int slow_latency_ms = 30000;
  int admission_delay_s = 0;  // simulated seconds between QuotaReserved and Admitted
  // false: the cluster has no Kueue CRDs (kueue.x-k8s.io is absent from its API): `kubectl get
  // workloads` fails with `the server doesn't have a resource type "workloads"` and the API
  // answers 404 under /apis/kueue.x-k8s.io (FleetSimulator::set_kueue changes it at run time)
  bool kueue = true;
  FlapSpec flap;
  // Kueue's ClusterQueue spec.preemption.withinClusterQueue: false is Never (the default), true
  // is LowerPriority: a pending workload that does not fit evicts running workloads of lower
  // priority, the lowest and most recently started first, as few as make room (`preemption:
  // LowerPriority` in the fleet file). A preempted workload is requeued on the same cluster and
  // resumes from its last checkpoint (FLEET_CHECKPOINT_S) or, without one, from the start.
  bool preempt_lower_priority = false;
  // false: the caller's grant has no kueue.x-k8s.io clusterqueues (`clusterqueues: forbidden` in
  // the fleet file): every get, list or watch of a ClusterQueue answers 403 Forbidden, as the
  // API server does under RBAC; Workloads stay readable
  // (FleetSimulator::set_cluster_queues_readable changes it at run time)
  bool cluster_queues_readable = true;
};

struct RunDefaults {
  double duration_s = 600;
  Outcome outcome = Outcome::kSucceed;
  int exit_code = 1;
  int steps = 100;
  int log_lines_per_step = 1;
};

struct InitialWorkload {
  std::string name;  // with count > 1, workloads are named <name>-1 .. <name>-<count>
  int count = 1;
  std::string device_type;
  int num_slices = 1;
  std::string priority = "medium";
  std::string namespace_ = "default";
  std::map<std::string, std::string> env;  // the same FLEET_* overrides as `--env`
};

struct FleetCluster {
  std::string name;
  std::string project;
  std::string zone;
  std::string cluster_id;
  std::string location;  // the GKE cluster's zone or region; defaults to zone

  // A regional cluster's location is a region; a zonal cluster's, a zone.
  bool regional() const;
  std::map<std::string, int> capacity;
  // GKE accelerator label ("tpu-v4-podslice") -> chips of each block, in order.
  std::map<std::string, std::vector<int>> topology;
  ClusterBehaviour behaviour;
  std::vector<InitialWorkload> workloads;
};

// MultiKueue's built-in dispatchers (Kueue's multiKueue.dispatcherName); any other name is an
// external dispatcher.
inline constexpr std::string_view kDispatcherAllAtOnce =
    "kueue.x-k8s.io/multikueue-dispatcher-all-at-once";
inline constexpr std::string_view kDispatcherIncremental =
    "kueue.x-k8s.io/multikueue-dispatcher-incremental";

// The fleet file's `manager:` section: a MultiKueue manager cluster (manager.h).
struct ManagerSpec {
  std::string cluster;  // the fleet cluster whose Kubernetes API serves the manager's objects
  std::string dispatcher = std::string(kDispatcherAllAtOnce);
  int step_size = 3;                           // incremental: workers nominated per round
  double round_s = 300;                        // incremental: simulated seconds per round
  std::string admission_check = "multikueue";  // the AdmissionCheck's name
  std::string config = "multikueue-config";    // the MultiKueueConfig's name
  std::vector<std::string> workers;            // fleet clusters, in configuration order

  bool all_at_once() const { return dispatcher == kDispatcherAllAtOnce; }
  bool incremental() const { return dispatcher == kDispatcherIncremental; }
  bool external() const { return !all_at_once() && !incremental(); }
};

struct LogSettings {
  int omit_completion_index_every = 0;
};

struct FleetConfig {
  std::string source_path;
  XpkProfile xpk;
  double time_scale = 60.0;
  RunDefaults defaults;
  LogSettings logs;
  std::map<std::string, int> workers_per_slice;
  std::vector<FleetCluster> clusters;  // in file order
  // Cloud Storage buckets that exist from the start (in the first cluster's project), as a
  // user's export bucket does before the first export.
  std::vector<std::string> buckets;
  std::optional<ManagerSpec> manager;  // the `manager:` section, when present
};

// Reads and validates the fleet file. Throws FleetConfigError naming the file, the line and the
// field of every problem: unreadable file, YAML syntax, unknown or missing keys, wrong types,
// out-of-range values, two clusters with the same (project, cluster_id), initial workloads with
// bad names or a device type the cluster has no capacity entry for, a `manager:` section naming
// clusters the fleet does not have.
FleetConfig load_fleet_config(const std::string& path);

// Same, from text; `source_name` stands in for the path in messages.
FleetConfig parse_fleet_config(std::string_view yaml_text, const std::string& source_name);

}  // namespace falcon::fleet
