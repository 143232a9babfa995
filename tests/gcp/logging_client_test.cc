// LoggingClient: entries:list on the wire, lazy paging, errors, and the per-project rate limiter
// (DESIGN D5, gcp.md section 1).
#include "gcp/logging_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <thread>

#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "gcp/logging_admin_client.h"
#include "support/fake_clock.h"
#include "support/fake_http_client.h"

namespace falcon::gcp {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using testing::FakeClock;
using testing::FakeHttpClient;
using ::testing::HasSubstr;
using testing::json_response;

constexpr const char* kListUrl = "https://logging.test/v2/entries:list";

struct LoggingFixture : ::testing::Test {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::shared_ptr<FakeHttpClient> http = std::make_shared<FakeHttpClient>();
  std::shared_ptr<ProjectRateLimiters> limiters = std::make_shared<ProjectRateLimiters>(clock);

  LoggingClient client(int reads_per_minute = 6000,
                       RetryPolicy retry = RetryPolicy::for_logging()) {
    LoggingClientOptions options;
    options.endpoint = "https://logging.test/";
    options.http = http;
    options.credentials = make_fixed_credentials("test-token");
    options.clock = clock;
    options.rate_limiters = limiters;
    options.reads_per_minute = reads_per_minute;
    options.retry = retry;
    options.seed = 1;
    return LoggingClient(options);
  }

  // Serves the given bodies in order, one per entries:list call.
  void serve_pages(std::vector<std::string> bodies) {
    for (auto& body : bodies) http->enqueue("POST", kListUrl, json_response(200, std::move(body)));
  }

  static ListLogEntriesRequest request() {
    ListLogEntriesRequest r;
    r.resource_names = {"projects/p"};
    r.filter = R"(timestamp>="2026-04-13T00:00:00Z")";
    return r;
  }

  static std::string entry(const std::string& id, const std::string& text) {
    return json{{"insertId", id}, {"timestamp", "2026-04-13T08:00:00.5Z"}, {"textPayload", text}}
        .dump();
  }
};

TEST_F(LoggingFixture, SendsEntriesListExactlyAsTheApiDefines) {
  serve_pages({"{}"});
  client().list_entries_page(request());
  const auto requests = http->requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].url, kListUrl);
  EXPECT_EQ(requests[0].headers.get("Content-Type"), "application/json");
  EXPECT_EQ(requests[0].headers.get("Authorization"), "Bearer test-token");
  EXPECT_EQ(json::parse(requests[0].body), (json{{"resourceNames", {"projects/p"}},
                                                 {"filter", R"(timestamp>="2026-04-13T00:00:00Z")"},
                                                 {"orderBy", "timestamp asc"},
                                                 {"pageSize", 1000}}));
}

TEST_F(LoggingFixture, SendsNewestFirstOrderAndThePageToken) {
  serve_pages({"{}"});
  ListLogEntriesRequest r = request();
  r.newest_first = true;
  r.page_size = 10;
  r.page_token = "tok-1";
  r.filter.clear();
  client().list_entries_page(r);
  EXPECT_EQ(json::parse(http->requests().at(0).body), (json{{"resourceNames", {"projects/p"}},
                                                            {"orderBy", "timestamp desc"},
                                                            {"pageSize", 10},
                                                            {"pageToken", "tok-1"}}));
}

TEST_F(LoggingFixture, RejectsRequestsTheApiWouldRefuse) {
  ListLogEntriesRequest r = request();
  r.page_size = 1001;
  EXPECT_THROW(client().list_entries_page(r), std::invalid_argument);
  r.page_size = 0;
  EXPECT_THROW(client().list_entries_page(r), std::invalid_argument);
  r = request();
  r.resource_names.clear();
  EXPECT_THROW(client().list_entries_page(r), std::invalid_argument);
  EXPECT_EQ(http->count("*"), 0u);
}

TEST_F(LoggingFixture, ParsesEveryFieldTheLogRetrieverNeeds) {
  serve_pages({R"({"entries": [
    {"logName": "projects/p/logs/stdout", "insertId": "a1",
     "timestamp": "2026-04-13T08:00:00.064010148Z", "receiveTimestamp": "2026-04-13T08:00:04Z",
     "severity": "INFO", "textPayload": "step 1 loss=0.5",
     "resource": {"type": "k8s_container", "labels": {"pod_name": "w-slice-job-0-0-abcde",
                                                      "cluster_name": "c"}},
     "labels": {"k8s-pod/jobset_sigs_k8s_io/jobset-name": "w",
                "k8s-pod/batch_kubernetes_io/job-completion-index": "0"}},
    {"insertId": "a2", "timestamp": "2026-04-13T08:00:01Z",
     "jsonPayload": {"message": "structured line", "step": 2}},
    {"insertId": "a3", "timestamp": "2026-04-13T08:00:02Z", "jsonPayload": {"step": 3}},
    {"insertId": "a4", "timestamp": "2026-04-13T08:00:03Z",
     "protoPayload": {"@type": "type.googleapis.com/x.Y", "v": 1}}
  ]})"});
  const LogEntriesPage page = client().list_entries_page(request());
  ASSERT_EQ(page.entries.size(), 4u);
  EXPECT_TRUE(page.next_page_token.empty());
  const LogEntry& e = page.entries[0];
  EXPECT_EQ(e.log_name, "projects/p/logs/stdout");
  EXPECT_EQ(e.insert_id, "a1");
  EXPECT_EQ(e.timestamp, "2026-04-13T08:00:00.064010148Z");
  EXPECT_EQ(e.timestamp_nanos, 1776067200064010148LL);
  EXPECT_EQ(e.receive_timestamp, "2026-04-13T08:00:04Z");
  EXPECT_EQ(e.severity, "INFO");
  EXPECT_EQ(e.text_payload, "step 1 loss=0.5");
  EXPECT_EQ(e.message, "step 1 loss=0.5");
  EXPECT_EQ(e.resource_type, "k8s_container");
  EXPECT_EQ(e.resource_labels.at("pod_name"), "w-slice-job-0-0-abcde");
  EXPECT_EQ(e.labels.at("k8s-pod/jobset_sigs_k8s_io/jobset-name"), "w");
  EXPECT_EQ(e.labels.at("k8s-pod/batch_kubernetes_io/job-completion-index"), "0");
  EXPECT_EQ(page.entries[1].message, "structured line");
  EXPECT_EQ(json::parse(page.entries[1].json_payload),
            (json{{"message", "structured line"}, {"step", 2}}));
  EXPECT_EQ(page.entries[2].message, R"({"step":3})");
  EXPECT_EQ(json::parse(page.entries[3].message),
            (json{{"@type", "type.googleapis.com/x.Y"}, {"v", 1}}));
  EXPECT_EQ(page.entries[3].severity, "");  // DEFAULT is left out of the JSON
}

TEST_F(LoggingFixture, MissingEntriesIsAnEmptyPage) {
  serve_pages({R"({"nextPageToken": "more"})", "{}"});
  LogEntriesPage page = client().list_entries_page(request());
  EXPECT_TRUE(page.entries.empty());
  EXPECT_EQ(page.next_page_token, "more");
  page = client().list_entries_page(request());
  EXPECT_TRUE(page.entries.empty());
  EXPECT_TRUE(page.next_page_token.empty());
}

TEST_F(LoggingFixture, KeepsPagingThroughEmptyPagesWhileATokenComesBack) {
  serve_pages(
      {"{\"entries\":[" + entry("1", "a") + "," + entry("2", "b") + "],\"nextPageToken\":\"t1\"}",
       R"({"entries":[],"nextPageToken":"t2"})", R"({"nextPageToken":"t3"})",
       "{\"entries\":[" + entry("3", "c") + "]}"});
  LogEntryReader reader = client().list_entries(request());
  std::vector<std::string> lines;
  while (auto e = reader.next()) lines.push_back(e->message);
  EXPECT_EQ(lines, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(reader.pages_fetched(), 4);
  const auto requests = http->requests();
  ASSERT_EQ(requests.size(), 4u);
  EXPECT_FALSE(json::parse(requests[0].body).contains("pageToken"));
  EXPECT_EQ(json::parse(requests[1].body)["pageToken"], "t1");
  EXPECT_EQ(json::parse(requests[2].body)["pageToken"], "t2");
  EXPECT_EQ(json::parse(requests[3].body)["pageToken"], "t3");
  EXPECT_FALSE(reader.next());  // stays at the end, no more requests
  EXPECT_EQ(http->count("*"), 4u);
}

// A server that hands back a page token it gave before would be paged forever: the reader
// stops with an error naming the call instead of asking again.
TEST_F(LoggingFixture, AServerWhosePagesDoNotAdvanceIsAnError) {
  serve_pages({"{\"entries\":[" + entry("1", "a") + "],\"nextPageToken\":\"t1\"}",
               "{\"entries\":[" + entry("2", "b") + "],\"nextPageToken\":\"t2\"}",
               "{\"entries\":[" + entry("3", "c") + "],\"nextPageToken\":\"t1\"}"});
  LogEntryReader reader = client().list_entries(request());
  std::vector<std::string> lines;
  try {
    while (auto e = reader.next()) lines.push_back(e->message);
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_THAT(e.what(), HasSubstr("entries:list for projects/p does not advance: page 3 gave a "
                                    "nextPageToken it gave before"));
  }
  EXPECT_EQ(lines, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(http->count("*"), 3u);
}

TEST_F(LoggingFixture, FetchesAPageOnlyWhenTheCallerNeedsIt) {
  serve_pages(
      {"{\"entries\":[" + entry("1", "a") + "," + entry("2", "b") + "],\"nextPageToken\":\"t1\"}",
       "{\"entries\":[" + entry("3", "c") + "],\"nextPageToken\":\"t2\"}"});
  LogEntryReader reader = client().list_entries(request());
  EXPECT_EQ(http->count("*"), 0u);
  ASSERT_TRUE(reader.next());
  EXPECT_EQ(http->count("*"), 1u);
  ASSERT_TRUE(reader.next());
  EXPECT_EQ(http->count("*"), 1u);
  EXPECT_EQ(reader.next_page_token(), "t1");
  ASSERT_TRUE(reader.next());
  EXPECT_EQ(http->count("*"), 2u);
  // The caller stops here: page t2 is never asked for.
}

TEST_F(LoggingFixture, ApiFailureIsALogRetrievalErrorWithTheOriginalStatus) {
  http->on("POST", kListUrl, [](const HttpRequest&) {
    return json_response(400, R"({"error":{"code":400,"status":"INVALID_ARGUMENT",
      "message":"Unparseable filter: syntax error at line 1, column 5"}})");
  });
  LogEntryReader reader = client().list_entries(request());
  try {
    reader.next();
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.http_status(), 400);
    EXPECT_EQ(e.status(), "INVALID_ARGUMENT");
    EXPECT_THAT(e.what(), HasSubstr("entries:list for projects/p failed: HTTP 400 "
                                    "INVALID_ARGUMENT: Unparseable filter"));
  }
  EXPECT_EQ(http->count("*"), 1u);
}

TEST_F(LoggingFixture, ReaderRetriesTheSamePageAfterAFailure) {
  serve_pages({"{\"entries\":[" + entry("1", "a") + "],\"nextPageToken\":\"t1\"}"});
  http->enqueue("POST", kListUrl, json_response(403, R"({"error":{"code":403}})"));
  serve_pages({"{\"entries\":[" + entry("2", "b") + "]}"});
  LogEntryReader reader = client().list_entries(request());
  EXPECT_EQ(reader.next()->message, "a");
  EXPECT_THROW(reader.next(), LogRetrievalError);
  EXPECT_EQ(reader.next()->message, "b");
  EXPECT_EQ(json::parse(http->requests().at(2).body)["pageToken"], "t1");
}

TEST_F(LoggingFixture, QuotaErrorBacksOffForTensOfSecondsThenContinues) {
  http->enqueue("POST", kListUrl, json_response(429, R"({"error":{"code":429,
    "status":"RESOURCE_EXHAUSTED","message":"Quota exceeded",
    "details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"42s"}]}})"));
  serve_pages({"{\"entries\":[" + entry("1", "a") + "]}"});
  LogEntryReader reader = client().list_entries(request());
  EXPECT_EQ(reader.next()->message, "a");
  EXPECT_EQ(clock->slept(), seconds(42));
}

TEST_F(LoggingFixture, MalformedResponseIsALogRetrievalError) {
  serve_pages({"<html>oops</html>"});
  EXPECT_THROW(client().list_entries_page(request()), LogRetrievalError);
  serve_pages({R"({"entries": {"not": "a list"}})"});
  EXPECT_THROW(client().list_entries_page(request()), LogRetrievalError);
  serve_pages({R"({"entries": [{"textPayload": "ok"}, "not an entry"]})"});
  EXPECT_THROW(client().list_entries_page(request()), LogRetrievalError);
  serve_pages({R"({"entries": [{"textPayload": "ok"}, {"textPayload": "too"}], "nextPageToken")"});
  EXPECT_THROW(client().list_entries_page(request()), LogRetrievalError);  // cut short
}

// Entries are decoded while the page is parsed; objects nested in an entry, and top-level keys
// after the entries, are read as before.
TEST(ParseLogEntriesPage, DecodesEntriesInOrderWithNestedObjectsAndTheTokenAfterThem) {
  const auto page = gcp::parse_log_entries_page(
      R"({"entries": [{"jsonPayload": {"message": "first", "nested": {"a": [{"b": 1}]}},
                       "resource": {"type": "k8s_container", "labels": {"pod_name": "p-0"}}},
                      {"textPayload": "second", "labels": {"k": "v"}}],
          "nextPageToken": "t2", "extra": {"entries": [{"textPayload": "not an entry"}]}})",
      "test");
  ASSERT_EQ(page.entries.size(), 2u);
  EXPECT_EQ(page.entries[0].message, "first");
  EXPECT_EQ(page.entries[0].resource_type, "k8s_container");
  EXPECT_EQ(page.entries[0].resource_labels.at("pod_name"), "p-0");
  EXPECT_EQ(page.entries[1].message, "second");
  EXPECT_EQ(page.entries[1].labels.at("k"), "v");
  EXPECT_EQ(page.next_page_token, "t2");
}

TEST(ProjectOfResource, ExtractsTheProjectId) {
  EXPECT_EQ(project_of_resource("projects/p-1"), "p-1");
  EXPECT_EQ(project_of_resource("projects/p-1/locations/global/buckets/b/views/v"), "p-1");
  EXPECT_EQ(project_of_resource("organizations/12"), "organizations/12");
}

// ---------------------------------------------------------------------------------------------
// The rate limiter

TEST(TokenBucket, AllowsABurstThenSpacesPermitsAtTheRefillRate) {
  auto clock = std::make_shared<FakeClock>();
  TokenBucket bucket(/*refill_per_minute=*/60, /*burst=*/3, clock);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bucket.acquire(), nanoseconds(0));
  EXPECT_EQ(bucket.acquire(), seconds(1));
  EXPECT_EQ(bucket.acquire(), seconds(1));
  clock->advance(seconds(10));  // idle: refills up to the burst, no further
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bucket.acquire(), nanoseconds(0));
  EXPECT_EQ(bucket.acquire(), seconds(1));
}

TEST(ProjectRateLimiters, NeverAllowsMoreThanTheQuotaInAnyMinute) {
  auto clock = std::make_shared<FakeClock>();
  ProjectRateLimiters limiters(clock);
  auto bucket = limiters.for_project("p", 60);
  std::vector<std::chrono::steady_clock::time_point> times;
  for (int i = 0; i < 300; ++i) {
    bucket->acquire();
    times.push_back(clock->steady_now());
  }
  std::size_t most = 0;
  for (std::size_t i = 0; i < times.size(); ++i) {
    const auto end = std::lower_bound(times.begin(), times.end(), times[i] + seconds(60));
    most = std::max(most, static_cast<std::size_t>(end - (times.begin() + i)));
  }
  EXPECT_LE(most, 60u);
  EXPECT_GE(most, 55u);  // and not needlessly slow
}

TEST(ProjectRateLimiters, OneLimiterPerProjectSharedByEveryCaller) {
  auto clock = std::make_shared<FakeClock>();
  ProjectRateLimiters limiters(clock);
  EXPECT_EQ(limiters.for_project("p", 60), limiters.for_project("p", 60));
  EXPECT_NE(limiters.for_project("p", 60), limiters.for_project("q", 60));
}

TEST_F(LoggingFixture, ClientsOfTheSameProjectShareOneLimiter) {
  http->on("POST", kListUrl, [](const HttpRequest&) { return json_response(200, "{}"); });
  LoggingClient a = client(/*reads_per_minute=*/60);
  LoggingClient b = client(/*reads_per_minute=*/60);
  for (int i = 0; i < 5; ++i) a.list_entries_page(request());  // the burst of 60/min is 5
  EXPECT_EQ(clock->slept(), nanoseconds(0));
  b.list_entries_page(request());  // another client, same project: must wait
  EXPECT_GT(clock->slept(), seconds(1));
  const auto slept = clock->slept();
  ListLogEntriesRequest other = request();
  other.resource_names = {"projects/other"};
  b.list_entries_page(other);  // another project has its own quota
  EXPECT_EQ(clock->slept(), slept);
}

TEST_F(LoggingFixture, EveryRetryTakesAPermitToo) {
  http->enqueue("POST", kListUrl, json_response(503, "{}"));
  http->enqueue("POST", kListUrl, json_response(503, "{}"));
  http->on("POST", kListUrl, [](const HttpRequest&) { return json_response(200, "{}"); });
  RetryPolicy no_wait = RetryPolicy::for_logging();
  no_wait.initial_backoff = milliseconds(0);
  client(/*reads_per_minute=*/60, no_wait).list_entries_page(request());
  EXPECT_EQ(clock->slept(), nanoseconds(0));
  // Three attempts drew three permits; two more remain in the burst of five.
  auto bucket = limiters->for_project("p", 60);
  const auto before = clock->slept();
  bucket->acquire();
  bucket->acquire();
  EXPECT_EQ(clock->slept(), before);
  bucket->acquire();
  EXPECT_GT(clock->slept(), before);
}

TEST_F(LoggingFixture, TheRateIsConfigurable) {
  http->on("POST", kListUrl, [](const HttpRequest&) { return json_response(200, "{}"); });
  LoggingClient fast = client(/*reads_per_minute=*/1200);  // burst 100
  for (int i = 0; i < 100; ++i) fast.list_entries_page(request());
  EXPECT_EQ(clock->slept(), nanoseconds(0));
}

TEST(TokenBucket, ManyThreadsGetAPermitEachInTurn) {
  auto clock = std::make_shared<FakeClock>();
  TokenBucket bucket(60, 1, clock);
  std::vector<std::thread> threads;
  std::atomic<std::int64_t> waited{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) waited += bucket.acquire().count();
    });
  }
  for (auto& thread : threads) thread.join();
  // 40 permits at one a second (burst 1) end at t >= 39 s; the fake clock moves only by the
  // threads' sleeps, so together they slept at least that long: nobody skipped the queue.
  EXPECT_GE(waited.load(), seconds(39).count());
}

// An Operation whose numbers no int holds, or whose flags are not booleans, reads as unknown
// instead of converting out of range (undefined behaviour) or throwing the JSON library's
// type_error. Found by the gcp_responses fuzzer.
TEST(CopyOperation, NumbersOutOfRangeAndMistypedFlagsReadAsUnknown) {
  const CopyOperation op = parse_copy_operation(
      R"({"name":"operations/c1","done":"yes","metadata":{"cancellationRequested":1,)"
      R"("progress":1e300},"error":{"code":2.2e64,"message":"m"},)"
      R"("response":{"logEntriesCopiedCount":1e30}})",
      "fuzz");
  EXPECT_FALSE(op.done);
  EXPECT_FALSE(op.cancellation_requested);
  EXPECT_EQ(op.progress, 100);
  EXPECT_EQ(op.error_code, 2);  // google.rpc UNKNOWN
  EXPECT_EQ(op.error_message, "m");
  EXPECT_EQ(op.entries_copied, -1);
  const CopyOperation ok =
      parse_copy_operation(R"({"name":"operations/c2","done":true,"error":{"code":1},)"
                           R"("response":{"logEntriesCopiedCount":"12345"}})",
                           "fuzz");
  EXPECT_TRUE(ok.done);
  EXPECT_EQ(ok.error_code, 1);
  EXPECT_EQ(ok.entries_copied, 12345);
}

}  // namespace
}  // namespace falcon::gcp
