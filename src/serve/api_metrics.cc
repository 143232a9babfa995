// /metrics: the control plane's state and the server's counters, in the Prometheus text format.
// Every label value comes from a closed set (clusters of the configuration, route templates,
// the methods served, statuses, fixed outcomes): no client can add a series.
#include <fmt/format.h>

#include "serve/api_server_impl.h"
#include "serve/dispatcher.h"
#include "serve/supervisor.h"

namespace falcon {
namespace {

using serve::PrometheusText;

// Each cluster's cached probe, and the oldest probe's age.
void write_cluster_metrics(PrometheusText& out, const ControlPlane& control,
                           const std::vector<ClusterEntry>& clusters) {
  std::vector<std::pair<std::string, std::optional<ProbeSnapshot>>> probes;
  for (const ClusterEntry& c : clusters) {
    try {
      probes.emplace_back(c.config.name, control.cached_probe(c.config.name));
    } catch (const std::exception&) {
      probes.emplace_back(c.config.name, std::nullopt);  // removed by a reload meanwhile
    }
  }
  auto per_cluster = [&](const std::string& name, const char* type, const std::string& help,
                         const std::function<std::optional<double>(const ProbeSnapshot&)>& value) {
    out.family(name, type, help);
    for (const auto& [cluster, probe] : probes) {
      if (!probe) continue;
      if (const auto v = value(*probe)) out.sample(name, {{"cluster", cluster}}, *v);
    }
  };
  per_cluster("falcon_cluster_up", "gauge", "1 when the cluster's latest probe reached it",
              [](const ProbeSnapshot& p) { return p.result.reachable ? 1.0 : 0.0; });
  per_cluster("falcon_cluster_queue_depth", "gauge", "QUEUED workloads at the latest probe",
              [](const ProbeSnapshot& p) -> std::optional<double> {
                if (!p.result.queue_depth) return std::nullopt;
                return *p.result.queue_depth;
              });
  per_cluster("falcon_cluster_running", "gauge", "RUNNING workloads at the latest probe",
              [](const ProbeSnapshot& p) -> std::optional<double> {
                if (!p.result.running_count) return std::nullopt;
                return *p.result.running_count;
              });
  per_cluster("falcon_cluster_capacity_known", "gauge",
              "1 when the latest kube probe read the cluster's ClusterQueues, 0 when it reached "
              "the cluster but not them (capacity_error says why)",
              [](const ProbeSnapshot& p) -> std::optional<double> {
                if (p.backend != "kube" || !p.result.reachable) return std::nullopt;
                return p.result.capacity_error ? 0.0 : 1.0;
              });
  per_cluster("falcon_probe_duration_seconds", "gauge", "How long the latest probe took",
              [](const ProbeSnapshot& p) { return p.duration_ms / 1000.0; });
  per_cluster("falcon_probe_age_seconds", "gauge", "Age of the cached probe",
              [](const ProbeSnapshot& p) { return p.age_ms / 1000.0; });
  per_cluster("falcon_probe_consecutive_failures", "gauge",
              "Failed probes in a row (0 when reachable)",
              [](const ProbeSnapshot& p) { return static_cast<double>(p.consecutive_failures); });
  out.family("falcon_probe_cache_oldest_age_seconds", "gauge",
             "Age of the oldest cached probe (clusters with one)");
  double oldest = 0;
  for (const auto& [cluster, probe] : probes) {
    if (probe) oldest = std::max(oldest, probe->age_ms / 1000.0);
  }
  out.sample("falcon_probe_cache_oldest_age_seconds", {}, oldest);
}

// Circuit breakers: one sample per breaker key (the cluster's and each cluster x accelerator).
void write_breaker_metrics(PrometheusText& out, const std::vector<ClusterEntry>& clusters) {
  out.family("falcon_circuit_breaker_state", "gauge",
             "Circuit breaker state: 0 closed, 1 half_open (trial), 2 open");
  std::vector<std::pair<std::string, BreakerReport>> breakers;
  for (const ClusterEntry& c : clusters) {
    for (const BreakerReport& b : c.breakers) breakers.emplace_back(c.config.name, b);
  }
  for (const auto& [cluster, b] : breakers) {
    const double v = b.state == kBreakerOpen ? 2.0 : b.state == kBreakerHalfOpen ? 1.0 : 0.0;
    out.sample("falcon_circuit_breaker_state", {{"cluster", cluster}, {"key", b.key}}, v);
  }
  out.family("falcon_circuit_breaker_trips", "gauge",
             "Trips in a row of each circuit breaker (0 once it has stayed closed)");
  for (const auto& [cluster, b] : breakers) {
    out.sample("falcon_circuit_breaker_trips", {{"cluster", cluster}, {"key", b.key}},
               static_cast<double>(b.trips));
  }
  out.family("falcon_circuit_breaker_consecutive_failures", "gauge",
             "Consecutive failures each circuit breaker has counted");
  for (const auto& [cluster, b] : breakers) {
    out.sample("falcon_circuit_breaker_consecutive_failures",
               {{"cluster", cluster}, {"key", b.key}}, static_cast<double>(b.consecutive_failures));
  }
}

// What the layer did (xpk, Logging, uploads), the probe cache and the configuration.
void write_layer_metrics(PrometheusText& out, const ControlPlane& control) {
  const FabricCounters::Snapshot fabric = control.fabric_counters();
  out.family("falcon_xpk_calls_total", "counter",
             "xpk invocations by verb and result (ok, failed, timeout, start_error)");
  for (const auto& [key, n] : fabric.xpk_calls) {
    out.sample("falcon_xpk_calls_total", {{"verb", key.first}, {"result", key.second}},
               static_cast<double>(n));
  }
  out.family("falcon_logging_reads_total", "counter",
             "Cloud Logging entries:list requests by result (ok, rate_limited: HTTP 429, failed)");
  out.sample("falcon_logging_reads_total", {{"result", "ok"}},
             static_cast<double>(fabric.logging_ok));
  out.sample("falcon_logging_reads_total", {{"result", "rate_limited"}},
             static_cast<double>(fabric.logging_rate_limited));
  out.sample("falcon_logging_reads_total", {{"result", "failed"}},
             static_cast<double>(fabric.logging_failed));
  out.family("falcon_upload_bytes_total", "counter",
             "Bytes sent to Cloud Storage uploads (log exports)");
  out.sample("falcon_upload_bytes_total", {}, static_cast<double>(fabric.upload_bytes));
  out.family("falcon_upload_requests_total", "counter", "Cloud Storage upload requests sent");
  out.sample("falcon_upload_requests_total", {}, static_cast<double>(fabric.upload_requests));

  const ProbeCacheStats stats = control.cache_stats();
  out.family("falcon_probes_total", "counter", "Probes run, by who asked (loop or on demand)");
  out.sample("falcon_probes_total", {{"trigger", "loop"}}, static_cast<double>(stats.loop_probes));
  out.sample("falcon_probes_total", {{"trigger", "on_demand"}},
             static_cast<double>(stats.on_demand_probes));
  out.family("falcon_probe_cache_lookups_total", "counter", "Probe cache lookups by result");
  out.sample("falcon_probe_cache_lookups_total", {{"result", "hit"}},
             static_cast<double>(stats.cache_hits));
  out.sample("falcon_probe_cache_lookups_total", {{"result", "miss"}},
             static_cast<double>(stats.cache_misses));
  out.family("falcon_probe_store_failures_total", "counter",
             "Probes that could not be written to the state store");
  out.sample("falcon_probe_store_failures_total", {}, static_cast<double>(stats.store_failures));
  out.family("falcon_probe_downsample_runs_total", "counter",
             "Thinning passes over the probe history, by result");
  out.sample("falcon_probe_downsample_runs_total", {{"result", "ok"}},
             static_cast<double>(stats.downsample_runs));
  out.sample("falcon_probe_downsample_runs_total", {{"result", "failed"}},
             static_cast<double>(stats.downsample_failures));
  out.family("falcon_selections_pruned_total", "counter",
             "Decisions deleted by serve.selection_retention_h");
  out.sample("falcon_selections_pruned_total", {}, static_cast<double>(stats.selections_pruned));

  const ConfigInfo config = control.config_info();
  out.family("falcon_config_reloads_total", "counter", "Configuration reloads by result");
  out.sample("falcon_config_reloads_total", {{"result", "ok"}},
             static_cast<double>(config.reloads));
  out.sample("falcon_config_reloads_total", {{"result", "failed"}},
             static_cast<double>(config.reload_failures));
  out.family("falcon_clusters", "gauge", "Clusters in the configuration in force");
  out.sample("falcon_clusters", {}, config.clusters);
}

void write_server_metrics(PrometheusText& out, const serve::HttpServer::Stats& http_stats) {
  out.family("falcon_http_connections_open", "gauge", "Client connections open now");
  out.sample("falcon_http_connections_open", {}, static_cast<double>(http_stats.connections_open));
  out.family("falcon_http_connections_idle", "gauge",
             "Of the connections open, those waiting for their next request (the first closed "
             "to make room at serve.limits.max_connections)");
  out.sample("falcon_http_connections_idle", {}, static_cast<double>(http_stats.connections_idle));
  out.family("falcon_http_tls_handshakes", "gauge",
             "Of the connections open, those in their TLS handshake (the oldest closed to make "
             "room at serve.limits.max_tls_handshakes)");
  out.sample("falcon_http_tls_handshakes", {}, static_cast<double>(http_stats.handshakes));
  out.family("falcon_http_connections_total", "counter",
             "Client connections by what became of them at accept: accepted, refused (over "
             "serve.limits.max_connections or max_connections_per_address), evicted (idle, "
             "slow or in a TLS handshake, closed to make room)");
  out.sample("falcon_http_connections_total", {{"result", "accepted"}},
             static_cast<double>(http_stats.connections_accepted));
  out.sample("falcon_http_connections_total", {{"result", "refused"}},
             static_cast<double>(http_stats.connections_refused));
  out.sample("falcon_http_connections_total", {{"result", "evicted"}},
             static_cast<double>(http_stats.connections_evicted));
  out.family("falcon_http_timeouts_total", "counter",
             "Connections closed because a client was too slow (serve.limits.*_timeout_s)");
  out.sample("falcon_http_timeouts_total", {}, static_cast<double>(http_stats.timeouts));
  out.family("falcon_http_overloaded_total", "counter",
             "Requests answered 503 because no worker, stream, body or head budget was free");
  out.sample("falcon_http_overloaded_total", {}, static_cast<double>(http_stats.overloaded));
  out.family("falcon_http_streams_open", "gauge", "Streamed answers (log reads, follows) now");
  out.sample("falcon_http_streams_open", {}, static_cast<double>(http_stats.streams_open));
}

}  // namespace

std::string ApiServer::Impl::metrics() const {
  PrometheusText out;
  const std::vector<ClusterEntry> clusters = control().list_clusters();
  write_cluster_metrics(out, control(), clusters);
  write_breaker_metrics(out, clusters);
  write_layer_metrics(out, control());
  out.family("falcon_log_follows_active", "gauge", "Log follows streaming now");
  out.sample("falcon_log_follows_active", {}, active_follows.load());
  out.family("falcon_exports_running", "gauge", "Log exports running in the background");
  out.sample("falcon_exports_running", {}, static_cast<double>(exports->running()));
  out.family("falcon_exports_queued", "gauge",
             "Log exports waiting for one of serve.limits.max_exports");
  out.sample("falcon_exports_queued", {}, static_cast<double>(exports->queued()));

  if (options.supervisor) options.supervisor->write_metrics(out);
  if (options.dispatcher) {
    const DispatchStatus d = options.dispatcher->status();
    out.family("falcon_dispatch_nominations_total", "counter",
               "Nominations of MultiKueue workers patched on the manager's Workloads, and the "
               "patches refused (conflict) or failed");
    out.sample("falcon_dispatch_nominations_total", {{"outcome", "patched"}},
               static_cast<double>(d.nominations));
    out.sample("falcon_dispatch_nominations_total", {{"outcome", "conflict"}},
               static_cast<double>(d.conflicts));
    out.sample("falcon_dispatch_nominations_total", {{"outcome", "failed"}},
               static_cast<double>(d.failures));
    out.family("falcon_dispatch_waiting", "gauge",
               "Manager Workloads waiting for a nomination (no worker has room, or none can run "
               "them)");
    out.sample("falcon_dispatch_waiting", {}, static_cast<double>(d.waiting));
    out.family("falcon_dispatch_ready", "gauge",
               "1 when the dispatcher can act (docs/dispatch.md)");
    out.sample("falcon_dispatch_ready", {}, d.problem ? 0.0 : 1.0);
  }
  write_server_metrics(out, http->stats());

  std::lock_guard lock(metrics_mutex);
  out.family("falcon_selections_total", "counter",
             "Selections by outcome (repeated: a brief select that repeated the last decision on "
             "unchanged inputs)");
  for (const char* outcome : {"selected", "repeated", "no_cluster", "error"}) {
    const auto it = selections.find(outcome);
    out.sample("falcon_selections_total", {{"outcome", outcome}},
               it == selections.end() ? 0.0 : static_cast<double>(it->second));
  }
  out.family("falcon_http_requests_total", "counter", "HTTP requests by route, method and status");
  for (const auto& [key, n] : requests) {
    const auto& [route_path, method, status] = key;
    out.sample("falcon_http_requests_total",
               {{"route", route_path}, {"method", method}, {"status", std::to_string(status)}},
               static_cast<double>(n));
  }
  out.family("falcon_http_request_duration_seconds", "histogram",
             "Time to answer a request (to the first byte of a streamed body), by route");
  for (const auto& [route_path, histogram] : latency) {
    histogram.write(out, "falcon_http_request_duration_seconds", {{"route", route_path}});
  }
  return out.text();
}

}  // namespace falcon
