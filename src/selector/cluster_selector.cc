#include <exception>
#include <optional>

#include <fmt/format.h>

#include "falcon/errors.h"
#include "falcon/selector.h"
#include "process/bounded_parallel.h"
#include "util/time_format.h"

namespace falcon {
namespace {

// Why a probed candidate cannot be chosen, or nullopt when it can.
std::optional<std::string> skip_reason(const ClusterConfig& cluster,
                                       const ClusterProbeResult& probe) {
  if (!probe.reachable) {
    return "unreachable: " + probe.error.value_or("no error reported");
  }
  if (!probe.queue_depth) return std::string("unreachable: the probe reported no queue depth");
  if (*probe.queue_depth > cluster.max_queue_depth) {
    return fmt::format("queue full: queue_depth={} > max={}", *probe.queue_depth,
                       cluster.max_queue_depth);
  }
  return std::nullopt;
}

// Multi-line error texts are folded onto the candidate's line.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

// The decision over the candidates' probes and signals: the policy's winner, or
// NoAvailableClusterError with every candidate's reason and score. `gated[i]`: why candidate i
// was skipped unprobed (an open breaker).
ClusterSelection decide(const std::string& accelerator_type,
                        const std::vector<std::pair<ClusterConfig, int>>& candidates,
                        std::vector<ClusterProbeResult> results,
                        const std::vector<ClusterSignals>& signals,
                        const std::vector<std::optional<std::string>>& gated,
                        const SelectionSettings& settings, const Clock& clock) {
  std::vector<CandidateInput> inputs;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const auto& [cluster, priority] = candidates[i];
    CandidateInput input{.cluster = cluster.name,
                         .priority = priority,
                         .max_queue_depth = cluster.max_queue_depth,
                         .skip_reason = "",
                         .signals = signals[i]};
    if (gated[i]) {
      input.skip_reason = one_line(*gated[i]);
    } else if (auto why = skip_reason(cluster, results[i])) {
      input.skip_reason = one_line(*why);
    }
    inputs.push_back(std::move(input));
  }
  const SelectionPolicy policy = settings.policy_for(accelerator_type);
  RankedCandidates ranked = rank_candidates(policy, settings, inputs);

  if (!ranked.winner) {
    std::string message =
        fmt::format("no available cluster for {} ({} candidate{}):", accelerator_type,
                    candidates.size(), candidates.size() == 1 ? "" : "s");
    // Every reason, the policy's capacity rule's included.
    for (const CandidateScore& c : ranked.scores) {
      if (!c.skip_reason.empty()) message += fmt::format("\n  {}: {}", c.cluster, c.skip_reason);
    }
    NoAvailableClusterError error(std::move(message), accelerator_type, std::move(results));
    error.set_scores(to_string(policy), std::move(ranked.scores));
    throw error;
  }

  ClusterSelection selection;
  const ClusterConfig& chosen = candidates[*ranked.winner].first;
  selection.selected_cluster = chosen.name;
  selection.accelerator = accelerator_type;
  for (const auto& [cluster, priority] : candidates) selection.candidates.push_back(cluster.name);
  selection.reason = std::move(ranked.summary);
  selection.probe_results = std::move(results);
  selection.decided_at = format_iso8601(clock.now());
  selection.policy = to_string(policy);
  selection.scores = std::move(ranked.scores);
  return selection;
}

}  // namespace

ClusterSelector::ClusterSelector(const ClusterRegistry& registry, const ClusterProber& prober,
                                 SelectionSettings settings, std::shared_ptr<Clock> clock,
                                 CandidateGate gate, HistoryLoader history)
    : registry_(registry),
      prober_(prober),
      settings_(std::move(settings)),
      clock_(std::move(clock)),
      gate_(std::move(gate)),
      history_(std::move(history)) {}

ClusterSelection ClusterSelector::select(const std::string& accelerator_type) const {
  return select_among(accelerator_type, registry_.find_by_accelerator(accelerator_type));
}

ClusterSelection ClusterSelector::select_among(
    const std::string& accelerator_type,
    const std::vector<std::pair<ClusterConfig, int>>& candidates) const {
  if (candidates.empty()) {
    throw NoAvailableClusterError(fmt::format("no cluster supports {}", accelerator_type),
                                  accelerator_type, {});
  }

  std::vector<ClusterProbeResult> results(candidates.size());
  std::vector<ClusterSignals> signals(candidates.size());
  // Asked one by one, before any probe: a gate may claim a trial it must then see used.
  std::vector<std::optional<std::string>> gated(candidates.size());
  if (gate_) {
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      gated[i] = gate_(candidates[i].first, accelerator_type);
    }
  }
  // Candidate i's signals: its probe result and its history (scoring.h). `probe_ms` is how long
  // this selection's probe took; null for a cache answer (its latency then comes from the
  // history alone).
  auto compute = [&](std::size_t i, std::optional<double> probe_ms) {
    static const ClusterHistory kNoHistory;
    const StoreTime now = clock_->now();
    std::shared_ptr<const ClusterHistory> history;
    if (history_) {
      try {
        history = history_(candidates[i].first, accelerator_type, now);
      } catch (...) {
        history = nullptr;  // the signals come from the probe alone
      }
    }
    signals[i] = compute_signals(results[i], probe_ms, history ? *history : kNoHistory, now,
                                 settings_.signals);
    apply_capacity(signals[i], results[i], accelerator_type);
  };
  // Answers available at once (a probe cache) are taken on this thread; threads are started
  // only for the candidates that must really be probed.
  std::vector<std::size_t> to_probe;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (gated[i]) {
      results[i].cluster = candidates[i].first.name;
      results[i].reachable = false;
      results[i].error = "not probed: " + *gated[i];
      results[i].probed_at = format_iso8601(clock_->now());
      continue;
    }
    std::optional<ClusterProbeResult> quick;
    try {
      quick = prober_.cached(candidates[i].first);
    } catch (const std::exception&) {
      // Probed below, where a failure is reported.
    }
    if (!quick) {
      to_probe.push_back(i);
      continue;
    }
    results[i] = std::move(*quick);
    if (results[i].cluster.empty()) results[i].cluster = candidates[i].first.name;
    if (results[i].probed_at.empty()) results[i].probed_at = format_iso8601(clock_->now());
    compute(i, std::nullopt);
  }
  run_bounded_parallel(to_probe.size(), settings_.max_parallel_probes, [&](std::size_t k) {
    const std::size_t i = to_probe[k];
    const ClusterConfig& cluster = candidates[i].first;
    auto failed = [&](std::string error) {
      ClusterProbeResult r;
      r.cluster = cluster.name;
      r.reachable = false;
      r.error = std::move(error);
      return r;
    };
    const auto start = clock_->steady_now();
    try {
      results[i] = prober_.probe(cluster);
    } catch (const std::exception& e) {
      results[i] = failed(fmt::format("probe failed: {}", e.what()));
    } catch (...) {
      results[i] = failed("probe failed with an unknown exception");
    }
    const double probe_ms =
        std::chrono::duration<double, std::milli>(clock_->steady_now() - start).count();
    if (results[i].cluster.empty()) results[i].cluster = cluster.name;
    if (results[i].probed_at.empty()) results[i].probed_at = format_iso8601(clock_->now());
    compute(i, probe_ms);
  });

  return decide(accelerator_type, candidates, std::move(results), signals, gated, settings_,
                *clock_);
}

}  // namespace falcon
