// The production ControlPlane: the fabric's modules behind a probe cache that a background loop
// keeps fresh, with every submission, decision, probe and observed state recorded in the store.
#include <openssl/sha.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "falcon/api_server.h"
#include "falcon/errors.h"
#include "falcon/fabric.h"
#include "falcon/selector.h"
#include "falcon/state_store.h"
#include "util/time_format.h"
#include "xpk/xpk_cli.h"

namespace falcon {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

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

std::int64_t millis(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace

class FabricControlPlane final : public ControlPlane {
 public:
  FabricControlPlane(std::shared_ptr<ClusterFabric> fabric, std::shared_ptr<StateStore> store,
                     ProbeLoopSettings settings, std::shared_ptr<Clock> clock)
      : fabric_(std::move(fabric)),
        store_(std::move(store)),
        settings_(settings),
        clock_(clock ? std::move(clock) : make_system_clock()) {
    note_config_loaded();
    loop_ = std::thread([this] { run_loop(); });
  }
  ~FabricControlPlane() override { stop_loop(); }

  void stop_loop() {
    {
      std::lock_guard lock(mutex_);
      if (stopped_) return;
      stopped_ = true;
    }
    wake_.notify_all();
    if (loop_.joinable()) loop_.join();
  }

  void reload() {
    try {
      fabric_->reload();
    } catch (const ClusterConfigError& e) {
      std::lock_guard lock(mutex_);
      ++config_.reload_failures;
      config_.last_reload_error = e.what();
      throw;
    }
    note_config_loaded();
    std::lock_guard lock(mutex_);
    ++config_.reloads;
    config_.last_reload_error.clear();
    // Clusters gone from the file leave the cache; new ones are due at once (the loop finds
    // them without an entry).
    std::map<std::string, Entry> kept;
    for (const ClusterConfig& c : fabric_->list_clusters()) {
      if (auto it = cache_.find(c.name); it != cache_.end()) kept.emplace(c.name, it->second);
    }
    cache_ = std::move(kept);
    wake_.notify_all();
  }

  // --- ControlPlane.

  std::vector<ClusterConfig> clusters() const override { return fabric_->list_clusters(); }

  std::optional<ProbeSnapshot> cached_probe(const std::string& cluster) const override {
    fabric_->get_cluster(cluster);  // UnknownClusterError
    std::lock_guard lock(mutex_);
    const auto it = cache_.find(cluster);
    if (it == cache_.end()) return std::nullopt;
    return snapshot(it->second, true);
  }

  SelectOutcome select(const std::string& accelerator_type) override {
    const auto config = fabric_->config();
    std::vector<std::pair<ClusterConfig, int>> candidates;
    for (const ClusterConfig& c : config->clusters) {
      if (const AcceleratorSlot* slot = c.find_slot(accelerator_type)) {
        candidates.emplace_back(c, slot->priority);
      }
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const auto& a, const auto& b) { return a.second < b.second; });
    // The selector probes through this prober, which answers from the cache when fresh enough.
    class CachingProber final : public ClusterProber {
     public:
      explicit CachingProber(FabricControlPlane& owner) : owner_(owner) {}
      ClusterProbeResult probe(const ClusterConfig& cluster) const override {
        ProbeSnapshot s = owner_.fresh(cluster);
        std::lock_guard lock(mutex_);
        used_[cluster.name] = s;
        return s.result;
      }
      std::map<std::string, ProbeSnapshot> used() const {
        std::lock_guard lock(mutex_);
        return used_;
      }

     private:
      FabricControlPlane& owner_;
      mutable std::mutex mutex_;
      mutable std::map<std::string, ProbeSnapshot> used_;
    };
    CachingProber prober(*this);
    ClusterSelector selector(empty_registry_, prober, config->selection, clock_);
    SelectOutcome outcome;
    outcome.selection = selector.select_among(accelerator_type, candidates);
    const auto used = prober.used();
    for (const std::string& name : outcome.selection.candidates) {
      if (const auto it = used.find(name); it != used.end())
        outcome.candidates.push_back(it->second);
    }
    try {
      outcome.selection_id = store_->record_selection(outcome.selection);
    } catch (const std::exception&) {
      outcome.selection_id = 0;  // the decision stands; only its record is missing
    }
    return outcome;
  }

  WorkloadHandle submit(const std::string& cluster, const WorkloadSpec& spec) override {
    const ClusterConfig config = fabric_->get_cluster(cluster);
    WorkloadHandle handle = fabric_->submit_workload(cluster, spec);
    SubmissionRow row;
    row.handle = handle;
    row.accelerator_type = spec.accelerator_type;
    if (const AcceleratorSlot* slot = config.find_slot(spec.accelerator_type)) {
      row.accelerator_type = slot->type;
      row.device_class = to_string(slot->device_class);
    }
    row.cluster_id = config.cluster_id;
    row.project = config.project;
    row.zone = config.zone;
    row.docker_image = spec.docker_image;
    row.priority = spec.priority;
    row.spec = spec;
    store_->record_submission(row);  // StateStoreError: the submit happened; say the record failed
    return handle;
  }

  WorkloadHandle handle_for(const std::string& cluster,
                            const std::string& workload) const override {
    return fabric_->handle_for(cluster, workload);
  }

  WorkloadStatus status(const WorkloadHandle& handle) override {
    WorkloadStatus status = fabric_->get_workload_status(handle);
    try {
      WorkloadEvent event;
      event.cluster = handle.cluster;
      event.workload = handle.workload_name;
      event.state = status.state;
      event.observed_at = clock_->now();
      event.detail = "status asked through the API";
      store_->record_workload_event(event);
    } catch (const std::exception&) {
      // The answer does not depend on the record.
    }
    return status;
  }

  bool cancel(const WorkloadHandle& handle) override { return fabric_->cancel_workload(handle); }

  std::vector<WorkloadInfo> list_live(const std::string& cluster,
                                      const std::optional<std::string>& state) const override {
    return fabric_->list_workloads(cluster, state);
  }

  LogLines read_log(const WorkloadHandle& handle, int rank, const LogFilter& filter,
                    int slice) const override {
    return fabric_->stream_pod_log(handle, rank, filter, slice);
  }

  void follow_log(const WorkloadHandle& handle, int rank, const LogFilter& filter, int slice,
                  const std::function<bool()>& stop,
                  const std::function<void(const std::string&)>& on_line) const override {
    fabric_->follow_pod_log_until_finished(handle, rank, filter, slice, FollowOptions{}, stop,
                                           on_line);
  }

  LogExportResult export_logs(
      const WorkloadHandle& handle, const LogFilter& filter, const std::string& dest, int slice,
      const std::function<void(const ExportProgress&)>& progress) const override {
    return fabric_->export_pod_logs(handle, filter, dest, slice, progress);
  }

  ConfigInfo config_info() const override {
    std::lock_guard lock(mutex_);
    ConfigInfo info = config_;
    info.clusters = static_cast<int>(fabric_->list_clusters().size());
    return info;
  }

  ProbeCacheStats cache_stats() const override {
    std::lock_guard lock(mutex_);
    return stats_;
  }

  bool ready() const override {
    const auto clusters = fabric_->list_clusters();
    std::lock_guard lock(mutex_);
    return std::all_of(clusters.begin(), clusters.end(),
                       [this](const ClusterConfig& c) { return cache_.contains(c.name); });
  }

 private:
  struct Entry {
    ClusterProbeResult result;
    SteadyTime probed_at{};
    std::int64_t duration_ms = 0;
    int failures = 0;
    SteadyTime next_due{};
  };

  ProbeSnapshot snapshot(const Entry& e, bool from_cache) const {
    ProbeSnapshot s;
    s.result = e.result;
    s.backend = "xpk";
    s.duration_ms = e.duration_ms;
    s.age_ms = std::max<std::int64_t>(0, millis(clock_->steady_now() - e.probed_at));
    s.consecutive_failures = e.failures;
    if (!stopped_) {
      s.next_probe_at = format_iso8601(
          clock_->now() + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                              e.next_due - clock_->steady_now()));
    }
    s.from_cache = from_cache;
    return s;
  }

  void note_config_loaded() {
    const auto config = fabric_->config();
    std::lock_guard lock(mutex_);
    config_.source_path = config->source_path;
    config_.content_hash = file_hash(config->source_path);
    config_.loaded_at = format_iso8601(clock_->now());
  }

  // Probes `cluster` now, records the result in the store and the cache.
  ProbeSnapshot probe_now(const ClusterConfig& cluster, bool from_loop) {
    const SteadyTime start = clock_->steady_now();
    ClusterProbeResult result;
    try {
      result = fabric_->get_cluster_status(cluster.name);
    } catch (const std::exception& e) {
      result.cluster = cluster.name;
      result.reachable = false;
      result.error = e.what();
      result.probed_at = format_iso8601(clock_->now());
    }
    const SteadyTime end = clock_->steady_now();
    ProbeRecord record;
    record.result = result;
    record.backend = "xpk";
    record.duration_ms = millis(end - start);
    bool stored = true;
    try {
      store_->record_probes({record});
    } catch (const std::exception&) {
      stored = false;
    }
    std::lock_guard lock(mutex_);
    Entry& e = cache_[cluster.name];
    e.failures = result.reachable ? 0 : e.failures + 1;
    e.result = result;
    e.probed_at = end;
    e.duration_ms = record.duration_ms;
    auto wait = settings_.probe_interval;
    for (int i = 1; i < e.failures && wait < settings_.backoff_max; ++i) wait *= 2;
    e.next_due = end + std::min(wait, std::max(settings_.backoff_max, settings_.probe_interval));
    if (from_loop) {
      ++stats_.loop_probes;
    } else {
      ++stats_.on_demand_probes;
    }
    if (!stored) ++stats_.store_failures;
    return snapshot(e, false);
  }

  // The cached probe when younger than max_probe_age, else a probe now (shared by concurrent
  // callers asking for the same cluster).
  ProbeSnapshot fresh(const ClusterConfig& cluster) {
    std::shared_future<ProbeSnapshot> pending;
    std::promise<ProbeSnapshot> mine;
    {
      std::lock_guard lock(mutex_);
      if (const auto it = cache_.find(cluster.name); it != cache_.end()) {
        if (clock_->steady_now() - it->second.probed_at <= settings_.max_probe_age) {
          ++stats_.cache_hits;
          return snapshot(it->second, true);
        }
      }
      ++stats_.cache_misses;
      if (const auto it = in_flight_.find(cluster.name); it != in_flight_.end()) {
        pending = it->second;
      } else {
        in_flight_[cluster.name] = mine.get_future().share();
      }
    }
    if (pending.valid()) return pending.get();
    ProbeSnapshot s = probe_now(cluster, false);
    mine.set_value(s);
    std::lock_guard lock(mutex_);
    in_flight_.erase(cluster.name);
    return s;
  }

  void run_loop() {
    for (;;) {
      std::vector<ClusterConfig> due;
      {
        std::unique_lock lock(mutex_);
        if (stopped_) return;
        const SteadyTime now = clock_->steady_now();
        SteadyTime next = now + std::chrono::seconds(1);
        std::vector<ClusterConfig> clusters;
        lock.unlock();
        clusters = fabric_->list_clusters();
        lock.lock();
        for (const ClusterConfig& c : clusters) {
          const auto it = cache_.find(c.name);
          if (it == cache_.end() || it->second.next_due <= now) {
            if (!in_flight_.contains(c.name)) due.push_back(c);
          } else {
            next = std::min(next, it->second.next_due);
          }
        }
        if (due.empty()) {
          wake_.wait_for(lock, next - now, [this] { return stopped_; });
          continue;
        }
      }
      probe_all(due);
    }
  }

  // Probes `due` on at most max_parallel_probes threads.
  void probe_all(const std::vector<ClusterConfig>& due) {
    std::atomic<std::size_t> next{0};
    const int width =
        std::max(1, std::min<int>(settings_.max_parallel_probes, static_cast<int>(due.size())));
    std::vector<std::thread> workers;
    for (int i = 0; i < width; ++i) {
      workers.emplace_back([&] {
        for (std::size_t k = next++; k < due.size(); k = next++) {
          {
            std::lock_guard lock(mutex_);
            if (stopped_) return;
          }
          probe_now(due[k], true);
        }
      });
    }
    for (auto& w : workers) w.join();
  }

  std::shared_ptr<ClusterFabric> fabric_;
  std::shared_ptr<StateStore> store_;
  ProbeLoopSettings settings_;
  std::shared_ptr<Clock> clock_;
  ClusterRegistry empty_registry_;  // select_among does not read it

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopped_ = false;
  std::map<std::string, Entry> cache_;
  std::map<std::string, std::shared_future<ProbeSnapshot>> in_flight_;
  ProbeCacheStats stats_;
  ConfigInfo config_;
  std::thread loop_;
};

std::shared_ptr<ControlPlane> make_fabric_control_plane(std::shared_ptr<ClusterFabric> fabric,
                                                        std::shared_ptr<StateStore> store,
                                                        ProbeLoopSettings settings,
                                                        std::shared_ptr<Clock> clock) {
  if (!fabric || !store) throw std::invalid_argument("make_fabric_control_plane: null argument");
  return std::make_shared<FabricControlPlane>(std::move(fabric), std::move(store), settings,
                                              std::move(clock));
}

std::string serve_state_url(const FabricConfig& config) {
  if (!config.serve.state.empty()) return config.serve.state;
  return default_state_url(xpk::resolve_state_dir(config.xpk));
}

void stop_control_plane_loop(ControlPlane& control) {
  if (auto* p = dynamic_cast<FabricControlPlane*>(&control)) p->stop_loop();
}

void reload_control_plane(ControlPlane& control) {
  if (auto* p = dynamic_cast<FabricControlPlane*>(&control)) p->reload();
}

}  // namespace falcon
