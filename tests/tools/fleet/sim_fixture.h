// Shared set-up for the fleet's tests: a simulator on a manual clock with an in-memory log
// sink, and helpers to read rows and entries back.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fleet/fake_xpk.h"
#include "fleet/fleet_config.h"
#include "fleet/simulator.h"
#include "support/fake_clock.h"

namespace falcon::fleet::testing {

// One cluster `c` (project p, zone us-central2-b, cluster_id c-1) with small capacities and
// 100-second runs of 5 steps; `extra_cluster_yaml` is appended inside the cluster's mapping,
// `extra_top_yaml` at the top level.
inline FleetConfig small_fleet(const std::string& extra_cluster_yaml = "",
                               const std::string& extra_top_yaml = "") {
  return parse_fleet_config(R"(
time_scale: 0
defaults: {duration_s: 100, steps: 5}
)" + extra_top_yaml + R"(
clusters:
  c:
    project: p
    zone: us-central2-b
    cluster_id: c-1
    capacity: {tpu-v4-8: 1, tpu-v4-64: 2, n2-standard-32-4: 1, a100-40gb-8: 1}
)" + extra_cluster_yaml,
                            "test-fleet.yaml");
}

// What a fleet executable printed and returned.
struct ToolRun {
  int code = -1;
  std::string out;
  std::string err;
};

// Runs a fleet executable's entry point (run_fake_xpk, run_fake_gcloud) in process, with `env`
// as its environment and `stdin_text` as its stdin; its sleeps are appended to `slept`, not
// taken.
template <typename Run>
ToolRun run_in_process(Run run, const std::vector<std::string>& args, FleetApi* api,
                       const std::map<std::string, std::string>& env, std::vector<long>& slept,
                       const std::string& stdin_text = "") {
  std::ostringstream out;
  std::ostringstream err;
  std::istringstream in(stdin_text);
  const FakeXpkEnv fake_env{out, err, in,
                            [&env](const std::string& name) -> std::optional<std::string> {
                              auto it = env.find(name);
                              if (it == env.end()) return std::nullopt;
                              return it->second;
                            },
                            [&slept](std::chrono::milliseconds d) { slept.push_back(d.count()); }};
  ToolRun r;
  r.code = run(args, api, fake_env);
  r.out = out.str();
  r.err = err.str();
  return r;
}

// A simulator on a fake wall clock: manual (scale 0, the default) or scaled.
struct SimHarness {
  explicit SimHarness(FleetConfig config, double scale = 0)
      : real(std::make_shared<falcon::testing::FakeClock>()),
        clock(std::make_shared<SimClock>(real, scale)),
        sink(std::make_shared<MemoryLogSink>()),
        sim(std::move(config), clock, sink) {}

  // Manual clock: moves simulated time forward and runs the simulation to it.
  void advance_s(double seconds) {
    clock->advance(std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9)));
    sim.advance();
  }

  // Scaled clock: lets `seconds` of wall time pass and runs the simulation to then.
  void pass_wall_s(double seconds) {
    real->advance(std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9)));
    sim.advance();
  }

  CreateOutcome create(const std::string& name, const std::string& device = "tpu-v4-8",
                       std::map<std::string, std::string> env = {},
                       const std::string& priority = "medium", bool overwrite = false) {
    CreateRequest req;
    req.workload = name;
    req.device_type = device;
    req.tpu_type_flag = device.rfind("tpu", 0) == 0;
    req.priority = priority;
    req.env = std::move(env);
    req.docker_image = "gcr.io/p/img:1";
    req.command = "python3 train.py";
    return sim.create("c", req, overwrite);
  }

  std::optional<WorkloadRow> row(const std::string& name, const std::string& cluster = "c") {
    const ListResult r = sim.list(cluster);
    for (const auto& row : r.rows) {
      if (row.name == name) return row;
    }
    return std::nullopt;
  }

  std::string state_of(const std::string& name) {
    const auto r = row(name);
    return r ? r->state : "ABSENT";
  }

  // Entries of one pod (by slice and worker), in write order.
  std::vector<nlohmann::json> entries_of(const std::string& workload, int slice, int worker) {
    std::vector<nlohmann::json> out;
    const std::string prefix =
        workload + "-slice-job-" + std::to_string(slice) + "-" + std::to_string(worker) + "-";
    for (const auto& e : sink->entries()) {
      const std::string pod = e["resource"]["labels"]["pod_name"];
      if (pod.rfind(prefix, 0) == 0 && pod.size() == prefix.size() + 5) out.push_back(e);
    }
    return out;
  }

  std::vector<std::string> texts_of(const std::string& workload, int slice, int worker) {
    std::vector<std::string> out;
    for (const auto& e : entries_of(workload, slice, worker)) out.push_back(e["textPayload"]);
    return out;
  }

  std::shared_ptr<falcon::testing::FakeClock> real;
  std::shared_ptr<SimClock> clock;
  std::shared_ptr<MemoryLogSink> sink;
  FleetSimulator sim;
};

}  // namespace falcon::fleet::testing
