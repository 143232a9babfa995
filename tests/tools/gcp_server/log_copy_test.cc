// The local server's entries:copy as Google documents it: a long-running operation that waits for
// its writer identity's access, advances with the server's clock at the configured rate, writes
// objects of its own naming (unordered, repeating entries), fails and is cancelled on request; log
// buckets with CMEK are refused; a sink archive has the documented hourly layout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "gcp_server/log_copy.h"
#include "server_fixture.h"
#include "support/fake_clock.h"

namespace falcon::fake::testing {
namespace {

using ::testing::HasSubstr;
constexpr std::int64_t kT0 = 1'714'521'600LL * 1'000'000'000;  // 2024-05-01T00:00:00Z
constexpr const char* kSource = "projects/p/locations/global/buckets/_Default";

GcpServerOptions on_clock(std::shared_ptr<Clock> clock) {
  GcpServerOptions o;
  o.clock = std::move(clock);
  return o;
}

// The server's clock, made before the server (a base initialized first).
struct WithFakeClock {
  std::shared_ptr<falcon::testing::FakeClock> clock_ =
      std::make_shared<falcon::testing::FakeClock>();
};

class LogCopyApi : protected WithFakeClock, public ServerTest {
 protected:
  LogCopyApi() : ServerTest(on_clock(clock_)) {
    std::vector<json> entries;
    for (int i = 0; i < 250; ++i) {
      entries.push_back(
          gke_entry("p", "job", i % 2, kT0 + i * 1'000'000'000LL, fmt::format("line {}", i)));
    }
    entries.push_back(gke_entry("q", "job", 0, kT0, "another project"));
    server_.write_log_entries(entries);
    EXPECT_EQ(post_json("/storage/v1/b?project=p", {{"name", "dest"}}).status, 200);
  }
  void grant() {
    HttpResult policy = get("/storage/v1/b/dest/iam");
    json body = policy.body;
    body["bindings"].push_back(
        {{"role", "roles/storage.objectCreator"},
         {"members", {"serviceAccount:" + LogCopyService::logging_service_account("p")}}});
    ASSERT_EQ(
        to_result(client_->Put("/storage/v1/b/dest/iam", auth(), body.dump(), "application/json"))
            .status,
        200);
  }
  HttpResult copy(const std::string& filter = "timestamp>=\"2024-05-01T00:00:00Z\"") {
    return post_json("/v2/entries:copy", {{"name", kSource},
                                          {"filter", filter},
                                          {"destination", "storage.googleapis.com/dest/run"}});
  }
  std::vector<std::string> lines_in_dest() {
    std::vector<std::string> out;
    const HttpResult list = get("/storage/v1/b/dest/o?prefix=run/");
    for (const auto& item : list.body.value("items", json::array())) {
      const std::string name = item["name"];
      std::string encoded;
      for (char c : name) encoded += c == '/' ? std::string("%2F") : std::string(1, c);
      const HttpResult data = get("/storage/v1/b/dest/o/" + encoded + "?alt=media");
      std::size_t start = 0;
      for (std::size_t nl; (nl = data.raw.find('\n', start)) != std::string::npos; start = nl + 1) {
        out.push_back(data.raw.substr(start, nl - start));
      }
    }
    return out;
  }
};

TEST_F(LogCopyApi, AnOperationWaitsForItsWriterThenCopiesAtTheConfiguredRate) {
  CopySettings s;
  s.entries_per_second = 100;
  s.entries_per_object = 40;
  s.duplicate_every = 25;
  server_.copies().set_copy_settings(s);
  const HttpResult started = copy();
  ASSERT_EQ(started.status, 200) << started.raw;
  const std::string name = started.body["name"];
  EXPECT_THAT(name, HasSubstr("projects/p/locations/global/operations/"));
  EXPECT_EQ(started.body["metadata"]["@type"],
            "type.googleapis.com/google.logging.v2.CopyLogEntriesMetadata");
  EXPECT_EQ(started.body["metadata"]["state"], "OPERATION_STATE_SCHEDULED");
  EXPECT_EQ(started.body["metadata"]["writerIdentity"],
            "serviceAccount:" + LogCopyService::logging_service_account("p"));
  EXPECT_EQ(started.body["done"], false);

  HttpResult op = get("/v2/" + name);
  EXPECT_EQ(op.body["metadata"]["state"], "OPERATION_STATE_WAITING_FOR_PERMISSIONS");
  grant();
  op = get("/v2/" + name);
  EXPECT_EQ(op.body["metadata"]["state"], "OPERATION_STATE_RUNNING");
  clock_->advance(std::chrono::seconds(1));
  op = get("/v2/" + name);
  EXPECT_EQ(op.body["metadata"]["progress"], 40);  // 100 of 250
  clock_->advance(std::chrono::seconds(2));
  op = get("/v2/" + name);
  EXPECT_EQ(op.body["done"], true);
  EXPECT_EQ(op.body["metadata"]["state"], "OPERATION_STATE_SUCCEEDED");
  EXPECT_EQ(op.body["response"]["logEntriesCopiedCount"], "250");

  const auto lines = lines_in_dest();
  EXPECT_EQ(lines.size(), 250u + 10u);  // every 25th twice
  std::set<std::string> distinct(lines.begin(), lines.end());
  EXPECT_EQ(distinct.size(), 250u);
  const HttpResult listed = get("/storage/v1/b/dest/o?prefix=run/");
  for (const auto& item : listed.body["items"]) {
    EXPECT_THAT(item["name"].get<std::string>(), ::testing::EndsWith(".jsonl"));
  }
}

TEST_F(LogCopyApi, WithoutAccessInTimeTheOperationIsCancelled) {
  const std::string name = copy().body["name"];
  clock_->advance(std::chrono::minutes(61));
  const HttpResult op = get("/v2/" + name);
  EXPECT_EQ(op.body["done"], true);
  EXPECT_EQ(op.body["metadata"]["state"], "OPERATION_STATE_CANCELLED");
  EXPECT_THAT(op.body["error"]["message"].get<std::string>(), HasSubstr("was not granted"));
}

TEST_F(LogCopyApi, CancelFailureCmekAndLongFilters) {
  grant();
  CopySettings s;
  s.entries_per_second = 10;
  server_.copies().set_copy_settings(s);
  std::string name = copy().body["name"];
  ASSERT_EQ(post_json("/v2/" + name + ":cancel", json::object()).status, 200);
  HttpResult op = get("/v2/" + name);
  EXPECT_EQ(op.body["metadata"]["state"], "OPERATION_STATE_CANCELLED");
  EXPECT_EQ(op.body["metadata"]["cancellationRequested"], true);
  EXPECT_EQ(op.body["error"]["code"], 1);

  s.entries_per_second = 0;
  s.fail_at_percent = 50;
  server_.copies().set_copy_settings(s);
  name = copy().body["name"];
  op = get("/v2/" + name);
  EXPECT_EQ(op.body["metadata"]["state"], "OPERATION_STATE_FAILED");
  EXPECT_EQ(op.body["error"]["code"], 13);

  server_.copies().set_cmek(kSource, "projects/k/locations/global/keyRings/r/cryptoKeys/c");
  EXPECT_EQ(get(std::string("/v2/") + kSource).body["cmekSettings"]["kmsKeyName"],
            "projects/k/locations/global/keyRings/r/cryptoKeys/c");
  HttpResult refused = copy();
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(refused.body["error"]["status"], "FAILED_PRECONDITION");
  server_.copies().set_cmek(kSource, "");
  refused = copy("textPayload:\"" + std::string(20'000, 'x') + "\"");
  EXPECT_EQ(refused.status, 400);
  EXPECT_THAT(refused.body["error"]["message"].get<std::string>(), HasSubstr("20000"));
  const HttpResult ops =
      get("/v2/projects/p/locations/global/operations?filter=request_type%3DCopyLogEntries");
  EXPECT_EQ(ops.body["operations"].size(), 2u);
}

TEST_F(LogCopyApi, TheSinkArchiveHasTheDocumentedHourlyLayout) {
  const std::int64_t written =
      server_.copies().write_sink_archive("p", "archive", kT0 + 3600LL * 1'000'000'000, 100, 0);
  EXPECT_EQ(written, 3);  // 250 entries of hour 00 in shards of 100
  const HttpResult list = get("/storage/v1/b/archive/o");
  std::vector<std::string> names;
  for (const auto& item : list.body["items"]) names.push_back(item["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"stdout/2024/05/01/00:00:00_00:59:59_S0.json",
                                             "stdout/2024/05/01/00:00:00_00:59:59_S1.json",
                                             "stdout/2024/05/01/00:00:00_00:59:59_S2.json"}));
}

}  // namespace
}  // namespace falcon::fake::testing
