// Selection policies and their signals (issue 15, docs/selection.md is the reference).
//
// A decision has two halves, both pure functions here so that a recorded decision can be
// replayed and every number tested on a fake clock:
//
//   1. compute_signals: one candidate's probe plus its history in the state store over the
//      signal window (ClusterHistory, read by load_cluster_history) -> ClusterSignals:
//      queue depth, running, drain rate, recent admission wait, health, probe latency.
//   2. rank_candidates: the candidates (eligible or not, with their signals) under a policy ->
//      one CandidateScore each (terms, weights, contributions, total, rank, verdict) and the
//      winner. priority: the spec's order; score: the weighted formula of ScoreWeights;
//      least-wait: the smallest predicted_wait_s.
//
//   falcon::ClusterHistory h = falcon::load_cluster_history(store, "tpu-a", "v4-64", now, window);
//   falcon::ClusterSignals s = falcon::compute_signals(probe, probe_ms, h, now, settings.signals);
//   falcon::RankedCandidates r = falcon::rank_candidates(policy, settings, inputs);
//
// replay_selection re-decides a recorded ClusterSelection (from `cluster select --json`, the
// store, or GET /v1/selections/ID) from its recorded signals, under any policy, without probing.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "falcon/config.h"
#include "falcon/model.h"
#include "falcon/state_store.h"

namespace falcon {

// What the state store remembers of one cluster over the signal window [now - window, now].
struct ClusterHistory {
  std::vector<ProbeRecord> probes;    // oldest first
  std::vector<WorkloadEvent> events;  // the cluster's observed workload changes, oldest first
  // For workloads that went RUNNING in the window: since when they were queued (falcon's
  // submission time, else their first QUEUED observation).
  std::map<std::string, StoreTime> queued_since;
  int submits = 0;          // submissions recorded on the cluster in the window
  int submit_failures = 0;  // consecutive failed submits (the cluster x accelerator breaker)
};

// Reads `cluster`'s history for `accelerator` from `store`. Throws StateStoreError.
ClusterHistory load_cluster_history(StateStore& store, const std::string& cluster,
                                    const std::string& accelerator, StoreTime now,
                                    std::chrono::seconds window);

// The signals of one candidate (docs/selection.md "Signals"):
//   queue_depth, running   from `probe`
//   drain_per_min          admissions in the window per minute: the larger of the RUNNING
//                          transitions among the events and the sum of queue-depth decreases
//                          between consecutive probes (this one last), over the time the
//                          history covers (at most the window). Null with fewer than two
//                          probes and no event, or when the history covers under a minute.
//   recent_wait_s          mean of (RUNNING observed - queued_since) over the window's
//                          admissions; null when none is known
//   admission_delay_s      from `probe` (kube backend): how long the cluster's recent
//                          Workloads waited between quota reservation and admission
//   health                 (reachable probes + submits + this probe if reachable) /
//                          (probes + submits + submit failures + 1)
//   latency_ms             mean duration of the window's probes; `probe_ms` when none
ClusterSignals compute_signals(const ClusterProbeResult& probe, std::optional<double> probe_ms,
                               const ClusterHistory& history, StoreTime now,
                               const SignalSettings& settings);

// The predicted admission wait of a new workload on a cluster (least-wait, and the score's
// `wait` term): 0 with an empty queue; else (queue_depth + 1) / drain rate, where a drain rate
// of 0 counts as one admission per window (an upper bound) and an unknown one as
// prior_drain_per_min; plus the cluster's admission delay when known (its quota reserved, a
// workload still waits that long for admission checks such as node provisioning). Null when
// the queue depth is unknown.
std::optional<double> predicted_wait_s(const ClusterSignals& signals,
                                       const SignalSettings& settings);

// The request's slice as capacity sees it: its chips (xpk's table: VMs per slice x chips per
// VM) and the GKE accelerator label whose quota it draws on. nullopt for a type outside xpk's
// table (or a CPU type: no accelerator chips).
struct SliceShape {
  std::string device_type;  // canonical: "v4-64"
  std::string accelerator;  // "tpu-v4-podslice", "nvidia-h100-80gb"
  double chips = 0;         // 32 for v4-64
};
std::optional<SliceShape> slice_shape(const std::string& accelerator_type);

// Fills the capacity signals of `signals` (slice_chips, free_chips, nominal_chips,
// largest_free_block, fragmentation, largest_block) from `probe.capacity` for
// `accelerator_type`: the flavors named for that very type when there are any, else every flavor
// of its GKE accelerator (summed; the largest free block and the largest block are the largest of
// theirs, each known only when every flavor gives it).
// Left null when the probe has no matching flavor (xpk backend): neutral in every policy.
void apply_capacity(ClusterSignals& signals, const ClusterProbeResult& probe,
                    const std::string& accelerator_type);

// Why the request's slice cannot be placed on a cluster with `signals` now: no block as large as
// the slice at all (never_fits), fewer free chips than the slice, or (fragmentation) no free
// block as large as the slice. nullopt when it fits or capacity is not known.
std::optional<std::string> capacity_misfit(const ClusterSignals& signals);

// Why the request's slice can never be placed on a cluster with `signals`, however much of it
// frees up: its nominal quota, or its largest block, is smaller than the slice. nullopt when it
// could be, or capacity is not known. Waiting for room there, or evicting for it, is futile.
std::optional<std::string> never_fits(const ClusterSignals& signals);

// Whether a candidate of a decision can admit the request now (late binding: the dispatcher's
// hold_until_room, the supervisor's move of a queued workload): eligible, nothing queued ahead
// of it (counting `queued_by_caller` more placed there by the caller and not in the probe yet),
// and no capacity misfit.
bool admits_now(const CandidateScore& candidate, int queued_by_caller = 0);

// One candidate as rank_candidates takes it, in preference order (slot priority, file order).
struct CandidateInput {
  std::string cluster;
  int priority = 1;
  int max_queue_depth = 5;
  std::string skip_reason;  // non-empty: not eligible (unreachable, queue full, breaker open)
  ClusterSignals signals;
};

struct RankedCandidates {
  std::vector<CandidateScore> scores;  // one per input, in input order
  std::optional<std::size_t> winner;   // index of the selected one; null when none is eligible
  std::string summary;                 // the winner's verdict, for ClusterSelection::reason
};

// Ranks `candidates` under `policy` (docs/selection.md "Policies"). Ties in score or predicted
// wait go to the priority policy's order (slot priority, smaller queue, file order). Under score
// and least-wait, with settings.fragmentation.require_fit, an eligible candidate whose signals
// say the slice cannot fit (capacity_misfit) is skipped with that reason.
RankedCandidates rank_candidates(SelectionPolicy policy, const SelectionSettings& settings,
                                 const std::vector<CandidateInput>& candidates);

// Decides again on a recorded selection's candidates and signals, under `policy`, without
// probing. Candidates recorded ineligible stay so, with their recorded reason. Throws
// std::invalid_argument when the record has no scores (made before issue 15) or names a
// candidate twice. The result's decided_at is `now`, its selection_id 0; the verdicts say
// which policy decided.
ClusterSelection replay_selection(const ClusterSelection& recorded, SelectionPolicy policy,
                                  const SelectionSettings& settings, StoreTime now);

}  // namespace falcon
