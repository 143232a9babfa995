// End to end: `falcon serve` (the built binary) heals managed workloads on a time-scaled local
// fleet (60 simulated seconds per real second): a workload deleted by the platform, a cluster
// that stops answering, workers killed with 137 against an application's own exit 1, the CLI's
// `job submit --managed` and `job recoveries`, and two replicas on one PostgreSQL where one acts
// and killing it hands over within the lease. SVRT numbers are printed for the record.
#include <httplib.h>
#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <iostream>
#include <regex>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fleet/fleet_config.h"
#include "fleet/fleet_service.h"
#include "support/postgres_server.h"
#include "support/run_falcon.h"
#include "support/serve_process.h"
#include "support/temp_dir.h"

namespace falcon {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::ServeProcess;
using namespace std::chrono_literals;

constexpr const char* kFleetYaml = R"(
time_scale: 60
defaults: {duration_s: 36000, steps: 20}
workers_per_slice: {tpu-v4-64: 2}
clusters:
  c1: {project: p, zone: us-central2-b, cluster_id: c1, capacity: {tpu-v4-64: 4}}
  c2: {project: p, zone: us-central2-b, cluster_id: c2, capacity: {tpu-v4-64: 4}}
  c3: {project: p, zone: us-central2-b, cluster_id: c3, capacity: {tpu-v4-64: 4}}
)";

constexpr const char* kReposYaml = R"(clusters:
  c1:
    project: p
    zone: us-central2-b
    cluster_id: c1
    accelerator_types: [{{type: tpu-v4-64, device_class: tpu, priority: 3}}]
  c2:
    project: p
    zone: us-central2-b
    cluster_id: c2
    accelerator_types: [{{type: tpu-v4-64, device_class: tpu, priority: 2}}]
  c3:
    project: p
    zone: us-central2-b
    cluster_id: c3
    accelerator_types: [{{type: tpu-v4-64, device_class: tpu, priority: 1}}]
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
  logging_reads_per_minute: 6000
serve:
  probe_interval_s: 1
supervisor:
  interval_s: 0.3
  lease_ttl_s: 3
  unreachable_grace_s: 1
  readmit_grace_s: 1
  fencing_lease_s: 2
  backoff_s: 0.3
  backoff_max_s: 1
  stable_after_s: 1
)";

class SupervisorFleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fleet::FleetServiceOptions options;
    fleet_ = std::make_unique<fleet::FleetService>(
        fleet::parse_fleet_config(kFleetYaml, "supervisor-fleet.yaml"), options);
    fleet_->start();
    const auto token = dir_.write("token", fleet_->token() + "\n");
    repos_ = dir_.write("repos.yaml",
                        fmt::format(kReposYaml, fmt::arg("xpk", testing::built_binary("fleet-xpk")),
                                    fmt::arg("gcloud", testing::built_binary("fleet-gcloud")),
                                    fmt::arg("url", fleet_->url()),
                                    fmt::arg("state", (dir_.path() / "state").string()),
                                    fmt::arg("token", token.string())))
                 .string();
  }
  void TearDown() override { fleet_->stop(); }

  std::string sqlite_url() const { return "sqlite://" + (dir_.path() / "falcon.db").string(); }

  static json get(int port, const std::string& path) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    auto r = c.Get(path.c_str());
    if (!r || r->status != 200) return json();
    return json::parse(r->body, nullptr, false);
  }

  static json submit(int port, const std::string& name, const std::string& cluster,
                     const json& managed, const std::map<std::string, std::string>& env = {}) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120, 0);
    json spec = {{"name", name},
                 {"docker_image", "gcr.io/p/train:1"},
                 {"command", {"python3", "train.py"}},
                 {"accelerator_type", "tpu-v4-64"},
                 {"env", env}};
    auto r = c.Post("/v1/workloads",
                    json({{"cluster", cluster}, {"spec", spec}, {"managed", managed}}).dump(),
                    "application/json");
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, 201) << r->body;
    return json::parse(r->body, nullptr, false);
  }

  // Polls `probe` every 100 ms for up to `limit`; true once it holds.
  static bool eventually(const std::function<bool()>& probe, std::chrono::seconds limit = 90s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (probe()) return true;
      std::this_thread::sleep_for(100ms);
    }
    return probe();
  }

  static json managed(int port, const std::string& name) {
    const json all = get(port, "/v1/managed");
    if (!all.is_object()) return json();
    for (const json& m : all["managed"]) {
      if (m["name"] == name) return m;
    }
    return json();
  }

  static json recoveries(int port, const std::string& name) {
    const json all = get(port, "/v1/recoveries?workload=" + name);
    return all.is_object() ? all["recoveries"] : json::array();
  }

  // Workloads of the fleet whose name starts with `prefix` and that have not finished, as
  // (cluster, name).
  std::vector<std::pair<std::string, std::string>> live(const std::string& prefix) {
    std::vector<std::pair<std::string, std::string>> out;
    const json state = fleet_->simulator().state();
    for (const json& c : state["clusters"]) {
      for (const json& w : c["workloads"]) {
        const std::string name = w["name"];
        const std::string s = w["state"];
        if (name.rfind(prefix, 0) == 0 && s != "COMPLETED" && s != "FAILED") {
          out.emplace_back(c["name"], name);
        }
      }
    }
    return out;
  }

  json fleet_workload(const std::string& cluster, const std::string& name) {
    const json state = fleet_->simulator().state();
    for (const json& c : state["clusters"]) {
      if (c["name"] != cluster) continue;
      for (const json& w : c["workloads"]) {
        if (w["name"] == name) return w;
      }
    }
    return json();
  }

  static void print_svrt(const json& r) {
    std::cout << fmt::format(
                     "SVRT {} ({}): {}s = detection {} + decision {} + submit {} + "
                     "admission {} + stability {} [{} -> {}]",
                     r["id"].get<std::string>(), r["kind"].get<std::string>(), r["svrt_s"].dump(),
                     r["phases"]["detection_s"].dump(), r["phases"]["decision_s"].dump(),
                     r["phases"]["submit_s"].dump(), r["phases"]["admission_s"].dump(),
                     r["phases"]["stability_s"].dump(), r["from_cluster"].dump(),
                     r["to_cluster"].dump())
              << std::endl;
  }

  testing::TempDir dir_;
  std::unique_ptr<fleet::FleetService> fleet_;
  std::string repos_;
};

TEST_F(SupervisorFleetTest, AWorkloadDeletedByThePlatformIsRecoveredElsewhereAndMeasured) {
  ServeProcess serve(repos_, sqlite_url());
  // Through the CLI as a client: --managed, options, then the table of recoveries.
  const auto submitted = testing::run_falcon({"--config",
                                              repos_,
                                              "--server",
                                              serve.url(),
                                              "job",
                                              "submit",
                                              "--managed",
                                              "--max-recoveries",
                                              "2",
                                              "--stable-after",
                                              "1s",
                                              "--cluster",
                                              "c1",
                                              "--accelerator",
                                              "tpu-v4-64",
                                              "--name",
                                              "sv-del",
                                              "--image",
                                              "gcr.io/p/train:1",
                                              "--",
                                              "python3",
                                              "train.py"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.stdout_text << submitted.stderr_text;
  EXPECT_THAT(submitted.stdout_text, HasSubstr("managed"));
  ASSERT_TRUE(eventually([&] { return managed(serve.port(), "sv-del")["state"] == "running"; }))
      << managed(serve.port(), "sv-del").dump() << serve.log();

  fleet_->simulator().remove("c1", "sv-del");  // the platform deletes it
  ASSERT_TRUE(eventually([&] {
    const json r = recoveries(serve.port(), "sv-del");
    return r.size() == 1 && r[0]["outcome"] == "recovered";
  })) << recoveries(serve.port(), "sv-del").dump()
      << serve.log();
  const json r = recoveries(serve.port(), "sv-del")[0];
  print_svrt(r);
  EXPECT_EQ(r["kind"], "infrastructure");
  EXPECT_EQ(r["from_cluster"], "c1");
  const std::string to = r["to_cluster"];
  EXPECT_NE(to, "c1");  // excluded
  EXPECT_EQ(r["replacement"], "sv-del-r1");
  EXPECT_THAT(r["cause"].get<std::string>(), HasSubstr("no longer listed on cluster c1"));
  for (const char* t :
       {"t_violation", "t_detected", "t_decided", "t_submitted", "t_admitted", "t_recovered"}) {
    EXPECT_TRUE(r[t].is_string()) << t << ": " << r.dump();
  }
  EXPECT_GE(r["phases"]["stability_s"].get<double>(), 1.0);
  EXPECT_GE(r["svrt_s"].get<double>(), 1.0);
  EXPECT_LT(r["svrt_s"].get<double>(), 60.0);
  const json m = managed(serve.port(), "sv-del");
  EXPECT_EQ(m["incarnation"], "sv-del-r1");
  EXPECT_EQ(m["cluster"], to);
  EXPECT_EQ(m["recoveries"], 1);
  const json w = fleet_workload(to, "sv-del-r1");
  ASSERT_TRUE(w.is_object());
  EXPECT_EQ(w["env"]["FALCON_RECOVERY_COUNT"], "1");
  EXPECT_EQ(w["env"]["FALCON_PREVIOUS_WORKLOAD"], "sv-del");
  EXPECT_EQ(live("sv-del").size(), 1u);

  const auto table =
      testing::run_falcon({"--config", repos_, "--server", serve.url(), "job", "recoveries"});
  EXPECT_EQ(table.exit_code, 0) << table.stderr_text;
  EXPECT_THAT(table.stdout_text, HasSubstr("c1->" + to));
  EXPECT_THAT(table.stdout_text, HasSubstr("sv-del-r1"));
  EXPECT_THAT(table.stdout_text, HasSubstr("recovered"));
  const auto as_json = testing::run_falcon(
      {"--config", repos_, "--server", serve.url(), "job", "recoveries", "sv-del", "--json"});
  EXPECT_EQ(json::parse(as_json.stdout_text)["recoveries"][0]["replacement"], "sv-del-r1");

  httplib::Client c("127.0.0.1", serve.port());
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body, HasSubstr("\nfalcon_supervisor_leader 1\n"));
  EXPECT_THAT(metrics->body, HasSubstr("falcon_recoveries_total{kind=\"infrastructure\","
                                       "outcome=\"recovered\"} 1"));
  EXPECT_THAT(metrics->body, HasSubstr("falcon_recovery_phase_seconds_count{phase=\"svrt\"} 1"));
}

TEST_F(SupervisorFleetTest, WorkersKilledWith137AreRecoveredButAnExitOneIsNot) {
  ServeProcess serve(repos_, sqlite_url());
  // 120 simulated seconds: 2 s of real time, then FAILED with EXIT_CODE=137 (a node failure).
  // The replacement keeps the spec's env, so it is killed too: with one recovery allowed, the
  // second incident gives up.
  submit(serve.port(), "sv-kill", "c1", {{"max_recoveries", 1}, {"stable_after_s", 30}},
         {{"FLEET_EXIT_CODE", "137"}, {"FLEET_DURATION_S", "120"}});
  submit(serve.port(), "sv-app", "c1", {{"max_recoveries", 3}},
         {{"FLEET_EXIT_CODE", "1"}, {"FLEET_DURATION_S", "120"}});

  ASSERT_TRUE(eventually([&] { return managed(serve.port(), "sv-app")["state"] == "failed"; }))
      << managed(serve.port(), "sv-app").dump() << serve.log();
  const json app = recoveries(serve.port(), "sv-app");
  ASSERT_EQ(app.size(), 1u) << app.dump(1) << serve.log();
  EXPECT_EQ(app[0]["kind"], "application");
  EXPECT_EQ(app[0]["outcome"], "not_recovered");
  EXPECT_THAT(app[0]["cause"].get<std::string>(), HasSubstr("EXIT_CODE=1"));
  EXPECT_TRUE(app[0]["replacement"].is_null());

  ASSERT_TRUE(eventually([&] { return managed(serve.port(), "sv-kill")["state"] == "gave_up"; }))
      << managed(serve.port(), "sv-kill").dump() << serve.log();
  const json kill = recoveries(serve.port(), "sv-kill");
  ASSERT_EQ(kill.size(), 2u) << kill.dump();
  // Newest first: the replacement's incident, then the first one.
  EXPECT_EQ(kill[1]["kind"], "infrastructure");
  EXPECT_THAT(kill[1]["cause"].get<std::string>(), HasSubstr("EXIT_CODE=137"));
  EXPECT_EQ(kill[1]["from_cluster"], "c1");
  EXPECT_NE(kill[1]["to_cluster"], "c1");
  EXPECT_EQ(kill[1]["replacement"], "sv-kill-r1");
  EXPECT_EQ(kill[1]["outcome"], "failed_again");
  EXPECT_EQ(kill[0]["outcome"], "gave_up");
  EXPECT_THAT(kill[0]["cause"].get<std::string>(), HasSubstr("max_recoveries (1) reached"));
  // The killed incarnation was deleted before its replacement was submitted.
  EXPECT_FALSE(fleet_workload("c1", "sv-kill").is_object());
  EXPECT_EQ(fleet_workload(kill[1]["to_cluster"], "sv-kill-r1")["env"]["FALCON_PREVIOUS_WORKLOAD"],
            "sv-kill");
}

TEST_F(SupervisorFleetTest, AClusterThatStopsAnsweringIsLeftAfterTheGrace) {
  ServeProcess serve(repos_, sqlite_url());
  submit(serve.port(), "sv-down", "c1", {{"stable_after_s", 1}});
  ASSERT_TRUE(eventually([&] { return managed(serve.port(), "sv-down")["state"] == "running"; }))
      << serve.log();
  // c1's Kueue goes away: its workload list fails (kubectl: no resource type "workloads").
  fleet_->simulator().set_kueue("c1", false);
  ASSERT_TRUE(eventually([&] {
    const json r = recoveries(serve.port(), "sv-down");
    return r.size() == 1 && r[0]["outcome"] == "recovered";
  })) << recoveries(serve.port(), "sv-down").dump()
      << serve.log();
  const json r = recoveries(serve.port(), "sv-down")[0];
  print_svrt(r);
  EXPECT_THAT(r["cause"].get<std::string>(), HasSubstr("cluster c1 unreachable"));
  EXPECT_GE(r["phases"]["detection_s"].get<double>(), 1.0);  // unreachable_grace_s
  EXPECT_NE(r["to_cluster"], "c1");
}

TEST_F(SupervisorFleetTest, TwoReplicasOnOnePostgresOneActsAndKillingItHandsOver) {
  if (testing::postgres_tests_opted_out()) GTEST_SKIP() << "FALCON_SKIP_POSTGRES_TESTS=1";
  const std::string url = testing::shared_postgres_server().fresh_database();
  auto a = std::make_unique<ServeProcess>(repos_, url);
  auto b = std::make_unique<ServeProcess>(repos_, url);
  auto leader_of = [](const ServeProcess& s) {
    httplib::Client c("127.0.0.1", s.port());
    auto r = c.Get("/metrics");
    return r && r->body.find("\nfalcon_supervisor_leader 1\n") != std::string::npos;
  };
  ASSERT_TRUE(eventually([&] { return leader_of(*a) != leader_of(*b); }, 30s))
      << leader_of(*a) << leader_of(*b) << "\n"
      << a->log() << "\n"
      << b->log();
  // Over a while, never both.
  for (int i = 0; i < 20; ++i) {
    EXPECT_FALSE(leader_of(*a) && leader_of(*b));
    std::this_thread::sleep_for(100ms);
  }
  std::unique_ptr<ServeProcess>& leader = leader_of(*a) ? a : b;
  std::unique_ptr<ServeProcess>& other = leader_of(*a) ? b : a;
  submit(other->port(), "sv-ha", "c1", {{"stable_after_s", 1}});
  ASSERT_TRUE(eventually([&] { return managed(other->port(), "sv-ha")["state"] == "running"; }));

  leader->signal(SIGKILL);
  leader->wait_exit();
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] { return leader_of(*other); }, 30s)) << other->log();
  const double handover =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::cout << fmt::format("hand-over after SIGKILL of the leader: {:.2f}s (lease_ttl_s 3)",
                           handover)
            << std::endl;
  EXPECT_LT(handover, 3.0 + 2.0);  // within the lease (+ one pass and the polling)

  fleet_->simulator().remove("c1", "sv-ha");
  ASSERT_TRUE(eventually([&] {
    const json r = recoveries(other->port(), "sv-ha");
    return r.size() == 1 && r[0]["outcome"] == "recovered";
  })) << other->log();
  print_svrt(recoveries(other->port(), "sv-ha")[0]);
  EXPECT_EQ(live("sv-ha").size(), 1u);
  EXPECT_FALSE(fleet_workload("c3", "sv-ha-r2").is_object());
  EXPECT_FALSE(fleet_workload("c2", "sv-ha-r2").is_object());
}

}  // namespace
}  // namespace falcon
