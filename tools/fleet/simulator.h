// The fleet simulator: per cluster, Kueue-like admission of JobSet workloads by device type,
// their run, their end, and the log lines their pods write while they run.
//
// Life of a workload (durations are simulated seconds; SimClock turns them into spans of the
// fleet's clock, which in scaled mode is the wall clock, so every time reported is <= now):
//   created ─► QUEUED (QuotaReserved=False, "couldn't assign flavors ...") while the cluster's
//   capacity for its device type is in use; the best queued workload (priority, then age) is
//   admitted as soon as a slot frees
//   ─► RUNNING (QuotaReserved=True, then Admitted admission_delay_s later; pods start then)
//   ─► COMPLETED or FAILED after its duration (Finished, with JobSet's own messages);
//   finished rows stay listed until ttlSecondsAfterFinished (default 12 h) has passed.
// Deleting a workload removes it at once; running pods print their SIGTERM lines.
//
// Faults (the control API's chaos routes, fleet_control.h):
//   kill_cluster / revive_cluster   the control plane stops answering (as behaviour.unreachable:
//                                   every kubectl call and the Kubernetes API fail); with
//                                   KillMode::kFail its nodes go too: running workloads end
//                                   FAILED at once (no last log lines: the nodes vanished) and
//                                   nothing is admitted until it is revived
//   evict                           Kueue preempts a workload: its pods get SIGTERM
//   (EXIT_CODE=143),
//                                   it goes back to QUEUED with Evicted/Preempted/Requeued
//                                   conditions and is readmitted (from scratch, new pods) after
//                                   readmit_after_s, or never
//   fail_node                       the platform kills the worker on a node (EXIT_CODE=137 or 143,
//                                   no application error); JobSet (xpk's --max-restarts 0) fails
//                                   the workload, its other workers get SIGTERM
//   fail_next_creates               the next N creates (`kubectl apply`) fail with a TLS
//                                   handshake timeout, as a transient API-server failure prints
//
// Run parameters come from the fleet file's defaults, overridden per workload by `--env`:
//   FLEET_DURATION_S=<seconds>    simulated running time (decimal allowed)
//   FLEET_OUTCOME=succeed|fail
//   FLEET_EXIT_CODE=<n>           exit code of the failing pod (non-zero alone implies fail)
//   FLEET_STEPS=<n>               training steps each pod logs
//   FLEET_LOG_LINES_PER_STEP=<n>  lines per step
//   FLEET_LOG_LINES=<n>           every pod prints exactly n lines (overrides the two above)
//   FLEET_OMIT_INDEX_EVERY=<n>    every nth pod logs without the completion-index label
//   FLEET_PREGENERATE_LOGS=1      write the whole run's logs at create time, as though the
//                                 workload started at once (for big log benchmarks; the one
//                                 case where log timestamps lie ahead of the clock)
// An unparseable value is ignored and reported in the state dump (`env_warnings`).
//
// The simulator is passive: it moves only when a method is called (each call first runs the
// simulation up to the clock's now) or when advance() is. All methods are thread-safe; log
// entries are handed to the LogSink after the internal lock is released.
//
// With a `manager:` section in the fleet file the simulator also runs a MultiKueue manager
// (manager.h) over its clusters, in the simulation's own time order: while the manager has work,
// running the simulation to now stops at every instant where something happens (a run ends, a
// workload is readmitted, a round or flap of the manager's) and lets the manager act there.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fleet/device_types.h"
#include "fleet/fleet_config.h"
#include "fleet/log_sink.h"
#include "fleet/pod_logs.h"
#include "fleet/sim_clock.h"

namespace falcon::fleet {

class MultiKueueManager;
class WorkerAccess;

// What `xpk workload create` asks for.
struct CreateRequest {
  std::string workload;
  std::string device_type;     // the --tpu-type or --device-type value
  bool tpu_type_flag = false;  // it came from --tpu-type
  int num_slices = 1;
  int num_nodes = 1;  // GPU only
  std::string priority = "medium";
  std::string command;
  std::string docker_image;
  std::string docker_name = "jax-tpu";
  std::string namespace_ = "default";
  std::map<std::string, std::string> env;
  std::int64_t ttl_seconds_after_finished = 43200;
};

enum class CreateResult {
  kCreated,
  kReplaced,             // overwrite=true and a workload of that name existed
  kAlreadyExists,        // overwrite=false and a workload of that name exists
  kNoCapacityForDevice,  // the cluster has no node pool (capacity entry) for the device type
};

// One row of `xpk workload list`, as xpk computes it for the configured table style. An empty
// optional prints as `<none>`.
struct WorkloadRow {
  std::string name;
  std::string namespace_;
  std::string created;  // RFC 3339, seconds, Z
  std::string priority;
  std::optional<int> vms_needed;
  std::optional<int> vms_running;
  std::optional<int> vms_done;
  std::optional<std::string> status;  // QuotaReserved | Admitted | Finished | Unknown
  std::optional<std::string> message;
  std::optional<std::string> status_time;
  std::string state;  // the simulator's truth: QUEUED | RUNNING | COMPLETED | FAILED
  // Every Kueue condition, in the Workload's order, as the Kubernetes API shows them (each
  // with its own transition time: QuotaReserved when quota was reserved, Admitted when the
  // admission delay ended). Empty for a row built without them (kube_api.cc then derives them
  // from the shown one).
  struct Condition {
    std::string type;
    bool status = true;
    std::string reason;
    std::string message;
    std::string time;  // RFC 3339, seconds, Z
  };
  std::vector<Condition> conditions;
};

// A kubectl call that failed (unreachable or flaky cluster): what kubectl printed on stderr.
struct KubectlFailure {
  std::string stderr_text;
  int exit_code = 1;
};

struct ListResult {
  std::optional<KubectlFailure> failure;
  std::vector<WorkloadRow> rows;  // sorted by namespace, then name
};

struct CreateOutcome {
  std::optional<KubectlFailure> failure;
  CreateResult result = CreateResult::kCreated;
};

struct ExistsOutcome {
  std::optional<KubectlFailure> failure;
  bool exists = false;
};

struct DeleteOutcome {
  std::optional<KubectlFailure> failure;
  bool deleted = false;  // false: no such workload (kubectl's NotFound)
};

// Bulk log writing for benchmarks: `lines_per_rank` entries for each rank (worker index in
// `slice`) of a workload, spaced `interval_ns` apart from `start_ns` (default: ending at now). The
// workload need not exist; when it does, its pods' names are used.
struct GenerateRequest {
  std::string cluster;  // fleet cluster name
  std::string workload;
  std::string namespace_ = "default";
  std::vector<int> ranks{0};
  int slice = 0;
  std::size_t lines_per_rank = 1000;
  std::optional<std::int64_t> start_ns;
  std::int64_t interval_ns = 1'000'000;
  bool omit_completion_index = false;
};

struct GenerateResult {
  std::size_t written = 0;
  std::vector<std::string> pod_names;  // in `ranks` order
};

// What becomes of a killed cluster's workloads.
enum class KillMode {
  kKeep,  // only the control plane is gone: workloads run on, unseen (behaviour.unreachable)
  kFail,  // the nodes went with it: running workloads fail, nothing is admitted until revived
};

struct EvictRequest {
  std::string cluster;
  std::string workload;
  bool readmit = true;         // false: stays QUEUED (its quota held by the preemptor)
  double readmit_after_s = 0;  // simulated seconds before Kueue may admit it again
  std::string preemptor_uid;   // in the message; default: a UID derived from the workload
};

struct NodeFailRequest {
  std::string cluster;
  std::string workload;  // with slice/worker, or empty with `node`
  std::string node;      // a node name from state() (pods[].node)
  int slice = 0;
  int worker = 0;
  int exit_code = 137;  // 137 (SIGKILL) or 143 (SIGTERM)
};

struct FaultResult {
  std::string workload;
  std::string state;              // the workload's state afterwards
  std::vector<std::string> pods;  // the pods killed by the platform (fail_node)
};

// A fault that cannot be applied: the message says why (unknown cluster/workload, not running).
class FaultError : public std::runtime_error {
 public:
  FaultError(int status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }  // 400 or 404

 private:
  int status_;
};

class FleetSimulator {
 public:
  // Creates the clusters and their initial workloads (admitted at the clock's now).
  FleetSimulator(FleetConfig config, std::shared_ptr<SimClock> clock,
                 std::shared_ptr<LogSink> sink);
  ~FleetSimulator();
  FleetSimulator(const FleetSimulator&) = delete;
  FleetSimulator& operator=(const FleetSimulator&) = delete;

  const FleetConfig& config() const { return config_; }
  SimClock& clock() const { return *clock_; }

  // The fleet name of the cluster xpk means by (project, zone, cluster_id): the cluster with
  // that project and cluster_id (GKE names are unique per project; a zone is not needed to find
  // one). When several locations have the name, the one whose zone or region matches `zone`.
  std::optional<std::string> resolve(const std::string& project, const std::string& zone,
                                     const std::string& cluster_id) const;
  // The cluster's definition. Throws std::out_of_range for an unknown name.
  const FleetCluster& cluster(const std::string& name) const;

  // Runs the simulation up to the clock's now: finishes, admissions, log lines, TTL expiry.
  void advance();

  // Checkpoints. A running workload writes a checkpoint at the end of each of its steps. One
  // started with FALCON_FENCE_URI and FALCON_FENCE_EPOCH (falcon's storage fencing,
  // include/falcon/fence.h) first checks its fence, as a training loop calls `falcon fence
  // check` before it writes: `reader` gives the epoch stored at the URI (nullopt: none), and an
  // epoch above the workload's own refuses the write (counted in state(): `fence_refusals`;
  // the copy writes nothing more, though it runs on until it is deleted). Without a reader, or
  // without the variables, every checkpoint is written. state() lists each workload's writes
  // (`checkpoints_ns`), so that a bench can count writes by a superseded copy.
  using FenceReader = std::function<std::optional<std::int64_t>(const std::string& uri)>;
  void set_fence_reader(FenceReader reader);

  // `kubectl get workloads`: every workload of the cluster. Counts as one kubectl call.
  ListResult list(const std::string& cluster);
  // xpk's existence check before a create (`kubectl get workloads`): fails only when the
  // cluster is unreachable; not counted as a kubectl call for flakiness.
  ExistsOutcome exists(const std::string& cluster, const std::string& workload,
                       const std::string& namespace_);
  // Whether the cluster has a node pool (a capacity entry) for `device_type`; "v4-64" and
  // "tpu-v4-64" name the same type.
  bool offers(const std::string& cluster, const std::string& device_type) const;
  // `kubectl apply` of the JobSet, after xpk's existence check. Counts as one kubectl call.
  CreateOutcome create(const std::string& cluster, const CreateRequest& request, bool overwrite);
  // `kubectl delete jobset <name>` (any namespace). Counts as one kubectl call.
  DeleteOutcome remove(const std::string& cluster, const std::string& workload);

  // Whether the cluster has Kueue's CRDs (behaviour.kueue); set_kueue installs or removes them
  // (the workloads stay in the simulation, unseen while the CRDs are absent). Both throw
  // std::out_of_range for an unknown cluster.
  bool kueue_installed(const std::string& cluster) const;
  void set_kueue(const std::string& cluster, bool installed);
  // Whether the API grants ClusterQueues (behaviour.cluster_queues_readable); false answers 403
  // to them. Throws std::out_of_range for an unknown cluster.
  void set_cluster_queues_readable(const std::string& cluster, bool readable);

  // Kueue's ClusterQueue `cluster-queue` of the cluster, as xpk sets it up, from its simulated
  // capacity (docs in kube_api.h): nominal quota and usage per flavor of the accelerator
  // resource, and the free runs of its topology blocks in the annotation
  // falcon.dev/free-blocks, their sizes in falcon.dev/blocks. Fails as a list does when the cluster
  // is down (not counted as a kubectl call); `forbidden` when the grant has none. Throws
  // std::out_of_range for an unknown cluster.
  struct ClusterQueueView {
    std::optional<KubectlFailure> failure;
    bool forbidden = false;  // the grant has no ClusterQueues (behaviour.cluster_queues_readable)
    nlohmann::json object;   // the ClusterQueue (kueue.x-k8s.io/v1beta1); null when not served
  };
  ClusterQueueView cluster_queue(const std::string& cluster);
  // The cluster's behaviour as it is now (kill/revive change `unreachable`). Throws
  // std::out_of_range for an unknown cluster.
  ClusterBehaviour behaviour(const std::string& cluster) const;

  // Faults (see the top of this file). All throw FaultError (404 unknown cluster or workload,
  // 400 a workload in no state to take the fault).
  void kill_cluster(const std::string& cluster, KillMode mode);
  void revive_cluster(const std::string& cluster);
  FaultResult evict(const EvictRequest& request);
  FaultResult fail_node(const NodeFailRequest& request);
  // The next `count` creates on the cluster fail (0 clears); returns how many are pending.
  int fail_next_creates(const std::string& cluster, int count);

  // Remembers that an xpk process used `kubeconfig` for the cluster (shown in state()).
  void record_kubeconfig(const std::string& cluster, const std::string& kubeconfig);

  // Writes logs directly; runs without holding the lock while entries are built and written.
  // Throws std::invalid_argument for an unknown cluster or an empty rank list.
  GenerateResult generate_logs(const GenerateRequest& request);

  // Everything, as JSON: clock, clusters, workloads (state, times, pods, lines written), call
  // counts, kubeconfigs seen. Also the format of --state-file.
  nlohmann::json state();
  // Replaces the clusters' workloads with those of a previous state() (same fleet file).
  // Throws std::invalid_argument when the JSON does not fit.
  void restore(const nlohmann::json& state);

  // Total log entries handed to the sink so far.
  std::size_t log_entries_written() const;

  // The MultiKueue manager (manager.h) when the fleet file has a `manager:` section, else null.
  // It lives as long as the simulator.
  MultiKueueManager* manager() const { return manager_.get(); }
  // For the manager: runs the simulation to the clock's now, then `fn` under the simulator's
  // lock with access to the clusters at now, then the manager's step at now (so that a change
  // `fn` made takes effect at once). Exceptions from `fn` propagate (after the step is skipped
  // and the log lines written).
  void with_workers(const std::function<void(WorkerAccess&)>& fn);
  // Why the cluster's API does not answer now (kubectl's words: unreachable, down in its flap
  // schedule), or nullopt. Not a kubectl call. Throws std::out_of_range for an unknown cluster.
  std::optional<std::string> unreachable_message(const std::string& cluster) const;

 private:
  struct Cluster;
  struct Workload;
  class Access;

  // Runs the simulation to `now`; with a busy manager, event by event with its steps between.
  std::vector<LogRun> advance_locked(std::int64_t now);
  // The clusters alone: finishes, admissions, log lines, TTL expiry up to `now`.
  std::vector<LogRun> run_clusters_locked(std::int64_t now);
  // The earliest instant at which a cluster has something to do (a run's end, a readmission).
  std::int64_t next_cluster_event_locked() const;
  // Deletes `w` from `c` at `now` (SIGTERM to running pods); the freed slot admits the next.
  void remove_locked(Cluster& c, Workload* w, std::int64_t now, std::vector<LogRun>& out);
  Cluster& cluster_locked(const std::string& name);
  const Cluster& cluster_locked(const std::string& name) const;
  std::optional<KubectlFailure> kubectl_fate_locked(Cluster& c);
  // Unreachable now: behaviour.unreachable, or down in its flap schedule.
  bool down_locked(const Cluster& c, std::int64_t now) const;
  CreateResult create_locked(Cluster& c, const CreateRequest& request, bool overwrite,
                             std::int64_t now, std::vector<LogRun>& out);
  void flush(std::vector<LogRun> runs);
  void make_pods(const Cluster& c, Workload& w);
  // The checkpoints `w` reached by `now` (set_fence_reader).
  void checkpoint_locked(Workload& w, std::int64_t now);
  // Of running `w`'s run, what its checkpoints (FLEET_CHECKPOINT_S) have kept by `t`: the run
  // a restart need not repeat; 0 without them.
  std::int64_t checkpointed_ns(const Workload& w, std::int64_t t) const;
  // Kueue evicts running `w` at `t` (preempted by the workload of UID `preemptor_uid`): SIGTERM
  // to its pods, quota released, requeued (admissible again from `readmit_at_ns`; kNever: held).
  // With FLEET_CHECKPOINT_S it resumes from its last checkpoint; without, from the start.
  // Returns the run it lost (since its last checkpoint, or its start).
  std::int64_t evict_locked(Cluster& c, Workload& w, std::int64_t t,
                            const std::string& preemptor_uid, std::int64_t readmit_at_ns,
                            std::vector<LogRun>& out);
  // ClusterQueue preemption (ClusterBehaviour::preempt_lower_priority) for queued `w` at `t`:
  // evicts the fewest running workloads of lower priority whose room lets `w` fit, given the
  // slots in use and the blocks' occupancy (both updated); false (nothing evicted) when even
  // all of them would not make room.
  bool preempt_for_locked(Cluster& c, Workload& w, std::map<std::string, int>& in_use,
                          std::map<std::string, std::vector<std::vector<char>>>& blocks,
                          std::int64_t t, std::vector<LogRun>& out);
  // The cluster named `name`, or FaultError 404 naming the known ones.
  Cluster& fault_cluster_locked(const std::string& name);
  Workload& running_workload_locked(Cluster& c, const std::string& name, const char* fault);

  FleetConfig config_;
  std::shared_ptr<SimClock> clock_;
  std::shared_ptr<LogSink> sink_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Cluster>> clusters_;
  std::uint64_t next_sequence_ = 1;
  std::int64_t start_ns_ = 0;  // the clock when the fleet started (flap schedules)
  std::atomic<std::size_t> entries_written_{0};
  // ClusterQueue preemptions (preempt_for_locked): workloads evicted, and the chip-seconds of
  // run they lost (since their last checkpoint, or since their start without one).
  std::uint64_t preempted_ = 0;
  double preempted_lost_chip_s_ = 0;
  FenceReader fence_reader_;
  std::unique_ptr<MultiKueueManager> manager_;
  bool stepping_ = false;  // the manager is acting: nested runs do not step it again
};

// RFC 3339 with whole seconds and Z, as Kubernetes prints timestamps: 2026-06-01T10:00:00Z.
std::string format_k8s_time(std::int64_t time_ns);

}  // namespace falcon::fleet
