// `POST /v1/select` of `falcon serve`: cached (the health monitor's probes) against the spec's
// uncached selection (every candidate probed for each decision).
//
// The real stack runs in this process: a generated repos.yaml with --clusters clusters offering
// one accelerator, a fake xpk (a /bin/sh script printing a realistic list at once) for every
// probe, ClusterFabric with an SQLite state store in a temporary directory, the HealthMonitor and
// the ApiServer on a loopback port. Once every cluster has a cached probe, --connections
// keep-alive clients each send POST /v1/select back to back for --seconds. Every decision is
// recorded in the store, as in production.
// Measured:
//   cached:   requests/s, p50 and p99 latency (ms) over all requests, errors
//   uncached: ClusterFabric::select_cluster (probes all candidates) one after another: mean
//             latency and the requests/s that gives one caller
// One JSON object per line on stdout.
//
//   serve_bench [--clusters=100] [--connections=8] [--seconds=5] [--uncached-runs=3]
#include <httplib.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "falcon/api_server.h"
#include "falcon/fabric.h"
#include "falcon/state_store.h"

namespace {

constexpr const char* kAccelerator = "tpu-v5p-128";

constexpr const char* kFakeXpk = R"xpk(#!/bin/sh
cat <<'EOF'
[XPK] Starting xpk v1.13.1
[XPK] Workload List Output:
Jobset Name   Created Time           Priority   TPU/GPU VMs Needed   TPU/GPU VMs Running/Ran   TPU/GPU VMs Done   Status          Status Message                       Status Time         
train-a       2026-06-01T10:00:00Z   medium     4                    4                         <none>             Admitted        The workload is admitted             2026-06-01T09:20:01Z
[XPK] Exiting XPK cleanly
EOF
)xpk";

struct Options {
  int clusters = 100;
  int connections = 8;
  double seconds = 5;
  int uncached_runs = 3;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = std::string(name) + "=";
      return a.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
    };
    if (const char* v = value("--clusters")) {
      o.clusters = std::atoi(v);
    } else if (const char* v2 = value("--connections")) {
      o.connections = std::atoi(v2);
    } else if (const char* v3 = value("--seconds")) {
      o.seconds = std::atof(v3);
    } else if (const char* v4 = value("--uncached-runs")) {
      o.uncached_runs = std::atoi(v4);
    } else {
      std::cerr << "usage: serve_bench [--clusters=100] [--connections=8] [--seconds=5] "
                   "[--uncached-runs=3]\n";
      std::exit(2);
    }
  }
  return o;
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  // $TMPDIR, else /tmp: where the SQLite store lives (its fsyncs bound the cached rate).
  std::string tmpl =
      (std::filesystem::temp_directory_path() / "falcon-serve-bench-XXXXXX").string();
  const std::filesystem::path dir = ::mkdtemp(tmpl.data());
  const auto xpk = dir / "xpk";
  std::ofstream(xpk) << kFakeXpk;
  std::filesystem::permissions(xpk, std::filesystem::perms::owner_all);
  std::string yaml = "clusters:\n";
  for (int i = 0; i < o.clusters; ++i) {
    yaml += "  c" + std::to_string(i) + ":\n    project: bench-project\n    zone: us-east5-a\n" +
            "    cluster_id: c" + std::to_string(i) +
            "\n    accelerator_types: [{type: " + kAccelerator +
            ", device_class: tpu, priority: " + std::to_string(1 + i % 3) + "}]\n";
  }
  yaml += "xpk:\n  binary: " + xpk.string() + "\n  state_dir: " + (dir / "state").string() +
          "\nserve:\n  probe_interval_s: 30\n  max_probe_age_s: 600\n  max_parallel_probes: 16\n";
  std::ofstream(dir / "repos.yaml") << yaml;

  falcon::FabricDependencies deps;
  std::shared_ptr<falcon::StateStore> store =
      falcon::open_state_store("sqlite://" + (dir / "falcon.db").string());
  deps.state = store;
  auto fabric = std::make_shared<falcon::ClusterFabric>((dir / "repos.yaml").string(), deps);

  // Uncached first: the spec's selection probes every candidate for each decision.
  double uncached_total = 0;
  for (int i = 0; i < o.uncached_runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fabric->select_cluster(kAccelerator);
    uncached_total +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const double uncached_mean = uncached_total / std::max(1, o.uncached_runs);
  std::cout << nlohmann::json{{"row", "select_uncached"},
                              {"clusters", o.clusters},
                              {"runs", o.uncached_runs},
                              {"mean_ms", uncached_mean * 1000},
                              {"requests_per_s_one_caller", 1 / uncached_mean}}
                   .dump()
            << std::endl;

  auto control = falcon::make_fabric_control_plane(fabric, store, falcon::make_system_clock());
  falcon::ApiServerOptions options;
  options.control = control;
  options.store = store;
  options.threads = o.connections + 2;
  falcon::ApiServer server(options);
  const int port = server.bind("127.0.0.1", 0);
  std::thread serving([&] { server.serve(); });
  const auto ready_start = std::chrono::steady_clock::now();
  while (!control->ready()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double warm_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - ready_start).count();

  // The same decision without HTTP, one caller: what the server adds on top of it.
  {
    const int n = 50;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) control->select(kAccelerator);
    const double per =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / n;
    const auto t1 = std::chrono::steady_clock::now();
    falcon::ClusterSelection s =
        fabric->select_cluster(kAccelerator, [&](const falcon::ClusterConfig& c) {
          return falcon::ClusterProbeResult{c.name, true,         0,
                                            0,      std::nullopt, "2026-06-01T10:00:00.000Z"};
        });
    const double one = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    const auto t2 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) store->record_selection(s);
    const double rec =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t2).count() / n;
    std::cout << nlohmann::json{{"row", "select_cached_in_process"},
                                {"clusters", o.clusters},
                                {"mean_ms", per * 1000},
                                {"select_with_constant_probe_ms", one * 1000},
                                {"record_selection_ms", rec * 1000}}
                     .dump()
              << std::endl;
  }

  std::atomic<bool> stop{false};
  std::atomic<long> errors{0};
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(o.connections));
  std::vector<std::thread> clients;
  const std::string body = std::string(R"({"accelerator_type": ")") + kAccelerator + "\"}";
  const auto start = std::chrono::steady_clock::now();
  for (int c = 0; c < o.connections; ++c) {
    clients.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", port);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      auto& mine = latencies[static_cast<std::size_t>(c)];
      while (!stop) {
        const auto t0 = std::chrono::steady_clock::now();
        auto r = client.Post("/v1/select", body, "application/json");
        const auto t1 = std::chrono::steady_clock::now();
        if (!r || r->status != 200) ++errors;
        mine.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  stop = true;
  for (auto& t : clients) t.join();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<double> all;
  for (auto& v : latencies) all.insert(all.end(), v.begin(), v.end());
  const auto count = all.size();
  const double p50 = percentile(all, 0.50);
  const double p99 = percentile(all, 0.99);
  const auto stats = control->cache_stats();
  std::cout << nlohmann::json{{"row", "select_cached"},
                              {"clusters", o.clusters},
                              {"connections", o.connections},
                              {"seconds", elapsed},
                              {"requests", count},
                              {"errors", errors.load()},
                              {"requests_per_s", static_cast<double>(count) / elapsed},
                              {"p50_ms", p50},
                              {"p99_ms", p99},
                              {"cache_hits", stats.cache_hits},
                              {"cache_misses", stats.cache_misses},
                              {"warm_up_s", warm_s},
                              {"ratio_vs_uncached",
                               (static_cast<double>(count) / elapsed) * uncached_mean}}
                   .dump()
            << std::endl;
  server.stop(std::chrono::seconds(1));
  serving.join();
  falcon::stop_control_plane_loop(*control);
  std::filesystem::remove_all(dir);
  return 0;
}
