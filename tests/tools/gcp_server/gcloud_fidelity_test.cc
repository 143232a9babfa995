// Fidelity check: the real Google Cloud SDK (`gcloud`) against the local server. If gcloud
// reads our logs and round-trips objects through our resumable uploads, our server speaks the
// protocols as Google's own clients expect, and so do the client tests that use it.
//
// gcloud runs with a private CLOUDSDK_CONFIG whose properties point every API at the server:
//   api_endpoint_overrides/logging = http://127.0.0.1:PORT/
//   api_endpoint_overrides/storage = http://127.0.0.1:PORT/storage/v1/
//   auth/access_token_file         = a file holding a token the server accepts
//   storage/use_grpc_if_available  = false (JSON API over HTTP only)
//   storage/parallel_composite_upload_enabled = false (no compose calls)
//   core/check_gce_metadata, usage reporting and update checks off (no other network)
// and an environment with only PATH, HOME, LANG and CLOUDSDK_* variables, stdin /dev/null and
// CLOUDSDK_CORE_DISABLE_PROMPTS=1, so it can neither prompt nor reach the internet.
//
// gcloud behaviours the server had to support (found with this test):
//   - Storage calls carry `alt=json`, `projection=noAcl` and a `fields=` partial-response mask;
//     the server ignores the mask and returns whole resources, which gcloud accepts.
//   - `gcloud storage cp` first GETs the destination object (404 expected) and lists the bucket
//     with the object name as prefix; listing a missing bucket must be 404, so the test creates
//     the bucket first.
//   - Files under storage/resumable_threshold (8 MiB) go as uploadType=multipart whose
//     multipart/related boundary is single-quoted (`boundary='===...=='`).
//   - Resumable uploads start on /resumable/upload/storage/v1/b/B/o (apitools' resumable path),
//     not /upload/storage/v1/...; chunks then go to the Location we return.
//   - After a connection cut mid-upload gcloud queries the session (`bytes */*`), honours the
//     308's Range and resends from there; the object must still be byte-identical.
//   - `gcloud logging read` POSTs /v2/entries:list with resourceNames, filter,
//     orderBy "timestamp desc" and pageSize, and adds no timestamp of its own when the filter
//     already has one.
//   - `gcloud logging copy BUCKET_ID DEST --location=L --log-filter=F` POSTs /v2/entries:copy
//     {name, filter, destination} and prints the Operation; `gcloud logging operations
//     describe ID --location=L` GETs /v2/projects/P/locations/L/operations/ID, and `... list
//     --operation-filter=request_type=CopyLogEntries` GETs .../operations?filter=...
//   - `gcloud storage buckets add-iam-policy-binding` reads the bucket's policy (GET .../iam)
//     and writes it back with the binding added (PUT .../iam).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "gcp_server/log_copy.h"
#include "server_fixture.h"
#include "subprocess.h"
#include "support/temp_dir.h"

namespace falcon::fake::testing {
namespace {

constexpr std::int64_t kT0 = 1'714'521'600LL * 1'000'000'000;  // 2024-05-01T00:00:00Z

std::string find_gcloud() {
  for (const char* p : {"/usr/bin/gcloud", "/usr/lib/google-cloud-sdk/bin/gcloud",
                        "/google-cloud-sdk/bin/gcloud"}) {
    if (std::filesystem::exists(p)) return p;
  }
  return "";
}

class GcloudFidelity : public ServerTest {
 protected:
  void SetUp() override {
    gcloud_ = find_gcloud();
    if (gcloud_.empty()) GTEST_SKIP() << "gcloud (Google Cloud SDK) is not installed: skipped";
    const auto config = dir_.path() / "gcloud-config";
    std::filesystem::create_directories(config / "configurations");
    dir_.write("token", server_.valid_token());
    dir_.write("gcloud-config/active_config", "default");
    dir_.write("gcloud-config/configurations/config_default",
               fmt::format(R"([core]
project = p
disable_usage_reporting = true
check_gce_metadata = false
[api_endpoint_overrides]
logging = {0}/
storage = {0}/storage/v1/
[auth]
access_token_file = {1}
[storage]
use_grpc_if_available = false
parallel_composite_upload_enabled = false
process_count = 1
thread_count = 1
[component_manager]
disable_update_check = true
)",
                           server_.base_url(), (dir_.path() / "token").string()));
    std::filesystem::create_directories(dir_.path() / "home");
    env_ = {"PATH=/usr/local/bin:/usr/bin:/bin",
            "HOME=" + (dir_.path() / "home").string(),
            "LANG=C.UTF-8",
            "CLOUDSDK_CONFIG=" + config.string(),
            "CLOUDSDK_CORE_DISABLE_PROMPTS=1",
            "NO_GCE_CHECK=True"};
  }

  // Runs gcloud with `args`; returns stdout, failing the test on a non-zero exit.
  std::string gcloud(std::vector<std::string> args) {
    args.insert(args.begin(), gcloud_);
    const std::string err = (dir_.path() / "gcloud.stderr").string();
    auto [status, out] = run(args, env_, err);
    std::ifstream in(err);
    const std::string errors((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
    EXPECT_EQ(status, 0) << "gcloud " << args[1] << " failed:\n" << errors;
    return out;
  }

  falcon::testing::TempDir dir_;
  std::string gcloud_;
  std::vector<std::string> env_;
};

TEST_F(GcloudFidelity, LoggingReadReturnsWhatWasWritten) {
  const std::string tricky = "h\u00e9llo \"quoted\" \\ back\ttab";
  server_.write_log_entries({gke_entry("p", "fid-job", 0, kT0 + 1'000'000'000, "first"),
                             gke_entry("p", "fid-job", 1, kT0 + 2'000'000'000, tricky, "stderr"),
                             gke_entry("p", "fid-job", 2, kT0 + 3'000'000'000, "third"),
                             gke_entry("p", "other-job", 0, kT0 + 4'000'000'000, "other"),
                             gke_entry("q", "fid-job", 0, kT0 + 5'000'000'000, "elsewhere")});
  const std::string out = gcloud(
      {"logging", "read",
       R"(labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="fid-job" AND timestamp>="2024-05-01T00:00:00Z")",
       "--project=p", "--format=json"});
  const json entries = json::parse(out, nullptr, false);
  ASSERT_TRUE(entries.is_array()) << out;
  ASSERT_EQ(entries.size(), 3u) << out;
  // gcloud asks for newest first.
  EXPECT_EQ(entries[0]["textPayload"], "third");
  EXPECT_EQ(entries[1]["textPayload"], tricky);
  EXPECT_EQ(entries[1]["severity"], "ERROR");
  EXPECT_EQ(entries[1]["labels"]["k8s-pod/batch_kubernetes_io/job-completion-index"], "1");
  EXPECT_EQ(entries[1]["resource"]["labels"]["pod_name"], "fid-job-slice-job-0-1-abcde");
  EXPECT_EQ(entries[2]["textPayload"], "first");
  EXPECT_EQ(entries[2]["timestamp"], "2024-05-01T00:00:01Z");
  EXPECT_EQ(entries[2]["logName"], "projects/p/logs/stdout");
  EXPECT_GE(server_.request_counts()["logging.list"], 1);
}

TEST_F(GcloudFidelity, StorageCopyCatAndListRoundTripBytes) {
  ASSERT_EQ(post_json("/storage/v1/b?project=p", {{"name", "fidelity-bucket"}}).status, 200);
  std::mt19937 gen(42);
  std::string big(12 * 1024 * 1024 + 12345, '\0');  // above gcloud's 8 MiB resumable threshold
  for (auto& c : big) c = static_cast<char>(gen() & 0xff);
  const std::string small = "small file\n" + std::string(100'000, 's');
  const auto big_path = dir_.write("upload/big.bin", big);
  const auto small_path = dir_.write("upload/small.txt", small);

  // Cut the resumable upload's first chunk 3 MB in: gcloud must ask for the session's state
  // and resume from the Range we report (the whole 256 KiB quanta of what arrived).
  server_.faults().cut_next("storage.upload_chunk", 3'000'000);
  gcloud({"storage", "cp", big_path.string(), small_path.string(), "gs://fidelity-bucket/dir/"});
  const auto counts = server_.request_counts();
  EXPECT_GE(counts.at("storage.upload_init"), 1);   // resumable for big.bin
  EXPECT_GE(counts.at("storage.upload_chunk"), 2);  // the cut chunk, then the resumed rest
  EXPECT_GE(counts.at("storage.upload_media"), 1);  // multipart for small.txt

  const std::string cat = gcloud({"storage", "cat", "gs://fidelity-bucket/dir/big.bin"});
  EXPECT_EQ(cat.size(), big.size());
  EXPECT_TRUE(cat == big) << "gcloud storage cat differs from what gcloud storage cp uploaded";

  const std::string ls = gcloud({"storage", "ls", "gs://fidelity-bucket/dir/"});
  EXPECT_NE(ls.find("gs://fidelity-bucket/dir/big.bin"), std::string::npos) << ls;
  EXPECT_NE(ls.find("gs://fidelity-bucket/dir/small.txt"), std::string::npos) << ls;

  // And the server agrees on sizes and content.
  const HttpResult meta = get("/storage/v1/b/fidelity-bucket/o/dir%2Fsmall.txt");
  EXPECT_EQ(meta.body["size"], std::to_string(small.size()));
  EXPECT_EQ(get("/storage/v1/b/fidelity-bucket/o/dir%2Fsmall.txt?alt=media").raw, small);
}

TEST_F(GcloudFidelity, LoggingCopyRunsAsAnOperationThatDescribeAndListShow) {
  for (int i = 0; i < 5; ++i) {
    server_.write_log_entries(
        {gke_entry("p", "fid-job", i % 2, kT0 + (i + 1) * 1'000'000'000LL, fmt::format("l{}", i))});
  }
  ASSERT_EQ(post_json("/storage/v1/b?project=p", {{"name", "copy-bucket"}}).status, 200);
  // The grant falcon's error message asks for, run by gcloud itself.
  const std::string member =
      "serviceAccount:" + falcon::fake::LogCopyService::logging_service_account("p");
  gcloud({"storage", "buckets", "add-iam-policy-binding", "gs://copy-bucket", "--member=" + member,
          "--role=roles/storage.objectCreator", "--format=json"});
  const std::string started = gcloud(
      {"logging", "copy", "_Default", "storage.googleapis.com/copy-bucket/staged",
       "--location=global",
       R"(--log-filter=labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="fid-job" AND timestamp>="2024-05-01T00:00:00Z")",
       "--project=p", "--format=json"});
  const json op = json::parse(started, nullptr, false);
  ASSERT_TRUE(op.is_object()) << started;
  const std::string name = op.value("name", "");
  ASSERT_TRUE(name.starts_with("projects/p/locations/global/operations/")) << started;
  EXPECT_EQ(op["metadata"]["writerIdentity"], member);
  const std::string id = name.substr(name.rfind('/') + 1);
  const std::string described = gcloud({"logging", "operations", "describe", id,
                                        "--location=global", "--project=p", "--format=json"});
  const json done = json::parse(described, nullptr, false);
  ASSERT_TRUE(done.is_object()) << described;
  EXPECT_EQ(done["done"], true);
  EXPECT_EQ(done["metadata"]["state"], "OPERATION_STATE_SUCCEEDED");
  EXPECT_EQ(done["metadata"]["progress"], 100);
  EXPECT_EQ(done["response"]["logEntriesCopiedCount"], "5");
  const std::string listed =
      gcloud({"logging", "operations", "list", "--location=global",
              "--operation-filter=request_type=CopyLogEntries", "--project=p", "--format=json"});
  const json ops = json::parse(listed, nullptr, false);
  ASSERT_TRUE(ops.is_array()) << listed;
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0]["name"], name);
  // The staged objects hold the five entries.
  const std::string ls = gcloud({"storage", "ls", "gs://copy-bucket/staged/"});
  EXPECT_NE(ls.find(".jsonl"), std::string::npos) << ls;
  EXPECT_GE(server_.request_counts()["logging.copy"], 1);
  EXPECT_GE(server_.request_counts()["storage.iam_set"], 1);
}

}  // namespace
}  // namespace falcon::fake::testing
