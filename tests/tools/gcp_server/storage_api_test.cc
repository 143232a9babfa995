// The fake Cloud Storage JSON API over HTTP: the resumable upload protocol and its edge cases,
// simple and multipart uploads, metadata, downloads, listing and errors.
#include <gtest/gtest.h>

#include <random>

#include "server_fixture.h"

namespace falcon::fake::testing {
namespace {

constexpr std::size_t kQ = 256 * 1024;

std::string random_bytes(std::size_t n, unsigned seed = 7) {
  std::mt19937 gen(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(gen() & 0xff);
  return s;
}

class StorageApi : public ServerTest {
 protected:
  // Starts a resumable upload and returns the session path (from Location).
  std::string start(const std::string& bucket, const std::string& name) {
    auto r = client_->Post(
        fmt::format("/upload/storage/v1/b/{}/o?uploadType=resumable&name={}", bucket, name).c_str(),
        auth(), "", "application/json");
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "");
    const std::string location = r->get_header_value("Location");
    const std::string origin = fmt::format("http://127.0.0.1:{}", server_.port());
    EXPECT_EQ(location.rfind(origin, 0), 0u) << location;
    return location.substr(origin.size());
  }

  HttpResult put(const std::string& session, const std::string& range, const std::string& body) {
    httplib::Headers h = auth();
    h.emplace("Content-Range", range);
    return to_result(client_->Put(session.c_str(), h, body, "application/octet-stream"));
  }

  static std::string range(std::size_t first, std::size_t size, const std::string& total = "*") {
    return fmt::format("bytes {}-{}/{}", first, first + size - 1, total);
  }
};

TEST_F(StorageApi, ResumableHappyPathWithQuantumChunks) {
  const std::string data = random_bytes(2 * kQ + 1000);
  const std::string s = start("bkt", "logs%2Frank-0.log");
  HttpResult r = put(s, range(0, kQ), data.substr(0, kQ));
  EXPECT_EQ(r.status, 308);
  EXPECT_EQ(r.header("Range"), "bytes=0-262143");
  EXPECT_EQ(r.raw, "");
  r = put(s, range(kQ, kQ), data.substr(kQ, kQ));
  EXPECT_EQ(r.status, 308);
  EXPECT_EQ(r.header("Range"), "bytes=0-524287");
  r = put(s, range(2 * kQ, 1000, std::to_string(data.size())), data.substr(2 * kQ));
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["name"], "logs/rank-0.log");
  EXPECT_EQ(r.body["bucket"], "bkt");
  EXPECT_EQ(r.body["size"], std::to_string(data.size()));  // int64 as a string
  EXPECT_TRUE(r.body["generation"].is_string());
  EXPECT_EQ(r.body["metageneration"], "1");
  EXPECT_EQ(r.body["kind"], "storage#object");
  const HttpResult media = get("/storage/v1/b/bkt/o/logs%2Frank-0.log?alt=media");
  EXPECT_EQ(media.status, 200);
  EXPECT_TRUE(media.raw == data);
}

TEST_F(StorageApi, StatusQueryWithNothingPersistedHasNoRange) {
  const std::string s = start("bkt", "a");
  const HttpResult r = put(s, "bytes */*", "");
  EXPECT_EQ(r.status, 308);
  EXPECT_FALSE(r.has_header("Range"));
}

TEST_F(StorageApi, NonQuantumChunkPersistsOnlyWholeQuanta) {
  const std::string data = random_bytes(kQ + 5000);
  const std::string s = start("bkt", "a");
  HttpResult r = put(s, range(0, data.size()), data);  // not final: total unknown
  EXPECT_EQ(r.status, 308);
  EXPECT_EQ(r.header("Range"), "bytes=0-262143");
  // A small non-final chunk commits nothing at all.
  const std::string s2 = start("bkt", "b");
  r = put(s2, range(0, 100), data.substr(0, 100));
  EXPECT_EQ(r.status, 308);
  EXPECT_FALSE(r.has_header("Range"));
  // Resume the first from the committed offset and finish.
  r = put(s, range(kQ, 5000, std::to_string(data.size())), data.substr(kQ));
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_TRUE(get("/storage/v1/b/bkt/o/a?alt=media").raw == data);
}

TEST_F(StorageApi, OverlappingResentBytesAreIgnored) {
  const std::string data = random_bytes(3 * kQ + 10);
  const std::string s = start("bkt", "a");
  EXPECT_EQ(put(s, range(0, 2 * kQ), data.substr(0, 2 * kQ)).header("Range"), "bytes=0-524287");
  // Resend from kQ (one quantum already persisted) through 3 quanta.
  HttpResult r = put(s, range(kQ, 2 * kQ), data.substr(kQ, 2 * kQ));
  EXPECT_EQ(r.status, 308);
  EXPECT_EQ(r.header("Range"), "bytes=0-786431");
  // An entirely old chunk changes nothing.
  r = put(s, range(0, kQ), std::string(kQ, 'X'));
  EXPECT_EQ(r.header("Range"), "bytes=0-786431");
  r = put(s, range(3 * kQ, 10, std::to_string(data.size())), data.substr(3 * kQ));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["size"], std::to_string(data.size()));
  EXPECT_TRUE(get("/storage/v1/b/bkt/o/a?alt=media").raw == data);
}

TEST_F(StorageApi, StarStarQueryNeverFinalizes) {
  const std::string data = random_bytes(kQ);
  const std::string s = start("bkt", "a");
  put(s, range(0, kQ), data);
  for (int i = 0; i < 2; ++i) {
    const HttpResult r = put(s, "bytes */*", "");
    EXPECT_EQ(r.status, 308);
    EXPECT_EQ(r.header("Range"), "bytes=0-262143");
  }
  EXPECT_EQ(get("/storage/v1/b/bkt/o/a").status, 404);
}

TEST_F(StorageApi, StarTotalFinalizesOnlyWhenTotalMatches) {
  const std::string data = random_bytes(kQ);
  const std::string s = start("bkt", "a");
  put(s, range(0, kQ), data);
  HttpResult r = put(s, fmt::format("bytes */{}", kQ + 1), "");
  EXPECT_EQ(r.status, 308);
  EXPECT_EQ(r.header("Range"), "bytes=0-262143");
  EXPECT_EQ(get("/storage/v1/b/bkt/o/a").status, 404);
  r = put(s, fmt::format("bytes */{}", kQ), "");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["size"], std::to_string(kQ));
  // Later PUTs on a finished session return the object again.
  r = put(s, "bytes */*", "");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body["name"], "a");
}

TEST_F(StorageApi, EmptyObjectViaStarZero) {
  const std::string s = start("bkt", "empty");
  const HttpResult r = put(s, "bytes */0", "");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["size"], "0");
  EXPECT_EQ(r.body["md5Hash"], "1B2M2Y8AsgTpgAmY7PhCfg==");
  EXPECT_EQ(r.body["crc32c"], "AAAAAA==");
}

TEST_F(StorageApi, ChunkBeyondPersistedOffsetIsRejected) {
  const std::string s = start("bkt", "a");
  const HttpResult r = put(s, range(kQ, kQ), random_bytes(kQ));
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["errors"][0]["reason"], "invalid");
  EXPECT_FALSE(put(s, "bytes */*", "").has_header("Range"));
}

TEST_F(StorageApi, ContentRangeMustMatchBody) {
  const std::string s = start("bkt", "a");
  EXPECT_EQ(put(s, range(0, 10), "short").status, 400);
  EXPECT_EQ(put(s, "bytes 5-1/*", "").status, 400);
  EXPECT_EQ(put(s, "bytes=0-4/5", "hello").status, 400);
}

TEST_F(StorageApi, CancelAnswers499AndForgetsTheSession) {
  const std::string s = start("bkt", "a");
  put(s, range(0, kQ), random_bytes(kQ));
  auto r = client_->Delete(s.c_str(), auth());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 499);
  EXPECT_EQ(put(s, "bytes */*", "").status, 404);
  EXPECT_EQ(get("/storage/v1/b/bkt/o/a").status, 404);
}

TEST_F(StorageApi, InitiationMetadataBodyAndHeaders) {
  httplib::Headers h = auth();
  h.emplace("X-Upload-Content-Type", "application/x-ndjson");
  auto r = client_->Post("/upload/storage/v1/b/bkt/o?uploadType=resumable", h,
                         R"({"name":"meta.json","metadata":{"rank":"3"}})",
                         "application/json; charset=UTF-8");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const std::string origin = fmt::format("http://127.0.0.1:{}", server_.port());
  const std::string s = r->get_header_value("Location").substr(origin.size());
  const HttpResult done = put(s, "bytes 0-1/2", "{}");
  ASSERT_EQ(done.status, 200);
  EXPECT_EQ(done.body["contentType"], "application/x-ndjson");
  EXPECT_EQ(done.body["metadata"]["rank"], "3");
  // Query name and body name must agree.
  r = client_->Post("/upload/storage/v1/b/bkt/o?uploadType=resumable&name=x", auth(),
                    R"({"name":"y"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
}

TEST_F(StorageApi, IfGenerationMatchZeroRefusesToOverwrite) {
  auto first = client_->Post("/upload/storage/v1/b/bkt/o?uploadType=media&name=a", auth(), "1",
                             "text/plain");
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, 200);
  auto again =
      client_->Post("/upload/storage/v1/b/bkt/o?uploadType=media&name=a&ifGenerationMatch=0",
                    auth(), "2", "text/plain");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 412);
  EXPECT_EQ(json::parse(again->body)["error"]["errors"][0]["reason"], "conditionNotMet");
  auto init =
      client_->Post("/upload/storage/v1/b/bkt/o?uploadType=resumable&name=a&ifGenerationMatch=0",
                    auth(), "", "application/json");
  ASSERT_TRUE(init);
  EXPECT_EQ(init->status, 412);
}

TEST_F(StorageApi, SimpleUploadMetadataAndDigests) {
  auto r =
      client_->Post("/upload/storage/v1/b/bkt/o?uploadType=media&name=dir%2Fwith%20space%2B.txt",
                    auth(), "123456789", "text/plain");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const HttpResult m = get("/storage/v1/b/bkt/o/dir%2Fwith%20space%2B.txt");
  ASSERT_EQ(m.status, 200) << m.raw;
  EXPECT_EQ(m.body["name"], "dir/with space+.txt");
  EXPECT_EQ(m.body["size"], "9");
  EXPECT_EQ(m.body["contentType"], "text/plain");
  EXPECT_EQ(m.body["md5Hash"], "JfnnlDI7RTiF9RgfG2JNCw==");  // md5("123456789")
  EXPECT_EQ(m.body["crc32c"], "4waSgw==");                   // 0xE3069283, big-endian
  EXPECT_TRUE(m.body["generation"].is_string());
  EXPECT_EQ(std::to_string(std::stoll(m.body["generation"].get<std::string>())),
            m.body["generation"].get<std::string>());
  const HttpResult media = get("/storage/v1/b/bkt/o/dir%2Fwith%20space%2B.txt?alt=media");
  EXPECT_EQ(media.raw, "123456789");
  EXPECT_EQ(media.header("x-goog-hash"), "crc32c=4waSgw==,md5=JfnnlDI7RTiF9RgfG2JNCw==");
  const HttpResult download =
      get("/download/storage/v1/b/bkt/o/dir%2Fwith%20space%2B.txt?alt=media");
  EXPECT_EQ(download.raw, "123456789");
}

TEST_F(StorageApi, DownloadHonoursRangeAndNeverRecompresses) {
  ASSERT_TRUE(client_->Post("/upload/storage/v1/b/bkt/o?uploadType=media&name=t.txt", auth(),
                            std::string(10000, 'a'), "text/plain"));
  httplib::Headers h = auth();
  h.emplace("Range", "bytes=5-9");
  auto partial = client_->Get("/storage/v1/b/bkt/o/t.txt?alt=media", h);
  ASSERT_TRUE(partial);
  EXPECT_EQ(partial->status, 206);
  EXPECT_EQ(partial->body, "aaaaa");
  httplib::Headers gz = auth();
  gz.emplace("Accept-Encoding", "gzip");
  auto whole = client_->Get("/storage/v1/b/bkt/o/t.txt?alt=media", gz);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->get_header_value("Content-Encoding"), "");
  EXPECT_EQ(whole->body.size(), 10000u);
}

TEST_F(StorageApi, MultipartUpload) {
  const std::string body =
      "--b0undary\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n"
      R"({"name":"m.bin","contentType":"application/x-test","metadata":{"k":"v"}})"
      "\r\n--b0undary\r\nContent-Type: application/x-test\r\n\r\n"
      "binary\r\n\x01\x02 data"
      "\r\n--b0undary--";
  auto r = client_->Post("/upload/storage/v1/b/bkt/o?uploadType=multipart", auth(), body,
                         "multipart/related; boundary='b0undary'");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json o = json::parse(r->body);
  EXPECT_EQ(o["name"], "m.bin");
  EXPECT_EQ(o["contentType"], "application/x-test");
  EXPECT_EQ(o["metadata"]["k"], "v");
  EXPECT_EQ(get("/storage/v1/b/bkt/o/m.bin?alt=media").raw, "binary\r\n\x01\x02 data");
}

TEST_F(StorageApi, ListWithPrefixDelimiterAndPages) {
  for (const char* name :
       {"run%2Frank-0.log", "run%2Frank-1.log", "run%2Fsub%2Fx", "run%2Fsub%2Fy", "other"}) {
    auto r = client_->Post(
        fmt::format("/upload/storage/v1/b/bkt/o?uploadType=media&name={}", name).c_str(), auth(),
        "x", "text/plain");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
  }
  HttpResult r = get("/storage/v1/b/bkt/o?prefix=run%2F");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["items"].size(), 4u);
  EXPECT_FALSE(r.body.contains("prefixes"));
  r = get("/storage/v1/b/bkt/o?prefix=run%2F&delimiter=%2F");
  ASSERT_EQ(r.body["items"].size(), 2u);
  EXPECT_EQ(r.body["items"][0]["name"], "run/rank-0.log");
  EXPECT_EQ(r.body["items"][0]["size"], "1");
  EXPECT_EQ(r.body["prefixes"], json::array({"run/sub/"}));
  // One result per page.
  std::vector<std::string> seen;
  std::string token;
  for (int i = 0; i < 10; ++i) {
    r = get("/storage/v1/b/bkt/o?prefix=run%2F&delimiter=%2F&maxResults=1" +
            (token.empty() ? std::string() : "&pageToken=" + token));
    for (const auto& it : r.body.value("items", json::array())) seen.push_back(it["name"]);
    for (const auto& p : r.body.value("prefixes", json::array())) seen.push_back(p);
    if (!r.body.contains("nextPageToken")) break;
    token = r.body["nextPageToken"];
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"run/rank-0.log", "run/rank-1.log", "run/sub/"}));
  r = get("/storage/v1/b/bkt/o?prefix=nothing");
  EXPECT_EQ(r.raw, R"({"kind":"storage#objects"})");
}

TEST_F(StorageApi, ErrorsUseTheLegacyShape) {
  const HttpResult r = get("/storage/v1/b/nobucket/o/x");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body["error"]["code"], 404);
  EXPECT_EQ(r.body["error"]["errors"][0]["reason"], "notFound");
  EXPECT_EQ(r.body["error"]["errors"][0]["domain"], "global");
  EXPECT_FALSE(r.body["error"].contains("status"));
  EXPECT_EQ(get("/storage/v1/b/nobucket/o").status, 404);
}

TEST_F(StorageApi, BucketsAreCreatedExplicitlyOrByTheFirstUpload) {
  EXPECT_EQ(get("/storage/v1/b/made").status, 404);
  HttpResult r = post_json("/storage/v1/b?project=p", {{"name", "made"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body["name"], "made");
  EXPECT_EQ(post_json("/storage/v1/b?project=p", {{"name", "made"}}).status, 409);
  EXPECT_EQ(post_json("/storage/v1/b?project=p", {{"name", "Bad_Name!"}}).status, 400);
  EXPECT_EQ(get("/storage/v1/b/made/o").raw, R"({"kind":"storage#objects"})");
  start("auto-made", "x");
  EXPECT_EQ(get("/storage/v1/b/auto-made").status, 200);
}

TEST_F(StorageApi, ObjectNamesAreDecodedExactlyOnce) {
  auto r = client_->Post("/upload/storage/v1/b/ooo/o?uploadType=media&name=o%2F100%25.txt", auth(),
                         "percent", "text/plain");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["name"], "o/100%.txt");
  EXPECT_EQ(get("/storage/v1/b/ooo/o/o%2F100%25.txt?alt=media").raw, "percent");
  EXPECT_EQ(get("/storage/v1/b/ooo/o/o%2F100%2525.txt").status, 404);
}

TEST_F(StorageApi, DeleteObject) {
  ASSERT_TRUE(client_->Post("/upload/storage/v1/b/bkt/o?uploadType=media&name=gone", auth(), "x",
                            "text/plain"));
  auto r = client_->Delete("/storage/v1/b/bkt/o/gone", auth());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(get("/storage/v1/b/bkt/o/gone").status, 404);
}

}  // namespace
}  // namespace falcon::fake::testing
