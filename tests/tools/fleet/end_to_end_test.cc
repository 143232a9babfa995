// The local fleet end to end: a FleetService started in process on an OS-chosen port, the real
// fleet-xpk binary run as a subprocess (stdin /dev/null, like the layer runs xpk), the control
// API over HTTP, logs landing in the local Cloud Logging store, the state file, and the
// falcon-fleet binary's start-up line and clean stop.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "falcon/command_runner.h"
#include "fleet/fleet_service.h"
#include "fleet/kubeconfig.h"
#include "support/temp_dir.h"

extern char** environ;

namespace falcon::fleet {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr const char* kFleetXpk = FALCON_BINARY_DIR "/bin/fleet-xpk";
constexpr const char* kFalconFleet = FALCON_BINARY_DIR "/bin/falcon-fleet";

constexpr const char* kFleetYaml = R"(
time_scale: 0
defaults: {duration_s: 100, steps: 4}
workers_per_slice: {tpu-v4-16: 2}
clusters:
  tpu-a:
    project: falcon-e2e
    zone: us-central2-b
    cluster_id: tpu-a
    capacity: {tpu-v4-16: 1}
  dead:
    project: falcon-e2e
    zone: us-east5-a
    cluster_id: dead
    capacity: {tpu-v4-16: 1}
    behaviour: {unreachable: true}
)";

class FleetEndToEnd : public ::testing::Test {
 protected:
  FleetEndToEnd() : runner_(make_posix_command_runner()) {
    FleetServiceOptions options;
    options.state_file = (dir_.path() / "state.json").string();
    fleet_ = std::make_unique<FleetService>(parse_fleet_config(kFleetYaml, "e2e.yaml"), options);
    fleet_->start();
  }

  CommandResult xpk(std::vector<std::string> args, const std::string& cluster = "tpu-a") {
    CommandSpec spec;
    spec.argv = {kFleetXpk};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    spec.argv.push_back("--cluster=" + cluster);
    spec.argv.push_back("--project=falcon-e2e");
    spec.argv.push_back(cluster == "dead" ? "--zone=us-east5-a" : "--zone=us-central2-b");
    spec.env = {{"FALCON_FLEET_URL", fleet_->url()}, {"KUBECONFIG", kubeconfig(cluster)}};
    spec.timeout = std::chrono::seconds(60);
    return runner_->run(spec);
  }

  std::string kubeconfig(const std::string& cluster) const {
    return (dir_.path() / "kube" / cluster / "config").string();
  }

  nlohmann::json post(const std::string& path, const nlohmann::json& body,
                      bool auth = false) const {
    httplib::Client client(fleet_->url());
    httplib::Headers headers;
    if (auth) headers.emplace("Authorization", "Bearer " + fleet_->token());
    const auto res = client.Post(path, headers, body.dump(), "application/json");
    EXPECT_TRUE(res) << path;
    if (!res) return nullptr;
    EXPECT_EQ(res->status, 200) << path << ": " << res->body;
    return nlohmann::json::parse(res->body, nullptr, false);
  }

  // Rank 0's lines of `workload` from the local Cloud Logging API.
  std::vector<std::string> rank0_lines(const std::string& workload) const {
    const nlohmann::json page =
        post("/v2/entries:list",
             {{"resourceNames", {"projects/falcon-e2e"}},
              {"filter",
               "resource.type=\"k8s_container\" AND "
               "labels.\"k8s-pod/jobset_sigs_k8s_io/jobset-name\"=\"" +
                   workload +
                   "\" AND labels.\"k8s-pod/batch_kubernetes_io/job-completion-index\"=\"0\""},
              {"orderBy", "timestamp asc"},
              {"pageSize", 1000}},
             true);
    std::vector<std::string> lines;
    for (const auto& e : page.value("entries", nlohmann::json::array())) {
      lines.push_back(e["textPayload"]);
    }
    return lines;
  }

  testing::TempDir dir_;
  std::shared_ptr<CommandRunner> runner_;
  std::unique_ptr<FleetService> fleet_;
};

TEST_F(FleetEndToEnd, SubmitRunAndFinishThroughTheRealBinary) {
  const CommandResult created = xpk(
      {"workload", "create", "--workload=e2e-run", "--command=python3 train.py", "--tpu-type=v4-16",
       "--docker-image=gcr.io/falcon-e2e/trainer:1", "--env=FLEET_STEPS=10", "--skip-validation"});
  ASSERT_EQ(created.exit_code, 0) << created.stdout_text << created.stderr_text;
  EXPECT_THAT(created.stdout_text, HasSubstr("\rjobset.jobset.x-k8s.io/e2e-run created\n"));
  EXPECT_THAT(created.stdout_text, EndsWith("[XPK] Exiting XPK cleanly\n"));

  const CommandResult running = xpk({"workload", "list", "--skip-validation"});
  ASSERT_EQ(running.exit_code, 0) << running.stderr_text;
  EXPECT_THAT(running.stdout_text,
              ::testing::ContainsRegex("\ne2e-run +[0-9T:Z-]+ +medium +2 +2 +<none> +"
                                       "QuotaReserved +Quota reserved in ClusterQueue"));

  const nlohmann::json advanced = post("/fleet/v1/clock:advance", {{"seconds", 100}});
  EXPECT_TRUE(advanced.contains("now"));
  const CommandResult finished = xpk({"workload", "list", "--skip-validation"});
  EXPECT_THAT(finished.stdout_text,
              ::testing::ContainsRegex("\ne2e-run +[0-9T:Z-]+ +medium +2 +2 +2 +Finished +jobset "
                                       "completed successfully"));

  const auto lines = rank0_lines("e2e-run");
  ASSERT_EQ(lines.size(), 13u);  // start, 10 steps, end, exit code
  EXPECT_THAT(lines.front(), StartsWith("XPK Start: "));
  EXPECT_THAT(lines[1], StartsWith("step=1 loss="));
  EXPECT_EQ(lines.back(), "EXIT_CODE=0");
  EXPECT_EQ(fleet_->gcp().log_entry_count(), 26u);  // two pods
  EXPECT_EQ(read_current_context(kubeconfig("tpu-a")), "gke_falcon-e2e_us-central2-b_tpu-a");
}

TEST_F(FleetEndToEnd, ArgparseErrorsExitTwoWithoutXpkLines) {
  const CommandResult r = xpk({"workload", "list", "--no-such-flag"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.stdout_text, "");
  EXPECT_THAT(r.stderr_text, EndsWith("xpk: error: unrecognized arguments: --no-such-flag\n"));
  const CommandResult name = xpk({"workload", "delete", "--workload=Not_Valid"});
  EXPECT_EQ(name.exit_code, 2);
  EXPECT_THAT(name.stderr_text, HasSubstr("argument --workload: Name must be less than 40"));
}

TEST_F(FleetEndToEnd, DeleteOfAnUnknownWorkloadIsNotFound) {
  const CommandResult r = xpk({"workload", "delete", "--workload=ghost", "--skip-validation"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.stderr_text,
            "Error from server (NotFound): jobsets.jobset.x-k8s.io \"ghost\" not found\n");
  EXPECT_THAT(r.stdout_text, EndsWith("[XPK] Delete Workload request returned ERROR 1\n[XPK] XPK "
                                      "failed, error code 1\n"));
}

TEST_F(FleetEndToEnd, DuplicateCreateWithStdinFromDevNullFailsFast) {
  const std::vector<std::string> create = {"workload",    "create",           "--workload=dup",
                                           "--command=x", "--tpu-type=v4-16", "--docker-image=i"};
  ASSERT_EQ(xpk(create).exit_code, 0);
  const CommandResult again = xpk(create);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_FALSE(again.timed_out);
  EXPECT_THAT(again.stdout_text, EndsWith("do you want to overwrite it? (y/N): "));
  EXPECT_THAT(again.stderr_text, EndsWith("EOFError: EOF when reading a line\n"));
}

TEST_F(FleetEndToEnd, UnreachableClusterExitsOneWithKubectlsError) {
  const CommandResult r = xpk({"workload", "list"}, "dead");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stdout_text, HasSubstr("i/o timeout"));
  EXPECT_THAT(r.stdout_text, EndsWith("[XPK] XPK failed, error code 1\n"));
}

TEST_F(FleetEndToEnd, UnreachableFleetIsAClearError) {
  CommandSpec spec;
  spec.argv = {kFleetXpk, "workload", "list", "--cluster=tpu-a", "--project=p", "--zone=z"};
  spec.env = {{"FALCON_FLEET_URL", "http://127.0.0.1:1"}};
  const CommandResult r = runner_->run(spec);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stdout_text, StartsWith("[XPK] fleet-xpk: cannot reach the local fleet at "
                                        "http://127.0.0.1:1"));
  EXPECT_THAT(r.stdout_text, EndsWith("[XPK] XPK failed, error code 1\n"));
  EXPECT_THAT(r.stderr_text, HasSubstr("cannot reach the local fleet"));
}

TEST_F(FleetEndToEnd, ControlApiGeneratesLogsAndDumpsState) {
  const nlohmann::json generated = post(
      "/fleet/v1/logs:generate",
      {{"cluster", "tpu-a"}, {"workload", "bulk"}, {"ranks", {0, 1}}, {"lines_per_rank", 500}});
  EXPECT_EQ(generated["written"], 1000);
  EXPECT_EQ(generated["pod_names"].size(), 2u);
  EXPECT_EQ(fleet_->gcp().log_entry_count(), 1000u);
  EXPECT_EQ(rank0_lines("bulk").size(), 500u);

  ASSERT_EQ(xpk({"workload", "list"}).exit_code, 0);
  httplib::Client client(fleet_->url());
  const auto state = client.Get("/fleet/v1/state");
  ASSERT_TRUE(state);
  const nlohmann::json j = nlohmann::json::parse(state->body);
  EXPECT_EQ(j["clusters"][0]["name"], "tpu-a");
  EXPECT_EQ(j["clusters"][0]["kubeconfigs"], nlohmann::json::array({kubeconfig("tpu-a")}));
  EXPECT_EQ(j["log_entries_written"], 1000);

  const auto bad = client.Post("/fleet/v1/clock:advance", "{\"seconds\": -1}", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  const auto unknown = client.Post("/fleet/v1/nothing", "{}", "application/json");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
}

TEST_F(FleetEndToEnd, StateFileCarriesWorkloadsAcrossRestarts) {
  ASSERT_EQ(xpk({"workload", "create", "--workload=survivor", "--command=x", "--tpu-type=v4-16",
                 "--docker-image=i"})
                .exit_code,
            0);
  fleet_->stop();
  ASSERT_TRUE(std::filesystem::exists(dir_.path() / "state.json"));
  FleetServiceOptions options;
  options.state_file = (dir_.path() / "state.json").string();
  fleet_ = std::make_unique<FleetService>(parse_fleet_config(kFleetYaml, "e2e.yaml"), options);
  fleet_->start();
  const CommandResult r = xpk({"workload", "list"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.stdout_text, HasSubstr("\nsurvivor "));
}

// Starts falcon-fleet with stdout on a pipe; the caller reads lines as it prints them.
struct ChildProcess {
  pid_t pid = -1;
  FILE* out = nullptr;

  ChildProcess(const std::vector<std::string>& argv) {
    int fds[2];
    if (pipe(fds) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    posix_spawn_file_actions_addclose(&actions, fds[1]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ) != 0) {
      pid = -1;
    }
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    out = fdopen(fds[0], "r");
  }
  ~ChildProcess() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (out) fclose(out);
  }
  std::string line() {
    char buf[4096];
    if (!out || !fgets(buf, sizeof buf, out)) return "";
    return buf;
  }
  // The lines up to and including the first that starts with `prefix` ("" at the end).
  std::vector<std::string> lines_until(std::string_view prefix) {
    std::vector<std::string> lines;
    for (std::string l = line(); !l.empty(); l = line()) {
      lines.push_back(l);
      if (l.rfind(prefix, 0) == 0) break;
    }
    return lines;
  }
  int stop(int sig) {
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }
};

TEST(FalconFleetBinary, PrintsHowToReachItAndStopsCleanlyOnSigterm) {
  testing::TempDir dir;
  const auto fleet_file = dir.write("fleet.yaml", kFleetYaml);
  ChildProcess child({kFalconFleet, "--fleet", fleet_file.string(), "--print-json", "--token-file",
                      (dir.path() / "token").string()});
  ASSERT_GT(child.pid, 0);
  const std::vector<std::string> banner = child.lines_until("{");
  ASSERT_GE(banner.size(), 2u);
  EXPECT_THAT(banner[0],
              StartsWith("falcon-fleet: 2 cluster(s) (tpu-a, dead) at http://127.0.0.1:"));
  const nlohmann::json info = nlohmann::json::parse(banner.back(), nullptr, false);
  ASSERT_TRUE(info.is_object());
  EXPECT_EQ(info["pid"], child.pid);
  EXPECT_EQ(info["url"], "http://127.0.0.1:" + std::to_string(info["port"].get<int>()));
  EXPECT_EQ(info["time_scale"], 0.0);
  // It answers on that port, and the token file holds the token it printed.
  httplib::Client client(info["url"].get<std::string>());
  const auto xpk_info = client.Get("/fleet/v1/xpk");
  ASSERT_TRUE(xpk_info);
  EXPECT_THAT(xpk_info->body, HasSubstr("\"version\":\"v1.13.1\""));
  EXPECT_EQ(falcon::testing::read_file(dir.path() / "token"),
            info["token"].get<std::string>() + "\n");
  EXPECT_EQ(child.stop(SIGTERM), 0);
}

TEST(FalconFleetBinary, WritesTheEnvironmentThatPointsTheCliAtIt) {
  testing::TempDir dir;
  const auto fleet_file = dir.write("fleet.yaml", kFleetYaml);
  const auto repos_file = dir.write("repos.yaml", "clusters: {}\n");
  const std::string env_file = (dir.path() / "fleet.env").string();
  const std::string ready_file = (dir.path() / "ready.json").string();
  ChildProcess child({kFalconFleet, "--fleet", fleet_file.string(), "--repos-file",
                      repos_file.string(), "--env-file", env_file, "--ready-file", ready_file});
  ASSERT_GT(child.pid, 0);
  // The banner has the export lines, and says which file holds them.
  std::string banner;
  for (const auto& l : child.lines_until("export FALCON_ACCESS_TOKEN_FILE=")) banner += l;
  EXPECT_THAT(banner, HasSubstr("source " + env_file));
  EXPECT_THAT(banner, HasSubstr("\nexport FALCON_CONFIG='" + repos_file.string() + "'\n"));
  // The ready file comes last: once it is there, so are the env and token files.
  for (int i = 0; i < 1000 && !std::filesystem::exists(ready_file); ++i) usleep(10'000);
  ASSERT_TRUE(std::filesystem::exists(ready_file));
  const auto info = nlohmann::json::parse(falcon::testing::read_file(ready_file));
  EXPECT_THAT(banner, HasSubstr(falcon::testing::read_file(env_file)));

  // Sourced by sh, it gives the CLI everything it reads.
  const auto r = make_posix_command_runner()->run(CommandSpec{
      .argv = {"/bin/sh", "-c",
               ". \"$1\" && printf '%s\\n' \"$FALCON_CONFIG\" \"$FALCON_FLEET_URL\" "
               "\"$FALCON_LOGGING_ENDPOINT\" \"$STORAGE_EMULATOR_HOST\" "
               "\"$FALCON_ACCESS_TOKEN_FILE\" && command -v fleet-xpk && command -v fleet-gcloud",
               "sh", env_file}});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const std::string url = info["url"];
  const std::string bin = std::filesystem::path(kFalconFleet).parent_path().string();
  EXPECT_EQ(r.stdout_text, repos_file.string() + "\n" + url + "\n" + url + "\n" + url + "\n" +
                               env_file + ".token\n" + bin + "/fleet-xpk\n" + bin +
                               "/fleet-gcloud\n");
  EXPECT_EQ(falcon::testing::read_file(env_file + ".token"),
            info["token"].get<std::string>() + "\n");
  EXPECT_EQ(child.stop(SIGTERM), 0);
}

TEST(FalconFleetBinary, RejectsAnInvalidFleetFileNamingTheField) {
  testing::TempDir dir;
  const auto fleet_file = dir.write("fleet.yaml", "clusters: {c: {project: p}}\n");
  const auto r = make_posix_command_runner()->run(
      CommandSpec{.argv = {kFalconFleet, "--fleet", fleet_file.string()}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr("fleet.yaml:1:15: clusters.c.zone: missing required key"));
}

}  // namespace
}  // namespace falcon::fleet
