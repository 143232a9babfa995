// StorageClient: the resumable upload state machine (gcp.md 2.2-2.5), simple uploads, metadata,
// download and list, against a scripted fake of a GCS upload session.
#include "gcp/storage_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <optional>
#include <random>

#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "support/fake_clock.h"
#include "support/fake_http_client.h"

namespace falcon::gcp {
namespace {

using nlohmann::json;
using testing::empty_response;
using testing::FakeClock;
using testing::FakeHttpClient;
using ::testing::HasSubstr;
using testing::json_response;

constexpr std::size_t kQuantum = kUploadQuantum;
constexpr const char* kSession =
    "https://storage.test/upload/storage/v1/b/bkt/o?uploadType=resumable&upload_id=U1";

std::string pattern(std::size_t size, unsigned seed = 1) {
  std::mt19937 rng(seed);
  std::string out(size, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

// A GCS resumable session as the reference describes it: overlapping bytes are ignored, a 308
// carries `Range: bytes=0-N` (none when nothing is persisted), `bytes */*` asks for status, and
// the upload completes when the total is known and reached. Faults are scripted per PUT.
class FakeGcsSession {
 public:
  struct Fault {
    int status = 503;                    // 0: cut the connection (transport error)
    std::optional<std::size_t> persist;  // bytes of the body kept before failing
  };

  explicit FakeGcsSession(FakeHttpClient& http) {
    http.on("PUT", "upload_id=U1", [this](const HttpRequest& r) { return on_put(r); });
    http.on("DELETE", "upload_id=U1", [this](const HttpRequest&) {
      ++deletes;
      return json_response(499, "");
    });
  }

  // The next data PUT (not a status query) fails.
  void fail_next_chunk(Fault fault) { faults.push_back(fault); }
  // The next data PUT keeps only `bytes` of its body and answers 308 (a partial commit).
  void commit_partially_next(std::size_t bytes) { partial.push_back(bytes); }
  // The next data PUT is answered 308 without Range, keeping nothing.
  void drop_next_chunk() { drops++; }

  std::string data;
  std::deque<Fault> faults;
  std::deque<std::size_t> partial;
  int drops = 0;
  int deletes = 0;
  bool finalized = false;
  std::vector<std::string> ranges;  // Content-Range of every PUT
  std::string final_size_override;

 private:
  HttpResponse progress() const {
    HttpHeaders headers;
    if (!data.empty()) headers.set("Range", "bytes=0-" + std::to_string(data.size() - 1));
    return empty_response(308, headers);
  }

  HttpResponse object() {
    finalized = true;
    json o = {
        {"kind", "storage#object"},
        {"bucket", "bkt"},
        {"name", "logs/rank-0.log"},
        {"size", final_size_override.empty() ? std::to_string(data.size()) : final_size_override},
        {"generation", "1712345678901234"},
        {"contentType", "text/plain"}};
    return json_response(200, o.dump());
  }

  HttpResponse on_put(const HttpRequest& request) {
    const std::string range = request.headers.get("Content-Range").value_or("");
    ranges.push_back(range);
    if (finalized) return object();
    EXPECT_TRUE(range.starts_with("bytes ")) << range;
    const std::string spec = range.substr(6);
    const auto slash = spec.find('/');
    const std::string span = spec.substr(0, slash);
    const std::string total = spec.substr(slash + 1);
    if (span == "*") {  // a status query, or `bytes */N` to finish
      EXPECT_TRUE(request.body.empty());
      if (total != "*" && std::stoul(total) == data.size()) return object();
      return progress();
    }
    const std::size_t first = std::stoul(span.substr(0, span.find('-')));
    const std::size_t last = std::stoul(span.substr(span.find('-') + 1));
    EXPECT_EQ(last - first + 1, request.body.size()) << range;
    EXPECT_LE(first, data.size()) << "a gap before " << range;
    if (total == "*") {
      EXPECT_EQ(request.body.size() % kQuantum, 0u) << "non-final chunk " << range;
    }
    if (drops > 0) {
      --drops;
      return empty_response(308);
    }
    std::size_t keep = request.body.size();
    std::optional<Fault> fault;
    if (!faults.empty()) {
      fault = faults.front();
      faults.pop_front();
      keep = fault->persist.value_or(0);
    } else if (!partial.empty()) {
      keep = partial.front();
      partial.pop_front();
    }
    // Overlapping bytes (already persisted) are ignored, as GCS does.
    const std::size_t skip = data.size() - first;
    if (keep > skip) data.append(request.body, skip, keep - skip);
    if (fault) {
      if (fault->status == 0) throw HttpTransportError("PUT: connection reset by peer", false);
      return json_response(
          fault->status,
          R"({"error":{"code":)" + std::to_string(fault->status) +
              R"(,"message":"Backend Error","errors":[{"reason":"backendError"}]}})");
    }
    if (total != "*" && std::stoul(total) == data.size()) return object();
    return progress();
  }
};

struct StorageFixture : ::testing::Test {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::shared_ptr<FakeHttpClient> http = std::make_shared<FakeHttpClient>();

  StorageFixture() {
    HttpHeaders headers;
    headers.set("location", kSession);  // lower case, as some servers send it
    http->on("POST", "uploadType=resumable", [headers](const HttpRequest&) {
      HttpResponse response = json_response(200, R"({"kind":"storage#object","name":"ignored"})");
      response.headers.add(headers.items[0].first, headers.items[0].second);
      return response;
    });
  }

  StorageClient client(std::size_t chunk = kQuantum) {
    StorageClientOptions options;
    options.endpoint = "https://storage.test/";
    options.http = http;
    options.credentials = make_fixed_credentials("test-token");
    options.clock = clock;
    options.upload_chunk_bytes = chunk;
    options.seed = 3;
    return StorageClient(options);
  }

  std::vector<HttpRequest> puts() const {
    std::vector<HttpRequest> out;
    for (auto& r : http->requests()) {
      if (r.method == "PUT") out.push_back(r);
    }
    return out;
  }
};

// Writes `data` in uneven pieces, checking the memory bound after each.
void write_in_pieces(ResumableUploadWriter& writer, const std::string& data, std::size_t limit) {
  std::size_t offset = 0;
  std::size_t piece = 1;
  while (offset < data.size()) {
    const std::size_t n = std::min(piece, data.size() - offset);
    writer.write(std::string_view(data).substr(offset, n));
    offset += n;
    piece = piece * 3 + 7;
    ASSERT_LE(writer.buffered_bytes(), limit);
  }
}

TEST_F(StorageFixture, StartsASessionAndReadsTheLocationHeaderCaseInsensitively) {
  FakeGcsSession session(*http);
  ResumableUploadWriter writer =
      client().start_resumable_upload("bkt", "logs/rank 0+1.log", "text/plain");
  const HttpRequest start = http->requests().at(0);
  EXPECT_EQ(start.method, "POST");
  EXPECT_EQ(start.url,
            "https://storage.test/upload/storage/v1/b/bkt/o?uploadType=resumable&name=logs%2Frank%"
            "200%2B1.log");
  EXPECT_EQ(start.headers.get("X-Upload-Content-Type"), "text/plain");
  EXPECT_EQ(start.headers.get("Authorization"), "Bearer test-token");
  writer.write("hello");
  writer.finish();
  EXPECT_EQ(puts().at(0).url, kSession);  // the session URI, verbatim
}

TEST_F(StorageFixture, MissingLocationHeaderIsAnError) {
  FakeHttpClient& h = *http;
  h.enqueue("POST", "uploadType=resumable", json_response(200, "{}"));
  try {
    client().start_resumable_upload("bkt", "o");
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_THAT(e.what(), HasSubstr("without a Location header"));
  }
}

TEST_F(StorageFixture, SendsWholeQuantumChunksThenAFinalChunkWithTheTotal) {
  FakeGcsSession session(*http);
  const std::string data = pattern(2 * kQuantum + 90'000);
  ResumableUploadWriter writer = client().start_resumable_upload("bkt", "logs/rank-0.log");
  write_in_pieces(writer, data, kQuantum);
  EXPECT_EQ(writer.committed_bytes(), static_cast<std::int64_t>(2 * kQuantum));
  const ObjectMetadata object = writer.finish();
  EXPECT_EQ(session.ranges, (std::vector<std::string>{"bytes 0-262143/*", "bytes 262144-524287/*",
                                                      "bytes 524288-614287/614288"}));
  EXPECT_EQ(session.data, data);
  EXPECT_EQ(object.size, static_cast<std::int64_t>(data.size()));
  EXPECT_EQ(object.generation, "1712345678901234");
  EXPECT_EQ(object.bucket, "bkt");
  EXPECT_EQ(puts().at(0).headers.get("Content-Type"), "application/octet-stream");
}

TEST_F(StorageFixture, AnObjectOfWholeChunksEndsWithAnEmptyFinalRequest) {
  FakeGcsSession session(*http);
  const std::string data = pattern(2 * kQuantum);
  ResumableUploadWriter writer = client().start_resumable_upload("bkt", "o");
  writer.write(data);
  writer.finish();
  EXPECT_EQ(session.ranges, (std::vector<std::string>{"bytes 0-262143/*", "bytes 262144-524287/*",
                                                      "bytes */524288"}));
  EXPECT_EQ(session.data, data);
}

TEST_F(StorageFixture, AnEmptyObjectIsOneRequestWithTotalZero) {
  FakeGcsSession session(*http);
  ResumableUploadWriter writer = client().start_resumable_upload("bkt", "o");
  EXPECT_EQ(writer.finish().size, 0);
  EXPECT_EQ(session.ranges, std::vector<std::string>{"bytes */0"});
}

TEST_F(StorageFixture, A308WithoutRangeMeansNothingPersistedAndIsAskedAbout) {
  FakeGcsSession session(*http);
  session.drop_next_chunk();
  const std::string data = pattern(kQuantum + 10);
  ResumableUploadWriter writer = client().start_resumable_upload("bkt", "o");
  writer.write(data);
  writer.finish();
  EXPECT_EQ(session.ranges,
            (std::vector<std::string>{"bytes 0-262143/*", "bytes */*", "bytes 0-262143/*",
                                      "bytes 262144-262153/262154"}));
  EXPECT_EQ(session.data, data);
}

TEST_F(StorageFixture, APartialCommitKeepsTheRestBufferedAndResendsFromTheCommittedOffset) {
  FakeGcsSession session(*http);
  session.commit_partially_next(kQuantum);  // of a two-quantum chunk
  const std::string data = pattern(4 * kQuantum + 5);
  ResumableUploadWriter writer = client(2 * kQuantum).start_resumable_upload("bkt", "o");
  write_in_pieces(writer, data, 2 * kQuantum);
  writer.finish();
  EXPECT_EQ(session.ranges, (std::vector<std::string>{"bytes 0-524287/*", "bytes 262144-786431/*",
                                                      "bytes 786432-1048580/1048581"}));
  EXPECT_EQ(session.data, data);
  EXPECT_EQ(clock->slept(), std::chrono::nanoseconds(0));  // progress is not a failure
}

TEST_F(StorageFixture, AFailedChunkIsFollowedByAStatusQueryAndResumedWhereTheServerIs) {
  FakeGcsSession session(*http);
  session.fail_next_chunk({.status = 503, .persist = std::nullopt});
  const std::string data = pattern(kQuantum + 100);
  ResumableUploadWriter writer = client().start_resumable_upload("bkt", "o");
  writer.write(data);
  writer.finish();
  EXPECT_EQ(session.ranges,
            (std::vector<std::string>{"bytes 0-262143/*", "bytes */*", "bytes 0-262143/*",
                                      "bytes 262144-262243/262244"}));
  EXPECT_EQ(session.data, data);
  EXPECT_GT(clock->slept(), std::chrono::nanoseconds(0));  // backed off before asking
}

TEST_F(StorageFixture, ACutMidChunkResumesAtTheCommittedOffsetNotWhereItStopped) {
  FakeGcsSession session(*http);
  // The connection drops after the server kept one quantum of a four-quantum chunk.
  session.fail_next_chunk({.status = 0, .persist = kQuantum});
  const std::string data = pattern(4 * kQuantum + 33);
  ResumableUploadWriter writer = client(4 * kQuantum).start_resumable_upload("bkt", "o");
  write_in_pieces(writer, data, 4 * kQuantum);
  writer.finish();
  // The uncommitted three quanta stay buffered and go out, with the last 33 bytes, from the
  // server's offset.
  EXPECT_EQ(session.ranges, (std::vector<std::string>{"bytes 0-1048575/*", "bytes */*",
                                                      "bytes 262144-1048608/1048609"}));
  EXPECT_EQ(session.data, data);  // byte-identical
}

TEST_F(StorageFixture, AFailedFinalChunkIsResumedToo) {
  FakeGcsSession session(*http);
  const std::string data = pattern(kQuantum + 1000);
  ResumableUploadWriter writer = client().start_resumable_upload("bkt", "o");
  writer.write(data);
  session.fail_next_chunk({.status = 500, .persist = 400});
  session.commit_partially_next(100);
  const ObjectMetadata object = writer.finish();
  EXPECT_EQ(session.ranges,
            (std::vector<std::string>{"bytes 0-262143/*", "bytes 262144-263143/263144", "bytes */*",
                                      "bytes 262544-263143/263144", "bytes 262644-263143/263144"}));
  EXPECT_EQ(session.data, data);
  EXPECT_EQ(object.size, static_cast<std::int64_t>(data.size()));
}

TEST_F(StorageFixture, AFinalAnswerLostOnTheWayIsFoundByTheStatusQuery) {
  FakeGcsSession session(*http);
  ResumableUploadWriter writer = client().start_resumable_upload("bkt", "o");
  writer.write("tail");
  // The server stores everything and completes, but the client sees a 503.
  http->enqueue_handler("PUT", "upload_id=U1", [&](const HttpRequest& request) {
    session.data += request.body;
    session.ranges.push_back(request.headers.get("Content-Range").value_or(""));
    session.finalized = true;
    return json_response(503, "{}");
  });
  EXPECT_EQ(writer.finish().size, 4);
  EXPECT_EQ(session.ranges, (std::vector<std::string>{"bytes 0-3/4", "bytes */*"}));
}

TEST_F(StorageFixture, AGoneSessionIsAClearErrorAndTheWriterIsClosed) {
  for (int status : {404, 410}) {
    SCOPED_TRACE(status);
    FakeHttpClient& h = *http;
    h.enqueue("PUT", "upload_id=U1",
              json_response(status, R"({"error":{"code":)" + std::to_string(status) +
                                        R"(,"message":"Not Found"}})"));
    ResumableUploadWriter writer = client().start_resumable_upload("bkt", "logs/rank-1.log");
    try {
      writer.write(pattern(kQuantum));
      FAIL() << "expected LogRetrievalError";
    } catch (const LogRetrievalError& e) {
      EXPECT_EQ(e.http_status(), status);
      EXPECT_THAT(e.what(), HasSubstr("gs://bkt/logs/rank-1.log"));
      EXPECT_THAT(e.what(), HasSubstr("the session is gone"));
      EXPECT_THAT(e.what(), Not(HasSubstr("upload_id")));
    }
    EXPECT_EQ(writer.buffered_bytes(), 0u);
    EXPECT_THROW(writer.write("more"), std::logic_error);
    EXPECT_THROW(writer.finish(), std::logic_error);
  }
}

TEST_F(StorageFixture, PersistentFailureGivesUpWithTheLastStatus) {
  http->on("PUT", "upload_id=U1", [](const HttpRequest&) {
    return json_response(503, R"({"error":{"code":503,"message":"Backend Error",
      "errors":[{"reason":"backendError","message":"Backend Error"}]}})");
  });
  ResumableUploadWriter writer = client().start_resumable_upload("bkt", "o");
  try {
    writer.write(pattern(kQuantum));
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.http_status(), 503);
    EXPECT_EQ(e.status(), "UNAVAILABLE");
    EXPECT_THAT(e.what(), HasSubstr("Backend Error"));
    EXPECT_THAT(e.what(), HasSubstr("gave up after 8 attempts"));
  }
}

TEST_F(StorageFixture, ACommittedOffsetOutsideWhatTheWriterHoldsIsAnError) {
  FakeGcsSession session(*http);
  ResumableUploadWriter writer = client().start_resumable_upload("bkt", "o");
  HttpHeaders headers;
  headers.set("Range", "bytes=0-999999");  // more than was ever sent
  http->enqueue("PUT", "upload_id=U1", empty_response(308, headers));
  try {
    writer.write(pattern(kQuantum));
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_THAT(e.what(), HasSubstr("reports 1000000 bytes committed"));
  }
}

TEST_F(StorageFixture, AStoredSizeThatDiffersFromWhatWasWrittenIsAnError) {
  FakeGcsSession session(*http);
  session.final_size_override = "3";
  ResumableUploadWriter writer = client().start_resumable_upload("bkt", "o");
  writer.write("four");
  EXPECT_THROW(writer.finish(), LogRetrievalError);
}

TEST_F(StorageFixture, MemoryStaysWithinOneChunkWhateverTheObjectSize) {
  FakeGcsSession session(*http);
  ResumableUploadWriter writer = client().start_resumable_upload("bkt", "o");
  const std::string block = pattern(100'000);
  std::size_t total = 0;
  for (int i = 0; i < 200; ++i) {  // 20 MB through a 256 KiB buffer
    writer.write(block);
    total += block.size();
    ASSERT_LE(writer.buffered_bytes(), kQuantum);
  }
  writer.finish();
  EXPECT_EQ(session.data.size(), total);
  for (const auto& put : puts()) EXPECT_LE(put.body.size(), kQuantum);
}

// Issue 12: one client, the chunk size chosen per upload (an export sizes each rank's chunk).
TEST_F(StorageFixture, EachUploadMayHaveItsOwnChunkSize) {
  FakeGcsSession session(*http);
  const StorageClient storage = client(4 * kQuantum);
  ResumableUploadWriter writer =
      storage.start_resumable_upload("bkt", "o", "text/plain", 2 * kQuantum);
  EXPECT_EQ(writer.chunk_bytes(), 2 * kQuantum);
  const std::string data = pattern(5 * kQuantum + 1'000);
  for (std::size_t at = 0; at < data.size(); at += 10'000) {
    writer.write(std::string_view(data).substr(at, 10'000));
    ASSERT_LE(writer.buffered_bytes(), 2 * kQuantum);
  }
  writer.finish();
  EXPECT_EQ(session.data, data);
  for (const auto& put : puts()) EXPECT_LE(put.body.size(), 2 * kQuantum);
  EXPECT_EQ(storage.start_resumable_upload("bkt", "o2").chunk_bytes(), 4 * kQuantum);
  EXPECT_THROW(storage.start_resumable_upload("bkt", "o3", "text/plain", 100'000),
               std::invalid_argument);
}

TEST_F(StorageFixture, AbortDeletesTheSessionAndTreats499AsSuccess) {
  FakeGcsSession session(*http);
  ResumableUploadWriter writer = client().start_resumable_upload("bkt", "o");
  writer.write("partial");
  writer.abort();
  EXPECT_EQ(session.deletes, 1);
  EXPECT_EQ(http->requests().back().url, kSession);
  EXPECT_THROW(writer.write("x"), std::logic_error);
  writer.abort();  // no-op
  EXPECT_EQ(session.deletes, 1);
}

TEST_F(StorageFixture, AbortRetriesATransientFailure) {
  http->enqueue("DELETE", "upload_id=U1", json_response(503, "{}"));
  FakeGcsSession session(*http);
  ResumableUploadWriter writer = client().start_resumable_upload("bkt", "o");
  writer.abort();
  EXPECT_EQ(session.deletes, 1);
  EXPECT_EQ(http->count("DELETE"), 2u);
}

TEST_F(StorageFixture, ChunkSizeMustBeAMultipleOf256KiB) {
  EXPECT_THROW(client(100'000), std::invalid_argument);
  EXPECT_THROW(client(0), std::invalid_argument);
  EXPECT_NO_THROW(client(32 * kQuantum));
}

// ---------------------------------------------------------------------------------------------
// The other calls

TEST_F(StorageFixture, SimpleUploadPostsTheMediaInOneRequest) {
  http->on("POST", "uploadType=media", [](const HttpRequest&) {
    return json_response(200, R"({"bucket":"bkt","name":"d/collection_meta.json","size":"2"})");
  });
  const ObjectMetadata object =
      client().upload_object("bkt", "d/collection_meta.json", "{}", "application/json");
  EXPECT_EQ(object.size, 2);
  const HttpRequest request = http->requests().back();
  EXPECT_EQ(request.url,
            "https://storage.test/upload/storage/v1/b/bkt/o?uploadType=media&name=d%2Fcollection_"
            "meta.json");
  EXPECT_EQ(request.headers.get("Content-Type"), "application/json");
  EXPECT_EQ(request.body, "{}");
}

TEST_F(StorageFixture, MetadataGetEncodesTheWholeNameAndReadsInt64Strings) {
  http->on("GET", "/storage/v1/b/bkt/o/", [](const HttpRequest&) {
    return json_response(200, R"({"bucket":"bkt","name":"logs/a b+c.log","size":"5000000000",
      "generation":"1712345678901234","md5Hash":"XrY7u+Ae7tCTyyK7j1rNww==","crc32c":"yZRlqg==",
      "contentType":"text/plain","timeCreated":"2026-04-13T08:00:00.000Z",
      "updated":"2026-04-13T08:00:01.000Z"})");
  });
  const ObjectMetadata object = client().get_object_metadata("bkt", "logs/a b+c.log");
  EXPECT_EQ(http->requests().back().url,
            "https://storage.test/storage/v1/b/bkt/o/logs%2Fa%20b%2Bc.log");
  EXPECT_EQ(object.size, 5'000'000'000LL);
  EXPECT_EQ(object.generation, "1712345678901234");
  EXPECT_EQ(object.md5_hash, "XrY7u+Ae7tCTyyK7j1rNww==");
  EXPECT_EQ(object.crc32c, "yZRlqg==");
  EXPECT_EQ(object.content_type, "text/plain");
  EXPECT_EQ(object.time_created, "2026-04-13T08:00:00.000Z");
}

TEST_F(StorageFixture, MissingObjectIsA404LogRetrievalError) {
  http->on("GET", "/storage/v1/b/bkt/o/", [](const HttpRequest&) {
    return json_response(404, R"({"error":{"code":404,"message":"No such object: bkt/x",
      "errors":[{"domain":"global","reason":"notFound","message":"No such object: bkt/x"}]}})");
  });
  try {
    client().get_object_metadata("bkt", "x");
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.http_status(), 404);
    EXPECT_EQ(e.status(), "NOT_FOUND");
    EXPECT_THAT(e.what(), HasSubstr("metadata get of gs://bkt/x failed: HTTP 404 NOT_FOUND"));
  }
}

TEST_F(StorageFixture, DeleteIsTrueFor204AndFalseForAnObjectThatIsNotThere) {
  http->enqueue("DELETE", "/storage/v1/b/bkt/o/", json_response(204, ""));
  EXPECT_TRUE(client().delete_object("bkt", "d/collection_meta.json"));
  EXPECT_EQ(http->requests().back().method, "DELETE");
  EXPECT_EQ(http->requests().back().url,
            "https://storage.test/storage/v1/b/bkt/o/d%2Fcollection_meta.json");

  // A retry after a first attempt whose answer was lost finds the object gone: still no error.
  http->enqueue("DELETE", "/storage/v1/b/bkt/o/", json_response(503, "{}"));
  http->enqueue("DELETE", "/storage/v1/b/bkt/o/",
                json_response(404, R"({"error":{"code":404,"message":"No such object: bkt/x"}})"));
  EXPECT_FALSE(client().delete_object("bkt", "x"));
  EXPECT_EQ(http->count("DELETE"), 3u);
}

TEST_F(StorageFixture, DeleteRefusedIsALogRetrievalErrorNamingTheObject) {
  http->enqueue(
      "DELETE", "/storage/v1/b/bkt/o/",
      json_response(403, R"({"error":{"code":403,"message":"no storage.objects.delete"}})"));
  try {
    client().delete_object("bkt", "x");
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.http_status(), 403);
    EXPECT_THAT(e.what(), HasSubstr("delete of gs://bkt/x"));
    EXPECT_THAT(e.what(), HasSubstr("no storage.objects.delete"));
  }
}

TEST_F(StorageFixture, DownloadsTheWholeObject) {
  http->on("GET", "?alt=media", [](const HttpRequest&) { return json_response(200, "bytes!"); });
  EXPECT_EQ(client().download_object("bkt", "a/b"), "bytes!");
  EXPECT_EQ(http->requests().back().url, "https://storage.test/storage/v1/b/bkt/o/a%2Fb?alt=media");
}

// Serves `content` honouring `Range: bytes=a-b` with 206, like GCS.
FakeHttpClient::Handler ranged(std::string content) {
  return [content](const HttpRequest& request) {
    const std::string range = request.headers.get("Range").value_or("");
    if (content.empty()) return json_response(416, "");
    const std::size_t dash = range.find('-');
    const std::size_t first = std::stoul(range.substr(6, dash - 6));
    const std::size_t last =
        std::min<std::size_t>(std::stoul(range.substr(dash + 1)), content.size() - 1);
    if (first >= content.size()) return json_response(416, "");
    HttpResponse response = json_response(206, content.substr(first, last - first + 1));
    response.headers.set("Content-Range", "bytes " + std::to_string(first) + "-" +
                                              std::to_string(last) + "/" +
                                              std::to_string(content.size()));
    response.headers.set("x-goog-generation", "77");
    return response;
  };
}

TEST_F(StorageFixture, StreamedDownloadReadsRangesPinnedToOneGeneration) {
  http->on("GET", "alt=media", ranged("hello world!!"));
  std::vector<std::string> pieces;
  client().download_object(
      "bkt", "o", [&](std::string_view piece) { pieces.emplace_back(piece); }, 4);
  EXPECT_EQ(pieces, (std::vector<std::string>{"hell", "o wo", "rld!", "!"}));
  const auto requests = http->requests();
  ASSERT_EQ(requests.size(), 4u);
  EXPECT_EQ(requests[0].headers.get("Range"), "bytes=0-3");
  EXPECT_EQ(requests[0].url, "https://storage.test/storage/v1/b/bkt/o/o?alt=media");
  EXPECT_EQ(requests[3].headers.get("Range"), "bytes=12-12");  // never past the end
  EXPECT_EQ(requests[3].url, "https://storage.test/storage/v1/b/bkt/o/o?alt=media&generation=77");
}

TEST_F(StorageFixture, StreamedDownloadTrustsContentRangeEvenWithStatus200) {
  auto inner = ranged("abcdefghij");
  http->on("GET", "alt=media", [inner](const HttpRequest& request) {
    HttpResponse response = inner(request);
    if (response.status == 206) response.status = 200;  // a server that keeps 200
    return response;
  });
  std::vector<std::string> pieces;
  client().download_object(
      "bkt", "o", [&](std::string_view piece) { pieces.emplace_back(piece); }, 4);
  EXPECT_EQ(pieces, (std::vector<std::string>{"abcd", "efgh", "ij"}));
}

TEST_F(StorageFixture, StreamedDownloadOfAnEmptyObjectDeliversNothing) {
  http->on("GET", "alt=media", ranged(""));
  int calls = 0;
  client().download_object("bkt", "o", [&](std::string_view) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST_F(StorageFixture, StreamedDownloadFromAServerThatIgnoresRangeGetsOnePiece) {
  http->on("GET", "alt=media", [](const HttpRequest&) { return json_response(200, "all of it"); });
  std::vector<std::string> pieces;
  client().download_object(
      "bkt", "o", [&](std::string_view piece) { pieces.emplace_back(piece); }, 2);
  EXPECT_EQ(pieces, std::vector<std::string>{"all of it"});
}

TEST_F(StorageFixture, ListFollowsPageTokens) {
  http->enqueue("GET", "/storage/v1/b/bkt/o?prefix=logs%2F",
                json_response(200, R"({"items":[{"name":"logs/rank-0.log","size":"10"}],
                                      "nextPageToken":"p2"})"));
  http->enqueue("GET", "/storage/v1/b/bkt/o?prefix=logs%2F&pageToken=p2",
                json_response(200, R"({"items":[{"name":"logs/rank-1.log","size":"20"}]})"));
  const auto objects = client().list_objects("bkt", "logs/");
  ASSERT_EQ(objects.size(), 2u);
  EXPECT_EQ(objects[0].name, "logs/rank-0.log");
  EXPECT_EQ(objects[1].size, 20);
  EXPECT_EQ(http->pending(), 0u);
}

TEST_F(StorageFixture, AListWhosePagesDoNotAdvanceIsAnError) {
  http->enqueue("GET", "/storage/v1/b/bkt/o?prefix=logs%2F",
                json_response(200, R"({"items":[{"name":"logs/a"}],"nextPageToken":"p2"})"));
  http->enqueue("GET", "/storage/v1/b/bkt/o?prefix=logs%2F&pageToken=p2",
                json_response(200, R"({"items":[{"name":"logs/b"}],"nextPageToken":"p2"})"));
  try {
    client().list_objects("bkt", "logs/");
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_THAT(e.what(), HasSubstr("list of gs://bkt/logs/ does not advance: page 2 gave a "
                                    "nextPageToken it gave before"));
  }
  EXPECT_EQ(http->pending(), 0u);
}

TEST_F(StorageFixture, ListStopsAtMaxObjects) {
  // The server may send more than maxResults asked for; the client keeps only the first ones
  // and asks for no further page.
  http->enqueue("GET", "/storage/v1/b/bkt/o?prefix=&maxResults=1",
                json_response(200, R"({"items":[{"name":"a"},{"name":"b"}],
                                      "nextPageToken":"p2"})"));
  const auto objects = client().list_objects("bkt", "", 1);
  ASSERT_EQ(objects.size(), 1u);
  EXPECT_EQ(objects[0].name, "a");
  EXPECT_EQ(http->pending(), 0u);
}

TEST_F(StorageFixture, ListOfNothingIsEmpty) {
  http->on("GET", "?prefix=", [](const HttpRequest&) {
    return json_response(200, R"({"kind":"storage#objects"})");
  });
  EXPECT_TRUE(client().list_objects("bkt", "none/").empty());
}

}  // namespace
}  // namespace falcon::gcp
