// The facade's insides, shared by fabric.cc and doctor.cc.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "fabric/selection_epochs.h"
#include "falcon/circuit_breaker.h"
#include "falcon/fabric.h"
#include "falcon/state_store.h"
#include "xpk/xpk_cli.h"

namespace falcon {

// The modules built from one configuration snapshot. Replaced whole on reload, so a call in
// flight keeps using the modules it started with.
struct Modules {
  std::shared_ptr<const FabricConfig> config;
  std::shared_ptr<const xpk::XpkCli> xpk;  // shared by the prober, workloads and warm-up
  std::unique_ptr<ClusterProber> prober;
  std::unique_ptr<ClusterSelector> selector;
  std::unique_ptr<XpkWorkloadManager> workloads;
  std::unique_ptr<CloudLogRetriever> logs;
};

struct ClusterFabric::Impl {
  std::string config_path;
  FabricDependencies deps;
  // The state store, opened on first need (deps.state when given).
  mutable std::mutex state_mutex;
  mutable std::shared_ptr<StateStore> state;
  mutable bool state_tried = false;
  mutable std::string state_error;  // why it could not be opened
  ClusterRegistry registry;
  mutable std::mutex mutex;  // guards the modules pointer swap
  std::shared_ptr<Modules> modules;

  // Builds the modules from the registry's current snapshot and swaps them in.
  void build();
  // The state store, or null when it cannot be opened (said once through on_notice).
  std::shared_ptr<StateStore> store() const;
  // The same, throwing StateStoreError instead of answering null.
  std::shared_ptr<StateStore> store_or_throw() const;
  // Tells deps.on_notice, when set.
  void notice(const std::string& message) const;
  // Records probes in the history; a failure is noticed, never thrown.
  void record_probes(const std::vector<ProbeRecord>& probes) const;
  // Stores a decision and sets its selection_id; a failure is noticed and leaves it 0.
  void record_selection(ClusterSelection& selection) const;
  // Stores a decision that found no cluster (selected_cluster empty, the error's message as the
  // reason), for the audit trail; the caller gets the exception, not an id.
  void record_failed_selection(const NoAvailableClusterError& e) const;
  // select_cluster with live probes, under `policy` when given (else the configured one).
  ClusterSelection select_live(const std::string& accelerator_type,
                               std::optional<SelectionPolicy> policy) const;
  // select_cluster asking how.probe (and how.cached) instead of probing.
  ClusterSelection select_asking(const std::string& accelerator_type,
                                 const SelectOptions& how) const;
  std::shared_ptr<Modules> current() const;
  // The circuit breakers on the state store with the current settings, or null without a store.
  std::unique_ptr<CircuitBreakers> breakers() const;
  // The selector's gate: a candidate whose cluster or cluster x accelerator breaker is open is
  // skipped (the half-open trial claimed when one is due). A store failure is noticed and lets
  // the candidate through.
  // When `touched` is given, the gate sets it for a candidate with a breaker that is not closed
  // (or that could not be read).
  ClusterSelector::CandidateGate breaker_gate(
      std::shared_ptr<std::atomic<bool>> touched = nullptr) const;
  // The selector's history: load_cluster_history on the state store over the signal window. A
  // store failure is noticed (once per selection and cluster) and rethrown: the candidate's
  // signals then come from its probe alone. Null without a store.
  //
  // Histories are kept between decisions (`histories`): one is reused while nothing this fabric
  // wrote since has touched its cluster (history_changed) and it is younger than
  // kHistoryMaxAge, which bounds how late writes by other processes on a shared store (CLIs,
  // other replicas, the health loop's own recorder) show in the signals. Without it a decision
  // over 100 candidates read some 400 rows sets and parsed ~12,000 probes.
  ClusterSelector::HistoryLoader history_loader() const;
  // Records the state a probe's listing shows for each submission on `cluster` whose recorded
  // state is not terminal and differs (a workload event, as get_workload_status records one),
  // so that lists and the dashboard know a state nobody asked `job status` for. A store failure
  // is noticed.
  void observe_listing(const std::string& cluster,
                       const std::vector<WorkloadInfo>& workloads) const;
  // Drops the kept histories of `cluster`: this fabric wrote something they summarize (newer
  // data in the selection epoch).
  void history_changed(const std::string& cluster) const;

  static constexpr std::chrono::milliseconds kHistoryMaxAge{2000};
  struct KeptHistory {
    std::shared_ptr<const ClusterHistory> history;
    std::chrono::steady_clock::time_point loaded;
    std::uint64_t generation = 0;
  };
  mutable std::mutex history_mutex;
  // Key: cluster '\n' accelerator '\n' window in seconds.
  mutable std::map<std::string, KeptHistory> histories;
  // Bumped by history_changed; an entry loaded under an older generation is not used (a load
  // racing a write cannot keep the older picture).
  mutable std::map<std::string, std::uint64_t, std::less<>> history_generations;
  // selection_epoch(): history_changed and record_probe_shown move it as newer data, a breaker
  // this fabric changed and build() as a gate.
  mutable SelectionEpochs epochs;
  // Feeds a submit outcome (or a failure) to a breaker; failures to write are noticed.
  void feed_breaker(const std::string& key, bool success) const;
  // Feeds a probe of `cluster` to its breaker (ClusterFabric::record_probe_outcome).
  void feed_probe(const std::string& cluster, bool reachable,
                  std::optional<StoreTime> answering_since = std::nullopt) const;
  // The log query settings for a handle: the slice, and a lower time bound from submitted_at.
  LogQueryOptions query_options(const WorkloadHandle& handle, int slice) const;
};

// `falcon doctor`'s line for one probed cluster: ok when reachable, warn when reachable but its
// capacity could not be read (with the grant that fixes it), fail when unreachable (doctor.cc).
DoctorCheck cluster_check(const ClusterConfig& c, const ClusterProbeResult& r);

}  // namespace falcon
