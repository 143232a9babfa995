// ApiClient against a real ApiServer on a loopback port, over a fake control plane: JSON
// answers, the server's errors as ApiError with the CLI's exit code (the inverse of the
// server's mapping), auth, streaming with a stop, and a server that is not there.
#include "falcon/api_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "falcon/client.h"
#include "falcon/errors.h"
#include "falcon/exit_codes.h"
#include "falcon/state_store.h"
#include "falcon/workload_manager.h"
#include "serve/api_server.h"
#include "support/temp_dir.h"

namespace falcon {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

class VectorSource final : public LogLineSource {
 public:
  explicit VectorSource(std::vector<std::string> lines) : lines_(std::move(lines)) {}
  std::optional<std::string> next() override {
    if (i_ >= lines_.size()) return std::nullopt;
    return lines_[i_++];
  }

 private:
  std::vector<std::string> lines_;
  std::size_t i_ = 0;
};

ClusterConfig cluster(const std::string& name) {
  ClusterConfig c;
  c.name = name;
  c.provider = "gke";
  c.project = "proj";
  c.zone = "us-central2-b";
  c.location = c.zone;
  c.cluster_id = name;
  c.accelerator_slots = {{"v4-64", DeviceClass::kTpu, 1}};
  return c;
}

// Canned answers; each error the layer has is thrown by some input.
class FakeControlPlane final : public ControlPlane {
 public:
  std::shared_ptr<StateStore> store;
  std::atomic<bool> follow_stopped{false};
  std::string export_grep;          // the grep of the last export
  std::vector<std::int64_t> links;  // each submit's selection_id

  void check(const std::string& name) const {
    if (name != "tpu-a" && name != "tpu-b") throw UnknownClusterError(name, {"tpu-a", "tpu-b"});
  }
  ClusterConfig cluster_config(const std::string& name) const override {
    check(name);
    return cluster(name);
  }
  std::vector<ClusterEntry> list_clusters() override {
    return {{cluster("tpu-a"), {}}, {cluster("tpu-b"), {}}};
  }
  // Not asked by the routes (they read the store's history themselves).
  ClusterSelection recorded_selection(std::int64_t) override {
    throw std::logic_error("FakeControlPlane::recorded_selection: not asked by the routes");
  }
  std::vector<Recovery> recoveries(const std::optional<std::string>&) override {
    throw std::logic_error("FakeControlPlane::recoveries: not asked by the routes");
  }
  std::optional<ProbeSnapshot> cached_probe(const std::string& name) const override {
    check(name);
    if (name == "tpu-b") return std::nullopt;  // fresh_probe: ClusterUnreachableError
    ProbeSnapshot s;
    s.result = {name, true, 1, 2, std::nullopt, "2026-04-13T08:00:00.000Z"};
    s.backend = "xpk";
    s.age_ms = 1500;
    s.from_cache = true;
    return s;
  }
  Decision select_explained(const std::string& accelerator) override {
    if (accelerator != "tpu-v4-64") {
      throw NoAvailableClusterError("no cluster supports " + accelerator, accelerator,
                                    {cached_probe("tpu-a")->result});
    }
    Decision o;
    o.selection.selected_cluster = "tpu-a";
    o.selection.accelerator = "v4-64";
    o.selection.candidates = {"tpu-a"};
    o.selection.probe_results = {cached_probe("tpu-a")->result};
    o.selection.reason = "selected tpu-a: reachable, queue_depth=1 <= max=5";
    o.selection.decided_at = "2026-04-13T08:00:00.000Z";
    o.selection.selection_id = store->record_selection(o.selection);
    o.candidate_probes = {*cached_probe("tpu-a")};
    return o;
  }
  Submission submit(const SubmitRequest& request) override {
    const std::string& c = request.cluster;
    const WorkloadSpec& spec = request.spec;
    check(c);
    if (spec.name == "exists") {
      throw WorkloadExistsError("workload 'exists' already exists on cluster '" + c + "'", c,
                                spec.name, 1, "");
    }
    if (spec.name == "Bad_Name") throw InvalidWorkloadSpecError("bad name", c, spec.name);
    links.push_back(request.selection_id);
    return {.handle = {spec.name, c, "default", "2026-04-13T08:00:00.000Z"}};
  }
  WorkloadHandle handle_for(const std::string& c, const std::string& w) override {
    check(c);
    return {w, c, "default", ""};
  }
  WorkloadStatus status(const std::string& c, const std::string& w) override {
    const WorkloadHandle h = handle_for(c, w);
    if (h.workload_name == "gone") throw WorkloadNotFoundError(h.cluster, h.workload_name);
    if (h.workload_name == "xpk-fails") {
      throw XpkCommandError("xpk workload list failed", h.cluster, 1, "boom");
    }
    if (h.workload_name == "no-xpk") throw CommandStartError("xpk", "not found on PATH");
    if (h.workload_name == "db") throw StateStoreError("sqlite", "/x.db", "open", "locked");
    return {h.workload_name, kStateRunning, "2026-04-13T08:00:01.000Z", std::nullopt, std::nullopt};
  }
  Cancellation cancel(const std::string& c, const std::string& w) override {
    return {handle_for(c, w), true};
  }
  std::vector<WorkloadInfo> list_workloads(const std::string& c,
                                           const std::optional<std::string>&) override {
    check(c);
    return {{"run-1", kStateRunning, "v4-64", std::nullopt}};
  }
  LogLines read_log(const WorkloadHandle& h, int rank, const LogFilter& filter,
                    int) const override {
    if (h.workload_name == "no-logs") throw LogRetrievalError("Cloud Logging said 500", 500);
    std::vector<std::string> lines;
    for (int i = 0; i < 3; ++i) {
      lines.push_back("rank " + std::to_string(rank) + " line " + std::to_string(i));
    }
    if (filter.tail_lines) lines.erase(lines.begin(), lines.end() - *filter.tail_lines);
    if (filter.grep) lines.push_back("grep " + *filter.grep);
    return LogLines(std::make_unique<VectorSource>(lines));
  }
  // Follows only (a read that does not follow is read_log's).
  void read_logs(const LogRequest& request, const std::function<void(const std::string&)>& on_line,
                 const std::function<bool()>& stop) override {
    if (!request.follow) throw std::logic_error("FakeControlPlane::read_logs: follows only");
    on_line("first");
    on_line("second");
    while (!stop()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    follow_stopped = true;
  }
  LogExportResult export_logs(const ExportRequest& request, const ExportObserver&) override {
    if (request.grep) export_grep = *request.grep;
    LogExportResult r;
    r.workload_name = request.workload;
    r.cluster = request.cluster;
    r.exported_ranks = {0};
    r.gcs_uris = {{0, request.dest + "/rank-0.log"}};
    r.exported_at = "2026-04-13T08:00:02.000Z";
    return r;
  }
  ConfigInfo config_info() const override { return {}; }
  ProbeCacheStats cache_stats() const override { return {}; }
  bool ready() const override { return true; }
};

class ApiClientTest : public ::testing::Test {
 protected:
  void start(std::shared_ptr<const TokenTable> tokens = nullptr) {
    store_ = open_state_store("sqlite://" + (dir_.path() / "falcon.db").string());
    control_->store = store_;
    ApiServerOptions options;
    options.control = control_;
    options.store = store_;
    options.tokens = std::move(tokens);
    server_ = std::make_unique<ApiServer>(options);
    port_ = server_->bind("127.0.0.1", 0);
    thread_ = std::thread([this] { server_->serve(); });
    url_ = "http://127.0.0.1:" + std::to_string(port_);
    // The listen loop starts on its thread: wait until it answers.
    ApiClient probe({.url = url_});
    for (int i = 0; i < 500; ++i) {
      try {
        probe.get("/healthz");
        break;
      } catch (const ApiUnreachableError&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }
  void TearDown() override {
    if (server_) {
      server_->stop(std::chrono::seconds(5));
      thread_.join();
    }
  }
  ApiClient client(const std::string& token = "") {
    return ApiClient({.url = url_, .token = token});
  }

  // The ApiError `f` throws (fails the test when it throws none).
  template <typename F>
  static ApiError error_of(F&& f) {
    try {
      f();
    } catch (const ApiError& e) {
      return e;
    }
    ADD_FAILURE() << "no ApiError";
    return ApiError(0, json::object());
  }

  testing::TempDir dir_;
  std::shared_ptr<FakeControlPlane> control_ = std::make_shared<FakeControlPlane>();
  std::shared_ptr<StateStore> store_;
  std::unique_ptr<ApiServer> server_;
  std::thread thread_;
  int port_ = 0;
  std::string url_;
};

TEST_F(ApiClientTest, JsonAnswersOfGetPostAndDelete) {
  start();
  ApiClient c = client();
  const json clusters = c.get("/v1/clusters");
  ASSERT_EQ(clusters["clusters"].size(), 2u);
  EXPECT_EQ(clusters["clusters"][0]["config"].get<ClusterConfig>(), cluster("tpu-a"));
  EXPECT_TRUE(clusters["clusters"][0]["breakers"].is_array());

  const json decision =
      c.post("/v1/select", {{"accelerator_type", "tpu-v4-64"}, {"explain", true}});
  const auto selection = decision.get<ClusterSelection>();
  EXPECT_EQ(selection.selected_cluster, "tpu-a");
  EXPECT_NE(selection.selection_id, 0);
  EXPECT_EQ(decision["candidate_probes"][0]["age_ms"], 1500);
  EXPECT_EQ(c.get("/v1/selections/" + std::to_string(selection.selection_id))["reason"],
            selection.reason);

  // Without a cluster the server selects: the selection comes with the handle.
  WorkloadSpec spec{.name = "run-1",
                    .docker_image = "img",
                    .command = {"python3", "x.py"},
                    .accelerator_type = "tpu-v4-64"};
  const json submitted = c.post("/v1/workloads", {{"spec", spec}});
  EXPECT_EQ(submitted["handle"]["cluster"], "tpu-a");
  EXPECT_EQ(submitted["selection"]["selected_cluster"], "tpu-a");
  EXPECT_EQ(c.del("/v1/workloads/tpu-a/run-1")["cancelled"], true);
  EXPECT_EQ(c.get("/v1/clusters/tpu-a?fresh=true")["probe"]["result"]["cluster"], "tpu-a");

  // An export with a grep: started, then done with its result.
  const json started = c.post("/v1/exports", {{"cluster", "tpu-a"},
                                              {"workload", "run-1"},
                                              {"dest", "gs://falcon-logs/p"},
                                              {"grep", "textPayload:\"step\""}});
  const std::string path = "/v1/exports/" + std::to_string(started["id"].get<std::int64_t>());
  json e = c.get(path);
  for (int i = 0; i < 500 && e["state"] == "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    e = c.get(path);
  }
  EXPECT_EQ(e["state"], "done");
  EXPECT_EQ(e["result"].get<LogExportResult>().gcs_uris.at(0), "gs://falcon-logs/p/rank-0.log");
  EXPECT_EQ(control_->export_grep, "textPayload:\"step\"");
}

// The typed remote client: a decision made first, then a submit to the cluster it chose, linked
// to it; the server refuses a link to a decision that chose another cluster.
TEST_F(ApiClientTest, TheRemoteClientLinksASubmitToTheDecisionThatChoseItsCluster) {
  start();
  const auto remote = make_remote_client({.url = url_});
  const Decision d = remote->select({.accelerator_type = "tpu-v4-64"});
  ASSERT_TRUE(d.brief);
  ASSERT_NE(d.selection.selection_id, 0);
  WorkloadSpec spec{.name = "run-1",
                    .docker_image = "img",
                    .command = {"python3", "x.py"},
                    .accelerator_type = "tpu-v4-64"};
  const Submission s =
      remote->submit({.spec = spec, .cluster = "tpu-a", .selection_id = d.selection.selection_id});
  EXPECT_EQ(s.handle.cluster, "tpu-a");
  ASSERT_EQ(control_->links.size(), 1u);
  EXPECT_EQ(control_->links[0], d.selection.selection_id);
  EXPECT_THROW(
      remote->submit({.spec = spec, .cluster = "tpu-b", .selection_id = d.selection.selection_id}),
      ApiError);
  EXPECT_EQ(control_->links.size(), 1u);
}

TEST_F(ApiClientTest, TheServersErrorsGiveTheExitCodesOfLocalMode) {
  start();
  ApiClient c = client();
  struct Case {
    std::function<void()> call;
    int status;
    std::string type;
    int exit_code;
  };
  WorkloadSpec spec{
      .name = "exists", .docker_image = "img", .command = {"x"}, .accelerator_type = "tpu-v4-64"};
  WorkloadSpec bad = spec;
  bad.name = "Bad_Name";
  const std::vector<Case> cases = {
      {[&] { c.get("/v1/clusters/nope"); }, 404, "UnknownClusterError", kExitNotFound},
      {[&] {
         c.post("/v1/select", {{"accelerator_type", "h100"}});
       },
       503, "NoAvailableClusterError", kExitNoCluster},
      {[&] { c.get("/v1/clusters/tpu-b?fresh=true"); }, 503, "ClusterUnreachableError",
       kExitUnreachable},
      {[&] { c.get("/v1/workloads/tpu-a/gone"); }, 404, "WorkloadNotFoundError", kExitNotFound},
      {[&] { c.get("/v1/workloads/tpu-a/xpk-fails"); }, 502, "XpkCommandError", kExitXpkFailed},
      {[&] { c.get("/v1/workloads/tpu-a/no-xpk"); }, 502, "CommandStartError", kExitXpkFailed},
      {[&] { c.get("/v1/workloads/tpu-a/db"); }, 503, "StateStoreError", kExitInternal},
      {[&] { c.get("/v1/workloads/tpu-a/no-logs/logs"); }, 502, "LogRetrievalError", kExitLogs},
      {[&] {
         c.post("/v1/workloads", {{"cluster", "tpu-a"}, {"spec", spec}});
       },
       409, "WorkloadExistsError", kExitXpkFailed},
      {[&] {
         c.post("/v1/workloads", {{"cluster", "tpu-a"}, {"spec", bad}});
       },
       400, "InvalidWorkloadSpecError", kExitUsage},
      {[&] {
         c.post("/v1/select", {{"accelerator", "x"}});
       },
       400, "UsageError", kExitUsage},
      {[&] { c.get("/v1/nothing-here"); }, 404, "RouteNotFound", kExitNotFound},
      {[&] { c.get("/v1/selections/999999"); }, 404, "NotFound", kExitNotFound},
  };
  for (const Case& k : cases) {
    const ApiError e = error_of(k.call);
    EXPECT_EQ(e.status(), k.status) << k.type << ": " << e.what();
    EXPECT_EQ(e.type(), k.type) << e.what();
    EXPECT_EQ(exit_code_for_api_error(e.status(), e.type()), k.exit_code) << k.type;
    EXPECT_EQ(e.error()["message"], e.what());
  }
  // The details come along, as `falcon --json` prints them locally.
  const ApiError no_cluster = error_of([&] { c.post("/v1/select", {{"accelerator_type", "h1"}}); });
  EXPECT_EQ(no_cluster.error()["probe_results"][0]["cluster"], "tpu-a");
  const ApiError xpk = error_of([&] { c.get("/v1/workloads/tpu-a/xpk-fails"); });
  EXPECT_EQ(xpk.error()["stderr"], "boom");
  EXPECT_EQ(xpk.error()["cluster"], "tpu-a");
}

TEST(ApiClientExitCodes, StatusesWithoutAKnownTypeMapBackToTheirClass) {
  EXPECT_EQ(exit_code_for_api_error(400, "HttpError"), kExitUsage);
  EXPECT_EQ(exit_code_for_api_error(401, "Unauthorized"), kExitUsage);
  EXPECT_EQ(exit_code_for_api_error(403, "Forbidden"), kExitUsage);
  EXPECT_EQ(exit_code_for_api_error(413, "PayloadTooLarge"), kExitUsage);
  EXPECT_EQ(exit_code_for_api_error(404, "RouteNotFound"), kExitNotFound);
  EXPECT_EQ(exit_code_for_api_error(409, "Conflict"), kExitXpkFailed);
  EXPECT_EQ(exit_code_for_api_error(502, "BadGateway"), kExitXpkFailed);
  EXPECT_EQ(exit_code_for_api_error(503, "Stopping"), kExitUnreachable);
  EXPECT_EQ(exit_code_for_api_error(500, "Whatever"), kExitInternal);
  EXPECT_EQ(exit_code_for_api_error(0, "Stopped"), kExitInternal);
  // A type decides over the status: both of these are 503 on the wire.
  EXPECT_EQ(exit_code_for_api_error(503, "NoAvailableClusterError"), kExitNoCluster);
  EXPECT_EQ(exit_code_for_api_error(503, "ClusterUnreachableError"), kExitUnreachable);
}

TEST_F(ApiClientTest, TokensAreSentAndAWrongOneIs401) {
  auto tokens = std::make_shared<TokenTable>();
  tokens->add("operator-token-0123456789", TokenRole::kOperate);
  tokens->add("reader-token-0123456789ab", TokenRole::kRead);
  start(tokens);
  const ApiError none = error_of([&] { client().get("/v1/clusters"); });
  EXPECT_EQ(none.status(), 401);
  EXPECT_EQ(exit_code_for_api_error(none.status(), none.type()), kExitUsage);
  const ApiError wrong = error_of([&] { client("not-the-token-at-all").get("/v1/clusters"); });
  EXPECT_EQ(wrong.status(), 401);
  EXPECT_THAT(wrong.what(), HasSubstr("unknown bearer token"));
  EXPECT_EQ(client("operator-token-0123456789").get("/v1/clusters")["clusters"].size(), 2u);
  const ApiError reader = error_of([&] {
    client("reader-token-0123456789ab").post("/v1/select", {{"accelerator_type", "x"}});
  });
  EXPECT_EQ(reader.status(), 403);
  // Streams carry the token too.
  std::vector<std::string> lines;
  client("reader-token-0123456789ab")
      .stream_lines("/v1/workloads/tpu-a/run/logs",
                    [&](const std::string& l) { lines.push_back(l); });
  EXPECT_EQ(lines.size(), 3u);
}

TEST_F(ApiClientTest, LogLinesStreamAndAFollowEndsWhenStopSays) {
  start();
  ApiClient c = client();
  std::vector<std::string> lines;
  c.stream_lines("/v1/workloads/tpu-a/run/logs" +
                     ApiClient::query({{"rank", "2"}, {"tail", "2"}, {"grep", "step=9 \"x\""}}),
                 [&](const std::string& l) { lines.push_back(l); });
  EXPECT_THAT(lines, ::testing::ElementsAre("rank 2 line 1", "rank 2 line 2", "grep step=9 \"x\""));

  // A follow never ends by itself here: the stop predicate ends it, while no data comes.
  std::atomic<bool> stop{false};
  std::vector<std::string> followed;
  std::thread stopper([&] {
    for (int i = 0; i < 3000 && followed.size() < 2; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    stop = true;
  });
  const auto start_time = std::chrono::steady_clock::now();
  c.stream_lines(
      "/v1/workloads/tpu-a/run/logs?follow=true",
      [&](const std::string& l) { followed.push_back(l); }, [&] { return stop.load(); });
  stopper.join();
  EXPECT_THAT(followed, ::testing::ElementsAre("first", "second"));
  EXPECT_LT(std::chrono::steady_clock::now() - start_time, std::chrono::seconds(20));
  // The server noticed the client went away.
  for (int i = 0; i < 500 && !control_->follow_stopped; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(control_->follow_stopped);

  // An error before the body is the server's error.
  const ApiError e =
      error_of([&] { c.stream_lines("/v1/workloads/nope/run/logs", [](const std::string&) {}); });
  EXPECT_EQ(e.type(), "UnknownClusterError");
  EXPECT_EQ(e.status(), 404);
}

TEST_F(ApiClientTest, AnErrorOfOnLineEndsTheStreamAndIsRethrown) {
  start();
  ApiClient c = client();
  // With a stop predicate (its watcher thread running) and without: the error comes out of
  // stream_lines as thrown, after the first line, and the server sees the client go away.
  for (const bool with_stop : {true, false}) {
    SCOPED_TRACE(with_stop ? "with stop" : "without stop");
    control_->follow_stopped = false;
    std::vector<std::string> seen;
    try {
      c.stream_lines(
          "/v1/workloads/tpu-a/run/logs?follow=true",
          [&](const std::string& l) {
            seen.push_back(l);
            throw std::runtime_error("the reader gave up");
          },
          with_stop ? std::function<bool()>([] { return false; }) : std::function<bool()>());
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "the reader gave up");
    }
    EXPECT_THAT(seen, ::testing::ElementsAre("first"));
    for (int i = 0; i < 500 && !control_->follow_stopped; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(control_->follow_stopped);
  }
}

TEST_F(ApiClientTest, AServerThatIsNotThereIsAClearErrorNamingTheUrl) {
  start();
  server_->stop(std::chrono::seconds(1));
  thread_.join();
  server_.reset();
  ApiClient c({.url = url_ + "/", .connect_timeout = std::chrono::milliseconds(2000)});
  EXPECT_EQ(c.url(), url_);
  const auto start_time = std::chrono::steady_clock::now();
  try {
    c.get("/v1/clusters");
    FAIL() << "no error";
  } catch (const ApiUnreachableError& e) {
    EXPECT_EQ(e.url(), url_);
    EXPECT_THAT(e.what(), HasSubstr("cannot reach the falcon server at " + url_));
    EXPECT_THAT(e.what(), HasSubstr("GET /v1/clusters"));
  }
  EXPECT_THROW(c.stream_lines("/v1/workloads/a/b/logs", [](const std::string&) {}),
               ApiUnreachableError);
  EXPECT_LT(std::chrono::steady_clock::now() - start_time, std::chrono::seconds(10));
}

TEST(ApiClientUrls, BadUrlsAreRefusedAndQueriesAreEncoded) {
  for (const char* url :
       {"", "127.0.0.1:8787", "ftp://h:1", "http://h:1/v1", "http://", "http://h:x"}) {
    EXPECT_THROW(ApiClient({.url = url}), std::invalid_argument) << url;
  }
  EXPECT_NO_THROW(ApiClient({.url = "https://falcon.example.com"}));
  EXPECT_NO_THROW(ApiClient({.url = "http://[::1]:8787/"}));
  EXPECT_EQ(ApiClient::query({{"a", "1"}, {"b", std::nullopt}, {"c", "x y&z=\"q\""}}),
            "?a=1&c=x%20y%26z%3D%22q%22");
  EXPECT_EQ(ApiClient::query({{"b", std::nullopt}}), "");
  EXPECT_EQ(ApiClient::segment("run/1"), "run%2F1");
}

}  // namespace
}  // namespace falcon
