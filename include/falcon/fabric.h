// ClusterFabric: the cluster layer's one entry point. Start reading here.
//
// The business layer (sessions, metrics, retries) sees only this class and the value types of
// model.h. Inside, it wires the spec's five modules:
//
//   ClusterRegistry     repos.yaml, loaded once (registry.h)
//   ClusterProber       one cluster's health via `xpk workload list` (prober.h)
//   ClusterSelector     best cluster for an accelerator, probing candidates in parallel
//   XpkWorkloadManager  submit / status / cancel / list through the xpk CLI (workload_manager.h)
//   CloudLogRetriever   per-rank pod logs from Cloud Logging, archived to GCS (log_retriever.h)
//   StateStore          falcon's memory (state_store.h, docs/state-store.md): submissions,
//                       every selection, probe history, observed workload states
//
// Typical flow:
//
//   falcon::ClusterFabric fabric("repos.yaml");                 // throws ClusterConfigError
//   falcon::ClusterSelection choice = fabric.select_cluster("tpu-v4-64");
//   falcon::WorkloadHandle h = fabric.submit_workload(choice.selected_cluster, spec);
//   while (!falcon::is_terminal_state(fabric.get_workload_status(h).state)) { /* wait */ }
//   for (const std::string& line : fabric.stream_pod_log(h, 0, {})) parse_metrics(line);
//   fabric.export_pod_logs(h, {}, "gs://falcon-tpu-v4/profiles/s-42/logs");
//
// Errors (errors.h) pass through unchanged: UnknownClusterError for a name the registry does
// not know, NoAvailableClusterError, WorkloadSubmitError, WorkloadNotFoundError,
// XpkCommandError, LogRetrievalError. Every method blocks the calling thread; all are safe to
// call from several threads at once. select -> submit is not atomic: the chosen cluster may
// have filled up in between; the caller retries or selects again (as the spec says).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "falcon/circuit_breaker.h"
#include "falcon/clock.h"
#include "falcon/command_runner.h"
#include "falcon/config.h"
#include "falcon/fabric_counters.h"
#include "falcon/fence.h"
#include "falcon/http_client.h"
#include "falcon/log_retriever.h"
#include "falcon/model.h"
#include "falcon/prober.h"
#include "falcon/registry.h"
#include "falcon/selector.h"
#include "falcon/workload_manager.h"

namespace falcon {

class StateStore;

// One line of `falcon doctor`: a check of this machine against what the layer needs.
struct DoctorCheck {
  std::string name;    // "xpk", "credentials", "cluster tpu-v4-prod", ...
  std::string status;  // "ok" | "warn" (works, but something is off) | "fail"
  std::string detail;  // what was found (versions, credential source; never a token)
  std::string fix;     // how to fix it; empty when ok
};

// {"name", "status", "detail", "fix" (null when empty)}.
void to_json(nlohmann::json& j, const DoctorCheck& v);

// A workload submitted where falcon chose (ClusterFabric::select_and_submit).
// What touched an accelerator type since a decision for it was made
// (ClusterFabric::selection_changed_since).
enum class SelectionChange { kNone, kNewerData, kGate };

struct PlacedWorkload {
  WorkloadHandle handle;
  ClusterSelection selection;  // the decision, recorded; the submission names it
};

// The effects the fabric needs. Tests pass fakes; a member left null gets the real one (POSIX
// processes, libcurl, the system clock), as the one-argument constructor does for all three.
struct FabricDependencies {
  std::shared_ptr<CommandRunner> runner;
  std::shared_ptr<HttpClient> http;
  std::shared_ptr<Clock> clock;
  // Optional: told when a log read or export waits for the Cloud Logging read quota or after a
  // transient failure (LogWaitNotice); the CLI prints it on stderr. The library prints nothing.
  LogWaitHandler on_log_wait;
  // The state store (state_store.h). Null: the fabric opens serve.state, else
  // default_state_url(<state_dir>) (SQLite at <state_dir>/falcon.db), on first need, and imports
  // <state_dir>/submissions.jsonl into it once (the file is left in place, read-only).
  //
  // The store is memory, not a precondition: when it cannot be opened (or a write fails), every
  // command still works (a submission is then not remembered, a selection gets no id, a name
  // lookup falls back to the cluster's default namespace) and on_notice says so. Only
  // state_store() throws StateStoreError.
  std::shared_ptr<StateStore> state;
  // Optional: told (one sentence, no prefix) when the state store cannot be opened (once per
  // fabric) or a write to it fails. The CLI prints it on stderr; the library prints nothing.
  std::function<void(const std::string&)> on_notice;
  // Optional: counts xpk calls (by verb and result), Cloud Logging reads (and 429s) and bytes
  // uploaded to Cloud Storage, for `falcon serve`'s /metrics (fabric_counters.h). Null: nothing
  // is counted.
  std::shared_ptr<FabricCounters> counters;
};

class ClusterFabric {
 public:
  // Loads `config_path` (ClusterRegistry::load) and creates the modules with real effects.
  // Throws ClusterConfigError.
  explicit ClusterFabric(const std::string& config_path);
  ClusterFabric(const std::string& config_path, FabricDependencies deps);
  ~ClusterFabric();

  // Reads and validates a configuration without building a fabric (`falcon config validate`).
  // Throws ClusterConfigError listing every problem.
  static FabricConfig check_config(const std::string& config_path);

  // Re-reads the configuration (e.g. on SIGHUP). On failure throws ClusterConfigError and keeps
  // the previous one.
  void reload();

  // --- Clusters
  std::vector<ClusterConfig> list_clusters() const;
  ClusterConfig get_cluster(const std::string& cluster) const;  // throws UnknownClusterError
  // Probes one cluster now and records the probe in the state store's history (backend "xpk",
  // its duration). Never throws for an unreachable cluster (reachable=false).
  ClusterProbeResult get_cluster_status(const std::string& cluster) const;
  // Probes `cluster` as given (not looked up in the registry) with the current xpk settings, and
  // records no probe: the probe function of `falcon serve`'s HealthMonitor, which records its
  // probes itself. Never throws for an unreachable cluster.
  //
  // Every xpk probe of the fabric (this one, get_cluster_status, a selection's) records the
  // state its listing shows for each of the fabric's submissions on the cluster that has not
  // reached a terminal state (a workload event, as get_workload_status records), so that the
  // health loop keeps every submission's state without anyone asking `job status`.
  ClusterProbeResult probe_cluster(const ClusterConfig& cluster) const;
  // Best cluster for `accelerator_type`, probing every candidate now. The probes go into the
  // probe history and the decision into the state store; its id is selection_id (0 when it
  // could not be stored: the selection stands). Throws NoAvailableClusterError (its probes are
  // recorded too, and the failed decision: selected_cluster empty, the message as the reason).
  //
  // Circuit breakers (circuit_breaker.h, selection.breaker): a candidate whose cluster breaker
  // or cluster x accelerator breaker is open is skipped unprobed with that reason; every probe
  // made here feeds the cluster's breaker (reachable: success), as does get_cluster_status;
  // submit_workload feeds the cluster x accelerator breaker (a WorkloadSubmitError: failure).
  ClusterSelection select_cluster(const std::string& accelerator_type) const;

  // What such a decision depended on besides its probes, for a caller that reuses decisions
  // (`falcon serve`, serve.select_reuse_ms).
  struct SelectionBasis {
    std::uint64_t epoch = 0;  // selection_epoch() as the decision started
    // Every candidate's breakers (cluster and cluster x accelerator) were closed and readable:
    // the decision claimed no half-open trial and hangs on no cool-down.
    bool breakers_closed = false;
  };
  using CachedProbeFunction =
      std::function<std::optional<ClusterProbeResult>(const ClusterConfig&)>;
  // How one selection is made, where it differs from select_cluster(type).
  struct SelectOptions {
    // Decide under this policy instead of the configured one (`cluster select --policy`).
    std::optional<SelectionPolicy> policy;
    // Ask `probe` for each candidate's health instead of probing: what `falcon serve` does
    // with its cache,
    //   fabric.select_cluster(type, {.probe = [&](const ClusterConfig& c) {
    //     return monitor.fresh(c, max_age).result; }});
    // The decision is recorded (selection_id; a failed one too); the probes are not (the
    // monitor records its own), nor fed to the breakers (a cached probe would be counted
    // again); open breakers are skipped. A `probe` that throws counts that candidate as
    // unreachable. Unset: every candidate is probed now, as select_cluster(type) does.
    ProbeFunction probe;
    // With `probe`: asked first for each candidate (on the calling thread); a result it
    // answers is used as is, and `probe` runs (on the selector's pool) only for the candidates
    // it answers nullopt for. A decision answered wholly by `cached` starts no thread.
    CachedProbeFunction cached;
    // With `probe`: filled in with what the decision depended on besides its probes.
    SelectionBasis* basis = nullptr;
  };
  // The same selection, made as `how` says. Throws NoAvailableClusterError, and
  // std::invalid_argument for `cached` or `basis` without `probe`.
  ClusterSelection select_cluster(const std::string& accelerator_type,
                                  const SelectOptions& how) const;
  // The epoch a decision starts on: one sequence that every input of this fabric's decisions
  // moves on (probes, submit outcomes and observed states in the histories, breakers it
  // changed, a reload; writes of other processes are not counted), each marking the accelerator
  // types it touches. selection_changed_since says what touched `accelerator_type` since a
  // decision read `epoch`: kGate when a breaker changed or the configuration was reloaded (a
  // decision made before may send work where it must not go now), kNewerData for newer probes
  // or histories only.
  std::uint64_t selection_epoch() const;
  SelectionChange selection_changed_since(const std::string& accelerator_type,
                                          std::uint64_t epoch) const;
  // A probe of `cluster` made elsewhere is now what decisions read (`falcon serve`'s probe
  // cache has it): moves the epoch of the types the cluster offers.
  void record_probe_shown(const std::string& cluster) const;
  // The circuit breakers are written here only. A probe of `cluster` made elsewhere (`falcon
  // serve`'s health loop, a cached probe standing for a breaker's trial) is fed to its breaker
  // as this fabric's own probes are: a failure counts; a success resets the count and closes a
  // half-open breaker, or an open one whose cool-down is over. A success does not cut a
  // cool-down short, unless `answering_since` says the cluster has answered every probe since
  // then and that is at least selection.breaker.cooldown_s ago (the health loop's evidence: a
  // cluster back for the first trip's cool-down is let back whatever its trip, as an active
  // health check un-ejects a host). record_cluster_failure counts a failure the caller saw
  // itself (the supervisor: a workload killed by the platform). Both mark the cluster's types as
  // a gate in the selection epoch when they change a breaker; a store that cannot be written is
  // noticed and changes nothing.
  void record_probe_outcome(const std::string& cluster, bool reachable,
                            std::optional<StoreTime> answering_since = std::nullopt) const;
  void record_cluster_failure(const std::string& cluster) const;
  // The circuit breakers of `cluster`: its own, then one per accelerator slot, as stored (closed
  // when never written). Empty when the state store cannot be opened. Throws
  // UnknownClusterError.
  std::vector<BreakerReport> cluster_breakers(const std::string& cluster) const;
  // Fetches every cluster's credentials into its own kubeconfig, in parallel (the spec's
  // start-up warm-up). One result per cluster; never throws for a cluster's failure.
  std::vector<WarmupResult> warm_up() const;

  // --- Workloads
  // Submits to the named cluster. The submission is recorded once, before xpk runs, with the
  // spec and `selection_id` (the recorded decision that chose the cluster; 0 when the caller
  // named it). Throws UnknownClusterError, WorkloadSubmitError.
  WorkloadHandle submit_workload(const std::string& cluster, const WorkloadSpec& spec,
                                 std::int64_t selection_id = 0);
  // Selects the best cluster for spec.accelerator_type (select_cluster) and submits there,
  // recording the submission with that decision: what `falcon job submit` without --cluster
  // does. Throws NoAvailableClusterError and as submit_workload; select -> submit is not atomic
  // (the cluster may have filled up in between).
  PlacedWorkload select_and_submit(const WorkloadSpec& spec);
  // State and times from `xpk workload list`. exit_code: 0 once COMPLETED (a JobSet completes
  // only when every worker exited 0, and xpk's script exits with the command's code); once
  // FAILED, the code the failing worker printed (CloudLogRetriever::failure_exit_code, one
  // Logging read, best effort: null when it is not in the logs or they cannot be read); else
  // null. Throws UnknownClusterError, XpkCommandError.
  WorkloadStatus get_workload_status(const WorkloadHandle& handle) const;
  // True once deleted. Throws WorkloadNotFoundError, UnknownClusterError, XpkCommandError.
  bool cancel_workload(const WorkloadHandle& handle);
  // Every workload of the cluster, optionally only those in `state_filter` (QUEUED, RUNNING,
  // COMPLETED, FAILED, UNKNOWN). Throws UnknownClusterError, XpkCommandError.
  std::vector<WorkloadInfo> list_workloads(const std::string& cluster,
                                           const std::optional<std::string>& state_filter) const;
  // A handle for a workload known only by name: namespace and submission time come from
  // falcon's submission record when falcon submitted it, else the cluster's default namespace
  // and an empty submitted_at. Throws UnknownClusterError.
  WorkloadHandle handle_for(const std::string& cluster, const std::string& workload_name) const;
  // Storage fencing (fence.h): advances managed workload `name`'s epoch object under
  // supervisor.fence and returns the ticket its next copy is started with; nullopt when no fence
  // is configured. Throws LogRetrievalError when the object cannot be read or written (the copy
  // must then not be started).
  std::optional<FenceTicket> advance_fence(const std::string& name) const;

  // --- Logs (cluster, workload and namespace come from the handle)
  // Lines of one rank, lazily (see CloudLogRetriever::stream_log). The lower time bound is
  // filter.since, else the handle's submitted_at minus a margin, else the last 24 hours.
  LogLines stream_pod_log(const WorkloadHandle& handle, int rank, const LogFilter& filter,
                          int slice = 0) const;
  // Polls for new lines until `options.should_stop` says so (`falcon job logs --follow`).
  void follow_pod_log(const WorkloadHandle& handle, int rank, const LogFilter& filter, int slice,
                      const FollowOptions& options,
                      const std::function<void(const std::string&)>& on_line) const;
  // follow_pod_log until the workload is done (`falcon job logs --follow`): options.should_stop
  // is follow_until_finished on the fabric's clock, asking get_workload_status every 15 s and
  // lingering follow_linger(options) after a terminal state, or after the cluster no longer
  // lists the workload (deleted); `interrupted` (e.g. Ctrl-C) stops at once.
  void follow_pod_log_until_finished(const WorkloadHandle& handle, int rank,
                                     const LogFilter& filter, int slice, FollowOptions options,
                                     const std::function<bool()>& interrupted,
                                     const std::function<void(const std::string&)>& on_line) const;
  // Throws std::invalid_argument for a rank of filter.ranks that a TPU workload falcon
  // submitted does not have (its slice has that many VMs); checks nothing for a workload whose
  // shape is unknown. Reads only the state store.
  void check_export_ranks(const WorkloadHandle& handle, const LogFilter& filter) const;
  // Archives the ranks of slice `slice` to `gcs_dest` (see CloudLogRetriever::export_logs).
  // Throws std::invalid_argument, before reading anything, for a rank a TPU workload falcon
  // submitted does not have (its slice has that many VMs).
  // This overload reads through entries:list (ExportVia::kRead), as it always did: a caller
  // that did not choose a path keeps the read quota's behaviour and needs no new permissions.
  LogExportResult export_pod_logs(
      const WorkloadHandle& handle, const LogFilter& filter, const std::string& gcs_dest,
      int slice = 0, const std::function<void(const ExportProgress&)>& progress = {}) const;
  // The same by the path `how.via` (ExportVia: auto, read, copy, sink; docs/log-export.md), with
  // the same rank objects (CloudLogRetriever::export_logs). For auto and sink without
  // how.window_end, the workload's end comes from `xpk workload list` (an xpk call; a workload
  // not ended, or not listed, has none, and then auto does not take the sink). How the
  // `POST /v1/exports` route supports `via`:
  //   ExportOptions how{.via = parse_export_via(body["via"]).value_or(ExportVia::kAuto),
  //                     .keep_staging = body.value("keep_staging", false),
  //                     .cancelled = [job] { return job->cancel_requested(); },
  //                     .on_status = [job](const ExportStatus& s) { job->set_status(s); }};
  //   fabric.export_pod_logs(handle, filter, dest, slice, how, on_progress);
  // Throws as the other overload, and LogRetrievalError with status CANCELLED once
  // how.cancelled said so.
  LogExportResult export_pod_logs(
      const WorkloadHandle& handle, const LogFilter& filter, const std::string& gcs_dest, int slice,
      const ExportOptions& how,
      const std::function<void(const ExportProgress&)>& progress = {}) const;

  // Checks this machine: the xpk and gcloud binaries and their versions, kubectl and
  // gke-gcloud-auth-plugin, which credential source resolves (never the token), that the
  // Logging and Storage endpoints answer with those credentials, and a probe of every cluster.
  // Blocks (each check has its own deadline); never throws for a failed check.
  std::vector<DoctorCheck> doctor() const;

  // The configuration in force (settings included).
  std::shared_ptr<const FabricConfig> config() const;

  // The state store: FabricDependencies::state, else the one the fabric opens on first need
  // (see there). Throws StateStoreError when it cannot be opened (it is tried once per fabric).
  std::shared_ptr<StateStore> state_store() const;

  // FabricDependencies::counters (null when none was given).
  std::shared_ptr<FabricCounters> counters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace falcon
