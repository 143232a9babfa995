#include "serve/health_monitor.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "falcon/state_store.h"
#include "process/bounded_parallel.h"
#include "util/time_format.h"

namespace falcon {

namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

// One cluster as the monitor knows it.
struct Entry {
  ClusterConfig config;
  bool watched = false;  // listed by set_clusters (fresh() may cache an unwatched one)
  std::optional<MonitoredProbe> probe;
  // When `probe` started: what it read is at least this recent, so its age counts from here (a
  // probe that began before a change and finished after it must not pass for newer than it).
  SteadyTime probed_steady{};
  SteadyTime next_due{};  // the loop's next probe (watched only)
  // next_due as view() shows it (ISO 8601, system clock), worked out once per scheduled probe
  // instead of on every look-up; next_due_text_for says which next_due it is for.
  mutable SteadyTime next_due_text_for = SteadyTime::min();
  mutable std::string next_due_text;
  int consecutive_failures = 0;
  bool in_flight = false;  // a probe of it is running (the loop's or a fresh() caller's)
};

std::int64_t to_ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace

struct HealthMonitor::Impl {
  ProbeFunction probe_fn;
  std::shared_ptr<StateStore> store;
  std::shared_ptr<Clock> clock;
  std::string backend;

  mutable std::mutex mutex;
  std::condition_variable cv;  // in-flight probes ending, stop(), new clusters or settings
  ServeSettings settings;
  std::mt19937_64 rng;
  std::map<std::string, std::shared_ptr<Entry>> entries;
  std::function<void(const std::string&)> on_shown;  // set_on_probe_shown
  std::vector<std::string> order;                    // watched clusters, in registry order
  std::optional<SteadyTime> next_downsample;
  bool running = false;
  bool stopping = false;
  bool wake = false;  // the schedule changed: the loop recomputes its wait
  std::thread thread;
  Stats stats;
  std::optional<std::string> store_problem;  // the last probe write's failure, if it failed

  // The wait after a probe with `failures` consecutive failures (0: reachable): the interval,
  // doubled per failure up to the cap (never below the interval), scaled by 1 +/- jitter.
  // Needs `mutex`.
  std::chrono::steady_clock::duration interval_after(int failures) {
    using std::chrono::duration;
    const double base = settings.probe_interval_s;
    const double cap = std::max<double>(settings.unreachable_backoff_max_s, base);
    double seconds = base;
    for (int i = 0; i < failures && seconds < cap; ++i) seconds *= 2;
    seconds = std::min(seconds, cap);
    const double jitter = std::clamp(settings.probe_jitter, 0.0, 0.5);
    if (jitter > 0) {
      std::uniform_real_distribution<double> factor(1.0 - jitter, 1.0 + jitter);
      seconds *= factor(rng);
    }
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        duration<double>(seconds));
  }

  // Runs the probe function, never throwing; fills in what a probe function may leave empty.
  // `start` is set to when it began.
  std::pair<ClusterProbeResult, std::int64_t> run_probe(const ClusterConfig& cluster,
                                                        SteadyTime* started) const {
    const SteadyTime start = clock->steady_now();
    *started = start;
    ClusterProbeResult result;
    try {
      result = probe_fn(cluster);
    } catch (const std::exception& e) {
      result = ClusterProbeResult{};
      result.reachable = false;
      result.error = e.what();
    } catch (...) {
      result = ClusterProbeResult{};
      result.reachable = false;
      result.error = "probe failed with an unknown exception";
    }
    const std::int64_t duration_ms = std::max<std::int64_t>(0, to_ms(clock->steady_now() - start));
    if (result.cluster.empty()) result.cluster = cluster.name;
    if (result.probed_at.empty() || !parse_rfc3339(result.probed_at)) {
      result.probed_at = format_iso8601(clock->now());
    }
    return {std::move(result), duration_ms};
  }

  // How `cluster` is probed: its own probe.backend, else the monitor's.
  std::string backend_of(const ClusterConfig& cluster) const {
    return cluster.probe_backend ? to_string(*cluster.probe_backend) : backend;
  }

  // Writes one probe to the store; a failure is counted, never thrown.
  void record(const ClusterConfig& cluster, const ClusterProbeResult& result,
              std::int64_t duration_ms) {
    if (!store) return;
    try {
      ProbeRecord rec;
      rec.result = result;
      rec.backend = backend_of(cluster);
      rec.duration_ms = duration_ms;
      rec.extra_json = probe_extra_json(result);
      store->record_probes({rec});
      std::lock_guard lock(mutex);
      store_problem.reset();
    } catch (const std::exception& e) {
      std::lock_guard lock(mutex);
      ++stats.store_failures;
      store_problem = e.what();
    }
  }

  // Stores a finished probe, begun at `started`, in `e` and reschedules it. Needs `mutex`.
  void finish(Entry& e, const ClusterConfig& cluster, ClusterProbeResult result,
              std::int64_t duration_ms, SteadyTime started) {
    const SteadyTime now = clock->steady_now();
    e.consecutive_failures = result.reachable ? 0 : e.consecutive_failures + 1;
    MonitoredProbe p;
    p.result = std::move(result);
    p.backend = backend_of(cluster);
    p.duration_ms = duration_ms;
    p.consecutive_failures = e.consecutive_failures;
    e.probe = std::move(p);
    e.probed_steady = started;
    if (on_shown) on_shown(cluster.name);  // after the cache has it: see set_on_probe_shown
    e.next_due = now + interval_after(e.consecutive_failures);
    e.in_flight = false;
  }

  // What a caller sees of `e` now. Needs `mutex`.
  MonitoredProbe view(const Entry& e, bool from_cache) const {
    MonitoredProbe p = *e.probe;
    const SteadyTime now = clock->steady_now();
    p.age_ms = std::max<std::int64_t>(0, to_ms(now - e.probed_steady));
    p.from_cache = from_cache;
    if (running && e.watched) {
      if (e.next_due <= now) {  // overdue: due now
        p.next_probe_at = format_iso8601(clock->now());
      } else {
        if (e.next_due_text_for != e.next_due) {
          e.next_due_text = format_iso8601(
              clock->now() +
              std::chrono::duration_cast<std::chrono::system_clock::duration>(e.next_due - now));
          e.next_due_text_for = e.next_due;
        }
        p.next_probe_at = e.next_due_text;
      }
    }
    return p;
  }

  ProbeRetention retention() const {
    ProbeRetention r;
    r.full_resolution = std::chrono::hours(settings.probe_retention_full_h);
    r.bucket = std::chrono::minutes(settings.probe_bucket_min);
    if (settings.probe_drop_after_h > 0)
      r.drop_after = std::chrono::hours(settings.probe_drop_after_h);
    return r;
  }

  // The store's maintenance pass: probe history thinned, old decisions pruned.
  void maybe_downsample() {
    if (!store) return;
    ProbeRetention r;
    int selection_retention_h = 0;
    {
      std::lock_guard lock(mutex);
      const SteadyTime now = clock->steady_now();
      if (next_downsample && now < *next_downsample) return;
      next_downsample = now + kDownsampleEvery;
      r = retention();
      selection_retention_h = settings.selection_retention_h;
    }
    try {
      const StoreTime now = clock->now();
      store->downsample_probes(r, now);
      const std::int64_t pruned =
          selection_retention_h > 0
              ? store->prune_selections(now - std::chrono::hours(selection_retention_h),
                                        kPruneRowsPerPass)
              : 0;
      std::lock_guard lock(mutex);
      ++stats.downsample_runs;
      stats.selections_pruned += pruned;
      // A backlog (a first pass over a large store): the rest soon, a pass's worth at a time.
      if (pruned == kPruneRowsPerPass) {
        next_downsample = std::min(*next_downsample, clock->steady_now() + kPruneAgainAfter);
      }
    } catch (const std::exception&) {
      std::lock_guard lock(mutex);
      ++stats.downsample_failures;
    }
  }

  void loop() {
    errno = 0;
    const int inherited = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
    applied_nice = errno == 0 ? inherited : 0;
    std::unique_lock lock(mutex);
    while (!stopping) {
      const int nice = settings.probe_nice;
      lock.unlock();
      apply_nice(nice);
      run_due();
      lock.lock();
      if (stopping) break;
      // Sleep until the earliest due cluster (or one interval when there is none).
      SteadyTime deadline = clock->steady_now() + std::chrono::seconds(settings.probe_interval_s);
      for (const auto& name : order) {
        const Entry& e = *entries.at(name);
        if (!e.in_flight) deadline = std::min(deadline, e.next_due);
      }
      if (next_downsample) deadline = std::min(deadline, *next_downsample);
      wake = false;
      clock->wait_until(lock, cv, deadline, [this] { return stopping || wake; });
    }
  }

  // The loop's thread, the threads it starts for a pass's probes and the processes they spawn
  // (each inherits its creator's nice value) yield the CPU to the server's requests
  // (serve.probe_nice, applied on the pass after a reload changed it). Raising the nice value
  // needs no privilege; lowering it again may be refused (EPERM), and the probes then stay at
  // the lower priority they had.
  int applied_nice = 0;  // the loop thread's
  void apply_nice(int nice) {
    if (nice == applied_nice) return;
    const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
    if (::setpriority(PRIO_PROCESS, tid, nice) == 0) applied_nice = nice;
  }

  int run_due() {
    std::vector<std::shared_ptr<Entry>> due;
    int parallel = 1;
    {
      std::lock_guard lock(mutex);
      const SteadyTime now = clock->steady_now();
      for (const auto& name : order) {
        const auto& e = entries.at(name);
        if (!e->in_flight && e->next_due <= now) {
          e->in_flight = true;
          due.push_back(e);
        }
      }
      parallel = settings.max_parallel_probes;
    }
    run_bounded_parallel(due.size(), parallel, [&](std::size_t i) {
      Entry& e = *due[i];
      ClusterConfig config;
      {
        std::lock_guard lock(mutex);
        config = e.config;
      }
      SteadyTime started;
      auto [result, duration_ms] = run_probe(config, &started);
      record(config, result, duration_ms);
      {
        std::lock_guard lock(mutex);
        finish(e, config, std::move(result), duration_ms, started);
        ++stats.loop_probes;
      }
      cv.notify_all();
    });
    maybe_downsample();
    return static_cast<int>(due.size());
  }
};

HealthMonitor::HealthMonitor(ProbeFunction probe, std::shared_ptr<StateStore> store,
                             std::shared_ptr<Clock> clock, ServeSettings settings,
                             std::string backend)
    : impl_(std::make_unique<Impl>()) {
  if (!probe) throw std::invalid_argument("HealthMonitor: the probe function is empty");
  if (!clock) throw std::invalid_argument("HealthMonitor: the clock is null");
  impl_->probe_fn = std::move(probe);
  impl_->store = std::move(store);
  impl_->clock = std::move(clock);
  impl_->settings = std::move(settings);
  impl_->backend = std::move(backend);
  impl_->rng.seed(std::random_device{}());
}

HealthMonitor::~HealthMonitor() { stop(); }

void HealthMonitor::set_on_probe_shown(std::function<void(const std::string&)> on_shown) {
  impl_->on_shown = std::move(on_shown);
}

void HealthMonitor::set_clusters(const std::vector<ClusterConfig>& clusters) {
  {
    std::lock_guard lock(impl_->mutex);
    const SteadyTime now = impl_->clock->steady_now();
    std::map<std::string, std::shared_ptr<Entry>> next;
    std::vector<std::string> order;
    for (const ClusterConfig& c : clusters) {
      if (next.count(c.name)) continue;
      auto it = impl_->entries.find(c.name);
      std::shared_ptr<Entry> e;
      if (it != impl_->entries.end()) {
        e = it->second;
        if (!e->watched) e->next_due = now;  // cached by fresh(), never scheduled
      } else {
        e = std::make_shared<Entry>();
        e->next_due = now;
      }
      e->config = c;
      e->watched = true;
      next.emplace(c.name, e);
      order.push_back(c.name);
    }
    for (auto& [name, e] : impl_->entries) {
      if (!next.count(name)) e->watched = false;  // an in-flight probe still finishes into it
    }
    impl_->entries = std::move(next);
    impl_->order = std::move(order);
    impl_->wake = true;
  }
  impl_->cv.notify_all();
}

void HealthMonitor::set_settings(const ServeSettings& settings) {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->settings = settings;
    impl_->wake = true;
  }
  impl_->cv.notify_all();
}

void HealthMonitor::set_jitter_seed(std::uint64_t seed) {
  std::lock_guard lock(impl_->mutex);
  impl_->rng.seed(seed);
}

void HealthMonitor::start() {
  std::lock_guard lock(impl_->mutex);
  if (impl_->running) return;
  impl_->running = true;
  impl_->stopping = false;
  impl_->thread = std::thread([this] { impl_->loop(); });
}

void HealthMonitor::stop() {
  std::thread thread;
  {
    std::lock_guard lock(impl_->mutex);
    if (!impl_->running) return;
    impl_->stopping = true;
    thread = std::move(impl_->thread);
  }
  impl_->cv.notify_all();
  if (thread.joinable()) thread.join();
  std::lock_guard lock(impl_->mutex);
  impl_->running = false;
}

int HealthMonitor::run_due() { return impl_->run_due(); }

std::optional<MonitoredProbe> HealthMonitor::latest(const std::string& cluster) const {
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->entries.find(cluster);
  if (it == impl_->entries.end() || !it->second->watched || !it->second->probe) return std::nullopt;
  return impl_->view(*it->second, true);
}

std::vector<MonitoredProbe> HealthMonitor::snapshot() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<MonitoredProbe> out;
  for (const auto& name : impl_->order) {
    const Entry& e = *impl_->entries.at(name);
    if (e.probe) out.push_back(impl_->view(e, true));
  }
  return out;
}

MonitoredProbe HealthMonitor::fresh(const ClusterConfig& cluster,
                                    std::chrono::milliseconds max_age) {
  std::unique_lock lock(impl_->mutex);
  auto it = impl_->entries.find(cluster.name);
  std::shared_ptr<Entry> e;
  if (it != impl_->entries.end()) {
    e = it->second;
  } else {
    // Not watched: cached for later callers, not scheduled (set_clusters may adopt it).
    e = std::make_shared<Entry>();
    e->config = cluster;
    e->next_due = SteadyTime::max();
    impl_->entries.emplace(cluster.name, e);
  }
  // A probe begun at or after `since` is fresh enough, however long it took; one begun
  // earlier may have read the cluster before a change this caller knows of.
  const SteadyTime since = impl_->clock->steady_now() - max_age;
  bool waited = false;
  for (;;) {
    if (e->probe && e->probed_steady >= since) {
      if (waited) return impl_->view(*e, false);  // the probe this call waited for
      ++impl_->stats.cache_hits;
      return impl_->view(*e, true);
    }
    if (!e->in_flight) break;
    // Another caller (or the loop) is probing it: share that probe, or probe again after it
    // when it began too early.
    if (!waited) {
      ++impl_->stats.cache_misses;
      waited = true;
    }
    impl_->cv.wait(lock, [&] { return !e->in_flight; });
  }
  if (!waited) ++impl_->stats.cache_misses;
  e->in_flight = true;
  const ClusterConfig config = e->watched ? e->config : cluster;
  lock.unlock();
  SteadyTime started;
  auto [result, duration_ms] = impl_->run_probe(config, &started);
  impl_->record(config, result, duration_ms);
  lock.lock();
  impl_->finish(*e, config, std::move(result), duration_ms, started);
  if (!e->watched) e->next_due = SteadyTime::max();
  ++impl_->stats.on_demand_probes;
  MonitoredProbe out = impl_->view(*e, false);
  lock.unlock();
  impl_->cv.notify_all();
  return out;
}

std::optional<MonitoredProbe> HealthMonitor::cached(const std::string& cluster,
                                                    std::chrono::milliseconds max_age) {
  std::lock_guard lock(impl_->mutex);
  const auto it = impl_->entries.find(cluster);
  if (it == impl_->entries.end()) return std::nullopt;
  const Entry& e = *it->second;
  if (!e.probe || impl_->clock->steady_now() - e.probed_steady > max_age) return std::nullopt;
  ++impl_->stats.cache_hits;
  return impl_->view(e, true);
}

HealthMonitor::Stats HealthMonitor::stats() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->stats;
}

std::optional<std::string> HealthMonitor::store_problem() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->store_problem;
}

}  // namespace falcon
