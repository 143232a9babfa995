// End to end: `falcon serve` (the built binary) against the local fleet, driven over HTTP on
// loopback: selection from the probe cache, submit, status, logs, cancel, SIGHUP with a bad
// file, SIGTERM during a follow, and a restart that keeps the history (SQLite).
#include <fcntl.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "falcon/state_store.h"
#include "support/local_fleet.h"
#include "support/postgres_server.h"
#include "support/run_falcon.h"
#include "support/serve_process.h"
#include "support/temp_dir.h"

namespace falcon {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

using testing::ServeProcess;

class ServeFleetTest : public ::testing::Test {
 protected:
  std::string state_url() const { return "sqlite://" + (dir_.path() / "falcon.db").string(); }
  static json get(httplib::Client& c, const std::string& path, int expected = 200) {
    auto r = c.Get(path.c_str());
    EXPECT_TRUE(r) << path;
    if (!r) return json();
    EXPECT_EQ(r->status, expected) << path << ": " << r->body;
    return json::parse(r->body, nullptr, false);
  }
  static json post(httplib::Client& c, const std::string& path, const json& body,
                   int expected = 200) {
    auto r = c.Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r) << path;
    if (!r) return json();
    EXPECT_EQ(r->status, expected) << path << ": " << r->body;
    return json::parse(r->body, nullptr, false);
  }
  static json spec(const std::string& name) {
    return {{"name", name},
            {"docker_image", "gcr.io/f/b:1"},
            {"command", {"python3", "train.py"}},
            {"accelerator_type", "tpu-v4-64"}};
  }

  testing::LocalFleet fleet_;
  testing::TempDir dir_;
};

TEST_F(ServeFleetTest, SelectTwiceTheSecondFromTheCacheThenSubmitStatusLogsCancel) {
  ServeProcess serve(fleet_.repos_path(), state_url());
  httplib::Client c("127.0.0.1", serve.port());
  c.set_read_timeout(120, 0);

  const json first = post(c, "/v1/select", {{"accelerator_type", "tpu-v4-64"}, {"explain", true}});
  EXPECT_EQ(first["selected_cluster"], "tpu-b");
  EXPECT_EQ(first["candidate_probes"].size(), 3u);
  EXPECT_EQ(first["scores"].size(), 3u);
  const json second = post(c, "/v1/select", {{"accelerator_type", "tpu-v4-64"}});  // brief
  EXPECT_EQ(second["selected_cluster"], "tpu-b");
  ASSERT_EQ(second["probe_age_ms"].size(), 3u);
  for (const auto& [cluster, age] : second["probe_age_ms"].items()) {
    EXPECT_LE(age.get<std::int64_t>(), 60000) << cluster;
  }
  EXPECT_EQ(second["probed_now"], json::array());  // every candidate from the cache
  EXPECT_NE(first["selection_id"], second["selection_id"]);
  const json decision =
      get(c, "/v1/selections/" + std::to_string(second["selection_id"].get<int>()));
  EXPECT_THAT(decision["reason"].get<std::string>(), HasSubstr("selected tpu-b"));

  // A name that cannot be one is the caller's bad value (400, InvalidValueError, as exit 2
  // locally), named and escaped; nothing runs (issue 31).
  const json bad_name = get(c, "/v1/workloads/tpu-b/Bad_Name", 400);
  EXPECT_EQ(bad_name["error"]["type"], "InvalidValueError");
  EXPECT_EQ(bad_name["error"]["field"], "workload");
  const json bad_cluster = get(c, "/v1/workloads/Tpu_B/w/logs", 400);
  EXPECT_EQ(bad_cluster["error"]["type"], "InvalidValueError");
  EXPECT_THAT(bad_cluster["error"]["message"].get<std::string>(),
              HasSubstr("cluster: 'Tpu_B' is not a cluster name"));

  // Every cluster shows its probe once the health loop has probed each (the selects above probed
  // only the TPU clusters); the unreachable one says why.
  serve.wait_ready();
  const json clusters = get(c, "/v1/clusters");
  ASSERT_EQ(clusters["clusters"].size(), 4u);
  for (const json& cl : clusters["clusters"]) {
    ASSERT_FALSE(cl["probe"].is_null()) << cl.dump();
    if (cl["name"] == "tpu-down") {
      EXPECT_FALSE(cl["probe"]["result"]["reachable"].get<bool>());
    }
  }
  EXPECT_GE(get(c, "/v1/clusters/tpu-a")["history"].size(), 1u);

  const json submitted = post(c, "/v1/workloads", {{"spec", spec("serve-run")}}, 201);
  EXPECT_EQ(submitted["handle"]["cluster"], "tpu-b");
  const json twice =
      post(c, "/v1/workloads", {{"cluster", "tpu-b"}, {"spec", spec("serve-run")}}, 409);
  EXPECT_EQ(twice["error"]["type"], "WorkloadExistsError");
  // A create the cluster could not take is xpk's failure, not a duplicate name, though xpk's
  // output says "xpk-sa already exists" on every create.
  const json refused =
      post(c, "/v1/workloads", {{"cluster", "tpu-down"}, {"spec", spec("serve-refused")}}, 502);
  EXPECT_EQ(refused["error"]["type"], "WorkloadNotCreatedError") << refused.dump();
  fleet_.advance(std::chrono::seconds(10));
  const json status = get(c, "/v1/workloads/tpu-b/serve-run");
  EXPECT_EQ(status["status"]["state"], "RUNNING");
  EXPECT_EQ(status["events"].back()["state"], "RUNNING");

  auto logs = c.Get("/v1/workloads/tpu-b/serve-run/logs?rank=0");
  ASSERT_TRUE(logs);
  EXPECT_EQ(logs->status, 200) << logs->body;
  EXPECT_THAT(logs->body, HasSubstr("step"));

  const json listed = get(c, "/v1/workloads?cluster=tpu-b");
  ASSERT_EQ(listed["workloads"].size(), 1u);
  EXPECT_EQ(listed["workloads"][0]["handle"]["workload_name"], "serve-run");
  EXPECT_EQ(listed["workloads"][0]["spec"]["docker_image"], "gcr.io/f/b:1");
  // The submission names the decision that chose its cluster.
  EXPECT_EQ(listed["workloads"][0]["selection_id"], submitted["selection_id"]);
  EXPECT_GT(submitted["selection_id"].get<std::int64_t>(), 0);
  const json live = get(c, "/v1/workloads?live=true&cluster=tpu-b");
  EXPECT_EQ(live["clusters"][0]["workloads"][0]["name"], "serve-run");

  auto cancel = c.Delete("/v1/workloads/tpu-b/serve-run");
  ASSERT_TRUE(cancel);
  EXPECT_EQ(cancel->status, 200) << cancel->body;
  get(c, "/v1/workloads/tpu-b/serve-run", 404);
  get(c, "/v1/workloads/nope/serve-run", 404);

  const std::string metrics = c.Get("/metrics")->body;
  EXPECT_THAT(metrics, HasSubstr("falcon_cluster_up{cluster=\"tpu-down\"} 0"));
  EXPECT_THAT(metrics, HasSubstr("falcon_cluster_queue_depth{cluster=\"tpu-a\"} 3"));
  EXPECT_THAT(metrics, HasSubstr("falcon_selections_total{outcome=\"selected\"} 3"));

  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait_exit(), 0) << serve.log();
  EXPECT_THAT(serve.log(), HasSubstr("\"msg\":\"stopped\""));
  // The cancel was recorded before xpk ran, and its outcome after (issue 27).
  const auto deletes = open_state_store(state_url())->list_deletes("tpu-b", "serve-run", 10);
  ASSERT_EQ(deletes.size(), 1u);
  EXPECT_EQ(deletes[0].outcome, kDeleteDeleted);
  EXPECT_TRUE(deletes[0].finished_at.has_value());
}

TEST_F(ServeFleetTest, SighupWithABadFileKeepsTheOldConfiguration) {
  // A copy of the fleet's repos.yaml that the test may break.
  const std::string good = testing::read_file(fleet_.repos_path());
  const auto path = dir_.write("repos.yaml", good);
  ServeProcess serve(path.string(), state_url());
  httplib::Client c("127.0.0.1", serve.port());
  const json before = get(c, "/v1/config");
  EXPECT_EQ(before["reload_failures"], 0);
  EXPECT_THAT(before["content_hash"].get<std::string>(), HasSubstr("sha256:"));

  dir_.write("repos.yaml", "clusters:\n  broken: [\n");
  serve.signal(SIGHUP);
  serve.wait_for(std::regex("configuration reload failed"));
  json after = get(c, "/v1/config");
  EXPECT_EQ(after["reload_failures"], 1);
  EXPECT_EQ(after["content_hash"], before["content_hash"]);
  EXPECT_THAT(after["last_reload_error"].get<std::string>(), HasSubstr("repos.yaml"));
  EXPECT_EQ(get(c, "/v1/clusters")["clusters"].size(), 4u);
  EXPECT_THAT(c.Get("/metrics")->body,
              HasSubstr("falcon_config_reloads_total{result=\"failed\"} 1"));

  // A good file with one cluster fewer is taken.
  std::string smaller = good;
  const auto gpu = smaller.find("  gpu-x:");
  const auto xpk = smaller.find("xpk:");
  smaller.erase(gpu, xpk - gpu);
  dir_.write("repos.yaml", smaller);
  serve.signal(SIGHUP);
  serve.wait_for(std::regex("configuration reloaded"));
  after = get(c, "/v1/config");
  EXPECT_EQ(after["reloads"], 1);
  EXPECT_TRUE(after["last_reload_error"].is_null());
  EXPECT_NE(after["content_hash"], before["content_hash"]);
  EXPECT_EQ(get(c, "/v1/clusters")["clusters"].size(), 3u);
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait_exit(), 0) << serve.log();
}

TEST_F(ServeFleetTest, TheAccessLogWritesWhatServeAccessLogSaysAndSighupChangesIt) {
  const std::string good = testing::read_file(fleet_.repos_path());
  const auto path = dir_.write("repos.yaml", good + "serve:\n  access_log: errors\n");
  ServeProcess serve(path.string(), state_url());
  httplib::Client c("127.0.0.1", serve.port());
  auto requests = [&](const std::string& route) {
    const std::string log = serve.log();
    const std::string needle = "\"route\":\"" + route + "\"";
    int n = 0;
    for (auto at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) ++n;
    return n;
  };
  // errors: the 404 is written, the 200 before it is not (access lines are written in order).
  get(c, "/healthz");
  get(c, "/v1/nothing-here", 404);
  serve.wait_for(std::regex("\"route\":\"\\(unmatched\\)\",\"path\":\"/v1/nothing-here\""));
  EXPECT_EQ(requests("/healthz"), 0) << serve.log();
  EXPECT_EQ(requests("(unmatched)"), 1) << serve.log();

  // none: neither; the reload's own line (written at once, after the access lines before it)
  // bounds what was written.
  dir_.write("repos.yaml", good + "serve:\n  access_log: none\n");
  serve.signal(SIGHUP);
  serve.wait_for(std::regex("configuration reloaded"));
  get(c, "/healthz");
  get(c, "/v1/nothing-here", 404);
  dir_.write("repos.yaml", good + "serve:\n  access_log: all\n");
  serve.signal(SIGHUP);
  serve.wait_for(std::regex("configuration reloaded(.|\n)*configuration reloaded"));
  EXPECT_EQ(requests("(unmatched)"), 1) << serve.log();
  EXPECT_EQ(requests("/healthz"), 0) << serve.log();

  // all: every request.
  get(c, "/healthz");
  serve.wait_for(std::regex("\"route\":\"/healthz\""));
  EXPECT_EQ(requests("/healthz"), 1) << serve.log();
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait_exit(), 0) << serve.log();
}

TEST_F(ServeFleetTest, SigtermDuringAFollowEndsTheStreamAndTheProcess) {
  ServeProcess serve(fleet_.repos_path(), state_url());
  httplib::Client c("127.0.0.1", serve.port());
  c.set_read_timeout(120, 0);
  post(c, "/v1/workloads", {{"cluster", "tpu-b"}, {"spec", spec("follow-run")}}, 201);
  fleet_.advance(std::chrono::seconds(10));  // a few steps logged; the run lasts 100 s

  std::atomic<bool> got_line{false};
  std::string received;
  std::thread follower([&] {
    httplib::Client f("127.0.0.1", serve.port());
    f.set_read_timeout(120, 0);
    f.Get("/v1/workloads/tpu-b/follow-run/logs?follow=true", [&](const char* data, size_t n) {
      received.append(data, n);
      got_line = true;
      return true;
    });
  });
  for (int i = 0; i < 12000 && !got_line; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(got_line) << serve.log();
  const auto start = std::chrono::steady_clock::now();
  serve.signal(SIGTERM);
  follower.join();
  EXPECT_EQ(serve.wait_exit(), 0) << serve.log();
  // Well within serve.shutdown_grace_s (10 s): the follow noticed the stop.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_THAT(received, HasSubstr("step"));
}

// The processes whose parent is this one (this test adopts serve's orphans: a subreaper).
std::vector<pid_t> children_of_this_process() {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream status(entry.path() / "status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("PPid:", 0) == 0) {
        if (std::stoi(line.substr(5)) == ::getpid()) out.push_back(std::stoi(name));
        break;
      }
    }
  }
  return out;
}

TEST_F(ServeFleetTest, SigtermDuringAnExportEndsWithinTheGraceAndRecordsItFailed) {
  // Serve's children that outlive it are re-parented here, where the end of the test finds them.
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const auto path = dir_.write(
      "repos.yaml", testing::read_file(fleet_.repos_path()) + "serve:\n  shutdown_grace_s: 2\n");
  ServeProcess serve(path.string(), state_url());
  httplib::Client c("127.0.0.1", serve.port());
  c.set_read_timeout(120, 0);
  post(c, "/v1/workloads", {{"cluster", "tpu-b"}, {"spec", spec("export-run")}}, 201);
  fleet_.advance(std::chrono::seconds(10));
  // Every Cloud Logging read now takes 8 s: the export is still reading when SIGTERM comes.
  fleet_.service().gcp().faults().delay_next("logging.list", std::chrono::seconds(8), -1);
  const json started = post(
      c, "/v1/exports",
      {{"cluster", "tpu-b"}, {"workload", "export-run"}, {"dest", "gs://falcon-logs/stopped/"}},
      202);
  const std::int64_t id = started["id"];
  EXPECT_EQ(get(c, "/v1/exports/" + std::to_string(id))["state"], "running");

  const auto start = std::chrono::steady_clock::now();
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait_exit(), 0) << serve.log();
  // The grace (2 s) and the second the process allows after it, plus slack for ASan.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(6)) << serve.log();
  EXPECT_THAT(serve.log(), HasSubstr("still running after the grace, recorded as failed"));
  EXPECT_THAT(children_of_this_process(), ::testing::IsEmpty()) << serve.log();
  fleet_.service().gcp().faults().clear();

  // In the store: failed, "server stopped"; never done.
  const auto store = open_state_store(state_url());
  const auto record = store->get_export(id);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->state, "failed");
  EXPECT_THAT(record->result_json, HasSubstr("server stopped"));
  EXPECT_TRUE(record->finished_at.has_value());
}

TEST_F(ServeFleetTest, ARestartKeepsTheHistory) {
  std::int64_t selection_id = 0;
  {
    ServeProcess serve(fleet_.repos_path(), state_url());
    httplib::Client c("127.0.0.1", serve.port());
    c.set_read_timeout(120, 0);
    selection_id = post(c, "/v1/select", {{"accelerator_type", "tpu-v4-64"}})["selection_id"];
    post(c, "/v1/workloads", {{"cluster", "tpu-b"}, {"spec", spec("kept-run")}}, 201);
    serve.signal(SIGTERM);
    ASSERT_EQ(serve.wait_exit(), 0) << serve.log();
  }
  ServeProcess serve(fleet_.repos_path(), state_url());
  httplib::Client c("127.0.0.1", serve.port());
  const json decision = get(c, "/v1/selections/" + std::to_string(selection_id));
  EXPECT_EQ(decision["selected_cluster"], "tpu-b");
  const json listed = get(c, "/v1/workloads?name=kept");
  ASSERT_EQ(listed["workloads"].size(), 1u);
  EXPECT_EQ(listed["workloads"][0]["handle"]["cluster"], "tpu-b");
  EXPECT_GE(get(c, "/v1/clusters/tpu-b?since=1h")["history"].size(), 1u);
  serve.signal(SIGINT);
  EXPECT_EQ(serve.wait_exit(), 0) << serve.log();
}

TEST_F(ServeFleetTest, ANonLoopbackAddressNeedsTokens) {
  const CommandResult r = testing::run_falcon(
      {"--config", fleet_.repos_path(), "serve", "--listen", "0.0.0.0:0", "--state", state_url()});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, HasSubstr("needs bearer tokens"));
  const auto tokens = dir_.write("tokens", "operator-token-0123456789 operate\n");
  std::filesystem::permissions(
      tokens, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  ServeProcess serve(fleet_.repos_path(), state_url(), {"--tokens-file", tokens.string()});
  httplib::Client c("127.0.0.1", serve.port());
  EXPECT_EQ(c.Get("/v1/clusters")->status, 401);
  EXPECT_EQ(c.Get("/v1/clusters", {{"Authorization", "Bearer operator-token-0123456789"}})->status,
            200);
  EXPECT_THAT(serve.log(), ::testing::Not(HasSubstr("operator-token")));
}

// Intent before effect: while the state store is down, a submit is refused with the database's
// reason (503) and nothing is created on the cluster; once it is back, submits go through, and
// every one that was answered 201 is in the store.
TEST_F(ServeFleetTest, ASubmitWhileTheStoreIsDownIsRefusedAndCreatesNothing) {
  if (testing::postgres_tests_opted_out()) GTEST_SKIP() << "FALCON_SKIP_POSTGRES_TESTS=1";
  testing::PostgresServer pg;  // its own: this test stops it
  ServeProcess serve(fleet_.repos_path(), pg.create_database("intent"));
  serve.wait_ready();
  httplib::Client c("127.0.0.1", serve.port());
  c.set_read_timeout(120, 0);
  post(c, "/v1/workloads", {{"cluster", "tpu-b"}, {"spec", spec("before-outage")}}, 201);

  pg.shut_down();
  const json refused =
      post(c, "/v1/workloads", {{"cluster", "tpu-b"}, {"spec", spec("in-outage")}}, 503);
  EXPECT_EQ(refused["error"]["type"], "StateStoreError") << refused.dump();
  EXPECT_THAT(refused["error"].value("message", ""), HasSubstr("nothing was created"));
  // A delete too records its intent first (issue 27): refused, and the workload stays.
  auto cancel = c.Delete("/v1/workloads/tpu-b/before-outage");
  ASSERT_TRUE(cancel);
  EXPECT_EQ(cancel->status, 503) << cancel->body;
  EXPECT_EQ(json::parse(cancel->body)["error"]["type"], "StateStoreError") << cancel->body;

  pg.restart();
  // The server's pooled connections died with the database: a write on one of them fails
  // (503 with Retry-After, nothing created) until the pool has reconnected; a client that
  // honours Retry-After gets through. At most one failure per pooled connection (4).
  const json after = {{"cluster", "tpu-b"}, {"spec", spec("after-outage")}};
  int refused_after_restart = 0;
  for (;;) {
    auto r = c.Post("/v1/workloads", after.dump(), "application/json");
    ASSERT_TRUE(r);
    if (r->status != 503) {
      EXPECT_EQ(r->status, 201) << r->body;
      break;
    }
    EXPECT_EQ(json::parse(r->body)["error"]["type"], "StateStoreError") << r->body;
    ASSERT_LE(++refused_after_restart, 4) << r->body;
  }
  // The cluster never had the refused one and still has the one whose delete was refused; the
  // store has exactly the two answered 201.
  EXPECT_EQ(get(c, "/v1/workloads/tpu-b/in-outage", 404)["error"]["type"], "WorkloadNotFoundError");
  const json live = get(c, "/v1/workloads?live=true&cluster=tpu-b");
  std::set<std::string> on_cluster;
  for (const json& w : live["clusters"][0]["workloads"]) on_cluster.insert(w["name"]);
  EXPECT_EQ(on_cluster, (std::set<std::string>{"before-outage", "after-outage"}));
  const json listed = get(c, "/v1/workloads?cluster=tpu-b");
  std::set<std::string> stored;
  for (const json& w : listed["workloads"]) stored.insert(w["handle"]["workload_name"]);
  EXPECT_EQ(stored, on_cluster);
}

}  // namespace
}  // namespace falcon
