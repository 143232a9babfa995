// The fleet's MultiKueue manager (Kueue's multi-cluster dispatch), when the fleet file has a
// `manager:` section (fleet_config.h): the objects a MultiKueue manager cluster holds and what
// its Kueue does with them, over the fleet's simulated worker clusters. Its Kubernetes API is
// manager_api.h; tools/fleet/README.md has the whole picture.
//
//   AdmissionCheck <admission_check>   controllerName kueue.x-k8s.io/multikueue, parameters the
//                                      MultiKueueConfig, Active True
//   MultiKueueConfig <config>          spec.clusters = the workers, in configuration order
//   MultiKueueCluster <worker>         one per worker, Active True while the worker's control
//                                      plane answers (not killed, unreachable, down in its flap
//                                      schedule, nor without Kueue), else False
//                                      (ClientConnectionFailed, with why)
//   Workload <namespace>/<name>        what users create (create_workload says what it takes)
//
// A Workload's life. Quota is reserved on the manager at once (its quota is unlimited:
// QuotaReserved True, status.admission, the admission check Pending). The dispatcher nominates
// workers in status.nominatedClusterNames:
//   all-at-once   every worker, sorted by name, at once
//   incremental   step_size workers in configuration order, step_size more every round_s
//                 simulated seconds (appended) until one admits it or all are nominated
//   external      none: an outside controller PATCHes them (patch_workload_status)
// A nominated worker whose MultiKueueCluster is Active gets a copy: a workload of the same name
// and namespace created through the simulator, with the device type, slices, priority class and
// env of the manager's Workload (a worker without a node pool for the type holds a copy that is
// never admitted: counted, but not in its simulation). A worker that is no longer nominated
// loses its copy. The first copy to get quota reserved on its worker (the simulator's QUEUED ->
// RUNNING; the earliest reservation, ties in configuration order) wins: status.clusterName is
// set, nominatedClusterNames cleared, the check Ready (`The workload was admitted on "W"`),
// Admitted True, and every other copy deleted. When the winning copy finishes, the Workload gets
// Finished (True, Succeeded or Failed, the copy's message) and the copy is deleted. Deleting the
// Workload deletes its copies. The manager sees and acts on a worker only while it is Active:
// copies owed a delete on an inactive worker are deleted when it is back, a copy admitted there
// counts from when it is seen.
//
// Time: the manager moves with the simulator, in the simulation's own time order (every
// admission, run end, round and flap instant is a step of its own), whether the clock is scaled
// or manual: FleetSimulator::advance() (and every simulator call) drives it, so a benchmark that
// advances the manual clock sees copies created, admitted and settled at their simulated
// instants. Counters and times per Workload are in FleetSimulator::state() under "manager".
//
// Not modelled: eviction or deletion of the winning copy on its worker after admission (the
// Workload stays admitted there), Kueue's workerLostTimeout, manager-side quota, preemption and
// LocalQueues, field managers. Not kept in the state file.
//
// Thread-safe: the model runs under the simulator's lock; watchers read the event log under a
// lock of its own and never hold the simulator's.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fleet/fleet_config.h"
#include "fleet/simulator.h"

namespace falcon::fleet {

// What the manager may do to the clusters, at the instant of the step it is called in. The
// simulator implements it under its lock; none of it counts as a kubectl call or fails as one.
class WorkerAccess {
 public:
  virtual ~WorkerAccess() = default;
  virtual std::int64_t now() const = 0;
  // Why the cluster's API does not answer now (kubectl's words), or nullopt when it does.
  virtual std::optional<std::string> unreachable(const std::string& cluster) const = 0;
  // The next instant after now at which its flap schedule changes that; kNeverNs without one.
  virtual std::int64_t next_reachability_change_ns(const std::string& cluster) const = 0;
  // A simulated duration as a span of the fleet's clock (SimClock::span_ns).
  virtual std::int64_t span_ns(std::int64_t simulated_ns) const = 0;

  struct Copy {
    std::uint64_t sequence = 0;  // the simulator's identity of that workload
    std::int64_t reserved_ns = -1;
    std::int64_t finished_ns = -1;
    bool failed = false;
    std::string finish_message;  // Kueue's Finished message, when finished
    int evictions = 0;           // times its worker's Kueue evicted it (preemption)
    std::string evict_message;   // the last eviction's
    double remaining_s = 0;      // simulated seconds of its run left (less once checkpointed)
  };
  // The workload `name` in `namespace_` on the cluster, or nullopt.
  virtual std::optional<Copy> find(const std::string& cluster, const std::string& name,
                                   const std::string& namespace_) const = 0;
  // Creates it (no overwrite); on success `sequence` is its identity.
  virtual CreateResult create(const std::string& cluster, const CreateRequest& request,
                              std::uint64_t& sequence) = 0;
  // Deletes the workload with that identity (its pods get SIGTERM); false when it is gone.
  virtual bool remove(const std::string& cluster, const std::string& name,
                      const std::string& namespace_, std::uint64_t sequence) = 0;

  static constexpr std::int64_t kNeverNs = INT64_MAX;
};

// A refusal in the Kubernetes API's terms (manager_api.cc answers it as a Status).
class ManagerError : public std::runtime_error {
 public:
  ManagerError(int code, std::string reason, const std::string& message, std::string field = "")
      : std::runtime_error(message),
        code_(code),
        reason_(std::move(reason)),
        field_(std::move(field)) {}
  int code() const { return code_; }                     // 400, 404, 409, 410, 415, 422
  const std::string& reason() const { return reason_; }  // NotFound, Conflict, Invalid, ...
  const std::string& field() const { return field_; }    // Invalid: the field at fault

 private:
  int code_;
  std::string reason_;
  std::string field_;
};

class MultiKueueManager {
 public:
  // Made by FleetSimulator for a fleet file with a `manager:` section.
  MultiKueueManager(FleetSimulator& simulator, ManagerSpec spec);
  ~MultiKueueManager();
  MultiKueueManager(const MultiKueueManager&) = delete;
  MultiKueueManager& operator=(const MultiKueueManager&) = delete;

  const ManagerSpec& spec() const { return spec_; }
  // The fleet's now (SimClock::now_ns), without running the simulation or taking its lock:
  // what a Table's Age column is counted to.
  std::int64_t now_ns() const;

  // The objects, as kueue.x-k8s.io/v1beta2 JSON (manager_api.cc relabels them for v1beta1).
  // Each call first runs the simulation to the clock's now. Workloads are listed in creation
  // order; `namespace_` empty: every namespace.
  std::vector<nlohmann::json> admission_checks();
  std::vector<nlohmann::json> multikueue_configs();
  std::vector<nlohmann::json> multikueue_clusters();
  std::vector<nlohmann::json> workloads(const std::string& namespace_);
  // Throws ManagerError 404 when there is none.
  nlohmann::json workload(const std::string& namespace_, const std::string& name);
  // The manager-wide resourceVersion: bumped by every change to any of its objects.
  std::uint64_t resource_version();

  // Creates a Workload from the object a client POSTs (kubectl create -f): metadata.name (or
  // generateName), labels, annotations; spec.queueName, spec.priorityClassName (very-low, low,
  // medium, high, very-high; default medium) and/or spec.priority, spec.podSets[0] (count,
  // template.spec.nodeSelector, template.spec.containers[0] name, image, command, args, env).
  // The device type of its copies: the label falcon.dev/accelerator-type (`v4-32` or
  // `tpu-v4-32`), else the pod set's nodeSelector (cloud.google.com/gke-tpu-accelerator with
  // cloud.google.com/gke-tpu-topology: the xpk type of that label and chips, or
  // cloud.google.com/gke-accelerator for a GPU); slices = count / pods per slice. Returns the
  // object as created. Throws ManagerError 400 (not a Workload, namespace mismatch), 409
  // AlreadyExists, 422 Invalid naming the field that cannot be mapped.
  nlohmann::json create_workload(const std::string& namespace_, const nlohmann::json& object);
  // Deletes the Workload and its copies; returns it as it was. Throws ManagerError 404.
  nlohmann::json delete_workload(const std::string& namespace_, const std::string& name);
  // A PATCH of workloads/<name>/status: `patch` in `content_type` (application/merge-patch+json
  // or application/json-patch+json). Only status.nominatedClusterNames may change (at most 20
  // names; refused while status.clusterName is set); a metadata.resourceVersion in the result
  // that is not the Workload's is a precondition that failed. Returns the object after the
  // patch. Throws ManagerError 400 (bad patch), 404, 409 Conflict, 415 (another patch type),
  // 422 Invalid.
  nlohmann::json patch_workload_status(const std::string& namespace_, const std::string& name,
                                       const std::string& content_type, const std::string& patch);

  // The manager's part of FleetSimulator::state(): its objects' wiring, the workers' status,
  // totals and per Workload (deleted ones too) the remote objects created and deleted and the
  // simulated times of creation, first nomination, admission (and the winner), finish.
  nlohmann::json state_json() const;

  // --- Watches (manager_api.cc streams them).
  struct Event {
    std::uint64_t resource_version = 0;
    std::string type;  // ADDED | MODIFIED | DELETED
    std::shared_ptr<const nlohmann::json> object;
  };
  // At most this many watches stream at once (each holds a server thread).
  static constexpr int kMaxWatches = 16;
  // The changes of Workloads kept for watches that resume from a resourceVersion.
  static constexpr std::size_t kEventHistory = 10'000;
  // Takes a watch slot: false when kMaxWatches are open or the watches are closed.
  bool open_watch();
  void close_watch();
  // The current Workloads and the resourceVersion they are at, taken together.
  std::vector<std::shared_ptr<const nlohmann::json>> snapshot(std::uint64_t& resource_version);
  enum class Wait { kEvents, kTimeout, kGone, kClosed };
  // Blocks until a change after `after` exists (kEvents: appended to `out` in order), `until`
  // passes (kTimeout), `after` is older than the history kept (kGone) or close_watches() is
  // called (kClosed).
  Wait wait_events(std::uint64_t after, std::chrono::steady_clock::time_point until,
                   std::vector<Event>& out);
  // Ends every watch and refuses new ones (the fleet is stopping). Idempotent.
  void close_watches();
  // Tests: keep fewer events than kEventHistory.
  void set_event_history(std::size_t events);

 private:
  friend class FleetSimulator;
  struct Workload;
  struct Worker;

  // The Workload a create asks for, validated (create_workload says how); no uid or time yet.
  std::unique_ptr<Workload> parse_workload(const std::string& namespace_,
                                           const nlohmann::json& body) const;

  // Called by the simulator under its lock: the next instant at which the manager has
  // something to do by itself (a round, a flap of a worker it waits on), and a step at now.
  std::int64_t next_event_ns(const WorkerAccess& access) const;
  bool busy() const;  // anything undecided, running or owed: the simulator steps it per event
  void step(WorkerAccess& access);

  bool update_workers(WorkerAccess& access);
  bool nominate(Workload& w, WorkerAccess& access);
  bool sync_copies(Workload& w, WorkerAccess& access);
  bool settle(Workload& w, WorkerAccess& access);
  bool follow(Workload& w, WorkerAccess& access);
  // The admitted copy was evicted on its worker: Kueue's MultiKueueRedoAdmissionOnEvictionInWorker
  // (the manager takes the Workload back, deletes the copy and dispatches it again).
  bool redo_admission(Workload& w, const WorkerAccess::Copy& seen, WorkerAccess& access);
  bool delete_copy(Workload& w, const std::string& worker, WorkerAccess& access);
  bool active(const std::string& worker) const;
  int worker_index(const std::string& worker) const;
  Workload* find(const std::string& namespace_, const std::string& name);
  // Bumps the resourceVersion of `w` and records the change for watches.
  void publish(Workload& w, const char* type);
  nlohmann::json object(const Workload& w) const;
  nlohmann::json cluster_object(const Worker& worker) const;

  // The device type `canonical` as the worker's capacity names it, or nullopt (no node pool).
  std::optional<std::string> offered_as(const std::string& worker,
                                        const std::string& canonical) const;

  FleetSimulator& sim_;
  ManagerSpec spec_;
  std::int64_t start_ns_ = 0;
  std::int64_t last_step_ns_ = 0;  // the simulator reads it to find the next instant to step
  std::uint64_t next_uid_ = 1;
  mutable std::atomic<std::uint64_t> generated_names_{0};  // generateName's suffixes
  // Guarded by the simulator's lock (every entry point goes through with_workers or a step).
  std::vector<std::unique_ptr<Worker>> workers_;  // configuration order
  std::vector<std::unique_ptr<Workload>> live_;   // creation order
  std::vector<Workload*> pending_;                // of live_: not finished (undecided or running)
  std::vector<std::unique_ptr<Workload>> gone_;   // deleted by users, for the counters
  std::size_t owed_ = 0;                          // copies owed a delete on an inactive worker
  std::uint64_t remote_created_ = 0;
  std::uint64_t remote_deleted_ = 0;

  // The published view: guarded by events_mu_ (watchers take only this lock).
  mutable std::mutex events_mu_;
  std::condition_variable events_cv_;
  std::uint64_t resource_version_ = 0;
  std::deque<Event> events_;
  std::uint64_t dropped_up_to_ = 0;  // the newest resourceVersion no longer in events_
  std::size_t history_ = kEventHistory;
  std::map<std::string, std::shared_ptr<const nlohmann::json>> current_;  // "ns/name" -> object
  std::vector<std::string> order_;  // keys of current_ in creation order
  int watches_ = 0;
  bool closed_ = false;
};

}  // namespace falcon::fleet
