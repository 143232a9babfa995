// ClusterSelector: picks the cluster to run on, from live probes (the spec's algorithm, DESIGN D9).
//
//   1. Candidates: registry.find_by_accelerator(type), by ascending priority then file order.
//      None -> NoAvailableClusterError("no cluster supports <type>").
//   2. Every candidate is probed in parallel on a bounded pool (selection.max_parallel_probes
//      threads at most), each probe with its own deadline (the cluster's probe_timeout_s), so a
//      selection takes about as long as its slowest probe when the pool is wide enough, not the
//      sum of all probes. A candidate the prober answers at once (ClusterProber::cached: a
//      probe cache) is taken on the calling thread first; threads start only for the others,
//      so a selection answered wholly from a cache starts none.
//   3. Eligible: reachable and queue_depth <= max_queue_depth. Each probed candidate's signals
//      are computed from its probe and its history (the optional HistoryLoader; scoring.h), and
//      the eligible ones ranked by the accelerator's policy (selection.policy, default priority:
//      the lowest priority number wins; ties go to the smaller queue depth, then to file
//      order; score and least-wait in docs/selection.md). The reason reads
//      `selected <name>: reachable, queue_depth=<N> <= max=<M>` (plus the policy's figure for
//      score and least-wait); ClusterSelection::scores explains every candidate.
//   A gate (optional, e.g. the circuit breakers of circuit_breaker.h) is asked about every
//   candidate before step 2: a candidate it refuses is not probed and is skipped with the
//   gate's reason (its probe result reads reachable=false, error "not probed: <reason>").
//   4. No eligible candidate -> NoAvailableClusterError carrying every probe result, with a
//      message naming, for each candidate, why it was skipped:
//        no available cluster for tpu-v4-64 (2 candidates):
//          tpu-a: unreachable: probe timed out after 15s
//          tpu-b: queue full: queue_depth=7 > max=5
//
//   falcon::ClusterSelector selector(registry, prober, config.selection, clock);
//   falcon::ClusterSelection s = selector.select("tpu-v4-128");  // s.selected_cluster, ...
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "falcon/clock.h"
#include "falcon/config.h"
#include "falcon/model.h"
#include "falcon/prober.h"
#include "falcon/registry.h"
#include "falcon/scoring.h"

namespace falcon {

class ClusterSelector {
 public:
  // nullopt: the candidate may be probed; else why it is skipped (one line).
  using CandidateGate = std::function<std::optional<std::string>(
      const ClusterConfig& cluster, const std::string& accelerator_type)>;
  // A candidate's history over the signal window ending at `now` (e.g. load_cluster_history
  // on the state store), shared so that a cache can hand out one history to many decisions
  // without copying it. May throw or answer null: the candidate's signals then come from its
  // probe alone.
  using HistoryLoader = std::function<std::shared_ptr<const ClusterHistory>(
      const ClusterConfig& cluster, const std::string& accelerator_type, StoreTime now)>;

  // Keeps references to `registry` and `prober`: both must outlive the selector. The registry
  // is read on every select(), so a reload takes effect on the next selection.
  ClusterSelector(const ClusterRegistry& registry, const ClusterProber& prober,
                  SelectionSettings settings, std::shared_ptr<Clock> clock, CandidateGate gate = {},
                  HistoryLoader history = {});

  // Selects a cluster for `accelerator_type` as in the file comment. Blocks while probing.
  // Throws NoAvailableClusterError (no candidate, or none eligible). A probe that throws counts
  // as unreachable, with the exception's message as its error. Safe to call from many threads.
  ClusterSelection select(const std::string& accelerator_type) const;

  // Steps 2-4 on an explicit candidate list (cluster, slot priority), in preference order:
  // what select() does after asking the registry. Exposed for callers that already hold the
  // candidates (and for tests). Throws NoAvailableClusterError as select() does.
  ClusterSelection select_among(const std::string& accelerator_type,
                                const std::vector<std::pair<ClusterConfig, int>>& candidates) const;

 private:
  const ClusterRegistry& registry_;
  const ClusterProber& prober_;
  SelectionSettings settings_;
  std::shared_ptr<Clock> clock_;
  CandidateGate gate_;
  HistoryLoader history_;
};

}  // namespace falcon
