// The HTTP API on a loopback port, over a fake control plane and a real SQLite state store:
// routes, error mapping, bad input on every route, auth, streaming, exports, OpenAPI coverage
// and the metrics text.
#include "serve/api_server.h"

#include <httplib.h>
#include <signal.h>
#include <sys/stat.h>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "falcon/state_store.h"
#include "falcon/workload_manager.h"
#include "serve/select_answer.h"
#include "serve/supervisor.h"
#include "support/fake_clock.h"
#include "support/temp_dir.h"

namespace falcon {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

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

ClusterConfig cluster(const std::string& name, int priority) {
  ClusterConfig c;
  c.name = name;
  c.provider = "gke";
  c.project = "proj";
  c.zone = "us-central2-b";
  c.location = c.zone;
  c.cluster_id = name;
  c.accelerator_slots = {{"v4-64", DeviceClass::kTpu, priority}};
  return c;
}

// A control plane with canned answers; records what it was asked.
class FakeControlPlane final : public ControlPlane {
 public:
  std::vector<ClusterConfig> configs = {cluster("tpu-a", 1), cluster("tpu-b", 2)};
  std::shared_ptr<StateStore> store;
  std::atomic<int> selects{0};
  std::atomic<bool> follow_running{false};
  std::atomic<bool> follow_stopped{false};
  std::mutex export_mutex;
  std::condition_variable export_cv;
  bool release_export = false;
  std::vector<WorkloadSpec> submitted;
  std::vector<std::int64_t> links;  // each submit's selection_id
  std::atomic<ExportVia> export_via{ExportVia::kAuto};

  void check(const std::string& name) const {
    for (const auto& c : configs) {
      if (c.name == name) return;
    }
    throw UnknownClusterError(name, {"tpu-a", "tpu-b"});
  }

  ClusterConfig cluster_config(const std::string& name) const override {
    for (const ClusterConfig& c : configs) {
      if (c.name == name) return c;
    }
    check(name);  // UnknownClusterError
    return {};
  }
  std::vector<ClusterEntry> list_clusters() override {
    std::vector<ClusterEntry> out;
    for (const ClusterConfig& c : configs) out.push_back({c, breakers(c.name)});
    return out;
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
    if (name == "tpu-b") return std::nullopt;
    ProbeSnapshot s;
    s.result = {name, true, 1, 2, std::nullopt, "2026-04-13T08:00:00.000Z"};
    s.result.capacity_error = capacity_error;
    s.result.capacity = capacity;
    s.backend = backend;
    s.duration_ms = 250;
    s.age_ms = 1500;
    s.from_cache = true;
    return s;
  }
  std::string backend = "xpk";  // of every cached probe
  std::optional<std::string> capacity_error;
  std::vector<AcceleratorCapacity> capacity;  // of every cached probe
  std::vector<BreakerReport> breakers(const std::string& name) const override {
    check(name);
    if (name != "tpu-b") return {{.key = name, .state = "closed", .summary = "closed"}};
    return {{.key = "tpu-b",
             .state = "open",
             .consecutive_failures = 3,
             .trips = 2,
             .opened_until = "2026-04-13T08:02:00.000Z",
             .summary = "open until 2026-04-13T08:02:00.000Z (trip 2, 3 failures)"},
            {.key = "tpu-b/v4-64", .state = "half_open", .summary = "half_open"}};
  }
  Decision select_explained(const std::string& accelerator) override {
    ++selects;
    if (accelerator != "tpu-v4-64" && accelerator != "v4-64") {
      throw NoAvailableClusterError("no cluster supports " + accelerator, accelerator, {});
    }
    Decision o;
    o.selection.selected_cluster = "tpu-a";
    o.selection.accelerator = "v4-64";
    o.selection.candidates = {"tpu-a", "tpu-b"};
    o.selection.probe_results = {cached_probe("tpu-a")->result};
    o.selection.reason = "selected tpu-a: reachable, queue_depth=1 <= max=5";
    o.selection.decided_at = "2026-04-13T08:00:00.000Z";
    o.selection.policy = "priority";
    CandidateScore a{.cluster = "tpu-a", .eligible = true, .rank = 1};
    a.terms = {{.signal = "priority", .value = 1.0, .weight = 1, .contribution = 1}};
    a.verdict = "selected: priority 1, queue_depth 1";
    CandidateScore b{.cluster = "tpu-b", .priority = 2, .skip_reason = "circuit breaker open"};
    b.verdict = "skipped: circuit breaker open";
    o.selection.scores = {a, b};
    o.selection.selection_id = store->record_selection(o.selection);
    o.candidate_probes = {*cached_probe("tpu-a")};
    return o;
  }
  // Repeats of decision repeat_of when it is set (0: none, as the default): recorded by
  // select_brief, as record_repeats written or durable; with record false not recorded, and then
  // offered to the event loop whole (as record_repeats none).
  std::atomic<std::int64_t> repeat_of{0};
  std::atomic<bool> record{true};
  std::atomic<int> prepared{0};
  std::atomic<int> record_calls{0};
  // The repeat as the fabric's control plane makes it: the standing decision, its candidate's
  // probe 250 ms older.
  std::optional<Decision> repeat(const std::string& accelerator) {
    if (repeat_of == 0 || accelerator != "tpu-v4-64") return std::nullopt;
    Decision o;
    o.brief = true;
    o.selection.selected_cluster = "tpu-a";
    o.selection.accelerator = "v4-64";
    o.selection.reason = "repeated";
    o.selection.policy = "priority";
    o.selection.decided_at = "2026-04-13T08:00:01.000Z";
    o.same_as = repeat_of;
    o.candidate_probes = {*cached_probe("tpu-a")};
    o.candidate_probes[0].age_ms += 250;
    if (!record) o.selection.selection_id = repeat_of;
    return o;
  }
  std::optional<Decision> prepare_repeat(const std::string& accelerator) override {
    if (record) return std::nullopt;  // select_brief records it
    auto o = repeat(accelerator);
    if (o) ++prepared;
    return o;
  }
  // As the fabric's control plane: a repeat when one stands (recorded), else a decision.
  Decision select_brief(const std::string& accelerator) override {
    if (auto r = repeat(accelerator)) {
      if (r->selection.selection_id == 0) {
        ++record_calls;
        try {
          r->selection.selection_id =
              store->record_repeated_selection(r->same_as, r->selection.decided_at);
        } catch (const std::invalid_argument&) {
          // The decision repeated is gone: decided afresh.
        }
      }
      if (r->selection.selection_id != 0) return *r;
    }
    Decision o = select_explained(accelerator);
    o.brief = true;
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
    if (spec.name == "store-down") {
      throw StateStoreError("postgresql", "postgresql://db/falcon", "record_submission",
                            "the database system is starting up");
    }
    if (spec.name == "refused") {
      // xpk's words on every create, about its own service account: not a duplicate name.
      throw WorkloadSubmitError(
          "xpk workload create failed for workload 'refused' on cluster '" + c +
              "': [XPK] xpk-sa already exists. Skipping its creation. admission webhook denied",
          c, spec.name, 1, "");
    }
    if (spec.name == "Bad_Name")
      throw InvalidWorkloadSpecError("bad name 'Bad_Name'", c, spec.name);
    submitted.push_back(spec);
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
    return {h.workload_name, kStateRunning, "2026-04-13T08:00:01.000Z", std::nullopt, std::nullopt};
  }
  Cancellation cancel(const std::string& c, const std::string& w) override {
    const WorkloadHandle h = handle_for(c, w);
    if (h.workload_name == "gone") throw WorkloadNotFoundError(h.cluster, h.workload_name);
    return {h, true};
  }
  std::vector<WorkloadInfo> list_workloads(const std::string& c,
                                           const std::optional<std::string>&) override {
    check(c);
    if (c == "tpu-b") throw ClusterUnreachableError(c, "probe timed out");
    return {{"run-1", kStateRunning, "v4-64", std::nullopt}};
  }
  LogLines read_log(const WorkloadHandle& h, int rank, const LogFilter& filter,
                    int) const override {
    if (h.workload_name == "no-logs") throw LogRetrievalError("Cloud Logging said 500", 500);
    if (h.workload_name == "forger") {
      // A line that would end its event and forge another if sent as it is.
      return LogLines(std::make_unique<VectorSource>(
          std::vector<std::string>{"a\n\nevent: forged\ndata: x\r\ny\rz", "next"}));
    }
    std::vector<std::string> lines;
    for (int i = 0; i < 3; ++i)
      lines.push_back("rank " + std::to_string(rank) + " line " + std::to_string(i));
    if (filter.tail_lines) lines.erase(lines.begin(), lines.end() - *filter.tail_lines);
    return LogLines(std::make_unique<VectorSource>(lines));
  }
  // Follows only (a read that does not follow is read_log's).
  void read_logs(const LogRequest& request, const std::function<void(const std::string&)>& on_line,
                 const std::function<bool()>& stop) override {
    if (!request.follow) throw std::logic_error("FakeControlPlane::read_logs: follows only");
    follow_running = true;
    on_line("first");
    on_line("second");
    while (!stop()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    follow_stopped = true;
  }
  LogExportResult export_logs(const ExportRequest& request,
                              const ExportObserver& observer) override {
    const WorkloadHandle h = handle_for(request.cluster, request.workload);
    const std::string& dest = request.dest;
    FakeControlPlane* self = this;
    self->export_via = request.via.value_or(ExportVia::kAuto);
    if (observer.on_status) {
      ExportStatus chosen;
      chosen.via = request.via.value_or(ExportVia::kAuto);
      chosen.message = "copy: a bucket's entries are copied into Cloud Storage";
      chosen.state = "RUNNING";
      chosen.percent = 40;
      chosen.phase = ExportStatus::Phase::kCopying;
      observer.on_status(chosen);
    }
    observer.on_progress({0, 10, 100, false});
    std::unique_lock lock(self->export_mutex);
    self->export_cv.wait(lock, [self] { return self->release_export; });
    if (h.workload_name == "bad-export") throw LogRetrievalError("bucket denied", 403);
    LogExportResult r;
    r.workload_name = h.workload_name;
    r.cluster = h.cluster;
    r.exported_ranks = {0};
    r.gcs_uris = {{0, dest + "/rank-0.log"}};
    r.exported_at = "2026-04-13T08:00:02.000Z";
    return r;
  }
  ConfigInfo config_info() const override {
    return {"/etc/falcon/repos.yaml", "sha256:abc", "2026-04-13T08:00:00.000Z", 2, 1, 1,
            "repos.yaml:3:1: bad"};
  }
  ProbeCacheStats cache_stats() const override { return {5, 1, 7, 2, 0}; }
  FabricCounters::Snapshot fabric_counters() const override {
    FabricCounters::Snapshot s;
    s.xpk_calls[{"list", "ok"}] = 12;
    s.xpk_calls[{"create", "failed"}] = 1;
    s.logging_reads = 9;
    s.logging_ok = 6;
    s.logging_rate_limited = 2;
    s.logging_failed = 1;
    s.upload_requests = 3;
    s.upload_bytes = 4096;
    return s;
  }
  bool ready() const override { return true; }
  std::optional<std::string> store_problem() const override {
    std::lock_guard lock(store_problem_mutex);
    return store_down;
  }
  void set_store_down(std::optional<std::string> why) {
    std::lock_guard lock(store_problem_mutex);
    store_down = std::move(why);
  }
  mutable std::mutex store_problem_mutex;
  std::optional<std::string> store_down;
};

class ApiServerTest : public ::testing::Test {
 protected:
  void start(std::shared_ptr<const TokenTable> tokens = nullptr, std::size_t max_body = 1 << 20,
             ServeLimits limits = {}) {
    store_ = open_state_store("sqlite://" + (dir_.path() / "falcon.db").string());
    control_->store = store_;
    ApiServerOptions options;
    options.control = control_;
    options.store = store_;
    options.clock = clock_;
    options.tokens = std::move(tokens);
    options.limits = limits;
    options.limits.max_body_bytes = static_cast<int>(max_body);
    server_ = std::make_unique<ApiServer>(options);
    port_ = server_->bind("127.0.0.1", 0);
    thread_ = std::thread([this] { server_->serve(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client_->set_read_timeout(30, 0);
    // Wait until it answers (the listen loop starts on its thread).
    for (int i = 0; i < 500 && !client_->Get("/healthz"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  void TearDown() override {
    if (server_) {
      {
        std::lock_guard lock(control_->export_mutex);
        control_->release_export = true;
      }
      control_->export_cv.notify_all();
      server_->stop(std::chrono::seconds(5));
      thread_.join();
    }
  }
  static json body(const httplib::Result& r) { return json::parse(r->body); }
  httplib::Result post(const std::string& path, const std::string& text) {
    return client_->Post(path.c_str(), text, "application/json");
  }

  testing::TempDir dir_;
  std::shared_ptr<testing::FakeClock> clock_ = std::make_shared<testing::FakeClock>();
  std::shared_ptr<FakeControlPlane> control_ = std::make_shared<FakeControlPlane>();
  std::shared_ptr<StateStore> store_;
  std::unique_ptr<ApiServer> server_;
  std::thread thread_;
  int port_ = 0;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ApiServerTest, ClustersShowTheirCachedProbeAndItsAge) {
  start();
  auto r = client_->Get("/v1/clusters");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = body(r);
  ASSERT_EQ(j["clusters"].size(), 2u);
  EXPECT_EQ(j["clusters"][0]["name"], "tpu-a");
  EXPECT_EQ(j["clusters"][0]["probe"]["age_ms"], 1500);
  EXPECT_EQ(j["clusters"][0]["probe"]["result"]["queue_depth"], 1);
  EXPECT_TRUE(j["clusters"][1]["probe"].is_null());
  EXPECT_EQ(j["clusters"][0]["breakers"][0]["state"], "closed");
  EXPECT_EQ(j["clusters"][1]["breakers"][0]["state"], "open");
  EXPECT_EQ(j["clusters"][1]["breakers"][0]["trips"], 2);
  EXPECT_EQ(j["clusters"][1]["breakers"][0]["opened_until"], "2026-04-13T08:02:00.000Z");
  r = client_->Get("/v1/clusters/tpu-b");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body(r)["breakers"][1]["key"], "tpu-b/v4-64");
  EXPECT_EQ(body(r)["breakers"][1]["state"], "half_open");
}

TEST_F(ApiServerTest, ClustersShowEachSlotsCapacityAsTheSelectorCountsIt) {
  // Two flavors of the slot's GKE accelerator, neither named for v4-64: summed, as the fit rule
  // sums them; a flavor of another accelerator is not counted.
  control_->backend = "kube";
  control_->capacity = {{.flavor = "pool-a",
                         .accelerator = "tpu-v4-podslice",
                         .resource = "google.com/tpu",
                         .nominal = 64,
                         .used = 48,
                         .largest_free_block = 16},
                        {.flavor = "pool-b",
                         .accelerator = "tpu-v4-podslice",
                         .resource = "google.com/tpu",
                         .nominal = 32,
                         .used = 0,
                         .largest_free_block = 32},
                        {.flavor = "h100",
                         .accelerator = "nvidia-h100-80gb",
                         .resource = "nvidia.com/gpu",
                         .nominal = 8,
                         .used = 0}};
  start();
  auto r = client_->Get("/v1/clusters");
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = body(r);
  const json& slots = j["clusters"][0]["slot_capacity"];
  ASSERT_EQ(slots.size(), 1u) << slots;
  EXPECT_EQ(slots[0]["type"], "v4-64");
  EXPECT_EQ(slots[0]["slice_chips"], 32);
  EXPECT_EQ(slots[0]["nominal_chips"], 96);
  EXPECT_EQ(slots[0]["free_chips"], 48);
  EXPECT_EQ(slots[0]["largest_free_block"], 32);
  EXPECT_EQ(j["clusters"][1]["slot_capacity"], json::array());  // not probed yet

  // A flavor that does not say its blocks leaves the largest free block unknown.
  control_->capacity[1].largest_free_block.reset();
  r = client_->Get("/v1/clusters");
  EXPECT_TRUE(body(r)["clusters"][0]["slot_capacity"][0]["largest_free_block"].is_null());

  // Capacity not known (or not read, the xpk backend): no slot has one.
  control_->capacity.clear();
  control_->capacity_error = "answered 403 to the ClusterQueue list: forbidden";
  r = client_->Get("/v1/clusters");
  EXPECT_EQ(body(r)["clusters"][0]["slot_capacity"], json::array());
}

TEST_F(ApiServerTest, OneClusterWithItsProbeHistorySince) {
  start();
  ProbeRecord old;
  old.result = {"tpu-a", true, 0, 0, std::nullopt, "2026-04-13T05:00:00.000Z"};
  old.backend = "xpk";
  ProbeRecord recent = old;
  recent.result.probed_at = "2026-04-13T07:50:00.000Z";
  recent.result.queue_depth = 4;
  store_->record_probes({old, recent});
  auto r = client_->Get("/v1/clusters/tpu-a");  // default: the last hour
  ASSERT_EQ(r->status, 200) << r->body;
  json j = body(r);
  ASSERT_EQ(j["history"].size(), 1u);
  EXPECT_EQ(j["history"][0]["result"]["queue_depth"], 4);
  r = client_->Get("/v1/clusters/tpu-a?since=2026-04-13T04:00:00Z");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body(r)["history"].size(), 2u);
  r = client_->Get("/v1/clusters/tpu-a?since=4h");
  EXPECT_EQ(body(r)["history"].size(), 2u);

  r = client_->Get("/v1/clusters/nope");
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(body(r)["error"]["type"], "UnknownClusterError");
  r = client_->Get("/v1/clusters/tpu-a?since=yesterday");
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(body(r)["error"]["message"].get<std::string>(), HasSubstr("since"));
  r = client_->Get("/v1/clusters/tpu-a?limit=0");
  EXPECT_EQ(r->status, 400);
  r = client_->Get("/v1/clusters/tpu-a?sinse=1h");
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(body(r)["error"]["message"].get<std::string>(), HasSubstr("'sinse'"));
}

// A brief select that repeats a standing decision to be recorded (serve.record_repeats written
// or durable) goes to a worker, where the control plane records it (in the store's group
// commit), never reaching select(); anything else (an explained select, a repeat whose
// decision is gone) is decided afresh.
TEST_F(ApiServerTest, ABriefSelectThatRepeatsIsRecordedOnAWorker) {
  start();
  auto r = post("/v1/select", R"({"accelerator_type": "tpu-v4-64"})");
  ASSERT_EQ(r->status, 200) << r->body;
  const std::int64_t base = body(r)["selection_id"];
  EXPECT_EQ(control_->selects.load(), 1);
  control_->repeat_of = base;
  r = post("/v1/select", R"({"accelerator_type": "tpu-v4-64"})");
  ASSERT_EQ(r->status, 200) << r->body;
  const json repeat = body(r);
  EXPECT_EQ(repeat["same_as"], base);
  EXPECT_GT(repeat["selection_id"].get<std::int64_t>(), base);
  EXPECT_EQ(repeat["reason"], "repeated");
  EXPECT_EQ(repeat["probe_age_ms"], json({{"tpu-a", 1750}}));  // the shared probe, 250 ms on
  EXPECT_EQ(repeat["explain"],
            "/v1/selections/" + std::to_string(repeat["selection_id"].get<std::int64_t>()));
  EXPECT_EQ(control_->selects.load(), 1);
  EXPECT_EQ(control_->record_calls.load(), 1);
  const auto stored = store_->get_selection(repeat["selection_id"]);
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->same_as, base);

  // Explained: decided, not repeated.
  r = post("/v1/select", R"({"accelerator_type": "tpu-v4-64", "explain": true})");
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(control_->selects.load(), 2);
  // Bad input on the loop's route is answered as on any route.
  r = post("/v1/select", R"({"accelerator_type": "tpu-v4-64", "extra": 1})");
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(body(r)["error"]["message"].get<std::string>(), HasSubstr("extra"));
  r = post("/v1/select", "{not json");
  EXPECT_EQ(r->status, 400);
  // The repeated decision is gone: recorded as nothing, decided on a worker.
  control_->repeat_of = 987654;
  r = post("/v1/select", R"({"accelerator_type": "tpu-v4-64"})");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body(r)["same_as"], nullptr);
  EXPECT_EQ(control_->selects.load(), 3);
  const std::string metrics = client_->Get("/metrics")->body;
  EXPECT_THAT(metrics, HasSubstr("falcon_selections_total{outcome=\"repeated\"} 1\n"));
  EXPECT_THAT(metrics, HasSubstr("falcon_selections_total{outcome=\"selected\"} 3\n"));
}

// A repeat that is not recorded (record_repeats: none) is answered on the I/O thread at once:
// the standing decision's id, nothing recorded, no worker.
TEST_F(ApiServerTest, AnUnrecordedRepeatIsAnsweredOnTheIoThreadAtOnce) {
  start();
  auto r = post("/v1/select", R"({"accelerator_type": "tpu-v4-64"})");
  ASSERT_EQ(r->status, 200) << r->body;
  const std::int64_t base = body(r)["selection_id"];
  control_->record = false;
  control_->repeat_of = base;
  for (int i = 0; i < 3; ++i) {
    r = post("/v1/select", R"({"accelerator_type": "tpu-v4-64"})");
    ASSERT_EQ(r->status, 200) << r->body;
    const json repeat = body(r);
    EXPECT_EQ(repeat["selection_id"], base);
    EXPECT_EQ(repeat["same_as"], base);
    EXPECT_EQ(repeat["explain"], "/v1/selections/" + std::to_string(base));
    EXPECT_EQ(repeat["probe_age_ms"], json({{"tpu-a", 1750}}));
  }
  EXPECT_EQ(control_->selects.load(), 1);
  EXPECT_EQ(control_->record_calls.load(), 0);
  EXPECT_THAT(client_->Get("/metrics")->body,
              HasSubstr("falcon_selections_total{outcome=\"repeated\"} 3\n"));
}

TEST_F(ApiServerTest, SelectAnswersWithTheDecisionItsIdAndCandidateAges) {
  start();
  // Brief by default: the cluster, the id, every candidate's probe age, where the explanation is.
  auto r = post("/v1/select", R"({"accelerator_type": "tpu-v4-64"})");
  ASSERT_EQ(r->status, 200) << r->body;
  const json brief = body(r);
  EXPECT_EQ(brief["selected_cluster"], "tpu-a");
  const std::int64_t brief_id = brief["selection_id"];
  EXPECT_GT(brief_id, 0);
  EXPECT_EQ(brief["explain"], "/v1/selections/" + std::to_string(brief_id));
  EXPECT_EQ(brief["same_as"], nullptr);
  EXPECT_EQ(brief["policy"], "priority");
  EXPECT_EQ(brief["reason"], "selected tpu-a: reachable, queue_depth=1 <= max=5");
  EXPECT_EQ(brief["probe_age_ms"], json({{"tpu-a", 1500}}));
  EXPECT_EQ(brief["probed_now"], json::array());
  EXPECT_EQ(brief["unreachable"], json::array());
  EXPECT_FALSE(brief.contains("scores"));
  EXPECT_FALSE(brief.contains("probe_results"));

  r = post("/v1/select", R"({"accelerator_type": "tpu-v4-64", "explain": true})");
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = body(r);
  EXPECT_EQ(j["selected_cluster"], "tpu-a");
  const std::int64_t id = j["selection_id"];
  EXPECT_GT(id, brief_id);
  EXPECT_EQ(j["candidate_probes"][0]["age_ms"], 1500);
  EXPECT_EQ(j["candidate_probes"][0]["from_cache"], true);

  r = client_->Get(("/v1/selections/" + std::to_string(id)).c_str());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body(r)["reason"], "selected tpu-a: reachable, queue_depth=1 <= max=5");
  // The explanation is stored with the decision and answered by both routes.
  EXPECT_EQ(j["policy"], "priority");
  EXPECT_EQ(j["scores"][1]["verdict"], "skipped: circuit breaker open");
  EXPECT_EQ(body(r)["policy"], "priority");
  EXPECT_EQ(body(r)["scores"], j["scores"]);
  EXPECT_EQ(body(r)["scores"][0]["terms"][0]["signal"], "priority");
  r = client_->Get("/v1/selections?limit=5");
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(body(r)["selections"].size(), 2u);
  EXPECT_EQ(body(r)["selections"][0]["selection_id"], id);
  const json full = body(r)["selections"];
  // summary=true: the same decisions without their explanations.
  r = client_->Get("/v1/selections?limit=5&summary=true");
  ASSERT_EQ(r->status, 200) << r->body;
  const json summaries = body(r)["selections"];
  ASSERT_EQ(summaries.size(), 2u);
  for (std::size_t i = 0; i < summaries.size(); ++i) {
    EXPECT_EQ(summaries[i], (json{{"selection_id", full[i]["selection_id"]},
                                  {"accelerator", full[i]["accelerator"]},
                                  {"selected_cluster", full[i]["selected_cluster"]},
                                  {"decided_at", full[i]["decided_at"]},
                                  {"policy", full[i]["policy"]},
                                  {"reason", full[i]["reason"]}}));
  }
  EXPECT_EQ(client_->Get("/v1/selections?summary=maybe")->status, 400);

  r = post("/v1/select", R"({"accelerator_type": "h100-80gb-8"})");
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(body(r)["error"]["type"], "NoAvailableClusterError");
  EXPECT_EQ(body(r)["error"]["accelerator"], "h100-80gb-8");
  EXPECT_EQ(client_->Get("/v1/selections/999")->status, 404);
  EXPECT_EQ(client_->Get("/v1/selections/abc")->status, 404);
  EXPECT_EQ(client_->Get("/v1/selections?limit=5000")->status, 400);
}

TEST_F(ApiServerTest, BadBodiesAreRefusedNamingTheField) {
  start();
  struct Case {
    std::string path;
    std::string body;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"/v1/select", "{", "malformed JSON"},
      {"/v1/select", "[1]", "JSON object"},
      {"/v1/select", "", "malformed JSON"},
      {"/v1/select", R"({"accelerator": "v4-64"})", "unknown field 'accelerator'"},
      {"/v1/select", R"({})", "accelerator_type: required"},
      {"/v1/select", R"({"accelerator_type": 7})", "accelerator_type: must be a string"},
      {"/v1/select", R"({"accelerator_type": "x", "explain": "yes"})",
       "explain: must be true or false"},
      {"/v1/workloads", R"({"cluster": "tpu-a"})", "spec: required"},
      {"/v1/workloads", R"({"cluster": "tpu-a", "spec": {"name": "x"}})", "spec.docker_image"},
      {"/v1/workloads",
       R"({"spec": {"name": "x", "docker_image": "i", "command": ["a"], "accelerator_type": "v4-64", "gpus": 8}})",
       "unknown field 'spec.gpus'"},
      {"/v1/workloads",
       R"({"spec": {"name": "x", "docker_image": "i", "command": "a", "accelerator_type": "v4-64"}})",
       "spec.command: must be an array of strings"},
      {"/v1/workloads",
       R"({"spec": {"name": "x", "docker_image": "i", "command": ["a"], "accelerator_type": "v4-64", "env": {"A": 1}}})",
       "spec.env.A"},
      {"/v1/workloads", R"({"cluster": 3, "spec": {}})", "cluster: must be a string"},
      {"/v1/exports", R"({"cluster": "tpu-a", "workload": "w"})", "dest: required"},
      {"/v1/exports", R"({"cluster": "tpu-a", "workload": "w", "dest": "/tmp/x"})", "gs://"},
      {"/v1/exports", R"({"cluster": "tpu-a", "workload": "w", "dest": "gs://Logs/p"})",
       "lowercase letters"},
      {"/v1/exports",
       R"({"cluster": "tpu-a", "workload": "w", "dest": "gs://falcon-logs/p", "ranks": [-1]})",
       "ranks"},
      {"/v1/exports",
       R"({"cluster": "tpu-a", "workload": "w", "dest": "gs://falcon-logs/p", "slice": "0"})",
       "slice"},
      {"/v1/exports",
       R"({"cluster": "tpu-a", "workload": "w", "dest": "gs://falcon-logs/p", "rank": 0})",
       "unknown field 'rank'"},
  };
  for (const Case& c : cases) {
    auto r = post(c.path, c.body);
    ASSERT_TRUE(r) << c.path << " " << c.body;
    EXPECT_EQ(r->status, 400) << c.path << " " << c.body << " -> " << r->body;
    const json j = body(r);
    EXPECT_EQ(j["error"]["type"], "UsageError") << c.body;
    EXPECT_THAT(j["error"]["message"].get<std::string>(), HasSubstr(c.says)) << c.body;
  }
  EXPECT_EQ(control_->selects, 0);
  EXPECT_TRUE(control_->submitted.empty());
}

TEST_F(ApiServerTest, HugeBodiesGet413AndTheServerStaysUp) {
  start(nullptr, 1024);
  const std::string big = R"({"accelerator_type": ")" + std::string(4096, 'x') + R"("})";
  auto r = post("/v1/select", big);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(body(r)["error"]["type"], "PayloadTooLarge");
  httplib::Client fresh("127.0.0.1", port_);
  EXPECT_EQ(fresh.Get("/healthz")->status, 200);
}

TEST_F(ApiServerTest, ManagedSubmitsAreRecordedListedCancelledAndTheirRecoveriesShown) {
  start();
  const std::string spec =
      R"("spec": {"name": "train", "docker_image": "gcr.io/p/i:1", "command": ["python3"],
                  "accelerator_type": "v4-64"})";
  auto r =
      post("/v1/workloads", "{\"cluster\": \"tpu-a\", " + spec +
                                R"(, "managed": {"max_recoveries": 2, "stable_after_s": 1.5}})");
  ASSERT_EQ(r->status, 201) << r->body;
  EXPECT_EQ(body(r)["managed"]["max_recoveries"], 2);
  EXPECT_EQ(body(r)["managed"]["stable_after_s"], 1.5);
  const auto stored = store_->get_managed("train");
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->state, ManagedState::kStarting);
  EXPECT_EQ(stored->stable_after, std::chrono::milliseconds(1500));
  EXPECT_FALSE(stored->recover_on_failure);
  // The same name again: 409.
  r = post("/v1/workloads", "{\"cluster\": \"tpu-a\", " + spec + R"(, "managed": {}})");
  EXPECT_EQ(r->status, 409) << r->body;
  // Bad options name their field.
  for (const auto& [managed, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"max_recoveries": -1})", "managed.max_recoveries"},
           {R"({"stable_after_s": "5m"})", "managed.stable_after_s"},
           {R"({"recover_on_failure": 1})", "managed.recover_on_failure"},
           {R"({"retries": 1})", "managed.retries"},
           {R"([])", "managed"}}) {
    r = post("/v1/workloads",
             "{\"cluster\": \"tpu-a\", " + spec + ", \"managed\": " + managed + "}");
    EXPECT_EQ(r->status, 400) << managed;
    EXPECT_THAT(r->body, HasSubstr(field)) << managed;
  }

  r = client_->Get("/v1/managed");
  ASSERT_EQ(r->status, 200) << r->body;
  ASSERT_EQ(body(r)["managed"].size(), 1u);
  EXPECT_EQ(body(r)["managed"][0]["incarnation"], "train");
  EXPECT_EQ(body(r)["managed"][0]["cluster"], "tpu-a");
  EXPECT_EQ(body(r)["managed"][0]["recoveries"], 0);
  EXPECT_EQ(body(r)["managed"][0]["state"], "starting");
  EXPECT_TRUE(body(r)["managed"][0]["phase"].is_null());
  EXPECT_EQ(body(client_->Get("/v1/managed?state=starting"))["managed"].size(), 1u);
  EXPECT_EQ(body(client_->Get("/v1/managed?state=running"))["managed"].size(), 0u);
  r = client_->Get("/v1/managed?state=Running");
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("state: 'Running' is not one of"));

  RecoveryRecord rec;
  rec.incident_id = "train-1";
  rec.workload = "train";
  rec.cluster = "tpu-a";
  rec.to_cluster = "tpu-b";
  rec.replacement = "train-r1";
  rec.classification = kIncidentInfrastructure;
  rec.cause = "cluster tpu-a unreachable for 61s";
  rec.t_violation = clock_->now();
  rec.detected = clock_->now() + std::chrono::seconds(61);
  rec.outcome = "open";
  store_->put_recovery(rec);
  r = client_->Get("/v1/recoveries?workload=train");
  ASSERT_EQ(r->status, 200) << r->body;
  const json inc = body(r)["recoveries"][0];
  EXPECT_EQ(inc["from_cluster"], "tpu-a");
  EXPECT_EQ(inc["replacement"], "train-r1");
  EXPECT_EQ(inc["phases"]["detection_s"], 61.0);
  EXPECT_TRUE(inc["t_recovered"].is_null());
  EXPECT_TRUE(inc["svrt_s"].is_null());
  EXPECT_EQ(body(client_->Get("/v1/recoveries?workload=other"))["recoveries"].size(), 0u);
  EXPECT_EQ(client_->Get("/v1/recoveries?limit=0")->status, 400);

  // Cancelling the current incarnation lets the supervisor know.
  r = client_->Delete("/v1/workloads/tpu-a/train");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body(r)["managed"], "train");
  EXPECT_EQ(store_->get_managed("train")->state, ManagedState::kCancelled);
}

TEST_F(ApiServerTest, SubmitStatusCancelAndTheirErrorStatuses) {
  start();
  const std::string spec =
      R"("spec": {"name": "run-1", "docker_image": "gcr.io/p/i:1", "command": ["python3", "t.py"], "accelerator_type": "tpu-v4-64", "env": {"A": "1"}})";
  auto r = post("/v1/workloads", R"({"cluster": "tpu-a", )" + spec + "}");
  ASSERT_EQ(r->status, 201) << r->body;
  EXPECT_EQ(body(r)["handle"]["cluster"], "tpu-a");
  ASSERT_EQ(control_->submitted.size(), 1u);
  EXPECT_EQ(control_->submitted[0].env.at("A"), "1");
  EXPECT_EQ(control_->submitted[0].command[1], "t.py");

  // Without a cluster: selected first, and the answer names the decision.
  r = post("/v1/workloads", "{" + spec + "}");
  ASSERT_EQ(r->status, 201) << r->body;
  EXPECT_GT(body(r)["selection_id"].get<std::int64_t>(), 0);
  EXPECT_EQ(control_->links.back(), body(r)["selection_id"].get<std::int64_t>());

  // A decision made earlier links a submission to the cluster it chose; never to another one,
  // nor one the store does not have, nor without the cluster.
  const std::int64_t chosen =
      body(post("/v1/select", R"({"accelerator_type": "tpu-v4-64"})"))["selection_id"]
          .get<std::int64_t>();
  const std::string linked = R"("spec": {"name": "run-2", "docker_image": "i", "command": ["a"],
                                 "accelerator_type": "v4-64"})";
  r = post("/v1/workloads",
           fmt::format(R"({{"cluster": "tpu-a", "selection_id": {}, {}}})", chosen, linked));
  ASSERT_EQ(r->status, 201) << r->body;
  EXPECT_EQ(control_->links.back(), chosen);
  const std::size_t links = control_->links.size();
  for (const std::string& bad : std::vector<std::string>{
           fmt::format(R"({{"cluster": "tpu-b", "selection_id": {}, {}}})", chosen, linked),
           fmt::format(R"({{"cluster": "tpu-a", "selection_id": 999999, {}}})", linked),
           fmt::format(R"({{"cluster": "tpu-a", "selection_id": "1", {}}})", linked),
           fmt::format(R"({{"selection_id": {}, {}}})", chosen, linked)}) {
    r = post("/v1/workloads", bad);
    EXPECT_EQ(r->status, 400) << bad;
    EXPECT_THAT(body(r)["error"]["message"].get<std::string>(), HasSubstr("selection_id")) << bad;
  }
  EXPECT_EQ(control_->links.size(), links);  // nothing submitted

  auto with_name = [&](const std::string& name, const std::string& cluster = "tpu-a") {
    return post("/v1/workloads",
                R"({"cluster": ")" + cluster + R"(", "spec": {"name": ")" + name +
                    R"(", "docker_image": "i", "command": ["a"], "accelerator_type": "v4-64"}})");
  };
  EXPECT_EQ(with_name("exists")->status, 409);
  EXPECT_EQ(body(with_name("exists"))["error"]["type"], "WorkloadExistsError");
  // A create the cluster refused is xpk's failure (502), though its text says "already exists".
  EXPECT_EQ(with_name("refused")->status, 502);
  EXPECT_EQ(body(with_name("refused"))["error"]["type"], "WorkloadSubmitError");
  // The store down: 503 to try again, with the database's own reason.
  r = with_name("store-down");
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(body(r)["error"]["type"], "StateStoreError");
  EXPECT_THAT(body(r)["error"]["message"].get<std::string>(),
              HasSubstr("the database system is starting up"));
  EXPECT_EQ(with_name("Bad_Name")->status, 400);
  EXPECT_EQ(body(with_name("Bad_Name"))["error"]["type"], "InvalidWorkloadSpecError");
  EXPECT_EQ(with_name("x", "nope")->status, 404);

  r = client_->Get("/v1/workloads/tpu-a/run-1");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body(r)["status"]["state"], "RUNNING");
  EXPECT_EQ(client_->Get("/v1/workloads/tpu-a/gone")->status, 404);
  EXPECT_EQ(body(client_->Get("/v1/workloads/tpu-a/gone"))["error"]["type"],
            "WorkloadNotFoundError");
  r = client_->Get("/v1/workloads/tpu-a/xpk-fails");
  EXPECT_EQ(r->status, 502);
  EXPECT_EQ(body(r)["error"]["stderr"], "boom");
  EXPECT_EQ(client_->Get("/v1/workloads/nope/run-1")->status, 404);
  // The handle alone comes from the records: no status is asked of xpk (here "xpk-fails" would
  // be a 502, "gone" a 404).
  r = client_->Get("/v1/workloads/tpu-a/xpk-fails/handle");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body(r)["handle"]["workload_name"], "xpk-fails");
  EXPECT_EQ(body(r)["handle"]["namespace"], "default");
  EXPECT_EQ(client_->Get("/v1/workloads/tpu-a/gone/handle")->status, 200);
  EXPECT_EQ(client_->Get("/v1/workloads/nope/run-1/handle")->status, 404);
  EXPECT_EQ(client_->Get("/v1/workloads/tpu-a/run-1/handle?x=1")->status, 400);

  r = client_->Delete("/v1/workloads/tpu-a/run-1");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body(r)["cancelled"], true);
  EXPECT_EQ(client_->Delete("/v1/workloads/tpu-a/gone")->status, 404);
  EXPECT_EQ(client_->Delete("/v1/workloads/tpu-a/run-1?force=1")->status, 400);
  EXPECT_EQ(client_->Get("/v1/workloads/tpu-a/run-1/events?limit=x")->status, 400);
  EXPECT_EQ(client_->Get("/v1/workloads/tpu-a/run-1/events")->status, 200);
}

TEST_F(ApiServerTest, WorkloadListFromTheStoreWithFiltersAndCursors) {
  start();
  for (int i = 0; i < 5; ++i) {
    SubmissionRow row;
    row.handle = {"run-" + std::to_string(i), i % 2 == 0 ? "tpu-a" : "tpu-b", "default",
                  "2026-04-13T07:0" + std::to_string(i) + ":00.000Z"};
    row.accelerator_type = "v4-64";
    store_->record_submission(row);
  }
  auto r = client_->Get("/v1/workloads?limit=2");
  ASSERT_EQ(r->status, 200) << r->body;
  json j = body(r);
  ASSERT_EQ(j["workloads"].size(), 2u);
  EXPECT_EQ(j["workloads"][0]["handle"]["workload_name"], "run-4");
  const std::string cursor = j["next_cursor"];
  r = client_->Get("/v1/workloads", httplib::Params{{"limit", "2"}, {"cursor", cursor}},
                   httplib::Headers{});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body(r)["workloads"][0]["handle"]["workload_name"], "run-2");
  r = client_->Get("/v1/workloads?cluster=tpu-b");
  EXPECT_EQ(body(r)["workloads"].size(), 2u);
  r = client_->Get("/v1/workloads?name=run-3");
  EXPECT_EQ(body(r)["workloads"].size(), 1u);
  r = client_->Get("/v1/workloads?from=2026-04-13T07:03:00Z&before=2026-04-13T07:04:00Z");
  ASSERT_EQ(body(r)["workloads"].size(), 1u);
  EXPECT_TRUE(body(r)["next_cursor"].is_null());
  // total=true: every matching row, whatever the page; not counted otherwise.
  EXPECT_FALSE(body(client_->Get("/v1/workloads?limit=2")).contains("total"));
  EXPECT_EQ(body(client_->Get("/v1/workloads?limit=2&total=true"))["total"], 5);
  EXPECT_EQ(body(client_->Get("/v1/workloads?limit=1&cluster=tpu-a&total=true"))["total"], 3);
  EXPECT_EQ(client_->Get("/v1/workloads?live=true&total=true")->status, 400);

  EXPECT_EQ(client_->Get("/v1/workloads?cursor=garbage")->status, 400);
  EXPECT_EQ(client_->Get("/v1/workloads?state=DONE")->status, 400);
  EXPECT_EQ(client_->Get("/v1/workloads?from=soon")->status, 400);
  EXPECT_EQ(client_->Get("/v1/workloads?live=maybe")->status, 400);
  EXPECT_EQ(client_->Get("/v1/workloads?live=true&limit=3")->status, 400);

  r = client_->Get("/v1/workloads?live=true");
  ASSERT_EQ(r->status, 200) << r->body;
  j = body(r);
  EXPECT_EQ(j["clusters"][0]["workloads"][0]["name"], "run-1");
  EXPECT_EQ(j["clusters"][1]["error"]["type"], "ClusterUnreachableError");
  EXPECT_EQ(client_->Get("/v1/workloads?live=true&cluster=nope")->status, 404);
}

TEST_F(ApiServerTest, LogsAsTextOrServerSentEventsWithTheirParameters) {
  start();
  auto r = client_->Get("/v1/workloads/tpu-a/run-1/logs?rank=2");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->body, "rank 2 line 0\nrank 2 line 1\nrank 2 line 2\n");
  r = client_->Get("/v1/workloads/tpu-a/run-1/logs?tail=1&format=sse");
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "data: rank 0 line 2\n\n");
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  r = client_->Get("/v1/workloads/tpu-a/no-logs/logs");
  EXPECT_EQ(r->status, 502);
  EXPECT_EQ(body(r)["error"]["type"], "LogRetrievalError");
  for (const char* bad : {"rank=-1", "rank=x", "slice=a", "tail=0", "since=later", "follow=perhaps",
                          "format=xml", "follow=true&tail=5", "ranks=0"}) {
    r = client_->Get((std::string("/v1/workloads/tpu-a/run-1/logs?") + bad).c_str());
    ASSERT_TRUE(r) << bad;
    EXPECT_EQ(r->status, 400) << bad << ": " << r->body;
  }
  EXPECT_EQ(client_->Get("/v1/workloads/nope/run-1/logs")->status, 404);
}

// Each of a log line's own line breaks starts a data field of the same event: no byte of a line
// can end its event or start another (an `event:` line).
TEST_F(ApiServerTest, ServerSentEventsFrameEveryLineSoNoByteEndsAnEvent) {
  start();
  auto r = client_->Get("/v1/workloads/tpu-a/forger/logs?format=sse");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->body,
            "data: a\ndata: \ndata: event: forged\ndata: data: x\ndata: y\ndata: z\n\n"
            "data: next\n\n");
  // As a client parses it: two events, no line starting with "event:".
  std::istringstream lines(r->body);
  std::string line;
  int events = 0;
  while (std::getline(lines, line)) {
    EXPECT_FALSE(line.rfind("event:", 0) == 0) << line;
    if (line.empty()) ++events;
  }
  EXPECT_EQ(events, 2);
}

// What a browser can be made to send is refused before anything runs: a form's content types,
// another origin, a Host that is not this server's.
TEST_F(ApiServerTest, BrowserRequestsFromElsewhereAreRefusedBeforeTheRouteRuns) {
  start();
  const std::string host = "127.0.0.1:" + std::to_string(port_);
  const std::string payload = R"({"accelerator_type": "tpu-v4-64"})";
  auto r = client_->Post("/v1/select", payload, "text/plain");
  EXPECT_EQ(r->status, 415);
  EXPECT_EQ(body(r)["error"]["type"], "UnsupportedMediaType");
  EXPECT_EQ(client_->Post("/v1/select", payload, "application/x-www-form-urlencoded")->status, 415);
  EXPECT_EQ(
      client_->Post("/v1/select", {{"Origin", "http://evil.example"}}, payload, "application/json")
          ->status,
      403);
  EXPECT_EQ(control_->selects.load(), 0);
  EXPECT_EQ(client_->Post("/v1/select", {{"Origin", "http://" + host}}, payload, "application/json")
                ->status,
            200);
  EXPECT_EQ(
      client_->Delete("/v1/workloads/tpu-a/run-1", {{"Origin", "http://evil.example"}})->status,
      403);
  EXPECT_EQ(client_->Delete("/v1/workloads/tpu-a/run-1")->status, 200);  // no body, no type
  EXPECT_EQ(
      client_->Get("/v1/clusters", {{"Host", "rebound.example:" + std::to_string(port_)}})->status,
      421);
  EXPECT_EQ(client_->Get("/healthz", {{"Host", "lb.example"}})->status, 200);
  EXPECT_EQ(client_->Get("/v1/clusters", {{"Host", "localhost:" + std::to_string(port_)}})->status,
            200);
  EXPECT_EQ(client_->Get("/v1/clusters", {{"Host", "[::1]:" + std::to_string(port_)}})->status,
            200);
}

// Bodies nested too deep or too large are refused while parsing; the same query parameter twice
// is refused; a method the path does not take is 405 with Allow.
TEST_F(ApiServerTest, BoundedBodiesParametersAndMethods) {
  start();
  auto r = post("/v1/select", std::string(40, '[') + std::string(40, ']'));
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(body(r)["error"]["message"].get<std::string>(), HasSubstr("deeper than 32"));
  std::string many = "[1";
  for (int i = 0; i < 20000; ++i) many += ",1";
  r = post("/v1/select", many + "]");
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(body(r)["error"]["message"].get<std::string>(), HasSubstr("more than 10000 values"));
  EXPECT_EQ(client_->Get("/v1/exports?limit=1&limit=2")->status, 400);
  r = client_->Put("/v1/clusters", "{}", "application/json");
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "GET, HEAD");
  EXPECT_EQ(client_->Get("/v1/selections?limit=101")->status, 400);  // explained: 100 at most
  EXPECT_EQ(client_->Get("/v1/selections?limit=1000&summary=true")->status, 200);
}

// Exports beyond serve.limits.max_exports wait in order (queued, with their place), beyond
// max_queued_exports they are refused; a stop fails the queued ones at once.
TEST_F(ApiServerTest, ExportsBeyondTheCapWaitInOrderAndBeyondTheQueueAreRefused) {
  ServeLimits limits;
  limits.max_exports = 1;
  limits.max_queued_exports = 2;
  start(nullptr, 1 << 20, limits);
  const std::string payload =
      R"({"cluster": "tpu-a", "workload": "run-1", "dest": "gs://falcon-logs/p"})";
  auto r = post("/v1/exports", payload);
  ASSERT_EQ(r->status, 202) << r->body;
  EXPECT_EQ(body(r)["state"], "running");
  r = post("/v1/exports", payload);
  ASSERT_EQ(r->status, 202);
  EXPECT_EQ(body(r)["state"], "queued");
  EXPECT_EQ(body(r)["queue_position"], 1);
  const std::int64_t second = body(r)["id"];
  r = post("/v1/exports", payload);
  EXPECT_EQ(body(r)["queue_position"], 2);
  const std::int64_t third = body(r)["id"];
  r = post("/v1/exports", payload);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(body(r)["error"]["type"], "TooManyExports");
  EXPECT_FALSE(r->get_header_value("Retry-After").empty());
  r = client_->Get(("/v1/exports/" + std::to_string(third)).c_str());
  EXPECT_EQ(body(r)["state"], "queued");
  EXPECT_EQ(body(r)["queue_position"], 2);
  server_->stop(std::chrono::milliseconds(50));
  for (const std::int64_t id : {second, third}) {
    const auto record = store_->get_export(id);
    ASSERT_TRUE(record);
    EXPECT_EQ(record->state, "failed");
    EXPECT_THAT(record->result_json, HasSubstr("server stopped"));
  }
}

TEST_F(ApiServerTest, FollowStreamsLinesAndStopsWhenTheClientGoesAway) {
  start();
  std::string received;
  std::string encoding = "unset";
  std::atomic<bool> give_up{false};
  std::thread reader([&] {
    httplib::Client c("127.0.0.1", port_);
    // As curl and browsers ask: a compressor would hold the lines back until its buffer fills.
    c.set_decompress(false);
    c.Get(
        "/v1/workloads/tpu-a/run-1/logs?follow=true", {{"Accept-Encoding", "gzip, deflate, br"}},
        [&](const httplib::Response& r) {
          encoding = r.get_header_value("Content-Encoding");
          return true;
        },
        [&](const char* data, size_t n) {
          received.append(data, n);
          return received.find("second\n") == std::string::npos;  // disconnect after two lines
        });
    give_up = true;
  });
  reader.join();
  EXPECT_EQ(encoding, "");  // a follow is never compressed
  EXPECT_EQ(received, "first\nsecond\n");
  // The server notices on its next write check; the follow must end without a shutdown.
  for (int i = 0; i < 500 && !control_->follow_stopped; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(control_->follow_stopped);
}

TEST_F(ApiServerTest, StopEndsARunningFollow) {
  start();
  std::string received;
  std::thread reader([&] {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    c.Get("/v1/workloads/tpu-a/run-1/logs?follow=true", [&](const char* data, size_t n) {
      received.append(data, n);
      return true;
    });
  });
  for (int i = 0; i < 500 && !control_->follow_running; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(control_->follow_running);
  server_->stop(std::chrono::seconds(5));
  reader.join();
  EXPECT_TRUE(control_->follow_stopped);
  EXPECT_EQ(received, "first\nsecond\n");
}

TEST_F(ApiServerTest, ExportsRunInTheBackgroundWithProgressInTheStore) {
  start();
  auto r = post(
      "/v1/exports",
      R"({"cluster": "tpu-a", "workload": "run-1", "dest": "gs://falcon-logs/p", "ranks": [0]})");
  ASSERT_EQ(r->status, 202) << r->body;
  const std::int64_t id = body(r)["id"];
  const std::string path = "/v1/exports/" + std::to_string(id);
  json j;
  for (int i = 0; i < 500; ++i) {
    j = body(client_->Get(path.c_str()));
    if (j["progress"].contains("0")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["progress"]["0"]["lines"], 10);
  {
    std::lock_guard lock(control_->export_mutex);
    control_->release_export = true;
  }
  control_->export_cv.notify_all();
  for (int i = 0; i < 500 && j["state"] == "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    j = body(client_->Get(path.c_str()));
  }
  EXPECT_EQ(j["state"], "done");
  EXPECT_EQ(j["result"]["gcs_uris"]["0"], "gs://falcon-logs/p/rank-0.log");

  r = post("/v1/exports",
           R"({"cluster": "tpu-a", "workload": "bad-export", "dest": "gs://falcon-logs/p"})");
  ASSERT_EQ(r->status, 202);
  const std::string bad = "/v1/exports/" + std::to_string(body(r)["id"].get<std::int64_t>());
  for (int i = 0; i < 500 && j["state"] != "failed"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    j = body(client_->Get(bad.c_str()));
  }
  EXPECT_EQ(j["state"], "failed");
  EXPECT_EQ(j["result"]["error"]["type"], "LogRetrievalError");
  EXPECT_EQ(body(client_->Get("/v1/exports?limit=10"))["exports"].size(), 2u);
  EXPECT_EQ(client_->Get("/v1/exports/424242")->status, 404);
  EXPECT_EQ(
      post("/v1/exports", R"({"cluster": "nope", "workload": "w", "dest": "gs://falcon-logs/p"})")
          ->status,
      404);
}

// The path of an export (via: auto, read, copy, sink; keep_staging) is passed to the layer,
// and the step it reports (the copy operation's state and progress) is shown as `status`.
TEST_F(ApiServerTest, AnExportsPathIsChosenByTheRequestAndItsStepShown) {
  start();
  auto r = post("/v1/exports",
                R"({"cluster": "tpu-a", "workload": "run-1", "dest": "gs://falcon-logs/p",
                    "via": "copy", "keep_staging": true})");
  ASSERT_EQ(r->status, 202) << r->body;
  const std::string path = "/v1/exports/" + std::to_string(body(r)["id"].get<std::int64_t>());
  json j;
  for (int i = 0; i < 500; ++i) {
    j = body(client_->Get(path.c_str()));
    if (j["progress"].contains("0")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(control_->export_via.load(), ExportVia::kCopy);
  EXPECT_EQ(j["status"]["via"], "copy");
  EXPECT_EQ(j["status"]["phase"], "copying");
  EXPECT_EQ(j["status"]["state"], "RUNNING");
  EXPECT_EQ(j["status"]["percent"], 40);
  EXPECT_EQ(j["progress"].size(), 1u);  // the ranks only
  EXPECT_TRUE(j["progress"].contains("0"));
  r = post(
      "/v1/exports",
      R"({"cluster": "tpu-a", "workload": "run-1", "dest": "gs://falcon-logs/p", "via": "fax"})");
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(body(r)["error"]["message"].get<std::string>(),
              HasSubstr("via: 'fax' is not one of auto, read, copy, sink"));
  r = post(
      "/v1/exports",
      R"({"cluster": "tpu-a", "workload": "run-1", "dest": "gs://falcon-logs/p", "keep_staging": 1})");
  EXPECT_EQ(r->status, 400);
}

TEST_F(ApiServerTest, StopMarksAnExportStillRunningAfterTheGraceFailed) {
  start();
  auto r = post("/v1/exports",
                R"({"cluster": "tpu-a", "workload": "run-1", "dest": "gs://falcon-logs/p"})");
  ASSERT_EQ(r->status, 202);
  const std::int64_t id = body(r)["id"];
  server_->stop(std::chrono::milliseconds(50));
  const auto record = store_->get_export(id);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->state, "failed");
  EXPECT_THAT(record->result_json, HasSubstr("server stopped"));
}

TEST_F(ApiServerTest, ConfigHealthReadinessAndUnknownRoutes) {
  start();
  auto r = client_->Get("/v1/config");
  ASSERT_EQ(r->status, 200);
  json j = body(r);
  EXPECT_EQ(j["content_hash"], "sha256:abc");
  EXPECT_EQ(j["reload_failures"], 1);
  EXPECT_EQ(j["state"]["backend"], "sqlite");
  EXPECT_EQ(client_->Get("/healthz")->status, 200);
  EXPECT_EQ(client_->Get("/readyz")->status, 200);
  // A store that cannot be written: not ready, and why.
  control_->set_store_down("disk full (SQLITE_FULL)");
  r = client_->Get("/readyz");
  EXPECT_EQ(r->status, 503);
  EXPECT_THAT(body(r)["error"]["message"].get<std::string>(), HasSubstr("SQLITE_FULL"));
  control_->set_store_down(std::nullopt);
  EXPECT_EQ(client_->Get("/readyz")->status, 200);
  r = client_->Get("/v2/everything");
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(body(r)["error"]["type"], "RouteNotFound");
  EXPECT_EQ(client_->Get("/healthz?x=1")->status, 400);
}

TEST(ApiServerTokens, FileIsParsedAndCheckedAndCompared) {
  testing::TempDir dir;
  const auto path = dir.write("tokens",
                              "# team tokens\nreader-token-0123456789 read\n"
                              "operator-token-0123456789 operate  # ci\n\n");
  ::chmod(path.c_str(), 0600);
  const TokenTable table = TokenTable::load(path);
  EXPECT_EQ(table.find("reader-token-0123456789"), TokenRole::kRead);
  EXPECT_EQ(table.find("operator-token-0123456789"), TokenRole::kOperate);
  EXPECT_EQ(table.find("operator-token-012345678"), std::nullopt);
  EXPECT_EQ(table.find(""), std::nullopt);

  ::chmod(path.c_str(), 0640);  // group read: as Kubernetes mounts a Secret
  EXPECT_EQ(TokenTable::load(path).find("reader-token-0123456789"), TokenRole::kRead);
  ::chmod(path.c_str(), 0620);
  EXPECT_THROW(TokenTable::load(path), ApiServerError);
  ::chmod(path.c_str(), 0644);
  EXPECT_THROW(
      {
        try {
          TokenTable::load(path);
        } catch (const ApiServerError& e) {
          EXPECT_THAT(e.what(), HasSubstr("chmod 600"));
          throw;
        }
      },
      ApiServerError);
  for (const char* bad : {"short read\n", "long-enough-token-123 admin\n", "only-a-token-12345\n",
                          "a-b-c-d-e-f-g-h-i-j read extra\n", "# nothing\n"}) {
    const auto p = dir.write("bad", bad);
    ::chmod(p.c_str(), 0600);
    EXPECT_THROW(TokenTable::load(p), ApiServerError) << bad;
  }
  EXPECT_THROW(TokenTable::load((dir.path() / "missing").string()), ApiServerError);
  // A token listed twice (with the same role or another) is a mistake in the file, not a
  // last-one-wins.
  const auto twice = dir.write("twice",
                               "reader-token-0123456789 read\nother-token-0123456789 read\n"
                               "reader-token-0123456789 operate\n");
  ::chmod(twice.c_str(), 0600);
  EXPECT_THROW(
      {
        try {
          TokenTable::load(twice);
        } catch (const ApiServerError& e) {
          EXPECT_THAT(e.what(), HasSubstr(":3: this token is listed already on line 1"));
          EXPECT_THAT(e.what(), Not(HasSubstr("reader-token")));
          throw;
        }
      },
      ApiServerError);
}

TEST(ApiServerAddresses, ListenSplitting) {
  EXPECT_EQ(split_listen_address("127.0.0.1:8787"), std::make_pair(std::string("127.0.0.1"), 8787));
  EXPECT_EQ(split_listen_address("[::1]:0"), std::make_pair(std::string("::1"), 0));
  for (const char* bad :
       {"8787", ":8787", "host:", "host:99999", "host:12a", "[::1]8787", "[::1"}) {
    EXPECT_THROW(split_listen_address(bad), ApiServerError) << bad;
  }
}

TEST_F(ApiServerTest, TokensGuardEveryRouteButHealthAndMutationsNeedOperate) {
  auto tokens = std::make_shared<TokenTable>();
  tokens->add("reader-token-0123456789", TokenRole::kRead);
  tokens->add("operator-token-0123456789", TokenRole::kOperate);
  start(tokens);
  EXPECT_EQ(client_->Get("/healthz")->status, 200);
  EXPECT_EQ(client_->Get("/readyz")->status, 200);
  auto r = client_->Get("/v1/clusters");
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(body(r)["error"]["type"], "Unauthorized");
  EXPECT_EQ(client_->Get("/metrics")->status, 401);
  httplib::Headers wrong = {{"Authorization", "Bearer not-a-token-at-all"}};
  EXPECT_EQ(client_->Get("/v1/clusters", wrong)->status, 401);
  httplib::Headers reader = {{"Authorization", "Bearer reader-token-0123456789"}};
  EXPECT_EQ(client_->Get("/v1/clusters", reader)->status, 200);
  r = client_->Post("/v1/select", reader, R"({"accelerator_type": "v4-64"})", "application/json");
  EXPECT_EQ(r->status, 403);
  EXPECT_EQ(body(r)["error"]["type"], "Forbidden");
  EXPECT_EQ(control_->selects, 0);
  EXPECT_EQ(client_->Delete("/v1/workloads/tpu-a/run-1", reader)->status, 403);
  httplib::Headers op = {{"Authorization", "Bearer operator-token-0123456789"}};
  EXPECT_EQ(client_->Post("/v1/select", op, R"({"accelerator_type": "v4-64"})", "application/json")
                ->status,
            200);
  // The token never appears in the metrics or in an error.
  const std::string metrics = client_->Get("/metrics", op)->body;
  EXPECT_THAT(metrics, Not(HasSubstr("operator-token")));
}

// The dashboard's files need no token (they hold no data), carry their type, an ETag and
// no-cache, answer 304 to a matching If-None-Match, and never leave the embedded set.
TEST_F(ApiServerTest, DashboardFilesAreServedWithoutATokenAndRevalidated) {
  auto tokens = std::make_shared<TokenTable>();
  tokens->add("reader-token-0123456789", TokenRole::kRead);
  start(tokens);
  auto r = client_->Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(r->get_header_value("Content-Type"), HasSubstr("text/html"));
  EXPECT_THAT(r->body, HasSubstr("/ui/js/app.js"));
  EXPECT_THAT(r->get_header_value("Content-Security-Policy"), HasSubstr("default-src 'self'"));
  r = client_->Get("/ui/js/app.js");
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(r->get_header_value("Content-Type"), HasSubstr("text/javascript"));
  EXPECT_EQ(r->get_header_value("Cache-Control"), "no-cache");
  const std::string etag = r->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());
  r = client_->Get("/ui/js/app.js", {{"If-None-Match", etag}});
  EXPECT_EQ(r->status, 304);
  EXPECT_TRUE(r->body.empty());
  EXPECT_EQ(client_->Get("/ui/css/app.css")->status, 200);
  for (const char* path : {"/ui/nothing.js", "/ui/../CMakeLists.txt", "/ui/%2e%2e/x.js"}) {
    r = client_->Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 404) << path;
  }
  // The data the page asks for still needs the token.
  EXPECT_EQ(client_->Get("/v1/workloads")->status, 401);
}

TEST_F(ApiServerTest, WhoamiSaysTheTokensRole) {
  auto tokens = std::make_shared<TokenTable>();
  tokens->add("reader-token-0123456789", TokenRole::kRead);
  tokens->add("operator-token-0123456789", TokenRole::kOperate);
  start(tokens);
  auto r = client_->Get("/v1/whoami", {{"Authorization", "Bearer reader-token-0123456789"}});
  EXPECT_EQ(body(r)["role"], "read");
  EXPECT_EQ(body(r)["tokens_required"], true);
  r = client_->Get("/v1/whoami", {{"Authorization", "Bearer operator-token-0123456789"}});
  EXPECT_EQ(body(r)["role"], "operate");
  EXPECT_EQ(body(r)["token"], "valid");
  // Public: without a token, or with an unknown one, it says so instead of refusing.
  r = client_->Get("/v1/whoami");
  ASSERT_EQ(r->status, 200);
  EXPECT_TRUE(body(r)["role"].is_null());
  EXPECT_EQ(body(r)["token"], "missing");
  r = client_->Get("/v1/whoami", {{"Authorization", "Bearer not-a-token-at-all-really"}});
  EXPECT_TRUE(body(r)["role"].is_null());
  EXPECT_EQ(body(r)["token"], "unknown");
}

TEST_F(ApiServerTest, WhoamiWithoutTokensIsOperate) {
  start();
  const json who = body(client_->Get("/v1/whoami"));
  EXPECT_EQ(who["role"], "operate");
  EXPECT_EQ(who["tokens_required"], false);
}

// Every documented path is a route, and every route is documented; every route answers (not
// with the unmatched-route 404).
TEST_F(ApiServerTest, OpenApiDocumentsExactlyTheRoutes) {
  start();
  const json doc = body(client_->Get("/v1/openapi.json"));
  EXPECT_EQ(doc["openapi"].get<std::string>().substr(0, 2), "3.");
  std::set<std::string> documented;
  for (const auto& [path, methods] : doc["paths"].items()) {
    for (const auto& [method, op] : methods.items()) {
      std::string upper = method;
      for (char& c : upper) c = static_cast<char>(std::toupper(c));
      documented.insert(upper + " " + path);
      EXPECT_TRUE(op.contains("responses")) << method << " " << path;
    }
  }
  const auto routes = server_->routes();
  EXPECT_EQ(documented, std::set<std::string>(routes.begin(), routes.end()));
  for (const std::string& route : routes) {
    const auto space = route.find(' ');
    const std::string method = route.substr(0, space);
    std::string path = std::regex_replace(route.substr(space + 1), std::regex("\\{id\\}"), "1");
    path = std::regex_replace(path, std::regex("\\{cluster\\}"), "tpu-a");
    path = std::regex_replace(path, std::regex("\\{name\\}"), "tpu-a");
    httplib::Result r = method == "GET"    ? client_->Get(path.c_str())
                        : method == "POST" ? post(path, "{}")
                                           : client_->Delete(path.c_str());
    ASSERT_TRUE(r) << route;
    if (r->status == 404) {
      EXPECT_NE(body(r)["error"]["type"], "RouteNotFound") << route << ": " << r->body;
    }
  }
}

// The select answer is written directly; it must be what the JSON library would write.
TEST(SelectAnswerJson, IsByteForByteWhatNlohmannWrites) {
  Decision o;
  o.selection.selected_cluster = "tpu-a";
  o.selection.accelerator = "tpu-v4-64";
  o.selection.candidates = {"tpu-a", "tpu-b"};
  o.selection.probe_results = {
      ClusterProbeResult{"tpu-a", true, 1, 2, std::nullopt, "2026-04-13T08:00:00.000Z"},
      ClusterProbeResult{"tpu-b", false, std::nullopt, std::nullopt, std::string("\"timed\" out"),
                         "2026-04-13T08:00:00.500Z"}};
  o.selection.reason = "selected tpu-a: reachable, queue_depth=1 <= max=5";
  o.selection.decided_at = "2026-04-13T08:00:01.000Z";
  o.selection.selection_id = 77;
  o.selection.policy = "least-wait";
  CandidateScore score;
  score.cluster = "tpu-a";
  score.eligible = true;
  score.signals.queue_depth = 1;
  score.signals.drain_per_min = 2.0;
  score.terms = {SignalTerm{"wait", 60.0, std::nullopt, 0.0, 0.0}};
  score.total = 60.0;
  score.rank = 1;
  score.verdict = "selected: predicted wait 60s";
  CandidateScore skipped;
  skipped.cluster = "tpu-b";
  skipped.skip_reason = "unreachable: \"timed\" out";
  skipped.verdict = "skipped: unreachable";
  o.selection.scores = {score, skipped};
  MonitoredProbe a;
  a.result = o.selection.probe_results[0];
  a.backend = "xpk";
  a.duration_ms = 12;
  a.age_ms = 1500;
  a.next_probe_at = "2026-04-13T08:00:30.000Z";
  a.from_cache = true;
  MonitoredProbe b;
  b.result = o.selection.probe_results[1];
  b.backend = "kube";
  b.consecutive_failures = 3;
  o.candidate_probes = {a, b};
  json j = o.selection;
  j["selection_id"] = o.selection.selection_id;
  j["candidate_probes"] = o.candidate_probes;
  EXPECT_EQ(serve::select_answer_json(o), j.dump() + "\n");
}

TEST_F(ApiServerTest, MetricsInPrometheusTextFormat) {
  start();
  client_->Get("/v1/clusters");
  client_->Get("/v1/clusters/nope");
  post("/v1/select", R"({"accelerator_type": "v4-64"})");
  post("/v1/select", R"({"accelerator_type": "h100-80gb-8"})");
  const auto r = client_->Get("/metrics");
  ASSERT_EQ(r->status, 200);
  EXPECT_THAT(r->get_header_value("Content-Type"), HasSubstr("text/plain"));
  const std::string& m = r->body;
  EXPECT_THAT(m, HasSubstr("# TYPE falcon_http_requests_total counter\n"));
  EXPECT_THAT(m,
              HasSubstr("falcon_http_requests_total{route=\"/v1/clusters/{name}\",method=\"GET\","
                        "status=\"404\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("falcon_selections_total{outcome=\"selected\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("falcon_selections_total{outcome=\"no_cluster\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("falcon_cluster_queue_depth{cluster=\"tpu-a\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("falcon_cluster_running{cluster=\"tpu-a\"} 2\n"));
  EXPECT_THAT(m, HasSubstr("falcon_probe_age_seconds{cluster=\"tpu-a\"} 1.5\n"));
  EXPECT_THAT(m, Not(HasSubstr("falcon_cluster_capacity_known{")));  // xpk probes read none
  EXPECT_THAT(m, HasSubstr("# TYPE falcon_circuit_breaker_state gauge\n"));
  EXPECT_THAT(m, HasSubstr("falcon_circuit_breaker_state{cluster=\"tpu-a\",key=\"tpu-a\"} 0\n"));
  EXPECT_THAT(m, HasSubstr("falcon_circuit_breaker_state{cluster=\"tpu-b\",key=\"tpu-b\"} 2\n"));
  EXPECT_THAT(m,
              HasSubstr("falcon_circuit_breaker_state{cluster=\"tpu-b\",key=\"tpu-b/v4-64\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("falcon_circuit_breaker_trips{cluster=\"tpu-b\",key=\"tpu-b\"} 2\n"));
  EXPECT_THAT(m, HasSubstr("falcon_circuit_breaker_consecutive_failures{cluster=\"tpu-b\","
                           "key=\"tpu-b\"} 3\n"));
  EXPECT_THAT(m, HasSubstr("falcon_probe_cache_lookups_total{result=\"hit\"} 7\n"));
  EXPECT_THAT(m, HasSubstr("falcon_config_reloads_total{result=\"failed\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("# TYPE falcon_http_request_duration_seconds histogram\n"));
  EXPECT_THAT(m, HasSubstr("falcon_http_request_duration_seconds_bucket{route=\"/v1/select\","
                           "le=\"+Inf\"} 2\n"));
  EXPECT_THAT(m, HasSubstr("falcon_http_request_duration_seconds_count{route=\"/v1/select\"} 2\n"));
  // What the layer did, through the control plane's counters.
  EXPECT_THAT(m, HasSubstr("# TYPE falcon_xpk_calls_total counter\n"));
  EXPECT_THAT(m, HasSubstr("falcon_xpk_calls_total{verb=\"list\",result=\"ok\"} 12\n"));
  EXPECT_THAT(m, HasSubstr("falcon_xpk_calls_total{verb=\"create\",result=\"failed\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("falcon_logging_reads_total{result=\"ok\"} 6\n"));
  EXPECT_THAT(m, HasSubstr("falcon_logging_reads_total{result=\"rate_limited\"} 2\n"));
  EXPECT_THAT(m, HasSubstr("falcon_logging_reads_total{result=\"failed\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("falcon_upload_bytes_total 4096\n"));
  EXPECT_THAT(m, HasSubstr("falcon_upload_requests_total 3\n"));
  EXPECT_THAT(m, HasSubstr("falcon_probe_cache_oldest_age_seconds "));
  // Every non-comment line is `name{labels} value` or `name value`.
  std::istringstream lines(m);
  std::string line;
  const std::regex sample(R"(^[a-z_]+(\{([a-z_]+="([^"\\]|\\.)*",?)+\})? [-+0-9.eInfa]+$)");
  while (std::getline(lines, line)) {
    if (line.rfind("# ", 0) == 0) continue;
    EXPECT_TRUE(std::regex_match(line, sample)) << line;
  }
  // A kube probe says whether it read the cluster's ClusterQueues.
  control_->backend = "kube";
  EXPECT_THAT(client_->Get("/metrics")->body,
              HasSubstr("falcon_cluster_capacity_known{cluster=\"tpu-a\"} 1\n"));
  control_->capacity_error = "answered 403 to the ClusterQueue list: forbidden";
  EXPECT_THAT(client_->Get("/metrics")->body,
              HasSubstr("falcon_cluster_capacity_known{cluster=\"tpu-a\"} 0\n"));
}

// --tls-cert/--tls-key: the same API over HTTPS (a self-signed certificate made by openssl).
TEST(ApiServerTls, ServesHttpsWithTheGivenCertificate) {
  // The client's write of a body the server refused unread meets a closed connection.
  ::signal(SIGPIPE, SIG_IGN);
  testing::TempDir dir;
  const std::string cert = (dir.path() / "cert.pem").string();
  const std::string key = (dir.path() / "key.pem").string();
  const std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -keyout " + key +
      " -out " + cert + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << "openssl could not make a certificate";
  auto control = std::make_shared<FakeControlPlane>();
  std::shared_ptr<StateStore> store =
      open_state_store("sqlite://" + (dir.path() / "falcon.db").string());
  control->store = store;
  ApiServerOptions options;
  options.control = control;
  options.store = store;
  options.tls_cert = cert;
  options.tls_key = key;
  ApiServer server(options);
  const int port = server.bind("127.0.0.1", 0);
  std::thread t([&] { server.serve(); });
  httplib::SSLClient client("127.0.0.1", port);
  client.enable_server_certificate_verification(false);
  // Bound already: the connection waits in the backlog until serve() accepts it.
  auto r = client.Get("/v1/clusters");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // The same routes and error shapes as on plain HTTP (one dispatch for both servers).
  r = client.Post("/v1/select", R"({"accelerator_type": "tpu-v4-64"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["selected_cluster"], "tpu-a");
  r = client.Get("/v1/nope");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "RouteNotFound");
  r = client.Post("/v1/select", std::string(2 << 20, 'x'), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "PayloadTooLarge");
  httplib::Client plain("127.0.0.1", port);
  EXPECT_FALSE(plain.Get("/v1/clusters") && plain.Get("/v1/clusters")->status == 200);
  server.stop();
  t.join();

  options.tls_key = (dir.path() / "missing.pem").string();
  EXPECT_THROW(ApiServer{options}, ApiServerError);
  options.tls_key.clear();
  EXPECT_THROW(ApiServer{options}, ApiServerError);
}

}  // namespace
}  // namespace falcon
