// The fleet's faults on a manual clock: a cluster killed and revived at run time (its control
// plane only, or its nodes too), Kueue's preemption with and without readmission, a node whose
// worker the platform kills (EXIT_CODE=137), and creates that fail transiently. Each is checked
// as the simulator records it, as fleet-xpk prints it, as the Kubernetes API shows it, and
// through the control routes (including their 400/404 answers).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "fleet/fake_xpk.h"
#include "fleet/fleet_control.h"
#include "fleet/kube_api.h"
#include "sim_fixture.h"

namespace falcon::fleet {
namespace {

using ::testing::Contains;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::SimHarness;
using testing::small_fleet;
using ::testing::StartsWith;

class FaultsTest : public ::testing::Test {
 protected:
  FaultsTest() : control_(h_.sim, "http://127.0.0.1:1"), api_(control_) {}

  nlohmann::json control(const std::string& route, const nlohmann::json& body) {
    return control_.handle(route, body);
  }

  // The ControlError a route throws: {status, message}.
  std::pair<int, std::string> control_error(const std::string& route, const nlohmann::json& body) {
    try {
      control_.handle(route, body);
    } catch (const ControlError& e) {
      return {e.status(), e.what()};
    }
    return {200, ""};
  }

  testing::ToolRun xpk(std::vector<std::string> args) {
    args.insert(args.end(), {"--cluster=c-1", "--project=p", "--zone=us-central2-b"});
    return testing::run_in_process(run_fake_xpk, args, &api_, env_, slept_);
  }

  nlohmann::json state_of_workload(const std::string& name) {
    const nlohmann::json state = h_.sim.state();
    for (const auto& w : state["clusters"][0]["workloads"]) {
      if (w["name"] == name) return w;
    }
    return nullptr;
  }

  SimHarness h_{small_fleet()};
  FleetControl control_;
  LocalFleetApi api_;
  std::map<std::string, std::string> env_;
  std::vector<long> slept_;
};

TEST_F(FaultsTest, KilledClusterIsUnreachableUntilRevivedAndItsWorkloadsRunOn) {
  h_.create("w");
  h_.advance_s(10);
  EXPECT_EQ(control("clusters:kill", {{"cluster", "c"}})["unreachable"], true);

  const ListResult list = h_.sim.list("c");
  ASSERT_TRUE(list.failure);
  EXPECT_THAT(list.failure->stderr_text,
              ContainsRegex("^Unable to connect to the server: dial tcp [0-9.]+:443: i/o timeout"));
  EXPECT_TRUE(h_.sim.exists("c", "w", "default").failure);
  EXPECT_TRUE(h_.create("x").failure);
  EXPECT_EQ(h_.sim.state()["clusters"][0]["unreachable"], true);

  // xpk: credentials succeed, `kubectl get pods` does not, the list fails with exit 1.
  const auto listed = xpk({"workload", "list"});
  EXPECT_EQ(listed.code, 1);
  EXPECT_THAT(listed.out,
              HasSubstr("[XPK] Task: `Test kubectl credentials` terminated with ERROR"));
  EXPECT_THAT(listed.out, HasSubstr("i/o timeout"));
  EXPECT_THAT(listed.out, HasSubstr("[XPK] XPK failed, error code 1"));

  // The control plane only: the run goes on, unseen, and has ended when the cluster answers.
  h_.advance_s(100);
  control("clusters:revive", {{"cluster", "c"}});
  EXPECT_EQ(h_.state_of("w"), "COMPLETED");
  EXPECT_EQ(xpk({"workload", "list"}).code, 0);
}

TEST_F(FaultsTest, KillingTheNodesTooFailsRunningWorkloadsAndHoldsAdmission) {
  h_.create("running");
  h_.create("queued");  // tpu-v4-8 has one slot
  h_.advance_s(10);
  control("clusters:kill", {{"cluster", "c"}, {"workloads", "fail"}});
  h_.advance_s(500);  // nothing is admitted while the nodes are gone
  const nlohmann::json lost = state_of_workload("running");
  EXPECT_EQ(lost["state"], "FAILED");
  EXPECT_EQ(lost["lost"], true);
  EXPECT_EQ(state_of_workload("queued")["state"], "QUEUED");
  EXPECT_EQ(h_.sim.state()["clusters"][0]["down"], true);
  // No last lines: the nodes vanished with the pods.
  const auto texts = h_.texts_of("running", 0, 0);
  ASSERT_FALSE(texts.empty());
  EXPECT_THAT(texts.back(), Not(StartsWith("EXIT_CODE=")));

  control("clusters:revive", {{"cluster", "c"}});
  const WorkloadRow failed = *h_.row("running");
  EXPECT_EQ(failed.status, "Finished");
  EXPECT_EQ(failed.message,
            "jobset failed due to reaching max number of restarts (first failed job: "
            "running-slice-job-0)");
  EXPECT_EQ(h_.state_of("queued"), "RUNNING");  // admitted once the cluster is back
}

// A readmission due while the cluster's nodes are gone waited for them: the simulator's event
// loop took the same readmission time again and again, holding its lock for good (every
// control call, list and state read then hung).
TEST_F(FaultsTest, AReadmissionDueWhileTheNodesAreGoneWaitsForTheRevive) {
  h_.create("w");
  h_.advance_s(10);
  control("workloads:evict",
          {{"cluster", "c"}, {"workload", "w"}, {"readmit", true}, {"readmit_after_s", 30}});
  control("clusters:kill", {{"cluster", "c"}, {"workloads", "fail"}});
  h_.advance_s(60);  // the readmission time passes while the cluster is down
  EXPECT_EQ(state_of_workload("w")["state"], "QUEUED");
  control("clusters:revive", {{"cluster", "c"}});
  EXPECT_EQ(h_.state_of("w"), "RUNNING");  // readmitted once the nodes are back
}

TEST_F(FaultsTest, EvictionWithoutReadmissionLeavesItQueuedWithKueuesConditions) {
  h_.create("w");
  h_.create("next");  // waits for w's slot
  h_.advance_s(10);
  const nlohmann::json r =
      control("workloads:evict", {{"cluster", "c"}, {"workload", "w"}, {"readmit", false}});
  EXPECT_EQ(r["state"], "QUEUED");
  EXPECT_EQ(h_.state_of("next"), "RUNNING");  // the freed slot goes to the queue

  // What xpk 1.13 shows: the latest condition is Requeued (a type it names Unknown), with
  // Kueue's preemption message; the admission is gone, so Running/Ran is <none>.
  h_.advance_s(5);
  const WorkloadRow row = *h_.row("w");
  EXPECT_EQ(row.state, "QUEUED");
  EXPECT_EQ(row.status, "Unknown");
  EXPECT_THAT(*row.message, StartsWith("Preempted to accommodate a workload (UID: "));
  EXPECT_THAT(*row.message, HasSubstr("due to prioritization in the ClusterQueue"));
  EXPECT_EQ(row.vms_running, std::nullopt);
  std::vector<std::string> types;
  for (const auto& c : row.conditions) types.push_back(c.type + (c.status ? "=True" : "=False"));
  EXPECT_EQ(types, (std::vector<std::string>{"QuotaReserved=False", "Admitted=False",
                                             "Evicted=True", "Preempted=True", "Requeued=True"}));
  const auto listed = xpk({"workload", "list"});
  EXPECT_THAT(listed.out, ContainsRegex("\nw +[0-9TZ:-]+ +medium +1 +<none> +<none> +Unknown +"
                                        "Preempted to accommodate a workload"));

  // Its pods got SIGTERM.
  EXPECT_EQ(h_.texts_of("w", 0, 0).back(), "EXIT_CODE=143");
  h_.advance_s(10000);
  EXPECT_EQ(h_.state_of("w"), "QUEUED");  // held: never readmitted
  EXPECT_EQ(state_of_workload("w")["held"], true);
  EXPECT_EQ(state_of_workload("w")["evictions"], 1);
}

TEST_F(FaultsTest, EvictionWithReadmissionRunsAgainFromScratchOnNewPods) {
  h_.create("w");
  h_.advance_s(40);
  const std::string old_pod = state_of_workload("w")["pods"][0]["name"];
  control("workloads:evict",
          {{"cluster", "c"}, {"workload", "w"}, {"readmit", true}, {"readmit_after_s", 30}});
  h_.advance_s(29);
  EXPECT_EQ(h_.state_of("w"), "QUEUED");
  h_.advance_s(1);
  const WorkloadRow back = *h_.row("w");
  EXPECT_EQ(back.state, "RUNNING");
  EXPECT_EQ(back.status, "QuotaReserved");  // the newest conditions again
  EXPECT_EQ(back.status_time, "2026-04-13T08:01:10Z");
  const std::string new_pod = state_of_workload("w")["pods"][0]["name"];
  EXPECT_NE(new_pod, old_pod);
  h_.advance_s(99);
  EXPECT_EQ(h_.state_of("w"), "RUNNING");  // a full run from readmission
  h_.advance_s(1);
  EXPECT_EQ(h_.state_of("w"), "COMPLETED");
}

TEST_F(FaultsTest, NodeFailureKillsItsWorkerWith137AndJobSetFailsTheRest) {
  h_.create("w", "tpu-v4-64");  // 8 VMs in one slice
  h_.advance_s(30);
  const nlohmann::json pods = state_of_workload("w")["pods"];
  ASSERT_GE(pods.size(), 2u);
  const std::string node = pods[1]["node"];
  const nlohmann::json r = control("nodes:fail", {{"cluster", "c"}, {"node", node}});
  EXPECT_EQ(r["workload"], "w");
  EXPECT_EQ(r["state"], "FAILED");
  EXPECT_THAT(r["pods"], Contains(pods[1]["name"]));

  EXPECT_EQ(h_.texts_of("w", 0, 1).back(), "EXIT_CODE=137");  // killed by the platform
  EXPECT_EQ(h_.texts_of("w", 0, 0).back(), "EXIT_CODE=143");  // stopped by JobSet
  for (int worker = 0; worker < static_cast<int>(pods.size()); ++worker) {
    for (const auto& text : h_.texts_of("w", 0, worker)) {
      EXPECT_THAT(text, Not(HasSubstr("Traceback")));  // no application failure
    }
  }
  const WorkloadRow row = *h_.row("w");
  EXPECT_EQ(row.state, "FAILED");
  EXPECT_EQ(row.message,
            "jobset failed due to reaching max number of restarts (first failed job: "
            "w-slice-job-0)");
  EXPECT_EQ(state_of_workload("w")["exit_code"], 137);

  // By workload, slice and worker, with 143.
  h_.create("v", "tpu-v4-64");
  h_.advance_s(1);
  control("nodes:fail", {{"cluster", "c"}, {"workload", "v"}, {"worker", 2}, {"exit_code", 143}});
  EXPECT_EQ(h_.texts_of("v", 0, 2).back(), "EXIT_CODE=143");
  EXPECT_EQ(state_of_workload("v")["platform_exit"], 143);
}

TEST_F(FaultsTest, FlakyCreatesFailTheNextNWithATransientError) {
  EXPECT_EQ(control("clusters:failCreates", {{"cluster", "c"}, {"count", 2}})["failing_creates"],
            2);
  const std::vector<std::string> create = {"workload",        "create",
                                           "--workload=w",    "--command=python3 train.py",
                                           "--tpu-type=v4-8", "--docker-image=gcr.io/p/trainer:1"};
  for (int i = 0; i < 2; ++i) {
    const auto r = xpk(create);
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err, "Unable to connect to the server: net/http: TLS handshake timeout\n");
    EXPECT_THAT(r.out, HasSubstr("[XPK] Create Workload request returned ERROR 1\n"
                                 "[XPK] XPK failed, error code 1\n"));
  }
  EXPECT_EQ(h_.state_of("w"), "ABSENT");
  const auto ok = xpk(create);
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_EQ(h_.state_of("w"), "RUNNING");
  EXPECT_EQ(h_.sim.state()["clusters"][0]["failing_creates"], 0);
}

TEST_F(FaultsTest, TheKubernetesApiShowsEvictionsAndKilledClusters) {
  KubeApi kube(h_.sim);
  const std::string auth = "Bearer " + kube.issue_token()["status"]["token"].get<std::string>();
  h_.create("w");
  h_.advance_s(10);
  control("workloads:evict", {{"cluster", "c"}, {"workload", "w"}, {"readmit", false}});
  const KubeApi::Answer a =
      kube.handle("c", "/apis/kueue.x-k8s.io/v1beta1/workloads", false, false, auth);
  ASSERT_EQ(a.status, 200) << a.body;
  const nlohmann::json conditions =
      nlohmann::json::parse(a.body)["items"][0]["status"]["conditions"];
  const auto evicted = std::find_if(conditions.begin(), conditions.end(),
                                    [](const nlohmann::json& c) { return c["type"] == "Evicted"; });
  ASSERT_NE(evicted, conditions.end()) << conditions.dump();
  EXPECT_EQ((*evicted)["status"], "True");
  EXPECT_EQ((*evicted)["reason"], "Preempted");
  EXPECT_THAT((*evicted)["message"].get<std::string>(), StartsWith("Preempted to accommodate"));

  control("clusters:kill", {{"cluster", "c"}});
  const KubeApi::Answer down =
      kube.handle("c", "/apis/kueue.x-k8s.io/v1beta1/workloads", false, false, auth);
  EXPECT_EQ(down.status, 503);
  EXPECT_THAT(down.body, HasSubstr("i/o timeout"));
}

TEST_F(FaultsTest, RoutesAnswer404ForUnknownNamesAnd400ForWrongStates) {
  EXPECT_EQ(control_error("clusters:kill", {{"cluster", "nope"}}),
            std::make_pair(404, std::string("no cluster named 'nope' in the fleet")));
  EXPECT_EQ(control_error("clusters:kill", {{"cluster", "c"}, {"workloads", "maybe"}}).first, 400);
  EXPECT_EQ(control_error("clusters:revive", {}).first, 400);  // no cluster field
  EXPECT_EQ(control_error("workloads:evict", {{"cluster", "c"}, {"workload", "ghost"}}),
            std::make_pair(404, std::string("no workload named 'ghost' on cluster 'c'")));
  h_.create("a");
  h_.create("b");  // queued behind a
  const auto queued = control_error("workloads:evict", {{"cluster", "c"}, {"workload", "b"}});
  EXPECT_EQ(queued.first, 400);
  EXPECT_THAT(queued.second, HasSubstr("workload 'b' on cluster 'c' is QUEUED, not RUNNING"));
  EXPECT_EQ(control_error("workloads:evict",
                          {{"cluster", "c"}, {"workload", "a"}, {"readmit_after_s", -1}})
                .first,
            400);
  EXPECT_EQ(control_error("nodes:fail", {{"cluster", "c"}, {"node", "gke-none"}}).first, 404);
  EXPECT_EQ(control_error("nodes:fail", {{"cluster", "c"}}).first, 400);
  const auto code =
      control_error("nodes:fail", {{"cluster", "c"}, {"workload", "a"}, {"exit_code", 1}});
  EXPECT_EQ(code.first, 400);
  EXPECT_THAT(code.second, HasSubstr("137 (SIGKILL) or 143 (SIGTERM)"));
  EXPECT_EQ(control_error("clusters:failCreates", {{"cluster", "c"}, {"count", "2"}}).first, 400);
  EXPECT_EQ(control_error("clusters:failCreates", {{"cluster", "x"}, {"count", 2}}).first, 404);
}

TEST_F(FaultsTest, FaultsSurviveAStateFileRoundTrip) {
  h_.create("w");
  h_.advance_s(10);
  control("workloads:evict", {{"cluster", "c"}, {"workload", "w"}, {"readmit", false}});
  control("clusters:kill", {{"cluster", "c"}});
  const nlohmann::json saved = h_.sim.state();
  SimHarness other(small_fleet());
  other.sim.restore(saved);
  EXPECT_TRUE(other.sim.list("c").failure);  // still unreachable
  other.sim.revive_cluster("c");
  const WorkloadRow row = *other.row("w");
  EXPECT_EQ(row.state, "QUEUED");
  EXPECT_EQ(row.status, "Unknown");
  other.advance_s(1000);
  EXPECT_EQ(other.state_of("w"), "QUEUED");  // still held
}

}  // namespace
}  // namespace falcon::fleet
