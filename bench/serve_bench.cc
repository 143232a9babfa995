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
//
// With --fill-history=URL it only fills the probe history of the state store at URL as the
// health loop would have over --hours (default 24) of probes every --interval seconds (default
// 30) for --clusters clusters (named c0..cN-1, ending now), then thins it with the default
// retention (serve.probe_retention_full_h / probe_bucket_min), and prints one JSON line:
//   serve_bench --fill-history=sqlite:///tmp/x/falcon.db --clusters=100 [--hours=24]
#include <httplib.h>
#include <stdlib.h>
#include <time.h>
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

#include "falcon/fabric.h"
#include "falcon/state_store.h"
#include "model/json_text.h"
#include "serve/api_server.h"
#include "serve/select_answer.h"
#include "util/time_format.h"

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
  std::string fill_history;  // a state store URL: fill its probe history and exit
  double hours = 24;
  int interval_s = 30;
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
    if (const char* f = value("--fill-history")) {
      o.fill_history = f;
    } else if (const char* h = value("--hours")) {
      o.hours = std::atof(h);
    } else if (const char* iv = value("--interval")) {
      o.interval_s = std::atoi(iv);
    } else if (const char* v = value("--clusters")) {
      o.clusters = std::atoi(v);
    } else if (const char* v2 = value("--connections")) {
      o.connections = std::atoi(v2);
    } else if (const char* v3 = value("--seconds")) {
      o.seconds = std::atof(v3);
    } else if (const char* v4 = value("--uncached-runs")) {
      o.uncached_runs = std::atoi(v4);
    } else {
      std::cerr << "usage: serve_bench [--clusters=100] [--connections=8] [--seconds=5] "
                   "[--uncached-runs=3]\n"
                   "       serve_bench --fill-history=URL [--clusters=100] [--hours=24] "
                   "[--interval=30]\n";
      std::exit(2);
    }
  }
  return o;
}

double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1000 + static_cast<double>(t.tv_nsec) / 1e6;
}

std::size_t select_answer_json_size(const falcon::Decision& o) {
  return falcon::serve::select_answer_json(o).size();
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

// The probe history the health loop writes in `o.hours` at one probe per cluster every
// `o.interval_s` seconds, ending now, in batches of one round (as the loop's pool writes them),
// then thinned with the default retention.
int fill_history(const Options& o) {
  std::shared_ptr<falcon::StateStore> store = falcon::open_state_store(o.fill_history);
  const auto now = std::chrono::system_clock::now();
  const auto rounds = static_cast<long>(o.hours * 3600 / o.interval_s);
  const auto t0 = std::chrono::steady_clock::now();
  long written = 0;
  for (long r = rounds - 1; r >= 0; --r) {
    const auto at = now - std::chrono::seconds(r * o.interval_s);
    std::vector<falcon::ProbeRecord> batch;
    for (int c = 0; c < o.clusters; ++c) {
      falcon::ProbeRecord p;
      // Appended, not "c" + std::to_string(c): GCC 12 at -O3 reports a false -Wrestrict on that.
      p.result.cluster = "c";
      p.result.cluster += std::to_string(c);
      p.result.reachable = true;
      p.result.queue_depth = static_cast<int>((r + c) % 3);
      p.result.running_count = 1;
      p.result.probed_at = falcon::format_iso8601(at + std::chrono::milliseconds(c));
      p.backend = "xpk";
      p.duration_ms = 40 + c % 20;
      batch.push_back(std::move(p));
    }
    store->record_probes(batch);
    written += static_cast<long>(batch.size());
  }
  const falcon::ServeSettings defaults;
  falcon::ProbeRetention retention;
  retention.full_resolution = std::chrono::hours(defaults.probe_retention_full_h);
  retention.bucket = std::chrono::minutes(defaults.probe_bucket_min);
  const auto thinned = store->downsample_probes(retention, now);
  std::cout << nlohmann::json{{"row", "fill_history"},
                              {"clusters", o.clusters},
                              {"hours", o.hours},
                              {"interval_s", o.interval_s},
                              {"probes_written", written},
                              {"thinned", thinned.thinned},
                              {"dropped", thinned.dropped},
                              {"seconds",
                               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                                   .count()}}
                   .dump()
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (!o.fill_history.empty()) return fill_history(o);
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
    for (int i = 0; i < n; ++i) control->select_explained(kAccelerator);
    const double per =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / n;
    const auto t1 = std::chrono::steady_clock::now();
    falcon::ClusterSelection s =
        fabric->select_cluster(kAccelerator, {.probe = [&](const falcon::ClusterConfig& c) {
                                 return falcon::ClusterProbeResult{
                                     c.name, true, 0, 0, std::nullopt, "2026-06-01T10:00:00.000Z"};
                               }});
    const double one = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    const auto t2 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) store->record_selection(s);
    const double rec =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t2).count() / n;
    // CPU of this thread per step (the machine may be shared: CPU time is what a step costs,
    // wall time is what it waited too). A single caller leads its own group commit.
    const int m = 200;
    double c0 = thread_cpu_ms();
    falcon::Decision outcome;
    for (int i = 0; i < m; ++i) outcome = control->select_explained(kAccelerator);
    const double select_cpu = (thread_cpu_ms() - c0) / m;
    c0 = thread_cpu_ms();
    std::size_t bytes = 0;
    for (int i = 0; i < m; ++i) bytes += falcon::serve::select_answer_json(outcome).size();
    const double answer_cpu = (thread_cpu_ms() - c0) / m;
    c0 = thread_cpu_ms();
    for (int i = 0; i < m; ++i) {
      nlohmann::json j = outcome.selection;
      j["selection_id"] = outcome.selection.selection_id;
      j["candidate_probes"] = outcome.candidate_probes;
      bytes += j.dump().size();
    }
    const double answer_tree_cpu = (thread_cpu_ms() - c0) / m;
    c0 = thread_cpu_ms();
    for (int i = 0; i < m; ++i) bytes += falcon::to_json_text(outcome.selection).size();
    const double stored_cpu = (thread_cpu_ms() - c0) / m;
    c0 = thread_cpu_ms();
    for (int i = 0; i < m; ++i) bytes += nlohmann::json(outcome.selection).dump().size();
    const double stored_tree_cpu = (thread_cpu_ms() - c0) / m;
    c0 = thread_cpu_ms();
    for (int i = 0; i < m; ++i) store->record_selection(outcome.selection);
    const double record_cpu = (thread_cpu_ms() - c0) / m;
    // A brief select that repeats the standing decision (serve.select_reuse_ms), its answer,
    // and the repeat's store write alone.
    falcon::Decision brief = control->select_brief(kAccelerator);
    c0 = thread_cpu_ms();
    int repeats = 0;
    for (int i = 0; i < m; ++i) {
      brief = control->select_brief(kAccelerator);
      repeats += brief.same_as != 0 ? 1 : 0;
    }
    const double brief_cpu = (thread_cpu_ms() - c0) / m;
    c0 = thread_cpu_ms();
    std::size_t brief_bytes = 0;
    for (int i = 0; i < m; ++i) brief_bytes = falcon::serve::brief_select_answer_json(brief).size();
    const double brief_answer_cpu = (thread_cpu_ms() - c0) / m;
    const std::string now = falcon::format_iso8601(std::chrono::system_clock::now());
    c0 = thread_cpu_ms();
    for (int i = 0; i < m; ++i)
      store->record_repeated_selection(outcome.selection.selection_id, now);
    const double repeat_record_cpu = (thread_cpu_ms() - c0) / m;
    std::cout << nlohmann::json{{"row", "select_cached_in_process"},
                                {"clusters", o.clusters},
                                {"mean_ms", per * 1000},
                                {"select_with_constant_probe_ms", one * 1000},
                                {"record_selection_ms", rec * 1000},
                                {"select_cpu_ms", select_cpu},
                                {"of_which_record_selection_cpu_ms", record_cpu},
                                {"answer_json_cpu_ms", answer_cpu},
                                {"answer_json_bytes", select_answer_json_size(outcome)},
                                {"answer_json_tree_cpu_ms", answer_tree_cpu},
                                {"stored_json_cpu_ms", stored_cpu},
                                {"stored_json_tree_cpu_ms", stored_tree_cpu},
                                {"brief_select_cpu_ms", brief_cpu},
                                {"brief_repeats", repeats},
                                {"brief_answer_json_cpu_ms", brief_answer_cpu},
                                {"brief_answer_json_bytes", brief_bytes},
                                {"record_repeated_selection_cpu_ms", repeat_record_cpu},
                                {"checksum_bytes", bytes}}
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
        if (!r || r->status != 200) {
          if (++errors == 1) {
            std::cerr << "first error: "
                      << (r ? std::to_string(r->status) + " " + r->body
                            : httplib::to_string(r.error()))
                      << "\n";
          }
        }
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
