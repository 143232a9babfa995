// The kube probe backend against the local fleet: the same answers as the xpk backend on the
// same simulator state (over many seeded random states), the errors it gives for an unreachable
// cluster and a missing credential, and the real kubectl reading the fleet's API.
#include <algorithm>
#include <cstdlib>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "falcon/clock.h"
#include "falcon/command_runner.h"
#include "falcon/config.h"
#include "falcon/http_client.h"
#include "falcon/prober.h"
#include "falcon/workload_manager.h"
#include "kube/kube_prober.h"
#include "kube/workload_objects.h"
#include "support/local_fleet.h"
#include "support/run_falcon.h"
#include "xpk/credential_warmup.h"
#include "xpk/workload_listing.h"
#include "xpk/xpk_cli.h"

namespace falcon {
namespace {

using ::testing::HasSubstr;

class KubeFleetTest : public ::testing::Test {
 protected:
  KubeFleetTest() {
    config_ = load_fabric_config(fleet_.repos_path());
    xpk_ = std::make_shared<const xpk::XpkCli>(runner_, config_.xpk);
    const auto warm = xpk::warm_up_credentials(*xpk_, *clock_, config_.clusters, 4);
    for (const auto& w : warm) EXPECT_TRUE(w.ok) << w.cluster << ": " << w.error.value_or("");
    kube::KubeProberOptions o;
    o.state_dir = config_.xpk.state_dir;
    o.http = make_curl_http_client();
    o.http_with_ca = [](const std::string& ca_file) {
      CurlHttpOptions h;
      h.ca_file = ca_file;
      return make_curl_http_client(h);
    };
    o.runner = runner_;
    o.clock = clock_;
    kube_ = std::make_shared<kube::KubeProber>(o);
    prober_ = std::make_unique<ClusterProber>(xpk_, kube_, ProbeBackend::kXpk, clock_);
    // `job status` and `job list`: xpk for clusters probed by xpk, the Workload list for kube.
    jobs_ = std::make_unique<XpkWorkloadManager>(xpk_, clock_, nullptr, kube_, ProbeBackend::kXpk);
  }

  ClusterConfig cluster(const std::string& name, ProbeBackend backend) const {
    for (ClusterConfig c : config_.clusters) {
      if (c.name == name) {
        c.probe_backend = backend;
        return c;
      }
    }
    ADD_FAILURE() << "no cluster " << name;
    return {};
  }

  // POST /fleet/v1/<route> with a JSON body: the fleet's control routes.
  HttpResponse control(const std::string& route, const std::string& body) {
    HttpRequest req;
    req.method = "POST";
    req.url = fleet_.url() + "/fleet/v1/" + route;
    req.headers.set("Content-Type", "application/json");
    req.body = body;
    return make_curl_http_client()->send(req);
  }

  testing::LocalFleet fleet_;
  FabricConfig config_;
  std::shared_ptr<CommandRunner> runner_ = make_posix_command_runner();
  std::shared_ptr<Clock> clock_ = make_system_clock();
  std::shared_ptr<const xpk::XpkCli> xpk_;
  std::shared_ptr<kube::KubeProber> kube_;
  std::unique_ptr<ClusterProber> prober_;
  std::unique_ptr<XpkWorkloadManager> jobs_;
};

TEST_F(KubeFleetTest, BothBackendsGiveTheSameProbeOnTheFleet) {
  for (const ClusterConfig& c : config_.clusters) {
    const auto by_xpk = prober_->probe(cluster(c.name, ProbeBackend::kXpk));
    const auto by_kube = prober_->probe(cluster(c.name, ProbeBackend::kKube));
    SCOPED_TRACE(c.name + ": xpk " + by_xpk.error.value_or("ok") + " | kube " +
                 by_kube.error.value_or("ok"));
    EXPECT_EQ(by_kube.reachable, by_xpk.reachable);
    EXPECT_EQ(by_kube.queue_depth, by_xpk.queue_depth);
    EXPECT_EQ(by_kube.running_count, by_xpk.running_count);
    EXPECT_EQ(by_kube.error.has_value(), by_xpk.error.has_value());
  }
  const auto full = prober_->probe(cluster("tpu-a", ProbeBackend::kKube));
  EXPECT_TRUE(full.reachable);
  EXPECT_EQ(full.queue_depth, 3);
  EXPECT_EQ(full.running_count, 1);
  const auto down = prober_->probe(cluster("tpu-down", ProbeBackend::kKube));
  EXPECT_FALSE(down.reachable);
  EXPECT_THAT(down.error.value_or(""), HasSubstr("cluster 'tpu-down' answered 503"));
  EXPECT_THAT(down.error.value_or(""), HasSubstr("Unable to connect to the server"));
  // One plugin run per cluster (four), however many probes.
  EXPECT_EQ(kube_->credentials().runs(), 4);
}

// What the fabric keeps of its own submissions' states (drain, recent_wait) comes from the
// listings the probes read: the kube backend tells the same names and states as xpk's list.
TEST_F(KubeFleetTest, BothBackendsTellTheListingObserverTheSameWorkloads) {
  std::map<std::string, std::vector<WorkloadInfo>> told;
  const ListingObserver observe = [&](const std::string& cluster,
                                      const std::vector<WorkloadInfo>& workloads) {
    auto sorted = workloads;
    std::sort(sorted.begin(), sorted.end(),
              [](const WorkloadInfo& a, const WorkloadInfo& b) { return a.name < b.name; });
    told[cluster] = sorted;
  };
  ClusterProber observed(xpk_, kube_, ProbeBackend::kXpk, clock_, observe);
  ASSERT_TRUE(observed.probe(cluster("tpu-a", ProbeBackend::kXpk)).reachable);
  const auto by_xpk = told.at("tpu-a");
  told.clear();
  ASSERT_TRUE(observed.probe(cluster("tpu-a", ProbeBackend::kKube)).reachable);
  ASSERT_EQ(told.count("tpu-a"), 1u);
  EXPECT_EQ(told.at("tpu-a"), by_xpk);
  EXPECT_EQ(by_xpk.size(), 4u);  // 1 running, 3 queued
  // An unreachable cluster tells nothing.
  told.clear();
  EXPECT_FALSE(observed.probe(cluster("tpu-down", ProbeBackend::kKube)).reachable);
  EXPECT_TRUE(told.empty());
}

// Many random states (seeded): creates, deletes and the passing of time on two clusters; after
// each step both backends agree on the counts and on every workload's state.
TEST_F(KubeFleetTest, ConsistencyOverRandomStates) {
  std::mt19937 random(20261201);
  auto& sim = fleet_.service().simulator();
  const std::vector<std::pair<std::string, std::string>> targets = {{"tpu-b", "tpu-v4-64"},
                                                                    {"gpu-x", "a100-40gb-8"}};
  int created = 0;
  int statuses = 0;
  for (int round = 0; round < 6; ++round) {
    for (const auto& [name, device] : targets) {
      const int creates = std::uniform_int_distribution<int>(0, 3)(random);
      for (int i = 0; i < creates; ++i) {
        fleet::CreateRequest req;
        req.workload = "w" + std::to_string(created++);
        req.device_type = device;
        req.priority = std::vector<std::string>{"low", "medium", "high"}[random() % 3];
        req.env["FLEET_DURATION_S"] = std::to_string(20 + random() % 200);
        if (random() % 3 == 0) req.env["FLEET_OUTCOME"] = "fail";
        ASSERT_EQ(sim.create(name, req, false).result, fleet::CreateResult::kCreated);
      }
      const auto rows = sim.list(name).rows;
      if (!rows.empty() && random() % 4 == 0) sim.remove(name, rows[random() % rows.size()].name);
    }
    fleet_.advance(std::chrono::seconds(random() % 150));
    for (const auto& [name, device] : targets) {
      SCOPED_TRACE("round " + std::to_string(round) + " cluster " + name);
      const auto by_xpk = prober_->probe(cluster(name, ProbeBackend::kXpk));
      const auto by_kube = prober_->probe(cluster(name, ProbeBackend::kKube));
      ASSERT_TRUE(by_xpk.reachable) << by_xpk.error.value_or("");
      ASSERT_TRUE(by_kube.reachable) << by_kube.error.value_or("");
      EXPECT_EQ(by_kube.queue_depth, by_xpk.queue_depth);
      EXPECT_EQ(by_kube.running_count, by_xpk.running_count);

      // The same state for every workload (what `job status` reads).
      const auto listing = xpk::list_workloads(*xpk_, cluster(name, ProbeBackend::kXpk),
                                               std::nullopt, std::chrono::seconds(20));
      ASSERT_TRUE(listing.ok()) << listing.error.value_or("");
      std::map<std::string, std::string> xpk_states;
      for (const auto& w : listing.workloads) xpk_states[w.row.jobset_name] = w.state;
      std::map<std::string, std::string> kube_states;
      for (const auto& w : kube_->list_workloads(cluster(name, ProbeBackend::kKube))) {
        kube_states[w.row.jobset_name] = w.state;
      }
      EXPECT_EQ(kube_states, xpk_states);
      std::map<std::string, std::string> truth;
      for (const auto& row : sim.list(name).rows) truth[row.name] = row.state;
      EXPECT_EQ(kube_states, truth);

      // `job list` and `job status` through the workload manager: the same answers whichever
      // backend the cluster is probed with.
      const auto listed_xpk =
          jobs_->list_workloads(cluster(name, ProbeBackend::kXpk), std::nullopt);
      const auto listed_kube =
          jobs_->list_workloads(cluster(name, ProbeBackend::kKube), std::nullopt);
      EXPECT_EQ(listed_kube, listed_xpk);
      EXPECT_EQ(listed_kube.size(), truth.size());
      std::vector<std::string> names;
      for (const auto& [n, state] : truth) names.push_back(n);
      std::shuffle(names.begin(), names.end(), random);
      if (names.size() > 3) names.resize(3);
      for (const auto& n : names) {
        const WorkloadHandle handle{.workload_name = n, .cluster = name};
        const auto status_xpk = jobs_->get_status(cluster(name, ProbeBackend::kXpk), handle);
        const auto status_kube = jobs_->get_status(cluster(name, ProbeBackend::kKube), handle);
        EXPECT_EQ(status_kube, status_xpk) << n;
        EXPECT_EQ(status_kube.state, truth[n]) << n;
        ++statuses;
      }
      EXPECT_THROW(
          jobs_->get_status(cluster(name, ProbeBackend::kKube), {.workload_name = "never-made"}),
          WorkloadNotFoundError);
    }
  }
  EXPECT_GT(created, 6);
  EXPECT_GT(statuses, 12);
}

// A cluster without Kueue's CRDs: the kube backend says so in one line; the xpk backend fails as
// xpk does there (kubectl has no `workloads` resource type); so does the real kubectl, which
// finds no kueue.x-k8s.io group in discovery. Installing them again brings both back.
TEST_F(KubeFleetTest, AClusterWithoutKueuesCrds) {
  auto& sim = fleet_.service().simulator();
  sim.set_kueue("tpu-b", false);
  const auto by_kube = prober_->probe(cluster("tpu-b", ProbeBackend::kKube));
  EXPECT_FALSE(by_kube.reachable);
  const std::string cause = by_kube.error.value_or("");
  EXPECT_THAT(cause, HasSubstr("cluster 'tpu-b' has no Kueue Workload API (404 on "
                               "/apis/kueue.x-k8s.io/v1beta1/workloads)"));
  EXPECT_THAT(cause, HasSubstr("Kueue's CRDs are not installed"));
  EXPECT_EQ(cause.find('\n'), std::string::npos) << cause;

  const auto by_xpk = prober_->probe(cluster("tpu-b", ProbeBackend::kXpk));
  EXPECT_FALSE(by_xpk.reachable);
  EXPECT_THAT(by_xpk.error.value_or(""), HasSubstr("xpk workload list failed on cluster 'tpu-b'"));
  EXPECT_THAT(by_xpk.error.value_or(""), HasSubstr("have a resource type"));

  // `job status` through the kube backend fails with the same cause.
  try {
    jobs_->get_status(cluster("tpu-b", ProbeBackend::kKube), {.workload_name = "anything"});
    ADD_FAILURE() << "get_status did not throw";
  } catch (const XpkCommandError& e) {
    EXPECT_THAT(e.what(), HasSubstr("has no Kueue Workload API"));
    EXPECT_EQ(e.cluster(), "tpu-b");
  }

  const std::string kubectl = "/usr/bin/kubectl";
  if (std::filesystem::exists(kubectl)) {
    CommandSpec spec;
    spec.argv = {kubectl, "--kubeconfig", config_.xpk.state_dir + "/kube/tpu-b/config",
                 "get",   "workloads",    "-A"};
    spec.timeout = std::chrono::seconds(60);
    const auto got = runner_->run(spec);
    EXPECT_FALSE(got.ok());
    EXPECT_THAT(got.stderr_text,
                HasSubstr("error: the server doesn't have a resource type \"workloads\""));
  }

  // The fleet's control route installs them again.
  const auto answer = control("clusters:kueue", R"({"cluster":"tpu-b","installed":true})");
  ASSERT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(nlohmann::json::parse(answer.body)["kueue"], true);
  EXPECT_TRUE(sim.kueue_installed("tpu-b"));
  EXPECT_TRUE(prober_->probe(cluster("tpu-b", ProbeBackend::kKube)).reachable);
  EXPECT_TRUE(prober_->probe(cluster("tpu-b", ProbeBackend::kXpk)).reachable);
}

// A grant written for Workloads only (RBAC without clusterqueues): the API server answers the
// ClusterQueue list 403. The kube probe still stands on the Workloads, says why it cannot count
// the cluster's capacity, and counts it again once the grant has them.
TEST_F(KubeFleetTest, AGrantWithoutClusterQueuesLeavesCapacityUnknownAndSaysWhy) {
  auto& sim = fleet_.service().simulator();
  const ClusterConfig c = cluster("tpu-b", ProbeBackend::kKube);
  const auto granted = prober_->probe(c);
  ASSERT_TRUE(granted.reachable) << granted.error.value_or("");
  EXPECT_FALSE(granted.capacity.empty());
  EXPECT_FALSE(granted.capacity_error);

  sim.set_cluster_queues_readable("tpu-b", false);
  const nlohmann::json dump = sim.state();  // the state dump says so too
  for (const auto& state : dump["clusters"]) {
    EXPECT_EQ(state["cluster_queues_readable"], state["name"] != "tpu-b") << state["name"];
  }
  const auto refused = prober_->probe(c);
  EXPECT_TRUE(refused.reachable) << refused.error.value_or("");
  EXPECT_EQ(refused.queue_depth, granted.queue_depth);
  EXPECT_EQ(refused.running_count, granted.running_count);
  EXPECT_TRUE(refused.capacity.empty());
  const std::string why = refused.capacity_error.value_or("");
  EXPECT_THAT(why, HasSubstr("cluster 'tpu-b' answered 403 to the ClusterQueue list"));
  EXPECT_THAT(why, HasSubstr("cannot list resource \"clusterqueues\" in API group "
                             "\"kueue.x-k8s.io\""));
  // Another cluster's grant is its own.
  EXPECT_FALSE(prober_->probe(cluster("tpu-a", ProbeBackend::kKube)).capacity.empty());

  const std::string kubectl = "/usr/bin/kubectl";
  if (std::filesystem::exists(kubectl)) {
    CommandSpec spec;
    spec.argv = {kubectl, "--kubeconfig", config_.xpk.state_dir + "/kube/tpu-b/config", "get",
                 "clusterqueues"};
    spec.timeout = std::chrono::seconds(60);
    const auto got = runner_->run(spec);
    EXPECT_FALSE(got.ok());
    EXPECT_THAT(got.stderr_text,
                HasSubstr("Error from server (Forbidden): clusterqueues.kueue.x-k8s.io is "
                          "forbidden: User \"falcon@example.com\" cannot list resource "
                          "\"clusterqueues\""));
    spec.argv = {kubectl, "--kubeconfig", config_.xpk.state_dir + "/kube/tpu-b/config",
                 "get",   "workloads",    "-A"};
    EXPECT_TRUE(runner_->run(spec).ok()) << "Workloads stay readable";
  }

  // The fleet's control route grants them again.
  const auto answer = control("clusters:clusterQueues", R"({"cluster":"tpu-b","readable":true})");
  ASSERT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(nlohmann::json::parse(answer.body)["cluster_queues_readable"], true);
  const auto again = prober_->probe(c);
  EXPECT_EQ(again.capacity, granted.capacity);
  EXPECT_FALSE(again.capacity_error);
  EXPECT_EQ(control("clusters:clusterQueues", R"({"cluster":"tpu-b","readable":"no"})").status,
            400);
}

TEST_F(KubeFleetTest, RequestsWithoutTheTokenAre401) {
  const ClusterConfig c = cluster("tpu-b", ProbeBackend::kKube);
  // The kube backend passes; the same request without its bearer token does not.
  ASSERT_TRUE(prober_->probe(c).reachable);
  CurlHttpOptions h;
  h.ca_file = config_.xpk.state_dir + "/kube/tpu-b/ca.crt";
  HttpRequest req;
  req.url = fleet_.service().kube_url() +
            "/fleet/v1/clusters/tpu-b/apis/kueue.x-k8s.io/v1beta1/"
            "workloads";
  EXPECT_EQ(make_curl_http_client(h)->send(req).status, 401);
  req.headers.set("Authorization", "Bearer not-a-fleet-token");
  EXPECT_EQ(make_curl_http_client(h)->send(req).status, 401);
}

TEST_F(KubeFleetTest, KubectlReadsTheFleetsWorkloadsAndJobSets) {
  const std::string kubectl = "/usr/bin/kubectl";
  if (!std::filesystem::exists(kubectl)) GTEST_SKIP() << "no kubectl on this machine";
  const std::string kubeconfig = config_.xpk.state_dir + "/kube/tpu-a/config";
  CommandSpec spec;
  spec.argv = {kubectl, "--kubeconfig", kubeconfig, "get", "workloads", "-A", "-o", "json"};
  spec.timeout = std::chrono::seconds(60);
  const auto got = runner_->run(spec);
  ASSERT_TRUE(got.ok()) << got.stderr_text;
  const auto list = nlohmann::json::parse(got.stdout_text);
  const auto rows = fleet_.service().simulator().list("tpu-a").rows;
  ASSERT_EQ(list["items"].size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& item = list["items"][i];
    EXPECT_EQ(item["kind"], "Workload");
    EXPECT_EQ(item["metadata"]["ownerReferences"][0]["name"], rows[i].name);
    EXPECT_THAT(item["metadata"]["name"].get<std::string>(),
                HasSubstr("jobset-" + rows[i].name + "-"));
    EXPECT_EQ(xpk::map_row_state(kube::workload_row(item)), rows[i].state);
  }

  spec.argv = {kubectl, "--kubeconfig", kubeconfig, "get", "jobsets", "-A"};
  const auto jobsets = runner_->run(spec);
  ASSERT_TRUE(jobsets.ok()) << jobsets.stderr_text;
  EXPECT_THAT(jobsets.stdout_text,
              ::testing::StartsWith("NAMESPACE   NAME        TERMINALSTATE   RESTARTS   "
                                    "COMPLETED   SUSPENDED   AGE\n"));
  EXPECT_THAT(jobsets.stdout_text, HasSubstr("long-run"));
  EXPECT_THAT(jobsets.stdout_text, HasSubstr("waiting-3"));
}

TEST_F(KubeFleetTest, KubectlSeesAnEvictionAndAKilledCluster) {
  const std::string kubectl = "/usr/bin/kubectl";
  if (!std::filesystem::exists(kubectl)) GTEST_SKIP() << "no kubectl on this machine";
  auto& sim = fleet_.service().simulator();
  std::string victim;
  for (const auto& row : sim.list("tpu-a").rows) {
    if (row.state == "RUNNING") victim = row.name;
  }
  ASSERT_FALSE(victim.empty());
  fleet::EvictRequest evict;
  evict.cluster = "tpu-a";
  evict.workload = victim;
  evict.readmit = false;
  sim.evict(evict);

  const std::string kubeconfig = config_.xpk.state_dir + "/kube/tpu-a/config";
  CommandSpec spec;
  spec.argv = {kubectl, "--kubeconfig", kubeconfig, "get", "workloads", "-A", "-o", "json"};
  spec.timeout = std::chrono::seconds(60);
  const auto got = runner_->run(spec);
  ASSERT_TRUE(got.ok()) << got.stderr_text;
  bool seen = false;
  const nlohmann::json listed = nlohmann::json::parse(got.stdout_text);
  for (const auto& item : listed["items"]) {
    if (item["metadata"]["ownerReferences"][0]["name"] != victim) continue;
    seen = true;
    std::vector<std::string> types;
    for (const auto& c : item["status"]["conditions"]) {
      types.push_back(c["type"].get<std::string>() + "=" + c["status"].get<std::string>());
    }
    EXPECT_THAT(types, ::testing::Contains("Evicted=True"));
    EXPECT_THAT(types, ::testing::Contains("Preempted=True"));
    EXPECT_FALSE(item["status"].contains("admission"));
    const auto row = kube::workload_row(item);
    EXPECT_EQ(row.status, "Unknown");
    EXPECT_EQ(xpk::map_row_state(row), "QUEUED");
  }
  EXPECT_TRUE(seen);

  sim.kill_cluster("tpu-a", fleet::KillMode::kKeep);
  const auto down = runner_->run(spec);
  EXPECT_FALSE(down.ok());
  EXPECT_THAT(down.stderr_text, HasSubstr("i/o timeout"));
  sim.revive_cluster("tpu-a");
  EXPECT_TRUE(runner_->run(spec).ok());
}

}  // namespace
}  // namespace falcon
