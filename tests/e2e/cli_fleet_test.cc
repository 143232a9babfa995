// End to end: the falcon binary against the local fleet (in this process, on loopback), which
// falcon reaches through real fleet-xpk subprocesses and real HTTP.
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "fleet/kubeconfig.h"

#include "falcon/http_client.h"
#include "falcon/state_store.h"
#include "support/local_fleet.h"
#include "support/run_falcon.h"

namespace falcon {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class CliFleetTest : public ::testing::Test {
 protected:
  CommandResult falcon(std::vector<std::string> args) {
    args.insert(args.begin(), {"--config", fleet_.repos_path()});
    return testing::run_falcon(args);
  }
  nlohmann::json falcon_json(std::vector<std::string> args, int expected_exit = 0) {
    args.insert(args.begin(), "--json");
    const CommandResult r = falcon(args);
    EXPECT_EQ(r.exit_code, expected_exit) << r.stderr_text;
    return nlohmann::json::parse(r.stdout_text);
  }
  std::string submit(const std::string& name, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args{"job",    "submit", "--accelerator", "tpu-v4-64",
                                  "--name", name,     "--image",       "gcr.io/f/b:1"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--", "python3", "train.py", "--lr", "3e-4 warm"});
    const auto j = falcon_json(args);
    return j["handle"]["cluster"].get<std::string>();
  }
  testing::LocalFleet fleet_;
};

// Storage fencing (issue 27): what a copy of a managed workload runs before a checkpoint
// write, against the fleet's Cloud Storage, without any repos.yaml (a job has none).
TEST_F(CliFleetTest, FenceCheckPassesTheCurrentEpochAndExits8OnceANewerOneExists) {
  testing::TempDir dir;
  const std::string token = dir.write("token", fleet_.service().token() + "\n").string();
  std::map<std::string, std::string> env = {{"STORAGE_EMULATOR_HOST", fleet_.url()},
                                            {"FALCON_ACCESS_TOKEN_FILE", token},
                                            {"FALCON_FENCE_URI", ""},
                                            {"FALCON_FENCE_EPOCH", ""}};
  const auto fence = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"fence", "check"});
    return testing::run_falcon(args, env);
  };
  CommandResult r = fence({});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("no fence"));

  // The supervisor wrote epoch 2 (a replacement started).
  HttpRequest put;
  put.method = "POST";
  put.url = fleet_.url() + "/upload/storage/v1/b/fence-bkt/o?uploadType=media&name=f/train/epoch";
  put.headers.set("Authorization", "Bearer " + fleet_.service().token());
  put.body = "2\n";
  ASSERT_EQ(make_curl_http_client()->send(put).status, 200);

  env["FALCON_FENCE_URI"] = "gs://fence-bkt/f/train/epoch";
  env["FALCON_FENCE_EPOCH"] = "2";  // the replacement: current
  r = fence({});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("holds epoch 2, this copy's is 2"));
  env["FALCON_FENCE_EPOCH"] = "1";  // the old copy, still running behind a partition
  r = fence({});
  EXPECT_EQ(r.exit_code, 8) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, HasSubstr("fenced: gs://fence-bkt/f/train/epoch holds epoch 2"));
  r = testing::run_falcon({"--json", "fence", "check"}, env);
  EXPECT_EQ(r.exit_code, 8);
  // Flags instead of the environment; bad values are usage errors naming what is wrong.
  r = fence({"--uri", "gs://fence-bkt/f/train/epoch", "--epoch", "3"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(fence({"--uri", "gs://fence-bkt/f/train/epoch"}).exit_code, 2);
  EXPECT_EQ(fence({"--uri", "s3://x/y", "--epoch", "1"}).exit_code, 2);
  env["FALCON_FENCE_EPOCH"] = "one";
  r = fence({});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("FALCON_FENCE_EPOCH"));
  env["FALCON_FENCE_EPOCH"] = "";
  r = fence({});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("FALCON_FENCE_URI is set but FALCON_FENCE_EPOCH is not"));
}

TEST_F(CliFleetTest, ClusterStatusReachableUnreachableUnknown) {
  auto r = falcon({"cluster", "status", "tpu-a"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("reachable"));
  const auto j = falcon_json({"cluster", "status", "tpu-a"});
  EXPECT_EQ(j["queue_depth"], 3);
  EXPECT_EQ(j["running_count"], 1);
  EXPECT_TRUE(j["error"].is_null());

  r = falcon({"cluster", "status", "tpu-down"});
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_THAT(r.stdout_text, HasSubstr("unreachable"));
  EXPECT_EQ(falcon({"cluster", "status", "nope"}).exit_code, 3);
}

TEST_F(CliFleetTest, ClusterSelectShowsTheProbeTableAndTheReason) {
  const auto r = falcon({"cluster", "select", "--accelerator", "tpu-v4-64"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("tpu-down"));
  EXPECT_THAT(r.stdout_text, HasSubstr("unreachable"));
  EXPECT_THAT(r.stdout_text, HasSubstr("selected tpu-b: reachable, queue_depth=0 <= max=5"));
  // Without --explain, the table still says why a reachable cluster was skipped (issue 31).
  EXPECT_THAT(r.stdout_text, HasSubstr("VERDICT"));
  EXPECT_THAT(r.stdout_text, HasSubstr("skipped: queue full: queue_depth=3 > max=2"));
  const auto j = falcon_json({"cluster", "select", "--accelerator", "tpu-v4-64"});
  EXPECT_EQ(j["selected_cluster"], "tpu-b");
  EXPECT_EQ(j["probe_results"].size(), 3u);
}

TEST_F(CliFleetTest, ClusterSelectExplainsEveryCandidateAndReplaysTheDecision) {
  auto r = falcon({"cluster", "select", "--accelerator", "tpu-v4-64", "--explain"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("policy priority: lowest slot priority wins"));
  EXPECT_THAT(r.stdout_text, HasSubstr("CONTRIBUTION"));
  // Signals the priority policy does not count are named once, not listed per cluster (issue 31).
  EXPECT_THAT(r.stdout_text, HasSubstr("not counted by this policy, not shown (--json has them)"));
  EXPECT_THAT(r.stdout_text, Not(HasSubstr("drain_per_min ")));
  EXPECT_THAT(r.stdout_text, HasSubstr("skipped: queue full: queue_depth=3 > max=2"));
  EXPECT_THAT(r.stdout_text, HasSubstr("skipped: unreachable"));
  EXPECT_THAT(r.stdout_text, HasSubstr("selected: priority 2, queue_depth 0"));
  EXPECT_THAT(r.stdout_text, HasSubstr("selected tpu-b: reachable, queue_depth=0 <= max=5"));

  const auto j = falcon_json({"cluster", "select", "--accelerator", "tpu-v4-64"});
  EXPECT_EQ(j["policy"], "priority");
  ASSERT_EQ(j["scores"].size(), 3u);
  EXPECT_EQ(j["scores"][0]["cluster"], "tpu-a");
  EXPECT_EQ(j["scores"][0]["eligible"], false);
  EXPECT_EQ(j["scores"][0]["signals"]["queue_depth"], 3);
  EXPECT_EQ(j["scores"][2]["rank"], 1);
  EXPECT_GT(j["scores"][2]["signals"]["health_samples"].get<int>(), 1);  // the earlier select

  // Replayed from the file under another policy: tpu-b is still the only eligible one.
  const auto file = std::filesystem::path(fleet_.state_dir()).parent_path() / "decision.json";
  std::ofstream(file) << j.dump();
  r = falcon({"cluster", "select", "--replay", file.string(), "--policy", "score"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("policy score: score = "));
  EXPECT_THAT(r.stdout_text, HasSubstr("recorded: tpu-b (policy priority"));
  EXPECT_THAT(r.stdout_text, HasSubstr("replayed: selected tpu-b: reachable"));
  const auto replay =
      falcon_json({"cluster", "select", "--replay", file.string(), "--policy", "least-wait"});
  EXPECT_EQ(replay["changed"], false);
  EXPECT_EQ(replay["recorded"]["selection_id"], j["selection_id"]);
  EXPECT_EQ(replay["replayed"]["policy"], "least-wait");
  EXPECT_EQ(replay["replayed"]["scores"][0]["verdict"],
            "skipped: queue full: queue_depth=3 > max=2");
  // A probe that reached its cluster but not its ClusterQueues says so under the table.
  auto unread = j;
  for (auto& p : unread["probe_results"]) {
    if (p["cluster"] == "tpu-b") {
      p["capacity_error"] =
          "the Kubernetes API of cluster 'tpu-b' answered 403 to the ClusterQueue list: forbidden";
    }
  }
  std::ofstream(file) << unread.dump();
  r = falcon({"cluster", "select", "--replay", file.string(), "--explain"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text,
              HasSubstr("capacity of tpu-b not known: the Kubernetes API of cluster 'tpu-b' "
                        "answered 403 to the ClusterQueue list: forbidden\n"));
  EXPECT_THAT(r.stdout_text, Not(HasSubstr("capacity of tpu-a not known")));
  std::ofstream(file) << j.dump();

  // Straight from the state store, and several at once.
  const auto id = std::to_string(j["selection_id"].get<std::int64_t>());
  const auto stored = falcon_json({"cluster", "select", "--replay-selection", id});
  EXPECT_EQ(stored["replayed"]["selected_cluster"], "tpu-b");
  std::ofstream(file) << nlohmann::json{{"selections", {j, j}}}.dump();
  r = falcon({"cluster", "select", "--replay", file.string()});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("0 of 2 decisions change"));

  // What cannot be replayed is a usage error naming the file.
  std::ofstream(file) << "{\"selected_cluster\": 1}";
  r = falcon({"cluster", "select", "--replay", file.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("decision.json"));
  // 200,000 nested arrays (400 KB) crashed the recursive copy of the document: refused at the
  // depth a recorded selection never reaches.
  std::ofstream(file) << std::string(200000, '[') << std::string(200000, ']');
  r = falcon({"cluster", "select", "--replay", file.string()});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, HasSubstr("nests deeper than 32 levels"));
  // A plain list, converted selection by selection; a bad one is named by its place.
  std::ofstream(file) << nlohmann::json::array({j, j, 7}).dump();
  r = falcon({"cluster", "select", "--replay", file.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("selection 2 is not a recorded selection"));
  std::ofstream(file) << nlohmann::json::array({j, j, j}).dump();
  r = falcon({"cluster", "select", "--replay", file.string()});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("0 of 3 decisions change"));
  r = falcon({"cluster", "select", "--replay-selection", "999999"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("no selection 999999"));
  // --policy decides a live selection too.
  const auto live =
      falcon_json({"cluster", "select", "--accelerator", "tpu-v4-64", "--policy", "score"});
  EXPECT_EQ(live["policy"], "score");
  EXPECT_FALSE(live["selected_cluster"].get<std::string>().empty());
}

TEST_F(CliFleetTest, ClusterSelectWithNoAvailableClusterExitsFourWithEveryProbe) {
  // Fill tpu-b (2 slots) and queue enough behind it to pass its max queue depth of 5.
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(falcon({"job", "submit", "--cluster", "tpu-b", "--accelerator", "tpu-v4-64", "--name",
                      "filler-" + std::to_string(i), "--image", "i", "--", "sleep"})
                  .exit_code,
              0);
  }
  const auto j = falcon_json({"cluster", "select", "--accelerator", "tpu-v4-64"}, 4);
  EXPECT_EQ(j["error"]["type"], "NoAvailableClusterError");
  EXPECT_EQ(j["error"]["probe_results"].size(), 3u);
  const std::string message = j["error"]["message"];
  EXPECT_THAT(message, HasSubstr("tpu-a"));
  EXPECT_THAT(message, HasSubstr("tpu-down"));
  EXPECT_THAT(message, HasSubstr("tpu-b: queue full: queue_depth=6 > max=5"));
}

TEST_F(CliFleetTest, JobLifecycleSubmitStatusListLogsExportCancel) {
  const std::string cluster = submit("cli-run");
  EXPECT_EQ(cluster, "tpu-b");

  auto status = falcon_json({"job", "status", "--cluster", cluster, "cli-run"});
  EXPECT_EQ(status["state"], "RUNNING");
  auto list = falcon_json({"job", "list", "--cluster", cluster, "--state", "running"});
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["name"], "cli-run");
  EXPECT_EQ(list[0]["accelerator_type"], "v4-64");  // the record's (registry's) spelling

  fleet_.advance(std::chrono::seconds(101));
  const auto r = falcon({"job", "status", "--cluster", cluster, "cli-run"});
  EXPECT_THAT(r.stdout_text, HasSubstr("COMPLETED"));
  EXPECT_EQ(falcon_json({"job", "status", "--cluster", cluster, "cli-run"})["exit_code"], 0);

  // Logs: rank 0 by default, tail, server-side grep, another rank.
  auto logs = falcon({"job", "logs", "--cluster", cluster, "cli-run"});
  ASSERT_EQ(logs.exit_code, 0) << logs.stderr_text;
  EXPECT_THAT(logs.stdout_text, HasSubstr("XPK Start"));
  EXPECT_THAT(logs.stdout_text, HasSubstr("EXIT_CODE=0"));
  EXPECT_THAT(logs.stderr_text, Not(HasSubstr("last 24 hours")));  // the record gave the window
  logs = falcon({"job", "logs", "--cluster", cluster, "cli-run", "--tail", "3"});
  EXPECT_EQ(std::count(logs.stdout_text.begin(), logs.stdout_text.end(), '\n'), 3);
  logs = falcon({"job", "logs", "--cluster", cluster, "cli-run", "--grep", "step_time"});
  EXPECT_THAT(logs.stdout_text, Not(HasSubstr("XPK Start")));
  EXPECT_THAT(logs.stdout_text, HasSubstr("step_time="));
  logs = falcon({"job", "logs", "--cluster", cluster, "cli-run", "--rank", "3"});
  EXPECT_THAT(logs.stdout_text, HasSubstr("EXIT_CODE=0"));
  EXPECT_EQ(
      falcon({"job", "logs", "--cluster", cluster, "cli-run", "--since", "yesterday"}).exit_code,
      2);

  // Export: the LogExportResult, then the objects exist.
  const auto exported = falcon_json(
      {"job", "export-logs", "--cluster", cluster, "cli-run", "--dest", "gs://falcon-logs/x/"});
  EXPECT_EQ(exported["exported_ranks"], nlohmann::json({0, 1, 2, 3}));
  EXPECT_EQ(exported["gcs_uris"]["0"], "gs://falcon-logs/x/rank-0.log");
  const auto only0 = falcon_json({"job", "export-logs", "--cluster", cluster, "cli-run", "--dest",
                                  "gs://falcon-logs/y", "--ranks", "0"});
  EXPECT_EQ(only0["exported_ranks"], nlohmann::json({0}));
  EXPECT_EQ(
      falcon({"job", "export-logs", "--cluster", cluster, "cli-run", "--dest", "s3://x"}).exit_code,
      2);

  // Cancel, then cancelling again is "not found" (exit 3).
  EXPECT_EQ(falcon({"job", "cancel", "--cluster", cluster, "cli-run"}).exit_code, 0);
  const auto again = falcon_json({"job", "cancel", "--cluster", cluster, "cli-run"}, 3);
  EXPECT_EQ(again["error"]["type"], "WorkloadNotFoundError");
}

// Spec acceptance: XpkWorkloadManager / 查询状态 (WorkloadStatus.exit_code, through the facade).
TEST_F(CliFleetTest, AFailedWorkloadsStatusCarriesTheExitCodeItsWorkerPrinted) {
  const std::string cluster =
      submit("crashes", {"--env", "FLEET_OUTCOME=fail", "--env", "FLEET_EXIT_CODE=7"});
  auto status = falcon_json({"job", "status", "--cluster", cluster, "crashes"});
  EXPECT_EQ(status["state"], "RUNNING");
  EXPECT_TRUE(status["exit_code"].is_null());
  fleet_.advance(std::chrono::seconds(101));
  status = falcon_json({"job", "status", "--cluster", cluster, "crashes"});
  EXPECT_EQ(status["state"], "FAILED");
  EXPECT_EQ(status["exit_code"], 7);  // worker 0's; the others were stopped and printed 143
}

TEST_F(CliFleetTest, MultiSliceLogsAndExportTakeTheSlice) {
  const std::string cluster = submit("two-slices", {"--xpk-arg=--num-slices=2"});
  fleet_.advance(std::chrono::seconds(101));

  // Slice 1 has its own four workers; slice 5 does not exist, so only rank 0 is reported, empty.
  const auto slice1 = falcon_json({"job", "export-logs", "--cluster", cluster, "two-slices",
                                   "--slice", "1", "--dest", "gs://falcon-logs/s1/"});
  EXPECT_EQ(slice1["exported_ranks"], nlohmann::json({0, 1, 2, 3}));
  const auto slice5 = falcon_json({"job", "export-logs", "--cluster", cluster, "two-slices",
                                   "--slice", "5", "--dest", "gs://falcon-logs/s5/"});
  EXPECT_EQ(slice5["exported_ranks"], nlohmann::json({0}));

  auto logs = falcon({"job", "logs", "--cluster", cluster, "two-slices", "--slice", "1"});
  ASSERT_EQ(logs.exit_code, 0) << logs.stderr_text;
  EXPECT_THAT(logs.stdout_text, HasSubstr("EXIT_CODE=0"));
  logs = falcon({"job", "logs", "--cluster", cluster, "two-slices", "--slice", "5"});
  EXPECT_EQ(logs.stdout_text, "");
  EXPECT_EQ(falcon({"job", "export-logs", "--cluster", cluster, "two-slices", "--slice", "-1",
                    "--dest", "gs://falcon-logs/bad/"})
                .exit_code,
            2);
}

// Exit codes (README): the caller's own input is a usage error (2), refused before xpk runs;
// what xpk refuses is an xpk failure (5).
TEST_F(CliFleetTest, SubmitInputErrorsExitTwoAndXpkFailuresExitFive) {
  const std::vector<std::string> base = {"job",   "submit",        "--cluster",
                                         "tpu-b", "--accelerator", "tpu-v4-64"};
  auto submit_with = [&](const std::vector<std::string>& more) {
    std::vector<std::string> args = base;
    args.insert(args.end(), more.begin(), more.end());
    return falcon(args);
  };
  // Invalid name.
  auto r = submit_with({"--name", "Bad_Name", "--image", "i", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("Bad_Name"));
  // An accelerator the cluster does not declare.
  r = falcon({"job", "submit", "--cluster", "gpu-x", "--accelerator", "tpu-v4-64", "--name", "a",
              "--image", "i", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  // A non-default namespace on an xpk without --namespace.
  r = submit_with({"--name", "ns", "--image", "i", "--namespace", "team-a", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("namespace"));
  // Bad --env.
  r = submit_with({"--name", "e", "--image", "i", "--env", "NOEQUALS", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  // Values that would alter the manifest, and --xpk-arg overriding falcon's own flags.
  r = submit_with({"--name", "m", "--image", "img\n    hostNetwork: true", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("is not an image reference"));
  r = submit_with({"--name", "m", "--image", "i", "--", "echo", "a\nb"});
  EXPECT_EQ(r.exit_code, 2);
  r = submit_with({"--name", "m", "--image", "i", "--env", "A=\"x\"", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  r = submit_with({"--name", "m", "--image", "i", "--xpk-arg=--clu=tpu-a", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("would set xpk's --cluster"));
  r = falcon({"--json", "job", "submit", "--cluster", "tpu-b", "--accelerator", "tpu-v4-64",
              "--name", "m", "--image", "i", "--xpk-arg", "--workload", "--xpk-arg", "other", "--",
              "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(nlohmann::json::parse(r.stdout_text)["error"]["type"], "InvalidWorkloadSpecError");
  // Nothing of the above reached the cluster.
  for (const auto& row : fleet_.service().simulator().list("tpu-b").rows) {
    EXPECT_NE(row.name, "m");
  }
  // Unreachable cluster: xpk fails.
  r = falcon({"job", "list", "--cluster", "tpu-down"});
  EXPECT_EQ(r.exit_code, 5);
}

TEST_F(CliFleetTest, ADuplicateNameSaysSoFirst) {
  const std::string cluster = submit("twice");
  const auto r = falcon({"job", "submit", "--cluster", cluster, "--accelerator", "tpu-v4-64",
                         "--name", "twice", "--image", "gcr.io/f/b:1", "--", "true"});
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_THAT(r.stderr_text,
              ::testing::StartsWith("falcon: workload 'twice' already exists on cluster '" +
                                    cluster + "'"));
  for (const char* noise : {"Skipping its creation", "Traceback", "EOFError"}) {
    EXPECT_THAT(r.stderr_text, Not(HasSubstr(noise)));
  }
}

// Issue 11: every xpk call rewrites its kubeconfig, not atomically (fleet-xpk too). Two falcon
// processes probing and submitting on one cluster at the same time must never see each other's
// half-written kubeconfig (which reads as "connection to the server localhost:8080 was refused").
TEST_F(CliFleetTest, ConcurrentProbeAndSubmitProcessesOnOneClusterNeverShareAKubeconfig) {
  constexpr int kRounds = 10;
  // fleet-xpk (started by the falcon processes, which pass this on) leaves each rewrite half
  // done for 2 x 250 ms, so calls sharing a file would meet inside that window.
  ::setenv("FLEET_KUBECONFIG_REWRITE_MS", "250", 1);
  std::vector<CommandResult> probes(kRounds);
  std::vector<CommandResult> submits(kRounds);
  {
    std::jthread prober([&] {
      for (auto& r : probes) r = falcon({"cluster", "status", "tpu-b"});
    });
    std::jthread submitter([&] {
      for (int i = 0; i < kRounds; ++i) {
        submits[i] =
            falcon({"job", "submit", "--cluster", "tpu-b", "--accelerator", "tpu-v4-64", "--name",
                    "race-" + std::to_string(i), "--image", "gcr.io/f/b:1", "--", "true"});
      }
    });
  }
  ::unsetenv("FLEET_KUBECONFIG_REWRITE_MS");
  for (const auto& r : probes) {
    EXPECT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
    EXPECT_THAT(r.stdout_text, Not(HasSubstr("unreachable")));
  }
  for (const auto& r : submits) EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  // Each call's private kubeconfig is gone once it returned.
  EXPECT_TRUE(std::filesystem::is_empty(fleet_.runtime_dir()));
}

TEST_F(CliFleetTest, LogsOfAWorkloadFalconDidNotSubmitSayTheWindow) {
  const auto r = falcon({"job", "logs", "--cluster", "tpu-a", "long-run", "--tail", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, HasSubstr("last 24 hours"));
}

TEST_F(CliFleetTest, WarmUpFetchesEveryClustersCredentialsIntoItsOwnKubeconfig) {
  const auto j = falcon_json({"cluster", "warm-up"});
  ASSERT_EQ(j.size(), 4u);
  for (const auto& r : j) EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
  // Through fleet-gcloud's get-credentials: each kubeconfig names its own GKE cluster.
  EXPECT_EQ(fleet::read_current_context(fleet_.state_dir() + "/kube/gpu-x/config"),
            "gke_proj-gpu_us-central1-a_gpu-cluster-x");
  EXPECT_EQ(fleet::read_current_context(fleet_.state_dir() + "/kube/tpu-b/config"),
            "gke_proj-tpu_us-central2-b_tpu-b");
  // tpu-down is regional: gcloud is asked at its region, not at the zone xpk gets.
  EXPECT_EQ(fleet::read_current_context(fleet_.state_dir() + "/kube/tpu-down/config"),
            "gke_proj-tpu_us-east5_tpu-down");

  // A cluster GKE does not have: gcloud's 404 for that cluster, the others still warm, exit 7.
  std::ifstream in(fleet_.repos_path());
  std::string repos((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string ghost =
      "clusters:\n  ghost:\n    project: proj-tpu\n    zone: us-east1-b\n    cluster_id: ghost-1\n"
      "    accelerator_types: [{type: tpu-v4-64, device_class: tpu, priority: 1}]\n";
  repos.replace(repos.find("clusters:\n"), 10, ghost);
  const std::string path = fleet_.repos_path() + ".ghost.yaml";
  std::ofstream(path) << repos;
  const CommandResult r = testing::run_falcon({"--config", path, "--json", "cluster", "warm-up"});
  EXPECT_EQ(r.exit_code, 7) << r.stderr_text;
  const auto results = nlohmann::json::parse(r.stdout_text);
  ASSERT_EQ(results.size(), 5u);
  for (const auto& result : results) {
    if (result["cluster"] == "ghost") {
      EXPECT_FALSE(result["ok"].get<bool>());
      EXPECT_THAT(result["error"].get<std::string>(), HasSubstr("code=404"));
      EXPECT_THAT(result["error"].get<std::string>(), HasSubstr("ghost"));
    } else {
      EXPECT_TRUE(result["ok"].get<bool>()) << result.dump();
    }
  }
}

// Issue 11: warm-up asked gcloud for a regional cluster at its zone and got a 404. Without
// `location` the layer can only use the zone, and the fleet's gcloud answers as GKE does.
TEST_F(CliFleetTest, WarmUpOfARegionalClusterNeedsItsLocation) {
  std::ifstream in(fleet_.repos_path());
  std::string repos((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string line = "    location: us-east5\n";
  ASSERT_NE(repos.find(line), std::string::npos);
  repos.erase(repos.find(line), line.size());
  const std::string path = fleet_.repos_path() + ".no-location.yaml";
  std::ofstream(path) << repos;
  const CommandResult r = testing::run_falcon({"--config", path, "--json", "cluster", "warm-up"});
  EXPECT_EQ(r.exit_code, 7) << r.stderr_text;
  for (const auto& result : nlohmann::json::parse(r.stdout_text)) {
    if (result["cluster"] == "tpu-down") {
      const std::string error = result["error"].get<std::string>();
      EXPECT_THAT(error, HasSubstr("code=404"));
      EXPECT_THAT(error, HasSubstr("projects/proj-tpu/locations/us-east5-a/clusters/tpu-down"));
      EXPECT_THAT(error, HasSubstr("Did you mean [tpu-down] in [us-east5]?"));
    } else {
      EXPECT_TRUE(result["ok"].get<bool>()) << result.dump();
    }
  }
}

// Issue 11: the registry takes the spec's spelling and xpk's; fleet-xpk, like real xpk, refuses
// `--tpu-type=tpu-v4-64`, so these submits succeed only with xpk's spelling on its argv.
TEST_F(CliFleetTest, SubmitPassesXpksSpellingOfTheAcceleratorType) {
  for (const std::string accelerator : {"tpu-v4-64", "v4-64"}) {
    const std::string name = accelerator == "v4-64" ? "xpk-spelling" : "spec-spelling";
    const auto j = falcon_json({"job", "submit", "--cluster", "tpu-b", "--accelerator", accelerator,
                                "--name", name, "--image", "gcr.io/f/b:1", "--", "true"});
    EXPECT_EQ(j["handle"]["cluster"], "tpu-b") << j.dump();
  }
  // The record (in falcon.db) keeps one spelling, the registry's, whichever the caller used.
  const auto db = open_state_store(default_state_url(fleet_.state_dir()));
  EXPECT_EQ(db->find_submission("tpu-b", "xpk-spelling")->accelerator_type, "v4-64");
  EXPECT_EQ(db->find_submission("tpu-b", "spec-spelling")->accelerator_type, "v4-64");
  // A type the cluster does not offer in either spelling is refused before xpk runs.
  const CommandResult r = falcon({"job", "submit", "--cluster", "tpu-b", "--accelerator",
                                  "tpu-v4-65", "--name", "typo", "--image", "i", "--", "true"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.stderr_text, HasSubstr("the cluster does not offer accelerator 'tpu-v4-65'"));
}

// Issue 13: the CLI keeps its memory in <state_dir>/falcon.db, so a second process finds by name
// what the first submitted, and every selection and observed state is there.
TEST_F(CliFleetTest, ASecondProcessFindsTheSubmissionInFalconDb) {
  EXPECT_EQ(submit("db-run"), "tpu-b");
  const auto status = falcon_json({"job", "status", "--cluster", "tpu-b", "db-run"});
  EXPECT_EQ(status["state"], "RUNNING");
  const auto logs = falcon({"job", "logs", "--cluster", "tpu-b", "db-run", "--tail", "1"});
  EXPECT_EQ(logs.exit_code, 0) << logs.stderr_text;
  EXPECT_THAT(logs.stderr_text, Not(HasSubstr("last 24 hours")));  // submitted_at was found
  EXPECT_FALSE(std::filesystem::exists(fleet_.state_dir() + "/submissions.jsonl"));

  const auto db = open_state_store(default_state_url(fleet_.state_dir()));
  const auto row = db->find_submission("tpu-b", "db-run");
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->handle.namespace_, "default");
  EXPECT_EQ(row->state, "RUNNING");  // observed by `job status`
  // The submit's selection is there, with the probes it made.
  const auto selections = db->list_selections(10, std::string("tpu-v4-64"));
  ASSERT_EQ(selections.size(), 1u);
  EXPECT_EQ(selections[0].selection.selected_cluster, "tpu-b");
  EXPECT_EQ(row->selection_id, selections[0].id);  // and the submission names it
  EXPECT_EQ(db->latest_probe("tpu-down")->result.reachable, false);
  const auto select = falcon_json({"cluster", "select", "--accelerator", "tpu-v4-64"});
  EXPECT_GT(select["selection_id"].get<std::int64_t>(), selections[0].id);
}

TEST_F(CliFleetTest, AnOldSubmissionsFileIsImportedOnceAndLeftReadOnly) {
  std::filesystem::create_directories(fleet_.state_dir());
  const std::string file = fleet_.state_dir() + "/submissions.jsonl";
  std::ofstream(file) << R"({"v":1,"cluster":"tpu-b","workload":"old-run","namespace":"default",)"
                      << R"("accelerator_type":"tpu-v4-64","device_class":"tpu",)"
                      << R"("submitted_at":"2026-04-01T10:00:00.000Z","cluster_id":"tpu-b",)"
                      << R"("project":"p","zone":"us-central2-b","docker_image":"i",)"
                      << R"("priority":"low"})"
                      << "\n";
  // The cluster no longer lists it (exit 3), but the import happened on the way.
  auto r = falcon({"job", "status", "--cluster", "tpu-b", "old-run"});
  EXPECT_EQ(r.exit_code, 3) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, HasSubstr("imported 1 submission(s) from " + file));
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0222, 0u);
  const auto db = open_state_store(default_state_url(fleet_.state_dir()));
  EXPECT_EQ(db->find_submission("tpu-b", "old-run")->priority, "low");
  // A second process does not import it again.
  r = falcon({"job", "status", "--cluster", "tpu-b", "old-run"});
  EXPECT_THAT(r.stderr_text, Not(HasSubstr("imported")));
}

TEST_F(CliFleetTest, DoctorChecksTheMachineAgainstTheFleet) {
  const auto r = falcon({"doctor"});
  // tpu-down is unreachable, so doctor reports a failure (exit 2) and how to fix it.
  EXPECT_EQ(r.exit_code, 2) << r.stdout_text << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("[ok  ] config: 4 clusters"));
  EXPECT_THAT(r.stdout_text, HasSubstr("[ok  ] xpk:"));
  EXPECT_THAT(r.stdout_text, HasSubstr("[ok  ] gcloud: fleet-gcloud"));
  EXPECT_THAT(r.stdout_text, HasSubstr("[ok  ] credentials: access token file"));
  EXPECT_THAT(r.stdout_text, HasSubstr("[ok  ] logging:"));
  EXPECT_THAT(r.stdout_text, HasSubstr("[ok  ] cluster tpu-b: reachable"));
  EXPECT_THAT(r.stdout_text, HasSubstr("[fail] cluster tpu-down"));
  EXPECT_THAT(r.stdout_text, HasSubstr("roles/container.developer"));
  // The token is never printed.
  EXPECT_THAT(r.stdout_text, Not(HasSubstr(fleet_.service().token())));
  const auto j = falcon_json({"doctor"}, 2);
  ASSERT_TRUE(j.is_array());
}

// A cluster probed through its Kubernetes API with a grant that has Workloads but not
// ClusterQueues (the fleet answers them 403, as RBAC does): every command that shows a probe
// says its capacity is not known and why, doctor warns with the grant that fixes it, and all of
// it goes once the grant has them.
TEST_F(CliFleetTest, AGrantWithoutClusterQueuesIsShownByStatusSelectAndDoctor) {
  std::string repos = testing::read_file(fleet_.repos_path());
  const std::string at = "    cluster_id: tpu-b\n";
  ASSERT_NE(repos.find(at), std::string::npos) << repos;
  repos.insert(repos.find(at) + at.size(), "    probe: {backend: kube}\n");
  const std::string kube_repos = fleet_.repos_path() + ".kube.yaml";
  std::ofstream(kube_repos) << repos;
  const auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--config", kube_repos});
    return testing::run_falcon(args);
  };
  fleet_.service().simulator().set_cluster_queues_readable("tpu-b", false);

  auto r = run({"cluster", "status", "tpu-b"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("reachable"));
  EXPECT_THAT(r.stdout_text,
              HasSubstr("capacity not known: the Kubernetes API of cluster 'tpu-b' answered 403 "
                        "to the ClusterQueue list: clusterqueues.kueue.x-k8s.io is forbidden"));
  r = run({"cluster", "select", "--accelerator", "tpu-v4-64", "--explain"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("capacity of tpu-b not known: the Kubernetes API of "
                                       "cluster 'tpu-b' answered 403"));
  EXPECT_THAT(r.stdout_text, HasSubstr("selected tpu-b"));
  r = run({"doctor"});
  EXPECT_THAT(r.stdout_text, HasSubstr("[warn] cluster tpu-b: reachable: 0 queued, 0 running; "
                                       "capacity not known: "));
  EXPECT_THAT(r.stdout_text, HasSubstr("grant get and list on kueue.x-k8s.io clusterqueues"));
  EXPECT_THAT(r.stdout_text, HasSubstr("[ok  ] cluster tpu-a: reachable"));

  fleet_.service().simulator().set_cluster_queues_readable("tpu-b", true);
  r = run({"cluster", "status", "tpu-b"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, Not(HasSubstr("capacity not known")));
  r = run({"cluster", "select", "--accelerator", "tpu-v4-64", "--explain"});
  EXPECT_THAT(r.stdout_text, Not(HasSubstr("not known")));
  r = run({"doctor"});
  EXPECT_THAT(r.stdout_text, HasSubstr("[ok  ] cluster tpu-b: reachable: 0 queued, 0 running"));
}

// Issue 11: `job status` of a workload the cluster does not have exits 3 (not 0 with UNKNOWN),
// and a name xpk cannot have is refused before xpk runs, as cancel does.
TEST_F(CliFleetTest, StatusOfAMissingWorkloadExitsThreeAndBadNamesAreRefused) {
  const auto missing = falcon({"job", "status", "--cluster", "tpu-b", "never-submitted"});
  EXPECT_EQ(missing.exit_code, 3) << missing.stderr_text;
  EXPECT_THAT(missing.stderr_text, HasSubstr("'never-submitted' not found on cluster 'tpu-b'"));
  // A usage error (issue 31): xpk never ran.
  const auto bad = falcon({"job", "status", "--cluster", "tpu-b", "Bad_Name"});
  EXPECT_EQ(bad.exit_code, 2) << bad.stderr_text;
  EXPECT_THAT(bad.stderr_text, HasSubstr("workload: 'Bad_Name' is not a workload name"));
}

// Issue 31: every bad value is exit 2 with a message naming the flag and the rule, the value
// echoed short and escaped, whichever command it is given to; nothing runs.
TEST_F(CliFleetTest, EveryBadValueIsExitTwoNamingTheFlagAndTheRule) {
  const auto refused = [&](const std::vector<std::string>& args, const std::string& message) {
    const auto r = falcon(args);
    EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
    EXPECT_THAT(r.stderr_text, HasSubstr(message));
    EXPECT_LT(r.stderr_text.size(), 800u) << "a bounded echo";
    EXPECT_EQ(r.stderr_text.find('\x1b'), std::string::npos) << "no raw escape sequence";
    EXPECT_TRUE(r.stdout_text.empty()) << r.stdout_text;
  };
  const std::string is_not_index = "is not a whole number from 0 to 100000";
  refused({"job", "logs", "--cluster", "tpu-b", "Bad_Name"},
          "workload: 'Bad_Name' is not a workload name");
  refused({"job", "export-logs", "--cluster", "tpu-b", "Bad_Name", "--dest", "gs://bucket-x/p/"},
          "workload: 'Bad_Name' is not a workload name");
  refused({"job", "cancel", "--cluster", "tpu-b", std::string(100000, 'a')}, "(100000 bytes)");
  refused({"job", "logs", "--cluster", "tpu-b", "w", "--slice", "2147483647"},
          "--slice: '2147483647' " + is_not_index);
  refused({"job", "logs", "--cluster", "tpu-b", "w", "--rank", "-1"},
          "--rank: '-1' " + is_not_index);
  refused({"job", "logs", "--cluster", "tpu-b", "w", "--rank", "x"}, "--rank: 'x' " + is_not_index);
  refused({"job", "export-logs", "--cluster", "tpu-b", "w", "--dest", "gs://bucket-x/p/", "--ranks",
           "0,-1"},
          "--ranks: '-1' " + is_not_index);
  refused({"job", "logs", "--cluster", "tpu-b", "w", "--since", "9999-12-31T23:59:59Z"},
          "--since: '9999-12-31T23:59:59Z' is out of range");
  refused({"job", "logs", "--cluster", "tpu-b", "w", "--since", "yesterday"},
          "--since: 'yesterday' is neither an RFC 3339 time");
  refused({"cluster", "status", "c\x1b[2Jx"}, "cluster: 'c\\x1b[2Jx' is not a cluster name");
  refused({"job", "list", "--cluster", "Tpu_B"}, "--cluster: 'Tpu_B' is not a cluster name");
  refused({"job", "submit", "--accelerator", "tpu-v4-64", "--name", "Bad_Name", "--image", "i",
           "--", "true"},
          "--name: 'Bad_Name' is not a workload name");
  // The argument parser's own messages are escaped and cut too.
  refused({"cluster", "list", "\x1b[2J"}, "\\x1b[2J");
  refused({"job", "logs", "--cluster", "tpu-b", "w", "--tail", std::string(100000, '9')}, "--tail");
}

// Issue 31: a read that finds nothing says so (exit 0), and says what --grep is.
TEST_F(CliFleetTest, AnEmptyReadSaysSoAndWhatGrepIs) {
  const auto r = falcon({"job", "logs", "--cluster", "tpu-b", "never-ran", "--grep", "step=99"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_TRUE(r.stdout_text.empty());
  EXPECT_THAT(r.stderr_text, HasSubstr("no log lines for rank 0 of workload never-ran"));
  EXPECT_THAT(r.stderr_text, HasSubstr("--grep '\"step=99\"'"));
  // A query Cloud Logging cannot parse: its position is in a filter the user never wrote, so
  // the CLI says where --grep's part is.
  const auto bad = falcon({"job", "logs", "--cluster", "tpu-b", "never-ran", "--grep", "step="});
  EXPECT_EQ(bad.exit_code, 6) << bad.stderr_text;
  EXPECT_THAT(bad.stderr_text,
              HasSubstr("the filter Cloud Logging refused includes --grep 'step='"));
}

// Issue 11: a --follow ended by SIGINT or SIGTERM exits as the shell reports that signal
// (130, 143), not 0, so a script can tell "stopped" from "the workload finished".
TEST_F(CliFleetTest, FollowEndedBySignalExitsWithTheSignalsCode) {
  const std::string cluster = submit("follow-run");
  fleet_.advance(std::chrono::seconds(10));  // a few steps logged; the run lasts 100 s
  for (const int signal : {SIGINT, SIGTERM}) {
    int out[2];
    ASSERT_EQ(::pipe(out), 0);
    const std::string bin = testing::built_binary("falcon");
    std::vector<std::string> args{bin,         "--config", fleet_.repos_path(), "job",     "logs",
                                  "--cluster", cluster,    "follow-run",        "--follow"};
    std::vector<char*> argv;  // before the fork: no allocation in the child of a threaded process
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::close(out[0]);
      ::close(out[1]);
      ::execv(bin.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    // The first line shows the follow is running (its handlers are set before it reads).
    pollfd p{out[0], POLLIN, 0};
    char buf[256];
    const bool printed = ::poll(&p, 1, 120'000) == 1 && ::read(out[0], buf, sizeof buf) > 0;
    ::kill(pid, printed ? signal : SIGKILL);
    while (::read(out[0], buf, sizeof buf) > 0) {
    }
    ::close(out[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(printed) << "no log line within 120 s";
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 128 + signal);
  }
}

// Issue 11: --ranks naming a rank the workload does not have is a usage error (exit 2), not an
// empty object. v4-64 slices have 8 VMs, so ranks 0..7.
TEST_F(CliFleetTest, ExportOfARankTheWorkloadDoesNotHaveIsAUsageError) {
  const std::string cluster = submit("ranks-run");
  fleet_.advance(std::chrono::seconds(101));
  const auto r = falcon({"job", "export-logs", "--cluster", cluster, "ranks-run", "--dest",
                         "gs://falcon-logs/ranks/", "--ranks", "0,8"});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, HasSubstr("ranks 0..7 in each slice (v4-64: 8 VMs per slice); "
                                       "there is no rank 8"));
  const auto ok = falcon({"job", "export-logs", "--cluster", cluster, "ranks-run", "--dest",
                          "gs://falcon-logs/ranks/", "--ranks", "0,7"});
  EXPECT_EQ(ok.exit_code, 0) << ok.stderr_text;
}

}  // namespace
}  // namespace falcon
