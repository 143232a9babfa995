// End to end: `falcon serve` (the built binary) as MultiKueue's external dispatcher for the local
// fleet's manager cluster (tools/fleet/manager.h), time-scaled (60 simulated seconds per real
// second). Workloads are created on the manager with the real kubectl, as a user would; the
// manager copies each one only to the worker falcon nominates. Checked: one remote copy per
// Workload, late binding (a Workload no worker has room for waits on the manager and goes to
// the first room that appears), the decision behind each nomination, a manager that stops
// answering (not ready, no crash, ready again once it answers), and a falcon that was down
// (Workloads wait; after a restart nothing is nominated twice).
#include <httplib.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "falcon/command_runner.h"
#include "fleet/fleet_config.h"
#include "fleet/fleet_service.h"
#include "support/run_falcon.h"
#include "support/serve_process.h"
#include "support/temp_dir.h"

namespace falcon {
namespace {

using nlohmann::json;
using testing::ServeProcess;
using namespace std::chrono_literals;

constexpr const char* kKubectl = "/usr/bin/kubectl";

// The manager `mk` over two workers with one v4-8 slot each.
constexpr const char* kFleetYaml = R"(
time_scale: 60
defaults: {duration_s: 36000, steps: 20}
clusters:
  mk: {project: p, zone: us-central2-b, cluster_id: mk, capacity: {}}
  w1: {project: p, zone: us-central2-b, cluster_id: w1, capacity: {tpu-v4-8: 1}}
  w2: {project: p, zone: us-central2-b, cluster_id: w2, capacity: {tpu-v4-8: 1}}
manager: {cluster: mk, workers: [w1, w2], dispatcher: falcon.dev/dispatcher}
)";

// w1 first by the spec's priority order (the lowest number). The kube probe backend reads each
// worker's ClusterQueue: capacity, so that falcon knows when a worker has no room; the registry
// names the workers as the manager does.
constexpr const char* kReposYaml = R"(clusters:
  w1:
    project: p
    zone: us-central2-b
    cluster_id: w1
    accelerator_types: [{{type: tpu-v4-8, device_class: tpu, priority: 1}}]
  w2:
    project: p
    zone: us-central2-b
    cluster_id: w2
    accelerator_types: [{{type: tpu-v4-8, device_class: tpu, priority: 2}}]
xpk:
  binary: {xpk}
  gcloud_binary: {gcloud}
  env: {{FALCON_FLEET_URL: "{url}"}}
  state_dir: {state}
  command_timeout_s: 60
gcp:
  logging_endpoint: {url}
  storage_endpoint: {url}
  access_token_file: {token}
serve:
  probe_interval_s: 1
probe:
  backend: kube
dispatch:
  manager_kubeconfig: {kubeconfig}
  retry_s: 0.5
  watch_timeout_s: 5
)";

// A Workload as a user writes it for `kubectl create -f`: one v4-8 pod that runs `duration_s`
// simulated seconds.
std::string workload_yaml(const std::string& name, int duration_s) {
  return fmt::format(R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: {}
  labels:
    falcon.dev/accelerator-type: v4-8
spec:
  queueName: user-queue
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: jax-tpu
          image: python:3.10
          command: [python3, train.py]
          env:
          - {{name: FLEET_DURATION_S, value: "{}"}}
)",
                     name, duration_s);
}

class DispatchFleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kKubectl)) GTEST_SKIP() << "no kubectl on this machine";
    fleet_ = std::make_unique<fleet::FleetService>(
        fleet::parse_fleet_config(kFleetYaml, "dispatch-fleet.yaml"), fleet::FleetServiceOptions{});
    fleet_->start();
    // The manager's kubeconfig, as a user gets it: get-credentials (an exec plugin user).
    CommandSpec spec;
    spec.argv = {testing::built_binary("fleet-gcloud"),
                 "container",
                 "clusters",
                 "get-credentials",
                 "mk",
                 "--project=p",
                 "--zone=us-central2-b"};
    spec.env = {{"FALCON_FLEET_URL", fleet_->url()}, {"KUBECONFIG", kubeconfig()}};
    const CommandResult got = runner_->run(spec);
    ASSERT_TRUE(got.ok()) << got.stderr_text;
    const auto token = dir_.write("token", fleet_->token() + "\n");
    repos_ = dir_.write("repos.yaml",
                        fmt::format(kReposYaml, fmt::arg("xpk", testing::built_binary("fleet-xpk")),
                                    fmt::arg("gcloud", testing::built_binary("fleet-gcloud")),
                                    fmt::arg("url", fleet_->url()),
                                    fmt::arg("state", (dir_.path() / "state").string()),
                                    fmt::arg("token", token.string()),
                                    fmt::arg("kubeconfig", kubeconfig())))
                 .string();
    // No `falcon cluster warm-up`: serve's kube probes fetch each worker's credentials
    // themselves the first time.
  }
  void TearDown() override {
    if (fleet_) fleet_->stop();
  }

  std::string kubeconfig() const { return (dir_.path() / "kube" / "config").string(); }
  std::string sqlite_url() const { return "sqlite://" + (dir_.path() / "falcon.db").string(); }

  CommandResult kubectl(std::vector<std::string> args) {
    CommandSpec spec;
    spec.argv = {kKubectl, "--kubeconfig", kubeconfig(), "--cache-dir",
                 (dir_.path() / "kube-cache").string()};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    return runner_->run(spec);
  }

  void create(const std::string& name, int duration_s) {
    const std::string file = dir_.write(name + ".yaml", workload_yaml(name, duration_s)).string();
    const CommandResult r = kubectl({"create", "-f", file});
    ASSERT_TRUE(r.ok()) << r.stderr_text;
  }

  // The manager's record of a Workload (tools/fleet/manager.h state), or null.
  json manager_workload(const std::string& name) {
    const json state = fleet_->simulator().state();
    for (const json& w : state["manager"]["workloads"]) {
      if (w["name"] == name) return w;
    }
    return json();
  }

  // The Workload as kubectl reads it from the manager.
  json kubectl_workload(const std::string& name) {
    const CommandResult r = kubectl({"get", "workload", name, "-n", "default", "-o", "json"});
    EXPECT_TRUE(r.ok()) << r.stderr_text;
    return r.ok() ? json::parse(r.stdout_text, nullptr, false) : json();
  }

  std::string admitted_on(const std::string& name) {
    const json w = manager_workload(name);
    return w.is_object() && w["cluster"].is_string() ? w["cluster"].get<std::string>() : "";
  }

  static std::pair<int, json> get(int port, const std::string& path) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    auto r = c.Get(path.c_str());
    if (!r) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }

  // True once `falcon serve` on `port` has a successful probe of both w1 and w2.
  static bool both_workers_probed(int port) {
    const auto [status, body] = get(port, "/v1/clusters");
    if (status != 200 || !body.contains("clusters")) return false;
    int reachable = 0;
    for (const json& c : body["clusters"]) {
      const json probe = c.value("probe", json::object());
      if (probe.is_object() && probe.contains("result") &&
          probe["result"].value("reachable", false)) {
        ++reachable;
      }
    }
    return reachable == 2;
  }

  // Polls `probe` every 50 ms for up to `limit`; true once it holds.
  static bool eventually(const std::function<bool()>& probe, std::chrono::seconds limit = 60s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (probe()) return true;
      std::this_thread::sleep_for(50ms);
    }
    return probe();
  }

  testing::TempDir dir_;
  std::shared_ptr<CommandRunner> runner_ = make_posix_command_runner();
  std::unique_ptr<fleet::FleetService> fleet_;
  std::string repos_;
};

TEST_F(DispatchFleetTest, OneCopyPerWorkloadAndAWorkloadWithoutRoomWaitsForTheFirstRoom) {
  ServeProcess serve(repos_, sqlite_url());
  serve.wait_ready();
  // Both workers probed: a first probe fetches credentials, which on a loaded machine can take
  // longer than one worker's, and the order below is among workers falcon can see.
  ASSERT_TRUE(eventually([&] { return both_workers_probed(serve.port()); }))
      << get(serve.port(), "/v1/clusters").second.dump();

  // The first goes to w1 (the spec's order among workers with room), the second to w2.
  create("long-a", 36000);
  ASSERT_TRUE(eventually([&] { return admitted_on("long-a") == "w1"; }))
      << manager_workload("long-a").dump() << get(serve.port(), "/v1/dispatch").second.dump();
  create("short-b", 600);  // 10 s of real time: room enough to see late-c held
  ASSERT_TRUE(eventually([&] { return admitted_on("short-b") == "w2"; }))
      << manager_workload("short-b").dump() << serve.log();

  // No worker has room: the third waits on the manager, nominated nowhere, copied nowhere.
  create("late-c", 36000);
  ASSERT_TRUE(eventually([&] {
    const auto [status, d] = get(serve.port(), "/v1/dispatch");
    return status == 200 && d["held"].contains("default/late-c");
  })) << get(serve.port(), "/v1/dispatch").second.dump();
  {
    const json w = manager_workload("late-c");
    EXPECT_TRUE(w["nominated"].empty()) << w.dump();
    EXPECT_EQ(w["remote_created"], 0) << w.dump();
  }

  // short-b finishes on w2: late-c takes that room.
  ASSERT_TRUE(eventually([&] { return admitted_on("late-c") == "w2"; }, 90s))
      << manager_workload("late-c").dump() << get(serve.port(), "/v1/dispatch").second.dump()
      << serve.log();
  EXPECT_TRUE(manager_workload("short-b")["outcome"] == "Succeeded")
      << manager_workload("short-b").dump();

  // One remote object each: the nominated worker's copy.
  for (const char* name : {"long-a", "short-b", "late-c"}) {
    EXPECT_EQ(manager_workload(name)["remote_created"], 1) << manager_workload(name).dump();
  }
  // kubectl sees what Kueue would show: the worker in clusterName, the check Ready.
  const json late = kubectl_workload("late-c");
  EXPECT_EQ(late["status"]["clusterName"], "w2") << late.dump();

  // Each nomination is recorded with the decision behind it, which explains itself. The
  // admissions reach falcon through its watch of the manager.
  json d;
  EXPECT_TRUE(eventually(
      [&] {
        d = get(serve.port(), "/v1/dispatch").second;
        return d.is_object() && d["counts"]["admitted"] == 3;
      },
      3s))
      << d.dump();
  EXPECT_EQ(d["counts"]["nominations"], 3) << d.dump();
  EXPECT_EQ(d["counts"]["admitted"], 3) << d.dump();
  EXPECT_EQ(d["counts"]["failures"], 0) << d.dump();
  const std::string uid = manager_workload("late-c")["uid"];
  const auto [s2, mine] = get(serve.port(), "/v1/dispatch?uid=" + uid);
  ASSERT_EQ(s2, 200);
  ASSERT_EQ(mine["nominations"].size(), 1u) << mine.dump();
  const json& n = mine["nominations"][0];
  EXPECT_EQ(n["workload"], "late-c");
  EXPECT_EQ(n["clusters"], json::array({"w2"}));
  const auto [s3, decision] = get(serve.port(), "/v1/selections/" + n["selection_id"].dump());
  EXPECT_EQ(s3, 200) << decision.dump();
  EXPECT_EQ(decision["selected_cluster"], "w2") << decision.dump();
}

TEST_F(DispatchFleetTest, AManagerThatStopsAnsweringMakesFalconNotReadyUntilItAnswersAgain) {
  ServeProcess serve(repos_, sqlite_url());
  serve.wait_ready();
  fleet_->simulator().kill_cluster("mk", fleet::KillMode::kKeep);
  json body;
  ASSERT_TRUE(eventually([&] {
    const auto [status, b] = get(serve.port(), "/readyz");
    body = b;
    return status == 503;
  })) << serve.log();
  EXPECT_NE(body.dump().find("dispatch: "), std::string::npos) << body.dump();
  // Still serving, still deciding for direct callers.
  EXPECT_EQ(get(serve.port(), "/healthz").first, 200);

  fleet_->simulator().revive_cluster("mk");
  serve.wait_ready(60s);
  // And dispatching again.
  create("after-outage", 36000);
  EXPECT_TRUE(eventually([&] { return admitted_on("after-outage") == "w1"; }))
      << manager_workload("after-outage").dump() << serve.log();
}

TEST_F(DispatchFleetTest, WhileFalconIsDownWorkloadsWaitAndARestartNominatesNothingTwice) {
  create("early", 36000);
  // Nothing nominates it: no copy anywhere.
  EXPECT_TRUE(manager_workload("early")["nominated"].empty());
  EXPECT_EQ(manager_workload("early")["remote_created"], 0);
  // `early` waits from before falcon starts, so it is decided before both workers' first probes
  // are sure to be in (on a loaded machine one can take longer): w1 by the spec's order, or w2
  // when w1's probe is not in yet. `second` then goes to the other.
  std::string first;
  {
    ServeProcess serve(repos_, sqlite_url());
    serve.wait_ready();
    ASSERT_TRUE(eventually([&] {
      first = admitted_on("early");
      return !first.empty();
    })) << manager_workload("early").dump()
        << serve.log();
  }  // SIGKILL
  create("second", 36000);
  ServeProcess again(repos_, sqlite_url());
  again.wait_ready();
  const std::string other = first == "w1" ? "w2" : "w1";
  ASSERT_TRUE(eventually([&] { return admitted_on("second") == other; }))
      << manager_workload("second").dump() << again.log();
  const std::string uid = manager_workload("early")["uid"];
  const auto [status, mine] = get(again.port(), "/v1/dispatch?uid=" + uid);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(mine["nominations"].size(), 1u) << mine.dump();
  EXPECT_EQ(manager_workload("early")["remote_created"], 1) << manager_workload("early").dump();
  EXPECT_EQ(manager_workload("second")["remote_created"], 1) << manager_workload("second").dump();
}

}  // namespace
}  // namespace falcon
