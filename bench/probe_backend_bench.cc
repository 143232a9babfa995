// What one probe costs a long-lived prober (as `falcon serve` runs it), probe.backend xpk vs
// kube, in this process, on a local fleet of N clusters (its own falcon-fleet child, time scale
// 0, each cluster with one running and --queued queued workloads).
//
// It builds a ClusterFabric as `falcon serve` does, warms every cluster's credentials
// (`falcon cluster warm-up`: fleet-gcloud get-credentials writes each kubeconfig with the
// fleet's HTTPS server, CA and exec plugin), then measures, each phase on its own:
//   xpk         --xpk-rounds rounds over --clusters clusters, probe.backend xpk: one fleet-xpk
//               process per probe. CPU = this process (getrusage RUSAGE_SELF) + the reaped
//               children (RUSAGE_CHILDREN)
//   kube_cold   the first kube probe of each cluster: one run of the exec plugin (fleet-gcloud
//               gke-gcloud-auth-plugin) and a new TLS connection
//   kube_warm   --rounds rounds over the same clusters, back to back: the token cached, the
//               cluster's connection reused while the server keeps it open
//   loop        a HealthMonitor (the `falcon serve` loop, SQLite probe history) over
//               --loop-clusters clusters at --interval s, probe.backend kube, on the real clock,
//               for --loop-seconds after a first round that caches every token: CPU of this
//               process and its children over the wall time = the share of one core
// Every probe must be reachable with the counts the fleet holds (1 running, --queued queued),
// or the benchmark fails. One JSON object on stdout.
//
//   probe_backend_bench --fleet-bin=DIR [--clusters=20] [--rounds=20] [--xpk-rounds=2]
//                       [--queued=4] [--loop-clusters=500] [--interval=30]
//                       [--loop-seconds=60] [--max-parallel=8]
//   (DIR holds falcon-fleet, fleet-xpk and fleet-gcloud; --loop-clusters=0 skips the loop)
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "falcon/clock.h"
#include "falcon/fabric.h"
#include "falcon/state_store.h"
#include "serve/health_monitor.h"

#include "bench_support.h"

using falcon::bench::cpu_seconds;
using falcon::bench::ScratchDir;

namespace {

struct Options {
  std::string fleet_bin;
  int clusters = 20;
  int rounds = 20;
  int xpk_rounds = 2;
  int queued = 4;
  int loop_clusters = 500;
  int interval_s = 30;
  double loop_seconds = 60;
  int max_parallel = 8;
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "probe_backend_bench: " << problem << "\n"
            << "usage: probe_backend_bench --fleet-bin=DIR [--clusters=20] [--rounds=20] "
               "[--xpk-rounds=2] [--queued=4] [--loop-clusters=500] [--interval=30] "
               "[--loop-seconds=60] [--max-parallel=8]\n";
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('=');
    const std::string flag = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    try {
      if (flag == "--fleet-bin") {
        o.fleet_bin = value;
      } else if (flag == "--clusters") {
        o.clusters = std::stoi(value);
      } else if (flag == "--rounds") {
        o.rounds = std::stoi(value);
      } else if (flag == "--xpk-rounds") {
        o.xpk_rounds = std::stoi(value);
      } else if (flag == "--queued") {
        o.queued = std::stoi(value);
      } else if (flag == "--loop-clusters") {
        o.loop_clusters = std::stoi(value);
      } else if (flag == "--interval") {
        o.interval_s = std::stoi(value);
      } else if (flag == "--loop-seconds") {
        o.loop_seconds = std::stod(value);
      } else if (flag == "--max-parallel") {
        o.max_parallel = std::stoi(value);
      } else {
        usage("unknown argument '" + arg + "'");
      }
    } catch (const std::logic_error&) {
      usage("bad value in '" + arg + "'");
    }
  }
  if (o.fleet_bin.empty()) usage("--fleet-bin is required");
  o.fleet_bin = std::filesystem::absolute(o.fleet_bin).string();  // repos.yaml is elsewhere
  if (o.clusters < 1 || o.rounds < 1 || o.xpk_rounds < 1 || o.queued < 0 || o.loop_clusters < 0 ||
      o.interval_s < 1 || o.loop_seconds <= 0 || o.max_parallel < 1) {
    usage("every number must be positive");
  }
  return o;
}

std::string cluster_name(int i) { return "probe-" + std::to_string(i); }

// N clusters, each with one tpu-v4-64 slot: one running workload and `queued` waiting.
std::string fleet_yaml(int n, int queued) {
  std::ostringstream y;
  y << "time_scale: 0\nclusters:\n";
  for (int i = 0; i < n; ++i) {
    y << "  " << cluster_name(i) << ":\n    project: bench-project\n    zone: us-central2-b\n"
      << "    cluster_id: " << cluster_name(i) << "\n    capacity: {tpu-v4-64: 1}\n"
      << "    workloads:\n"
      << "      - {name: run-a, device_type: tpu-v4-64, duration_s: 86400}\n";
    if (queued > 0) {
      y << "      - {name: wait, count: " << queued
        << ", device_type: tpu-v4-64, duration_s: 600}\n";
    }
  }
  return y.str();
}

std::string repos_yaml(int n, const std::filesystem::path& dir, const std::string& bin,
                       const std::string& url) {
  std::ostringstream y;
  y << "clusters:\n";
  for (int i = 0; i < n; ++i) {
    y << "  " << cluster_name(i) << ":\n    project: bench-project\n    zone: us-central2-b\n"
      << "    cluster_id: " << cluster_name(i) << "\n"
      << "    accelerator_types: [{type: tpu-v4-64, device_class: tpu, priority: 1}]\n"
      << "    probe_timeout_s: 60\n";
  }
  y << "xpk:\n  binary: " << bin << "/fleet-xpk\n  gcloud_binary: " << bin
    << "/fleet-gcloud\n  state_dir: " << (dir / "state").string()
    << "\n  env: {FALCON_FLEET_URL: \"" << url << "\"}\n";
  return y.str();
}

// Starts falcon-fleet and returns its pid and URL (from --ready-file).
std::pair<pid_t, std::string> start_fleet(const std::string& bin, const std::filesystem::path& dir,
                                          int clusters, int queued) {
  std::ofstream(dir / "fleet.yaml") << fleet_yaml(clusters, queued);
  const std::string ready = (dir / "ready.json").string();
  const std::string fleet_path = (dir / "fleet.yaml").string();
  const std::string log_path = (dir / "fleet.log").string();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (!freopen(log_path.c_str(), "w", stdout) || !freopen(log_path.c_str(), "a", stderr)) {
      _exit(127);
    }
    execl(bin.c_str(), bin.c_str(), "--fleet", fleet_path.c_str(), "--port", "0", "--time-scale",
          "0", "--ready-file", ready.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 1200; ++i) {
    std::ifstream in(ready);
    if (in) {
      const auto j = nlohmann::json::parse(in, nullptr, false);
      if (j.is_object() && j.contains("url")) return {pid, j["url"].get<std::string>()};
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      throw std::runtime_error("falcon-fleet exited; see " + log_path);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGTERM);
  throw std::runtime_error("falcon-fleet did not become ready");
}

// Stops the fleet child however main ends.
struct FleetChild {
  pid_t pid = -1;
  ~FleetChild() {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
  }
};

double round_to(double v, int digits) {
  const double f = std::pow(10.0, digits);
  return std::round(v * f) / f;
}

// User and system CPU seconds of this process so far.
std::pair<double, double> user_sys_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  return {seconds(usage.ru_utime), seconds(usage.ru_stime)};
}

struct Phase {
  int probes = 0;
  double self_sys_s = 0;  // the kernel's part of self_cpu_s
  double self_cpu_s = 0;
  double child_cpu_s = 0;
  double wall_s = 0;
  nlohmann::json to_json() const {
    const double n = std::max(probes, 1);
    return {{"probes", probes},
            {"cpu_ms_per_probe", round_to((self_cpu_s + child_cpu_s) * 1000 / n, 4)},
            {"self_cpu_ms_per_probe", round_to(self_cpu_s * 1000 / n, 4)},
            {"self_sys_ms_per_probe", round_to(self_sys_s * 1000 / n, 4)},
            {"child_cpu_ms_per_probe", round_to(child_cpu_s * 1000 / n, 4)},
            {"wall_ms_per_probe", round_to(wall_s * 1000 / n, 4)}};
  }
};

// Probes every cluster `rounds` times, one after another, checking each answer.
Phase measure(const falcon::ClusterFabric& fabric, const std::vector<falcon::ClusterConfig>& all,
              int rounds, int queued) {
  Phase p;
  const double self0 = cpu_seconds(RUSAGE_SELF);
  const double child0 = cpu_seconds(RUSAGE_CHILDREN);
  const double sys0 = user_sys_seconds().second;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds; ++r) {
    for (const auto& c : all) {
      const auto result = fabric.probe_cluster(c);
      if (!result.reachable || result.running_count != 1 || result.queue_depth != queued) {
        throw std::runtime_error("probe of " + c.name + " (backend " +
                                 falcon::to_string(*c.probe_backend) +
                                 ") gave the wrong answer: " + result.error.value_or("counts"));
      }
      ++p.probes;
    }
  }
  p.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  p.self_cpu_s = cpu_seconds(RUSAGE_SELF) - self0;
  p.self_sys_s = user_sys_seconds().second - sys0;
  p.child_cpu_s = cpu_seconds(RUSAGE_CHILDREN) - child0;
  return p;
}

std::vector<falcon::ClusterConfig> with_backend(std::vector<falcon::ClusterConfig> clusters,
                                                falcon::ProbeBackend backend, int n) {
  clusters.resize(std::min<std::size_t>(clusters.size(), static_cast<std::size_t>(n)));
  for (auto& c : clusters) c.probe_backend = backend;
  return clusters;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  try {
    ScratchDir scratch;
    const int fleet_size = std::max(o.clusters, o.loop_clusters);
    const auto [fleet_pid, url] =
        start_fleet(o.fleet_bin + "/falcon-fleet", scratch.path(), fleet_size, o.queued);
    FleetChild fleet{fleet_pid};
    std::ofstream(scratch.path() / "repos.yaml")
        << repos_yaml(fleet_size, scratch.path(), o.fleet_bin, url);

    falcon::ClusterFabric fabric((scratch.path() / "repos.yaml").string());
    const auto warm_start = std::chrono::steady_clock::now();
    for (const auto& w : fabric.warm_up()) {
      if (!w.ok) throw std::runtime_error("warm-up of " + w.cluster + ": " + w.error.value_or(""));
    }
    const double warm_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - warm_start).count();
    const auto all = fabric.list_clusters();

    const auto xpk_clusters = with_backend(all, falcon::ProbeBackend::kXpk, o.clusters);
    const auto kube_clusters = with_backend(all, falcon::ProbeBackend::kKube, o.clusters);
    const Phase xpk = measure(fabric, xpk_clusters, o.xpk_rounds, o.queued);
    const Phase cold = measure(fabric, kube_clusters, 1, o.queued);
    const Phase warm = measure(fabric, kube_clusters, o.rounds, o.queued);

    nlohmann::json out{{"clusters", o.clusters},           {"workloads_per_cluster", 1 + o.queued},
                       {"warm_up_s", round_to(warm_s, 2)}, {"xpk", xpk.to_json()},
                       {"kube_cold", cold.to_json()},      {"kube_warm", warm.to_json()}};
    const double xpk_cpu = (xpk.self_cpu_s + xpk.child_cpu_s) / xpk.probes;
    const double kube_cpu = (warm.self_cpu_s + warm.child_cpu_s) / warm.probes;
    out["cpu_ratio_xpk_over_kube_warm"] = round_to(xpk_cpu / std::max(kube_cpu, 1e-9), 1);

    if (o.loop_clusters > 0) {
      // The serve loop over every cluster with probe.backend kube: one first round caches each
      // cluster's token (an hour's worth), then the loop runs on the real clock.
      const auto loop_clusters = with_backend(all, falcon::ProbeBackend::kKube, o.loop_clusters);
      const Phase prime = measure(fabric, loop_clusters, 1, o.queued);
      std::shared_ptr<falcon::StateStore> store = fabric.state_store();
      falcon::ServeSettings settings;
      settings.probe_interval_s = o.interval_s;
      settings.max_parallel_probes = o.max_parallel;
      falcon::HealthMonitor monitor(
          [&fabric](const falcon::ClusterConfig& c) {
            falcon::ClusterConfig k = c;
            k.probe_backend = falcon::ProbeBackend::kKube;
            return fabric.probe_cluster(k);
          },
          store, falcon::make_system_clock(), settings);
      monitor.set_clusters(loop_clusters);
      const double self0 = cpu_seconds(RUSAGE_SELF);
      const double child0 = cpu_seconds(RUSAGE_CHILDREN);
      const auto start = std::chrono::steady_clock::now();
      monitor.start();
      std::this_thread::sleep_for(std::chrono::duration<double>(o.loop_seconds));
      monitor.stop();
      const double real_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double self_cpu = cpu_seconds(RUSAGE_SELF) - self0;
      const double child_cpu = cpu_seconds(RUSAGE_CHILDREN) - child0;
      const auto stats = monitor.stats();
      int reachable = 0;
      std::string first_error;
      for (const auto& p : monitor.snapshot()) {
        reachable += p.result.reachable ? 1 : 0;
        if (first_error.empty() && p.result.error) first_error = *p.result.error;
      }
      const double probes = static_cast<double>(std::max<std::int64_t>(stats.loop_probes, 1));
      out["loop"] = {{"clusters", o.loop_clusters},
                     {"interval_s", o.interval_s},
                     {"prime", prime.to_json()},
                     {"real_s", round_to(real_s, 2)},
                     {"probes", stats.loop_probes},
                     {"expected_probes", std::lround(o.loop_clusters * real_s / o.interval_s)},
                     {"reachable_at_end", reachable},
                     {"store_failures", stats.store_failures},
                     {"first_error", first_error},
                     {"self_cpu_s", round_to(self_cpu, 3)},
                     {"child_cpu_s", round_to(child_cpu, 3)},
                     {"cpu_ms_per_probe", round_to((self_cpu + child_cpu) * 1000 / probes, 4)},
                     {"core_share", round_to((self_cpu + child_cpu) / real_s, 4)}};
    }

    std::cout << out.dump() << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "probe_backend_bench: " << e.what() << "\n";
    return 1;
  }
}
