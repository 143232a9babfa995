// The supervisor at scale (issue 27): N managed workloads (default 10,000), each RUNNING on one
// of three simulated clusters (tests/serve/sim_control.h: no xpk runs, so what is measured is
// the supervisor and the state store), on SQLite and on PostgreSQL (a throwaway server with its
// default durability, the tests' harness). Per backend, as one JSON line each:
//   - the first pass: every workload is seen RUNNING (starting -> running, a write each);
//   - quiet passes: nothing changed;
//   - a pass after one cluster's workloads were killed (exit 137): a third of them fenced,
//     decided, resubmitted elsewhere and recorded.
// Wall and CPU seconds per pass, and per workload in microseconds.
//
//   build/release/bench/supervisor_bench [--workloads=10000] [--quiet-passes=3]
//                                        [--backends=sqlite,postgresql]
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_support.h"
#include "falcon/state_store.h"
#include "serve/sim_control.h"
#include "serve/supervisor.h"
#include "support/fake_clock.h"
#include "support/postgres_server.h"

namespace {

using falcon::ManagedWorkloadRecord;
using falcon::StateStore;
using falcon::Supervisor;
using falcon::testing::FakeClock;
using falcon::testing::SimControl;

struct Pass {
  double wall_s = 0;
  double cpu_s = 0;
};

Pass timed_pass(Supervisor& supervisor, FakeClock& clock) {
  clock.advance(std::chrono::seconds(1));
  const double cpu0 = falcon::bench::cpu_seconds(RUSAGE_SELF);
  const auto t0 = std::chrono::steady_clock::now();
  if (!supervisor.run_once()) throw std::runtime_error("the supervisor did not hold its lease");
  Pass p;
  p.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  p.cpu_s = falcon::bench::cpu_seconds(RUSAGE_SELF) - cpu0;
  return p;
}

nlohmann::json pass_json(const Pass& p, int workloads) {
  return {{"wall_s", p.wall_s},
          {"cpu_s", p.cpu_s},
          {"wall_us_per_workload", p.wall_s * 1e6 / workloads},
          {"cpu_us_per_workload", p.cpu_s * 1e6 / workloads}};
}

nlohmann::json run(const std::string& backend, const std::string& url, int workloads,
                   int quiet_passes) {
  std::shared_ptr<StateStore> store = falcon::open_state_store(url);
  auto clock = std::make_shared<FakeClock>();
  auto control = std::make_shared<SimControl>();
  const std::vector<std::string> clusters = {"tpu-a", "tpu-b", "tpu-c"};
  for (int i = 0; i < workloads; ++i) {
    ManagedWorkloadRecord m;
    m.name = fmt::format("m{:06}", i);
    m.spec.name = m.name;
    m.spec.docker_image = "gcr.io/p/train:1";
    m.spec.command = {"python3", "train.py"};
    m.spec.accelerator_type = "v4-64";
    m.incarnation = m.name;
    m.cluster = clusters[static_cast<std::size_t>(i) % clusters.size()];
    m.state = falcon::ManagedState::kStarting;
    m.created_at = clock->now();
    m.updated_at = m.created_at;
    if (!store->create_managed(m)) throw std::runtime_error("create_managed " + m.name);
    control->set(m.cluster, m.name, "RUNNING");
  }
  falcon::SupervisorSettings settings;
  settings.lease_ttl_s = 3600;  // the lease is not what is measured
  Supervisor supervisor({.control = control,
                         .store = store,
                         .clock = clock,
                         .settings = settings,
                         .holder = "bench",
                         .parallel = 4});
  nlohmann::json out = {{"backend", backend}, {"workloads", workloads}};
  out["first_pass"] = pass_json(timed_pass(supervisor, *clock), workloads);
  std::vector<Pass> quiet;
  for (int i = 0; i < quiet_passes; ++i) quiet.push_back(timed_pass(supervisor, *clock));
  nlohmann::json q = nlohmann::json::array();
  for (const Pass& p : quiet) q.push_back(pass_json(p, workloads));
  out["quiet_passes"] = q;
  // One cluster's workloads killed: the next pass recovers every one of them elsewhere.
  int killed = 0;
  for (int i = 0; i < workloads; i += static_cast<int>(clusters.size())) {
    control->set("tpu-a", fmt::format("m{:06}", i), "FAILED", 137);
    ++killed;
  }
  const std::size_t submits_before = control->submits.size();
  out["recovery_pass"] = pass_json(timed_pass(supervisor, *clock), workloads);
  out["killed"] = killed;
  out["resubmitted"] = control->submits.size() - submits_before;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int workloads = static_cast<int>(falcon::bench::flag(argc, argv, "workloads", 10000));
  const int quiet_passes = static_cast<int>(falcon::bench::flag(argc, argv, "quiet-passes", 3));
  std::stringstream backends(
      falcon::bench::flag_text(argc, argv, "backends").value_or("sqlite,postgresql"));
  if (workloads < 3 || quiet_passes < 0) {
    std::cerr << "supervisor_bench: --workloads must be >= 3 and --quiet-passes >= 0\n";
    return 2;
  }
  falcon::bench::ScratchDir dir;
  std::unique_ptr<falcon::testing::PostgresServer> pg;
  for (std::string backend; std::getline(backends, backend, ',');) {
    std::string url;
    if (backend == "sqlite") {
      url = "sqlite://" + (dir.path() / "falcon.db").string();
    } else if (backend == "postgresql") {
      pg = std::make_unique<falcon::testing::PostgresServer>(
          falcon::testing::PostgresServer::Options{.durable = true});
      url = pg->create_database("bench");
    } else {
      std::cerr << "supervisor_bench: --backends: unknown backend '" << backend << "'\n";
      return 2;
    }
    std::cout << run(backend, url, workloads, quiet_passes).dump() << std::endl;
  }
  return 0;
}
