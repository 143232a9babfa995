// The fake Cloud Logging API over HTTP: entries:write and entries:list request and response
// shapes, paging, ordering, resource names, errors and persistence.
#include <gtest/gtest.h>

#include "gcp_server/api_error.h"
#include "server_fixture.h"
#include "support/temp_dir.h"

namespace falcon::fake::testing {
namespace {

constexpr std::int64_t kSecond = 1'000'000'000;
constexpr std::int64_t kT0 = 1'714'521'600LL * kSecond;  // 2024-05-01T00:00:00Z

using LoggingApi = ServerTest;

std::vector<json> numbered(int n, const std::string& project = "p", const std::string& wl = "w") {
  std::vector<json> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(gke_entry(project, wl, 0, kT0 + i * kSecond, fmt::format("line {}", i)));
  }
  return out;
}

std::vector<std::string> texts(const HttpResult& r) {
  std::vector<std::string> out;
  if (!r.body.contains("entries")) return out;
  for (const auto& e : r.body["entries"]) out.push_back(e.value("textPayload", ""));
  return out;
}

TEST_F(LoggingApi, WriteFillsDefaultsAndListReturnsProto3Json) {
  const json write = {
      {"logName", "projects/p/logs/stdout"},
      {"resource", {{"type", "k8s_container"}, {"labels", {{"cluster_name", "c"}}}}},
      {"labels", {{"shared", "yes"}}},
      {"entries",
       {{{"textPayload", "first"}, {"timestamp", "2024-05-01T00:00:00.5Z"}},
        {{"jsonPayload", {{"message", "second"}, {"step", 3}}},
         {"timestamp", "2024-05-01T02:00:00+02:00"},  // the same instant as 00:00:00Z
         {"severity", "DEFAULT"},
         {"labels", {{"own", "1"}}}}}}};
  const HttpResult w = post_json("/v2/entries:write", write);
  ASSERT_EQ(w.status, 200) << w.raw;
  EXPECT_EQ(w.raw, "{}");

  const HttpResult r = list({{"orderBy", "timestamp asc"}});
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_EQ(r.body["entries"].size(), 2u);
  EXPECT_FALSE(r.body.contains("nextPageToken"));
  const json& second = r.body["entries"][0];  // earlier instant
  const json& first = r.body["entries"][1];
  EXPECT_EQ(second["jsonPayload"]["message"], "second");
  EXPECT_EQ(second["timestamp"], "2024-05-01T00:00:00Z");
  EXPECT_FALSE(second.contains("severity"));  // DEFAULT is left out
  EXPECT_EQ(second["labels"], (json{{"shared", "yes"}, {"own", "1"}}));
  EXPECT_EQ(first["textPayload"], "first");
  EXPECT_EQ(first["timestamp"], "2024-05-01T00:00:00.500Z");
  EXPECT_EQ(first["logName"], "projects/p/logs/stdout");
  EXPECT_EQ(first["resource"]["labels"]["cluster_name"], "c");
  EXPECT_TRUE(first["insertId"].is_string());
  EXPECT_FALSE(first["insertId"].get<std::string>().empty());
  EXPECT_TRUE(tools::parse_rfc3339_nanos(first["receiveTimestamp"].get<std::string>()).has_value());
}

TEST_F(LoggingApi, NoMatchesIsAnEmptyObject) {
  const HttpResult r = list({{"filter", "textPayload:nothing"}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.raw, "{}");
}

TEST_F(LoggingApi, DefaultPageSizeIs50AndTokensWalkToTheEnd) {
  server_.write_log_entries(numbered(120));
  HttpResult r = list({});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["entries"].size(), 50u);
  std::vector<std::string> all = texts(r);
  int pages = 1;
  while (r.body.contains("nextPageToken")) {
    r = list({{"pageToken", r.body["nextPageToken"]}});
    ASSERT_EQ(r.status, 200) << r.raw;
    for (auto& t : texts(r)) all.push_back(t);
    ++pages;
  }
  EXPECT_EQ(pages, 3);
  ASSERT_EQ(all.size(), 120u);
  for (int i = 0; i < 120; ++i) EXPECT_EQ(all[i], fmt::format("line {}", i));
}

TEST_F(LoggingApi, PageSizeLimits) {
  server_.write_log_entries(numbered(3));
  EXPECT_EQ(list({{"pageSize", 1000}}).status, 200);
  EXPECT_EQ(list({{"pageSize", "2"}}).body["entries"].size(), 2u);  // int32 as a string
  for (const json& bad : {json(1001), json(-1), json("many")}) {
    const HttpResult r = list({{"pageSize", bad}});
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(r.body["error"]["code"], 400);
    EXPECT_EQ(r.body["error"]["status"], "INVALID_ARGUMENT");
  }
}

TEST_F(LoggingApi, PageTokenBelongsToItsRequest) {
  server_.write_log_entries(numbered(10));
  const HttpResult first = list({{"pageSize", 4}, {"filter", "textPayload:line"}});
  const std::string token = first.body["nextPageToken"];
  // The same token twice gives the same page.
  const HttpResult a =
      list({{"pageSize", 4}, {"filter", "textPayload:line"}, {"pageToken", token}});
  const HttpResult b =
      list({{"pageSize", 4}, {"filter", "textPayload:line"}, {"pageToken", token}});
  EXPECT_EQ(texts(a), (std::vector<std::string>{"line 4", "line 5", "line 6", "line 7"}));
  EXPECT_EQ(texts(a), texts(b));
  // Another filter, order or project: rejected.
  EXPECT_EQ(list({{"filter", "textPayload:lin"}, {"pageToken", token}}).status, 400);
  EXPECT_EQ(
      list({{"filter", "textPayload:line"}, {"orderBy", "timestamp desc"}, {"pageToken", token}})
          .status,
      400);
  EXPECT_EQ(
      list(
          {{"filter", "textPayload:line"}, {"resourceNames", {"projects/q"}}, {"pageToken", token}})
          .status,
      400);
  EXPECT_EQ(list({{"pageToken", "garbage!"}}).status, 400);
}

TEST_F(LoggingApi, DescendingOrderAndTiesBrokenByInsertId) {
  std::vector<json> entries;
  for (const char* id : {"b", "c", "a"}) {
    json e = gke_entry("p", "w", 0, kT0, std::string("tie ") + id);
    e["insertId"] = id;
    entries.push_back(e);
  }
  entries.push_back(gke_entry("p", "w", 0, kT0 + 1, "later"));
  entries.push_back(gke_entry("p", "w", 0, kT0 - 1, "earlier"));
  server_.write_log_entries(entries);
  EXPECT_EQ(texts(list({})),
            (std::vector<std::string>{"earlier", "tie a", "tie b", "tie c", "later"}));
  EXPECT_EQ(texts(list({{"orderBy", "timestamp desc"}})),
            (std::vector<std::string>{"later", "tie c", "tie b", "tie a", "earlier"}));
  // Paging through ties in descending order loses nothing.
  std::vector<std::string> paged;
  json req = {{"orderBy", "timestamp desc"}, {"pageSize", 2}};
  for (;;) {
    const HttpResult r = list(req);
    for (auto& t : texts(r)) paged.push_back(t);
    if (!r.body.contains("nextPageToken")) break;
    req["pageToken"] = r.body["nextPageToken"];
  }
  EXPECT_EQ(paged, (std::vector<std::string>{"later", "tie c", "tie b", "tie a", "earlier"}));
  EXPECT_EQ(list({{"orderBy", "insertId"}}).status, 400);
}

TEST_F(LoggingApi, ResourceNamesSelectProjects) {
  server_.write_log_entries(numbered(2, "p1"));
  server_.write_log_entries(numbered(3, "p2"));
  EXPECT_EQ(texts(list({{"resourceNames", {"projects/p1"}}})).size(), 2u);
  EXPECT_EQ(texts(list({{"resourceNames", {"projects/p2"}}})).size(), 3u);
  EXPECT_EQ(texts(list({{"resourceNames", {"projects/p1", "projects/p2"}}})).size(), 5u);
  EXPECT_EQ(texts(list({{"resourceNames",
                         {"projects/p2/locations/global/buckets/_Default/views/_AllLogs"}}}))
                .size(),
            3u);
  EXPECT_EQ(texts(list({{"resourceNames", {"projects/p3"}}})).size(), 0u);
  EXPECT_EQ(post_json("/v2/entries:list", json::object()).status, 400);
  EXPECT_EQ(list({{"resourceNames", json::array()}}).status, 400);
  EXPECT_EQ(list({{"resourceNames", {"p1"}}}).status, 400);
}

TEST_F(LoggingApi, MalformedFilterIs400WithPosition) {
  const HttpResult r = list({{"filter", "severity>=ERROR AND (textPayload:x"}});
  ASSERT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["status"], "INVALID_ARGUMENT");
  EXPECT_NE(r.body["error"]["message"].get<std::string>().find("column 35"), std::string::npos)
      << r.raw;
}

TEST_F(LoggingApi, UnknownRequestFieldsAreRejectedAsProto3JsonDoes) {
  const HttpResult r =
      post_json("/v2/entries:list", {{"projectIds", {"p"}}, {"resourceNames", {"projects/p"}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.raw.find("Unknown name \\\"projectIds\\\""), std::string::npos) << r.raw;
  // Original proto field names are accepted too.
  EXPECT_EQ(
      post_json("/v2/entries:list", {{"resource_names", {"projects/p"}}, {"page_size", 5}}).status,
      200);
}

TEST_F(LoggingApi, DuplicatesAreRemovedFromResults) {
  json e = gke_entry("p", "w", 0, kT0, "once");
  e["insertId"] = "same";
  server_.write_log_entries({e, e});
  json other_project = e;
  other_project["logName"] = "projects/q/logs/stdout";
  server_.write_log_entries({other_project});
  EXPECT_EQ(texts(list({})).size(), 1u);
  EXPECT_EQ(texts(list({{"resourceNames", {"projects/p", "projects/q"}}})).size(), 2u);
}

TEST_F(LoggingApi, InvalidWriteStoresNothing) {
  json bad = gke_entry("p", "w", 0, kT0, "x");
  bad.erase("logName");
  const HttpResult r =
      post_json("/v2/entries:write", {{"entries", {gke_entry("p", "w", 0, kT0, "ok"), bad}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body["error"]["message"].get<std::string>().find("entries[1]"), std::string::npos);
  EXPECT_EQ(server_.log_entry_count(), 0u);
  for (const json& entry :
       {json{{"logName", "projects/p/logs/a/b"}, {"resource", {{"type", "global"}}}},
        json{{"logName", "projects/p/logs/a"}},
        json{{"logName", "projects/p/logs/a"},
             {"resource", {{"type", "global"}}},
             {"timestamp", "yesterday"}},
        json{{"logName", "projects/p/logs/a"},
             {"resource", {{"type", "global"}}},
             {"severity", "LOUD"}},
        json{{"logName", "projects/p/logs/a"},
             {"resource", {{"type", "global"}}},
             {"textPayload", "x"},
             {"jsonPayload", json::object()}},
        json{{"logName", "projects/p/logs/a"}, {"resource", {{"type", "global"}}}, {"bogus", 1}}}) {
    EXPECT_EQ(post_json("/v2/entries:write", {{"entries", {entry}}}).status, 400) << entry;
  }
  EXPECT_EQ(post_json("/v2/entries:write", {{"entries", json::array()}}).status, 400);
  EXPECT_EQ(server_.log_entry_count(), 0u);
}

TEST_F(LoggingApi, DryRunValidatesWithoutStoring) {
  const HttpResult r = post_json(
      "/v2/entries:write", {{"dryRun", true}, {"entries", {gke_entry("p", "w", 0, kT0, "x")}}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(server_.log_entry_count(), 0u);
}

TEST_F(LoggingApi, FilterOnGkeLabelsAndTimestamp) {
  std::vector<json> entries;
  for (int worker = 0; worker < 4; ++worker) {
    for (int i = 0; i < 5; ++i) {
      entries.push_back(gke_entry("p", worker % 2 ? "job-b" : "job-a", worker,
                                  kT0 + (i * 4 + worker) * kSecond,
                                  fmt::format("w{} i{}", worker, i)));
    }
  }
  server_.write_log_entries(entries);
  const std::string filter = R"(resource.type="k8s_container"
      AND labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="job-b"
      AND labels."k8s-pod/batch_kubernetes_io/job-completion-index"="3"
      AND timestamp>="2024-05-01T00:00:08Z" AND timestamp<"2024-05-01T00:00:16Z")";
  EXPECT_EQ(texts(list({{"filter", filter}})), (std::vector<std::string>{"w3 i2", "w3 i3"}));
}

TEST_F(LoggingApi, PagesResumeWhereTheyStoppedInsteadOfRescanning) {
  server_.write_log_entries(numbered(5000));
  const std::uint64_t before = server_.log_entries_examined();
  json req = {{"pageSize", 100}};
  for (int page = 0; page < 3; ++page) {
    const HttpResult r = list(req);
    ASSERT_EQ(r.body["entries"].size(), 100u);
    EXPECT_EQ(r.body["entries"][0]["textPayload"], fmt::format("line {}", page * 100));
    req["pageToken"] = r.body["nextPageToken"];
  }
  // Each page examines its 100 entries plus one look-ahead entry.
  EXPECT_LE(server_.log_entries_examined() - before, 3u * 101u);
}

TEST_F(LoggingApi, BulkTextEntriesMatchOrdinaryWrites) {
  json slow = gke_entry("p", "w", 1, kT0, "same line");
  server_.write_log_entries({slow});
  json shared = slow;
  shared.erase("timestamp");
  shared.erase("textPayload");
  server_.write_text_entries(shared, {LogLine{kT0 + kSecond, "same line"}});
  const HttpResult r = list({});
  ASSERT_EQ(r.body["entries"].size(), 2u);
  json a = r.body["entries"][0], b = r.body["entries"][1];
  EXPECT_NE(a["insertId"], b["insertId"]);
  for (json* e : {&a, &b}) {
    e->erase("insertId");
    e->erase("timestamp");
    e->erase("receiveTimestamp");
  }
  EXPECT_EQ(a, b);
  EXPECT_EQ(r.body["entries"][1]["timestamp"], "2024-05-01T00:00:01Z");
  json bad = shared;
  bad.erase("logName");
  EXPECT_THROW(server_.write_text_entries(bad, {LogLine{kT0, "x"}}), ApiError);
  EXPECT_THROW(server_.write_text_entries(slow, {LogLine{kT0, "x"}}), ApiError);
  EXPECT_EQ(server_.log_entry_count(), 2u);
}

class ScanBudget : public ServerTest {
 protected:
  ScanBudget() : ServerTest(options()) {}
  static GcpServerOptions options() {
    GcpServerOptions o;
    o.list_scan_budget = 10;
    return o;
  }
};

TEST_F(ScanBudget, EmptyPagesCarryATokenUntilTheSearchIsDone) {
  auto entries = numbered(35);
  entries.back()["textPayload"] = "needle";
  server_.write_log_entries(entries);
  json req = {{"filter", "textPayload:needle"}};
  int empty_pages = 0;
  std::vector<std::string> found;
  for (;;) {
    const HttpResult r = list(req);
    ASSERT_EQ(r.status, 200);
    if (!r.body.contains("entries")) ++empty_pages;
    for (auto& t : texts(r)) found.push_back(t);
    if (!r.body.contains("nextPageToken")) break;
    req["pageToken"] = r.body["nextPageToken"];
  }
  EXPECT_EQ(found, std::vector<std::string>{"needle"});
  EXPECT_EQ(empty_pages, 3);  // 35 entries, 10 per call: three calls find nothing
}

TEST(LoggingPersistence, EntriesAndObjectsSurviveARestart) {
  falcon::testing::TempDir dir;
  GcpServerOptions options;
  options.data_dir = dir.path().string();
  {
    GcpServer server(options);
    server.write_log_entries(numbered(3));
    server.start();
    httplib::Client c("127.0.0.1", server.port());
    const httplib::Headers auth{{"Authorization", "Bearer " + server.valid_token()}};
    auto r = c.Post("/upload/storage/v1/b/keep/o?uploadType=media&name=a%2Fb.txt", auth, "kept",
                    "text/plain");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
  }
  GcpServer again(options);
  again.start();
  EXPECT_EQ(again.log_entry_count(), 3u);
  EXPECT_EQ(again.object_count(), 1u);
  httplib::Client c("127.0.0.1", again.port());
  const httplib::Headers auth{{"Authorization", "Bearer " + again.valid_token()}};
  auto r = c.Get("/storage/v1/b/keep/o/a%2Fb.txt?alt=media", auth);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "kept");
  auto l =
      c.Post("/v2/entries:list", auth, R"({"resourceNames":["projects/p"]})", "application/json");
  ASSERT_TRUE(l);
  EXPECT_EQ(json::parse(l->body)["entries"].size(), 3u);
}

}  // namespace
}  // namespace falcon::fake::testing
