// End to end: `falcon job export-logs --via auto|read|copy|sink [--keep-staging]` against the
// local fleet: the same rank objects by every path, the path chosen and why on stderr, the
// preconditions' fixes, and usage errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "falcon/http_client.h"
#include "gcp_server/gcp_server.h"
#include "gcp_server/log_copy.h"
#include "support/local_fleet.h"
#include "support/run_falcon.h"

namespace falcon {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

class CliExportViaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The fleet's repos.yaml with the export paths configured.
    std::ifstream in(fleet_.repos_path());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    text +=
        "  log_copy: true\n  log_copy_staging: gs://fleet-staging/stage\n"
        "  log_copy_poll_s: 1\n  log_archive: gs://fleet-archive\n";
    repos_ = (std::filesystem::path(fleet_.repos_path()).parent_path() / "repos-via.yaml").string();
    std::ofstream(repos_) << text;
    create_bucket("fleet-staging");
    create_bucket("falcon-logs");
  }

  CommandResult falcon(std::vector<std::string> args) {
    args.insert(args.begin(), {"--config", repos_});
    return testing::run_falcon(args);
  }

  HttpResponse call(const std::string& method, const std::string& path, const json& body = {}) {
    HttpRequest request;
    request.method = method;
    request.url = fleet_.url() + path;
    request.headers.set("Authorization", "Bearer " + fleet_.service().gcp().valid_token());
    if (!body.is_null()) {
      request.headers.set("Content-Type", "application/json");
      request.body = body.dump();
    }
    request.timeout = std::chrono::seconds(30);
    return make_curl_http_client()->send(request);
  }
  void create_bucket(const std::string& name) {
    ASSERT_EQ(call("POST", "/storage/v1/b?project=proj-tpu", json{{"name", name}}).status, 200);
  }
  void grant_writer() {
    json policy = json::parse(call("GET", "/storage/v1/b/fleet-staging/iam").body);
    policy["bindings"].push_back(
        {{"role", "roles/storage.objectCreator"},
         {"members",
          {"serviceAccount:" + fake::LogCopyService::logging_service_account("proj-tpu")}}});
    ASSERT_EQ(call("PUT", "/storage/v1/b/fleet-staging/iam", policy).status, 200);
  }
  std::string object(const std::string& bucket, const std::string& name) {
    std::string encoded;
    for (const char c : name) encoded += c == '/' ? std::string("%2F") : std::string(1, c);
    const HttpResponse r = call("GET", "/storage/v1/b/" + bucket + "/o/" + encoded + "?alt=media");
    EXPECT_EQ(r.status, 200) << name;
    return r.body;
  }

  testing::LocalFleet fleet_;
  std::string repos_;
};

TEST_F(CliExportViaTest, EveryPathWritesTheSameObjectsAndSaysWhichItTook) {
  auto r = falcon({"--json", "job", "submit", "--cluster", "tpu-b", "--accelerator", "tpu-v4-64",
                   "--name", "via-run", "--image", "gcr.io/f/b:1", "--", "python3", "train.py"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  fleet_.advance(std::chrono::seconds(101));

  r = falcon({"job", "export-logs", "--cluster", "tpu-b", "via-run", "--via", "read", "--dest",
              "gs://falcon-logs/read/"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, HasSubstr("exporting via read: asked for (--via read)"));

  // Copy without the writer's grant: refused before copying, with the command that fixes it.
  r = falcon({"job", "export-logs", "--cluster", "tpu-b", "via-run", "--via", "copy", "--dest",
              "gs://falcon-logs/copy/"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.stderr_text, HasSubstr("gcloud storage buckets add-iam-policy-binding "
                                       "gs://fleet-staging --member=serviceAccount:"));
  // falcon doctor says the same per project, then that it is fine once granted.
  const auto doctor_check = [&](const std::string& name) {
    const CommandResult d = falcon({"--json", "doctor"});
    for (const auto& check : json::parse(d.stdout_text)) {
      if (check["name"] == name) return check;
    }
    return json();
  };
  json check = doctor_check("log copy proj-tpu");
  EXPECT_EQ(check["status"], "fail") << check.dump();
  EXPECT_THAT(check["fix"].get<std::string>(),
              HasSubstr("gcloud storage buckets add-iam-policy-binding gs://fleet-staging"));
  grant_writer();
  check = doctor_check("log copy proj-tpu");
  EXPECT_EQ(check["status"], "ok") << check.dump();
  r = falcon({"--json", "job", "export-logs", "--cluster", "tpu-b", "via-run", "--via", "copy",
              "--dest", "gs://falcon-logs/copy/", "--keep-staging"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, HasSubstr("exporting via copy: asked for (--via copy)"));
  EXPECT_THAT(r.stderr_text, HasSubstr("SUCCEEDED 100%"));
  const json result = json::parse(r.stdout_text);
  EXPECT_EQ(result["exported_ranks"], json({0, 1, 2, 3}));

  // The sink's archive of the project, then an export from it.
  auto& gcp = fleet_.service().gcp();
  gcp.copies().write_sink_archive("proj-tpu", "fleet-archive",
                                  std::numeric_limits<std::int64_t>::max() / 2, 1000, 3);
  r = falcon({"job", "export-logs", "--cluster", "tpu-b", "via-run", "--via", "sink", "--dest",
              "gs://falcon-logs/sink/"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;

  for (int rank = 0; rank < 4; ++rank) {
    const std::string name = "rank-" + std::to_string(rank) + ".log";
    const std::string read = object("falcon-logs", "read/" + name);
    EXPECT_THAT(read, HasSubstr("EXIT_CODE=0"));
    EXPECT_EQ(object("falcon-logs", "copy/" + name), read) << name;
    EXPECT_EQ(object("falcon-logs", "sink/" + name), read) << name;
  }
  const json meta = json::parse(object("falcon-logs", "copy/collection_meta.json"));
  EXPECT_EQ(meta["via"]["path"], "copy");
  EXPECT_EQ(meta["logging_read_calls"], 0);
  EXPECT_EQ(meta["staging_kept"], true);
  EXPECT_EQ(json::parse(object("falcon-logs", "sink/collection_meta.json"))["via"]["path"], "sink");

  // auto: the archive's files of this hour are not complete yet (3 h late), so copy.
  r = falcon(
      {"job", "export-logs", "--cluster", "tpu-b", "via-run", "--dest", "gs://falcon-logs/auto/"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, HasSubstr("exporting via copy: sink not used: the window ends at"));
  EXPECT_THAT(r.stderr_text, Not(HasSubstr("exporting via read")));
}

TEST_F(CliExportViaTest, AnUnknownPathIsAUsageError) {
  const auto r = falcon({"job", "export-logs", "--cluster", "tpu-b", "x", "--via", "fast", "--dest",
                         "gs://falcon-logs/x/"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("--via: 'fast' is not auto, read, copy or sink"));
}

}  // namespace
}  // namespace falcon
