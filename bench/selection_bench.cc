// Cluster selection over N candidates whose `xpk workload list` takes a fixed time.
//
// For each N, a fake xpk (a /bin/sh script that sleeps --delay seconds, then prints a
// realistic v1.13 list) stands in for every cluster, and the real stack runs: ClusterRegistry
// from a generated repos.yaml, ClusterProber over the POSIX command runner, ClusterSelector.
// Measured per N:
//   wall_s                 one select() with selection.max_parallel_probes = --max-parallel
//   ideal_s                ceil(N / max_parallel) * delay: one probe's time per round of the pool
//   sequential_wall_s      the same select() with max_parallel_probes = 1 (one by one)
//   self_cpu_per_probe_ms  this process's user+system CPU during the parallel select()
//                          (getrusage RUSAGE_SELF: falcon's own cost, children excluded) / N
//   children_cpu_s         CPU of the fake xpk processes (sh, sleep, cat), for context
// One JSON object per line on stdout, so a script can build a table.
//
//   selection_bench [--clusters=8,32,128] [--delay=0.5] [--max-parallel=16] [--no-sequential]
//   selection_bench --write-fake-xpk=PATH   writes the fake xpk (delay from $FAKE_XPK_DELAY) and
//                                           exits, for bench/run's one-by-one shell-loop baseline
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "falcon/clock.h"
#include "falcon/command_runner.h"
#include "falcon/errors.h"
#include "falcon/prober.h"
#include "falcon/registry.h"
#include "falcon/selector.h"

#include "bench_support.h"

using falcon::bench::cpu_seconds;
using falcon::bench::ScratchDir;

namespace {

constexpr const char* kAccelerator = "tpu-v5p-128";

// A fake xpk: the delay, then what xpk v1.13.1 prints for a list with four workloads.
constexpr const char* kFakeXpk = R"xpk(#!/bin/sh
sleep "$FAKE_XPK_DELAY"
cat <<'EOF'
[XPK] Starting xpk v1.13.1
[XPK] Starting workload list
[XPK] Working on bench-project and us-east5-a
[XPK] Task: `List Jobs with filter-by-status=EVERYTHING` is implemented by `kubectl get workloads --ignore-not-found -o=json`
[XPK] Workload List Output:
Jobset Name   Created Time           Priority   TPU/GPU VMs Needed   TPU/GPU VMs Running/Ran   TPU/GPU VMs Done   Status          Status Message                                                                                                            Status Time         
train-a       2026-06-01T10:00:00Z   medium     4                    4                         <none>             QuotaReserved   Quota reserved in ClusterQueue cluster-queue                                                                              2026-06-01T10:00:02Z
train-b       2026-06-01T10:05:00Z   low        8                    <none>                    <none>             QuotaReserved   couldn't assign flavors to pod set slice-job: insufficient unused quota for google.com/tpu in flavor v5p, 4 more needed   2026-06-01T10:05:01Z
train-c       2026-06-01T09:00:00Z   high       4                    4                         4                  Finished        jobset completed successfully                                                                                             2026-06-01T09:30:00Z
train-e       2026-06-01T09:20:00Z   medium     4                    4                         <none>             Admitted        The workload is admitted                                                                                                  2026-06-01T09:20:01Z
[XPK] See your workloads in Cloud Console: https://console.cloud.google.com/kubernetes/aiml/deployments/jobs?project=bench-project
[XPK] Exiting XPK cleanly
EOF
)xpk";

struct Options {
  std::vector<int> clusters = {8, 32, 128};
  double delay_s = 0.5;
  int max_parallel = 16;
  bool sequential = true;
  std::string write_fake_xpk;  // non-empty: write the fake xpk there and exit
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "selection_bench: " << problem << "\n"
            << "usage: selection_bench [--clusters=8,32,128] [--delay=0.5] [--max-parallel=16] "
               "[--no-sequential]\n"
               "       selection_bench --write-fake-xpk=PATH\n";
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const std::string& flag) -> std::string {
      return arg.substr(flag.size() + 1);  // after "--flag="
    };
    try {
      if (arg.rfind("--clusters=", 0) == 0) {
        o.clusters.clear();
        std::stringstream list(value("--clusters"));
        for (std::string item; std::getline(list, item, ',');)
          o.clusters.push_back(std::stoi(item));
      } else if (arg.rfind("--delay=", 0) == 0) {
        o.delay_s = std::stod(value("--delay"));
      } else if (arg.rfind("--max-parallel=", 0) == 0) {
        o.max_parallel = std::stoi(value("--max-parallel"));
      } else if (arg.rfind("--write-fake-xpk=", 0) == 0) {
        o.write_fake_xpk = value("--write-fake-xpk");
      } else if (arg == "--no-sequential") {
        o.sequential = false;
      } else if (arg == "--help" || arg == "-h") {
        usage("measures cluster selection against fake xpk clusters");
      } else {
        usage("unknown argument '" + arg + "'");
      }
    } catch (const std::logic_error&) {
      usage("bad value in '" + arg + "'");
    }
  }
  for (int n : o.clusters) {
    if (n < 1) usage("cluster counts must be at least 1");
  }
  if (o.delay_s < 0 || o.max_parallel < 1) usage("delay must be >= 0 and max-parallel >= 1");
  return o;
}

void write_file(const std::filesystem::path& path, const std::string& text, bool executable) {
  std::ofstream(path) << text;
  if (executable) {
    std::filesystem::permissions(path, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add);
  }
}

// repos.yaml with n clusters offering kAccelerator, and an xpk: section for the fake.
std::string repos_yaml(int n, const std::filesystem::path& dir, double delay_s) {
  std::ostringstream y;
  y << "xpk:\n  binary: " << (dir / "xpk").string() << "\n  state_dir: " << (dir / "state").string()
    << "\n  env:\n    FAKE_XPK_DELAY: \"" << delay_s << "\"\n";
  y << "clusters:\n";
  for (int i = 0; i < n; ++i) {
    y << "  bench-" << i << ":\n    provider: gke\n    project: bench-project\n"
      << "    zone: us-east5-a\n    cluster_id: bench-cluster-" << i << "\n"
      << "    accelerator_types:\n      - {type: " << kAccelerator
      << ", device_class: tpu, priority: " << 1 + i % 3 << "}\n"
      << "    max_queue_depth: 5\n    probe_timeout_s: 60\n";
  }
  return y.str();
}

struct Measured {
  double wall_s = 0;
  double self_cpu_s = 0;
  double children_cpu_s = 0;
  int reachable = 0;
  std::string selected;
};

Measured measure_select(const falcon::ClusterRegistry& registry,
                        const falcon::ClusterProber& prober, int max_parallel,
                        const std::shared_ptr<falcon::Clock>& clock) {
  falcon::SelectionSettings settings;
  settings.max_parallel_probes = max_parallel;
  const falcon::ClusterSelector selector(registry, prober, settings, clock);
  Measured m;
  const double self_before = cpu_seconds(RUSAGE_SELF);
  const double children_before = cpu_seconds(RUSAGE_CHILDREN);
  const auto start = std::chrono::steady_clock::now();
  std::vector<falcon::ClusterProbeResult> results;
  try {
    auto selection = selector.select(kAccelerator);
    m.selected = selection.selected_cluster;
    results = std::move(selection.probe_results);
  } catch (const falcon::NoAvailableClusterError& e) {
    results = e.probe_results();
  }
  m.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m.self_cpu_s = cpu_seconds(RUSAGE_SELF) - self_before;
  m.children_cpu_s = cpu_seconds(RUSAGE_CHILDREN) - children_before;
  for (const auto& r : results) m.reachable += r.reachable;
  return m;
}

double round_to(double v, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  if (!options.write_fake_xpk.empty()) {
    write_file(options.write_fake_xpk, kFakeXpk, true);
    return 0;
  }
  auto runner = falcon::make_posix_command_runner();
  auto clock = falcon::make_system_clock();

  for (int n : options.clusters) {
    ScratchDir dir;
    write_file(dir.path() / "xpk", kFakeXpk, true);
    write_file(dir.path() / "repos.yaml", repos_yaml(n, dir.path(), options.delay_s), false);
    falcon::ClusterRegistry registry;
    try {
      registry.load((dir.path() / "repos.yaml").string());
    } catch (const falcon::FalconError& e) {
      std::cerr << "selection_bench: " << e.what() << "\n";
      return 1;
    }
    const falcon::ClusterProber prober(runner, registry.snapshot()->xpk, clock);

    // Warm the state directory and the page cache so that both runs start equal.
    prober.probe(registry.list_clusters().front());

    const Measured parallel = measure_select(registry, prober, options.max_parallel, clock);
    const double rounds = std::ceil(static_cast<double>(n) / options.max_parallel);
    const double ideal = rounds * options.delay_s;

    nlohmann::ordered_json row = {
        {"bench", "selection"},
        {"clusters", n},
        {"max_parallel_probes", options.max_parallel},
        {"delay_s", options.delay_s},
        {"wall_s", round_to(parallel.wall_s, 3)},
        {"ideal_s", round_to(ideal, 3)},
        {"overhead_vs_ideal_s", round_to(parallel.wall_s - ideal, 3)},
        {"wall_over_ideal", round_to(ideal > 0 ? parallel.wall_s / ideal : 0, 3)},
        {"self_cpu_s", round_to(parallel.self_cpu_s, 4)},
        {"self_cpu_per_probe_ms", round_to(parallel.self_cpu_s * 1000.0 / n, 3)},
        {"children_cpu_s", round_to(parallel.children_cpu_s, 3)},
        {"reachable", parallel.reachable},
        {"selected", parallel.selected},
    };
    if (options.sequential) {
      const Measured sequential = measure_select(registry, prober, 1, clock);
      row["sequential_wall_s"] = round_to(sequential.wall_s, 3);
      row["speedup_vs_sequential"] = round_to(sequential.wall_s / parallel.wall_s, 2);
      row["sequential_self_cpu_per_probe_ms"] = round_to(sequential.self_cpu_s * 1000.0 / n, 3);
    }
    std::cout << row.dump() << std::endl;
  }
  return 0;
}
