#include "falcon/scoring.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "falcon/accelerator_types.h"
#include "falcon/circuit_breaker.h"
#include "util/time_format.h"

namespace falcon {
namespace {

using std::chrono::duration;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

double seconds_between(StoreTime from, StoreTime to) { return duration<double>(to - from).count(); }

std::optional<StoreTime> parse_time(const std::string& iso) { return parse_rfc3339(iso); }

// Workloads admissions must count once: a RUNNING change, or a terminal change right after a
// QUEUED one (the RUNNING in between was not observed).
bool is_admission(const WorkloadEvent& e, const std::map<std::string, std::string>& last_state) {
  if (e.state == kStateRunning) return true;
  if (e.state != kStateCompleted && e.state != kStateFailed) return false;
  const auto it = last_state.find(e.workload);
  return it != last_state.end() && it->second == kStateQueued;
}

std::string number(double v) {
  if (std::fabs(v - std::round(v)) < 1e-9 && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);
  return fmt::format("{:.3g}", v);
}

std::string seconds_text(double s) {
  if (s < 90) return fmt::format("{:.0f}s", s);
  if (s < 5400) return fmt::format("{:.1f}m", s / 60);
  return fmt::format("{:.1f}h", s / 3600);
}

// The priority policy's preference between two eligible candidates: true when a beats b. The
// spec orders by slot priority only; ties go to the smaller queue depth, then to fewer RUNNING
// workloads (the one load signal every probe gives: without it a burst of placements filled the
// first cluster in file order while its equals stood empty), then to file order.
bool priority_better(const CandidateInput& a, std::size_t ia, const CandidateInput& b,
                     std::size_t ib) {
  if (a.priority != b.priority) return a.priority < b.priority;
  const int qa = a.signals.queue_depth.value_or(0);
  const int qb = b.signals.queue_depth.value_or(0);
  if (qa != qb) return qa < qb;
  const int ra = a.signals.running.value_or(0);
  const int rb = b.signals.running.value_or(0);
  if (ra != rb) return ra < rb;
  return ia < ib;
}

// The chips a slice would leave unused in the largest free block of `c` (its best fit on the
// signals a probe gives: the largest block, not every block); nullopt when not known.
std::optional<double> fit_slack(const CandidateInput& c) {
  const ClusterSignals& s = c.signals;
  if (!s.slice_chips || !s.largest_free_block || *s.largest_free_block < *s.slice_chips) {
    return std::nullopt;
  }
  return *s.largest_free_block - *s.slice_chips;
}

// Best fit among candidates tied on what their policy ranks by: the one whose largest free
// block the slice fills most tightly, so that larger blocks elsewhere stay whole for larger
// slices; a candidate whose blocks are not known comes after. Nullopt: no difference.
std::optional<bool> fit_better(const CandidateInput& a, const CandidateInput& b) {
  const auto sa = fit_slack(a);
  const auto sb = fit_slack(b);
  if (sa && sb) {
    if (*sa != *sb) return *sa < *sb;
    return std::nullopt;
  }
  if (sa.has_value() != sb.has_value()) return sa.has_value();
  return std::nullopt;
}

// Why `loser` ranks below `winner` under the priority order.
std::string priority_gap(const CandidateInput& winner, const CandidateInput& loser) {
  if (loser.priority != winner.priority) {
    return fmt::format("priority {} > {}", loser.priority, winner.priority);
  }
  const int qw = winner.signals.queue_depth.value_or(0);
  const int ql = loser.signals.queue_depth.value_or(0);
  if (ql != qw) return fmt::format("same priority {}, queue_depth {} > {}", loser.priority, ql, qw);
  const int rw = winner.signals.running.value_or(0);
  const int rl = loser.signals.running.value_or(0);
  if (rl != rw) {
    return fmt::format("same priority {} and queue_depth {}, running {} > {}", loser.priority, ql,
                       rl, rw);
  }
  return fmt::format("full tie (priority {}, queue_depth {}, running {}), later in file order",
                     loser.priority, ql, rl);
}

SignalTerm shown(const std::string& name, std::optional<double> value) {
  return SignalTerm{.signal = name, .value = value};
}

// The score policy's terms of one candidate (docs/selection.md "score").
std::vector<SignalTerm> score_terms(const CandidateInput& c, const SelectionSettings& settings) {
  const ScoreWeights& w = settings.weights;
  const SignalSettings& g = settings.signals;
  const ClusterSignals& s = c.signals;
  constexpr double kUnknown = 0.5;  // a signal without data: no evidence either way
  std::vector<SignalTerm> terms;
  auto add = [&](const char* name, std::optional<double> value, double normalized, double weight) {
    terms.push_back(
        SignalTerm{.signal = name, .value = value, .normalized = normalized, .weight = weight});
  };
  add("priority", c.priority, 1.0 / std::max(1, c.priority), w.priority);
  const double q = s.queue_depth.value_or(0);
  add("queue", s.queue_depth ? std::optional<double>(q) : std::nullopt,
      std::clamp(1.0 - q / (c.max_queue_depth + 1.0), 0.0, 1.0), w.queue);
  const auto wait = predicted_wait_s(s, g);
  add("wait", wait, wait ? 1.0 / (1.0 + *wait / g.wait_scale_s) : kUnknown, w.wait);
  add("recent_wait", s.recent_wait_s,
      s.recent_wait_s ? 1.0 / (1.0 + *s.recent_wait_s / g.wait_scale_s) : kUnknown, w.recent_wait);
  add("health", s.health, s.health ? std::clamp(*s.health, 0.0, 1.0) : kUnknown, w.health);
  add("latency", s.latency_ms,
      s.latency_ms ? 1.0 / (1.0 + *s.latency_ms / g.latency_scale_ms) : kUnknown, w.latency);
  // Capacity counts only when known: an absent ClusterQueue neither helps nor hurts.
  const bool capacity_known = s.free_chips && s.nominal_chips && *s.nominal_chips > 0;
  if (capacity_known) {
    add("capacity", s.free_chips, std::clamp(*s.free_chips / *s.nominal_chips, 0.0, 1.0),
        w.capacity);
  }
  double sum = 0;
  for (const auto& t : terms) sum += t.weight;
  double base = 0;
  for (auto& t : terms) {
    t.contribution = sum > 0 ? t.weight * *t.normalized / sum : 0.0;
    base += t.contribution;
  }
  if (!capacity_known) terms.push_back(shown("capacity", s.free_chips));
  // Fragmentation multiplies the weighted mean by its band's weight; its contribution is what
  // that takes away, so the contributions still add up to the score.
  if (s.fragmentation) {
    const double factor = settings.fragmentation.weight_for(*s.fragmentation);
    terms.push_back(SignalTerm{.signal = "fragmentation",
                               .value = s.fragmentation,
                               .normalized = factor,
                               .weight = factor,
                               .contribution = base * (factor - 1.0)});
  } else {
    terms.push_back(shown("fragmentation", std::nullopt));
  }
  terms.push_back(shown("running", s.running ? std::optional<double>(*s.running) : std::nullopt));
  terms.push_back(shown("drain_per_min", s.drain_per_min));
  terms.push_back(shown("largest_free_block", s.largest_free_block));
  terms.push_back(shown("slice_chips", s.slice_chips));
  return terms;
}

// The terms every policy shows without counting them, for the priority policy.
std::vector<SignalTerm> priority_terms(const CandidateInput& c, const SelectionSettings& settings) {
  const ClusterSignals& s = c.signals;
  std::vector<SignalTerm> terms;
  terms.push_back(SignalTerm{.signal = "priority",
                             .value = c.priority,
                             .normalized = std::nullopt,
                             .weight = 1,
                             .contribution = static_cast<double>(c.priority)});
  terms.push_back(
      SignalTerm{.signal = "queue",
                 .value = s.queue_depth ? std::optional<double>(*s.queue_depth) : std::nullopt,
                 .normalized = std::nullopt,
                 .weight = 0,
                 .contribution = 0});
  terms.push_back(shown("running", s.running ? std::optional<double>(*s.running) : std::nullopt));
  terms.push_back(shown("drain_per_min", s.drain_per_min));
  terms.push_back(shown("wait", predicted_wait_s(s, settings.signals)));
  terms.push_back(shown("recent_wait", s.recent_wait_s));
  terms.push_back(shown("health", s.health));
  terms.push_back(shown("latency", s.latency_ms));
  terms.push_back(shown("capacity", s.free_chips));
  terms.push_back(shown("largest_free_block", s.largest_free_block));
  terms.push_back(shown("fragmentation", s.fragmentation));
  return terms;
}

std::vector<SignalTerm> least_wait_terms(const CandidateInput& c,
                                         const SelectionSettings& settings) {
  const ClusterSignals& s = c.signals;
  const auto wait = predicted_wait_s(s, settings.signals);
  std::vector<SignalTerm> terms;
  terms.push_back(SignalTerm{.signal = "wait",
                             .value = wait,
                             .normalized = std::nullopt,
                             .weight = 1,
                             .contribution = wait.value_or(0)});
  terms.push_back(
      shown("queue", s.queue_depth ? std::optional<double>(*s.queue_depth) : std::nullopt));
  terms.push_back(shown("drain_per_min", s.drain_per_min));
  terms.push_back(shown("priority", c.priority));
  terms.push_back(shown("running", s.running ? std::optional<double>(*s.running) : std::nullopt));
  terms.push_back(shown("recent_wait", s.recent_wait_s));
  terms.push_back(shown("admission_delay", s.admission_delay_s));
  terms.push_back(shown("health", s.health));
  terms.push_back(shown("latency", s.latency_ms));
  terms.push_back(shown("capacity", s.free_chips));
  terms.push_back(shown("largest_free_block", s.largest_free_block));
  terms.push_back(shown("fragmentation", s.fragmentation));
  return terms;
}

// The score term whose contribution differs most in the winner's favour.
std::string biggest_gap(const CandidateScore& winner, const CandidateScore& loser) {
  std::string best;
  double gap = 0;
  for (const auto& wt : winner.terms) {
    if (!wt.normalized) continue;
    for (const auto& lt : loser.terms) {
      if (lt.signal != wt.signal) continue;
      const double d = wt.contribution - lt.contribution;
      if (d > gap + 1e-12) {
        gap = d;
        best = wt.signal;
      }
    }
  }
  if (best.empty()) return "";
  return fmt::format("; most behind on {} (-{:.3f})", best, gap);
}

}  // namespace

ClusterHistory load_cluster_history(StateStore& store, const std::string& cluster,
                                    const std::string& accelerator, StoreTime now,
                                    std::chrono::seconds window) {
  constexpr int kMaxLookups = 200;  // admissions whose queued time is looked up
  ClusterHistory h;
  const StoreTime from = now - window;
  const StoreTime to = now + milliseconds(1);  // inclusive of `now`
  h.probes = store.probe_history(cluster, from, to);
  h.events = store.cluster_events(cluster, from, to);
  int lookups = 0;
  for (const WorkloadEvent& e : h.events) {
    if (e.state != kStateRunning || h.queued_since.count(e.workload) != 0) continue;
    if (++lookups > kMaxLookups) break;
    if (const auto row = store.find_submission(cluster, e.workload)) {
      if (const auto t = parse_time(row->handle.submitted_at); t && *t <= e.observed_at) {
        h.queued_since[e.workload] = *t;
        continue;
      }
    }
    for (const WorkloadEvent& w : store.list_workload_events(cluster, e.workload)) {
      if (w.state == kStateQueued && w.observed_at <= e.observed_at) {
        h.queued_since[e.workload] = w.observed_at;
        break;
      }
    }
  }
  SubmissionQuery q;
  q.cluster = cluster;
  q.submitted_from = from;
  q.limit = 1000;
  h.submits = static_cast<int>(store.list_submissions(q).rows.size());
  if (const auto b = store.get_breaker(breaker_key(cluster, accelerator))) {
    h.submit_failures = b->consecutive_failures;
  }
  return h;
}

ClusterSignals compute_signals(const ClusterProbeResult& probe, std::optional<double> probe_ms,
                               const ClusterHistory& history, StoreTime now,
                               const SignalSettings& settings) {
  ClusterSignals s;
  s.queue_depth = probe.queue_depth;
  s.running = probe.running_count;
  s.admission_delay_s = probe.admission_delay_s;
  const StoreTime window_start = now - std::chrono::seconds(settings.window_s);

  // Health: every probe and submit of the window, and this probe.
  int ok = probe.reachable ? 1 : 0;
  int total = 1;
  double latency_sum = 0;
  int latency_n = 0;
  // Queue-depth samples, oldest first, this probe last.
  std::vector<std::pair<StoreTime, int>> depths;
  std::optional<StoreTime> earliest;
  for (const ProbeRecord& p : history.probes) {
    const auto t = parse_time(p.result.probed_at);
    if (!t || *t < window_start || *t > now) continue;
    ++total;
    if (p.result.reachable) ++ok;
    latency_sum += static_cast<double>(p.duration_ms);
    ++latency_n;
    if (p.result.reachable && p.result.queue_depth) depths.emplace_back(*t, *p.result.queue_depth);
    if (!earliest || *t < *earliest) earliest = *t;
  }
  total += history.submits + history.submit_failures;
  ok += history.submits;
  s.health = static_cast<double>(ok) / total;
  s.health_samples = total;
  if (latency_n > 0) {
    s.latency_ms = latency_sum / latency_n;
  } else if (probe_ms) {
    s.latency_ms = *probe_ms;
  }

  // Drain: admissions seen as events, or as queue-depth decreases between probes.
  std::sort(depths.begin(), depths.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  if (probe.reachable && probe.queue_depth) {
    const auto t = parse_time(probe.probed_at).value_or(now);
    if (depths.empty() || t > depths.back().first) depths.emplace_back(t, *probe.queue_depth);
  }
  double decreases = 0;
  for (std::size_t i = 1; i < depths.size(); ++i) {
    decreases += std::max(0, depths[i - 1].second - depths[i].second);
  }
  int admissions = 0;
  double wait_sum = 0;
  int wait_n = 0;
  std::map<std::string, std::string> last_state;
  std::set<std::string> admitted;
  bool any_event = false;
  for (const WorkloadEvent& e : history.events) {
    if (e.observed_at < window_start || e.observed_at > now) continue;
    any_event = true;
    if (!earliest || e.observed_at < *earliest) earliest = e.observed_at;
    if (is_admission(e, last_state) && admitted.insert(e.workload).second) {
      ++admissions;
      if (e.state == kStateRunning) {
        if (const auto it = history.queued_since.find(e.workload);
            it != history.queued_since.end() && it->second <= e.observed_at) {
          wait_sum += seconds_between(it->second, e.observed_at);
          ++wait_n;
        }
      }
    }
    last_state[e.workload] = e.state;
  }
  if (wait_n > 0) s.recent_wait_s = wait_sum / wait_n;
  if (earliest && (depths.size() >= 2 || any_event)) {
    const double span_s = seconds_between(*earliest, now);
    if (span_s >= 60.0) {
      s.drain_per_min = std::max<double>(admissions, decreases) / (span_s / 60.0);
    }
  }
  return s;
}

std::optional<SliceShape> slice_shape(const std::string& accelerator_type) {
  const auto canonical = canonical_accelerator_type(accelerator_type);
  if (!canonical) return std::nullopt;
  const XpkAcceleratorType* t = find_xpk_accelerator_type(*canonical);
  if (!t || t->device_class == DeviceClass::kCpu || t->gke_accelerator.empty()) {
    return std::nullopt;
  }
  return SliceShape{.device_type = *canonical,
                    .accelerator = t->gke_accelerator,
                    .chips = static_cast<double>(t->vms_per_slice) * t->chips_per_vm};
}

void apply_capacity(ClusterSignals& signals, const ClusterProbeResult& probe,
                    const std::string& accelerator_type) {
  if (probe.capacity.empty()) return;
  const auto shape = slice_shape(accelerator_type);
  if (!shape) return;
  std::vector<const AcceleratorCapacity*> matched;
  for (const auto& c : probe.capacity) {
    if (c.device_type == shape->device_type) matched.push_back(&c);
  }
  if (matched.empty()) {
    for (const auto& c : probe.capacity) {
      if (c.accelerator == shape->accelerator) matched.push_back(&c);
    }
  }
  if (matched.empty()) return;
  double nominal = 0;
  double free = 0;
  double largest = 0;
  bool blocks_known = true;
  double largest_block = 0;
  bool block_sizes_known = true;
  for (const AcceleratorCapacity* c : matched) {
    nominal += c->nominal;
    const double f = std::max(0.0, c->nominal - c->used);
    free += f;
    if (c->largest_free_block) {
      largest = std::max(largest, std::min(*c->largest_free_block, f));
    } else {
      blocks_known = false;
    }
    if (c->largest_block) {
      largest_block = std::max(largest_block, std::min(*c->largest_block, c->nominal));
    } else {
      block_sizes_known = false;
    }
  }
  if (block_sizes_known) signals.largest_block = largest_block;
  signals.slice_chips = shape->chips;
  signals.nominal_chips = nominal;
  signals.free_chips = free;
  if (blocks_known) {
    signals.largest_free_block = largest;
    if (free > 0) signals.fragmentation = std::clamp(1.0 - largest / free, 0.0, 1.0);
  }
}

std::optional<std::string> never_fits(const ClusterSignals& s) {
  if (!s.slice_chips) return std::nullopt;
  if (s.nominal_chips && *s.nominal_chips < *s.slice_chips) {
    return fmt::format("can never fit a slice of {} chips: {} chips in all", number(*s.slice_chips),
                       number(*s.nominal_chips));
  }
  if (s.largest_block && *s.largest_block < *s.slice_chips) {
    return fmt::format("can never fit a slice of {} chips: its largest block has {}",
                       number(*s.slice_chips), number(*s.largest_block));
  }
  return std::nullopt;
}

std::optional<std::string> capacity_misfit(const ClusterSignals& s) {
  if (!s.slice_chips || !s.free_chips) return std::nullopt;
  if (auto never = never_fits(s)) return never;
  if (*s.free_chips < *s.slice_chips) {
    return fmt::format("cannot fit a slice of {} chips: {} of {} chips free",
                       number(*s.slice_chips), number(*s.free_chips),
                       number(s.nominal_chips.value_or(0)));
  }
  if (s.largest_free_block && *s.largest_free_block < *s.slice_chips) {
    return fmt::format(
        "cannot fit a slice of {} chips: fragmented, largest free block {} of {} chips free "
        "(fragmentation {:.2f})",
        number(*s.slice_chips), number(*s.largest_free_block), number(*s.free_chips),
        s.fragmentation.value_or(0.0));
  }
  return std::nullopt;
}

bool admits_now(const CandidateScore& c, int queued_by_caller) {
  return c.eligible && c.signals.queue_depth.value_or(0) + queued_by_caller <= 0 &&
         !capacity_misfit(c.signals);
}

std::optional<double> predicted_wait_s(const ClusterSignals& signals,
                                       const SignalSettings& settings) {
  if (!signals.queue_depth) return std::nullopt;
  const int q = std::max(0, *signals.queue_depth);
  const double admission = std::max(0.0, signals.admission_delay_s.value_or(0.0));
  if (q == 0) return admission;
  double per_min = settings.prior_drain_per_min;
  if (signals.drain_per_min) {
    // None admitted: at most one per window.
    per_min = *signals.drain_per_min > 0 ? *signals.drain_per_min : 60.0 / settings.window_s;
  }
  return (q + 1) / per_min * 60.0 + admission;
}

RankedCandidates rank_candidates(SelectionPolicy policy, const SelectionSettings& settings,
                                 const std::vector<CandidateInput>& candidates) {
  RankedCandidates out;
  std::vector<std::size_t> eligible;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const CandidateInput& c = candidates[i];
    CandidateScore score;
    score.cluster = c.cluster;
    score.priority = c.priority;
    score.max_queue_depth = c.max_queue_depth;
    score.signals = c.signals;
    score.skip_reason = c.skip_reason;
    if (score.skip_reason.empty() && policy != SelectionPolicy::kPriority &&
        settings.fragmentation.require_fit) {
      if (auto why = capacity_misfit(c.signals)) score.skip_reason = std::move(*why);
    }
    score.eligible = score.skip_reason.empty();
    switch (policy) {
      case SelectionPolicy::kPriority:
        score.terms = priority_terms(c, settings);
        break;
      case SelectionPolicy::kScore:
        score.terms = score_terms(c, settings);
        break;
      case SelectionPolicy::kLeastWait:
        score.terms = least_wait_terms(c, settings);
        break;
    }
    if (score.eligible) {
      eligible.push_back(i);
      if (policy == SelectionPolicy::kScore) {
        double total = 0;
        for (const auto& t : score.terms) total += t.contribution;
        score.total = total;
      } else if (policy == SelectionPolicy::kLeastWait) {
        score.total = predicted_wait_s(c.signals, settings.signals);
      }
    } else {
      score.verdict = "skipped: " + score.skip_reason;
    }
    out.scores.push_back(std::move(score));
  }
  if (eligible.empty()) return out;

  constexpr double kEps = 1e-9;
  auto better = [&](std::size_t a, std::size_t b) {
    const auto& sa = out.scores[a];
    const auto& sb = out.scores[b];
    if (policy == SelectionPolicy::kScore) {
      if (std::fabs(*sa.total - *sb.total) > kEps) return *sa.total > *sb.total;
    } else if (policy == SelectionPolicy::kLeastWait) {
      const double wa = sa.total.value_or(INFINITY);
      const double wb = sb.total.value_or(INFINITY);
      if (std::fabs(wa - wb) > kEps && !(std::isinf(wa) && std::isinf(wb))) return wa < wb;
    }
    if (policy != SelectionPolicy::kPriority) {
      if (const auto fit = fit_better(candidates[a], candidates[b])) return *fit;
    }
    return priority_better(candidates[a], a, candidates[b], b);
  };
  std::stable_sort(eligible.begin(), eligible.end(), better);
  const std::size_t w = eligible.front();
  out.winner = w;
  const CandidateInput& wc = candidates[w];
  CandidateScore& ws = out.scores[w];
  for (std::size_t r = 0; r < eligible.size(); ++r) out.scores[eligible[r]].rank = int(r) + 1;

  const int wq = wc.signals.queue_depth.value_or(0);
  const std::string base = fmt::format("selected {}: reachable, queue_depth={} <= max={}",
                                       wc.cluster, wq, wc.max_queue_depth);
  switch (policy) {
    case SelectionPolicy::kPriority:
      out.summary = base;
      ws.verdict = fmt::format("selected: priority {}, queue_depth {}", wc.priority, wq);
      break;
    case SelectionPolicy::kScore:
      out.summary =
          fmt::format("{}; policy score: {:.3f}, best of {}", base, *ws.total, eligible.size());
      ws.verdict = fmt::format("selected: score {:.3f}", *ws.total);
      break;
    case SelectionPolicy::kLeastWait:
      out.summary = fmt::format("{}; policy least-wait: predicted wait {}, least of {}", base,
                                ws.total ? seconds_text(*ws.total) : "unknown", eligible.size());
      ws.verdict = fmt::format("selected: predicted wait {}",
                               ws.total ? seconds_text(*ws.total) : "unknown");
      break;
  }
  for (std::size_t r = 1; r < eligible.size(); ++r) {
    const std::size_t i = eligible[r];
    CandidateScore& ls = out.scores[i];
    std::string why;
    if (policy == SelectionPolicy::kScore && std::fabs(*ls.total - *ws.total) > kEps) {
      why = fmt::format("score {:.3f} < {:.3f}{}", *ls.total, *ws.total, biggest_gap(ws, ls));
    } else if (policy == SelectionPolicy::kLeastWait &&
               ls.total.value_or(INFINITY) != ws.total.value_or(INFINITY) &&
               std::fabs(ls.total.value_or(INFINITY) - ws.total.value_or(INFINITY)) > kEps) {
      const ClusterSignals& ls_signals = candidates[i].signals;
      why = fmt::format(
          "predicted wait {} > {} (queue_depth {}, drain {}/min{})",
          ls.total ? seconds_text(*ls.total) : "unknown",
          ws.total ? seconds_text(*ws.total) : "unknown", ls_signals.queue_depth.value_or(0),
          ls_signals.drain_per_min
              ? number(*ls_signals.drain_per_min)
              : fmt::format("unknown, prior {}", number(settings.signals.prior_drain_per_min)),
          ls_signals.admission_delay_s.value_or(0) > 0
              ? fmt::format(", admission delay {}", seconds_text(*ls_signals.admission_delay_s))
              : "");
    } else if (policy != SelectionPolicy::kPriority && fit_better(wc, candidates[i])) {
      const auto ws_slack = fit_slack(wc);
      const auto ls_slack = fit_slack(candidates[i]);
      why = ls_slack ? fmt::format(
                           "tie; looser fit: a slice of {} chips leaves {} of its largest "
                           "free block unused, {} on {}",
                           number(*wc.signals.slice_chips), number(*ls_slack), number(*ws_slack),
                           wc.cluster)
                     : fmt::format("tie; its free blocks are not known, {}'s are", wc.cluster);
    } else {
      why = (policy == SelectionPolicy::kPriority ? "" : "tie; ") + priority_gap(wc, candidates[i]);
    }
    ls.verdict = fmt::format("lost to {}: {}", wc.cluster, why);
  }
  return out;
}

ClusterSelection replay_selection(const ClusterSelection& recorded, SelectionPolicy policy,
                                  const SelectionSettings& settings, StoreTime now) {
  if (recorded.scores.empty()) {
    throw std::invalid_argument(fmt::format(
        "the recorded selection{} for {} has no candidate scores (it was made before falcon "
        "recorded signals); it cannot be replayed",
        recorded.selection_id ? fmt::format(" {}", recorded.selection_id) : "",
        recorded.accelerator.empty() ? "an unknown accelerator" : recorded.accelerator));
  }
  std::vector<CandidateInput> inputs;
  std::set<std::string> seen;
  for (const CandidateScore& s : recorded.scores) {
    if (s.cluster.empty()) throw std::invalid_argument("a recorded candidate has no cluster name");
    if (!seen.insert(s.cluster).second) {
      throw std::invalid_argument(
          fmt::format("the recorded selection names candidate '{}' twice", s.cluster));
    }
    inputs.push_back(CandidateInput{.cluster = s.cluster,
                                    .priority = s.priority,
                                    .max_queue_depth = s.max_queue_depth,
                                    .skip_reason = s.eligible ? "" : s.skip_reason,
                                    .signals = s.signals});
    if (!s.eligible && inputs.back().skip_reason.empty()) {
      inputs.back().skip_reason = "not eligible when recorded";
    }
  }
  const RankedCandidates ranked = rank_candidates(policy, settings, inputs);
  ClusterSelection out;
  out.accelerator = recorded.accelerator;
  out.candidates = recorded.candidates;
  out.probe_results = recorded.probe_results;
  out.policy = to_string(policy);
  out.scores = ranked.scores;
  out.decided_at = format_iso8601(now);
  if (ranked.winner) {
    out.selected_cluster = inputs[*ranked.winner].cluster;
    out.reason = ranked.summary;
  } else {
    out.reason = fmt::format("no available cluster for {} ({} candidate{})", recorded.accelerator,
                             inputs.size(), inputs.size() == 1 ? "" : "s");
  }
  return out;
}

}  // namespace falcon
