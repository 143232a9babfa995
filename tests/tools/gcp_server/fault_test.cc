// Fault injection: injected statuses with the real error bodies, delays, connection cuts in the
// middle of a request body, and the HTTP control endpoints.
#include <gtest/gtest.h>

#include <chrono>

#include "server_fixture.h"

namespace falcon::fake::testing {
namespace {

constexpr std::size_t kQ = 256 * 1024;

using Faults = ServerTest;

TEST_F(Faults, Logging429CarriesQuotaErrorInfoAndRetryInfo) {
  Fault f;
  f.route = "logging.list";
  f.status = 429;
  f.retry_delay = "7s";
  server_.faults().add(f);
  const HttpResult r = list({});
  ASSERT_EQ(r.status, 429);
  const json& err = r.body["error"];
  EXPECT_EQ(err["code"], 429);
  EXPECT_EQ(err["status"], "RESOURCE_EXHAUSTED");
  EXPECT_NE(err["message"].get<std::string>().find("Quota exceeded"), std::string::npos);
  bool error_info = false, retry_info = false;
  for (const auto& d : err["details"]) {
    if (d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo") {
      error_info = true;
      EXPECT_EQ(d["reason"], "RATE_LIMIT_EXCEEDED");
      EXPECT_EQ(d["metadata"]["quota_limit"], "ReadRequestsPerMinutePerProject");
      EXPECT_EQ(d["metadata"]["quota_metric"], "logging.googleapis.com/read_requests");
    }
    if (d["@type"] == "type.googleapis.com/google.rpc.RetryInfo") {
      retry_info = true;
      EXPECT_EQ(d["retryDelay"], "7s");
    }
  }
  EXPECT_TRUE(error_info);
  EXPECT_TRUE(retry_info);
  EXPECT_EQ(list({}).status, 200);  // the fault was for one call only
}

TEST_F(Faults, StatusForNCallsThenSuccess) {
  server_.faults().fail_next("logging.list", 503, 2);
  const HttpResult first = list({});
  EXPECT_EQ(first.status, 503);
  EXPECT_EQ(first.body["error"]["status"], "UNAVAILABLE");
  EXPECT_EQ(list({}).status, 503);
  EXPECT_EQ(list({}).status, 200);
  EXPECT_EQ(server_.request_counts().at("logging.list"), 3);
}

TEST_F(Faults, StorageErrorsUseLegacyReasons) {
  server_.faults().fail_next("storage.get", 503);
  server_.faults().fail_next("storage.get", 429);
  HttpResult r = get("/storage/v1/b/bkt/o/x");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body["error"]["errors"][0]["reason"], "backendError");
  r = get("/storage/v1/b/bkt/o/x");
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.body["error"]["errors"][0]["reason"], "rateLimitExceeded");
  EXPECT_EQ(get("/storage/v1/b/bkt/o/x").status, 404);  // faults used up: the real answer
}

TEST_F(Faults, WildcardRouteAndCustomMessage) {
  Fault f;
  f.status = 500;
  f.message = "boom";
  server_.faults().add(f);
  const HttpResult r = get("/storage/v1/b/bkt/o");
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body["error"]["message"], "boom");
  EXPECT_TRUE(server_.faults().pending().empty());
}

TEST_F(Faults, DelayThenLetThrough) {
  server_.faults().delay_next("logging.list", std::chrono::milliseconds(50));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(list({}).status, 200);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
}

TEST_F(Faults, ConnectionCutMidChunkPersistsWholeQuantaOfThePrefix) {
  std::string data(4 * kQ, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 31) % 251);
  auto init = client_->Post("/upload/storage/v1/b/bkt/o?uploadType=resumable&name=cut.bin", auth(),
                            "", "application/json");
  ASSERT_TRUE(init);
  const std::string origin = fmt::format("http://127.0.0.1:{}", server_.port());
  const std::string session = init->get_header_value("Location").substr(origin.size());

  // The server reads 300,000 bytes of the 1 MiB body, keeps one quantum, and hangs up.
  server_.faults().cut_next("storage.upload_chunk", 300000);
  httplib::Headers h = auth();
  h.emplace("Content-Range", fmt::format("bytes 0-{}/*", data.size() - 1));
  auto cut = client_->Put(session.c_str(), h, data, "application/octet-stream");
  EXPECT_FALSE(cut) << "expected a transport error, got HTTP " << cut->status;

  // The client asks where to resume.
  httplib::Headers q = auth();
  q.emplace("Content-Range", "bytes */*");
  auto status = client_->Put(session.c_str(), q, "", "application/octet-stream");
  ASSERT_TRUE(status);
  EXPECT_EQ(status->status, 308);
  EXPECT_EQ(status->get_header_value("Range"), "bytes=0-262143");

  // Resume from the committed offset and finish: the object is byte-identical.
  httplib::Headers rest = auth();
  rest.emplace("Content-Range", fmt::format("bytes {}-{}/{}", kQ, data.size() - 1, data.size()));
  auto done = client_->Put(session.c_str(), rest, data.substr(kQ), "application/octet-stream");
  ASSERT_TRUE(done);
  ASSERT_EQ(done->status, 200) << done->body;
  const HttpResult media = get("/storage/v1/b/bkt/o/cut.bin?alt=media");
  EXPECT_TRUE(media.raw == data);
}

TEST_F(Faults, ConnectionCutOnAnyRouteDropsTheResponse) {
  server_.faults().cut_next("logging.list");
  auto r = client_->Post("/v2/entries:list", auth(), R"({"resourceNames":["projects/p"]})",
                         "application/json");
  EXPECT_FALSE(r);
  EXPECT_EQ(list({}).status, 200);
}

TEST_F(Faults, ControlEndpointsOverHttp) {
  auto add = client_->Post(
      "/_fake/faults",
      R"([{"route":"storage.list","status":503,"times":2},{"route":"oauth.token","status":500}])",
      "application/json");
  ASSERT_TRUE(add);
  EXPECT_EQ(add->status, 200);
  auto pending = client_->Get("/_fake/faults");
  ASSERT_TRUE(pending);
  EXPECT_EQ(json::parse(pending->body)["faults"].size(), 2u);
  EXPECT_EQ(get("/storage/v1/b/bkt/o").status, 503);
  auto token = to_result(
      client_->Post("/token", "grant_type=refresh_token", "application/x-www-form-urlencoded"));
  EXPECT_EQ(token.status, 500);
  EXPECT_EQ(token.body["error"], "internal_failure");

  auto bad = client_->Post("/_fake/faults", R"({"route":"x","colour":"red"})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);

  auto counters = client_->Get("/_fake/counters");
  ASSERT_TRUE(counters);
  const json c = json::parse(counters->body);
  EXPECT_EQ(c["requests"]["storage.list"], 1);
  EXPECT_EQ(c["requests"]["oauth.token"], 1);

  auto clear = client_->Delete("/_fake/faults");
  ASSERT_TRUE(clear);
  EXPECT_EQ(get("/storage/v1/b/bkt/o").status, 404);

  server_.write_log_entries({gke_entry("p", "w", 0, 0, "x")});
  server_.faults().fail_next("logging.list", 503);
  auto reset = client_->Post("/_fake/reset", "", "application/json");
  ASSERT_TRUE(reset);
  EXPECT_EQ(server_.log_entry_count(), 0u);
  EXPECT_TRUE(server_.faults().pending().empty());
  EXPECT_TRUE(server_.request_counts().empty());
}

TEST(FaultJson, RoundTripsAndRejectsBadInput) {
  Fault f;
  f.route = "storage.upload_chunk";
  f.cut_connection = true;
  f.cut_after_bytes = 1024;
  f.delay = std::chrono::milliseconds(5);
  const Fault back = Fault::from_json(f.to_json());
  EXPECT_EQ(back.route, f.route);
  EXPECT_TRUE(back.cut_connection);
  EXPECT_EQ(back.cut_after_bytes, 1024);
  EXPECT_EQ(back.delay, std::chrono::milliseconds(5));
  EXPECT_THROW(Fault::from_json(json{{"times", 0}}), std::invalid_argument);
  EXPECT_THROW(Fault::from_json(json{{"status", 42}}), std::invalid_argument);
  EXPECT_THROW(Fault::from_json(json{{"status", "500"}}), std::invalid_argument);
}

}  // namespace
}  // namespace falcon::fake::testing
