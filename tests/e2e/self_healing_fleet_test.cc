// End to end: `falcon serve`'s supervisor (the built binary) against the local fleet, one test
// per fault kind of the fleet's control API: a node whose worker the platform kills (137), a
// preemption that is not readmitted, a killed cluster (recovered once fenced, the old incarnation
// cancelled when the cluster answers again), a partition longer than the fencing lease (the
// documented overlap), flaky creates on the way to a recovery, and an
// application failure that must not be recovered. The fleet is in-process on the wall clock (runs
// last a day unless told otherwise); the supervisor's intervals are a fraction of a second.
// Every check of "never two live copies" reads the fleet's own state.
#include <httplib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fleet/fleet_config.h"
#include "fleet/fleet_service.h"
#include "support/run_falcon.h"
#include "support/serve_process.h"
#include "support/temp_dir.h"

namespace falcon {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::ServeProcess;

constexpr const char* kFleetYaml = R"(
time_scale: 1
defaults: {duration_s: 100000, steps: 20}
clusters:
  east:
    project: proj
    zone: us-central2-b
    cluster_id: east
    capacity: {tpu-v4-8: 4}
  west:
    project: proj
    zone: us-central2-b
    cluster_id: west
    capacity: {tpu-v4-8: 4}
)";

constexpr const char* kReposYaml = R"(clusters:
  east:
    project: proj
    zone: us-central2-b
    cluster_id: east
    accelerator_types: [{{type: tpu-v4-8, device_class: tpu, priority: 1}}]
    probe_timeout_s: 20
  west:
    project: proj
    zone: us-central2-b
    cluster_id: west
    accelerator_types: [{{type: tpu-v4-8, device_class: tpu, priority: 2}}]
    probe_timeout_s: 20
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
  max_probe_age_s: 2
supervisor:
  interval_s: 0.2
  lease_ttl_s: 5
  unreachable_grace_s: 0.5
  readmit_grace_s: 0.6
  fencing_lease_s: 1.5
  backoff_s: 0.1
  backoff_max_s: 0.5
  stable_after_s: 0.5
)";

class SelfHealingFleetTest : public ::testing::Test {
 protected:
  SelfHealingFleetTest() {
    fleet::FleetServiceOptions options;
    options.time_scale = 1;  // the wall clock: log times (EXIT_CODE lines) are real
    fleet_ = std::make_unique<fleet::FleetService>(
        fleet::parse_fleet_config(kFleetYaml, "chaos-fleet.yaml"), options);
    fleet_->start();
    const auto token = dir_.write("token", fleet_->token() + "\n");
    repos_ = dir_.write("repos.yaml",
                        fmt::format(kReposYaml, fmt::arg("xpk", testing::built_binary("fleet-xpk")),
                                    fmt::arg("gcloud", testing::built_binary("fleet-gcloud")),
                                    fmt::arg("url", fleet_->url()),
                                    fmt::arg("state", (dir_.path() / "xpk").string()),
                                    fmt::arg("token", token.string())))
                 .string();
    serve_ =
        std::make_unique<ServeProcess>(repos_, "sqlite://" + (dir_.path() / "falcon.db").string());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", serve_->port());
    client_->set_read_timeout(120, 0);
  }
  ~SelfHealingFleetTest() override { fleet_->stop(); }

  fleet::FleetSimulator& sim() { return fleet_->simulator(); }

  json get(const std::string& path) {
    auto r = client_->Get(path.c_str());
    if (!r) return json();
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
    return json::parse(r->body, nullptr, false);
  }

  void submit(const std::string& name, const std::string& cluster,
              const std::map<std::string, std::string>& env = {}) {
    json spec = {{"name", name},
                 {"docker_image", "gcr.io/proj/trainer:1"},
                 {"command", {"python3", "train.py"}},
                 {"accelerator_type", "tpu-v4-8"},
                 {"env", env}};
    const json body = {{"cluster", cluster},
                       {"spec", spec},
                       {"managed", {{"max_recoveries", 3}, {"recover_on_failure", false}}}};
    auto r = client_->Post("/v1/workloads", body.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 201) << r->body;
  }

  // Live incarnations of `base` (QUEUED or RUNNING) across the fleet, as "cluster/name".
  std::vector<std::string> live(const std::string& base) {
    std::vector<std::string> out;
    const json state = sim().state();
    for (const auto& c : state["clusters"]) {
      for (const auto& w : c["workloads"]) {
        const std::string name = w["name"];
        if ((name == base || name.rfind(base + "-r", 0) == 0) &&
            (w["state"] == "QUEUED" || w["state"] == "RUNNING")) {
          out.push_back(c["name"].get<std::string>() + "/" + name);
        }
      }
    }
    return out;
  }

  json managed(const std::string& name) {
    const json all = get("/v1/managed");
    for (const auto& m : all["managed"]) {
      if (m["name"] == name) return m;
    }
    return json();
  }

  // Polls (every 50 ms, up to 90 s) until `done`, checking after each poll that `base` never
  // has two live incarnations in the fleet (`allow_two`: the partition test's overlap).
  bool until(const std::string& base, const std::function<bool()>& done, bool allow_two = false) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    while (std::chrono::steady_clock::now() < deadline) {
      const auto copies = live(base);
      if (!allow_two) {
        EXPECT_LE(copies.size(), 1u) << ::testing::PrintToString(copies);
        if (copies.size() > 1) return false;
      }
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "timed out; managed: " << managed(base).dump()
                  << "\nrecoveries: " << get("/v1/recoveries").dump() << "\nserve log tail: "
                  << serve_->log().substr(serve_->log().size() > 4000 ? serve_->log().size() - 4000
                                                                      : 0);
    return false;
  }

  bool running_as(const std::string& base, const std::string& incarnation) {
    const json m = managed(base);
    return m.is_object() && m["incarnation"] == incarnation && m["state"] == "running";
  }

  json recovery_of(const std::string& base) {
    const json r = get("/v1/recoveries?workload=" + base);
    return r["recoveries"].empty() ? json() : r["recoveries"][0];
  }

  // Whether `name` on `cluster` was admitted in an earlier whole second than the fleet's now.
  // xpk (v1.9+, as the fleet prints it) shows the Kueue condition with the greatest
  // lastTransitionTime in whole seconds, the first of equals: a run that fails in the second it
  // was admitted in keeps showing "Admitted" with its VMs, i.e. RUNNING, and nothing can tell
  // that it failed. A node failure injected that early is never seen; in real time it is rare,
  // at this test's time scale (1) and 0.2 s passes it was the usual case.
  bool admitted_before_this_second(const std::string& cluster, const std::string& name) {
    const json state = sim().state();
    const std::int64_t second = 1'000'000'000;
    for (const auto& c : state["clusters"]) {
      if (c["name"] != cluster) continue;
      for (const auto& w : c["workloads"]) {
        if (w["name"] != name || !w["started_ns"].is_number()) continue;
        const std::int64_t started = w["started_ns"];
        return started >= 0 && started / second < state["now_ns"].get<std::int64_t>() / second;
      }
    }
    return false;
  }

  std::string env_of(const std::string& cluster, const std::string& name, const std::string& key) {
    const json state = sim().state();
    for (const auto& c : state["clusters"]) {
      if (c["name"] != cluster) continue;
      for (const auto& w : c["workloads"]) {
        if (w["name"] == name) return w["env"].value(key, std::string("<unset>"));
      }
    }
    return "<absent>";
  }

  testing::TempDir dir_;
  std::unique_ptr<fleet::FleetService> fleet_;
  std::string repos_;
  std::unique_ptr<ServeProcess> serve_;
  std::unique_ptr<httplib::Client> client_;
};

// The node is failed once the run is past the second it was admitted in (see
// admitted_before_this_second: before that, xpk's list would show the failed run as RUNNING;
// this test timed out in about a third of its runs that way).
TEST_F(SelfHealingFleetTest, NodeFailureIsRecoveredOnTheOtherClusterWithItsEnvironment) {
  submit("train", "east");
  ASSERT_TRUE(until("train", [&] { return running_as("train", "train"); }));
  ASSERT_TRUE(until("train", [&] { return admitted_before_this_second("east", "train"); }));
  fleet::NodeFailRequest fail;
  fail.cluster = "east";
  fail.workload = "train";
  sim().fail_node(fail);

  ASSERT_TRUE(until("train", [&] {
    const json r = recovery_of("train");
    return running_as("train", "train-r1") && r.is_object() && r["outcome"] == "recovered";
  }));
  const json r = recovery_of("train");
  EXPECT_EQ(r["kind"], "infrastructure");
  EXPECT_EQ(r["from_cluster"], "east");
  EXPECT_EQ(r["to_cluster"], "west");
  EXPECT_EQ(r["replacement"], "train-r1");
  EXPECT_GT(r["svrt_s"].get<double>(), 0.5);  // at least the stability window
  for (const char* t :
       {"t_violation", "t_detected", "t_decided", "t_submitted", "t_admitted", "t_recovered"}) {
    EXPECT_TRUE(r[t].is_string()) << t << ": " << r.dump();
  }
  EXPECT_EQ(env_of("west", "train-r1", "FALCON_RECOVERY_COUNT"), "1");
  EXPECT_EQ(env_of("west", "train-r1", "FALCON_PREVIOUS_WORKLOAD"), "train");
  EXPECT_EQ(live("train"), std::vector<std::string>{"west/train-r1"});
}

TEST_F(SelfHealingFleetTest, PreemptionNotReadmittedIsRecoveredAndTheOldOneCancelled) {
  submit("pre", "east");
  ASSERT_TRUE(until("pre", [&] { return running_as("pre", "pre"); }));
  fleet::EvictRequest evict;
  evict.cluster = "east";
  evict.workload = "pre";
  evict.readmit = false;
  sim().evict(evict);

  ASSERT_TRUE(until("pre", [&] { return running_as("pre", "pre-r1"); }));
  EXPECT_EQ(env_of("east", "pre", "FALCON_RECOVERY_COUNT"), "<absent>");  // cancelled
  EXPECT_EQ(recovery_of("pre")["from_cluster"], "east");
}

TEST_F(SelfHealingFleetTest, PreemptionReadmittedWithinTheGraceIsLeftAlone) {
  submit("bounce", "east");
  ASSERT_TRUE(until("bounce", [&] { return running_as("bounce", "bounce"); }));
  fleet::EvictRequest evict;
  evict.cluster = "east";
  evict.workload = "bounce";
  evict.readmit = true;
  sim().evict(evict);  // readmitted at once: Kueue requeued it and it had room
  // Several supervisor passes and more than the readmission grace.
  const auto until_time = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  ASSERT_TRUE(until("bounce", [&] { return std::chrono::steady_clock::now() > until_time; }));
  EXPECT_EQ(live("bounce"), std::vector<std::string>{"east/bounce"});
  EXPECT_TRUE(get("/v1/recoveries?workload=bounce")["recoveries"].empty());
}

TEST_F(SelfHealingFleetTest, KilledClusterIsRecoveredOnceFencedAndCleanedUpWhenItAnswers) {
  submit("dead", "east");
  ASSERT_TRUE(until("dead", [&] { return running_as("dead", "dead"); }));
  sim().kill_cluster("east", fleet::KillMode::kFail);

  ASSERT_TRUE(until("dead", [&] { return running_as("dead", "dead-r1"); }));
  const json r = recovery_of("dead");
  EXPECT_EQ(r["from_cluster"], "east");
  EXPECT_EQ(r["to_cluster"], "west");
  // Detection waited for the grace; the decision for the fencing lease.
  ASSERT_TRUE(r["phases"]["detection_s"].is_number()) << r.dump();
  EXPECT_GE(r["phases"]["detection_s"].get<double>() + r["phases"]["decision_s"].get<double>(),
            1.5 - 0.3);

  sim().revive_cluster("east");  // the fenced old incarnation is cancelled once it answers
  ASSERT_TRUE(until("dead", [&] { return env_of("east", "dead", "X") == "<absent>"; }));
}

// The fencing trade-off (docs/self-healing.md, Guarantees): a partition (only the control plane
// unreachable, the old incarnation running on unseen) longer than fencing_lease_s leaves two
// copies until the cluster answers again; then the old one is cancelled.
TEST_F(SelfHealingFleetTest, PartitionLongerThanTheFencingLeaseOverlapsUntilItHeals) {
  submit("part", "east");
  ASSERT_TRUE(until("part", [&] { return running_as("part", "part"); }));
  sim().kill_cluster("east", fleet::KillMode::kKeep);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (!running_as("part", "part-r1") && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(running_as("part", "part-r1")) << managed("part").dump();
  EXPECT_EQ(live("part"), (std::vector<std::string>{"east/part", "west/part-r1"}));
  sim().revive_cluster("east");
  ASSERT_TRUE(until(
      "part", [&] { return live("part").size() == 1; }, true));
  EXPECT_EQ(live("part"), std::vector<std::string>{"west/part-r1"});
}

// West, the only cluster left for the replacement, fails its next two creates: no other cluster
// to try, so the supervisor backs off and tries west again, until the third create.
TEST_F(SelfHealingFleetTest, FlakyCreatesAreRetriedOnTheWayToARecovery) {
  submit("flaky", "east");
  ASSERT_TRUE(until("flaky", [&] { return running_as("flaky", "flaky"); }));
  ASSERT_TRUE(until("flaky", [&] { return admitted_before_this_second("east", "flaky"); }));
  sim().fail_next_creates("west", 2);  // where the replacement goes (east is excluded)
  fleet::NodeFailRequest fail;
  fail.cluster = "east";
  fail.workload = "flaky";
  fail.exit_code = 143;
  sim().fail_node(fail);

  ASSERT_TRUE(until("flaky", [&] { return running_as("flaky", "flaky-r1"); }));
  const json r = recovery_of("flaky");
  EXPECT_EQ(r["attempts"].get<int>(), 3) << r.dump();
  EXPECT_EQ(r["to_cluster"], "west") << r.dump();
  const json state = sim().state();
  for (const auto& c : state["clusters"]) EXPECT_EQ(c["failing_creates"], 0) << c["name"];
}

TEST_F(SelfHealingFleetTest, ApplicationFailureIsNotRecovered) {
  submit("crash", "east", {{"FLEET_EXIT_CODE", "3"}, {"FLEET_DURATION_S", "4"}});
  ASSERT_TRUE(until("crash", [&] { return running_as("crash", "crash"); }));
  ASSERT_TRUE(until("crash", [&] { return managed("crash")["state"] == "failed"; }));
  const json r = recovery_of("crash");
  EXPECT_EQ(r["kind"], "application");
  EXPECT_EQ(r["replacement"], nullptr);
  EXPECT_TRUE(live("crash").empty());
  EXPECT_EQ(env_of("west", "crash-r1", "X"), "<absent>");
}

}  // namespace
}  // namespace falcon
