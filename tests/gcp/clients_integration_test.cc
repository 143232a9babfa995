// The real clients (CurlHttpClient, credentials, LoggingClient, StorageClient) against the local
// GCP-protocol server on a loopback port, with injected faults.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "falcon/http_client.h"
#include "gcp/credentials.h"
#include "gcp/endpoints.h"
#include "gcp/epoch_fence.h"
#include "gcp/logging_client.h"
#include "gcp/storage_client.h"
#include "gcp_server/gcp_server.h"
#include "support/fake_clock.h"
#include "support/temp_dir.h"

namespace falcon::gcp {
namespace {

using nlohmann::json;
using std::chrono::seconds;
using testing::FakeClock;
using ::testing::HasSubstr;
using testing::TempDir;

// Passes requests to the real client and remembers each one's method and Content-Range.
class RecordingHttpClient final : public HttpClient {
 public:
  explicit RecordingHttpClient(std::shared_ptr<HttpClient> inner) : inner_(std::move(inner)) {}
  HttpResponse send(const HttpRequest& request) override {
    {
      std::lock_guard lock(mutex_);
      log_.push_back(request.method + " " + request.headers.get("Content-Range").value_or(""));
    }
    return inner_->send(request);
  }
  std::vector<std::string> log() const {
    std::lock_guard lock(mutex_);
    return log_;
  }

 private:
  std::shared_ptr<HttpClient> inner_;
  mutable std::mutex mutex_;
  std::vector<std::string> log_;
};

std::string pattern(std::size_t size, unsigned seed) {
  std::mt19937 rng(seed);
  std::string out(size, '\0');
  for (char& c : out) c = static_cast<char>('a' + rng() % 26);
  return out;
}

json gke_entry(int i, const std::string& workload) {
  char timestamp[40];
  std::snprintf(timestamp, sizeof(timestamp), "2026-04-13T08:%02d:%02d.%03dZ", i / 3600 % 60,
                i / 60 % 60, i % 1000);
  return {{"logName", "projects/proj/logs/stdout"},
          {"resource",
           {{"type", "k8s_container"},
            {"labels",
             {{"project_id", "proj"},
              {"location", "us-central2"},
              {"cluster_name", "c1"},
              {"namespace_name", "default"},
              {"pod_name", workload + "-slice-job-0-0-abcde"},
              {"container_name", "main"}}}}},
          {"labels",
           {{"k8s-pod/jobset_sigs_k8s_io/jobset-name", workload},
            {"k8s-pod/batch_kubernetes_io/job-completion-index", "0"}}},
          {"timestamp", std::string(timestamp)},
          {"insertId", "id-" + std::to_string(i)},
          {"textPayload", "line " + std::to_string(i)}};
}

struct IntegrationFixture : ::testing::Test {
  fake::GcpServer server{fake::GcpServerOptions{}};
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::shared_ptr<HttpClient> curl = make_curl_http_client();
  std::shared_ptr<RecordingHttpClient> http = std::make_shared<RecordingHttpClient>(curl);

  IntegrationFixture() { server.start(); }

  LoggingClient logging(std::shared_ptr<Credentials> credentials = nullptr) {
    LoggingClientOptions options;
    options.endpoint = server.base_url();
    options.http = http;
    options.credentials = credentials ? credentials : make_fixed_credentials(server.valid_token());
    options.clock = clock;
    options.rate_limiters = std::make_shared<ProjectRateLimiters>(clock);
    options.reads_per_minute = 100'000;
    return LoggingClient(options);
  }

  StorageClient storage(std::size_t chunk = kUploadQuantum) {
    StorageClientOptions options;
    options.endpoint = server.base_url();
    options.http = http;
    options.credentials = make_fixed_credentials(server.valid_token());
    options.clock = clock;
    options.upload_chunk_bytes = chunk;
    return StorageClient(options);
  }

  static ListLogEntriesRequest workload_request(const std::string& workload) {
    ListLogEntriesRequest request;
    request.resource_names = {"projects/proj"};
    request.filter = R"(resource.type="k8s_container" AND timestamp>="2026-04-13T00:00:00Z" AND )"
                     R"(labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"=")" +
                     workload + "\"";
    return request;
  }

  std::vector<std::string> read_all(LogEntryReader reader) {
    std::vector<std::string> lines;
    while (auto entry = reader.next()) lines.push_back(entry->message);
    return lines;
  }
};

// ---------------------------------------------------------------------------------------------
// Logging

TEST_F(IntegrationFixture, ReadsWhatWasWrittenPageByPageInBothOrders) {
  std::vector<json> entries;
  for (int i = 0; i < 25; ++i) entries.push_back(gke_entry(i, i % 5 == 0 ? "other" : "train"));
  server.write_log_entries(entries);
  ListLogEntriesRequest request = workload_request("train");
  request.page_size = 7;
  LogEntryReader reader = logging().list_entries(request);
  std::vector<std::string> lines;
  std::vector<LogEntry> kept;
  while (auto entry = reader.next()) {
    lines.push_back(entry->message);
    kept.push_back(*entry);
  }
  ASSERT_EQ(lines.size(), 20u);
  EXPECT_EQ(lines.front(), "line 1");
  EXPECT_EQ(lines.back(), "line 24");
  EXPECT_EQ(reader.pages_fetched(), 3);
  EXPECT_EQ(kept[0].labels.at("k8s-pod/batch_kubernetes_io/job-completion-index"), "0");
  EXPECT_EQ(kept[0].resource_labels.at("pod_name"), "train-slice-job-0-0-abcde");
  EXPECT_GT(kept[1].timestamp_nanos, kept[0].timestamp_nanos);

  request.newest_first = true;
  request.page_size = 3;
  LogEntryReader newest = logging().list_entries(request);
  EXPECT_EQ(newest.next()->message, "line 24");
  EXPECT_EQ(newest.next()->message, "line 23");
}

TEST_F(IntegrationFixture, QuotaErrorWithRetryInfoIsWaitedOutThenTheReadSucceeds) {
  server.write_log_entries({gke_entry(1, "train"), gke_entry(2, "train")});
  fake::Fault quota;
  quota.route = "logging.list";
  quota.status = 429;
  quota.retry_delay = "17s";
  server.faults().add(quota);
  EXPECT_EQ(read_all(logging().list_entries(workload_request("train"))),
            (std::vector<std::string>{"line 1", "line 2"}));
  EXPECT_EQ(clock->slept(), seconds(17));  // the server's RetryInfo, on the injected clock
  EXPECT_EQ(server.request_counts().at("logging.list"), 2);
}

TEST_F(IntegrationFixture, PagesThroughEmptyPagesTheServerReturnsNearItsDeadline) {
  fake::GcpServerOptions options;
  options.list_scan_budget = 10;  // each call examines at most 10 entries
  fake::GcpServer budgeted(options);
  budgeted.start();
  std::vector<json> entries;
  for (int i = 0; i < 50; ++i) entries.push_back(gke_entry(i, i == 45 ? "needle" : "hay"));
  budgeted.write_log_entries(entries);
  LoggingClientOptions client_options;
  client_options.endpoint = budgeted.base_url();
  client_options.http = curl;
  client_options.credentials = make_fixed_credentials(budgeted.valid_token());
  client_options.clock = clock;
  client_options.rate_limiters = std::make_shared<ProjectRateLimiters>(clock);
  LogEntryReader reader = LoggingClient(client_options).list_entries(workload_request("needle"));
  EXPECT_EQ(read_all(std::move(reader)), std::vector<std::string>{"line 45"});
  EXPECT_GE(budgeted.request_counts().at("logging.list"), 5);
}

TEST_F(IntegrationFixture, AMalformedFilterIsAnInvalidArgumentWithTheServersMessage) {
  ListLogEntriesRequest request = workload_request("train");
  request.filter = "labels.\"unterminated = ";
  try {
    logging().list_entries_page(request);
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.http_status(), 400);
    EXPECT_EQ(e.status(), "INVALID_ARGUMENT");
    EXPECT_THAT(e.what(), HasSubstr("entries:list for projects/proj failed: HTTP 400"));
  }
}

TEST_F(IntegrationFixture, AnUnknownTokenIsRefusedWithUnauthenticated) {
  try {
    logging(make_fixed_credentials("ya29.not-issued")).list_entries_page(workload_request("t"));
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.http_status(), 401);
    EXPECT_EQ(e.status(), "UNAUTHENTICATED");
    EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("not-issued")));
  }
  EXPECT_EQ(server.request_counts().at("logging.list"), 2);  // one refresh, one more try
}

// ---------------------------------------------------------------------------------------------
// Credentials from the server's token endpoints

TEST_F(IntegrationFixture, ServiceAccountKeyWhoseTokenUriIsTheServerGetsAWorkingToken) {
  TempDir dir;
  const auto key = dir.write(
      "sa.json", server.create_service_account_key("exporter@proj.iam.gserviceaccount.com"));
  EXPECT_EQ(json::parse(testing::read_file(key))["token_uri"], server.base_url() + "/token");
  server.write_log_entries({gke_entry(3, "train")});
  const Environment env{{"GOOGLE_APPLICATION_CREDENTIALS", key.string()},
                        {"HOME", dir.path().string()}};
  // The JWT's iat/exp must be the real time: the server checks them against its clock.
  auto credentials = make_default_credentials(GcpSettings{}, env, curl, make_system_clock());
  EXPECT_EQ(read_all(logging(credentials).list_entries(workload_request("train"))),
            std::vector<std::string>{"line 3"});
  EXPECT_EQ(server.request_counts().at("oauth.token"), 1);
  EXPECT_THAT(credentials->description(), HasSubstr("exporter@proj.iam.gserviceaccount.com"));
  // Cached: a second read does not ask for another token.
  logging(credentials).list_entries_page(workload_request("train"));
  EXPECT_EQ(server.request_counts().at("oauth.token"), 1);
}

TEST_F(IntegrationFixture, AuthorizedUserRefreshesAtTheConfiguredTokenEndpoint) {
  TempDir dir;
  dir.write("gcloud/application_default_credentials.json", server.create_authorized_user());
  const Environment env{{"CLOUDSDK_CONFIG", (dir.path() / "gcloud").string()},
                        {"FALCON_TOKEN_ENDPOINT", server.base_url() + "/token"}};
  auto credentials = make_default_credentials(GcpSettings{}, env, curl, clock);
  EXPECT_NO_THROW(logging(credentials).list_entries_page(workload_request("train")));
  EXPECT_EQ(server.request_counts().at("oauth.token"), 1);
}

TEST_F(IntegrationFixture, MetadataServerTokenViaGceMetadataHost) {
  TempDir home;
  const Environment env{{"HOME", home.path().string()},
                        {"GCE_METADATA_HOST", "127.0.0.1:" + std::to_string(server.port())}};
  auto credentials = make_default_credentials(GcpSettings{}, env, curl, clock);
  EXPECT_NO_THROW(logging(credentials).list_entries_page(workload_request("train")));
  EXPECT_EQ(server.request_counts().at("metadata.token"), 1);
}

// ---------------------------------------------------------------------------------------------
// Storage

TEST_F(IntegrationFixture, ResumableUploadRoundTripsByteForByte) {
  const std::string data = pattern(3 * kUploadQuantum + 12'345, 1);
  ResumableUploadWriter writer =
      storage().start_resumable_upload("bkt", "profiles/s1/logs/rank-0.log", "text/plain");
  for (std::size_t offset = 0; offset < data.size(); offset += 10'000) {
    writer.write(std::string_view(data).substr(offset, 10'000));
  }
  const ObjectMetadata object = writer.finish();
  EXPECT_EQ(object.size, static_cast<std::int64_t>(data.size()));
  EXPECT_EQ(object.name, "profiles/s1/logs/rank-0.log");
  EXPECT_TRUE(storage().download_object("bkt", "profiles/s1/logs/rank-0.log") == data);
  const ObjectMetadata meta = storage().get_object_metadata("bkt", "profiles/s1/logs/rank-0.log");
  EXPECT_EQ(meta.size, object.size);
  EXPECT_EQ(meta.content_type, "text/plain");
  EXPECT_EQ(meta.generation, object.generation);
}

TEST_F(IntegrationFixture, A503MidUploadIsRetriedAndTheObjectIsIntact) {
  const std::string data = pattern(4 * kUploadQuantum + 99, 2);
  ResumableUploadWriter writer = storage().start_resumable_upload("bkt", "x/rank-1.log");
  writer.write(std::string_view(data).substr(0, 2 * kUploadQuantum));
  server.faults().fail_next("storage.upload_chunk", 503);
  writer.write(std::string_view(data).substr(2 * kUploadQuantum));
  writer.finish();
  EXPECT_TRUE(storage().download_object("bkt", "x/rank-1.log") == data);
  const auto log = http->log();
  // ... the failed third chunk, a status query, the same chunk again ...
  EXPECT_NE(std::find(log.begin(), log.end(), "PUT bytes */*"), log.end());
  EXPECT_EQ(std::count(log.begin(), log.end(), "PUT bytes 524288-786431/*"), 2);
  EXPECT_GT(clock->slept(), std::chrono::nanoseconds(0));
}

TEST_F(IntegrationFixture, AConnectionCutMidChunkResumesAtTheCommittedOffset) {
  const std::size_t chunk = 4 * kUploadQuantum;  // 1 MiB
  const std::string data = pattern(2 * chunk + 777, 3);
  ResumableUploadWriter writer = storage(chunk).start_resumable_upload("bkt", "cut/rank-0.log");
  writer.write(std::string_view(data).substr(0, chunk));  // chunk 1 goes through
  // Chunk 2: the server reads 600 KiB, persists its two whole quanta (512 KiB), hangs up.
  // libcurl itself resends a request once when a reused connection dies before any byte of the
  // response, so the cut is armed twice for the failure to reach the writer.
  server.faults().cut_next("storage.upload_chunk", 600 * 1024, /*times=*/2);
  writer.write(std::string_view(data).substr(chunk));
  EXPECT_EQ(writer.committed_bytes(), static_cast<std::int64_t>(chunk + 2 * kUploadQuantum));
  writer.finish();
  EXPECT_TRUE(storage().download_object("bkt", "cut/rank-0.log") == data);  // byte-identical
  const auto log = http->log();
  const std::vector<std::string> expected_tail = {
      "PUT bytes 1048576-2097151/*",        // cut after 600 KiB
      "PUT bytes */*",                      // where are we? 0-1572863
      "PUT bytes 1572864-2097928/2097929",  // from the committed offset, with the rest
  };
  ASSERT_GE(log.size(), expected_tail.size());
  EXPECT_EQ(std::vector<std::string>(log.end() - 4, log.end() - 1), expected_tail);
  EXPECT_EQ(log.back(), "GET ");                                     // the download
  EXPECT_EQ(server.request_counts().at("storage.upload_chunk"), 5);  // 4 + libcurl's resend
}

TEST_F(IntegrationFixture, AnEmptyObjectAndAnAbortedUpload) {
  ResumableUploadWriter empty = storage().start_resumable_upload("bkt", "empty.log");
  EXPECT_EQ(empty.finish().size, 0);
  EXPECT_EQ(storage().get_object_metadata("bkt", "empty.log").size, 0);

  ResumableUploadWriter aborted = storage().start_resumable_upload("bkt", "aborted.log");
  aborted.write(pattern(kUploadQuantum, 4));
  aborted.abort();
  EXPECT_EQ(server.request_counts().at("storage.upload_cancel"), 1);
  try {
    storage().get_object_metadata("bkt", "aborted.log");
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.http_status(), 404);
  }
}

TEST_F(IntegrationFixture, SimpleUploadStreamedDownloadAndListByPrefix) {
  StorageClient client = storage();
  client.upload_object("bkt", "run/collection_meta.json", R"({"ranks":[0,1]})", "application/json");
  const std::string big = pattern(1'000'003, 5);
  client.upload_object("bkt", "run/rank-0.log", big, "text/plain");
  client.upload_object("bkt", "other/rank-0.log", "x", "text/plain");
  std::string streamed;
  int pieces = 0;
  client.download_object(
      "bkt", "run/rank-0.log",
      [&](std::string_view piece) {
        streamed.append(piece);
        ++pieces;
      },
      300'000);
  EXPECT_TRUE(streamed == big);
  EXPECT_EQ(pieces, 4);  // ranged reads: 3 x 300,000 + 100,003
  std::vector<std::string> names;
  for (const auto& o : client.list_objects("bkt", "run/")) names.push_back(o.name);
  EXPECT_EQ(names, (std::vector<std::string>{"run/collection_meta.json", "run/rank-0.log"}));
}

// ---------------------------------------------------------------------------------------------
// Storage fencing: the epoch object

TEST_F(IntegrationFixture, AFenceStartsAtOneAndOnlyGoesUp) {
  StorageClient client = storage();
  const std::string uri = "gs://fence-bkt/falcon/train/epoch";
  EXPECT_EQ(read_epoch(client, uri), 0);  // none yet
  EXPECT_EQ(advance_epoch(client, uri), 1);
  EXPECT_EQ(advance_epoch(client, uri), 2);
  EXPECT_EQ(read_epoch(client, uri), 2);
  EXPECT_EQ(client.download_object("fence-bkt", "falcon/train/epoch"), "2\n");
  // Another workload's fence is its own.
  EXPECT_EQ(advance_epoch(client, "gs://fence-bkt/falcon/eval/epoch"), 1);
  EXPECT_EQ(read_epoch(client, uri), 2);
}

TEST_F(IntegrationFixture, AConditionalWriteOverANewerGenerationIsRefusedWith412) {
  StorageClient client = storage();
  const ObjectMetadata first = client.upload_object("fence-bkt", "e", "1\n", "text/plain", 0);
  // The object exists now: "must not exist" fails, and so does a stale generation.
  try {
    client.upload_object("fence-bkt", "e", "1\n", "text/plain", 0);
    FAIL() << "expected 412";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.http_status(), 412);
  }
  const std::int64_t generation = std::stoll(first.generation);
  client.upload_object("fence-bkt", "e", "2\n", "text/plain", generation);
  EXPECT_THROW(client.upload_object("fence-bkt", "e", "3\n", "text/plain", generation),
               LogRetrievalError);
  EXPECT_EQ(read_epoch(client, "gs://fence-bkt/e"), 2);
}

// Two supervisors (a leader and a deposed one) advancing at once: every epoch is written once,
// none is handed out twice.
TEST_F(IntegrationFixture, ConcurrentAdvancesNeverHandOutOneEpochTwice) {
  const std::string uri = "gs://fence-bkt/race/epoch";
  std::vector<std::int64_t> got[2];
  std::string failure[2];
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      StorageClient client = storage();
      try {
        for (int i = 0; i < 10; ++i) got[t].push_back(advance_epoch(client, uri));
      } catch (const std::exception& e) {
        failure[t] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failure[0], "");
  EXPECT_EQ(failure[1], "");
  std::set<std::int64_t> all(got[0].begin(), got[0].end());
  all.insert(got[1].begin(), got[1].end());
  EXPECT_EQ(all.size(), 20U);
  EXPECT_EQ(read_epoch(storage(), uri), *all.rbegin());
}

TEST_F(IntegrationFixture, AFenceObjectThatHoldsNoEpochIsAnErrorNamingIt) {
  StorageClient client = storage();
  client.upload_object("fence-bkt", "bad/epoch", "not a number", "text/plain");
  try {
    read_epoch(client, "gs://fence-bkt/bad/epoch");
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_THAT(e.what(), HasSubstr("gs://fence-bkt/bad/epoch does not hold an epoch"));
  }
  EXPECT_THROW(read_epoch(client, "gs://fence-bkt/"), std::invalid_argument);
}

}  // namespace
}  // namespace falcon::gcp
