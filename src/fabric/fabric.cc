#include "falcon/fabric.h"

#include <map>
#include <set>
#include <stdexcept>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fabric/fabric_impl.h"
#include "falcon/accelerator_types.h"
#include "falcon/errors.h"
#include "falcon/state_store.h"
#include "falcon/values.h"
#include "kube/kube_prober.h"
#include "util/time_format.h"
#include "xpk/credential_warmup.h"
#include "xpk/xpk_cli.h"

namespace falcon {
namespace {

// Logs may be written a little before xpk reports the submission (clock skew between this
// machine and Google's), so log queries start this much before submitted_at.
constexpr std::chrono::minutes kSubmitMargin{10};

// The real effects for the members `deps` leaves null; the HTTP client takes the
// configuration's CA file.
// A rank the workload does not have is an error, not an empty object (issue 11). A TPU slice's
// ranks are its VMs (one pod each), known from the accelerator type of falcon's submission
// record; without a record, or for GPU and CPU workloads (whose node count xpk takes from
// --num-nodes), every rank is taken as asked.
void check_ranks_exist(const XpkWorkloadManager& workloads, const WorkloadHandle& handle,
                       const LogFilter& filter) {
  if (!filter.ranks) return;
  const auto record = workloads.find_submission(handle.cluster, handle.workload_name);
  if (!record) return;
  const auto canonical = canonical_accelerator_type(record->accelerator_type);
  const XpkAcceleratorType* type = canonical ? find_xpk_accelerator_type(*canonical) : nullptr;
  if (!type || type->device_class != DeviceClass::kTpu) return;
  for (const int rank : *filter.ranks) {
    if (rank < 0 || rank >= type->vms_per_slice) {
      throw std::invalid_argument(fmt::format(
          "workload '{}' on cluster '{}' has ranks 0..{} in each slice ({}: {} VMs per slice); "
          "there is no rank {}",
          handle.workload_name, handle.cluster, type->vms_per_slice - 1, type->name,
          type->vms_per_slice, rank));
    }
  }
}

// A prober that asks a function: the adapter behind select_cluster(type, probe) and the
// recording of select's probes.
class FunctionProber final : public ClusterProber {
 public:
  explicit FunctionProber(ProbeFunction fn, ClusterFabric::CachedProbeFunction cached = {})
      : fn_(std::move(fn)), cached_(std::move(cached)) {}
  ClusterProbeResult probe(const ClusterConfig& cluster) const override { return fn_(cluster); }
  std::optional<ClusterProbeResult> cached(const ClusterConfig& cluster) const override {
    if (!cached_) return std::nullopt;
    return cached_(cluster);
  }

 private:
  ProbeFunction fn_;
  ClusterFabric::CachedProbeFunction cached_;
};

std::int64_t elapsed_ms(const Clock& clock, std::chrono::steady_clock::time_point start) {
  return std::max<std::int64_t>(
      0, std::chrono::duration_cast<std::chrono::milliseconds>(clock.steady_now() - start).count());
}

SubmissionRow row_of(const SubmissionRecord& r) {
  SubmissionRow row;
  row.handle = {r.workload, r.cluster, r.namespace_, r.submitted_at};
  row.accelerator_type = r.accelerator_type;
  row.device_class = r.device_class;
  row.cluster_id = r.cluster_id;
  row.project = r.project;
  row.zone = r.zone;
  row.docker_image = r.docker_image;
  row.priority = r.priority;
  row.spec = r.spec;
  row.selection_id = r.selection_id;
  return row;
}

SubmissionRecord record_of(const SubmissionRow& row) {
  return SubmissionRecord{.cluster = row.handle.cluster,
                          .workload = row.handle.workload_name,
                          .namespace_ = row.handle.namespace_,
                          .accelerator_type = row.accelerator_type,
                          .device_class = row.device_class,
                          .submitted_at = row.handle.submitted_at,
                          .cluster_id = row.cluster_id,
                          .project = row.project,
                          .zone = row.zone,
                          .docker_image = row.docker_image,
                          .priority = row.priority,
                          .spec = row.spec,
                          .selection_id = row.selection_id};
}

// The workload manager's submissions, kept in the fabric's state store.
class StateSubmissionStore final : public SubmissionStore {
 public:
  // `open`: the state store or a throw (StateStoreError); `notice`: told about failures.
  StateSubmissionStore(std::function<std::shared_ptr<StateStore>()> open,
                       std::function<void(const std::string&)> notice, std::shared_ptr<Clock> clock)
      : open_(std::move(open)), notice_(std::move(notice)), clock_(std::move(clock)) {}

  void record(const SubmissionRecord& record) override {
    try {
      open_()->record_submission(row_of(record));
    } catch (const std::exception& e) {
      notice_(fmt::format(
          "workload '{}' was submitted to cluster '{}' but could not be recorded in the state "
          "store: {}; later commands by name will not know its namespace or submission time",
          record.workload, record.cluster, e.what()));
      throw;
    }
  }

  // Throws (StateStoreError): the submit then creates nothing.
  bool intend(const SubmissionRecord& record) override {
    return open_()->record_submission_intent(row_of(record));
  }

  // Throws (StateStoreError): the cancel then deletes nothing.
  std::int64_t intend_delete(const std::string& cluster, const std::string& workload) override {
    return open_()->record_delete_intent(cluster, workload, clock_->now());
  }

  void deleted(std::int64_t intent, const std::string& outcome,
               const std::string& detail) override {
    if (intent == 0) return;
    try {
      open_()->finish_delete(intent, outcome, detail, clock_->now());
    } catch (const std::exception& e) {
      notice_(
          fmt::format("the outcome of delete {} ({}) could not be recorded in the state "
                      "store: {}; it stays recorded as requested",
                      intent, outcome, e.what()));
    }
  }

  void forget(const SubmissionRecord& record) override {
    try {
      open_()->forget_submission(record.cluster, record.workload, record.submitted_at);
    } catch (const std::exception& e) {
      notice_(fmt::format(
          "workload '{}' was not created on cluster '{}', but its record could not be taken "
          "back from the state store: {}; it lists as submitted and its status as UNKNOWN",
          record.workload, record.cluster, e.what()));
    }
  }

  std::optional<SubmissionRecord> find(const std::string& cluster,
                                       const std::string& workload) const override {
    std::shared_ptr<StateStore> store;
    try {
      store = open_();
    } catch (const std::exception&) {
      return std::nullopt;  // noticed once, when the open failed
    }
    try {
      if (auto row = store->find_submission(cluster, workload)) return record_of(*row);
    } catch (const std::exception& e) {
      notice_(
          fmt::format("cannot read the submission of workload '{}' on cluster '{}' "
                      "from the state store: {}",
                      workload, cluster, e.what()));
    }
    return std::nullopt;
  }

 private:
  std::function<std::shared_ptr<StateStore>()> open_;
  std::function<void(const std::string&)> notice_;
  std::shared_ptr<Clock> clock_;
};

// A log read's or export's values, checked before anything runs (falcon/values.h): the
// workload's name, the slice, the ranks of the filter and its start, an RFC 3339 time or an age
// ("6h", resolved here against `now`). A one-rank read checks its rank itself.
LogFilter checked_log_request(const WorkloadHandle& handle, int slice, LogFilter filter,
                              std::chrono::system_clock::time_point now) {
  check_workload_name("workload", handle.workload_name);
  check_index("slice", slice, kMaxSlice);
  if (filter.ranks) {
    for (const int r : *filter.ranks) check_index("ranks", r, kMaxRank);
  }
  if (filter.since) filter.since = check_since("since", *filter.since, now);
  return filter;
}

FabricDependencies with_real_effects(const FabricConfig& config, FabricDependencies deps) {
  if (!deps.runner) deps.runner = make_posix_command_runner();
  if (!deps.clock) deps.clock = make_system_clock();
  if (!deps.http) {
    CurlHttpOptions http_options;
    http_options.ca_file = config.gcp.ca_file;
    deps.http = make_curl_http_client(http_options);
  }
  return deps;
}

}  // namespace

void ClusterFabric::Impl::build() {
  auto m = std::make_shared<Modules>();
  m->config = registry.snapshot();
  m->xpk = std::make_shared<const xpk::XpkCli>(deps.runner, m->config->xpk, deps.counters);
  kube::KubeProberOptions kube_options;
  kube_options.state_dir = xpk::resolve_state_dir(m->config->xpk);
  kube_options.http = deps.http;
  kube_options.http_with_ca = [](const std::string& ca_file) {
    CurlHttpOptions options;
    options.ca_file = ca_file;
    return make_curl_http_client(options);
  };
  kube_options.runner = deps.runner;
  kube_options.clock = deps.clock;
  // A fresh state directory has no kubeconfigs: the kube backend fetches a cluster's own the
  // first time it needs it, as `falcon cluster warm-up` would.
  kube_options.warm_up =
      [xpk = m->xpk, clock = deps.clock](const ClusterConfig& c) -> std::optional<std::string> {
    const WarmupResult r = xpk::warm_up_credentials(*xpk, *clock, {c}, 1).at(0);  // one per cluster
    return r.ok ? std::nullopt : std::optional<std::string>(r.error.value_or("failed"));
  };
  auto kube = std::make_shared<kube::KubeProber>(std::move(kube_options));
  m->prober = std::make_unique<ClusterProber>(
      m->xpk, kube, m->config->probe.backend, deps.clock,
      [this](const std::string& cluster, const std::vector<WorkloadInfo>& workloads) {
        observe_listing(cluster, workloads);
      });
  m->selector =
      std::make_unique<ClusterSelector>(registry, *m->prober, m->config->selection, deps.clock);
  m->workloads = std::make_unique<XpkWorkloadManager>(
      m->xpk, deps.clock,
      std::make_shared<StateSubmissionStore>([this] { return store_or_throw(); },
                                             [this](const std::string& text) { notice(text); },
                                             deps.clock),
      kube, m->config->probe.backend);
  LogRetrieverOptions log_options;
  log_options.http = make_counting_http_client(deps.http, deps.counters);
  log_options.clock = deps.clock;
  log_options.settings = m->config->gcp;
  // Every falcon process of this state directory shares the read quota (issue 11).
  log_options.quota_dir = (xpk::resolve_state_dir(m->config->xpk) / "quota").string();
  log_options.on_wait = deps.on_log_wait;
  m->logs = std::make_unique<CloudLogRetriever>(std::move(log_options));
  const auto config = m->config;
  {
    std::lock_guard<std::mutex> lock(mutex);
    modules = std::move(m);
  }
  epochs.set_clusters(config->clusters);
}

void ClusterFabric::Impl::notice(const std::string& message) const {
  if (deps.on_notice) deps.on_notice(message);
}

std::shared_ptr<StateStore> ClusterFabric::Impl::store_or_throw() const {
  std::lock_guard<std::mutex> lock(state_mutex);
  if (state) return state;
  if (state_tried) throw StateStoreError("", "", "open", state_error);
  state_tried = true;
  const auto config = registry.snapshot();
  std::filesystem::path state_dir;
  std::string url;
  try {
    state_dir = xpk::resolve_state_dir(config->xpk);
    url = config->serve.state.empty() ? default_state_url(state_dir) : config->serve.state;
    StateStoreOptions options;
    options.clock = deps.clock;
    state = open_state_store(url, options);
  } catch (const std::exception& e) {
    state_error = e.what();
    notice(
        fmt::format("the state store cannot be opened, so nothing is remembered by this "
                    "command: {}",
                    state_error));
    throw;
  }
  // The old record file, once: later opens find the import recorded and read nothing.
  try {
    const auto imported = state->import_submissions_jsonl(state_dir / "submissions.jsonl");
    if (imported.file_found && !imported.already_imported) {
      notice(fmt::format(
          "imported {} submission(s) from {} into the state store {}; the file "
          "is kept{}",
          imported.imported, (state_dir / "submissions.jsonl").string(), state->location(),
          imported.made_read_only ? ", read-only" : " (" + imported.note + ")"));
    }
  } catch (const std::exception& e) {
    notice(fmt::format("cannot import {} into the state store: {}",
                       (state_dir / "submissions.jsonl").string(), e.what()));
  }
  return state;
}

std::shared_ptr<StateStore> ClusterFabric::Impl::store() const {
  try {
    return store_or_throw();
  } catch (const std::exception&) {
    return nullptr;  // noticed once, when the open failed
  }
}

void ClusterFabric::Impl::record_probes(const std::vector<ProbeRecord>& probes) const {
  if (probes.empty()) return;
  const auto s = store();
  if (!s) return;
  for (const ProbeRecord& p : probes) history_changed(p.result.cluster);
  try {
    s->record_probes(probes);
  } catch (const std::exception& e) {
    notice(
        fmt::format("cannot record {} probe(s) in the state store: {}", probes.size(), e.what()));
  }
}

std::unique_ptr<CircuitBreakers> ClusterFabric::Impl::breakers() const {
  auto s = store();
  if (!s) return nullptr;
  return std::make_unique<CircuitBreakers>(std::move(s), current()->config->selection.breaker,
                                           deps.clock);
}

ClusterSelector::CandidateGate ClusterFabric::Impl::breaker_gate(
    std::shared_ptr<std::atomic<bool>> touched) const {
  std::shared_ptr<const CircuitBreakers> b = breakers();
  if (!b) return {};
  // Every breaker not closed, read once per decision (one query instead of two per candidate):
  // a candidate with neither key in it goes through without touching the store; the others
  // take the per-key path below, which reads again and claims a due trial. Null when the read
  // failed: then every candidate takes the per-key path.
  std::shared_ptr<const std::set<std::string>> not_closed;
  if (const auto s = store()) {
    try {
      auto keys = std::make_shared<std::set<std::string>>();
      for (const BreakerState& state : s->list_breakers()) {
        if (state.state != kBreakerClosed) keys->insert(state.key);
      }
      not_closed = std::move(keys);
    } catch (const std::exception&) {
      // The per-key path notices the failure.
    }
  }
  // breaker_key(cluster, accelerator), with the accelerator's canonical spelling worked out once
  // per decision rather than once per candidate.
  auto canonical = std::make_shared<std::pair<std::string, std::string>>();
  return [this, b, not_closed, canonical, touched](
             const ClusterConfig& cluster,
             const std::string& accelerator) -> std::optional<std::string> {
    if (canonical->first != accelerator || canonical->second.empty()) {
      *canonical = {accelerator, breaker_key("", accelerator).substr(1)};
    }
    const std::string keys[] = {breaker_key(cluster.name), cluster.name + "/" + canonical->second};
    if (not_closed && !not_closed->contains(keys[0]) && !not_closed->contains(keys[1])) {
      return std::nullopt;
    }
    if (touched) touched->store(true);
    try {
      // Refused by either: say so without claiming the other's trial.
      const auto now = deps.clock->now();
      for (const auto& key : keys) {
        const auto a = breaker_admission(b->get(key), b->settings(), now);
        if (!a.allowed) return key == keys[0] ? a.reason : a.reason + " for " + accelerator;
      }
      for (const auto& key : keys) {
        if (auto why = b->admit(key)) return *why;  // lost a trial to another caller
      }
    } catch (const std::exception& e) {
      notice(
          fmt::format("cannot read the circuit breaker of cluster '{}' from the state store "
                      "({}); it is treated as closed",
                      cluster.name, e.what()));
    }
    return std::nullopt;
  };
}

ClusterSelector::HistoryLoader ClusterFabric::Impl::history_loader() const {
  auto s = store();
  if (!s) return {};
  const auto window = std::chrono::seconds(current()->config->selection.signals.window_s);
  return [this, s, window](const ClusterConfig& cluster, const std::string& accelerator,
                           StoreTime now) -> std::shared_ptr<const ClusterHistory> {
    const std::string key = fmt::format("{}\n{}\n{}", cluster.name, accelerator, window.count());
    const auto steady = deps.clock->steady_now();
    std::uint64_t generation = 0;
    {
      std::lock_guard<std::mutex> lock(history_mutex);
      generation = history_generations[cluster.name];
      if (const auto it = histories.find(key); it != histories.end()) {
        const KeptHistory& kept = it->second;
        if (kept.generation == generation && steady >= kept.loaded &&
            steady - kept.loaded < kHistoryMaxAge) {
          return kept.history;
        }
      }
    }
    std::shared_ptr<const ClusterHistory> loaded;
    try {
      loaded = std::make_shared<const ClusterHistory>(
          load_cluster_history(*s, cluster.name, accelerator, now, window));
    } catch (const std::exception& e) {
      notice(fmt::format(
          "cannot read the history of cluster '{}' from the state store ({}); its selection "
          "signals come from its probe alone",
          cluster.name, e.what()));
      throw;
    }
    std::lock_guard<std::mutex> lock(history_mutex);
    if (history_generations[cluster.name] == generation) {
      histories[key] = KeptHistory{.history = loaded, .loaded = steady, .generation = generation};
    }
    return loaded;
  };
}

void ClusterFabric::Impl::observe_listing(const std::string& cluster,
                                          const std::vector<WorkloadInfo>& workloads) const {
  if (workloads.empty()) return;
  const auto store = this->store();
  if (!store) return;
  try {
    std::map<std::string_view, const std::string*> listed;
    for (const WorkloadInfo& w : workloads) listed.emplace(w.name, &w.state);
    // Only the submissions not seen to end, every page of them: those are few, whatever the
    // length of the history.
    SubmissionQuery query;
    query.cluster = cluster;
    query.unfinished = true;
    query.limit = 1000;
    const auto now = deps.clock->now();
    bool changed = false;
    for (;;) {
      const SubmissionPage page = store->list_submissions(query);
      for (const SubmissionRow& row : page.rows) {
        const auto it = listed.find(row.handle.workload_name);
        if (it == listed.end() || (row.state && *row.state == *it->second)) continue;
        changed |= store
                       ->record_workload_event(WorkloadEvent{.cluster = cluster,
                                                             .workload = row.handle.workload_name,
                                                             .state = *it->second,
                                                             .observed_at = now,
                                                             .detail = "probe: workload list"})
                       .has_value();
      }
      if (page.next_cursor.empty()) break;
      query.cursor = page.next_cursor;
    }
    if (changed) history_changed(cluster);
  } catch (const std::exception& e) {
    notice(
        fmt::format("cannot record the workload states a probe of cluster '{}' listed in the "
                    "state store: {}",
                    cluster, e.what()));
  }
}

void ClusterFabric::Impl::history_changed(const std::string& cluster) const {
  std::lock_guard<std::mutex> lock(history_mutex);
  ++history_generations[cluster];
  epochs.touch_cluster(cluster, SelectionEpochs::Input::kData);
}

std::uint64_t ClusterFabric::selection_epoch() const { return impl_->epochs.now(); }

SelectionChange ClusterFabric::selection_changed_since(const std::string& accelerator_type,
                                                       std::uint64_t epoch) const {
  return impl_->epochs.since(accelerator_type, epoch);
}

void ClusterFabric::record_probe_shown(const std::string& cluster) const {
  impl_->epochs.touch_cluster(cluster, SelectionEpochs::Input::kData);
}

void ClusterFabric::Impl::feed_breaker(const std::string& key, bool success) const {
  const auto b = breakers();
  if (!b) return;
  // A cluster x accelerator breaker's failures are the history's submit failures.
  const auto slash = key.find('/');
  if (slash != std::string::npos) history_changed(key.substr(0, slash));
  // A breaker that changed (or may have) is a gate for what it guards.
  const auto changed = [&] {
    if (slash == std::string::npos) {
      epochs.touch_cluster(key, SelectionEpochs::Input::kGate);
    } else {
      epochs.touch_type(std::string_view(key).substr(slash + 1), SelectionEpochs::Input::kGate);
    }
  };
  try {
    if (success ? b->record_success(key) : b->record_failure(key)) changed();
  } catch (const std::exception& e) {
    changed();
    notice(fmt::format("cannot record a {} of '{}' in its circuit breaker: {}",
                       success ? "success" : "failure", key, e.what()));
  }
}

void ClusterFabric::Impl::feed_probe(const std::string& cluster, bool reachable,
                                     std::optional<StoreTime> answering_since) const {
  const std::string key = breaker_key(cluster);
  if (reachable) {
    const auto b = breakers();
    if (!b) return;
    try {
      const BreakerState s = b->get(key);
      // Nothing to change; and a success does not cut an open breaker's cool-down short (the
      // trial after it does the closing), unless the cluster has answered every probe for the
      // first trip's cool-down: then it is back, however many trips it took before (a chaos
      // run with every breaker of the fleet at its fourth trip kept clusters that had answered
      // for 15 s out of every recovery, 30 s in production terms: 8 minutes).
      const StoreTime now = deps.clock->now();
      const bool proven = answering_since &&
                          now - *answering_since >= std::chrono::seconds(b->settings().cooldown_s);
      if (s.state == kBreakerClosed && s.consecutive_failures == 0 && s.trips == 0) return;
      if (s.state == kBreakerOpen && s.opened_until && now < *s.opened_until && !proven) {
        return;
      }
    } catch (const std::exception&) {
      // feed_breaker below meets the same store and says so.
    }
  }
  feed_breaker(key, reachable);
}

void ClusterFabric::record_probe_outcome(const std::string& cluster, bool reachable,
                                         std::optional<StoreTime> answering_since) const {
  impl_->feed_probe(cluster, reachable, answering_since);
}

void ClusterFabric::record_cluster_failure(const std::string& cluster) const {
  impl_->feed_breaker(breaker_key(cluster), false);
}

std::shared_ptr<Modules> ClusterFabric::Impl::current() const {
  std::lock_guard<std::mutex> lock(mutex);
  return modules;
}

LogQueryOptions ClusterFabric::Impl::query_options(const WorkloadHandle& handle, int slice) const {
  LogQueryOptions options;
  options.slice = slice;
  if (auto submitted = parse_rfc3339(handle.submitted_at)) {
    options.not_before = format_iso8601(*submitted - kSubmitMargin);
  }
  return options;
}

ClusterFabric::ClusterFabric(const std::string& config_path)
    : ClusterFabric(config_path, FabricDependencies{}) {}

ClusterFabric::ClusterFabric(const std::string& config_path, FabricDependencies deps)
    : impl_(std::make_unique<Impl>()) {
  // Parsed once: the HTTP client and the registry share this reading of the file.
  FabricConfig config = load_fabric_config(config_path);
  impl_->config_path = config_path;
  impl_->deps = with_real_effects(config, std::move(deps));
  impl_->state = impl_->deps.state;
  impl_->registry.load(std::move(config));
  impl_->build();
}

ClusterFabric::~ClusterFabric() = default;

FabricConfig ClusterFabric::check_config(const std::string& config_path) {
  return load_fabric_config(config_path);
}

void ClusterFabric::reload() {
  impl_->registry.load(impl_->config_path);
  impl_->build();
}

std::shared_ptr<const FabricConfig> ClusterFabric::config() const {
  return impl_->current()->config;
}

std::vector<ClusterConfig> ClusterFabric::list_clusters() const {
  return impl_->registry.list_clusters();
}

ClusterConfig ClusterFabric::get_cluster(const std::string& cluster) const {
  return impl_->registry.get_cluster(cluster);
}

std::shared_ptr<StateStore> ClusterFabric::state_store() const { return impl_->store_or_throw(); }

std::shared_ptr<FabricCounters> ClusterFabric::counters() const { return impl_->deps.counters; }

ClusterProbeResult ClusterFabric::get_cluster_status(const std::string& cluster) const {
  const ClusterConfig config = impl_->registry.get_cluster(cluster);
  const Clock& clock = *impl_->deps.clock;
  const auto start = clock.steady_now();
  const auto m = impl_->current();
  ClusterProbeResult result = m->prober->probe(config);
  impl_->record_probes({ProbeRecord{.result = result,
                                    .backend = to_string(m->prober->backend(config)),
                                    .duration_ms = elapsed_ms(clock, start),
                                    .extra_json = probe_extra_json(result)}});
  impl_->feed_probe(cluster, result.reachable);
  return result;
}

ClusterProbeResult ClusterFabric::probe_cluster(const ClusterConfig& cluster) const {
  return impl_->current()->prober->probe(cluster);
}

void ClusterFabric::Impl::record_failed_selection(const NoAvailableClusterError& e) const {
  ClusterSelection none;
  none.accelerator = e.accelerator();
  for (const auto& p : e.probe_results()) none.candidates.push_back(p.cluster);
  none.probe_results = e.probe_results();
  none.reason = e.what();
  none.policy = e.policy();
  none.scores = e.scores();
  none.decided_at = format_iso8601(deps.clock->now());
  record_selection(none);
}

void ClusterFabric::Impl::record_selection(ClusterSelection& selection) const {
  const auto s = store();
  if (!s) return;
  try {
    selection.selection_id = s->record_selection(selection);
  } catch (const std::exception& e) {
    selection.not_recorded = e.what();
    notice(
        fmt::format("the selection of {} for {} could not be recorded in the state "
                    "store: {}",
                    selection.selected_cluster, selection.accelerator, e.what()));
  }
}

namespace {

// The configured selection settings, under `policy` instead of the configured ones when given.
SelectionSettings selection_settings(const Modules& m, std::optional<SelectionPolicy> policy) {
  SelectionSettings settings = m.config->selection;
  if (policy) {
    settings.policy = *policy;
    settings.policy_by_accelerator.clear();
  }
  return settings;
}

}  // namespace

ClusterSelection ClusterFabric::select_cluster(const std::string& accelerator_type) const {
  return impl_->select_live(accelerator_type, std::nullopt);
}

ClusterSelection ClusterFabric::select_cluster(const std::string& accelerator_type,
                                               const SelectOptions& how) const {
  if (how.probe) return impl_->select_asking(accelerator_type, how);
  if (how.cached || how.basis) {
    throw std::invalid_argument("select_cluster: SelectOptions::cached and ::basis need ::probe");
  }
  return impl_->select_live(accelerator_type, how.policy);
}

ClusterSelection ClusterFabric::Impl::select_live(const std::string& accelerator_type,
                                                  std::optional<SelectionPolicy> policy) const {
  const Impl* impl_ = this;
  const auto m = impl_->current();
  const Clock& clock = *impl_->deps.clock;
  std::mutex mutex;
  std::vector<ProbeRecord> probes;
  const ClusterProber& real = *m->prober;
  // Times each probe for the history; a probe that throws is the selector's to report.
  FunctionProber recording([&](const ClusterConfig& cluster) {
    const auto start = clock.steady_now();
    ClusterProbeResult result;
    try {
      result = real.probe(cluster);
    } catch (...) {
      impl_->feed_probe(cluster.name, false);
      throw;
    }
    impl_->feed_probe(cluster.name, result.reachable);
    std::lock_guard<std::mutex> lock(mutex);
    probes.push_back(ProbeRecord{.result = result,
                                 .backend = to_string(m->prober->backend(cluster)),
                                 .duration_ms = elapsed_ms(clock, start),
                                 .extra_json = probe_extra_json(result)});
    return result;
  });
  const ClusterSelector selector(impl_->registry, recording, selection_settings(*m, policy),
                                 impl_->deps.clock, impl_->breaker_gate(), impl_->history_loader());
  ClusterSelection selection;
  try {
    selection = selector.select(accelerator_type);
  } catch (const NoAvailableClusterError& e) {
    impl_->record_probes(probes);
    impl_->record_failed_selection(e);
    throw;
  }
  impl_->record_probes(probes);
  impl_->record_selection(selection);
  return selection;
}

ClusterSelection ClusterFabric::Impl::select_asking(const std::string& accelerator_type,
                                                    const SelectOptions& how) const {
  const Impl* impl_ = this;
  SelectionBasis* basis = how.basis;
  const auto m = impl_->current();
  const FunctionProber asking(how.probe, how.cached);
  // Read before anything the decision reads: a write racing the decision makes it look old.
  if (basis) {
    basis->epoch = impl_->epochs.now();
  }
  auto touched = basis ? std::make_shared<std::atomic<bool>>(false) : nullptr;
  auto gate = impl_->breaker_gate(touched);
  const ClusterSelector selector(impl_->registry, asking, selection_settings(*m, how.policy),
                                 impl_->deps.clock, gate, impl_->history_loader());
  ClusterSelection selection;
  try {
    selection = selector.select(accelerator_type);
  } catch (const NoAvailableClusterError& e) {
    impl_->record_failed_selection(e);
    throw;
  }
  // Without breakers (no store) there is nothing to claim or wait for.
  if (basis) basis->breakers_closed = !touched->load();
  impl_->record_selection(selection);
  return selection;
}

void to_json(nlohmann::json& j, const BreakerReport& v) {
  j = nlohmann::json{{"key", v.key},
                     {"state", v.state},
                     {"consecutive_failures", v.consecutive_failures},
                     {"trips", v.trips},
                     {"opened_until", v.opened_until ? nlohmann::json(*v.opened_until) : nullptr},
                     {"summary", v.summary}};
}

void from_json(const nlohmann::json& j, BreakerReport& v) {
  j.at("key").get_to(v.key);
  j.at("state").get_to(v.state);
  j.at("consecutive_failures").get_to(v.consecutive_failures);
  j.at("trips").get_to(v.trips);
  v.opened_until.reset();
  if (const auto it = j.find("opened_until"); it != j.end() && !it->is_null()) {
    v.opened_until = it->get<std::string>();
  }
  j.at("summary").get_to(v.summary);
}

std::vector<BreakerReport> ClusterFabric::cluster_breakers(const std::string& cluster) const {
  const ClusterConfig config = impl_->registry.get_cluster(cluster);
  const auto b = impl_->breakers();
  if (!b) return {};
  std::vector<std::string> keys{breaker_key(cluster)};
  for (const auto& slot : config.accelerator_slots) keys.push_back(breaker_key(cluster, slot.type));
  const auto now = impl_->deps.clock->now();
  std::vector<BreakerReport> out;
  try {
    for (const auto& key : keys) {
      const BreakerState s = b->get(key);
      out.push_back(BreakerReport{
          .key = key,
          .state = s.state,
          .consecutive_failures = s.consecutive_failures,
          .trips = s.trips,
          .opened_until =
              s.opened_until ? std::optional(format_iso8601(*s.opened_until)) : std::nullopt,
          .summary = describe_breaker(s, now)});
    }
  } catch (const std::exception& e) {
    impl_->notice(
        fmt::format("cannot read the circuit breakers of cluster '{}': {}", cluster, e.what()));
    return {};
  }
  return out;
}

std::vector<WarmupResult> ClusterFabric::warm_up() const {
  const auto m = impl_->current();
  return xpk::warm_up_credentials(*m->xpk, *impl_->deps.clock, m->config->clusters,
                                  m->config->selection.max_parallel_probes);
}

WorkloadHandle ClusterFabric::submit_workload(const std::string& cluster, const WorkloadSpec& spec,
                                              std::int64_t selection_id) {
  const ClusterConfig config = impl_->registry.get_cluster(cluster);
  const std::string key = breaker_key(cluster, spec.accelerator_type);
  WorkloadHandle handle;
  try {
    handle = impl_->current()->workloads->submit(config, spec, selection_id);
  } catch (const WorkloadSubmitError&) {
    impl_->feed_breaker(key, false);  // xpk ran and the cluster refused or failed
    throw;
  }
  impl_->feed_breaker(key, true);
  return handle;
}

PlacedWorkload ClusterFabric::select_and_submit(const WorkloadSpec& spec) {
  PlacedWorkload out;
  out.selection = select_cluster(spec.accelerator_type);
  out.handle = submit_workload(out.selection.selected_cluster, spec, out.selection.selection_id);
  return out;
}

WorkloadStatus ClusterFabric::get_workload_status(const WorkloadHandle& handle) const {
  const ClusterConfig config = impl_->registry.get_cluster(handle.cluster);
  const auto current = impl_->current();
  WorkloadStatus status = current->workloads->get_status(config, handle);
  if (const auto store = impl_->store()) {
    impl_->history_changed(handle.cluster);
    try {
      store->record_workload_event(WorkloadEvent{.cluster = handle.cluster,
                                                 .workload = handle.workload_name,
                                                 .state = status.state,
                                                 .observed_at = impl_->deps.clock->now(),
                                                 .detail = "xpk workload list"});
    } catch (const std::exception& e) {
      impl_->notice(
          fmt::format("cannot record the state of workload '{}' on cluster '{}' in "
                      "the state store: {}",
                      handle.workload_name, handle.cluster, e.what()));
    }
  }
  if (!status.exit_code && status.state == "COMPLETED") {
    status.exit_code = 0;
  } else if (!status.exit_code && status.state == "FAILED") {
    try {
      status.exit_code = current->logs->failure_exit_code(
          config, handle.workload_name, handle.namespace_, impl_->query_options(handle, 0));
    } catch (const LogRetrievalError&) {
      // Best effort, as documented: the state is what this call is for; the code stays null.
    }
  }
  return status;
}

bool ClusterFabric::cancel_workload(const WorkloadHandle& handle) {
  const ClusterConfig config = impl_->registry.get_cluster(handle.cluster);
  return impl_->current()->workloads->cancel(config, handle);
}

std::vector<WorkloadInfo> ClusterFabric::list_workloads(
    const std::string& cluster, const std::optional<std::string>& state_filter) const {
  const ClusterConfig config = impl_->registry.get_cluster(cluster);
  return impl_->current()->workloads->list_workloads(config, state_filter);
}

WorkloadHandle ClusterFabric::handle_for(const std::string& cluster,
                                         const std::string& workload_name) const {
  const ClusterConfig config = impl_->registry.get_cluster(cluster);
  check_workload_name("workload", workload_name);
  if (auto record = impl_->current()->workloads->find_submission(cluster, workload_name)) {
    return {workload_name, cluster, record->namespace_, record->submitted_at};
  }
  return {workload_name, cluster, config.default_namespace, ""};
}

std::optional<FenceTicket> ClusterFabric::advance_fence(const std::string& name) const {
  const auto current = impl_->current();
  const std::string& fence = current->config->supervisor.fence;
  if (fence.empty()) return std::nullopt;
  const std::string uri = fence_object_uri(fence, name);
  return FenceTicket{uri, current->logs->advance_fence_epoch(uri)};
}

LogLines ClusterFabric::stream_pod_log(const WorkloadHandle& handle, int rank,
                                       const LogFilter& filter, int slice) const {
  const ClusterConfig config = impl_->registry.get_cluster(handle.cluster);
  check_index("rank", rank, kMaxRank);
  const LogFilter checked = checked_log_request(handle, slice, filter, impl_->deps.clock->now());
  return impl_->current()->logs->stream_log(config, handle.workload_name, handle.namespace_, rank,
                                            checked, impl_->query_options(handle, slice));
}

void ClusterFabric::follow_pod_log(const WorkloadHandle& handle, int rank, const LogFilter& filter,
                                   int slice, const FollowOptions& options,
                                   const std::function<void(const std::string&)>& on_line) const {
  const ClusterConfig config = impl_->registry.get_cluster(handle.cluster);
  check_index("rank", rank, kMaxRank);
  const LogFilter checked = checked_log_request(handle, slice, filter, impl_->deps.clock->now());
  impl_->current()->logs->follow_log(config, handle.workload_name, handle.namespace_, rank, checked,
                                     impl_->query_options(handle, slice), options, on_line);
}

void ClusterFabric::follow_pod_log_until_finished(
    const WorkloadHandle& handle, int rank, const LogFilter& filter, int slice,
    FollowOptions options, const std::function<bool()>& interrupted,
    const std::function<void(const std::string&)>& on_line) const {
  options.should_stop = follow_until_finished(
      impl_->deps.clock,
      [this, &handle] {
        try {
          return is_terminal_state(get_workload_status(handle).state);
        } catch (const WorkloadNotFoundError&) {
          return true;  // deleted (or garbage-collected): no new lines will come
        }
      },
      interrupted, follow_linger(options),
      // Asked as often as the log is polled: a finished workload is noticed within a poll
      // (one xpk or Kubernetes list per poll), not after 15 s.
      options.poll_interval);
  follow_pod_log(handle, rank, filter, slice, options, on_line);
}

void ClusterFabric::check_export_ranks(const WorkloadHandle& handle,
                                       const LogFilter& filter) const {
  (void)impl_->registry.get_cluster(handle.cluster);  // UnknownClusterError
  check_ranks_exist(*impl_->current()->workloads, handle,
                    checked_log_request(handle, 0, filter, impl_->deps.clock->now()));
}

LogExportResult ClusterFabric::export_pod_logs(
    const WorkloadHandle& handle, const LogFilter& filter, const std::string& gcs_dest, int slice,
    const std::function<void(const ExportProgress&)>& progress) const {
  const ClusterConfig config = impl_->registry.get_cluster(handle.cluster);
  const LogFilter checked = checked_log_request(handle, slice, filter, impl_->deps.clock->now());
  const auto current = impl_->current();
  check_ranks_exist(*current->workloads, handle, checked);
  return current->logs->export_logs(config, handle.workload_name, handle.namespace_, checked,
                                    gcs_dest, impl_->query_options(handle, slice), progress);
}

LogExportResult ClusterFabric::export_pod_logs(
    const WorkloadHandle& handle, const LogFilter& filter, const std::string& gcs_dest, int slice,
    const ExportOptions& how, const std::function<void(const ExportProgress&)>& progress) const {
  const ClusterConfig config = impl_->registry.get_cluster(handle.cluster);
  const LogFilter checked = checked_log_request(handle, slice, filter, impl_->deps.clock->now());
  const auto current = impl_->current();
  check_ranks_exist(*current->workloads, handle, checked);
  ExportOptions options = how;
  const bool archive = !current->config->gcp.log_archive.empty();
  if (options.window_end.empty() && archive &&
      (options.via == ExportVia::kAuto || options.via == ExportVia::kSink)) {
    // The window ends when the workload did; one that has not ended has no end yet.
    try {
      const WorkloadStatus status = current->workloads->get_status(config, handle);
      if (is_terminal_state(status.state) && status.end_time) {
        options.window_end = *status.end_time;
      }
    } catch (const std::exception& e) {
      if (options.on_status) {
        options.on_status({.phase = ExportStatus::Phase::kChosen,
                           .via = options.via,
                           .message = fmt::format("cannot learn when {} ended ({}); its window "
                                                  "is taken to end now",
                                                  handle.workload_name, e.what())});
      }
    }
  }
  return current->logs->export_logs(config, handle.workload_name, handle.namespace_, checked,
                                    gcs_dest, impl_->query_options(handle, slice), options,
                                    progress);
}

}  // namespace falcon
