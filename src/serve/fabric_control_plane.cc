// The production ControlPlane: the fabric's modules behind the HealthMonitor's probe cache.
// The fabric records submissions, decisions, probes and observed states in its state store.
#include <openssl/sha.h>

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "falcon/circuit_breaker.h"
#include "falcon/client.h"
#include "falcon/errors.h"
#include "falcon/fabric.h"
#include "falcon/state_store.h"
#include "falcon/values.h"
#include "serve/api_server.h"
#include "serve/health_monitor.h"
#include "util/time_format.h"

namespace falcon {
namespace {

std::string file_hash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream bytes;
  bytes << in.rdbuf();
  const std::string text = bytes.str();
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  std::string hex = "sha256:";
  for (const unsigned char b : digest) hex += fmt::format("{:02x}", b);
  return hex;
}

}  // namespace

class FabricControlPlane final : public ControlPlane {
 public:
  FabricControlPlane(std::shared_ptr<ClusterFabric> fabric, std::shared_ptr<StateStore> store,
                     std::shared_ptr<Clock> clock)
      : fabric_(std::move(fabric)),
        store_(std::move(store)),
        clock_(clock ? std::move(clock) : make_system_clock()),
        local_(make_local_client(fabric_)) {
    const auto config = fabric_->config();
    ClusterFabric* f = fabric_.get();
    // Since when each cluster has answered every probe of the loop (none: its last one failed).
    struct Answering {
      std::mutex mutex;
      std::map<std::string, StoreTime> since;
    };
    auto answering = std::make_shared<Answering>();
    const std::shared_ptr<Clock> loop_clock = clock_;
    monitor_ = std::make_unique<HealthMonitor>(
        // Every probe feeds the cluster's breaker, written by the fabric (the one place breakers
        // are written). Without this no success ever reached a breaker in `falcon serve`: a
        // trial claimed by a selection stayed "under way" with nobody running it until it
        // lapsed. A breaker it changes is a gate in the fabric's selection epoch, which ends
        // the decisions select_brief would repeat. With it goes how long the cluster has
        // answered, which lets a cluster back before its cool-down is over.
        [f, answering, loop_clock](const ClusterConfig& c) {
          auto outcome = [&](bool reachable) {
            std::optional<StoreTime> since;
            {
              std::lock_guard lock(answering->mutex);
              if (reachable) {
                since = answering->since.try_emplace(c.name, loop_clock->now()).first->second;
              } else {
                answering->since.erase(c.name);
              }
            }
            f->record_probe_outcome(c.name, reachable, since);
          };
          ClusterProbeResult r;
          try {
            r = f->probe_cluster(c);
          } catch (...) {
            outcome(false);
            throw;
          }
          outcome(r.reachable);
          return r;
        },
        store_, clock_, config->serve, to_string(config->probe.backend));
    // A probe in the cache is newer data for the decisions of the cluster's types.
    monitor_->set_on_probe_shown(
        [f](const std::string& cluster) { f->record_probe_shown(cluster); });
    monitor_->set_clusters(config->clusters);
    note_config_loaded();
    monitor_->start();
  }
  ~FabricControlPlane() override { monitor_->stop(); }

  void stop_loop() { monitor_->stop(); }

  void reload() {
    try {
      fabric_->reload();
    } catch (const ClusterConfigError& e) {
      std::lock_guard lock(mutex_);
      ++config_.reload_failures;
      config_.last_reload_error = e.what();
      throw;
    }
    const auto config = fabric_->config();
    monitor_->set_settings(config->serve);
    monitor_->set_clusters(config->clusters);
    note_config_loaded();
    std::lock_guard lock(mutex_);
    ++config_.reloads;
    config_.last_reload_error.clear();
  }

  // --- FabricClient: what is not answered from the probe cache is the in-process client's.

  std::vector<ClusterEntry> list_clusters() override { return local_->list_clusters(); }
  ClusterSelection recorded_selection(std::int64_t id) override {
    return local_->recorded_selection(id);
  }
  WorkloadHandle handle_for(const std::string& cluster, const std::string& workload) override {
    return local_->handle_for(cluster, workload);
  }
  // Records the observed state.
  WorkloadStatus status(const std::string& cluster, const std::string& workload) override {
    return local_->status(cluster, workload);
  }
  Cancellation cancel(const std::string& cluster, const std::string& workload) override {
    return local_->cancel(cluster, workload);
  }
  std::vector<WorkloadInfo> list_workloads(const std::string& cluster,
                                           const std::optional<std::string>& state) override {
    return local_->list_workloads(cluster, state);
  }
  std::vector<Recovery> recoveries(const std::optional<std::string>& workload) override {
    return local_->recoveries(workload);
  }
  void read_logs(const LogRequest& request, const std::function<void(const std::string&)>& on_line,
                 const std::function<bool()>& stop) override {
    local_->read_logs(request, on_line, stop);
  }
  LogExportResult export_logs(const ExportRequest& request,
                              const ExportObserver& observer) override {
    return local_->export_logs(request, observer);
  }

  // Selects from the cache when no cluster is named (an explained decision, recorded), then
  // submits: recorded once, before xpk runs, with the spec (a managed workload is submitted
  // again from it) and the decision.
  Submission submit(const SubmitRequest& request) override {
    if (request.managed) {
      throw InvalidValueError("managed", "a managed workload is placed by the supervisor");
    }
    Submission out;
    std::string cluster = request.cluster;
    std::int64_t selection_id = request.selection_id;
    if (cluster.empty()) {
      Decision chosen = select_explained(request.spec.accelerator_type);
      cluster = chosen.selection.selected_cluster;
      selection_id = chosen.selection.selection_id;
      out.selection = std::move(chosen.selection);
    }
    out.handle = fabric_->submit_workload(cluster, request.spec, selection_id);
    std::lock_guard lock(mutex_);
    last_submit_[cluster] = clock_->steady_now();
    return out;
  }

  // --- ControlPlane.

  ClusterConfig cluster_config(const std::string& cluster) const override {
    return fabric_->get_cluster(cluster);
  }

  std::optional<ProbeSnapshot> cached_probe(const std::string& cluster) const override {
    fabric_->get_cluster(cluster);  // UnknownClusterError
    return monitor_->latest(cluster);
  }

  ProbeSnapshot fresh_probe(const std::string& cluster) override {
    const ClusterConfig config = fabric_->get_cluster(cluster);  // UnknownClusterError
    return monitor_->fresh(config, std::chrono::seconds(fabric_->config()->serve.max_probe_age_s));
  }

  std::vector<BreakerReport> breakers(const std::string& cluster) const override {
    return fabric_->cluster_breakers(cluster);
  }

  Decision select_explained(const std::string& accelerator_type) override {
    return decide(accelerator_type, {}, false, nullptr);
  }

  // Repeats the last decision for `accelerator_type` while it is reusable (serve.select_reuse_ms
  // in docs/serve.md): made under this configuration, with every candidate's breakers closed,
  // nothing it read changed since (the fabric's selection epoch for the type: no probe of a
  // cluster offering it shown in the monitor, no write of the fabric touching it: histories,
  // breakers, submissions), younger than select_reuse_ms and every probe it used still
  // younger than max_probe_age_s. A repeat is answered with its candidates' ages moved on by the
  // time since; with serve.record_repeats none (the default) it is the standing decision itself
  // (its id and decided_at), else a decision of its own in the store (record_repeated_selection).
  //
  // One caller per accelerator decides afresh at a time. When only newer data made the last
  // decision old (a probe finished, a submission was recorded), the others repeat it meanwhile:
  // it still stands on probes within the age bound. When a breaker changed (one may have opened)
  // or the configuration did, they wait for the new decision.
  Decision select_brief(const std::string& accelerator_type) override {
    const auto config = fabric_->config();
    if (config->serve.select_reuse_ms <= 0) {
      Decision out = select_explained(accelerator_type);
      out.brief = true;
      return out;
    }
    std::shared_ptr<const Reusable> last;
    std::shared_ptr<std::mutex> deciding;
    {
      std::lock_guard lock(reuse_mutex_);
      Slot& slot = reusable_[accelerator_type];
      if (!slot.deciding) slot.deciding = std::make_shared<std::mutex>();
      last = slot.last;
      deciding = slot.deciding;
    }
    std::unique_lock decide_lock(*deciding, std::defer_lock);
    switch (standing(last.get(), accelerator_type, *config)) {
      case Standing::kCurrent:
        if (auto out = repeat(*last)) return std::move(*out);
        break;
      case Standing::kNewerData:
        if (!decide_lock.try_lock()) {
          if (auto out = repeat(*last)) return std::move(*out);
        }
        break;
      case Standing::kStale:
        break;
    }
    if (!decide_lock.owns_lock()) {
      decide_lock.lock();
      // Another caller may have decided while this one waited.
      {
        std::lock_guard lock(reuse_mutex_);
        last = reusable_[accelerator_type].last;
      }
      if (standing(last.get(), accelerator_type, *config) == Standing::kCurrent) {
        if (auto out = repeat(*last)) return std::move(*out);
      }
    }
    ClusterFabric::SelectionBasis basis;
    Decision out;
    try {
      out = decide(accelerator_type, {}, false, &basis);
      out.brief = true;
    } catch (...) {
      // No slot is kept for an accelerator that has no standing decision (an unknown type, no
      // cluster available): callers sending arbitrary names must not grow the map.
      std::lock_guard lock(reuse_mutex_);
      if (const auto it = reusable_.find(accelerator_type);
          it != reusable_.end() && !it->second.last) {
        reusable_.erase(it);
      }
      throw;
    }
    std::shared_ptr<Reusable> r;
    // An unrecorded decision is not repeated: the next caller decides afresh and tries the store
    // again, so recording resumes with the first decision after the store has room.
    if (basis.breakers_closed && out.selection.selection_id != 0) {
      r = std::make_shared<Reusable>();
      r->config = config;
      r->epoch = basis.epoch;
      r->decided = clock_->steady_now();
      // What a brief answer shows of it: no candidates, probe_results or scores, and of each
      // candidate's probe its cluster, reachability, age and from_cache.
      Decision& brief = r->brief;
      brief.brief = true;
      brief.selection.selection_id = out.selection.selection_id;
      brief.selection.decided_at = out.selection.decided_at;
      brief.selection.selected_cluster = out.selection.selected_cluster;
      brief.selection.accelerator = out.selection.accelerator;
      brief.selection.reason = out.selection.reason;
      brief.selection.policy = out.selection.policy;
      brief.same_as = out.selection.selection_id;
      brief.skipped = out.skipped;
      brief.candidate_probes.reserve(out.candidate_probes.size());
      for (const ProbeSnapshot& p : out.candidate_probes) {
        ProbeSnapshot& lite = brief.candidate_probes.emplace_back();
        lite.result.cluster = p.result.cluster;
        lite.result.reachable = p.result.reachable;
        lite.age_ms = p.age_ms;
        lite.from_cache = true;
        r->oldest_probe_ms = std::max(r->oldest_probe_ms, p.age_ms);
      }
    }
    std::lock_guard lock(reuse_mutex_);
    reusable_[accelerator_type].last = std::move(r);  // null: the next caller decides afresh
    return out;
  }

  std::optional<Decision> prepare_repeat(const std::string& accelerator_type) override {
    const auto config = fabric_->config();
    // A repeat to record is select_brief's (it writes to the store).
    if (config->serve.select_reuse_ms <= 0 ||
        config->serve.record_repeats != RepeatRecords::kNone) {
      return std::nullopt;
    }
    std::shared_ptr<const Reusable> last;
    std::shared_ptr<std::mutex> deciding;
    {
      std::lock_guard lock(reuse_mutex_);
      const auto it = reusable_.find(accelerator_type);
      if (it == reusable_.end()) return std::nullopt;
      last = it->second.last;
      deciding = it->second.deciding;
    }
    switch (standing(last.get(), accelerator_type, *config)) {
      case Standing::kCurrent:
        return repeat_as_of_now(*last);
      case Standing::kNewerData:
        // As select_brief: repeated while another caller decides afresh; else this caller
        // decides (not here: deciding blocks).
        if (deciding && !deciding->try_lock()) return repeat_as_of_now(*last);
        if (deciding) deciding->unlock();
        return std::nullopt;
      case Standing::kStale:
        break;
    }
    return std::nullopt;
  }

  SupervisorSettings supervisor_defaults() const override { return fabric_->config()->supervisor; }
  std::optional<FenceTicket> advance_fence(const std::string& name) override {
    return fabric_->advance_fence(name);
  }

  void record_cluster_failure(const std::string& cluster) override {
    fabric_->record_cluster_failure(cluster);
  }

  // The supervisor's decisions. Unlike an API selection they also take a cluster's cached
  // probe as stale once this control plane has submitted to that cluster since it was made:
  // a supervisor pass decides for every workload a killed cluster took down, one after the
  // other, and on the cached queue depth all of them went to the same cluster, far beyond its
  // free slots, where the replacements waited QUEUED (the chaos benchmark's longest SVRTs).
  //
  // `hints.in_flight` adds the caller's placements not submitted yet to the queue depth of
  // their clusters' probes (what the decision is judged on, and recorded with). A cluster of
  // `hints.no_room` is first left out (an unavailable candidate, "no room: ..."); when no
  // other cluster can take the workload, the decision is made again with it.
  Decision select_excluding(const std::string& accelerator_type,
                            const std::vector<std::string>& excluded,
                            const PlacementHints& hints) override {
    if (!hints.no_room.empty()) {
      try {
        return decide(accelerator_type, excluded, true, nullptr, &hints, true);
      } catch (const NoAvailableClusterError&) {
        // None with room: every candidate that can take it, full or not.
      }
    }
    return decide(accelerator_type, excluded, true, nullptr, &hints, false);
  }

  // A selection from the monitor's cache (probing now what is older than max_probe_age_s, or
  // with `after_own_submits` what this control plane submitted to since its probe), recorded;
  // `basis`, when given, says what else it rested on.
  // `hints` and `leave_out_full`: select_excluding.
  Decision decide(const std::string& accelerator_type, const std::vector<std::string>& excluded,
                  bool after_own_submits, ClusterFabric::SelectionBasis* basis,
                  const PlacementHints* hints = nullptr, bool leave_out_full = false) {
    const auto config_age =
        std::chrono::milliseconds(std::chrono::seconds(fabric_->config()->serve.max_probe_age_s));
    std::map<std::string, std::chrono::steady_clock::time_point> submitted;
    if (after_own_submits) {
      std::lock_guard lock(mutex_);
      submitted = last_submit_;
    }
    if (hints) {
      for (const auto& [cluster, at] : hints->placed_at) {
        auto& latest = submitted[cluster];
        latest = std::max(latest, at);
      }
    }
    const auto steady = clock_->steady_now();
    // The oldest probe of `c` this decision takes.
    auto age_for = [&](const ClusterConfig& c) {
      const auto it = submitted.find(c.name);
      if (it == submitted.end()) return config_age;
      const auto since = std::chrono::duration_cast<std::chrono::milliseconds>(steady - it->second);
      return std::clamp(since, std::chrono::milliseconds(0), config_age);
    };
    const auto max_age = config_age;
    // An excluded cluster is a candidate that cannot be chosen: unreachable, saying why.
    auto excluded_result = [&](const ClusterConfig& c) -> std::optional<ClusterProbeResult> {
      std::string why;
      if (std::find(excluded.begin(), excluded.end(), c.name) != excluded.end()) {
        why = "excluded: the cluster a managed workload is being recovered from";
      } else if (hints && hints->left_out.count(c.name) > 0) {
        why = "left out: " + hints->left_out.at(c.name);
      } else if (hints && leave_out_full) {
        if (const auto it = hints->no_room.find(c.name); it != hints->no_room.end()) {
          why = "no room: " + it->second;
        }
      }
      if (why.empty()) return std::nullopt;
      ClusterProbeResult r;
      r.cluster = c.name;
      r.reachable = false;
      r.error = std::move(why);
      r.probed_at = format_iso8601(clock_->now());
      return r;
    };
    // The caller's placements not submitted yet, as QUEUED workloads of the probe.
    auto with_in_flight = [&](ClusterProbeResult r) {
      if (!hints || !r.reachable) return r;
      if (const auto it = hints->in_flight.find(r.cluster);
          it != hints->in_flight.end() && it->second > 0) {
        r.queue_depth = r.queue_depth.value_or(0) + it->second;
      }
      return r;
    };
    // The clusters whose breaker is not closed before this decision: the selection's gate
    // claims the trial of those it lets through, and the probe this decision uses for such a
    // candidate is that trial's outcome, fed at once (else the trial would be "under way" with
    // nobody running it until the health loop's next probe, refusing every other decision).
    std::set<std::string> not_closed;
    if (store_) {
      try {
        for (const BreakerState& b : store_->list_breakers()) {
          if (b.state != kBreakerClosed) not_closed.insert(b.key);
        }
      } catch (const std::exception&) {
      }
    }
    auto trial_outcome = [&](const ClusterConfig& c, bool reachable) {
      if (not_closed.contains(breaker_key(c.name))) {
        fabric_->record_probe_outcome(c.name, reachable);
      }
    };
    std::mutex used_mutex;
    std::map<std::string, ProbeSnapshot> used;
    Decision outcome;
    ClusterFabric::SelectOptions how;
    how.basis = basis;
    how.probe = [&](const ClusterConfig& c) {
      if (auto r = excluded_result(c)) {
        // Its trial, if the gate claimed one, ends with what the health loop knows.
        if (auto p = monitor_->cached(c.name, max_age)) trial_outcome(c, p->result.reachable);
        return *r;
      }
      MonitoredProbe p = monitor_->fresh(c, age_for(c));
      if (p.from_cache) trial_outcome(c, p.result.reachable);  // else fed by the probe
      p.result = with_in_flight(std::move(p.result));
      std::lock_guard lock(used_mutex);
      used[c.name] = p;
      return p.result;
    };
    how.cached = [&](const ClusterConfig& c) -> std::optional<ClusterProbeResult> {
      if (auto r = excluded_result(c)) {
        if (auto p = monitor_->cached(c.name, max_age)) trial_outcome(c, p->result.reachable);
        return r;
      }
      auto p = monitor_->cached(c.name, age_for(c));
      if (!p) return std::nullopt;
      trial_outcome(c, p->result.reachable);
      p->result = with_in_flight(std::move(p->result));
      std::lock_guard lock(used_mutex);
      return used.insert_or_assign(c.name, std::move(*p)).first->second.result;
    };
    outcome.selection = fabric_->select_cluster(accelerator_type, how);
    // A decision the store refused (a full disk, a database restart: the fabric logged why) is
    // still answered, with selection_id 0 and `not_recorded` saying why: choosing a cluster
    // changes nothing on one, and selection must go on while the store is down (issue 27). What
    // does change a cluster, a submit, records its intent first and fails instead.
    for (const CandidateScore& score : outcome.selection.scores) {
      if (!score.eligible) outcome.skipped.emplace(score.cluster, score.skip_reason);
    }
    outcome.candidate_probes.reserve(outcome.selection.candidates.size());
    for (const std::string& name : outcome.selection.candidates) {
      if (const auto it = used.find(name); it != used.end())
        outcome.candidate_probes.push_back(std::move(it->second));
    }
    return outcome;
  }

  LogLines read_log(const WorkloadHandle& handle, int rank, const LogFilter& filter,
                    int slice) const override {
    return fabric_->stream_pod_log(handle, rank, filter, slice);
  }

  void check_export(const WorkloadHandle& handle,
                    const std::optional<std::vector<int>>& ranks) const override {
    LogFilter filter;
    filter.ranks = ranks;
    fabric_->check_export_ranks(handle, filter);
  }

  ConfigInfo config_info() const override {
    std::lock_guard lock(mutex_);
    ConfigInfo info = config_;
    info.clusters = static_cast<int>(fabric_->list_clusters().size());
    return info;
  }

  ProbeCacheStats cache_stats() const override { return monitor_->stats(); }

  FabricCounters::Snapshot fabric_counters() const override {
    const auto counters = fabric_->counters();
    return counters ? counters->snapshot() : FabricCounters::Snapshot{};
  }

  bool ready() const override {
    return monitor_->snapshot().size() == fabric_->list_clusters().size();
  }

  std::optional<std::string> store_problem() const override { return monitor_->store_problem(); }

 private:
  void note_config_loaded() {
    const auto config = fabric_->config();
    // Hashes the file as it is now: a change between the fabric's read and this one shows as a
    // hash of the newer text (the next SIGHUP loads it).
    std::string hash = file_hash(config->source_path);
    std::lock_guard lock(mutex_);
    config_.source_path = config->source_path;
    config_.content_hash = std::move(hash);
    config_.loaded_at = format_iso8601(clock_->now());
  }

  // The last reusable decision per accelerator (select_brief).
  struct Reusable {
    std::shared_ptr<const FabricConfig> config;  // the configuration it was made under
    std::uint64_t epoch = 0;                     // ClusterFabric::selection_epoch() as made
    std::chrono::steady_clock::time_point decided{};
    std::int64_t oldest_probe_ms = 0;  // the oldest candidate probe's age when it was made
    Decision brief;  // as a repeat answers it (same_as: itself), ages as when it was made
  };
  struct Slot {
    std::shared_ptr<const Reusable> last;  // null: none to repeat
    std::shared_ptr<std::mutex> deciding;  // held by the caller deciding afresh
  };
  void forget_decisions() {
    std::lock_guard lock(reuse_mutex_);
    for (auto& [accelerator, slot] : reusable_) slot.last = nullptr;
  }

  enum class Standing {
    kCurrent,    // may be repeated
    kNewerData,  // within its bounds, but newer probes or histories are in, or it is due for
                 // renewal (past half of select_reuse_ms)
    kStale,      // not to be repeated
  };
  Standing standing(const Reusable* last, const std::string& accelerator_type,
                    const FabricConfig& config) const {
    if (!last || last->config.get() != &config) return Standing::kStale;
    const SelectionChange change = fabric_->selection_changed_since(accelerator_type, last->epoch);
    if (change == SelectionChange::kGate) return Standing::kStale;
    const std::int64_t elapsed_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(clock_->steady_now() - last->decided)
            .count();
    const std::int64_t max_age_ms = std::int64_t{config.serve.max_probe_age_s} * 1000;
    if (elapsed_ms < 0 || elapsed_ms >= config.serve.select_reuse_ms ||
        last->oldest_probe_ms + elapsed_ms >= max_age_ms) {
      return Standing::kStale;
    }
    // Past half its time a decision is renewed ahead: one caller decides afresh while the
    // others repeat it, so that callers do not all wait for a new decision each time one ends.
    if (2 * elapsed_ms >= config.serve.select_reuse_ms) return Standing::kNewerData;
    return change == SelectionChange::kNone ? Standing::kCurrent : Standing::kNewerData;
  }

  // `last` again, recorded as a decision of its own unless repeats are not recorded; nullopt
  // when the decision it repeats is gone from the store (a replaced database: the caller decides
  // afresh).
  std::optional<Decision> repeat(const Reusable& last) {
    Decision out = repeat_as_of_now(last);
    if (out.selection.selection_id != 0) return out;  // record_repeats: none
    try {
      out.selection.selection_id =
          store_->record_repeated_selection(out.same_as, out.selection.decided_at);
    } catch (const std::invalid_argument&) {
      forget_decisions();
      return std::nullopt;
    }
    return out;
  }

  // `last` as of now: its candidates' ages moved on by the time since. With record_repeats none
  // it is the standing decision (its id and decided_at); else it has no id until recorded, and
  // decided_at is now.
  Decision repeat_as_of_now(const Reusable& last) const {
    Decision out = last.brief;
    if (last.config->serve.record_repeats != RepeatRecords::kNone) {
      out.selection.selection_id = 0;
      out.selection.decided_at = format_iso8601(clock_->now());
    }
    const std::int64_t elapsed_ms = std::max<std::int64_t>(
        0,
        std::chrono::duration_cast<std::chrono::milliseconds>(clock_->steady_now() - last.decided)
            .count());
    for (ProbeSnapshot& p : out.candidate_probes) p.age_ms += elapsed_ms;
    return out;
  }

  mutable std::mutex reuse_mutex_;
  std::map<std::string, Slot, std::less<>> reusable_;

  std::shared_ptr<ClusterFabric> fabric_;
  std::shared_ptr<StateStore> store_;
  std::shared_ptr<Clock> clock_;
  std::unique_ptr<HealthMonitor> monitor_;
  mutable std::mutex mutex_;
  ConfigInfo config_;
  std::unique_ptr<FabricClient> local_;  // the in-process client over fabric_
  // When this control plane last submitted to each cluster (guarded by mutex_).
  std::map<std::string, std::chrono::steady_clock::time_point> last_submit_;
};

std::shared_ptr<ControlPlane> make_fabric_control_plane(std::shared_ptr<ClusterFabric> fabric,
                                                        std::shared_ptr<StateStore> store,
                                                        std::shared_ptr<Clock> clock) {
  if (!fabric || !store) throw std::invalid_argument("make_fabric_control_plane: null argument");
  return std::make_shared<FabricControlPlane>(std::move(fabric), std::move(store),
                                              std::move(clock));
}

void stop_control_plane_loop(ControlPlane& control) {
  if (auto* p = dynamic_cast<FabricControlPlane*>(&control)) p->stop_loop();
}

void reload_control_plane(ControlPlane& control) {
  if (auto* p = dynamic_cast<FabricControlPlane*>(&control)) p->reload();
}

}  // namespace falcon
