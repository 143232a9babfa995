// Cloud Logging's per-project read quota in the local server: a sliding 60-second window of
// entries:list calls, 429 RESOURCE_EXHAUSTED with a RetryInfo beyond it, refusals counted.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "gcp_server/read_quota.h"
#include "server_fixture.h"
#include "support/fake_clock.h"

namespace falcon::fake::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using TimePoint = ReadQuota::TimePoint;

const TimePoint kStart = TimePoint(seconds(1'776'067'200));

TEST(ReadQuota, OffByDefault) {
  ReadQuota quota;
  for (int i = 0; i < 1000; ++i) ASSERT_FALSE(quota.admit("p", kStart));
  EXPECT_EQ(quota.rejected(), 0);
}

TEST(ReadQuota, TheWindowSlidesCallByCall) {
  ReadQuota quota(3);
  // Calls at 0 s, 10 s and 20 s fill the window.
  EXPECT_FALSE(quota.admit("p", kStart));
  EXPECT_FALSE(quota.admit("p", kStart + seconds(10)));
  EXPECT_FALSE(quota.admit("p", kStart + seconds(20)));
  // At 30 s the call of 0 s leaves the window in 30 s.
  auto wait = quota.admit("p", kStart + seconds(30));
  ASSERT_TRUE(wait);
  EXPECT_EQ(*wait, seconds(30));
  // Just before 60 s it is still in; at 60 s it has left, and only one call fits.
  wait = quota.admit("p", kStart + seconds(60) - milliseconds(1));
  ASSERT_TRUE(wait);
  EXPECT_EQ(*wait, milliseconds(1));
  EXPECT_FALSE(quota.admit("p", kStart + seconds(60)));
  wait = quota.admit("p", kStart + seconds(60));
  ASSERT_TRUE(wait);
  EXPECT_EQ(*wait, seconds(10));  // the call of 10 s is next to leave
  // Refused calls did not use up the quota: at 70 s one more fits, as the 10 s call left.
  EXPECT_FALSE(quota.admit("p", kStart + seconds(70)));
  EXPECT_EQ(quota.rejected(), 3);
}

TEST(ReadQuota, ProjectsHaveWindowsOfTheirOwn) {
  ReadQuota quota(2);
  EXPECT_FALSE(quota.admit("a", kStart));
  EXPECT_FALSE(quota.admit("a", kStart));
  EXPECT_TRUE(quota.admit("a", kStart));
  EXPECT_FALSE(quota.admit("b", kStart));
  EXPECT_FALSE(quota.admit("b", kStart));
  EXPECT_TRUE(quota.admit("b", kStart));
  EXPECT_EQ(quota.rejected(), 2);
  quota.reset();
  EXPECT_EQ(quota.rejected(), 0);
  EXPECT_FALSE(quota.admit("a", kStart));
}

TEST(ReadQuota, ALowerLimitWaitsForEnoughCallsToLeave) {
  ReadQuota quota(4);
  for (int i = 0; i < 4; ++i) ASSERT_FALSE(quota.admit("p", kStart + seconds(i)));
  quota.set_limit(2);
  // Calls of 0 s and 1 s must leave before a third may come: at 62 s.
  const auto wait = quota.admit("p", kStart + seconds(5));
  ASSERT_TRUE(wait);
  EXPECT_EQ(*wait, seconds(57));
}

TEST(ReadQuota, TheProjectOfAResourceName) {
  EXPECT_EQ(quota_project("projects/p-1"), "p-1");
  EXPECT_EQ(quota_project("projects/p-1/logs/stdout"), "p-1");
  EXPECT_EQ(quota_project("organizations/7"), "organizations/7");
}

// Over HTTP, on the server's clock.
class QuotaServer : public ServerTest {
 protected:
  QuotaServer() : ServerTest(options()) {}
  static GcpServerOptions options() {
    GcpServerOptions o;
    o.clock = clock_;
    o.logging_reads_per_minute = 2;
    return o;
  }
  static inline std::shared_ptr<falcon::testing::FakeClock> clock_ =
      std::make_shared<falcon::testing::FakeClock>();
};

TEST_F(QuotaServer, BeyondTheQuotaEntriesListIs429WithRetryInfoUntilACallLeavesTheWindow) {
  EXPECT_EQ(list({}).status, 200);
  clock_->advance(milliseconds(20'500));
  EXPECT_EQ(list({}).status, 200);
  clock_->advance(seconds(1));
  const HttpResult r = list({});
  ASSERT_EQ(r.status, 429);
  const json& err = r.body["error"];
  EXPECT_EQ(err["code"], 429);
  EXPECT_EQ(err["status"], "RESOURCE_EXHAUSTED");
  EXPECT_NE(err["message"].get<std::string>().find("Quota exceeded for quota metric 'Read "
                                                   "requests'"),
            std::string::npos);
  bool retry_info = false;
  for (const auto& d : err["details"]) {
    if (d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo") {
      EXPECT_EQ(d["reason"], "RATE_LIMIT_EXCEEDED");
      EXPECT_EQ(d["metadata"]["quota_limit_value"], "2");
    }
    if (d["@type"] == "type.googleapis.com/google.rpc.RetryInfo") {
      retry_info = true;
      EXPECT_EQ(d["retryDelay"], "39s");  // 38.5 s until the first call leaves, rounded up
    }
  }
  EXPECT_TRUE(retry_info);
  // Another project is not charged; writing is not a read.
  EXPECT_EQ(list({{"resourceNames", {"projects/other"}}}).status, 200);
  EXPECT_NE(post_json("/v2/entries:write", {{"entries", json::array()}}).status, 429);
  EXPECT_EQ(server_.logging_quota_rejections(), 1);
  EXPECT_EQ(get("/_fake/counters").body["logging_quota_rejections"], 1);
  clock_->advance(seconds(39));
  EXPECT_EQ(list({}).status, 200);
  EXPECT_EQ(server_.logging_quota_rejections(), 1);

  // The control route changes the limit while serving; 0 lifts it.
  EXPECT_EQ(to_result(client_->Post("/_fake/quota", R"({"logging_reads_per_minute":-1})",
                                    "application/json"))
                .status,
            400);
  EXPECT_EQ(to_result(client_->Post("/_fake/quota", R"({"logging_reads_per_minute":0})",
                                    "application/json"))
                .status,
            200);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(list({}).status, 200);
  EXPECT_EQ(to_result(client_->Post("/_fake/quota", R"({"logging_reads_per_minute":1})",
                                    "application/json"))
                .body["logging_reads_per_minute"],
            1);
  EXPECT_EQ(list({}).status, 429);
}

}  // namespace
}  // namespace falcon::fake::testing
