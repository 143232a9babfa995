// The MultiKueue manager's Kubernetes API (tools/fleet/manager_api.h) as the real kubectl uses
// it: a FleetService started in process (manual clock) with a `manager:` section, a kubeconfig
// for the manager's cluster written by the real fleet-gcloud (`container clusters
// get-credentials`, its exec plugin asking the fleet for tokens), then kubectl get of the four
// kinds on v1beta2 and v1beta1, create -f, patch --subresource=status (the resourceVersion
// precondition: 409; nominating an admitted Workload: 422), delete, get -w (streamed ADDED and
// MODIFIED events, the watch ended by the fleet's stop), a 410 for a resourceVersion older than
// the history kept, the Kueue ConfigMap, and the routing rules (401 first, 404, 405).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "falcon/command_runner.h"
#include "fleet/fleet_service.h"
#include "fleet/manager.h"
#include "support/temp_dir.h"

extern char** environ;

namespace falcon::fleet {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr const char* kFleetGcloud = FALCON_BINARY_DIR "/bin/fleet-gcloud";
constexpr const char* kKubectl = "/usr/bin/kubectl";

// The manager `mk` (no capacity) over workers w1..w3 with one tpu-v4-8 slot each. `hogs`: a
// run holds w<i>'s slot for 100 s x i. `w4`: a fourth worker whose API does not answer.
std::string fleet_yaml(const std::string& dispatcher, bool hogs, bool w4) {
  std::string yaml = R"(
time_scale: 0
defaults: {duration_s: 100, steps: 5}
clusters:
  mk: {project: p, zone: us-central2-b, cluster_id: mk, capacity: {}}
)";
  for (int i = 1; i <= 3; ++i) {
    yaml += fmt::format(
        "  w{0}:\n    project: p\n    zone: us-central2-b\n    cluster_id: w{0}\n"
        "    capacity: {{tpu-v4-8: 1}}\n",
        i);
    if (hogs) {
      yaml += fmt::format("    workloads: [{{name: hog, device_type: tpu-v4-8, duration_s: {}}}]\n",
                          100 * i);
    }
  }
  std::string workers = "w1, w2, w3";
  if (w4) {
    yaml +=
        "  w4:\n    project: p\n    zone: us-central2-b\n    cluster_id: w4\n"
        "    capacity: {tpu-v4-8: 1}\n    behaviour: {unreachable: true}\n";
    workers += ", w4";
  }
  yaml += fmt::format("manager: {{cluster: mk, workers: [{}]{}}}\n", workers,
                      dispatcher.empty() ? "" : ", dispatcher: " + dispatcher);
  return yaml;
}

// What a user writes for `kubectl create -f`: a Workload for one v4-8 pod that runs 1000 s.
std::string workload_yaml(const std::string& name) {
  return fmt::format(R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: {}
  labels:
    falcon.dev/accelerator-type: v4-8
    team: research
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
          - {{name: FLEET_DURATION_S, value: "1000"}}
)",
                     name);
}

class ManagerApiTest : public ::testing::Test {
 protected:
  void start(const std::string& yaml) {
    if (!std::filesystem::exists(kKubectl)) GTEST_SKIP() << "no kubectl on this machine";
    fleet_ = std::make_unique<FleetService>(parse_fleet_config(yaml, "manager-api.yaml"),
                                            FleetServiceOptions{});
    fleet_->start();
    manager_ = fleet_->simulator().manager();
    ASSERT_NE(manager_, nullptr);
    // The kubeconfig a user gets for the manager's cluster: fleet-gcloud's get-credentials.
    CommandSpec spec;
    spec.argv = {kFleetGcloud,  "container",           "clusters", "get-credentials", "mk",
                 "--project=p", "--zone=us-central2-b"};
    spec.env = {{"FALCON_FLEET_URL", fleet_->url()}, {"KUBECONFIG", kubeconfig()}};
    const CommandResult got = runner_->run(spec);
    ASSERT_TRUE(got.ok()) << got.stderr_text;
  }

  std::string kubeconfig() const { return (dir_.path() / "kube" / "config").string(); }

  std::vector<std::string> kubectl_argv(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {kKubectl, "--kubeconfig", kubeconfig(), "--cache-dir",
                                     (dir_.path() / "kube-cache").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  CommandResult kubectl(const std::vector<std::string>& args) {
    CommandSpec spec;
    spec.argv = kubectl_argv(args);
    return runner_->run(spec);
  }

  // `kubectl ... -o json`, parsed; fails the test when kubectl does.
  json kubectl_json(std::vector<std::string> args) {
    args.insert(args.end(), {"-o", "json"});
    const CommandResult r = kubectl(args);
    EXPECT_TRUE(r.ok()) << r.stderr_text;
    return json::parse(r.ok() ? r.stdout_text : "{}");
  }

  CommandResult create(const std::string& name) {
    const std::string file = dir_.write(name + ".yaml", workload_yaml(name)).string();
    return kubectl({"create", "-f", file});
  }

  CommandResult patch_status(const std::string& name, const json& patch) {
    return kubectl(
        {"patch", "workload", name, "--subresource=status", "--type=merge", "-p", patch.dump()});
  }

  // The workers whose simulation holds a workload named `name` (unreachable ones too), sorted.
  std::vector<std::string> holders(const std::string& name) {
    std::vector<std::string> out;
    const json state = fleet_->simulator().state();
    for (const json& c : state["clusters"]) {
      for (const json& w : c["workloads"]) {
        if (w["name"] == name) out.push_back(c["name"]);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string state_on(const std::string& worker, const std::string& name) {
    for (const WorkloadRow& row : fleet_->simulator().list(worker).rows) {
      if (row.name == name) return row.state;
    }
    return "";
  }

  void advance(std::chrono::seconds d) {
    fleet_->clock().advance(d);
    fleet_->simulator().advance();
  }

  // A token of the clusters' API, as the exec plugin gets it.
  std::string token() {
    httplib::Client client(fleet_->url());
    const auto res = client.Post("/fleet/v1/kube:token", "{}", "application/json");
    EXPECT_TRUE(res && res->status == 200);
    return res ? json::parse(res->body)["status"]["token"].get<std::string>() : "";
  }

  std::unique_ptr<httplib::SSLClient> kube_client() {
    const std::string url = fleet_->kube_url();  // https://127.0.0.1:<port>
    const std::string host_port = url.substr(url.find("//") + 2);
    auto client =
        std::make_unique<httplib::SSLClient>(host_port.substr(0, host_port.find(':')),
                                             std::stoi(host_port.substr(host_port.find(':') + 1)));
    client->enable_server_certificate_verification(false);
    client->set_read_timeout(30, 0);
    return client;
  }

  testing::TempDir dir_;
  std::shared_ptr<CommandRunner> runner_ = make_posix_command_runner();
  std::unique_ptr<FleetService> fleet_;
  MultiKueueManager* manager_ = nullptr;
};

// A kubectl that streams (get -w): its stdout read line by line as it comes.
class StreamingKubectl {
 public:
  explicit StreamingKubectl(const std::vector<std::string>& argv) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int rc = posix_spawn(&pid_, argv[0].c_str(), &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    fd_ = fds[0];
    if (rc != 0) throw std::runtime_error("posix_spawn kubectl");
  }
  ~StreamingKubectl() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      wait();
    }
    if (fd_ >= 0) close(fd_);
  }

  // The next line, or nullopt when the stream ends or nothing comes within `limit`.
  std::optional<std::string> line(std::chrono::seconds limit = std::chrono::seconds(30)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string out = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return out;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
      char chunk[4096];
      const ssize_t n = read(fd_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  // Waits for the process; its exit code (-1 when it was killed).
  int wait() {
    int status = 0;
    if (pid_ <= 0) return exit_code_;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return exit_code_;
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  int exit_code_ = -1;
  std::string buffer_;
};

TEST_F(ManagerApiTest, KubectlGetsTheFourKindsOnBothVersions) {
  start(fleet_yaml("", false, true));
  ASSERT_TRUE(create("job").ok());
  for (const std::string version : {"", ".v1beta1.kueue.x-k8s.io"}) {
    SCOPED_TRACE(version.empty() ? "v1beta2 (preferred)" : version);
    const std::string api_version =
        version.empty() ? "kueue.x-k8s.io/v1beta2" : "kueue.x-k8s.io/v1beta1";
    const json checks = kubectl_json({"get", "admissionchecks" + version});
    ASSERT_EQ(checks["items"].size(), 1u);
    EXPECT_EQ(checks["items"][0]["apiVersion"], api_version);
    EXPECT_EQ(checks["items"][0]["metadata"]["name"], "multikueue");
    EXPECT_EQ(checks["items"][0]["spec"]["controllerName"], "kueue.x-k8s.io/multikueue");
    const json configs = kubectl_json({"get", "multikueueconfigs" + version});
    ASSERT_EQ(configs["items"].size(), 1u);
    EXPECT_EQ(configs["items"][0]["apiVersion"], api_version);
    EXPECT_EQ(configs["items"][0]["spec"]["clusters"], json({"w1", "w2", "w3", "w4"}));
    const json clusters = kubectl_json({"get", "multikueueclusters" + version});
    ASSERT_EQ(clusters["items"].size(), 4u);
    EXPECT_EQ(clusters["items"][3]["apiVersion"], api_version);
    EXPECT_EQ(clusters["items"][3]["metadata"]["name"], "w4");
    EXPECT_EQ(clusters["items"][3]["status"]["conditions"][0]["status"], "False");
    EXPECT_EQ(clusters["items"][3]["status"]["conditions"][0]["reason"], "ClientConnectionFailed");
    const json workloads = kubectl_json({"get", "workloads" + version, "-A"});
    ASSERT_EQ(workloads["items"].size(), 1u);
    EXPECT_EQ(workloads["items"][0]["apiVersion"], api_version);
    EXPECT_EQ(workloads["items"][0]["metadata"]["namespace"], "default");
    EXPECT_EQ(workloads["items"][0]["spec"]["queueName"], "user-queue");
    // One object by name.
    const json one = kubectl_json({"get", "workload" + version, "job"});
    EXPECT_EQ(one["apiVersion"], api_version);
    EXPECT_EQ(one["kind"], "Workload");
  }

  // The printer columns (as=Table).
  const CommandResult table = kubectl({"get", "multikueueclusters"});
  ASSERT_TRUE(table.ok()) << table.stderr_text;
  EXPECT_THAT(table.stdout_text, StartsWith("NAME   CONNECTED   AGE\n"));
  EXPECT_THAT(table.stdout_text, ::testing::ContainsRegex("\nw1 +True +[0-9]+s\n"));
  EXPECT_THAT(table.stdout_text, ::testing::ContainsRegex("\nw4 +False +[0-9]+s\n"));
  const CommandResult wl = kubectl({"get", "wl", "-A"});
  ASSERT_TRUE(wl.ok()) << wl.stderr_text;
  EXPECT_THAT(
      wl.stdout_text,
      StartsWith("NAMESPACE   NAME   QUEUE        RESERVED IN     ADMITTED   FINISHED   AGE\n"
                 "default     job    user-queue   cluster-queue"));

  // Selectors.
  EXPECT_EQ(kubectl_json({"get", "wl", "-l", "team=research"})["items"].size(), 1u);
  EXPECT_EQ(kubectl_json({"get", "wl", "-l", "team!=research"})["items"].size(), 0u);
  EXPECT_EQ(kubectl_json({"get", "wl", "--field-selector", "metadata.name=nope"})["items"].size(),
            0u);
  const CommandResult missing = kubectl({"get", "wl", "nope"});
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(
      missing.stderr_text,
      HasSubstr("Error from server (NotFound): workloads.kueue.x-k8s.io \"nope\" not found"));

  // kubectl delete (which then waits for it to be gone).
  const CommandResult deleted = kubectl({"delete", "workload", "job"});
  ASSERT_TRUE(deleted.ok()) << deleted.stderr_text;
  EXPECT_THAT(deleted.stdout_text, HasSubstr("workload.kueue.x-k8s.io \"job\" deleted"));
  EXPECT_EQ(kubectl_json({"get", "wl", "-A"})["items"].size(), 0u);
}

TEST_F(ManagerApiTest, AnExternalDispatcherNominatesThroughKubectlPatch) {
  start(fleet_yaml("falcon.dev/external", true, false));
  // Kueue's configuration names the dispatcher.
  const CommandResult cm =
      kubectl({"get", "configmap", "-n", "kueue-system", "kueue-manager-config", "-o",
               R"(jsonpath={.data.controller_manager_config\.yaml})"});
  ASSERT_TRUE(cm.ok()) << cm.stderr_text;
  EXPECT_THAT(cm.stdout_text, HasSubstr("multiKueue:\n  dispatcherName: falcon.dev/external\n"));

  const CommandResult created = create("job");
  ASSERT_TRUE(created.ok()) << created.stderr_text;
  EXPECT_EQ(created.stdout_text, "workload.kueue.x-k8s.io/job created\n");
  const CommandResult again = create("job");
  EXPECT_FALSE(again.ok());
  EXPECT_THAT(again.stderr_text, HasSubstr("Error from server (AlreadyExists)"));
  json wl = kubectl_json({"get", "workload", "job"});
  EXPECT_FALSE(wl["status"].contains("nominatedClusterNames"));  // nobody nominates but us
  EXPECT_EQ(holders("job"), std::vector<std::string>{});
  const std::string rv = wl["metadata"]["resourceVersion"];

  // A stale resourceVersion is a precondition that fails: 409, nothing changes.
  const CommandResult stale = patch_status(
      "job",
      {{"metadata", {{"resourceVersion", "1"}}}, {"status", {{"nominatedClusterNames", {"w2"}}}}});
  EXPECT_FALSE(stale.ok());
  EXPECT_THAT(stale.stderr_text,
              HasSubstr("Error from server (Conflict): Operation cannot be fulfilled on "
                        "workloads.kueue.x-k8s.io \"job\": the object has been modified"));
  EXPECT_EQ(holders("job"), std::vector<std::string>{});

  // The current one: w2 is nominated and gets a copy (queued behind its hog until 200 s).
  const CommandResult nominated = patch_status(
      "job",
      {{"metadata", {{"resourceVersion", rv}}}, {"status", {{"nominatedClusterNames", {"w2"}}}}});
  ASSERT_TRUE(nominated.ok()) << nominated.stderr_text;
  EXPECT_EQ(nominated.stdout_text, "workload.kueue.x-k8s.io/job patched\n");
  wl = kubectl_json({"get", "workload", "job"});
  EXPECT_EQ(wl["status"]["nominatedClusterNames"], json({"w2"}));
  EXPECT_FALSE(wl["status"].contains("clusterName"));
  EXPECT_EQ(wl["status"]["admissionChecks"][0]["state"], "Pending");
  EXPECT_EQ(holders("job"), std::vector<std::string>{"w2"});
  EXPECT_EQ(state_on("w2", "job"), "QUEUED");

  // w2 frees at 200 s: the copy is admitted there, the Workload with it.
  advance(std::chrono::seconds(250));
  wl = kubectl_json({"get", "workload", "job"});
  EXPECT_EQ(wl["status"]["clusterName"], "w2");
  EXPECT_FALSE(wl["status"].contains("nominatedClusterNames"));
  EXPECT_EQ(wl["status"]["admissionChecks"][0]["state"], "Ready");
  EXPECT_EQ(wl["status"]["admissionChecks"][0]["message"], "The workload was admitted on \"w2\"");
  EXPECT_EQ(wl["status"]["conditions"][1]["type"], "Admitted");
  EXPECT_EQ(state_on("w2", "job"), "RUNNING");
  const CommandResult table = kubectl({"get", "wl", "job"});
  EXPECT_THAT(table.stdout_text,
              ::testing::ContainsRegex("\njob +user-queue +cluster-queue +True "));

  // Nominating an admitted Workload is Invalid (Kueue's rule): 422.
  const CommandResult late = patch_status("job", {{"status", {{"nominatedClusterNames", {"w1"}}}}});
  EXPECT_FALSE(late.ok());
  EXPECT_THAT(late.stderr_text,
              HasSubstr("The Workload \"job\" is invalid: status: Invalid value: \"object\": "
                        "clusterName and nominatedClusterNames are mutually exclusive"));
  EXPECT_EQ(holders("job"), std::vector<std::string>{"w2"});

  // The same through v1beta1, and a JSON patch.
  const CommandResult json_patch = kubectl(
      {"patch", "workloads.v1beta1.kueue.x-k8s.io", "job", "--subresource=status", "--type=json",
       "-p", R"([{"op":"add","path":"/status/nominatedClusterNames","value":["w1"]}])"});
  EXPECT_FALSE(json_patch.ok());
  EXPECT_THAT(json_patch.stderr_text, HasSubstr("is invalid"));

  // A Workload the manager cannot map is refused with the field at fault.
  const std::string bad =
      dir_.write("bad.yaml",
                 "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata:\n"
                 "  name: bad\nspec:\n  podSets:\n  - count: 1\n    template:\n"
                 "      spec:\n        containers: [{name: c, image: i}]\n")
          .string();
  const CommandResult refused = kubectl({"create", "-f", bad});
  EXPECT_FALSE(refused.ok());
  EXPECT_THAT(
      refused.stderr_text,
      HasSubstr("The Workload \"bad\" is invalid: spec.podSets[0].template.spec.nodeSelector: "
                "Required value"));
}

TEST_F(ManagerApiTest, AllAtOnceCopiesToEveryActiveWorkerAndDeletesTheLosers) {
  start(fleet_yaml("", true, true));
  const CommandResult created = create("job");
  ASSERT_TRUE(created.ok()) << created.stderr_text;
  json wl = kubectl_json({"get", "workload", "job"});
  EXPECT_EQ(wl["status"]["nominatedClusterNames"], json({"w1", "w2", "w3", "w4"}));
  // Copies on the three active workers, queued behind their hogs; none on w4 (not Active).
  EXPECT_EQ(holders("job"), (std::vector<std::string>{"w1", "w2", "w3"}));
  for (const char* w : {"w1", "w2", "w3"}) EXPECT_EQ(state_on(w, "job"), "QUEUED") << w;

  // w1 frees first (100 s): its copy wins, w2's and w3's are deleted.
  advance(std::chrono::seconds(150));
  wl = kubectl_json({"get", "workload", "job"});
  EXPECT_EQ(wl["status"]["clusterName"], "w1");
  EXPECT_FALSE(wl["status"].contains("nominatedClusterNames"));
  EXPECT_EQ(wl["status"]["admissionChecks"][0]["state"], "Ready");
  EXPECT_EQ(holders("job"), (std::vector<std::string>{"w1"}));
  EXPECT_EQ(state_on("w1", "job"), "RUNNING");
  const json state = fleet_->simulator().state()["manager"]["workloads"][0];
  EXPECT_EQ(state["remote_created"], 3);
  EXPECT_EQ(state["remote_deleted"], 2);

  // Finished is mirrored when the copy ends (1000 s of run).
  advance(std::chrono::seconds(1000));
  wl = kubectl_json({"get", "workload", "job"});
  EXPECT_EQ(wl["status"]["conditions"].back()["type"], "Finished");
  EXPECT_EQ(wl["status"]["conditions"].back()["reason"], "Succeeded");
  EXPECT_EQ(holders("job"), std::vector<std::string>{});
}

TEST_F(ManagerApiTest, KubectlWatchStreamsChangesAndEndsWhenTheFleetStops) {
  start(fleet_yaml("falcon.dev/external", false, false));
  ASSERT_TRUE(create("first").ok());
  StreamingKubectl watch(kubectl_argv({"get", "workloads", "--watch", "--output-watch-events"}));
  EXPECT_THAT(watch.line().value_or("<none>"),
              ::testing::MatchesRegex("EVENT +NAME +QUEUE +RESERVED IN +ADMITTED +FINISHED +AGE"));
  // The list came first: what changes from now on is after its resourceVersion, so the watch
  // kubectl opens from there sees it whenever it connects.
  EXPECT_THAT(watch.line().value_or("<none>"),
              ::testing::MatchesRegex("ADDED +first +user-queue +cluster-queue +[0-9]+s"));
  ASSERT_TRUE(create("second").ok());
  EXPECT_THAT(watch.line().value_or("<none>"),
              ::testing::MatchesRegex("ADDED +second +user-queue +cluster-queue +[0-9]+s"));
  // A nomination (MODIFIED), then the copy on the free w3 admitted at once (MODIFIED: Admitted).
  ASSERT_TRUE(patch_status("second", {{"status", {{"nominatedClusterNames", {"w3"}}}}}).ok());
  EXPECT_THAT(watch.line().value_or("<none>"),
              ::testing::MatchesRegex("MODIFIED +second +user-queue +cluster-queue +[0-9]+s"));
  EXPECT_THAT(
      watch.line().value_or("<none>"),
      ::testing::MatchesRegex("MODIFIED +second +user-queue +cluster-queue +True +[0-9]+s"));
  ASSERT_TRUE(kubectl({"delete", "workload", "first"}).ok());
  EXPECT_THAT(watch.line().value_or("<none>"), ::testing::MatchesRegex("DELETED +first +.*"));

  // The fleet stops with the watch open: the stream ends at once and stop() does not wait.
  const auto before = std::chrono::steady_clock::now();
  fleet_->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(5));
  EXPECT_EQ(watch.line(), std::nullopt);  // end of stream
  EXPECT_EQ(watch.wait(), 0);
}

TEST_F(ManagerApiTest, AWatchFromAResourceVersionOlderThanTheHistoryIsGone) {
  start(fleet_yaml("falcon.dev/external", false, false));
  manager_->set_event_history(2);
  for (const char* name : {"a", "b", "c", "d"}) ASSERT_TRUE(create(name).ok());
  // kubectl --raw takes the path from the host: the cluster's prefix is part of it.
  const std::string prefix = "/fleet/v1/clusters/mk";
  const CommandResult gone =
      kubectl({"get", "--raw",
               prefix + "/apis/kueue.x-k8s.io/v1beta2/workloads?watch=true&resourceVersion=1"});
  ASSERT_TRUE(gone.ok()) << gone.stderr_text;
  const json event = json::parse(gone.stdout_text);
  EXPECT_EQ(event["type"], "ERROR");
  EXPECT_EQ(event["object"]["kind"], "Status");
  EXPECT_EQ(event["object"]["code"], 410);
  EXPECT_EQ(event["object"]["reason"], "Expired");
  EXPECT_THAT(event["object"]["message"].get<std::string>(), HasSubstr("too old resource version"));

  // From a version still kept: the changes after it, then (bookmarks allowed) a BOOKMARK at
  // the end of timeoutSeconds.
  const std::string rv =
      kubectl_json({"get", "workload", "d"})["metadata"]["resourceVersion"].get<std::string>();
  const std::uint64_t before_d = std::stoull(rv) - 1;
  const CommandResult replay =
      kubectl({"get", "--raw",
               fmt::format("{}/apis/kueue.x-k8s.io/v1beta1/namespaces/default/workloads?watch=true&"
                           "resourceVersion={}&timeoutSeconds=1&allowWatchBookmarks=true",
                           prefix, before_d)});
  ASSERT_TRUE(replay.ok()) << replay.stderr_text;
  std::vector<json> events;
  std::istringstream lines(replay.stdout_text);
  for (std::string line; std::getline(lines, line);) events.push_back(json::parse(line));
  ASSERT_EQ(events.size(), 2u) << replay.stdout_text;
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[0]["object"]["metadata"]["name"], "d");
  EXPECT_EQ(events[0]["object"]["apiVersion"], "kueue.x-k8s.io/v1beta1");
  EXPECT_EQ(events[1]["type"], "BOOKMARK");
  EXPECT_EQ(events[1]["object"]["metadata"]["resourceVersion"], rv);
}

TEST_F(ManagerApiTest, RoutesAnswer401FirstThen404And405) {
  start(fleet_yaml("", false, false));
  auto client = kube_client();
  const std::string path =
      "/fleet/v1/clusters/mk/apis/kueue.x-k8s.io/v1beta2/namespaces/default/"
      "workloads";
  const std::string body = json::parse(R"({"metadata":{"name":"x"}})").dump();
  // No token: 401 on every method, on the manager's cluster and on one the fleet lacks.
  auto res = client->Get(path.c_str());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  res = client->Post(path.c_str(), body, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  res = client->Post(
      "/fleet/v1/clusters/ghost/apis/kueue.x-k8s.io/v1beta2/namespaces/default/"
      "workloads",
      body, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);

  const httplib::Headers auth = {{"Authorization", "Bearer " + token()}};
  res = client->Post(
      "/fleet/v1/clusters/ghost/apis/kueue.x-k8s.io/v1beta2/namespaces/default/"
      "workloads",
      auth, body, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  // A worker serves no writes.
  res = client->Post(
      "/fleet/v1/clusters/w1/apis/kueue.x-k8s.io/v1beta1/namespaces/default/"
      "workloads",
      auth, body, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
  EXPECT_EQ(json::parse(res->body)["reason"], "MethodNotAllowed");
  // The manager refuses writes of what is read-only, and a patch of another type.
  res = client->Delete("/fleet/v1/clusters/mk/apis/kueue.x-k8s.io/v1beta2/multikueueclusters/w1",
                       auth);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
  res = client->Post(path.c_str(), auth, R"({"metadata":{"name":"x"},"spec":{}})",
                     "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 422);
  EXPECT_EQ(json::parse(res->body)["details"]["causes"][0]["field"], "spec.podSets");
  res = client->Patch((path + "/x/status").c_str(), auth, "{}", "application/apply-patch+yaml");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 415);
  // Discovery: v1beta2 preferred on the manager's cluster; a worker keeps v1beta1 alone.
  res = client->Get("/fleet/v1/clusters/mk/apis", auth);
  ASSERT_TRUE(res);
  json groups = json::parse(res->body)["groups"];
  const auto kueue = std::find_if(groups.begin(), groups.end(),
                                  [](const json& g) { return g["name"] == "kueue.x-k8s.io"; });
  ASSERT_NE(kueue, groups.end());
  EXPECT_EQ((*kueue)["preferredVersion"]["version"], "v1beta2");
  EXPECT_EQ((*kueue)["versions"].size(), 2u);
  res = client->Get("/fleet/v1/clusters/w1/apis/kueue.x-k8s.io/v1beta2", auth);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  // The manager's cluster unreachable: 503 with kubectl's words.
  fleet_->simulator().kill_cluster("mk", KillMode::kKeep);
  res = client->Get(path.c_str(), auth);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_THAT(res->body, HasSubstr("Unable to connect to the server"));
}

}  // namespace
}  // namespace falcon::fleet
