// HealthMonitor: the control plane's health loop and probe cache (issue 13, DESIGN §5).
//
// `falcon serve` keeps one. A background thread probes every registered cluster on its own
// schedule: every serve.probe_interval_s (scaled by 1 ± serve.probe_jitter so clusters do not
// probe in lock step); a cluster whose last probe failed waits twice as long after each
// consecutive failure, up to serve.unreachable_backoff_max_s. At most serve.max_parallel_probes
// probes run at once. Every result goes into the state store's probe history (when a store is
// given) and into an in-memory cache holding each cluster's latest result.
//
// Selection asks the cache through `fresh()`: a cached result younger than `max_age` is
// answered as is; an older (or missing) one is probed now, on the calling thread, and cached.
// So a decision never rests on data older than serve.max_probe_age_s (the spec's semantics),
// and with a running loop it almost never waits for a probe.
//
// Every wait goes through the injected Clock and is interruptible by stop(): tests drive the
// loop with run_due() on a fake clock; stop() returns promptly even mid-interval.
//
//   auto monitor = std::make_shared<falcon::HealthMonitor>(probe_fn, store, clock, settings);
//   monitor->set_clusters(config->clusters);
//   monitor->start();
//   falcon::MonitoredProbe p = monitor->fresh(cluster, std::chrono::seconds(60));
//   monitor->stop();
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "falcon/clock.h"
#include "falcon/config.h"
#include "falcon/model.h"
#include "falcon/prober.h"

namespace falcon {

class StateStore;

class HealthMonitor {
 public:
  // Probes one cluster; never throws for an unreachable cluster (ClusterProber::probe's
  // contract). The fabric's prober in production, a fake in tests.
  using ProbeFunction = falcon::ProbeFunction;

  // `store` may be null (no history is kept then). `clock` must not be null. `backend` names how
  // clusters without a probe.backend of their own are probed (the global probe.backend).
  HealthMonitor(ProbeFunction probe, std::shared_ptr<StateStore> store,
                std::shared_ptr<Clock> clock, ServeSettings settings, std::string backend = "xpk");
  ~HealthMonitor();  // stops the loop
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

  // The clusters to watch (on start and after a reload). New clusters are due at once; removed
  // ones leave the cache; the others keep their results and schedule.
  void set_clusters(const std::vector<ClusterConfig>& clusters);
  // New settings after a reload (interval, jitter, back-off, concurrency); takes effect at each
  // cluster's next scheduling.
  void set_settings(const ServeSettings& settings);

  // Seeds the jitter's random numbers (std::mt19937_64), so a test can predict the schedule.
  // By default the seed comes from std::random_device.
  void set_jitter_seed(std::uint64_t seed);

  // Starts the background loop (idempotent). stop() ends it, waiting for probes in flight
  // (each bounded by its cluster's probe_timeout_s); idempotent.
  void start();
  void stop();

  // One pass of the loop at the clock's current time: probes (in parallel, bounded) every
  // cluster whose next probe is due, records the results, reschedules them, and returns how
  // many it probed. Also thins the store's probe history (downsample_probes with the serve.probe_*
  // retention) when that is due: at the first pass, then every kDownsampleEvery. The loop
  // calls it; tests call it directly on a fake clock.
  int run_due();

  // The cached probe of `cluster`, or nullopt when it has none yet (or is not watched).
  std::optional<MonitoredProbe> latest(const std::string& cluster) const;
  // Every watched cluster's cached probe, in registry order (clusters not probed yet left out).
  std::vector<MonitoredProbe> snapshot() const;

  // `cluster`'s result no older than `max_age`: from the cache when fresh enough (from_cache
  // true), else probed now on the calling thread, recorded and cached. Concurrent callers
  // asking for the same stale cluster share one probe. Never throws for an unreachable cluster.
  MonitoredProbe fresh(const ClusterConfig& cluster, std::chrono::milliseconds max_age);
  // What fresh() answers from the cache (counted as a hit), without probing or waiting: nullopt
  // when `cluster` has no result younger than `max_age` (then fresh() probes it). Selection asks
  // this for every candidate first, so a decision answered wholly from the cache runs on the
  // calling thread alone.
  std::optional<MonitoredProbe> cached(const std::string& cluster,
                                       std::chrono::milliseconds max_age);

  // Told the cluster's name each time a finished probe is in the cache, under the cache's lock
  // (an answer built from the cache before may read differently now: the fabric's selection
  // epoch). Set before start(); it must not call back into this monitor.
  void set_on_probe_shown(std::function<void(const std::string&)> on_shown);

  // Counters for /metrics: probes run by the loop and by fresh(), cache hits and misses.
  struct Stats {
    std::int64_t loop_probes = 0;
    std::int64_t on_demand_probes = 0;
    std::int64_t cache_hits = 0;
    std::int64_t cache_misses = 0;
    std::int64_t store_failures = 0;       // probes that could not be written to the store
    std::int64_t downsample_runs = 0;      // downsample_probes calls that succeeded
    std::int64_t downsample_failures = 0;  // ... and that failed (the loop goes on)
    std::int64_t selections_pruned = 0;    // decisions deleted by serve.selection_retention_h
  };
  static constexpr std::chrono::minutes kDownsampleEvery{15};
  // A pass prunes at most this many decisions (it runs on the loop's thread, between probes);
  // when it had more to do, the next pass comes after kPruneAgainAfter instead.
  static constexpr std::int64_t kPruneRowsPerPass = 2048;
  static constexpr std::chrono::minutes kPruneAgainAfter{1};
  Stats stats() const;

  // Why the last probe the loop wrote to the state store could not be written (the store's
  // error, with the database's reason); nullopt once a write succeeded again, or without a
  // store. GET /readyz answers 503 with it.
  std::optional<std::string> store_problem() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace falcon
