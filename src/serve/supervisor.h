// The supervisor of managed workloads in `falcon serve` (issue 16, docs/self-healing.md).
//
// A managed workload is one the supervisor brings back when the platform loses it: it watches
// the current incarnation (`<name>`, then `<name>-r1`, `<name>-r2`, ...) through the workload
// list of its cluster, classifies what went wrong (classify() below, pure), and recovers an
// infrastructure failure on another cluster: circuit-breaker failure for the old cluster, cancel
// the old incarnation where reachable, select again without that cluster, submit
// `<name>-r<k>` with FALCON_RECOVERY_COUNT=k and FALCON_PREVIOUS_WORKLOAD=<old name> in its
// environment, bounded attempts with exponential back-off.
//
// Never two live copies: the replacement is submitted only once the old incarnation is known to
// be gone (cancel confirmed, not listed, or finished) or its cluster has been unreachable for
// supervisor.fencing_lease_s (then it is fenced: deleted as soon as its cluster answers again,
// found by a list of that cluster every supervisor.fenced_poll_s).
//
// Every incident is a RecoveryRecord in the state store with its SVRT phases. Replicas: only the
// holder of the store lease `supervisor` acts; the others wait for it to lapse.
//
//   falcon::Supervisor sup({.control = control, .store = store, .clock = clock,
//                           .settings = config->supervisor});
//   sup.start();   // the loop: every interval_s, take/renew the lease, check every workload
//   ...
//   sup.stop();    // releases the lease so another replica takes over at once
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "falcon/clock.h"
#include "falcon/config.h"
#include "falcon/model.h"
#include "falcon/state_store.h"
#include "serve/api_server.h"

namespace falcon {

struct Recovery;  // client.h
namespace serve {
class PrometheusText;
}  // namespace serve

inline constexpr const char* kIncidentInfrastructure = "infrastructure";
inline constexpr const char* kIncidentApplication = "application";

// The lease the acting replica holds.
inline constexpr const char* kSupervisorLease = "supervisor";

// Managed workload states: ManagedState (state_store.h).

// --- The classifier (pure).

// One look at an incarnation.
struct IncarnationObservation {
  StoreTime at;
  bool reachable = true;  // the cluster answered its workload list
  std::string error;      // why not
  // Not reachable: when another source (the health loop's probes) last saw the cluster answer;
  // unset when it has not, or does not know.
  StoreTime answered_elsewhere{};
  bool listed = false;           // the incarnation is on that list
  std::string state;             // QUEUED | RUNNING | COMPLETED | FAILED (when listed)
  std::optional<int> exit_code;  // FAILED: the failure's EXIT_CODE from the logs, when known
};

// What is remembered of an incarnation between looks. A time_since_epoch() of zero: not set.
struct IncarnationMemory {
  bool was_running = false;
  StoreTime running_since{};        // RUNNING continuously since
  StoreTime unreachable_since{};    // the cluster has not answered since
  StoreTime requeued_since{};       // QUEUED again after RUNNING (evicted / preempted) since
  StoreTime failed_unread_since{};  // FAILED with no exit code readable from its logs since
};

enum class Verdict {
  kHealthy,         // QUEUED (never ran), RUNNING
  kPending,         // something is wrong, within its grace period
  kCompleted,       // finished successfully
  kInfrastructure,  // recover
  kApplication,     // the workload's own failure: recover only with recover_on_failure
};
const char* to_string(Verdict v);

struct Classification {
  Verdict verdict = Verdict::kHealthy;
  std::string cause;         // for people: "cluster tpu-a unreachable for 61s: ..."
  StoreTime violation_at{};  // the first observation of the failure (pending and incidents)
  // The cluster itself failed (it stopped answering), not only this workload on it (a node
  // failure, a preemption, a deletion): only such incidents count in the cluster's breaker.
  bool cluster_fault = false;
};

// Folds `obs` into `memory` and classifies, with supervisor.unreachable_grace_s and
// supervisor.readmit_grace_s:
//   unreachable for >= unreachable_grace_s                       infrastructure
//     (counted from the first failed look, or from obs.answered_elsewhere when the health
//     loop saw the cluster answer later: lost only when no source has seen it for the grace)
//   RUNNING, then QUEUED again for >= readmit_grace_s (evicted)   infrastructure
//   not listed any more (deleted by the platform, or never made)  infrastructure
//   FAILED with EXIT_CODE 137 or 143 (workers killed: SIGKILL, SIGTERM, no application failure)
//                                                                infrastructure
//   FAILED with another exit code                                application
//   FAILED with no exit code readable from the logs              pending for unreachable_grace_s
//     (logs arrive late: Cloud Logging's ingestion lag, a failed log read), then application
//   COMPLETED                                                    completed
// `cluster` names the cluster in causes.
Classification classify(IncarnationMemory& memory, const IncarnationObservation& obs,
                        const SupervisorSettings& settings, const std::string& cluster);

// --- SVRT.

// The phases of an incident in seconds; null where an end is not reached.
struct SvrtPhases {
  std::optional<double> svrt;       // recovered - t_violation
  std::optional<double> detection;  // detected - t_violation
  std::optional<double> decision;   // decided - detected
  std::optional<double> submit;     // submitted - decided
  std::optional<double> admission;  // admitted - submitted
  std::optional<double> stability;  // recovered - admitted
};
SvrtPhases svrt_phases(const RecoveryRecord& r);

// A recovery as the API and the CLI show it (client.h): its times in RFC 3339 UTC, its phases
// in seconds, rounded to the millisecond.
Recovery recovery_of(const RecoveryRecord& r);
// {name, incarnation, cluster, state, recoveries (attempts), max_recoveries, stable_after_s,
//  recover_on_failure, accelerator_type, created_at, updated_at}.
nlohmann::json managed_json(const ManagedWorkloadRecord& m);

// --- Admission.

struct ManageOptions {
  int max_recoveries = 3;
  std::chrono::milliseconds stable_after{300000};
  bool recover_on_failure = false;
};

// How long a record may stay `submitting` (its server died during the submit) before the
// supervisor treats it as `starting` (and a missing incarnation as lost).
inline constexpr std::chrono::minutes kSubmittingGrace{10};

// A managed workload's name leaves room for "-r<k>" within xpk's 40 characters.
inline constexpr std::size_t kMaxManagedNameLength = 36;

// Hands `spec` to the supervisor and submits it to `cluster`: the managed record is stored
// first (state submitting, which the supervisor leaves alone for kSubmittingGrace), then the
// workload submitted and the record moved to starting; a failed submit deletes the record and
// rethrows. Throws WorkloadSubmitError ("... already exists", the API's 409) when the name is
// managed already, InvalidWorkloadSpecError for a name longer than kMaxManagedNameLength, and
// what ControlPlane::submit throws.
WorkloadHandle submit_managed(ControlPlane& control, StateStore& store, const Clock& clock,
                              const std::string& cluster, const WorkloadSpec& spec,
                              const ManageOptions& options, std::int64_t selection_id = 0);

// Where a workload went (POST /v1/workloads): its handle, and the decision that chose its
// cluster when none was named.
struct Placement {
  WorkloadHandle handle;
  std::optional<Decision> selection;
};

// Selects the best cluster for spec.accelerator_type when `cluster` is not given
// (ControlPlane::select_explained), then submits there with the decision's id recorded with the
// submission (`selection_id` with a `cluster`: the caller's earlier decision), as a managed
// workload (submit_managed) when `managed` is given. Throws NoAvailableClusterError from the
// selection, and what the submit throws.
Placement place_workload(ControlPlane& control, StateStore& store, const Clock& clock,
                         const WorkloadSpec& spec, const std::optional<std::string>& cluster,
                         std::int64_t selection_id, const std::optional<ManageOptions>& managed);

// What cancel_workload did.
struct CancelOutcome {
  bool cancelled = false;  // ControlPlane::cancel of the handle named
  // The managed workload the handle was an incarnation of, now cancelled; nullopt when none.
  std::optional<std::string> managed;
};

// A person cancels `handle` (DELETE /v1/workloads/{cluster}/{name}). When it names a managed
// workload that has not ended (by the name it was submitted under, on any cluster) or one of
// its incarnations (its current one, the one a recovery is replacing, or the replacement being
// submitted), that managed workload is marked cancelled first, by
// compare-and-set against the supervisor's writes, so the cancel wins over a recovery in
// flight: the supervisor stops, and deletes a replacement it created meanwhile. Then its
// current incarnation is deleted when that is another workload, and `handle` last. Throws what
// ControlPlane::cancel throws for `handle` (WorkloadNotFoundError: not for an incarnation of a
// managed workload, which may be gone already), and StateStoreError when the cancel cannot be
// recorded (nothing is deleted then).
CancelOutcome cancel_workload(ControlPlane& control, StateStore& store, const Clock& clock,
                              const WorkloadHandle& handle);

// --- The supervisor.

struct SupervisorOptions {
  std::shared_ptr<ControlPlane> control;  // required
  std::shared_ptr<StateStore> store;      // required
  std::shared_ptr<Clock> clock;           // null: the system clock
  SupervisorSettings settings;
  std::string holder;  // this replica's name in the lease; empty: <hostname>:<pid>:<random>
  // Told what the supervisor does (incidents, recoveries, lease changes): level, message. Called
  // from the pass's threads, possibly at once.
  std::function<void(const std::string&, const std::string&)> on_event;
  // How many managed workloads a pass handles at once (the replacements of a killed cluster):
  // their looks, cancels, submits and store writes overlap; their decisions are made one at a
  // time, each counting the placements decided before it. 1: one after the other, in name order.
  int parallel = 4;
};

class Supervisor {
 public:
  explicit Supervisor(SupervisorOptions options);
  ~Supervisor();  // stop()
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts the loop (idempotent): every interval_s (and at least every lease_ttl_s / 3) run_once;
  // and every fenced_poll_s sweep_fenced.
  void start();
  // Ends the loop, waits for a pass in progress, releases the lease (idempotent).
  void stop();
  // One pass at the clock's now: takes or renews the lease; holding it, first cancels the
  // fenced incarnations whose cluster answers again, then checks every managed workload and
  // advances its state machine (SupervisorOptions::parallel at a time, in name order). Returns
  // whether this replica holds the lease. Losing the lease mid-pass stops the pass before the next
  // action.
  bool run_once();
  // What the loop's second thread does every supervisor.fenced_poll_s between passes: lists each
  // cluster that has fenced incarnations and deletes those listed once it answers (a revived
  // cluster admits a fenced copy it still queues at once). Returns how many it deleted; nothing
  // unless this replica holds the lease.
  int sweep_fenced();

  bool leader() const;
  const std::string& holder() const;
  void set_settings(const SupervisorSettings& settings);  // after a reload

  // falcon_recovery_phase_seconds{phase}, falcon_recoveries_total{kind,outcome},
  // falcon_supervisor_leader.
  void write_metrics(serve::PrometheusText& out) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace falcon
