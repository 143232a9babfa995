#include "serve/dispatcher.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "falcon/errors.h"
#include "falcon/scoring.h"

namespace falcon {
namespace {

using std::chrono::steady_clock;

constexpr auto kWiringRefresh = std::chrono::seconds(30);
constexpr std::size_t kLatencySamples = 1000;
constexpr std::size_t kMaxHeldShown = 100;

std::chrono::milliseconds seconds(double s) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(s * 1000)));
}

std::string key_of(const kube::ManagerWorkload& w) { return w.namespace_ + "/" + w.name; }

// Of a failed decision's candidates, the one a Workload held for room would most likely take
// first: skipped only for want of room now (its quota and its largest block hold the slice), with
// the largest free block, then the most free chips. "" when none is.
std::string closest_to_room(const std::vector<CandidateScore>& scores) {
  const CandidateScore* best = nullptr;
  const auto room = [](const CandidateScore& c) {
    const double free = c.signals.free_chips.value_or(0);
    return std::pair(c.signals.largest_free_block.value_or(free), free);
  };
  for (const CandidateScore& c : scores) {
    const auto misfit = capacity_misfit(c.signals);
    if (!misfit || c.skip_reason != *misfit) continue;  // skipped for another reason
    if (!c.signals.slice_chips || never_fits(c.signals)) continue;
    if (best == nullptr || room(c) > room(*best)) best = &c;
  }
  return best ? best->cluster : "";
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

Dispatcher::Dispatcher(DispatcherOptions options) : options_(std::move(options)) {
  if (!options_.manager || !options_.store || !options_.decide || !options_.registry_clusters) {
    throw std::invalid_argument(
        "Dispatcher: manager, store, decide and registry_clusters are "
        "required");
  }
  clock_ = options_.clock ? options_.clock : make_system_clock();
  counters_.dispatcher_name = options_.settings.dispatcher_name;
}

Dispatcher::~Dispatcher() { stop(); }

void Dispatcher::start() {
  watcher_ = std::thread([this] { watch_loop(); });
  decider_ = std::thread([this] { decide_loop(); });
}

void Dispatcher::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  if (decider_.joinable()) decider_.join();
}

void Dispatcher::event(const std::string& level, const std::string& message) const {
  if (options_.on_event) options_.on_event(level, "dispatch: " + message);
}

std::optional<std::string> Dispatcher::problem() const {
  std::lock_guard lock(mu_);
  if (!watch_problem_.empty()) return watch_problem_;
  if (!listed_) return "the manager's Workloads have not been listed yet";
  if (!wiring_problem_.empty()) return wiring_problem_;
  if (kueue_dispatcher_ && *kueue_dispatcher_ != options_.settings.dispatcher_name) {
    return fmt::format(
        "the manager's Kueue dispatches with {}, not {}: set multiKueue.dispatcherName: {} in "
        "its configuration (kueue-system/kueue-manager-config), or dispatch.dispatcher_name",
        *kueue_dispatcher_, options_.settings.dispatcher_name, options_.settings.dispatcher_name);
  }
  if (!store_problem_.empty()) return store_problem_;
  return std::nullopt;
}

DispatchStatus Dispatcher::status() const {
  const auto problem_now = problem();
  std::lock_guard lock(mu_);
  DispatchStatus s = counters_;
  s.manager = options_.manager->server();
  s.kueue_dispatcher = kueue_dispatcher_;
  s.problem = problem_now;
  s.workloads = static_cast<int>(workloads_.size());
  s.waiting = static_cast<int>(held_.size());
  s.nominated = static_cast<int>(ours_.size());
  for (const auto& [key, why] : held_) {
    if (s.held.size() >= kMaxHeldShown) break;
    s.held.emplace(key, why);
  }
  if (!latencies_ms_.empty()) {
    s.latency_p50_ms = percentile(latencies_ms_, 0.50);
    s.latency_p99_ms = percentile(latencies_ms_, 0.99);
  }
  return s;
}

void Dispatcher::track(const kube::ManagerWorkload& w) {
  Tracked& t = workloads_[w.uid];
  const auto now = clock_->steady_now();
  if (t.workload.nominated != w.nominated) looked_up_.erase(w.uid);
  if (w.cluster_name && !t.workload.cluster_name) {
    t.admitted = now;
    placed_at_[registry_name(*w.cluster_name)] = now;
  }
  // Admitted, then taken back by the manager (its worker evicted it): a new wait begins.
  if (!w.cluster_name && t.workload.cluster_name) {
    t.waited = false;
    evicted_at_[registry_name(*t.workload.cluster_name)] = now;
    left(*t.workload.cluster_name, t.workload.priority, now);
  }
  if (w.cluster_name && w.finished && !t.workload.finished) {
    left(*w.cluster_name, w.priority, now);
  }
  t.workload = w;
  if (w.cluster_name) {
    if (ours_.erase(w.uid) > 0) ++counters_.admitted;
    held_.erase(key_of(w));
  }
  if (w.finished || w.deleting) held_.erase(key_of(w));
  if (!t.waited && w.nominated.empty() && !w.cluster_name && w.quota_reserved) {
    t.seen = clock_->steady_now();
    t.waited = true;
  }
}

void Dispatcher::apply_list(const kube::WorkloadList& list) {
  std::lock_guard lock(mu_);
  std::set<std::string> present;
  for (const auto& w : list.items) {
    present.insert(w.uid);
    track(w);
  }
  for (auto it = workloads_.begin(); it != workloads_.end();) {
    if (present.count(it->first) == 0) {
      held_.erase(key_of(it->second.workload));
      ours_.erase(it->first);
      looked_up_.erase(it->first);
      it = workloads_.erase(it);
    } else {
      ++it;
    }
  }
  listed_ = true;
  watch_problem_.clear();
  dirty_ = true;
  wake_.notify_all();
}

void Dispatcher::apply_event(const kube::ManagerEvent& e) {
  std::lock_guard lock(mu_);
  const auto now = clock_->steady_now();
  if (e.type == "BOOKMARK") return;
  if (e.type == "DELETED") {
    if (e.workload.cluster_name) left(*e.workload.cluster_name, e.workload.priority, now);
    held_.erase(key_of(e.workload));
    ours_.erase(e.workload.uid);
    looked_up_.erase(e.workload.uid);
    workloads_.erase(e.workload.uid);
  } else {
    track(e.workload);
  }
  dirty_ = true;
  wake_.notify_all();
}

void Dispatcher::refresh_wiring() {
  std::optional<kube::MultiKueueWiring> wiring;
  std::optional<std::string> configured;
  std::string problem;
  try {
    wiring = options_.manager->wiring();
    configured = options_.manager->kueue_dispatcher();
  } catch (const std::exception& e) {
    problem = fmt::format("cannot read the manager's MultiKueue objects: {}", e.what());
  }
  std::lock_guard lock(mu_);
  wiring_at_ = clock_->steady_now();
  if (!problem.empty()) {
    wiring_problem_ = problem;
    return;
  }
  wiring_problem_.clear();
  if (wiring->workers_by_check.empty()) {
    wiring_problem_ = "the manager has no AdmissionCheck of controller kueue.x-k8s.io/multikueue";
  }
  wiring_ = std::move(wiring);
  kueue_dispatcher_ = configured;
  dirty_ = true;
}

std::string Dispatcher::registry_name(const std::string& worker) const {
  const auto it = options_.settings.clusters.find(worker);
  return it == options_.settings.clusters.end() ? worker : it->second;
}

bool Dispatcher::unconfirmed(const Ours& o) const {
  if (!o.preempting || o.clusters.size() != 1) return false;
  const auto evicted = evicted_at_.find(registry_name(o.clusters.front()));
  return evicted == evicted_at_.end() || evicted->second < o.at;
}

steady_clock::time_point Dispatcher::due(const Ours& o) const {
  const DispatchSettings& settings = options_.settings;
  const auto renominate = o.at + seconds(settings.renominate_after_s);
  return unconfirmed(o) ? std::min(renominate, o.at + seconds(settings.preempt_confirm_s))
                        : renominate;
}

void Dispatcher::left(const std::string& worker, int priority, steady_clock::time_point now) {
  left_at_[registry_name(worker)][priority] = now;
}

// Kueue evicts only lower priorities, so the chips it could free when it did not preempt are
// all it can free until a Workload of that priority or higher leaves the worker (an admission
// takes free chips or adds a victim where chips were free). Work the manager did not place is
// not seen: after renominate_after_s the worker is tried again.
bool Dispatcher::found_no_room(const std::string& cluster, double slice_chips, int priority,
                               steady_clock::time_point now) const {
  const auto memo = no_preempt_room_.find(cluster);
  if (memo == no_preempt_room_.end() || slice_chips < memo->second.for_slice.slice_chips ||
      priority > memo->second.for_slice.priority ||
      now - memo->second.at >= seconds(options_.settings.renominate_after_s)) {
    return false;
  }
  const auto left = left_at_.find(cluster);
  if (left == left_at_.end()) return true;
  const auto since = left->second.lower_bound(memo->second.for_slice.priority);
  return std::none_of(since, left->second.end(),
                      [&](const auto& at) { return at.second > memo->second.at; });
}

std::vector<Dispatcher::Work> Dispatcher::collect(steady_clock::time_point now,
                                                  steady_clock::time_point* next_deadline) {
  std::vector<Work> out;
  if (!wiring_) return out;
  const auto& allowed = options_.settings.admission_checks;
  int foreign = 0;
  for (auto& [uid, t] : workloads_) {
    const kube::ManagerWorkload& w = t.workload;
    if (w.deleting || w.finished || w.cluster_name || !w.quota_reserved) continue;
    const std::vector<std::string>* workers = nullptr;
    std::string state;
    for (const auto& [check, check_state] : w.checks) {
      const auto it = wiring_->workers_by_check.find(check);
      if (it == wiring_->workers_by_check.end()) continue;
      if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), check) == allowed.end()) {
        continue;
      }
      workers = &it->second;
      state = check_state;
      break;
    }
    if (workers == nullptr || state != "Pending") continue;
    Work work{w, *workers, false};
    if (!w.nominated.empty()) {
      const auto mine = ours_.find(uid);
      if (mine == ours_.end() || mine->second.clusters != w.nominated) {
        ++foreign;  // another controller's (or a person's) nomination
        continue;
      }
      Ours& o = mine->second;
      const auto when = due(o);
      if (now < when) {
        *next_deadline = std::min(*next_deadline, when);
        continue;
      }
      work.again = true;
      if (!o.unconfirmed_seen && unconfirmed(o)) {
        // Its worker's Kueue found no room even by preemption (falcon counted chips, Kueue
        // looked at where they are): not again for as large a slice until its worker changes.
        // Once per nomination: a Workload held after this keeps it, and is due every pass.
        o.unconfirmed_seen = true;
        no_preempt_room_[registry_name(o.clusters.front())] = NoPreemptRoom{*o.preempting, o.at};
        ++counters_.preemptions_unconfirmed;
        event("info",
              fmt::format("{}: {} evicted nothing and did not admit it within {} s "
                          "(dispatch.preempt_confirm_s) of the preempting nomination: "
                          "its Kueue found no room there; deciding again without it",
                          key_of(w), o.clusters.front(), options_.settings.preempt_confirm_s));
      }
    }
    out.push_back(std::move(work));
  }
  counters_.foreign = foreign;
  std::sort(out.begin(), out.end(), [](const Work& a, const Work& b) {
    return std::tie(b.workload.priority, a.workload.created, a.workload.namespace_,
                    a.workload.name) < std::tie(a.workload.priority, b.workload.created,
                                                b.workload.namespace_, b.workload.name);
  });
  return out;
}

void Dispatcher::adopt() {
  // Nominated Workloads this process has not seen nominated by itself: a nomination of an
  // earlier run is ours when the store's latest row for the Workload patched exactly it.
  std::vector<kube::ManagerWorkload> unknown;
  {
    std::lock_guard lock(mu_);
    for (const auto& [uid, t] : workloads_) {
      if (!t.workload.nominated.empty() && !t.workload.cluster_name && ours_.count(uid) == 0 &&
          looked_up_.insert(uid).second) {
        unknown.push_back(t.workload);
      }
    }
  }
  for (const auto& w : unknown) {
    std::vector<NominationRecord> rows;
    try {
      rows = options_.store->list_nominations(w.uid, 1);
    } catch (const std::exception&) {
      std::lock_guard lock(mu_);
      looked_up_.erase(w.uid);  // asked again next pass
      continue;
    }
    if (rows.empty() || rows[0].outcome != std::optional<std::string>(kNominationPatched) ||
        rows[0].clusters != w.nominated) {
      continue;
    }
    // Its age: how long ago it was recorded, on the steady clock.
    const auto age =
        std::max(clock_->now() - rows[0].requested_at, std::chrono::system_clock::duration::zero());
    std::lock_guard lock(mu_);
    Ours& mine = ours_[w.uid];
    mine.clusters = w.nominated;
    mine.at = clock_->steady_now() - std::chrono::duration_cast<steady_clock::duration>(age);
  }
}

void Dispatcher::pass() {
  adopt();
  const auto now = clock_->steady_now();
  auto next_deadline = steady_clock::time_point::max();
  std::vector<Work> work;
  {
    std::lock_guard lock(mu_);
    work = collect(now, &next_deadline);
    // Held Workloads that no longer wait are no longer held.
    std::set<std::string> waiting;
    for (const Work& w : work) waiting.insert(key_of(w.workload));
    for (auto it = held_.begin(); it != held_.end();) {
      it = waiting.count(it->first) ? std::next(it) : held_.erase(it);
    }
  }
  std::set<std::string> none_for;  // accelerator types that found no worker with room
  // Registry cluster -> the held Workload that waits for room there first, and its priority:
  // Workloads of lower priority are not placed there (no backfill into the room it needs).
  struct Reservation {
    int priority = 0;
    std::string why;
  };
  std::map<std::string, Reservation> reserved;
  for (const Work& w : work) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    if (!w.workload.accelerator.empty() && none_for.count(w.workload.accelerator) > 0) {
      std::lock_guard lock(mu_);
      held_[key_of(w.workload)] = "no worker has room for " + w.workload.accelerator +
                                  " now (a Workload before it "
                                  "in priority order found none)";
      continue;
    }
    std::map<std::string, std::string> kept;
    for (const auto& [cluster, r] : reserved) {
      if (r.priority > w.workload.priority) kept.emplace(cluster, r.why);
    }
    std::string waits_for;
    Held held;
    if (dispatch(w, kept, &waits_for, &held)) continue;
    if (preempt(w, held)) continue;
    none_for.insert(w.workload.accelerator);
    if (!waits_for.empty() && options_.settings.hold_until_room && options_.settings.keep_room &&
        reserved.empty()) {
      reserved.emplace(waits_for,
                       Reservation{w.workload.priority,
                                   fmt::format("kept for {} (priority {}, {}), held until it "
                                               "has room here",
                                               key_of(w.workload), w.workload.priority,
                                               w.workload.accelerator)});
    }
  }
}

bool Dispatcher::dispatch(const Work& work, const std::map<std::string, std::string>& kept,
                          std::string* waits_for, Held* held) {
  const kube::ManagerWorkload& w = work.workload;
  const DispatchSettings& settings = options_.settings;
  const auto hold = [&](const std::string& why) {
    std::lock_guard lock(mu_);
    held_[key_of(w)] = why;
  };
  if (w.accelerator.empty()) {
    hold(w.accelerator_problem);
    return true;  // nothing to learn about other Workloads
  }
  // Left out: registry clusters that are not Active workers of this Workload's config, and the
  // workers tried before (a renomination).
  PlacementHints hints;
  std::set<std::string> tried;
  {
    std::lock_guard lock(mu_);
    std::set<std::string> workers;
    for (const std::string& worker : work.workers) {
      const auto inactive = wiring_->inactive.find(worker);
      const bool known = std::find(wiring_->clusters.begin(), wiring_->clusters.end(), worker) !=
                         wiring_->clusters.end();
      if (!known) {
        hints.left_out[registry_name(worker)] =
            fmt::format("MultiKueueCluster {} does not exist on the manager", worker);
      } else if (inactive != wiring_->inactive.end()) {
        hints.left_out[registry_name(worker)] =
            fmt::format("MultiKueueCluster {} is {}", worker, inactive->second);
      } else {
        workers.insert(registry_name(worker));
      }
    }
    for (const std::string& c : options_.registry_clusters()) {
      if (workers.count(c) == 0 && hints.left_out.count(c) == 0) {
        hints.left_out[c] = "not a worker of the Workload's MultiKueue configuration";
      }
    }
    if (work.again) {
      const Ours& mine = ours_.at(w.uid);
      tried = mine.tried;
      tried.insert(mine.clusters.begin(), mine.clusters.end());
    }
    for (const auto& [cluster, why] : kept) hints.left_out.emplace(cluster, why);
    hints.placed_at = placed_at_;
    // Nominations not admitted yet count as queued Workloads of their clusters.
    for (const auto& [uid, o] : ours_) {
      if (uid == w.uid) continue;
      for (const auto& c : o.clusters) ++hints.in_flight[registry_name(c)];
    }
  }
  auto with_tried = hints;
  for (const auto& worker : tried) {
    with_tried.left_out.emplace(registry_name(worker),
                                "nominated before and did not admit the Workload in time");
  }
  Decision d;
  try {
    d = options_.decide(w.accelerator, with_tried);
  } catch (const NoAvailableClusterError& e) {
    if (tried.empty()) {
      *waits_for = closest_to_room(e.scores());
      held->scores = e.scores();
      hold(e.what());
      return false;
    }
    // Every worker was tried: start over among all of them.
    tried.clear();
    try {
      d = options_.decide(w.accelerator, hints);
    } catch (const NoAvailableClusterError& again) {
      *waits_for = closest_to_room(again.scores());
      held->scores = again.scores();
      hold(again.what());
      return false;
    }
  }
  // With hold_until_room, the workers the decision found without room now (their queue
  // depth counts this dispatcher's nominations not admitted yet) are left out of it, and it is
  // made again: the recorded decision is the one nominated on, and says why the others lost.
  const auto eligible_by_rank = [](const Decision& decision) {
    std::vector<const CandidateScore*> ranked;
    for (const auto& c : decision.selection.scores) {
      if (c.eligible && c.rank > 0) ranked.push_back(&c);
    }
    std::sort(ranked.begin(), ranked.end(),
              [](const CandidateScore* a, const CandidateScore* b) { return a->rank < b->rank; });
    return ranked;
  };
  std::vector<const CandidateScore*> ranked = eligible_by_rank(d);
  if (settings.hold_until_room && !ranked.empty() && !admits_now(*ranked.front())) {
    PlacementHints with_room = tried.empty() ? hints : with_tried;
    bool some_room = false;
    for (const CandidateScore* c : ranked) {
      if (admits_now(*c)) {
        some_room = true;
      } else {
        with_room.left_out.emplace(
            c->cluster, capacity_misfit(c->signals)
                            .value_or(fmt::format("no room now: {} workload(s) queued there",
                                                  c->signals.queue_depth.value_or(0))));
      }
    }
    if (some_room) {
      try {
        d = options_.decide(w.accelerator, with_room);
        ranked = eligible_by_rank(d);
      } catch (const NoAvailableClusterError&) {
        ranked.clear();  // the room went between the two decisions
      }
    }
  }
  std::vector<std::string> chosen;
  for (const CandidateScore* c : ranked) {
    if (static_cast<int>(chosen.size()) >= settings.width) break;
    if (!settings.hold_until_room || admits_now(*c)) chosen.push_back(c->cluster);
  }
  if (chosen.empty()) {
    *waits_for = d.selection.selected_cluster;
    held->scores = d.selection.scores;
    held->selection_id = d.selection.selection_id;
    hold(fmt::format("no worker has room for {} now (best: {}); waiting on the manager",
                     w.accelerator,
                     d.selection.selected_cluster.empty() ? "none" : d.selection.selected_cluster));
    return false;
  }
  // Registry names back to MultiKueueCluster names.
  std::vector<std::string> names;
  for (const std::string& c : chosen) {
    std::string name = c;
    for (const auto& worker : work.workers) {
      if (registry_name(worker) == c) name = worker;
    }
    names.push_back(name);
  }
  nominate(work, names, d.selection.selection_id, tried, "");
  return true;
}

bool Dispatcher::preempt(const Work& work, const Held& held) {
  const DispatchSettings& settings = options_.settings;
  const kube::ManagerWorkload& w = work.workload;
  if (!settings.preempt_after_s || w.priority < settings.preempt_min_priority ||
      w.accelerator.empty()) {
    return false;
  }
  const auto now = clock_->steady_now();
  // The candidates, with the lower-priority Workloads seen admitted on each.
  struct Running {
    int priority = 0;
    steady_clock::time_point admitted;
    double chips = 0;
    std::string key;
  };
  struct Option {
    double chip_s = 0;  // the victim's chips x seconds since its admission
    std::string worker;
    std::string why;
    double slice = 0;
  };
  // Kueue evicts for a Workload only those holding what it needs: chips of its accelerator.
  const auto wanted = slice_shape(w.accelerator);
  if (!wanted) return false;
  std::optional<Option> best;
  std::unique_lock lock(mu_);
  const auto t = workloads_.find(w.uid);
  if (t == workloads_.end() || !t->second.waited ||
      now - t->second.seen < seconds(*settings.preempt_after_s)) {
    return false;
  }
  for (const CandidateScore& c : held.scores) {
    // Eligible, or skipped only for want of room: never a breaker, a stale probe or a worker
    // kept for a Workload before it.
    const auto misfit = capacity_misfit(c.signals);
    if (!c.eligible && !(misfit && c.skip_reason == *misfit)) continue;
    std::string worker;
    for (const std::string& candidate : work.workers) {
      if (registry_name(candidate) == c.cluster) worker = candidate;
    }
    if (worker.empty()) continue;
    const auto& preempting = settings.preempting_workers;
    if (!preempting.empty() &&
        std::find(preempting.begin(), preempting.end(), worker) == preempting.end()) {
      continue;
    }
    const std::optional<double> slice = c.signals.slice_chips;
    if (!slice || never_fits(c.signals)) continue;  // no eviction makes room there
    if (found_no_room(c.cluster, *slice, w.priority, now)) continue;
    std::vector<Running> lower;
    for (const auto& [uid, other] : workloads_) {
      const kube::ManagerWorkload& o = other.workload;
      if (!o.cluster_name || o.finished || o.deleting || o.priority >= w.priority ||
          registry_name(*o.cluster_name) != c.cluster) {
        continue;
      }
      const auto shape = slice_shape(o.accelerator);
      if (!shape || shape->accelerator != wanted->accelerator) continue;
      lower.push_back({o.priority, other.admitted, shape->chips, key_of(o)});
    }
    // Kueue's order of candidates: the lowest priority, then the most recently admitted. Room
    // is sure only where one of them holds a slice as large as the one wanted: a slice's chips
    // are one run in one block, so evicting it frees a run the slice fits in, where chips
    // counted across smaller victims may lie in different blocks (docs/dispatch.md). Kueue
    // reaches the first such Workload in its order, and needs none of those before it.
    std::sort(lower.begin(), lower.end(), [](const Running& a, const Running& b) {
      return std::tie(a.priority, b.admitted, a.key) < std::tie(b.priority, a.admitted, b.key);
    });
    const auto whole = std::find_if(lower.begin(), lower.end(),
                                    [&](const Running& r) { return r.chips >= *slice; });
    if (whole == lower.end()) continue;
    Option o{whole->chips * std::chrono::duration<double>(now - whole->admitted).count(), worker,
             "", *slice};
    o.why = fmt::format(
        "preempting on {}: held {:.0f} s (dispatch.preempt_after_s {}), {} chips free of a "
        "{}-chip slice; evicting {} ({} chips, priority {}) frees a run as large",
        worker, std::chrono::duration<double>(now - t->second.seen).count(),
        *settings.preempt_after_s, c.signals.free_chips.value_or(0), *slice, whole->key,
        whole->chips, whole->priority);
    if (!best || std::tie(o.chip_s, o.worker) < std::tie(best->chip_s, best->worker)) {
      best = std::move(o);
    }
  }
  if (!best) return false;
  lock.unlock();
  if (nominate(work, {best->worker}, held.selection_id, {}, best->why)) {
    event("info", fmt::format("{}: {}", key_of(w), best->why));
    std::lock_guard relock(mu_);
    ++counters_.preemptions;
    if (const auto mine = ours_.find(w.uid); mine != ours_.end()) {
      mine->second.preempting = Preempting{best->slice, w.priority};
    }
  }
  return true;
}

bool Dispatcher::nominate(const Work& work, const std::vector<std::string>& names,
                          std::int64_t selection_id, const std::set<std::string>& tried,
                          const std::string& detail_if_patched) {
  const kube::ManagerWorkload& w = work.workload;
  const DispatchSettings& settings = options_.settings;
  if (work.again && names == w.nominated) {
    std::lock_guard lock(mu_);
    ours_[w.uid].restart(clock_->steady_now());  // still the best: its round starts again
    return true;
  }
  // Intent, then the patch, then its outcome.
  NominationRecord record;
  record.manager = options_.manager->server();
  record.workload_uid = w.uid;
  record.namespace_ = w.namespace_;
  record.workload = w.name;
  record.accelerator = w.accelerator;
  record.clusters = names;
  record.selection_id = selection_id;
  record.requested_at = clock_->now();
  std::int64_t id = 0;
  try {
    id = options_.store->record_nomination(record);
  } catch (const std::exception& e) {
    std::lock_guard lock(mu_);
    store_problem_ = fmt::format("the state store cannot record nominations: {}", e.what());
    ++counters_.failures;
    held_[key_of(w)] = store_problem_;
    return false;
  }
  std::string outcome = kNominationPatched;
  std::string detail;
  try {
    options_.manager->nominate(w, names, settings.dispatcher_name);
  } catch (const kube::KubeError& e) {
    outcome = e.status() == 409 ? kNominationConflict : kNominationFailed;
    detail = e.what();
  }
  try {
    options_.store->finish_nomination(
        id, outcome, outcome == kNominationPatched ? detail_if_patched : detail, clock_->now());
  } catch (const std::exception& e) {
    event("warn", fmt::format("nomination {} of {}: its outcome ({}) could not be recorded: {}", id,
                              key_of(w), outcome, e.what()));
  }
  std::lock_guard lock(mu_);
  store_problem_.clear();
  if (outcome == kNominationConflict) {
    ++counters_.conflicts;  // the watch brings its new version; decided again then
    return false;
  }
  if (outcome == kNominationFailed) {
    ++counters_.failures;
    held_[key_of(w)] = detail;
    event("warn",
          fmt::format("nominating {} for {}: {}", fmt::join(names, ","), key_of(w), detail));
    return false;
  }
  held_.erase(key_of(w));
  ++counters_.nominations;
  if (work.again) ++counters_.renominations;
  const auto now = clock_->steady_now();
  const auto t = workloads_.find(w.uid);
  if (t != workloads_.end() && t->second.waited && !work.again) {
    const double ms = std::chrono::duration<double, std::milli>(now - t->second.seen).count();
    if (latencies_ms_.size() < kLatencySamples) {
      latencies_ms_.push_back(ms);
    } else {
      latencies_ms_[latency_next_] = ms;
      latency_next_ = (latency_next_ + 1) % kLatencySamples;
    }
  }
  // The watch may have brought what the patch led to before the patch's answer came back (a
  // worker with room admits at once): a Workload already admitted, or gone, is no nomination
  // of ours to wait for.
  if (t == workloads_.end()) return true;
  if (t->second.workload.cluster_name) {
    ++counters_.admitted;
    return true;
  }
  Ours& mine = ours_[w.uid];
  mine.tried = tried;
  mine.clusters = names;
  mine.restart(now);
  // Until the watch brings the patched version, the nomination is the one just made.
  if (t->second.workload.resource_version == w.resource_version) {
    t->second.workload.nominated = names;
  }
  return true;
}

void Dispatcher::watch_loop() {
  auto backoff = std::chrono::milliseconds(500);
  const auto stopped = [this] {
    std::lock_guard lock(mu_);
    return stopping_;
  };
  while (!stopped()) {
    try {
      const kube::WorkloadList list = options_.manager->list_workloads();
      apply_list(list);
      backoff = std::chrono::milliseconds(500);
      std::string version = list.resource_version;
      while (!stopped()) {
        options_.manager->watch_workloads(
            version,
            [&](const kube::ManagerEvent& e) {
              apply_event(e);
              if (!e.workload.resource_version.empty()) version = e.workload.resource_version;
              return !stopped();
            },
            stopped);
      }
    } catch (const kube::KubeError& e) {
      if (e.status() == 410) continue;  // too old: list again at once
      std::unique_lock lock(mu_);
      const bool first = watch_problem_.empty();
      watch_problem_ = fmt::format("the manager cannot be watched: {}", e.what());
      if (first) event("warn", watch_problem_);
      wake_.wait_for(lock, backoff, [&] { return stopping_; });
      backoff = std::min(backoff * 2, std::chrono::milliseconds(30'000));
    } catch (const std::exception& e) {
      std::unique_lock lock(mu_);
      watch_problem_ = fmt::format("the manager cannot be watched: {}", e.what());
      wake_.wait_for(lock, backoff, [&] { return stopping_; });
      backoff = std::min(backoff * 2, std::chrono::milliseconds(30'000));
    }
  }
}

void Dispatcher::decide_loop() {
  const auto retry = seconds(options_.settings.retry_s);
  while (true) {
    bool wiring_due = false;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      wiring_due = !wiring_ || clock_->steady_now() - wiring_at_ >= kWiringRefresh ||
                   !wiring_problem_.empty();
    }
    if (wiring_due) refresh_wiring();
    bool can_act = false;
    {
      std::lock_guard lock(mu_);
      dirty_ = false;
      can_act = listed_ && wiring_ && watch_problem_.empty() &&
                (!kueue_dispatcher_ || *kueue_dispatcher_ == options_.settings.dispatcher_name);
    }
    if (can_act) pass();
    std::unique_lock lock(mu_);
    // Next: a change, a held Workload's retry, the earliest renomination, the wiring's refresh.
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(kWiringRefresh);
    if (!held_.empty() || !store_problem_.empty() || !wiring_problem_.empty()) {
      wait = std::min(wait, retry);
    }
    if (!ours_.empty()) {
      const auto now = clock_->steady_now();
      for (const auto& [uid, o] : ours_) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(due(o) - now);
        wait = std::min(wait, std::max(left, std::chrono::milliseconds(1)));
      }
    }
    wake_.wait_for(lock, wait, [&] { return stopping_ || dirty_; });
  }
}

}  // namespace falcon
