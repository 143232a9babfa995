// The kube probe backend: Workload objects read as xpk's table reads them, the warmed
// kubeconfig and its exec plugin's cached credential, and every failure's one-line cause.
#include "kube/kube_prober.h"

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kube/exec_credential.h"
#include "kube/kube_client.h"
#include "kube/kubeconfig.h"
#include "kube/manager_api.h"
#include "kube/workload_objects.h"
#include "support/fake_clock.h"
#include "support/fake_command_runner.h"
#include "support/fake_http_client.h"
#include "support/temp_dir.h"
#include "util/time_format.h"

namespace falcon::kube {
namespace {

using nlohmann::json;
using testing::FakeClock;
using testing::FakeCommandRunner;
using testing::FakeHttpClient;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kToken = "ya29.secret-token-value";
constexpr const char* kServer = "https://34.1.2.3";

json tpu_pod_set(int count) {
  return {{"name", "slice-job"},
          {"count", count},
          {"template",
           {{"spec",
             {{"nodeSelector", {{"cloud.google.com/gke-tpu-accelerator", "tpu-v4-podslice"}}},
              {"containers",
               json::array({{{"name", "jax-tpu"},
                             {"resources", {{"limits", {{"google.com/tpu", "4"}}}}}}})}}}}}};
}

json condition(const std::string& type, const std::string& status, const std::string& message,
               const std::string& time) {
  return {{"type", type},
          {"status", status},
          {"reason", type},
          {"message", message},
          {"lastTransitionTime", time}};
}

json workload(const std::string& name, json pod_sets, json status) {
  return {
      {"apiVersion", "kueue.x-k8s.io/v1beta1"},
      {"kind", "Workload"},
      {"metadata",
       {{"name", "jobset-" + name + "-1a2b3"},
        {"namespace", "default"},
        {"creationTimestamp", "2026-06-01T10:00:00Z"},
        {"ownerReferences",
         json::array(
             {{{"apiVersion", "jobset.x-k8s.io/v1alpha2"}, {"kind", "JobSet"}, {"name", name}}})}}},
      {"spec", {{"priorityClassName", "medium"}, {"podSets", std::move(pod_sets)}}},
      {"status", std::move(status)}};
}

json pending(const std::string& name) {
  return workload(name, json::array({tpu_pod_set(4)}),
                  {{"conditions", json::array({condition("QuotaReserved", "False",
                                                         "couldn't assign flavors to pod set "
                                                         "slice-job: insufficient unused quota",
                                                         "2026-06-01T10:00:01Z")})}});
}

// Kueue sets QuotaReserved and Admitted in one pass: equal times, QuotaReserved first.
json running(const std::string& name) {
  return workload(
      name, json::array({tpu_pod_set(4)}),
      {{"admission",
        {{"clusterQueue", "cluster-queue"},
         {"podSetAssignments", json::array({{{"name", "slice-job"}, {"count", 4}}})}}},
       {"conditions",
        json::array(
            {condition("QuotaReserved", "True", "Quota reserved in ClusterQueue cluster-queue",
                       "2026-06-01T10:00:02Z"),
             condition("Admitted", "True", "The workload is admitted", "2026-06-01T10:00:02Z")})}});
}

json finished(const std::string& name, const std::string& message) {
  json w = running(name);
  w["status"]["reclaimablePods"] = json::array({{{"name", "slice-job"}, {"count", 4}}});
  w["status"]["conditions"].push_back(
      condition("Finished", "True", message, "2026-06-01T11:00:00Z"));
  return w;
}

// A ClusterQueue list of one queue with one v4-64 flavor: 64 chips, 32 of them in use.
HttpResponse one_cluster_queue() {
  return testing::json_response(200, R"({
      "kind": "ClusterQueueList", "items": [{"kind": "ClusterQueue",
        "metadata": {"name": "cluster-queue"},
        "spec": {"resourceGroups": [{"coveredResources": ["google.com/tpu"], "flavors": [
          {"name": "1xv4-64", "resources": [{"name": "google.com/tpu", "nominalQuota": "64"}]}]}]},
        "status": {"flavorsUsage": [{"name": "1xv4-64",
          "resources": [{"name": "google.com/tpu", "total": "32"}]}]}}]})");
}

json list_of(std::vector<json> items, const std::string& continue_token = "") {
  json l = {{"apiVersion", "kueue.x-k8s.io/v1beta1"},
            {"kind", "WorkloadList"},
            {"metadata", {{"resourceVersion", "123"}}},
            {"items", items}};
  if (!continue_token.empty()) l["metadata"]["continue"] = continue_token;
  return l;
}

TEST(WorkloadRow, ReadsAnObjectAsXpksTableDoes) {
  const xpk::ListRow r = workload_row(running("train-a"));
  EXPECT_EQ(r.jobset_name, "train-a");
  EXPECT_EQ(r.created_time, "2026-06-01T10:00:00Z");
  EXPECT_EQ(r.priority, "medium");
  EXPECT_EQ(r.vms_needed, "4");
  EXPECT_EQ(r.vms_running, "4");
  EXPECT_EQ(r.vms_done, "<none>");
  // The first of two conditions with the same time, as Python's max() picks.
  EXPECT_EQ(r.status, "QuotaReserved");
  EXPECT_EQ(r.status_message, "Quota reserved in ClusterQueue cluster-queue");
  EXPECT_EQ(r.status_time, "2026-06-01T10:00:02Z");
  EXPECT_EQ(xpk::map_row_state(r), "RUNNING");
}

TEST(WorkloadRow, StatesOfEveryShape) {
  const auto state = [](const json& w) { return xpk::map_row_state(workload_row(w)); };
  EXPECT_EQ(state(pending("p")), "QUEUED");
  EXPECT_EQ(state(finished("ok", "jobset completed successfully")), "COMPLETED");
  EXPECT_EQ(state(finished("bad",
                           "jobset failed due to one or more job failures (first failed "
                           "job: bad-slice-job-0)")),
            "FAILED");
  EXPECT_EQ(workload_row(finished("ok", "x")).vms_done, "4");

  // No conditions yet: <none> everywhere, QUEUED.
  json fresh = workload("fresh", json::array({tpu_pod_set(2)}), json::object());
  EXPECT_EQ(workload_row(fresh).status, "<none>");
  EXPECT_EQ(state(fresh), "QUEUED");

  // A condition type xpk does not know prints Unknown; the latest one wins, whatever its order.
  json requeued = pending("r");
  requeued["status"]["conditions"].push_back(
      condition("Requeued", "True", "Requeued by the scheduler", "2026-06-01T10:00:09Z"));
  std::swap(requeued["status"]["conditions"][0], requeued["status"]["conditions"][1]);
  EXPECT_EQ(workload_row(requeued).status, "Unknown");
  EXPECT_EQ(state(requeued), "QUEUED");

  // A CPU workload: no accelerator pod set, so 0 (a number) once admitted.
  json cpu = running("cpu");
  cpu["spec"]["podSets"][0]["template"] = {{"spec", {{"containers", json::array()}}}};
  EXPECT_EQ(workload_row(cpu).vms_needed, "0");
  EXPECT_EQ(workload_row(cpu).vms_running, "0");
  EXPECT_EQ(state(cpu), "RUNNING");

  // Priority from the pod template when the spec has none; counts given as strings.
  json p = pending("p2");
  p["spec"].erase("priorityClassName");
  p["spec"]["podSets"][0]["template"]["spec"]["priorityClassName"] = "high";
  p["spec"]["podSets"][0]["count"] = "8";
  EXPECT_EQ(workload_row(p).priority, "high");
  EXPECT_EQ(workload_row(p).vms_needed, "8");

  // Not an object at all.
  EXPECT_EQ(workload_row(json(3)).jobset_name, "<none>");
  EXPECT_THROW(classify_workload_list(json::object()), std::invalid_argument);
}

// The page parser keeps what the classification reads and drops the rest: the same rows as from
// the whole objects, with a real API server's managedFields, annotations and container details.
TEST(WorkloadList, ParsingKeepsOnlyWhatTheRowNeedsAndGivesTheSameRows) {
  json gpu = workload("gpu-run", json::array({tpu_pod_set(2)}), json::object());
  gpu["spec"]["podSets"][0]["template"]["spec"] = {
      {"nodeSelector", {{"cloud.google.com/gke-accelerator", "nvidia-a100-80gb"}}},
      {"containers",
       json::array({{{"name", "main"},
                     {"image", "us-docker.pkg.dev/p/r/i:1"},
                     {"command", {"bash", "-c", "python train.py"}},
                     {"env", json::array({{{"name", "A"}, {"value", "1"}}})},
                     {"resources", {{"requests", {{"nvidia.com/gpu", "8"}, {"cpu", "4"}}}}}}})}};
  json cpu = running("cpu-job");
  cpu["spec"]["podSets"][0]["template"]["spec"] = {
      {"containers", json::array({{{"name", "main"}, {"resources", json::object()}}})}};
  std::vector<json> items = {pending("a"), running("b"), finished("c", "jobset failed"), gpu, cpu};
  for (json& item : items) {
    item["metadata"]["managedFields"] = json::array(
        {{{"manager", "kueue"}, {"fieldsV1", {{"f:status", {{"f:conditions", json::object()}}}}}}});
    item["metadata"]["annotations"] = {{"kubectl.kubernetes.io/last-applied", "{...}"}};
    item["metadata"]["labels"] = {{"kueue.x-k8s.io/queue-name", "multislice-queue"}};
  }
  const json list = list_of(items, "next-page");
  const json kept = parse_workload_list(list.dump());
  EXPECT_EQ(kept["metadata"], json({{"continue", "next-page"}}));
  ASSERT_EQ(kept["items"].size(), items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(workload_row(kept["items"][i]), workload_row(items[i]));
    const json& m = kept["items"][i]["metadata"];
    EXPECT_FALSE(m.contains("managedFields"));
    EXPECT_FALSE(m.contains("annotations"));
    EXPECT_FALSE(m.contains("labels"));
    EXPECT_FALSE(kept["items"][i].contains("apiVersion"));
  }
  // Label and resource names below nodeSelector, requests and limits are all kept.
  const json& gpu_spec = kept["items"][3]["spec"]["podSets"][0]["template"]["spec"];
  EXPECT_EQ(gpu_spec["nodeSelector"],
            json({{"cloud.google.com/gke-accelerator", "nvidia-a100-80gb"}}));
  EXPECT_EQ(gpu_spec["containers"][0],
            json({{"name", "main"},
                  {"resources", {{"requests", {{"nvidia.com/gpu", "8"}, {"cpu", "4"}}}}}}));
  EXPECT_EQ(workload_row(kept["items"][3]).vms_needed, "2");
  EXPECT_EQ(workload_row(kept["items"][4]).vms_needed, "0");
  EXPECT_THROW(parse_workload_list("{\"items\": ["), std::invalid_argument);
  EXPECT_EQ(parse_workload_list("[1, {\"kind\": 2}]"), json::array({1, json::object()}));
}

// A Workload that got quota at `reserved` and admission at `admitted` ("" for not yet).
json provisioned(const std::string& name, const std::string& reserved,
                 const std::string& admitted) {
  json w = running(name);
  json conditions = json::array({condition(
      "QuotaReserved", "True", "Quota reserved in ClusterQueue cluster-queue", reserved)});
  if (!admitted.empty()) {
    conditions.push_back(condition("Admitted", "True", "The workload is admitted", admitted));
  } else {
    conditions.push_back(
        condition("Admitted", "False", "The workload has not all checks ready", reserved));
  }
  w["status"]["conditions"] = conditions;
  return w;
}

// Kueue's admission checks (node provisioning) hold a Workload between QuotaReserved and
// Admitted; the delay is the mean of that wait over the most recent Workloads, those still
// waiting counted up to now.
TEST(AdmissionDelay, TheMeanWaitFromQuotaToAdmissionOfTheLastWorkloads) {
  const auto now = *parse_rfc3339("2026-06-01T10:10:00Z");
  // Admitted in the same pass as its quota: no delay.
  EXPECT_EQ(admission_delay_s(list_of({running("a")}), now), 0.0);
  // 60 s and 120 s of provisioning.
  EXPECT_EQ(
      admission_delay_s(list_of({provisioned("a", "2026-06-01T10:00:00Z", "2026-06-01T10:01:00Z"),
                                 provisioned("b", "2026-06-01T10:02:00Z", "2026-06-01T10:04:00Z")}),
                        now),
      90.0);
  // Still waiting: its wait so far (10 min).
  EXPECT_EQ(admission_delay_s(list_of({provisioned("c", "2026-06-01T10:00:00Z", "")}), now), 600.0);
  // Only the most recent `last`: b (admitted 10:04) and c (waiting, now), not a (10:01).
  EXPECT_EQ(
      admission_delay_s(list_of({provisioned("a", "2026-06-01T10:00:00Z", "2026-06-01T10:01:00Z"),
                                 provisioned("b", "2026-06-01T10:02:00Z", "2026-06-01T10:04:00Z"),
                                 provisioned("c", "2026-06-01T10:09:00Z", "")}),
                        now, 2),
      (120.0 + 60.0) / 2);
  // Nothing has quota, or nothing readable: unknown, not 0.
  EXPECT_EQ(admission_delay_s(list_of({pending("p")}), now), std::nullopt);
  EXPECT_EQ(admission_delay_s(list_of({}), now), std::nullopt);
  EXPECT_EQ(admission_delay_s(json::object(), now), std::nullopt);
  EXPECT_EQ(admission_delay_s(list_of({running("a")}), now, 0), std::nullopt);
  EXPECT_EQ(admission_delay_s(list_of({provisioned("bad", "yesterday", "2026-06-01T10:01:00Z"),
                                       provisioned("admitted-before-quota", "2026-06-01T10:05:00Z",
                                                   "2026-06-01T10:01:00Z")}),
                              now),
            std::nullopt);
  // Finished without ever being admitted (evicted while waiting, deleted): no wait to count.
  json gone = provisioned("gone", "2026-06-01T10:00:00Z", "");
  gone["status"]["conditions"].push_back(
      condition("Finished", "True", "jobset failed", "2026-06-01T10:03:00Z"));
  EXPECT_EQ(admission_delay_s(list_of({gone}), now), std::nullopt);
}

TEST(Kubeconfig, ReadsTheCurrentContextsServerCaAndExecPlugin) {
  const std::string text = R"(apiVersion: v1
kind: Config
current-context: gke_p_us-central2_c
contexts:
- name: other
  context: {cluster: other, user: other}
- name: gke_p_us-central2_c
  context: {cluster: gke_p_us-central2_c, user: gke_p_us-central2_c, namespace: team-a}
clusters:
- name: gke_p_us-central2_c
  cluster:
    server: https://34.1.2.3/
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
users:
- name: gke_p_us-central2_c
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: gke-gcloud-auth-plugin
      args: [--verbose]
      env: [{name: A, value: b}]
      provideClusterInfo: true
)";
  const KubeTarget t = parse_kubeconfig(text, "cfg");
  EXPECT_EQ(t.server, "https://34.1.2.3");
  EXPECT_EQ(t.ca_pem, "-----BEGIN CERTIFICATE-----\n");
  EXPECT_EQ(t.namespace_, "team-a");
  ASSERT_TRUE(t.exec.has_value());
  EXPECT_EQ(t.exec->command, "gke-gcloud-auth-plugin");
  EXPECT_EQ(t.exec->args, std::vector<std::string>{"--verbose"});
  EXPECT_EQ(t.exec->env.at("A"), "b");
  EXPECT_TRUE(t.exec->provide_cluster_info);

  EXPECT_THAT([&] { parse_kubeconfig("apiVersion: v1\n", "cfg"); },
              ::testing::ThrowsMessage<std::runtime_error>(HasSubstr("cfg: no current-context")));
  std::string bad = text;
  bad.replace(bad.find("user: gke_p_us-central2_c, namespace"), 25, "user: nobody, namespace");
  EXPECT_THAT([&] { parse_kubeconfig(bad, "cfg"); },
              ::testing::ThrowsMessage<std::runtime_error>(
                  HasSubstr("the current context names user 'nobody', which is not in users")));
}

TEST(ExecCredential, ParsesTokenAndExpiryAndNeverQuotesTheToken) {
  const auto t = parse_exec_credential(
      R"({"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1",)"
      R"("spec":{},"status":{"token":"abc","expirationTimestamp":"2026-06-01T11:00:00Z"}})");
  EXPECT_EQ(t.token, "abc");
  EXPECT_EQ(t.expires, parse_rfc3339("2026-06-01T11:00:00Z"));
  EXPECT_THROW(parse_exec_credential("{}"), std::runtime_error);
  // A kind that is not a string is not an ExecCredential (it threw the JSON library's type_error).
  EXPECT_THAT([] { parse_exec_credential(R"({"kind":{"expmp":"x"}})"); },
              ::testing::ThrowsMessage<std::runtime_error>(
                  HasSubstr("its output is not an ExecCredential")));
  EXPECT_THROW(parse_exec_credential(R"([1])"), std::runtime_error);
  try {
    parse_exec_credential(
        R"({"kind":"ExecCredential","status":{"token":"sekrit","expirationTimestamp":"soon"}})");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("bad status.expirationTimestamp"));
    EXPECT_THAT(e.what(), Not(HasSubstr("sekrit")));
  }
}

class KubeProberTest : public ::testing::Test {
 protected:
  KubeProberTest() {
    cluster_.name = "tpu-v4-prod";
    cluster_.project = "p";
    cluster_.zone = "us-central2-b";
    cluster_.cluster_id = "c";
    cluster_.probe_timeout_s = 15;
    cluster_.default_namespace = "team-a";
    runner_->attach_clock(clock_);
    write_kubeconfig(kServer, /*with_ca=*/false);
    runner_->on({"gke-gcloud-auth-plugin"}, plugin_response(clock_->now() + std::chrono::hours(1)));
    // After each Workload list the prober asks for the ClusterQueues (capacity): none here.
    http_->on("GET", "/clusterqueues", [](const HttpRequest&) {
      return testing::json_response(200, R"({"kind":"ClusterQueueList","items":[]})");
    });
  }

  void write_kubeconfig(const std::string& server, bool with_ca) {
    const auto dir = tmp_.path() / "state" / "kube" / cluster_.name;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "config")
        << "apiVersion: v1\nkind: Config\ncurrent-context: ctx\ncontexts:\n- name: ctx\n"
        << "  context: {cluster: ctx, user: ctx}\nclusters:\n- name: ctx\n  cluster:\n"
        << "    server: " << server << "\n"
        << (with_ca ? "    certificate-authority-data: Q0EK\n" : "")
        << "users:\n- name: ctx\n  user:\n    exec:\n"
        << "      apiVersion: client.authentication.k8s.io/v1beta1\n"
        << "      command: gke-gcloud-auth-plugin\n      provideClusterInfo: true\n";
  }

  FakeCommandRunner::Response plugin_response(std::chrono::system_clock::time_point expires) {
    return FakeCommandRunner::ok(
        json{{"kind", "ExecCredential"},
             {"apiVersion", "client.authentication.k8s.io/v1beta1"},
             {"spec", json::object()},
             {"status", {{"token", kToken}, {"expirationTimestamp", format_iso8601(expires)}}}}
            .dump());
  }

  KubeProber prober() {
    KubeProberOptions o;
    o.state_dir = tmp_.path() / "state";
    o.http = http_;
    o.http_with_ca = [this](const std::string& ca_file) {
      ca_files_.push_back(ca_file);
      return http_;
    };
    o.runner = runner_;
    o.clock = clock_;
    return KubeProber(std::move(o));
  }

  void serve(json list) {
    http_->on("GET", "/apis/kueue.x-k8s.io/v1beta1/workloads",
              [list](const HttpRequest&) { return testing::json_response(200, list.dump()); });
  }

  testing::TempDir tmp_;
  ClusterConfig cluster_;
  std::shared_ptr<FakeHttpClient> http_ = std::make_shared<FakeHttpClient>();
  std::shared_ptr<FakeCommandRunner> runner_ = std::make_shared<FakeCommandRunner>();
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
  std::vector<std::string> ca_files_;
};

TEST_F(KubeProberTest, ListsEveryNamespaceAndCountsAsTheXpkBackendDoes) {
  serve(list_of({pending("a"), pending("b"), running("c"), finished("d", "jobset failed"),
                 finished("e", "jobset completed successfully")}));
  const KubeProber p = prober();
  const ClusterProbeResult r = p.probe(cluster_);
  EXPECT_TRUE(r.reachable) << r.error.value_or("");
  EXPECT_EQ(r.cluster, "tpu-v4-prod");
  EXPECT_EQ(r.queue_depth, 2);
  EXPECT_EQ(r.running_count, 1);
  EXPECT_EQ(r.error, std::nullopt);
  // c, d and e were admitted in the pass that reserved their quota.
  EXPECT_EQ(r.admission_delay_s, 0.0);

  const auto requests = http_->requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].url, "https://34.1.2.3/apis/kueue.x-k8s.io/v1beta1/workloads?limit=500");
  EXPECT_EQ(requests[0].headers.get("Authorization"), std::string("Bearer ") + kToken);
  EXPECT_EQ(requests[0].timeout, std::chrono::seconds(15));
  // Then the ClusterQueues, for capacity (none in this answer: capacity stays unknown).
  EXPECT_EQ(requests[1].url, "https://34.1.2.3/apis/kueue.x-k8s.io/v1beta1/clusterqueues");
  EXPECT_EQ(requests[1].headers.get("Authorization"), std::string("Bearer ") + kToken);
  EXPECT_TRUE(r.capacity.empty());
  // The plugin got the cluster's server, as provideClusterInfo asks.
  const auto calls = runner_->calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_THAT(calls[0].env.at("KUBERNETES_EXEC_INFO"), HasSubstr(kServer));
}

TEST_F(KubeProberTest, ReadsCapacityFromTheClusterQueuesAndStandsWithoutThem) {
  http_->on("GET", "/workloads", [](const HttpRequest&) {
    return testing::json_response(200, list_of({running("c")}).dump());
  });
  http_->enqueue("GET", "/clusterqueues", one_cluster_queue());
  http_->enqueue("GET", "/clusterqueues",
                 testing::json_response(403, R"({"kind":"Status","message":"forbidden"})"));
  const KubeProber p = prober();
  const auto r = p.probe(cluster_);
  ASSERT_TRUE(r.reachable) << r.error.value_or("");
  ASSERT_EQ(r.capacity.size(), 1u);
  EXPECT_EQ(r.capacity[0].device_type, "v4-64");
  EXPECT_EQ(r.capacity[0].nominal, 64);
  EXPECT_EQ(r.capacity[0].used, 32);
  EXPECT_FALSE(r.capacity_error);
  // No RBAC grant for clusterqueues: the probe stands, capacity unknown, and it says why.
  const auto forbidden = p.probe(cluster_);
  EXPECT_TRUE(forbidden.reachable);
  EXPECT_EQ(forbidden.running_count, 1);
  EXPECT_TRUE(forbidden.capacity.empty());
  EXPECT_EQ(forbidden.capacity_error,
            "the Kubernetes API of cluster 'tpu-v4-prod' answered 403 to the ClusterQueue list: "
            "forbidden");
  EXPECT_FALSE(forbidden.error);
  // It travels with the probe (the API, a recorded decision).
  const nlohmann::json j = forbidden;
  EXPECT_EQ(j["capacity_error"], *forbidden.capacity_error);
  EXPECT_EQ(j.get<ClusterProbeResult>(), forbidden);
  EXPECT_FALSE(nlohmann::json(r).contains("capacity_error"));

  // Twice unreachable in passing: the same.
  http_->enqueue_transport_error("GET", "/clusterqueues", "Connection refused");
  http_->enqueue_transport_error("GET", "/clusterqueues", "Connection refused");
  const auto refused = p.probe(cluster_);
  EXPECT_TRUE(refused.reachable);
  EXPECT_THAT(refused.capacity_error.value_or(""),
              HasSubstr("Kubernetes API server https://34.1.2.3 of cluster 'tpu-v4-prod': "
                        "Connection refused"));
}

TEST_F(KubeProberTest, TheCredentialIsReusedUntilItsExpiryThenRefreshedOnce) {
  serve(list_of({}));
  const KubeProber p = prober();
  EXPECT_TRUE(p.probe(cluster_).reachable);
  EXPECT_TRUE(p.probe(cluster_).reachable);
  EXPECT_EQ(runner_->calls().size(), 1u);
  clock_->advance(std::chrono::minutes(59) + std::chrono::seconds(45));  // within the skew
  EXPECT_TRUE(p.probe(cluster_).reachable);
  EXPECT_EQ(runner_->calls().size(), 2u);
  EXPECT_EQ(p.credentials().runs(), 2);
}

TEST_F(KubeProberTest, FollowsContinueTokens) {
  http_->enqueue("GET", "limit=500&continue=a%2Bb",
                 testing::json_response(200, list_of({running("z")}).dump()));
  http_->enqueue("GET", "workloads?limit=500",
                 testing::json_response(200, list_of({pending("y")}, "a+b").dump()));
  const auto r = prober().probe(cluster_);
  EXPECT_EQ(r.queue_depth, 1);
  EXPECT_EQ(r.running_count, 1);
}

TEST_F(KubeProberTest, GivesTheClustersAdmissionDelayAcrossPages) {
  http_->enqueue(
      "GET", "limit=500&continue=next",
      testing::json_response(
          200, list_of({provisioned("b", "2026-06-01T10:02:00Z", "2026-06-01T10:03:30Z")}).dump()));
  http_->enqueue("GET", "workloads?limit=500",
                 testing::json_response(
                     200, list_of({provisioned("a", "2026-06-01T10:00:00Z", "2026-06-01T10:00:30Z"),
                                   pending("p")},
                                  "next")
                              .dump()));
  const auto r = prober().probe(cluster_);
  EXPECT_TRUE(r.reachable) << r.error.value_or("");
  EXPECT_EQ(r.admission_delay_s, (30.0 + 90.0) / 2);
  EXPECT_EQ(r.running_count, 2);
  EXPECT_EQ(r.queue_depth, 1);
}

// A list that does not end, by a continue token it gave before or by new ones without end, is
// an unreachable cluster whose error says so, not a probe that loops or grows until its deadline.
TEST_F(KubeProberTest, AListThatDoesNotEndIsBounded) {
  http_->on("GET", "workloads?limit=500", [](const HttpRequest& req) {
    const bool again = req.url.find("continue=") != std::string::npos;
    return testing::json_response(200, list_of({running(again ? "b" : "a")}, "same").dump());
  });
  auto r = prober().probe(cluster_);
  EXPECT_FALSE(r.reachable);
  EXPECT_THAT(
      r.error.value_or(""),
      HasSubstr("the list of workloads of cluster 'tpu-v4-prod' does not advance: page 2 gave "
                "a continue token it gave before"));
  EXPECT_EQ(http_->count("GET", "workloads"), 2u);

  auto endless = std::make_shared<testing::FakeHttpClient>();
  http_ = endless;
  int page = 0;
  endless->on("GET", "workloads?limit=500", [&](const HttpRequest&) {
    return testing::json_response(200, list_of({}, "p" + std::to_string(++page)).dump());
  });
  r = prober().probe(cluster_);
  EXPECT_FALSE(r.reachable);
  EXPECT_THAT(r.error.value_or(""), HasSubstr("goes on past 4000 pages"));
  EXPECT_EQ(page, static_cast<int>(kMaxListPages));
}

// Each page of the Workload list and the ClusterQueue list asks for at most kMaxAnswer bytes; a
// page past it fails the probe with an error naming the bound.
TEST_F(KubeProberTest, EachAnswerIsBoundedInSize) {
  http_->on("GET", "/clusterqueues",
            [](const HttpRequest&) { return testing::json_response(200, R"({"items":[]})"); });
  serve(list_of({running("a")}));
  EXPECT_TRUE(prober().probe(cluster_).reachable);
  const auto requests = http_->requests();
  ASSERT_EQ(requests.size(), 2u);  // the Workload list, then the ClusterQueues
  for (const HttpRequest& r : requests) EXPECT_EQ(r.max_body_bytes, kMaxAnswer) << r.url;

  http_ = std::make_shared<FakeHttpClient>();
  http_->on("GET", "workloads?limit=500", [](const HttpRequest&) -> HttpResponse {
    throw HttpTransportError("the answer is larger than 67108864 bytes", false, true);
  });
  const auto r = prober().probe(cluster_);
  EXPECT_FALSE(r.reachable);
  EXPECT_THAT(r.error.value_or(""),
              HasSubstr("cluster 'tpu-v4-prod' answered a page of "
                        "/apis/kueue.x-k8s.io/v1beta1/workloads larger than 67108864 bytes"));
}

TEST_F(KubeProberTest, A401RefreshesTheTokenOnceThenSaysHowToFix) {
  http_->on("GET", "", [](const HttpRequest&) {
    return testing::json_response(401, R"({"kind":"Status","message":"Unauthorized","code":401})");
  });
  const auto r = prober().probe(cluster_);
  EXPECT_FALSE(r.reachable);
  EXPECT_THAT(*r.error, HasSubstr("rejected the credential (401 Unauthorized: Unauthorized)"));
  EXPECT_THAT(*r.error, HasSubstr("falcon cluster warm-up"));
  EXPECT_THAT(*r.error, Not(HasSubstr(kToken)));
  EXPECT_EQ(runner_->calls().size(), 2u);  // one refresh
  EXPECT_EQ(http_->requests().size(), 2u);
}

TEST_F(KubeProberTest, A403FallsBackToTheClustersNamespaceThenNamesTheGrant) {
  http_->on("GET", "/v1beta1/workloads", [](const HttpRequest&) {
    return testing::json_response(
        403, R"({"kind":"Status","message":"workloads.kueue.x-k8s.io is forbidden"})");
  });
  http_->on("GET", "/namespaces/team-a/workloads", [](const HttpRequest&) {
    return testing::json_response(200, list_of({pending("q")}).dump());
  });
  EXPECT_EQ(prober().probe(cluster_).queue_depth, 1);

  http_->on("GET", "/namespaces/team-a/workloads", [](const HttpRequest&) {
    return testing::json_response(403, R"({"kind":"Status","message":"forbidden here too"})");
  });
  const auto r = prober().probe(cluster_);
  EXPECT_FALSE(r.reachable);
  EXPECT_THAT(*r.error, HasSubstr("forbids listing workloads.kueue.x-k8s.io (403 Forbidden: "
                                  "forbidden here too): grant the identity get/list"));
}

TEST_F(KubeProberTest, NoKueueCrdsIsA404WithItsCause) {
  http_->on("GET", "", [](const HttpRequest&) {
    return testing::json_response(
        404, R"({"kind":"Status","message":"the server could not find the requested resource"})");
  });
  const auto r = prober().probe(cluster_);
  EXPECT_FALSE(r.reachable);
  EXPECT_THAT(*r.error, HasSubstr("cluster 'tpu-v4-prod' has no Kueue Workload API (404"));
  EXPECT_THAT(*r.error, HasSubstr("Kueue's CRDs are not installed"));
}

TEST_F(KubeProberTest, UnreachableAndTimedOut) {
  // Refused twice: the second try (below) finds the server down as well.
  for (int i = 0; i < 2; ++i) {
    http_->enqueue_transport_error("GET", "",
                                   "Failed to connect to 34.1.2.3 port 443: Connection refused");
  }
  auto r = prober().probe(cluster_);
  EXPECT_FALSE(r.reachable);
  EXPECT_EQ(http_->count("GET", "/workloads"), 2u);
  EXPECT_EQ(*r.error,
            "Kubernetes API server https://34.1.2.3 of cluster 'tpu-v4-prod' is "
            "unreachable: Failed to connect to 34.1.2.3 port 443: Connection refused");
  http_->enqueue_transport_error("GET", "", "Operation timed out", /*timed_out=*/true);
  r = prober().probe(cluster_);
  EXPECT_EQ(*r.error, "probe timed out after 15s");  // as the xpk backend words it
  EXPECT_EQ(http_->count("GET", "/workloads"), 3u);  // a timeout is not tried again

  // A plugin that takes the whole deadline times the probe out too.
  runner_->on({"gke-gcloud-auth-plugin"}, FakeCommandRunner::takes(std::chrono::seconds(20)));
  r = prober().probe(cluster_);
  EXPECT_FALSE(r.reachable);
  EXPECT_THAT(*r.error, HasSubstr("credential plugin gke-gcloud-auth-plugin timed out"));
}

TEST_F(KubeProberTest, OtherStatusesAndBadBodiesAreUnreachableWithTheServersWords) {
  for (int i = 0; i < 2; ++i) {  // a 503 is tried once more
    http_->enqueue("GET", "",
                   testing::json_response(503, R"({"kind":"Status","message":"etcd down"})"));
  }
  auto r = prober().probe(cluster_);
  EXPECT_THAT(*r.error,
              HasSubstr("answered 503 to /apis/kueue.x-k8s.io/v1beta1/workloads: etcd down"));
  http_->enqueue("GET", "", testing::json_response(200, "<html>"));
  r = prober().probe(cluster_);
  EXPECT_THAT(*r.error, HasSubstr("with a body that is not JSON"));
  http_->enqueue("GET", "", testing::json_response(200, R"({"kind":"Status"})"));
  EXPECT_THAT(*prober().probe(cluster_).error, HasSubstr("with no items list"));
}

// A GET that fails in passing (408, 429, 500, 502, 503, 504, a connection refused or broken) is
// tried once more,
// after the answer's Retry-After when it gives one that ends within the probe's deadline: one
// 503 from an API server does not take a healthy cluster out of a decision.
TEST_F(KubeProberTest, AFailureInPassingIsTriedOnceMore) {
  serve(list_of({running("c")}));
  const KubeProber p = prober();
  const auto status = [](int code) {
    return testing::json_response(code, R"({"kind":"Status","message":"try again"})");
  };
  for (int code : {408, 429, 500, 502, 503, 504}) {
    http_->enqueue("GET", "/workloads", status(code));
    const auto r = p.probe(cluster_);
    EXPECT_TRUE(r.reachable) << code << ": " << r.error.value_or("");
    EXPECT_EQ(r.running_count, 1) << code;
  }
  EXPECT_EQ(http_->count("GET", "/workloads"), 12u);

  http_->enqueue_transport_error("GET", "/workloads", "Recv failure: Connection reset by peer");
  EXPECT_TRUE(p.probe(cluster_).reachable);
  EXPECT_EQ(http_->count("GET", "/workloads"), 14u);

  // The ClusterQueue list too: capacity is read on the second try.
  http_->enqueue("GET", "/clusterqueues", status(503));
  http_->enqueue("GET", "/clusterqueues", one_cluster_queue());
  const auto with_capacity = p.probe(cluster_);
  ASSERT_EQ(with_capacity.capacity.size(), 1u);
  EXPECT_EQ(with_capacity.capacity[0].used, 32);

  // Retry-After is waited for (the fake clock moves instead of sleeping), and the second try
  // gets what is left of the deadline.
  HttpHeaders later;
  later.set("Retry-After", "4");
  HttpResponse busy = status(429);
  busy.headers = later;
  http_->enqueue("GET", "/workloads", busy);
  const auto before = clock_->steady_now();
  const std::size_t sent = http_->requests().size();
  EXPECT_TRUE(p.probe(cluster_).reachable);
  EXPECT_EQ(clock_->steady_now() - before, std::chrono::seconds(4));
  EXPECT_EQ(http_->requests()[sent + 1].timeout, std::chrono::seconds(11));

  // A Retry-After past the deadline (15 s) is not waited for: the answer stands.
  later.set("Retry-After", "60");
  busy.headers = later;
  http_->enqueue("GET", "/workloads", busy);
  auto r = p.probe(cluster_);
  EXPECT_FALSE(r.reachable);
  EXPECT_THAT(*r.error, HasSubstr("answered 429"));

  // Twice in a row is the answer; other failures are not tried again.
  http_->enqueue("GET", "/workloads", status(503));
  http_->enqueue("GET", "/workloads", status(503));
  EXPECT_THAT(*p.probe(cluster_).error, HasSubstr("answered 503"));
  // A status that will not pass (a bad request; 501 and 505: the server cannot, ever) is the
  // answer at once.
  for (int code : {400, 501, 505}) {
    const std::size_t gets = http_->count("GET", "/workloads");
    http_->enqueue("GET", "/workloads", status(code));
    EXPECT_THAT(*p.probe(cluster_).error, HasSubstr("answered " + std::to_string(code)));
    EXPECT_EQ(http_->count("GET", "/workloads"), gets + 1) << code;
  }
}

TEST_F(KubeProberTest, PluginFailureAndMissingKubeconfigSayWhatToDo) {
  runner_->on({"gke-gcloud-auth-plugin"},
              FakeCommandRunner::fails(1, "noise\nERROR: gcloud auth login required\n"));
  auto r = prober().probe(cluster_);
  EXPECT_EQ(*r.error,
            "cluster 'tpu-v4-prod': credential plugin gke-gcloud-auth-plugin failed "
            "(exit code 1): ERROR: gcloud auth login required");
  std::filesystem::remove(tmp_.path() / "state" / "kube" / cluster_.name / "config");
  r = prober().probe(cluster_);
  EXPECT_FALSE(r.reachable);
  EXPECT_THAT(*r.error, HasSubstr("cluster 'tpu-v4-prod' (probe.backend kube): no kubeconfig at"));
  EXPECT_THAT(*r.error, HasSubstr("run `falcon cluster warm-up`"));
  EXPECT_TRUE(http_->requests().empty());
}

// With a warm-up hook (the fabric's: gcloud get-credentials for that cluster), a missing
// kubeconfig is fetched by the probe that needs it, at most once per cluster a minute.
TEST_F(KubeProberTest, AMissingKubeconfigIsWarmedUpOnceAWhile) {
  serve(json{{"items", json::array()}});
  std::filesystem::remove(tmp_.path() / "state" / "kube" / cluster_.name / "config");
  int calls = 0;
  bool works = false;
  KubeProberOptions o;
  o.state_dir = tmp_.path() / "state";
  o.http = http_;
  o.runner = runner_;
  o.clock = clock_;
  o.warm_up = [&](const ClusterConfig& c) -> std::optional<std::string> {
    ++calls;
    EXPECT_EQ(c.name, cluster_.name);
    if (!works) return "gcloud: ERROR: (gcloud.container.clusters.get-credentials) 403";
    write_kubeconfig(kServer, /*with_ca=*/false);
    return std::nullopt;
  };
  KubeProber p(std::move(o));
  auto r = p.probe(cluster_);
  EXPECT_FALSE(r.reachable);
  EXPECT_THAT(*r.error, HasSubstr("no kubeconfig at"));
  EXPECT_THAT(*r.error, HasSubstr("fetching its credentials failed (gcloud: ERROR: "
                                  "(gcloud.container.clusters.get-credentials) 403)"));
  EXPECT_EQ(calls, 1);
  works = true;
  r = p.probe(cluster_);  // within the minute: not asked again
  EXPECT_FALSE(r.reachable);
  EXPECT_EQ(calls, 1);
  clock_->advance(std::chrono::seconds(60));
  r = p.probe(cluster_);
  EXPECT_TRUE(r.reachable) << r.error.value_or("");
  EXPECT_EQ(calls, 2);
  r = p.probe(cluster_);  // it exists now: no more warm-ups
  EXPECT_TRUE(r.reachable);
  EXPECT_EQ(calls, 2);
}

// The kubeconfig is read once while it stays the same; a rewritten one (another warm-up) is read
// again, and a new server gets a token of its own.
TEST_F(KubeProberTest, ARewrittenKubeconfigIsReadAgainAndANewServerGetsItsOwnToken) {
  serve(list_of({}));
  const KubeProber p = prober();
  EXPECT_TRUE(p.probe(cluster_).reachable);
  EXPECT_TRUE(p.probe(cluster_).reachable);
  EXPECT_EQ(p.credentials().runs(), 1);
  write_kubeconfig("https://35.9.9.99:8443", /*with_ca=*/false);
  EXPECT_TRUE(p.probe(cluster_).reachable);
  EXPECT_EQ(p.credentials().runs(), 2);
  const auto requests = http_->requests();
  ASSERT_EQ(requests.size(), 6u);  // each probe: the Workload list, then the ClusterQueues
  EXPECT_THAT(requests[3].url, ::testing::StartsWith("https://34.1.2.3/apis/"));
  EXPECT_THAT(requests[4].url, ::testing::StartsWith("https://35.9.9.99:8443/apis/"));
  std::filesystem::remove(tmp_.path() / "state" / "kube" / cluster_.name / "config");
  const auto r = p.probe(cluster_);
  EXPECT_FALSE(r.reachable);
  EXPECT_THAT(r.error.value_or(""), HasSubstr("run `falcon cluster warm-up`"));
}

TEST_F(KubeProberTest, ACertificateAuthorityGoesToAClientTrustingIt) {
  write_kubeconfig(kServer, /*with_ca=*/true);
  serve(list_of({}));
  const KubeProber p = prober();
  EXPECT_TRUE(p.probe(cluster_).reachable);
  EXPECT_TRUE(p.probe(cluster_).reachable);
  ASSERT_EQ(ca_files_.size(), 1u);  // one client per CA, reused
  std::ifstream in(ca_files_[0]);
  std::string ca((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(ca, "CA\n");
}

// The options of a client of https://34.1.2.3 with a static token, whose requests `http` answers.
KubeClientOptions token_client_options(const testing::TempDir& tmp,
                                       const std::shared_ptr<testing::FakeHttpClient>& http) {
  const auto kubeconfig =
      tmp.write("config",
                "apiVersion: v1\nkind: Config\ncurrent-context: ctx\ncontexts:\n- name: ctx\n"
                "  context: {cluster: ctx, user: ctx}\nclusters:\n- name: ctx\n  cluster:\n"
                "    server: https://34.1.2.3\nusers:\n- name: ctx\n  user:\n    token: t0k3n\n");
  return {.kubeconfig = kubeconfig,
          .runner = std::make_shared<testing::FakeCommandRunner>(),
          .clock = std::make_shared<testing::FakeClock>(),
          .ca_dir = tmp.path(),
          .http_for_ca = [http](const std::string&) { return http; }};
}

KubeClient token_client(const testing::TempDir& tmp,
                        const std::shared_ptr<testing::FakeHttpClient>& http) {
  return KubeClient(token_client_options(tmp, http));
}

// A watch whose server sends one endless line (no newline) ends with an error naming the
// bound instead of buffering without limit.
TEST(KubeClientWatch, ALineLongerThanTheBoundEndsTheWatch) {
  testing::TempDir tmp;
  auto http = std::make_shared<testing::FakeHttpClient>();
  std::size_t sent = 0;
  http->on("GET", "watch=true", [&](const HttpRequest& req) {
    const std::string chunk(1u << 20, 'x');
    while (sent <= kMaxWatchLine + chunk.size() && req.on_body(chunk)) sent += chunk.size();
    return testing::json_response(200, "");
  });
  KubeClient client = token_client(tmp, http);
  int lines = 0;
  EXPECT_THAT(
      [&] {
        client.watch(
            "/apis/kueue.x-k8s.io/v1beta2/workloads?watch=true",
            [&](std::string_view) { return ++lines > 0; }, [] { return false; },
            std::chrono::seconds(5));
      },
      ::testing::ThrowsMessage<KubeError>(::testing::HasSubstr("longer than 16777216 bytes")));
  EXPECT_EQ(lines, 0);
  EXPECT_LE(sent, kMaxWatchLine + (1u << 20));  // it stopped reading at the bound
}

// A request that is not a watch asks for at most kMaxAnswer bytes; an answer past it is a
// KubeError saying so, not an unreachable server.
TEST(KubeClientRequest, AnAnswerIsBoundedAndTooLargeIsItsOwnError) {
  testing::TempDir tmp;
  auto http = std::make_shared<testing::FakeHttpClient>();
  std::size_t asked = 0;
  http->on("GET", "/workloads", [&](const HttpRequest& req) -> HttpResponse {
    asked = req.max_body_bytes;
    throw HttpTransportError(
        "GET https://34.1.2.3/apis/x: the answer is larger than 67108864 bytes", false, true);
  });
  KubeClient client = token_client(tmp, http);
  try {
    client.request("GET", "/apis/kueue.x-k8s.io/v1beta2/workloads");
    ADD_FAILURE() << "expected KubeError";
  } catch (const KubeError& e) {
    EXPECT_EQ(e.status(), 0);
    EXPECT_EQ(e.reason(), kTooLarge);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("larger than 67108864 bytes"));
    EXPECT_THAT(e.what(), ::testing::Not(::testing::HasSubstr("unreachable")));
  }
  EXPECT_EQ(asked, kMaxAnswer);
}

// The manager's client tries a GET once more after a 503; a PATCH, which changes something,
// never: its failure is the caller's to judge.
TEST(KubeClientRequest, AGetIsTriedOnceMoreAfterA503AndAPatchNever) {
  testing::TempDir tmp;
  auto http = std::make_shared<testing::FakeHttpClient>();
  const auto unavailable = testing::json_response(
      503, R"({"kind":"Status","reason":"ServiceUnavailable","message":"restarting"})");
  http->enqueue("GET", "/workloads", unavailable);
  http->on("GET", "/workloads", [](const HttpRequest&) {
    return testing::json_response(200, R"({"kind":"WorkloadList","items":[]})");
  });
  http->enqueue("PATCH", "/workloads/w/status", unavailable);
  KubeClient client = token_client(tmp, http);
  EXPECT_EQ(client.request("GET", "/apis/kueue.x-k8s.io/v1beta2/workloads").status, 200);
  EXPECT_EQ(http->count("GET", "/workloads"), 2u);
  try {
    client.request("PATCH", "/apis/kueue.x-k8s.io/v1beta2/namespaces/d/workloads/w/status", "{}",
                   "application/merge-patch+json");
    ADD_FAILURE() << "expected KubeError";
  } catch (const KubeError& e) {
    EXPECT_EQ(e.status(), 503);
    EXPECT_EQ(e.reason(), "ServiceUnavailable");
  }
  EXPECT_EQ(http->count("PATCH"), 1u);
}

// The dispatcher's list of the manager's Workloads is bounded the same way.
TEST(KubeManagerList, AListThatDoesNotAdvanceIsAKubeError) {
  testing::TempDir tmp;
  auto http = std::make_shared<testing::FakeHttpClient>();
  http->on("GET", "/workloads?limit=500", [](const HttpRequest&) {
    return testing::json_response(
        200, R"({"kind":"WorkloadList","metadata":{"continue":"same"},"items":[]})");
  });
  const auto manager = make_kube_manager_api(
      std::make_shared<KubeClient>(token_client_options(tmp, http)), "v1beta2", 60);
  EXPECT_THAT([&] { manager->list_workloads(); },
              ::testing::ThrowsMessage<KubeError>(::testing::HasSubstr("does not advance")));
  EXPECT_EQ(http->count("GET", "/workloads"), 2u);
}

}  // namespace
}  // namespace falcon::kube
