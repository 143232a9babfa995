// The health loop's cost: `falcon serve`'s HealthMonitor probing N clusters of a local fleet
// through fleet-xpk (real subprocesses, real HTTP to the fleet), recording every probe in an
// SQLite state store, on a clock that runs --time-scale times faster than the wall clock so that
// minutes of the 30 s schedule pass in seconds.
//
// It starts its own fleet (falcon-fleet with N clusters, time scale 0, as a child process) and
// builds the probe function as `falcon serve` does: ClusterFabric::probe_cluster. Measured over
// --seconds of wall time:
//   probes                        probes the loop ran
//   expected_probes               N x simulated time / interval (the schedule it should keep)
//   self_cpu_ms_per_probe         this process's user+system CPU (getrusage RUSAGE_SELF: the
//                                 loop, the prober's parsing, the store writes) per probe
//   xpk_cpu_ms_per_probe          CPU of the fleet-xpk processes (RUSAGE_CHILDREN) per probe
//   self_cpu_ms_per_cluster_minute   self CPU per cluster per simulated minute
//   total_cpu_ms_per_cluster_minute  the same with the fleet-xpk processes
// One JSON object on stdout.
//
//   health_loop_bench --fleet-bin=DIR [--clusters=100] [--interval=30] [--time-scale=10]
//                     [--seconds=60] [--max-parallel=8]
//   (DIR holds falcon-fleet and fleet-xpk)
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
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
  int clusters = 100;
  int interval_s = 30;
  double time_scale = 10;
  double seconds = 60;
  int max_parallel = 8;
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "health_loop_bench: " << problem << "\n"
            << "usage: health_loop_bench --fleet-bin=DIR [--clusters=100] [--interval=30] "
               "[--time-scale=10] [--seconds=60] [--max-parallel=8]\n";
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
      } else if (flag == "--interval") {
        o.interval_s = std::stoi(value);
      } else if (flag == "--time-scale") {
        o.time_scale = std::stod(value);
      } else if (flag == "--seconds") {
        o.seconds = std::stod(value);
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
  if (o.clusters < 1 || o.interval_s < 1 || o.time_scale <= 0 || o.seconds <= 0 ||
      o.max_parallel < 1) {
    usage("every number must be positive");
  }
  return o;
}

// The wall clock, `scale` times faster from its creation on.
class ScaledClock final : public falcon::Clock {
 public:
  explicit ScaledClock(double scale)
      : scale_(scale),
        wall0_(std::chrono::system_clock::now()),
        steady0_(std::chrono::steady_clock::now()) {}
  std::chrono::system_clock::time_point now() const override {
    return wall0_ + std::chrono::duration_cast<std::chrono::system_clock::duration>(scaled());
  }
  std::chrono::steady_clock::time_point steady_now() const override {
    return steady0_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(scaled());
  }
  void sleep_for(std::chrono::nanoseconds d) const override {
    std::this_thread::sleep_for(std::chrono::duration<double, std::nano>(d.count() / scale_));
  }
  bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  std::chrono::steady_clock::time_point deadline,
                  const std::function<bool()>& stop) const override {
    const std::chrono::duration<double> scaled_wait = deadline - steady0_;
    const auto real = steady0_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                     scaled_wait / scale_);
    return cv.wait_until(lock, real, stop);
  }

 private:
  std::chrono::duration<double> scaled() const {
    return (std::chrono::steady_clock::now() - steady0_) * scale_;
  }
  double scale_;
  std::chrono::system_clock::time_point wall0_;
  std::chrono::steady_clock::time_point steady0_;
};

std::string cluster_name(int i) { return "loop-" + std::to_string(i); }

// The fleet: N clusters, each with two tpu-v4-64 slots, one running and one queued workload.
std::string fleet_yaml(int n) {
  std::ostringstream y;
  y << "time_scale: 0\nclusters:\n";
  for (int i = 0; i < n; ++i) {
    y << "  " << cluster_name(i) << ":\n    project: bench-project\n    zone: us-central2-b\n"
      << "    cluster_id: " << cluster_name(i) << "\n    capacity: {tpu-v4-64: 1}\n"
      << "    workloads:\n"
      << "      - {name: run-a, device_type: tpu-v4-64, duration_s: 86400}\n"
      << "      - {name: wait-b, device_type: tpu-v4-64, duration_s: 600}\n";
  }
  return y.str();
}

std::string repos_yaml(int n, const std::filesystem::path& dir, const std::string& xpk,
                       const std::string& url) {
  std::ostringstream y;
  y << "clusters:\n";
  for (int i = 0; i < n; ++i) {
    y << "  " << cluster_name(i) << ":\n    project: bench-project\n    zone: us-central2-b\n"
      << "    cluster_id: " << cluster_name(i) << "\n"
      << "    accelerator_types: [{type: tpu-v4-64, device_class: tpu, priority: 1}]\n"
      << "    probe_timeout_s: 60\n";
  }
  y << "xpk:\n  binary: " << xpk << "\n  state_dir: " << (dir / "state").string()
    << "\n  env: {FALCON_FLEET_URL: \"" << url << "\"}\n";
  return y.str();
}

// Starts falcon-fleet and returns its pid and URL (from --ready-file).
std::pair<pid_t, std::string> start_fleet(const std::string& bin, const std::filesystem::path& dir,
                                          int clusters) {
  std::ofstream(dir / "fleet.yaml") << fleet_yaml(clusters);
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

double round_to(double v, int digits) {
  const double f = std::pow(10.0, digits);
  return std::round(v * f) / f;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  try {
    ScratchDir scratch;
    const auto [fleet_pid, url] =
        start_fleet(o.fleet_bin + "/falcon-fleet", scratch.path(), o.clusters);
    std::ofstream(scratch.path() / "repos.yaml")
        << repos_yaml(o.clusters, scratch.path(), o.fleet_bin + "/fleet-xpk", url);

    falcon::ClusterFabric fabric((scratch.path() / "repos.yaml").string());
    std::shared_ptr<falcon::StateStore> store = fabric.state_store();
    falcon::ServeSettings settings;
    settings.probe_interval_s = o.interval_s;
    settings.max_parallel_probes = o.max_parallel;
    auto clock = std::make_shared<ScaledClock>(o.time_scale);
    falcon::HealthMonitor monitor(
        [&fabric](const falcon::ClusterConfig& c) { return fabric.probe_cluster(c); }, store, clock,
        settings);
    monitor.set_clusters(fabric.list_clusters());

    const double self0 = cpu_seconds(RUSAGE_SELF);
    const double children0 = cpu_seconds(RUSAGE_CHILDREN);
    const auto start = std::chrono::steady_clock::now();
    monitor.start();
    std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
    monitor.stop();
    const double real_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double self_cpu = cpu_seconds(RUSAGE_SELF) - self0;
    const double xpk_cpu = cpu_seconds(RUSAGE_CHILDREN) - children0;

    kill(fleet_pid, SIGTERM);
    int status = 0;
    waitpid(fleet_pid, &status, 0);

    const auto stats = monitor.stats();
    int reachable = 0;
    std::string first_error;
    for (const auto& p : monitor.snapshot()) {
      reachable += p.result.reachable ? 1 : 0;
      if (first_error.empty() && p.result.error) first_error = *p.result.error;
    }
    const double simulated_min = real_s * o.time_scale / 60.0;
    const double probes = static_cast<double>(stats.loop_probes);
    const double cluster_minutes = o.clusters * simulated_min;
    nlohmann::json out{
        {"clusters", o.clusters},
        {"interval_s", o.interval_s},
        {"time_scale", o.time_scale},
        {"max_parallel_probes", o.max_parallel},
        {"real_s", round_to(real_s, 2)},
        {"simulated_minutes", round_to(simulated_min, 2)},
        {"probes", stats.loop_probes},
        {"expected_probes", std::lround(o.clusters * simulated_min * 60.0 / o.interval_s)},
        {"reachable_at_end", reachable},
        {"store_failures", stats.store_failures},
        {"first_error", first_error},
        {"self_cpu_s", round_to(self_cpu, 3)},
        {"xpk_cpu_s", round_to(xpk_cpu, 3)},
        {"self_cpu_ms_per_probe", probes > 0 ? round_to(self_cpu * 1000 / probes, 3) : 0.0},
        {"xpk_cpu_ms_per_probe", probes > 0 ? round_to(xpk_cpu * 1000 / probes, 3) : 0.0},
        {"self_cpu_ms_per_cluster_minute", round_to(self_cpu * 1000 / cluster_minutes, 3)},
        {"total_cpu_ms_per_cluster_minute",
         round_to((self_cpu + xpk_cpu) * 1000 / cluster_minutes, 3)},
        {"history_rows_cluster0",
         store
             ->probe_history(cluster_name(0), clock->now() - std::chrono::hours(24),
                             clock->now() + std::chrono::hours(24), 100000)
             .size()}};
    std::cout << out.dump() << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "health_loop_bench: " << e.what() << "\n";
    return 1;
  }
}
