// Log export past the read quota (issue 28) against the local Logging and Storage server: the
// copy path (entries:copy into a staging prefix, polled, cancelled, cleaned up), the sink path
// (a Log Router sink's hourly archive) and `auto`, each writing the same rank objects as the read
// path, byte for byte; and the preconditions that fail before anything is copied, each saying the
// fix.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "falcon/log_retriever.h"
#include "gcp_server/log_copy.h"
#include "logs/export_paths.h"
#include "logs/gke_log_env.h"

namespace falcon {
namespace {

using falcon::testing::EntrySpec;
using falcon::testing::gke_entry;
using falcon::testing::GkePlace;
using falcon::testing::kLogStartNanos;
using falcon::testing::LogServerEnv;
using falcon::testing::PodLabels;
using nlohmann::json;
using ::testing::HasSubstr;

constexpr std::int64_t kMs = 1'000'000;
constexpr const char* kBucket = "falcon-logs";
constexpr const char* kStaging = "falcon-staging";
constexpr const char* kArchive = "falcon-archive";

struct ExportPaths : ::testing::Test {
  LogServerEnv env;
  GkePlace place;
  std::map<int, std::string> expected;  // per rank, what its object holds

  void SetUp() override {
    create_bucket(kBucket);
    create_bucket(kStaging);
    create_bucket(kArchive);
  }

  HttpResponse call(const std::string& method, const std::string& path, const json& body = {}) {
    HttpRequest request;
    request.method = method;
    request.url = env.server().base_url() + path;
    request.headers.set("Authorization", "Bearer " + env.server().valid_token());
    if (!body.is_null()) {
      request.headers.set("Content-Type", "application/json");
      request.body = body.dump();
    }
    request.timeout = std::chrono::seconds(30);
    return make_curl_http_client()->send(request);
  }
  void create_bucket(const std::string& name) {
    ASSERT_EQ(call("POST", "/storage/v1/b?project=" + place.project, json{{"name", name}}).status,
              200);
  }
  // What the operator does after reading falcon's error: the gcloud command's effect.
  void grant_writer(const std::string& bucket) {
    const std::string member =
        "serviceAccount:" + fake::LogCopyService::logging_service_account(place.project);
    json policy = json::parse(call("GET", "/storage/v1/b/" + bucket + "/iam").body);
    policy["bindings"].push_back({{"role", "roles/storage.objectCreator"}, {"members", {member}}});
    ASSERT_EQ(call("PUT", "/storage/v1/b/" + bucket + "/iam", policy).status, 200);
  }

  // Four ranks, interleaved in time, with newline-ended, JSON-payload and stderr lines, ties on
  // timestamp, another workload's lines and another namespace's.
  void write_logs(int count = 400) {
    std::vector<json> entries;
    for (int i = 0; i < count; ++i) {
      for (int worker = 0; worker < 4; ++worker) {
        const std::string text =
            fmt::format("[w{}] step {} \"q\" \\ é loss={:.4f}", worker, i, 2.0 / (i + 1));
        const std::int64_t ts = kLogStartNanos + i * kMs + (i % 7 == 3 ? 0 : worker * 1000);
        entries.push_back(
            gke_entry(place, {.slice = 0,
                              .worker = worker,
                              .timestamp_nanos = ts,
                              .text = i % 3 == 0 ? text + "\n" : text,
                              .labels = i % 13 == 5 ? PodLabels::kNone : PodLabels::kGke,
                              .stderr_stream = i % 11 == 7,
                              .json_payload = i % 5 == 4}));
      }
    }
    GkePlace other = place;
    other.workload = "other-bench";
    entries.push_back(
        gke_entry(other, {.worker = 0, .timestamp_nanos = kLogStartNanos + 5, .text = "x"}));
    GkePlace elsewhere = place;
    elsewhere.namespace_ = "team-b";
    entries.push_back(
        gke_entry(elsewhere, {.worker = 1, .timestamp_nanos = kLogStartNanos + 6, .text = "y"}));
    env.write(entries);
  }

  logs::RetrieverOptions options(GcpSettings settings = {}) {
    logs::RetrieverOptions o = env.options();
    settings.log_copy_staging = fmt::format("gs://{}/stage", kStaging);
    settings.log_copy_poll_s = 1;
    o.export_settings = settings;
    o.splitter.memory_bytes = 256 << 10;  // several runs per thread
    return o;
  }

  LogExportResult run(const std::string& dest, ExportOptions how, GcpSettings settings = {},
                      const LogFilter& filter = {}) {
    CloudLogRetriever retriever = logs::make_retriever(options(settings));
    return retriever.export_logs(env.cluster(place), place.workload, place.namespace_, filter, dest,
                                 LogQueryOptions{.not_before = "2026-04-13T06:00:00Z"}, how);
  }

  std::string object(const std::string& name) {
    return env.storage().download_object(kBucket, name);
  }
  json metadata(const std::string& prefix) {
    return json::parse(object(prefix + "collection_meta.json"));
  }
  std::vector<std::string> names(const std::string& bucket, const std::string& prefix = "") {
    std::vector<std::string> out;
    for (const auto& o : env.storage().list_objects(bucket, prefix)) out.push_back(o.name);
    return out;
  }
  std::int64_t count(const std::string& route) { return env.count(route); }
  void set_copy(const json& settings) {
    fake::CopySettings s = env.server().copies().copy_settings();
    fake::apply_copy_settings(settings, s);
    env.server().copies().set_copy_settings(s);
  }
};

TEST_F(ExportPaths, TheThreePathsWriteTheSameRankObjectsByteForByte) {
  write_logs();
  grant_writer(kStaging);
  set_copy({{"entries_per_object", 97}, {"duplicate_every", 10}});
  const LogExportResult read = run("gs://falcon-logs/read/", {.via = ExportVia::kRead});
  const std::int64_t reads_before = count("logging.list");
  const LogExportResult copy = run("gs://falcon-logs/copy/", {.via = ExportVia::kCopy});
  EXPECT_EQ(count("logging.list"), reads_before) << "copy must not read entries";
  // The sink's archive of the project, with repeats, then exported from it.
  env.server().copies().write_sink_archive(place.project, kArchive,
                                           kLogStartNanos + 3600 * 1000 * kMs, 150, 7);
  GcpSettings settings;
  settings.log_archive = fmt::format("gs://{}", kArchive);
  const LogExportResult sink =
      run("gs://falcon-logs/sink/", {.via = ExportVia::kSink, .window_end = "2026-04-13T07:10:00Z"},
          settings);
  EXPECT_EQ(count("logging.list"), reads_before) << "sink must not read entries";

  ASSERT_EQ(read.exported_ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(copy.exported_ranks, read.exported_ranks);
  EXPECT_EQ(sink.exported_ranks, read.exported_ranks);
  for (int rank = 0; rank < 4; ++rank) {
    const std::string want = object(fmt::format("read/rank-{}.log", rank));
    EXPECT_EQ(std::count(want.begin(), want.end(), '\n'), 400);
    EXPECT_EQ(object(fmt::format("copy/rank-{}.log", rank)), want) << "rank " << rank;
    EXPECT_EQ(object(fmt::format("sink/rank-{}.log", rank)), want) << "rank " << rank;
  }
  json mr = metadata("read/");
  json mc = metadata("copy/");
  json ms = metadata("sink/");
  EXPECT_EQ(mr["via"]["path"], "read");
  EXPECT_GE(mr["logging_read_calls"].get<int>(), 2);
  EXPECT_EQ(mc["via"]["path"], "copy");
  EXPECT_EQ(mc["logging_read_calls"], 0);
  EXPECT_EQ(mc["entries_copied"], 1600);
  EXPECT_GT(mc["duplicates_dropped"].get<int>(), 0);
  EXPECT_THAT(mc["operation"]["name"].get<std::string>(), HasSubstr("/operations/"));
  EXPECT_EQ(mc["operation"]["state"], "SUCCEEDED");
  EXPECT_EQ(ms["via"]["path"], "sink");
  EXPECT_EQ(ms["logging_read_calls"], 0);
  EXPECT_GT(ms["duplicates_dropped"].get<int>(), 0);
  for (json* m : {&mr, &mc, &ms}) {
    for (auto& [rank, r] : (*m)["ranks"].items()) r.erase("uri");  // each its own destination
  }
  for (const char* key :
       {"ranks", "lines", "bytes", "first_timestamp", "last_timestamp", "filter"}) {
    EXPECT_EQ(mc[key].dump(), mr[key].dump()) << key;
    EXPECT_EQ(ms[key].dump(), mr[key].dump()) << key;
  }
  // The staged objects are gone.
  EXPECT_TRUE(names(kStaging).empty());
}

TEST_F(ExportPaths, CopyStagesUnderItsOwnPrefixAndKeepsItWhenAsked) {
  write_logs(50);
  grant_writer(kStaging);
  run("gs://falcon-logs/kept/", {.via = ExportVia::kCopy, .keep_staging = true});
  const json meta = metadata("kept/");
  EXPECT_EQ(meta["staging_kept"], true);
  const std::string staging = meta["staging"];
  EXPECT_THAT(staging, HasSubstr("gs://falcon-staging/stage/falcon-copy/llama-bench-"));
  const auto staged = names(kStaging);
  ASSERT_FALSE(staged.empty());
  for (const auto& n : staged) {
    EXPECT_TRUE(("gs://falcon-staging/" + n).starts_with(staging)) << n;
  }
  EXPECT_EQ(meta["staged_objects"], staged.size());
}

TEST_F(ExportPaths, CopyReportsTheOperationsStateAndProgress) {
  write_logs(100);
  grant_writer(kStaging);
  set_copy({{"entries_per_second", 100}});  // 400 entries: 4 s of the fake clock
  std::vector<ExportStatus> seen;
  run("gs://falcon-logs/progress/",
      {.via = ExportVia::kCopy, .on_status = [&](const ExportStatus& s) { seen.push_back(s); }});
  std::vector<int> percents;
  for (const auto& s : seen) {
    if (s.phase == ExportStatus::Phase::kCopying) percents.push_back(s.percent);
  }
  ASSERT_GE(percents.size(), 3u);
  EXPECT_EQ(percents.front(), 0);
  EXPECT_EQ(percents.back(), 100);
  EXPECT_TRUE(std::is_sorted(percents.begin(), percents.end()));
  EXPECT_EQ(seen.front().phase, ExportStatus::Phase::kChosen);
  EXPECT_THAT(seen.front().message, HasSubstr("exporting via copy"));
}

TEST_F(ExportPaths, CopyWithoutTheWritersGrantFailsBeforeCopyingAndSaysTheCommand) {
  write_logs(10);
  try {
    run("gs://falcon-logs/x/", {.via = ExportVia::kCopy});
    FAIL() << "expected a precondition error";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.status(), "FAILED_PRECONDITION");
    EXPECT_THAT(e.what(), HasSubstr("gcloud storage buckets add-iam-policy-binding "
                                    "gs://falcon-staging --member=serviceAccount:service-"));
    EXPECT_THAT(e.what(), HasSubstr("--role=roles/storage.objectCreator"));
  }
  EXPECT_EQ(count("logging.copy"), 0);
}

TEST_F(ExportPaths, CopyOfACmekLogBucketIsRefusedWithTheReason) {
  write_logs(10);
  grant_writer(kStaging);
  env.server().copies().set_cmek("projects/falcon-bench/locations/global/buckets/_Default",
                                 "projects/k/locations/global/keyRings/r/cryptoKeys/key");
  try {
    run("gs://falcon-logs/x/", {.via = ExportVia::kCopy});
    FAIL() << "expected a precondition error";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.status(), "FAILED_PRECONDITION");
    EXPECT_THAT(e.what(), HasSubstr("customer-managed key"));
    EXPECT_THAT(e.what(), HasSubstr("--via read"));
  }
  EXPECT_EQ(count("logging.copy"), 0);
}

TEST_F(ExportPaths, AFilterOver20000CharactersIsRefusedBeforeCopying) {
  write_logs(10);
  grant_writer(kStaging);
  LogFilter filter;
  filter.grep = "textPayload:\"" + std::string(20'000, 'a') + "\"";
  try {
    run("gs://falcon-logs/x/", {.via = ExportVia::kCopy}, {}, filter);
    FAIL() << "expected a precondition error";
  } catch (const LogRetrievalError& e) {
    EXPECT_THAT(e.what(), HasSubstr("20,000"));
  }
  EXPECT_EQ(count("logging.copy"), 0);
}

TEST_F(ExportPaths, ACopyWaitingForPermissionTooLongIsCancelledWithTheCommand) {
  write_logs(10);
  // The IAM policy cannot be read, so the copy starts and waits for its writer's access.
  env.server().faults().add(
      fake::Fault::from_json({{"route", "storage.iam_get"}, {"status", 403}}));
  GcpSettings settings;
  settings.log_copy_permission_wait_s = 30;
  std::vector<ExportStatus> seen;
  try {
    run("gs://falcon-logs/x/",
        {.via = ExportVia::kCopy, .on_status = [&](const ExportStatus& s) { seen.push_back(s); }},
        settings);
    FAIL() << "expected a precondition error";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.status(), "FAILED_PRECONDITION");
    EXPECT_THAT(e.what(), HasSubstr("was cancelled"));
    EXPECT_THAT(e.what(), HasSubstr("gcloud storage buckets add-iam-policy-binding"));
  }
  bool waiting = false;
  for (const auto& s : seen) waiting = waiting || s.phase == ExportStatus::Phase::kWaiting;
  EXPECT_TRUE(waiting);
  EXPECT_EQ(count("logging.operations_cancel"), 1);
  const auto ops = json::parse(call("GET",
                                    "/v2/projects/falcon-bench/locations/global/operations"
                                    "?filter=request_type%3DCopyLogEntries")
                                   .body);
  ASSERT_EQ(ops["operations"].size(), 1u);
  EXPECT_EQ(ops["operations"][0]["metadata"]["state"], "OPERATION_STATE_CANCELLED");
}

TEST_F(ExportPaths, ACopyThatFailsHalfWayLeavesNoStagedObjectsAndNoExport) {
  write_logs(200);
  grant_writer(kStaging);
  set_copy({{"fail_at_percent", 50}, {"entries_per_object", 50}});
  try {
    run("gs://falcon-logs/half/", {.via = ExportVia::kCopy});
    FAIL() << "expected the copy's failure: " << metadata("half/").dump();
  } catch (const LogRetrievalError& e) {
    EXPECT_THAT(e.what(), HasSubstr("ended FAILED"));
    EXPECT_THAT(e.what(), HasSubstr("Internal error"));
  }
  EXPECT_TRUE(names(kStaging).empty());
  EXPECT_TRUE(names(kBucket, "half/").empty());
}

TEST_F(ExportPaths, CancellingStopsTheOperationAndDeletesWhatItStaged) {
  write_logs(200);
  grant_writer(kStaging);
  set_copy({{"entries_per_second", 100}, {"entries_per_object", 50}});
  int polls = 0;
  try {
    run("gs://falcon-logs/cancel/", {.via = ExportVia::kCopy,
                                     .cancelled = [&] { return polls >= 3; },
                                     .on_status =
                                         [&](const ExportStatus& s) {
                                           if (s.phase == ExportStatus::Phase::kCopying) ++polls;
                                         }});
    FAIL() << "expected the export to be cancelled";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.status(), "CANCELLED");
  }
  EXPECT_EQ(count("logging.operations_cancel"), 1);
  EXPECT_TRUE(names(kStaging).empty());
  EXPECT_TRUE(names(kBucket, "cancel/").empty());
}

TEST_F(ExportPaths, AutoTakesTheSinkWhenTheArchiveCoversTheWindow) {
  write_logs(20);
  env.server().copies().write_sink_archive(place.project, kArchive,
                                           kLogStartNanos + 3600 * 1000 * kMs, 1000, 0);
  GcpSettings settings;
  settings.log_archive = fmt::format("gs://{}", kArchive);
  settings.log_archive_lag_s = 0;
  std::string chosen;
  run("gs://falcon-logs/auto/",
      {.window_end = "2026-04-13T07:00:30Z",
       .on_status =
           [&](const ExportStatus& s) {
             if (s.phase == ExportStatus::Phase::kChosen && chosen.empty()) chosen = s.message;
           }},
      settings);
  EXPECT_THAT(chosen, HasSubstr("exporting via sink: gcp.log_archive gs://falcon-archive covers"));
  EXPECT_EQ(metadata("auto/")["via"]["path"], "sink");
}

TEST_F(ExportPaths, AutoSaysWhyItFallsBackToCopyThenToRead) {
  write_logs(20);
  grant_writer(kStaging);
  GcpSettings settings;
  settings.log_archive = fmt::format("gs://{}", kArchive);  // empty archive
  settings.log_archive_lag_s = 0;
  settings.log_copy = true;
  std::string chosen;
  const auto remember = [&](const ExportStatus& s) {
    if (s.phase == ExportStatus::Phase::kChosen) chosen = s.message;
  };
  run("gs://falcon-logs/a1/", {.on_status = remember}, settings);
  EXPECT_THAT(chosen, HasSubstr("exporting via copy: sink not used: the workload has not ended"));
  run("gs://falcon-logs/a2/", {.window_end = "2026-04-13T07:00:30Z", .on_status = remember},
      settings);
  EXPECT_THAT(chosen, HasSubstr("has no stdout or stderr file for the hour"));
  EXPECT_EQ(metadata("a2/")["via"]["path"], "copy");
  settings.log_copy = false;
  run("gs://falcon-logs/a3/", {.on_status = remember}, settings);
  EXPECT_THAT(chosen, HasSubstr("exporting via read: sink not used"));
  EXPECT_THAT(chosen, HasSubstr("copy not used: gcp.log_copy is false"));
  EXPECT_EQ(metadata("a3/")["via"]["path"], "read");
}

TEST_F(ExportPaths, TheSinkCannotApplyAGrepOrRunWithoutAnArchive) {
  LogFilter filter;
  filter.grep = "textPayload:\"loss\"";
  GcpSettings settings;
  settings.log_archive = fmt::format("gs://{}", kArchive);
  try {
    run("gs://falcon-logs/x/", {.via = ExportVia::kSink}, settings, filter);
    FAIL();
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.status(), "INVALID_ARGUMENT");
    EXPECT_THAT(e.what(), HasSubstr("--grep"));
  }
  try {
    run("gs://falcon-logs/x/", {.via = ExportVia::kSink});
    FAIL();
  } catch (const LogRetrievalError& e) {
    EXPECT_THAT(e.what(), HasSubstr("gcp.log_archive"));
  }
  try {
    CloudLogRetriever retriever = logs::make_retriever(env.options());  // no staging set
    retriever.export_logs(env.cluster(place), place.workload, place.namespace_, {},
                          "gs://falcon-logs/x/", {}, ExportOptions{.via = ExportVia::kCopy});
    FAIL();
  } catch (const LogRetrievalError& e) {
    EXPECT_THAT(e.what(), HasSubstr("gcp.log_copy_staging"));
  }
}

TEST(SinkHours, EveryHourOfTheWindowForEachLogId) {
  const std::int64_t t0 = 1776063600LL * 1'000'000'000 + 25 * 60 * 1'000'000'000LL;  // 07:25
  const auto p =
      logs::sink_hour_prefixes("arch/", {"stdout", "stderr"}, t0, t0 + 2 * 3600LL * 1'000'000'000);
  EXPECT_EQ(p,
            (std::vector<std::string>{"arch/stdout/2026/04/13/07:", "arch/stdout/2026/04/13/08:",
                                      "arch/stdout/2026/04/13/09:", "arch/stderr/2026/04/13/07:",
                                      "arch/stderr/2026/04/13/08:", "arch/stderr/2026/04/13/09:"}));
}

}  // namespace
}  // namespace falcon
