// The fleet's MultiKueue manager on a manual clock: what each dispatcher nominates and when,
// the copies made and deleted on the workers (counted), the first admission winning at its
// simulated instant, Finished mirrored, the external dispatcher's PATCH (its precondition and
// Kueue's rules), a killed worker's MultiKueueCluster, the Workloads a create accepts, and the
// event log watches read (replay from a resourceVersion, 410 when it is too old).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "fleet/manager.h"
#include "sim_fixture.h"

namespace falcon::fleet {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::SimHarness;

constexpr std::int64_t kSecond = 1'000'000'000;

// A manager `mk` (no capacity) and seven workers w1..w7 with one tpu-v4-8 slot each, listed in
// the MultiKueueConfig in the order w5 w1 w4 w2 w6 w3 w7. `hogs`: each worker's slot is held by
// a run that ends 100 s x its number (w1 at 100 s, w2 at 200 s, ...); otherwise free. 100 s
// runs by default.
FleetConfig fleet(const std::string& manager_extra = "", bool hogs = true) {
  std::string yaml = R"(
time_scale: 0
defaults: {duration_s: 100, steps: 5}
clusters:
  mk: {project: p, zone: us-central2-b, cluster_id: mk, capacity: {}}
)";
  for (int i = 1; i <= 7; ++i) {
    yaml += fmt::format(
        "  w{0}:\n    project: p\n    zone: us-central2-b\n    cluster_id: w{0}\n"
        "    capacity: {{tpu-v4-8: 1}}\n",
        i);
    if (hogs) {
      yaml += fmt::format("    workloads: [{{name: hog, device_type: tpu-v4-8, duration_s: {}}}]\n",
                          100 * i);
    }
  }
  yaml += "manager: {cluster: mk, workers: [w5, w1, w4, w2, w6, w3, w7]" + manager_extra + "}\n";
  return parse_fleet_config(yaml, "manager-fleet.yaml");
}

// The Workload a user creates: `type` by the accelerator label, `count` pods, FLEET_* env.
json workload(const std::string& name, const std::string& type = "v4-8", int count = 1,
              const std::map<std::string, std::string>& env = {}) {
  json vars = json::array();
  for (const auto& [k, v] : env) vars.push_back({{"name", k}, {"value", v}});
  return {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
          {"kind", "Workload"},
          {"metadata", {{"name", name}, {"labels", {{"falcon.dev/accelerator-type", type}}}}},
          {"spec",
           {{"queueName", "user-queue"},
            {"podSets", json::array({{{"name", "main"},
                                      {"count", count},
                                      {"template",
                                       {{"spec",
                                         {{"containers", json::array({{{"name", "jax-tpu"},
                                                                       {"image", "python:3.10"},
                                                                       {"env", vars}}})}}}}}}})}}}};
}

// The workers whose simulation holds a workload named `name` (unreachable ones too), in
// w1..w7 order.
std::vector<std::string> testing_holders(SimHarness& h, const std::string& name) {
  std::vector<std::string> out;
  const json state = h.sim.state();
  for (const json& c : state["clusters"]) {
    for (const json& w : c["workloads"]) {
      if (w["name"] == name) out.push_back(c["name"]);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

class ManagerTest : public ::testing::Test {
 protected:
  explicit ManagerTest(FleetConfig config = fleet()) : h_(std::move(config)) {
    manager_ = h_.sim.manager();
  }

  std::vector<std::string> holders(const std::string& name = "job") {
    return testing_holders(h_, name);
  }

  json record(const std::string& name = "job") {
    const json state = h_.sim.state();
    for (const json& w : state["manager"]["workloads"]) {
      if (w["name"] == name && w["deleted_ns"] == -1) return w;
    }
    ADD_FAILURE() << "no manager workload " << name;
    return json::object();
  }

  json status(const std::string& name = "job") {
    return manager_->workload("default", name)["status"];
  }

  std::vector<std::string> nominated(const std::string& name = "job") {
    return status(name).value("nominatedClusterNames", std::vector<std::string>{});
  }

  std::int64_t now() { return h_.clock->now_ns(); }

  SimHarness h_;
  MultiKueueManager* manager_;
};

TEST(ManagerFleet, AFleetWithoutAManagerSectionHasNone) {
  SimHarness h(testing::small_fleet());
  EXPECT_EQ(h.sim.manager(), nullptr);
  EXPECT_FALSE(h.sim.state().contains("manager"));
}

TEST_F(ManagerTest, TheWiringObjectsDescribeTheConfiguration) {
  const auto checks = manager_->admission_checks();
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0]["metadata"]["name"], "multikueue");
  EXPECT_EQ(checks[0]["spec"]["controllerName"], "kueue.x-k8s.io/multikueue");
  EXPECT_EQ(checks[0]["spec"]["parameters"], json({{"apiGroup", "kueue.x-k8s.io"},
                                                   {"kind", "MultiKueueConfig"},
                                                   {"name", "multikueue-config"}}));
  EXPECT_EQ(checks[0]["status"]["conditions"][0]["type"], "Active");
  EXPECT_EQ(checks[0]["status"]["conditions"][0]["status"], "True");
  const auto configs = manager_->multikueue_configs();
  ASSERT_EQ(configs.size(), 1u);
  EXPECT_EQ(configs[0]["spec"]["clusters"],
            json({"w5", "w1", "w4", "w2", "w6", "w3", "w7"}));  // configuration order
  const auto clusters = manager_->multikueue_clusters();
  ASSERT_EQ(clusters.size(), 7u);
  EXPECT_EQ(clusters[0]["metadata"]["name"], "w5");
  EXPECT_EQ(clusters[0]["spec"]["clusterSource"]["kubeConfig"]["locationType"], "Secret");
  EXPECT_EQ(clusters[0]["status"]["conditions"][0]["status"], "True");
  EXPECT_EQ(clusters[0]["status"]["conditions"][0]["reason"], "Active");
  for (const auto& o : clusters) {
    EXPECT_FALSE(o["metadata"]["uid"].get<std::string>().empty());
    EXPECT_FALSE(o["metadata"]["creationTimestamp"].get<std::string>().empty());
  }
}

TEST_F(ManagerTest, OnCreateQuotaIsReservedAndTheCheckIsPending) {
  const json created = manager_->create_workload("default", workload("job"));
  EXPECT_EQ(created["metadata"]["namespace"], "default");
  EXPECT_FALSE(created["metadata"]["uid"].get<std::string>().empty());
  EXPECT_EQ(created["spec"]["priorityClassName"], "medium");
  EXPECT_EQ(created["spec"]["priority"], 500);
  const json& s = created["status"];
  EXPECT_EQ(s["conditions"][0]["type"], "QuotaReserved");
  EXPECT_EQ(s["conditions"][0]["status"], "True");
  EXPECT_EQ(s["admission"]["clusterQueue"], "cluster-queue");
  EXPECT_EQ(s["admissionChecks"][0]["name"], "multikueue");
  EXPECT_EQ(s["admissionChecks"][0]["state"], "Pending");
  EXPECT_FALSE(s.contains("clusterName"));
  // The same name again is AlreadyExists.
  try {
    manager_->create_workload("default", workload("job"));
    FAIL() << "created twice";
  } catch (const ManagerError& e) {
    EXPECT_EQ(e.code(), 409);
    EXPECT_EQ(e.reason(), "AlreadyExists");
  }
  // Another namespace is another Workload.
  EXPECT_NO_THROW(manager_->create_workload("team", workload("job")));
}

TEST_F(ManagerTest, AllAtOnceCopiesToEveryWorkerAndTheFirstAdmissionDeletesTheOthers) {
  const std::int64_t t0 = now();
  manager_->create_workload("default", workload("job", "v4-8", 1, {{"FLEET_DURATION_S", "1000"}}));
  EXPECT_EQ(nominated(), (std::vector<std::string>{"w1", "w2", "w3", "w4", "w5", "w6", "w7"}));
  EXPECT_EQ(holders(), (std::vector<std::string>{"w1", "w2", "w3", "w4", "w5", "w6", "w7"}));
  EXPECT_EQ(h_.row("job", "w1")->state, "QUEUED");
  EXPECT_EQ(record()["remote_created"], 7);

  // One jump over w1's hog ending (100 s) and w2's (200 s): the copy on w1 is admitted at
  // 100 s and the manager settles at that instant, so w2's copy is deleted before w2 frees.
  h_.advance_s(250);
  const json s = status();
  EXPECT_EQ(s["clusterName"], "w1");
  EXPECT_FALSE(s.contains("nominatedClusterNames"));
  EXPECT_EQ(s["admissionChecks"][0]["state"], "Ready");
  EXPECT_EQ(s["admissionChecks"][0]["message"], "The workload was admitted on \"w1\"");
  EXPECT_EQ(s["conditions"][1]["type"], "Admitted");
  EXPECT_EQ(holders(), (std::vector<std::string>{"w1"}));
  const json r = record();
  EXPECT_EQ(r["remote_created"], 7);
  EXPECT_EQ(r["remote_deleted"], 6);
  EXPECT_EQ(r["cluster"], "w1");
  EXPECT_EQ(r["created_ns"], t0);
  EXPECT_EQ(r["first_nominated_ns"], t0);
  EXPECT_EQ(r["admitted_ns"], t0 + 100 * kSecond);
  EXPECT_EQ(r["winner_reserved_ns"], t0 + 100 * kSecond);
  const json total = h_.sim.state()["manager"];
  EXPECT_EQ(total["remote_created"], 7);
  EXPECT_EQ(total["remote_deleted"], 6);
}

TEST(ManagerFleet, TiesGoToTheFirstWorkerInConfigurationOrder) {
  SimHarness h(fleet("", /*hogs=*/false));
  MultiKueueManager& m = *h.sim.manager();
  m.create_workload("default", workload("job"));
  // Every worker admits its copy at once; w5 comes first in the MultiKueueConfig.
  EXPECT_EQ(m.workload("default", "job")["status"]["clusterName"], "w5");
  EXPECT_EQ(testing_holders(h, "job"), (std::vector<std::string>{"w5"}));
}

TEST_F(ManagerTest, TheWinnersEndIsMirroredAsFinishedAndItsCopyDeleted) {
  manager_->create_workload("default", workload("ok", "v4-8", 1, {{"FLEET_DURATION_S", "50"}}));
  manager_->create_workload(
      "default",
      workload("bad", "tpu-v4-8", 1, {{"FLEET_DURATION_S", "60"}, {"FLEET_OUTCOME", "fail"}}));
  h_.advance_s(100);  // w1 frees at 100 s: "ok" (created first) wins it
  EXPECT_EQ(status("ok")["clusterName"], "w1");
  EXPECT_FALSE(status("bad").contains("clusterName"));
  // "ok" ends at 150 s: mirrored, its copy deleted, and the slot it frees admits "bad"'s copy
  // on w1 at that instant.
  h_.advance_s(50);
  EXPECT_FALSE(h_.row("ok", "w1"));
  EXPECT_EQ(status("bad")["clusterName"], "w1");
  EXPECT_EQ(record("bad")["admitted_ns"], record("ok")["finished_ns"]);
  const json ok = status("ok");
  ASSERT_EQ(ok["conditions"].size(), 3u);
  EXPECT_EQ(ok["conditions"][2]["type"], "Finished");
  EXPECT_EQ(ok["conditions"][2]["status"], "True");
  EXPECT_EQ(ok["conditions"][2]["reason"], "Succeeded");
  EXPECT_EQ(ok["conditions"][2]["message"], "jobset completed successfully");
  EXPECT_EQ(record("ok")["remote_deleted"], 7);  // every copy made is gone
  h_.advance_s(60);
  const json bad = status("bad");
  EXPECT_EQ(bad["conditions"][2]["reason"], "Failed");
  EXPECT_THAT(bad["conditions"][2]["message"].get<std::string>(),
              HasSubstr("jobset failed due to reaching max number of restarts"));
  EXPECT_EQ(record("bad")["finished_ns"], record("bad")["winner_finished_ns"]);
}

TEST_F(ManagerTest, DeletingTheWorkloadDeletesItsCopies) {
  manager_->create_workload("default", workload("job"));
  ASSERT_EQ(holders().size(), 7u);
  const json gone = manager_->delete_workload("default", "job");
  EXPECT_EQ(gone["metadata"]["name"], "job");
  EXPECT_THAT(holders(), IsEmpty());
  EXPECT_THROW(manager_->workload("default", "job"), ManagerError);
  const json state = h_.sim.state()["manager"];
  ASSERT_EQ(state["workloads"].size(), 1u);
  EXPECT_EQ(state["workloads"][0]["remote_deleted"], 7);
  EXPECT_NE(state["workloads"][0]["deleted_ns"], -1);
  try {
    manager_->delete_workload("default", "job");
    FAIL() << "deleted twice";
  } catch (const ManagerError& e) {
    EXPECT_EQ(e.code(), 404);
  }
}

class IncrementalTest : public ManagerTest {
 protected:
  IncrementalTest()
      : ManagerTest(fleet(", dispatcher: kueue.x-k8s.io/multikueue-dispatcher-incremental")) {}
};

TEST_F(IncrementalTest, NominatesThreeMoreEachRoundInConfigurationOrder) {
  manager_->create_workload("default", workload("job"));
  EXPECT_EQ(nominated(), (std::vector<std::string>{"w5", "w1", "w4"}));
  EXPECT_EQ(holders(), (std::vector<std::string>{"w1", "w4", "w5"}));
  h_.advance_s(99);
  EXPECT_EQ(nominated().size(), 3u);
  // w1 frees at 100 s: admitted there in the first round.
  h_.advance_s(1);
  EXPECT_EQ(status()["clusterName"], "w1");
  EXPECT_EQ(record()["remote_created"], 3);
  EXPECT_EQ(record()["remote_deleted"], 2);
}

TEST_F(IncrementalTest, ARoundWithoutAdmissionAddsTheNextWorkers) {
  // w1's hog ends at 100 s: take w1 with another workload first, so the rounds go on.
  for (int i = 1; i <= 7; ++i) {
    CreateRequest filler;
    filler.workload = "filler";
    filler.device_type = "tpu-v4-8";
    filler.priority = "very-high";
    filler.env["FLEET_DURATION_S"] = "100000";
    ASSERT_EQ(h_.sim.create("w" + std::to_string(i), filler, false).result, CreateResult::kCreated);
  }
  const std::int64_t t0 = now();
  manager_->create_workload("default", workload("job"));
  EXPECT_EQ(nominated(), (std::vector<std::string>{"w5", "w1", "w4"}));
  h_.advance_s(299);
  EXPECT_EQ(nominated().size(), 3u);
  h_.advance_s(1);  // round_s after the first nomination
  EXPECT_EQ(nominated(), (std::vector<std::string>{"w5", "w1", "w4", "w2", "w6", "w3"}));
  EXPECT_EQ(holders(), (std::vector<std::string>{"w1", "w2", "w3", "w4", "w5", "w6"}));
  h_.advance_s(1000);  // the third round (at 600 s) adds the last one
  EXPECT_EQ(nominated(), (std::vector<std::string>{"w5", "w1", "w4", "w2", "w6", "w3", "w7"}));
  EXPECT_EQ(record()["remote_created"], 7);
  EXPECT_EQ(record()["first_nominated_ns"], t0);
}

TEST(ManagerIncremental, RespectsStepSizeAndRound) {
  SimHarness h(fleet(
      ", dispatcher: kueue.x-k8s.io/multikueue-dispatcher-incremental, step_size: 2, round_s: 30"));
  MultiKueueManager& m = *h.sim.manager();
  m.create_workload("default", workload("job"));
  const auto nominated = [&] {
    return m.workload("default", "job")["status"]["nominatedClusterNames"];
  };
  EXPECT_EQ(nominated(), json({"w5", "w1"}));
  h.advance_s(29);
  EXPECT_EQ(nominated(), json({"w5", "w1"}));
  h.advance_s(1);
  EXPECT_EQ(nominated(), json({"w5", "w1", "w4", "w2"}));
  h.advance_s(30);
  EXPECT_EQ(nominated(), json({"w5", "w1", "w4", "w2", "w6", "w3"}));
  h.advance_s(30);  // 90 s: the last one
  EXPECT_EQ(nominated(), json({"w5", "w1", "w4", "w2", "w6", "w3", "w7"}));
  // w1 frees at 100 s: admitted there, the other copies go.
  h.advance_s(10);
  EXPECT_EQ(m.workload("default", "job")["status"]["clusterName"], "w1");
  EXPECT_EQ(testing_holders(h, "job"), (std::vector<std::string>{"w1"}));
}

class ExternalTest : public ManagerTest {
 protected:
  explicit ExternalTest(FleetConfig config = fleet(", dispatcher: falcon.dev/dispatcher"))
      : ManagerTest(std::move(config)) {}

  json patch(const std::vector<std::string>& clusters, std::optional<std::string> rv = {},
             const std::string& name = "job") {
    json body = {{"status", {{"nominatedClusterNames", clusters}}}};
    if (rv) body["metadata"] = {{"resourceVersion", *rv}};
    return manager_->patch_workload_status("default", name, "application/merge-patch+json",
                                           body.dump());
  }

  std::string rv(const std::string& name = "job") {
    return manager_->workload("default", name)["metadata"]["resourceVersion"];
  }
};

TEST_F(ExternalTest, CopiesAreMadeOnlyOnThePatchedWorkers) {
  manager_->create_workload("default", workload("job"));
  h_.advance_s(50);
  EXPECT_THAT(nominated(), IsEmpty());
  EXPECT_THAT(holders(), IsEmpty());
  EXPECT_EQ(record()["first_nominated_ns"], -1);

  const json patched = patch({"w3", "w2"}, rv());
  EXPECT_EQ(patched["status"]["nominatedClusterNames"], json({"w3", "w2"}));
  EXPECT_EQ(holders(), (std::vector<std::string>{"w2", "w3"}));
  EXPECT_EQ(record()["first_nominated_ns"], now());
  // Shrinking the nominations deletes the copy no longer nominated.
  patch({"w3"});
  EXPECT_EQ(holders(), (std::vector<std::string>{"w3"}));
  EXPECT_EQ(record()["remote_created"], 2);
  EXPECT_EQ(record()["remote_deleted"], 1);
  h_.advance_s(250);  // w2 frees at 200 s (no copy there any more), w3 at 300 s
  EXPECT_EQ(status()["clusterName"], "w3");
  EXPECT_EQ(record()["admitted_ns"], record()["created_ns"].get<std::int64_t>() + 300 * kSecond);
}

// Workers whose ClusterQueue preempts lower priorities (behaviour.preemption: LowerPriority).
class PreemptingWorkersTest : public ExternalTest {
 protected:
  PreemptingWorkersTest()
      : ExternalTest(parse_fleet_config(R"(
time_scale: 0
defaults: {duration_s: 100, steps: 5}
clusters:
  mk: {project: p, zone: us-central2-b, cluster_id: mk, capacity: {}}
  w1: {project: p, zone: us-central2-b, cluster_id: w1, capacity: {tpu-v4-8: 1},
       behaviour: {preemption: LowerPriority}}
  w2: {project: p, zone: us-central2-b, cluster_id: w2, capacity: {tpu-v4-8: 1},
       behaviour: {preemption: LowerPriority}}
manager: {cluster: mk, workers: [w1, w2], dispatcher: falcon.dev/dispatcher}
)",
                                        "preempting-fleet.yaml")) {}

  void create(const std::string& name, const std::string& priority,
              const std::map<std::string, std::string>& env) {
    json w = workload(name, "v4-8", 1, env);
    w["spec"]["priorityClassName"] = priority;
    manager_->create_workload("default", w);
  }
};

// Kueue's MultiKueueRedoAdmissionOnEvictionInWorker: a worker that evicts the admitted copy
// hands the Workload back to the manager, which deletes the copy and dispatches it again; the
// job resumes from its last checkpoint wherever it is admitted next.
TEST_F(PreemptingWorkersTest, AWorkerThatEvictsTheAdmittedCopyHandsTheWorkloadBack) {
  create("low", "low", {{"FLEET_DURATION_S", "1000"}, {"FLEET_CHECKPOINT_S", "100"}});
  patch({"w1"}, std::nullopt, "low");
  EXPECT_EQ(status("low")["clusterName"], "w1");
  h_.advance_s(250);  // checkpoints at 100 s and 200 s
  create("high", "high", {});
  patch({"w1"}, std::nullopt, "high");  // w1 is full: its Kueue evicts "low" for it
  EXPECT_EQ(status("high")["clusterName"], "w1");
  EXPECT_FALSE(status("low").contains("clusterName"));
  EXPECT_THAT(nominated("low"), IsEmpty());
  EXPECT_EQ(record("low")["check"], "Pending");
  EXPECT_EQ(record("low")["evicted_in_workers"], 1);
  EXPECT_THAT(holders("low"), IsEmpty());  // the evicted copy is deleted

  // Dispatched again, it runs what is left after its last checkpoint: 800 of its 1000 s.
  patch({"w2"}, std::nullopt, "low");
  EXPECT_EQ(status("low")["clusterName"], "w2");
  const std::int64_t restarted = now();
  h_.advance_s(799);
  EXPECT_EQ(record("low")["winner_finished_ns"], -1);
  h_.advance_s(1);
  EXPECT_EQ(record("low")["winner_finished_ns"], restarted + 800 * kSecond);
  EXPECT_EQ(record("low")["remote_created"], 2);
}

TEST_F(ExternalTest, AStaleResourceVersionIsAConflict) {
  manager_->create_workload("default", workload("job"));
  const std::string before = rv();
  patch({"w1"}, before);
  try {
    patch({"w2"}, before);
    FAIL() << "a stale resourceVersion was accepted";
  } catch (const ManagerError& e) {
    EXPECT_EQ(e.code(), 409);
    EXPECT_EQ(e.reason(), "Conflict");
    EXPECT_THAT(e.what(), HasSubstr("the object has been modified"));
  }
  EXPECT_EQ(holders(), (std::vector<std::string>{"w1"}));
  // The same nominations again change nothing: the resourceVersion stays.
  const std::string current = rv();
  patch({"w1"}, current);
  EXPECT_EQ(rv(), current);
}

TEST_F(ExternalTest, NominationsAreRefusedOnceTheClusterIsChosen) {
  manager_->create_workload("default", workload("job"));
  patch({"w1"});
  h_.advance_s(100);  // w1's hog ends: the copy is admitted
  ASSERT_EQ(status()["clusterName"], "w1");
  try {
    patch({"w2"}, rv());
    FAIL() << "nominations accepted beside clusterName";
  } catch (const ManagerError& e) {
    EXPECT_EQ(e.code(), 422);
    EXPECT_EQ(e.reason(), "Invalid");
    EXPECT_THAT(e.what(),
                HasSubstr("clusterName and nominatedClusterNames are mutually exclusive"));
  }
  EXPECT_NO_THROW(patch({}, rv()));  // empty is allowed
}

TEST_F(ExternalTest, ThePatchChangesNominationsOnly) {
  manager_->create_workload("default", workload("job"));
  const auto code_of = [&](const std::string& type, const std::string& body) {
    try {
      manager_->patch_workload_status("default", "job", type, body);
    } catch (const ManagerError& e) {
      return e.code();
    }
    return 200;
  };
  EXPECT_EQ(code_of("application/merge-patch+json", R"({"status":{"clusterName":"w1"}})"), 422);
  EXPECT_EQ(code_of("application/merge-patch+json", R"({"status":{"nominatedClusterNames":"w1"}})"),
            422);
  std::vector<std::string> many(21, "w1");
  EXPECT_EQ(code_of("application/merge-patch+json",
                    json({{"status", {{"nominatedClusterNames", many}}}}).dump()),
            422);
  EXPECT_EQ(code_of("application/strategic-merge-patch+json", "{}"), 415);
  EXPECT_EQ(code_of("application/merge-patch+json", "not json"), 400);
  EXPECT_EQ(
      code_of("application/merge-patch+json", R"({"metadata":{"resourceVersion":7},"status":{}})"),
      400);
  // A JSON patch works as well; spec changes are dropped (the status subresource).
  EXPECT_EQ(code_of("application/json-patch+json",
                    R"([{"op":"add","path":"/status/nominatedClusterNames","value":["w2"]},
                        {"op":"replace","path":"/spec/queueName","value":"other"}])"),
            200);
  EXPECT_EQ(nominated(), (std::vector<std::string>{"w2"}));
  EXPECT_EQ(manager_->workload("default", "job")["spec"]["queueName"], "user-queue");
  // Unknown names are kept (Kueue does not check them) and get no copy.
  EXPECT_EQ(code_of("application/merge-patch+json",
                    R"({"status":{"nominatedClusterNames":["w2","elsewhere"]}})"),
            200);
  EXPECT_EQ(holders(), (std::vector<std::string>{"w2"}));
  try {
    patch({"w1"}, std::nullopt, "nothing");
    FAIL();
  } catch (const ManagerError& e) {
    EXPECT_EQ(e.code(), 404);
  }
}

TEST_F(ManagerTest, AKilledWorkerGetsNoCopyWhileKilled) {
  h_.sim.kill_cluster("w2", KillMode::kKeep);
  const auto clusters = manager_->multikueue_clusters();
  const json& w2 = clusters[3];
  ASSERT_EQ(w2["metadata"]["name"], "w2");
  EXPECT_EQ(w2["status"]["conditions"][0]["status"], "False");
  EXPECT_EQ(w2["status"]["conditions"][0]["reason"], "ClientConnectionFailed");
  EXPECT_THAT(w2["status"]["conditions"][0]["message"].get<std::string>(),
              HasSubstr("i/o timeout"));
  EXPECT_EQ(clusters[1]["status"]["conditions"][0]["status"], "True");  // w1

  manager_->create_workload("default", workload("job"));
  EXPECT_EQ(nominated().size(), 7u);  // nominated all the same
  EXPECT_EQ(holders(), (std::vector<std::string>{"w1", "w3", "w4", "w5", "w6", "w7"}));
  h_.advance_s(50);
  EXPECT_EQ(holders().size(), 6u);
  h_.sim.revive_cluster("w2");  // Active again: its copy is made at once
  EXPECT_EQ(holders().size(), 7u);
  EXPECT_EQ(manager_->multikueue_clusters()[3]["status"]["conditions"][0]["status"], "True");
  const json w2_state = h_.sim.state()["manager"]["workers"][3];
  EXPECT_EQ(w2_state["active"], true);
  EXPECT_EQ(w2_state["transition_ns"], now());
}

TEST_F(ManagerTest, CopiesOwedADeleteOnAnUnreachableWorkerGoWhenItIsBack) {
  manager_->create_workload("default", workload("job"));
  h_.sim.kill_cluster("w2", KillMode::kKeep);
  h_.advance_s(100);  // w1 admits it; w2's copy cannot be deleted now
  EXPECT_EQ(status()["clusterName"], "w1");
  EXPECT_EQ(holders(), (std::vector<std::string>{"w1", "w2"}));
  EXPECT_EQ(record()["remote_deleted"], 5);
  h_.sim.revive_cluster("w2");
  EXPECT_EQ(holders(), (std::vector<std::string>{"w1"}));
  EXPECT_EQ(record()["remote_deleted"], 6);
}

TEST_F(ManagerTest, TheAcceleratorComesFromTheLabelOrTheNodeSelector) {
  json by_selector = workload("by-selector");
  by_selector["metadata"].erase("labels");
  by_selector["spec"]["podSets"][0]["count"] = 4;
  by_selector["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"] = {
      {"cloud.google.com/gke-tpu-accelerator", "tpu-v4-podslice"},
      {"cloud.google.com/gke-tpu-topology", "2x2x4"}};
  manager_->create_workload("default", by_selector);
  json by_label = workload("by-label", "tpu-v4-32", 8);
  by_label["spec"]["priority"] = 800;
  manager_->create_workload("default", by_label);
  json klass = workload("by-class");
  klass["spec"]["priorityClassName"] = "very-high";
  manager_->create_workload("default", klass);
  std::map<std::string, json> records;
  const json state = h_.sim.state();
  for (const json& r : state["manager"]["workloads"]) records[r["name"]] = r;
  EXPECT_EQ(records["by-selector"]["device_type"], "v4-32");  // 16 chips of v4: 4 VMs
  EXPECT_EQ(records["by-selector"]["num_slices"], 1);
  EXPECT_EQ(records["by-label"]["device_type"], "v4-32");
  EXPECT_EQ(records["by-label"]["num_slices"], 2);
  EXPECT_EQ(records["by-label"]["priority"], "high");  // 800: the highest class it reaches
  EXPECT_EQ(manager_->workload("default", "by-label")["spec"]["priority"], 800);
  EXPECT_EQ(records["by-class"]["priority"], "very-high");
  EXPECT_EQ(manager_->workload("default", "by-class")["spec"]["priority"], 1000);
  // The workers offer no v4-32: the copies exist for the manager but are never admitted.
  EXPECT_EQ(records["by-label"]["remote_created"], 7);
  EXPECT_EQ(records["by-label"]["copies"][0]["kind"], "inadmissible");
  EXPECT_THAT(holders("by-label"), IsEmpty());
}

TEST_F(ManagerTest, TheCopiesCarryTheWorkloadsEnvAndPriority) {
  json w = workload("job", "v4-8", 1, {{"FLEET_DURATION_S", "42"}});
  w["spec"]["priorityClassName"] = "low";
  w["metadata"]["namespace"] = "default";
  manager_->create_workload("default", w);
  const json state = h_.sim.state();
  for (const json& c : state["clusters"]) {
    if (c["name"] != "w3") continue;
    for (const json& wl : c["workloads"]) {
      if (wl["name"] != "job") continue;
      EXPECT_EQ(wl["namespace"], "default");
      EXPECT_EQ(wl["priority"], "low");
      EXPECT_EQ(wl["device_type"], "tpu-v4-8");  // the worker's spelling of v4-8
      EXPECT_EQ(wl["env"]["FLEET_DURATION_S"], "42");
      EXPECT_EQ(wl["duration_s"], 42);
      return;
    }
  }
  ADD_FAILURE() << "no copy on w3";
}

TEST_F(ManagerTest, WhatCannotBeMappedIsRefusedNamingTheField) {
  const auto refusal = [&](json body, const std::string& ns = "default") -> std::string {
    try {
      manager_->create_workload(ns, body);
    } catch (const ManagerError& e) {
      return std::to_string(e.code()) + " " + e.field() + " " + e.what();
    }
    return "accepted";
  };
  EXPECT_THAT(refusal(workload("x", "v4-48")),
              HasSubstr("422 metadata.labels[falcon.dev/accelerator-type] Workload.kueue.x-k8s.io "
                        "\"x\" is invalid: metadata.labels[falcon.dev/accelerator-type]: Invalid "
                        "value: \"v4-48\""));
  EXPECT_THAT(refusal(workload("x", "v4-32", 6)),
              HasSubstr("422 spec.podSets[0].count Workload.kueue.x-k8s.io \"x\" is invalid: "
                        "spec.podSets[0].count: Invalid value: 6: must be a multiple of the 4 "
                        "pods of one v4-32 slice"));
  json no_type = workload("x");
  no_type["metadata"].erase("labels");
  EXPECT_THAT(refusal(no_type), HasSubstr("422 spec.podSets[0].template.spec.nodeSelector"));
  json no_topology = no_type;
  no_topology["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"] = {
      {"cloud.google.com/gke-tpu-accelerator", "tpu-v4-podslice"}};
  EXPECT_THAT(refusal(no_topology),
              HasSubstr("spec.podSets[0].template.spec.nodeSelector[cloud.google.com/"
                        "gke-tpu-topology]: Required value"));
  json bad_class = workload("x");
  bad_class["spec"]["priorityClassName"] = "urgent";
  EXPECT_THAT(refusal(bad_class), HasSubstr("422 spec.priorityClassName"));
  EXPECT_THAT(refusal(workload("Bad_Name")), HasSubstr("422 metadata.name"));
  json two_sets = workload("x");
  two_sets["spec"]["podSets"].push_back(two_sets["spec"]["podSets"][0]);
  EXPECT_THAT(refusal(two_sets), HasSubstr("422 spec.podSets "));
  json elsewhere = workload("x");
  elsewhere["metadata"]["namespace"] = "other";
  EXPECT_THAT(refusal(elsewhere), HasSubstr("400  the namespace of the provided object"));
  json not_a_workload = workload("x");
  not_a_workload["kind"] = "JobSet";
  EXPECT_THAT(refusal(not_a_workload), HasSubstr("400"));
  json weird = workload("x");
  weird["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"] = 5;
  EXPECT_THAT(refusal(weird), HasSubstr("400"));
  json generated = workload("");
  generated["metadata"].erase("name");
  generated["metadata"]["generateName"] = "run-";
  EXPECT_EQ(refusal(generated), "accepted");
  EXPECT_THAT(h_.sim.state()["manager"]["workloads"][0]["name"].get<std::string>(),
              ::testing::MatchesRegex("run-[a-z0-9]{5}"));
}

TEST_F(ManagerTest, EveryChangeBumpsTheResourceVersionAndIsAnEvent) {
  const std::uint64_t start = manager_->resource_version();
  EXPECT_GE(start, 9u);  // the AdmissionCheck, the config and the seven MultiKueueClusters
  const json created = manager_->create_workload("default", workload("job"));
  const std::uint64_t added =
      std::stoull(created["metadata"]["resourceVersion"].get<std::string>());
  EXPECT_EQ(added, start + 1);
  h_.advance_s(100);  // admitted on w1
  manager_->delete_workload("default", "job");

  // A watch from the creation's version replays what came after it, in order.
  std::vector<MultiKueueManager::Event> events;
  ASSERT_EQ(manager_->wait_events(added, std::chrono::steady_clock::now(), events),
            MultiKueueManager::Wait::kEvents);
  std::vector<std::string> types;
  for (const auto& e : events) {
    types.push_back(e.type);
    EXPECT_GT(e.resource_version, added);
    EXPECT_EQ((*e.object)["metadata"]["resourceVersion"], std::to_string(e.resource_version));
  }
  EXPECT_THAT(types, ElementsAre("MODIFIED", "MODIFIED", "DELETED"));  // nominated, admitted
  EXPECT_EQ((*events[1].object)["status"]["clusterName"], "w1");
  // Nothing after the newest: the wait times out.
  events.clear();
  EXPECT_EQ(
      manager_->wait_events(manager_->resource_version(), std::chrono::steady_clock::now(), events),
      MultiKueueManager::Wait::kTimeout);
  EXPECT_THAT(events, IsEmpty());
}

TEST_F(ManagerTest, AVersionOlderThanTheHistoryKeptIsGone) {
  manager_->set_event_history(3);
  const std::uint64_t start = manager_->resource_version();
  for (const char* name : {"a", "b", "c"}) manager_->create_workload("default", workload(name));
  std::vector<MultiKueueManager::Event> events;
  EXPECT_EQ(manager_->wait_events(start, std::chrono::steady_clock::now(), events),
            MultiKueueManager::Wait::kGone);
  // The newest three (c's creation and nomination, b's nomination) are still there.
  const std::uint64_t newest = manager_->resource_version();
  EXPECT_EQ(manager_->wait_events(newest - 3, std::chrono::steady_clock::now(), events),
            MultiKueueManager::Wait::kEvents);
  EXPECT_EQ(events.size(), 3u);
}

TEST_F(ManagerTest, ClosingWakesWatchesAndRefusesNewOnes) {
  EXPECT_TRUE(manager_->open_watch());
  int opened = 1;
  while (manager_->open_watch()) ++opened;
  EXPECT_EQ(opened, MultiKueueManager::kMaxWatches);
  for (int i = 0; i < opened; ++i) manager_->close_watch();
  std::vector<MultiKueueManager::Event> events;
  std::thread closer([&] { manager_->close_watches(); });
  // Would wait an hour, but close_watches() ends it.
  EXPECT_EQ(manager_->wait_events(manager_->resource_version(),
                                  std::chrono::steady_clock::now() + std::chrono::hours(1), events),
            MultiKueueManager::Wait::kClosed);
  closer.join();
  EXPECT_FALSE(manager_->open_watch());
}

TEST_F(ManagerTest, SnapshotAndVersionAreTakenTogether) {
  manager_->create_workload("default", workload("a"));
  manager_->create_workload("team", workload("b"));
  std::uint64_t version = 0;
  const auto objects = manager_->snapshot(version);
  ASSERT_EQ(objects.size(), 2u);
  EXPECT_EQ((*objects[0])["metadata"]["name"], "a");  // creation order
  EXPECT_EQ(version, manager_->resource_version());
  EXPECT_EQ(manager_->workloads("team").size(), 1u);
  EXPECT_EQ(manager_->workloads("").size(), 2u);
}

}  // namespace
}  // namespace falcon::fleet
