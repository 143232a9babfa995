// The falcon-gcp-server executable: flags, the announcement lines, and a clean stop on signals.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "subprocess.h"
#include "support/temp_dir.h"

namespace falcon::fake::testing {
namespace {

using nlohmann::json;

const std::string kBinary = std::string(FALCON_BINARY_DIR) + "/bin/falcon-gcp-server";

int port_of(const std::string& url) { return std::stoi(url.substr(url.rfind(':') + 1)); }

TEST(ServerProcess, AnnouncesItselfServesWithTheGivenTokenAndStopsOnSigterm) {
  Child child({kBinary, "--port", "0", "--token", "secret-token", "--print-json"}, {});
  const std::string line = child.read_line();
  ASSERT_EQ(line.rfind("falcon-gcp-server listening on http://127.0.0.1:", 0), 0u) << line;
  const json info = json::parse(child.read_line());
  EXPECT_EQ(info["url"], line.substr(line.find("http://")));
  EXPECT_EQ(info["port"], port_of(line));
  ASSERT_TRUE(info["token"].is_string());

  httplib::Client c("127.0.0.1", info["port"].get<int>());
  const std::string body = R"({"resourceNames":["projects/p"]})";
  auto denied = c.Post("/v2/entries:list", body, "application/json");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 401);
  for (const std::string& token : {std::string("secret-token"), info["token"].get<std::string>()}) {
    auto ok = c.Post("/v2/entries:list", {{"Authorization", "Bearer " + token}}, body,
                     "application/json");
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200);
  }
  child.signal(SIGTERM);
  EXPECT_EQ(child.wait(), 0);
}

TEST(ServerProcess, NoAuthAndDataDirAndSigint) {
  falcon::testing::TempDir dir;
  {
    Child child({kBinary, "--no-auth", "--data-dir", dir.path().string()}, {});
    const std::string line = child.read_line();
    httplib::Client c("127.0.0.1", port_of(line));
    auto w = c.Post("/v2/entries:write",
                    R"({"entries":[{"logName":"projects/p/logs/x","resource":{"type":"global"},
                        "textPayload":"persisted"}]})",
                    "application/json");
    ASSERT_TRUE(w);
    EXPECT_EQ(w->status, 200);
    child.signal(SIGINT);
    EXPECT_EQ(child.wait(), 0);
  }
  Child again({kBinary, "--no-auth", "--data-dir", dir.path().string()}, {});
  httplib::Client c("127.0.0.1", port_of(again.read_line()));
  auto r = c.Post("/v2/entries:list", R"({"resourceNames":["projects/p"]})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["entries"][0]["textPayload"], "persisted");
}

TEST(ServerProcess, BadFlagsFail) {
  auto [status, out] = run({kBinary, "--no-such-flag"}, {}, "/dev/null");
  EXPECT_NE(status, 0);
  auto [status2, out2] = run({kBinary, "--host", "256.0.0.1"}, {}, "/dev/null");
  EXPECT_EQ(status2, 1);
}

}  // namespace
}  // namespace falcon::fake::testing
