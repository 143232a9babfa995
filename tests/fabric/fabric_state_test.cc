// The facade and its state store (issue 13): selections, probes, submissions and observed
// workload states are recorded; the old submissions.jsonl is imported once; a store that cannot
// be opened costs only memory, never a command.
#include <sys/stat.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "falcon/errors.h"
#include "falcon/fabric.h"
#include "falcon/fabric_counters.h"
#include "falcon/state_store.h"
#include "serve/api_server.h"
#include "serve/select_answer.h"
#include "state/sqlite_connection.h"
#include "support/fake_clock.h"
#include "support/fake_command_runner.h"
#include "support/fake_http_client.h"
#include "support/temp_dir.h"
#include "util/time_format.h"
#include "xpk/xpk_outputs.h"

namespace falcon {
namespace {

using ::testing::Contains;
using testing::FakeClock;
using testing::FakeCommandRunner;
using testing::FakeHttpClient;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;

constexpr const char* kClusters = R"(clusters:
  tpu-a:
    project: falcon-bench
    zone: us-central2-b
    cluster_id: tpu-v4-cluster
    accelerator_types:
      - type: tpu-v4-64
        device_class: tpu
        priority: 1
    max_queue_depth: 50
  tpu-b:
    project: falcon-bench
    zone: us-central2-b
    cluster_id: tpu-b
    accelerator_types:
      - type: tpu-v4-64
        device_class: tpu
        priority: 2
    max_queue_depth: 50
)";

class FabricStateTest : public ::testing::Test {
 protected:
  FabricStateTest() {
    runner_->attach_clock(clock_);
    write_config("");
  }

  // `more_clusters`: entries after kClusters' (indented as they are).
  void write_config(const std::string& serve_section, const std::string& more_clusters = "") {
    std::ofstream out(config_path(), std::ios::trunc);
    out << kClusters << more_clusters
        << fmt::format("xpk:\n  state_dir: {}\ngcp:\n  logging_endpoint: http://logging.test\n",
                       state_dir().string())
        << serve_section;
  }
  std::filesystem::path state_dir() const { return tmp_.path() / "state"; }
  std::string config_path() const { return (tmp_.path() / "repos.yaml").string(); }

  // A fabric with the default store (<state_dir>/falcon.db) unless `state` is given.
  std::unique_ptr<ClusterFabric> fabric(std::shared_ptr<StateStore> state = nullptr) {
    FabricDependencies deps{runner_, http_, clock_};
    deps.state = std::move(state);
    deps.on_notice = [this](const std::string& text) { notices_.push_back(text); };
    return std::make_unique<ClusterFabric>(config_path(), std::move(deps));
  }
  std::unique_ptr<StateStore> open_db() const {
    return open_state_store(default_state_url(state_dir()));
  }

  // A control plane over the default store whose loop is stopped (nothing probes behind the
  // test's back), its cache warmed by one explained select of tpu-v4-64.
  struct WarmControlPlane {
    std::shared_ptr<StateStore> store;
    std::shared_ptr<ClusterFabric> fabric;
    std::shared_ptr<ControlPlane> control;
  };
  WarmControlPlane warm_control_plane() {
    runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
    WarmControlPlane w;
    w.store = open_db();
    w.fabric = fabric(w.store);
    w.control = make_fabric_control_plane(w.fabric, w.store, clock_);
    stop_control_plane_loop(*w.control);
    w.control->select_explained("tpu-v4-64");  // every candidate probed: the cache is warm
    return w;
  }

  WorkloadSpec spec(const std::string& name) const {
    WorkloadSpec s;
    s.name = name;
    s.docker_image = "gcr.io/p/img:1";
    s.command = {"python3", "train.py"};
    s.accelerator_type = "tpu-v4-64";
    return s;
  }

  testing::TempDir tmp_;
  std::shared_ptr<FakeCommandRunner> runner_ = std::make_shared<FakeCommandRunner>();
  std::shared_ptr<FakeHttpClient> http_ = std::make_shared<FakeHttpClient>();
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
  std::vector<std::string> notices_;
};

TEST_F(FabricStateTest, ASelectionIsRecordedWithItsProbesAndItsIdReturned) {
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  auto f = fabric();
  const ClusterSelection s = f->select_cluster("tpu-v4-64");
  EXPECT_EQ(s.selected_cluster, "tpu-a");
  ASSERT_NE(s.selection_id, 0);
  const auto db = open_db();
  const auto back = db->get_selection(s.selection_id);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->selection, s);
  // Both candidates' probes are in the history, with how they were obtained.
  for (const char* name : {"tpu-a", "tpu-b"}) {
    const auto p = db->latest_probe(name);
    ASSERT_TRUE(p.has_value()) << name;
    EXPECT_EQ(p->backend, "xpk");
    EXPECT_TRUE(p->result.reachable);
    EXPECT_GE(p->duration_ms, 0);
  }
  // A second selection gets another id.
  EXPECT_GT(f->select_cluster("tpu-v4-64").selection_id, s.selection_id);
  EXPECT_THAT(notices_, SizeIs(0));
}

TEST_F(FabricStateTest, SelectionThroughAProbeFunctionAsksItInsteadOfProbing) {
  auto f = fabric();
  std::atomic<int> asked{0};
  const ClusterSelection s = f->select_cluster(
      "tpu-v4-64", {.probe = [&](const ClusterConfig& c) {
        ++asked;
        ClusterProbeResult r;
        r.cluster = c.name;
        r.reachable = c.name == "tpu-b";  // tpu-a, preferred, is down in the cache
        if (r.reachable) {
          r.queue_depth = 0;
          r.running_count = 0;
        } else {
          r.error = "probe timed out after 15s";
        }
        r.probed_at = "2026-04-13T07:59:50.000Z";
        return r;
      }});
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(runner_->calls().size(), 0u);  // no xpk ran
  EXPECT_EQ(s.selected_cluster, "tpu-b");
  EXPECT_EQ(s.probe_results.at(0).probed_at, "2026-04-13T07:59:50.000Z");
  ASSERT_NE(s.selection_id, 0);
  const auto db = open_db();
  EXPECT_EQ(db->get_selection(s.selection_id)->selection.selected_cluster, "tpu-b");
  EXPECT_TRUE(db->latest_probes().empty());  // the caller records its own probes
  // A probe function that throws makes that candidate unreachable, with the message.
  const ClusterSelection t = f->select_cluster("tpu-v4-64", {.probe = [](const ClusterConfig& c) {
                                                 if (c.name == "tpu-a")
                                                   throw std::runtime_error("cache gone");
                                                 ClusterProbeResult r;
                                                 r.cluster = c.name;
                                                 r.reachable = true;
                                                 r.queue_depth = 0;
                                                 r.running_count = 0;
                                                 return r;
                                               }});
  EXPECT_EQ(t.selected_cluster, "tpu-b");
  EXPECT_THAT(t.probe_results.at(0).error.value_or(""), HasSubstr("cache gone"));
  // A decision that finds nothing is kept too, with every candidate's probe and the reason.
  EXPECT_THROW(f->select_cluster("tpu-v4-64", {.probe =
                                                   [](const ClusterConfig& c) {
                                                     ClusterProbeResult r;
                                                     r.cluster = c.name;
                                                     r.error = "down";
                                                     return r;
                                                   }}),
               NoAvailableClusterError);
  // cached and basis are ways of asking `probe`: without it they are a programming error.
  EXPECT_THROW(
      f->select_cluster(
          "tpu-v4-64",
          {.cached = [](const ClusterConfig&) { return std::optional<ClusterProbeResult>(); }}),
      std::invalid_argument);
  const auto newest = db->list_selections(1).at(0);
  EXPECT_GT(newest.id, t.selection_id);
  EXPECT_EQ(newest.selection.selected_cluster, "");
  EXPECT_EQ(newest.selection.candidates, (std::vector<std::string>{"tpu-a", "tpu-b"}));
  EXPECT_THAT(newest.selection.reason, HasSubstr("no available cluster for tpu-v4-64"));
}

TEST_F(FabricStateTest, HistoriesAreKeptBetweenDecisionsUntilTheFabricWritesOrTheyAge) {
  auto f = fabric();
  const auto db = open_db();
  auto probe_record = [&](std::chrono::seconds ago, std::int64_t duration_ms) {
    ProbeRecord p;
    p.result.cluster = "tpu-a";
    p.result.reachable = true;
    p.result.queue_depth = 0;
    p.result.running_count = 0;
    p.result.probed_at = format_iso8601(clock_->now() - ago);
    p.backend = "xpk";
    p.duration_ms = duration_ms;
    return p;
  };
  auto cached = [](const ClusterConfig& c) -> std::optional<ClusterProbeResult> {
    ClusterProbeResult r;
    r.cluster = c.name;
    r.reachable = true;
    r.queue_depth = 0;
    r.running_count = 0;
    return r;
  };
  auto never_probe = [](const ClusterConfig& c) -> ClusterProbeResult {
    ADD_FAILURE() << "probed " << c.name;
    return {};
  };
  // tpu-a's mean probe latency over the window, as this decision's signals saw it.
  auto latency = [&] {
    const ClusterSelection s =
        f->select_cluster("tpu-v4-64", {.probe = never_probe, .cached = cached});
    return s.scores.at(0).signals.latency_ms.value_or(-1);
  };
  db->record_probes({probe_record(std::chrono::seconds(60), 100)});
  EXPECT_DOUBLE_EQ(latency(), 100);
  // Another process writes: the kept history is used for up to two seconds...
  db->record_probes({probe_record(std::chrono::seconds(30), 300)});
  EXPECT_DOUBLE_EQ(latency(), 100);
  clock_->advance(std::chrono::milliseconds(1999));
  EXPECT_DOUBLE_EQ(latency(), 100);
  // ...and read again after them.
  clock_->advance(std::chrono::milliseconds(1));
  EXPECT_DOUBLE_EQ(latency(), 200);
  // What this fabric writes about a cluster shows in the next decision at once: here the probe
  // of a status query (0 ms on the fake clock).
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  f->get_cluster_status("tpu-a");
  EXPECT_DOUBLE_EQ(latency(), (100.0 + 300.0 + 0.0) / 3);
}

TEST_F(FabricStateTest, AFailingClusterTripsItsBreakerIsSkippedUnprobedAndRecoversOnATrial) {
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  runner_->on({"workload", "list", "--cluster=tpu-v4-cluster"},
              FakeCommandRunner::fails(1, "Unable to connect to the server"));
  auto f = fabric();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(f->select_cluster("tpu-v4-64").selected_cluster, "tpu-b");
  const auto tripped = f->cluster_breakers("tpu-a");
  ASSERT_THAT(tripped, SizeIs(2));  // the cluster's, and tpu-a/v4-64's
  EXPECT_EQ(tripped[0].key, "tpu-a");
  EXPECT_EQ(tripped[0].state, "open");
  EXPECT_EQ(tripped[0].trips, 1);
  EXPECT_EQ(tripped[1].key, "tpu-a/v4-64");
  EXPECT_EQ(tripped[1].state, "closed");
  // Open: tpu-a is skipped without running xpk, and the selection says why.
  const auto probes_before = runner_->calls_matching({"--cluster=tpu-v4-cluster"}).size();
  const ClusterSelection skipped = f->select_cluster("tpu-v4-64");
  EXPECT_EQ(runner_->calls_matching({"--cluster=tpu-v4-cluster"}).size(), probes_before);
  EXPECT_EQ(skipped.selected_cluster, "tpu-b");
  EXPECT_THAT(skipped.probe_results.at(0).error.value_or(""),
              HasSubstr("not probed: circuit breaker open until"));
  // Another process sharing the store sees the same breaker.
  EXPECT_EQ(fabric()->cluster_breakers("tpu-a").at(0).state, "open");
  // After the cool-down one trial probe goes through; it succeeds and closes the breaker.
  clock_->advance(std::chrono::seconds(60));
  runner_->on({"workload", "list", "--cluster=tpu-v4-cluster"},
              FakeCommandRunner::ok(testing::kListV113));
  EXPECT_EQ(f->select_cluster("tpu-v4-64").selected_cluster, "tpu-a");
  EXPECT_EQ(f->cluster_breakers("tpu-a").at(0).state, "closed");
}

TEST_F(FabricStateTest, FailedSubmitsTripTheClusterAcceleratorBreaker) {
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  runner_->on({"workload", "create"}, FakeCommandRunner::fails(1, "quota exceeded"));
  auto f = fabric();
  for (int i = 0; i < 3; ++i) {
    EXPECT_THROW(f->submit_workload("tpu-a", spec(fmt::format("job-{}", i))), WorkloadSubmitError);
  }
  EXPECT_EQ(f->cluster_breakers("tpu-a").at(1).state, "open");
  EXPECT_EQ(f->cluster_breakers("tpu-a").at(0).state, "closed");
  const ClusterSelection s = f->select_cluster("tpu-v4-64");
  EXPECT_EQ(s.selected_cluster, "tpu-b");
  EXPECT_THAT(s.probe_results.at(0).error.value_or(""), HasSubstr("for tpu-v4-64"));
}

TEST_F(FabricStateTest, ClusterStatusProbesGoIntoTheHistoryAndProbeClusterRecordsNothing) {
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  auto f = fabric();
  EXPECT_TRUE(f->get_cluster_status("tpu-a").reachable);
  EXPECT_TRUE(f->get_cluster_status("tpu-a").reachable);
  EXPECT_TRUE(f->probe_cluster(f->get_cluster("tpu-b")).reachable);
  const auto db = open_db();
  const auto history = db->probe_history("tpu-a", clock_->now() - std::chrono::hours(1),
                                         clock_->now() + std::chrono::hours(1));
  EXPECT_THAT(history, SizeIs(2));
  EXPECT_FALSE(db->latest_probe("tpu-b").has_value());
}

TEST_F(FabricStateTest, SubmissionsAreKeptInTheStoreAndFoundByAnotherFabric) {
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  const WorkloadHandle submitted = fabric()->submit_workload("tpu-a", spec("llama-8b-bench"));
  EXPECT_FALSE(std::filesystem::exists(state_dir() / "submissions.jsonl"));
  const auto row = open_db()->find_submission("tpu-a", "llama-8b-bench");
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->handle, submitted);
  EXPECT_EQ(row->accelerator_type, "v4-64");
  EXPECT_EQ(row->docker_image, "gcr.io/p/img:1");
  // Another fabric (another process, later) recovers it by name.
  EXPECT_EQ(fabric()->handle_for("tpu-a", "llama-8b-bench"), submitted);
}

TEST_F(FabricStateTest, AnInjectedStoreIsUsedInsteadOfFalconDb) {
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  std::shared_ptr<StateStore> store =
      open_state_store("sqlite://" + (tmp_.path() / "elsewhere" / "team.db").string());
  auto f = fabric(store);
  EXPECT_EQ(f->state_store(), store);
  const WorkloadHandle h = f->submit_workload("tpu-a", spec("injected"));
  EXPECT_EQ(store->find_submission("tpu-a", "injected")->handle, h);
  EXPECT_FALSE(std::filesystem::exists(state_dir() / "falcon.db"));
}

TEST_F(FabricStateTest, ObservedWorkloadStatesAreRecordedOncePerChange) {
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  auto f = fabric();
  const WorkloadHandle h{.workload_name = "train-c",
                         .cluster = "tpu-a",
                         .namespace_ = "default",
                         .submitted_at = "2026-04-13T07:00:00.000Z"};
  EXPECT_EQ(f->get_workload_status(h).state, "COMPLETED");
  clock_->advance(std::chrono::seconds(5));
  EXPECT_EQ(f->get_workload_status(h).state, "COMPLETED");
  const auto events = open_db()->list_workload_events("tpu-a", "train-c");
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].state, "COMPLETED");
  EXPECT_EQ(events[0].observed_at, std::chrono::time_point_cast<std::chrono::milliseconds>(
                                       clock_->now() - std::chrono::seconds(5)));
}

TEST_F(FabricStateTest, AnOldSubmissionsFileIsImportedOnceAndLeftReadOnly) {
  std::filesystem::create_directories(state_dir());
  const auto file = state_dir() / "submissions.jsonl";
  std::ofstream(file)
      << R"({"v":1,"cluster":"tpu-a","workload":"old-run","namespace":"team-a",)"
      << R"("accelerator_type":"tpu-v4-64","device_class":"tpu",)"
      << R"("submitted_at":"2026-04-01T10:00:00.000Z","cluster_id":"tpu-v4-cluster",)"
      << R"("project":"falcon-bench","zone":"us-central2-b","docker_image":"i","priority":"low"})"
      << "\n";
  auto f = fabric();
  const WorkloadHandle h = f->handle_for("tpu-a", "old-run");
  EXPECT_EQ(h.namespace_, "team-a");
  EXPECT_EQ(h.submitted_at, "2026-04-01T10:00:00.000Z");
  EXPECT_THAT(notices_, Contains(HasSubstr("imported 1 submission(s)")));
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0222, 0u);
  // A second fabric does not import it again, nor say so.
  notices_.clear();
  EXPECT_EQ(fabric()->handle_for("tpu-a", "old-run").namespace_, "team-a");
  EXPECT_THAT(notices_, SizeIs(0));
}

// Selecting and probing cost only memory without a store; a submit is refused before xpk runs,
// since a workload the store does not know of could not be found by name again.
TEST_F(FabricStateTest, AStoreThatCannotBeOpenedCostsMemoryAndRefusesSubmits) {
  write_config("serve:\n  state: mysql://db/falcon\n");
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  auto f = fabric();
  const ClusterSelection s = f->select_cluster("tpu-v4-64");
  EXPECT_EQ(s.selected_cluster, "tpu-a");
  EXPECT_EQ(s.selection_id, 0);
  EXPECT_TRUE(f->get_cluster_status("tpu-b").reachable);
  try {
    f->submit_workload("tpu-a", spec("no-memory"));
    ADD_FAILURE() << "expected StateStoreError";
  } catch (const StateStoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("workload 'no-memory' to cluster 'tpu-a' before creating it "
                                    "(nothing was created)"));
    EXPECT_THAT(e.what(), HasSubstr("mysql://db/falcon"));
  }
  EXPECT_TRUE(runner_->calls_matching({"workload", "create"}).empty());
  EXPECT_THROW(f->state_store(), StateStoreError);
  // Said once that the store cannot be opened.
  int open_notices = 0;
  for (const auto& n : notices_) {
    if (n.find("the state store cannot be opened") != std::string::npos) ++open_notices;
  }
  EXPECT_EQ(open_notices, 1);
  EXPECT_THAT(notices_, Contains(HasSubstr("mysql://db/falcon")));
}

// The counters seam: every xpk call is counted by verb and result.
TEST_F(FabricStateTest, XpkCallsAreCountedByVerbAndResult) {
  runner_->on({"workload", "list", "--cluster=tpu-v4-cluster"},
              FakeCommandRunner::ok(testing::kListV113));
  runner_->on({"workload", "list", "--cluster=tpu-b"}, FakeCommandRunner::fails(1, "denied"));
  auto counters = std::make_shared<FabricCounters>();
  FabricDependencies deps{runner_, http_, clock_};
  deps.counters = counters;
  ClusterFabric f(config_path(), deps);
  f.select_cluster("tpu-v4-64");
  f.get_cluster_status("tpu-a");
  const auto snapshot = counters->snapshot();
  using Key = std::pair<std::string, std::string>;
  EXPECT_EQ(snapshot.xpk_calls.at(Key("list", "ok")), 2u);
  EXPECT_EQ(snapshot.xpk_calls.at(Key("list", "failed")), 1u);
  EXPECT_EQ(snapshot.xpk_calls.size(), 2u);
  EXPECT_EQ(f.counters(), counters);
}

// The HTTP side of the seam: Logging reads (and 429s) and upload bytes, whatever the host.
TEST(CountingHttpClient, CountsLoggingReadsTheir429sAndUploadBytes) {
  auto inner = std::make_shared<FakeHttpClient>();
  inner->enqueue("POST", "/v2/entries:list", testing::json_response(429, "{}"));
  inner->on("POST", "/v2/entries:list",
            [](const HttpRequest&) { return testing::json_response(200, "{}"); });
  inner->enqueue_transport_error("POST", "/v2/entries:list", "reset", false);
  inner->on("POST", "/upload/storage/v1/b/bucket/o",
            [](const HttpRequest&) { return testing::json_response(200, "{}"); });
  inner->on("GET", "/storage/v1/b/bucket/o/x",
            [](const HttpRequest&) { return testing::json_response(200, "{}"); });
  auto counters = std::make_shared<FabricCounters>();
  auto http = make_counting_http_client(inner, counters);
  auto send = [&](std::string method, std::string url, std::string body = "") {
    HttpRequest r;
    r.method = std::move(method);
    r.url = std::move(url);
    r.body = std::move(body);
    return http->send(r);
  };
  EXPECT_EQ(send("POST", "http://logging.test/v2/entries:list").status, 429);
  EXPECT_THROW(send("POST", "http://logging.test/v2/entries:list"), HttpTransportError);
  EXPECT_EQ(send("POST", "https://logging.googleapis.com/v2/entries:list").status, 200);
  send("POST", "http://gcs.test/upload/storage/v1/b/bucket/o?uploadType=media&name=x", "12345");
  send("GET", "http://gcs.test/storage/v1/b/bucket/o/x");
  const auto s = counters->snapshot();
  EXPECT_EQ(s.logging_reads, 3u);
  EXPECT_EQ(s.logging_ok, 1u);
  EXPECT_EQ(s.logging_rate_limited, 1u);
  EXPECT_EQ(s.logging_failed, 1u);
  EXPECT_EQ(s.upload_requests, 1u);
  EXPECT_EQ(s.upload_bytes, 5u);
  EXPECT_EQ(make_counting_http_client(inner, nullptr), inner);  // no counters: no wrapper
}

// Issue 27: when the store refuses a decision (a full disk), the control plane still answers it,
// with selection_id 0 and the store's reason, and does not repeat it: the next select decides
// afresh and is recorded once the store takes writes again.
TEST_F(FabricStateTest, ADecisionTheStoreRefusedIsAnsweredUnrecordedAndNotRepeated) {
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  const auto url = default_state_url(state_dir());
  std::shared_ptr<StateStore> store = open_state_store(url);
  std::shared_ptr<ClusterFabric> f = fabric(store);
  auto control = make_fabric_control_plane(f, store, clock_);
  const Decision ok = control->select_explained("tpu-v4-64");
  EXPECT_NE(ok.selection.selection_id, 0);
  EXPECT_EQ(ok.selection.not_recorded, "");
  ASSERT_EQ(ok.candidate_probes.size(), 2u);
  state::SqliteConnection raw((state_dir() / "falcon.db").string(), std::chrono::seconds(10));
  raw.execute(
      "CREATE TRIGGER refuse BEFORE INSERT ON selections "
      "BEGIN SELECT RAISE(ABORT, 'disk full (test)'); END");
  const Decision refused = control->select_brief("tpu-v4-64");
  EXPECT_EQ(refused.selection.selection_id, 0);
  EXPECT_EQ(refused.selection.selected_cluster, ok.selection.selected_cluster);
  EXPECT_THAT(refused.selection.not_recorded, HasSubstr("disk full (test)"));
  EXPECT_THAT(serve::brief_select_answer_json(refused), HasSubstr("\"explain\":null"));
  EXPECT_THAT(notices_, Contains(HasSubstr("disk full (test)")));
  raw.execute("DROP TRIGGER refuse");
  const Decision again = control->select_brief("tpu-v4-64");
  EXPECT_NE(again.selection.selection_id, 0);  // decided afresh, not the unrecorded one repeated
  EXPECT_EQ(again.same_as, 0);
  EXPECT_EQ(again.selection.not_recorded, "");
  stop_control_plane_loop(*control);
}

// A brief select repeats the last decision while nothing it read changed (serve.select_reuse_ms):
// by default (record_repeats: none) the answer is that decision itself, its id and time, with
// its probe ages moved on, and nothing more is stored.
TEST_F(FabricStateTest, ABriefSelectRepeatsTheLastDecisionWhileItsInputsStand) {
  const auto [store, f, control] = warm_control_plane();

  const Decision first = control->select_brief("tpu-v4-64");
  EXPECT_EQ(first.same_as, 0);
  ASSERT_EQ(first.candidate_probes.size(), 2u);
  const std::size_t stored_before = store->list_selections(100, std::nullopt).size();
  const Decision again = control->select_brief("tpu-v4-64");
  EXPECT_EQ(again.same_as, first.selection.selection_id);
  EXPECT_EQ(again.selection.selection_id, first.selection.selection_id);
  EXPECT_EQ(again.selection.selection_id, first.selection.selection_id);
  EXPECT_EQ(again.selection.decided_at, first.selection.decided_at);
  EXPECT_EQ(again.selection.selected_cluster, first.selection.selected_cluster);
  EXPECT_EQ(again.selection.reason, first.selection.reason);
  ASSERT_EQ(again.candidate_probes.size(), 2u);
  EXPECT_EQ(again.candidate_probes[0].age_ms, first.candidate_probes[0].age_ms);

  clock_->advance(std::chrono::milliseconds(400));
  const Decision later = control->select_brief("tpu-v4-64");
  EXPECT_EQ(later.same_as, first.selection.selection_id);
  EXPECT_EQ(later.selection.selection_id, first.selection.selection_id);
  EXPECT_EQ(later.candidate_probes[1].age_ms, first.candidate_probes[1].age_ms + 400);
  EXPECT_TRUE(later.candidate_probes[1].from_cache);
  EXPECT_EQ(store->list_selections(100, std::nullopt).size(), stored_before);  // no row each

  // select_reuse_ms (1000) after the first decision: decided afresh.
  clock_->advance(std::chrono::milliseconds(700));
  const Decision expired = control->select_brief("tpu-v4-64");
  EXPECT_EQ(expired.same_as, 0);
  EXPECT_GT(expired.selection.selection_id, first.selection.selection_id);
  EXPECT_EQ(control->select_brief("tpu-v4-64").same_as, expired.selection.selection_id);

  // A breaker written by this server drops the decision; one that is not closed keeps every
  // decision fresh (a half-open trial is handed to one caller, never repeated).
  const int failures = f->config()->selection.breaker.failures;
  control->record_cluster_failure("tpu-a");
  EXPECT_EQ(control->select_brief("tpu-v4-64").same_as, 0);
  for (int i = 1; i < failures; ++i) control->record_cluster_failure("tpu-a");
  const Decision open = control->select_brief("tpu-v4-64");
  EXPECT_EQ(open.same_as, 0);
  EXPECT_EQ(open.selection.selected_cluster, "tpu-b");
  EXPECT_EQ(control->select_brief("tpu-v4-64").same_as, 0);
  // An explained select always decides afresh.
  EXPECT_EQ(control->select_explained("tpu-v4-64").same_as, 0);
}

// The decision stands on its own type's inputs only: a probe shown or a
// breaker changed for a cluster that does not offer tpu-v4-64 leaves it standing; a probe of one
// that does ends it (newer data: the next caller decides afresh).
TEST_F(FabricStateTest, ABriefSelectStandsThroughInputsOfClustersOfferingOtherTypes) {
  write_config("", R"(  tpu-c:
    project: falcon-bench
    zone: us-central2-b
    cluster_id: tpu-c
    accelerator_types:
      - type: v5litepod-256
        device_class: tpu
        priority: 1
    max_queue_depth: 50
)");
  const auto [store, f, control] = warm_control_plane();
  const Decision first = control->select_brief("tpu-v4-64");
  ASSERT_EQ(first.same_as, 0);

  f->record_probe_shown("tpu-c");
  control->record_cluster_failure("tpu-c");
  EXPECT_EQ(control->select_brief("tpu-v4-64").same_as, first.selection.selection_id);
  EXPECT_EQ(f->selection_changed_since("v5litepod-256", 0), SelectionChange::kGate);

  f->record_probe_shown("tpu-b");  // a probe of a candidate: newer data
  const std::uint64_t before = f->selection_epoch();
  EXPECT_EQ(f->selection_changed_since("tpu-v4-64", before), SelectionChange::kNone);
  const Decision renewed = control->select_brief("tpu-v4-64");
  EXPECT_EQ(renewed.same_as, 0);
  EXPECT_GT(renewed.selection.selection_id, first.selection.selection_id);
  EXPECT_EQ(control->select_brief("tpu-v4-64").same_as, renewed.selection.selection_id);
}

// record_repeats: durable: each repeat is a decision of its own pointing at the one it repeats,
// with its own id and time, and reads back whole.
TEST_F(FabricStateTest, RecordedRepeatsAreDecisionsOfTheirOwn) {
  write_config("serve:\n  record_repeats: durable\n");
  const auto [store, f, control] = warm_control_plane();

  const Decision first = control->select_brief("tpu-v4-64");
  EXPECT_EQ(first.same_as, 0);
  const Decision again = control->select_brief("tpu-v4-64");
  EXPECT_EQ(again.same_as, first.selection.selection_id);
  EXPECT_GT(again.selection.selection_id, first.selection.selection_id);
  EXPECT_EQ(again.selection.selection_id, again.selection.selection_id);

  clock_->advance(std::chrono::milliseconds(400));
  const Decision later = control->select_brief("tpu-v4-64");
  EXPECT_EQ(later.same_as, first.selection.selection_id);
  EXPECT_GT(later.selection.selection_id, again.selection.selection_id);
  EXPECT_EQ(later.candidate_probes[1].age_ms, first.candidate_probes[1].age_ms + 400);
  EXPECT_NE(later.selection.decided_at, first.selection.decided_at);
  // The repeat reads back whole: the explanation of the first with its own id and time.
  const auto stored = store->get_selection(later.selection.selection_id);
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->same_as, first.selection.selection_id);
  EXPECT_EQ(stored->selection.scores,
            store->get_selection(first.selection.selection_id)->selection.scores);
  EXPECT_FALSE(stored->selection.scores.empty());
  EXPECT_EQ(stored->selection.decided_at, later.selection.decided_at);
}

// The event loop's half of a brief select: prepare_repeat never decides and never writes
// (nullopt whenever select_brief would decide, wait, or record the repeat); by default
// (record_repeats: none) a repeat is the standing decision itself, its id and time, with the
// candidates' ages moved on.
TEST_F(FabricStateTest, RepeatsArePreparedWithoutDecidingOrWriting) {
  const auto [store, f, control] = warm_control_plane();
  EXPECT_FALSE(control->prepare_repeat("tpu-v4-64"));  // no standing brief decision yet
  EXPECT_FALSE(control->prepare_repeat("no-such-type"));
  const auto calls = runner_->calls().size();
  const Decision first = control->select_brief("tpu-v4-64");
  const std::size_t stored = store->list_selections(100, std::nullopt).size();

  clock_->advance(std::chrono::milliseconds(250));
  auto a = control->prepare_repeat("tpu-v4-64");
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->brief);
  EXPECT_EQ(a->selection.selection_id, first.selection.selection_id);
  EXPECT_EQ(a->same_as, first.selection.selection_id);
  EXPECT_EQ(a->selection.decided_at, first.selection.decided_at);
  EXPECT_EQ(a->selection.selected_cluster, first.selection.selected_cluster);
  ASSERT_EQ(a->candidate_probes.size(), first.candidate_probes.size());
  EXPECT_EQ(a->candidate_probes[0].age_ms, first.candidate_probes[0].age_ms + 250);
  EXPECT_TRUE(a->candidate_probes[0].from_cache);
  EXPECT_EQ(store->list_selections(100, std::nullopt).size(), stored);
  EXPECT_EQ(runner_->calls().size(), calls);  // nothing probed for it

  // A breaker change ends the standing decision: nothing to prepare, select_brief decides.
  control->record_cluster_failure("tpu-a");
  EXPECT_FALSE(control->prepare_repeat("tpu-v4-64"));
  const Decision fresh = control->select_brief("tpu-v4-64");
  EXPECT_EQ(fresh.same_as, 0);
  auto c = control->prepare_repeat("tpu-v4-64");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->same_as, fresh.selection.selection_id);
  // Past half of select_reuse_ms (1000 ms) the decision is renewed ahead: a caller that can
  // decide is told to (nullopt), and select_brief decides afresh.
  clock_->advance(std::chrono::milliseconds(500));
  EXPECT_FALSE(control->prepare_repeat("tpu-v4-64"));
  const Decision renewed = control->select_brief("tpu-v4-64");
  EXPECT_EQ(renewed.same_as, 0);
  EXPECT_EQ(control->prepare_repeat("tpu-v4-64")->same_as, renewed.selection.selection_id);
  clock_->advance(std::chrono::milliseconds(1000));  // select_reuse_ms: stale
  EXPECT_FALSE(control->prepare_repeat("tpu-v4-64"));
}

// A repeat to be recorded (record_repeats: written) is select_brief's, which writes it: the event
// loop is never handed one.
TEST_F(FabricStateTest, RepeatsToRecordAreNotPreparedOnTheEventLoop) {
  write_config("serve:\n  record_repeats: written\n");
  const auto [store, f, control] = warm_control_plane();
  const Decision first = control->select_brief("tpu-v4-64");
  clock_->advance(std::chrono::milliseconds(250));
  EXPECT_FALSE(control->prepare_repeat("tpu-v4-64"));
  const Decision again = control->select_brief("tpu-v4-64");
  EXPECT_EQ(again.same_as, first.selection.selection_id);
  EXPECT_GT(again.selection.selection_id, first.selection.selection_id);
}

TEST_F(FabricStateTest, ABriefSelectIsNotRepeatedOnProbesOlderThanTheMaximumAge) {
  write_config("serve:\n  max_probe_age_s: 2\n  select_reuse_ms: 5000\n");
  const auto [store, f, control] = warm_control_plane();
  const Decision first = control->select_brief("tpu-v4-64");
  clock_->advance(std::chrono::milliseconds(1000));
  EXPECT_EQ(control->select_brief("tpu-v4-64").same_as, first.selection.selection_id);
  const auto probes_before = runner_->calls().size();
  clock_->advance(std::chrono::milliseconds(1500));  // the probes are 2.5 s old now
  const Decision fresh = control->select_brief("tpu-v4-64");
  EXPECT_EQ(fresh.same_as, 0);
  EXPECT_GT(runner_->calls().size(), probes_before);  // probed again before deciding
  for (const auto& p : fresh.candidate_probes) EXPECT_LT(p.age_ms, 2000) << p.result.cluster;

  write_config("serve:\n  select_reuse_ms: 0\n");
  reload_control_plane(*control);
  control->select_brief("tpu-v4-64");
  EXPECT_EQ(control->select_brief("tpu-v4-64").same_as, 0);
}

// In `falcon serve` the health loop's probes are what a cluster breaker hears: failures open it,
// a success closes it once its cool-down is over, and a trial a selection claims ends with the
// probe that selection used. Nothing fed them a success before: a claimed trial stayed "under
// way" with nobody running it, refusing the supervisor's decisions until it lapsed.
TEST_F(FabricStateTest, TheControlPlanesProbesFeedTheClusterBreakerAndEndTheTrialsItClaims) {
  write_config("serve:\n  probe_interval_s: 3600\n  max_probe_age_s: 5\n");
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  runner_->on({"workload", "list", "--cluster=tpu-v4-cluster"},
              FakeCommandRunner::fails(1, "Unable to connect to the server"));
  std::shared_ptr<StateStore> store = open_state_store(default_state_url(state_dir()));
  std::shared_ptr<ClusterFabric> f = fabric(store);
  auto control = make_fabric_control_plane(f, store, clock_);
  auto breaker = [&] { return f->cluster_breakers("tpu-a").at(0); };
  for (int i = 0; i < 3; ++i) {
    clock_->advance(std::chrono::seconds(6));  // older than max_probe_age_s: probed again
    EXPECT_FALSE(control->fresh_probe("tpu-a").result.reachable);
  }
  EXPECT_EQ(breaker().state, "open");
  EXPECT_EQ(breaker().trips, 1);

  // The cluster answers again within the cool-down (60 s): the cool-down is not cut short.
  runner_->on({"workload", "list", "--cluster=tpu-v4-cluster"},
              FakeCommandRunner::ok(testing::kListV113));
  clock_->advance(std::chrono::seconds(6));
  EXPECT_TRUE(control->fresh_probe("tpu-a").result.reachable);
  EXPECT_EQ(breaker().state, "open");
  EXPECT_EQ(control->select_explained("tpu-v4-64").selection.selected_cluster, "tpu-b");

  // Cool-down over: the selection claims the trial and its probe ends it.
  clock_->advance(std::chrono::seconds(60));
  EXPECT_EQ(control->select_explained("tpu-v4-64").selection.selected_cluster, "tpu-a");
  EXPECT_EQ(breaker().state, "closed");

  // Down again. The supervisor's decision excludes tpu-a but its gate claims tpu-a's due trial
  // all the same: that trial ends with the health loop's cached probe (a failure: open again,
  // one more trip) instead of staying under way with nobody running it.
  runner_->on({"workload", "list", "--cluster=tpu-v4-cluster"},
              FakeCommandRunner::fails(1, "Unable to connect to the server"));
  for (int i = 0; i < 3; ++i) {
    clock_->advance(std::chrono::seconds(6));
    control->fresh_probe("tpu-a");
  }
  ASSERT_EQ(breaker().state, "open");
  const int trips = breaker().trips;
  clock_->advance(std::chrono::seconds(1000));  // past any cool-down: a trial is due
  EXPECT_FALSE(control->fresh_probe("tpu-a").result.reachable);
  EXPECT_EQ(control->select_excluding("tpu-v4-64", {"tpu-a"}).selection.selected_cluster, "tpu-b");
  EXPECT_EQ(breaker().state, "open");
  EXPECT_EQ(breaker().trips, trips + 1);
  stop_control_plane_loop(*control);
}

// A cluster the health loop has seen answer every probe for the first trip's cool-down
// (selection.breaker.cooldown_s) is let back before a later trip's longer cool-down is over:
// one answer is not enough, and a probe that fails starts the count again.
TEST_F(FabricStateTest, AClusterThatAnswersForTheFirstCooldownIsLetBackBeforeALongerOneEnds) {
  write_config("serve:\n  probe_interval_s: 3600\n  max_probe_age_s: 5\n");
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  const auto down = [&] {
    runner_->on({"workload", "list", "--cluster=tpu-v4-cluster"},
                FakeCommandRunner::fails(1, "Unable to connect to the server"));
  };
  const auto up = [&] {
    runner_->on({"workload", "list", "--cluster=tpu-v4-cluster"},
                FakeCommandRunner::ok(testing::kListV113));
  };
  std::shared_ptr<StateStore> store = open_state_store(default_state_url(state_dir()));
  std::shared_ptr<ClusterFabric> f = fabric(store);
  auto control = make_fabric_control_plane(f, store, clock_);
  auto breaker = [&] { return f->cluster_breakers("tpu-a").at(0); };
  auto probe = [&](int after_s) {
    clock_->advance(std::chrono::seconds(after_s));
    return control->fresh_probe("tpu-a").result.reachable;
  };
  down();
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(probe(6));
  ASSERT_EQ(breaker().trips, 1);
  // The trial after the first cool-down (60 s) fails: the second trip, 120 s.
  EXPECT_FALSE(probe(61));
  EXPECT_EQ(control->select_explained("tpu-v4-64").selection.selected_cluster, "tpu-b");
  ASSERT_EQ(breaker().state, "open");
  ASSERT_EQ(breaker().trips, 2);

  up();
  EXPECT_TRUE(probe(6));  // answering since now
  EXPECT_TRUE(probe(30));
  EXPECT_EQ(breaker().state, "open");  // 30 s of answers: not yet
  down();
  EXPECT_FALSE(probe(10));  // the count starts again
  up();
  EXPECT_TRUE(probe(6));
  EXPECT_TRUE(probe(40));
  EXPECT_EQ(breaker().state, "open");  // 40 s since the failure: not yet
  EXPECT_TRUE(probe(21));              // 61 s of answers, 113 s into a 120 s cool-down
  EXPECT_EQ(breaker().state, "closed");
  EXPECT_EQ(breaker().trips, 2);  // remembered: a new trip cools down longer still
  EXPECT_EQ(control->select_explained("tpu-v4-64").selection.selected_cluster, "tpu-a");
  stop_control_plane_loop(*control);
}

// The supervisor's decisions take a cached probe as stale once the control plane has submitted
// to that cluster since it was made (its queue depth no longer says what the cluster has); an
// API selection keeps answering from the cache.
TEST_F(FabricStateTest, TheSupervisorsDecisionsProbeAgainAClusterSubmittedToSinceItsProbe) {
  write_config("serve:\n  probe_interval_s: 3600\n  max_probe_age_s: 60\n");
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  runner_->on({"workload", "create"}, FakeCommandRunner::ok("[XPK] Exiting XPK cleanly\n"));
  std::shared_ptr<StateStore> store = open_state_store(default_state_url(state_dir()));
  std::shared_ptr<ClusterFabric> f = fabric(store);
  auto control = make_fabric_control_plane(f, store, clock_);
  auto probes_of_a = [&] {
    return runner_->calls_matching({"workload", "list", "--cluster=tpu-v4-cluster"}).size();
  };
  EXPECT_EQ(control->select_excluding("tpu-v4-64", {}).selection.selected_cluster, "tpu-a");
  const auto first = probes_of_a();
  EXPECT_EQ(control->select_excluding("tpu-v4-64", {}).selection.selected_cluster, "tpu-a");
  EXPECT_EQ(probes_of_a(), first);  // cached
  clock_->advance(std::chrono::seconds(1));
  control->submit({.spec = spec("train-r1"), .cluster = "tpu-a"});
  control->select_explained("tpu-v4-64");
  EXPECT_EQ(probes_of_a(), first);  // an API selection: still the cache
  control->select_excluding("tpu-v4-64", {"tpu-b"});
  EXPECT_EQ(probes_of_a(), first + 1);  // probed again after the submit
  control->select_excluding("tpu-v4-64", {"tpu-b"});
  EXPECT_EQ(probes_of_a(), first + 1);  // and that probe is newer than the submit
  stop_control_plane_loop(*control);
}

// What the supervisor knows beyond the probes: its placements decided and not submitted yet
// count as QUEUED workloads of their cluster's probe (tpu-a's queue then exceeds its
// max_queue_depth), and a cluster with no room is left out while another can take the workload,
// chosen when none can.
TEST_F(FabricStateTest, TheSupervisorsDecisionsCountItsPlacementsInFlightAndAvoidFullClusters) {
  write_config("serve:\n  probe_interval_s: 3600\n  max_probe_age_s: 60\n");
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  std::shared_ptr<StateStore> store = open_state_store(default_state_url(state_dir()));
  std::shared_ptr<ClusterFabric> f = fabric(store);
  auto control = make_fabric_control_plane(f, store, clock_);
  EXPECT_EQ(control->select_excluding("tpu-v4-64", {}).selection.selected_cluster, "tpu-a");

  PlacementHints in_flight;
  in_flight.in_flight["tpu-a"] = 60;  // max_queue_depth 50
  Decision o = control->select_excluding("tpu-v4-64", {}, in_flight);
  EXPECT_EQ(o.selection.selected_cluster, "tpu-b");
  EXPECT_THAT(o.selection.reason, HasSubstr("tpu-b"));

  PlacementHints full;
  full.no_room["tpu-a"] = "16 workloads running or queued there, room for 16";
  o = control->select_excluding("tpu-v4-64", {}, full);
  EXPECT_EQ(o.selection.selected_cluster, "tpu-b");
  bool said = false;
  for (const ClusterProbeResult& r : o.selection.probe_results) {
    if (r.cluster == "tpu-a") {
      said = r.error.value_or("").find("no room: 16 workloads") != std::string::npos;
    }
  }
  EXPECT_TRUE(said);
  // tpu-b excluded: tpu-a, full or not, is the one left.
  EXPECT_EQ(control->select_excluding("tpu-v4-64", {"tpu-b"}, full).selection.selected_cluster,
            "tpu-a");
  stop_control_plane_loop(*control);
}

// Issue 30: a candidate an open circuit breaker kept out has no probe; the brief answer names it
// with why, instead of leaving it out.
TEST_F(FabricStateTest, TheBriefAnswerNamesACandidateABreakerKeptOut) {
  write_config("serve:\n  probe_interval_s: 3600\n  max_probe_age_s: 60\n");
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  std::shared_ptr<StateStore> store = open_state_store(default_state_url(state_dir()));
  BreakerState open{.key = "tpu-a",
                    .state = kBreakerOpen,
                    .consecutive_failures = 3,
                    .trips = 1,
                    .opened_until = clock_->now() + std::chrono::minutes(5),
                    .updated_at = clock_->now()};
  ASSERT_TRUE(store->compare_and_set_breaker(open));
  std::shared_ptr<ClusterFabric> f = fabric(store);
  auto control = make_fabric_control_plane(f, store, clock_);
  const Decision out = control->select_brief("tpu-v4-64");
  EXPECT_EQ(out.selection.selected_cluster, "tpu-b");
  ASSERT_EQ(out.skipped.size(), 1u);
  EXPECT_EQ(out.skipped.begin()->first, "tpu-a");
  EXPECT_THAT(out.skipped.begin()->second, HasSubstr("circuit breaker"));
  const std::string answer = serve::brief_select_answer_json(out);
  EXPECT_THAT(answer, HasSubstr("\"skipped\":{\"tpu-a\":"));
  EXPECT_THAT(answer, Not(HasSubstr("\"probe_age_ms\":{\"tpu-a\"")));
  stop_control_plane_loop(*control);
}

}  // namespace
}  // namespace falcon
